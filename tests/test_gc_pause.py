"""The CLI's start-up runs without the cyclic garbage collector, which comes back when the rollouts begin (or after a
time limit), never where the process had turned it off itself."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest

from rlviz import gc_pause

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "minatar_breakout_ppo.pt2"


@pytest.fixture(autouse=True)
def _collector_back_on():
    yield
    gc_pause.resume()
    gc.unfreeze()
    gc.enable()


def test_the_rollout_turns_collection_back_on_with_the_start_up_frozen(tmp_path):
    import rlviz

    frozen = gc.get_freeze_count()
    gc_pause.pause()
    assert not gc.isenabled()
    rlviz.render(checkpoint=str(SAMPLE), episodes=1, num_envs=1, videos="none", out=str(tmp_path / "r"), progress=False)
    assert gc.isenabled() and gc.get_freeze_count() > frozen
    assert (tmp_path / "r" / "summary.json").is_file()


def test_the_pause_ends_by_itself():
    gc_pause.pause(0.2)
    assert not gc.isenabled()
    deadline = time.monotonic() + 60  # a hang guard: the timer's thread may start late on a loaded machine
    while not gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_process_stays_off():
    gc.disable()
    gc_pause.pause(0.1)
    gc_pause.resume()
    time.sleep(0.3)
    assert not gc.isenabled()
