"""attention_at_failure.png: the failure heatmap beside where the agent looked on the steps before failures."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..attention.maps import pooling
from .attention import attention_map, summarize_attention

__all__ = ["plot_attention_at_failure"]


def plot_attention_at_failure(result: Any, heatmap: Any, path: Any) -> Any:
    """attention_at_failure.png: the failure heatmap (all objects) beside the mean attribution over the steps before
    failures, in frame pixels, over the heatmap's background frame; None when no step preceded a failure."""
    from ..evaluate.failures.heatmap import HeatStyle, heat_figure, heat_panel, save_figure

    amap = attention_map(result.episodes)
    if amap is None or heatmap is None:
        return None
    from matplotlib.colors import Normalize

    frame_map = pooling(heatmap.frame_shape, amap.shape).up(amap)
    total = heatmap.total()
    fig, axes = heat_figure(heatmap.frame_shape, 2)
    heat_panel(fig, axes[0], "failure heatmap (all objects)", heatmap.background,
               np.ma.masked_where(total <= 0, total), HeatStyle("inferno", Normalize(0, max(int(total.max()), 1)), 0.85))
    heat_panel(fig, axes[1], "attention before failures", heatmap.background, frame_map / max(frame_map.max(), 1e-12),
               HeatStyle("viridis", Normalize(0, 1), 0.7, label="mean attribution (max = 1)"))
    att = summarize_attention(result.episodes, "") or {"objects": {}}
    parts = ", ".join(f"{n} {r['share_before_failure']:.3g} (elsewhere "
                      f"{'n/a' if r['share_elsewhere'] is None else format(r['share_elsewhere'], '.3g')})"
                      for n, r in att["objects"].items() if r["share_before_failure"] is not None)
    fig.suptitle(f"{heatmap.env_id}: share of attribution before failures: {parts}", fontsize=8)
    return save_figure(fig, path, 120)
