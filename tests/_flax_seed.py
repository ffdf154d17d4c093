"""Flax agents shaped as the JAX workflows rlviz reads write them, for the JAX tests (importable by others):
the seed's separate MLP actor and critic (observations reshaped to ``(-1, 10, 10, 4)``, gymnax Breakout-MinAtar),
PureJaxRL's ``ActorCritic`` returning ``(distrax.Categorical, value)``, a Gaussian / tanh-squashed actor, a DQN
Q-network and PureJaxRL ``ppo_rnn``'s recurrent ActorCriticRNN (``apply(params, hidden, (obs, dones))``)."""

from __future__ import annotations

import functools

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


class SeedActor(nn.Module):
    """The seed's actor: an MLP on the flattened (10, 10, 4) MinAtar observation -> logits."""

    action_dim: int = 3
    hidden: int = 64

    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(self.hidden)(x))
        x = nn.relu(nn.Dense(self.hidden)(x))
        return nn.Dense(self.action_dim)(x)


class SeedCritic(nn.Module):
    """The seed's critic: an MLP -> one value per observation."""

    hidden: int = 64

    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(self.hidden)(x))
        x = nn.relu(nn.Dense(self.hidden)(x))
        return jnp.squeeze(nn.Dense(1)(x), axis=-1)


class ActorCritic(nn.Module):
    """PureJaxRL's discrete ActorCritic: (distrax.Categorical, value)."""

    action_dim: int = 3

    @nn.compact
    def __call__(self, x):
        a = nn.tanh(nn.Dense(32)(x))
        pi = distrax.Categorical(logits=nn.Dense(self.action_dim)(a))
        c = nn.tanh(nn.Dense(32)(x))
        return pi, jnp.squeeze(nn.Dense(1)(c), axis=-1)


class GaussianActor(nn.Module):
    """A continuous actor: Normal (``diag=True``: MultivariateNormalDiag; ``tanh=True``: tanh-Transformed)."""

    action_dim: int = 2
    diag: bool = False
    tanh: bool = False

    @nn.compact
    def __call__(self, x):
        h = nn.tanh(nn.Dense(32)(x))
        mean = nn.Dense(self.action_dim)(h)
        log_std = self.param("log_std", nn.initializers.constant(-0.5), (self.action_dim,))
        std = jnp.broadcast_to(jnp.exp(log_std), mean.shape)
        if self.diag:
            return distrax.MultivariateNormalDiag(mean, std)
        if self.tanh:
            return distrax.Transformed(distrax.MultivariateNormalDiag(mean, std), distrax.Block(distrax.Tanh(), 1))
        return distrax.Normal(mean, std)


class QNetwork(nn.Module):
    """A DQN Q-network: raw Q-values (kind "q" given explicitly)."""

    action_dim: int = 3

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.action_dim)(nn.relu(nn.Dense(32)(x)))


class ScannedRNN(nn.Module):
    """PureJaxRL ppo_rnn's GRU scanned over time, its hidden state reset where ``dones``."""

    @functools.partial(nn.scan, variable_broadcast="params", in_axes=0, out_axes=0, split_rngs={"params": False})
    @nn.compact
    def __call__(self, carry, x):
        rnn_state = carry
        ins, resets = x
        rnn_state = jnp.where(resets[:, np.newaxis], self.initialize_carry(ins.shape[0], ins.shape[1]), rnn_state)
        new_rnn_state, y = nn.GRUCell(features=ins.shape[1])(rnn_state, ins)
        return new_rnn_state, y

    @staticmethod
    def initialize_carry(batch_size, hidden_size):
        cell = nn.GRUCell(features=hidden_size)
        return cell.initialize_carry(jax.random.PRNGKey(0), (batch_size, hidden_size))


class ActorCriticRNN(nn.Module):
    """PureJaxRL ppo_rnn's ActorCriticRNN: apply(params, hidden, (obs, dones)) -> (hidden, pi, value)."""

    action_dim: int = 3
    hidden: int = 16

    @nn.compact
    def __call__(self, hidden, x):
        obs, dones = x
        embedding = nn.relu(nn.Dense(self.hidden)(obs))
        hidden, embedding = ScannedRNN()(hidden, (embedding, dones))
        pi = distrax.Categorical(logits=nn.Dense(self.action_dim)(embedding))
        return hidden, pi, jnp.squeeze(nn.Dense(1)(embedding), axis=-1)


def seed_params(seed: int = 0, action_dim: int = 3) -> dict:
    """{"actor": ..., "critic": ...} of a freshly initialised seed agent (bare params trees, as the seed keeps them)."""
    obs = jnp.zeros((1, 10, 10, 4))
    ka, kc = jax.random.split(jax.random.PRNGKey(seed))
    return {"actor": SeedActor(action_dim).init(ka, obs)["params"], "critic": SeedCritic().init(kc, obs)["params"]}
