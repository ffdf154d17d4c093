"""Attention per object (issue #28): probe agents whose reading is known put their attribution where they read, a
planted agent that stops reading the ball before it fails raises the diagnostic, a healthy one does not, an
episode's shares do not depend on how many envs share the batch, and render writes it all."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rlviz.agent.policy import TorchPolicy
from rlviz.analysis.attention import ATTENTION_DROP_ID, attention_findings, attention_map, summarize_attention
from rlviz.attention.maps import object_fractions, pooling, step_shares
from rlviz.config import RenderConfig
from rlviz.evaluate import RolloutPlan, RolloutProbes
from rlviz.evaluate.failures.objects import FunctionExtractor
from rlviz.evaluate.rollouts.rollout import rollout
from rlviz.sources import load_agent

ENV = "MinAtar/Breakout-v1"  # observation [10, 10, 4] bool: paddle 0, ball 1, trail 2, brick 3; actions n, l, r
SAMPLE = "samples/minatar_breakout_ppo.pt2"


class Reader(torch.nn.Module):
    """Logits from one MinAtar channel only (fixed random weights): the agent reads that object and nothing else."""

    def __init__(self, channel: int):
        super().__init__()
        self.channel = channel
        self.w = torch.nn.Parameter(torch.randn(100, 3, generator=torch.Generator().manual_seed(0)))

    def forward(self, x):
        return x[..., self.channel].flatten(1) @ self.w


class Tracker(torch.nn.Module):
    """Moves the paddle under the ball (logits 4 (ball column - paddle column) x (0, -1, +1)): reads both. Planted:
    while the ball falls (row >= 2, below its trail) two or more columns away from the paddle (the states its
    failures come from) it reads the paddle only, heading for the middle: it stops looking at the ball then."""

    def __init__(self, planted: bool):
        super().__init__()
        self.planted = planted
        self.register_buffer("dirs", torch.tensor([0.0, -1.0, 1.0]))
        self.register_buffer("cols", torch.arange(1.0, 11.0).repeat(10))
        self.register_buffer("rows", torch.arange(10.0).repeat_interleave(10))

    def forward(self, x):
        ball, paddle, trail = (x[..., c].flatten(1) for c in (1, 0, 2))
        bc, pc = (ball * self.cols).sum(1), (paddle * self.cols).sum(1)
        gate = torch.zeros_like(bc)
        if self.planted:
            with torch.no_grad():
                falling = (ball * self.rows).sum(1) > (trail * self.rows).sum(1)
                gate = (falling & ((ball * self.rows).sum(1) >= 2) & ((bc - pc).abs() >= 2)).float()
        d = (1 - gate) * bc + gate * 5.5 - pc
        return 4.0 * d[:, None] * self.dirs


def _policy(module) -> TorchPolicy:
    return TorchPolicy(module, num_actions=3, device="cpu")


def _objects(result, method="gradient") -> dict:
    return summarize_attention(result.episodes, method)["objects"]


@pytest.mark.parametrize("channel, reads, ignores", [(1, "ball", "paddle"), (0, "paddle", "ball")])
def test_a_probe_that_reads_one_object_puts_its_attribution_there(channel, reads, ignores):
    r = rollout(ENV, _policy(Reader(channel)), RolloutPlan(12, seed=0), RolloutProbes(attention="gradient"))
    objects = _objects(r)
    assert objects[reads]["share"] >= 0.8 and objects[reads]["share_before_failure"] >= 0.8
    assert objects[ignores]["share"] <= 0.05
    assert objects[reads]["share"] == 1.0 and objects[ignores]["share"] == 0.0  # |grad x input| is exact here
    assert objects["ball"]["area"] == 0.01 and 0.01 <= objects["paddle"]["area"] <= 0.02  # 1 of 100 cells (+ trail)
    assert objects["ball"]["visible_before_failure"] == 1.0  # MinAtar's ball is on the grid until it is lost
    assert objects[reads]["share_before_failure_visible"] == objects[reads]["share_before_failure"]
    for e in r.episodes:
        a = e.attention
        assert a["steps"] == e.length and a["failures"] == e.failures  # every step has a share
        np.testing.assert_allclose(a["total"].sum(), a["steps"], rtol=1e-9)  # shares sum to 1 per step
        assert a["before_steps"] == min(8, e.length) * e.failures  # one termination: the 8 steps before it
    assert attention_findings(summarize_attention(r.episodes, "gradient")) == []


def test_perturbation_probe_lands_on_the_ball():
    r = rollout(ENV, _policy(Reader(1)), RolloutPlan(4, seed=0), RolloutProbes(attention="perturbation"))
    objects = _objects(r, "perturbation")
    assert objects["ball"]["share"] >= 0.8 and objects["paddle"]["share"] <= 0.05


def test_a_planted_agent_that_stops_reading_the_ball_before_failing_is_flagged_and_a_healthy_one_is_not():
    healthy = rollout(ENV, _policy(Tracker(False)), RolloutPlan(40, seed=0, greedy=True),
                      RolloutProbes(attention="gradient"))
    planted = rollout(ENV, _policy(Tracker(True)), RolloutPlan(40, seed=0, greedy=True),
                      RolloutProbes(attention="gradient"))
    assert attention_findings(summarize_attention(healthy.episodes, "gradient")) == []
    summary = summarize_attention(planted.episodes, "gradient")
    found = attention_findings(summary)
    assert [f.id for f in found] == [ATTENTION_DROP_ID] and found[0].evidence["object"] == "ball"
    ball = summary["objects"]["ball"]
    assert ball["share_before_failure"] < 0.5 * ball["share_elsewhere"] and ball["ci95_ratio"][1] < 1.0


def test_an_episodes_shares_do_not_depend_on_how_many_envs_share_the_batch():
    agent = load_agent(SAMPLE)
    runs = [rollout(agent.recipe, agent.policy, RolloutPlan(6, seed=3, num_envs=n),
                    RolloutProbes(attention="gradient")) for n in (1, 4, 6)]
    for eps in zip(*(r.episodes for r in runs)):
        for e in eps[1:]:
            assert e.ret == eps[0].ret and e.length == eps[0].length
            np.testing.assert_array_equal(e.attention["total"], eps[0].attention["total"])
            np.testing.assert_array_equal(e.attention["before"], eps[0].attention["before"])
    m = attention_map(runs[0].episodes)
    assert m.shape == (10, 10) and m.min() >= 0 and np.isclose(m.sum(), 1.0)  # each step's map normalised to 1


def test_an_extractor_that_needs_frames_gets_them_rendered_and_agrees_with_the_exact_one():
    def from_state(frame, env):
        assert frame.shape == (10, 10, 3)  # rendered for it on every step
        s = env.unwrapped.game.state()
        return {"ball": s[..., 1], "paddle": s[..., 0]}

    pixel = FunctionExtractor(from_state, ("ball", "paddle"))
    assert pixel.needs_frame
    a = rollout(ENV, _policy(Reader(1)), RolloutPlan(3, seed=1), RolloutProbes(attention="gradient"))
    b = rollout(ENV, _policy(Reader(1)), RolloutPlan(3, seed=1, objects=pixel), RolloutProbes(attention="gradient"))
    for ea, eb in zip(a.episodes, b.episodes):
        np.testing.assert_array_equal(ea.attention["total"], eb.attention["total"])


def test_area_pooling_maps_frame_masks_to_observation_pixels():
    pool = pooling((210, 160), (84, 84))
    mask = np.zeros((210, 160), bool)
    mask[100:110, 40:44] = True  # 40 frame pixels
    down = pool.down(mask)
    assert np.isclose(down.sum(), 40 * 84 * 84 / (210 * 160)) and down.max() <= 1.0
    fr = object_fractions([{"a": mask, "b": mask}], ("a", "b"), pool)
    assert fr.shape == (1, 2, 84, 84) and fr[0, 1].sum() == 0.0  # exclusive: "b" adds nothing where "a" is
    maps = np.ones((1, 84, 84), np.float32)
    shares = step_shares(maps, fr)
    np.testing.assert_allclose(shares.sum(1), 1.0)
    np.testing.assert_allclose(shares[0, 0], down.sum() / 84**2, rtol=1e-5)
    assert np.isnan(step_shares(np.zeros((1, 84, 84), np.float32), fr)).all()  # no attribution: no share
    up = pool.up(np.ones((84, 84)))
    np.testing.assert_allclose(up, 1.0)


def test_render_writes_attention_with_saliency_and_heatmap(tmp_path):
    from rlviz.jobs.render import ATTENTION_PNG, render

    out = render(RenderConfig(checkpoint=SAMPLE, episodes=4, saliency="gradient", heatmap=True, videos="first:1",
                              out=tmp_path / "run"))
    summary = json.loads(out.summary_json.read_text())
    att = summary["attention"]
    assert att["method"] == "gradient" and att["attribution"] == "|gradient x input|"
    assert set(att["objects"]) == {"ball", "paddle"} and att["failures"] == 4
    total = sum(r["share"] for r in att["objects"].values()) + att["other"]["share"]
    assert abs(total - 1.0) < 1e-3 and len(att["objects"]["ball"]["ci95"]) == 2
    assert (tmp_path / "run" / ATTENTION_PNG).stat().st_size > 1000
    assert "attention (|gradient x input|)" in out.table
    with np.load(out.videos[0].with_suffix(".npz")) as z:  # the videos' share track, one number per step
        track = z["extra_attention ball"], z["extra_attention paddle"]
        assert len(track[0]) == len(z["actions"]) + 1  # T + 1 frames
        assert ((track[0] >= 0) & (track[0] + track[1] <= 1 + 1e-6)).all() and track[1].max() > 0
    page = out.report_html.read_text()
    assert "<h3>Attention (|gradient x input|)</h3>" in page and f"src='{ATTENTION_PNG}'" in page
    plain = render(RenderConfig(checkpoint=SAMPLE, episodes=2, saliency="gradient", videos="none",
                                out=tmp_path / "plain"))
    assert plain.summary["attention"] is None and not (tmp_path / "plain" / ATTENTION_PNG).exists()


def test_the_attention_option():
    from rlviz.analysis.attention import attention_spec
    from rlviz.cli import build_parser
    from rlviz.errors import UsageError

    def spec(**kw):
        s = attention_spec(RenderConfig(checkpoint=SAMPLE, **kw))
        return None if s is None else s.method

    assert spec() is None and spec(saliency="gradient") is None and spec(heatmap=True) is None
    assert spec(saliency="smoothgrad", heatmap=True) == "smoothgrad"  # the issue's --saliency METHOD --heatmap
    assert spec(attention=True) == "gradient" and RenderConfig(checkpoint=SAMPLE, attention=True).heatmap
    assert spec(saliency="perturbation", heatmap=True, attention="gradient") == "gradient"
    assert spec(saliency="gradient", heatmap=True, attention="off") is None
    with pytest.raises(UsageError, match="Did you mean 'gradient'"):
        RenderConfig(checkpoint=SAMPLE, attention="grad")
    parse = build_parser().parse_args
    assert parse(["render", SAMPLE, "--attention"]).attention is True
    assert parse(["render", SAMPLE, "--attention", "perturbation"]).attention == "perturbation"
    assert parse(["render", SAMPLE]).attention is None


def test_compare_gives_both_agents_shares_and_the_paired_difference(tmp_path):
    from rlviz import CompareConfig, compare

    out = compare(CompareConfig(a=SAMPLE, b="samples/minatar_breakout_ppo_noent.pt2", episodes=6, saliency="gradient",
                                heatmap=True, videos="none", out=tmp_path / "cmp"))
    c = out.comparison
    a, b = (c[s]["attention"]["objects"]["ball"]["share"] for s in "ab")
    diff = c["attention_diff"]["ball"]
    assert abs(diff["share_diff"] - (b - a)) < 2e-4 and diff["ci95_share_diff"][0] <= diff["share_diff"]
    assert set(c["attention_diff"]) == {"ball", "paddle", "other"}
    assert "attention ball pre-fail" in out.table


@pytest.mark.parametrize("before_share, fires", [(0.3, False), (0.1, True)])
def test_the_drop_is_judged_while_the_object_is_visible(before_share, fires):
    from types import SimpleNamespace

    from rlviz.attention.tracker import EpisodeAttention

    eps = []
    for _ in range(30):
        ep = EpisodeAttention(("ball",), (2, 2), window=4)
        ep.failure(19)  # the last step's action loses the ball; its window is steps 16-19
        for t in range(20):
            visible = t < 17  # it leaves the screen 3 steps before the loss (as an Atari ball does)
            s = (before_share if t >= 16 else 0.3) if visible else 0.0
            ep.add(t, np.array([s, 1.0 - s]), np.ones((2, 2), np.float32), np.array([0.01 if visible else 0.0]))
        eps.append(SimpleNamespace(attention=ep.result()))
    summary = summarize_attention(eps, "gradient")
    ball = summary["objects"]["ball"]
    assert ball["share_elsewhere"] == 0.3 and ball["visible_before_failure"] == 0.25
    assert ball["share_before_failure"] == round(before_share / 4, 4)  # 3 of the 4 steps have no ball to look at
    assert ball["share_before_failure_visible"] == before_share
    assert ball["ratio_before_to_elsewhere"] == round(before_share / 0.3, 4)
    assert [f.id for f in attention_findings(summary)] == ([ATTENTION_DROP_ID] if fires else [])


def test_worker_processes_give_the_same_attention(tmp_path):
    from rlviz.jobs.render import render

    runs = [render(RenderConfig(checkpoint=SAMPLE, episodes=6, attention=True, videos="none", num_envs=n, workers=w,
                                out=tmp_path / f"w{w}")) for w, n in ((1, 16), (2, 2))]
    assert runs[0].summary["attention"] == runs[1].summary["attention"]


@pytest.mark.parametrize("frame_shape", [None, (20, 30)])
def test_batched_masks_and_fractions_equal_the_per_step_ones(frame_shape):
    """The attention pass's batch of captures: Extractor.masks_many (MinAtar's vectorised, and the base class's
    stacking) and stacked_fractions give exactly the per-step masks and object_fractions."""
    from rlviz.attention.maps import object_fractions, pooling, stacked_fractions
    from rlviz.envs import make_env
    from rlviz.evaluate.failures.extractor import Extractor
    from rlviz.evaluate.failures.objects import MinAtarExtractor

    env = make_env("MinAtar/Breakout-v1")
    x = MinAtarExtractor(("ball", "paddle", "trail"), frame_shape)
    env.reset(seed=5)
    caps = []
    for t in range(40):
        caps.append(x.capture(None, env))
        _, _, term, trunc, _ = env.step(t % 3)
        if term or trunc:
            env.reset(seed=t)
    env.close()
    per = [x.masks(c) for c in caps]
    for many in (x.masks_many(caps), Extractor.masks_many(x, caps)):
        assert set(many) == {"ball", "paddle", "trail"}
        for name, stacked in many.items():
            assert stacked.dtype == bool and np.array_equal(stacked, np.stack([m[name] for m in per]))
    pool = pooling(per[0]["ball"].shape, (10, 10))
    names = ("ball", "paddle", "trail")
    ref = object_fractions(per, names, pool)
    assert ref.any()
    assert np.array_equal(stacked_fractions(x.masks_many(caps), len(caps), names, pool), ref)
