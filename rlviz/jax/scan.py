"""The engine's one step, traced: a policy (:class:`~rlviz.jax.contract.JaxPolicy`) choosing an action on an env
(:class:`~rlviz.jax.contract.JaxEnv`), for ONE episode (the engine vmaps it over the batch and scans it over steps).

Episode ``k``'s randomness is its own: its key is ``jax.random.key(episode_seed_for(seed, k))`` (the same per-episode
seed as rlviz's gymnasium rollouts: ``episodes.csv``'s ``seed`` column), split into the reset's key and the steps'
key; step ``t`` uses ``fold_in(steps_key, t)``, split into the action's and the env's. Nothing depends on the batch.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = ["Carry", "initial_carry", "make_step", "obs_key_weights", "host_state"]


def host_state(state: Any) -> Any:
    """``state`` with its typed PRNG keys as their raw data (Craftax keeps one): numpy can hold it then."""
    import jax

    def raw(x: Any) -> Any:
        if hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.key_data(x)
        return x

    return jax.tree_util.tree_map(raw, state)


class Carry(NamedTuple):
    """One episode's running state through the scan (vmapped: each leaf gets a leading batch axis)."""

    key: Any        # the episode's steps key
    state: Any      # the env's state
    obs: Any        # the observation the next action is chosen on
    alive: Any      # bool: the episode has not ended
    t: Any          # int32: steps taken
    memory: Any     # a recurrent policy's carry (None otherwise)


def obs_key_weights(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Fixed odd uint32 weights for the observation hash (loop detection's keys): the same in every run."""
    rng = np.random.default_rng(0x5EED)
    return tuple((rng.integers(0, 2**32, size, dtype=np.uint64) | 1).astype(np.uint32) for _ in range(2))  # type: ignore[return-value]


def initial_carry(env: Any, policy: Any, env_params: Any, seed: Any) -> Carry:
    import jax
    import jax.numpy as jnp

    key = jax.random.key(seed)
    k_reset, k_steps = jax.random.split(key)
    obs, state = env.reset(k_reset, env_params)
    memory = policy.initial_carry() if getattr(policy, "recurrent", False) else None
    return Carry(k_steps, state, obs, jnp.asarray(True), jnp.asarray(0, jnp.int32), memory)


def _decide(policy: Any, env: Any, out: Any, key: Any, greedy: bool) -> tuple[Any, Any, Any]:
    """(action as the env takes it, relative entropy (Box: differential, nats), value or NaN)."""
    import jax
    import jax.numpy as jnp

    nan = jnp.asarray(jnp.nan, jnp.float32)
    value = nan if out.value is None else jnp.asarray(out.value, jnp.float32).reshape(())
    if policy.kind == "q":
        q = jnp.asarray(out.q, jnp.float32)
        return jnp.argmax(q).astype(jnp.int32), jnp.asarray(0.0, jnp.float32), jnp.max(q) if out.value is None else value
    if policy.kind == "logits":
        logits = jnp.asarray(out.logits, jnp.float32)
        logp = jax.nn.log_softmax(logits)
        p = jnp.exp(logp)
        n = logits.shape[-1]
        h = -jnp.sum(jnp.where(p > 0, p * logp, 0.0))
        ent = h / jnp.log(n) if n > 1 else jnp.asarray(0.0, jnp.float32)
        action = jnp.argmax(logits) if greedy else jax.random.categorical(key, logits)
        return action.astype(jnp.int32), ent.astype(jnp.float32), value
    mean = jnp.asarray(out.mean, jnp.float32)
    std = None if out.std is None else jnp.asarray(out.std, jnp.float32)
    if std is None:
        u, ent = mean, nan
    else:
        ent = jnp.sum(0.5 * jnp.log(2.0 * jnp.pi * jnp.e * jnp.maximum(std, 1e-30) ** 2))
        u = mean if greedy else mean + std * jax.random.normal(key, mean.shape, jnp.float32)
    low, high = getattr(env, "action_low", None), getattr(env, "action_high", None)
    if getattr(policy, "squash", False):
        a = jnp.tanh(u)
        if low is not None and high is not None:
            a = jnp.asarray(low) + (a + 1.0) * 0.5 * (jnp.asarray(high) - jnp.asarray(low))
    else:
        a = u if low is None or high is None else jnp.clip(u, jnp.asarray(low), jnp.asarray(high))
    return a.reshape(getattr(env, "action_shape", a.shape)), ent.astype(jnp.float32), value


def make_step(env: Any, policy: Any, *, greedy: bool, fail_on: str, heatmap: bool, keep: bool, max_steps: int) -> Any:
    """``step(params, env_params, carry) -> (carry, outputs)`` for one episode. outputs: per-step scalars
    (reward, value, entropy, action index, obs key, alive, terminated, truncated, failed, bad) and, with ``heatmap``,
    the objects' positions before the step; ``keep``: also the env state, observation and the policy's output (the
    replay of a video)."""
    import jax
    import jax.numpy as jnp

    size = int(np.prod(env.obs_shape)) if env.obs_shape else 1
    w1, w2 = (jnp.asarray(w) for w in obs_key_weights(size))
    recurrent = bool(getattr(policy, "recurrent", False))

    def step(params: Any, env_params: Any, carry: Carry) -> tuple[Carry, dict]:
        k_act, k_env = jax.random.split(jax.random.fold_in(carry.key, carry.t))
        obs = jnp.asarray(carry.obs, jnp.float32)
        if recurrent:
            memory, out = policy.apply_recurrent(params, carry.memory, obs, carry.t == 0)
        else:
            memory, out = carry.memory, policy.apply(params, obs)
        action, ent, value = _decide(policy, env, out, k_act, greedy)
        obs2, state2, reward, term, trunc = env.step(k_env, carry.state, action, env_params)
        term = jnp.asarray(term, bool)
        trunc = jnp.logical_or(jnp.asarray(trunc, bool), carry.t + 1 >= max_steps) & ~term
        failed = (reward < 0) if fail_on == "negative-reward" else term
        bits = jax.lax.bitcast_convert_type(obs.reshape(-1), jnp.uint32)
        heads = [x for x in (out.logits, out.mean, out.std, out.q) if x is not None]
        finite = [jnp.all(jnp.isfinite(jnp.asarray(x))) for x in heads]
        if out.value is not None:
            finite.append(jnp.isfinite(value))
        bad = ~jnp.all(jnp.stack(finite)) if finite else jnp.asarray(False)
        ys = {"reward": jnp.asarray(reward, jnp.float32), "value": value, "entropy": ent,
              "index": action if env.discrete else jnp.asarray(-1, jnp.int32),
              "key1": jnp.sum(bits * w1), "key2": jnp.sum((bits ^ (bits >> 15)) * w2),
              "alive": carry.alive, "terminated": term, "truncated": trunc, "failed": failed, "bad": bad}
        if heatmap:
            ys["objects"] = env.objects(carry.state)
        if keep:
            ys.update(state=host_state(carry.state), obs=carry.obs, out=out, action=action)
        done = jnp.logical_or(term, trunc)
        return Carry(carry.key, state2, obs2, carry.alive & ~done, carry.t + 1, memory), ys

    return step
