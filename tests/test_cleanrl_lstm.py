"""CleanRL's ppo_atari_lstm.py agent: its .cleanrl_model recognised with no flags (the env from CleanRL's run folder),
played with the LSTM state carried per env and reset where an episode starts, its probabilities and value equal to
the script's ``get_action_and_value`` on the same observations and states.

The reference agent here is written the way the script writes it (same attribute names and layer shapes, its
``get_states(x, lstm_state, done)`` semantics: the state multiplied by ``1 - done`` before each LSTM step), in our own
code; it is saved as the script's one added line saves it: ``torch.save(agent.state_dict(), path)``.
"""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from _tolerance import assert_close_along, gain, recurrent_atol
from torch import nn

from rlviz.cli import main
from rlviz.envs.recipe import make_env
from rlviz.errors import UsageError
from rlviz.media.video import probe_video
from rlviz.sources.checkpoint import load_agent

RUN = "BreakoutNoFrameskip-v4__ppo_atari_lstm__1__1700000000"


class LSTMAgent(nn.Module):  # ppo_atari_lstm.py's Agent, its layer shapes and get_states semantics
    def __init__(self, n: int, hidden: int = 128):
        super().__init__()
        self.network = nn.Sequential(
            nn.Conv2d(1, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU())
        self.lstm = nn.LSTM(512, hidden)
        self.actor, self.critic = nn.Linear(hidden, n), nn.Linear(hidden, 1)

    def get_states(self, x, lstm_state, done):
        hidden = self.network(x / 255.0)
        batch = lstm_state[0].shape[1]
        hidden, done = hidden.reshape((-1, batch, self.lstm.input_size)), done.reshape((-1, batch))
        outs = []
        for h, d in zip(hidden, done):
            keep = (1.0 - d).view(1, -1, 1)
            h, lstm_state = self.lstm(h.unsqueeze(0), (keep * lstm_state[0], keep * lstm_state[1]))
            outs.append(h)
        return torch.flatten(torch.cat(outs), 0, 1), lstm_state

    def get_action_and_value(self, x, lstm_state, done, action=None):
        hidden, lstm_state = self.get_states(x, lstm_state, done)
        dist = torch.distributions.Categorical(logits=self.actor(hidden))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(hidden), lstm_state


def _agent(actor_scale: float = 1.0) -> LSTMAgent:
    torch.manual_seed(0)
    agent = LSTMAgent(4)
    for name, p in agent.named_parameters():  # weights large enough that the memory shows in every output
        nn.init.normal_(p, 0, 0.05 if name.startswith("lstm") else 0.3 / (1 + 9 * name.startswith("network.7")))
    with torch.no_grad():
        agent.actor.weight.mul_(actor_scale)
    return agent


def _save(agent: LSTMAgent, root) -> str:
    folder = root / "runs" / RUN
    folder.mkdir(parents=True)
    path = folder / "ppo_atari_lstm.cleanrl_model"
    torch.save(agent.state_dict(), path)
    return str(path)


def _reference(agent: LSTMAgent, obs: np.ndarray, state, done: np.ndarray):
    """The script's per-step call with each action (its log-probability of each): probabilities [B, A], value [B]
    and the new (h, c) [1, B, H]. One call on the batch repeated once per action (column a * B + i is env i's
    observation and state with action a: the LSTM and heads treat columns alone), the cost of one batched forward
    instead of A."""
    with torch.no_grad():
        x, d = torch.as_tensor(np.asarray(obs), dtype=torch.float32), torch.as_tensor(done, dtype=torch.float32)
        n, b = agent.actor.out_features, x.shape[0]
        states = (state[0].repeat(1, n, 1), state[1].repeat(1, n, 1))
        _, logp, _, value, new = agent.get_action_and_value(x.repeat(n, 1, 1, 1), states, d.repeat(n),
                                                            torch.arange(n).repeat_interleave(b))
    return logp.reshape(n, b).T.exp(), value[:b, 0].numpy(), (new[0][:, :b], new[1][:, :b])


def test_recognised_with_no_flags_the_env_from_cleanrls_run_folder(tmp_path):
    path = _save(_agent(), tmp_path)
    loaded = load_agent(path)
    assert loaded.metadata["cleanrl_script"] == "ppo_atari_lstm.py"
    assert (loaded.recipe.env_id, loaded.kind, loaded.policy.stateful) == ("BreakoutNoFrameskip-v4", "actor_critic", True)
    assert loaded.recipe.wrappers[-1].kwargs == {"stack_size": 1}  # FrameStack(env, 1): one 84x84 grey frame
    assert loaded.policy.memory_kind == "lstm" and loaded.policy.initial_state(3)[0].shape == (3, 1, 128)
    with pytest.raises(UsageError, match="4 logits but the action space has 6"):  # --env wins: Pong's 6 actions
        load_agent(path, env="PongNoFrameskip-v4")
    alone = tmp_path / "elsewhere.cleanrl_model"
    alone.write_bytes(open(path, "rb").read())
    with pytest.raises(UsageError, match="ppo_atari_lstm.py.*run folder.*--env"):
        load_agent(alone)


def test_steps_equal_get_action_and_value_with_the_state_reset_where_done(tmp_path):
    """Two envs in one batch for 60 steps, env 1 starting a new episode at step 25 (the script's done=1 there):
    rlviz's state rows, reset by the loop, give the script's probabilities and value at every step."""
    agent = _agent()
    policy = load_agent(_save(agent, tmp_path)).policy
    recipe = load_agent(str(tmp_path / "runs" / RUN / "ppo_atari_lstm.cleanrl_model")).recipe
    envs = [make_env(recipe, render_mode=None) for _ in range(2)]
    obs = np.stack([env.reset(seed=s)[0] for env, s in zip(envs, (3, 4))])
    rows = policy.initial_state(2)
    ref_state = (torch.zeros(1, 2, 128), torch.zeros(1, 2, 128))
    done, rng, seen = np.zeros(2), np.random.default_rng(0), set()
    for t in range(60):
        if t == 25:  # env 1's episode restarts: the loop gives its row the initial state, the script sees done=1
            obs[1] = envs[1].reset(seed=9)[0]
            rows = tuple(np.concatenate([r[:1], s]) for r, s in zip(rows, policy.initial_state(1)))
            done = np.array([0.0, 1.0])
        out, rows = policy.step(obs, rows)
        probs, value, ref_state = _reference(agent, obs, ref_state, done)
        # the tolerance at step t of a float32 LSTM rollout (tests/_tolerance.py: the cell state's rounding grows
        # as U (t+1)^1.5, times each head's gain): 1e-5 at t=0; at t=59, 1.2e-4 for the state, ~5e-4 for the value
        assert_close_along(out.probs[None], probs.numpy()[None], recurrent_atol(gain(agent.actor.weight), 60), t)
        assert_close_along(out.value[None], value[None], recurrent_atol(gain(agent.critic.weight), 60), t)
        assert_close_along(rows[0][:, 0][None], ref_state[0][0].numpy()[None], recurrent_atol(gain(), 60), t)
        seen.add(round(float(out.probs[0, 0]), 4))
        done = np.zeros(2)
        for i, env in enumerate(envs):
            obs[i], _, te, tr, _ = env.step(int(rng.integers(4)))
            assert not (te or tr)
    assert len(seen) > 10  # the outputs move with the memory


@pytest.mark.slow
def test_renders_with_no_flags_and_the_video_holds_the_scripts_numbers(tmp_path):
    """``rlviz render <file> --episodes 2 --heatmap --videos first:1``: the recorded episode's probabilities and
    value are the script's, its state carried from the episode's first observation."""
    agent = _agent(actor_scale=0.1)  # near uniform play: it presses FIRE, the episode ends
    path = _save(agent, tmp_path)
    out = tmp_path / "out"
    assert main(["render", path, "--episodes", "2", "--heatmap", "--videos", "first:1", "--out", str(out),
                 "--no-progress"]) == 0
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    assert len(rows) == 2 and (out / "heatmap.npz").exists()
    (video,) = (out / "videos").glob("*.mp4")
    data = np.load(video.with_suffix(".npz"))
    assert probe_video(video).num_frames >= len(data["actions"]) + 1
    env = make_env(load_agent(path).recipe, render_mode=None)
    ob, _ = env.reset(seed=int(rows[0]["seed"]))
    observations = [ob]
    for a in data["actions"]:
        ob, *_ = env.step(int(a))
        observations.append(ob)
    state, probs, values = (torch.zeros(1, 1, 128), torch.zeros(1, 1, 128)), [], []
    for ob in observations:
        p, v, state = _reference(agent, ob[None], state, np.zeros(1))
        probs.append(p.numpy()[0])
        values.append(v[0])
    # 196 float32 LSTM steps, each side rounding in its own order (batch 2 in the render, 4 here): the tolerance
    # grows as U (t+1)^1.5 times the head's gain (tests/_tolerance.py's argument): 1e-5 at t=0; at t=195, 2.4e-3
    # for the value (critic norm 3.6; 3.0e-5 measured here, where atol=1e-5 failed), 3e-4 for the probabilities
    assert_close_along(data["probs"], np.stack(probs), recurrent_atol(gain(agent.actor.weight), len(probs)))
    assert_close_along(data["value"], values, recurrent_atol(gain(agent.critic.weight), len(values)))
    assert np.ptp(data["value"]) > 1e-3  # the value moves with the memory
