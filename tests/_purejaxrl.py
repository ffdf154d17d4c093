"""A PureJaxRL-shaped PPO, small, for the JAX loop's tests and benchmark (scripts/bench_jax_loop.py): gymnax env with
PureJaxRL's wrappers, ``Transition(done, action, value, reward, log_prob, obs, logits)`` collected by ``lax.scan``,
GAE, clipped PPO epochs over minibatches, the whole of training one ``jax.jit(train)`` (a ``lax.scan`` over updates).
``record`` (an rlviz host function, e.g. ``rlviz.jax.batch_recorder(...)``) is called through ``rlviz.jax.every``
every ``record_every`` updates with ``(update_step, traj_batch, global_step)``: the three lines a user adds."""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from gymnax.wrappers.purerl import FlattenObservationWrapper, LogWrapper


class ActorCritic(nn.Module):
    action_dim: int
    hidden: int = 64

    @nn.compact
    def __call__(self, x):
        a = nn.tanh(nn.Dense(self.hidden)(x))
        a = nn.tanh(nn.Dense(self.hidden)(a))
        logits = nn.Dense(self.action_dim)(a)
        c = nn.tanh(nn.Dense(self.hidden)(x))
        c = nn.tanh(nn.Dense(self.hidden)(c))
        return logits, jnp.squeeze(nn.Dense(1)(c), -1)


class Transition(NamedTuple):
    """PureJaxRL's Transition with the policy's logits kept (and, for loops that keep them, the env states)."""

    done: Any
    action: Any
    value: Any
    reward: Any
    log_prob: Any
    obs: Any
    logits: Any
    env_state: Any = None


def make_train(env_id: str = "CartPole-v1", *, num_envs: int = 4, num_steps: int = 32, num_updates: int = 4,
               epochs: int = 2, minibatches: int = 2, hidden: int = 64, record: Any = None, record_every: int = 1):
    """``(train, env, env_params)``: ``train(key) -> params``, not yet jitted."""
    base, env_params = gymnax.make(env_id)
    env = LogWrapper(FlattenObservationWrapper(base))
    n_actions = int(env.action_space(env_params).n)
    net = ActorCritic(n_actions, hidden)
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(2.5e-4, eps=1e-5))
    batch = num_envs * num_steps

    def train(key):
        import rlviz.jax as rj

        key, k_init, k_reset = jax.random.split(key, 3)
        obs_shape = env.observation_space(env_params).shape
        params = net.init(k_init, jnp.zeros(obs_shape))
        opt_state = tx.init(params)
        obs, state = jax.vmap(env.reset, (0, None))(jax.random.split(k_reset, num_envs), env_params)

        def update(carry, _):
            params, opt_state, obs, state, key, step = carry

            def env_step(c, _):
                obs, state, key = c
                key, k_act, k_step = jax.random.split(key, 3)
                logits, value = net.apply(params, obs)
                action = jax.random.categorical(k_act, logits)
                log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
                out = jax.vmap(env.step, (0, 0, 0, None))(jax.random.split(k_step, num_envs), state, action,
                                                          env_params)
                obs2, state2, reward, done = out[0], out[1], out[2], jnp.logical_or(out[3], out[4])
                return (obs2, state2, key), Transition(done, action, value, reward, log_prob, obs, logits)

            (obs, state, key), traj = jax.lax.scan(env_step, (obs, state, key), None, num_steps)
            _, last_value = net.apply(params, obs)

            def gae(c, t):
                adv, next_value = c
                alive = 1.0 - t.done.astype(jnp.float32)
                delta = t.reward + 0.99 * next_value * alive - t.value
                adv = delta + 0.99 * 0.95 * alive * adv
                return (adv, t.value), adv

            _, advantages = jax.lax.scan(gae, (jnp.zeros_like(last_value), last_value), traj, reverse=True)
            targets = advantages + traj.value

            def loss_fn(p, mb):
                t, adv, tgt = mb
                logits, value = net.apply(p, t.obs)
                logp = jnp.take_along_axis(jax.nn.log_softmax(logits), t.action[:, None], -1)[:, 0]
                ratio = jnp.exp(logp - t.log_prob)
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 0.8, 1.2) * adv).mean()
                entropy = -(jax.nn.softmax(logits) * jax.nn.log_softmax(logits)).sum(-1).mean()
                return pg + 0.5 * ((value - tgt) ** 2).mean() - 0.01 * entropy

            def epoch(c, _):
                params, opt_state, key = c
                key, k_perm = jax.random.split(key)
                flat = jax.tree_util.tree_map(lambda a: a.reshape(batch, *a.shape[2:]), (traj, advantages, targets))
                perm = jax.random.permutation(k_perm, batch)
                mbs = jax.tree_util.tree_map(lambda a: a[perm].reshape(minibatches, -1, *a.shape[1:]), flat)

                def minibatch(c, mb):
                    params, opt_state = c
                    grads = jax.grad(loss_fn)(params, mb)
                    updates, opt_state = tx.update(grads, opt_state, params)
                    return (optax.apply_updates(params, updates), opt_state), None

                (params, opt_state), _ = jax.lax.scan(minibatch, (params, opt_state), mbs)
                return (params, opt_state, key), None

            (params, opt_state, key), _ = jax.lax.scan(epoch, (params, opt_state, key), None, epochs)
            if record is not None:  # the line a user adds: videos of this update's batch every K updates
                rj.every(record_every, step, record, traj, (step + 1) * batch)
            return (params, opt_state, obs, state, key, step + 1), None

        carry = (params, opt_state, obs, state, key, jnp.int32(0))
        carry, _ = jax.lax.scan(update, carry, None, num_updates)
        return carry[0]

    return train, env, env_params


def same_params(a: Any, b: Any) -> bool:
    """Bit for bit the same pytrees of arrays."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))
