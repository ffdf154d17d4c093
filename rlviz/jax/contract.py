"""What the JAX engine's parts agree on: a policy (pure ``apply`` over one observation) and an env (pure
``reset`` / ``step``, params apart from state, as gymnax's). Both are plain objects holding pytrees; every
function named here is pure and traceable (``jax.jit``, ``jax.vmap``, ``jax.grad``), so the engine composes them in
one ``lax.scan``. Nothing here imports jax at module import: ``import rlviz`` never loads it.

Shapes are per single observation / env (unbatched); the engine vmaps.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

__all__ = ["PolicyOut", "JaxPolicy", "JaxEnv", "JAX_KINDS"]

#: what a policy's output means: "logits" (Categorical over A actions), "gaussian" (a Normal over D dims, ``squash``
#: when tanh-squashed), "q" (Q-values over A actions, greedy = argmax)
JAX_KINDS = ("logits", "gaussian", "q")


class PolicyOut(NamedTuple):
    """One observation's outputs (a pytree: ``None`` fields are empty subtrees and vmap/scan carry them as such).

    logits: float32 [A] (kind "logits"); mean, std: float32 [D] (kind "gaussian"); q: float32 [A] (kind "q");
    value:  float32 [] or None (an actor-critic's value estimate, or a separate critic's)
    """

    logits: Any = None
    mean: Any = None
    std: Any = None
    q: Any = None
    value: Any = None


@runtime_checkable
class JaxPolicy(Protocol):
    """A JAX policy: ``apply(params, obs) -> PolicyOut`` pure over ONE observation (float32 [*obs_shape]).

    kind: one of :data:`JAX_KINDS`; action_names: A strings (discrete) or D strings (continuous); squash: True when
    a Gaussian's samples go through tanh; params: the pytree ``apply`` takes (actor and critic together).
    Recurrent policies also have ``initial_carry() -> pytree`` and ``apply_recurrent(params, carry, obs, reset)
    -> (carry, PolicyOut)`` (``reset``: bool [] true at an episode's first step); ``recurrent`` says which.
    """

    kind: str
    action_names: tuple[str, ...]
    squash: bool
    recurrent: bool
    params: Any

    def apply(self, params: Any, obs: Any) -> PolicyOut: ...


@runtime_checkable
class JaxEnv(Protocol):
    """A JAX env of one family, gymnax-shaped: params apart from state, pure functions of (key, state, params).

    env_id: the id with its family prefix ("gymnax:Breakout-MinAtar"); family: "gymnax" | "craftax" | "brax" |
    "jumanji"; params: the env's params pytree; obs_shape: the observation's shape; obs_dtype; action_names: A
    strings (Discrete) or D (Box); discrete: bool; max_steps: the episode cap (truncation).

    reset(key, params) -> (obs, state); step(key, state, action, params) -> (obs, state, reward, terminated,
    truncated); objects(state) -> float32 [K, 2] (x, y) positions for the failure heatmap, or None when the family
    has none; frame(state) -> uint8 [H, W, 3], on the host (numpy), for the chosen episodes' videos;
    frames_from_observations(obs [L, ...]) -> uint8 [L, H, W, 3] or None (the family cannot draw its observations), for
    a training loop's batch that kept no states (:mod:`rlviz.jax_loop.recording`).
    """

    env_id: str
    family: str
    params: Any
    obs_shape: tuple[int, ...]
    action_names: tuple[str, ...]
    discrete: bool
    max_steps: int

    def reset(self, key: Any, params: Any) -> tuple[Any, Any]: ...

    def step(self, key: Any, state: Any, action: Any, params: Any) -> tuple[Any, Any, Any, Any, Any]: ...
