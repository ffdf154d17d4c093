"""What a job reads and what it wrote: the inputs an ``--out`` may never be, hold or lie inside, and the files a run's
marker lists as rlviz's own (the only files ``--overwrite`` removes). Used by :mod:`rlviz.jobs.outdir`.

An input is resolved to its real path (symlinks followed): a folder input (a training run's folder, an rl-zoo3 run,
the Hub cache folder of an ``hf://`` repo) may not equal ``--out``, hold it, or lie inside it; a file input (a
model, VecNormalize statistics) may not lie inside ``--out``. The marker's list is checked as untrusted too: only
plain relative paths (no ``..``, no absolute path) inside ``--out`` are ever removed, never through a linked folder.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import UsageError

__all__ = ["job_inputs", "check_model_folders", "check_not_input", "written_files", "listed_files", "marker_dict", "remove_listed",
           "INPUT_FIELDS"]

#: the config fields that name a job's inputs (render/compare/timeline)
INPUT_FIELDS = ("checkpoint", "a", "b", "run", "vecnormalize", "vecnormalize_a", "vecnormalize_b")
_MARKER_CAP = 16 << 20  # a marker lists file names: 16 MiB is ~200,000 of them
_SAFE_PART = re.compile(r"[^\x00-\x1f/\\]+")


def _hub_folder(ref: str) -> Path | None:
    """The Hugging Face cache folder of an ``hf://ORG/REPO...`` id (None when it does not parse)."""
    from ..sources.huggingface.hub import parse_hub_ref

    try:
        repo_id = parse_hub_ref(ref).repo_id
    except UsageError:
        return None
    cache = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if not cache:
        try:  # what huggingface_hub itself uses, when installed (it reads the environment at import)
            import huggingface_hub.constants as constants

            cache = constants.HF_HUB_CACHE
        except ImportError:
            home = os.environ.get("HF_HOME") or os.path.join(
                os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
            cache = os.path.join(home, "hub")
    return Path(cache) / ("models--" + repo_id.replace("/", "--"))


def _paths(value: Any) -> Iterable[Path]:
    if value is None or value == "":
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _paths(v)
        return
    if not isinstance(value, (str, os.PathLike)):
        return  # (a network object given to the library: no file)
    text = os.fspath(value)
    if text.startswith("hf://"):
        folder = _hub_folder(text)
        if folder is not None:
            yield folder
        return
    matched = glob.glob(text) if glob.has_magic(text) else [text]
    for m in matched:
        yield Path(m)


def job_inputs(config: Any) -> list[Path]:
    """The inputs a job's config (or its :func:`rlviz.config.config_dict`) names, as given (resolved when
    checked)."""
    def get(name: str) -> Any:
        return config.get(name) if isinstance(config, dict) else getattr(config, name, None)

    return [p for name in INPUT_FIELDS for p in _paths(get(name))]


def check_model_folders(config: Any) -> None:
    """Refuse, before anything about ``--out``, a model input (render's checkpoint, compare's A and B) that is a
    local folder with no model in it (one line saying what it holds instead: :func:`rlviz.sources.stable_baselines3.zoo.run_model`)."""
    from ..sources.stable_baselines3.zoo import run_model

    for name in ("checkpoint", "a", "b"):
        value = getattr(config, name, None)
        if isinstance(value, (str, os.PathLike)) and not str(value).startswith("hf://") and Path(value).is_dir():
            run_model(Path(value))


def check_not_input(out: Path, inputs: Sequence[Path]) -> None:
    """Refuse (one line naming both) an ``--out`` that is an input folder, lies inside one, or holds an input."""
    where = Path(out).resolve()
    for given in inputs:
        real = Path(given).resolve()
        if real.is_dir():
            how = "is" if where == real else "lies inside" if where.is_relative_to(real) else \
                "holds" if real.is_relative_to(where) else None
        else:
            how = "holds" if real.is_relative_to(where) else None
        if how is not None:
            raise UsageError(f"--out {out} {how} the input {given}; rlviz never writes into, nor removes, what a job "
                             "reads: choose an --out outside the job's inputs.")


def written_files(folder: Path) -> list[str]:
    """Every file and link under ``folder`` (relative posix paths, sorted); linked folders are listed, not
    entered."""
    found = []
    for top, dirs, names in os.walk(folder, followlinks=False):
        links = [d for d in dirs if os.path.islink(os.path.join(top, d))]
        for name in (*names, *links):
            found.append(Path(top, name).relative_to(folder).as_posix())
    return sorted(found)


def marker_dict(version: str, job: str, options: dict[str, Any], files: Sequence[str]) -> dict[str, Any]:
    return {"rlviz_version": version, "job": job, "options": options, "files": sorted(set(files))}


def _safe(rel: Any) -> bool:
    if not isinstance(rel, str) or not rel or rel.startswith("/"):
        return False
    parts = PurePosixPath(rel).parts
    return all(_SAFE_PART.fullmatch(p) and p not in (".", "..") for p in parts)


def listed_files(out: Path, marker: str = "rlviz-run.json") -> list[str] | None:
    """The files the marker of ``out`` lists as rlviz's (plain relative paths only), or None when there is no
    readable marker or it lists none."""
    try:
        with open(Path(out) / marker, "rb") as fh:
            raw = fh.read(_MARKER_CAP + 1)
        doc = json.loads(raw.decode("utf-8")) if len(raw) <= _MARKER_CAP else None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list):
        return None
    return [f for f in files if _safe(f)]


def remove_listed(folder: Path, listed: Sequence[str], marker: str) -> None:
    """Delete ``listed`` files (and ``marker``) under ``folder``, never through a linked folder, then the folders
    left empty (``folder`` itself included); anything else stays where it is."""
    root = folder.resolve()
    for rel in [*listed, marker]:
        path = folder / rel
        if not _safe(rel) or path.parent.resolve() != root.joinpath(*PurePosixPath(rel).parts[:-1]):
            continue  # a linked folder on the way: not rlviz's to follow
        try:
            if path.is_symlink() or path.is_file():
                path.unlink()
        except OSError:
            pass
    for top, dirs, _ in os.walk(folder, topdown=False, followlinks=False):
        for d in dirs:
            try:
                os.rmdir(os.path.join(top, d))  # only when empty (a link: not a folder, stays)
            except OSError:
                pass
    try:
        folder.rmdir()
    except OSError:
        pass
