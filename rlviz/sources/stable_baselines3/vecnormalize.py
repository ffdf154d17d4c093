"""Stable-Baselines3 ``VecNormalize`` statistics, read without running code from the file, applied as SB3 does.

SB3 saves a ``VecNormalize`` with ``pickle`` (rl-zoo3: ``vecnormalize.pkl``), and unpickling an untrusted file
runs whatever it names. :func:`read_vecnormalize` unpickles with a restricted ``find_class``: numpy's array and
dtype rebuilders are the only callables it hands out; SB3's ``VecNormalize`` / ``RunningMeanStd`` and
gymnasium's spaces become inert stand-ins that only collect their saved fields; any other global is refused
before it is imported. From what was collected it keeps the fields evaluation needs: the observation running
mean and variance, ``clip_obs``, ``epsilon`` and the ``norm_obs`` / ``norm_reward`` flags.

At evaluation SB3 normalises observations (``clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)``,
computed in float64, cast to float32) and leaves rewards raw: :class:`ObsNormalizer` is that, as a torch module
placed in front of the policy (so saliency still explains the raw observations), and rewards are not touched.
"""

from __future__ import annotations

import io
import os
import pickle
import pickletools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ...errors import CheckpointError, UnsafeCheckpointError, UsageError

__all__ = ["VecNormalizeStats", "ObsNormalizer", "read_vecnormalize", "find_vecnormalize", "load_plain_pickle",
           "checkpoint_vecnormalize", "checkpoint_stem", "check_stats_shape"]

#: rl-zoo3's file name, in the run's ``<env id>/`` folder (or next to the model).
FILE_NAME = "vecnormalize.pkl"
#: the Hugging Face Hub's (rl-zoo3's ``push_to_hub``), next to the model.
HUB_FILE_NAME = "vec_normalize.pkl"
_CHECKPOINT = re.compile(r"(.+)_(\d+)_steps")  # SB3 CheckpointCallback: <prefix>_<steps>_steps.zip

_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(1))[0]  # numpy's own array rebuilder (any numpy version)
_SCALAR = np.float64(0).__reduce__()[0]
_FROMBUFFER = np.zeros(1).__reduce_ex__(5)[0]  # protocol-5 arrays (cloudpickle, as in SB3 zips)
_NUMPY = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy.core.multiarray", "scalar"): _SCALAR,
    ("numpy._core.multiarray", "scalar"): _SCALAR,
    ("numpy.core.numeric", "_frombuffer"): _FROMBUFFER,
    ("numpy._core.numeric", "_frombuffer"): _FROMBUFFER,
    ("numpy", "dtype"): np.dtype,
    ("numpy", "ndarray"): np.ndarray,
}
_INERT_MODULES = ("stable_baselines3.common.vec_env.vec_normalize", "stable_baselines3.common.running_mean_std",
                  "gymnasium.spaces.", "gym.spaces.", "numpy.random._pickle", "numpy.random.")


class _Inert:
    """Stands in for a class named in the pickle: keeps its constructor arguments and saved state, runs nothing."""

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        self.state = state

    def __call__(self, *args, **kwargs):  # a reduce through a stand-in function (e.g. a generator constructor)
        return _Inert(*args)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, source: str):
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str):
        if (module, name) in _NUMPY:
            return _NUMPY[(module, name)]
        if module == "collections" and name == "OrderedDict":
            return dict
        if module.startswith(_INERT_MODULES) or module in ("stable_baselines3.common.vec_env.vec_normalize",):
            return type(name, (_Inert,), {})
        raise UnsafeCheckpointError(
            f"{self.source} names {f'{module}.{name}'[:120]!r}, which a VecNormalize file does not hold; refused without "
            "importing it (unpickling it could run code). Expected SB3's VecNormalize statistics "
            "(VecNormalize.save); re-save them from a trusted copy."
        )


@dataclass(frozen=True)
class VecNormalizeStats:
    """What SB3 evaluation uses of a ``VecNormalize``: obs_mean, obs_var float64 [*obs]; clip_obs; epsilon;
    norm_obs and norm_reward flags (rewards stay raw in rlviz either way); source: where they were read."""

    obs_mean: np.ndarray | None
    obs_var: np.ndarray | None
    clip_obs: float
    epsilon: float
    norm_obs: bool
    norm_reward: bool
    source: str = ""

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """SB3's ``VecNormalize.normalize_obs`` on a numpy batch (float32 out)."""
        if not self.norm_obs:
            return np.asarray(obs)
        x = (np.asarray(obs) - self.obs_mean) / np.sqrt(self.obs_var + self.epsilon)  # type: ignore[operator]  # set when norm_obs
        return np.clip(x, -self.clip_obs, self.clip_obs).astype(np.float32)


class ObsNormalizer(nn.Module):
    """raw obs float32 [B, *obs] -> normalised obs float32 [B, *obs], as :meth:`VecNormalizeStats.normalize`
    (in float64, then float32), differentiable with respect to the raw observation."""

    mean: torch.Tensor  # buffers
    scale: torch.Tensor

    def __init__(self, stats: VecNormalizeStats):
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(np.asarray(stats.obs_mean, dtype=np.float64)))
        self.register_buffer("scale", torch.as_tensor(np.sqrt(np.asarray(stats.obs_var, np.float64) + stats.epsilon)))
        self.clip = float(stats.clip_obs)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = (obs.double() - self.mean) / self.scale
        return torch.clamp(x, -self.clip, self.clip).to(obs.dtype)


def _fields(obj, source: str) -> dict:
    state = getattr(obj, "state", None)
    if not isinstance(obj, _Inert) or not isinstance(state, dict):
        raise CheckpointError(f"{source}: not a pickled SB3 VecNormalize (got {type(obj).__name__}); "
                              "expected the file VecNormalize.save writes.")
    return state


def _array(rms, source: str, what: str) -> np.ndarray:
    state = getattr(rms, "state", None) if isinstance(rms, _Inert) else rms
    value = state.get(what) if isinstance(state, dict) else None
    if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
        raise CheckpointError(f"{source}: obs_rms.{what} is {type(value).__name__}, expected a float array; "
                              "Dict observations (per-key statistics) are not supported yet.")
    return value.astype(np.float64)


def _number(state: dict, key: str, default: float, source: str) -> float:
    value = state.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or value < 0:
        raise CheckpointError(f"{source}: {key} = {value!r}, expected a non-negative number.")
    return float(value)


_MEMO_OPS = {"PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"}


def _check_opcodes(data: bytes, source: str) -> None:
    """Walk the pickle's opcodes without running them: malformed ones, and memo indices beyond the file's size
    (the C unpickler grows its memo to the index: ``LONG_BINPUT 680809108`` would allocate gigabytes), are refused."""
    for op, arg, _ in pickletools.genops(data):
        if op.name in _MEMO_OPS and not 0 <= int(arg or 0) <= len(data):
            raise CheckpointError(f"{source}: not a readable pickle of plain data (memo index {arg} in a file of "
                                  f"{len(data)} bytes); the file is corrupt.")


def load_plain_pickle(data: bytes, source: str):
    """Unpickle ``data`` building nothing but numpy arrays, dtypes, scalars and builtin containers (the classes
    SB3 pickles alongside become inert stand-ins); any other name raises :class:`UnsafeCheckpointError`."""
    try:
        _check_opcodes(data, source)
        return _Unpickler(io.BytesIO(data), source).load()
    except CheckpointError:  # (UnsafeCheckpointError too)
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise CheckpointError(f"{source}: not a readable pickle of plain data ({type(exc).__name__}: {first}).") from None


def read_vecnormalize(path: str | os.PathLike) -> VecNormalizeStats:
    """The statistics of an SB3 ``VecNormalize.save`` file; nothing in the file is imported or run."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CheckpointError(f"{source}: cannot read the VecNormalize file ({exc.strerror or exc}).") from None
    state = _fields(load_plain_pickle(data, source), source)
    norm_obs = bool(state.get("norm_obs", True))
    mean = var = None
    if norm_obs:
        mean, var = _array(state.get("obs_rms"), source, "mean"), _array(state.get("obs_rms"), source, "var")
        if mean.shape != var.shape or not (np.all(np.isfinite(mean)) and np.all(var >= 0)):
            raise CheckpointError(f"{source}: obs_rms mean {mean.shape} / var {var.shape} are not usable statistics.")
    return VecNormalizeStats(mean, var, _number(state, "clip_obs", 10.0, source),
                             _number(state, "epsilon", 1e-8, source), norm_obs,
                             bool(state.get("norm_reward", False)), source)


def checkpoint_stem(stem: str):
    """The match of a CheckpointCallback model name ``<prefix>_<steps>_steps`` (groups: prefix, steps), or None."""
    return _CHECKPOINT.fullmatch(stem)


def checkpoint_vecnormalize(model_path: str | os.PathLike) -> Path | None:
    """SB3 ``CheckpointCallback(save_vecnormalize=True)``'s statistics for its model ``<prefix>_<steps>_steps.zip``:
    ``<prefix>_vecnormalize_<steps>_steps.pkl`` beside it, or None."""
    p = Path(model_path)
    m = checkpoint_stem(p.stem)
    candidate = p.parent / f"{m.group(1)}_vecnormalize_{m.group(2)}_steps.pkl" if m else None
    return candidate if candidate is not None and candidate.is_file() else None


def find_vecnormalize(model_path: str | os.PathLike) -> Path | None:
    """The statistics saved with a model, only from where training put them: a checkpoint's own
    (:func:`checkpoint_vecnormalize`); else ``vecnormalize.pkl`` or the Hub's ``vec_normalize.pkl`` beside the model,
    or rl-zoo3's ``<env id>/vecnormalize.pkl`` for ``<env id>.zip`` (for ``best_model.zip``: that of the
    ``<env id>.zip`` beside it). Never an unrelated sibling folder's. Two candidates: :class:`UsageError`
    asking for ``--vecnormalize``."""
    p = Path(model_path)
    own = checkpoint_vecnormalize(p)
    if own is not None:
        return own
    candidates = [p.parent / FILE_NAME, p.parent / HUB_FILE_NAME, p.parent / p.stem / FILE_NAME]
    if p.stem == "best_model":  # rl-zoo3: run/best_model.zip beside run/<env id>.zip and run/<env id>/
        candidates += [p.parent / z.stem / FILE_NAME for z in sorted(p.parent.glob("*.zip")) if z.name != p.name]
    found = [c for c in dict.fromkeys(candidates) if c.is_file()]
    if len(found) > 1:
        raise UsageError(f"{p}: more than one VecNormalize statistics file could be its own "
                         f"({', '.join(str(f) for f in found)}); pass the one saved with it (--vecnormalize PATH).")
    return found[0] if found else None


def check_stats_shape(stats: VecNormalizeStats, obs_shape: tuple, what: str = "the env's") -> None:
    """Refuse statistics whose shape does not match the observations (one line naming both shapes)."""
    if stats.norm_obs and stats.obs_mean is not None and tuple(stats.obs_mean.shape) != tuple(obs_shape):
        raise CheckpointError(
            f"{stats.source}: VecNormalize statistics of shape {tuple(stats.obs_mean.shape)} do not match {what} "
            f"observations of shape {tuple(obs_shape)}: they belong to another run. Pass the statistics saved with "
            "this model (--vecnormalize PATH).")
