"""The JAX kind of a timeline checkpoint: a flax agent on a JAX env (``gymnax:Breakout-MinAtar``), evaluated by the JAX
engine instead of the gymnasium rollout, with the same rows, findings and policy change as a torch checkpoint's.

* :func:`jax_checkpoint_rollout`: the run's N seeds by :func:`rlviz.jax.rollout.jax_rollout` (what ``rlviz render
  --env gymnax:...`` plays for the file: :mod:`rlviz.jobs.render_jax`'s engine and batch);
* :func:`jax_visited_states`: the observations of the run's first episodes, each replayed alone on its key
  (:func:`rlviz.jax.replay.replay_jax_episode`), for the policy change;
* :func:`jax_action_probs`: a discrete JAX policy's probabilities on those states (one vmapped call).

Used by :mod:`rlviz.training.evaluate` when :func:`rlviz.jobs.jax_stages.is_jax_agent` (the agent plays a JAX env
id); imports jax only when called.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..evaluate.rollouts.rollout import episode_seed_for

__all__ = ["jax_engine", "jax_checkpoint_rollout", "jax_visited_states", "jax_action_probs"]


def _render_config(config: Any) -> Any:
    """The RenderConfig a timeline config's checkpoint is played with (the JAX engine's batch: ``--num-envs`` when
    given)."""
    render_config = getattr(config, "render_config", None)
    return render_config("jax-checkpoint") if callable(render_config) else config


#: compiled engines by what their compiled functions depend on (the params are their argument): a training run's
#: checkpoints share one module, so its rollout and replay compile once, not once per checkpoint
_ENGINES: dict[tuple, tuple[Any, Any]] = {}
_MAX_ENGINES = 8
#: the compiled logits of a module's policy on a batch of states, by :func:`rlviz.jax.policy.policy_key`
_PROBS: dict[tuple, tuple[Any, Any]] = {}


def jax_engine(agent: Any, config: Any, heatmap: bool | None = None) -> Any:
    """The :class:`~rlviz.jax.rollout.JaxEngine` of ``agent`` with ``config``'s options (``heatmap``: None for the
    config's), sharing its compiled functions with the earlier engines of the same module, critic, env and options
    (:data:`_ENGINES`): each engine plays its own agent's params."""
    import copy

    from ..jobs.jax_stages import jax_engine_for

    rc = _render_config(config)
    if heatmap is not None:
        rc = replace(rc, heatmap=bool(heatmap))
    from ..jax.policy import policy_key

    policy = agent.policy
    key = (policy_key(policy), agent.recipe.to_json(), getattr(rc, "env_kwargs", None), bool(rc.greedy),
           str(rc.fail_on), bool(rc.heatmap))
    held = _ENGINES.get(key)
    if held is None:
        if len(_ENGINES) >= _MAX_ENGINES:
            _ENGINES.pop(next(iter(_ENGINES)))
        held = _ENGINES[key] = (jax_engine_for(agent, rc), policy)  # (the policy held: its module's id stays its own)
    engine = copy.copy(held[0])  # a shallow copy: the same compiled functions, this agent's policy (its params)
    engine.policy = policy
    return engine


def jax_checkpoint_rollout(agent: Any, config: Any, gamma: float) -> Any:
    """The :class:`~rlviz.evaluate.RolloutResult` of ``agent`` on the run's seeds (``config``: a TimelineConfig or
    RenderConfig: episodes, seed, greedy, fail_on, heatmap, num_envs, env_kwargs)."""
    from ..jax.rollout import jax_rollout
    from ..jobs.jax_stages import jax_batch

    rc = _render_config(config)
    return jax_rollout(jax_engine(agent, rc), int(rc.episodes), seed=int(rc.seed), num_envs=jax_batch(rc),
                       gamma=float(gamma))


def jax_visited_states(agent: Any, config: Any, limit: int) -> np.ndarray | None:
    """float32 ``[n <= limit, *obs_shape]``: the observations ``agent`` acted on in the run's first episodes (each
    replayed alone on its seed, as in the rollout; an episode's last observation, after its end, left out)."""
    from ..jax.replay import replay_jax_episode

    rc = _render_config(config)
    engine = jax_engine(agent, rc, heatmap=False)
    seen: list[np.ndarray] = []
    count = 0
    for k in range(int(rc.episodes)):
        if count >= limit:
            break
        rep = replay_jax_episode(engine, episode_seed_for(int(rc.seed), k))
        obs = np.asarray(rep.observations[: rep.length], np.float32)[: limit - count]
        seen.append(obs)
        count += len(obs)
    return np.concatenate(seen) if seen else None


def jax_action_probs(agent: Any, states: np.ndarray) -> np.ndarray | None:
    """float64 ``[n, A]``: the softmax of a discrete JAX policy's logits on ``states`` (Q-values: None; the
    policy change of a Q-learner or a Gaussian JAX actor is not measured)."""
    if agent.policy.kind != "logits":
        return None
    import jax

    from ..jax.policy import policy_key

    policy = agent.policy
    key = policy_key(policy)
    held = _PROBS.get(key)
    if held is None:  # (one compiled function per module: the params are its argument)
        if len(_PROBS) >= _MAX_ENGINES:
            _PROBS.pop(next(iter(_PROBS)))
        fn = jax.jit(jax.vmap(lambda p, o: policy.apply(p, o).logits, in_axes=(None, 0)))
        held = _PROBS[key] = (fn, policy)
    logits = held[0](policy.params, np.asarray(states, np.float32))
    z = np.asarray(logits, np.float64)
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    out: np.ndarray = e / e.sum(-1, keepdims=True)
    return out
