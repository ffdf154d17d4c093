"""rlviz timeline --follow in a subprocess, on a folder filled while it runs: files written in two parts are never
read half-written nor evaluated twice; Ctrl-C leaves complete outputs, no temp files, no orphans; RUN vanishing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _procs import alive
from _timeline_runs import STEPS, trained_runs

ROOT = Path(__file__).resolve().parents[1]
#: --poll and --settle of the watch: short, so a test waits little; what the tests prove is relative to them (a first
#: half sits there 3 x SETTLE, several looks past settling; --idle-stop is ~3 x the time between two checkpoints).
POLL, SETTLE = 0.1, 0.2


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return trained_runs(tmp_path_factory)


def _follow(run: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "rlviz", "timeline", str(run), "--follow", "--env", "CartPole-v1", "--episodes", "2",
           "--videos", "none", "--poll", str(POLL), "--settle", str(SETTLE), "--out", str(out), *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for(predicate, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    found = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/stat") as fh:
                if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(d))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def _no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if ".partial" in p.name or ".old-" in p.name]


def _steps(out: Path) -> list[int]:
    try:
        return [r["step"] for r in json.loads((out / "timeline.json").read_text())["checkpoints"]]
    except FileNotFoundError:
        return []


def test_follow_files_written_in_two_parts(runs, tmp_path):
    src, run, out = runs[0], tmp_path / "run", tmp_path / "out"
    run.mkdir()
    proc = _follow(run, out, "--idle-stop", "3")
    try:
        for step in STEPS[:2]:  # the first checkpoint, and one after it (compared with the one before)
            data = (src / f"rl_model_{step}_steps.zip").read_bytes()
            target = run / f"rl_model_{step}_steps.zip"
            with open(target, "wb") as fh:  # the first part sits there longer than --settle: truncated, not read
                fh.write(data[: len(data) // 2])
                fh.flush()
                time.sleep(3 * SETTLE)
                fh.write(data[len(data) // 2:])
            _wait_for(lambda s=step: s in _steps(out))
            assert _no_temp_files(out)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert _steps(out) == STEPS[:2]
    lines = [ln for ln in err.splitlines() if ln.startswith("rlviz: step ")]
    assert [int(ln.split()[2]) for ln in lines] == STEPS[:2]  # one progress line each, none evaluated twice
    assert "corrupt" not in err and "skipped" not in err and _no_temp_files(out)


def test_follow_ctrl_c_leaves_complete_outputs(runs, tmp_path):
    out = tmp_path / "out"
    proc = _follow(runs[0], out)
    try:
        _wait_for(lambda: len(_steps(out)) >= 1)
        children = _children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "interrupted" in err, err
    steps = _steps(out)  # complete JSON of every evaluated checkpoint
    assert steps and steps == sorted(steps) and set(steps) <= set(STEPS)
    assert (out / "timeline.csv").read_text().count("\n") == len(steps) + 1
    assert _no_temp_files(out) and not any(alive(c) for c in children)


def test_follow_run_disappears(runs, tmp_path):
    run, out = tmp_path / "run", tmp_path / "out"
    run.mkdir()
    for step in STEPS[:2]:  # (two checkpoints: the watch has evaluated what it found when RUN goes)
        shutil.copy(runs[0] / f"rl_model_{step}_steps.zip", run)
    proc = _follow(run, out)
    try:
        _wait_for(lambda: len(_steps(out)) == 2)
        shutil.rmtree(run)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and f"{run} disappeared" in err, err
    assert _steps(out) == STEPS[:2] and _no_temp_files(out)
