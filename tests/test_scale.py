"""Scale-out: batch-invariant forwards, results independent of --num-envs / --workers / --ray, worker faults."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from _envs import probe_objects

from rlviz.agent import load_agent
from rlviz.agent.policy import TorchPolicy
from rlviz.cli import main
from rlviz.envs import make_env
from rlviz.errors import UsageError, WorkerError
from rlviz.evaluate.objects import FunctionExtractor
from rlviz.evaluate.rollout import _Uniforms, replay_episode, rollout
from rlviz.evaluate.threads import torch_threads
from rlviz.evaluate.workers import KILL_HOOK, WorkerPool, merge_rollouts, shard_ranges
from rlviz.media import probe_video

ROOT = Path(__file__).resolve().parents[1]
MINATAR = ROOT / "samples" / "minatar_breakout_ppo.pt2"
PROBE = "_envs:rlviz-probe/Probe-v0"  # "module:id": spawned workers import the probe's module too


class Linear(torch.nn.Module):
    def forward(self, x):
        w = torch.tensor([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.5]])
        return x @ w, x.sum(-1)


@pytest.fixture(scope="module")
def minatar():
    return load_agent(MINATAR)


def _obs_batch(agent, n, seed=0):
    env = make_env(agent.recipe)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    return (rng.random((n,) + obs.shape) < 0.2).astype(np.float32)


def test_a_row_gets_the_same_bits_alone_or_among_any_neighbours(minatar):
    """The policy forward is batch-invariant: padded fixed-row forwards, whatever B, position or neighbours."""
    x = _obs_batch(minatar, 40)
    with torch_threads(1):
        alone = [minatar.policy.logits_and_value(x[i : i + 1]) for i in range(40)]
        for b in (3, 16, 17, 40):
            lg, v = minatar.policy.logits_and_value(x[:b])
            for i in range(b):
                assert np.array_equal(lg[i], alone[i][0][0]) and v[i] == alone[i][1][0]
        shuffled = np.random.default_rng(1).permutation(40)
        lg, _ = minatar.policy.logits_and_value(x[shuffled])
        assert all(np.array_equal(lg[j], alone[i][0][0]) for j, i in enumerate(shuffled))
    # the padding is what does it: a plain batch-1 forward differs from the same row in a batch of 16
    with torch.no_grad(), torch_threads(1):
        one = minatar.policy.forward(torch.as_tensor(x[:1]))[0]
        many = minatar.policy.forward(torch.as_tensor(x[:16]))[0]
    assert not torch.equal(one[0], many[0])


def test_uniform_blocks_are_the_draws_of_a_lone_replay():
    rngs = [np.random.default_rng(s) for s in (5, 6)]
    u = _Uniforms(2, 3)
    for i, s in enumerate((5, 6)):
        u.begin(i, np.random.default_rng(s))
    rows = np.array([0, 1])
    for _ in range(150):  # crosses block refills
        got = u.take(rows)
        assert np.array_equal(got, np.array([r.random(3) for r in rngs]))


def test_an_episode_replays_exactly_on_a_reused_minatar_env(minatar):
    """2 envs play 4 episodes, so two start on an env that played before (MinAtar's sticky action used to
    leak across resets); each one alone on a fresh env gives the same numbers, bit for bit."""
    res = rollout(minatar.recipe, minatar.policy, 4, num_envs=2, seed=3, progress=False, threads=1)
    for rec in res.episodes:
        again = replay_episode(minatar.recipe, minatar.policy, rec)
        assert (again.ret, again.length, again.mean_entropy, again.value_sums) == (
            rec.ret, rec.length, rec.mean_entropy, rec.value_sums)


def test_shards_merge_into_the_single_run():
    policy = TorchPolicy(Linear(), num_actions=2, device="cpu")
    kw = dict(seed=11, objects=FunctionExtractor(probe_objects), heatmap=True, progress=False)
    whole = rollout(PROBE, policy, 30, num_envs=4, **kw)
    shards = shard_ranges(30, 3, num_envs=4)
    assert [r.start for r in shards] == sorted(r.start for r in shards) and sum(map(len, shards)) == 30
    parts = [rollout(PROBE, policy, len(r), num_envs=n, first_episode=r.start, **kw)
             for r, n in zip(shards, (1, 3, 16))]
    merged = merge_rollouts(parts[::-1], wall_s=1.0)
    assert merged.episodes == whole.episodes and merged.steps == whole.steps
    assert np.array_equal(merged.heatmap.counts["obj"], whole.heatmap.counts["obj"])
    assert (merged.heatmap.failures, merged.heatmap.episodes) == (whole.heatmap.failures, 30)
    with pytest.raises(UsageError, match="overlap or leave gaps"):
        merge_rollouts([parts[0], parts[2]], wall_s=1.0)


def test_torch_threads_is_restored():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(UsageError, match="threads=0"):
        with torch_threads(0):
            pass


# -- the CLI: identical outputs whatever the scale-out ---------------------------------------------------
def _render(out: Path, *extra: str, checkpoint=MINATAR, episodes=32) -> int:
    return main(["render", str(checkpoint), "--episodes", str(episodes), "--heatmap", "--no-progress",
                 "--out", str(out), *extra])


def _outputs(out: Path) -> tuple:
    rows = list(csv.DictReader(open(out / "episodes.csv")))
    summary = json.loads((out / "summary.json").read_text())
    summary.pop("wall_s")
    with np.load(out / "heatmap.npz") as z:
        counts = {k: z[k].copy() for k in z.files if k != "background"}
    return rows, summary, counts


def _same(a: tuple, b: tuple) -> None:
    assert a[0] == b[0] and a[1] == b[1]
    assert a[2].keys() == b[2].keys() and all(np.array_equal(a[2][k], b[2][k]) for k in a[2])


def _children() -> list[int]:
    """Live child processes of this test process (from /proc)."""
    me, kids = os.getpid(), []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes() if int(fields[1]) == me else b""
            if int(fields[1]) == me and fields[0] != "Z" and b"resource_tracker" not in cmd:
                kids.append(int(d))  # (multiprocessing's resource tracker lives as long as this process)
    return kids


@pytest.fixture(scope="module")
def minatar_baseline(tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "out"
    assert _render(out, "--num-envs", "16", "--videos", "worst:1") == 0
    return out


@pytest.mark.slow
def test_num_envs_and_workers_give_identical_outputs(minatar_baseline, tmp_path):
    base = _outputs(minatar_baseline)
    assert len(base[0]) == 32 and base[2]["failures"] == 32  # MinAtar Breakout: one failure per episode
    assert _render(tmp_path / "e4", "--num-envs", "4", "--videos", "none") == 0
    _same(base, _outputs(tmp_path / "e4"))
    before = set(_children())
    assert _render(tmp_path / "w2", "--workers", "2", "--videos", "worst:1") == 0
    _same(base, _outputs(tmp_path / "w2"))
    assert set(_children()) <= before  # every worker joined
    # the video was replayed in a worker and came back as bytes: same episode, same frames
    (v1,) = (minatar_baseline / "videos").glob("*.mp4")
    (v2,) = (tmp_path / "w2" / "videos").glob("*.mp4")
    assert v1.name == v2.name and probe_video(v1).num_frames == probe_video(v2).num_frames > 1
    assert not [p for p in (tmp_path / "w2").rglob("*") if "partial" in p.name]


@pytest.mark.slow
def test_a_killed_worker_is_replaced_and_its_shard_rerun(tmp_path, monkeypatch):
    args = ("--env", PROBE, "--objects", "_envs:probe_objects", "--videos", "none")
    assert _render(tmp_path / "one", *args, checkpoint=_probe_ckpt(tmp_path), episodes=40) == 0
    marker = tmp_path / "killed-once"
    monkeypatch.setenv(KILL_HOOK, f"{shard_ranges(40, 2, 16)[1].start}:{marker}")
    before = set(_children())
    assert _render(tmp_path / "w2", *args, "--workers", "2", checkpoint=_probe_ckpt(tmp_path), episodes=40) == 0
    assert marker.exists()  # the hook fired: a worker was SIGKILLed mid-shard
    _same(_outputs(tmp_path / "one"), _outputs(tmp_path / "w2"))
    assert set(_children()) <= before


@pytest.mark.slow
def test_a_worker_that_dies_twice_fails_in_one_line_with_no_outputs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KILL_HOOK, "0:always")
    before = set(_children())
    rc = _render(tmp_path / "out", "--env", PROBE, "--objects", "_envs:probe_objects", "--videos", "none", "--workers", "2",
                 checkpoint=_probe_ckpt(tmp_path), episodes=40)
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1 and "died twice (signal 9)" in err and "episodes 0-" in err
    assert not any(p.is_file() for p in (tmp_path / "out").rglob("*"))
    assert set(_children()) <= before


def test_worker_pool_reports_rlviz_errors_as_themselves():
    with WorkerPool(1) as pool, pytest.raises(UsageError, match="received 'bad'"):
        pool.map(_fails, ["bad"])
    with WorkerPool(1) as pool, pytest.raises(WorkerError, match="ZeroDivisionError"):
        pool.map(_divides, [0])


def _fails(task, progress):
    raise UsageError(f"received {task!r}")


def _divides(task, progress):
    return 1 / task


def _probe_ckpt(tmp_path: Path) -> Path:
    from rlviz.agent.checkpoint import save_checkpoint

    path = tmp_path / "probe.pt2"
    if not path.exists():
        save_checkpoint(path, TorchPolicy(Linear(), num_actions=2, device="cpu"), env=PROBE, gamma=0.9)
    return path


# -- Ray --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])  # for Ray's workers
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_gives_identical_outputs_and_ships_videos(ray_local, minatar_baseline, tmp_path):
    """The driver puts the checkpoint's bytes in Ray's object store and writes the videos the tasks return."""
    assert _render(tmp_path / "ray", "--ray", "--videos", "worst:1") == 0
    _same(_outputs(minatar_baseline), _outputs(tmp_path / "ray"))
    (v,) = (tmp_path / "ray" / "videos").glob("*.mp4")
    assert probe_video(v).num_frames == probe_video(next((minatar_baseline / "videos").glob("*.mp4"))).num_frames
