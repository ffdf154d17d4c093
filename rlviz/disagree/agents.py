"""``rlviz compare A B --disagreements K`` on a PettingZoo env: the analysis of :mod:`.run`, per agent id.

A and B are each one shared-parameter policy playing every agent (what compare loads on a PettingZoo env), so
agent id X's states are X's own observations in the two rollouts: at each of X's decisions in A's episodes, B is
asked on the observation A's policy acted on for X (and A on B's), under the same action mask (classic games'
``action_mask``: both distributions are the masked ones the agents play with). Per agent id the per-state numbers
are :class:`~.probe.EpisodeDisagreement` rows (state t = X's t-th decision; measure and "greedy actions differ" by
:func:`~.probe.compare_outputs`, as the single-agent probe), the top K states are :func:`~.select.top_states`'s
(the same criterion, window and order), and the summary and note :func:`~.select.summarize_disagreement`'s and
:func:`~.run.found_note`'s: one :class:`~.run.Disagreements` per agent id, written by :mod:`.outputs`.

Branches: a PettingZoo game's state is not saved; episodes replay exactly from their seed (the rollout's premise,
:func:`~rlviz.evaluate.rollouts.agents.play_episode`), so a branch replays the picked episode with the playing
side's policy up to X's decision t, where A's policy (then, on a fresh env, B's) takes over *every* agent (each
side is one policy for the whole team) with the same random stream: the two branches share the env and the action
noise, and the playing side's branch is its own episode's continuation. A branch's numbers are X's: its reward
from decision t for ``--disagreement-horizon`` of its decisions (``--disagreement-to-end``: until it leaves the
game), its decisions, whether it left by termination and whether it failed (the rollout's rule: terminated with a
negative last reward or while others play on). No branch videos are drawn on PettingZoo envs (``video``: null).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..agent.masking import apply_masks
from ..envs.pettingzoo_envs import is_parallel, make_agents_env
from ..errors import EnvError
from ..evaluate.rollouts.agents import AgentEpisode, AgentsRolloutResult, play_episode
from ..evaluate.statistics.distance import TV
from .branches import BranchResult
from .probe import EpisodeDisagreement, compare_outputs
from .run import BranchedState, Disagreements, better_of, found_note
from .select import Pick, summarize_disagreement, top_states

__all__ = ["AgentsProbe", "analyse_agents", "branch_agent_state"]


class AgentsProbe:
    """The ``probe`` of ``side``'s multi-agent rollout (:func:`~rlviz.evaluate.rollouts.agents.rollout_agents`):
    ``other`` (a Policy) asked on every deciding agent's observation, under the same masks; after the rollout,
    ``episodes[agent][k]`` is agent id ``agent``'s :class:`~.probe.EpisodeDisagreement` of episode ``k`` (its T
    decisions), ``measure`` what their ``tv`` is and ``forwarded`` the observations ``other`` was asked on."""

    def __init__(self, other: Any, side: str):
        self.other, self.side = other, side
        self.measure = TV
        self.forwarded = 0
        self.episodes: dict[str, dict[int, EpisodeDisagreement]] = {}
        self._rows: dict[str, list[tuple[float, float, float, bool]]] = {}  # the running episode's, per agent

    def __call__(self, agents: list[str], x: np.ndarray, masks: np.ndarray | None, out: Any) -> None:
        theirs = self.other.evaluate(x)
        if masks is not None:
            theirs = apply_masks(theirs, masks)
        self.forwarded += len(agents)
        self.measure, tv, differ = compare_outputs(out, theirs, len(agents), getattr(self.other, "action_spec", None),
                                                   self.measure)
        own, other = (np.full(len(agents), np.nan) if o.value is None else np.asarray(o.value).reshape(-1)
                      for o in (out, theirs))
        for j, a in enumerate(agents):
            self._rows.setdefault(a, []).append((float(tv[j]), float(own[j]), float(other[j]), bool(differ[j])))

    def end(self, ep: AgentEpisode) -> None:
        """Episode ``ep`` ended: each agent's decisions become its :class:`~.probe.EpisodeDisagreement`."""
        for a in ep.returns:
            rows = self._rows.get(a, [])
            tv, own, other, differ = (np.array([r[i] for r in rows], dt).reshape(-1)
                                      for i, dt in enumerate((np.float32, np.float32, np.float32, bool)))
            self.episodes.setdefault(a, {})[ep.index] = EpisodeDisagreement(self.side, ep.index, ep.seed, tv, own,
                                                                            other, differ)
        self._rows = {}


def analyse_agents(agents: list[Any], probes: list[AgentsProbe], results: list[AgentsRolloutResult], config: Any,
                   ) -> dict[str, Disagreements]:
    """Per agent id (the rollout's order): the analysis of :func:`rlviz.disagree.run.analyse` on its states, the
    top ``config.disagreements`` of them each branched both ways (:func:`branch_agent_state`)."""
    horizon = None if config.disagreement_to_end else int(config.disagreement_horizon)
    window, k = int(config.disagreement_horizon), int(config.disagreements)
    measure = next((p.measure for p in probes if p.measure != TV), TV)
    out = {}
    for agent_id in results[0].agents:
        episodes = tuple(p.episodes[agent_id][e.index] for p, r in zip(probes, results) for e in r.episodes)
        picks = top_states(episodes, k, window)
        states = []
        for rank, pick in enumerate(picks, 1):
            a, b = (branch_agent_state(agents, pick, agent_id, brancher, horizon, config) for brancher in (0, 1))
            states.append(BranchedState(rank, pick, a, b, better_of(a, b)))
        out[agent_id] = Disagreements(summarize_disagreement(episodes), tuple(states), episodes, None,
                                      found_note(episodes, picks, k, window, measure), horizon, measure)
    return out


class _Stop(Exception):
    """The branch is over for the agent (its horizon reached, or it left the game)."""


@dataclass
class _Branch:
    """Agent ``agent``'s branch from its decision ``step``: ``playing``'s policy until then, ``brancher``'s for
    every agent from then on (``horizon`` of its decisions, None: until it leaves the game). Both the policy handed
    to :func:`~rlviz.evaluate.rollouts.agents.play_episode` (``evaluate``) and its ``tap`` (counting the agent's
    decisions); the env's steps are watched by :class:`_ParallelWatch` / :class:`_AECWatch` (:meth:`after`)."""

    playing: Any
    brancher: Any
    agent: str
    step: int
    horizon: int | None
    decisions: int = 0
    on: bool = False
    ret: float = 0.0
    terminated: bool = False
    failed: bool = False
    steps: int = 0

    def tap(self, deciding: list[str], x: np.ndarray) -> None:
        if self.agent not in deciding:
            return
        if self.decisions == self.step:
            self.on = True
        if self.on and self.horizon is not None and self.steps == self.horizon:
            raise _Stop
        self.steps += int(self.on)
        self.decisions += 1

    def evaluate(self, x: np.ndarray) -> Any:
        return (self.brancher if self.on else self.playing).evaluate(x)

    def after(self, reward: float, term: bool, trunc: bool, others: bool) -> None:
        """The env stepped: the agent's ``reward`` then, whether it left (``term``, ``trunc``) and whether others
        play on."""
        if not self.on:
            return
        self.ret += float(reward)
        if term or trunc:
            self.terminated = bool(term)
            self.failed = bool(term and (reward < 0 or others))
            raise _Stop


def _watch(env: Any, branch: _Branch) -> Any:
    """``env`` wrapped so that each step reports the branch agent's reward and exit to ``branch``."""
    from pettingzoo.utils.wrappers import BaseParallelWrapper, BaseWrapper

    a = branch.agent
    if is_parallel(env):
        class _ParallelWatch(BaseParallelWrapper):
            def step(self, actions: dict) -> Any:
                out = self.env.step(actions)
                if a in actions:
                    branch.after(float(out[1].get(a, 0.0)), bool(out[2].get(a)), bool(out[3].get(a)),
                                 bool(self.env.agents))
                return out

        return _ParallelWatch(env)

    class _AECWatch(BaseWrapper):
        def step(self, action: Any) -> None:
            before = list(self.env.agents)
            self.env.step(action)
            if a in before:
                env_ = self.env
                term, trunc = bool(env_.terminations.get(a)), bool(env_.truncations.get(a))
                others = any(not (env_.terminations.get(c) or env_.truncations.get(c)) for c in before if c != a)
                branch.after(float(env_.rewards.get(a, 0.0)), term, trunc, others)

    return _AECWatch(env)


def branch_agent_state(agents: list[Any], pick: Pick, agent_id: str, brancher: int, horizon: int | None,
                       config: Any) -> BranchResult:
    """Agent ``agent_id``'s branch from ``pick`` (one of its states) with ``agents[brancher]``'s policy taking
    over every agent there: the picked episode replayed by its side's policy to the state, on a fresh env."""
    playing = agents[0 if pick.side == "a" else 1]
    branch = _Branch(playing.policy, agents[brancher].policy, agent_id, pick.step, horizon)
    env = _watch(make_agents_env(playing.recipe, render_mode="rgb_array"), branch)  # (frames on: as the rollout)
    try:
        play_episode(env, branch, pick.episode, int(config.seed), bool(config.greedy), tap=branch.tap)
    except _Stop:
        pass
    finally:
        env.close()
    if not branch.on:
        raise EnvError(f"Replaying episode {pick.episode} (seed {pick.seed}) of {playing.recipe.env_id} to "
                       f"{agent_id}'s decision {pick.step} ended after {branch.decisions} of its decisions: the env is "
                       "not deterministic under its seed, so its states cannot be branched from.")
    return BranchResult("ab"[brancher], branch.ret, branch.steps, int(branch.failed), branch.terminated)
