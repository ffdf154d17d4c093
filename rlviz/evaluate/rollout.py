"""Many-episode rollouts: returns, lengths, failure events, value-vs-return statistics and the
failure heatmap, with every episode replayable on its own.

Reproducibility: episode ``k`` of ``rollout(seed=S)`` starts from ``env.reset(seed=episode_seed)``
and samples its actions with its own ``np.random.default_rng(episode_seed)``, where
``episode_seed = episode_seed_for(S, k)``. So :func:`replay_episode` re-runs it alone, on a fresh
env or on one the caller wraps (a video recorder). ALE seeded resets normally reload the ROM
(~15x an unseeded reset); :mod:`rlviz.envs.ale_seed` makes them exact and cheap.

The envs are managed here rather than in a ``SyncVectorEnv``: each sub-env gets a seeded reset
per episode (gymnasium's same-step autoreset would first do an unseeded one), idle sub-envs are
not stepped once the last episodes run, and extractors see each sub-env directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..agent.actions import check_policy_actions, draw_noise
from ..agent.policy import Policy
from ..attention.tracker import AttentionSpec, AttentionTracker
from ..choices import DEFAULT_NUM_ENVS, FAIL_ON
from ..envs.ale_seed import seeded_reset
from ..envs.frames import to_rgb_frame
from ..envs.recipe import EnvRecipe, make_env
from ..episode.result import EpisodeResult
from ..errors import EnvError, UsageError
from ..progress import bar
from .heatmap import FailureHeatmap
from .lockstep import Report, decide, input_buffer, run_lockstep
from .objects import Extractor, as_extractor, extractor_for
from .pixel_heatmap import FailureReplay, copies_faithfully
from .runner import Runner
from .steplog import StepLog
from .threads import DEFAULT_THREADS, torch_threads

__all__ = ["EpisodeRecord", "RolloutResult", "rollout", "replay_episode", "episode_seed_for", "FAIL_ON"]



def episode_seed_for(seed: int, index: int) -> int:
    """The env-reset and action-sampling seed of episode ``index`` of a rollout seeded ``seed``."""
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1)[0])


#: With an extractor that reads rendered frames, render only the frames before failures, by replaying
#: failing episodes (:mod:`rlviz.evaluate.pixel_heatmap`); False renders every step (the reference).
REPLAY_PIXEL_FAILURES = True

#: The rollout's name for :class:`rlviz.episode.EpisodeResult` (one result type for every episode).
EpisodeRecord = EpisodeResult


@dataclass(frozen=True)
class RolloutResult:
    """episodes: EpisodeRecord per episode, by index; heatmap: FailureHeatmap or None;
    steps: env steps taken; wall_s: seconds; gamma: discount of value_sums."""

    env_id: str
    episodes: tuple
    heatmap: FailureHeatmap | None
    steps: int
    wall_s: float
    gamma: float
    seed: int
    fail_on: str
    recipe_json: str = field(default="", repr=False)

    @property
    def returns(self) -> np.ndarray:
        return np.array([e.ret for e in self.episodes], dtype=np.float64)

    @property
    def lengths(self) -> np.ndarray:
        return np.array([e.length for e in self.episodes], dtype=np.int64)


def _recipe(recipe) -> EnvRecipe:
    if isinstance(recipe, str):
        return EnvRecipe.for_env_id(recipe)
    if isinstance(recipe, EnvRecipe):
        return recipe
    raise UsageError(f"recipe={recipe!r}; expected an EnvRecipe or an env id string such as 'ALE/Breakout-v5'.")


def _clips(recipe: EnvRecipe) -> bool:
    return any(w.name == "clip_reward" for w in recipe.wrappers)


def rollout(
    recipe: EnvRecipe | str,
    policy: Policy,
    episodes: int,
    *,
    num_envs: int = DEFAULT_NUM_ENVS,
    seed: int = 0,
    greedy: bool = False,
    fail_on: str = "auto",
    objects: Extractor | str | None = None,
    heatmap: FailureHeatmap | bool | None = None,
    gamma: float = 0.99,
    progress: bool | None | Callable = None,
    max_steps: int | None = None,
    first_episode: int = 0,
    lookback: int = 8,
    threads: int | None = DEFAULT_THREADS,
    indices: Iterable[int] | None = None,
    attention: AttentionSpec | str | None = None,
    probe: Any = None,
) -> RolloutResult:
    """Run ``episodes`` episodes with ``num_envs`` envs stepped in lockstep, one batched forward per step.

    fail_on: "auto" (life loss when the env reports lives, else termination), "termination",
        "life-loss" or "negative-reward" (e.g. Pong: a conceded point). Truncation is never a failure.
    objects: an Extractor, "module:function", or None; heatmap: a FailureHeatmap to add to, True
        for a new one, or None. Either one given turns the heatmap on (the other gets its default).
    max_steps: truncate episodes longer than this (counted as truncated).
    lookback: for the heatmap, an object not visible on the step before a failure is taken from the
        latest of this many steps before where it is (1: the step before only).
    progress: show a progress bar (None: when :func:`rlviz.progress.enabled` is on; the library is silent
        by default), or a callable called with each finished episode's return (workers report to the
        driver's one bar this way).
    threads: torch intra-op threads during the rollout (restored afterwards), default 1: fastest for rollouts'
        small batches, and it does not collapse on a loaded machine (:mod:`rlviz.evaluate.threads`); None leaves
        torch's setting.
    first_episode: index of the first episode: rollouts of indices [0, 500) and [500, 1000) with the
        same seed are together the same 1000 episodes as one run (merge their heatmaps).
    indices: the episode indices to play instead of ``range(first_episode, first_episode + episodes)``, taken
        one at a time as envs free up: any subset of a run (an iterator the workers of a pool share,
        :func:`rlviz.evaluate.workers.claimed_indices`; a dead worker's episodes again). ``episodes`` then only
        sizes the progress bar; ``first_episode`` stays the run's first (the heatmap's background).
    attention: an :class:`~rlviz.attention.tracker.AttentionSpec` or a saliency method name: every step's
        attribution share per heatmap object (turns the heatmap on), in each ``EpisodeResult.attention``.
    probe: an object the lockstep loop tells each step's states and decisions (:attr:`Runner.probe`, e.g.
        :class:`rlviz.disagree.probe.DisagreementProbe`: another policy asked on the same states); it does not
        change the episodes.
    """
    recipe = _recipe(recipe)
    _check_rollout_args(policy, episodes, num_envs, max_steps)
    episodes, num_envs = int(episodes), min(int(num_envs), int(episodes))
    if isinstance(attention, str):
        attention = AttentionSpec(attention)
    if attention is not None and heatmap in (None, False):
        heatmap = True  # attention puts its shares on the heatmap's objects
    extractor = _extractor(recipe, objects, heatmap)
    if indices is None:
        indices = range(int(first_episode), int(first_episode) + episodes)
    with torch_threads(threads):
        return _rollout(recipe, policy, episodes, num_envs, seed, greedy, fail_on, extractor, heatmap, gamma,
                        progress, max_steps, int(first_episode), lookback, indices, attention, probe)


def _rollout(recipe, policy, episodes, num_envs, seed, greedy, fail_on, extractor, heatmap, gamma, progress,
             max_steps, first_episode, lookback, indices, attention=None, probe=None) -> RolloutResult:
    if callable(progress):
        progress_bar: Any = Report(progress)
    else:
        progress_bar = bar(episodes, "rollouts", unit="ep", show=progress)  # shown while the envs are built, too
    envs = [make_env(recipe, render_mode="rgb_array") for _ in range(num_envs)]
    replay = None
    try:
        check_policy_actions(policy, envs[0].action_space)
        space: Any = envs[0].action_space
        n_actions = int(space.n) if isinstance(getattr(space, "n", None), (int, np.integer)) else 0  # 0: not Discrete
        hm = None
        if extractor is not None:
            own = make_env(recipe, render_mode="rgb_array") if extractor.needs_frame and REPLAY_PIXEL_FAILURES else None
            first_seed = episode_seed_for(seed, int(first_episode))  # (rendered rollout envs could not be copied)
            hm = _start_heatmap(own if own is not None else envs[0], extractor, heatmap, recipe.env_id, first_seed)
            if own is not None:
                copyable = copies_faithfully(make_env(recipe, render_mode="rgb_array"), first_seed, n_actions)
                replay = FailureReplay(own, extractor, hm, lookback, n_actions, copyable)
        runner = Runner(policy, greedy, fail_on, extractor, hm, float(gamma), _clips(recipe), max_steps, lookback,
                         replay)
        if attention is not None:
            runner.attention = AttentionTracker(attention, policy, extractor, lookback)
            if n_actions == 0:
                raise UsageError(f"attention explains a Discrete action's logit; {recipe.env_id}'s actions are {space}.")
        runner.probe = probe
        t0 = time.perf_counter()
        records, steps = run_lockstep(runner, envs, indices, lambda k: episode_seed_for(seed, k), progress_bar)
        wall = time.perf_counter() - t0
        if hm is not None:
            hm.episodes += len(records)
    finally:
        progress_bar.close()
        for e in envs:
            e.close()
        if replay is not None:
            replay.close()
    return RolloutResult(
        recipe.env_id, tuple(records), hm, steps, wall, float(gamma), int(seed), runner.fail_on, recipe.to_json()  # type: ignore[arg-type]
    )


def _check_rollout_args(policy, episodes, num_envs, max_steps) -> None:
    if not isinstance(policy, Policy):
        raise UsageError(f"policy is a {type(policy).__name__}; expected an rlviz Policy (e.g. TorchPolicy(module)).")
    if int(episodes) < 1 or int(num_envs) < 1:
        raise UsageError(f"episodes={episodes}, num_envs={num_envs}; both must be at least 1.")
    if max_steps is not None and int(max_steps) < 1:
        raise UsageError(f"max_steps={max_steps}; expected a positive number of steps or None.")


def _extractor(recipe: EnvRecipe, objects, heatmap) -> Extractor | None:
    """The object extractor the heatmap uses, or None when no heatmap was asked for."""
    if objects is None and heatmap in (None, False):
        return None
    if isinstance(objects, str):
        from .objects import load_extractor

        return load_extractor(objects)
    return as_extractor(objects) if objects is not None else extractor_for(recipe.env_id)


def _start_heatmap(env, extractor: Extractor, heatmap, env_id: str, seed: int) -> FailureHeatmap:
    """The heatmap to add failures to (``heatmap`` itself when it is one), sized by a first frame of the game."""
    seeded_reset(env, seed)
    background = to_rgb_frame(env.render())
    if hasattr(extractor, "frame_shape") and extractor.frame_shape is None:
        extractor.frame_shape = background.shape[:2]
    names = extractor.names or tuple(extractor(background, env))
    hm = heatmap if isinstance(heatmap, FailureHeatmap) else FailureHeatmap(background.shape[:2], names, env_id)
    if hm.background is None:
        hm.background = background
    return hm


def replay_episode(
    recipe: EnvRecipe | str | None,
    policy: Policy,
    record: EpisodeResult | int | None,
    *,
    env=None,
    greedy: bool | None = None,
    fail_on: str = "auto",
    gamma: float = 0.99,
    max_steps: int | None = None,
    rng: np.random.Generator | None = None,
) -> EpisodeResult:
    """Play one episode alone: the one single-episode loop of rlviz (replays, :func:`rlviz.run_episode`).

    Seeding is the rollouts' scheme: the env is reset with the episode's seed and actions are sampled
    with ``np.random.default_rng(seed)``, so the same seed replays the same episode.
    record: an :class:`EpisodeResult` from :func:`rollout`, a bare episode seed (with ``greedy``), or None
        for an unseeded episode. rng: sample actions with this generator instead.
    env: run on this env (e.g. wrapped in a recorder; it is reset here and not closed), else a fresh
        ``make_env(recipe)``. Exact: forwards are batch-invariant (:meth:`Policy.evaluate`) and the actions come
        from the rollouts' :func:`~rlviz.evaluate.lockstep.decide`.
    """
    if isinstance(record, EpisodeResult):
        index, seed, greedy = record.index, record.seed, record.greedy if greedy is None else greedy
    else:
        index, seed, greedy = -1, None if record is None else int(record), bool(greedy)
    if env is None and recipe is None:
        raise UsageError("replay_episode needs a recipe (an EnvRecipe or env id) or env=...; received neither.")
    recipe = _recipe(recipe) if recipe is not None else None
    own = env is None
    env = make_env(recipe, render_mode="rgb_array") if own else env  # type: ignore[arg-type]  # own: a recipe was given
    try:
        clips = _clips(recipe) if recipe is not None else False
        runner = Runner(policy, greedy, fail_on, None, None, float(gamma), clips, max_steps)
        obs, ep = runner.start(env, index, seed)
        if rng is not None:
            ep.rng = rng
        buf = input_buffer(obs, 1)  # the rollouts' input row
        log, row = StepLog(1, clips), np.zeros(1, np.intp)  # the rollouts' step log, one slot
        while True:
            buf[0] = obs
            d = decide(policy, buf, None, lambda draw: draw_noise(ep.rng, draw), greedy, runner.spec,
                       forward=lambda o: runner.evaluate([env], [ep], o))
            log.write(row, d)
            obs, reward, done, term, trunc = runner.step(env, ep, d.env_actions[0])
            log.end_step(row, [reward])
            if done:
                log.fold(0, ep)
                return runner.finish(ep, term, trunc)
            log.roll([ep])
    except (ValueError, TypeError) as exc:
        if isinstance(exc, UsageError):
            raise
        where = recipe.env_id if recipe is not None else type(getattr(env, "unwrapped", env)).__name__
        raise EnvError(f"Playing episode seed {seed} on {where!r} failed: {exc}") from exc
    finally:
        if own:
            env.close()
