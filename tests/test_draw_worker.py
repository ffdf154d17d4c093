"""The multi-agent recorders' drawing process (:mod:`rlviz.record.agents.draw_worker`): what it runs and returns, how it
fails, that a video drawn there is the video drawn on the writer thread, and that it ends with its recorder, with its
loop's Ctrl-C (tests/test_hardening3_record.py) and after its loop is killed outright (the video it holds is written)."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from rlviz.media.decode import probe_video, read_video
from rlviz.record.agents.draw_worker import NICE, DrawWorker, WorkerGone
from rlviz.record.agents.video import PROCESS_FROM, AgentsOptions

pytest.importorskip("pettingzoo")
sys.path.insert(0, str(Path(__file__).parent))
from _marl_envs import Tag  # noqa: E402
from _processes import drawing_processes, wait_no_drawing_process  # noqa: E402

from rlviz.record.agents.pettingzoo import RecordParallelEpisode  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HANG_S = 240.0


@pytest.fixture
def worker():
    w = DrawWorker()
    yield w
    w.close()


def test_it_runs_a_function_in_another_process_and_returns_its_result(worker):
    assert worker.pid is None  # nothing started before the first job
    assert worker.run(math.sqrt, 6.25) == 2.5
    pid = worker.run(os.getpid)
    assert pid == worker.pid and pid != os.getpid()
    assert worker.run(os.getpid) == pid  # one process for every job
    assert worker.run(os.nice, 0) == min(19, os.nice(0) + NICE)  # below the loop's priority


def test_a_job_error_comes_back_as_raised_there_and_the_process_goes_on(worker, tmp_path):
    from rlviz.errors import UsageError
    from rlviz.media.video import VideoWriter

    with pytest.raises(ValueError, match="math domain error") as raised:
        worker.run(math.sqrt, -1.0)
    if sys.version_info >= (3, 11):  # where: a note naming the drawing process
        assert f"raised in rlviz's drawing process, pid {worker.pid}" in "".join(raised.value.__notes__)
    with pytest.raises(UsageError, match="preset='nope' is not a libx264 preset"):  # rlviz's own errors, as they are
        worker.run(VideoWriter, str(tmp_path / "x.mp4"), 30.0, (8, 8), "nope")
    assert worker.run(math.sqrt, 4.0) == 2.0


def test_what_cannot_be_sent_is_refused_before_the_process_sees_it(worker):
    with pytest.raises(WorkerGone, match="not a module-level function"):
        worker.run(lambda: 1)
    with pytest.raises(WorkerGone, match="cannot be sent"):
        worker.run(len, [threading.Lock()])
    assert worker.run(len, [1, 2]) == 2


def test_a_process_that_dies_mid_job_says_how_and_the_next_job_starts_another(worker):
    first = worker.run(os.getpid)
    with pytest.raises(WorkerGone, match=rf"pid {first}\) ended before it finished its job \(exit status 3\)"):
        worker.run(os._exit, 3)
    second = worker.run(os.getpid)
    assert second != first
    os.kill(second, signal.SIGKILL)
    time.sleep(0.2)
    assert worker.run(os.getpid) not in (first, second)  # a process found dead is replaced before the job is sent


def test_close_ends_the_process_and_start_never_waits_for_a_job(worker):
    worker.start(("rlviz.draw.panels_agents",))
    pid = worker.pid
    assert pid is not None
    done = []
    job = threading.Thread(target=lambda: done.append(worker.run(time.sleep, 1.0)))
    job.start()
    time.sleep(0.3)
    t0 = time.perf_counter()
    worker.start()  # (the loop's reset while the last episode is drawn: waiting for the job would take >= 0.7 s)
    assert time.perf_counter() - t0 < 0.5
    worker.close()  # waits for the job in flight, then ends the process
    job.join()
    assert done == [None] and worker.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _record(folder: Path, process: bool, episodes: int = 2, length: int = PROCESS_FROM) -> RecordParallelEpisode:
    env = RecordParallelEpisode(Tag(3, leave=(1, 3), length=length), folder, episode_trigger=lambda k: True,
                                options=AgentsOptions(process=process))
    for k in range(episodes):
        env.reset(seed=k)
        while env.agents:
            n = len(env.agents)
            env.annotate(logits=np.arange(3 * n, dtype=np.float64).reshape(n, 3) / 7, value=np.linspace(-1, 1, n))
            env.step({a: 1 + (k % 2) for a in env.agents})
    return env


def test_a_video_drawn_in_the_process_is_the_one_drawn_on_the_thread(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # (drawn there: no fallback to the thread)
        env = _record(tmp_path / "process", True)
        env.wait()
    pid = env._writer.worker().pid
    assert pid is not None and pid != os.getpid()
    env.close()
    assert env._writer.worker().pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    _record(tmp_path / "thread", False).close()
    for k in (0, 1):
        name = f"rl-video-episode-{k}"
        ours, theirs = tmp_path / "process" / f"{name}.mp4", tmp_path / "thread" / f"{name}.mp4"
        assert probe_video(ours).num_frames == probe_video(theirs).num_frames >= PROCESS_FROM + 1
        for a, b in zip(read_video(ours), read_video(theirs), strict=True):
            assert np.array_equal(a, b)
        data_a, data_b = np.load(ours.with_suffix(".npz")), np.load(theirs.with_suffix(".npz"))
        assert sorted(data_a.files) == sorted(data_b.files)
        assert all(np.array_equal(data_a[key], data_b[key]) for key in data_a.files)


def test_without_its_process_the_video_is_drawn_on_the_thread_saying_why(tmp_path, monkeypatch):
    def gone(self, fn, *args):
        raise WorkerGone("rlviz's drawing process (pid 1) ended before it finished its job (killed by SIGKILL)")

    monkeypatch.setattr(DrawWorker, "run", gone)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _record(tmp_path, True, episodes=1).close()
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert said == ["rlviz's drawing process (pid 1) ended before it finished its job (killed by SIGKILL); "
                    "rl-video-episode-0.mp4 is drawn on the recorder's thread instead."]
    assert probe_video(tmp_path / "rl-video-episode-0.mp4").num_frames >= PROCESS_FROM + 1


def test_short_videos_are_drawn_on_the_thread_and_start_no_process(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(DrawWorker, "_start", lambda self, preload: started.append(preload))
    env = _record(tmp_path, True, episodes=3, length=PROCESS_FROM - 2)  # PROCESS_FROM - 1 frames each
    env.close()
    assert started == []
    for k in range(3):
        assert probe_video(tmp_path / f"rl-video-episode-{k}.mp4").num_frames >= PROCESS_FROM - 1


def test_the_process_starts_while_the_long_episode_plays(tmp_path):
    env = RecordParallelEpisode(Tag(3, leave=None, length=PROCESS_FROM + 10), tmp_path, episode_trigger=lambda k: True)
    env.reset(seed=0)
    for t in range(PROCESS_FROM + 1):
        env.annotate(logits=np.zeros((3, 3)), value=np.zeros(3))
        env.step({a: 0 for a in env.agents})
        if t == PROCESS_FROM - 3:  # (frame PROCESS_FROM - 1 is in: not yet)
            assert env._writer is not None and env._writer._worker is None
    drawer = env._writer.worker().pid  # started at frame PROCESS_FROM, before the episode's end
    assert drawer is not None and env.agents
    env.close()
    with pytest.raises(ProcessLookupError):
        os.kill(drawer, 0)


KILLED = textwrap.dedent('''
    import sys, time
    import numpy as np
    from pettingzoo.butterfly import pistonball_v6
    from rlviz.record.agents.pettingzoo import RecordParallelEpisode

    env = RecordParallelEpisode(pistonball_v6.parallel_env(render_mode="rgb_array", n_pistons=4, max_cycles=300),
                                sys.argv[1], episode_trigger=lambda k: True)
    env.reset(seed=0)
    steps = 0
    while env.agents:
        env.annotate(mean={a: np.zeros(1) for a in env.agents}, value={a: 0.5 for a in env.agents})
        env.step({a: np.full(1, 0.5, np.float32) for a in env.agents})
        steps += 1
    print(steps, flush=True)  # the episode ended: its video is being drawn
    time.sleep(HANG)
'''.replace("HANG", str(HANG_S)))


def test_a_loop_killed_outright_still_gets_the_video_its_process_was_drawing(tmp_path):
    pytest.importorskip("pymunk")  # pettingzoo[butterfly]
    videos, tmpdir = tmp_path / "videos", tmp_path / "tmpdir"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    loop = subprocess.Popen([sys.executable, "-c", KILLED, str(videos)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        steps = int(loop.stdout.readline())  # type: ignore[union-attr]
        partial, deadline = None, time.monotonic() + HANG_S
        while partial is None and time.monotonic() < deadline:  # the drawing process's file in progress
            partial = next((p for p in videos.glob(".rl-video-episode-0.*.partial.mp4")), None)
            time.sleep(0.005)
        assert partial is not None
        drawer = int(re.fullmatch(r"\.rl-video-episode-0\.(\d+)\.partial\.mp4", partial.name)[1])  # type: ignore[index]
        assert drawer != loop.pid and drawer in drawing_processes(tmpdir)
        loop.send_signal(signal.SIGKILL)
        loop.wait(HANG_S)
        assert not (videos / "rl-video-episode-0.mp4").exists()  # (still being drawn when its loop died)
    finally:
        loop.kill()
        loop.wait()
    assert wait_no_drawing_process(tmpdir, HANG_S) == []  # it finished the job it held, then ended
    assert probe_video(videos / "rl-video-episode-0.mp4").num_frames == steps + 1 == 301
    assert sum(1 for _ in read_video(videos / "rl-video-episode-0.mp4")) == 301
    assert not list(videos.glob(".*partial*"))


def test_a_process_forked_from_the_loop_lets_go_of_the_drawing_process(worker):
    worker.start()
    drawer = worker.pid
    assert drawer is not None
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # (a fork process pool's worker, made after the recorder started drawing)
        os.write(w, b"1" if worker._proc is None else b"0")
        time.sleep(5)
        os._exit(0)
    try:
        os.close(w)
        assert os.read(r, 1) == b"1"  # the child holds none of its pipes and would start its own
        t0 = time.perf_counter()
        worker.close()  # not kept waiting by the child's copies
        assert time.perf_counter() - t0 < 3.0
        with pytest.raises(ProcessLookupError):
            os.kill(drawer, 0)
    finally:
        os.close(r)
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


@pytest.mark.parametrize("data", [b"", b"RLVZ", b"hello, world\n" * 4, b"RLVZ" + (1 << 40).to_bytes(8, "little"),
                                  b"RLVZ" + (10).to_bytes(8, "little") + b"short"])
def test_what_is_not_a_whole_message_reads_as_the_other_side_gone(data):
    import io

    from rlviz.record.agents.draw_worker import _recv

    assert _recv(io.BytesIO(data)) is None


def test_random_bytes_never_read_as_a_message():
    import io

    from rlviz.record.agents.draw_worker import _recv, _send

    rng = np.random.default_rng(0)
    for n in range(200):
        assert _recv(io.BytesIO(rng.integers(0, 256, n % 40 + 1, dtype=np.uint8).tobytes())) is None
    out = io.BytesIO()
    _send(out, b"job")
    assert _recv(io.BytesIO(out.getvalue())) == b"job"


def test_what_a_job_prints_does_not_garble_the_replies(worker):
    first = worker.run(os.getpid)
    assert worker.run(os.write, 1, b"noise\n") == 6  # (its fd 1 is its stderr: nothing reaches the replies' pipe)
    assert worker.run(print, "more noise") is None
    assert worker.run(os.getpid) == first
