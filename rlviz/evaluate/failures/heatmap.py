"""Failure heatmaps: per object, how often it was at each pixel on the frame before a failure.

Counts are exact integers, so heatmaps from separate runs (or machines) merge by summing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...envs.frames import to_rgb_frame
from ...errors import UsageError
from ...media.atomic import atomic_path

__all__ = ["FailureHeatmap", "HeatmapDiff", "plot_small_multiples", "heat_figure", "heat_panel", "HeatStyle",
           "save_figure"]


class FailureHeatmap:
    """Per-object int64 count grids in frame pixels.

    counts:     {name: int64 [H, W]} -- times the object covered the pixel on a pre-failure frame
    failures:   failure events added
    episodes:   episodes rolled out (failing or not)
    background: uint8 [H, W, 3] or None -- a representative frame to plot under the heat
    contributions: per failure event and object, (episode index, object index, runs): the pixels the object
                covered as runs of flat indices (int32 [k, 2]: start, length); summed, they are ``counts``
                (:meth:`episodes_at`: the episodes whose failures put an object on a pixel)
    """

    def __init__(self, frame_shape: tuple[int, int], object_names, env_id: str = ""):
        names = tuple(str(n) for n in object_names)
        if len(frame_shape) < 2 or min(frame_shape[:2]) < 1:
            raise UsageError(f"frame_shape={frame_shape}; expected (H, W) of the rendered frame.")
        if not names or len(set(names)) != len(names) or "all objects" in names:
            raise UsageError(f"object_names={names}; expected distinct names (not 'all objects').")
        self.frame_shape = (int(frame_shape[0]), int(frame_shape[1]))
        self.object_names = names
        self.env_id = str(env_id)
        self.counts = {n: np.zeros(self.frame_shape, dtype=np.int64) for n in names}
        self.failures = 0
        self.episodes = 0
        self.background: np.ndarray | None = None
        self.contributions: list[tuple[int, int, np.ndarray]] = []

    def add(self, masks: dict, episode: int = -1) -> None:
        """One failure event of episode ``episode`` (-1: not known): ``masks`` {name: bool [H, W]} (missing
        names count as empty)."""
        unknown = set(masks) - set(self.object_names)
        if unknown:
            raise UsageError(f"Masks for unknown objects {sorted(unknown)}; this heatmap has {self.object_names}.")
        for name, m in masks.items():
            m = np.asarray(m)
            if m.shape != self.frame_shape:
                raise UsageError(f"Mask '{name}' has shape {m.shape}; expected the frame's {self.frame_shape}.")
            counts = self.counts[name]
            flat = np.flatnonzero(m)
            if counts.flags.c_contiguous:  # a small object in a large frame: add where it is, not everywhere
                counts.reshape(-1)[flat] += 1
            else:
                counts += m.astype(bool)
            if flat.size:
                self.contributions.append((int(episode), self.object_names.index(name), _runs(flat)))
        self.failures += 1

    def _check_compatible(self, other: FailureHeatmap) -> None:
        if (other.frame_shape, other.object_names, other.env_id) != (self.frame_shape, self.object_names, self.env_id):
            raise UsageError(
                f"Cannot merge heatmaps of {other.env_id!r} {other.frame_shape} {other.object_names} into "
                f"{self.env_id!r} {self.frame_shape} {self.object_names}: env, frame shape and objects must match."
            )

    def merge(self, other: FailureHeatmap) -> FailureHeatmap:
        """Add ``other``'s counts into this one (exact); returns self."""
        self._check_compatible(other)
        for n in self.object_names:
            self.counts[n] += other.counts[n]
        self.failures += other.failures
        self.episodes += other.episodes
        self.contributions.extend(other.contributions)
        if self.background is None and other.background is not None:
            self.background = other.background.copy()
        return self

    @classmethod
    def merged(cls, heatmaps) -> FailureHeatmap:
        heatmaps = list(heatmaps)
        if not heatmaps:
            raise UsageError("FailureHeatmap.merged() received no heatmaps; pass at least one.")
        first = heatmaps[0]
        out = cls(first.frame_shape, first.object_names, first.env_id)
        for h in heatmaps:
            out.merge(h)
        return out

    def total(self) -> np.ndarray:
        """int64 [H, W]: counts summed over objects ("all objects")."""
        return np.asarray(np.sum([self.counts[n] for n in self.object_names], axis=0, dtype=np.int64))

    def episodes_at(self, row: int, col: int, name: str | None = None) -> list[int]:
        """The episodes (sorted, each once) whose failures put object ``name`` (None: any object) on pixel
        (``row``, ``col``): those whose contributions to the counts include that pixel."""
        h, w = self.frame_shape
        if not (0 <= row < h and 0 <= col < w):
            raise UsageError(f"Pixel ({col}, {row}) is outside the heatmap's {w}x{h} frame; expected x < {w}, y < {h}.")
        obj = None if name is None else self.object_names.index(name)
        at = row * w + col
        return sorted({e for e, o, runs in self.contributions if (obj is None or o == obj)
                       and bool(np.any((runs[:, 0] <= at) & (at < runs[:, 0] + runs[:, 1])))})

    def contribution(self, episode: int) -> dict[str, np.ndarray]:
        """{name: int64 [H, W]}: what episode ``episode``'s failures added to the counts."""
        out = {n: np.zeros(self.frame_shape, dtype=np.int64) for n in self.object_names}
        for e, o, runs in self.contributions:
            if e == episode:
                flat = out[self.object_names[o]].reshape(-1)
                for start, length in runs:
                    flat[start:start + length] += 1
        return out

    # -- persistence --------------------------------------------------------------------------
    def save(self, path) -> Path:
        """Write an .npz (no pickles): counts, names, env id, counters, optional background."""
        path = Path(path)
        arrays: dict[str, Any] = {
            "counts": np.stack([self.counts[n] for n in self.object_names]),
            "object_names": np.array(self.object_names, dtype=str),
            "env_id": np.array(self.env_id, dtype=str),
            "failures": np.array(self.failures, dtype=np.int64),
            "episodes": np.array(self.episodes, dtype=np.int64),
        }
        if self.background is not None:
            arrays["background"] = self.background
        arrays.update(_contribution_arrays(self.contributions))
        with atomic_path(path) as tmp:
            np.savez_compressed(tmp, **arrays)
        return path

    @classmethod
    def load(cls, path) -> FailureHeatmap:
        try:
            with np.load(path, allow_pickle=False) as z:
                counts, names = z["counts"], [str(n) for n in z["object_names"]]
                h = cls(counts.shape[1:], names, str(z["env_id"]))
                for i, n in enumerate(names):
                    h.counts[n] = counts[i].astype(np.int64)
                h.failures, h.episodes = int(z["failures"]), int(z["episodes"])
                h.background = z["background"] if "background" in z.files else None
                if "contrib_episode" in z.files:
                    h.contributions = _read_contributions(z, len(names), h.frame_shape)
        except Exception as exc:  # noqa: BLE001 - numpy's reader raises many types on a damaged file (zip, zlib,
            # header syntax, a member that reads as bytes): each one means the file is not a heatmap
            said = " ".join(str(exc).split())[:200]
            raise UsageError(f"{path} is not an rlviz failure heatmap (.npz written by FailureHeatmap.save): {said}") from exc
        return h

    # -- plotting -----------------------------------------------------------------------------
    def plot(self, path, background: np.ndarray | None = None, log: bool = False, dpi: int = 120,
             title: str | None = None) -> Path:
        """PNG: one panel per object plus "all objects", heat over a dimmed background frame,
        colour bars, title with failures / episodes (or ``title``). ``background`` defaults to the stored frame."""
        from matplotlib.colors import LogNorm, Normalize

        bg = self.background if background is None else np.asarray(background)
        panels = [(n, self.counts[n]) for n in self.object_names]
        if len(panels) > 1:
            panels.append(("all objects", self.total()))
        fig, axes = heat_figure(self.frame_shape, len(panels))
        for ax, (name, grid) in zip(axes, panels):
            vmax = max(int(grid.max()), 1)
            norm = LogNorm(vmin=1, vmax=max(vmax, 2)) if log else Normalize(vmin=0, vmax=vmax)
            heat_panel(fig, ax, name, bg, np.ma.masked_where(grid <= 0, grid), HeatStyle("inferno", norm, 0.85))
        fig.suptitle(title or f"{self.env_id}: {self.failures} failures / {self.episodes} episodes", fontsize=10)
        return save_figure(fig, path, dpi)


def _runs(flat: np.ndarray) -> np.ndarray:
    """Sorted flat pixel indices as runs: int32 [k, 2] (start, length)."""
    breaks = np.flatnonzero(np.diff(flat) != 1) + 1
    starts = np.concatenate(([0], breaks))
    stops = np.concatenate((breaks, [flat.size]))
    return np.stack([flat[starts], stops - starts], axis=1).astype(np.int32)


def _contribution_arrays(contributions: list) -> dict[str, np.ndarray]:
    """The contributions as arrays for the .npz, ordered by episode (the same for any split into workers):
    ``contrib_episode`` / ``contrib_object`` [K], ``contrib_offsets`` [K + 1] into ``contrib_runs`` [R, 2]."""
    order = sorted(range(len(contributions)), key=lambda i: contributions[i][0])
    rows = [contributions[i] for i in order]
    sizes = [len(r[2]) for r in rows]
    return {
        "contrib_episode": np.array([r[0] for r in rows], dtype=np.int64),
        "contrib_object": np.array([r[1] for r in rows], dtype=np.int32),
        "contrib_offsets": np.concatenate(([0], np.cumsum(sizes))).astype(np.int64),
        "contrib_runs": (np.concatenate([r[2] for r in rows]) if rows else np.zeros((0, 2))).astype(np.int32),
    }


def _read_contributions(z: Any, objects: int, frame_shape: tuple[int, int]) -> list[tuple[int, int, np.ndarray]]:
    """The contributions of a saved heatmap, checked (ValueError when they do not fit its objects and frame)."""
    ep, obj = z["contrib_episode"].astype(np.int64), z["contrib_object"].astype(np.int64)
    off, runs = z["contrib_offsets"].astype(np.int64), z["contrib_runs"].astype(np.int64)
    size = frame_shape[0] * frame_shape[1]
    if (ep.ndim != 1 or obj.shape != ep.shape or off.shape != (ep.size + 1,) or runs.ndim != 2 or runs.shape[1] != 2
            or off[0] != 0 or off[-1] != len(runs) or np.any(np.diff(off) < 0) or np.any((obj < 0) | (obj >= objects))
            or np.any(runs[:, 0] < 0) or np.any(runs[:, 1] < 1) or np.any(runs.sum(axis=1) > size)):
        raise ValueError("its per-episode contributions do not fit its objects and frame")
    return [(int(e), int(o), runs[a:b].astype(np.int32)) for e, o, a, b in zip(ep, obj, off[:-1], off[1:])]


def heat_figure(frame_shape: tuple[int, int], panels: int, extra_h: float = 0.0):
    """A matplotlib figure with one axis per panel, sized for frames of ``frame_shape``."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    h, w = frame_shape
    side = 3.0  # inches of the longer side of each panel's image
    fig, axes = plt.subplots(1, panels, figsize=(side * w / max(h, w) * panels + 0.9 * panels,
                                                 side * h / max(h, w) + 0.7 + extra_h), layout="constrained")
    return fig, np.atleast_1d(axes)


@dataclass(frozen=True)
class HeatStyle:
    """How a heat panel draws its values: matplotlib's colour map name and norm, the heat's opacity over the dimmed
    frame, the colour bar's label, and whether the panel has its own colour bar."""

    cmap: str
    norm: Any
    alpha: float
    label: str | None = None
    colorbar: bool = True


def heat_panel(fig, ax, name: str, background, heat, style: HeatStyle):
    """One heat panel over the dimmed background frame, titled, with its colour bar (unless
    ``style.colorbar`` is False); returns the heat's image."""
    if background is not None:
        ax.imshow(to_rgb_frame(background), alpha=0.35, interpolation="nearest")
    im = ax.imshow(heat, cmap=style.cmap, norm=style.norm, alpha=style.alpha, interpolation="nearest")
    ax.set_title(name, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    if style.colorbar:
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03, label=style.label)
    return im


def save_figure(fig, path, dpi: int) -> Path:
    """Write ``fig`` to ``path`` (atomically) at ``dpi`` and close it; the path written."""
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, format="png", bbox_inches="tight", pad_inches=0.05)
    finally:
        plt.close(fig)
    return path


def _per_failure(h: FailureHeatmap) -> np.ndarray:
    counts = np.stack([h.counts[n] for n in h.object_names]).astype(np.float64)
    return counts / h.failures if h.failures else np.zeros_like(counts)


@dataclass
class HeatmapDiff:
    """Where B fails differently from A (``rlviz compare --heatmap``): each agent's counts per failure and
    ``diff = counts_b / failures_b - counts_a / failures_a`` (float64 ``[objects, H, W]``; > 0 where B's
    failures find the object more often)."""

    a: FailureHeatmap
    b: FailureHeatmap

    def __post_init__(self):
        self.a._check_compatible(self.b)

    @property
    def diff(self) -> np.ndarray:
        return _per_failure(self.b) - _per_failure(self.a)

    def save(self, path) -> Path:
        """.npz: counts_a, counts_b (int64 [objects, H, W]), object_names, failures_a/b, episodes_a/b, diff."""
        path = Path(path)
        arrays: dict[str, Any] = {
            "counts_a": np.stack([self.a.counts[n] for n in self.a.object_names]),
            "counts_b": np.stack([self.b.counts[n] for n in self.b.object_names]),
            "object_names": np.array(self.a.object_names, dtype=str),
            "env_id": np.array(self.a.env_id, dtype=str),
            "failures_a": np.array(self.a.failures, dtype=np.int64),
            "failures_b": np.array(self.b.failures, dtype=np.int64),
            "episodes_a": np.array(self.a.episodes, dtype=np.int64),
            "episodes_b": np.array(self.b.episodes, dtype=np.int64),
            "diff": self.diff,
        }
        with atomic_path(path) as tmp:
            np.savez_compressed(tmp, **arrays)
        return path

    def plot(self, path, labels: tuple[str, str] = ("A", "B"), dpi: int = 120) -> Path:
        """PNG: one panel per object, the difference per failure on a diverging colour map centred on 0
        (red: more often there in B's failures, blue: in A's), a colour bar each, over a dimmed frame."""
        from matplotlib.colors import TwoSlopeNorm

        diff = self.diff
        bg = self.a.background if self.a.background is not None else self.b.background
        fig, axes = heat_figure(self.a.frame_shape, len(self.a.object_names), extra_h=0.2)
        for ax, name, grid in zip(axes, self.a.object_names, diff):
            lim = max(float(np.abs(grid).max()), 1e-12)
            heat_panel(fig, ax, name, bg, np.ma.masked_where(grid == 0, grid),
                       HeatStyle("RdBu_r", TwoSlopeNorm(0.0, -lim, lim), 0.9, label="per failure"))
        fig.suptitle(f"{self.a.env_id}: {labels[1]} - {labels[0]}, object positions per failure "
                     f"({labels[0]}: {self.a.failures} failures, {labels[1]}: {self.b.failures})", fontsize=9)
        return save_figure(fig, path, dpi)


def plot_small_multiples(path, heatmaps, titles, log: bool = False, dpi: int = 100) -> Path:
    """PNG of several heatmaps of one env side by side (e.g. the checkpoints of a training run): one column per
    heatmap, titled ``titles[i]``; one row per object (plus "all objects" when there are several). Each cell is
    counts per failure over the heatmap's background, on one colour scale per row, so the columns compare."""
    from matplotlib.colors import LogNorm, Normalize

    heatmaps = list(heatmaps)
    if not heatmaps or len(titles) != len(heatmaps):
        raise UsageError(f"plot_small_multiples needs one title per heatmap; received {len(heatmaps)} heatmap(s) "
                         f"and {len(titles)} title(s).")
    for h in heatmaps[1:]:
        heatmaps[0]._check_compatible(h)
    names = list(heatmaps[0].object_names)
    per = [_per_failure(h) for h in heatmaps]  # [objects, H, W] each
    rows = [(n, [p[i] for p in per]) for i, n in enumerate(names)]
    if len(names) > 1:
        rows.append(("all objects", [p.sum(axis=0) for p in per]))
    import matplotlib.pyplot as plt

    fh, fw = heatmaps[0].frame_shape
    side = 1.6
    size = (side * fw / max(fh, fw) * len(heatmaps) + 1.2, side * fh / max(fh, fw) * len(rows) + 0.6)
    fig, axes = plt.subplots(len(rows), len(heatmaps), squeeze=False, layout="constrained", figsize=size)
    for r, (name, grids) in enumerate(rows):
        vmax = max(max(float(g.max()) for g in grids), 1e-9)
        norm = LogNorm(vmin=vmax * 1e-3, vmax=vmax) if log else Normalize(vmin=0.0, vmax=vmax)
        im: Any = None
        for c, (h, grid, title) in enumerate(zip(heatmaps, grids, titles)):
            im = heat_panel(fig, axes[r, c], f"{title}\n{h.failures} failures" if r == 0 else "", h.background,
                        np.ma.masked_where(grid <= 0, grid), HeatStyle("inferno", norm, 0.85, colorbar=False))
        axes[r, 0].set_ylabel(name, fontsize=9)
        fig.colorbar(im, ax=list(axes[r]), fraction=0.02, pad=0.01, label="per failure")
    fig.suptitle(f"{heatmaps[0].env_id}: where each object was on the frame before a failure", fontsize=10)
    return save_figure(fig, path, dpi)
