"""Scale-out: results independent of --num-envs / --workers / --ray, the exact merge, worker faults, Ctrl-C."""

from __future__ import annotations

import csv
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from _envs import probe_objects
from _procs import Watched, alive

import rlviz.evaluate.backends.workers as workers_mod
from rlviz.agent.policy import TorchPolicy
from rlviz.cli import main
from rlviz.errors import UsageError, WorkerError
from rlviz.evaluate import RolloutPlan
from rlviz.evaluate.backends.threads import torch_threads
from rlviz.evaluate.backends.workers import (
    KILL_HOOK,
    MIN_SHARD_WAVES,
    WorkerDied,
    WorkerPool,
    claimed_indices,
    merge_rollouts,
    shard_ranges,
)
from rlviz.evaluate.failures.objects import FunctionExtractor
from rlviz.evaluate.rollouts.rollout import rollout
from rlviz.media import probe_video
from rlviz.sources.pt2.saving import save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
MINATAR = ROOT / "samples" / "minatar_breakout_ppo.pt2"
PROBE = "_envs:rlviz-probe/Probe-v0"  # "module:id": workers (spawned, or Ray's) import the probe's module too
PROBE_ARGS = ("--env", PROBE, "--objects", "_envs:probe_objects")


class Linear(torch.nn.Module):
    def forward(self, x):
        w = torch.tensor([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.5]])
        return x @ w, x.sum(-1)


@pytest.fixture(scope="module")
def probe_ckpt(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("probe") / "probe.pt2"
    save_checkpoint(path, TorchPolicy(Linear(), num_actions=2, device="cpu"), env=PROBE, gamma=0.9)
    return path


def test_shard_ranges_are_contiguous_equal_and_a_whole_number_per_worker():
    for episodes, workers, envs in ((1000, 2, 16), (100, 2, 16), (7, 3, 16), (3, 8, 16), (5000, 3, 8)):
        shards = shard_ranges(episodes, workers, envs)
        assert [i for r in shards for i in r] == list(range(episodes))
        assert max(map(len, shards)) - min(map(len, shards)) <= 1
        assert len(shards) % workers == 0 or len(shards) == episodes < workers
    # one shard per worker unless each of several keeps MIN_SHARD_WAVES waves of envs (a shard costs ~a wave)
    assert len(shard_ranges(1000, 2, 16)) == 2 and len(shard_ranges(100, 2, 16)) == 2
    many = shard_ranges(2 * 2 * MIN_SHARD_WAVES * 16, 2, 16)
    assert len(many) == 4 and min(map(len, many)) == MIN_SHARD_WAVES * 16
    assert len(shard_ranges(100_000, 2, 16)) == 8


def test_shards_merge_into_the_single_run():
    policy = TorchPolicy(Linear(), num_actions=2, device="cpu")
    kw = dict(seed=11, objects=FunctionExtractor(probe_objects), heatmap=True, progress=False)
    whole = rollout(PROBE, policy, RolloutPlan(30, num_envs=4, **kw))
    shards = shard_ranges(30, 3, num_envs=4)
    parts = [rollout(PROBE, policy, RolloutPlan(len(r), num_envs=n, first_episode=r.start, **kw))
             for r, n in zip(shards, (1, 3, 16))]
    merged = merge_rollouts(parts[::-1], wall_s=1.0)
    assert merged.episodes == whole.episodes and merged.steps == whole.steps
    assert np.array_equal(merged.heatmap.counts["obj"], whole.heatmap.counts["obj"])
    assert np.array_equal(merged.heatmap.background, whole.heatmap.background)
    assert (merged.heatmap.failures, merged.heatmap.episodes) == (whole.heatmap.failures, 30)
    with pytest.raises(UsageError, match="overlap or leave gaps"):
        merge_rollouts([parts[0], parts[2]], wall_s=1.0)


def test_torch_threads_is_restored():
    start = torch.get_num_threads()
    torch.set_num_threads(2)  # (the suite's processes run on one thread: a count other than 1 to see it restored)
    try:
        with torch_threads(1):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with pytest.raises(UsageError, match="threads=0"):
            with torch_threads(0):
                pass
    finally:
        torch.set_num_threads(start)


def test_worker_pool_reports_errors_in_one_line_and_leaves_no_process():
    """Forked workers (a spawned one imports torch afresh, ~2 CPU-s each, and the errors travel the same pipe either
    way; the spawned start is test_workers_share_indices_out_one_each_and_a_dead_one_is_reported_not_rerun's)."""
    before = set(_children())
    with WorkerPool(1, start="fork") as pool, pytest.raises(UsageError, match="received 'bad'"):
        pool.map(_fails, ["bad"])
    with WorkerPool(2, start="fork") as pool:
        calls = []
        assert pool.map(_halves, [4, 6, 8], meanwhile=lambda: calls.append(1)) == [2.0, 3.0, 4.0]
        assert calls == [1]  # the caller's work, done once while the workers run
        with pytest.raises(WorkerError, match="ZeroDivisionError"):
            pool.map(_halves, [0])
    assert set(_children()) <= before
    with pytest.raises(UsageError, match="workers=0"):
        WorkerPool(0)


def test_workers_share_indices_out_one_each_and_a_dead_one_is_reported_not_rerun(tmp_path):
    before = set(_children())
    with WorkerPool(2) as pool:  # spawned: the counter travels as the process's argument
        got = pool.map(_claims, [(40, None)] * 2, shared_from=0)
        assert sorted(i for part in got for i in part) == list(range(40))
    with WorkerPool(2, start="fork") as pool:
        got = pool.map(_claims, [(100, None)] * 2, shared_from=0)
        assert sorted(i for part in got for i in part) == list(range(100))  # each index to exactly one worker
        assert all(got)  # both claimed some (each sleeps between claims)
        again = pool.map(_claims, [(30, None)] * 2, shared_from=20)  # the counter restarts at each map
        assert sorted(i for part in again for i in part) == list(range(20, 30))
        marker = tmp_path / "died"
        out = pool.map(_claims, [(50, None), (50, str(marker))], shared_from=0, retry=False)
        assert isinstance(out[1], WorkerDied) and out[1].how == "signal 9" and marker.exists()
        assert set(out[0]) < set(range(50))  # the dead worker's claims are missing: the caller re-runs them
        assert pool.map(_halves, [2, 4]) == [1.0, 2.0]  # the pool is whole again
    assert set(_children()) <= before
    with pytest.raises(UsageError, match="in a WorkerPool's worker only"):
        next(claimed_indices(3))


def test_shared_out_episodes_merge_into_the_single_run():
    """rollout(indices=...) plays any subset of a run: two interleaved halves merge into the whole run."""
    policy = TorchPolicy(Linear(), num_actions=2, device="cpu")
    kw = dict(seed=5, objects=FunctionExtractor(probe_objects), heatmap=True, progress=False)
    whole = rollout(PROBE, policy, RolloutPlan(24, num_envs=4, **kw))
    parts = [rollout(PROBE, policy, RolloutPlan(24, num_envs=n, indices=iter(range(start, 24, 3)), **kw))
             for start, n in ((0, 3), (1, 1), (2, 5))]
    assert [len(p.episodes) for p in parts] == [8, 8, 8] and parts[1].heatmap.episodes == 8
    merged = merge_rollouts(parts, wall_s=1.0)
    assert merged.episodes == whole.episodes and merged.steps == whole.steps
    assert np.array_equal(merged.heatmap.counts["obj"], whole.heatmap.counts["obj"])
    assert np.array_equal(merged.heatmap.background, whole.heatmap.background)
    assert merged.heatmap.episodes == 24
    empty = rollout(PROBE, policy, RolloutPlan(24, num_envs=2, indices=iter(()), **kw))  # a worker that claimed nothing
    assert merge_rollouts([empty, *parts], wall_s=1.0).episodes == whole.episodes


def test_a_worker_killed_holding_the_counter_stalls_nothing(monkeypatch):
    """The lock of the shared counter is held by a worker that dies (SIGKILL leaves it locked): the others stop
    claiming after CLAIM_WAIT_S and return what they have (the driver re-runs the rest); the next shared map gets
    new workers and a new counter."""
    monkeypatch.setattr(workers_mod, "CLAIM_WAIT_S", 0.5)
    before = set(_children())
    with WorkerPool(2, start="fork") as pool:  # (forked after the patch: the workers wait 0.5 s)
        out = pool.map(_claims_or_die_holding_the_lock, [(1000, True), (1000, False)], shared_from=0, retry=False)
        assert isinstance(out[0], WorkerDied) and out[0].how == "signal 9"
        assert 0 < len(out[1]) < 1000  # it stopped at the held lock instead of waiting forever
        again = pool.map(_claims, [(30, None)] * 2, shared_from=0)
        assert sorted(i for part in again for i in part) == list(range(30))  # a new, unlocked counter
    assert set(_children()) <= before


def _claims_or_die_holding_the_lock(task, progress):
    stop, die = task
    if die:
        time.sleep(0.2)  # the other worker claims meanwhile
        workers_mod._CLAIMS.get_lock().acquire()
        os.kill(os.getpid(), signal.SIGKILL)
    return _claims((stop, None), progress)


def _claims(task, progress):
    stop, die_marker = task
    got = []
    for i in claimed_indices(stop):
        got.append(i)
        if die_marker is not None and len(got) == 3:
            open(die_marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.002)
    return got


def _fails(task, progress):
    raise UsageError(f"received {task!r}")


def _halves(task, progress):
    return task / 2 if task else 1 / task


# -- the CLI: identical outputs whatever the scale-out ---------------------------------------------------
def _render(out: Path, *extra: str, checkpoint=MINATAR, episodes=32) -> int:
    return main(["render", str(checkpoint), "--episodes", str(episodes), "--heatmap", "--no-progress",
                 "--out", str(out), *extra])


def _outputs(out: Path) -> tuple:
    """episodes.csv rows, summary.json without its wall time, heatmap.npz's arrays."""
    rows = list(csv.DictReader(open(out / "episodes.csv")))
    summary = json.loads((out / "summary.json").read_text())
    summary.pop("wall_s")
    with np.load(out / "heatmap.npz") as z:
        arrays = {k: z[k].copy() for k in z.files}
    return rows, summary, arrays


def _same(a: tuple, b: tuple) -> None:
    assert a[0] == b[0]
    assert a[1] == b[1]
    assert a[2].keys() == b[2].keys() and all(np.array_equal(a[2][k], b[2][k]) for k in a[2])


def _children() -> list[int]:
    """Live child processes of this test process (from /proc)."""
    me, kids = os.getpid(), []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
                cmd = Path(f"/proc/{d}/cmdline").read_bytes() if int(fields[1]) == me else b""
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z" and b"resource_tracker" not in cmd:
                kids.append(int(d))  # (multiprocessing's resource tracker lives as long as this process)
    return kids


def test_probe_gives_identical_outputs_for_any_num_envs_and_workers(probe_ckpt, tmp_path):
    assert _render(tmp_path / "e16", *PROBE_ARGS, checkpoint=probe_ckpt, episodes=40) == 0
    base = _outputs(tmp_path / "e16")
    assert len(base[0]) == 40 and 0 < base[2]["failures"] < 40
    for name, extra in (("e1", ("--num-envs", "1")), ("e4", ("--num-envs", "4")), ("w1", ("--workers", "1"))):
        assert _render(tmp_path / name, *PROBE_ARGS, *extra, checkpoint=probe_ckpt, episodes=40) == 0
        _same(base, _outputs(tmp_path / name))
    before = set(_children())
    assert _render(tmp_path / "w2", *PROBE_ARGS, "--workers", "2", "--num-envs", "4", checkpoint=probe_ckpt,
                   episodes=40) == 0
    _same(base, _outputs(tmp_path / "w2"))
    assert set(_children()) <= before  # every worker joined


def test_compare_runs_both_agents_shards_in_the_workers(probe_ckpt, tmp_path):
    def comparison(out: Path, *extra: str) -> dict:
        args = ["compare", str(probe_ckpt), str(probe_ckpt), "--episodes", "24", "--heatmap", "--videos", "none",
                "--no-progress", "--out", str(out), *PROBE_ARGS, *extra]
        assert main(args) == 0
        data = json.loads((out / "comparison.json").read_text())
        for side in ("a", "b"):
            data[side].pop("wall_s")
        return data, (out / "episodes.csv").read_text()

    one = comparison(tmp_path / "one")
    assert comparison(tmp_path / "w2", "--workers", "2") == one
    assert one[0]["episodes"] == 24 and one[0]["a"] == one[0]["b"]


# minatar_baseline, minatar_workers: session fixtures in conftest.py (test_scale_cluster.py reads the baseline too)


def _same_videos(a: Path, b: Path) -> None:
    """The same video files (names; frame counts; the .npz per-step numbers byte for byte)."""
    va, vb = sorted((a / "videos").iterdir()), sorted((b / "videos").iterdir())
    assert [p.name for p in va] == [p.name for p in vb] and len(va) == 4  # 2 videos, each .mp4 + .npz
    for pa, pb in zip(va, vb):
        if pa.suffix == ".mp4":
            assert probe_video(pa).num_frames == probe_video(pb).num_frames > 1
        else:
            with np.load(pa) as za, np.load(pb) as zb:
                assert za.files == zb.files and all(np.array_equal(za[k], zb[k]) for k in za.files)


@pytest.mark.slow
def test_minatar_workers_replay_the_videos_and_play_the_same_episodes(minatar_baseline, minatar_workers):
    base, split = _outputs(minatar_baseline), _outputs(minatar_workers)
    assert len(base[0]) == 32 and base[2]["failures"] == 32  # MinAtar Breakout: one failure per episode
    key = ("episode", "seed", "return", "length", "failures", "terminated", "truncated")
    assert [[r[k] for k in key] for r in base[0]] == [[r[k] for k in key] for r in split[0]]
    assert np.array_equal(base[2]["counts"], split[2]["counts"])
    _same_videos(minatar_baseline, minatar_workers)  # replayed in the workers, back as bytes
    assert not [p for p in minatar_workers.parent.rglob("*") if "partial" in p.name]


def test_minatar_workers_give_identical_outputs(minatar_baseline, minatar_workers):
    _same(_outputs(minatar_baseline), _outputs(minatar_workers))


def test_minatar_num_envs_gives_identical_outputs(minatar_baseline, tmp_path):
    assert _render(tmp_path / "e16", "--num-envs", "16", "--videos", "none") == 0
    _same(_outputs(minatar_baseline), _outputs(tmp_path / "e16"))


# -- faults ------------------------------------------------------------------------------------------------
def test_a_killed_worker_is_replaced_and_its_shard_rerun(probe_ckpt, tmp_path, monkeypatch):
    args = (*PROBE_ARGS, "--videos", "none", "--num-envs", "4")
    assert _render(tmp_path / "one", *args, checkpoint=probe_ckpt, episodes=40) == 0
    marker = tmp_path / "killed-once"
    monkeypatch.setenv(KILL_HOOK, f"1:{marker}")  # the second worker: after its first episode
    before = set(_children())
    assert _render(tmp_path / "w2", *args, "--workers", "2", checkpoint=probe_ckpt, episodes=40) == 0
    assert marker.exists()  # the hook fired: a worker was SIGKILLed mid-shard
    _same(_outputs(tmp_path / "one"), _outputs(tmp_path / "w2"))
    assert set(_children()) <= before


def test_a_worker_that_dies_twice_fails_in_one_line_with_no_outputs(probe_ckpt, tmp_path, monkeypatch, capsys):
    # "*": every task's worker dies after its first episode (with "0", a loaded machine could let worker 1 claim
    # all 40 episodes before worker 0 played one: nobody died and the render succeeded)
    monkeypatch.setenv(KILL_HOOK, "*:always")
    before = set(_children())
    rc = _render(tmp_path / "out", *PROBE_ARGS, "--videos", "none", "--workers", "2", checkpoint=probe_ckpt,
                 episodes=40)
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1, err
    assert "died twice (signal 9) running the rollout of episodes" in err and "(a re-run)" in err
    assert not (tmp_path / "out").exists() and not list(tmp_path.iterdir())  # no staging folder left either
    assert set(_children()) <= before


def _descendants(pid: int) -> set[int]:
    parent = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent[int(d)] = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            pass
    found, grew = {pid}, True
    while grew:
        new = {p for p, pp in parent.items() if pp in found} - found
        found |= new
        grew = bool(new)
    return found - {pid}


@pytest.mark.slow
def test_ctrl_c_stops_every_worker_and_leaves_no_outputs(tmp_path):
    """SIGINT to the CLI while 2 workers roll out: exit 130, every worker (and its ffmpeg) gone, no outputs. The signal
    follows the job's progress (its bars on a terminal: episodes done in the shards), not a clock; 5000 episodes
    cannot end first."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "out"
    job = Watched(["render", MINATAR, "--episodes", "5000", "--workers", "2", "--out", out], os.getcwd(), env,
                  importtime=False)
    try:
        job.wait_for(r"^rollouts:.*\s[1-9]\d*/5000")  # inside their shards: episodes reported done
        workers = _descendants(job.proc.pid)  # the workers (forked or spawned)
        assert len(workers) >= 2, "the workers did not start"
        job.interrupt()
        rc = job.finish()
    finally:
        job.close()
    err = job.text()
    assert rc == 130, err[-3000:]
    said = job.said()
    assert len(said) == 1 and said[0].startswith("rlviz: interrupted") and "Traceback" not in err, said
    assert not [p for p in workers if alive(p)]
    assert not out.exists() and not list(tmp_path.iterdir())


# -- Ray --------------------------------------------------------------------------------------------------
def test_ray_without_its_extra_names_it_in_one_line(probe_ckpt, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # "import ray" raises ImportError, installed or not
    assert _render(tmp_path / "out", *PROBE_ARGS, "--ray", checkpoint=probe_ckpt, episodes=4) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and 'pip install "rlviz[ray]"' in err and "--ray" in err, err
    assert not (tmp_path / "out").exists()


def test_an_unreachable_ray_address_fails_at_once_in_one_line(probe_ckpt, tmp_path, capsys):
    pytest.importorskip("ray")
    t0 = time.monotonic()
    assert _render(tmp_path / "out", *PROBE_ARGS, "--ray", "127.0.0.1:1", checkpoint=probe_ckpt, episodes=4) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--ray 127.0.0.1:1: could not connect" in err, err
    assert time.monotonic() - t0 < 30 and not (tmp_path / "out").exists()


def test_ray_flag_alone_means_a_local_instance():
    from rlviz.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["render", "x.pt2", "--ray"]).ray == "local"
    assert parse(["render", "x.pt2", "--ray", "ray://head:10001"]).ray == "ray://head:10001"
    assert parse(["render", "x.pt2"]).ray is None
    with pytest.raises(UsageError, match="--workers: expected a positive whole number, received 0"):
        from rlviz.config import RenderConfig

        RenderConfig(checkpoint="x.pt2", workers=0)


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    paths = [str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")]
    with pytest.MonkeyPatch.context() as mp:  # restored after the module (an xdist worker runs other files next)
        mp.setenv("PYTHONPATH", os.pathsep.join(paths))  # Ray's workers import this tree's rlviz and _envs
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 _system_config={"worker_niceness": 0})  # (Ray's nice 15 starves its workers on a busy machine)
        yield ray
        ray.shutdown()


@pytest.mark.slow
def test_ray_gives_identical_outputs_and_ships_videos(ray_local, minatar_baseline, minatar_workers, probe_ckpt,
                                                      tmp_path):
    """The driver puts the checkpoint's bytes in Ray's object store and writes the videos the tasks return.
    (2 Ray CPUs: the shards of --workers 2, so the outputs are identical to theirs on main already.)"""
    assert _render(tmp_path / "ray", "--num-envs", "8", "--ray", "--videos", "worst:1,best:1") == 0
    _same(_outputs(minatar_workers), _outputs(tmp_path / "ray"))
    _same_videos(minatar_baseline, tmp_path / "ray")
    assert _render(tmp_path / "p1", *PROBE_ARGS, checkpoint=probe_ckpt, episodes=40) == 0
    assert _render(tmp_path / "pray", *PROBE_ARGS, "--ray", checkpoint=probe_ckpt, episodes=40) == 0
    _same(_outputs(tmp_path / "p1"), _outputs(tmp_path / "pray"))
