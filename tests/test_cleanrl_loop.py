"""A PPO training loop in CleanRL's shape (``make_env`` thunks, ``SyncVectorEnv``, an ``Agent`` with ``actor`` /
``critic`` and ``get_action_and_value``), recording the way the README tells CleanRL users to: sub-env 0 made with
``render_mode="rgb_array"``, ``RecordVectorEpisode`` around the vector env, one ``annotate`` call after the action is
chosen. Runs in the main venv (gymnasium 1.x, NEXT_STEP: L + 1 frames per episode) and in the gymnasium-0.29.1
venv (same-step autoreset: L frames)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.distributions.categorical import Categorical  # noqa: E402

import rlviz  # noqa: E402
from rlviz.media.decode import probe_video  # noqa: E402
from rlviz.record import RecordOptions  # noqa: E402
from rlviz.record.vector_parts import SAME_STEP  # noqa: E402

NUM_ENVS, NUM_STEPS, TOTAL = 4, 128, 2048


def make_env(env_id, idx, capture_video):
    def thunk():
        env = gym.make(env_id, render_mode="rgb_array") if capture_video and idx == 0 else gym.make(env_id)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return thunk


def init(layer, std=np.sqrt(2)):
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        n_obs = int(np.prod(envs.single_observation_space.shape))
        self.critic = nn.Sequential(init(nn.Linear(n_obs, 64)), nn.Tanh(), init(nn.Linear(64, 1), 1.0))
        self.actor = nn.Sequential(init(nn.Linear(n_obs, 64)), nn.Tanh(),
                                   init(nn.Linear(64, envs.single_action_space.n), 0.01))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        dist = Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x)


def train(video_folder, seed=1):
    """2,048 env steps of PPO; returns the wrapper and, per loop step, what sub-env 0's annotate received."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)  # a small MLP: more threads only contend on a shared test machine
    envs = gym.vector.SyncVectorEnv([make_env("CartPole-v1", i, True) for i in range(NUM_ENVS)])
    envs = rlviz.RecordVectorEpisode(envs, video_folder, options=RecordOptions(sinks=None))  # the recording line
    agent = Agent(envs)
    optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    obs = torch.zeros((NUM_STEPS, NUM_ENVS) + envs.single_observation_space.shape)
    actions = torch.zeros((NUM_STEPS, NUM_ENVS))
    logprobs, rewards, dones, values = (torch.zeros((NUM_STEPS, NUM_ENVS)) for _ in range(4))
    seen = []
    next_obs, _ = envs.reset(seed=seed)
    next_obs, next_done = torch.Tensor(next_obs), torch.zeros(NUM_ENVS)
    for _ in range(TOTAL // (NUM_ENVS * NUM_STEPS)):
        for step in range(NUM_STEPS):
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
                logits = agent.actor(next_obs)
                envs.annotate(logits=logits, value=value)  # the annotate line
            seen.append((logits[0].numpy().copy(), float(value[0, 0])))
            actions[step], logprobs[step] = action, logprob
            next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs = torch.Tensor(next_obs)
            next_done = torch.Tensor(np.logical_or(terminations, truncations).astype(np.float32))
        with torch.no_grad():  # GAE
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages, last = torch.zeros_like(rewards), 0
            for t in reversed(range(NUM_STEPS)):
                nonterminal = 1.0 - (next_done if t == NUM_STEPS - 1 else dones[t + 1])
                nextvalues = next_value if t == NUM_STEPS - 1 else values[t + 1]
                delta = rewards[t] + 0.99 * nextvalues * nonterminal - values[t]
                advantages[t] = last = delta + 0.99 * 0.95 * nonterminal * last
            returns = advantages + values
        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_act, b_logp = actions.reshape(-1), logprobs.reshape(-1)
        b_adv, b_ret = advantages.reshape(-1), returns.reshape(-1)
        for _epoch in range(2):
            for idx in np.array_split(np.random.default_rng(seed).permutation(len(b_obs)), 4):
                _, newlogp, entropy, newvalue = agent.get_action_and_value(b_obs[idx], b_act.long()[idx])
                ratio = (newlogp - b_logp[idx]).exp()
                adv = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                pg = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2)).mean()
                loss = pg - 0.01 * entropy.mean() + 0.25 * ((newvalue.view(-1) - b_ret[idx]) ** 2).mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
    envs.close()
    return envs, seen


def test_cleanrl_shaped_ppo_records_annotated_episodes(tmp_path):
    envs, seen = train(tmp_path / "videos")
    assert len(seen) == TOTAL // NUM_ENVS
    videos = envs.recorded
    whole = [v for v in videos if v.terminated or v.truncated]
    assert [v.episode_id for v in whole][:3] == [0, 1, 8]  # RecordVideo's schedule on sub-env 0
    assert {v.env_index for v in videos} == {0}
    for v in videos:
        info = probe_video(v.path)
        assert info.codec == "h264" and info.num_frames == v.frames
        if v in whole:
            assert v.frames == (v.steps if envs.autoreset_mode == SAME_STEP else v.steps + 1)
        data = np.load(v.path.with_suffix(".npz"))
        rows = seen[v.start_step:v.start_step + v.steps]
        np.testing.assert_allclose(data["logits"][:v.steps], np.stack([r[0] for r in rows]), rtol=1e-6)
        np.testing.assert_allclose(data["value"][:v.steps], [r[1] for r in rows], rtol=1e-6)
        assert data["rewards"].shape == (v.steps,) and np.all(data["rewards"] == 1.0)
        assert v.path.name == f"rl-video-env-0-episode-{v.episode_id}.mp4"
