"""RayPool itself: results in order, every progress report passed on once (a re-run task's too), errors in one
line, a killed worker's task re-run once on a new actor and a second death a WorkerError, the caller's Ray
connection left alone; and a render's own local instance (`--ray`, started on the pool's thread) giving the
single-process outputs and leaving no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from test_scale import PROBE_ARGS, ROOT, TESTS, _outputs, _render, _same, probe_ckpt  # noqa: F401 - a fixture

from rlviz.errors import UsageError, WorkerError
from rlviz.evaluate.backends.ray_pool import RayPool

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_session():
    saved = os.environ.get("PYTHONPATH")  # Ray's workers import this file's task functions: put it on their path
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(TESTS), saved or ""])
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 _system_config={"worker_niceness": 0})  # (Ray's nice 15 starves its workers on a busy machine)
        yield ray
        ray.shutdown()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _reports(task, progress):
    """Report ``task`` values (task + 0.5, task + 1.5, ...), slowly enough for the driver to collect some
    mid-task; return the task doubled."""
    for k in range(task):
        progress(task + k + 0.5)
        time.sleep(0.05)
    return 2 * task


def _dies(task, progress):
    """(marker, value): report, wait for the driver to collect it, then SIGKILL this worker: once (the first
    run creates the marker) or, with the marker "always", every time."""
    marker, value = task
    progress(value)
    if marker == "always" or not os.path.exists(marker):
        if marker != "always":
            open(marker, "w").close()
        time.sleep(1.0)  # the driver collects the report before the death: the re-run's must not count again
        os.kill(os.getpid(), signal.SIGKILL)
    return value


def _fails(task, progress):
    if task == "usage":
        raise UsageError(f"received {task!r}; expected something else")
    return 1 / 0


def _cpus_back(session, cpus: float = 2.0, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if session.available_resources().get("CPU", 0) >= cpus:
            return True
        time.sleep(0.2)
    return False


def test_results_in_order_each_report_once_errors_in_one_line_and_a_killed_worker_replaced(ray_session, tmp_path):
    """Three checks on one pool (each actor is a worker process that imports torch, ~2.5 CPU-s, and a pool per
    check started two more): results in order and every progress report passed on once; errors come back in one
    line and the pool stays usable; a killed worker is replaced and its task run again once (its reports not
    passed on twice), a second death a WorkerError in one line. After it, the caller's connection is left alone
    and the pool's actors ended with it."""
    seen = []
    with RayPool() as pool:
        assert pool.size == 2
        assert pool.map(_reports, [3, 1, 4, 2, 5], progress=seen.append) == [6, 2, 8, 4, 10]
        assert sorted(seen) == sorted(t + k + 0.5 for t in (3, 1, 4, 2, 5) for k in range(t))
        calls = []
        assert pool.map(_reports, [2], meanwhile=lambda: calls.append(1)) == [4]  # no progress wanted: none collected
        assert calls == [1]  # the caller's work, done once while the actors run
        # errors come back in one line
        with pytest.raises(UsageError, match="received 'usage'"):
            pool.map(_fails, ["usage"])
        with pytest.raises(WorkerError, match="ZeroDivisionError") as caught:
            pool.map(_fails, ["other"], what="the rollout of")
        assert len(str(caught.value).splitlines()) == 1 and "the rollout of other" in str(caught.value)
        assert pool.map(_reports, [1, 2]) == [2, 4]  # still usable after a failed map
        # a killed worker is replaced and its task run again once
        marker = str(tmp_path / "killed-once")
        seen = []
        assert pool.map(_dies, [(marker, 7.0), (str(tmp_path / "x"), 8.0)], progress=seen.append) == [7.0, 8.0]
        assert sorted(seen) == [7.0, 8.0]  # reported before and after the death: passed on once
        assert os.path.exists(marker)
        with pytest.raises(WorkerError, match="died twice") as caught:
            pool.map(_dies, [("always", 1.0)], what="the rollout of")
        assert len(str(caught.value).splitlines()) == 1
    assert ray_session.is_initialized()  # the caller's connection, left alone
    assert _cpus_back(ray_session)  # the pool's actors ended with it


def _with_mark(mark: str) -> list[int]:
    """Live processes whose environment carries ``mark`` (a test run's descendants, Ray's daemons included)."""
    found = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark.encode() in Path(f"/proc/{d}/environ").read_bytes():
                found.append(int(d))
        except OSError:
            pass
    return found


@pytest.mark.slow
def test_a_render_on_its_own_local_instance_matches_and_leaves_nothing(probe_ckpt, tmp_path):  # noqa: F811
    assert _render(tmp_path / "one", *PROBE_ARGS, checkpoint=probe_ckpt, episodes=40) == 0
    mark = f"rlviz-test-{uuid.uuid4().hex}"
    env = dict(os.environ, RLVIZ_TEST_MARK=mark,
               PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")]))
    env.pop("RAY_ADDRESS", None)
    cmd = [sys.executable, "-m", "rlviz", "render", str(probe_ckpt), "--episodes", "40", "--heatmap", "--no-progress",
           "--out", str(tmp_path / "ray"), *PROBE_ARGS, "--ray", "--workers", "2"]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        assert not done.stderr.strip(), done.stderr  # Ray's start-up notes stay out of the user's terminal
        _same(_outputs(tmp_path / "one"), _outputs(tmp_path / "ray"))
        deadline = time.monotonic() + 10
        while _with_mark(mark) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _with_mark(mark)  # every process of its Ray instance ended with it
    finally:
        for pid in _with_mark(mark):
            os.kill(pid, signal.SIGKILL)
