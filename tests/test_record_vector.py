"""RecordVectorEpisode: whole episodes of chosen sub-envs under every autoreset mode, Sync and Async, gymnasium 0.29
(this file also runs in the gymnasium-0.29.1 venv) and 1.x; results bit-identical to an unwrapped twin.

The probe env paints each frame with its step in the episode (left half) and its episode count (right half), so
a decoded video says which episode and which steps it holds."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

from rlviz.errors import UsageError
from rlviz.media.decode import probe_video, read_video
from rlviz.record import RecordOptions
from rlviz.record.vector import RecordVectorEpisode
from rlviz.record.vector_parts import NEXT_STEP, SAME_STEP

HAS_MODES = hasattr(gym.vector, "AutoresetMode")
MODES = ["NextStep", "SameStep", "Disabled"] if HAS_MODES else [None]


class Painted(gym.Env):
    """obs float32 [2] = (t, episode count); Discrete(2); reward = 1 + action; episodes of 3..9 steps drawn from
    the env's RNG, ended by termination or (one in three) truncation. Frames 48x48: left half 20*t, right half
    40 * (episode count mod 6) + 20."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 1e6, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t, self.count, self.L, self.cut = 0, -1, 3, False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.count = 0, self.count + 1
        self.L, self.cut = int(self.np_random.integers(3, 10)), bool(self.np_random.integers(0, 3) == 0)
        return np.array([0, self.count], np.float32), {"count": self.count}

    def step(self, action):
        self.t += 1
        end = self.t >= self.L
        obs = np.array([self.t, self.count], np.float32)
        return obs, 1.0 + float(action), end and not self.cut, end and self.cut, {"count": self.count}

    def render(self):
        frame = np.zeros((48, 48, 3), np.uint8)
        frame[:, :24] = min(20 * self.t, 255)
        frame[:, 24:] = 40 * (self.count % 6) + 20
        return frame


def make_vec(n=3, mode=None, kind="sync"):
    fns = [lambda: Painted(render_mode="rgb_array") for _ in range(n)]
    kwargs = {"autoreset_mode": mode} if mode is not None else {}
    if kind == "async":
        return gym.vector.AsyncVectorEnv(fns, **kwargs)
    return gym.vector.SyncVectorEnv(fns, **kwargs)


def drive(envs, twin, steps, seed=0, annotate=None):
    """Step envs and twin alike (seeded random actions), checking every result bit for bit; returns each sub-env's
    completed episodes as (count, length, terminated) and the infos seen."""
    rng = np.random.default_rng(seed)
    out_a, out_b = envs.reset(seed=seed), twin.reset(seed=seed)
    same_results(out_a, out_b)
    n = envs.num_envs
    disabled = getattr(envs, "autoreset_mode", None) == "disabled"
    lengths, episodes = np.zeros(n, int), [[] for _ in range(n)]
    counts = np.zeros(n, int)
    skip = np.zeros(n, bool)  # NEXT_STEP: the step after an episode's end is its reset
    for _ in range(steps):
        actions = rng.integers(0, 2, n)
        if annotate is not None:
            annotate(envs, rng)
        a, b = envs.step(actions), twin.step(actions)
        same_results(a, b)
        done = a[2] | a[3]
        for i in range(n):
            if skip[i]:
                skip[i], lengths[i], counts[i] = False, 0, counts[i] + 1
                continue
            lengths[i] += 1
            if done[i]:
                episodes[i].append((int(counts[i]), int(lengths[i]), bool(a[2][i])))
                if envs.autoreset_mode == SAME_STEP:
                    lengths[i], counts[i] = 0, counts[i] + 1
                else:
                    skip[i] = not disabled
        if disabled and done.any():
            same_results(envs.reset(options={"reset_mask": done}), twin.reset(options={"reset_mask": done}))
            for i in np.flatnonzero(done):
                lengths[i], counts[i] = 0, counts[i] + 1
    return episodes


def same_results(a, b):
    assert type(a) is type(b) and len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, dict):
            assert x.keys() == y.keys()
            for k in x:
                if isinstance(x[k], np.ndarray) and x[k].dtype != object:
                    assert x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k])
        else:
            x, y = np.asarray(x), np.asarray(y)
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def decoded_marks(path):
    """(steps painted on each frame, episode marks) read back from a video: frames-only videos hold the 48x48 frame
    as it is, panel videos scale it by 480 // 48 (ComposeOptions.display_height) at the top left."""
    steps, marks = [], []
    for frame in read_video(path):
        k = 1 if frame.shape[1] < 100 else 480 // 48
        steps.append(int(round(float(frame[8 * k:40 * k, 4 * k:20 * k].mean()) / 20)))
        marks.append(int(round((float(frame[8 * k:40 * k, 28 * k:44 * k].mean()) - 20) / 40)))
    return steps, marks


def check_videos(rec, episodes, indices):
    """Every completed episode of the recorded sub-envs is one video holding exactly its frames."""
    whole = [v for v in rec.recorded if v.terminated or v.truncated]
    for i in indices:
        got = sorted((v.episode_id, v.steps, v.terminated) for v in whole if v.env_index == i)
        assert got == sorted(episodes[i]), (i, got, episodes[i])
    for v in whole:
        length = v.steps
        expect = length if rec.autoreset_mode == SAME_STEP else length + 1
        assert v.frames == expect == probe_video(v.path).num_frames
        steps, marks = decoded_marks(v.path)
        assert steps == list(range(expect)), steps
        assert set(marks) == {v.episode_id % 6}


@pytest.mark.parametrize("mode", MODES)
def test_each_autoreset_mode_records_whole_episodes(tmp_path, mode):
    envs, twin = make_vec(3, mode), make_vec(3, mode)
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record=(0, 2), episode_trigger=lambda k: True,
                              options=RecordOptions(sinks=None))
    assert rec.autoreset_mode == {None: SAME_STEP, "NextStep": NEXT_STEP, "SameStep": SAME_STEP,
                                  "Disabled": "disabled"}[mode]
    episodes = drive(rec, twin, 80)
    rec.close(), twin.close()
    assert all(len(episodes[i]) >= 5 for i in (0, 2))
    check_videos(rec, episodes, (0, 2))
    assert not [v for v in rec.recorded if v.env_index == 1]
    names = {v.path.name for v in rec.recorded}
    assert "rl-video-env-0-episode-0.mp4" in names and "rl-video-env-2-episode-3.mp4" in names


@pytest.mark.parametrize("mode", [MODES[0], MODES[1]] if HAS_MODES else MODES)
def test_async_envs(tmp_path, mode):
    envs, twin = make_vec(2, mode, "async"), make_vec(2, mode, "sync")
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record=(1,), episode_trigger=lambda k: k % 2 == 0,
                              options=RecordOptions(sinks=None))
    episodes = drive(rec, twin, 50)
    rec.close(), twin.close()
    kept = [e for e in episodes[1] if e[0] % 2 == 0]
    check_videos(rec, [[], kept], (1,))
    assert {v.episode_id for v in rec.recorded} <= set(range(0, 40, 2))


def test_default_trigger_is_capped_cubic_on_sub_env_0(tmp_path):
    envs, twin = make_vec(2), make_vec(2)
    rec = RecordVectorEpisode(envs, tmp_path, options=RecordOptions(sinks=None))
    episodes = drive(rec, twin, 120)
    rec.close(), twin.close()
    assert len(episodes[0]) > 9
    whole = [v for v in rec.recorded if v.terminated or v.truncated]
    assert [v.episode_id for v in whole] == [0, 1, 8]
    assert {v.env_index for v in rec.recorded} == {0}


def test_close_mid_episode_finishes_the_video(tmp_path):
    envs = make_vec(2)
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record=(0, 1), episode_trigger=lambda k: True,
                              options=RecordOptions(sinks=None))
    rec.reset(seed=3)
    rec.step(np.array([0, 1]))
    rec.step(np.array([1, 1]))
    assert rec.recording
    rec.close()
    assert not rec.recording
    cut = [v for v in rec.recorded if not (v.terminated or v.truncated)]
    assert sorted(v.env_index for v in cut) == [0, 1]
    for v in cut:
        assert v.steps == 2 and v.frames == 3 and decoded_marks(v.path)[0] == [0, 1, 2]


def test_step_trigger_and_video_length(tmp_path):
    envs, twin = make_vec(2), make_vec(2)
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record=(0,), step_trigger=lambda s: s in (5, 30),
                              video_length=4, options=RecordOptions(sinks=None))
    drive(rec, twin, 40)
    rec.close(), twin.close()
    names = [v.path.name for v in rec.recorded]
    assert names == ["rl-video-env-0-step-5.mp4", "rl-video-env-0-step-30.mp4"]
    for v in rec.recorded:
        steps, marks = decoded_marks(v.path)
        assert 1 <= v.frames <= 5 and len(steps) == v.frames
        assert len(set(marks)) == 1  # never two episodes in one video
        assert steps == list(range(steps[0], steps[0] + len(steps)))


def test_grid(tmp_path):
    envs, twin = make_vec(3), make_vec(3)
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record="grid", step_trigger=lambda s: s % 20 == 0,
                              video_length=9, options=RecordOptions(grid_width=64, sinks=None))
    drive(rec, twin, 45)
    rec.close(), twin.close()
    assert [v.path.name for v in rec.recorded] == [f"rl-video-grid-step-{s}.mp4" for s in (0, 20, 40)]
    assert [v.frames for v in rec.recorded] == [10, 10, 6]
    info = probe_video(rec.recorded[0].path)
    assert info.num_frames == 10 and (info.width, info.height) == (64, 64)  # 2x2 tiles of 32x32 (48 shrunk)
    first = next(iter(read_video(rec.recorded[0].path)))
    assert abs(float(first[4:28, 20:28].mean()) - 20) < 6  # tile 0's right half: episode 0's mark
    assert float(first[36:60, 36:60].mean()) < 6  # the fourth tile is empty


def test_annotate_reads_only_recorded_rows_and_writes_npz(tmp_path):
    envs, twin = make_vec(3), make_vec(3)
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record=(1,), episode_trigger=lambda k: k < 2,
                              options=RecordOptions(sinks=None))
    seen = []

    class Tracked:  # a tensor look-alike: records which rows are read before the copy to the host
        def __init__(self, a):
            self.a, self.shape, self.ndim = a, a.shape, a.ndim

        def detach(self):
            return self

        def __getitem__(self, key):
            seen.append(key)
            return Tracked(self.a[key])

        def cpu(self):
            return self

        def numpy(self):
            return self.a

    def annotate(envs, rng):
        import torch

        logits = rng.normal(size=(3, 2)).astype(np.float32)
        value = rng.normal(size=(3, 1)).astype(np.float32)
        envs.annotate(logits=torch.from_numpy(logits), value=Tracked(value), q=np.arange(3.0))
        annotated.append((logits, value))

    annotated: list = []
    drive(rec, twin, 30, annotate=annotate)
    rec.close(), twin.close()
    assert seen and all(k == [1] for k in seen)
    first = rec.recorded[0]
    data = np.load(first.path.with_suffix(".npz"))
    assert first.terminated or first.truncated
    logits = np.stack([a[0][1] for a in annotated[:first.steps]])
    np.testing.assert_array_equal(data["logits"][:first.steps], logits)
    np.testing.assert_array_equal(data["value"][:first.steps], [a[1][1, 0] for a in annotated[:first.steps]])
    np.testing.assert_array_equal(data["extra_q"][:first.steps], 1.0)
    assert data["rewards"].shape == (first.steps,)
    info = probe_video(first.path)
    assert info.num_frames == first.frames and info.width > 48  # the panels beside the game


def test_annotate_value_alone(tmp_path):
    envs = make_vec(2)
    rec = RecordVectorEpisode(envs, tmp_path, episode_trigger=lambda k: k == 0, options=RecordOptions(sinks=None))
    rec.reset(seed=0)
    for _ in range(12):
        rec.annotate(value=np.array([0.5, 2.0]))
        rec.step(np.array([0, 0]))
    rec.close()
    data = np.load(rec.recorded[0].path.with_suffix(".npz"))
    assert np.all(data["value"] == 0.5) and np.isnan(data["logits"]).all()


def test_policy_computes_panels_for_recorded_steps_only(tmp_path):
    scale = [1.0]  # the "weights": changed by training once the recorded episode is over

    def policy(obs):
        return np.stack([obs[:, 0], -obs[:, 0]], 1) * scale[0], obs[:, 1]

    envs = make_vec(2)
    rec = RecordVectorEpisode(envs, tmp_path, episode_trigger=lambda k: k == 1, policy=policy,
                              options=RecordOptions(sinks=None))
    rec.reset(seed=0)
    ended = 0
    for _ in range(25):
        out = rec.step(np.array([1, 0]))
        ended += bool(out[2][0] or out[3][0])
        if ended == 2:  # episode 1 of sub-env 0 is over: training changes the weights
            scale[0] = 100.0
    rec.close()
    assert scale[0] == 100.0
    video = rec.recorded[0]
    data = np.load(video.path.with_suffix(".npz"))
    assert video.episode_id == 1 and data["logits"].shape == (video.steps + 1, 2)
    np.testing.assert_array_equal(data["logits"][:, 0], np.arange(video.steps + 1))
    np.testing.assert_array_equal(data["value"], 1.0)  # the episode count seen in its observations


def test_errors(tmp_path):
    envs = make_vec(2)
    with pytest.raises(UsageError, match="envs_to_record"):
        RecordVectorEpisode(envs, tmp_path, envs_to_record=(2,))
    with pytest.raises(UsageError, match="envs_to_record"):
        RecordVectorEpisode(envs, tmp_path, envs_to_record="all")
    bare = gym.vector.SyncVectorEnv([lambda: Painted() for _ in range(2)])
    with pytest.raises(ValueError, match="render_mode"):
        RecordVectorEpisode(bare, tmp_path)
    rec = RecordVectorEpisode(envs, tmp_path, episode_trigger=lambda k: True, options=RecordOptions(sinks=None))
    rec.reset(seed=0)
    with pytest.raises(UsageError, match="one per sub-env"):
        rec.annotate(value=np.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.close()


def episode_ends(rec, i, steps):
    """Step a 2-env recorder ``steps`` times from a seeded reset, then close it; the env steps (step() calls x 2) at
    which sub-env ``i``'s episodes ended."""
    rec.reset(seed=0)
    ends = []
    for _ in range(steps):
        out = rec.step(np.array([1, 1]))
        if out[2][i] or out[3][i]:
            ends.append(rec.step_id * 2)
    rec.close()
    return ends


def test_videos_go_to_tensorboard_at_their_env_step(tmp_path):
    pytest.importorskip("tensorboard")
    from conftest import tb_accumulator
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "runs"))
    envs = make_vec(2)
    rec = RecordVectorEpisode(envs, tmp_path / "videos", episode_trigger=lambda k: k in (0, 2),
                              options=RecordOptions(sinks=writer))
    ends = episode_ends(rec, 0, 40)
    writer.close()
    acc = tb_accumulator(tmp_path / "runs")
    steps = [e.step for e in acc.Images("videos/env-0")]
    assert steps == [ends[0], ends[2]] and len(rec.recorded) == 2


def test_videos_go_to_the_active_wandb_run(tmp_path, wandb_offline, no_network):
    import glob
    from pathlib import Path

    import wandb
    from conftest import wandb_flushed, wandb_items, wandb_records

    run = wandb.init(project="rlviz-test", dir=str(wandb_offline))
    envs = make_vec(2)
    rec = RecordVectorEpisode(envs, tmp_path / "videos", envs_to_record=(1,), episode_trigger=lambda k: k == 1)
    ends = episode_ends(rec, 1, 25)
    run.finish()
    wandb_flushed()
    (video,) = rec.recorded
    (log,) = Path(glob.glob(str(wandb_offline / "wandb" / "offline-run-*"))[0]).glob("run-*.wandb")
    rows = [wandb_items(r.history.item) for r in wandb_records(log) if r.WhichOneof("record_type") == "history"]
    logged = [row for row in rows if ("videos/env-1", "_type") in row]
    assert len(logged) == 1 and logged[0][("videos/env-1", "_type")] == "video-file"
    assert logged[0][("global_step",)] == ends[1]
    assert not no_network[0]


def test_writing_in_the_loops_thread_gives_the_same_videos(tmp_path):
    from rlviz.record.episode_video import RecordOptions

    got = {}
    for background in (True, False):
        envs, twin = make_vec(2), make_vec(2)
        rec = RecordVectorEpisode(envs, tmp_path / str(background), envs_to_record=(0, 1),
                                  episode_trigger=lambda k: k % 2 == 1,
                                  options=RecordOptions(background=background, sinks=None))
        episodes = drive(rec, twin, 40, annotate=lambda e, rng: e.annotate(value=rng.normal(size=2)))
        if not background:  # without the writer thread a finished episode's video is complete at once
            assert all(v.path.is_file() for v in rec.recorded)
        rec.close(), twin.close()
        check_videos(rec, [[e for e in eps if e[0] % 2 == 1] for eps in episodes], (0, 1))
        got[background] = [(v.path.name, v.frames) for v in rec.recorded]
    assert got[True] == got[False]


def test_recording_with_annotations_imports_no_torch(tmp_path):
    """Recording, annotating and drawing panels need no torch: only ``policy=`` brings it in."""
    import subprocess
    import sys

    code = f"""
import sys
import gymnasium as gym
import numpy as np
import rlviz
envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array") for _ in range(2)])
envs = rlviz.RecordVectorEpisode(envs, {str(tmp_path)!r}, envs_to_record=(0, 1), episode_trigger=lambda k: k == 0)
envs.reset(seed=0)
for _ in range(30):
    envs.annotate(logits=np.zeros((2, 2)), value=np.ones(2))
    envs.step(np.array([0, 1]))
envs.close()
assert len(envs.recorded) == 2 and all(v.path.with_suffix(".npz").is_file() for v in envs.recorded)
print(sorted(m for m in ("torch", "moviepy") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_reset_mid_episode_cuts_the_video_there(tmp_path):
    envs = make_vec(2)
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record=(1,), episode_trigger=lambda k: True,
                              options=RecordOptions(sinks=None))
    rec.reset(seed=5)
    rec.step(np.array([0, 0]))
    rec.reset(seed=6)  # the training code starts over: the episode in progress ends here, cut
    rec.step(np.array([0, 0]))
    rec.close()
    first, second = rec.recorded
    assert (first.path.name, first.steps, first.frames, first.terminated, first.truncated) == (
        "rl-video-env-1-episode-0.mp4", 1, 2, False, False)
    assert second.path.name == "rl-video-env-1-episode-1.mp4" and decoded_marks(second.path) == ([0, 1], [1, 1])


def test_gaussian_outputs_on_box_actions(tmp_path):
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1", render_mode="rgb_array", max_episode_steps=12)
                                     for _ in range(2)])
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record=(1,), episode_trigger=lambda k: k == 0,
                              options=RecordOptions(sinks=None))
    rec.reset(seed=0)
    means = []
    for t in range(12):
        mean = np.array([[0.1 * t], [-0.1 * t]], np.float32)
        rec.annotate(mean=mean, log_std=np.full((2, 1), -1.0, np.float32), value=np.array([1.0, 2.0]))
        means.append(mean[1, 0])
        rec.step(mean)
    rec.close()
    (video,) = rec.recorded
    data = np.load(video.path.with_suffix(".npz"))
    assert video.truncated and video.steps == 12
    np.testing.assert_allclose(data["mean"][:12, 0], means, rtol=1e-6)
    np.testing.assert_allclose(data["std"][:12, 0], np.exp(-1.0), rtol=1e-6)
    np.testing.assert_array_equal(data["value"], 2.0)
