"""Saliency of a Dict observation, key by key (SB3 ``MultiInputPolicy`` agents): image keys as maps, the other keys
as bars.

``internals.saliency`` holds one number per entry of the flattened observation ([T+1, D]) and
``internals.saliency_keys`` which entries are which key (:mod:`rlviz.explain.dict_obs`). Each key gets a title
line, then either its map (an image key: one square per cell, brighter = more salient, scaled to the key's maximum
over the episode) or one bar per entry (:class:`~rlviz.draw.panels_features.FeaturePanel`: "direction=0".."=3").
A MiniGrid agent's ``image`` key is drawn as the agent's own view (MiniGrid's tiles decoded from the observation,
the agent at the bottom centre looking up) tinted by its saliency: the partial view beside the full render.
"""

from __future__ import annotations

import cv2
import numpy as np

from ..envs.families import family_of
from ..explain.dict_obs import KeySlice, split_saliency
from ..explain.partial_view import view_to_grid
from .overlay import ACTOR_COLOR
from .panels_features import FeaturePanel, feature_rows
from .style import COLORS, put_text

__all__ = ["DictSaliencyPanel", "dict_panel_height", "is_minigrid_view", "minigrid_view", "view_internals",
           "agent_in_render", "TILE"]

#: MiniGrid's render tile (pixels a cell; ``MiniGridEnv.tile_size``'s default).
TILE = 32
_AGENT_TILES: dict = {}

#: Most pixels an image key's map takes on its longer side.
_MAP_SIDE = 168


def _map_cell(shape_hw: tuple[int, int], width: int) -> int:
    return max(2, min(width, _MAP_SIDE) // max(1, max(shape_hw)))


def _hw(s) -> tuple[int, int]:
    h, w = s.spec.index("h"), s.spec.index("w")
    return (int(s.shape[h]), int(s.shape[w])) if h < w else (int(s.shape[w]), int(s.shape[h]))


def dict_panel_height(slices, width: int, lh: int) -> int:
    """Pixels the panel of ``slices`` takes in a box ``width`` wide (text lines of ``lh``)."""
    y = 0
    for s in slices:
        y += lh + 4
        if s.spec:
            hh, ww = _hw(s)
            y += _map_cell((hh, ww), width) * hh + 6
        else:
            y += s.size * feature_rows(s.size, lh) + 6
    return y


def is_minigrid_view(env_id: str, key: str, shape: tuple) -> bool:
    """A MiniGrid / BabyAI agent's egocentric ``image`` ([V, V, 3]: object, colour, state per view cell; or
    [3, V, V], as SB3 trains it channels first)."""
    shape = tuple(shape)
    if len(shape) == 3 and shape[0] == 3 and shape[2] != 3:
        shape = (shape[1], shape[2], shape[0])
    family = family_of(str(env_id).split(":")[-1])  # (gymnasium's "minigrid:MiniGrid-..." form too)
    return (family is not None and family.view_key == key and key is not None
            and len(shape) == 3 and shape[0] == shape[1] and shape[2] == 3)


def minigrid_view(image, tile: int) -> np.ndarray | None:
    """uint8 [V * tile, V * tile, 3]: MiniGrid's rendering of the view ``image`` [V, V, 3] (the agent at the bottom
    centre, looking up); None without minigrid or for an image it cannot decode."""
    try:
        from minigrid.core.grid import Grid

        arr = np.asarray(image).astype(np.uint8)
        if arr.shape[0] == 3 and arr.shape[2] != 3:  # channels first (SB3's VecTransposeImage)
            arr = np.moveaxis(arr, 0, -1)
        grid, vis = Grid.decode(arr)
        v = arr.shape[0]
        return np.ascontiguousarray(grid.render(tile, agent_pos=(v // 2, v - 1), agent_dir=3, highlight_mask=vis))
    except Exception:  # (not installed, or an image that is not a view: the plain map is drawn instead)
        return None


def _agent_tiles(tile: int) -> dict:
    """MiniGrid's own rendering of the agent on an empty floor, by (heading, highlighted), ``tile`` pixels."""
    if tile not in _AGENT_TILES:
        from minigrid.core.grid import Grid

        _AGENT_TILES[tile] = {(d, h): np.asarray(Grid.render_tile(None, agent_dir=d, highlight=h, tile_size=tile),
                                                 np.uint8) for d in range(4) for h in (False, True)}
    return _AGENT_TILES[tile]


def agent_in_render(frame, tile: int = TILE) -> tuple[tuple[int, int], int] | None:
    """((x, y), heading) of the agent in MiniGrid's full render ``frame`` (the one tile equal, pixel for pixel, to
    MiniGrid's own drawing of the agent on the floor); None where no tile is (the agent on the goal or in an open
    door, a render of another tile size, no minigrid)."""
    f = np.asarray(frame)
    if f.ndim != 3 or f.shape[0] % tile or f.shape[1] % tile:
        return None
    try:
        tiles = _agent_tiles(tile)
    except Exception:
        return None
    h, w = f.shape[0] // tile, f.shape[1] // tile
    cells = f[: h * tile, : w * tile].reshape(h, tile, w, tile, 3).swapaxes(1, 2)  # [y, x, tile, tile, 3]
    red = (cells[:, :, tile // 2, tile // 2, 0] == 255)  # (the triangle covers every heading's tile centre)
    for y, x in zip(*np.nonzero(red)):
        for (d, _), img in tiles.items():
            if np.array_equal(cells[y, x], img):
                return (int(x), int(y)), d
    return None


def view_internals(trace, internals):
    """A MiniGrid agent on its bare view image (``ImgObsWrapper``: observations [T+1, V, V, 3] or [T+1, 3, V, V],
    saliency maps [T+1, V, V], MiniGrid's x first): the internals with the maps as one ``image`` key, so that the view is drawn beside the full render
    with its saliency (a tint of the V x V egocentric map over the full grid would put it in the wrong places);
    any other episode's internals as they are."""
    import dataclasses

    sal, obs = internals.saliency, trace.observations
    shape = tuple(getattr(obs, "shape", ())[1:])
    if sal is None or internals.saliency_keys or sal.ndim != 3 or not is_minigrid_view(trace.env_id, "image", shape):
        return internals
    v = shape[1]
    if tuple(sal.shape[1:]) != (v, v):
        return internals
    return dataclasses.replace(internals, saliency=np.asarray(sal, np.float32).reshape(len(sal), v * v),
                               saliency_keys=(KeySlice("image", 0, v * v, (v, v), "hw"),))


class DictSaliencyPanel:
    """Draws frame t's saliency of each key into the box (x, y, width) given by the compositor's layout.

    saliency: float32 [T+1, D]; slices: the keys' :class:`~rlviz.explain.dict_obs.KeySlice`; observations: the
    trace's (a dict of per-key arrays, for MiniGrid's view) or None; env_id: the env's (MiniGrid's view)."""

    def __init__(self, saliency, slices, box: tuple, lh: int, font_scale: float, observations=None, env_id: str = ""):
        self.parts = split_saliency(saliency, slices)
        self.slices, self.lh, self.fs = tuple(slices), int(lh), float(font_scale)
        self.x, self.y, self.w = (int(v) for v in box[:3])
        if not isinstance(observations, dict):  # a bare image observation: the one key's
            observations = {slices[0].key: observations} if observations is not None and len(slices) == 1 else {}
        self.observations = observations
        self.boxes: list[tuple] = []  # (slice, y of its title, FeaturePanel or (cell, view?))
        y = self.y
        for s in slices:
            top = y
            y += self.lh + 4
            if s.spec:
                hh, ww = _hw(s)
                cell = _map_cell((hh, ww), self.w)
                view = s.key in self.observations and is_minigrid_view(
                    env_id, s.key, tuple(np.shape(self.observations[s.key])[1:]))
                self.boxes.append((s, top, (y, cell, view)))
                y += cell * hh + 6
            else:
                row = feature_rows(s.size, self.lh)
                self.boxes.append((s, top, FeaturePanel(self.parts[s.key], list(s.names), (self.x, y, self.w), row,
                                                        self.fs)))
                y += s.size * row + 6
        self.height = y - self.y

    def grid_heat(self, t: int, frame) -> np.ndarray | None:
        """float32 [H, W] (frame pixels): the saliency of MiniGrid's view at frame t projected onto the full
        render at the agent's cell and heading (:func:`rlviz.explain.partial_view.view_to_grid`), or None (no view
        key, the agent not found in the frame)."""
        view = next((s for s, _, part in self.boxes if not isinstance(part, FeaturePanel) and part[2]), None)
        if view is None:
            return None
        pose = agent_in_render(frame)
        if pose is None:
            return None
        f = np.asarray(frame)
        grid = view_to_grid(self.parts[view.key][t], pose[0], pose[1], (f.shape[1] // TILE, f.shape[0] // TILE))
        grid = np.clip(np.nan_to_num(grid), 0.0, 1.0).astype(np.float32)
        return np.repeat(np.repeat(grid, TILE, 0), TILE, 1)

    def draw_static(self, img: np.ndarray) -> None:
        """Key titles and the bars' tracks (the background, drawn once)."""
        for s, top, part in self.boxes:
            kind = "the agent's view" if not isinstance(part, FeaturePanel) and part[2] else (
                "map" if s.spec else f"{s.size} entr{'y' if s.size == 1 else 'ies'}")
            put_text(img, f"{s.key} ({kind})", self.x, top + self.lh - 4, "dim", self.fs * 0.85)
            if isinstance(part, FeaturePanel):
                part.draw_static(img)

    def draw(self, img: np.ndarray, t: int) -> None:
        for s, _, part in self.boxes:
            if isinstance(part, FeaturePanel):
                part.draw(img, t)
                continue
            y0, cell, view = part
            heat = np.clip(np.nan_to_num(self.parts[s.key][t]), 0.0, 1.0)  # [H, W]
            if view:  # MiniGrid's image[x, y]: the view's rows are its second axis
                heat = heat.T
            hh, ww = heat.shape
            big = cv2.resize(heat.astype(np.float32), (ww * cell, hh * cell), interpolation=cv2.INTER_NEAREST)
            base = minigrid_view(self.observations[s.key][t], cell) if view else None
            if base is None or base.shape[:2] != big.shape:
                base = np.empty((*big.shape, 3), np.uint8)
                base[:] = COLORS["track"]
            a = (big * 0.7)[..., None]
            out = base.astype(np.float32) * (1.0 - a) + np.asarray(ACTOR_COLOR, np.float32) * a
            img[y0 : y0 + big.shape[0], self.x : self.x + big.shape[1]] = out.astype(np.uint8)
