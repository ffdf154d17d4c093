"""The Hugging Face cache, validated rather than trusted (:mod:`rlviz.sources.huggingface.hub` reads it offline): it is a folder
of files anyone may have edited. A ref file must hold a commit (40 hex digits), a snapshot must be a folder inside its
repo's cache folder, and every file rlviz opens must resolve inside the cache; symlinked folders are never followed
(no loops), and a link out of the cache or a loop is refused in one line saying to delete the repo's cache folder."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any

from ...errors import HubError

__all__ = ["COMMIT", "cached_snapshot", "snapshot_files", "check_wanted"]

#: a commit as the Hub and its cache name it
COMMIT = re.compile(r"[0-9a-f]{40}")


def _damaged(ref: Any, repo: Path, what: str) -> HubError:
    return HubError(f"{ref}: the Hugging Face cache {what}; the cache was edited or damaged: delete {repo} and run "
                    "again with network access to download it afresh.")


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve(strict=True).is_relative_to(folder.resolve(strict=True))
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return False


def cached_snapshot(cache: Path, ref: Any, revision: str | None = None) -> Path | None:
    """The snapshot folder of ``ref``'s revision in the cache, validated (None: not cached): a ref file holds 40 hex
    digits, and the snapshot is a real folder inside the repo's cache folder (no ``..``, no symlink out)."""
    repo = cache / ("models--" + ref.repo_id.replace("/", "--"))
    revision = revision or ref.revision or "main"
    if COMMIT.fullmatch(revision):
        commit = revision
    else:
        ref_file = repo / "refs" / revision  # (the revision was validated by parse_hub_ref: no "..")
        if not ref_file.is_file():
            return None
        if not _inside(ref_file, repo):
            raise _damaged(ref, repo, f"ref {ref_file} points outside the repo's cache folder")
        try:
            with open(ref_file, "rb") as fh:
                raw = fh.read(128)
        except OSError:
            return None
        commit = raw.decode("ascii", "replace").strip()
        if not COMMIT.fullmatch(commit):
            raise _damaged(ref, repo, f"ref {ref_file} holds {commit[:60]!r}, not a commit hash (40 hex digits)")
    snapshot = repo / "snapshots" / commit
    if not snapshot.exists() and not snapshot.is_symlink():
        return None
    if snapshot.is_symlink() or not snapshot.is_dir() or not _inside(snapshot, repo):
        raise _damaged(ref, repo, f"snapshot {snapshot} is not a folder inside the repo's cache folder")
    return snapshot


def snapshot_files(folder: Path, cache: Path, ref: Any) -> list[str]:
    """The files of a snapshot (paths relative to it), each checked to resolve inside the cache; symlinked folders
    are not followed (no loops) and a link out of the cache, or a loop, is refused."""
    files = []
    for top, dirs, names in os.walk(folder, followlinks=False):
        for name in [*names, *(d for d in dirs if (Path(top) / d).is_symlink())]:
            path = Path(top) / name
            if path.is_symlink() and not _inside(path, cache):
                if path.exists() or _loops(path):
                    raise _damaged(ref, folder.parent.parent, f"file {path} links outside the cache (or in a loop)")
                continue  # a dangling link: a download that did not finish
            if path.is_file():
                files.append(path.relative_to(folder).as_posix())
    return sorted(files)


def _loops(path: Path) -> bool:
    try:
        path.resolve(strict=True)
    except RuntimeError:
        return True
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def check_wanted(ref: Any, commit: str, folder: Path, wanted: list[str], cache: Path) -> Path:
    """``folder`` once it holds every wanted file, each inside the cache (a link out of it is refused)."""
    if folder.name != commit or not _inside(folder, cache):
        raise _damaged(ref, folder, f"snapshot {folder} is not the folder of commit {commit} inside {cache}")
    outside = [f for f in wanted if (folder / f).exists() and not _inside(folder / f, cache)]
    if outside:
        raise _damaged(ref, folder.parent.parent, f"file {folder / outside[0]} links outside the cache")
    missing = [f for f in wanted if not (folder / f).is_file()]
    if missing:
        raise HubError(f"{ref}: {', '.join(missing)} of commit {commit[:12]} not in the Hugging Face cache and "
                       "HF_HUB_OFFLINE is set (or the Hub could not be reached); run once with network access.")
    return folder
