"""``rlviz render`` for a flax agent on a JAX env (``--env gymnax:Breakout-MinAtar``): the JAX engine's rollout
(:mod:`rlviz.jax.rollout`) and replays (:mod:`rlviz.jax.replay`), then the render job's own stages: summary and
diagnostics, ``summary.json``, ``episodes.csv``, the heatmap, the videos (drawn and encoded by
:func:`rlviz.draw.video.write_episode_video`, their ``.npz`` by :func:`rlviz.record.internals.save_episode_data`:
the same files as a gymnasium run's), the sinks and ``report.html``.

The agent comes from ``rlviz.jax.load.load_jax_agent`` (flax params + ``--model``/``--critic`` classes), or is given
(:func:`render_jax_into`'s ``agent``: anything with ``.policy`` (a :class:`~rlviz.jax.contract.JaxPolicy`) and
``.recipe``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import RenderConfig, parse_video_spec
from ..episode import EpisodeResult
from ..errors import UsageError
from ..evaluate import format_table
from ..evaluate.statistics.stats import write_episodes_csv, write_summary_json
from ..report import REPORT_NAME, write_report
from ..sinks.base import Sink
from ..sinks.log import log_run
from .jax_stages import (
    JAX_BATCH,
    jax_batch,
    jax_engine_for,
    jax_rollouts,
    parse_json_kwargs,
    record_jax_episode,
    run_kind,
    with_env_kwargs,
    write_jax_video,
)
from .stages import run_log, run_record, summarise
from .videos import MIN_VIDEO_SECONDS

__all__ = ["render_jax_into", "load_jax", "jax_engine_for", "write_jax_video", "parse_json_kwargs", "jax_batch",
           "with_env_kwargs", "JAX_BATCH"]


def load_jax(config: RenderConfig) -> Any:
    """The flax agent of ``config`` (``rlviz.jax.load.load_jax_agent``), its recipe carrying ``--env-kwargs``."""
    try:
        from ..jax.load import load_jax_agent
    except ImportError as exc:
        raise UsageError(f'JAX envs need jax and flax ({exc}); pip install "rlviz[jax]".') from None
    return load_jax_agent(config.checkpoint, model=config.model,
                          model_kwargs=parse_json_kwargs(config.model_kwargs, "--model-kwargs"), critic=config.critic,
                          critic_kwargs=parse_json_kwargs(config.critic_kwargs, "--critic-kwargs"), env=config.env)


def render_jax_into(folder: Path, config: RenderConfig, sinks: list[Sink], select_episodes: Any,
                    agent: Any = None) -> dict[str, Any]:
    """The run's outputs written into ``folder``: {summary, table, heatmap_npz, heatmap_png, videos: [{video}]}.
    ``select_episodes``: the render job's (``rlviz.jobs.render.select_episodes``). The rollout and the videos are the
    shared stages' JAX ones (:mod:`rlviz.jobs.jax_stages`), as compare's and the explorer's."""
    agent = agent if agent is not None else load_jax(config)
    gamma = float(config.gamma if config.gamma is not None else getattr(agent, "gamma", 0.99) or 0.99)
    result = jax_rollouts(agent, config, gamma)
    summary = summarise(result, run_kind(agent, result))
    write_summary_json(summary, folder / "summary.json")
    write_episodes_csv(result, folder / "episodes.csv")
    heatmap_npz = heatmap_png = None
    if result.heatmap is not None:
        heatmap_npz = result.heatmap.save(folder / "heatmap.npz")
        heatmap_png = result.heatmap.plot(folder / "heatmap.png", log=config.log_scale)
    chosen = select_episodes(result.returns, parse_video_spec(config.videos), seed=config.seed, heatmap=result.heatmap)
    videos: list[EpisodeResult] = []
    fps = 30.0
    for label, idx in chosen:
        done, fps = record_jax_episode(agent, result.episodes[idx], folder / "videos", f"{label}-{idx}", config, gamma,
                                       MIN_VIDEO_SECONDS)
        videos.append(done)
    if sinks:
        log_run(sinks, run_log(summary, result, videos, heatmap_png, fps))
    paths = [v.video_path for v in videos if v.video_path is not None]
    write_report(folder / REPORT_NAME, [run_record(folder, summary.to_dict(), result, heatmap_png, paths)])
    return {"summary": summary.to_dict(), "table": format_table(summary), "heatmap_npz": heatmap_npz,
            "heatmap_png": heatmap_png, "videos": [{"video": p} for p in paths], "result": result}
