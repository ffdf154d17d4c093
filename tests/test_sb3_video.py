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
