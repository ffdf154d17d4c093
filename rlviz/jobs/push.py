"""``rlviz push RUN --repo ORG/NAME``: a render run (or a compare run's agent B, :mod:`.push_runs`) published on
the Hugging Face Hub with its annotated replay.

It lives with the jobs (a job built on render's, as the timeline is) because it is one: the replay is rlviz's own
``--videos episode:N`` path (:func:`rlviz.jobs.render.render` run again on the run's options and seeds, the
episodes checked equal to the run's), so ``replay.mp4``'s frames are those ``rlviz render --videos episode:N``
writes and no second encoder exists. :func:`build_repo_folder` writes the folder (the agent's files as loaded, in
the layout its tool publishes; the card, ``replay.mp4`` and ``replay-worst.mp4``, ``heatmap.png``, ``report.html``,
``README.md``, ``results.json``, ``rlviz.json``); :func:`push` uploads it with ``huggingface_hub`` (the token from
its usual places, never written) unless ``--dry-run DIR``.

Refused: a folder that is not an rlviz render or compare run; a run whose agent needs code (``--model``) without
``--include-code FILE``; a file over ``--max-file-mb``; a file that names a path of this machine, the user name or
the token; a replay that cannot be made (never "continue without a video").

The folder and the upload are :mod:`.push_build`'s (given this job's replay, render); what the run is,
:mod:`.push_runs`; the agent's files, :mod:`.push_agent`; the card, :mod:`.push_card`; ``--push-to-hub`` of
render and compare, :mod:`.push_after`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import PushConfig
from . import push_build
from .push_build import PushOutputs, check_dry_run, check_upload, choose_episode, secrets_in

__all__ = ["push", "build_repo_folder", "PushOutputs", "choose_episode", "secrets_in", "check_upload", "check_dry_run"]


def push(config: PushConfig | None = None, **kwargs: Any) -> PushOutputs:
    """Build the repo folder from the run and upload it (``config.dry_run``: write it there, upload nothing);
    ``push(run=..., repo=...)`` works too."""
    from .render import render

    if config is None:
        config = PushConfig(**kwargs)
    return push_build.publish(config, render)


def build_repo_folder(config: PushConfig, folder: Path) -> list[str]:
    """Write into ``folder`` every file the repo gets; returns their names. Nothing is uploaded."""
    from .render import render

    return push_build.build_repo_folder(config, folder, render)
