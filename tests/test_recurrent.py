"""Your own recurrent torch module through the recurrent protocol (``initial_state(batch)``, ``step(obs, state)``),
LSTM and GRU: the adapter's numbers are the module's, the state is carried per env and reset at episode starts, and
every loop gives an episode the same numbers whatever the batch, the workers or the other episodes drawn."""

from __future__ import annotations

import csv
import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import rlviz
from rlviz.agent.recurrent import RecurrentModule, RecurrentTorchPolicy
from rlviz.cli import main
from rlviz.errors import UsageError
from rlviz.evaluate import RolloutPlan, replay_episode, rollout
from rlviz.record import RecordEpisode, RecordOptions
from rlviz.record.vector import RecordVectorEpisode
from rlviz.sources.checkpoint import load_agent

MODULE = '''
import torch
from torch import nn


class GRUAgent(nn.Module):
    """obs [B, 4] -> GRU (state [1, B, 16]) -> (logits [B, 2], value [B], new state)."""

    def __init__(self):
        super().__init__()
        self.body, self.gru = nn.Linear(4, 32), nn.GRU(32, 16)
        self.pi, self.v = nn.Linear(16, 2), nn.Linear(16, 1)

    def initial_state(self, batch):
        return torch.zeros(1, batch, 16)

    def step(self, obs, state):
        out, h = self.gru(torch.tanh(self.body(obs)).unsqueeze(0), state)
        return self.pi(out[0]), self.v(out[0])[:, 0], h


class ClockAgent(nn.Module):
    """Acts on the time since its episode started (its memory, a counter [B, 1]) and the pole's angle: a branch
    that lost its memory plays another action sequence."""

    def __init__(self):
        super().__init__()
        self.phase = nn.Parameter(torch.zeros(1))

    def initial_state(self, batch):
        return torch.zeros(batch, 1)

    def step(self, obs, state):
        c = state + 1.0
        push = 6.0 * torch.sin(0.9 * c[:, 0] + self.phase) + 40.0 * obs[:, 2]
        return torch.stack([torch.zeros_like(push), push], -1), 0.1 * c[:, 0] + obs[:, 0], c


class CellAgent(nn.Module):
    """An LSTMCell (state (h, c) [B, 8], batch first) and logits only."""

    def __init__(self):
        super().__init__()
        self.cell, self.pi = nn.LSTMCell(4, 8), nn.Linear(8, 2)

    def initial_state(self, batch):
        return torch.zeros(batch, 8), torch.zeros(batch, 8)

    def step(self, obs, state):
        h, c = self.cell(obs, state)
        return self.pi(h), (h, c)
'''


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    """The module file and one saved state_dict of each agent (weights that make the memory show)."""
    folder = tmp_path_factory.mktemp("recurrent")
    (folder / "agents.py").write_text(MODULE)
    ns: dict = {}
    exec(compile(MODULE, "agents.py", "exec"), ns)
    torch.manual_seed(0)
    made = {}
    for name in ("GRUAgent", "CellAgent"):
        module = ns[name]()
        for p in module.parameters():
            nn.init.normal_(p, 0, 0.8)
        torch.save(module.state_dict(), folder / f"{name}.pt")
        made[name] = module
    return folder, made


def _sequence(module, obs: np.ndarray, starts: np.ndarray):
    """The module's own loop over obs [T, B, 4], the state replaced by ``initial_state`` where ``starts[t, b]``:
    (probabilities [T, B, 2], values: [B] per step or None)."""
    n = obs.shape[1]
    state = module.initial_state(n)
    probs, values = [], []
    with torch.no_grad():
        for t in range(obs.shape[0]):
            fresh, m = module.initial_state(n), torch.as_tensor(starts[t], dtype=torch.bool)
            if isinstance(state, tuple):  # LSTMCell: (h, c) [B, H]
                state = tuple(torch.where(m[:, None], f, s) for f, s in zip(fresh, state))
            else:  # nn.GRU: h [1, B, H]
                state = torch.where(m[None, :, None], fresh, state)
            out = module.step(torch.as_tensor(obs[t]), state)
            state = out[-1]
            probs.append(torch.softmax(out[0], -1).numpy())
            values.append(out[1].numpy() if len(out) == 3 else None)
    return np.stack(probs), values


@pytest.mark.parametrize("name,kind,shape", [("GRUAgent", "gru", [(1, 16)]), ("CellAgent", "lstm", [(8,), (8,)])])
def test_adapter_steps_equal_the_modules_own_loop(agents, name, kind, shape):
    module = agents[1][name]
    policy = RecurrentTorchPolicy(module, action_space=gym.spaces.Discrete(2))
    assert isinstance(module, RecurrentModule) and policy.stateful and policy.memory_kind == kind
    assert [r.shape[1:] for r in policy.initial_state(3)] == shape
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(12, 3, 4)).astype(np.float32)
    starts = np.zeros((12, 3))
    starts[0], starts[5, 1], starts[9, 2] = 1, 1, 1  # episodes starting mid-way on rows 1 and 2
    expect, values = _sequence(module, obs, starts)
    rows, seen = policy.initial_state(3), set()
    for t in range(12):
        for b in np.flatnonzero(starts[t]).tolist():  # the loop's reset of a row whose episode starts
            rows = tuple(np.concatenate([r[:b], s, r[b + 1 :]]) for r, s in zip(rows, policy.initial_state(1)))
        out, rows = policy.step(obs[t], rows)
        np.testing.assert_allclose(out.probs, expect[t], rtol=1e-5, atol=1e-6)
        if values[t] is not None:
            np.testing.assert_allclose(out.value, values[t], rtol=1e-5, atol=1e-6)
        else:
            assert out.value is None and policy.kind == "logits"
        seen.update(np.round(out.probs[:, 0], 3).tolist())
    assert len(seen) > 20  # the outputs move with the memory
    memory = policy.memory_of(rows)
    assert memory.shape == (3, 16 if kind == "gru" else 8) and np.array_equal(memory, rows[0].reshape(3, -1))


def test_torch_step_is_step_with_gradients_and_rows_are_batch_invariant(agents):
    policy = RecurrentTorchPolicy(agents[1]["GRUAgent"], action_space=gym.spaces.Discrete(2))
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(20, 4)).astype(np.float32)
    rows = tuple(rng.normal(size=r.shape).astype(np.float32) for r in policy.initial_state(20))
    out, new = policy.step(obs, rows)
    for i in (0, 7, 19):  # a row alone gives the same bits as among 20 (two padded forwards)
        alone, new_alone = policy.step(obs[i : i + 1], tuple(r[i : i + 1] for r in rows))
        assert np.array_equal(alone.probs[0], out.probs[i]) and np.array_equal(alone.value[0], out.value[i])
        assert np.array_equal(new_alone[0][0], new[0][i])
    x = policy.to_tensor(obs[:2]).requires_grad_(True)
    state = tuple(t.clone().requires_grad_(True) for t in policy.state_tensors(tuple(r[:2] for r in rows)))
    heads, after = policy.torch_step(x, state)
    np.testing.assert_allclose(heads["logits"].exp().detach().numpy(), out.probs[:2], rtol=1e-5, atol=1e-6)
    (heads["logits"][:, 0].sum() + heads["value"].sum()).backward()
    assert x.grad.abs().sum() > 0 and state[0].grad.abs().sum() > 0
    np.testing.assert_allclose(policy.state_arrays(after)[0], new[0][:2], rtol=1e-5, atol=1e-6)
    episode = rng.normal(size=(9, 4)).astype(np.float32)  # evaluate: one episode from its start, step()'s bits
    whole, state_rows, steps = policy.evaluate(episode), policy.initial_state(1), []
    for t in range(9):
        o, state_rows = policy.step(episode[t : t + 1], state_rows)
        steps.append(o.probs[0])
    assert np.array_equal(whole.probs, np.stack(steps))


def test_public_names_and_one_line_errors(agents):
    assert rlviz.RecurrentTorchPolicy is RecurrentTorchPolicy and rlviz.RecurrentModule is RecurrentModule

    class NoBatch(nn.Module):
        def initial_state(self, batch):
            return torch.zeros(16)

        def step(self, obs, state):
            return obs, state

    class Wrong(nn.Module):
        def initial_state(self, batch):
            return torch.zeros(batch, 4)

        def step(self, obs, state):
            return obs

    with pytest.raises(UsageError, match="one batch axis"):
        RecurrentTorchPolicy(NoBatch())
    with pytest.raises(UsageError, match="initial_state.*step"):
        RecurrentTorchPolicy(nn.Linear(4, 2))
    policy = RecurrentTorchPolicy(Wrong())
    with pytest.raises(UsageError, match=r"expected \(logits, new_state\)"):
        policy.step(np.zeros((1, 4), np.float32), policy.initial_state(1))
    with pytest.raises(UsageError, match="Start it with policy.initial_state"):
        policy.step(np.zeros((1, 4), np.float32), (np.zeros((1, 5), np.float32),))


def _render(agents, out, *flags) -> list[dict]:
    folder, _ = agents
    assert main(["render", str(folder / "GRUAgent.pt"), "--model", f"{folder / 'agents.py'}:GRUAgent", "--env",
                 "CartPole-v1", "--out", str(out), "--no-progress", "--videos", "none", *flags]) == 0
    return list(csv.DictReader((out / "episodes.csv").open()))


def test_render_outcomes_do_not_depend_on_batch_workers_or_episodes_drawn(agents, tmp_path):
    """``rlviz render state.pt --model agents.py:GRUAgent``: the same seeds give the same per-episode numbers with 1
    or 4 envs, 2 workers, or fewer episodes (sampled actions: the episode's generator and its memory both count)."""
    one = _render(agents, tmp_path / "one", "--episodes", "8", "--num-envs", "1")
    four = _render(agents, tmp_path / "four", "--episodes", "8", "--num-envs", "4")
    workers = _render(agents, tmp_path / "workers", "--episodes", "8", "--num-envs", "3", "--workers", "2")
    fewer = _render(agents, tmp_path / "fewer", "--episodes", "3", "--num-envs", "2")
    assert one == four == workers and fewer == one[:3]
    assert len({r["length"] for r in one}) > 3  # episodes of several lengths: slots are reused mid-rollout


def test_a_replay_and_the_recorders_carry_the_state_from_the_episodes_start(agents, tmp_path):
    module = agents[1]["GRUAgent"]
    policy = RecurrentTorchPolicy(module, action_space=gym.spaces.Discrete(2))
    result = rollout("CartPole-v1", policy, RolloutPlan(4, seed=3, num_envs=2))
    for rec in result.episodes:
        alone = replay_episode("CartPole-v1", policy, rec)
        assert (alone.ret, alone.length) == (rec.ret, rec.length)
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path / "one", module,
                        episode_trigger=lambda k: k == 1, options=RecordOptions(sinks=None))
    observations = []
    for episode in range(2):  # the second episode is recorded: its panels start from the initial state again
        obs, _ = env.reset(seed=episode)
        seen, state, done = [obs], policy.initial_state(1), False
        while not done:
            out, state = policy.step(obs[None], state)
            obs, _, te, tr, _ = env.step(int(out.probs[0].argmax()))
            seen.append(obs)
            done = te or tr
        observations.append(np.stack(seen))
    env.close()
    data = np.load(next((tmp_path / "one").glob("*.npz")))
    expect, values = _sequence(module, observations[1][:, None], np.eye(len(observations[1]), 1))
    np.testing.assert_allclose(data["probs"], expect[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(data["value"], np.concatenate(values), rtol=1e-5, atol=1e-6)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array")] * 2)
    with pytest.raises(UsageError, match="recurrent.*episode_trigger"):
        RecordVectorEpisode(envs, tmp_path / "vec", policy=module, step_trigger=lambda s: s == 5)
    rec = RecordVectorEpisode(envs, tmp_path / "vec", envs_to_record=(0, 1), policy=module,
                              episode_trigger=lambda k: k == 1, options=RecordOptions(sinks=None))
    obs, _ = rec.reset(seed=11)
    episodes: list[list[list]] = [[[obs[0]]], [[obs[1]]]]  # per sub-env, its episodes' observations
    ended = [False, False]
    same_step = int(gym.__version__.split(".")[0]) < 1  # gymnasium 0.29 (CleanRL's pin) resets in the ending step
    for _ in range(120):  # gymnasium 1.x's next-step autoreset: the step after an episode's end is its reset
        obs, _, te, tr, info = rec.step(np.array([0, 1]))
        for i in range(2):
            if ended[i]:
                episodes[i].append([obs[i]])
            elif same_step and (te[i] or tr[i]):  # obs[i] already starts the next episode; the last is in info
                episodes[i][-1].append(info["final_observation"][i])
                episodes[i].append([obs[i]])
            else:
                episodes[i][-1].append(obs[i])
            ended[i] = bool(te[i] or tr[i]) and not same_step
    rec.close()
    assert sorted(v.env_index for v in rec.recorded) == [0, 1]
    for video in rec.recorded:  # each sub-env's second episode, its state from that episode's start
        npz = np.load(video.path.with_suffix(".npz"))
        expect = policy.evaluate(np.stack(episodes[video.env_index][1]))
        np.testing.assert_allclose(npz["probs"], expect.probs, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(npz["value"], expect.value, rtol=1e-5, atol=1e-6)


def _clock_episode(policy, seed: int) -> tuple[list, list]:
    """``policy``'s greedy CartPole episode on ``seed``: its observations (each acted on) and actions."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    seen, actions, state, done = [], [], policy.initial_state(1), False
    while not done:
        out, state = policy.step(obs[None], state)
        seen.append(obs)
        actions.append(int(out.probs[0].argmax()))
        obs, _, te, tr, _ = env.step(actions[-1])
        done = te or tr
    return seen, actions


def test_compare_disagreements_carry_each_agents_memory_into_the_probe_and_the_branches(agents, tmp_path):
    """Two clock agents (the same network, other phases): each state's TV and values are the two agents' with their
    memories run along the playing agent's episode, and each branch is the agent playing on from the restored env
    WITH its memory of the episode so far (a branch from a fresh memory plays another action sequence)."""
    folder, _ = agents
    paths = []
    for name, phase in (("a", 0.0), ("b", 2.0)):
        torch.save({"phase": torch.tensor([phase])}, folder / f"clock-{name}.pt")
        paths.append(str(folder / f"clock-{name}.pt"))
    out = tmp_path / "cmp"
    assert main(["compare", *paths, "--model", f"{folder / 'agents.py'}:ClockAgent", "--env", "CartPole-v1",
                 "--episodes", "4", "--greedy", "--disagreements", "4", "--disagreement-to-end", "--out",
                 str(out), "--no-progress", "--disagreement-videos", "1"]) == 0
    rows = list(csv.DictReader((out / "disagreements.csv").open()))
    assert len(rows) == 4
    pa, pb = (load_agent(p, env="CartPole-v1", model=f"{folder / 'agents.py'}:ClockAgent").policy for p in paths)
    fresh_differs = 0
    for row in rows:
        own, other = (pa, pb) if row["states_of"] == "a" else (pb, pa)
        seed, step = int(row["seed"]), int(row["step"])
        seen, actions = _clock_episode(own, seed)
        mine, theirs = own.evaluate(np.stack(seen)), other.evaluate(np.stack(seen))
        assert float(row["tv"]) == pytest.approx(0.5 * np.abs(mine.probs[step] - theirs.probs[step]).sum(), abs=1e-5)
        values = {row["states_of"]: mine.value[step], "ba"[row["states_of"] == "b"]: theirs.value[step]}
        assert (float(row["value_a"]), float(row["value_b"])) == pytest.approx((values["a"], values["b"]), abs=1e-5)
        for side, player in (("a", pa), ("b", pb)):
            expect = _branch_steps(player, seed, seen, actions, step, 10_000, remember=True)
            assert int(row[f"{side}_steps"]) == expect
            fresh_differs += _branch_steps(player, seed, seen, actions, step, 10_000, remember=False) != expect
    assert fresh_differs  # the test sees a branch that forgot its memory
    first = json.loads((out / "disagreements.json").read_text())["states"][0]
    kept = np.load(out / "videos" / "disagreements" / "b" / "state-1.npz")
    seen, _ = _clock_episode(pa if first["states_of"] == "a" else pb, first["seed"])
    along = pb.evaluate(np.stack(seen))  # B at that state, its memory run along the episode
    np.testing.assert_allclose(kept["probs"][0], along.probs[first["step"]], atol=1e-6)
    assert kept["value"][0] == pytest.approx(along.value[first["step"]], abs=1e-6)


def _branch_steps(player, seed: int, seen: list, actions: list, step: int, horizon: int, remember: bool) -> int:
    """Steps ``player`` plays greedily (at most ``horizon``) from state ``step`` of the episode (``seen``,
    ``actions``), with its memory run along the episode's first ``step`` observations (or a fresh one)."""
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    state = player.initial_state(1)
    for obs, a in zip(seen[:step], actions[:step]):
        if remember:
            _, state = player.step(obs[None], state)
        env.step(a)
    obs, n = seen[step], 0
    while n < horizon:
        out, state = player.step(obs[None], state)
        obs, _, te, tr, _ = env.step(int(out.probs[0].argmax()))
        n += 1
        if te or tr:
            break
    return n
