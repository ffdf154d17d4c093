"""Which modules the recorders' import loads (issue #43: the recorder import stays light; its cost is measured by
``scripts/bench_instructions.py`` and ``scripts/bench_light.py``, this guards what it pulls in), each in a fresh
interpreter: ``from rlviz import RecordEpisode, RecordVectorEpisode`` loads no heavy package and none of what a
recorder loads later (the spool with the first panel video, the leftovers cleaner and the Ctrl-C handling when a
recorder is made, drawing and encoding with the first video); making a recorder loads the exit and Ctrl-C handling,
so that a Ctrl-C never has to import them, and still no torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: packages a frames-and-annotations recorder never needs at import
HEAVY = ("torch", "cv2", "moviepy", "matplotlib", "scipy", "pandas", "jax", "PIL", "pettingzoo")
#: rlviz's modules loaded later: by a recorder when it is made, by its first video, or never by a recorder
LATER = ("rlviz.record.spooled", "rlviz.record.leftovers", "rlviz.interrupts", "rlviz.draw", "rlviz.media.video",
         "rlviz.jobs", "rlviz.cli", "rlviz.evaluate", "rlviz.sources")


def _loaded(code: str) -> set[str]:
    """The names in ``sys.modules`` after ``code`` runs in a fresh interpreter (this checkout first on the path)."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.splitlines()[-1]))


def _under(mods: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if any(m == r or m.startswith(r + ".") for r in roots))


def test_the_recorder_import_loads_no_heavy_package_and_nothing_a_recorder_loads_later():
    mods = _loaded("from rlviz import RecordEpisode, RecordVectorEpisode")
    assert "rlviz.record.record_episode" in mods and "rlviz.record.vector" in mods  # (the probe saw the import)
    assert _under(mods, HEAVY) == []
    assert _under(mods, LATER) == []


def test_making_a_recorder_loads_its_exit_and_ctrl_c_handling_and_still_no_torch(tmp_path):
    mods = _loaded("import gymnasium as gym\nfrom rlviz import RecordEpisode\n"
                   f"env = RecordEpisode(gym.make('CartPole-v1', render_mode='rgb_array'), {str(tmp_path)!r})")
    assert {"rlviz.record.leftovers", "rlviz.interrupts"} <= mods  # loaded now: a Ctrl-C later imports nothing
    assert _under(mods, ("torch", "rlviz.record.spooled", "rlviz.draw")) == []
