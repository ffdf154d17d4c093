"""Recording inside a training loop on SuperSuit-vectorised PettingZoo envs (rlviz.record.agents.supersuit).

The loop has the shape of PettingZoo's CleanRL PPO tutorial (written here): pistonball with discrete actions,
SuperSuit's colour reduction, resize and frame stack, ``pettingzoo_env_to_vec_env_v1`` + ``concat_vec_envs_v1`` (two
games, so the vector's rows are 2 x agents), one shared-parameter actor-critic, rollouts then a PPO update. Game 0 is
recorded with every agent's annotated logits and value; each of its whole episodes must decode with the documented
frame count (its steps + 1) and its ``.npz`` must hold, per agent, exactly the rows the loop computed."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pymunk")
ss = pytest.importorskip("supersuit")
torch = pytest.importorskip("torch")

from pettingzoo.butterfly import pistonball_v6  # noqa: E402

from rlviz.errors import UsageError  # noqa: E402
from rlviz.media import probe_video  # noqa: E402
from rlviz.record.agents.supersuit import RecordSuperSuitGame, game_rows  # noqa: E402

PISTONS, CYCLES, GAMES = 4, 12, 2


def _envs():
    env = pistonball_v6.parallel_env(render_mode="rgb_array", n_pistons=PISTONS, continuous=False, max_cycles=CYCLES)
    env = ss.color_reduction_v0(env, "B")
    env = ss.resize_v1(env, x_size=32, y_size=32)
    env = ss.frame_stack_v1(env, 3)
    env = ss.pettingzoo_env_to_vec_env_v1(env)
    return ss.concat_vec_envs_v1(env, GAMES, num_cpus=0, base_class="gymnasium")


class Agent(torch.nn.Module):
    """One network for every piston (shared parameters): stacked 32x32 frames -> 3 logits and a value."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 4, stride=4), torch.nn.ReLU(), torch.nn.Flatten(),
                                        torch.nn.Linear(8 * 8 * 8, 32), torch.nn.ReLU())
        self.actor, self.critic = torch.nn.Linear(32, 3), torch.nn.Linear(32, 1)

    def forward(self, obs):
        h = self.body(obs.permute(0, 3, 1, 2) / 255.0)
        return self.actor(h), self.critic(h).squeeze(-1)


def test_a_cleanrl_shaped_loop_records_whole_games_with_every_agents_numbers(tmp_path):
    torch.manual_seed(0)
    envs = RecordSuperSuitGame(_envs(), tmp_path, episode_trigger=lambda e: True)
    assert envs.num_envs == PISTONS * GAMES and game_rows(envs.envs, 0) == range(0, PISTONS)
    agent = Agent()
    opt = torch.optim.Adam(agent.parameters(), lr=2.5e-4)
    obs, _ = envs.reset(seed=1)
    episodes: list[dict] = []  # game 0's episodes as the loop saw them
    current = {"steps": 0, "logits": [], "value": []}
    for _update in range(2):
        buf_obs, buf_act, buf_logp, buf_rew, buf_val = [], [], [], [], []
        for _ in range(16):
            x = torch.as_tensor(obs, dtype=torch.float32)
            with torch.no_grad():
                logits, value = agent(x)
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
            envs.annotate(logits=logits, value=value)  # the whole batch, as computed
            current["logits"].append(logits[:PISTONS].numpy().copy())
            current["value"].append(value[:PISTONS].numpy().copy())
            obs, reward, term, trunc, _ = envs.step(action.numpy())
            current["steps"] += 1
            if (term[:PISTONS] | trunc[:PISTONS]).all():  # game 0 ended (SuperSuit reset it)
                episodes.append(current)
                current = {"steps": 0, "logits": [], "value": []}
            buf_obs.append(x)
            buf_act.append(action)
            buf_logp.append(dist.log_prob(action))
            buf_rew.append(torch.as_tensor(reward))
            buf_val.append(value)
        # a PPO step on the batch (advantages: rewards minus values, one epoch: the loop's shape, not its tuning)
        b_obs, b_act, b_logp = torch.cat(buf_obs), torch.cat(buf_act), torch.cat(buf_logp)
        adv = (torch.cat(buf_rew) - torch.cat(buf_val)).float()
        logits, value = agent(b_obs)
        ratio = (torch.distributions.Categorical(logits=logits).log_prob(b_act) - b_logp).exp()
        loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean() + 0.5 * ((value - (adv + torch.cat(
            buf_val))) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    envs.close()
    assert len(episodes) >= 2
    for k, ep in enumerate(episodes):
        path = tmp_path / f"rl-video-episode-{k}.mp4"
        assert probe_video(path).num_frames == ep["steps"] + 1  # the reset's frame and one per step
        z = np.load(path.with_suffix(".npz"))
        assert list(z["agents"]) == [f"piston_{i}" for i in range(PISTONS)] and int(z["num_frames"]) == ep["steps"] + 1
        for i in range(PISTONS):
            a = f"piston_{i}"
            np.testing.assert_array_equal(z[f"{a}/decision_frames"], np.arange(ep["steps"]))
            np.testing.assert_array_equal(z[f"{a}/logits"][:-1], np.stack([row[i] for row in ep["logits"]]))
            np.testing.assert_array_equal(z[f"{a}/value"][:-1], np.array([row[i] for row in ep["value"]]))
            assert z[f"{a}/probs"].shape == (ep["steps"] + 1, 3)
    # the episode running when the loop stopped was cut by close(): its video holds the steps it had
    if current["steps"]:
        cut = tmp_path / f"rl-video-episode-{len(episodes)}.mp4"
        assert probe_video(cut).num_frames == current["steps"] + 1


def test_each_games_video_goes_to_tensorboard_at_the_vector_step_its_episode_ended(tmp_path):
    pytest.importorskip("tensorboard")
    from conftest import tb_accumulator
    from torch.utils.tensorboard import SummaryWriter

    from rlviz.record import RecordOptions

    writer = SummaryWriter(str(tmp_path / "runs"))
    envs = RecordSuperSuitGame(_envs(), tmp_path / "videos", episode_trigger=lambda e: e != 1, game=1,
                               options=RecordOptions(sinks=writer))
    rng = np.random.default_rng(0)
    envs.reset(seed=0)
    ends = []  # the vector step (step() calls x num_envs) at which game 1's episodes ended
    for step in range(1, 3 * CYCLES + 2):
        envs.annotate(logits=rng.normal(size=(2 * PISTONS, 3)), value=rng.normal(size=2 * PISTONS))
        _, _, term, trunc, _ = envs.step(rng.integers(0, 3, size=2 * PISTONS))
        if (term[PISTONS:] | trunc[PISTONS:]).all():
            ends.append(step * 2 * PISTONS)
    envs.close()
    writer.close()
    assert len(ends) >= 3
    logged = tb_accumulator(tmp_path / "runs").Images("videos/game-1")
    # every episode but the second, each at the step it ended; the one running at close() cut there (SuperSuit
    # resets a game as it ends: one is always running)
    last = (3 * CYCLES + 1) * 2 * PISTONS
    assert [e.step for e in logged] == [end for k, end in enumerate(ends) if k != 1] + [last]
    names = {p.name for p in (tmp_path / "videos").glob("*.mp4")}
    assert names == {f"rl-video-episode-{k}.mp4" for k in range(len(ends) + 1) if k != 1}


def test_annotate_needs_the_whole_batch_and_a_supersuit_env(tmp_path):
    envs = RecordSuperSuitGame(_envs(), tmp_path, episode_trigger=lambda e: True, game=1)
    assert envs.rows == range(PISTONS, 2 * PISTONS)
    envs.reset(seed=0)
    with pytest.raises(UsageError, match=r"one row per vector row \(8"):
        envs.annotate(logits=np.zeros((PISTONS, 3)))
    envs.annotate(logits=np.tile(np.arange(3, dtype=np.float32), (2 * PISTONS, 1)), value=np.arange(8.0))
    envs.step(np.zeros(2 * PISTONS, np.int64))
    envs.close()
    z = np.load(tmp_path / "rl-video-episode-0.npz")
    np.testing.assert_array_equal(z["piston_2/value"], [6.0, 6.0])  # game 1's third row: vector row 6
    with pytest.raises(UsageError, match="game=2"):
        RecordSuperSuitGame(_envs(), tmp_path, game=2)
    with pytest.raises(UsageError, match="SuperSuit"):
        RecordSuperSuitGame(object(), tmp_path)


def test_an_sb3_model_trained_on_supersuit_envs_is_every_agents_policy(tmp_path):
    """PettingZoo's SB3 tutorial shape: PPO on the SuperSuit vector env (rows = pistons), then one game recorded with
    the model as the pistons' shared policy: each agent's logits and value are the model's on its own observations."""
    sb3 = pytest.importorskip("stable_baselines3")
    from rlviz.record.agents.pettingzoo import RecordParallelEpisode
    from rlviz.sources.stable_baselines3.zips import sb3_policy

    def game():
        env = pistonball_v6.parallel_env(render_mode="rgb_array", n_pistons=PISTONS, continuous=False, max_cycles=8)
        return ss.resize_v1(ss.color_reduction_v0(env, "B"), x_size=16, y_size=16)

    train = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(game()), 1, num_cpus=0, base_class="stable_baselines3")
    torch.manual_seed(0)  # (SuperSuit's vector env takes no seed= from SB3)
    model = sb3.PPO("MlpPolicy", train, n_steps=16, batch_size=32, n_epochs=1, device="cpu",
                    policy_kwargs={"net_arch": [16]})
    model.learn(64)
    train.close()
    policy = sb3_policy(model, device="cpu")
    env = RecordParallelEpisode(game(), tmp_path, policies=policy)
    obs, _ = env.reset(seed=3)
    seen: dict[str, list] = {a: [] for a in env.agents}
    while env.agents:
        for a in env.agents:
            seen[a].append(obs[a])
        actions = {a: int(model.predict(obs[a], deterministic=True)[0]) for a in env.agents}
        obs, *_ = env.step(actions)
    for a in seen:
        seen[a].append(obs[a])  # the last observation (the step that ended the game)
    env.close()
    z = np.load(env.last_video_path.with_suffix(".npz"))
    for a, rows in seen.items():
        want = policy.evaluate(np.stack(rows))
        np.testing.assert_allclose(z[f"{a}/logits"], want.logits, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(z[f"{a}/value"], want.value, rtol=1e-5, atol=1e-6)
        assert len(rows) == probe_video(env.last_video_path).num_frames
