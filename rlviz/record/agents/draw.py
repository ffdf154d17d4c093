"""Drawing and encoding one multi-agent panel video: :func:`draw_agents_video`, run in the recorder's drawing process
(:mod:`rlviz.record.agents.draw_worker`) or on its writer thread. Numbers in, an MP4 out; nothing here imports torch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["draw_agents_video"]


def draw_agents_video(path: str, fps: float, frames: Any, timelines: Sequence[Any], layout: Any, label: str,
                      preset: str, crf: int) -> None:
    """Draw :class:`~rlviz.draw.panels_agents.AgentsCompositor`'s frames over ``frames`` (uint8 [N+1, H, W, 3], a
    spool read in chunks) with each agent's ``timelines`` (:class:`~rlviz.draw.panels_agents.AgentTimeline`, in
    column order) and encode them to ``path`` (H.264, YUV 4:2:0, written under a temporary name, renamed when
    complete)."""
    from ...draw.panels_agents import AgentsCompositor
    from ...media.video import VideoWriter

    comp = AgentsCompositor(frames.shape[1:3], list(timelines), layout, label)
    buf = np.empty((comp.size[1], comp.size[0], 3), np.uint8)
    with VideoWriter(path, fps, comp.size, preset=preset, crf=crf, yuv=True) as writer:
        for start in range(0, len(frames), 8):
            for i, frame in enumerate(frames[start: start + 8]):
                writer.write(comp.render(start + i, frame, out=buf))
