"""A two-node Ray cluster on loopback (`ray start --head`, then `ray start --address`) renders the MinAtar
sample with videos and matches the single-process result: exactly in episodes.csv, summary.json and heatmap.npz
(issue 15's batch invariance has landed: the ``--workers 2`` result, the same shards as this cluster's 2 CPUs,
is the same, tests/test_scale.py checks), so in every episode's return, length, failures and heatmap counts;
and in the videos. Slow (Ray start-up); its own module, so no other Ray instance of the test session is alive
beside it. Cleanup stops only the processes this test started (found by their private temp folder or the mark
in their environment), never every Ray process of the machine."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from test_scale import MINATAR, ROOT, TESTS, _outputs, _same, _same_videos

pytestmark = pytest.mark.slow
# minatar_baseline: conftest.py's session fixture, made once for test_scale.py and this file


def _tree(roots: set[int]) -> set[int]:
    """``roots`` and all their descendants (from /proc)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                parent[int(d)] = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                pass
    found, grew = set(roots), True
    while grew:
        new = {p for p, pp in parent.items() if pp in found} - found
        found |= new
        grew = bool(new)
    return found & set(parent)


def _started_in(folder: str, mark: str) -> set[int]:
    """Processes whose command line names ``folder`` (Ray's daemons of this cluster) or whose environment carries
    ``mark`` (all this test started: the head's Ray client server names neither the folder nor a parent alive
    once `ray start` has returned), with descendants."""
    mine = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if (folder.encode() in Path(f"/proc/{d}/cmdline").read_bytes()
                        or mark.encode() in Path(f"/proc/{d}/environ").read_bytes()):
                    mine.add(int(d))
            except OSError:
                pass
    return _tree(mine)


def _stop(folder: str, mark: str) -> None:
    """SIGTERM, then SIGKILL what is left after a few seconds; returns as soon as none is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _started_in(folder, mark):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3.0
        while _started_in(folder, mark) and time.monotonic() < deadline:
            time.sleep(0.1)


def test_two_node_ray_cluster_on_loopback(minatar_baseline, tmp_path):
    pytest.importorskip("ray")
    ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable))
    if ray_bin is None:
        pytest.skip("the ray command is not installed")
    temp = tempfile.mkdtemp(prefix="rlray", dir="/tmp")  # short: Ray's socket paths have a length limit
    mark = f"rlviz-test-{uuid.uuid4().hex}"
    env = dict(os.environ, RLVIZ_TEST_MARK=mark,
               PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")]))
    env.pop("RAY_ADDRESS", None)
    env["RAY_AUTH_MODE"] = "disabled"  # a loopback test cluster: the same (no) token auth on every node and driver
    port = 36000 + os.getpid() % 2000
    # no autoscaler monitor, no log monitors (a fixed cluster; rlviz's driver takes no worker logs); workers at
    # normal priority (Ray's nice 15 starves them on a busy machine)
    quiet = ["--disable-usage-stats", "--include-log-monitor=false"]
    head = [ray_bin, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=1",
            "--include-dashboard=false", f"--temp-dir={temp}", f"--ray-client-server-port={port + 1}",
            "--no-monitor", '--system-config={"worker_niceness": 0}', *quiet]
    node = [ray_bin, "start", f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1", "--num-cpus=1", *quiet]
    out = tmp_path / "cluster"
    try:
        subprocess.run(head, check=True, env=env, capture_output=True, timeout=180)
        subprocess.run(node, check=True, env=env, capture_output=True, timeout=180)
        cmd = [sys.executable, "-m", "rlviz", "render", str(MINATAR), "--episodes", "32", "--heatmap", "--no-progress",
               "--num-envs", "8", "--videos", "worst:1,best:1", "--out", str(out), "--ray", f"127.0.0.1:{port}"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        _stop(temp, mark)
        shutil.rmtree(temp, ignore_errors=True)
    assert not _started_in(temp, mark)  # no process of the cluster is left
    _same(_outputs(minatar_baseline), _outputs(out))
    _same_videos(minatar_baseline, out)
    base, there = _outputs(minatar_baseline), _outputs(out)
    key = ("episode", "seed", "return", "length", "failures", "terminated", "truncated")
    assert [[r[k] for k in key] for r in base[0]] == [[r[k] for k in key] for r in there[0]]
