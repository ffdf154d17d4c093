"""Ctrl-C at several moments of ``rlviz render``, ``rlviz compare`` and ``rlviz timeline --follow`` (issue 32): the job
stops within 2 s with exit code 130 and one ``rlviz: interrupted`` line, no traceback, no ffmpeg left, and its
``--out`` is either absent or complete (every file its marker lists is there). The moments fall in the start-up
imports, the MinAtar import (whose bare ``except`` swallowed a Ctrl-C in 0.3), loading, rollouts and videos."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _procs import ffmpeg_pids

import rlviz

CODE = Path(rlviz.__file__).resolve().parents[1]  # the rlviz under test (subprocesses run the same one)
SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "minatar_breakout_ppo.pt2"


def _interrupt(cmd: list[str], at: float, cwd: Path, ready: Path | None = None) -> tuple[int, str, float]:
    """Run ``python -m rlviz *cmd``, send SIGINT to its process group ``at`` seconds after it started (after
    ``ready`` exists, when given), return (exit code, stderr, seconds from the signal to its exit)."""
    env = {**os.environ, "PYTHONPATH": str(CODE)}
    proc = subprocess.Popen([sys.executable, "-m", "rlviz", *cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        if ready is not None:
            end = time.monotonic() + 120
            while not ready.exists() and proc.poll() is None and time.monotonic() < end:
                time.sleep(0.05)
        time.sleep(at)
        if proc.poll() is not None:
            pytest.fail(f"finished before the signal at {at} s: {proc.communicate()[1][-2000:]}")
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: python, ffmpeg and any worker alike
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
        return proc.returncode, err, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _complete_or_absent(out: Path) -> str:
    if not out.exists():
        return "absent"
    marker = json.loads((out / "rlviz-run.json").read_text())
    assert marker["files"] and all((out / f).exists() for f in marker["files"]), marker["files"]
    return "complete"


def _one_line(err: str, rc: int, took: float) -> None:
    lines = [ln for ln in err.splitlines() if ln.startswith("rlviz: interrupted")]
    assert rc == 130 and len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert took < 2.0, f"exit {took:.2f} s after the signal"


@pytest.mark.parametrize("at", [0.15, 1.0, 2.0, 4.0])
def test_ctrl_c_during_render(tmp_path, at):
    out = tmp_path / "out"
    rc, err, took = _interrupt(["render", str(SAMPLE), "--episodes", "400", "--videos", "worst:1", "--out",
                                str(out)], at, tmp_path)
    _one_line(err, rc, took)
    assert _complete_or_absent(out) == "absent"  # (400 episodes and a video take longer than 4 s here)
    assert not [p for p in tmp_path.iterdir() if p.name != "out"] and ffmpeg_pids(mentioning=str(tmp_path)) == []


@pytest.mark.parametrize("at", [0.5, 2.5])
def test_ctrl_c_during_compare(tmp_path, at):
    out = tmp_path / "out"
    rc, err, took = _interrupt(["compare", str(SAMPLE), str(SAMPLE), "--episodes", "400", "--out", str(out)], at,
                               tmp_path)
    _one_line(err, rc, took)
    assert _complete_or_absent(out) == "absent" and ffmpeg_pids(mentioning=str(tmp_path)) == []


@pytest.mark.parametrize("at", [0.0, 1.5, 4.0])
def test_ctrl_c_during_follow(tmp_path, at):
    """Before, while and after the first checkpoint is evaluated: ``out`` holds nothing, or the complete set."""
    import shutil

    run, out = tmp_path / "run", tmp_path / "out"
    run.mkdir()
    shutil.copy(SAMPLE, run / "step_100.pt2")
    shutil.copy(SAMPLE, run / "step_200.pt2")
    rc, err, took = _interrupt(["timeline", str(run), "--follow", "--episodes", "20", "--settle", "0.2", "--poll",
                                "0.1", "--out", str(out)], at, tmp_path, ready=out / "rlviz-run.json")
    _one_line(err, rc, took)
    state = _complete_or_absent(out)
    if state == "complete":
        data = json.loads((out / "timeline.json").read_text())
        n = len(data["checkpoints"])
        assert n >= 1 and (out / "timeline.csv").read_text().count("\n") == n + 1 and (out / "report.html").is_file()
        assert f"the outputs of the {n} checkpoint(s)" in err, err
    else:
        assert "nothing was written" in err, err
    assert not [p for p in tmp_path.iterdir() if p.name not in ("out", "run")]  # no work folder, no lock left


def test_minatar_import_keeps_a_ctrl_c(tmp_path):
    """A Ctrl-C while MinAtar imports is raised (MinAtar's bare ``except`` around its seaborn import swallowed it),
    and seaborn itself is not imported until a frame is drawn."""
    code = ("import builtins, os, signal, sys\nfrom rlviz.envs.recipe import register_envs\n"
            "real_import = builtins.__import__\n"
            "def ctrl_c_at_seaborn(name, *args, **kwargs):\n"  # the Ctrl-C arrives as MinAtar imports seaborn
            "    if name == 'seaborn':\n        os.kill(os.getpid(), signal.SIGINT)\n"
            "    return real_import(name, *args, **kwargs)\n"
            "builtins.__import__ = ctrl_c_at_seaborn\n"
            "try:\n    register_envs('MinAtar/Breakout-v1')\nexcept KeyboardInterrupt:\n    print('interrupted')\n"
            "else:\n    print('swallowed')\nbuiltins.__import__ = real_import\n"
            "print('seaborn imported' if 'seaborn.palettes' in sys.modules else 'seaborn deferred')\n")
    env = {**os.environ, "PYTHONPATH": str(CODE)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.split("\n")[:2] == ["interrupted", "seaborn deferred"], proc.stdout + proc.stderr[-2000:]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # (the finalizer's ignored Ctrl-C)
def test_a_ctrl_c_swallowed_by_a_finalizer_is_remembered():
    """Python cannot raise a Ctrl-C that lands in a ``__del__`` ("Exception ignored in ..."): ``--follow`` would keep
    watching. remembered_sigint's ``came()`` still says it came; deferred_sigint keeps holding Ctrl-C inside it."""
    import gc

    from rlviz.interrupts import deferred_sigint, remembered_sigint

    class SignalsOnDelete:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # (the handler runs here, inside the finalizer: its KeyboardInterrupt is ignored)

    with remembered_sigint() as came:
        assert not came()
        obj = SignalsOnDelete()
        del obj
        gc.collect()
        assert came()
        with pytest.raises(KeyboardInterrupt):
            with deferred_sigint():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                held = True  # reached: the Ctrl-C waited for the block's end
        assert held
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
