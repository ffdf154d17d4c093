"""Several MuJoCo cameras in one frame (#46): ``--camera`` / ``RecordOptions(camera=...)`` tile the views left to
right; an unknown camera is refused in one line naming the model's cameras. Videos are decoded back."""

from __future__ import annotations

import importlib
import importlib.util

import gymnasium as gym
import numpy as np
import pytest
import torch
from _envs import played_frames
from torch import nn

from rlviz.errors import UsageError
from rlviz.options import camera_list

needs_mujoco = pytest.mark.skipif(importlib.util.find_spec("mujoco") is None,
                                  reason="the MuJoCo family needs mujoco (rlviz[dev])")


def _make(env_id: str, **kwargs) -> gym.Env:
    from rlviz.envs import make_env  # (picks the headless OpenGL backend before mujoco loads)

    make_env(env_id, render_mode=None).close()
    return gym.make(env_id, render_mode="rgb_array", **kwargs)


def _actions(n: int, dims: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.uniform(-1, 1, dims).astype(np.float32) for _ in range(n)]


def _frames(env: gym.Env, actions: list[np.ndarray]) -> list[np.ndarray]:
    return played_frames(env, actions, seed=5)


def test_camera_list_parses_and_refuses_empty_names():
    assert camera_list("track, 0") == ("track", "0") and camera_list(["track", 0]) == ("track", "0")
    assert camera_list(None) == () == camera_list("")
    with pytest.raises(UsageError, match="empty name"):
        camera_list("track,,0")


@needs_mujoco
def test_two_cameras_give_a_frame_twice_as_wide_each_half_its_camera_decoded_from_the_mp4(tmp_path):
    from rlviz import RecordEpisode
    from rlviz.media import probe_video, read_video
    from rlviz.record import RecordOptions

    actions = _actions(6, 6)
    # MuJoCo's free camera (id -1) against the model's camera 0: two views whatever the env's own view is
    # (gymnasium 1.3's HalfCheetah renders from "track" by default, earlier releases from the free camera)
    own = _frames(_make("HalfCheetah-v5", camera_id=-1), actions)
    track = _frames(_make("HalfCheetah-v5", camera_name="track"), actions)  # the model's camera 0
    assert not np.array_equal(own[3], track[3])  # two different views
    env = RecordEpisode(_make("HalfCheetah-v5"), tmp_path, episode_trigger=lambda k: True,
                        options=RecordOptions(camera="free,track"))
    env.reset(seed=5)
    for a in actions:
        env.step(a)
    env.close()
    path = env.last_video_path
    info = probe_video(path)
    h, w = own[0].shape[:2]
    assert (info.width, info.height, info.num_frames) == (2 * w, h, len(actions) + 1)
    for got, left, right in zip(read_video(path), own, track):
        assert np.abs(got[:, :w].astype(int) - left).mean() < 3.0  # H.264, not bit-exact
        assert np.abs(got[:, w:].astype(int) - right).mean() < 3.0
        assert np.abs(got[:, w:].astype(int) - left).mean() > 3.0  # (the right half is not the own view again)


class Gaussian(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.pi = nn.Linear(11, 3)

    def forward(self, x):
        mean = self.pi(x)
        return {"mean": mean, "std": torch.full_like(mean, 0.3), "value": x[:, 0] * 0}


def _render(tmp_path, name: str, *extra: str) -> int:
    from rlviz.cli import main

    path = tmp_path / "agent.pt"
    if not path.exists():
        torch.save(Gaussian(), path)
    return main(["render", str(path), "--env", "Hopper-v5", "--trust-checkpoint", "--episodes", "1", "--videos",
                 "first:1", "--out", str(tmp_path / name), "--no-progress", *extra])


@needs_mujoco
def test_render_camera_widens_the_video_by_one_body_view_and_an_unknown_camera_lists_the_models(tmp_path, capsys):
    from rlviz.media import probe_video, read_video

    assert _render(tmp_path, "one") == 0
    assert _render(tmp_path, "two", "--camera", "track,0") == 0
    one, two = (next((tmp_path / n / "videos").glob("*.mp4")) for n in ("one", "two"))
    a, b = probe_video(one), probe_video(two)
    assert b.width - a.width == 480 and b.height == a.height and b.num_frames == a.num_frames
    # "track" is camera 0 of Hopper's model: the two tiles are the same view
    frame = next(iter(read_video(two)))
    assert np.abs(frame[:480, :480].astype(int) - frame[:480, 480:960]).mean() < 2.0
    capsys.readouterr()
    assert _render(tmp_path, "bad", "--camera", "side") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--camera 'side': Hopper-v5 has no such camera; its cameras: default (the env's own "
                            "view), free (-1), 0 (track).")


def test_camera_on_an_env_without_cameras_is_refused_in_one_line():
    from rlviz.envs import with_cameras

    with pytest.raises(UsageError, match="CartPole-v1, which is not a MuJoCo env"):
        with_cameras(gym.make("CartPole-v1", render_mode="rgb_array"), "0")
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    assert with_cameras(env, None) is env and with_cameras(env, "default") is env


def _dm_control_env(**kwargs) -> gym.Env:
    """dm_control's cheetah-run through Shimmy, or a skip where dm_control cannot build a model here (dm_control
    1.0.50 needs mujoco 3.x: under mujoco 4.0 ``MjModel has no attribute 'flex_vertedge'``)."""
    pytest.importorskip("shimmy")
    pytest.importorskip("dm_control")
    import shimmy

    from rlviz.envs.headless import choose_gl

    choose_gl("dm_control/cheetah-run-v0")
    gym.register_envs(shimmy)
    try:
        env = gym.make("dm_control/cheetah-run-v0", render_mode="rgb_array", **kwargs)
        env.reset(seed=0)
    except AttributeError as exc:
        pytest.skip(f"dm_control cannot build a model with this mujoco: {exc}")
    return env


def test_dm_control_cameras_tile_by_name():
    from rlviz.envs import with_cameras

    back = _dm_control_env(render_kwargs={"camera_id": 1})
    want_back = back.render()
    env = with_cameras(_dm_control_env(), "default,back")
    frame = env.render()
    h, w = want_back.shape[:2]
    assert frame.shape == (h, 2 * w, 3)
    np.testing.assert_array_equal(frame[:, w:], want_back)
    with pytest.raises(UsageError, match=r"no such camera; its cameras: .*0 \(side\), 1 \(back\)\."):
        with_cameras(_dm_control_env(), "top")


# -- the vector recorders and the CLI refuse an unknown camera when made, before any episode -----------------------
def _hopper(**kwargs):
    return lambda: _make("Hopper-v5", **kwargs)


def _decoded_halves(path, w: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from rlviz.media import read_video

    return [(f[:, :w].astype(int), f[:, w : 2 * w].astype(int)) for f in read_video(path)]


@needs_mujoco
def test_record_vector_episode_tiles_the_cameras_of_its_sub_envs(tmp_path):
    from rlviz.media import probe_video
    from rlviz.record import RecordOptions
    from rlviz.record.vector import RecordVectorEpisode

    actions = _actions(4, 3)
    own, track = _frames(_make("Hopper-v5", camera_id=-1), actions), _frames(_make("Hopper-v5", camera_name="track"), actions)
    envs = gym.vector.SyncVectorEnv([_hopper(), _hopper()])
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record=(0,), episode_trigger=lambda k: True,
                              options=RecordOptions(sinks=None, camera="free,track"))
    rec.reset(seed=5)
    for a in actions:
        rec.step(np.stack([a, a]))
    rec.close()
    (video,) = rec.recorded
    h, w = own[0].shape[:2]
    info = probe_video(video.path)
    assert (info.width, info.height, info.num_frames) == (2 * w, h, len(actions) + 1)
    for (left, right), a, b in zip(_decoded_halves(video.path, w), own, track):
        # H.264, not bit-exact (Hopper's frames decode within 4 grey levels on average, as RecordEpisode's do)
        assert np.abs(left - a).mean() < 5.0 and np.abs(right - b).mean() < 5.0 < np.abs(right - a).mean()


@needs_mujoco
def test_vector_recorders_refuse_an_unknown_camera_when_made(tmp_path):
    from rlviz.record import RecordOptions
    from rlviz.record.vector import RecordVectorEpisode

    listed = r"--camera 'side': Hopper-v5 has no such camera; its cameras: default \(the env's own view\), free " \
             r"\(-1\), 0 \(track\)\.$"
    from rlviz import RecordEpisode

    with pytest.raises(UsageError, match=listed):
        RecordEpisode(_make("Hopper-v5"), tmp_path, options=RecordOptions(camera="side"))
    with pytest.raises(UsageError, match=listed):
        RecordVectorEpisode(gym.vector.SyncVectorEnv([_hopper()]), tmp_path, options=RecordOptions(camera="side"))
    pooled = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array")])
    try:
        with pytest.raises(UsageError, match="sub-envs render in their own processes; use a SyncVectorEnv"):
            RecordVectorEpisode(pooled, tmp_path, options=RecordOptions(camera="track"))
    finally:
        pooled.close()
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    from rlviz.integrations.sb3 import VecRecordEpisode

    with pytest.raises(UsageError, match=listed):
        VecRecordEpisode(vec_env.DummyVecEnv([_hopper()]), str(tmp_path), lambda s: True,
                         options=RecordOptions(camera="side"))


@needs_mujoco
def test_vec_record_episode_tiles_the_cameras_with_and_without_a_model(tmp_path):
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv

    from rlviz.integrations.sb3 import VecRecordEpisode
    from rlviz.media import probe_video
    from rlviz.record import RecordOptions

    actions = _actions(3, 3)
    own, track = _frames(_make("Hopper-v5", camera_id=-1), actions), _frames(_make("Hopper-v5", camera_name="track"), actions)
    h, w = own[0].shape[:2]
    for model in (None, "ppo"):
        venv = DummyVecEnv([_hopper()])
        venv.seed(5)
        rec = VecRecordEpisode(venv, str(tmp_path / str(model)), lambda s: s == 0, video_length=len(actions),
                               options=RecordOptions(sinks=None, camera="free,track"),
                               model=sb3.PPO("MlpPolicy", venv, seed=0, device="cpu") if model else None)
        rec.reset()
        for a in actions:
            rec.step(a[None])
        rec.close()
        (path,) = rec.videos
        info = probe_video(path)
        if model is None:  # the frames alone: SB3's tiling of its one sub-env, that sub-env's two cameras
            assert (info.width, info.height, info.num_frames) == (2 * w, h, len(actions) + 1)
            for (left, right), a, b in zip(_decoded_halves(path, w), own, track):
                assert np.abs(left - a).mean() < 5.0 and np.abs(right - b).mean() < 5.0 < np.abs(right - a).mean()
        else:  # beside the model's panels: the game column is the two cameras' frame
            assert info.width >= 2 * w + 400


@needs_mujoco
def test_render_and_compare_refuse_an_unknown_camera_before_the_rollout(tmp_path, capsys, monkeypatch):
    from rlviz.cli import main

    def no_rollout(*args, **kwargs):
        raise AssertionError("the rollout ran before the camera was checked")

    said = "Hopper-v5 has no such camera; its cameras: default (the env's own view), free (-1), 0 (track)."
    monkeypatch.setattr(importlib.import_module("rlviz.jobs.render"), "run_rollouts", no_rollout)
    assert _render(tmp_path, "bad", "--camera", "side") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(said)
    monkeypatch.setattr(importlib.import_module("rlviz.jobs.compare"), "_compare_into", no_rollout)
    agent = str(tmp_path / "agent.pt")
    assert main(["compare", agent, agent, "--env", "Hopper-v5", "--trust-checkpoint", "--episodes", "2", "--camera",
                 "side", "--out", str(tmp_path / "cmp"), "--no-progress"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(said)
