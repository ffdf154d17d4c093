"""The video frame's geometry and what it shows: :class:`ComposeOptions` (how it looks), :class:`PanelData` (the
panel's numbers at one frame), :class:`PanelLayout` (where everything goes) and :func:`panel_layout`, which computes
it. :class:`~rlviz.draw.compose.Compositor` draws with them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..episode.trace import EpisodeInternals
from ..errors import UsageError
from .overlay import ACTOR_COLOR
from .panels_dict import dict_panel_height
from .panels_features import feature_rows
from .style import ceil16, short, text_width, wrap_text

__all__ = ["ComposeOptions", "PanelData", "PanelLayout", "panel_layout"]


@dataclass(frozen=True)
class ComposeOptions:
    """How the video frame looks.

    display_height: target height in pixels of the game frame, reached by an integer nearest-neighbour
        upscale (10x10 MinAtar -> x48 = 480; 210x160 Atari -> x2 = 420; frames taller than it stay x1).
    panel_width: width of the side panel in pixels.
    min_height: the canvas is at least this tall (the panel needs room); it grows for many actions.
    saliency_color, saliency_alpha: overlay tint (RGB) and its strength where the map is 1.
    saliency_mode: "linear" (obs is a resized image of the frame, Atari), "nearest" (grid world,
        MinAtar) or "auto" ("nearest" when the frame size is a multiple of the map size, else "linear").
    font_scale: OpenCV Hershey font scale of the panel text.
    plot_height: height of the value / return-to-go plot in pixels.
    extras_height: height of the plot of the user's extra scalars (``annotate(**extra)``), when there are any.
    min_seconds: a video lasts at least this long (see :func:`video_timing`); 0 keeps one frame per step at
        the env's rate, as gymnasium's RecordVideo. ``rlviz render`` uses 2 s.
    """

    display_height: int = 480
    panel_width: int = 400
    min_height: int = 480
    saliency_color: tuple = ACTOR_COLOR
    saliency_alpha: float = 0.65
    saliency_mode: str = "auto"
    font_scale: float = 0.45
    plot_height: int = 150
    extras_height: int = 70
    min_seconds: float = 0.0


@dataclass(frozen=True)
class PanelData:
    """What the panel shows at frame t (of T steps; frame T has no action).

    action: an int (Discrete), int64 [parts] (MultiDiscrete/MultiBinary) or float32 [D] (Box); None at frame T.
    probs, logits: float32 [A] (logits are Q-values when kind == "q"; Box: logits = mean, probs empty);
    mean, std: Box: float32 [D] (std None when deterministic), else None;  value: V(s) / max Q or None;
    return_to_go: discounted return from t;  return_so_far: sum of rewards[:t];
    entropy: H / ln|A| in [0, 1];  lives: ALE lives or None.
    """

    t: int
    num_steps: int
    action: int | np.ndarray | None
    action_name: str | None
    probs: np.ndarray
    logits: np.ndarray
    kind: str
    value: float | None
    return_to_go: float
    return_so_far: float
    entropy: float
    lives: int | None
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    extras: dict | None = None


@dataclass(frozen=True)
class PanelLayout:
    """Pixel geometry of the canvas (x, y of top-left corners; all ints).

    game: (x, y, w, h) of the upscaled frame, ``scale`` its integer factor.
    bar_x0, bar_len: where the action bars (Box: the action tracks) start and their full length; bar_rows: y of
    each row's top, bar_h its height; plot: (x, y, w, h) of the value plot; entropy_bar: (x, y, len, h);
    extras_plot: (x, y, w, h) of the extra scalars' plot, or None.
    """

    width: int
    height: int
    scale: int
    game: tuple
    panel_x: int
    bar_x0: int
    bar_len: int
    bar_rows: tuple
    bar_h: int
    plot: tuple
    entropy_bar: tuple
    extras_plot: tuple | None = None
    features: tuple | None = None  # (x, y, w, row_h) of the per-feature saliency bars (vector observations)
    memory_strip: tuple | None = None  # (x, y, w, h) of the memory saliency strip under the game (recurrent policies)
    memory_plot: tuple | None = None  # (x, y, w, h) of the memory plot under the game (recurrent policies)
    mission: tuple | None = None  # (x, y, w, h) of the mission band under the header (MiniGrid's mission string)
    mission_lines: tuple = ()  # the mission band's text, one entry per line


def panel_layout(opt: ComposeOptions, frame_hw: tuple[int, int], action_names, internals: EpisodeInternals,
                 font_scale: float, lh: int, mission: str = "") -> tuple[PanelLayout, list[str]]:
    """The canvas's geometry for frames of ``frame_hw`` (H, W) and the panel's rows (one per action name; a text line
    is ``lh`` pixels at ``font_scale``), and the action names as the panel writes them (shortened). ``mission``: the
    episode's text goal (MiniGrid's), in a band under the header ("": no band, the layout of 0.4.0)."""
    fh, fw = frame_hw
    A = len(action_names)
    sal = internals.saliency
    vector_sal = sal is not None and sal.ndim == 2  # per-feature saliency [T+1, D]: bars, not a tint
    k = max(1, int(opt.display_height) // fh)
    gw, gh = fw * k, fh * k
    px, pw, m = gw, int(opt.panel_width), 12
    if pw < 200:
        raise UsageError(f"panel_width={pw}; the panel needs at least 200 pixels.")
    names = [short(n) for n in action_names]
    label_w = max(text_width(n, font_scale) for n in names + ["entropy"]) + 8
    num_w = text_width("-00.00", font_scale) + 6
    bar_x0 = px + m + label_w
    bar_len = pw - 2 * m - label_w - num_w
    y = m + 3 * lh  # header (3 lines)
    lines = tuple(wrap_text(f"mission: {mission}", pw - 2 * m, font_scale)) if mission else ()
    band = (px + m, y, pw - 2 * m, len(lines) * lh + 4) if lines else None
    y += (band[3] if band else 0) + 6 + lh  # (mission band), gap, bars title
    row_h = max(lh, 18) if A <= 9 else max(12, lh - 2)
    rows = tuple(y + i * row_h for i in range(A))
    y += A * row_h + 8 + lh + (lh if internals.mean is not None else 0)  # gap, (range), plot legend
    plot = (px + m, y, pw - 2 * m, int(opt.plot_height))
    y += plot[3] + 8 + lh + 6  # tick band + axis labels
    ebar = (bar_x0, y, bar_len, row_h - 4)
    y += row_h + 4
    extras = None
    if internals.extras:
        y += lh + 6
        extras = (px + m, y, pw - 2 * m, int(opt.extras_height))
        y += extras[3] + 4
    features = None
    if vector_sal and internals.saliency_keys:  # a Dict's keys: maps and bars (rlviz.draw.panels_dict)
        y += lh + 6
        features = (px + m, y, pw - 2 * m, lh)
        y += dict_panel_height(internals.saliency_keys, pw - 2 * m, lh) + 4
    elif vector_sal:  # title line, then one row per observation feature
        d = int(sal.shape[1])  # type: ignore[union-attr]
        y += lh + 6
        features = (px + m, y, pw - 2 * m, feature_rows(d, lh))
        y += d * features[3] + 4
    y += (2 if sal is not None else 1) * lh + m  # saliency line (and its colour scale)
    strip, mplot, left = _memory_boxes(internals, gw, gh, lh)
    height = ceil16(max(gh, int(opt.min_height), y, left))
    width = ceil16(gw + pw)
    game_y = 0 if left > gh else (height - gh) // 2  # with the memory under it, the game sits at the top
    layout = PanelLayout(width, height, k, (0, game_y, gw, gh), px, bar_x0, bar_len, rows, row_h - 4,
                         plot, ebar, extras, features, strip, mplot, band, lines)
    return layout, names


def _memory_boxes(internals: EpisodeInternals, gw: int, gh: int, lh: int) -> tuple:
    """(strip box or None, memory plot box or None, the height the game column needs) for a recurrent policy's
    memory under the game frame (none without memory: the feed-forward layout is unchanged)."""
    m, y, w = 12, gh, max(gw - 24, 160)
    strip = plot = None
    if internals.memory_saliency is not None:
        y += 8 + lh
        strip = (m, y, w, 22)
        y += 22 + lh + 6
    if internals.memory is not None:
        y += lh + 6
        plot = (m, y, w, 70)
        y += 70 + 8 + lh
    return strip, plot, (y + m if strip or plot else gh)
