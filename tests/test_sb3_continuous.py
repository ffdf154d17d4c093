"""SB3 SAC, TD3, DDPG, sb3-contrib TQC and PPO / A2C with Box and MultiDiscrete actions, loaded from their zips
(nothing unpickled) and rendered through the CLI: the recorded means, stds, values and actions equal SB3's own on
the same observations, and ``--greedy`` returns equal ``evaluate_policy(deterministic=True)`` on the same seeds."""

from __future__ import annotations

import csv
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch
from _zips import rewrite_sb3_data

from rlviz.agent.actions import sample_actions
from rlviz.cli import main
from rlviz.errors import EnvError, UnsafeCheckpointError, UsageError
from rlviz.sources.adapters import to_policy
from rlviz.sources.checkpoint import load_agent

sb3 = pytest.importorskip("stable_baselines3")
torch.set_num_threads(1)  # tiny networks: one thread trains them faster, above all on a shared machine

OFF_POLICY = ("SAC", "TD3", "DDPG", "TQC")
#: small networks, 100 gradient steps after 100 random ones: seconds to train
_OFF_KW = {"learning_starts": 100, "train_freq": 2, "buffer_size": 1000, "batch_size": 32, "seed": 0, "device": "cpu"}


def _algo(name: str):
    if name == "TQC":
        return pytest.importorskip("sb3_contrib").TQC, {"policy_kwargs": {"net_arch": [32, 32], "n_quantiles": 5}}
    return getattr(sb3, name), {"policy_kwargs": {"net_arch": [32, 32]}}


@pytest.fixture(scope="module", params=OFF_POLICY)
def off_policy(request, tmp_path_factory):
    cls, kw = _algo(request.param)
    model = cls("MlpPolicy", "Pendulum-v1", **_OFF_KW, **kw)
    model.learn(300)
    path = tmp_path_factory.mktemp(request.param) / f"{request.param.lower()}.zip"
    model.save(path)
    return request.param, model, path


def _pendulum_observations(n: int = 48) -> np.ndarray:
    env, out = gym.make("Pendulum-v1"), []
    obs, _ = env.reset(seed=1)
    for _ in range(n):
        out.append(obs)
        obs, *_ = env.step(env.action_space.sample())
    return np.stack(out)


def _sb3_outputs(name: str, model, obs: np.ndarray) -> dict:
    """What SB3's own modules say for ``obs``: mean / std (stochastic actors), value, deterministic action."""
    x = torch.as_tensor(obs)
    p = model.policy
    with torch.no_grad():
        ref = {"action": model.predict(obs, deterministic=True)[0]}
        if name in ("SAC", "TQC"):
            mean, log_std, _ = p.actor.get_action_dist_params(x)
            q = p.critic(x, torch.tanh(mean))
            ref["value"] = (q.mean(dim=(1, 2)) if name == "TQC" else torch.cat(q, 1).min(1).values).numpy()
            ref["mean"], ref["std"] = mean.numpy(), log_std.exp().numpy()
        else:
            ref["mean"], ref["std"] = ref["action"], None
            ref["value"] = p.critic.q1_forward(x, p.actor(x))[:, 0].numpy()
    return ref


def _check_outputs(name: str, out, ref: dict) -> None:
    np.testing.assert_allclose(out.mean, ref["mean"], rtol=1e-5, atol=1e-5)
    if ref["std"] is None:
        assert out.std is None and not out.squash
    else:
        assert out.squash
        np.testing.assert_allclose(out.std, ref["std"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.value, ref["value"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sample_actions(out, np.random.default_rng(0), greedy=True), ref["action"], rtol=1e-5, atol=1e-5)


def test_outputs_equal_sb3s_own_and_nothing_is_unpickled(off_policy, monkeypatch):
    name, model, path = off_policy

    def refuse(*_, **__):
        raise AssertionError("unpickled")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr("cloudpickle.loads", refuse)
    agent = load_agent(path, env="Pendulum-v1")
    monkeypatch.undo()
    assert (agent.kind, agent.metadata["algorithm"]) == ("actor_critic", name)
    obs = _pendulum_observations()
    ref = _sb3_outputs(name, model, obs)
    assert np.ptp(ref["mean"]) > 0.01 and np.ptp(ref["value"]) > 0.01  # the states are told apart
    _check_outputs(name, agent.policy.evaluate(obs), ref)
    _check_outputs(name, to_policy(model, device="cpu").evaluate(obs), ref)  # the live model too
    _check_outputs(name, load_agent(path, env="Pendulum-v1", trust=True).policy.evaluate(obs), ref)  # SB3's loader


def _replayed_observations(env_id: str, seed: int, actions: np.ndarray) -> np.ndarray:
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for a in actions:
        obs, *_ = env.step(a)
        out.append(obs)
    return np.stack(out)


def _evaluate_policy_returns(model, env_id: str, seeds) -> list[float]:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    returns = []
    for seed in seeds:
        venv = make_vec_env(env_id, n_envs=1)
        venv.seed(seed)
        r, _ = evaluate_policy(model, venv, n_eval_episodes=1, deterministic=True, return_episode_rewards=True)
        returns.append(r[0])
    return returns


def _assert_same_returns(rows: list[dict], expected: list[float], box: bool) -> None:
    """Discrete actions: the same returns exactly. Box actions: to 1e-5 relative (about 0.015 on Pendulum's
    -1500): SB3's Monitor rounds returns to 6 decimals, and a float32 action may differ in its last bits between
    a batched forward pass and SB3's one-observation one (more on CPUs whose kernels differ), which Pendulum's
    dynamics carry on."""
    got = [float(r["return"]) for r in rows]
    if box:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=0)
    else:
        assert got == expected


def _render(path, env_id: str, out, *extra) -> list[dict]:
    assert main(["render", str(path), "--env", env_id, "--episodes", "3", "--out", str(out), "--no-progress",
                 *extra]) == 0
    return list(csv.DictReader((out / "episodes.csv").open()))


def test_cli_greedy_returns_equal_evaluate_policy_and_the_video_records_sb3s_outputs(off_policy, tmp_path):
    name, model, path = off_policy
    out = tmp_path / "out"
    rows = _render(path, "Pendulum-v1", out, "--greedy", "--videos", "first:1")
    seeds = [int(r["seed"]) for r in rows]
    _assert_same_returns(rows, _evaluate_policy_returns(model, "Pendulum-v1", seeds), box=True)
    (video,) = (out / "videos").glob("*.mp4")
    data = np.load(video.with_suffix(".npz"))
    obs = _replayed_observations("Pendulum-v1", seeds[0], data["actions"])
    assert len(obs) == 201  # Pendulum's time limit: the whole episode was recorded
    ref = _sb3_outputs(name, model, obs)
    np.testing.assert_allclose(data["mean"], ref["mean"], rtol=1e-5, atol=1e-5)
    if ref["std"] is not None:
        np.testing.assert_allclose(data["std"], ref["std"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data["value"], ref["value"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(data["actions"], ref["action"][:-1], rtol=1e-5, atol=1e-5)


# -- PPO / A2C with Box and MultiDiscrete actions ------------------------------------------------------------
class SignPartsEnv(gym.Env):
    """MultiDiscrete([3, 2]) (or MultiBinary(2)) actions on a 3-number observation; reward: +1 per part that
    matches the observation's sign pattern; 30 steps."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode=None, binary: bool = False):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        self.action_space = gym.spaces.MultiBinary(2) if binary else gym.spaces.MultiDiscrete([3, 2])
        self.binary = binary
        self.t, self.obs = 0, None

    def _draw(self):
        self.obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return self.obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def step(self, action):
        a = np.asarray(action)
        first = int(self.obs[0] > 0) + (0 if self.binary else int(self.obs[1] > 0))
        reward = float(a[0] == first) + float(a[1] == int(self.obs[2] > 0))
        self.t += 1
        return self._draw(), reward, False, self.t >= 30, {}

    def render(self):
        frame = np.zeros((32, 48, 3), np.uint8)
        frame[:, : 16 * (self.t % 3 + 1)] = 200
        return frame


gym.register("rlviz-test/SignParts-v0", entry_point=SignPartsEnv)
gym.register("rlviz-test/SignBinaryParts-v0", entry_point=SignPartsEnv, kwargs={"binary": True})


@pytest.fixture(scope="module", params=[("PPO", "Pendulum-v1"), ("A2C", "Pendulum-v1"), ("PPO", "rlviz-test/SignParts-v0"),
                                        ("A2C", "rlviz-test/SignBinaryParts-v0")])
def on_policy(request, tmp_path_factory):
    name, env_id = request.param
    kw = {"n_steps": 64, "batch_size": 64} if name == "PPO" else {"n_steps": 16}
    model = getattr(sb3, name)("MlpPolicy", env_id, seed=0, device="cpu", policy_kwargs={"net_arch": [32]}, **kw)
    model.learn(512)
    path = tmp_path_factory.mktemp(name) / "model.zip"
    model.save(path)
    return name, env_id, model, path


def _on_policy_reference(model, obs: np.ndarray) -> dict:
    with torch.no_grad():
        x = torch.as_tensor(obs)
        dist = model.policy.get_distribution(x).distribution
        ref = {"value": model.policy.predict_values(x)[:, 0].numpy(), "action": model.predict(obs, deterministic=True)[0]}
        if isinstance(dist, list):  # MultiCategorical: one Categorical per part
            ref["probs"] = torch.cat([d.probs for d in dist], dim=-1).numpy()
        elif isinstance(dist, torch.distributions.Bernoulli):  # MultiBinary: rlviz draws each part as (0, 1)
            ref["probs"] = torch.stack([1 - dist.probs, dist.probs], dim=-1).flatten(1).numpy()
        else:
            ref["mean"], ref["std"] = dist.mean.numpy(), dist.stddev.numpy()
    return ref


def _observations(env_id: str, n: int = 40) -> np.ndarray:
    env, out = gym.make(env_id), []
    obs, _ = env.reset(seed=2)
    for _ in range(n):
        out.append(obs)
        obs, _, te, tr, _ = env.step(env.action_space.sample())
        if te or tr:
            obs, _ = env.reset()
    return np.stack(out)


def test_ppo_a2c_box_and_multidiscrete_equal_sb3s_distribution(on_policy, tmp_path):
    name, env_id, model, path = on_policy
    agent = load_agent(path, env=env_id)
    assert (agent.kind, agent.metadata["algorithm"]) == ("actor_critic", name)
    obs = _observations(env_id)
    out, ref = agent.policy.evaluate(obs), _on_policy_reference(model, obs)
    np.testing.assert_allclose(out.value, ref["value"], rtol=1e-5, atol=1e-5)
    if "probs" in ref:
        assert out.nvec == ((2, 2) if "Binary" in env_id else (3, 2))
        np.testing.assert_allclose(out.probs, ref["probs"], atol=1e-5)
    else:
        assert not out.squash
        np.testing.assert_allclose(out.mean, ref["mean"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out.std, ref["std"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sample_actions(out, np.random.default_rng(0), greedy=True), ref["action"], rtol=1e-5, atol=1e-5)
    # through the CLI: greedy returns equal SB3's evaluate_policy on the same seeds
    rows = _render(path, env_id, tmp_path / "out", "--greedy", "--videos", "none")
    expected = _evaluate_policy_returns(model, env_id, [int(r["seed"]) for r in rows])
    _assert_same_returns(rows, expected, box=env_id == "Pendulum-v1")


# -- refusals ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["SAC", "PPO"])
def test_gsde_agents_are_refused_clearly(name, tmp_path):
    kw = {"learning_starts": 10} if name == "SAC" else {"n_steps": 16}
    path = tmp_path / "sde.zip"
    getattr(sb3, name)("MlpPolicy", "Pendulum-v1", use_sde=True, device="cpu", **kw).save(path)
    with pytest.raises(UsageError, match=r"gSDE \(use_sde=True\).*use_sde=False"):
        load_agent(path, env="Pendulum-v1")
    with pytest.raises(UsageError, match="gSDE"):
        load_agent(path, env="Pendulum-v1", trust=True)


def test_a_policy_kwarg_that_needs_unpickling_is_refused(off_policy, tmp_path):
    _, _, path = off_policy
    bad = tmp_path / "bad.zip"
    rewrite_sb3_data(path, bad, lambda doc: doc["policy_kwargs"].update(
        {"optimizer_kwargs": None, "actor_factory": ":serialized: payload"}))
    with pytest.raises(UnsafeCheckpointError, match="actor_factory"):
        load_agent(bad, env="Pendulum-v1")


def test_the_wrong_env_is_named(off_policy):
    _, _, path = off_policy
    with pytest.raises(EnvError, match=r"observations of shape \(3,\).*gives \(2,\)"):
        load_agent(path, env="MountainCarContinuous-v0")
    with pytest.raises(EnvError, match=r"trained with Box \(shape \(1,\)\); the env has MultiDiscrete"):
        load_agent(path, env="rlviz-test/SignParts-v0")
