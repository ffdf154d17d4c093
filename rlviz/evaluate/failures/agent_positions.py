"""Where each agent of a PettingZoo game is, in the pixels of the game's rendered frame, read from the env's own
state (no rendering): pistonball's pistons (their heads), knights-archers-zombies' archers and knights, MPE's agents
(through the camera ``mpe2`` draws with). Other games: None (no per-agent positions known).

``agent_positions(env)`` -> ``{agent: (x, y)}`` for the agents it can place, or None for an unknown game.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["agent_positions", "knows_positions", "disc_mask"]


def _pistonball(raw: Any) -> dict[str, tuple[float, float]]:
    r = float(getattr(raw, "piston_radius", 5))
    return {f"piston_{i}": (float(p.position[0]) + r, float(p.position[1]) + r)
            for i, p in enumerate(raw.pistonList)}


def _kaz(raw: Any) -> dict[str, tuple[float, float]]:
    return {str(a): (float(o.rect.center[0]), float(o.rect.center[1])) for a, o in raw.agent_map.items()}


def _mpe(raw: Any) -> dict[str, tuple[float, float]]:
    poses = np.array([e.state.p_pos for e in raw.world.entities], dtype=np.float64)
    cam = float(np.max(np.abs(poses))) or 1.0
    w, h = int(raw.width), int(raw.height)
    out = {}
    for agent in raw.world.agents:  # as mpe2's SimpleEnv.draw places them (y flipped)
        x, y = agent.state.p_pos
        out[str(agent.name)] = ((x / cam) * w // 2 * 0.9 + w // 2, (-y / cam) * h // 2 * 0.9 + h // 2)
    return out


def _reader(raw: Any) -> Any:
    if hasattr(raw, "pistonList"):
        return _pistonball
    if hasattr(raw, "agent_map") and hasattr(raw, "zombie_list"):
        return _kaz
    if hasattr(raw, "world") and hasattr(getattr(raw, "world", None), "entities") and hasattr(raw, "width"):
        return _mpe
    return None


def knows_positions(env: Any) -> bool:
    """rlviz reads this game's agent positions from its state."""
    return _reader(getattr(env, "unwrapped", env)) is not None


def agent_positions(env: Any) -> dict[str, tuple[float, float]] | None:
    """``{agent: (x, y)}`` in frame pixels (x right, y down) for the agents placed, or None for a game rlviz knows
    no positions of."""
    raw = getattr(env, "unwrapped", env)
    read = _reader(raw)
    if read is None:
        return None
    try:
        return read(raw)
    except (AttributeError, IndexError, TypeError, ValueError):  # an agent removed from the game's state
        return {}


def disc_mask(shape: tuple[int, int], x: float, y: float, radius: int) -> np.ndarray:
    """bool [H, W]: the pixels within ``radius`` of (x, y) (empty when the point is off the frame)."""
    h, w = shape
    yy, xx = np.ogrid[:h, :w]
    return (xx - float(x)) ** 2 + (yy - float(y)) ** 2 <= float(radius) ** 2
