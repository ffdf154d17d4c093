"""Saliency of an egocentric partial view, projected onto the full grid (MiniGrid's 7x7 view).

A MiniGrid agent sees ``V x V`` cells ahead of it (``agent_view_size``, 7 by default), rotated so that it looks "up":
the observation's ``image[vx, vy]`` is view cell (vx, vy), the agent at (V // 2, V - 1). Saliency computed on that
view (one value per view cell: :func:`view_cell_saliency` sums an ``[V, V, C]`` attribution over its channels) says
which cells the decision rests on; :func:`view_to_grid` puts each view cell back where it is in the world for the
agent's position and heading, the inverse of MiniGrid's own ``get_view_coords``: with the direction vector ``d``
and the right vector ``r = (-d_y, d_x)``, the view's top-left corner is ``t = a + (V - 1) d - (V // 2) r`` and view
cell (vx, vy) is world cell ``t + vx r - vy d``. Cells that fall off the grid are dropped.
"""

from __future__ import annotations

import numpy as np

from ..errors import UsageError

__all__ = ["DIR_TO_VEC", "view_cell_to_grid", "view_to_grid", "view_cell_saliency"]

#: MiniGrid's headings: 0 right, 1 down, 2 left, 3 up (x grows right, y grows down)
DIR_TO_VEC = ((1, 0), (0, 1), (-1, 0), (0, -1))


def view_cell_to_grid(vx: int, vy: int, agent_pos, agent_dir: int, view_size: int = 7) -> tuple[int, int]:
    """The world cell (x, y) of view cell (vx, vy) for an agent at ``agent_pos`` (x, y) heading ``agent_dir``."""
    if int(agent_dir) not in range(4):
        raise UsageError(f"agent_dir={agent_dir}; MiniGrid's headings are 0..3.")
    dx, dy = DIR_TO_VEC[int(agent_dir)]
    rx, ry = -dy, dx
    ax, ay = (int(v) for v in agent_pos)
    tx = ax + dx * (view_size - 1) - rx * (view_size // 2)
    ty = ay + dy * (view_size - 1) - ry * (view_size // 2)
    return tx + vx * rx - vy * dx, ty + vx * ry - vy * dy


def view_to_grid(view_map, agent_pos, agent_dir: int, grid_size: tuple[int, int]) -> np.ndarray:
    """float64 [H, W] (rows y, columns x) of the full ``grid_size`` (W, H) grid: each view cell's value
    (``view_map[vx, vy]``, ``[V, V]``) at its world cell; 0 where the view does not reach."""
    m = np.asarray(view_map, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise UsageError(f"view_map of shape {m.shape}; expected a square [V, V] map of the agent's view.")
    w, h = (int(v) for v in grid_size)
    out = np.zeros((h, w), np.float64)
    v = m.shape[0]
    for vx in range(v):
        for vy in range(v):
            x, y = view_cell_to_grid(vx, vy, agent_pos, agent_dir, v)
            if 0 <= x < w and 0 <= y < h:
                out[y, x] += m[vx, vy]
    return out


def view_cell_saliency(attribution, channels_first: bool = False) -> np.ndarray:
    """[V, V] per view cell from an attribution of MiniGrid's ``[V, V, C]`` image (|values| summed over channels;
    ``channels_first``: a ``[C, V, V]`` one, SB3's transposed image); a ``[V, V]`` map is taken as it is (|values|)."""
    a = np.abs(np.asarray(attribution, dtype=np.float64))
    if a.ndim == 2 and a.shape[0] == a.shape[1]:  # already one value per cell (rlviz.attribute's image maps)
        return a
    if a.ndim != 3:
        raise UsageError(f"attribution of shape {a.shape}; expected the [V, V, C] (or [C, V, V]) view image.")
    return (np.moveaxis(a, 0, -1) if channels_first else a).sum(-1)
