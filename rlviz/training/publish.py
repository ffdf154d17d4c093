"""The outputs of a timeline that grows (``--follow``; :class:`~rlviz.integrations.loop.TimelineWriter`), published
as one consistent set after each checkpoint.

Each round writes timeline.json, timeline.csv and the views into a private work folder beside ``out``
(``.<out>.<pid>.work``, where the progression parts already recorded are kept), links every file that changed into
``out`` under a temporary name, then renames them all into place (timeline.json last) with Ctrl-C held (:func:`rlviz.interrupts.
deferred_sigint`: a few renames, milliseconds). So ``out`` always holds the complete set of some round: a Ctrl-C while
a round is written leaves the previous round's set, never a timeline.json of one round beside a timeline.png of
another. The marker (``rlviz-run.json``) is rewritten last in the same step and lists every file published.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import config_dict
from ..interrupts import deferred_sigint
from ..jobs.inputs import written_files
from ..jobs.outdir import check_out_dir, is_run_folder, job_inputs, remove_run, write_marker
from ..media.atomic import temp_name
from ..sources.run_folders import Skipped, TimelineCheckpoint

__all__ = ["OutputSet", "prepare_out_folder"]


def prepare_out_folder(out: Path, config: Any, inputs: Sequence[Path] | None = None) -> None:
    """``out`` made the timeline's folder, marked as an rlviz run now (listing no file yet); an earlier rlviz run
    there is removed first (with ``overwrite``: only the files its marker lists, see :mod:`rlviz.jobs.outdir`).
    ``inputs``: what the job reads (default: what ``config`` names; a timeline written during training reads none)."""
    check_out_dir(out, config.overwrite, job_inputs(config) if inputs is None else inputs)
    if out.is_dir() and is_run_folder(out):  # --overwrite (check_out_dir refused it otherwise)
        remove_run(out)
    out.mkdir(parents=True, exist_ok=True)
    write_marker(out, "timeline", config_dict(config), [])


def _signature(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


class OutputSet:
    """Publishes a timeline's outputs into ``out`` (see the module docstring); :meth:`close` removes the work
    folder. ``count``: the checkpoints (evaluated or failed) in the set ``out`` holds now."""

    def __init__(self, out: Path, config: Any):
        self.out, self.config = Path(out), config
        self.work = self.out.resolve().parent / f".{self.out.name}.{os.getpid()}.work"
        self.published: dict[str, tuple[int, int]] = {}
        self.count = 0
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)

    def publish(self, done: Sequence[TimelineCheckpoint], skipped: Sequence[Skipped]) -> dict:
        """Write the outputs of ``done`` into the work folder, then into ``out`` as one set; the timeline.json data."""
        from .outputs import JSON_NAME, write_outputs

        data = write_outputs(self.work, done, skipped, self.config)
        changed = {rel: _signature(self.work / rel) for rel in written_files(self.work)}
        changed = {rel: sig for rel, sig in changed.items() if self.published.get(rel) != sig}
        pending: list[tuple[Path, Path]] = []
        try:  # timeline.json last: who sees its new rows finds the rest of the set already in place
            for rel in sorted(changed, key=lambda r: r == JSON_NAME):
                dest = self.out / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                tmp = temp_name(dest)
                tmp.unlink(missing_ok=True)
                try:
                    os.link(self.work / rel, tmp)  # no copy: the work file is replaced, never changed, next round
                except OSError:
                    shutil.copy2(self.work / rel, tmp)
                pending.append((tmp, dest))
            with deferred_sigint():  # the set appears whole: a few renames
                for tmp, dest in pending:
                    os.replace(tmp, dest)
                self.published.update(changed)
                write_marker(self.out, "timeline", config_dict(self.config), sorted(self.published))
                self.count = len(done)
        finally:
            for tmp, _ in pending:
                tmp.unlink(missing_ok=True)
        return data

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

