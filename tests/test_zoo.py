"""SB3 VecNormalize statistics and rl-zoo3 run folders: read safely, applied as SB3 does, rendered with no flags."""

from __future__ import annotations

import csv
import json
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import zoo_yaml

from rlviz.cli import main
from rlviz.errors import CheckpointError, UnsafeCheckpointError

sb3 = pytest.importorskip("stable_baselines3")
yaml = pytest.importorskip("yaml")


def _sb3_vecnormalize(run: Path, seed: int):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    venv = VecNormalize.load(str(run / "CartPole-v1" / "vecnormalize.pkl"), make_vec_env("CartPole-v1", n_envs=1))
    venv.training, venv.norm_reward = False, False
    venv.seed(seed)
    return venv


def test_vecnormalize_reader_equals_sb3(zoo_run):
    from rlviz.sources.stable_baselines3.vecnormalize import ObsNormalizer, read_vecnormalize

    _, run = zoo_run
    stats = read_vecnormalize(run / "CartPole-v1" / "vecnormalize.pkl")
    venv = _sb3_vecnormalize(run, 0)
    assert (stats.norm_obs, stats.clip_obs, stats.epsilon) == (True, venv.clip_obs, venv.epsilon)
    np.testing.assert_array_equal(stats.obs_mean, venv.obs_rms.mean)
    obs = np.random.default_rng(0).normal(0, 3, (64, 4)).astype(np.float32)
    np.testing.assert_array_equal(stats.normalize(obs), venv.normalize_obs(obs))
    import torch

    np.testing.assert_array_equal(ObsNormalizer(stats)(torch.as_tensor(obs)).numpy(), venv.normalize_obs(obs))


class _Payload:
    def __init__(self, target: Path):
        self.target = target

    def __reduce__(self):
        return (Path.touch, (self.target,))


def test_malicious_vecnormalize_is_refused_and_runs_nothing(zoo_run, tmp_path, capsys):
    from rlviz.sources.stable_baselines3.vecnormalize import read_vecnormalize

    _, run = zoo_run
    target = tmp_path / "pwned"
    bad = tmp_path / "vecnormalize.pkl"
    bad.write_bytes(pickle.dumps({"obs_rms": _Payload(target)}))
    with pytest.raises(UnsafeCheckpointError, match="pathlib"):
        read_vecnormalize(bad)
    assert main(["render", str(run), "--vecnormalize", str(bad), "--episodes", "1", "--videos", "none",
                 "--out", str(tmp_path / "out"), "--no-progress"]) == 1
    assert "refused without importing" in capsys.readouterr().err
    assert not target.exists()


def test_malicious_config_yml_builds_nothing(zoo_run, tmp_path):
    from rlviz.sources.checkpoint import load_agent

    model, run = zoo_run
    bad_run = tmp_path / "CartPole-v1_2"
    (bad_run / "CartPole-v1").mkdir(parents=True)
    (bad_run / "CartPole-v1.zip").write_bytes((run / "CartPole-v1.zip").read_bytes())
    target = tmp_path / "pwned"
    payload = f"!!python/object/apply:pathlib.Path.touch [!!python/object/apply:pathlib.Path [{str(target)!r}]]"
    (bad_run / "CartPole-v1" / "config.yml").write_text(f"policy: MlpPolicy\nunused: {payload}\n")
    (bad_run / "CartPole-v1" / "args.yml").write_text(f"env: CartPole-v1\nseed: {payload}\n")
    agent = load_agent(bad_run)  # the tagged values are inert data, never built
    assert agent.recipe.env_id == "CartPole-v1"
    (bad_run / "CartPole-v1" / "config.yml").write_text(f"normalize: {payload}\n")
    with pytest.raises(CheckpointError, match="does not build"):
        load_agent(bad_run)
    (bad_run / "CartPole-v1" / "args.yml").write_text("env: os:system\n")
    with pytest.raises(UnsafeCheckpointError, match="would import the module 'os'"):
        load_agent(bad_run)
    assert not target.exists()


def test_zoo_folder_renders_with_no_flags_as_sb3_under_vecnormalize(zoo_run, tmp_path):
    """Probabilities and values are SB3's on VecNormalize's normalised observations; --greedy returns equal
    evaluate_policy(deterministic=True) on the same per-episode seeds."""
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy

    model, run = zoo_run
    out = tmp_path / "out"
    assert main(["render", str(run), "--episodes", "3", "--greedy", "--videos", "first:1", "--out", str(out),
                 "--no-progress"]) == 0
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    for row in rows:  # one seeded episode at a time, as rlviz runs episode k with episode_seed_for(seed, k)
        returns, _ = evaluate_policy(model, _sb3_vecnormalize(run, int(row["seed"])), n_eval_episodes=1,
                                     deterministic=True, return_episode_rewards=True)
        assert float(row["return"]) == returns[0]
    (video,) = (out / "videos").glob("*.mp4")
    data = np.load(video.with_suffix(".npz"))
    venv = _sb3_vecnormalize(run, int(rows[0]["seed"]))
    venv.reset()
    raw = [venv.get_original_obs()[0]]
    for a in data["actions"][:-1]:
        venv.step(np.array([int(a)]))
        raw.append(venv.get_original_obs()[0])
    x = torch.as_tensor(venv.normalize_obs(np.stack(raw)))
    with torch.no_grad():
        probs = model.policy.get_distribution(x).distribution.probs.numpy()
        values = model.policy.predict_values(x)[:, 0].numpy()
    n = len(raw)  # the last step ends the episode; SB3's vec env then shows the next episode's first observation
    np.testing.assert_allclose(data["probs"][:n], probs, atol=1e-5)
    np.testing.assert_allclose(data["value"][:n], values, rtol=1e-5, atol=1e-5)
    assert json.loads((out / "summary.json").read_text())


def test_best_model_and_missing_statistics_warn(zoo_run, tmp_path):
    from rlviz.sources.checkpoint import load_agent

    _, run = zoo_run
    copy = tmp_path / "CartPole-v1_3"
    (copy / "CartPole-v1").mkdir(parents=True)
    (copy / "best_model.zip").write_bytes((run / "CartPole-v1.zip").read_bytes())
    for name in ("config.yml", "args.yml"):
        (copy / "CartPole-v1" / name).write_bytes((run / "CartPole-v1" / name).read_bytes())
    with pytest.warns(UserWarning, match="VecNormalize"):
        agent = load_agent(copy / "best_model.zip")
    assert agent.metadata["vecnormalize"] is True and agent.metadata["vecnormalize_stats"] is None
    (copy / "CartPole-v1" / "vecnormalize.pkl").write_bytes((run / "CartPole-v1" / "vecnormalize.pkl").read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent = load_agent(copy)
    assert agent.metadata["vecnormalize_stats"].endswith("vecnormalize.pkl")
    assert agent.gamma == pytest.approx(0.98)


def test_zoo_atari_config_rebuilds_sb3_atari_chain(tmp_path):
    from rlviz.envs.recipe import make_env
    from rlviz.sources.stable_baselines3.zoo import zoo_recipe

    config = yaml.safe_load("env_wrapper:\n  - stable_baselines3.common.atari_wrappers.AtariWrapper:\n"
                            "      terminal_on_life_loss: false\nframe_stack: 4\npolicy: CnnPolicy\n")
    recipe = zoo_recipe("BreakoutNoFrameskip-v4", {}, config, "config.yml")
    assert [w.name for w in recipe.wrappers] == ["sb3_atari", "sb3_frame_stack"]
    env = make_env(recipe, render_mode=None)
    assert env.reset(seed=0)[0].shape == (4, 84, 84)
    with pytest.raises(UnsafeCheckpointError, match="evil.module.Wrapper"):
        zoo_recipe("CartPole-v1", {}, {"env_wrapper": "evil.module.Wrapper"}, "config.yml")


def test_sb3_atari_chain_equals_make_atari_env(tmp_path):
    """Same seed and actions: observations, rewards and episode ends equal SB3's make_atari_env + VecFrameStack
    + VecTransposeImage (life loss and reward clipping off, as at evaluation), across an episode boundary."""
    pytest.importorskip("cv2")
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack, VecTransposeImage

    from rlviz.envs.recipe import EnvRecipe, WrapperSpec, make_env

    env_id = "BreakoutNoFrameskip-v4"  # has FIRE: the fire reset is rebuilt too
    ref = VecTransposeImage(VecFrameStack(make_atari_env(
        env_id, n_envs=1, seed=3, wrapper_kwargs={"terminal_on_life_loss": False, "clip_reward": False}), 4))
    mine = make_env(EnvRecipe(env_id, {}, (WrapperSpec("sb3_atari", {}), WrapperSpec("sb3_frame_stack", {}))),
                    render_mode=None)
    expected = ref.reset()
    obs, _ = mine.reset(seed=3)
    np.testing.assert_array_equal(obs, expected[0])
    rng, ends = np.random.default_rng(0), 0
    for _ in range(400):
        a = int(rng.integers(4))
        expected, reward, done, _ = ref.step(np.array([a]))
        obs, r, terminated, truncated, _ = mine.step(a)
        assert (r, terminated or truncated) == (reward[0], done[0])
        if done[0]:
            ends += 1
            obs, _ = mine.reset()
        np.testing.assert_array_equal(obs, expected[0])
    assert ends >= 1


def test_zoo_atari_run_folder_loads_with_sb3s_own_outputs(tmp_path):
    """An rl-zoo3 Atari run (AtariWrapper + frame_stack 4, CnnPolicy): the folder alone rebuilds the env, and the
    policy's probabilities on its observations equal SB3's ``get_distribution``."""
    import torch
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    from rlviz.envs.recipe import make_env
    from rlviz.sources.checkpoint import load_agent

    env_id = "PongNoFrameskip-v4"
    model = sb3.PPO("CnnPolicy", VecFrameStack(make_atari_env(env_id, n_envs=1, seed=0), 4), seed=0, device="cpu")
    run = tmp_path / "logs" / "ppo" / f"{env_id}_1"
    (run / env_id).mkdir(parents=True)
    model.save(run / f"{env_id}.zip")
    zoo_yaml(run / env_id / "config.yml", {"env_wrapper": ["stable_baselines3.common.atari_wrappers.AtariWrapper"],
                                           "frame_stack": 4, "policy": "CnnPolicy", "normalize": False})
    zoo_yaml(run / env_id / "args.yml", {"algo": "ppo", "env": env_id, "env_kwargs": None})
    agent = load_agent(run)
    env = make_env(agent.recipe, render_mode=None)
    obs = [env.reset(seed=0)[0]]
    for a in (1, 2, 3, 0, 2, 3, 1, 1):
        obs.append(env.step(a)[0])
    x = np.stack(obs)
    assert x.shape == (9, 4, 84, 84)
    with torch.no_grad():
        probs = model.policy.get_distribution(torch.as_tensor(x)).distribution.probs.numpy()
    np.testing.assert_allclose(agent.policy.evaluate(x).probs, probs, atol=1e-5)
