"""The checkpoints of a training run, found and ordered by training step (``rlviz timeline RUN``).

RUN is a folder (its files, not its subfolders) or an explicit list of files / glob patterns. What is an agent:

* SB3 ``CheckpointCallback`` files ``<prefix>_<steps>_steps.zip`` (any prefix; default ``rl_model``), each with its
  ``<prefix>_vecnormalize_<steps>_steps.pkl`` when present;
* rl-zoo3 run folders: those checkpoints, ``best_model.zip`` and the final ``<env id>.zip`` (their step from the
  zip's ``num_timesteps``; the run's ``vecnormalize.pkl`` is found by :func:`rlviz.sources.load_agent`);
* rlviz ``.pt2`` files recording their step (``save_checkpoint(..., metadata={"step": N})``, ``step_<N>.pt2``);
* CleanRL saves (``.cleanrl_model``, ``.pt``, ``.pth``): the step from the name (``agent_<N>.pt``), else a
  ``global_step`` / ``step`` number saved beside the weights.

The training step comes from the file's name, else from the file itself (read with rlviz's restricted readers:
the SB3 zip's JSON ``data``, the .pt2's ``extra/rlviz.json``, ``torch.load(weights_only=True)``), else the file is
left out with one line saying how to give it. Files that are not agents (replay buffers, VecNormalize statistics,
logs, monitor files, evaluations) are never read. Two files for one step: the first by name is kept (a
``CheckpointCallback`` name before ``best_model`` / the final model) and the other is reported in ``skipped``.
"""

from __future__ import annotations

import errno
import glob
import io
import os
import re
import zipfile
import zlib
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CheckpointError, RlvizError, UsageError
from .agent_names import AGENT_SUFFIXES, NOT_AGENT
from .limits import check_archive, loads_json, read_member

if TYPE_CHECKING:  # pragma: no cover
    from .loaded import LoadedAgent

__all__ = ["TimelineCheckpoint", "Skipped", "discover", "step_from_name", "step_from_file", "vecnormalize_for",
           "AGENT_SUFFIXES", "NOT_AGENT", "reason_line"]

_SB3_NAME = re.compile(r"^(?P<prefix>.+)_(?P<step>\d+)_steps$")
# a number at the end of the name, after a separator, optionally with a "step" word: step_500, agent-1000,
# ckpt_step2000, model_3000_steps; not the version of an env id (CartPole-v1).
_TRAILING_STEP = re.compile(r"(?:^|[_\-.])(?:global_step|steps?|iter|update)?[_\-]?(?P<step>\d+)(?:[_\-]?steps?)?$",
                            re.IGNORECASE)
_FILE_STEP_KEYS = ("step", "global_step", "num_timesteps", "timesteps", "total_steps")


@dataclass(frozen=True)
class TimelineCheckpoint:
    """One checkpoint of a training run, as discovered and (after evaluation) with its results.

    step:         int, the training step (environment steps taken by training when the file was saved).
    path:         Path, the checkpoint file (absolute).
    name:         str, its path relative to RUN (posix slashes): the ``checkpoint`` field of timeline.json.
    step_source:  "name" | "file": where the step was read.
    vecnormalize: Path | None, SB3 ``<prefix>_vecnormalize_<steps>_steps.pkl`` saved with it (None: rlviz's default
                  search, :func:`rlviz.sources.stable_baselines3.vecnormalize.find_vecnormalize`, or ``--vecnormalize``).
    agent:        LoadedAgent | None, the loaded agent once evaluated (its policy, recipe, action names, gamma);
                  None before evaluation, when it failed to load, or when it was evaluated in worker processes
                  (``--workers``/``--ray``: the agents stay there). :meth:`load` gives it either way.
    result:       RolloutResult | None, the rollout of the run's N seeds (the same as ``rlviz render --seed S`` of
                  this file): per-episode rows (``result.episodes``: seed, return, length...) and, with
                  ``--heatmap``, ``result.heatmap`` (a FailureHeatmap; ``.counts`` float64 [objects, H, W]).
    summary:      dict | None, render's summary.json dict of that rollout (``returns``, ``diagnostics``...).
    error:        str | None, one line when the checkpoint failed to load or evaluate (then agent/result are None).
    policy_change: dict | None, how the policy changed from the previous evaluated checkpoint (the ``policy_change``
                  of timeline.json: ``states``, ``tv_mean``, ``kl_mean``...; :func:`rlviz.training.evaluate.policy_change`).
    """

    step: int
    path: Path
    name: str
    step_source: str = "name"
    vecnormalize: Path | None = None
    agent: LoadedAgent | None = None
    result: Any = None  # a RolloutResult (rlviz.evaluate, which a source does not import) or None
    summary: dict | None = None
    error: str | None = None
    policy_change: dict | None = None

    @property
    def evaluated(self) -> bool:
        return self.result is not None

    def load(self, config: Any) -> LoadedAgent:
        """The agent: :attr:`agent` when loaded, else loaded now with a TimelineConfig's (or RenderConfig's)
        ``env``, ``model``, ``trust_checkpoint``, ``device`` and ``vecnormalize``."""
        if self.agent is not None:
            return self.agent
        from .checkpoint import load_agent

        vecnormalize = getattr(config, "vecnormalize", None) or self.vecnormalize
        return load_agent(self.path, env=config.env, model=config.model, trust=config.trust_checkpoint,
                          device=config.device, vecnormalize=vecnormalize)


@dataclass(frozen=True)
class Skipped:
    """A file of RUN left out: its name (relative to RUN) and why (one line)."""

    name: str
    why: str

    def to_dict(self) -> dict:
        return {"checkpoint": self.name, "why": self.why}


def step_from_name(path: str | os.PathLike) -> int | None:
    """The training step in a checkpoint's file name, or None (``rl_model_5000_steps.zip`` -> 5000)."""
    stem = Path(path).name
    for suffix in AGENT_SUFFIXES:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    m = _SB3_NAME.match(stem) or _TRAILING_STEP.search(stem)
    return int(m.group("step")) if m else None


def _int_step(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _zip_json(data: bytes, member: str, path: str | os.PathLike) -> Any:
    """The JSON of the archive member whose name ends with ``member`` (None when absent); a damaged archive (bad
    CRC, truncated, bad compression), a member over its limit or JSON that is invalid or too deep
    (:mod:`rlviz.sources.limits`) is a :class:`CheckpointError` naming the file."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            check_archive(z, path)
            names = [n for n in z.namelist() if n == member or n.endswith("/" + member)]
            raw = read_member(z, names[0], path) if names else None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, ValueError) as exc:
        raise CheckpointError(f"{path}: a damaged zip archive ({exc}); replace the file with an intact copy.") from None
    return None if raw is None else loads_json(raw, path, f"its {member}")


def step_from_file(path: str | os.PathLike) -> int | None:
    """The training step a checkpoint records in itself, or None. Read without running anything in the file:
    an SB3 zip's JSON ``data`` (``num_timesteps``), an rlviz .pt2's ``extra/rlviz.json`` (``step`` or
    ``metadata.step``), a torch.save dict's ``global_step`` / ``step`` (``weights_only=True``)."""
    from .files import detect_format, read_file
    from .limits import check_zip_bytes

    data = read_file(path)
    check_zip_bytes(data, path)  # a bomb is refused from the archive's directory
    fmt = detect_format(data)
    if fmt == "sb3-zip":
        doc = _zip_json(data, "data", path)
        return _int_step(doc.get("num_timesteps")) if isinstance(doc, dict) else None
    if fmt == "rlviz":
        meta = _zip_json(data, "extra/rlviz.json", path)
        if not isinstance(meta, dict):
            return None
        user = meta["metadata"] if isinstance(meta.get("metadata"), dict) else {}
        return next((s for s in (_int_step(meta.get("step")), *(_int_step(user.get(k)) for k in _FILE_STEP_KEYS))
                     if s is not None), None)
    if fmt == "torch-save":
        from .files import torch_load

        try:
            obj = torch_load(data, str(path), weights_only=True)
        except CheckpointError:
            return None
        if isinstance(obj, dict):
            return next((s for s in (_int_step(obj.get(k)) for k in _FILE_STEP_KEYS) if s is not None), None)
    return None


def vecnormalize_for(path: Path) -> Path | None:
    """SB3 ``CheckpointCallback``'s statistics saved with ``<prefix>_<steps>_steps.zip``:
    ``<prefix>_vecnormalize_<steps>_steps.pkl`` beside it, or None."""
    m = _SB3_NAME.match(path.stem) if path.suffix == ".zip" else None
    if m is None:
        return None
    pkl = path.with_name(f"{m.group('prefix')}_vecnormalize_{m.group('step')}_steps.pkl")
    return pkl if pkl.is_file() else None


def _is_agent_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith(AGENT_SUFFIXES) and not NOT_AGENT.search(path.name) \
        and not path.name.startswith(".")


def _broken_link(path: Path) -> str | None:
    """Why an agent-named entry of RUN that is not a file cannot be read (a symlink loop, a dangling link), or None
    (a folder, or not an agent's name: not a candidate at all)."""
    if not path.is_symlink() or not path.name.endswith(AGENT_SUFFIXES) or NOT_AGENT.search(path.name) \
            or path.name.startswith(".") or path.exists():
        return None
    try:
        path.resolve(strict=True)
    except RuntimeError:
        return "a symlink loop"
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else "a symlink to nothing (dangling)"
    return None


def reason_line(name: str, path: Path, exc: BaseException) -> str:
    """One line: ``name`` once, then why (an error's message names the file by its full path: that is dropped)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    for prefix in (str(path), name):
        if text.startswith(prefix):
            text = text[len(prefix):].lstrip(": ")
            break
    if not isinstance(exc, RlvizError):
        text = f"cannot be read ({type(exc).__name__}: {text[:200]})"
    return f"{name}: {text}"


def _candidates(run: str | os.PathLike | Sequence[str | os.PathLike],
                broken: list[Skipped] | None = None) -> tuple[Path, list[Path]]:
    """(the folder names are relative to, the agent files of RUN); agent-named links that lead nowhere (loops,
    dangling) go into ``broken``."""
    if isinstance(run, (str, os.PathLike)) and Path(run).is_dir():
        root = Path(run).resolve()
        try:
            entries = sorted(root.iterdir())
        except OSError as exc:
            raise UsageError(f"RUN {run}: cannot list the folder ({exc.strerror or exc}).") from None
        for p in entries:
            why = _broken_link(p)
            if why is not None and broken is not None:
                broken.append(Skipped(p.name, f"{p.name}: {why}; not read."))
        return root, [p for p in entries if _is_agent_file(p)]
    items = [run] if isinstance(run, (str, os.PathLike)) else list(run)
    files: list[Path] = []
    for item in items:
        text = os.fspath(item)
        matched = sorted(glob.glob(text)) if glob.has_magic(text) else [text]
        if not matched:
            raise UsageError(f"RUN pattern {text!r} matches no file; pass a folder of checkpoints, files, or a glob "
                             "such as 'checkpoints/rl_model_*_steps.zip' (quoted).")
        for m in matched:
            p = Path(m)
            if not p.exists():
                raise UsageError(f"RUN: no such file or folder {text!r}; pass a folder of checkpoints or files.")
            if p.is_dir():
                raise UsageError(f"RUN: {text} is a folder inside a list of files; pass the folder alone, or its files.")
            if _is_agent_file(p):
                files.append(p.resolve())
    root = Path(os.path.commonpath([str(f.parent) for f in files])) if files else Path.cwd()
    return root, sorted(set(files))


def _order(name: str) -> tuple[int, str]:
    """Which of two files for one step is kept: a step in the name first, then the name."""
    return (0 if step_from_name(name) is not None else 1, name)


def discover(run: str | os.PathLike | Sequence[str | os.PathLike], *, known: Container[Path] = (),
             require: bool = True, ready: Callable[[Path], bool] | None = None,
             ) -> tuple[list[TimelineCheckpoint], list[Skipped]]:
    """The checkpoints of RUN in step order, and the files left out (no step; a second file for a step).

    known: files already found (``--follow``: never read again). require: raise a UsageError when RUN holds no
    checkpoint with a step (``--follow`` waits for the first instead). ready: files for which it is False (still
    being written) are left for a later call, unread."""
    skipped: list[Skipped] = []
    root, files = _candidates(run, skipped)
    skipped = [s for s in skipped if root / s.name not in known]
    found: list[TimelineCheckpoint] = []
    for path in sorted(files, key=lambda p: _order(p.name)):
        if path in known or (ready is not None and not ready(path)):
            continue
        name = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        step, source = step_from_name(path.name), "name"
        if step is None:
            try:
                step, source = step_from_file(path), "file"
            except (Exception, RecursionError) as exc:  # any file that cannot be read is skipped with its reason
                skipped.append(Skipped(name, reason_line(name, path, exc)))
                continue
        if step is None:
            skipped.append(Skipped(name, f"{name}: no training step in its name or in the file; name it with its "
                                         "step (rl_model_<steps>_steps.zip, step_<N>.pt2, agent_<N>.pt) or save it "
                                         "with metadata={'step': N}."))
            continue
        found.append(TimelineCheckpoint(step, path, name, source, vecnormalize_for(path)))
    kept: dict[int, TimelineCheckpoint] = {}
    for cp in found:
        if cp.step in kept:
            skipped.append(Skipped(cp.name, f"{cp.name}: a second file for step {cp.step} (kept "
                                            f"{kept[cp.step].name})."))
        else:
            kept[cp.step] = cp
    if require and not kept:
        _nothing_found(run, files, skipped)
    return sorted(kept.values(), key=lambda c: c.step), skipped


def _nothing_found(run: Any, files: list[Path], skipped: list[Skipped]) -> None:
    where = os.fspath(run) if isinstance(run, (str, os.PathLike)) else f"{len(list(run))} paths"
    if not files:
        raise UsageError(f"RUN {where} holds no checkpoint (no {', '.join(AGENT_SUFFIXES)} file that is an agent); "
                         "pass the folder CheckpointCallback saves into, or checkpoint files.")
    raise UsageError(f"RUN {where}: none of its {len(files)} checkpoint(s) has a training step in its name or in the "
                     f"file (e.g. {skipped[0].name}); name them with their step (rl_model_<steps>_steps.zip, "
                     "step_<N>.pt2) or save them with metadata={'step': N}.")
