"""A timeline folder written from inside a jit-compiled JAX training loop (rlviz.integrations.jax_loop.JaxTimeline
through rlviz.jax.every), the JAX kind of a timeline checkpoint (rlviz.training.jax_checkpoints), and the timeline
finding ``entropy_collapsing`` (rlviz.training.findings)."""

from __future__ import annotations

import json

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("gymnax")
import jax.numpy as jnp  # noqa: E402

import rlviz  # noqa: E402
from rlviz import TimelineConfig  # noqa: E402
from rlviz.errors import UsageError  # noqa: E402
from rlviz.evaluate.statistics.distance import tv_kl_categorical  # noqa: E402
from rlviz.integrations.jax_loop import JaxTimeline  # noqa: E402
from rlviz.jax import FlaxPolicy, FlaxPolicyOptions, every  # noqa: E402
from rlviz.media import probe_video  # noqa: E402
from rlviz.training.findings import COLLAPSING_ENTROPY, timeline_findings  # noqa: E402
from tests._flax_seed import SeedActor, SeedCritic, seed_params  # noqa: E402

ENV = "gymnax:Breakout-MinAtar"


def _policy(seed: int = 0) -> FlaxPolicy:
    p = seed_params(seed)
    return FlaxPolicy(SeedActor(3), p["actor"], critic=SeedCritic(), critic_params=p["critic"],
                       options=FlaxPolicyOptions(obs_shape=(10, 10, 4)))


def _loop(callback, updates: int = 4):
    """A jit-compiled loop in PureJaxRL's shape: a lax.scan over updates, each nudging the params (a stand-in for
    an optimiser step) and calling ``callback(update, actor, critic)`` after it."""
    p = seed_params(0)

    def update(carry, _):
        actor, critic, step = carry
        actor = jax.tree_util.tree_map(lambda a: a * 1.5 + 0.01, actor)
        step = step + 1
        if callback is not None:
            callback(step, actor, critic)
        return (actor, critic, step), jnp.sum(jax.tree_util.tree_leaves(actor)[0])

    return jax.jit(lambda: jax.lax.scan(update, (p["actor"], p["critic"], jnp.asarray(0, jnp.int32)), None,
                                        length=updates))()


def test_in_loop_timeline_rows_at_the_training_steps(tmp_path):
    out = tmp_path / "run"
    timeline = JaxTimeline(out, _policy(), ENV, steps_per_update=1000, episodes=16, videos="worst:1",
                           config=TimelineConfig(run=str(out), heatmap=True, seed=3))
    seen: list[tuple[int, object]] = []

    def host(update, actor, critic):
        seen.append((update, actor))
        timeline(update, actor, critic)

    with_cb = _loop(lambda u, a, c: every(2, u, host, a, c))
    without = _loop(None)
    # rlviz only reads: the loop's results are bit-identical with the callback on
    for x, y in zip(jax.tree_util.tree_leaves(with_cb), jax.tree_util.tree_leaves(without)):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    assert [u for u, _ in seen] == [2, 4]
    data = json.loads((out / "timeline.json").read_text())
    assert [r["step"] for r in data["checkpoints"]] == [2000, 4000]
    assert data["env_id"] == ENV and data["episodes"] == 16 and data["seed"] == 3
    assert all(r["episodes"] == 16 for r in data["checkpoints"])
    # the policy change of the second checkpoint: TV of the two params' action distributions on the later one's states
    states = timeline.writer.checkpoints[1]
    from rlviz.training.jax_checkpoints import jax_action_probs, jax_visited_states

    obs = jax_visited_states(states.agent, timeline.config, 512)
    first = timeline.agent(seen[0][1], seed_params(0)["critic"])
    tv, kl = tv_kl_categorical(jax_action_probs(states.agent, obs), jax_action_probs(first, obs), None)
    change = data["checkpoints"][1]["policy_change"]
    assert change["vs_step"] == 2000 and change["states"] == len(obs) == sum(e.length for e in states.result.episodes)
    assert change["tv_mean"] == pytest.approx(float(tv.mean()), rel=1e-9)
    assert change["kl_mean"] == pytest.approx(float(kl.mean()), rel=1e-9)
    # each evaluation's worst episode as a video, named by its step, decodable, with its per-step numbers
    for step, row in zip((2000, 4000), data["checkpoints"]):
        (video,) = timeline.videos(step)
        info = probe_video(video, count=True)
        npz = np.load(video.with_suffix(".npz"))
        assert info.codec == "h264" and info.num_frames >= int(npz["rewards"].shape[0]) + 1  # (short ones held)
        assert npz["value"].shape == (npz["rewards"].shape[0] + 1,) and npz["kind"] == "actor_critic"
        assert float(npz["rewards"].sum()) == row["return"]["min"]
    assert (out / "timeline.png").is_file() and (out / "report.html").is_file()
    assert sorted(p.name for p in (out / "heatmaps").iterdir()) == ["step_2000.png", "step_4000.png"]
    marker = json.loads((out / "rlviz-run.json").read_text())
    assert "videos/" + timeline.videos(4000)[0].name in marker["files"]
    assert [r["checkpoint"] for r in data["checkpoints"]] == ["step_2000.msgpack", "step_4000.msgpack"]
    assert {"step_2000.msgpack", "step_4000.msgpack"} <= set(marker["files"])


def test_in_loop_rows_equal_the_rollout_of_those_params(tmp_path):
    """A row is the rollout of the params on the run's seeds; the params saved in the folder, whose marker says how
    to load them, make it a training run that `rlviz timeline` plays again (the same row: render's numbers for that
    file) and whose episodes the explorer replays, each as the evaluation played it."""
    out = tmp_path / "run"
    policy = _policy(1)
    timeline = JaxTimeline(out, policy, ENV, steps_per_update=8, episodes=24, videos="none",
                           config=TimelineConfig(run=str(out), seed=5))
    row = timeline(3, policy.params["actor"]["params"], policy.params["critic"]["params"])
    result = timeline.writer.checkpoints[0].result
    assert row["step"] == 24 and len(result.returns) == 24 and row["return"]["mean"] == float(np.mean(result.returns))
    assert not (out / "videos").exists()
    opts = json.loads((out / "rlviz-run.json").read_text())["options"]
    assert (opts["env"], opts["model"], opts["critic"]) == (ENV, "tests._flax_seed:SeedActor",
                                                           "tests._flax_seed:SeedCritic")
    assert json.loads(opts["model_kwargs"]) == {"action_dim": 3, "hidden": 64}
    again = rlviz.timeline(run=str(out), out=tmp_path / "again", episodes=24, seed=5, videos="none",
                           **{k: opts[k] for k in ("env", "model", "model_kwargs", "critic", "critic_kwargs")})
    (a,) = again.data["checkpoints"]
    assert (a["step"], a["checkpoint"], a["return"]) == (24, "step_24.msgpack", row["return"])
    from rlviz.config import ExploreConfig
    from rlviz.explore.server import open_run
    from rlviz.media import probe_video

    index, cache = open_run(ExploreConfig(out=out, port=0, browser=False, trust_checkpoint=True))
    assert index.job == "timeline" and index.steps == (24,) and cache.renderer.variants == ("step24",)
    n = int(np.argmax(result.returns))
    video = cache.render(n)  # what the page's "open" runs
    npz = np.load(video.with_suffix(".npz"))
    assert float(npz["rewards"].sum()) == float(result.returns[n])
    assert npz["rewards"].shape[0] == result.episodes[n].length
    assert probe_video(video, count=True).num_frames >= result.episodes[n].length + 1


def test_jax_timeline_refuses_what_it_cannot_use(tmp_path):
    with pytest.raises(UsageError, match="JAX env id"):
        JaxTimeline(tmp_path / "a", _policy(), "CartPole-v1")
    with pytest.raises(UsageError, match="steps_per_update"):
        JaxTimeline(tmp_path / "b", _policy(), ENV, steps_per_update=0)
    with pytest.raises(UsageError, match="FlaxPolicy"):
        JaxTimeline(tmp_path / "c", object(), ENV)
    timeline = JaxTimeline(tmp_path / "d", _policy(), ENV, episodes=8, videos="none")
    with pytest.raises(UsageError, match="critic"):
        timeline(1, seed_params(0)["actor"])


def _row(step: int, ent: float | None, diagnostics=()) -> object:
    """A stand-in evaluated checkpoint: what timeline_findings reads (its summary and returns)."""
    from types import SimpleNamespace

    summary = {"episodes": 4, "returns": {"mean": 1.0}, "mean_relative_entropy": ent,
               "diagnostics": [dict(d) for d in diagnostics]}
    return SimpleNamespace(step=step, name=f"step_{step}", summary=summary, policy_change=None,
                           result=SimpleNamespace(returns=np.ones(4)))


def test_entropy_collapsing_first_seen_where_the_entropy_fell():
    cps = [_row(1, 0.30), _row(2, 0.16), _row(3, 0.099), _row(4, 0.05), _row(5, 0.2)]
    data = timeline_findings(cps)
    steps = [r["step"] for r in data["checkpoints"] if any(f["id"] == "entropy_collapsing" for f in r["diagnostics"])]
    assert steps == [3, 4] and data["first_seen"]["entropy_collapsing"] == 3
    ev = data["checkpoints"][2]["diagnostics"][0]["evidence"]
    assert ev == {"mean_relative_entropy": 0.099, "highest_before": 0.3, "highest_step": 1,
                  "threshold": COLLAPSING_ENTROPY}
    # a policy low from its first checkpoint (no fall), one not halved, and a policy_collapsed row: not raised
    assert "entropy_collapsing" not in timeline_findings([_row(1, 0.05), _row(2, 0.04)])["first_seen"]
    assert "entropy_collapsing" not in timeline_findings([_row(1, 0.15), _row(2, 0.09)])["first_seen"]
    collapsed = {"id": "policy_collapsed", "severity": "warning", "message": "", "evidence": {}}
    found = timeline_findings([_row(1, 0.5), _row(2, 0.001, [collapsed])])["first_seen"]
    assert found == {"policy_collapsed": 2}
