"""Videos from a JAX training loop's own batch (:func:`record_batch`, :func:`batch_recorder` for
:func:`rlviz.jax.every`): a stage above the jobs, since it writes with their JAX video writer
(:func:`rlviz.jobs.jax_stages.write_trace_video`). Users name these from :mod:`rlviz.jax`
(``rlviz.jax.record_batch``); nothing here imports jax at import."""

from __future__ import annotations

from .recording import BatchRecorder, BatchVideo, BatchVideoOptions, batch_recorder, record_batch

__all__ = ["record_batch", "batch_recorder", "BatchRecorder", "BatchVideoOptions", "BatchVideo"]
