"""Saliency of a :class:`~rlviz.jax.contract.JaxPolicy` in JAX, with the definitions and normalisation of rlviz's
torch methods (:mod:`rlviz.explain.attribution`, :mod:`rlviz.explain.perturbation`), so that a JAX map means what a
torch map means. Each returns float32 ``>= 0`` shaped like ``obs_batch`` (captum's contract: the torch methods'
``attribute``); the video's reduction and per-episode scale are the caller's (:func:`rlviz.explain.scale`).

* :func:`gradient`: ``|d target / d obs|`` (Simonyan et al. 2014), one ``jax.vmap(jax.grad(...))``;
* :func:`smoothgrad`: the mean ``|gradient|`` over ``n_samples`` noisy copies, noise sigma = ``noise_level`` x
  (max - min) of each observation, the same noise patterns for every observation (Smilkov et al. 2017);
* :func:`perturbation`: Greydanus et al. 2018: Gaussian masks (sigma ``radius``, every ``stride`` pixels) blending
  in a blurred copy (a Gaussian of ``blur_sigma``; grid worlds such as MinAtar: each channel's mean), score
  ``0.5 ||out - out'||^2`` over all logits (Q-values, means) or ``0.5 (V - V')^2``, bilinear back to pixels;
  image observations ([H, W, C] or [H, W]) only; all masks of one observation in one vmapped batch.

The target (``target="action"``): the chosen action's logit (the argmax of the clean observation's logits, held
fixed), its Q-value for kind "q", the sum of the mean for a Gaussian (a continuous action); ``"value"``: the value.
A recurrent policy is explained from its initial carry (the observation alone, as at an episode's first step).
All functions are pure in (params, obs_batch) and jit-compiled; they may be called inside ``jax.jit``. Each
compiled function is kept per (method, policy, options) (:func:`_compiled`): a second call with a batch of the same
shape compiles nothing (the videos' callers pad their batches to a few sizes: :func:`rlviz.jax.replay.saliency_maps`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import UsageError

__all__ = ["gradient", "smoothgrad", "perturbation", "target_of"]

_TARGETS = ("action", "value")
#: compiled saliency functions kept (each holds its policy, so that an id is never another policy's)
_KEPT = 8
_COMPILED: OrderedDict[tuple[Any, ...], tuple[Any, Any]] = OrderedDict()


def _compiled(key: tuple[Any, ...], policy: Any, make: Callable[[], Any]) -> Any:
    """The jit-compiled function ``make()`` for (``key``, ``policy``), made once and kept (the last few)."""
    full = (id(policy), *key)
    kept = _COMPILED.get(full)
    if kept is not None and kept[0] is policy:
        _COMPILED.move_to_end(full)
        return kept[1]
    fn = make()
    _COMPILED[full] = (policy, fn)
    while len(_COMPILED) > _KEPT:
        _COMPILED.popitem(last=False)
    return fn


def _out(policy: Any, params: Any, obs: Any) -> Any:
    if getattr(policy, "recurrent", False):
        import jax.numpy as jnp

        return policy.apply_recurrent(params, policy.initial_carry(), obs, jnp.asarray(True))[1]
    return policy.apply(params, obs)


def _head(policy: Any, out: Any) -> Any:
    return out.q if policy.kind == "q" else out.mean if policy.kind == "gaussian" else out.logits


def target_of(policy: Any, params: Any, obs: Any, action: Any, target: str = "action") -> Any:
    """The scalar whose gradient is the saliency of one observation (rlviz.explain.gradients.select_target's)."""
    import jax.numpy as jnp

    out = _out(policy, params, obs)
    if target == "value":
        if out.value is None:
            raise UsageError("target='value' but the policy has no value (a critic); use target='action'.")
        return jnp.asarray(out.value, jnp.float32)
    head = _head(policy, out)
    if policy.kind == "gaussian":
        return jnp.sum(head)
    return head[action]


def _check_target(target: str) -> None:
    if target not in _TARGETS:
        raise UsageError(f"target={target!r}; expected one of {', '.join(_TARGETS)}.")


def _actions(policy: Any, params: Any, x: Any) -> Any:
    import jax
    import jax.numpy as jnp

    if policy.kind == "gaussian":
        return jnp.zeros(x.shape[0], jnp.int32)
    heads = jax.vmap(lambda o: _head(policy, _out(policy, params, o)))(x)
    return jax.lax.stop_gradient(jnp.argmax(heads, axis=-1))


def gradient(policy: Any, params: Any, obs_batch: Any, *, target: str = "action") -> Any:
    """float32 [B, *obs] >= 0: ``|d target / d obs|`` of each observation of ``obs_batch`` [B, *obs]."""
    import jax
    import jax.numpy as jnp

    _check_target(target)

    def make() -> Any:
        @jax.jit
        def run(params: Any, x: Any) -> Any:
            actions = _actions(policy, params, x)
            g = jax.vmap(jax.grad(lambda o, a: target_of(policy, params, o, a, target)))(x, actions)
            return jnp.abs(g)

        return run

    return _compiled(("gradient", target), policy, make)(params, jnp.asarray(obs_batch, jnp.float32))


def smoothgrad(policy: Any, params: Any, obs_batch: Any, *, n_samples: int = 16, noise_level: float = 0.15,
               seed: int = 0, target: str = "action") -> Any:
    """float32 [B, *obs] >= 0: the mean ``|gradient|`` over ``n_samples`` noisy copies of each observation."""
    import jax
    import jax.numpy as jnp

    _check_target(target)
    if int(n_samples) < 1 or float(noise_level) < 0:
        raise UsageError(f"smoothgrad needs n_samples >= 1 and noise_level >= 0; received {n_samples}, "
                         f"{noise_level}.")
    n = int(n_samples)

    def make() -> Any:
        @jax.jit
        def run(params: Any, x: Any) -> Any:
            noise = jax.random.normal(jax.random.PRNGKey(int(seed)), (n, *x.shape[1:]), jnp.float32)
            flat = x.reshape(x.shape[0], -1)
            sigma = float(noise_level) * (flat.max(axis=1) - flat.min(axis=1))
            actions = _actions(policy, params, x)
            grad = jax.grad(lambda o, a: target_of(policy, params, o, a, target))

            def one(o: Any, s: Any, a: Any) -> Any:
                noisy = o[None] + s * noise
                return jnp.mean(jnp.abs(jax.vmap(grad, (0, None))(noisy, a)), axis=0)

            return jax.vmap(one)(x, sigma, actions)

        return run

    key = ("smoothgrad", n, float(noise_level), int(seed), target)
    return _compiled(key, policy, make)(params, jnp.asarray(obs_batch, jnp.float32))


def _hw(shape: tuple[int, ...]) -> tuple[int, int, bool]:
    """(H, W, channels_last) of one image observation."""
    if len(shape) == 2:
        return shape[0], shape[1], True
    if len(shape) == 3:
        if shape[0] <= 4 < shape[2]:  # [C, H, W] (stacked frames first)
            return shape[1], shape[2], False
        return shape[0], shape[1], True
    raise UsageError(f"perturbation saliency is for image observations ([H, W, C] or [H, W]); this one's shape is "
                     f"{shape}: use gradient or smoothgrad.")


def _blur_matrix(n: int, sigma: float) -> np.ndarray:
    """[n, n]: a 1-D Gaussian truncated at 4 sigma with reflected edges (scipy's gaussian_filter, as torch's)."""
    half = int(4.0 * sigma + 0.5)
    t = np.arange(-half, half + 1, dtype=np.float64)
    k = np.exp(-(t**2) / (2 * sigma**2))
    k /= k.sum()
    m = np.zeros((n, n))
    for p in range(n):
        for j, w in enumerate(k):
            i = (p + j - half) % (2 * n)
            m[p, i if i < n else 2 * n - 1 - i] += w
    return m.astype(np.float32)


def perturbation(policy: Any, params: Any, obs_batch: Any, *, target: str = "action", radius: float | None = None,
                 stride: int | None = None, blur_sigma: Any = "auto") -> Any:
    """float32 [B, *obs] >= 0: Greydanus et al.'s perturbation score of each pixel (the same for its channels)."""
    import jax
    import jax.numpy as jnp

    from ..explain.perturbation import default_options, mask_grid

    _check_target(target)
    x = jnp.asarray(obs_batch, jnp.float32)
    h, w, last = _hw(tuple(x.shape[1:]))
    defaults = default_options(h, w)
    radius = defaults["radius"] if radius is None else float(radius)
    stride = defaults["stride"] if stride is None else int(stride)
    blur = defaults["blur_sigma"] if blur_sigma == "auto" else blur_sigma
    grid = mask_grid(h, w, float(radius), int(stride))
    masks = jnp.asarray(grid.masks.numpy())  # [K, H, W]
    rows, cols = jnp.asarray(grid.rows.numpy()), jnp.asarray(grid.cols.numpy())
    ny, nx = grid.grid_shape
    by = None if blur is None or blur == 0 else jnp.asarray(_blur_matrix(h, float(blur)))
    bx = None if blur is None or blur == 0 else jnp.asarray(_blur_matrix(w, float(blur)))
    spatial = (0, 1) if last else (1, 2)

    def blurred(o: Any) -> Any:
        if blur is None:
            return jnp.broadcast_to(o.mean(axis=spatial, keepdims=True), o.shape)
        if by is None:
            return o
        img = o if o.ndim == 2 else (jnp.moveaxis(o, -1, 0) if last else o)  # [C, H, W] or [H, W]
        b = by @ img @ bx.T  # type: ignore[union-attr]  # (by and bx are set together)
        return b if o.ndim == 2 else (jnp.moveaxis(b, 0, -1) if last else b)

    def expand(m: Any, o: Any) -> Any:
        return m if o.ndim == 2 else (m[..., None] if last else m[None])

    def score(a: Any, b: Any) -> Any:
        if target == "value":
            if a.value is None:
                raise UsageError("target='value' but the policy has no value (a critic); use target='action'.")
            return 0.5 * (a.value - b.value) ** 2
        return 0.5 * jnp.sum((_head(policy, a) - _head(policy, b)) ** 2)

    def make() -> Any:
        @jax.jit
        def run(params: Any, x: Any) -> Any:
            def one(o: Any) -> Any:
                clean = _out(policy, params, o)
                diff = blurred(o) - o
                s = jax.vmap(lambda m: score(clean, _out(policy, params, o + diff * expand(m, o))))(masks)
                pix = jnp.maximum(rows @ s.reshape(ny, nx) @ cols.T, 0.0)  # [H, W]
                return jnp.broadcast_to(expand(pix, o), o.shape)

            return jax.lax.map(one, x)  # one observation's masks at a time: memory flat in the batch

        return run

    key = ("perturbation", target, float(radius), int(stride), repr(blur), tuple(x.shape[1:]))
    return _compiled(key, policy, make)(params, x)
