"""Gradient saliency on flat vector observations (CartPole's 4 numbers): one number per feature and step.

The probe is a linear policy, logits = W @ obs, so d logit_a / d obs = W[a] for every observation: the saliency
of step t is |W[a_t]| exactly, whatever the state. W's entries are binary fractions and every row holds the
largest magnitude (2), so the episode's scale (the 99.5th percentile of all values) is 2 and the saved,
normalised saliency is |W[a_t]| / 2 exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rlviz.agent.policy import TorchPolicy
from rlviz.cli import main
from rlviz.draw.compose import Compositor
from rlviz.draw.panels_features import feature_names
from rlviz.episode.trace import EpisodeInternals, EpisodeTrace
from rlviz.errors import UsageError
from rlviz.explain.saliency import attribute
from rlviz.media.decode import read_video
from rlviz.sources.checkpoint import save_checkpoint

W = np.array([[0.5, -1.0, 2.0, 0.25], [-0.25, 1.5, -2.0, 0.5]], np.float32)
V = np.array([0.75, -0.5, 0.125, 1.0], np.float32)


class Linear(nn.Module):
    """logits = W @ obs, value = V @ obs (no biases)."""

    def __init__(self):
        super().__init__()
        self.pi = nn.Linear(4, 2, bias=False)
        self.v = nn.Linear(4, 1, bias=False)
        with torch.no_grad():
            self.pi.weight.copy_(torch.from_numpy(W))
            self.v.weight.copy_(torch.from_numpy(V[None]))

    def forward(self, x):
        return self.pi(x), self.v(x)[:, 0]


def _obs(n: int) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)


@pytest.mark.parametrize("method", ["gradient", "smoothgrad"])
def test_linear_policy_saliency_is_its_weight_row(method):
    policy = TorchPolicy(Linear(), device="cpu")
    obs = _obs(7)
    actions = np.array([0, 1, 1, 0, 1, 0, 0])
    sal = attribute(policy, obs, method, actions=actions)
    assert sal.shape == (7, 4) and sal.dtype == np.float32
    np.testing.assert_array_equal(sal, np.abs(W[actions]))
    np.testing.assert_array_equal(attribute(policy, obs, method, target=1), np.abs(W[[1] * 7]))
    np.testing.assert_array_equal(attribute(policy, obs, method, target="value"), np.abs(V[None].repeat(7, 0)))
    greedy = (obs @ W.T).argmax(1)  # default target: the argmax action's logit
    np.testing.assert_array_equal(attribute(policy, obs, "gradient"), np.abs(W[greedy]))


def test_perturbation_on_vectors_is_refused_in_one_line():
    policy = TorchPolicy(Linear(), device="cpu")
    with pytest.raises(UsageError, match="vector of 4 numbers") as info:
        attribute(policy, _obs(3), "perturbation")
    assert "--saliency gradient" in str(info.value) and "\n" not in str(info.value)


def test_feature_names():
    assert feature_names("CartPole-v1", 4) == ["cart x", "cart vel", "pole angle", "pole ang.vel"]
    assert feature_names("Pendulum-v1", 3) == ["cos theta", "sin theta", "ang.vel"]
    # MuJoCo's documented qpos/qvel order (0.5, #46: 0.4 named them x0, x1, ...)
    assert feature_names("Hopper-v4", 11)[:3] == ["torso z", "torso angle", "thigh angle"]
    assert feature_names("Hopper-v5", 11) == feature_names("Hopper-v4", 11)
    assert feature_names("CartPole-v1", 5) == ["x0", "x1", "x2", "x3", "x4"]  # a wrapper changed the layout


def _features_box(data, frame_hw) -> tuple:
    """The feature panel's geometry for this episode (the compositor's layout, from the saved numbers)."""
    n = len(data["actions"]) + 1
    trace = EpisodeTrace(np.zeros((n, *frame_hw, 3), np.uint8), np.zeros((n, 4), np.float32), data["actions"],
                         data["rewards"], None, bool(data["terminated"]), bool(data["truncated"]),
                         tuple(data["action_names"]), 0, 0, float(data["fps"]), "CartPole-v1")
    internals = EpisodeInternals(data["logits"], data["probs"], data.get("value"), str(data["kind"]),
                                 entropy=data["entropy"], returns_to_go=data["returns_to_go"],
                                 gamma=float(data["gamma"]), saliency=data["saliency"], saliency_label="gradient")
    return Compositor(trace, internals).features


def test_cli_render_of_cartpole_saves_and_draws_per_feature_saliency(tmp_path):
    ckpt = save_checkpoint(tmp_path / "linear.pt2", Linear(), env="CartPole-v1")
    out = tmp_path / "out"
    assert main(["render", str(ckpt), "--episodes", "2", "--heatmap", "--videos", "first:1", "--saliency",
                 "gradient", "--out", str(out), "--no-progress"]) == 0
    (video,) = (out / "videos").glob("*.mp4")
    data = dict(np.load(video.with_suffix(".npz")))
    actions = data["actions"]
    n = len(actions) + 1
    assert n > 5 and len(set(actions.tolist())) == 2
    sal = data["saliency"]
    assert sal.shape == (n, 4) and sal.dtype == np.float32
    np.testing.assert_array_equal(sal[:-1], np.abs(W[actions]) / 2)
    assert sal[-1].tolist() in (list(np.abs(W[0]) / 2), list(np.abs(W[1]) / 2))

    frames = list(read_video(video))
    assert len(frames) >= n
    panel = _features_box(data, (400, 600))
    assert panel is not None and panel.d == 4 and panel.labels == ["cart x", "cart vel", "pole angle", "pole ang.vel"]
    track = np.array([48, 52, 64], np.float32)

    def bar_lengths(frame) -> list[int]:
        out = []
        for i in range(4):
            y = panel.y + i * panel.row_h + (panel.row_h - 4) // 2
            row = frame[y, panel.bar_x0 : panel.bar_x0 + panel.bar_len].astype(np.float32)
            out.append(int((np.abs(row - track).sum(1) > 60).sum()))
        return out

    for t in range(n):
        want = np.round(sal[t] * panel.bar_len)
        assert np.all(np.abs(np.array(bar_lengths(frames[t])) - want) <= 3), (t, bar_lengths(frames[t]), want)
    changed = [t for t in range(1, n - 1) if actions[t] != actions[t - 1]]
    assert changed  # the bars move when the explained action changes
    region = (slice(panel.y, panel.y + 4 * panel.row_h), slice(panel.bar_x0, panel.bar_x0 + panel.bar_len))
    t = changed[0]
    assert np.abs(frames[t][region].astype(int) - frames[t - 1][region].astype(int)).mean() > 5


def test_cli_smoothgrad_on_cartpole_and_explicit_attention_is_still_refused(tmp_path, capsys):
    """SmoothGrad of a linear policy is its weight row too (every noisy copy has the same gradient); the default
    attention stays off for vectors, an explicit --attention still refuses in one line."""
    ckpt = save_checkpoint(tmp_path / "linear.pt2", Linear(), env="CartPole-v1")
    out = tmp_path / "out"
    assert main(["render", str(ckpt), "--episodes", "1", "--videos", "first:1", "--saliency", "smoothgrad",
                 "--out", str(out), "--no-progress"]) == 0
    (video,) = (out / "videos").glob("*.mp4")
    data = np.load(video.with_suffix(".npz"))
    np.testing.assert_array_equal(data["saliency"][:-1], np.abs(W[data["actions"]]) / 2)
    capsys.readouterr()
    assert main(["render", str(ckpt), "--episodes", "1", "--heatmap", "--attention", "gradient", "--out",
                 str(tmp_path / "att"), "--no-progress"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rlviz:")]
    assert len(err) == 1 and err[0].startswith("rlviz: error: attention needs image observations")


def test_compare_of_cartpole_agents_with_gradient_saliency(tmp_path):
    """compare takes the same flags: the default attention stays off for vectors, each side's .npz has the bars."""
    ckpt = save_checkpoint(tmp_path / "linear.pt2", Linear(), env="CartPole-v1")
    out = tmp_path / "out"
    assert main(["compare", str(ckpt), str(ckpt), "--episodes", "2", "--heatmap", "--videos", "first:1",
                 "--saliency", "gradient", "--out", str(out), "--no-progress"]) == 0
    for side in "ab":
        (npz,) = (out / "videos" / side).glob("*.npz")
        data = np.load(npz)
        np.testing.assert_array_equal(data["saliency"][:-1], np.abs(W[data["actions"]]) / 2)
