"""Action spaces rlviz understands, described once: :class:`ActionSpec` and the one action sampler.

* ``Discrete(n)``: a categorical over n actions (bars: n).
* ``MultiDiscrete(nvec)``: one categorical per part (bars: sum(nvec), one group per part).
* ``MultiBinary(n)``: one Bernoulli per part, drawn as a group of two bars (0, 1) per part.
* ``Box(low, high, (D,))``: a Gaussian (mean, std per dimension; optionally tanh-squashed into
  [low, high]) or a deterministic actor (the action only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from .capabilities import capabilities_of

__all__ = ["ActionSpec", "action_spec", "check_policy_actions", "sample_actions", "to_env_action", "ACTION_KINDS",
           "relative_entropy", "policy_entropy"]

ACTION_KINDS = ("discrete", "multi_discrete", "multi_binary", "box")


@dataclass(frozen=True)
class ActionSpec:
    """kind: one of :data:`ACTION_KINDS`; shape: an env action's shape (() for Discrete);
    nvec: the parts' sizes (Discrete: (n,), MultiBinary: (2,)*n) or None for Box;
    low, high: float32 [D] bounds of a Box (may be infinite), else None."""

    kind: str
    shape: tuple
    nvec: tuple | None = None
    low: np.ndarray | None = None
    high: np.ndarray | None = None

    @property
    def continuous(self) -> bool:
        return self.kind == "box"

    @property
    def size(self) -> int:
        """Bars of the panel (sum of nvec), or D for a Box."""
        return int(sum(self.nvec)) if self.nvec is not None else int(np.prod(self.shape, dtype=np.int64))

    def names(self, discrete_names: Sequence[str] | None = None) -> tuple:
        """One label per bar (per dimension for a Box)."""
        if self.kind == "discrete":
            return tuple(discrete_names) if discrete_names is not None else tuple(str(i) for i in range(self.size))
        if self.kind == "box":
            return tuple(f"a{d}" for d in range(self.size))
        return tuple(f"{g}:{i}" for g, n in enumerate(self.nvec or ()) for i in range(n))

    def bar_indices(self, action) -> tuple:
        """The bars of the chosen action (one per part)."""
        if self.kind == "box" or action is None:
            return ()
        a = np.asarray(action, dtype=np.int64).reshape(-1)
        offsets = np.concatenate([[0], np.cumsum(self.nvec or ())[:-1]])
        return tuple(int(o + x) for o, x in zip(offsets, a))


def action_spec(space) -> ActionSpec:
    """The :class:`ActionSpec` of a gymnasium action space; a clear error for the ones rlviz cannot draw."""
    import gymnasium as gym

    S = gym.spaces
    if isinstance(space, S.Discrete):
        if int(space.start) != 0:
            raise UsageError(f"Discrete action space with start={space.start}: rlviz expects actions 0..n-1.")
        return ActionSpec("discrete", (), (int(space.n),))
    if isinstance(space, S.MultiDiscrete):
        if np.any(np.asarray(space.start) != 0) or np.asarray(space.nvec).ndim != 1:
            raise UsageError(f"MultiDiscrete action space {space}: rlviz expects a 1-D nvec starting at 0.")
        return ActionSpec("multi_discrete", tuple(space.shape), tuple(int(n) for n in space.nvec))
    if isinstance(space, S.MultiBinary):
        n = int(np.prod(space.shape))
        return ActionSpec("multi_binary", tuple(space.shape), (2,) * n)
    if isinstance(space, S.Box) and np.issubdtype(space.dtype, np.floating):
        if len(space.shape) != 1:
            raise UsageError(f"Box action space of shape {space.shape}: rlviz draws 1-D Box actions [D].")
        return ActionSpec("box", tuple(space.shape), None, np.asarray(space.low, np.float32),
                          np.asarray(space.high, np.float32))
    raise UsageError(
        f"The env's action space is {space}; rlviz draws Discrete, MultiDiscrete, MultiBinary and 1-D float Box "
        "actions. Wrap the env with an ActionWrapper that maps to one of these."
    )


def check_policy_actions(policy, space) -> ActionSpec:
    """The env's ActionSpec, after checking ``policy`` (an rlviz Policy) was made for that kind of action."""
    spec = action_spec(space)
    mine = capabilities_of(policy).action_spec
    if spec.kind == "discrete":
        if mine is not None and mine.kind != "discrete":
            raise UsageError(f"The policy was made for {mine.kind} actions but the env's action space is {space}.")
        n = int(policy.num_actions)
        if n > 0 and n != spec.size:
            raise UsageError(f"The policy has {n} actions but the env's action space is Discrete({spec.size}).")
    elif mine is None or mine.kind != spec.kind:
        raise UsageError(
            f"The env's action space is {space} but the policy was made for "
            f"{'discrete' if mine is None else mine.kind} actions; build it with action_space=env.action_space "
            "(e.g. TorchPolicy(module, action_space=env.action_space)) or pass the module itself."
        )
    return spec


def to_env_action(action, spec: ActionSpec | None):
    """One row of :func:`sample_actions` as the env takes it (an int for Discrete)."""
    if spec is None or spec.kind == "discrete":
        return int(np.asarray(action).reshape(-1)[0])
    if spec.kind == "box":
        return np.asarray(action, dtype=np.float32).reshape(spec.shape)
    return np.asarray(action, dtype=np.int64).reshape(spec.shape)


def relative_entropy(probs: np.ndarray) -> np.ndarray:
    """Policy entropy divided by ``ln |A|``: 0 = deterministic, 1 = uniform. probs: [..., A] -> [...]."""
    p = np.asarray(probs, dtype=np.float64)
    n = p.shape[-1]
    if n < 2:
        return np.zeros(p.shape[:-1], dtype=np.float32)
    h = -np.sum(np.where(p > 0, p * np.log(np.clip(p, 1e-30, None)), 0.0), axis=-1)
    return (h / np.log(n)).astype(np.float32)


def policy_entropy(probs, nvec=None, mean=None, std=None) -> np.ndarray:
    """The entropy :attr:`PolicyOutput.entropy` documents, from arrays (also used for recorded episodes)."""
    if mean is not None:
        if std is None:
            return np.full(np.shape(mean)[0], np.nan, dtype=np.float32)
        s = np.asarray(std, dtype=np.float64)
        return np.sum(0.5 * np.log(2.0 * np.pi * np.e * np.maximum(s, 1e-30) ** 2), axis=-1).astype(np.float32)
    if nvec is None:
        return relative_entropy(probs)
    p = np.asarray(probs)
    bounds = np.cumsum((0,) + tuple(nvec))
    parts = [relative_entropy(p[..., a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    return np.mean(parts, axis=0).astype(np.float32)


def noise_draw(out, greedy: bool = False) -> tuple[str, int] | None:
    """What :func:`sample_actions` draws per row for ``out`` (a PolicyOutput): ("uniform", k) or ("normal", k)
    floats from the row's Generator, or None (greedy, Q-values, a deterministic actor)."""
    if greedy or out.kind == "q":
        return None
    if out.mean is not None:
        return None if out.std is None else ("normal", int(out.mean.shape[-1]))
    return "uniform", int(out.logits.shape[-1])


def draw_noise(rng: np.random.Generator, draw: tuple[str, int], rows: int = 1) -> np.ndarray:
    """float64 [rows, k] of ``draw`` (:func:`noise_draw`) from one Generator: rows drawn one call at a time
    or all at once are the same numbers (numpy fills arrays in order from the same stream)."""
    kind, k = draw
    return rng.random((rows, k)) if kind == "uniform" else rng.standard_normal((rows, k))


def _noise(rng, draw: tuple[str, int] | None, b: int) -> np.ndarray | None:
    """Noise [B, k]: from one Generator, or one row per Generator (row i draws what it draws alone)."""
    if draw is None:
        return None
    if isinstance(rng, np.random.Generator):
        return draw_noise(rng, draw, b)
    return np.concatenate([draw_noise(r, draw) for r in rng])


def _gumbel_argmax(logits: np.ndarray, u: np.ndarray | None) -> np.ndarray:
    if u is None:
        return logits.argmax(-1).astype(np.int64)
    gumbel = -np.log(-np.log(np.clip(u, 1e-12, 1.0 - 1e-12)))
    return (logits.astype(np.float64) + gumbel).argmax(-1).astype(np.int64)


def squash_to_bounds(u: np.ndarray, low, high) -> np.ndarray:
    """tanh(u) mapped from [-1, 1] onto [low, high] (where both are finite; tanh(u) elsewhere)."""
    y = np.tanh(np.asarray(u, dtype=np.float64))
    if low is None or high is None:
        return y
    lo, hi = np.asarray(low, np.float64), np.asarray(high, np.float64)
    ok = np.isfinite(lo) & np.isfinite(hi)
    return np.where(ok, lo + (y + 1.0) * 0.5 * np.where(ok, hi - lo, 0.0), y)


def sample_actions(out, rng, greedy: bool = False) -> np.ndarray:
    """Actions [B, ...] from a :class:`~rlviz.agent.policy.PolicyOutput`: the one sampler of rlviz.

    Discrete: int64 [B] (argmax when ``greedy`` or Q-values, else Gumbel-max from softmax(logits)).
    MultiDiscrete / MultiBinary: int64 [B, parts] (the same, per part). Box: float32 [B, D]: mean + std * N(0, 1)
    (the mean when ``greedy`` or deterministic), tanh-squashed into the bounds when ``out.squash``, else clipped
    to them. ``rng``: one Generator for the batch, or a sequence of B Generators, one per row (row i then draws
    what ``act(obs[i:i+1], rngs[i])`` draws: episodes replay alone).
    """
    return actions_from_noise(out, _noise(rng, noise_draw(out, greedy), out.logits.shape[0]))


def actions_from_noise(out, noise: np.ndarray | None) -> np.ndarray:
    """:func:`sample_actions` with the noise already drawn (:func:`noise_draw`; None: the greedy action)."""
    if out.mean is not None:
        u = np.asarray(out.mean, dtype=np.float64)
        if noise is not None:
            u = u + np.asarray(out.std, dtype=np.float64) * noise
        if out.squash:
            a = squash_to_bounds(u, out.low, out.high)
        else:
            lo = -np.inf if out.low is None else out.low
            hi = np.inf if out.high is None else out.high
            a = np.clip(u, lo, hi)
        return a.astype(np.float32)
    if out.nvec is None:
        return _gumbel_argmax(out.logits, noise)
    cols, start = [], 0
    for n in out.nvec:
        lg = out.logits[:, start : start + n].astype(np.float64)
        if noise is not None:
            lg = lg - np.log(-np.log(np.clip(noise[:, start : start + n], 1e-12, 1.0 - 1e-12)))
        cols.append(lg.argmax(-1))
        start += n
    return np.stack(cols, axis=1).astype(np.int64)


def space_to_json(space) -> dict | None:
    """A non-Discrete action space as JSON (for checkpoint metadata); None for Discrete."""
    spec = action_spec(space)
    if spec.kind == "discrete":
        return None
    out = {"kind": spec.kind, "shape": list(spec.shape)}
    if spec.kind == "multi_discrete":
        out["nvec"] = list(spec.nvec or ())
    if spec.kind == "box":
        out["low"], out["high"] = [float(v) for v in spec.low], [float(v) for v in spec.high]  # type: ignore[union-attr]  # a Box has bounds
    return out


def space_from_json(d: dict | None):
    """The gymnasium space :func:`space_to_json` described (None stays None)."""
    import gymnasium as gym

    if d is None:
        return None
    try:
        kind, shape = d["kind"], tuple(int(s) for s in d["shape"])
        if kind == "box":
            return gym.spaces.Box(np.asarray(d["low"], np.float32), np.asarray(d["high"], np.float32), shape,
                                  np.float32)
        if kind == "multi_discrete":
            return gym.spaces.MultiDiscrete([int(n) for n in d["nvec"]])
        if kind == "multi_binary":
            return gym.spaces.MultiBinary(list(shape))
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"action space description {d!r} is malformed ({exc}).") from None
    raise UsageError(f"action space kind {d.get('kind')!r} is not one of {ACTION_KINDS}.")


__all__ += ["space_to_json", "space_from_json", "squash_to_bounds", "noise_draw", "draw_noise", "actions_from_noise",
            "action_names_for", "MINATAR_ACTIONS"]


def action_names_for(env, num_actions: int) -> Sequence[str]:
    """``get_action_meanings()`` on ALE (looked up through wrappers), the action indices otherwise."""
    base = getattr(env, "unwrapped", env)
    getter = getattr(base, "get_action_meanings", None)
    if callable(getter):
        try:
            names = list(getter())
            if len(names) == num_actions:
                return tuple(str(n) for n in names)
        except Exception:  # pragma: no cover - exotic envs
            pass
    action_set = getattr(base, "action_set", None)  # MinAtar: indices into n, l, u, r, d, f
    if type(base).__module__.startswith("minatar") and action_set is not None and len(action_set) == num_actions:
        return tuple(MINATAR_ACTIONS[int(a)] for a in action_set)
    return tuple(str(i) for i in range(num_actions))


#: MinAtar's full action list, in the order its ``action_set`` indexes it.
MINATAR_ACTIONS = ("NOOP", "LEFT", "UP", "RIGHT", "DOWN", "FIRE")
