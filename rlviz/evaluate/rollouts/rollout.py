"""Many-episode rollouts: returns, lengths, failure events, value-vs-return statistics and the
failure heatmap, with every episode replayable on its own.

Reproducibility: episode ``k`` of a rollout seeded ``RolloutPlan(seed=S)`` starts from ``env.reset(seed=episode_seed)``
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
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...agent.actions import check_policy_actions, draw_noise, space_to_json
from ...agent.capabilities import capabilities_of
from ...agent.policy import Policy
from ...attention.tracker import AttentionTracker
from ...choices import FAIL_ON
from ...envs.ale_seed import seeded_reset
from ...envs.frames import to_rgb_frame
from ...envs.recipe import EnvRecipe, make_env
from ...episode.result import EpisodeResult
from ...errors import EnvError, UsageError
from ...progress import bar
from ..backends.threads import torch_threads
from ..failures.heatmap import FailureHeatmap
from ..failures.objects import Extractor, as_extractor, extractor_for
from ..failures.pixel_heatmap import FailureReplay, copies_faithfully
from .lockstep import Report, decide, input_buffer, run_lockstep
from .plan import RolloutPlan, RolloutProbes
from .runner import Runner
from .steplog import StepLog

__all__ = ["EpisodeRecord", "RolloutResult", "RolloutPlan", "RolloutProbes", "rollout", "replay_episode",
           "episode_seed_for", "FAIL_ON", "heatmap_shape"]



def episode_seed_for(seed: int, index: int) -> int:
    """The env-reset and action-sampling seed of episode ``index`` of a rollout seeded ``seed``."""
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1)[0])


#: With an extractor that reads rendered frames, render only the frames before failures, by replaying
#: failing episodes (:mod:`rlviz.evaluate.failures.pixel_heatmap`); False renders every step (the reference).
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
    #: the env's action space when not Discrete (:func:`rlviz.agent.actions.space_to_json`, Box: plus ``squash``,
    #: the policy's tanh), for the diagnosis made for it; None: Discrete
    action_space: dict | None = field(default=None, repr=False)

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


def rollout(recipe: EnvRecipe | str, policy: Policy, plan: RolloutPlan,
            probes: RolloutProbes | None = None) -> RolloutResult:
    """Run ``plan`` (a :class:`~rlviz.evaluate.rollouts.plan.RolloutPlan`: how many episodes, on how many envs stepped in
    lockstep, seeded how, the failure heatmap...) with one batched forward per step, measuring ``probes`` (a
    :class:`~rlviz.evaluate.rollouts.plan.RolloutProbes`: attention per object, a per-step probe) on the way.
    (0.3's form, ``rollout(recipe, policy, episodes, num_envs=..., ...)``, went in 0.6: an episode count for ``plan``
    is refused, naming the plan to pass.)
    """
    recipe = _recipe(recipe)
    if not isinstance(policy, Policy):
        raise UsageError(f"policy is a {type(policy).__name__}; expected an rlviz Policy (e.g. TorchPolicy(module)).")
    if not isinstance(plan, RolloutPlan):
        count = isinstance(plan, (int, np.integer)) and not isinstance(plan, bool)
        raise UsageError(f"plan={plan!r}; expected a RolloutPlan(episodes, ...)"
                         + (f": pass RolloutPlan({plan}, num_envs=..., seed=...), 0.3's episode count and keywords "
                            "went in 0.6." if count else "."))
    probes = probes or RolloutProbes()
    attention = probes.attention_spec()
    heatmap = plan.heatmap
    if attention is not None and heatmap in (None, False):
        heatmap = True  # attention puts its shares on the heatmap's objects
    extractor = _extractor(recipe, plan.objects, heatmap)
    with torch_threads(plan.threads):
        return _rollout(recipe, policy, plan, extractor, heatmap, attention, probes.step)


def _rollout(recipe, policy, plan: RolloutPlan, extractor, heatmap, attention, probe) -> RolloutResult:
    episodes, num_envs = int(plan.episodes), min(int(plan.num_envs), int(plan.episodes))
    first_episode, seed = int(plan.first_episode), plan.seed
    indices = plan.indices if plan.indices is not None else range(first_episode, first_episode + episodes)
    if callable(plan.progress):
        progress_bar: Any = Report(plan.progress)
    else:
        progress_bar = bar(episodes, "rollouts", unit="ep", show=plan.progress)  # shown while the envs are built, too
    envs = [make_env(recipe, render_mode="rgb_array") for _ in range(num_envs)]
    replay = None
    try:
        check_policy_actions(policy, envs[0].action_space)
        space: Any = envs[0].action_space
        n_actions = int(space.n) if isinstance(getattr(space, "n", None), (int, np.integer)) else 0  # 0: not Discrete
        hm = None
        if extractor is not None:
            own = make_env(recipe, render_mode="rgb_array") if extractor.needs_frame and REPLAY_PIXEL_FAILURES else None
            first_seed = episode_seed_for(seed, first_episode)  # (rendered rollout envs could not be copied)
            hm = _start_heatmap(own if own is not None else envs[0], extractor, heatmap, recipe.env_id, first_seed)
            if own is not None:
                copyable = copies_faithfully(make_env(recipe, render_mode="rgb_array"), first_seed, n_actions)
                replay = FailureReplay(own, extractor, hm, plan.lookback, n_actions, copyable)
        tracker = None
        if attention is not None:
            tracker = AttentionTracker(attention, policy, extractor, plan.lookback)
            if n_actions == 0:
                raise UsageError(f"attention explains a Discrete action's logit; {recipe.env_id}'s actions are {space}.")
        runner = Runner(policy, plan, extractor=extractor, heatmap=hm, clip_values=_clips(recipe), replay=replay,
                        attention=tracker, probe=probe)
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
        recipe.env_id, tuple(records), hm, steps, wall, float(plan.gamma), int(seed),
        runner.fail_on, recipe.to_json(), _space_json(space, policy)  # type: ignore[arg-type]
    )


def _space_json(space, policy) -> dict | None:
    """The action space for :attr:`RolloutResult.action_space` (None: Discrete)."""
    described = space_to_json(space)
    if described is not None and described["kind"] == "box":
        described["squash"] = bool(capabilities_of(policy).squash)
    return described


def _extractor(recipe: EnvRecipe, objects, heatmap) -> Extractor | None:
    """The object extractor the heatmap uses, or None when no heatmap was asked for."""
    if objects is None and heatmap in (None, False):
        return None
    if isinstance(objects, str):
        from ..failures.objects import load_extractor

        return load_extractor(objects)
    return as_extractor(objects) if objects is not None else extractor_for(recipe.env_id)


def _start_heatmap(env, extractor: Extractor, heatmap, env_id: str, seed: int) -> FailureHeatmap:
    """The heatmap to add failures to (``heatmap`` itself when it is one), sized by a first frame of the game."""
    seeded_reset(env, seed)
    own = getattr(extractor, "background_image", None)  # a heatmap in the extractor's own plane (body_objects)
    if own is not None:
        extractor.begin_episode(env)
    background = own() if own is not None else to_rgb_frame(env.render())
    if hasattr(extractor, "frame_shape") and extractor.frame_shape is None:
        extractor.frame_shape = background.shape[:2]
    names = extractor.names or tuple(extractor(background, env))
    hm = heatmap if isinstance(heatmap, FailureHeatmap) else FailureHeatmap(background.shape[:2], names, env_id)
    if hm.background is None:
        hm.background = background
    return hm


def heatmap_shape(recipe: Any, objects: Any = None, seed: int = 0) -> tuple[int, int]:
    """(height, width) of the failure heatmap a rollout of ``recipe`` with ``objects`` makes, found before it (as
    the rollout sizes it: by a first frame of the game, or the extractor's own plane)."""
    recipe = _recipe(recipe)
    extractor = _extractor(recipe, objects, True)
    assert extractor is not None  # (a heatmap was asked for)
    env = make_env(recipe, render_mode="rgb_array")
    try:
        hm = _start_heatmap(env, extractor, True, recipe.env_id, episode_seed_for(seed, 0))
    finally:
        env.close()
    h, w = hm.frame_shape
    return int(h), int(w)


def replay_episode(recipe: EnvRecipe | str | None, policy: Policy, record: EpisodeResult | int | None,
                   plan: RolloutPlan | None = None, *, env: Any = None,
                   rng: np.random.Generator | None = None) -> EpisodeResult:
    """Play one episode alone: the one single-episode loop of rlviz (replays, :func:`rlviz.run_episode`).

    Seeding is the rollouts' scheme: the env is reset with the episode's seed and actions are sampled
    with ``np.random.default_rng(seed)``, so the same seed replays the same episode.
    record: an :class:`EpisodeResult` from :func:`rollout` (played greedy or not as it was), a bare episode seed
        (greedy as ``plan.greedy``), or None for an unseeded episode. rng: sample actions with this generator instead.
    plan: the rollout's :class:`~rlviz.evaluate.rollouts.plan.RolloutPlan` for greedy, fail_on, gamma and max_steps (its
        episode count and envs do not matter here; default ``RolloutPlan(1)``).
    env: run on this env (e.g. wrapped in a recorder; it is reset here and not closed), else a fresh
        ``make_env(recipe)``. Exact: forwards are batch-invariant (:meth:`Policy.evaluate`) and the actions come
        from the rollouts' :func:`~rlviz.evaluate.rollouts.lockstep.decide`.
    """
    plan = plan or RolloutPlan(1)
    if isinstance(record, EpisodeResult):
        index, seed, greedy = record.index, record.seed, record.greedy
    else:
        index, seed, greedy = -1, None if record is None else int(record), bool(plan.greedy)
    if env is None and recipe is None:
        raise UsageError("replay_episode needs a recipe (an EnvRecipe or env id) or env=...; received neither.")
    recipe = _recipe(recipe) if recipe is not None else None
    own = env is None
    env = make_env(recipe, render_mode="rgb_array") if own else env  # type: ignore[arg-type]  # own: a recipe was given
    try:
        clips = _clips(recipe) if recipe is not None else False
        runner = Runner(policy, replace(plan, greedy=greedy), clip_values=clips)
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
