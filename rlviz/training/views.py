"""The views of a timeline, written after ``timeline.json`` (and again after each checkpoint under ``--follow``):

    timeline.png              return mean with its CI band against the training step, diagnostic onsets and
                              regressions marked, entropy and value explained variance beneath (plot.py)
    timeline_heatmaps.png     with --heatmap: each checkpoint's failure heatmap, small multiples (plot.py)
    heatmaps/step_<N>.png     with --heatmap: one checkpoint's heatmap (the report shows it when it is clicked)
    progression.mp4           the same seed played by every checkpoint in training order (progression.py), its
    progression.json          parts (step, first frame, frames, return) and the parts themselves in
    progression/step_<N>.*    progression/ (.mp4, .npz per-step numbers, .json)
    report.html               the page with a training-step axis (rlviz.report.timeline_page)

Each file is written under a temporary name and renamed (``media.atomic_path``), so a reader never sees a torn
file. A progression part already recorded for the same checkpoint, seed and options is kept, so ``--follow``
records only the new checkpoint's episode.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import parse_video_spec
from ..errors import RlvizError
from ..evaluate.failures.heatmap import FailureHeatmap
from ..evaluate.rollouts.rollout import episode_seed_for
from ..jobs.videos import select_episodes
from ..media import atomic_write
from ..report.timeline_page import write_timeline_report
from .plot import plot_timeline, plot_timeline_heatmaps
from .progression import (
    PartOptions,
    PartTask,
    ProgressionPart,
    load_part,
    record_part,
    record_part_task,
    write_progression,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..sources.run_folders import TimelineCheckpoint

__all__ = ["write_views", "write_progression_views", "progression_seed", "PNG", "HEATMAPS_PNG", "PROGRESSION",
           "PROGRESSION_JSON", "PARTS_DIR", "HEATMAPS_DIR"]

PNG, HEATMAPS_PNG, PROGRESSION, PROGRESSION_JSON = ("timeline.png", "timeline_heatmaps.png", "progression.mp4",
                                                    "progression.json")
PARTS_DIR, HEATMAPS_DIR = "progression", "heatmaps"


def progression_seed(config: Any, last: TimelineCheckpoint | None = None) -> int | None:
    """The episode seed every checkpoint plays in ``progression.mp4``, or None (``--videos none``).

    ``config.videos`` picks it like ``rlviz render --videos``, by its first entry: ``first:1`` (default) is
    episode 0 of the run's seeds (what ``rlviz render --seed S`` plays first), ``worst:1`` / ``best:1`` /
    ``median:1`` that episode of the ``last`` checkpoint's rollout."""
    seed = int(getattr(config, "seed", 0) or 0)
    spec = parse_video_spec(getattr(config, "videos", None) or "first:1")
    if not spec:
        return None
    returns = getattr(getattr(last, "result", None), "returns", None)
    index = 0 if returns is None or not len(returns) else select_episodes(returns, spec[:1], seed=seed)[0][1]
    return episode_seed_for(seed, index)


def write_views(out: Path, data: dict, checkpoints: Sequence[TimelineCheckpoint], config: Any,
                backend: Any = None) -> None:
    """Write the views of ``data`` (the ``timeline.json`` dict) into ``out`` (see the module docstring).

    ``config``: the run's :class:`~rlviz.config.TimelineConfig`. ``checkpoints``: the evaluated checkpoints (their
    agents load again only for a progression part not yet recorded; their rollouts' heatmaps feed the heatmap
    views). A checkpoint that failed (``error``) or has no row in ``data`` is left out of the views. ``backend``: the
    job's workers (:func:`rlviz.jobs.shards.open_backend`), which record the progression parts."""
    out = Path(out)
    rows = {int(r["step"]): r for r in data.get("checkpoints") or [] if isinstance(r, Mapping) and "step" in r}
    good = sorted((c for c in checkpoints if c.error is None and int(c.step) in rows), key=lambda c: int(c.step))
    plot_timeline(out / PNG, data, title=_title(data, good))
    heatmaps = _heatmap_views(out, good, config) if getattr(config, "heatmap", False) else {}
    from ..jobs.jax_stages import is_jax_agent  # a flax agent's checkpoints have no progression part (yet)

    parts = write_progression_views(out, [c for c in good if not is_jax_agent(c.agent)], config, backend)
    write_timeline_report(out / "report.html", data, parts, heatmaps, out / PNG,
                          out / HEATMAPS_PNG if (out / HEATMAPS_PNG).is_file() and heatmaps else None)


def _title(data: Mapping[str, Any], good: Sequence[TimelineCheckpoint]) -> str:
    env = data.get("env_id")
    if not env and good and good[0].agent is not None:
        env = good[0].agent.recipe.env_id
    return f"{env or 'timeline'}: {len(data.get('checkpoints') or [])} checkpoint(s)"


def _heatmap_views(out: Path, good: Sequence[TimelineCheckpoint], config: Any) -> dict[int, Path]:
    """heatmaps/step_<N>.png per checkpoint and the small multiples; {step: png}."""
    maps: list[tuple[int, FailureHeatmap]] = []
    for c in good:
        hm = getattr(c.result, "heatmap", None)
        if isinstance(hm, FailureHeatmap):
            maps.append((int(c.step), hm))
    pngs: dict[int, Path] = {}
    log = bool(getattr(config, "log_scale", False))
    for step, hm in maps:
        png = out / HEATMAPS_DIR / f"step_{step}.png"
        png.parent.mkdir(parents=True, exist_ok=True)
        pngs[step] = _plot_once(hm, png, log)
    if maps:
        try:
            plot_timeline_heatmaps(out / HEATMAPS_PNG, [m for _, m in maps], [s for s, _ in maps], log=log)
        except RlvizError as exc:  # heatmaps of different envs or objects: the per-checkpoint PNGs stay
            warnings.warn(f"timeline_heatmaps.png was not drawn: {exc}", stacklevel=2)
    return pngs


#: the heatmaps/step_<N>.png this process drew: {path: (what it was drawn from, its mtime_ns and size)}; the views
#: are written again after each checkpoint (--follow, a JAX loop's evaluations), an earlier checkpoint's heatmap is
#: not: its PNG is drawn again only when its heatmap changed or the file is no longer the one drawn
_DRAWN: dict[str, tuple[str, int, int]] = {}


def _heatmap_digest(hm: FailureHeatmap, log: bool) -> str:
    h = hashlib.sha256(json.dumps([hm.frame_shape, hm.object_names, hm.env_id, hm.failures, hm.episodes, log,
                                   None if hm.background is None else hm.background.shape]).encode())
    for name in hm.object_names:
        h.update(hm.counts[name].tobytes())
    if hm.background is not None:
        h.update(hm.background.tobytes())
    return h.hexdigest()


def _plot_once(hm: FailureHeatmap, png: Path, log: bool) -> Path:
    """``hm.plot(png, log=log)``, unless this process drew this heatmap into ``png`` and the file is still that one."""
    digest = _heatmap_digest(hm, log)
    key = os.path.abspath(png)
    try:
        st = os.stat(png)
        if _DRAWN.get(key) == (digest, st.st_mtime_ns, st.st_size):
            return png
    except OSError:
        pass
    done = hm.plot(png, log=log)
    st = os.stat(done)
    if len(_DRAWN) >= 4096:  # (a long-lived process: the explorer)
        _DRAWN.clear()
    _DRAWN[key] = (digest, st.st_mtime_ns, st.st_size)
    return done


def _options_key(config: Any, seed: int, c: TimelineCheckpoint) -> str:
    """What decides a checkpoint's progression part besides its step: file, its size and time, seed, options."""
    st = c.path.stat() if Path(c.path).is_file() else None
    key = [str(c.path), st.st_size if st else 0, st.st_mtime_ns if st else 0, seed,
           *(str(getattr(config, k, None)) for k in ("greedy", "saliency", "saliency_target", "gamma", "env",
                                                      "vecnormalize"))]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


def write_progression_views(out: Path, good: Sequence[TimelineCheckpoint], config: Any,
                            backend: Any = None) -> list[ProgressionPart]:
    """Record the parts not recorded yet (each checkpoint's agent loaded once, only then; with ``backend``, the
    job's workers record them at once), join them into ``progression.mp4`` and describe them in
    ``progression.json``; returns the parts in step order. Every part has the first part's frame size."""
    seed = progression_seed(config, good[-1]) if good else None
    if seed is None:
        return []
    folder = Path(out) / PARTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    keys = {int(c.step): _options_key(config, seed, c) for c in good}
    found = {int(c.step): load_part(folder, int(c.step), keys[int(c.step)]) for c in good}
    first = found[int(good[0].step)]
    if backend is not None and sum(p is None for p in found.values()) > 1:
        # recorded at the first part's size when it is known, else at their own (one run's parts share it: a part
        # of another size is recorded again below, as the loop would have)
        found.update(_parts_in_workers([c for c in good if found[int(c.step)] is None], config, seed, keys,
                                       first.size if first is not None else None, folder, backend))
    parts: list[ProgressionPart] = []
    for c in good:
        part = found[int(c.step)]
        size = parts[0].size if parts else None
        if part is None or (size is not None and part.size != size):
            try:
                part = record_part(c.load(config), int(c.step), c.name, seed, folder,
                                   part=_part_options(config, c, seed, keys[int(c.step)], size))
            except RlvizError as exc:  # e.g. the file is gone (--follow) or the env draws no frames
                warnings.warn(f"progression.mp4 leaves out {c.name} (step {c.step}): {exc}", stacklevel=2)
                continue
        parts.append(part)
    if not parts:
        return []
    parts = write_progression(Path(out) / PROGRESSION, parts, folder)
    _drop_stale_parts(folder, {p.video for p in parts})
    atomic_write(Path(out) / PROGRESSION_JSON, json.dumps({"seed": seed, "parts": [p.to_dict() for p in parts]},
                                                          indent=1))
    return parts


def _part_options(config: Any, c: TimelineCheckpoint, seed: int, key: str, size: tuple[int, int] | None) -> PartOptions:
    return PartOptions(label=f"training step {int(c.step):,}   {c.name}   seed {seed}", size=size, key=key,
                       gamma=getattr(config, "gamma", None), saliency=getattr(config, "saliency", None),
                       saliency_target=getattr(config, "saliency_target", "action"),
                       greedy=bool(getattr(config, "greedy", False)))


def _parts_in_workers(todo: Sequence[TimelineCheckpoint], config: Any, seed: int, keys: dict[int, str],
                      size: tuple[int, int] | None, folder: Path, backend: Any) -> dict[int, ProgressionPart | None]:
    """The parts of ``todo`` recorded by ``backend``'s workers, their files written into ``folder``; {step: part,
    or None where it failed (recorded again here, which says why)}."""
    from ..jobs.shards import source_for
    from ..jobs.videos import write_video_files
    from .evaluate import checkpoint_config

    tasks = [PartTask(source_for(checkpoint_config(c, config), backend), int(c.step), c.name, seed,
                      _part_options(config, c, seed, keys[int(c.step)], size)) for c in todo]
    done = backend.map(record_part_task, tasks, what="the progression part of")
    out: dict[int, ProgressionPart | None] = {}
    for task, (part, files, _error) in zip(tasks, done):
        if part is not None:
            write_video_files(files, folder)
        out[task.step] = part
    return out


def _drop_stale_parts(folder: Path, keep: set[str]) -> None:
    """Remove parts of checkpoints no longer in the timeline (their .mp4, .npz and .json)."""
    for mp4 in folder.glob("step_*.mp4"):
        if mp4.name not in keep:
            for suffix in (".mp4", ".npz", ".json"):
                try:
                    os.remove(mp4.with_suffix(suffix))
                except FileNotFoundError:
                    pass
