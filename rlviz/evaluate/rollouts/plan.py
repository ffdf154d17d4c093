"""What a rollout runs (:class:`RolloutPlan`) and what it measures while running (:class:`RolloutProbes`): the two
frozen records :func:`rlviz.evaluate.rollouts.rollout.rollout` takes beside the env recipe and the policy, and
:class:`~rlviz.evaluate.rollouts.runner.Runner` is built from."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from ...choices import DEFAULT_NUM_ENVS
from ...errors import UsageError
from ..backends.threads import DEFAULT_THREADS

if TYPE_CHECKING:
    from ...attention.tracker import AttentionSpec
    from ..failures.heatmap import FailureHeatmap
    from ..failures.objects import Extractor

__all__ = ["RolloutPlan", "RolloutProbes"]


@dataclass(frozen=True)
class RolloutPlan:
    """What to run: ``episodes`` episodes on ``num_envs`` envs in lockstep.

    seed: episode ``k`` is reset and sampled with ``episode_seed_for(seed, k)`` (so any episode replays alone).
    greedy: the most likely action instead of a sampled one.
    fail_on: "auto" (life loss when the env reports lives, else termination), "termination", "life-loss" or
        "negative-reward" (e.g. Pong: a conceded point). Truncation is never a failure.
    max_steps: truncate episodes longer than this (counted as truncated); None: the env's own limit.
    gamma: discount of the value-vs-return sums.
    first_episode: index of the first episode: plans of indices [0, 500) and [500, 1000) with the same seed are
        together the same 1000 episodes as one run (merge their heatmaps).
    indices: the episode indices to play instead of ``range(first_episode, first_episode + episodes)``, taken one
        at a time as envs free up (an iterator the workers of a pool share: a dead worker's episodes again);
        ``episodes`` then only sizes the progress bar.
    heatmap: the failure heatmap: a :class:`~rlviz.evaluate.failures.heatmap.FailureHeatmap` to add to, True for a new one,
        None / False for none. objects: its object extractor (an ``Extractor``, "module:function", or None for the
        env's default); giving either turns the heatmap on.
    lookback: for the heatmap, an object not visible on the step before a failure is taken from the latest of this
        many steps before where it is (1: the step before only).
    threads: torch intra-op threads during the rollout (restored afterwards), default 1; None leaves torch's.
    progress: show a progress bar (None: when :func:`rlviz.progress.enabled` is on), or a callable called with each
        finished episode's return (workers report to the driver's one bar this way).
    """

    episodes: int
    seed: int = 0
    num_envs: int = DEFAULT_NUM_ENVS
    greedy: bool = False
    fail_on: str = "auto"
    max_steps: int | None = None
    gamma: float = 0.99
    first_episode: int = 0
    indices: Iterable[int] | None = None
    heatmap: FailureHeatmap | bool | None = None
    objects: Extractor | str | None = None
    lookback: int = 8
    threads: int | None = DEFAULT_THREADS
    progress: bool | None | Callable[[float], Any] = None

    def __post_init__(self) -> None:
        if int(self.episodes) < 1 or int(self.num_envs) < 1:
            raise UsageError(f"episodes={self.episodes}, num_envs={self.num_envs}; both must be at least 1.")
        if self.max_steps is not None and int(self.max_steps) < 1:
            raise UsageError(f"max_steps={self.max_steps}; expected a positive number of steps or None.")

    @classmethod
    def for_config(cls, config: Any, gamma: float, **fields: Any) -> RolloutPlan:
        """The plan of a job's config (a :class:`~rlviz.config.RenderConfig`, or one side of a compare): its
        ``episodes`` from ``seed`` on ``min(num_envs, episodes)`` envs, ``greedy``, ``fail_on``, the heatmap and its
        ``objects`` when ``heatmap`` is on, its ``progress``; discounted with ``gamma``. ``fields`` replace any of
        these (a shard's ``episodes``, ``first_episode``, ``indices``; one episode's ``num_envs=1``; an extractor
        already built as ``objects``). The one place a plan is made from a config: render, its shards,
        ``compare --disagreements`` and explore's replays run the same episodes."""
        plan = {"episodes": config.episodes, "seed": config.seed, "num_envs": min(config.num_envs, config.episodes),
                "greedy": config.greedy, "fail_on": config.fail_on, "gamma": gamma, "heatmap": bool(config.heatmap),
                "objects": config.objects if config.heatmap else None, "progress": config.progress}
        return cls(**{**plan, **fields})

    @property
    def wants_heatmap(self) -> bool:
        """The heatmap is on: asked for, or an extractor given."""
        return self.objects is not None or self.heatmap not in (None, False)


@dataclass(frozen=True)
class RolloutProbes:
    """What to measure while the rollout runs, beside returns, failures and the heatmap; none of it changes the
    episodes.

    attention: an :class:`~rlviz.attention.tracker.AttentionSpec` or a saliency method name: every step's
        attribution share per heatmap object (turns the heatmap on), in each ``EpisodeResult.attention``.
    step: an object the lockstep loop tells each step's states and decisions, ``observe(obs, rows, out, slots,
        envs)``, and each episode's end, ``end(slot, episode_state)`` (e.g.
        :class:`rlviz.disagree.probe.DisagreementProbe`: another policy asked on the same states).
    """

    attention: Union[AttentionSpec, str, None] = None
    step: Any = None

    def attention_spec(self) -> AttentionSpec | None:
        if isinstance(self.attention, str):
            from ...attention.tracker import AttentionSpec

            return AttentionSpec(self.attention)
        return self.attention
