"""A flax (linen) module and its parameters as a :class:`~rlviz.jax.contract.JaxPolicy`: ``apply(params, obs)`` pure
over ONE observation, returning a :class:`~rlviz.jax.contract.PolicyOut`.

The module's output is understood as PureJaxRL, rejax and hand-written agents write it:

* raw logits ``[B, A]`` (kind "logits"), or Q-values (kind "q": given explicitly, since the two look alike);
* a distrax / tfp distribution: Categorical -> logits; Normal / MultivariateNormalDiag -> mean, std; a
  tanh-squashed ``Transformed`` -> mean, std and ``squash=True``; ``Independent`` wrappers are looked through;
* a tuple ``(pi, value)`` (PureJaxRL's ActorCritic), or a separate ``critic`` module (its value from
  ``critic.apply(critic_params, obs)``: the seed's shape);
* recurrent (PureJaxRL ``ppo_rnn``): ``apply(params, hidden, (obs, dones)) -> (hidden, pi, value)`` with
  ``recurrent=True`` and ``initial_carry`` (the hidden state of a batch of one, or a function returning it).

The module is called on a batch of one (``obs[None]``, or ``obs.reshape((1, *obs_reshape))``) and its outputs'
batch axis dropped, so modules that flatten with ``x.reshape((x.shape[0], -1))`` work. The kind is found by
tracing once (:func:`jax.eval_shape`) on a zero observation of ``obs_shape``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from .._deprecated import old_keywords
from ..errors import UsageError
from .contract import JAX_KINDS, PolicyOut

__all__ = ["policy_key", "FlaxPolicy", "FlaxPolicyOptions", "as_variables", "interpret_output"]


@dataclass(frozen=True, eq=False)
class FlaxPolicyOptions:
    """How a :class:`FlaxPolicy` reads its module (all optional).

    kind: "logits" | "gaussian" | "q" (None: found by tracing; give "q" for a DQN's Q-values);
    action_names: A (or D) strings; obs_reshape: the per-observation shape the module expects (a leading -1 is
    dropped); obs_shape: the env's observation shape (for tracing; taken from ``obs_reshape`` when not given);
    recurrent, initial_carry: a ``ppo_rnn``-shaped module and the hidden state of a batch of one (or a function
    returning it); method: the module's method giving the distribution (default ``__call__``; ``_action_dist`` for
    rejax's policies, found by itself).
    """

    kind: str | None = None
    action_names: Sequence[str] | None = None
    obs_reshape: Sequence[int] | None = None
    obs_shape: Sequence[int] | None = None
    recurrent: bool = False
    initial_carry: Any = None
    method: str | None = None


#: FlaxPolicy's keyword arguments of its first form, now FlaxPolicyOptions' fields
_OPTION_NAMES = tuple(f.name for f in fields(FlaxPolicyOptions))


def _fold_flax_options(args: tuple, kwargs: dict, old: dict) -> tuple:
    """``FlaxPolicy(..., kind=..., obs_shape=...)`` -> ``options=FlaxPolicyOptions(kind=..., obs_shape=...)``."""
    options = kwargs.get("options")
    kwargs["options"] = replace(options if isinstance(options, FlaxPolicyOptions) else FlaxPolicyOptions(), **old)
    return args

_VARIABLE_COLLECTIONS = {"params", "batch_stats", "constants", "cache"}


def as_variables(params: Any) -> Any:
    """``params`` as a flax variables dict: ``{"params": ...}`` (and other collections) kept, a bare params tree
    wrapped (the seed's ``actor.apply({'params': actor_params}, ...)``)."""
    if hasattr(params, "keys") and "params" in params.keys() and set(params.keys()) <= _VARIABLE_COLLECTIONS:
        return params
    return {"params": params}


def _same(obj: Any) -> Any:
    """``obj`` itself when hashable (flax modules are frozen dataclasses: two built with the same fields compute the
    same function), else its id."""
    try:
        hash(obj)
    except TypeError:
        return ("id", id(obj))
    return obj


def policy_key(policy: Any) -> tuple:
    """What a policy's compiled functions depend on, its params aside (they are the functions' argument): its
    module and critic (equal modules: equal keys, so the checkpoints of one run share what was compiled for the
    first), method, observation shapes, kind and squash; a recurrent policy's initial carry by identity."""
    return (_same(getattr(policy, "module", policy)), _same(getattr(policy, "critic", None)),
            getattr(policy, "method", None), getattr(policy, "obs_reshape", None), getattr(policy, "obs_shape", None),
            getattr(policy, "kind", None), getattr(policy, "squash", None),
            id(getattr(policy, "_carry", None)) if getattr(policy, "recurrent", False) else None)


def _first(x: Any) -> Any:
    """The one row of a batch of one (a scalar output stays as it is)."""
    return x[0] if getattr(x, "ndim", 0) >= 1 else x


def _is_tanh(bijector: Any) -> bool:
    name = type(bijector).__name__.lower()
    return "tanh" in name or "tanh" in str(getattr(bijector, "name", "")).lower()


def interpret_output(pi: Any, q: bool = False, batch_dims: int = 1) -> tuple[PolicyOut, str, bool]:
    """(PolicyOut without value, kind, squash) of one policy output ``pi`` over a batch of one (``batch_dims``
    leading axes of size 1 are dropped). ``q``: raw arrays are Q-values."""
    import jax.numpy as jnp

    def row(x: Any) -> Any:
        x = jnp.asarray(x, jnp.float32)
        for _ in range(batch_dims):
            x = _first(x)
        return x

    squash = False
    for _ in range(4):  # look through Independent / Transformed wrappers
        if hasattr(pi, "bijector") and hasattr(pi, "distribution") and getattr(pi, "loc", None) is None:
            # (distrax's MultivariateNormalDiag is itself a Transformed with a loc: read as it is)
            squash = squash or _is_tanh(pi.bijector)
            pi = pi.distribution
        elif type(pi).__name__ == "Independent" and hasattr(pi, "distribution"):
            pi = pi.distribution
        else:
            break
    if hasattr(pi, "logits") and hasattr(pi, "sample"):  # Categorical (distrax, tfp)
        logits = pi.logits
        if logits is None:
            logits = jnp.log(pi.probs)
        return PolicyOut(logits=row(logits)), "logits", False
    if hasattr(pi, "sample") and (hasattr(pi, "loc") or hasattr(pi, "mean")):  # Normal, MultivariateNormalDiag
        mean = pi.loc if getattr(pi, "loc", None) is not None else pi.mean()
        std = pi.stddev() if hasattr(pi, "stddev") else pi.scale
        return PolicyOut(mean=row(mean), std=row(std)), "gaussian", squash
    if hasattr(pi, "shape") and hasattr(pi, "dtype"):
        return (PolicyOut(q=row(pi)), "q", False) if q else (PolicyOut(logits=row(pi)), "logits", False)
    raise UsageError(f"The module returned a {type(pi).__name__}; expected logits, Q-values, a distrax/tfp "
                     "distribution (Categorical, Normal, MultivariateNormalDiag, tanh-Transformed) or (pi, value).")


class FlaxPolicy:
    """A flax module (+ optional separate critic) as a :class:`~rlviz.jax.contract.JaxPolicy`.

    module, params: the actor (or actor-critic) and its parameters (a bare params tree or ``{"params": ...}``);
    critic, critic_params: a separate value network; options: a :class:`FlaxPolicyOptions` (kind, action_names,
    obs_reshape, obs_shape, recurrent, initial_carry, method). ``FlaxPolicy(m, p, obs_shape=(4,))``, the first
    form, still works (a DeprecationWarning).
    """

    @old_keywords(_OPTION_NAMES, _fold_flax_options, "options=FlaxPolicyOptions(...)", release="0.6.dev (#56)",
                  until="0.7")
    def __init__(self, module: Any, params: Any, *, critic: Any = None, critic_params: Any = None,
                 options: FlaxPolicyOptions | None = None):
        options = options if options is not None else FlaxPolicyOptions()
        if not isinstance(options, FlaxPolicyOptions):
            raise UsageError(f"options={options!r}: expected a rlviz.jax.FlaxPolicyOptions or None.")
        kind, action_names, obs_reshape, obs_shape = options.kind, options.action_names, options.obs_reshape, \
            options.obs_shape
        recurrent, initial_carry, method = options.recurrent, options.initial_carry, options.method
        if kind is not None and kind not in JAX_KINDS:
            raise UsageError(f"kind={kind!r}; expected one of {', '.join(JAX_KINDS)} (or None to detect it).")
        if (critic is None) != (critic_params is None):
            raise UsageError("critic and critic_params go together: give both (a separate value network) or neither.")
        if recurrent and initial_carry is None:
            raise UsageError("recurrent=True needs initial_carry (the hidden state of a batch of one, e.g. "
                             "ScannedRNN.initialize_carry(1, 128), or a function returning it).")
        self.module, self.critic = module, critic
        if method is None and callable(getattr(type(module), "_action_dist", None)):
            method = "_action_dist"  # rejax's policies: __call__(obs, rng) samples; _action_dist(obs) is the distribution
        self.method = method
        self.obs_reshape = None if obs_reshape is None else tuple(int(d) for d in obs_reshape if int(d) != -1)
        self.obs_shape = tuple(int(d) for d in obs_shape) if obs_shape is not None else self.obs_reshape
        self.recurrent = bool(recurrent)
        self._carry = initial_carry
        actor = as_variables(params)
        self.params: Any = {"actor": actor, "critic": as_variables(critic_params)} if critic is not None else actor
        self._given_kind = kind
        self.squash = False
        self.kind = kind or "logits"
        self.action_size: int | None = None
        if self.obs_shape is not None:
            self._trace()
        elif kind is None:
            raise UsageError("FlaxPolicy needs obs_shape= (or obs_reshape=) to find what the module outputs by "
                             "tracing it once, or kind= ('logits', 'gaussian' or 'q').")
        self.action_names: tuple[str, ...] = tuple(action_names) if action_names is not None else tuple(
            str(i) for i in range(self.action_size or 0))

    # -- tracing ---------------------------------------------------------------------------------------------
    def _trace(self) -> None:
        import jax
        import jax.numpy as jnp

        obs = jax.ShapeDtypeStruct(tuple(self.obs_shape or ()), jnp.float32)
        seen: dict[str, Any] = {}

        def probe(params: Any, o: Any) -> PolicyOut:
            if self.recurrent:
                _, out = self._recurrent(params, self.initial_carry(), o, jnp.asarray(False), seen)
            else:
                out = self._apply(params, o, seen)
            return out

        try:
            shapes = jax.eval_shape(probe, self.params, obs)
        except UsageError:
            raise
        except Exception as exc:
            raise UsageError(f"{type(self.module).__name__}.apply on one observation of shape {tuple(obs.shape)} "
                             f"failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                             "check --model-kwargs, obs_reshape and that the params belong to this class.") from None
        self.kind, self.squash = seen["kind"], seen["squash"]
        head = shapes.logits if self.kind == "logits" else shapes.q if self.kind == "q" else shapes.mean
        self.action_size = int(head.shape[-1]) if head.shape else 1

    # -- the contract ----------------------------------------------------------------------------------------
    def _batch(self, obs: Any) -> Any:
        import jax.numpy as jnp

        x = jnp.asarray(obs, jnp.float32)
        return x.reshape((1, *self.obs_reshape)) if self.obs_reshape is not None else x[None]

    def _value(self, params: Any, x: Any) -> Any:
        import jax.numpy as jnp

        v = self.critic.apply(params["critic"], x)
        if isinstance(v, (tuple, list)):  # a critic returning (value, ...)
            v = v[-1] if len(v) and not hasattr(v[0], "shape") else v[0]
        return jnp.asarray(v, jnp.float32).reshape(-1)[0]

    def _finish(self, pi: Any, value: Any, seen: dict | None, batch_dims: int = 1) -> PolicyOut:
        import jax.numpy as jnp

        out, kind, squash = interpret_output(pi, q=self._given_kind == "q", batch_dims=batch_dims)
        squash = squash or "Squashed" in type(self.module).__name__  # rejax's SquashedGaussianPolicy
        if self._given_kind is not None and kind != self._given_kind:
            raise UsageError(f"kind={self._given_kind!r} but the module's output reads as {kind!r}.")
        if seen is not None:
            seen.update(kind=kind, squash=squash)
        if value is not None:
            out = out._replace(value=jnp.asarray(value, jnp.float32).reshape(-1)[0])
        return out

    def _apply(self, params: Any, obs: Any, seen: dict | None = None) -> PolicyOut:
        x = self._batch(obs)
        actor = params["actor"] if self.critic is not None else params
        raw = self.module.apply(actor, x, method=self.method) if self.method else self.module.apply(actor, x)
        value = None
        if isinstance(raw, (tuple, list)):
            if len(raw) != 2:
                raise UsageError(f"The module returned a {len(raw)}-tuple; expected (pi, value).")
            raw, value = raw
        if self.critic is not None:
            value = self._value(params, x)
        return self._finish(raw, value, seen)

    def apply(self, params: Any, obs: Any) -> PolicyOut:
        """PolicyOut of one observation ``obs`` [*obs_shape] (pure, traceable)."""
        if self.recurrent:
            raise UsageError("A recurrent FlaxPolicy steps with apply_recurrent(params, carry, obs, reset).")
        return self._apply(params, obs)

    # -- recurrent (PureJaxRL ppo_rnn) ---------------------------------------------------------------------
    def initial_carry(self) -> Any:
        """The hidden state before an episode's first step (a batch of one)."""
        c = self._carry
        return c() if isinstance(c, Callable) else c  # type: ignore[arg-type]

    def _recurrent(self, params: Any, carry: Any, obs: Any, reset: Any, seen: dict | None) -> tuple[Any, PolicyOut]:
        import jax.numpy as jnp

        x = self._batch(obs)[None]  # [T=1, B=1, *obs]
        dones = jnp.asarray(reset, bool).reshape(1, 1)
        actor = params["actor"] if self.critic is not None else params
        raw = self.module.apply(actor, carry, (x, dones))
        if not isinstance(raw, (tuple, list)) or len(raw) not in (2, 3):
            raise UsageError("A recurrent module returns (hidden, pi, value) or (hidden, pi), as PureJaxRL's "
                             f"ppo_rnn; received a {type(raw).__name__}.")
        carry, pi = raw[0], raw[1]
        value = raw[2] if len(raw) == 3 else None
        if self.critic is not None:
            value = self._value(params, x[0])
        return carry, self._finish(pi, value, seen, batch_dims=2)

    def apply_recurrent(self, params: Any, carry: Any, obs: Any, reset: Any) -> tuple[Any, PolicyOut]:
        """(carry, PolicyOut) of one step: ``reset`` true at an episode's first step (the module clears its
        hidden state there, as ``ppo_rnn``'s ScannedRNN does on ``dones``)."""
        return self._recurrent(params, carry, obs, reset, None)

    def __repr__(self) -> str:
        critic = f" + {type(self.critic).__name__}" if self.critic is not None else ""
        return f"FlaxPolicy({type(self.module).__name__}{critic}, kind={self.kind!r}, actions={self.action_size})"
