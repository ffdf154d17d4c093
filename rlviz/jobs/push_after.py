"""``--push-to-hub ORG/NAME`` (and ``--push-dry-run DIR``) of ``rlviz render`` and ``rlviz compare``: the job runs
to completion first, then its run folder is published by :func:`rlviz.jobs.push.push` exactly as ``rlviz push OUT
--repo ORG/NAME`` would (a compare run: agent B, the candidate, with its paired difference against A).

Nothing is pushed when the job fails (its error propagates before the push starts) or when ``strict`` and the
diagnostics raised a warning (the gate ``--strict`` is for: the run stays in ``--out``, a warning says it was not
pushed). What the push needs is checked before the job's long work: ``huggingface_hub`` and a token for an upload,
a new or empty ``--push-dry-run`` folder (the options themselves: :class:`rlviz.config.RenderConfig`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..config import PushConfig

__all__ = ["push_after"]


def push_after(job: Callable[..., Any], config: Any, replay: Callable[..., Any]) -> Any:
    """Run ``job(config)`` (render or compare) without its push options, then push its run folder, the replay made
    by ``replay`` (render's job: passed in, so that render imports no module that imports it); returns the job's
    outputs with ``pushed`` (:class:`rlviz.jobs.push_build.PushOutputs`, None when ``strict`` held it back)."""
    from .push_build import check_dry_run, check_upload, publish

    if config.push_dry_run is not None:
        check_dry_run(config.push_dry_run, "--push-dry-run")
    else:
        check_upload(str(config.push_to_hub))
    outputs = job(replace(config, push_to_hub=None, push_dry_run=None))  # (the run records no push options)
    if config.strict and outputs.warnings:
        ids = ", ".join(sorted({str(f["id"]) for f in outputs.warnings}))
        warnings.warn(f"--strict: the diagnostics raised {len(outputs.warnings)} warning(s) ({ids}); nothing was "
                      f"pushed. The run is in {outputs.out_dir}: `rlviz push {outputs.out_dir} --repo ORG/NAME` "
                      "publishes it anyway.", UserWarning, stacklevel=3)
        return outputs
    pushed = publish(PushConfig(run=str(outputs.out_dir), repo=config.push_to_hub, dry_run=config.push_dry_run,
                                trust_checkpoint=config.trust_checkpoint), replay)
    return replace(outputs, pushed=pushed)
