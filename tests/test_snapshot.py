"""Env states saved and restored (rlviz.envs.snapshot) and the branches played from them (rlviz.disagree.branches):
a branch of the agent that played the episode, from a restored state, is the original episode's continuation, bit
for bit, on ALE, MinAtar and CartPole."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlviz.disagree.branches import check_restorable, play_branch, reach
from rlviz.envs import make_env
from rlviz.envs.snapshot import NotRestorable, restore, save
from rlviz.evaluate import RolloutPlan
from rlviz.evaluate.rollouts.rollout import episode_seed_for, replay_episode
from rlviz.sources import load_agent
from rlviz.sources.checkpoint import save_checkpoint

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


class Log(gym.Wrapper):
    """Every step's action, observation, reward and end flags."""

    def reset(self, **kwargs):
        self.steps = []
        return self.env.reset(**kwargs)

    def step(self, action):
        out = self.env.step(action)
        self.steps.append((action, np.array(out[0], copy=True), float(out[1]), bool(out[2]), bool(out[3])))
        return out


class Wobbly(torch.nn.Module):
    """A CartPole policy that samples (both actions likely), with a value."""

    def forward(self, x):
        w = torch.tensor([[0.0, 0.0], [-0.5, 0.5], [-5.0, 5.0], [-1.0, 1.0]])
        return x @ w, x.sum(-1)


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    return load_agent(save_checkpoint(tmp_path_factory.mktemp("cp") / "cp.pt2", Wobbly(), env="CartPole-v1"))


def _agent(name, cartpole):
    return cartpole if name == "cartpole" else load_agent(SAMPLES / name)


@pytest.mark.parametrize("name, steps, at", [("cartpole", 500, 9), ("minatar_breakout_ppo.pt2", 600, 40),
                                             ("ale_breakout_ppo.pt2", 260, 110)])
def test_a_restored_branch_continues_the_original_episode_bit_for_bit(name, steps, at, cartpole):
    agent = _agent(name, cartpole)
    seed = episode_seed_for(7, 3)
    original = Log(make_env(agent.recipe, render_mode="rgb_array"))
    played = replay_episode(None, agent.policy, seed, RolloutPlan(1, max_steps=steps), env=original)
    log = original.steps
    assert played.length == len(log) > at + 5
    env = make_env(agent.recipe, render_mode="rgb_array")
    saved = reach(agent, env, seed, at, greedy=False, fail_on="auto", gamma=0.99)
    assert np.array_equal(np.asarray(saved.obs), log[at - 1][1])
    # the saved state restored twice, each copy stepped with the original actions: the original steps exactly
    for _ in range(2):
        copy = restore(saved.snapshot)
        for action, obs, reward, term, trunc in log[at:]:
            o, r, te, tr, _ = copy.step(action)
            assert np.array_equal(np.asarray(o), obs) and (float(r), bool(te), bool(tr)) == (reward, term, trunc)
            if te or tr:
                break
    # both branches played by the original agent (its action generator at that step): the rest of the episode
    horizon = played.length - at
    branches = [play_branch(agent, side, saved, horizon, greedy=False, fail_on="auto", gamma=0.99) for side in "ab"]
    rest = sum(s[2] for s in log[at:])
    for b in branches:
        assert (b.ret, b.steps, b.terminated) == (rest, horizon, played.terminated)
    assert saved.snapshot.frame.ndim == 3
    env.close()


def test_restorable_kinds():
    from rlviz.envs import EnvRecipe

    assert check_restorable(EnvRecipe.for_env_id("CartPole-v1"), 0, 2) == "copy"
    assert check_restorable(EnvRecipe.for_env_id("MinAtar/Breakout-v1"), 0, 3) == "copy"
    assert check_restorable(EnvRecipe.for_env_id("ALE/Pong-v5"), 0, 6) == "ale"


def test_an_env_that_cannot_be_copied_is_not_restorable():
    class Handle:
        def __deepcopy__(self, memo):
            raise TypeError("cannot copy a native handle")

    env = make_env(__import__("rlviz.envs", fromlist=["EnvRecipe"]).EnvRecipe.for_env_id("CartPole-v1"))
    env.reset(seed=0)
    env.unwrapped.handle = Handle()
    with pytest.raises(NotRestorable, match="cannot be copied"):
        save(env)


def test_states_reached_together_are_the_states_reached_alone():
    from rlviz.disagree.branches import reach_many

    agent = load_agent(SAMPLES / "minatar_breakout_ppo.pt2")
    targets = [(episode_seed_for(0, k), step) for k, step in ((0, 30), (1, 0), (2, 75))]
    kw = {"greedy": False, "fail_on": "auto", "gamma": 0.99}
    together = reach_many(agent, [make_env(agent.recipe, render_mode="rgb_array") for _ in targets], targets, **kw)
    # the same states from the actions the episodes recorded, without the policy's forwards
    taken = [replay_episode(None, agent.policy, seed, RolloutPlan(1, max_steps=step + 5),
                            env=make_env(agent.recipe, render_mode="rgb_array")).actions for seed, step in targets]
    recorded = reach_many(agent, [make_env(agent.recipe, render_mode="rgb_array") for _ in targets], targets,
                          actions=taken, **kw)
    for (seed, step), got, again in zip(targets, together, recorded):
        alone = reach(agent, make_env(agent.recipe, render_mode="rgb_array"), seed, step, **kw)
        for s in (got, again):
            assert s.step == alone.step == step
            assert np.array_equal(s.obs, alone.obs) and np.array_equal(s.snapshot.frame, alone.snapshot.frame)
            assert s.rng.bit_generator.state == alone.rng.bit_generator.state
        a, b = restore(again.snapshot), restore(alone.snapshot)  # and they play on alike
        for action in (0, 1, 2, 1, 1):
            assert np.array_equal(a.step(action)[0], b.step(action)[0])


def test_box_action_envs_are_checked_too():
    from rlviz.envs import EnvRecipe

    assert check_restorable(EnvRecipe.for_env_id("Pendulum-v1"), 0, 0) == "copy"
    with pytest.raises(NotRestorable):
        check_restorable(EnvRecipe.for_env_id("LunarLanderContinuous-v3"), 0, 0)  # Box2D bodies


@pytest.mark.parametrize("name, at, horizon", [("minatar_breakout_ppo.pt2", 25, 40), ("ale_breakout_ppo.pt2", 12, 12)])
def test_branches_played_together_are_the_branches_played_alone(name, at, horizon):
    from rlviz.disagree.branches import play_many, reach_many

    agent, other = load_agent(SAMPLES / name), load_agent(SAMPLES / "minatar_breakout_ppo_noent.pt2")
    player = agent if name.startswith("ale") else other  # MinAtar: the other agent plays from the first's states
    targets = [(episode_seed_for(1, k), step) for k, step in ((0, at), (1, 3), (2, 2 * at))]
    kw = {"greedy": False, "fail_on": "auto", "gamma": 0.99}
    saved = reach_many(agent, [make_env(agent.recipe, render_mode="rgb_array") for _ in targets], targets, **kw)
    together = play_many(player, "b", saved, horizon, keep=[True, False, True], **kw)
    for j, s in enumerate(saved):
        alone = play_many(player, "b", [s], horizon, keep=[j != 1], **kw)[0]
        assert together[j][0] == alone[0] and alone[0].steps > 0
        if j != 1:  # the kept episodes too: frames and actions, step for step
            a, b = together[j][1].trace(30.0), alone[1].trace(30.0)
            assert np.array_equal(a.actions, b.actions) and np.array_equal(np.asarray(a.frames), np.asarray(b.frames))
            together[j][1].close()
            alone[1].close()
        else:
            assert together[j][1] is None
    # the branch's generator is a copy: the saved state's own is untouched, so a state can be played again
    again = play_many(player, "b", saved, horizon, **kw)
    assert [r for r, _ in again] == [r for r, _ in together]
