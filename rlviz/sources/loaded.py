"""What every source builds and checks, in one neutral place: :class:`LoadedAgent` (a policy with the recipe of its
env) and the checks each loader runs at load (:func:`check_forward`, :func:`settle_kind`), with the env facts they
need (:func:`coerce_recipe`, :func:`env_facts`). The per-format readers (``.pt2``, SB3, CleanRL, the Hub) import
these; none imports another reader for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..agent.actions import action_spec
from ..agent.policy import Policy, action_names_for
from ..envs.env_facts import body_action_names
from ..envs.probe import probe_env
from ..envs.recipe import EnvRecipe, read_recipe_file
from ..errors import CheckpointError, RlvizError, UsageError
from .meet import shape_mismatch

__all__ = ["LoadedAgent", "coerce_recipe", "env_facts", "settle_kind", "check_forward"]


@dataclass(frozen=True)
class LoadedAgent:
    """A policy ready to run, with what is needed to rebuild its env.

    policy: :class:`Policy` (forward: float32 obs [B, *obs_shape] -> logits [B, A], value [B] | None);
    recipe: the env it was trained on; action_names: A strings; gamma: discount for returns-to-go;
    kind: "actor_critic" | "logits" | "q"; metadata: user/training info (JSON types);
    path: the file; format: "rlviz" | "torch-export" | "torch-state-dict" | "torch-pickle" | "sb3-zip".
    """

    policy: Policy
    recipe: EnvRecipe
    action_names: tuple
    gamma: float
    kind: str
    metadata: dict = field(default_factory=dict)
    path: Path | None = None
    format: str = "rlviz"


def coerce_recipe(env, trusted: bool = False) -> EnvRecipe:
    """The caller's ``env`` (an id or a recipe: their own choice, so no trust check) as a recipe; a recipe file's
    names pass the trust rule unless ``trusted`` (:func:`~rlviz.envs.recipe.read_recipe_file`)."""
    if isinstance(env, EnvRecipe):
        return env
    if isinstance(env, str) and env.endswith(".json"):  # a recipe file the user names (--env run/env-recipe.json)
        return read_recipe_file(env, trusted=trusted)
    if isinstance(env, str) and env:
        return EnvRecipe.for_env_id(env)
    raise UsageError(f"env={env!r}: expected an env id such as 'ALE/Breakout-v5' or an rlviz EnvRecipe.")


def env_facts(recipe: EnvRecipe):
    """(observation_space, action_space, action names) of one env built from ``recipe``."""
    with probe_env(recipe) as e:  # (inside a load or a job: the env its other looks use, rlviz.envs.probe)
        spec = action_spec(e.action_space)
        names = action_names_for(e, spec.size) if spec.kind == "discrete" else (
            (spec.kind == "box" and body_action_names(e, spec.size)) or spec.names())  # MuJoCo: its actuators
        return e.observation_space, e.action_space, names


def _zero_forward(policy: Policy, shape, heads: bool = False) -> Exception | None:
    """One forward on a zero observation of ``shape``: None when it runs, else what torch raised (an
    :class:`RlvizError` propagates)."""
    try:
        with torch.no_grad():
            x = policy.to_tensor(np.zeros((1, *shape), dtype=np.float32))
            policy.heads(x) if heads else policy.forward(x)
    except RlvizError:
        raise
    except Exception as exc:
        return exc
    return None


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def settle_kind(policy: Policy, observation_space, source: str | None = None) -> None:
    """Run one forward on a zero observation so a ``kind="auto"`` policy decides its kind (and A); with
    ``source``, a network that rejects the env's observation shape raises a one-line :class:`EnvError`."""
    shape = getattr(observation_space, "shape", None)
    exc = _zero_forward(policy, shape) if shape else None
    if exc is None:
        return
    if source is None:
        raise exc
    raise shape_mismatch(source, "the env", tuple(shape or ()), policy, exc) from None


def check_forward(policy: Policy, obs_shape, source: str) -> None:
    """One forward on a zero observation of ``obs_shape`` (one observation's, as the policy takes it) at load: a
    file that loads but cannot run (weights of the wrong shape or dtype, a corrupt program) fails here, in one
    line naming the file, not in the middle of a rollout. Policies with state or action masks are left to their
    own loaders."""
    if not policy.capabilities.plain:
        return
    exc = _zero_forward(policy, obs_shape, heads=True)
    if exc is not None:
        raise CheckpointError(
            f"{source} loads, but its network cannot run on an observation of shape {tuple(obs_shape)} "
            f"({type(exc).__name__}: {_first_line(exc)}); the file is corrupt, or was saved for another env."
        ) from None
