"""Periodic evaluation from inside a jit-compiled JAX training loop (PureJaxRL's shape: ``jax.jit(train)``, a
``lax.scan`` over updates): a timeline folder, the same files ``rlviz timeline`` writes, grown while training runs.

:class:`JaxTimeline` is the host function :func:`rlviz.jax.every` calls with the loop's params every K updates::

    from rlviz.integrations.jax_loop import JaxTimeline
    from rlviz.jax import FlaxPolicy, FlaxPolicyOptions, every

    policy = FlaxPolicy(Actor(), actor_params, critic=Critic(), critic_params=critic_params,
                        options=FlaxPolicyOptions(obs_shape=(10, 10, 4)))
    timeline = JaxTimeline("runs/ppo", policy, "gymnax:Breakout-MinAtar", steps_per_update=NUM_ENVS * NUM_STEPS,
                           episodes=256, videos="worst:1")
    ...  # inside the jitted update, after the optimiser step:
    every(10, update_step, timeline, actor_params, critic_params)

Each call plays the params on the run's fixed episode seeds with the JAX engine (rollouts, statistics, diagnostics,
with ``heatmap`` the failure heatmap: :mod:`rlviz.training.jax_checkpoints`), adds the checkpoint at training step
``update * steps_per_update`` (``timeline.json``: ``first_seen``, ``regressions``, the policy change; timeline.csv,
timeline.png, report.html: :class:`rlviz.training.live.TimelineWriter`'s code), logs its row to the sinks at that step,
and writes ``videos`` of that evaluation (``videos/step_<N>-<label>-<k>-episode-0.mp4`` + ``.npz``, drawn on the host as
``rlviz render`` draws them, with ``saliency`` when the config asks). The loop computes what it computes without it:
:func:`rlviz.jax.every` only sends the params out. The params are host numpy copies: training does not change them.

Each evaluated checkpoint's params are saved in the folder as ``step_<N>.msgpack`` (``flax.serialization.to_bytes``
of ``{"actor": ..., "critic": ...}``, or of the one params tree), and the folder's ``rlviz-run.json`` names the
env and the modules' classes (``--model``/``--critic`` and their ``--*-kwargs``, when importable by name), so the
folder is a training run as ``rlviz timeline`` reads one (``rlviz timeline runs/ppo --env gymnax:... --model
m:Actor --critic m:Critic --out again`` plays the saved params again, with equal rows) and ``rlviz explore runs/ppo
--trust-checkpoint`` replays any episode of any checkpoint into a video.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from ..config import TimelineConfig, config_dict, parse_video_spec
from ..errors import UsageError
from ..jobs.inputs import written_files
from ..jobs.outdir import MARKER, write_marker
from ..sinks.base import Sink
from ..sources import LoadedAgent
from ..training.live import TimelineWriter

__all__ = ["JaxTimeline"]

#: where each evaluation's videos go in the timeline folder
VIDEOS_DIR = "videos"


class JaxTimeline:
    """A timeline folder written from a JAX training loop's params (see the module docstring).

    out: the timeline folder; policy: a :class:`~rlviz.jax.FlaxPolicy` (its module, critic, obs_reshape; its params
    are replaced by each call's); env: the JAX env id (``gymnax:Breakout-MinAtar``); steps_per_update: env steps per
    update (``NUM_ENVS * NUM_STEPS``: the training step of update ``u`` is ``u * steps_per_update``, CleanRL's
    ``global_step``); episodes, videos: as ``rlviz timeline``'s (``videos``: the episodes of each evaluation that get
    a video, render's ``--videos``: ``worst:1``, ``first:1,worst:1``, ``none``); config: a
    :class:`~rlviz.config.TimelineConfig` with the other options (seed, heatmap, saliency, gamma, greedy, num_envs,
    overwrite...; its ``env``, ``model``, ``critic`` and their ``*_kwargs``, when None, are filled from ``env`` and
    the policy's modules: what ``rlviz timeline`` and ``rlviz explore`` load the saved params with); sinks: W&B /
    TensorBoard sinks, each row logged at its training step. Each checkpoint's params are kept in the folder
    (``step_<N>.msgpack``): what ``rlviz timeline`` and explore replay.
    """

    def __init__(self, out: str | os.PathLike, policy: Any, env: str, *, steps_per_update: int = 1,
                 episodes: int | None = None, videos: str | None = None,
                 config: TimelineConfig | None = None,  # type: ignore[valid-type]  # (made by make_dataclass)
                 sinks: Sink | list[Sink] | None = None):
        from ..envs.jax_ids import is_jax_env_id

        if not is_jax_env_id(str(env)):
            raise UsageError(f"JaxTimeline(env={env!r}): expected a JAX env id (gymnax:, craftax:, brax:, jumanji:), "
                             "e.g. 'gymnax:Breakout-MinAtar'; a gymnasium loop uses rlviz.integrations.loop."
                             "TimelineWriter.")
        if not (callable(getattr(policy, "apply", None)) and hasattr(policy, "params")):
            raise UsageError(f"JaxTimeline(policy={type(policy).__name__}): expected a rlviz.jax.FlaxPolicy (the "
                             "module and critic the loop trains; the params come with each call).")
        if isinstance(steps_per_update, bool) or not isinstance(steps_per_update, int) or steps_per_update < 1:
            raise UsageError(f"JaxTimeline(steps_per_update={steps_per_update!r}): expected a positive int, the env "
                             "steps of one update (num_envs * num_steps).")
        self.policy, self.steps_per_update = policy, steps_per_update
        config = _loader_options(config or TimelineConfig(run=os.fspath(out)), str(env), policy)
        self.writer = TimelineWriter(out, env, episodes=episodes, videos=videos, sinks=sinks, config=config)
        self.out, self.config = self.writer.out, self.writer.config
        self.rows: list[dict] = []

    def __call__(self, update: int, params: Any, critic_params: Any = None) -> dict:
        """Evaluate ``params`` (and ``critic_params`` for a separate critic) as the checkpoint after update
        ``update``: its row of timeline.json (also kept in :attr:`rows`)."""
        step = int(update) * self.steps_per_update
        agent = self.agent(params, critic_params, step)
        path = self._save(step, agent)
        row = self.writer.add_agent(agent, step, path)
        self._videos(step)
        self.rows.append(row)
        return row

    def agent(self, params: Any, critic_params: Any = None, step: int = 0) -> LoadedAgent:
        """The loaded agent of these params (the policy's module and critic, the env's recipe and action names)."""
        from ..jax.policy import as_variables

        policy = copy.copy(self.policy)
        if getattr(policy, "critic", None) is not None:
            if critic_params is None:
                raise UsageError("JaxTimeline: the policy has a separate critic; pass its params too: "
                                 "every(k, step, timeline, actor_params, critic_params).")
            policy.params = {"actor": as_variables(params), "critic": as_variables(critic_params)}
        else:
            policy.params = as_variables(params)
        kind = "q" if policy.kind == "q" else "actor_critic"
        recipe = self.writer.recipe
        names = tuple(getattr(policy, "action_names", ()) or ())
        return LoadedAgent(policy, recipe, names, float(self.config.gamma if self.config.gamma is not None else 0.99),
                           kind, {"step": int(step)}, None, "flax-live")

    def _save(self, step: int, agent: LoadedAgent) -> Path:
        """``step_<step>.msgpack`` in the folder: the agent's params as ``load_jax_agent`` reads them (written
        whole under a temporary name, then renamed)."""
        import flax.serialization

        tree = cast(Any, agent.policy).params  # ({"actor": variables, "critic": variables}, or the one module's variables)
        path = self.out / f"step_{int(step)}.msgpack"
        part = path.with_name(f".{path.name}.part")
        part.write_bytes(flax.serialization.to_bytes(tree))
        os.replace(part, path)
        return path

    def _videos(self, step: int) -> None:
        """The evaluation's chosen episodes (``videos``) as render's videos, named by the training step."""
        spec = parse_video_spec(self.config.videos or "none")
        if not spec:
            return
        from ..jobs.jax_stages import write_jax_video
        from ..jobs.videos import select_episodes
        from ..training.jax_checkpoints import jax_engine

        cp = next(c for c in self.writer.checkpoints if c.step == step)
        rc = self.config.render_config(str(self.out))
        engine = jax_engine(cp.agent, rc, heatmap=False)  # (the replay's functions, compiled once for the run)
        gamma = float(cp.agent.gamma) if cp.agent is not None else 0.99
        folder = self.out / VIDEOS_DIR
        for label, idx in select_episodes(cp.result.returns, spec, seed=int(self.config.seed),
                                          heatmap=cp.result.heatmap):
            write_jax_video(engine, cp.result.episodes[idx], folder, f"step_{step}-{label}-{idx}", rc, gamma)
        write_marker(self.out, "timeline", config_dict(self.config),  # the videos listed too (--overwrite)
                     [f for f in written_files(self.out) if f != MARKER])

    def videos(self, step: int) -> list[Path]:
        """The videos written for the evaluation at training ``step``."""
        return sorted((self.out / VIDEOS_DIR).glob(f"step_{int(step)}-*.mp4"))

    def close(self) -> None:
        """timeline.png and the progression to the sinks (the writer's :meth:`~TimelineWriter.close`)."""
        self.writer.close()

    def __enter__(self) -> JaxTimeline:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _class_spec(module: Any) -> tuple[str | None, str | None]:
    """(``module:Class``, its fields as JSON) of a flax module instance: what ``--model``/``--model-kwargs`` build it
    again with; (None, None) for a class no other process can import by name (defined in ``__main__`` or in a
    function) or fields that are no plain JSON (a function, an array)."""
    cls = type(module)
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        return None, None
    fields = {k: getattr(module, k) for k in getattr(cls, "__dataclass_fields__", {}) if k not in ("parent", "name")}
    try:
        kwargs = json.dumps(fields, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None, None
    return f"{cls.__module__}:{cls.__qualname__}", kwargs if fields else None


def _loader_options(config: Any, env: str, policy: Any) -> Any:
    """``config`` with what loads the saved params again (env, model, critic and their kwargs), where not given."""
    if not isinstance(config, TimelineConfig):
        return config  # (TimelineWriter says what it expected)
    config = cast(Any, config)
    given: dict[str, Any] = {}
    if config.env is None:
        given["env"] = env
    if config.model is None:
        model, kwargs = _class_spec(policy.module)
        critic, critic_kwargs = (_class_spec(policy.critic) if getattr(policy, "critic", None) is not None
                                 else (None, None))
        if model is not None and (critic is not None or getattr(policy, "critic", None) is None):
            given.update(model=model, model_kwargs=config.model_kwargs or kwargs)
            if critic is not None and config.critic is None:
                given.update(critic=critic, critic_kwargs=config.critic_kwargs or critic_kwargs)
    return replace(config, **given) if given else config
