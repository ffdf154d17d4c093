"""What ``VecRecordEpisode(model=)`` checks about the observations a model acts on: their shape against the VecEnv's
(once per model, when it first meets an observation), and where a ``VecNormalize`` sits.

* inside the recorder (``VecRecordEpisode(VecNormalize(venv), model=...)``): the recorder sees the normalised
  observations the model acts on; nothing to do;
* around it (``VecNormalize(VecRecordEpisode(venv, model=...))``, found through the algorithm's
  ``get_vec_normalize_env()`` when each video starts, so one put there after the recorder was made, as
  ``VecNormalize.load(stats, rec)`` then ``model.set_env(...)`` do, is found too): each recorded observation is
  normalised with the statistics of the moment the model acted on it (:meth:`ModelObservations.normalize`, called by
  the recorder when the next action comes);
* anywhere else, or a policy alone (which cannot say): one warning; the observations are drawn as the recorder sees
  them.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..errors import UsageError
from ..record.setup import short_repr

__all__ = ["ModelObservations"]

_UNSET = object()


def _chain(venv: Any) -> list[Any]:
    """``venv`` and every VecEnv it wraps (through ``.venv``)."""
    out: list[Any] = []
    while venv is not None and all(v is not venv for v in out):
        out.append(venv)
        venv = getattr(venv, "venv", None)
    return out


class ModelObservations:
    """The observations ``recorder.model`` acts on: shape checked, normalisation found (``outside``: the VecNormalize
    wrapped around the recorder, or None)."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.outside: Any = None
        self._model: Any = _UNSET
        self._warned = False

    def check(self, model: Any) -> None:
        """Check ``model`` against the recorder's VecEnv (its shape once per model object) and find, now, where its
        normalisation sits. Called when a video starts (and at construction): a VecNormalize put around the recorder
        after it was made (``VecNormalize.load(stats, rec)``, then ``model.set_env(...)``, SB3's way to evaluate a
        saved agent) is found by the first video after it."""
        if model is not self._model:
            self._model = model
            self.outside = None
            self._warned = False
            self._check_shape(model)
        self.outside = self._normalization(model)

    def normalize(self, row: Any) -> Any:
        """One sub-env's observation as the model acted on it (normalised with the VecNormalize's statistics now)."""
        if row is None or self.outside is None:
            return row
        return self.outside.normalize_obs(row)

    def _check_shape(self, model: Any) -> None:
        mine = getattr(getattr(self.recorder.venv, "observation_space", None), "shape", None)
        theirs = getattr(getattr(model, "observation_space", None), "shape", None)
        if mine is None or theirs is None or tuple(mine) == tuple(theirs):
            return
        if sorted(mine) == sorted(theirs):  # images transposed for the network (VecTransposeImage): the same
            return
        raise UsageError(f"VecRecordEpisode(model={short_repr(model)}): the model takes observations of shape "
                         f"{tuple(theirs)}, but this VecEnv's are {tuple(mine)}; pass the model trained on this env, "
                         "or leave model= out to record frames only.")

    def _normalization(self, model: Any) -> Any:
        get = getattr(model, "get_vec_normalize_env", None)
        if not callable(get):
            if any(type(v).__name__ == "VecNormalize" for v in _chain(self.recorder.venv)):
                return None  # normalised inside: what the recorder sees is what the model acts on
            self._warn(f"VecRecordEpisode(model={short_repr(model)}): a policy alone cannot say whether a "
                       "VecNormalize around this recorder normalises its observations; the panels use the "
                       "observations as recorded. Pass the algorithm (model=PPO(...)) to have its "
                       "get_vec_normalize_env() used.")
            return None
        vecnorm = get()
        if vecnorm is None or any(v is vecnorm for v in _chain(self.recorder.venv)):
            return None  # none, or inside the recorder
        if any(v is self.recorder for v in _chain(vecnorm)):
            return vecnorm  # around the recorder: normalise as it does
        self._warn(f"VecRecordEpisode(model={short_repr(model)}): the model's VecNormalize neither wraps this "
                   "recorder nor is wrapped by it, so it cannot tell how the observations it records are "
                   "normalised; the panels use them as recorded.")
        return None

    def _warn(self, message: str) -> None:
        """``message`` once per model (the normalisation is looked for again at each video)."""
        if not self._warned:
            self._warned = True
            warnings.warn(message, stacklevel=5)
