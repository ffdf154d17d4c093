"""``rlviz timeline RUN --follow``: watch a training run's folder and evaluate each new checkpoint once.

A new file is read only when it is complete: its size and modification time unchanged for ``--settle`` seconds
and, for zip archives (SB3 zips, .pt2), the archive readable to its end (every member's CRC checked). SB3 writes
its zip in place over seconds; such a file is waited for, never read half-written. Each file is looked at once:
evaluated, or left out with a line (no step; a second file for a step); never evaluated twice.

After each checkpoint the outputs (timeline.json, timeline.csv, the views) are replaced atomically
(:func:`rlviz.media.atomic_path`): a reader never sees a torn file. Ctrl-C ends the watch with every evaluated
checkpoint's outputs complete (temporary files are discarded, worker processes stopped); so does ``--idle-stop S``
(S seconds without a new checkpoint) and RUN disappearing (one line; the outputs are kept).
"""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path
from typing import Any

from .. import progress
from ..errors import UsageError
from ..jobs.render import open_sinks
from ..jobs.shards import open_backend
from ..sources.run_folders import Skipped, TimelineCheckpoint, discover
from .outputs import (
    Evaluator,
    TimelineOutputs,
    log_end,
    log_rows,
    outputs_of,
    prepare_out_folder,
    say_stderr,
    timeline_data,
    write_outputs,
)

__all__ = ["follow", "FileWatch", "archive_complete"]


def archive_complete(path: Path) -> bool:
    """False for a zip archive (by its first bytes) that is truncated or fails its CRC checks; True otherwise."""
    try:
        with open(path, "rb") as fh:
            if fh.read(2) != b"PK":
                return True
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            if not infos or min(i.header_offset for i in infos) != 0:
                return False  # (a truncated archive may expose an inner zip's directory)
            return z.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False


class FileWatch:
    """Says when a file is complete: unchanged (size, mtime) for ``settle`` seconds, and its archive readable."""

    def __init__(self, settle: float, clock: Any = time.monotonic):
        self.settle, self.clock = float(settle), clock
        self._seen: dict[Path, tuple[int, int, float]] = {}

    def ready(self, path: Path) -> bool:
        try:
            st = path.stat()
        except OSError:
            return False
        now = self.clock()
        sig = (st.st_size, st.st_mtime_ns)
        before = self._seen.get(path)
        if before is None or before[:2] != sig:
            self._seen[path] = (*sig, now)
            return False
        return now - before[2] >= self.settle and archive_complete(path)


def follow(config: Any) -> TimelineOutputs:
    """Watch ``config.run`` (a folder) until Ctrl-C, ``--idle-stop`` or the folder disappearing; the outputs as
    after the last evaluated checkpoint."""
    run = config.run
    if not isinstance(run, (str, os.PathLike)) or not Path(run).is_dir():
        raise UsageError(f"--follow watches a folder; RUN {run!r} is not one. Pass the folder the training run "
                         "saves its checkpoints into (it may be empty when the watch starts).")
    out = Path(config.out)
    prepare_out_folder(out, config)
    watch = FileWatch(config.settle)
    known: set[Path] = set()
    skipped: list[Skipped] = []
    data = timeline_data([], [], config)
    evaluator = Evaluator(config, None, say_stderr)
    sinks = open_sinks(config)  # fail early (a missing extra)
    say_stderr(f"rlviz: watching {run} for checkpoints (Ctrl-C to stop)")
    try:
        with progress.enabled(config.progress), open_backend(config) as backend:
            evaluator.backend = backend
            last_new = time.monotonic()
            while True:
                if not Path(run).is_dir():
                    say_stderr(f"rlviz: {run} disappeared; stopped with the outputs of {len(evaluator.done)} checkpoint(s) "
                         f"in {out}")
                    break
                new = _new_checkpoints(run, watch, known, skipped, evaluator)
                for cp in new:
                    evaluator.add(cp)
                    data = write_outputs(out, evaluator.done, skipped, config)
                    log_rows(sinks, data, {cp.step})
                if new:
                    last_new = time.monotonic()
                elif config.idle_stop is not None and time.monotonic() - last_new >= config.idle_stop:
                    say_stderr(f"rlviz: no new checkpoint for {config.idle_stop:g} s; stopped")
                    break
                time.sleep(config.poll)
    except KeyboardInterrupt:
        say_stderr(f"rlviz: interrupted; the outputs of {len(evaluator.done)} checkpoint(s) in {out} are complete")
    finally:
        try:
            log_end(sinks, out, data)
        finally:
            for sink in sinks:
                sink.close()
    return outputs_of(out, data, evaluator.done)


def _new_checkpoints(run: Any, watch: FileWatch, known: set[Path], skipped: list[Skipped],
                     evaluator: Evaluator) -> list[TimelineCheckpoint]:
    """The complete checkpoints not looked at before, in step order (each file is looked at once)."""
    try:
        found, left = discover(run, known=known, require=False, ready=watch.ready)
    except UsageError:  # RUN vanished between the check and the listing: the next look says so
        return []
    steps = {c.step for c in evaluator.done}
    new = []
    for cp in found:
        known.add(cp.path)
        if cp.step in steps:
            left.append(Skipped(cp.name, f"{cp.name}: a second file for step {cp.step} (already evaluated)."))
        else:
            new.append(cp)
    for s in left:
        known.add(Path(run).resolve() / s.name)
        skipped.append(s)
        say_stderr(f"rlviz: skipped {s.why}")
    return new
