"""Ctrl-C at several moments of ``rlviz render``, ``rlviz compare`` and ``rlviz timeline --follow`` (issue 32): the job
stops with exit code 130 and one ``rlviz: interrupted`` line, no traceback, no ffmpeg left, and its ``--out`` is
either absent or complete (every file its marker lists is there). The moments fall in the start-up imports, the
MinAtar import (whose bare ``except`` swallowed a Ctrl-C in 0.3), loading, rollouts and videos.

Each moment follows the job's own progress (issue 42), never a clock: the signal goes when the job's stderr (a
terminal, so the CLI draws its progress bars; ``-X importtime`` adds a line per imported module) shows the moment's
marker, and the job has far more left to do after it than the signal can take to arrive (100,000 episodes; 20 videos
when the moment is the first video), so it cannot finish first on a fast machine, and a loaded one only delays both.
The time from the signal to the exit is bounded with a margin for a loaded 2-core machine (:data:`STOP_S`): what it
checks is that the job stops instead of running its 100,000 episodes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _procs import Watched, ffmpeg_pids

import rlviz

CODE = Path(rlviz.__file__).resolve().parents[1]  # the rlviz under test (subprocesses run the same one)
SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "minatar_breakout_ppo.pt2"
#: Seconds from the signal to the exit, at most: ~0.1-0.5 s on a quiet machine; the margin is for a loaded one.
STOP_S = 30.0
#: Far more episodes than a rollout plays before the signal arrives (~15 episodes/s here: hours).
MANY = "100000"
#: The moments: a regular expression on the job's stderr (progress bars, ``-X importtime`` lines).
CLI_IMPORT = r"\|\s+rlviz\.config\s*$"  # rlviz.cli's own imports (run() is already waiting for a Ctrl-C)
STARTING = r"^starting \(torch, gymnasium\)"  # torch's and gymnasium's imports
MINATAR_IMPORT = r"\|\s+minatar\.environment\s*$"  # inside MinAtar's import (its parent package not yet done)
LOADING = r"^loading minatar_breakout_ppo\.pt2"
ROLLOUTS = r"^rollouts:.*\s[1-9]\d*/\d+"  # some episodes done
ENCODING = r"^encode:.*\s[1-9]\d*/\d+"  # frames flowing into the first video's ffmpeg


def _interrupt(cmd: list[str], moment, cwd: Path) -> tuple[int, str, float]:
    """Run ``python -m rlviz *cmd``, send SIGINT to its process group once its stderr shows ``moment`` (a regular
    expression; or a function of no argument, true from the moment on), return (exit code, stderr, seconds from the
    signal to its exit)."""
    job = Watched(cmd, cwd, {**os.environ, "PYTHONPATH": str(CODE)})
    try:
        if callable(moment):
            end = time.monotonic() + 600
            while not moment():
                assert job.proc.poll() is None and time.monotonic() < end, job.text()[-3000:]
                time.sleep(0.05)
        else:
            job.wait_for(moment)
        sent = job.interrupt()
        rc = job.finish()
        return rc, job.text(), time.monotonic() - sent
    finally:
        job.close()


def _complete_or_absent(out: Path) -> str:
    if not out.exists():
        return "absent"
    marker = json.loads((out / "rlviz-run.json").read_text())
    assert marker["files"] and all((out / f).exists() for f in marker["files"]), marker["files"]
    return "complete"


def _one_line(err: str, rc: int, took: float) -> None:
    # (on a terminal the line may follow a progress bar's last redraw on the same line)
    assert rc == 130 and err.count("rlviz: interrupted") == 1 and "Traceback" not in err, err[-3000:]
    assert took < STOP_S, f"exit {took:.2f} s after the signal"


@pytest.mark.parametrize("moment", [CLI_IMPORT, STARTING, MINATAR_IMPORT, LOADING, ROLLOUTS, ENCODING],
                         ids=["cli-import", "starting", "minatar-import", "loading", "rollouts", "video"])
def test_ctrl_c_during_render(tmp_path, moment):
    out = tmp_path / "out"
    videos = ["--episodes", "20", "--videos", "first:20"] if moment == ENCODING else ["--episodes", MANY,
                                                                                      "--videos", "worst:1"]
    rc, err, took = _interrupt(["render", str(SAMPLE), *videos, "--out", str(out)], moment, tmp_path)
    _one_line(err, rc, took)
    assert _complete_or_absent(out) == "absent"  # (the job had most of its work left when the signal came)
    assert not [p for p in tmp_path.iterdir() if p.name != "out"] and ffmpeg_pids(mentioning=str(tmp_path)) == []


@pytest.mark.parametrize("moment", [STARTING, ROLLOUTS], ids=["starting", "rollouts"])
def test_ctrl_c_during_compare(tmp_path, moment):
    out = tmp_path / "out"
    rc, err, took = _interrupt(["compare", str(SAMPLE), str(SAMPLE), "--episodes", MANY, "--out", str(out)], moment,
                               tmp_path)
    _one_line(err, rc, took)
    assert _complete_or_absent(out) == "absent" and ffmpeg_pids(mentioning=str(tmp_path)) == []


def _evaluated(out: Path, n: int) -> bool:
    try:
        return len(json.loads((out / "timeline.json").read_text())["checkpoints"]) >= n
    except (FileNotFoundError, ValueError, KeyError):
        return False


@pytest.mark.parametrize("moment", ["first", ROLLOUTS, "both"], ids=["evaluating-first", "rollouts", "after-both"])
def test_ctrl_c_during_follow(tmp_path, moment, minatar_ckpt):
    """Before, while and after the checkpoints are evaluated (the first's phase shown; its rollouts running; both in
    ``out``, the job watching for more): ``out`` holds nothing, or the complete set."""
    import shutil

    run, out = tmp_path / "run", tmp_path / "out"
    run.mkdir()
    # (after both: the moment is when the job only watches, so the agent's episodes may be short: an untrained
    # agent's (~10 steps; the trained sample's progression video, its long episodes drawn, takes ~10 s); during the
    # first, the trained sample's long episodes outlast the signal)
    agent = minatar_ckpt if moment == "both" else SAMPLE
    shutil.copy(agent, run / "step_100.pt2")
    shutil.copy(agent, run / "step_200.pt2")
    when = {"first": r"^step 100: step_100\.pt2", "both": lambda: _evaluated(out, 2)}.get(moment, moment)
    rc, err, took = _interrupt(["timeline", str(run), "--follow", "--episodes", "20", "--settle", "0.2", "--poll",
                                "0.1", "--out", str(out)], when, tmp_path)
    _one_line(err, rc, took)
    state = _complete_or_absent(out)
    if moment == "both":
        assert state == "complete" and _evaluated(out, 2)
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
