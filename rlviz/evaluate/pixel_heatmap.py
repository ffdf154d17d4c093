"""Failure heatmaps from rendered frames, at the cost of the frames they read.

An object extractor that reads rendered frames (``needs_frame``: :class:`~rlviz.evaluate.objects.MotionExtractor`,
user functions) would make a rollout render every step, although the heatmap reads only the few frames
before each failure (CartPole: 3 ms a frame in pygame against 29 us a step). So the rollout renders
nothing: it keeps each running episode's actions (one small int a step, no frames) and the frame indices
before its failures, and when an episode ends with failures :class:`FailureReplay` plays it again on its
own env, from the same seed with the same actions (no policy call, so batched-forward float noise cannot
change it), rendering only

1. the frame before each failure, plus the ``history`` frames the extractor remembers (the previous frame
   for motion); when every object is visible there, that is the answer (the common case);
2. otherwise the whole ``lookback`` window before that failure (an object that left the screen is taken
   from the newest frame where it is), in a second replay.

The counts are those of capturing every step (tests compare both on CartPole and ALE Breakout).
"""

from __future__ import annotations

import warnings
from array import array
from collections.abc import Callable

from ..envs.ale_seed import seeded_reset
from ..envs.frames import to_rgb_frame
from .heatmap import FailureHeatmap
from .objects import Extractor, last_seen

__all__ = ["FailureReplay"]


class FailureReplay:
    """Adds the masks of an ended episode's failures to ``heatmap`` by replaying it on an env of its own.

    make_env: () -> a fresh env (``render_mode="rgb_array"``) built like the rollout's; made on first use.
    """

    def __init__(self, make_env: Callable, extractor: Extractor, heatmap: FailureHeatmap, lookback: int,
                 num_actions: int):
        self._make_env, self.env, self.num_actions = make_env, None, int(num_actions)
        self.extractor, self.heatmap = extractor, heatmap
        self.lookback, self.history = max(1, int(lookback)), max(0, int(getattr(extractor, "history", 0)))
        self.frames_rendered = 0

    def action_log(self) -> array:
        """An empty, compact log for one episode's actions (1 byte a step for up to 256 actions)."""
        return array("B" if self.num_actions <= 256 else "q")

    def add(self, seed: int | None, actions, fail_frames: list[int]) -> None:
        """Episode reset with ``seed`` and stepped with ``actions``; ``fail_frames``: the frame index (steps
        taken) on which each failing action was chosen."""
        if not fail_frames:
            return
        found = self._play(seed, actions, {t: t for t in fail_frames})
        incomplete = {t: max(0, t - self.lookback + 1) for t, m in found.items() if not all(v.any() for v in m.values())}
        if incomplete:
            found.update(self._play(seed, actions, incomplete))
        for t in fail_frames:
            if t in found:
                self.heatmap.add(found[t])

    def _play(self, seed, actions, windows: dict[int, int]) -> dict[int, dict]:
        """Replay up to the last failure; ``windows`` {failure frame t: first frame of its window}.
        Returns {t: last_seen masks over frames t, t-1, ... down to its window's first frame}."""
        if self.env is None:
            self.env = self._make_env()
        env, ex = self.env, self.extractor
        render = set()
        for t, start in windows.items():
            render.update(range(max(0, start - self.history), t + 1))
        seeded_reset(env, seed) if seed is not None else env.reset()
        ex.begin_episode(env)
        captures: dict[int, object] = {}
        out: dict[int, dict] = {}
        last = max(windows)
        for s in range(last + 1):
            if s in render:
                captures[s] = ex.capture(to_rgb_frame(env.render()), env)
                self.frames_rendered += 1
            if s in windows:
                out[s] = last_seen(ex, (captures[u] for u in range(s, windows[s] - 1, -1)))
            keep_from = min((windows[t] for t in windows if t > s), default=s + 1)
            for u in [u for u in captures if u < keep_from]:
                del captures[u]  # (what a capture remembers lives in the extractor)
            if s == last:
                break
            _, _, terminated, truncated, _ = env.step(int(actions[s]))
            if terminated or truncated:
                warnings.warn(
                    f"Replaying episode seed {seed} for the heatmap, the env ended at step {s + 1} but the rollout "
                    f"went on to step {last + 1}: the env is not deterministic under its seed; "
                    "this episode's later failures are left out of the heatmap.",
                    stacklevel=3,
                )
                break
        return out

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None
