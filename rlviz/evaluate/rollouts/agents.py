"""Episodes of a PettingZoo env played by one shared-parameter policy (CleanRL's and SB3's PettingZoo agents): the
multi-agent rollout behind ``rlviz render`` on a PettingZoo env id.

One batched forward per step: a parallel env's step evaluates every agent playing in one ``policy.evaluate``
(``env.agents`` order); an AEC env's step is one agent's move (its observation alone). Classic games' action masks
(``obs["action_mask"]``) mask the logits (:func:`rlviz.agent.masking.apply_masks`). Episode ``k`` is reset and
sampled with ``episode_seed_for(seed, k)`` and ``Policy.evaluate`` is batch-invariant, so an episode depends only
on (policy, env, seed, greedy): :func:`play_episode` replays any of them alone (on a recorder-wrapped env, for its
video); each episode runs on a fresh env, as its replay does.

Failures, per agent: an agent *failed* when it left the game by termination (not the time limit) and either its
last reward was negative (it lost: connect_four's loser) or the game went on without it (eliminated: a KAZ archer).
With ``heatmap``, where it was then (:mod:`rlviz.evaluate.failures.agent_positions`) goes into a
:class:`~rlviz.evaluate.failures.heatmap.FailureHeatmap` whose objects are the agents.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import progress
from ...agent.actions import action_spec, sample_actions, to_env_action
from ...agent.masking import apply_masks
from ...envs.frames import to_rgb_frame
from ...envs.pettingzoo_envs import is_parallel, make_agents_env, split_observation
from ...errors import UsageError
from ..failures.agent_positions import agent_positions, disc_mask, knows_positions
from ..failures.heatmap import FailureHeatmap
from .rollout import episode_seed_for

__all__ = ["AgentEpisode", "AgentsRolloutResult", "play_episode", "rollout_agents", "RolloutHooks", "merge_agents_rollouts",
           "agents_heatmap", "RESETS_CLEANLY"]

#: Modules of the games whose ``reset(seed)`` restores everything: their episodes reuse one env (the others get a
#: fresh env each; making one costs ~1 ms for MPE, ~40 ms for the butterfly games).
RESETS_CLEANLY = ("mpe2.", "pettingzoo.classic.", "pettingzoo.butterfly.pistonball.")


@dataclass
class AgentEpisode:
    """One episode, per agent: ``returns``, ``lengths`` (its decisions), ``terminated`` / ``truncated`` (how it
    left; both False: still playing when the episode ended), ``failed``, ``where`` (its (x, y) in frame pixels
    when it failed, if known) and ``actions`` (its actions, Discrete: counts per action)."""

    index: int
    seed: int
    steps: int = 0
    returns: dict[str, float] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)
    terminated: dict[str, bool] = field(default_factory=dict)
    truncated: dict[str, bool] = field(default_factory=dict)
    failed: dict[str, bool] = field(default_factory=dict)
    where: dict[str, tuple[float, float]] = field(default_factory=dict)
    actions: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def team_return(self) -> float:
        """The sum of every agent's return."""
        return float(sum(self.returns.values()))


@dataclass
class AgentsRolloutResult:
    """The rollout: its ``agents`` (column order), ``episodes``, the failure ``heatmap`` (objects = agents; None
    without ``heatmap`` or for a game rlviz knows no positions of), ``steps`` and ``wall_time``."""

    env_id: str
    agents: tuple[str, ...]
    episodes: list[AgentEpisode]
    heatmap: FailureHeatmap | None = None
    steps: int = 0
    wall_time: float = 0.0

    def returns(self, agent: str | None = None) -> np.ndarray:
        """float64 [N]: ``agent``'s return per episode (None: the team's, every agent's summed)."""
        return np.array([e.team_return if agent is None else e.returns.get(agent, 0.0) for e in self.episodes])


def play_episode(env: Any, policy: Any, index: int, seed: int, greedy: bool = False, watch: bool = False,
                 tap: Any = None, probe: Any = None) -> AgentEpisode:
    """Episode ``index`` of the rollout seeded ``seed`` on ``env`` (parallel or AEC, possibly wrapped by a
    recorder). ``watch``: note where each failing agent was. Discrete actions are counted per agent.
    ``tap(agents, observations)``: called with each step's deciding agents and their policy inputs (saliency).
    ``probe(agents, observations, masks, out)``: called with the same and what the policy said, ``out`` (its
    :class:`~rlviz.agent.policy.PolicyOutput`, masked) and ``masks`` (bool [B, actions], or None) the actions were
    sampled from (``compare --disagreements``: :class:`rlviz.disagree.agents.AgentsProbe`)."""
    s = episode_seed_for(seed, index)
    rng = np.random.default_rng(s)
    ep = AgentEpisode(index, s)
    spec = action_spec(env.action_space(env.possible_agents[0]))
    num_actions = int(spec.size) if spec.kind == "discrete" else 0
    agents = list(env.possible_agents)
    for a in agents:
        ep.returns[a], ep.lengths[a], ep.terminated[a], ep.truncated[a], ep.failed[a] = 0.0, 0, False, False, False
        ep.actions[a] = np.zeros(num_actions, dtype=np.int64)
    step = _parallel if is_parallel(env) else _aec
    step(env, _Decider(policy, rng, greedy, tap, probe), ep, spec, watch)
    return ep


class _Decider:
    """One batched forward over the deciding agents' observations: their actions."""

    def __init__(self, policy: Any, rng: Any, greedy: bool, tap: Any, probe: Any = None):
        self.policy, self.rng, self.greedy, self.tap, self.probe = policy, rng, greedy, tap, probe

    def __call__(self, agents: list[str], observations: list[Any]) -> np.ndarray:
        xs, masks = zip(*(split_observation(o) for o in observations))
        x = np.stack([np.asarray(v) for v in xs])
        if self.tap is not None:
            self.tap(agents, x)
        out = self.policy.evaluate(x)
        stacked = None
        if any(m is not None for m in masks):
            stacked = np.stack([np.ones(out.logits.shape[1], bool) if m is None else np.asarray(m, bool) for m in masks])
            out = apply_masks(out, stacked)
        if self.probe is not None:
            self.probe(agents, x, stacked, out)
        return sample_actions(out, self.rng, self.greedy)


def _left(ep: AgentEpisode, env: Any, a: str, term: bool, trunc: bool, reward: float, others: bool,
          places: Any) -> Any:
    """Agent ``a`` left the game: how, and whether (and where) it failed. ``places``: positions, read once."""
    ep.terminated[a], ep.truncated[a] = term, trunc and not term
    if term and (reward < 0 or others):
        ep.failed[a] = True
        if places is not None:
            places = places if places != "unread" else (agent_positions(env) or {})
            if a in places:
                ep.where[a] = places[a]
    return places


def _parallel(env: Any, decide: _Decider, ep: AgentEpisode, spec: Any, watch: bool) -> None:
    obs, _ = env.reset(seed=ep.seed)
    counting = {a: len(c) > 0 for a, c in ep.actions.items()}
    while env.agents:
        live = list(env.agents)
        acts = decide(live, [obs[a] for a in live])
        actions = {a: to_env_action(act, spec) for a, act in zip(live, acts)}
        obs, rewards, terms, truncs, _ = env.step(actions)
        ep.steps += 1
        places: Any = "unread" if watch else None
        for a in live:
            r = float(rewards.get(a, 0.0))
            ep.returns[a] += r
            ep.lengths[a] += 1
            if counting[a]:
                ep.actions[a][actions[a]] += 1
            term, trunc = bool(terms.get(a, False)), bool(truncs.get(a, False))
            if term or trunc:
                places = _left(ep, env, a, term, trunc, r, bool(env.agents), places)


def _aec(env: Any, decide: _Decider, ep: AgentEpisode, spec: Any, watch: bool) -> None:
    env.reset(seed=ep.seed)
    while env.agents:
        a = env.agent_selection
        done = bool(env.terminations.get(a) or env.truncations.get(a))
        if done:
            action = None
        else:
            action = to_env_action(decide([a], [env.observe(a)])[0], spec)
            ep.lengths[a] += 1
            if len(ep.actions[a]):
                ep.actions[a][action] += 1
        before = list(env.agents)
        env.step(action)
        ep.steps += 1
        places: Any = "unread" if watch else None
        for b, r in getattr(env, "rewards", {}).items():
            ep.returns[b] = ep.returns.get(b, 0.0) + float(r)
        for b in before:  # the agents this move ended (the game's end: all of them)
            term, trunc = bool(env.terminations.get(b, False)), bool(env.truncations.get(b, False))
            if (term or trunc) and not (ep.terminated[b] or ep.truncated[b]):
                others = any(not (env.terminations.get(c) or env.truncations.get(c)) for c in before if c != b)
                places = _left(ep, env, b, term, trunc, float(env.rewards.get(b, 0.0)), others, places)


@dataclass(frozen=True)
class RolloutHooks:
    """What :func:`rollout_agents` calls on the way: ``report(team_return: float)`` after each episode, in place of
    the progress bar (a worker's report to the driver's bar); ``probe``: :func:`play_episode`'s, with
    ``probe.end(episode)`` called after each episode (its :class:`AgentEpisode`)."""

    report: Any = None
    probe: Any = None


def rollout_agents(recipe: Any, policy: Any, episodes: int, seed: int = 0, greedy: bool = False,
                   heatmap: bool = False, first_episode: int = 0,
                   hooks: RolloutHooks = RolloutHooks()) -> AgentsRolloutResult:
    """Episodes ``[first_episode, first_episode + episodes)`` of the PettingZoo env of ``recipe`` played by
    ``policy`` (every agent), one after another in this process; with ``heatmap`` where each failing agent was and
    the failure heatmap per agent of these episodes (games rlviz knows positions of). The shards of a run (run by
    ``--workers``) are joined by :func:`merge_agents_rollouts`, which builds the run's heatmap: any split of the
    episodes gives the same result. ``hooks``: a progress report and a probe (:class:`RolloutHooks`)."""
    # A fresh env per episode, except for the families whose reset is clean (:data:`RESETS_CLEANLY`, held by tests):
    # some games keep state across resets (knights-archers-zombies' episode after another differs from the same
    # seed's on a new env), and an episode must replay alone for its video. Always with frames: some games observe differently without a render mode
    # (pistonball's reset observation is blank then), so an episode must not depend on --heatmap either.
    def make() -> Any:
        return make_agents_env(recipe, render_mode="rgb_array")

    env = make()
    agents = tuple(env.possible_agents)
    report, probe = hooks.report, hooks.probe
    watch = bool(heatmap) and knows_positions(env)
    clean = type(env.unwrapped).__module__.startswith(RESETS_CLEANLY)
    t0, out = time.perf_counter(), list[AgentEpisode]()
    try:
        with progress.bar(episodes, "rollouts", unit="ep", show=False if report is not None else None) as bar:
            for k in range(int(first_episode), int(first_episode) + int(episodes)):
                if out and not clean:
                    env.close()
                    env = make()
                ep = play_episode(env, policy, k, seed, greedy, watch, probe=probe)
                if probe is not None:
                    probe.end(ep)
                out.append(ep)
                if report is None:
                    bar.update(1, ret=f"{ep.team_return:.1f}")
                else:
                    report(ep.team_return)
        result = AgentsRolloutResult(str(recipe.env_id), agents, out, steps=sum(e.steps for e in out),
                                     wall_time=time.perf_counter() - t0)
    finally:
        env.close()
    if watch:
        result.heatmap = agents_heatmap(recipe, result, seed)
    return result


def merge_agents_rollouts(parts: list[AgentsRolloutResult], recipe: Any, seed: int, heatmap: bool,
                          wall_time: float) -> AgentsRolloutResult:
    """One run from its shards (any split of its episodes, each once): episodes in order, and with ``heatmap`` the
    failure heatmap built from all of them, as :func:`rollout_agents` builds it in one process."""
    if not parts:
        raise UsageError("merge_agents_rollouts() received no shards; pass at least one AgentsRolloutResult.")
    episodes = sorted((e for p in parts for e in p.episodes), key=lambda e: e.index)
    if [e.index for e in episodes] != list(range(len(episodes))):
        raise UsageError("merge_agents_rollouts(): the shards overlap or leave gaps; pass each episode once.")
    result = AgentsRolloutResult(parts[0].env_id, parts[0].agents, episodes, steps=sum(p.steps for p in parts),
                                 wall_time=float(wall_time))
    if heatmap:
        env = make_agents_env(recipe, render_mode="rgb_array")
        try:
            known = knows_positions(env)
        finally:
            env.close()
        if known:
            result.heatmap = agents_heatmap(recipe, result, seed)
    return result


def agents_heatmap(recipe: Any, result: AgentsRolloutResult, seed: int) -> FailureHeatmap:
    """The failure heatmap per agent of ``result`` (where each agent was when it failed), over the first episode's
    reset frame."""
    env = make_agents_env(recipe, render_mode="rgb_array")
    try:
        return _heatmap(env, recipe, result, seed)
    finally:
        env.close()


def _heatmap(env: Any, recipe: Any, result: AgentsRolloutResult, seed: int) -> FailureHeatmap:
    env.reset(seed=episode_seed_for(seed, 0))
    frame = to_rgb_frame(env.render())
    shape = (int(frame.shape[0]), int(frame.shape[1]))
    radius = max(4, min(shape) // 40)
    hm = FailureHeatmap(shape, result.agents, str(recipe.env_id))
    hm.background = frame
    for ep in result.episodes:
        for a, (x, y) in ep.where.items():
            hm.add({a: disc_mask(shape, x, y, radius)}, episode=ep.index)
    hm.episodes = len(result.episodes)
    return hm
