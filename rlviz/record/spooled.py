"""The recording state of one panel video: its frames (and observations) spooled to disk, and per step the action,
reward, lives and action masks, until the episode ends and the panels are drawn.

The spools live in a folder of their own, named for the recording process (:func:`~rlviz.record.leftovers.spool_folder`:
``rlviz-rec-<pid>-*`` in ``options.spool_dir`` or the temporary folder), so what a killed process left can be told
from what a live one is writing and is cleaned by the next recorder. Nothing here imports torch.
"""

from __future__ import annotations

import os
import shutil
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..agent.actions import ActionSpec
from ..episode.trace import EpisodeTrace, Spool, SpoolTree, make_spool
from ..errors import StorageError
from .leftovers import spool_folder

__all__ = ["EpisodeSpool"]


@dataclass
class EpisodeSpool:
    """One episode being recorded with panels: ``frames`` (and ``obs`` when kept) on disk in ``folder``; one entry per
    step in ``actions`` (flattened), ``rewards``; one per frame in ``lives`` (and ``masks`` when the env has them)."""

    folder: str
    frames: Spool | None = None
    obs: Spool | SpoolTree | None = None
    actions: array[float] = field(default_factory=lambda: array("d"))
    rewards: array[float] = field(default_factory=lambda: array("d"))
    lives: array[int] = field(default_factory=lambda: array("l"))
    masks: list[np.ndarray] = field(default_factory=list)

    @classmethod
    def open(cls, frame: Any, obs: Any, lives: int, masks: Any, *, spool_dir: Any = None,
             keep_obs: bool = False) -> EpisodeSpool:
        """The spool of an episode whose frame 0 is ``frame`` (and observation ``obs``, kept when ``keep_obs``)."""
        rec = cls(spool_folder(spool_dir))
        try:
            with rec._named():
                rec.frames = Spool(np.shape(frame), np.uint8, dir=rec.folder, name="frames")
                rec.frames.append(frame)
                if keep_obs:
                    rec.obs = make_spool(obs, dir=rec.folder, name="obs")
                    rec.obs.append(obs)
        except BaseException:  # a full disk (or Ctrl-C): nothing of this episode stays behind
            rec.close()
            raise
        rec.lives.append(int(lives))
        if masks is not None:
            rec.masks.append(np.asarray(masks, dtype=bool))
        return rec

    @property
    def steps(self) -> int:
        return len(self.rewards)

    def append(self, frame: Any, obs: Any, action: Any, reward: float, lives: int, masks: Any) -> None:
        """One step: the frame after it (None: repeat the last one), its observation, the action taken, the reward."""
        frames = self.frames
        assert frames is not None  # noqa: S101 - set by open()
        with self._named():
            frames.append(frame if frame is not None else frames.view()[-1])
            if self.obs is not None:
                self.obs.append(obs)
        self.actions.extend(np.asarray(action, dtype=np.float64).reshape(-1).tolist())
        self.rewards.append(float(reward))
        self.lives.append(int(lives))
        if masks is not None:
            self.masks.append(np.asarray(masks, dtype=bool))

    def trace(self, spec: ActionSpec, terminated: bool, truncated: bool, **labels: Any) -> EpisodeTrace:
        """The episode as an :class:`~rlviz.episode.trace.EpisodeTrace` over the spools (nothing read into memory);
        ``labels``: ``action_names``, ``episode_id``, ``seed``, ``fps``, ``env_id``."""
        with self._named():
            frames: Any = self.frames.view()  # type: ignore[union-attr]
            obs: Any = self.obs.view() if self.obs is not None else np.zeros((len(frames), 0), np.float32)
        lives = np.asarray(self.lives, dtype=np.int32)
        actions = np.asarray(self.actions).reshape((self.steps,) + tuple(spec.shape))
        masks = self.masks
        return EpisodeTrace(
            frames=frames, observations=obs, actions=actions.astype(np.float32 if spec.continuous else np.int64),
            rewards=np.asarray(self.rewards, dtype=np.float32), lives=None if (lives < 0).all() else lives,
            terminated=bool(terminated), truncated=bool(truncated),
            action_masks=np.stack(masks) if masks and len(masks) == len(frames) else None, **labels,
        )

    @contextmanager
    def _named(self) -> Iterator[None]:
        """A full disk named as the folder the user chose (``spool_dir`` or TMPDIR), not this episode's own in it."""
        try:
            yield
        except StorageError as exc:
            raise StorageError(str(exc).replace(self.folder, os.path.dirname(self.folder))) from None

    def close(self) -> None:
        """Delete the spools and their folder (idempotent)."""
        for spool in (self.frames, self.obs):
            if spool is not None:
                spool.close()
        self.frames = self.obs = None
        shutil.rmtree(self.folder, ignore_errors=True)
