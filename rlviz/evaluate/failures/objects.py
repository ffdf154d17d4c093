"""Object extractors: where the game's objects are in a rendered frame.

Protocol: ``extractor(frame uint8 [H, W, 3], env) -> {name: bool mask [H, W]}`` in frame pixels,
where ``env`` is the single (sub-)environment the frame came from (use ``env.unwrapped`` for state).

Rollouts call extractors on every step but only need masks on the rare failure steps, so the
:class:`Extractor` base splits the call in two: :meth:`Extractor.capture` (every step, cheap: copy
the state or the frame) and :meth:`Extractor.masks` (only for the frame before a failure).
``needs_frame = False`` tells the rollout it need not render at all (MinAtar state, ALE screen).

Built in: exact MinAtar extractors (from the game-state channels), exact classic-control and Box2D
extractors (object positions computed from the env's state as its renderer computes them:
:mod:`rlviz.evaluate.failures.classic_objects`), colour segmentation for ALE Breakout (ball, paddle) and Pong
(ball, own paddle), RAM object maps for 20 ALE games (:mod:`rlviz.evaluate.failures.atari_ram`: player, enemy, ball,
missile, ... read from the console's RAM), and a generic "moving pixels" fallback.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...envs.families import family_of
from ...errors import UsageError
from ...options import import_user_module
from .body_objects import GridAgentExtractor, body_extractor, default_body_extractor
from .classic_objects import CLASSIC_OBJECTS
from .extractor import Extractor

__all__ = [
    "Extractor",
    "FunctionExtractor",
    "MinAtarExtractor",
    "StateExtractor",
    "ColorExtractor",
    "MotionExtractor",
    "breakout_extractor",
    "pong_extractor",
    "extractor_for",
    "fallback_note",
    "KEYWORDS",
    "load_extractor",
    "as_extractor",
    "last_seen",
]


class FunctionExtractor(Extractor):
    """A user function ``(frame, env) -> {name: mask}``, called on every step (it may read env state)."""

    def __init__(self, fn: Callable[[np.ndarray, Any], dict], names: tuple[str, ...] = ()):
        self.fn = fn
        self.names = tuple(names)

    def capture(self, frame, env):
        out = self.fn(frame, env)
        if not isinstance(out, dict):
            raise UsageError(f"The object extractor {self.fn!r} returned {type(out).__name__}; expected {{name: mask}}.")
        return {str(k): np.asarray(v, dtype=bool) for k, v in out.items()}

    def masks(self, captured):
        return captured


class MinAtarExtractor(Extractor):
    """Exact masks from MinAtar's game-state channels (e.g. Breakout: paddle, ball, trail, brick),
    mapped to the rendered frame (10x10 for MinAtar's rgb_array; integer upscaling when larger)."""

    needs_frame = False

    def __init__(self, names: tuple[str, ...] | None = None, frame_shape: tuple[int, int] | None = None):
        self._names = tuple(names) if names else None
        self.frame_shape = frame_shape
        self._channels: dict[str, int] | None = None

    @property
    def names(self) -> tuple[str, ...]:  # type: ignore[override]  # read-only here: set by the first frame
        return self._names or tuple(self._channels or ())

    def _game_channels(self, env) -> dict[str, int]:
        game = getattr(getattr(env, "unwrapped", env), "game", None)
        channels = getattr(getattr(game, "env", None), "channels", None)
        if not isinstance(channels, dict):
            raise UsageError(f"{env!r} is not a MinAtar env (no game.env.channels); use another object extractor.")
        return channels

    def capture(self, frame, env):
        if self._channels is None:
            self._channels = dict(self._game_channels(env))
            unknown = set(self._names or ()) - set(self._channels)
            if unknown:
                raise UsageError(f"MinAtar objects {sorted(unknown)} unknown; this game has {sorted(self._channels)}.")
        return np.asarray(env.unwrapped.game.state(), dtype=bool).copy()

    def masks(self, state):
        h, w = state.shape[:2]
        fh, fw = self.frame_shape or (h, w)
        if fh % h or fw % w:
            raise UsageError(f"Frame {fh}x{fw} is not an integer multiple of the MinAtar grid {h}x{w}.")
        out = {}
        for name in self.names:
            m = state[:, :, self._channels[name]]
            out[name] = np.repeat(np.repeat(m, fh // h, axis=0), fw // w, axis=1)
        return out

    def masks_many(self, captured: list) -> dict[str, np.ndarray]:
        if not captured:
            return {}
        states = np.stack(captured)  # [B, h, w, channels]
        h, w = states.shape[1:3]
        fh, fw = self.frame_shape or (h, w)
        if fh % h or fw % w:
            raise UsageError(f"Frame {fh}x{fw} is not an integer multiple of the MinAtar grid {h}x{w}.")
        out = {}
        channels = self._channels or {}
        for name in self.names:
            m = states[..., int(channels[name])]
            out[name] = m if (fh, fw) == (h, w) else np.repeat(np.repeat(m, fh // h, axis=1), fw // w, axis=2)
        return out


class StateExtractor(Extractor):
    """Exact object positions from the env's state, no rendering: ``locate(env.unwrapped)`` gives
    ``((H, W), ((row, col), ...))`` (one centre per name, in frame pixels; None before a reset; see
    :mod:`rlviz.evaluate.failures.classic_objects`); each object's mask is a disc of its radius around its centre
    (rounded), cut off at the frame's edges. ``frame_shape`` (set by the rollout from a rendered frame): when
    frames are rendered at another size than the env's renderer draws (a resizing wrapper), centres and radii
    are scaled to it."""

    needs_frame = False

    def __init__(self, names: tuple[str, ...], radii: tuple[int, ...], locate: Callable):
        if len(names) != len(radii):
            raise UsageError(f"StateExtractor: {len(names)} names {names} but {len(radii)} radii; give one radius each.")
        self.names, self.radii, self.locate = tuple(names), tuple(int(r) for r in radii), locate
        self.frame_shape: tuple[int, int] | None = None

    def capture(self, frame, env):
        return self.locate(env.unwrapped)  # a few floats a step

    def masks(self, captured):
        if captured is None:
            return {}
        shape, centres = captured
        radii = self.radii
        if self.frame_shape is not None and tuple(self.frame_shape[:2]) != tuple(shape):
            fy, fx = self.frame_shape[0] / shape[0], self.frame_shape[1] / shape[1]
            shape, centres = tuple(self.frame_shape[:2]), [(r * fy, c * fx) for r, c in centres]
            radii = tuple(max(1, round(r * min(fy, fx))) for r in radii)
        return {n: _disc(shape, c, r) for n, c, r in zip(self.names, centres, radii, strict=True)}


def _disc(shape: tuple[int, int], centre: tuple[float, float], radius: int) -> np.ndarray:
    """bool [H, W]: the pixels within ``radius`` of ``centre`` rounded to a pixel (empty when it is off the frame)."""
    out = np.zeros(shape, dtype=bool)
    r0, c0 = (math.floor(v + 0.5) for v in centre)
    stencil = _stencil(radius)
    top, left = r0 - radius, c0 - radius
    t, b = max(top, 0), min(top + 2 * radius + 1, shape[0])
    lft, rgt = max(left, 0), min(left + 2 * radius + 1, shape[1])
    if t < b and lft < rgt:
        out[t:b, lft:rgt] = stencil[t - top : b - top, lft - left : rgt - left]
    return out


@functools.lru_cache(maxsize=32)
def _stencil(radius: int) -> np.ndarray:
    rows, cols = np.ogrid[-radius : radius + 1, -radius : radius + 1]
    return rows * rows + cols * cols <= radius * radius


class ColorExtractor(Extractor):
    """Colour segmentation of the ALE screen (read from the emulator: no render call needed).

    ``objects``: name -> (list of RGB colours, list of boxes (row0, row1, col0, col1), half-open);
    a pixel belongs to the object when it has one of the colours inside one of the boxes.
    ``split_band``: optional (ball, paddle, min_width): in the paddle mask, horizontal runs
    narrower than ``min_width`` are the ball, not the paddle (Breakout: both are the same red).
    """

    needs_frame = False

    def __init__(self, objects: dict, split_band: tuple[str, str, int] | None = None):
        self.objects = {k: ([tuple(c) for c in cols], [tuple(b) for b in boxes]) for k, (cols, boxes) in objects.items()}
        self.names = tuple(objects)
        self.split_band = split_band

    def capture(self, frame, env):
        if frame is not None:
            return np.array(frame, copy=True)
        return env.unwrapped.ale.getScreenRGB()

    def masks(self, frame):
        out = {}
        for name, (colours, boxes) in self.objects.items():
            m = np.zeros(frame.shape[:2], dtype=bool)
            for r0, r1, c0, c1 in boxes:
                sub = frame[r0:r1, c0:c1]
                for c in colours:
                    m[r0:r1, c0:c1] |= (sub == np.asarray(c, dtype=np.uint8)).all(-1)
            out[name] = m
        if self.split_band is not None:
            ball, paddle, min_w = self.split_band
            narrow = _narrow_runs(out[paddle].any(axis=0), min_w)
            out[ball] = out[ball] | (out[paddle] & narrow[None, :])
            out[paddle] = out[paddle] & ~narrow[None, :]
        return out


def _narrow_runs(cols: np.ndarray, min_w: int) -> np.ndarray:
    """bool [W]: True on runs of True shorter than ``min_w``."""
    out = np.zeros_like(cols)
    x, n = 0, len(cols)
    while x < n:
        if cols[x]:
            e = x
            while e < n and cols[e]:
                e += 1
            if e - x < min_w:
                out[x:e] = True
            x = e
        else:
            x += 1
    return out


def breakout_extractor() -> ColorExtractor:
    """ALE Breakout (210x160): ball and paddle share the colour (200, 72, 72). Ball: that colour
    between the walls (columns 8-151) in rows 32-196 except the red brick band (rows 57-62, where a
    ball cannot be told from a brick) and narrow runs in the paddle rows; paddle: runs >= 4 px wide
    in rows 189-192 (the red block at the bottom right, columns 152-159, is wall). Checked against
    RAM: ball = (row RAM[101] + 9, col RAM[99] - 49), 4x2 px; paddle col = RAM[72] - 47."""
    red = [(200, 72, 72)]
    return ColorExtractor(
        {
            "ball": (red, [(32, 57, 8, 152), (63, 189, 8, 152), (193, 197, 8, 152)]),
            "paddle": (red, [(189, 193, 8, 152)]),
        },
        split_band=("ball", "paddle", 4),
    )


def pong_extractor() -> ColorExtractor:
    """ALE Pong (210x160): ball (236, 236, 236) inside the court (rows 34-193), own paddle
    (92, 186, 92) on the right (columns 136-147); the score digits above row 34 are excluded."""
    return ColorExtractor(
        {
            "ball": ([(236, 236, 236)], [(34, 194, 0, 160)]),
            "paddle": ([(92, 186, 92)], [(34, 194, 136, 148)]),
        }
    )


class MotionExtractor(Extractor):
    """Generic fallback for any rgb env: one object, "moving", = pixels that changed since the
    previous frame and differ from the frame's dominant (background) colour."""

    names = ("moving",)
    history = 1

    def __init__(self):
        self._prev: dict[int, np.ndarray] = {}

    def begin_episode(self, env) -> None:
        self._prev.pop(id(env), None)

    def capture(self, frame, env):
        prev = self._prev.get(id(env))
        cur = _packed(frame)  # one int per pixel: compared and counted without per-channel passes
        self._prev[id(env)] = cur
        return prev, cur

    def masks(self, captured):
        prev, cur = captured
        if prev is None:
            return {"moving": np.zeros(cur.shape, dtype=bool)}
        return {"moving": (cur != _dominant(cur)) & (cur != prev)}


def last_seen(extractor: Extractor, captures) -> dict:
    """Each object's mask on the newest of ``captures`` (newest first: the step before a failure first) or,
    when it is not visible there, on the newest capture where it is (an ALE Breakout ball leaves the screen
    several frames before the life is taken). ``captures`` may be lazy: it is read only as far as needed."""
    out: dict = {}
    for captured in captures:
        for name, mask in extractor.masks(captured).items():
            if name not in out or (not out[name].any() and mask.any()):
                out[name] = mask
        if all(m.any() for m in out.values()):
            break
    return out


def _packed(frame: np.ndarray) -> np.ndarray:
    """uint8 [H, W, 3] -> uint32 [H, W] = R << 16 | G << 8 | B (ordered as the RGB triples are; so the
    dominant colour's ties go to the smallest triple, as with np.unique over rows)."""
    h, w = frame.shape[:2]
    buf = np.zeros((h, w, 4), dtype=np.uint8)  # little-endian bytes B, G, R, 0: viewed as R << 16 | G << 8 | B
    buf[..., 0], buf[..., 1], buf[..., 2] = frame[..., 2], frame[..., 1], frame[..., 0]
    return buf.view("<u4")[..., 0]


def _dominant(packed: np.ndarray):
    """The most frequent value (ties: the smallest). A background covering most of the frame is found
    without sorting: a value held by more than half the pixels is the mode."""
    corner = packed.flat[0]
    if 2 * int(np.count_nonzero(packed == corner)) > packed.size:
        return corner
    colours, counts = np.unique(packed, return_counts=True)
    return colours[counts.argmax()]


_BY_ID: dict[str, Callable[[], Extractor]] = {
    "ALE/Breakout-v5": breakout_extractor,
    "BreakoutNoFrameskip-v4": breakout_extractor,
    "ALE/Pong-v5": pong_extractor,
    "PongNoFrameskip-v4": pong_extractor,
    "MinAtar/Breakout-v0": lambda: MinAtarExtractor(("ball", "paddle")),
    "MinAtar/Breakout-v1": lambda: MinAtarExtractor(("ball", "paddle")),
}
for _id, _objects in CLASSIC_OBJECTS.items():
    _BY_ID[_id] = lambda objects=_objects: StateExtractor(*objects)  # type: ignore[misc]


#: the default objects a family names (:attr:`Family.objects <rlviz.envs.families.family.Family>`) -> the
#: extractor (a family's ``body:<name>`` is :func:`default_body_extractor`'s)
_FAMILY_OBJECTS: dict[str, Callable[[], Extractor]] = {"minatar": MinAtarExtractor, "grid": GridAgentExtractor}


def extractor_for(env_id: str) -> Extractor:
    """The default extractor for an env id: exact ones for known games (Atari Breakout and Pong by colour as in
    0.3, MinAtar, gymnasium's classic control and LunarLander), the RAM map of the ALE games rlviz has one for
    (:mod:`rlviz.evaluate.failures.atari_ram`; v5 and v4 ids alike), all state channels for other MinAtar games, else
    :class:`MotionExtractor`; MiniGrid and BabyAI: the agent's cell, gymnasium's MuJoCo walkers: the torso in its
    plane (:mod:`rlviz.evaluate.failures.body_objects`)."""
    if env_id in _BY_ID:
        return _BY_ID[env_id]()
    family = family_of(env_id)
    spec = family.objects(env_id) if family is not None and family.objects is not None else None
    if spec in _FAMILY_OBJECTS:  # MinAtar's state channels, MiniGrid's agent cell
        return _FAMILY_OBJECTS[spec]()
    body = default_body_extractor(env_id)  # Hopper, Walker2d, Ant...: where the torso was (body_objects)
    if body is not None:
        return body
    from .atari_ram import ram_extractor_for  # (it builds on this module)

    ram = ram_extractor_for(env_id)
    return ram if ram is not None else MotionExtractor()


def fallback_note(env_id: str) -> str | None:
    """One line when the heatmap of ``env_id`` (with no ``--objects``) falls back to :class:`MotionExtractor`
    (rlviz knows no objects of that game: no RAM map, no state layout), else None."""
    if not isinstance(extractor_for(env_id), MotionExtractor):
        return None
    return (f"{env_id} has no object map in rlviz (no RAM map, no known state layout): its heatmap counts 'moving' "
            "pixels (changed since the previous frame, not the background colour) in place of the game's objects; "
            "--objects module:function names yours.")


#: ``--objects`` keywords: the extractor each names, in place of ``module:function``
KEYWORDS = ("pixels", "ram")


def load_extractor(spec: str) -> Extractor:
    """``"package.module:function"`` -> an :class:`Extractor` (a function ``(frame, env) -> masks``
    is wrapped in :class:`FunctionExtractor`; an Extractor subclass or instance is used as is). Keywords:
    ``"pixels"``: :class:`MotionExtractor` (moving pixels, any rgb env); ``"ram"``: the ALE game's RAM map
    (:class:`rlviz.evaluate.failures.atari_ram.RamExtractor`, its game read from the env on the first step);
    ``"body:NAME"``: a MuJoCo body's position in its plane (:class:`rlviz.evaluate.failures.body_objects.BodyExtractor`)."""
    if spec == "pixels":
        return MotionExtractor()
    if spec == "ram":
        from .atari_ram import ram_extractor_for

        return ram_extractor_for()  # type: ignore[return-value]  # (never None without an env id)
    if isinstance(spec, str) and spec.startswith("body:"):
        return body_extractor(spec)
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise UsageError(f"Object extractor {spec!r}: expected 'pixels', 'ram' or 'module:function', "
                         "e.g. 'mygame.objects:extract'.")
    mod_name, attr = spec.split(":")
    try:
        obj = getattr(import_user_module(mod_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"Cannot load object extractor {spec!r}: {exc}. Is the module on PYTHONPATH?") from exc
    return as_extractor(obj)


def as_extractor(obj) -> Extractor:
    """An Extractor instance, an Extractor subclass (instantiated) or a plain callable."""
    if isinstance(obj, Extractor):
        return obj
    if isinstance(obj, type) and issubclass(obj, Extractor):
        return obj()
    if callable(obj):
        return FunctionExtractor(obj)
    raise UsageError(f"{obj!r} is not an object extractor; expected a callable (frame, env) -> {{name: mask}}.")
