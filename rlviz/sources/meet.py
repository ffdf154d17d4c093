"""The loaded policy meets one of its env's observations before any rollout (:func:`meet_observation`): a network
that cannot take them (another env's network, ``--env`` naming the wrong game) fails at load, in one line naming
the file, the env, the shape the env gives and the shape the network takes, for every source alike (rlviz
``.pt2``, torch files, SB3 zips, CleanRL's torch and JAX files, rl-zoo3 folders, ``hf://`` ids), not as a raw torch
error in the middle of a rollout.

The observation is one the env's space can hold (seeded: the same one every time), put through the one door the
rollouts use (:class:`rlviz.agent.obs.ObsAdapter`: a Box as it is, other spaces flattened) and evaluated as the
rollout will evaluate it (:meth:`Policy.evaluate`). Nothing of the policy changes (no state, no RNG).
"""

from __future__ import annotations

import copy

from torch import nn

from ..agent.obs import ObsAdapter
from ..agent.policy import Policy
from ..envs.recipe import EnvRecipe
from ..errors import EnvError, RlvizError

__all__ = ["meet_observation", "network_input", "shape_mismatch"]


def network_input(policy: Policy) -> str | None:
    """What the network takes, as far as it says: an SB3 policy's observation space, an exported program's input
    shape, else its first layer's inputs (a Linear's features, a convolution's channels); None when it does not
    say."""
    module = getattr(policy, "module", None)
    shape = getattr(getattr(module, "observation_space", None), "shape", None)
    if shape:
        return f"shape {tuple(shape)}"
    meta = getattr(getattr(module, "graph", None), "meta", None)  # a .pt2 program read by rlviz: its input's sizes
    sizes = meta.get("sizes") if isinstance(meta, dict) else None
    if isinstance(sizes, list) and sizes and all(isinstance(d, dict) and "as_int" in d for d in sizes[1:]):
        return f"shape {tuple(int(d['as_int']) for d in sizes[1:])}"
    graph = getattr(getattr(module, "program", None), "graph", None)  # a program torch.export loaded
    for node in getattr(graph, "nodes", ()):
        if node.op == "placeholder":
            shape = getattr(node.meta.get("val"), "shape", None)
            try:
                return None if shape is None else f"shape {tuple(int(d) for d in tuple(shape)[1:])}"
            except (TypeError, ValueError):  # a symbolic size past the batch axis
                return None
    if isinstance(module, nn.Module):
        for layer in module.modules():
            if isinstance(layer, nn.Linear):
                return f"vectors of {layer.in_features} (its first layer's inputs)"
            if isinstance(layer, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
                return f"{layer.in_channels} channel(s) (its first convolution's inputs)"
    return None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def meet_observation(policy: Policy, observation_space, recipe: EnvRecipe, source: str) -> None:
    """One observation of ``observation_space`` through ``policy`` as a rollout gives it; a network that cannot take
    it raises one :class:`EnvError` line. Policies with state or action masks are left to their own loaders."""
    if observation_space is None or not policy.capabilities.plain:
        return
    space = copy.deepcopy(observation_space)  # (seeding it leaves the caller's space alone)
    space.seed(0)
    adapter = ObsAdapter(space, policy.capabilities.obs_format)  # (as the rollouts: a space none can take raises)
    given = adapter.batch([space.sample()])
    try:
        policy.evaluate(given)
    except RlvizError:
        raise
    except Exception as exc:
        raise shape_mismatch(source, f"env {recipe.env_id!r}", tuple(given.shape[1:]), policy, exc,
                             type(space).__name__ if adapter.flat else None) from None


def shape_mismatch(source: str, env: str, shape: tuple, policy: Policy, exc: BaseException,
                   flattened: str | None = None) -> EnvError:
    """The one line for a network that cannot take the observations of ``env`` ("env 'CartPole-v1'") of ``shape`` (``flattened``: the space
    they were flattened from): the file, both shapes, what torch said, what to do."""
    flat = f" ({flattened} space, flattened)" if flattened else ""
    return EnvError(
        f"{source}: its network cannot take the observations of {env}: the env gives shape {tuple(shape)}{flat}, the "
        f"network takes {network_input(policy) or 'another shape'} ({type(exc).__name__}: {_first_line(exc)}); "
        "pass the env (--env) and preprocessing it was trained on.")
