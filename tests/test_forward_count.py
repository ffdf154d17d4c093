"""How many rows the policy forwards: one pass per recorded step, and attention from the rollout's own forward.

Counted with a global forward pre-hook on the outermost module call (the policy's module; its submodules' calls
nest inside it and are not counted), rows = the first input's batch size. Measured on 0.3.0 for the first test:
11,178 rows beyond the same render without videos, 18 per recorded step (each video replayed its episode through
the policy in padded batches of 16, then ran a separate saliency pass); for the second: 1.0 row per env step (the
default still: :data:`rlviz.attention.tracker.GRADIENT_FROM_FORWARD` says why).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

import rlviz
from rlviz.evaluate import RolloutPlan
from rlviz.record import RecordOptions

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "minatar_breakout_ppo.pt2"


class RowCounter:
    """Rows forwarded by outermost module calls while installed (a global pre-hook and a global hook keep the
    nesting depth)."""

    def __init__(self):
        self.rows = 0
        self.depth = 0

    def pre(self, module, args):
        if self.depth == 0 and args and isinstance(args[0], torch.Tensor):
            self.rows += int(args[0].shape[0])
        self.depth += 1

    def post(self, module, args, output):
        self.depth -= 1

    def __enter__(self):
        self.handles = [torch.nn.modules.module.register_module_forward_pre_hook(self.pre),
                        torch.nn.modules.module.register_module_forward_hook(self.post, always_call=True)]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()


def _render(tmp_path: Path, name: str, **kw) -> tuple[int, list[dict]]:
    """(rows forwarded, the episodes.csv rows) of one render of the MinAtar sample in this process."""
    out = tmp_path / name
    with RowCounter() as counter:
        rlviz.render(checkpoint=str(SAMPLE), out=str(out), progress=False, **kw)
    with (out / "episodes.csv").open(newline="") as f:
        return counter.rows, list(csv.DictReader(f))


def test_a_recorded_step_costs_one_row(tmp_path):
    base, rows_base = _render(tmp_path, "none", episodes=2, videos="none", saliency="gradient")
    drawn, rows_drawn = _render(tmp_path, "videos", episodes=2, videos="first:2", saliency="gradient")
    assert base > 0
    assert rows_drawn == rows_base  # drawing the episodes changes none of their numbers
    steps = sum(int(r["length"]) for r in rows_drawn)
    frames = sum(1 for _ in (tmp_path / "videos" / "videos").glob("*.mp4"))
    assert frames == 2  # every episode drawn: the rows counted are every step's
    per_step = (drawn - base) / steps
    assert 0.9 <= per_step <= 1.1, f"{drawn - base} rows beyond the render without videos for {steps} steps"


def test_gradient_attention_from_the_rollouts_forward(tmp_path, monkeypatch):
    """With GRADIENT_FROM_FORWARD, attention forwards no row twice, and its numbers are the batched passes'."""
    import json

    from rlviz.attention import tracker as attention_pass

    off, rows_off = _render(tmp_path, "off", episodes=8, videos="none", heatmap=True, attention=False)
    passes, rows_passes = _render(tmp_path, "passes", episodes=8, videos="none", heatmap=True, attention="gradient")
    monkeypatch.setattr(attention_pass, "GRADIENT_FROM_FORWARD", True)
    on, rows_on = _render(tmp_path, "on", episodes=8, videos="none", heatmap=True, attention="gradient")
    assert rows_on == rows_off == rows_passes  # attention changes no episode
    steps = sum(int(r["length"]) for r in rows_on)
    att = json.loads((tmp_path / "on" / "summary.json").read_text())["attention"]
    ref = json.loads((tmp_path / "passes" / "summary.json").read_text())["attention"]
    assert att["steps"] == steps
    for name, row in att["objects"].items():  # (rounded to 4 decimals: one unit of difference at most)
        assert row["share"] == pytest.approx(ref["objects"][name]["share"], abs=1.01e-4)
        assert row["share_before_failure"] == pytest.approx(ref["objects"][name]["share_before_failure"], abs=1.01e-4)
    assert passes > off  # the batched passes: each distinct (observation, action) once (the next test)
    assert (on - off) / steps <= 0.1, f"{on - off} rows beyond the render without attention for {steps} steps"


def test_attention_attributes_each_distinct_step_once(tmp_path, monkeypatch):
    """The batched attention passes attribute a step whose (observation, action) was attributed before from the map
    kept then (a row's map depends on them alone): the same summary and heatmap, bit for bit, as attributing every
    step (the cache off), for fewer rows."""
    import json

    import numpy as np

    from rlviz.attention import tracker as attention_pass

    off, _ = _render(tmp_path, "off", episodes=12, videos="none", heatmap=True, attention=False)
    cached, _ = _render(tmp_path, "cached", episodes=12, videos="none", heatmap=True, attention="gradient")
    monkeypatch.setattr(attention_pass, "CACHE_OBS_BYTES", 0)
    every, rows = _render(tmp_path, "every", episodes=12, videos="none", heatmap=True, attention="gradient")
    steps = sum(int(r["length"]) for r in rows)
    assert (every - off) / steps >= 0.9  # without the cache each step is forwarded again
    assert cached - off < 0.7 * (every - off), (cached - off, every - off)
    a, b = (json.loads((tmp_path / n / "summary.json").read_text()) for n in ("cached", "every"))
    assert a["attention"] == b["attention"] and a["attention"]["steps"] == steps
    with np.load(tmp_path / "cached" / "heatmap.npz") as x, np.load(tmp_path / "every" / "heatmap.npz") as y:
        assert sorted(x.files) == sorted(y.files)
        for k in x.files:
            assert np.array_equal(x[k], y[k]), k


@pytest.mark.parametrize("target", ["action", "value"])
def test_one_pass_internals_equal_two_passes(tmp_path, target):
    """The one-pass internals and saliency (rlviz.explain.onepass) equal the two passes they replace: the policy's
    batched evaluate and attribute() per chunk, within float32 rounding."""
    import numpy as np

    from rlviz.explain.onepass import outputs_with_gradient_saliency
    from rlviz.explain.saliency import episode_saliency
    from rlviz.sources import load_agent

    agent = load_agent(SAMPLE, device="cpu")
    env = rlviz.make_env(agent.recipe)
    obs, _ = env.reset(seed=3)
    seen, acts = [np.asarray(obs)], []
    rng = np.random.default_rng(0)
    for _ in range(40):
        a = int(rng.integers(agent.policy.num_actions))
        obs, _, term, trunc, _ = env.step(a)
        seen.append(np.asarray(obs))
        acts.append(a)
        if term or trunc:
            break
    env.close()
    observations, actions = np.stack(seen), np.asarray(acts)
    out, maps, label = outputs_with_gradient_saliency(agent.policy, observations, actions, target)
    ref = agent.policy.evaluate(observations)
    np.testing.assert_array_equal(out.logits, ref.logits)
    np.testing.assert_array_equal(out.value, ref.value)
    ref_maps, ref_label = episode_saliency(agent.policy, observations, actions, "gradient", target)
    assert label == ref_label
    np.testing.assert_allclose(maps, ref_maps, rtol=1e-5, atol=1e-6)
    assert float(np.asarray(maps).max()) > 0


def test_a_video_from_the_stored_actions_equals_the_policys_replay(tmp_path):
    """play_actions (the env replays the rollout's actions; one batched pass for the panels and the gradient saliency)
    writes what run_episode (the policy plays the episode again, then a saliency pass) wrote in 0.3: the same
    per-step numbers and frames."""
    import numpy as np

    from rlviz.evaluate import rollout
    from rlviz.media.decode import read_video
    from rlviz.record import RecordEpisode, run_episode
    from rlviz.record.episode import play_actions
    from rlviz.sources import load_agent

    agent = load_agent(SAMPLE, device="cpu")
    record = rollout(agent.recipe, agent.policy, RolloutPlan(2, seed=5, progress=False)).episodes[1]
    assert record.actions is not None and len(record.actions) == record.length
    paths = {}
    for how in ("actions", "policy"):
        env = RecordEpisode(rlviz.make_env(agent.recipe), tmp_path / how, agent.policy, name_prefix=how,
                            options=RecordOptions(saliency="gradient", action_names=agent.action_names))
        try:
            got = play_actions(env, record) if how == "actions" else run_episode(env, seed=record.seed)
        finally:
            env.close()
        assert got.ret == record.ret and got.length == record.length
        paths[how] = got.video_path
    a, b = (np.load(p.with_suffix(".npz")) for p in (paths["actions"], paths["policy"]))
    assert sorted(a.files) == sorted(b.files)
    for key in a.files:
        np.testing.assert_array_equal(a[key], b[key])
    frames = [list(read_video(p)) for p in (paths["actions"], paths["policy"])]
    assert len(frames[0]) == len(frames[1]) == record.length + 1
    for x, y in zip(*frames):
        np.testing.assert_array_equal(x, y)
