"""Release-0.2 defects, each pinned by a test that failed before its fix (issue 25): save_checkpoint takes every
output form the rest of rlviz takes; VecNormalize statistics come only from where training put them;
never_terminates is not raised for envs that have no terminal state."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rlviz.agent.policy import TorchPolicy
from rlviz.evaluate import RolloutPlan
from rlviz.sources.checkpoint import load_agent, save_checkpoint


class _BoxNet(nn.Module):
    """Pendulum-v1 (obs [B, 3], Box(1)) in one of the output forms TorchPolicy accepts."""

    def __init__(self, form: str):
        super().__init__()
        torch.manual_seed(0)
        self.body, self.form = nn.Linear(3, 3), form

    def forward(self, obs):
        h = self.body(obs)
        mean, log_std, value = h[:, :1], h[:, 1:2] * 0.1, h[:, 2]
        if self.form == "dict_log_std":
            return {"mean": mean, "log_std": log_std, "value": value}
        if self.form == "dict_std":
            return {"mean": mean, "std": torch.exp(log_std), "value": value[:, None]}
        if self.form == "tuple_head":
            return torch.cat([mean, log_std], dim=-1), value
        return mean  # "deterministic"


@pytest.mark.parametrize("form", ["dict_log_std", "dict_std", "tuple_head", "deterministic"])
def test_save_checkpoint_accepts_every_box_output_form_torch_policy_accepts(tmp_path, form):
    import gymnasium as gym

    space = gym.make("Pendulum-v1").action_space
    module = _BoxNet(form)
    kind = "logits" if form == "deterministic" else "actor_critic"
    path = save_checkpoint(tmp_path / "p.pt2", module, env="Pendulum-v1", kind=kind)
    loaded = load_agent(path)
    obs = torch.tensor(np.random.default_rng(0).uniform(-1, 1, (5, 3)), dtype=torch.float32)
    want = TorchPolicy(module, kind=kind, action_space=space).heads(obs)
    got = loaded.policy.heads(obs)
    assert loaded.kind == kind
    for key in ("mean", "std", "value"):
        if want[key] is None:
            assert got[key] is None, key
        else:  # float32 round trip through exp/log: the float32 error of values of magnitude ~1
            torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("form", ["dict", "tuple", "list"])
def test_save_checkpoint_accepts_every_discrete_output_form(tmp_path, form):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(1)
            self.body = nn.Linear(4, 3)

        def forward(self, obs):
            h = self.body(obs)
            logits, value = h[:, :2], h[:, 2:]  # value [B, 1]
            return {"logits": logits, "value": value} if form == "dict" else (
                (logits, value) if form == "tuple" else [logits, value])

    module = Net()
    loaded = load_agent(save_checkpoint(tmp_path / "c.pt2", module, env="CartPole-v1"))
    obs = torch.tensor(np.random.default_rng(1).uniform(-1, 1, (4, 4)), dtype=torch.float32)
    want_logits, want_value = TorchPolicy(module, kind="actor_critic").forward(obs)
    got_logits, got_value = loaded.policy.forward(obs)
    torch.testing.assert_close(got_logits, want_logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_value, want_value, rtol=1e-5, atol=1e-6)


# -- VecNormalize statistics only from where training put them -------------------------------------------------
def _cartpole_stats(path):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    venv = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=0))
    venv.reset()
    for _ in range(30):
        venv.step(np.array([venv.action_space.sample()]))
    path.parent.mkdir(parents=True, exist_ok=True)
    venv.save(str(path))
    return path


@pytest.fixture(scope="module")
def experiments(tmp_path_factory):
    """experiments/a2c_cartpole.zip and sac_pendulum.zip (untrained: loading is what is tested) beside another
    run's folder, experiments/cartpole_run/vecnormalize.pkl (CartPole statistics: same shape as the A2C's)."""
    from stable_baselines3 import A2C, SAC

    root = tmp_path_factory.mktemp("experiments")
    A2C("MlpPolicy", "CartPole-v1", seed=0).save(root / "a2c_cartpole.zip")
    SAC("MlpPolicy", "Pendulum-v1", seed=0, buffer_size=100).save(root / "sac_pendulum.zip")
    _cartpole_stats(root / "cartpole_run" / "vecnormalize.pkl")
    return root


def test_a_sibling_runs_statistics_with_matching_shapes_are_not_applied(experiments):
    from stable_baselines3 import A2C

    agent = load_agent(experiments / "a2c_cartpole.zip", env="CartPole-v1")
    assert agent.metadata["vecnormalize_stats"] is None
    obs = torch.tensor(np.random.default_rng(2).uniform(-2, 2, (6, 4)), dtype=torch.float32)
    sb3 = A2C.load(experiments / "a2c_cartpole.zip", device="cpu").policy
    with torch.no_grad():
        want = sb3.get_distribution(obs).distribution.logits
        got, _ = agent.policy.forward(obs)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)  # the A2C's own agent, on raw observations


def test_a_sibling_runs_statistics_of_another_shape_are_not_applied_and_explicit_ones_are_refused(experiments):
    from rlviz.errors import CheckpointError

    agent = load_agent(experiments / "sac_pendulum.zip", env="Pendulum-v1")
    assert agent.metadata["vecnormalize_stats"] is None
    stats = experiments / "cartpole_run" / "vecnormalize.pkl"
    with pytest.raises(CheckpointError, match=r"shape \(4,\) do not match the model's observations of shape \(3,\)"):
        load_agent(experiments / "sac_pendulum.zip", env="Pendulum-v1", vecnormalize=stats)


def test_statistics_found_where_training_saved_them_and_ambiguity_asks_for_the_flag(tmp_path):
    from stable_baselines3 import A2C

    from rlviz.errors import UsageError
    from rlviz.sources.stable_baselines3.vecnormalize import find_vecnormalize

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    A2C("MlpPolicy", "CartPole-v1", seed=0).save(ckpt / "rl_model_100_steps.zip")
    own = _cartpole_stats(ckpt / "rl_model_vecnormalize_100_steps.pkl")
    _cartpole_stats(ckpt / "rl_model_vecnormalize_200_steps.pkl")
    _cartpole_stats(ckpt / "vecnormalize.pkl")  # a checkpoint's own statistics are the more specific
    assert find_vecnormalize(ckpt / "rl_model_100_steps.zip") == own
    assert load_agent(ckpt / "rl_model_100_steps.zip", env="CartPole-v1").metadata["vecnormalize_stats"] == str(own)
    zoo = tmp_path / "zoo"  # rl-zoo3: best_model.zip beside CartPole-v1.zip and CartPole-v1/vecnormalize.pkl
    zoo.mkdir()
    (zoo / "CartPole-v1.zip").write_bytes(b"")
    run_stats = _cartpole_stats(zoo / "CartPole-v1" / "vecnormalize.pkl")
    assert find_vecnormalize(zoo / "best_model.zip") == run_stats == find_vecnormalize(zoo / "CartPole-v1.zip")
    hub = tmp_path / "hub"
    hub_stats = _cartpole_stats(hub / "vec_normalize.pkl")
    assert find_vecnormalize(hub / "a2c-CartPole-v1.zip") == hub_stats
    _cartpole_stats(hub / "vecnormalize.pkl")
    with pytest.raises(UsageError, match=r"more than one VecNormalize .*--vecnormalize PATH"):
        find_vecnormalize(hub / "a2c-CartPole-v1.zip")


# -- never_terminates knows envs that have no terminal state ---------------------------------------------------
class _Corridor:
    """A probe env that can end (terminates at position 0) but whose policy below never gets there."""

    def __new__(cls, render_mode=None):
        import gymnasium as gym

        class Corridor(gym.Env):
            metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
            observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
            action_space = gym.spaces.Discrete(2)

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.pos = 5
                return np.array([self.pos], np.float32), {}

            def step(self, action):
                self.pos = min(10, max(0, self.pos + (1 if int(action) == 1 else -1)))
                return np.array([self.pos], np.float32), 0.0, self.pos == 0, False, {}

            def render(self):
                return np.zeros((8, 8, 3), np.uint8)

        return Corridor()


def _rollout_warnings(env_id, module, **kw):
    from rlviz.evaluate.rollouts.rollout import rollout
    from rlviz.evaluate.statistics.diagnostics import diagnose

    res = rollout(env_id, TorchPolicy(module, device="cpu", **kw), RolloutPlan(4, num_envs=2, seed=0, progress=False))
    return res, {f.id for f in diagnose(res) if f.severity == "warning"}


def test_never_terminates_is_not_raised_for_pendulum_but_is_for_an_env_that_can_end():
    import gymnasium as gym

    pendulum = gym.make("Pendulum-v1")
    res, warn = _rollout_warnings("Pendulum-v1", _BoxNet("dict_log_std"), action_space=pendulum.action_space)
    assert all(e.truncated and e.length == 200 for e in res.episodes)
    assert "never_terminates" not in warn
    if "rlviz-test/Corridor-v0" not in gym.registry:
        gym.register("rlviz-test/Corridor-v0", entry_point=_Corridor, max_episode_steps=50)

    class Right(nn.Module):
        def forward(self, obs):
            return torch.tensor([[0.0, 20.0]]).expand(obs.shape[0], -1)

    res, warn = _rollout_warnings("rlviz-test/Corridor-v0", Right(), num_actions=2, kind="logits")
    assert all(e.truncated for e in res.episodes) and "never_terminates" in warn
    from rlviz.evaluate.statistics.diagnostics import has_terminal_state

    assert not has_terminal_state("HalfCheetah-v5") and not has_terminal_state("Pendulum-v1")
    assert has_terminal_state("Hopper-v5") and not has_terminal_state("Hopper-v5", {"terminate_when_unhealthy": False})
    assert has_terminal_state("ALE/Breakout-v5") and has_terminal_state("CartPole-v1")


# -- a file that loads but cannot run fails at load, in one line naming the file -------------------------------
def test_a_program_that_loads_but_cannot_run_is_refused_at_load(tmp_path):
    import io
    import json
    import zipfile
    from pathlib import Path

    from rlviz.errors import CheckpointError

    sample = Path(__file__).resolve().parent.parent / "samples" / "minatar_breakout_ppo.pt2"
    config = "archive/data/weights/model_weights_config.json"
    src = zipfile.ZipFile(sample)
    doc = json.loads(src.read(config))
    doc["config"]["inner.torso.0.weight"]["tensor_meta"]["dtype"] = 6  # float16: same bytes, half the elements' size
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            blob = src.read(info)
            dst.writestr(info, json.dumps(doc).encode() if info.filename == config else blob)
    bad = tmp_path / "half.pt2"
    bad.write_bytes(buf.getvalue())
    with pytest.raises(CheckpointError) as info:
        load_agent(bad)
    message = str(info.value)
    assert message.startswith(f"{bad} loads, but its network cannot run on an observation of shape (10, 10, 4)")
    assert "\n" not in message and "Half" in message
