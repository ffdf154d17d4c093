"""Ctrl-C while a video is being encoded: no file under the final name, no temporary file, no ffmpeg left.

In process (a KeyboardInterrupt raised mid-episode while RecordEpisode writes the video) and from
outside (a real SIGINT sent to a ``python -c`` that encodes a long video: to the process alone, and
to its whole process group as a terminal's Ctrl-C does, which reaches ffmpeg too).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
import torch
from _procs import alive, ffmpeg_pids

from rlviz import TorchPolicy
from rlviz.draw.compose import Compositor
from rlviz.media.video import VideoWriter
from rlviz.record import RecordEpisode, RecordOptions


class StepEnv(gym.Env):
    """obs = (t, 1); 32x32 frames of grey 8 * t; ends after 40 steps."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self):
        self.render_mode = "rgb_array"
        self.observation_space = gym.spaces.Box(-1e6, 1e6, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0, 1.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t, 1.0], np.float32), 1.0, self.t >= 40, False, {}

    def render(self):
        return np.full((32, 32, 3), 8 * self.t % 256, np.uint8)


class Linear(torch.nn.Module):
    def forward(self, x):
        return x @ torch.tensor([[0.1, 0.0], [-0.1, 0.2]]).T, x[:, 0]


def test_keyboard_interrupt_while_recording_an_episode(tmp_path, monkeypatch):
    writers: list[VideoWriter] = []
    real_open, real_render = VideoWriter.open, Compositor.render
    calls = []

    def open_and_remember(self):
        if self not in writers:
            writers.append(self)
        return real_open(self)

    def render_until_ctrl_c(self, t, out=None):
        calls.append(t)
        if len(calls) == 15:  # 14 frames are in the encoder; Ctrl-C arrives while composing the 15th
            raise KeyboardInterrupt
        return real_render(self, t, out=out)

    monkeypatch.setattr(VideoWriter, "open", open_and_remember)
    monkeypatch.setattr(Compositor, "render", render_until_ctrl_c)
    # drawn in step() (background=False): a Ctrl-C reaches the loop's thread, never the recorder's own writer thread
    env = RecordEpisode(StepEnv(), tmp_path / "videos", TorchPolicy(Linear(), device="cpu"),
                        options=RecordOptions(background=False))
    env.reset(seed=0)
    with pytest.raises(KeyboardInterrupt):
        for _ in range(40):  # the episode ends at step 40: RecordEpisode writes its video then
            env.step(0)
    (w,) = writers
    assert w.frames_written == 14 and w.pid is not None
    assert not (tmp_path / "videos" / "rl-video-episode-0.mp4").exists()
    assert os.listdir(tmp_path / "videos") == []  # no temporary video, no episode data
    assert not alive(w.pid) and ffmpeg_pids(mentioning=str(tmp_path)) == []
    assert env.last_video_path is None


ENCODE_FOREVER = """
import sys
import numpy as np
from rlviz.media import VideoWriter
frame = np.zeros((240, 320, 3), np.uint8)
try:
    with VideoWriter(sys.argv[1], 30, (320, 240), preset="ultrafast") as w:
        for i in range(10**7):
            frame[:, :, 0] = i % 256
            w.write(frame)
            if i == 20:
                print(w.pid, w.partial, flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)  # the writer's with-block is done; still alive, so checks see its work
    sys.stdin.readline()
    raise
"""


@pytest.mark.parametrize("target", ["process", "process group"])
def test_sigint_to_an_encoding_python_process(tmp_path, target):
    path = tmp_path / "long.mp4"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-c", ENCODE_FOREVER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        line = proc.stdout.readline().split()
        assert len(line) == 2, proc.stderr.read()
        ffmpeg_pid, partial = int(line[0]), line[1]
        deadline = time.monotonic() + 120  # a hang guard: ffmpeg starts slowly on a loaded machine
        while not os.path.isfile(partial) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # mid-encode: frames keep flowing into ffmpeg
        assert os.path.isfile(partial) and alive(ffmpeg_pid) and proc.poll() is None
        if target == "process":
            os.kill(proc.pid, signal.SIGINT)
        else:  # a terminal's Ctrl-C: python and ffmpeg both get SIGINT
            os.killpg(proc.pid, signal.SIGINT)
        assert proc.stdout.readline().strip() == "interrupted"
        # checked while the interrupted python still runs (an ffmpeg it failed to stop would still be there)
        assert not alive(ffmpeg_pid) and ffmpeg_pids(mentioning=str(tmp_path)) == []
        assert not path.exists() and os.listdir(tmp_path) == []
        proc.stdin.write("\n")
        proc.stdin.flush()
        rc = proc.wait(timeout=60)
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == -signal.SIGINT and "KeyboardInterrupt" in stderr  # python died of the Ctrl-C
    assert not path.exists() and os.listdir(tmp_path) == []
    assert not alive(ffmpeg_pid) and ffmpeg_pids(mentioning=str(tmp_path)) == []
