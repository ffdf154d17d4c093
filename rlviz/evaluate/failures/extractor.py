"""The object extractor's contract (:class:`Extractor`), on its own so that extractors kept elsewhere (the Atari RAM
maps in :mod:`rlviz.evaluate.failures.atari_ram`) build on it without importing :mod:`rlviz.evaluate.failures.objects`, which picks
among them."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Extractor"]


class Extractor:
    """Base class. ``names``: the object names, in panel order; ``needs_frame``: masks come from rendered
    frames (rollouts then replay failing episodes to render only the frames before each failure);
    ``history``: how many earlier frames :meth:`capture` remembers (1 for :class:`MotionExtractor`)."""

    names: tuple[str, ...] = ()
    needs_frame: bool = True
    history: int = 0

    def capture(self, frame: np.ndarray | None, env) -> Any:
        """Called on every step with the frame the next action is chosen on; keep what masks() needs."""
        return None if frame is None else np.array(frame, copy=True)

    def masks(self, captured: Any) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def masks_many(self, captured: list) -> dict[str, np.ndarray]:
        """The masks of B captures at once: {name: bool [B, H, W]} (a name some capture lacks is all False there;
        names no capture has are left out). Default: :meth:`masks` of each, stacked; extractors whose masks
        vectorise override it (the rollout's attention pass asks for a batch of steps at a time)."""
        per = [self.masks(c) for c in captured]
        shape = next((np.shape(m)[:2] for d in per for m in d.values()), None)
        out: dict[str, np.ndarray] = {}
        if shape is None:
            return out
        for name in dict.fromkeys(n for d in per for n in d):
            a = np.zeros((len(per), *shape), bool)
            for b, d in enumerate(per):
                if name in d:
                    a[b] = d[name]
            out[name] = a
        return out

    def begin_episode(self, env) -> None:
        """Called after each reset (extractors with per-episode state override this)."""

    def __call__(self, frame: np.ndarray | None, env) -> dict[str, np.ndarray]:
        return self.masks(self.capture(frame, env))
