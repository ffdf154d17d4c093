"""VecRecordEpisode, the drop-in for Stable-Baselines3's VecVideoRecorder: SB3's own test_video_recorder ported
(same arguments, same file names, no moviepy), the frames decoded back, and model= drawing the model's numbers."""

from __future__ import annotations

import numpy as np
import pytest

sb3 = pytest.importorskip("stable_baselines3")
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import VecEnvWrapper, VecNormalize  # noqa: E402

from rlviz.errors import UsageError  # noqa: E402
from rlviz.integrations.sb3 import VecRecordEpisode  # noqa: E402
from rlviz.media.decode import probe_video, read_video  # noqa: E402
from rlviz.record import RecordOptions  # noqa: E402


class KeepObs(VecEnvWrapper):
    """Keeps every observation it passes on (to check the panels' numbers against the model's)."""

    def __init__(self, venv):
        super().__init__(venv)
        self.seen = []

    def reset(self):
        obs = self.venv.reset()
        self.seen.append(obs.copy())
        return obs

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        self.seen.append(obs.copy())
        return obs, rewards, dones, infos


def cartpole(n=1):
    return make_vec_env("CartPole-v1", n_envs=n, seed=0, env_kwargs={"render_mode": "rgb_array"})


def test_video_recorder(tmp_path, no_moviepy):
    """SB3's tests/test_vec_envs.py::test_video_recorder, with VecRecordEpisode in VecVideoRecorder's place."""
    env_id = "CartPole-v1"
    vec_env = VecNormalize(cartpole())  # wrapped, to check unwrapping works
    vec_env = VecRecordEpisode(vec_env, str(tmp_path), record_video_trigger=lambda x: x % 65 == 0, video_length=10,
                               name_prefix=f"agent-{env_id}", options=RecordOptions(sinks=None))
    assert vec_env.frames_per_sec == 50 and vec_env.video_folder == str(tmp_path.resolve())
    model = sb3.PPO("MlpPolicy", vec_env, n_steps=64, n_epochs=1, verbose=0, device="cpu")
    model.learn(total_timesteps=128)
    video_files = sorted(map(str, tmp_path.glob("*.mp4")), reverse=True)
    vec_env.close()
    assert len(video_files) == 2
    assert "agent-CartPole-v1-step-65-to-step-75.mp4" in video_files[0]
    assert "agent-CartPole-v1-step-0-to-step-10.mp4" in video_files[1]
    for path in video_files:
        info = probe_video(path)
        assert info.codec == "h264" and info.pix_fmt == "yuv420p" and info.num_frames == 11  # video_length + 1
        assert (info.width, info.height) == (608, 400)  # CartPole's 600x400, padded to 16
    assert not no_moviepy
    assert not vec_env.recording and vec_env.step_id == 128


def test_attributes_and_close_mid_video(tmp_path):
    vec_env = VecRecordEpisode(cartpole(2), str(tmp_path), lambda x: x == 3, video_length=50,
                               options=RecordOptions(sinks=None))
    vec_env.reset()
    assert not vec_env.recording
    for _ in range(5):
        vec_env.step(np.zeros(2, dtype=np.int64))
    assert vec_env.recording and len(vec_env.recorded_frames) == 3
    assert vec_env.video_name == "rl-video-step-3-to-step-53.mp4"
    vec_env.close()
    info = probe_video(vec_env.video_path)
    assert info.num_frames == 3 and (info.width, info.height) == (608, 800)  # SB3 tiles two sub-envs one above the other
    with pytest.raises(UsageError, match="video_length"):
        VecRecordEpisode(cartpole(), str(tmp_path), lambda x: True, video_length=0)


def test_model_panels_hold_the_models_numbers(tmp_path):
    import torch

    inner = KeepObs(cartpole(2))
    vec_env = VecRecordEpisode(inner, str(tmp_path), lambda x: x == 0, video_length=10, env_index=1,
                               options=RecordOptions(sinks=None))
    model = sb3.PPO("MlpPolicy", vec_env, n_steps=64, n_epochs=1, verbose=0, device="cpu", seed=0)
    vec_env.model = model
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}  # the video ends before the first update
    model.learn(total_timesteps=128)
    vec_env.close()
    (video,) = vec_env.videos
    assert video.name == "rl-video-step-0-to-step-10.mp4"
    data = np.load(video.with_suffix(".npz"))
    model.policy.load_state_dict(before)
    obs = torch.as_tensor(np.stack([o[1] for o in inner.seen[:11]]))
    with torch.no_grad():
        logits = model.policy.get_distribution(obs).distribution.logits.numpy()
        values = model.policy.predict_values(obs).numpy()[:, 0]
    np.testing.assert_allclose(data["logits"], logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data["value"], values, rtol=1e-5, atol=1e-5)
    assert data["rewards"].shape == (10,)
    info = probe_video(video)
    assert info.num_frames == 11 and info.width > 608  # panels beside the game
    frame = next(iter(read_video(video)))
    assert frame[:400, :600].std() > 5


class KeepDictObs(KeepObs):
    """KeepObs for Dict observations (a dict of batched arrays per step)."""

    def reset(self):
        obs = self.venv.reset()
        self.seen.append({k: v.copy() for k, v in obs.items()})
        return obs

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        self.seen.append({k: v.copy() for k, v in obs.items()})
        return obs, rewards, dones, infos


def test_model_panels_of_a_dict_observation_agent_with_a_channels_last_image(tmp_path):
    """MultiInputPolicy on a Dict env whose image key is channels last: SB3 puts its VecTransposeImage outside the
    recorder, so the recorder sees the image as the env gives it and the policy takes it so (it failed with a
    KeyError on the Dict batch before)."""
    import gymnasium as gym
    import torch
    from gymnasium import spaces
    from stable_baselines3.common.vec_env import DummyVecEnv

    class DictImage(gym.Env):
        metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

        def __init__(self):
            self.render_mode = "rgb_array"
            self.observation_space = spaces.Dict({"image": spaces.Box(0, 255, (36, 36, 3), np.uint8),
                                                  "vec": spaces.Box(-1, 1, (2,), np.float32)})
            self.action_space = spaces.Discrete(3)
            self.t = 0

        def _obs(self):
            img = np.zeros((36, 36, 3), np.uint8)
            img[self.t % 36, :, self.t % 3] = 255
            return {"image": img, "vec": np.array([self.t / 10, -0.5], np.float32)}

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return self._obs(), {}

        def step(self, action):
            self.t += 1
            return self._obs(), float(action == 1), self.t >= 12, False, {}

        def render(self):
            frame = np.zeros((48, 48, 3), np.uint8)
            frame[:, : 4 * self.t] = 200
            return frame

    inner = KeepDictObs(DummyVecEnv([DictImage]))
    vec_env = VecRecordEpisode(inner, str(tmp_path), lambda x: x == 0, video_length=8,
                               options=RecordOptions(sinks=None))
    model = sb3.PPO("MultiInputPolicy", vec_env, n_steps=16, batch_size=16, n_epochs=1, verbose=0, device="cpu",
                    seed=0)
    assert model.policy.observation_space["image"].shape == (3, 36, 36)  # (SB3 transposes it outside the recorder)
    vec_env.model = model
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}  # the video ends before the first update
    model.learn(total_timesteps=32)
    vec_env.close()
    (video,) = vec_env.videos
    data = np.load(video.with_suffix(".npz"))
    model.policy.load_state_dict(before)
    seen = inner.seen[:9]
    obs = {"image": torch.as_tensor(np.stack([o["image"][0] for o in seen]).transpose(0, 3, 1, 2)),
           "vec": torch.as_tensor(np.stack([o["vec"][0] for o in seen]))}
    with torch.no_grad():
        logits = model.policy.get_distribution(obs).distribution.logits.numpy()
        values = model.policy.predict_values(obs).numpy()[:, 0]
    np.testing.assert_allclose(data["logits"], logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data["value"], values, rtol=1e-5, atol=1e-5)
    assert probe_video(video).num_frames == 9
