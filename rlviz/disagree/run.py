"""Compare's disagreement analysis from end to end: the probed rollouts (each agent asked on the other's states),
the top states, their branches (outcomes and side-by-side videos).

Used by :func:`rlviz.jobs.compare` (``--disagreements K``); the outputs are written by :mod:`.outputs`.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..agent.stepping import FromState
from ..analysis.attention import attention_spec
from ..draw.compose import ComposeOptions, Compositor
from ..draw.side_by_side import Encoding, compose_side_by_side
from ..draw.video import video_timing
from ..envs import make_env
from ..envs.snapshot import NotRestorable
from ..evaluate.failures.heatmap import FailureHeatmap
from ..evaluate.failures.objects import extractor_for, load_extractor
from ..evaluate.rollouts.rollout import RolloutPlan, RolloutProbes, RolloutResult, episode_seed_for, rollout
from ..evaluate.statistics.distance import TV
from ..record.internals import compute_internals, save_episode_data
from .branches import BranchResult, check_restorable, play_many, reach_many
from .probe import DisagreementProbe, EpisodeDisagreement, check_probe_policies
from .select import MIN_TV, Pick, summarize_disagreement, top_states

__all__ = ["BranchedState", "Disagreements", "probed_rollouts", "branch_states", "better_of", "analyse", "found_note"]

#: States whose branches are played and recorded at the same time.
BRANCH_THREADS = 2
#: libx264 preset of the branch videos: short clips, where the encoder is most of the cost (ultrafast: ~1.6x
#: veryfast's speed, larger files).
BRANCH_PRESET = "ultrafast"
#: Seconds a side-by-side branch video lasts at least (short horizons play slower and hold their end).
MIN_BRANCH_SECONDS = 2.0
#: How a branch is drawn: the game at about 256 px and a compact panel (a shorter value plot), so that two fit
#: side by side in about 1170x370 (a render's frame is 880x480): the encoder's time goes with the pixels.
BRANCH_LOOK = ComposeOptions(display_height=256, min_height=256, panel_width=320, plot_height=72)


@dataclass(frozen=True)
class BranchedState:
    """A top disagreement state (``rank`` 1 = the largest TV) and both agents' branches from it (None when the env
    is not restorable); ``better``: "a", "b" or "tie" (higher return over the branch, then fewer failures);
    ``video``: the two branches side by side, or None."""

    rank: int
    pick: Pick
    a: BranchResult | None = None
    b: BranchResult | None = None
    better: str | None = None
    video: Path | None = None


@dataclass(frozen=True)
class Disagreements:
    """The analysis of one comparison. summary: :func:`~.select.summarize_disagreement`'s numbers; states: the
    branched top states, by rank; episodes: every episode's per-state numbers (A's episodes, then B's);
    heatmap: where the greedy actions differ (object positions), or None; note: why there are fewer states than
    asked, or no branches (one line), or None; horizon: steps per branch (None: to the end of the episode);
    measure: what the states' ``tv`` numbers are (:data:`~rlviz.evaluate.statistics.distance.TV`, or
    :data:`~rlviz.evaluate.statistics.distance.ACTION_GAP` for deterministic actors)."""

    summary: dict[str, Any]
    states: tuple[BranchedState, ...]
    episodes: tuple[EpisodeDisagreement, ...] = field(repr=False)
    heatmap: FailureHeatmap | None = None
    note: str | None = None
    horizon: int | None = None
    measure: str = TV


def _extractor(agent: Any, config: Any) -> Any:
    if not config.heatmap:
        return None
    return load_extractor(config.objects) if config.objects else extractor_for(agent.recipe.env_id)


def probed_rollouts(agents: list[Any], config: Any, gammas: list[float]) -> tuple[list[RolloutResult], list[Any]]:
    """A's and B's rollouts (as :func:`rlviz.jobs.rollouts.run_rollouts` plays them, in this process), each with the
    other agent asked on its states: (results, the two :class:`DisagreementProbe`)."""
    check_probe_policies(agents[0].policy, agents[1].policy)
    results, probes = [], []
    for i, side in enumerate("ab"):
        agent, other, rc = agents[i], agents[1 - i], config.render_config(side)
        extractor = _extractor(agent, rc)
        usable = extractor is not None and not getattr(extractor, "history", 0)
        probe = DisagreementProbe(other.policy, side, extractor if usable else None)
        plan = RolloutPlan.for_config(rc, gammas[i], objects=extractor)
        results.append(rollout(agent.recipe, agent.policy, plan,
                               RolloutProbes(attention=attention_spec(rc), step=probe)))
        probe.finish()
        probe.finish()
        probes.append(probe)
    return results, probes


def better_of(a: BranchResult, b: BranchResult) -> str:
    """"a", "b" or "tie": the branch with the higher return, then the one with fewer failures."""
    if a.ret != b.ret:
        return "a" if a.ret > b.ret else "b"
    if a.failures != b.failures:
        return "a" if a.failures < b.failures else "b"
    return "tie"


def branch_states(agents: list[Any], picks: list[Pick], config: Any, gammas: list[float], folder: Path | None,
                  labels: tuple[str, str], results: list[RolloutResult]) -> tuple[list[BranchedState], str | None]:
    """Both agents' branches from each picked state; with ``folder``, one side-by-side video per state there
    (``state-<rank>.mp4``; each branch's per-step numbers in ``a/`` and ``b/``). ``results``: A's and B's rollouts
    (their recorded actions lead to the states). Returns (states, note): without a restorable env the states come
    back unbranched and the note says why."""
    if not picks:
        return [], None
    recipe = agents[0].recipe
    try:
        check_restorable(recipe, episode_seed_for(config.seed, 0), int(getattr(agents[0].policy, "num_actions", 1)))
    except NotRestorable as exc:
        note = f"no branches: they need a restorable env ({exc})."
        return [BranchedState(r, p) for r, p in enumerate(picks, 1)], note
    horizon = None if config.disagreement_to_end else int(config.disagreement_horizon)
    kw = {"greedy": bool(config.greedy), "fail_on": config.fail_on}
    videos = len(picks) if config.disagreement_videos is None else int(config.disagreement_videos)
    envs = [make_env(recipe, render_mode="rgb_array") for _ in picks]
    fps = float(envs[0].metadata.get("render_fps") or 30)
    keep = [folder is not None and rank <= videos for rank in range(1, len(picks) + 1)]
    kept: list[list[Any]] = [[None] * len(picks), [None] * len(picks)]  # [side][state]: Collect or None
    try:
        saved = _reach(agents, picks, envs, gammas, kw, results)
        played: list[list[BranchResult]] = []
        with progress.phase(f"branches from {len(picks)} states"):
            for i, side in enumerate("ab"):  # one side after the other: an ALE state's copies share its emulator
                both = play_many(agents[i], side, saved, horizon, keep=keep, gamma=gammas[i], **kw)
                played.append([r for r, _ in both])
                kept[i] = [c for _, c in both]

        def video(j: int) -> Path | None:
            pick = picks[j]
            where = f" from {pick.side.upper()}'s ep {pick.episode} step {pick.step}"
            try:
                return _branch_video(agents, [played[0][j], played[1][j]], [kept[0][j], kept[1][j]], config, gammas,
                                     folder, j + 1, fps, (labels[0] + where, labels[1] + where))  # type: ignore[arg-type]
            finally:
                for side in kept:
                    side[j].close()

        # the states' videos overlap: one drawn while another's encoder (its own process) runs
        made: list[Path | None] = [None] * len(picks)
        if any(keep):
            with progress.phase(f"branch videos of {sum(keep)} states"), ThreadPoolExecutor(BRANCH_THREADS) as pool:
                made[: sum(keep)] = pool.map(video, range(sum(keep)))
    finally:
        for c in kept[0] + kept[1]:
            if c is not None:
                c.close()  # (again: closing twice is harmless)
        for env in envs:
            env.close()
    out = [BranchedState(j + 1, pick, played[0][j], played[1][j], better_of(played[0][j], played[1][j]), made[j])
           for j, pick in enumerate(picks)]
    return out, None


def _reach(agents: list[Any], picks: list[Pick], envs: list[Any], gammas: list[float], kw: dict,
           results: list[RolloutResult]) -> list[Any]:
    """The picked states, each saved on its own env of ``envs``: each side's episodes replayed with the actions its
    rollout recorded (:func:`~.branches.reach_many`; by its own agent where none were recorded)."""
    states: dict[int, Any] = {}
    with progress.phase(f"replaying to {len(picks)} states"):
        for side, agent, gamma, result in zip("ab", agents, gammas, results):
            mine = [j for j, p in enumerate(picks) if p.side == side]
            if not mine:
                continue
            by_index = {e.index: e for e in result.episodes}
            actions = [getattr(by_index.get(picks[j].episode), "actions", None) for j in mine]
            got = reach_many(agent, [envs[j] for j in mine], [(picks[j].seed, picks[j].step) for j in mine],
                             gamma=gamma, actions=None if any(a is None for a in actions) else actions,
                             carry={s: a.policy for s, a in zip("ab", agents)}, **kw)
            states.update(zip(mine, got))
    return [states[j] for j in range(len(picks))]


def _branch_video(agents: list[Any], branches: list[BranchResult], kept: list[Any], config: Any, gammas: list[float],
                  folder: Path, rank: int, fps: float, labels: tuple[str, str]) -> Path:
    """``folder/state-<rank>.mp4``: the two kept branches, each drawn with its agent's panels (one
    :class:`~rlviz.draw.compose.Compositor` per branch), composed side by side frame by frame and encoded once;
    each branch's per-step numbers in ``folder/<a|b>/state-<rank>.npz``."""
    longest = max(b.steps for b in branches) + 1
    rate, held = video_timing(longest, fps, MIN_BRANCH_SECONDS)
    comps = []
    for i, (agent, collected) in enumerate(zip(agents, kept)):
        trace = collected.trace(fps)
        policy: Any = agent.policy if collected.memory is None else FromState(agent.policy, collected.memory)
        internals = compute_internals(trace, policy, gammas[i], config.saliency, config.saliency_target,
                                      spec=collected.actions, observation_space=collected.observation_space)
        npz = folder / "ab"[i] / f"state-{rank}.npz"
        npz.parent.mkdir(parents=True, exist_ok=True)
        save_episode_data(trace, replace(internals, saliency=None), npz, fps=rate)  # frame t of the video: step t
        comps.append(Compositor(trace, internals, BRANCH_LOOK))
    made, _ = compose_side_by_side(_frames(comps[0]), _frames(comps[1]), folder / f"state-{rank}.mp4", rate,
                                   labels, min_frames=longest + held,
                                   encoding=Encoding(preset=BRANCH_PRESET, yuv=True))
    return made


def _frames(comp: Compositor) -> Iterator[np.ndarray]:
    """A branch's video frames, drawn one at a time into one buffer."""
    buf = np.empty((comp.size[1], comp.size[0], 3), np.uint8)
    for t in range(comp.T + 1):
        yield comp.render(t, out=buf)


def analyse(agents: list[Any], probes: list[Any], results: list[RolloutResult], config: Any, gammas: list[float],
            folder: Path | None, labels: tuple[str, str]) -> Disagreements:
    """The whole analysis after :func:`probed_rollouts`: summaries, the heatmap, the top
    ``config.disagreements`` states and their branches (videos under ``folder`` unless ``config.videos`` is
    'none' or ``folder`` None)."""
    episodes = tuple(p.episodes[e.index] for p, r in zip(probes, results) for e in r.episodes)
    horizon = None if config.disagreement_to_end else int(config.disagreement_horizon)
    measure = next((p.measure for p in probes if p.measure != TV), TV)
    picks = top_states(episodes, int(config.disagreements), int(config.disagreement_horizon))
    states, note = branch_states(agents, picks, config, gammas, folder, labels, results)
    found = found_note(episodes, picks, int(config.disagreements), int(config.disagreement_horizon), measure)
    note = " ".join(n for n in (found, note) if n) or None
    return Disagreements(summarize_disagreement(episodes), tuple(states), episodes, _heatmap(probes, results), note,
                         horizon, measure)


def found_note(episodes: tuple[EpisodeDisagreement, ...], picks: list[Pick], k: int, window: int,
               measure: str) -> str | None:
    """One line when the analysis found fewer than the ``k`` states asked (none, or the cap the episodes allow),
    saying why and what gives more; None when it found them all."""
    if len(picks) >= k:
        return None
    values = np.concatenate([e.tv for e in episodes]) if episodes else np.zeros(0)
    finite = values[np.isfinite(values)]
    what = "TV" if measure == TV else "action gap"
    if not len(picks):
        if not finite.size:
            return (f"no states: no measure applies to these agents on their {values.size} states (neither a "
                    "distribution for TV nor Box actions for the action gap).")
        return (f"no states: A and B act the same on all {finite.size} states ({what} below {MIN_TV:g} everywhere; "
                "e.g. the same agent twice), so there is nothing to branch from.")
    return (f"{len(picks)} of the {k} states asked: the states where A and B act differently ({what} >= {MIN_TV:g}) "
            f"give no more, at most one per {window} steps of an episode and a state met again once; more --episodes "
            "or a shorter --disagreement-horizon give more.")


def _heatmap(probes: list[Any], results: list[RolloutResult]) -> FailureHeatmap | None:
    """The two probes' heatmaps in one (A's states and B's), over a frame of the game."""
    maps = [p.heatmap for p in probes if p.heatmap is not None]
    if not maps:
        return None
    hm = FailureHeatmap(maps[0].frame_shape, maps[0].object_names, results[0].env_id)
    for m in maps:
        for n in hm.object_names:
            hm.counts[n] += m.counts[n]
        hm.failures += m.failures
    hm.episodes = sum(len(r.episodes) for r in results)
    backgrounds = [r.heatmap.background for r in results if r.heatmap is not None and r.heatmap.background is not None]
    hm.background = backgrounds[0] if backgrounds else None
    return hm
