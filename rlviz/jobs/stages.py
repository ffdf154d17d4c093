"""The job skeleton's stages for one agent, written once and run by render, compare (once per agent) and timeline
(once per checkpoint):

1. resolve the agent and its env (:func:`resolve_agent`: the checkpoint, ``--env``, ``--model``, VecNormalize
   statistics, the pinned ``hf://`` commit, the discount);
2. run its episodes (:func:`rlviz.jobs.rollouts.run_rollouts`: here or in the workers);
3. summarise and diagnose them (:func:`summarise`: the statistics, every diagnostic finding, attention);
4. write the outputs (render's files; :func:`write_attention_at_failure`);
5. log to the sinks (:func:`run_log` says what, :func:`rlviz.sinks.log_run` logs it);
6. the report page, from the run held in memory (:func:`run_record`), not read back from the files.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..analysis.attention import with_attention
from ..analysis.attention_plot import plot_attention_at_failure
from ..config import RenderConfig
from ..envs import WrapperSpec, make_env, to_rgb_frame
from ..envs.recipe import read_recipe_file
from ..errors import UsageError
from ..evaluate import RolloutResult, summarize
from ..evaluate.statistics.diagnostics import diagnose
from ..evaluate.statistics.memory_checks import rollout_memory_findings
from ..evaluate.statistics.stats import Summary, flat_numbers
from ..report import RunData, video_data
from ..sinks.log import Logged, RunLog, findings_markdown
from ..sources import LoadedAgent, load_agent
from ..sources.huggingface.hub import pinned_id
from ..sources.loaded import coerce_recipe

__all__ = ["resolve_agent", "wants_jax_agent", "load_flax_agent", "agent_env", "summarise", "run_log", "run_record",
           "write_attention_at_failure", "background_frame", "ATTENTION_PNG"]

#: The attention map at failure beside the failure heatmap (with attention on and failures seen).
ATTENTION_PNG = "attention_at_failure.png"


def resolve_agent(config: RenderConfig) -> tuple[LoadedAgent, RenderConfig, float]:
    """Stage 1: (the agent, ``config`` with its checkpoint pinned to the loaded commit for ``hf://`` ids so that
    workers load the same one, the discount: ``--gamma`` or the checkpoint's)."""
    if wants_jax_agent(config):  # a flax params file with --model, or a JAX env id: rlviz.jax.load
        with progress.phase(f"loading {Path(config.checkpoint).name}"):
            jax_agent = load_flax_agent(config)
        return jax_agent, config, float(config.gamma if config.gamma is not None else jax_agent.gamma)
    with progress.phase(f"loading {Path(config.checkpoint).name}"):
        agent = load_agent(config.checkpoint, env=agent_env(config), model=config.model,
                           trust=config.trust_checkpoint, device=config.device, vecnormalize=config.vecnormalize)
    config = replace(config, checkpoint=pinned_id(config.checkpoint, agent))
    return agent, config, float(config.gamma if config.gamma is not None else agent.gamma)


def wants_jax_agent(config: RenderConfig) -> bool:
    """True for a JAX env id (``gymnax:...``), or ``--model`` with a flax params file (a flax msgpack, an Orbax
    folder, a .npz): those load with :func:`rlviz.jax.load.load_jax_agent`. Reads a few bytes; imports no jax
    (CleanRL's JAX files, given without ``--model``, still load with torch alone)."""
    from ..envs.jax_ids import is_jax_env_id
    from ..jax.params import params_format

    if is_jax_env_id(config.env):
        return True
    checkpoint = str(config.checkpoint)
    if checkpoint.endswith(".zip") and Path(checkpoint).is_file():
        from ..errors import CheckpointError
        from ..jax.load import sbx_refusal

        reason = sbx_refusal(Path(checkpoint))  # an SBX zip: its params only in a pickle (one line, not "unknown")
        if reason:
            raise CheckpointError(reason)
    return bool(config.model) and "://" not in checkpoint and params_format(checkpoint) is not None


def load_flax_agent(config: RenderConfig) -> LoadedAgent:
    """The flax agent of ``config`` (``--model``/``--critic`` and their ``--*-kwargs``, ``--env`` with
    ``--env-kwargs`` in its recipe); a missing jax or flax is one line naming the extra."""
    import json

    from ..jax import require_jax

    require_jax("flax agents")
    from ..jax.load import load_jax_agent

    env: Any = config.env
    if config.env_kwargs and env is not None:
        try:
            kwargs = json.loads(config.env_kwargs)
        except ValueError as exc:
            raise UsageError(f"--env-kwargs {config.env_kwargs!r} is not JSON ({exc}).") from None
        if not isinstance(kwargs, dict):
            raise UsageError(f"--env-kwargs {config.env_kwargs!r}: expected a JSON object.")
        base = coerce_recipe(env)
        env = replace(base, env_kwargs={**base.env_kwargs, **kwargs})
    agent: LoadedAgent = load_jax_agent(config.checkpoint, model=config.model, model_kwargs=config.model_kwargs,
                                        critic=config.critic, critic_kwargs=config.critic_kwargs, env=env)
    return agent


def agent_env(config: RenderConfig) -> Any:
    """What ``load_agent`` gets as ``env``: ``--env``, or with ``--wrapper`` names its recipe with those wrappers
    after the env's own (the user's consent to import them: :mod:`rlviz.envs.user_wrappers`)."""
    file = isinstance(config.env, str) and config.env.endswith(".json")
    if not config.wrapper and not file:
        return config.env
    if config.env is None:
        raise UsageError(f"--wrapper {config.wrapper[0]} needs --env ID: the wrappers go around the env you name.")
    # a recipe file (--env run/env-recipe.json): its own wrappers first, each a known one or one --wrapper names too
    base = (read_recipe_file(config.env, trusted=config.trust_checkpoint, consented_wrappers=config.wrapper)
            if file else coerce_recipe(config.env))
    own = {w.name for w in base.wrappers}  # a --wrapper the file names already is consent, not a second copy
    return replace(base, wrappers=base.wrappers + tuple(WrapperSpec(n) for n in config.wrapper if n not in own))


def summarise(result: RolloutResult, kind: str) -> Summary:
    """Stage 3: the statistics of a rollout with every finding: the diagnostics (:func:`diagnose`, for a policy of
    ``kind``), a recurrent policy's memory findings (:func:`rollout_memory_findings`) and, when the rollout measured
    attention, its shares and finding."""
    found = diagnose(result, kind) + rollout_memory_findings(result.episodes)
    found = [f for f in found if f.severity == "warning"] + [f for f in found if f.severity != "warning"]
    summary: Summary = with_attention(summarize(result, found), result)
    return summary


def background_frame(recipe: Any, seed: int) -> np.ndarray | None:
    """A first frame of the game to draw a heatmap over."""
    env = make_env(recipe)
    try:
        env.reset(seed=seed)
        return to_rgb_frame(env.render())
    finally:
        env.close()


def write_attention_at_failure(result: RolloutResult, recipe: Any, path: Path, seed: int) -> Path | None:
    """``path`` (a PNG): the failure heatmap beside the mean attribution before failures, when the rollout measured
    attention and saw failures; None otherwise."""
    heatmap = result.heatmap
    if heatmap is None or not any(getattr(e, "attention", None) for e in result.episodes):
        return None
    if heatmap.background is None:
        heatmap.background = background_frame(recipe, seed)
    written: Path | None = plot_attention_at_failure(result, heatmap, path)
    return written


def run_log(summary: Summary, result: RolloutResult, videos: Any, heatmap_png: Path | None, fps: float,
            prefix: str = "rlviz/") -> RunLog:
    """Stage 5: what a rendered run logs (at step 0, names under ``prefix``): its statistics, its findings (text and
    the count of warnings), the episode table, the videos (EpisodeResults with ``video_path``), the failure heatmap
    and the attention at failure beside it."""
    items = [Logged.scalars(prefix, flat_numbers(summary.to_dict())),
             Logged.text(f"{prefix}diagnostics", findings_markdown(summary.diagnostics)),
             Logged.scalars(prefix, {"diagnostics/warnings": len(summary.warnings)})]
    rows = [ep.to_row() for ep in result.episodes]
    if rows:
        items.append(Logged.table(f"{prefix}episodes", list(rows[0]), [list(r.values()) for r in rows]))
    items += [Logged.video(f"{prefix}{Path(v.video_path or '').stem}", v.video_path, fps) for v in videos]
    if heatmap_png is not None:
        items.append(Logged.image(f"{prefix}failure_heatmap", heatmap_png))
        if Path(heatmap_png).with_name(ATTENTION_PNG).exists():
            items.append(Logged.image(f"{prefix}attention_at_failure", Path(heatmap_png).with_name(ATTENTION_PNG)))
    return RunLog(0, tuple(items))


def run_record(folder: Path, summary: dict[Any, Any], result: RolloutResult, heatmap_png: Path | None,
               videos: Any, title: str | None = None) -> RunData:
    """Stage 6: the report page's part of one run, from what the job holds (the summary dict, the rollout's
    episodes, the paths it wrote); ``videos``: MP4 paths (each one's per-step trace comes from its per-step ``.npz``)."""
    return RunData(title=title or str(summary.get("env_id") or folder.name), folder=folder, summary=summary,
                   episodes=[e.to_row() for e in result.episodes], heatmap=heatmap_png,
                   videos=tuple(video_data(Path(p)) for p in videos))
