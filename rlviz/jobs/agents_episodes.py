"""A multi-agent (PettingZoo) run's episodes, shared by ``rlviz render`` (:mod:`rlviz.jobs.render_agents`),
``rlviz compare`` (:mod:`rlviz.jobs.compare_agents`) and the explorer's replays: the rollout of every agent by one
shared-parameter policy, here or in the workers (:func:`agents_rollout`), its summary and per-agent findings
(:func:`agents_summary`), and one episode replayed into a video with a panel column per agent
(:func:`agents_video`)."""

from __future__ import annotations

import io
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..choices import DEFAULT_NUM_ENVS
from ..config import RenderConfig
from ..envs.pettingzoo_envs import is_agents_env_id, is_parallel, make_agents_env
from ..evaluate.backends.workers import Backend, shard_ranges
from ..evaluate.rollouts.agents import (
    AgentsRolloutResult,
    RolloutHooks,
    merge_agents_rollouts,
    play_episode,
    rollout_agents,
)
from ..explain.saliency import attribute
from ..media.atomic import atomic_write
from ..sources import LoadedAgent
from .shards import AgentSource, source_for

__all__ = ["is_agents_agent", "agents_rollout", "run_agents_shard", "AgentsShardTask", "agents_summary",
           "agents_diagnostics", "agents_video"]


def is_agents_agent(agent: LoadedAgent) -> bool:
    """The agent plays a PettingZoo env (its recipe's id is one)."""
    return is_agents_env_id(agent.recipe.env_id)


@dataclass(frozen=True)
class AgentsShardTask:
    """Episodes ``[first_episode, first_episode + episodes)`` of a multi-agent run, for a worker
    (:func:`run_agents_shard`)."""

    source: AgentSource
    first_episode: int
    episodes: int

    def __str__(self) -> str:
        return f"episodes {self.first_episode}-{self.first_episode + self.episodes - 1}"


def run_agents_shard(task: AgentsShardTask, progress: Any = None) -> AgentsRolloutResult:
    """A worker's part of the rollout (join with :func:`~rlviz.evaluate.rollouts.agents.merge_agents_rollouts`)."""
    agent, c = task.source.load(), task.source.config
    return rollout_agents(agent.recipe, agent.policy, task.episodes, c.seed, c.greedy, bool(c.heatmap),
                          first_episode=task.first_episode,
                          hooks=RolloutHooks(report=progress or (lambda _ret: None)))


def agents_rollout(agent: LoadedAgent, config: RenderConfig, backend: Backend | None = None,
                   probe: Any = None) -> AgentsRolloutResult:
    """The config's episodes of ``agent`` (every agent of the game): in this process, or with a worker ``backend``
    (``--workers N``, ``--ray``) in seed-contiguous shards joined into the same result. ``probe``: the rollout's
    (:func:`~rlviz.evaluate.rollouts.agents.rollout_agents`; ``compare --disagreements``): in this process."""
    if config.num_envs != DEFAULT_NUM_ENVS:
        warnings.warn(f"--num-envs {config.num_envs} does not apply to a PettingZoo env ({agent.recipe.env_id}): its "
                      "episodes run one at a time per process; use --workers N to run them in parallel.", stacklevel=2)
    if backend is None or config.episodes < 2 or probe is not None:
        return rollout_agents(agent.recipe, agent.policy, config.episodes, config.seed, config.greedy,
                              bool(config.heatmap), hooks=RolloutHooks(probe=probe))
    source = source_for(config, backend)
    tasks = [AgentsShardTask(source, r.start, len(r)) for r in shard_ranges(config.episodes, backend.size, 1)]
    t0 = time.perf_counter()
    with progress.bar(config.episodes, "rollouts", unit="ep") as bar:
        parts = backend.map(run_agents_shard, tasks, progress=lambda ret: bar.update(1, ret=f"{ret:.1f}"),
                            what="the rollout of")
    return merge_agents_rollouts(parts, agent.recipe, config.seed, bool(config.heatmap), time.perf_counter() - t0)



def _stats(x: list[float]) -> dict[str, float]:
    a = np.asarray(x, dtype=np.float64)
    return {"mean": float(a.mean()), "std": float(a.std()), "min": float(a.min()), "max": float(a.max())}


def agents_summary(result: AgentsRolloutResult, agent: LoadedAgent, config: RenderConfig) -> dict[str, Any]:
    """summary.json: the team's statistics, each agent's, and the per-agent diagnostics."""
    eps = result.episodes
    per_agent = {}
    for a in result.agents:
        per_agent[a] = {
            "return": _stats([e.returns[a] for e in eps]),
            "length": _stats([e.lengths[a] for e in eps]),
            "terminations": int(sum(e.terminated[a] for e in eps)),
            "truncations": int(sum(e.truncated[a] for e in eps)),
            "failures": int(sum(e.failed[a] for e in eps)),
            "failures_placed": int(sum(a in e.where for e in eps)),
        }
    return {
        "env_id": result.env_id, "multi_agent": True, "agents_list": list(result.agents),
        "policy": "shared", "kind": agent.policy.kind, "episodes": len(eps), "seed": int(config.seed),
        "greedy": bool(config.greedy), "steps": int(result.steps),
        "team_return": _stats([e.team_return for e in eps]), "episode_steps": _stats([e.steps for e in eps]),
        "agents": per_agent,
        "heatmap": None if result.heatmap is None else {"failures": int(result.heatmap.failures),
                                                        "episodes": int(result.heatmap.episodes)},
        "heatmap_note": _heatmap_note(result, config),
        "diagnostics": agents_diagnostics(result),
        "wall_time_s": round(float(result.wall_time), 3),
    }


def _heatmap_note(result: AgentsRolloutResult, config: RenderConfig) -> str | None:
    if not config.heatmap or result.heatmap is not None:
        return None
    return (f"no failure heatmap: rlviz reads agent positions of pistonball, knights-archers-zombies and MPE; "
            f"{result.env_id} is none of them")


def agents_diagnostics(result: AgentsRolloutResult) -> list[dict[str, Any]]:
    """Findings per agent ({severity, code, agent, message}): an agent that (nearly) always takes one action, an
    agent far behind the others, agents that fail in most episodes."""
    findings: list[dict[str, Any]] = []
    eps = result.episodes
    n = len(eps)
    means = {a: float(np.mean([e.returns[a] for e in eps])) for a in result.agents}
    for a in result.agents:
        counts = np.sum([e.actions[a] for e in eps], axis=0) if eps and len(eps[0].actions[a]) else np.zeros(0)
        total = int(counts.sum()) if counts.size else 0
        if total >= 20 and counts.max() >= 0.95 * total:
            findings.append({"severity": "warning", "code": "agent_one_action", "agent": a,
                             "message": f"{a} took action {int(counts.argmax())} in {counts.max() / total:.0%} of its "
                                        f"{total} decisions: its policy has collapsed to one action."})
        others = [m for b, m in means.items() if b != a]
        if len(others) >= 2:
            spread = float(np.std(others)) or 1e-9
            if means[a] < float(np.mean(others)) - 3 * spread and means[a] < min(others):
                findings.append({"severity": "warning", "code": "agent_behind", "agent": a,
                                 "message": f"{a}'s mean return {means[a]:.3g} is far below the other agents' "
                                            f"(mean {np.mean(others):.3g}, sd {np.std(others):.3g})."})
        failed = sum(e.failed[a] for e in eps)
        if n and failed > n / 2:
            findings.append({"severity": "info", "code": "agent_fails", "agent": a,
                             "message": f"{a} failed (eliminated or lost) in {failed} of {n} episodes."})
    return findings


class _SaliencyTap:
    """Per agent, the running mean and peak of its saliency maps over the episode (one batched attribution per step)."""

    def __init__(self, policy: Any, method: str, target: Any):
        self.policy, self.method, self.target = policy, method, target
        self.total: dict[str, np.ndarray] = {}
        self.peak: dict[str, np.ndarray] = {}
        self.count: dict[str, int] = {}

    def __call__(self, agents: list[str], x: np.ndarray) -> None:
        maps = attribute(self.policy, x, method=self.method, target=self.target)
        for a, m in zip(agents, maps):
            m = np.asarray(m, dtype=np.float64)
            if a in self.total:
                self.total[a] += m
                np.maximum(self.peak[a], m, out=self.peak[a])
            else:
                self.total[a], self.peak[a] = m.copy(), m.copy()
            self.count[a] = self.count.get(a, 0) + 1

    def write(self, stem: Path) -> tuple[Path, Path | None]:
        arrays: dict[str, Any] = {"agents": np.array(list(self.total), dtype=str), "method": np.array(self.method)}
        for a in self.total:
            arrays[f"{a}/mean"] = (self.total[a] / self.count[a]).astype(np.float32)
            arrays[f"{a}/peak"] = self.peak[a].astype(np.float32)
            arrays[f"{a}/decisions"] = np.array(self.count[a])
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        npz = atomic_write(stem.with_name(stem.name + "-saliency.npz"), buf.getvalue())
        return npz, self._plot(stem.with_name(stem.name + "-saliency.png"))

    def _plot(self, path: Path) -> Path | None:
        means = {a: self.total[a] / self.count[a] for a in self.total}
        if not means or any(m.ndim != 2 for m in means.values()):
            return None  # vector observations: the numbers are in the .npz
        import matplotlib.pyplot as plt

        from ..evaluate.failures.heatmap import save_figure

        n = len(means)
        cols = min(n, 8)
        rows = -(-n // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(2.2 * cols, 2.4 * rows), squeeze=False)
        for ax in axes.ravel():
            ax.axis("off")
        for ax, (a, m) in zip(axes.ravel(), means.items()):
            ax.imshow(m, cmap="inferno")
            ax.set_title(a, fontsize=8)
        fig.suptitle(f"mean {self.method} saliency per agent", fontsize=9)
        return save_figure(fig, path, dpi=100)


def agents_video(agent: LoadedAgent, idx: int, label: str, folder: Path, config: RenderConfig, gamma: float,
                 expected: dict[str, float] | None = None) -> dict[str, Any]:
    """Replay episode ``idx`` through the recorder into ``folder`` as ``<label>-episode-<idx>.mp4``: {"episode",
    "label", "video", "saliency", "returns", "fps"}; a replay whose returns differ from ``expected`` (the
    rollout's, per agent) gets a warning."""
    from ..record.agents.pettingzoo import AgentsOptions, RecordAECEpisode, RecordParallelEpisode
    from ..record.episode_video import RecordOptions

    env = make_agents_env(agent.recipe, render_mode="rgb_array")
    wrapper = RecordParallelEpisode if is_parallel(env) else RecordAECEpisode
    options = AgentsOptions(record=RecordOptions(preset="ultrafast", gamma=gamma, action_names=agent.action_names,
                                                 saliency=config.saliency, saliency_target=config.saliency_target))
    rec = wrapper(env, folder, episode_trigger=lambda e: True, name_prefix=label, policies=agent.policy,
                  options=options)
    rec.episode_id = idx - 1  # the file is <label>-episode-<idx>.mp4
    tap = _SaliencyTap(agent.policy, config.saliency, config.saliency_target) if config.saliency else None
    try:
        replayed = play_episode(rec, agent.policy, idx, config.seed, config.greedy, tap=tap)
        rec.finish_videos()
        video = rec.last_video_path
    finally:
        rec.close()
    if expected is not None and replayed.returns != expected:
        warnings.warn(f"the replay of episode {idx} for its video returned {replayed.returns}, the rollout "
                      f"{expected}: the env is not deterministic given its seed.", stacklevel=2)
    saliency = tap.write(folder / f"{label}-episode-{idx}") if tap is not None and tap.total else None
    return {"episode": idx, "label": label, "video": video, "saliency": saliency,
            "returns": replayed.returns, "fps": float(rec.frames_per_sec)}
