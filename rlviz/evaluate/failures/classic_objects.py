"""Where gymnasium's classic-control and Box2D renderers draw their objects, from the env's state alone.

Each ``locate_*`` function reads the unwrapped env (its state and the renderer's own constants, e.g.
CartPole's ``screen_width`` and ``x_threshold``, LunarLander's module ``SCALE``) and returns
``((H, W), ((row, col), ...))``: the rendered frame's shape and each object's centre in frame pixels
(row 0 at the top; fractional), computed as the env's ``render()`` computes its drawing, without
drawing anything; or None before the first reset. ``CLASSIC_OBJECTS`` maps env ids to (object names,
marker radii in pixels, locate function) for :class:`rlviz.evaluate.failures.objects.StateExtractor`.

The renderers draw in y-up surface coordinates and flip the surface, so a point at surface (x, y)
lands on row ``H - 1 - y``. Checked against the rendered frames in tests/test_classic_objects.py.
"""

from __future__ import annotations

import math
import sys

__all__ = [
    "CLASSIC_OBJECTS",
    "locate_cartpole",
    "locate_acrobot",
    "locate_mountain_car",
    "locate_pendulum",
    "locate_lunar_lander",
]


def _frame_point(h: int, x: float, y: float) -> tuple[float, float]:
    """Surface point (x, y), y up -> frame (row, col)."""
    return (h - 1 - y, x)


def locate_cartpole(u):
    """cart: the cart body's centre; pole_tip: the centre of the pole's last ``polewidth`` (its end square).
    As CartPoleEnv.render: scale = screen_width / (2 x_threshold), cart centre at (x scale + W/2, 100), axle
    cartheight/4 above it, pole of length scale * 2 length (width 10) rotated by -theta."""
    if u.state is None:
        return None
    w, h = u.screen_width, u.screen_height
    scale = w / (u.x_threshold * 2)
    x, th = float(u.state[0]), float(u.state[2])
    cart_x, cart_y = x * scale + w / 2.0, 100.0
    d = scale * 2 * u.length - 10.0  # pole length less one polewidth: the end square's centre
    tip_x, tip_y = cart_x + d * math.sin(th), cart_y + 30.0 / 4.0 + d * math.cos(th)
    return (h, w), (_frame_point(h, cart_x, cart_y), _frame_point(h, tip_x, tip_y))


def locate_acrobot(u):
    """elbow: the joint between the links (drawn at integer pixels); tip: the centre of link 2's end square
    (link width 0.2 scale). As AcrobotEnv.render: scale = SCREEN_DIM / (2 (L1 + L2 + 0.2)), base at the centre."""
    if u.state is None:
        return None
    n = u.SCREEN_DIM
    scale = n / ((u.LINK_LENGTH_1 + u.LINK_LENGTH_2 + 0.2) * 2)
    off = n / 2
    s0, s1 = float(u.state[0]), float(u.state[1])
    x1 = u.LINK_LENGTH_1 * math.sin(s0) * scale + off  # link 2 starts at the elbow
    y1 = -u.LINK_LENGTH_1 * math.cos(s0) * scale + off
    th = s0 + s1 - math.pi / 2
    d = (u.LINK_LENGTH_2 - 0.1) * scale
    tip = _frame_point(n, x1 + d * math.cos(th), y1 + d * math.sin(th))
    return (n, n), (_frame_point(n, int(x1), int(y1)), tip)


def locate_mountain_car(u):
    """car: midway between its wheels (the bottom of the car body), as MountainCarEnv.render: scale =
    screen_width / (max_position - min_position), 10 px clearance above the track ``_height``."""
    if u.state is None:
        return None
    w, h = u.screen_width, u.screen_height
    scale = w / (u.max_position - u.min_position)
    pos = float(u.state[0])
    return (h, w), (_frame_point(h, (pos - u.min_position) * scale, 10 + float(u._height(pos)) * scale),)


def locate_pendulum(u):
    """bob: the disc at the rod's end (drawn at integer pixels), as PendulumEnv.render: scale = screen_dim / 4.4,
    rod of length scale from the centre, at angle theta + pi/2."""
    if u.state is None:
        return None
    n = u.screen_dim
    scale, off = n / 4.4, n // 2
    th = float(u.state[0])
    bx, by = int(-scale * math.sin(th) + off), int(scale * math.cos(th) + off)
    return (n, n), (_frame_point(n, bx, by),)


def locate_lunar_lander(u):
    """lander: the lander body's centre of mass (its polygon's centroid) times the renderer's SCALE, in its
    VIEWPORT_W x VIEWPORT_H frame (constants read from the env's own module)."""
    if getattr(u, "lander", None) is None:
        return None
    mod = sys.modules[type(u).__module__]
    c, s, w, h = u.lander.worldCenter, mod.SCALE, mod.VIEWPORT_W, mod.VIEWPORT_H
    return (h, w), (_frame_point(h, c[0] * s, c[1] * s),)


_CARTPOLE = (("cart", "pole_tip"), (15, 5), locate_cartpole)
_ACROBOT = (("elbow", "tip"), (11, 11), locate_acrobot)
_MOUNTAIN_CAR = (("car",), (10,), locate_mountain_car)
_PENDULUM = (("bob",), (11,), locate_pendulum)
_LANDER = (("lander",), (14,), locate_lunar_lander)

#: env id -> (object names, marker radius of each in pixels, locate function)
CLASSIC_OBJECTS = {
    "CartPole-v0": _CARTPOLE,
    "CartPole-v1": _CARTPOLE,
    "Acrobot-v1": _ACROBOT,
    "MountainCar-v0": _MOUNTAIN_CAR,
    "MountainCarContinuous-v0": _MOUNTAIN_CAR,
    "Pendulum-v1": _PENDULUM,
    "LunarLander-v3": _LANDER,
    "LunarLanderContinuous-v3": _LANDER,
}
