"""``rlviz timeline RUN --follow``: watch a training run's folder and evaluate each new checkpoint once.

A new file is read only when it is complete: not empty, its size and modification time unchanged for ``--settle``
seconds and, for zip archives (SB3 zips, .pt2), the archive readable to its end (every member's CRC checked; an
archive whose directory declares a bomb is left to the loader, which refuses it in one line). SB3 writes its zip in
place over seconds; such a file is waited for, never read half-written. Each file is evaluated once; a file that
failed (to load, or to give a step) is tried again when its size or modification time changes (a checkpoint filled
in place after it looked complete).

One writer: the ``--out`` lock (:func:`rlviz.jobs.outdir.claim_out_dir`) is held from the first check until the
last output is in place. After each checkpoint the outputs (timeline.json, timeline.csv, the views, the report) are
published as one consistent set (:class:`rlviz.training.publish.OutputSet`). Ctrl-C stops the watch within a second
or two, exit code 130: ``out`` keeps the complete set of the checkpoints evaluated before it (a round being written
is dropped whole), and holds nothing when none was (the folder is removed). ``--idle-stop S`` (S seconds without a
new checkpoint) and RUN disappearing end it normally (one line; the outputs are kept).
"""

from __future__ import annotations

import os
import time
import zipfile
import zlib
from pathlib import Path
from typing import Any

from ..errors import CheckpointError, Interrupted, UsageError
from ..interrupts import remembered_sigint
from ..jobs.outdir import remove_run
from ..jobs.skeleton import JobSetup, job_setup
from ..sources.limits import check_archive
from ..sources.run_folders import Skipped, TimelineCheckpoint, discover
from .outputs import Evaluator, TimelineOutputs, log_end, log_rows, outputs_of, say_stderr, timeline_data
from .publish import OutputSet, prepare_out_folder

__all__ = ["follow", "FileWatch", "Looked", "archive_complete"]


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
            try:
                check_archive(z, path)
            except CheckpointError:  # a bomb by its directory: "complete", so the loader refuses it in one line
                return True
            return z.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError, zlib.error, NotImplementedError, RuntimeError):
        return False


class FileWatch:
    """Says when a file is complete: not empty, unchanged (size, mtime) for ``settle`` seconds, and its archive
    readable."""

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
        return st.st_size > 0 and now - before[2] >= self.settle and archive_complete(path)


class Looked:
    """The files ``--follow`` has looked at (``path in looked`` for :func:`~rlviz.sources.run_folders.discover`):
    an evaluated file stays looked at; one that failed is looked at again once its size or mtime changed."""

    def __init__(self) -> None:
        self.done: set[Path] = set()
        self.failed: dict[Path, tuple[int, int] | None] = {}

    @staticmethod
    def signature(path: Path) -> tuple[int, int] | None:
        try:
            st = path.stat()
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def __contains__(self, path: object) -> bool:
        if path in self.done:
            return True
        if isinstance(path, Path) and path in self.failed:
            return self.failed[path] == self.signature(path)
        return False

    def ok(self, path: Path) -> None:
        self.done.add(path)
        self.failed.pop(path, None)

    def failure(self, path: Path, signature: tuple[int, int] | None = None) -> None:
        """``path`` failed as it was when ``signature`` (size, mtime_ns) was taken (default: now)."""
        self.failed[path] = signature if signature is not None else self.signature(path)


def follow(config: Any) -> TimelineOutputs:
    """Watch ``config.run`` (a folder) until Ctrl-C, ``--idle-stop`` or the folder disappearing; the outputs as
    after the last evaluated checkpoint. Ctrl-C raises :class:`~rlviz.errors.Interrupted` (see the module
    docstring) once the outputs are as it says."""
    run = config.run
    if not isinstance(run, (str, os.PathLike)) or not Path(run).is_dir():
        raise UsageError(f"--follow watches a folder; RUN {run!r} is not one. Pass the folder the training run "
                         "saves its checkpoints into (it may be empty when the watch starts).")
    out = Path(config.out)
    with job_setup(config) as job:  # one writer (--out held until the last output is in place), the workers
        sinks = job.sinks()  # fail early (a missing extra)
        outputs = None
        try:
            prepare_out_folder(out, config)
            outputs = OutputSet(out, config)
            return _watch(config, out, outputs, sinks, job)
        except KeyboardInterrupt:
            raise _interrupted(out, outputs) from None
        finally:
            if outputs is not None:
                outputs.close()


def _watch(config: Any, out: Path, outputs: OutputSet, sinks: list, job: JobSetup) -> TimelineOutputs:
    run = config.run
    watch, looked = FileWatch(config.settle), Looked()
    skipped: list[Skipped] = []
    data = timeline_data([], [], config)
    evaluator = Evaluator(config, job.backend, say_stderr)
    say_stderr(f"rlviz: watching {run} for checkpoints (Ctrl-C to stop)")
    with remembered_sigint() as interrupted:
        last_new = time.monotonic()
        while True:
            if interrupted():  # a Ctrl-C that a finalizer or a library swallowed: it stops the watch all the same
                raise KeyboardInterrupt
            if not Path(run).is_dir():
                say_stderr(f"rlviz: {run} disappeared; stopped with the outputs of {outputs.count} "
                           f"checkpoint(s) in {out}")
                break
            new = _new_checkpoints(run, watch, looked, skipped, evaluator)
            for cp in new:
                before = looked.signature(cp.path)  # (a file changed while it was read is read again)
                done = evaluator.add(cp)
                if done.error is None:
                    looked.ok(cp.path)
                else:
                    looked.failure(cp.path, before)
                data = outputs.publish(evaluator.done, skipped)
                log_rows(sinks, data, {cp.step})
            if new:
                last_new = time.monotonic()
            elif config.idle_stop is not None and time.monotonic() - last_new >= config.idle_stop:
                say_stderr(f"rlviz: no new checkpoint for {config.idle_stop:g} s; stopped")
                break
            time.sleep(config.poll)
    log_end(sinks, out, data)
    return outputs_of(out, data, evaluator.done)


def _interrupted(out: Path, outputs: OutputSet | None) -> Interrupted:
    """The one line Ctrl-C leaves; with no checkpoint published, ``out`` (only rlviz's marker) is removed."""
    if outputs is None:  # (before the folder was made ours)
        return Interrupted("no checkpoint was evaluated; nothing was written")
    if outputs.count == 0:
        remove_run(out)
        return Interrupted(f"no checkpoint was evaluated; nothing was written ({out} removed)")
    return Interrupted(f"the outputs of the {outputs.count} checkpoint(s) evaluated before it are complete in {out}")


def _new_checkpoints(run: Any, watch: FileWatch, looked: Looked, skipped: list[Skipped],
                     evaluator: Evaluator) -> list[TimelineCheckpoint]:
    """The complete checkpoints not looked at before (or changed since they failed), in step order."""
    try:
        found, left = discover(run, known=looked, require=False, ready=watch.ready)
    except UsageError:  # RUN vanished between the check and the listing: the next look says so
        return []
    good = {c.step: c.path for c in evaluator.done if c.error is None}
    new = []
    for cp in found:
        if cp.step in good and good[cp.step] != cp.path:
            left.append(Skipped(cp.name, f"{cp.name}: a second file for step {cp.step} (already evaluated)."))
        elif cp.step in good:  # (evaluated already; changed in place since: not evaluated twice)
            looked.ok(cp.path)
        else:
            new.append(cp)
            skipped[:] = [k for k in skipped if k.name != cp.name]  # (skipped before, readable now)
    root = Path(run).resolve()
    for s in left:
        path = root / s.name
        looked.failure(path)
        skipped[:] = [k for k in skipped if k.name != s.name] + [s]
        say_stderr(f"rlviz: skipped {s.why}")
    return new
