"""The torch-free recording core (``rlviz.record.episode_video.EpisodeVideo``) and how light the recorder is in a training
process: importing it, and recording frames and annotated numbers without a policy, load no torch, matplotlib
or ffmpeg wrapper before they are needed (checked in fresh interpreters)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlviz.agent.actions import action_spec
from rlviz.envs import to_rgb_frame
from rlviz.errors import UsageError
from rlviz.media import probe_video, read_video
from rlviz.record.arrays import as_numpy
from rlviz.record.episode_video import EpisodeVideo, RecordOptions
from rlviz.record.modes import Finished, Panels, Pending, Stream

HEAVY = ("torch", "matplotlib", "imageio_ffmpeg", "cv2")


def play(video: EpisodeVideo, steps: int, annotate: bool, seed: int = 0):
    """CartPole for ``steps`` steps (or to its end) into ``video``; the frames given, the actions taken."""
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    env.reset(seed=seed)
    frames = [to_rgb_frame(env.render())]
    video.start(frames[0])
    actions, done = [], False
    t = 0
    while t < steps and not done:
        if annotate:
            logits = torch.tensor([0.1 * t, -0.1 * t], requires_grad=True) * 2  # a tensor with grad, as a loop has
            video.annotate(logits=logits, value=torch.tensor(0.5 * t), q=np.float64(t))
        a = t % 2
        _, r, term, trunc, _ = env.step(a)
        done = term or trunc
        frames.append(to_rgb_frame(env.render()))
        video.step(frames[-1], float(r), a)
        actions.append(a)
        t += 1
    env.close()
    return frames, actions


def test_frames_only_video_has_one_frame_per_step_plus_the_reset_frame(tmp_path):
    env = gym.make("CartPole-v1")
    video = EpisodeVideo(tmp_path / "v.mp4", 50, action_spec(env.action_space), panels=False)
    frames, _ = play(video, 12, annotate=False)
    assert video.annotate(value=1.0) is False  # frames only: annotations are not kept
    path = video.finish()
    assert path == tmp_path / "v.mp4" and not (tmp_path / "v.npz").exists()
    info = probe_video(path)
    assert info.num_frames == len(frames) == 13 and (info.width, info.height) == (608, 400)  # 600 padded to 16
    for got, want in zip(read_video(path), frames):
        assert np.abs(got[:400, :600].astype(int) - want).mean() < 3.0  # H.264, not bit-exact


def test_annotations_from_tensors_make_a_panel_video_and_npz_of_exactly_those_numbers(tmp_path):
    env = gym.make("CartPole-v1")
    video = EpisodeVideo(tmp_path / "a.mp4", 50, action_spec(env.action_space), RecordOptions(gamma=0.9))
    assert isinstance(video.mode, Pending)
    frames, actions = play(video, 8, annotate=True)
    assert isinstance(video.mode, Panels) and video.panels
    path = video.finish(truncated=True)
    data = np.load(path.with_suffix(".npz"))
    want = np.array([[0.2 * t, -0.2 * t] for t in range(8)] + [[0.2 * 7, -0.2 * 7]], np.float32)
    np.testing.assert_allclose(data["logits"], want, rtol=1e-6)
    np.testing.assert_allclose(data["value"], [0.5 * t for t in range(8)] + [3.5], rtol=1e-6)
    np.testing.assert_array_equal(data["extra_q"], list(range(8)) + [7])
    np.testing.assert_array_equal(data["actions"], actions)
    assert bool(data["truncated"]) and probe_video(path).num_frames == len(frames) == 9
    assert video.internals is not None and video.internals.gamma == 0.9


def test_a_video_fed_nothing_writes_nothing_and_abort_leaves_no_file(tmp_path):
    spec = action_spec(gym.spaces.Discrete(2))
    assert EpisodeVideo(tmp_path / "none.mp4", 30, spec).finish() is None
    video = EpisodeVideo(tmp_path / "cut.mp4", 30, spec, panels=False)
    video.start(np.zeros((32, 32, 3), np.uint8))
    video.abort()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UsageError, match="action"):
        panel = EpisodeVideo(tmp_path / "p.mp4", 30, spec, panels=True)
        panel.start(np.zeros((32, 32, 3), np.uint8))
        panel.step(np.zeros((32, 32, 3), np.uint8), 1.0)  # a panel video needs the action taken


def test_each_mode_is_a_class_the_video_moves_through(tmp_path):
    """Pending settles on Stream when the first step comes unannotated; Stream keeps add_frame()'s frames (a render
    collection) and counts them; finish() makes it Finished, which refuses more steps; a pending video finished with
    no frame writes nothing."""
    spec = action_spec(gym.spaces.Discrete(2))
    frame = np.full((32, 48, 3), 200, np.uint8)
    video = EpisodeVideo(tmp_path / "s.mp4", 30, spec)
    assert isinstance(video.mode, Pending) and video.mode.annotates and not video.panels
    video.start(frame)
    video.step(frame, 1.0, 0)
    assert isinstance(video.mode, Stream) and not video.mode.annotates
    assert video.annotate(logits=[0.0, 1.0]) is False  # frames only now: nothing kept
    video.add_frame(frame)
    assert (video.steps, video.frames) == (1, 3)
    path = video.finish()
    assert isinstance(video.mode, Finished) and not video.mode.open
    assert probe_video(path).num_frames == 3
    with pytest.raises(UsageError, match="after finish"):
        video.step(frame, 0.0, 0)
    empty = EpisodeVideo(tmp_path / "e.mp4", 30, spec)
    assert empty.finish() is None and isinstance(empty.mode, Finished)
    panels = EpisodeVideo(tmp_path / "p.mp4", 30, spec, panels=True)
    panels.add_frame(frame)  # between steps: a panel video keeps no extra frame
    assert isinstance(panels.mode, Panels) and panels.panels and panels.frames == 0
    panels.abort()
    assert isinstance(panels.mode, Finished)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.mp4"]


def test_as_numpy_reads_tensors_of_any_dtype_and_lookalikes_without_torch():
    t = torch.linspace(0, 1, 5, requires_grad=True)
    np.testing.assert_array_equal(as_numpy(t * 1), np.linspace(0, 1, 5, dtype=np.float32))
    bf = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)  # numpy has no bfloat16: widened first
    np.testing.assert_array_equal(as_numpy(bf, np.float32), [1.5, -2.0])

    class DeviceTensor:  # what as_numpy relies on: detach() and cpu() (a CUDA tensor's way to the host)
        calls: list[str] = []

        def detach(self):
            self.calls.append("detach")
            return self

        def cpu(self):
            self.calls.append("cpu")
            return np.array([3.0, 4.0])

    np.testing.assert_array_equal(as_numpy(DeviceTensor()), [3.0, 4.0])
    assert DeviceTensor.calls == ["detach", "cpu"]


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_recorder_loads_no_torch_matplotlib_or_ffmpeg(tmp_path):
    got = _fresh(f"""
        import importlib.util, json, sys
        import gymnasium  # what gymnasium loads itself is not the recorder's (0.29 imports matplotlib)
        own = [m for m in {HEAVY!r} if m in sys.modules]
        from rlviz import RecordEpisode
        names = ["RecordEpisode"]
        if importlib.util.find_spec("rlviz.record.vector") is not None:
            from rlviz import RecordVectorEpisode
            names.append("RecordVectorEpisode")
        print(json.dumps({{"names": names, "loaded": [m for m in {HEAVY!r} if m in sys.modules and m not in own]}}))
    """)
    assert got["loaded"] == [], got


def test_recording_frames_and_annotations_without_a_policy_never_imports_torch(tmp_path):
    got = _fresh(f"""
        import json, sys
        import gymnasium as gym
        import numpy as np
        own = [m for m in {HEAVY!r} if m in sys.modules]  # gymnasium's own imports (0.29: matplotlib)
        from rlviz import RecordEpisode
        env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), {str(tmp_path)!r},
                            episode_trigger=lambda k: True)
        before = [m for m in {HEAVY!r} if m in sys.modules and m not in own]
        for ep in range(2):
            env.reset(seed=ep)
            for t in range(6):
                if ep == 1:
                    env.annotate(logits=np.array([0.1 * t, -0.1 * t]), value=float(t))
                env.step(t % 2)
        env.close()
        print(json.dumps({{"before": before, "after": [m for m in {HEAVY!r} if m in sys.modules and m not in own]}}))
    """)
    assert got["before"] == []  # nothing heavy until the first video starts
    assert "torch" not in got["after"] and "matplotlib" not in got["after"], got
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4",
                                                          "rl-video-episode-1.npz"]


def test_the_writer_thread_runs_jobs_in_order_and_hands_errors_to_the_loop():
    from rlviz.record.writer import BackgroundWriter

    writer, done = BackgroundWriter(), []
    writer.submit(done.append, 1)
    writer.submit(lambda: (_ for _ in ()).throw(OSError("disk full")))
    writer.submit(done.append, 2)  # the jobs after a failure still run
    with pytest.raises(OSError, match="disk full"):
        writer.wait()
    assert done == [1, 2] and writer.idle
    writer.wait()  # the error was handed over once


def test_panel_videos_written_in_the_background_equal_those_written_in_step(tmp_path):
    from rlviz import RecordEpisode

    for background in (False, True):
        env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path / str(background),
                            options=RecordOptions(background=background), episode_trigger=lambda k: True)
        for ep in range(3):
            obs, _ = env.reset(seed=ep)
            for t in range(200):
                env.annotate(logits=np.array([-obs[2], obs[2]]) * 10, value=float(t))
                obs, _, term, trunc, _ = env.step(int(obs[2] > 0))
                if term or trunc:
                    break
            if not background:  # written inside step(): complete when the episode's last step returns
                assert (tmp_path / "False" / f"rl-video-episode-{ep}.npz").exists()
        env.close()
    for ep in range(3):
        a, b = (np.load(tmp_path / d / f"rl-video-episode-{ep}.npz") for d in ("False", "True"))
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])
        assert probe_video(tmp_path / "True" / f"rl-video-episode-{ep}.mp4").num_frames == len(a["rewards"]) + 1


def test_a_policys_panels_show_its_weights_when_the_episode_ended_not_when_drawn(tmp_path):
    import threading

    from rlviz import RecordEpisode

    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path, policy=net)
    release = threading.Event()
    env._writer.submit(release.wait)  # the writer's thread is busy until the training step below is done
    obs, _ = env.reset(seed=0)
    seen = [obs]
    for t in range(12):
        obs, _, term, trunc, _ = env.step(t % 2)
        seen.append(obs)
    env.reset(seed=1)  # ends episode 0: its numbers are computed now, its video drawn later
    with torch.no_grad():
        want = net(torch.as_tensor(np.stack(seen), dtype=torch.float32)).numpy()
        net.weight.add_(1.0)  # a training step before the writer draws episode 0
    release.set()
    env.close()
    got = np.load(tmp_path / "rl-video-episode-0.npz")["logits"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
