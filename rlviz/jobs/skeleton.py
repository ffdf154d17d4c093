"""The job skeleton's setup, entered in one order by every job (render, compare, timeline, ``timeline --follow``)::

    with job_setup(config) as job:                  # 1. claim --out (one run per folder, held to the end)
                                                    # 2. progress bars on/off, 3. the worker backend (Ray and
                                                    #    spawned workers start now, while the agent loads)
        agent, config, gamma = job.agent(config)    # 4. resolve the agent (shared with forked workers)
        config = job.check(agent, config)           # 5. checks that would fail after the long work
        with job.staging("render", config) as (tmp, sinks):  # 6. the sinks (a missing extra fails here), 7. staging
            ...                                     #    folder, renamed into --out when complete
                                                    # 8. the sinks closed, the backend stopped, --out released

``timeline --follow`` (a published round per new checkpoint, :mod:`rlviz.training.publish`) opens the sinks with
:meth:`JobSetup.sinks` and publishes its own rounds. The helpers the jobs share live here: :func:`open_sinks`, :func:`check_saliency`,
:func:`vector_attention_off`; and a run's replay of one episode (``rlviz explore``) resolves its agent with
:func:`replay_agent`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import progress
from ..agent.capabilities import capabilities_of
from ..agent.obs import ObsAdapter
from ..config import CompareConfig, RenderConfig, config_dict, parse_video_spec
from ..envs import make_env, with_cameras
from ..envs.pettingzoo_envs import is_agents_env_id
from ..envs.probe import probe_reset, shared_probes
from ..errors import UsageError
from ..evaluate.backends.workers import Backend
from ..evaluate.rollouts.rollout import heatmap_shape
from ..explain import GivenState, attribute, attribution_class
from ..sinks.base import Sink
from ..sources import LoadedAgent
from .jax_stages import is_jax_agent, jax_engine_for
from .outdir import claim_out_dir, job_inputs, run_folder
from .shards import open_backend, share_agent
from .stages import resolve_agent

__all__ = ["JobSetup", "job_setup", "open_sinks", "check_saliency", "check_camera", "check_failed_at",
           "vector_attention_off", "replay_agent"]


@dataclass
class JobSetup:
    """A job's setup once :func:`job_setup` entered it: its config and worker backend (None: this process), and
    the sinks it opened (closed when the setup exits)."""

    config: Any
    backend: Backend | None = None
    opened: list[Any] = field(default_factory=list)
    #: the env the loading and the checks look at, shared (:mod:`rlviz.envs.probe`); closed after :meth:`check`
    probes: Any = None

    def agent(self, config: RenderConfig) -> tuple[LoadedAgent, RenderConfig, float]:
        """Stage 1 for one agent: (the agent, ``config`` pinned to the loaded ``hf://`` commit, the discount); the
        agent is shared with workers forked from now on."""
        agent, config, gamma = resolve_agent(config)
        share_agent(config, agent)
        return agent, config, gamma

    def check(self, agent: LoadedAgent, config: RenderConfig) -> RenderConfig:
        """``config`` with the default attention off for vector observations, after the checks the videos would
        fail (:func:`check_saliency`): before the long rollout, not after it."""
        config = vector_attention_off(agent, config)
        check_saliency(agent, config)
        check_camera(agent, config)
        check_failed_at(agent, config)
        if self.probes is not None:  # (the rollout builds its own envs)
            self.probes.close()
        return config

    def sinks(self) -> list[Sink]:
        """The W&B / TensorBoard sinks the config asks for, opened once (a missing extra fails here, before the
        long work) and closed when the setup exits."""
        if not self.opened:
            self.opened.extend(open_sinks(self.config) or [None])
        return [s for s in self.opened if s is not None]

    @contextlib.contextmanager
    def staging(self, job: str, config: Any = None) -> Iterator[tuple[Path, list[Sink]]]:
        """(the staging folder, the sinks) for ``config`` (the job's, as resolved: ``hf://`` ids pinned to the
        loaded commit; default: the one the setup was entered with): the sinks open first; the folder is renamed
        into ``--out`` when the block completes (:func:`rlviz.jobs.outdir.run_folder`)."""
        if config is not None:
            self.config = config
        sinks = self.sinks()
        c = self.config
        with run_folder(c.out, overwrite=c.overwrite, job=job, options=config_dict(c)) as tmp:
            yield tmp, sinks

    def close(self) -> None:
        for sink in self.opened:
            if sink is not None:
                sink.close()
        self.opened.clear()


@contextlib.contextmanager
def job_setup(config: Any) -> Iterator[JobSetup]:
    """The setup every job enters first (the module docstring's order): ``--out`` claimed, progress on/off, the
    worker backend started; on exit the sinks close, the backend stops and ``--out`` is released."""
    with claim_out_dir(config.out, config.overwrite, job_inputs(config)), progress.enabled(config.progress), \
            open_backend(config) as backend:
        with shared_probes() as probes:
            job = JobSetup(config, backend, probes=probes)
            try:
                yield job
            finally:
                job.close()


def open_sinks(config: RenderConfig | CompareConfig) -> list[Sink]:
    """The W&B / TensorBoard sinks the config asks for (their extras are imported here, before any long work)."""
    sinks = []
    if config.wandb_project:
        from ..sinks import WandbSink

        sinks.append(WandbSink(project=config.wandb_project, name=config.wandb_run, config=config_dict(config)))
    if config.tensorboard:
        from ..sinks import TensorBoardSink

        sinks.append(TensorBoardSink(config.tensorboard))
    return sinks


def replay_agent(config: RenderConfig) -> tuple[LoadedAgent, RenderConfig, float]:
    """Stage 1 for the replay of one episode of a run (``rlviz explore``, then :func:`rlviz.jobs.videos.record_episode`
    with the episode's index): (the agent, ``config`` as the run's job had it: pinned to the loaded ``hf://`` commit,
    the default attention off for vector observations, :func:`vector_attention_off`; a multi-agent run's as it is,
    the discount)."""
    agent, config, gamma = resolve_agent(config)
    if not is_agents_env_id(agent.recipe.env_id):
        config = vector_attention_off(agent, config)
    return agent, config, gamma


def vector_attention_off(agent: LoadedAgent, config: RenderConfig) -> RenderConfig:
    """``config`` with the default attention (on with --saliency and --heatmap) turned off when the observations
    are a flat vector: attention shares an image's attribution among its objects, and a vector has no pixels
    (its saliency is per feature, drawn in the videos); likewise for actions that are not Discrete (attention
    explains the chosen action's logit: a Box agent on pixels, dm_control's through AddRenderObservation). An
    explicit --attention is left to refuse. A JAX env's run measures no attention: off, and refused when asked."""
    if is_jax_agent(agent):
        if config.attention:
            raise UsageError(f"--attention: the JAX engine measures no attention ({agent.recipe.env_id}); its "
                             "saliency is drawn in the videos (--saliency). Leave --attention off.")
        return replace(config, attention=False)
    if config.attention is not None or not (config.saliency and config.heatmap):
        return config
    first, _, action_space = probe_reset(agent.recipe, config.seed)
    obs = np.asarray(first)
    discrete = isinstance(getattr(action_space, "n", None), (int, np.integer))
    return replace(config, attention=False) if obs.ndim < 2 or not discrete else config


def check_camera(agent: LoadedAgent, config: RenderConfig) -> None:
    """Refuse a ``--camera`` the env does not have before the rollout, not when its videos are made after it: the
    env made once and its model's cameras read (:func:`rlviz.envs.with_cameras`)."""
    cameras = getattr(config, "camera", None)
    if not cameras or not parse_video_spec(config.videos):
        return
    if is_jax_agent(agent):
        raise UsageError(f"--camera {cameras}: {agent.recipe.env_id} is a JAX env, drawn by rlviz from its state; "
                         "cameras are MuJoCo gymnasium envs'. Leave --camera off.")
    env = make_env(agent.recipe)
    try:
        with_cameras(env, cameras)
    finally:
        env.close()


def check_failed_at(agent: LoadedAgent, config: RenderConfig) -> None:
    """Refuse ``--videos failed-at:X,Y`` before the rollout when it cannot select: without ``--heatmap``, or a pixel
    outside the heatmap (its size is the game's frame, or the extractor's plane: known from one reset)."""
    cells = [k for kind, k in parse_video_spec(config.videos) if kind == "failed-at"]
    if not cells or is_agents_env_id(agent.recipe.env_id):  # (a PettingZoo run's videos are ranked by return)
        return
    if not config.heatmap:
        x, y = cells[0]
        raise UsageError(f"--videos failed-at:{x},{y} selects by the failure heatmap; add --heatmap.")
    if is_jax_agent(agent):  # the grid of the JAX env's object positions
        h, w = (int(d) for d in jax_engine_for(agent, config).env.object_grid)
    else:
        h, w = heatmap_shape(agent.recipe, config.objects, config.seed)
    for x, y in cells:
        if not (0 <= x < w and 0 <= y < h):
            raise UsageError(f"--videos failed-at:{x},{y}: the pixel is outside the failure heatmap's {w}x{h} "
                             f"frame ({agent.recipe.env_id}); expected x < {w}, y < {h}.")


def check_saliency(agent: LoadedAgent, config: RenderConfig) -> None:
    """Refuse a saliency the videos could not draw, before the rollout: the checks the recorder would run
    (image observations, target) on one reset observation, and, for gradient methods, gradients reaching the
    input (a network that detaches it would give blank maps)."""
    if config.saliency is None or not parse_video_spec(config.videos) or is_jax_agent(agent):
        return  # (a JAX policy's saliency: jax.grad of a traced function, always reaching its input)
    first, observation_space, _ = probe_reset(agent.recipe, config.seed)
    # as the policy takes it (a Dict flattened for an SB3 MultiInputPolicy: rlviz.agent.obs)
    obs = ObsAdapter(observation_space, capabilities_of(agent.policy).obs_format).batch([first])
    policy = agent.policy
    if capabilities_of(policy).recurrent:  # explained given its state: the episode's first step's
        attribution_class(config.saliency).check_policy(policy)
        policy = GivenState(policy, policy.initial_state(1))  # type: ignore[attr-defined]  # a recurrent policy
    attribute(policy, obs, method=config.saliency, target=config.saliency_target)
    if attribution_class(config.saliency).gradients:
        x = policy.to_tensor(obs).requires_grad_(True)
        with torch.enable_grad():
            logits, _ = policy.forward(x)
        if not logits.requires_grad:
            raise UsageError(
                f"--saliency {config.saliency} needs gradients of the policy's outputs with respect to the "
                f"observation, but {config.checkpoint}'s outputs carry none (its network detaches the input or "
                "computes outside torch autograd); use --saliency perturbation, which needs forward passes only."
            )
