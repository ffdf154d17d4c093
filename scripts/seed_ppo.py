"""A small JAX PPO in the shape of seed 003's agent, written for rlviz's story (``scripts/seed_story.py``).

The seed's agent: a flax MLP actor and a separate MLP critic (their own params and optimizers), on gymnax
``Breakout-MinAtar``, observations reshaped to ``(-1, 10, 10, 4)`` before the networks. The loop is written the
PureJaxRL way: everything is a pytree, one ``lax.scan`` over updates (inside it a scan over env steps, then over
epochs and minibatches), and the whole ``train`` is one ``jax.jit``. ``entropy_in_loss=False`` is the seed's bug:
the actor's loss that is differentiated is the clipped policy loss alone (``policy_loss``), so the entropy bonus
(``ppo_loss = policy_loss - ent_coef * entropy``) never reaches the gradient, whatever ``ent_coef`` is.

``make_train(cfg, callback=None)``: ``callback(update, actor_params, critic_params)`` is called inside the
jit-compiled update (after update ``update``, counted from 1), e.g. ``rlviz.jax.every(k, update, timeline, ...)``;
it only reads: the trained params are the same with it or without it.

``train(key, entropy_in_loss=None)``: ``None`` trains as ``cfg.entropy_in_loss`` says (a Python bool: one compiled
loss); a traced bool (``jnp.asarray(True)``) chooses at run time which of the two gradients each minibatch takes
(``lax.cond``), so one ``jax.jit(train)`` compiled once trains both the buggy and the fixed run
(``scripts/seed_story.py``), with the params each static setting gives, bit for bit (checked on the short setting).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import optax

__all__ = ["Actor", "Critic", "PPOConfig", "make_train", "OBS_SHAPE"]

#: the seed's reshape: MinAtar's 10x10 board, 4 channels (paddle, ball, trail, bricks)
OBS_SHAPE = (10, 10, 4)


def _torso(x: Any, hidden: int) -> Any:
    """Flatten, then two ReLU layers (called inside a module's ``nn.compact`` method: its layers are that module's)."""
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.Dense(hidden)(x))
    return nn.relu(nn.Dense(hidden)(x))


class Actor(nn.Module):
    """The policy: flatten, two ReLU layers, one logit per action."""

    action_dim: int = 3
    hidden: int = 64

    @nn.compact
    def __call__(self, x: Any) -> Any:
        h = _torso(x, self.hidden)  # (first: the layers keep the names Dense_0, Dense_1, then the head Dense_2)
        return nn.Dense(self.action_dim, kernel_init=nn.initializers.orthogonal(0.01))(h)


class Critic(nn.Module):
    """The value: flatten, two ReLU layers, one number per observation."""

    hidden: int = 64

    @nn.compact
    def __call__(self, x: Any) -> Any:
        h = _torso(x, self.hidden)
        return jnp.squeeze(nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))(h), axis=-1)


@dataclass(frozen=True)
class PPOConfig:
    """The run's hyperparameters. ``updates``: PPO iterations of ``num_envs * num_steps`` env steps each."""

    updates: int = 100
    num_envs: int = 64
    num_steps: int = 128
    epochs: int = 4
    minibatches: int = 4
    lr: float = 5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.1
    max_grad_norm: float = 0.5
    hidden: int = 64
    entropy_in_loss: bool = True
    seed: int = 0

    @property
    def steps_per_update(self) -> int:
        return self.num_envs * self.num_steps


class Transition(NamedTuple):
    obs: Any
    action: Any
    reward: Any
    done: Any
    value: Any
    log_prob: Any
    ep_return: Any  # the episode's return so far, this step's reward included


class Runner(NamedTuple):
    actor: Any
    critic: Any
    actor_opt: Any
    critic_opt: Any
    env_state: Any
    obs: Any
    key: Any
    update: Any
    ep_return: Any  # [num_envs] running return of each env's episode


def _entropy(logits: Any) -> Any:
    logp = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(logp) * logp, axis=-1)


def policy_loss(logits: Any, old_log_prob: Any, adv: Any, action: Any, clip_eps: float) -> Any:
    """PPO's clipped surrogate (to minimise)."""
    logp = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
    ratio = jnp.exp(logp - old_log_prob)
    return -jnp.mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * adv))


def ppo_loss(logits: Any, old_log_prob: Any, adv: Any, action: Any, clip_eps: float, ent_coef: float) -> Any:
    """The surrogate minus the entropy bonus: the loss the seed meant to differentiate."""
    return policy_loss(logits, old_log_prob, adv, action, clip_eps) - ent_coef * jnp.mean(_entropy(logits))


def advantages(traj: Transition, last_value: Any, gamma: float, lam: float) -> tuple[Any, Any]:
    """GAE(lambda) advantages [T, N] and the value targets (advantage + value), scanned backwards over the steps."""

    def back(carry: tuple[Any, Any], t: Transition) -> tuple[tuple[Any, Any], Any]:
        gae, next_value = carry
        nonterminal = 1.0 - t.done
        delta = t.reward + gamma * next_value * nonterminal - t.value
        gae = delta + gamma * lam * nonterminal * gae
        return (gae, t.value), gae

    _, adv = jax.lax.scan(back, (jnp.zeros_like(last_value), last_value), traj, reverse=True)
    return adv, adv + traj.value


def make_train(cfg: PPOConfig, callback: Any = None) -> Any:
    """``train(key) -> (actor_params, critic_params, metrics)``, to be ``jax.jit``-ed whole. ``metrics``: per update
    ``entropy`` (mean over the batch, nats), ``value_loss``, ``returns`` (mean return of the episodes that ended in
    it, NaN when none did)."""
    env, env_params = gymnax.make("Breakout-MinAtar")
    n_actions = int(env.action_space(env_params).n)
    actor, critic = Actor(n_actions, cfg.hidden), Critic(cfg.hidden)
    tx = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(cfg.lr, eps=1e-5))
    batch = cfg.num_envs * cfg.num_steps
    mb = batch // cfg.minibatches

    def forward(actor_p: Any, critic_p: Any, obs: Any) -> tuple[Any, Any]:
        x = obs.reshape((-1, *OBS_SHAPE))
        return actor.apply({"params": actor_p}, x), critic.apply({"params": critic_p}, x)

    def env_step(r: Runner, _: Any) -> tuple[Runner, Transition]:
        key, k_act, k_env = jax.random.split(r.key, 3)
        logits, value = forward(r.actor, r.critic, r.obs)
        action = jax.random.categorical(k_act, logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
        keys = jax.random.split(k_env, cfg.num_envs)
        obs, env_state, reward, terminated, truncated, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            keys, r.env_state, action, env_params)
        done = jnp.logical_or(terminated, truncated).astype(jnp.float32)  # (PureJaxRL's: a time limit ends it too)
        reward = reward.astype(jnp.float32)
        ep = r.ep_return + reward
        t = Transition(r.obs, action, reward, done, value, log_prob, ep)
        return r._replace(env_state=env_state, obs=obs, key=key, ep_return=jnp.where(done, 0.0, ep)), t

    def actor_loss(actor_p: Any, obs: Any, action: Any, old_log_prob: Any, adv: Any, bonus: bool) -> tuple[Any, Any]:
        logits = actor.apply({"params": actor_p}, obs.reshape((-1, *OBS_SHAPE)))
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        if bonus:  # (a Python bool: each branch of the minibatch's lax.cond traces one of them)
            loss = ppo_loss(logits, old_log_prob, adv, action, cfg.clip_eps, cfg.ent_coef)
        else:  # the seed's bug: the entropy bonus is computed elsewhere, but never differentiated
            loss = policy_loss(logits, old_log_prob, adv, action, cfg.clip_eps)
        return loss, jnp.mean(_entropy(logits))

    def critic_loss(critic_p: Any, obs: Any, target: Any) -> Any:
        v = critic.apply({"params": critic_p}, obs.reshape((-1, *OBS_SHAPE)))
        return 0.5 * jnp.mean((v - target) ** 2)

    def update(r: Runner, bonus: Any) -> tuple[Runner, dict]:
        r, traj = jax.lax.scan(env_step, r, None, length=cfg.num_steps)
        _, last_value = forward(r.actor, r.critic, r.obs)
        adv, target = advantages(traj, last_value, cfg.gamma, cfg.gae_lambda)
        flat = jax.tree_util.tree_map(lambda a: a.reshape((batch, *a.shape[2:])),
                                      (traj.obs, traj.action, traj.log_prob, adv, target))

        def epoch(carry: tuple, _: Any) -> tuple[tuple, Any]:
            actor_p, critic_p, a_opt, c_opt, key = carry
            key, k = jax.random.split(key)
            perm = jax.random.permutation(k, batch)
            shuffled = jax.tree_util.tree_map(lambda a: a[perm].reshape((cfg.minibatches, mb, *a.shape[1:])), flat)

            def minibatch(c: tuple, b: tuple) -> tuple[tuple, Any]:
                ap, cp, ao, co = c
                obs, action, old_lp, a, tgt = b
                grads = [lambda f=f: jax.value_and_grad(actor_loss, has_aux=True)(ap, obs, action, old_lp, a, f)
                         for f in (False, True)]
                (_, ent), ga = (grads[bonus]() if isinstance(bonus, bool)
                                else jax.lax.cond(bonus, grads[1], grads[0]))
                vl, gc = jax.value_and_grad(critic_loss)(cp, obs, tgt)
                ua, ao = tx.update(ga, ao, ap)
                uc, co = tx.update(gc, co, cp)
                return (optax.apply_updates(ap, ua), optax.apply_updates(cp, uc), ao, co), (ent, vl)

            (actor_p, critic_p, a_opt, c_opt), stats = jax.lax.scan(minibatch, (actor_p, critic_p, a_opt, c_opt),
                                                                    shuffled)
            return (actor_p, critic_p, a_opt, c_opt, key), stats

        key, k = jax.random.split(r.key)
        (actor_p, critic_p, a_opt, c_opt, _), (ent, vl) = jax.lax.scan(
            epoch, (r.actor, r.critic, r.actor_opt, r.critic_opt, k), None, length=cfg.epochs)
        step = r.update + 1
        r = r._replace(actor=actor_p, critic=critic_p, actor_opt=a_opt, critic_opt=c_opt, key=key, update=step)
        if callback is not None:
            callback(step, actor_p, critic_p)
        ended = jnp.sum(traj.done)
        mean_return = jnp.where(ended > 0, jnp.sum(traj.ep_return * traj.done) / jnp.maximum(ended, 1), jnp.nan)
        return r, {"entropy": jnp.mean(ent), "value_loss": jnp.mean(vl), "returns": mean_return}

    def train(key: Any, entropy_in_loss: Any = None) -> tuple[Any, Any, dict]:
        bonus = cfg.entropy_in_loss if entropy_in_loss is None else entropy_in_loss
        key, ka, kc, kr = jax.random.split(key, 4)
        obs0 = jnp.zeros((1, *OBS_SHAPE))
        actor_p = actor.init(ka, obs0)["params"]
        critic_p = critic.init(kc, obs0)["params"]
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(kr, cfg.num_envs), env_params)
        r = Runner(actor_p, critic_p, tx.init(actor_p), tx.init(critic_p), env_state, obs, key,
                   jnp.asarray(0, jnp.int32), jnp.zeros(cfg.num_envs))
        r, metrics = jax.lax.scan(lambda c, _: update(c, bonus), r, None, length=cfg.updates)
        return r.actor, r.critic, metrics

    return train
