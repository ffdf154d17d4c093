#!/usr/bin/env python
"""Benchmark: rlviz's compositor and video pipeline against matplotlib and gymnasium RecordVideo.

    python scripts/bench_render.py                       # 2 Breakout episodes, <= 500 steps each
    python scripts/bench_render.py --episodes 5 --max-steps 3000 --mpl-frames 600 --repeats 5
    python scripts/bench_render.py --saliency gradient   # overlay in both compositors

ALE Breakout (rlviz.envs.make_env) played by a random-weight Nature CNN (rlviz.models.NatureCNNAgent,
TorchPolicy, sampled actions with seeded rngs, so every method plays the same episodes). Measured in one
run, on the same episodes (frames per second; ratios are what to quote, absolute speeds drift here):

  (a) gymnasium RecordVideo (raw game frames, moviepy) - wall clock of playing + recording + encoding;
      rlviz RecordEpisode (game + panels, streamed H.264) on the same episodes, and bare playing.
  (b) a matplotlib panel compositor: one reused figure, artists updated with set_data/set_width/set_text,
      canvas.draw() + buffer_rgba() per frame; also its blitting variant (restore_region + draw_artist).
  (c) rlviz Compositor.render alone (static parts drawn once per episode, included in the time).
  (d) the encoder alone: VideoWriter on the pre-rendered frames of (c) (same size, preset).
  (e) rlviz's whole pipeline: write_episode_video (compose + encode) on the recorded traces.

Targets: (c) >= 10x (b); (e) >= 0.7x (d).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlviz.agent.models import NatureCNNAgent  # noqa: E402
from rlviz.agent.policy import TorchPolicy, action_names_for  # noqa: E402
from rlviz.draw.compose import COLORS, Compositor  # noqa: E402
from rlviz.draw.overlay import blend, saliency_to_frame  # noqa: E402
from rlviz.draw.video import write_episode_video  # noqa: E402
from rlviz.envs import make_env  # noqa: E402
from rlviz.episode import EpisodeTrace, Spool  # noqa: E402
from rlviz.media.video import VideoWriter  # noqa: E402
from rlviz.record import RecordEpisode, RecordOptions, compute_internals, run_episode  # noqa: E402

ENV_ID = "ALE/Breakout-v5"


def make(max_steps: int):
    import gymnasium as gym

    return gym.wrappers.TimeLimit(make_env(ENV_ID), max_episode_steps=max_steps)


def play(env, policy, seed: int, on_step=None) -> int:
    """One episode exactly as rlviz.record.run_episode plays it (same seeds -> same episode)."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    if on_step:
        on_step(env, obs, info, None, 0.0)
    steps, done = 0, False
    while not done:
        action, _ = policy.act(np.asarray(obs)[None], rng=rng)
        obs, reward, terminated, truncated, info = env.step(int(action[0]))
        steps += 1
        done = terminated or truncated
        if on_step:
            on_step(env, obs, info, int(action[0]), float(reward), terminated, truncated)
    return steps


def record_trace(policy, seed: int, max_steps: int, episode_id: int, spool_dir: str) -> EpisodeTrace:
    """Play one episode and keep what rlviz needs (frames and observations spooled to disk)."""
    env = make(max_steps)
    rec: dict = {}

    def on_step(env, obs, info, action, reward, terminated=False, truncated=False):
        frame, o = env.render(), np.asarray(obs)
        if action is None:
            rec.update(frames=Spool(frame.shape, np.uint8, spool_dir, "frames"), obs=Spool(o.shape, o.dtype, spool_dir),
                       actions=[], rewards=[], lives=[info.get("lives", 0)], end=(False, False))
        else:
            rec["actions"].append(action)
            rec["rewards"].append(reward)
            rec["lives"].append(info.get("lives", 0))
            rec["end"] = (bool(terminated), bool(truncated))
        rec["frames"].append(frame)
        rec["obs"].append(o)

    play(env, policy, seed, on_step)
    trace = EpisodeTrace(
        frames=rec["frames"].view(), observations=rec["obs"].view(),
        actions=np.asarray(rec["actions"], np.int64), rewards=np.asarray(rec["rewards"], np.float32),
        lives=np.asarray(rec["lives"], np.int32), terminated=rec["end"][0], truncated=rec["end"][1],
        action_names=tuple(action_names_for(env, policy.num_actions)), episode_id=episode_id, seed=seed,
        fps=float(env.metadata.get("render_fps") or 30), env_id=ENV_ID,
    )
    env.close()
    return trace


class MplCompositor:
    """The same panels drawn with matplotlib: one figure, artists updated in place (an honest baseline)."""

    def __init__(self, trace: EpisodeTrace, internals, size: tuple[int, int], game_w: int, blit: bool = False):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.trace, self.it, self.blit = trace, internals, blit
        w, h = size
        dpi = 100
        rgb = [c / 255 for c in COLORS["background"]]
        self.fig = fig = Figure(figsize=(w / dpi, h / dpi), dpi=dpi, facecolor=rgb)
        self.canvas = FigureCanvasAgg(fig)
        T, A = trace.num_steps, len(trace.action_names)
        gx = game_w / w
        ax = fig.add_axes([0, 0, gx, 1])
        self.im = ax.imshow(self._game(0), interpolation="nearest")
        ax.set_axis_off()
        px = gx + 0.12
        pw = 1 - px - 0.02
        axb = fig.add_axes([px, 0.58, pw, 0.28], facecolor=rgb)
        self.bars = axb.barh(np.arange(A), internals.probs[0], color="#5c84c8")
        axb.set_yticks(np.arange(A), trace.action_names, fontsize=8, color="w")
        axb.set_xlim(0, 1)
        axb.invert_yaxis()
        axb.set_title("action probabilities", fontsize=8, color="w")
        axv = fig.add_axes([px - 0.1, 0.18, pw + 0.1, 0.32], facecolor=[c / 255 for c in COLORS["plot"]])
        series = [internals.returns_to_go] + ([internals.value] if internals.value is not None else [])
        lo, hi = float(min(s.min() for s in series)), float(max(s.max() for s in series))
        axv.set_xlim(0, max(T, 1))
        axv.set_ylim(lo - 0.05 * (hi - lo) - 1e-3, hi + 0.05 * (hi - lo) + 1e-3)
        axv.tick_params(labelsize=7, colors="w")
        self.tt = np.arange(T + 1)
        self.vline = axv.plot([], [], color="#5ac8ff", lw=1, label="value")[0]
        self.rline = axv.plot([], [], color="#ff78c8", lw=1, label=f"return-to-go (gamma={internals.gamma:g})")[0]
        self.cursor = axv.axvline(0, color="#c8c8c8", lw=1)
        self.rew_t = np.flatnonzero(np.asarray(trace.rewards) != 0) + 1
        self.rew = axv.plot([], [], "|", color="#78e678", ms=8)[0]
        self.rew_y = axv.get_ylim()[0]
        axv.legend(fontsize=7, loc="upper right")
        axe = fig.add_axes([px, 0.07, pw, 0.05], facecolor=rgb)
        self.ebar = axe.barh([0], [internals.entropy[0]], color="#b48cff")[0]
        axe.set_xlim(0, 1)
        axe.set_yticks([0], ["entropy"], fontsize=8, color="w")
        self.texts = [fig.text(gx + 0.02, 0.95 - 0.04 * i, "", color="w", fontsize=9) for i in range(3)]
        self.animated = [self.im, *self.bars, self.vline, self.rline, self.cursor, self.rew, self.ebar, *self.texts]
        if blit:
            for a in self.animated:
                a.set_animated(True)
            self.canvas.draw()
            self.background = self.canvas.copy_from_bbox(fig.bbox)

    def _game(self, t):
        frame = np.asarray(self.trace.frames[t])
        if self.it.saliency is not None:
            frame = blend(frame, saliency_to_frame(np.asarray(self.it.saliency[t]), frame.shape[:2], "linear"))
        return frame

    def render(self, t: int) -> np.ndarray:
        tr, it = self.trace, self.it
        self.im.set_data(self._game(t))
        action = int(tr.actions[t]) if t < tr.num_steps else None
        for a, (bar, p) in enumerate(zip(self.bars, it.probs[t])):
            bar.set_width(float(p))
            bar.set_color("#ffb028" if a == action else "#5c84c8")
        if it.value is not None:
            self.vline.set_data(self.tt[: t + 1], it.value[: t + 1])
        self.rline.set_data(self.tt[: t + 1], it.returns_to_go[: t + 1])
        self.cursor.set_xdata([t, t])
        shown = self.rew_t[self.rew_t <= t]
        self.rew.set_data(shown, np.full(shown.shape, self.rew_y))
        self.ebar.set_width(float(it.entropy[t]))
        name = tr.action_names[action] if action is not None else "-"
        self.texts[0].set_text(f"step {t}/{tr.num_steps}   return {float(np.sum(tr.rewards[:t])):g}")
        self.texts[1].set_text(f"action {name}   lives {tr.lives[t]}")
        value = f"value {float(it.value[t]):.3f}   " if it.value is not None else ""
        self.texts[2].set_text(value + f"to go {float(it.returns_to_go[t]):.3f}")
        if self.blit:
            self.canvas.restore_region(self.background)
            for a in self.animated:
                self.fig.draw_artist(a)
        else:
            self.canvas.draw()
        return np.asarray(self.canvas.buffer_rgba())[..., :3].copy()


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=500, help="time limit per episode (steps)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--preset", default="veryfast")
    ap.add_argument("--mpl-frames", type=int, default=150, help="frames drawn by each matplotlib variant")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of (c), (d), (e); the median is reported")
    ap.add_argument("--saliency", choices=["gradient"], default=None, help="include a saliency overlay")
    ap.add_argument("--skip-recordvideo", action="store_true")
    ap.add_argument("--torch-threads", type=int, default=1, help="torch CPU threads (1 avoids oversubscription)")
    args = ap.parse_args(argv)

    torch.set_num_threads(max(1, args.torch_threads))
    torch.manual_seed(args.seed)
    probe = make(10)
    num_actions = int(probe.action_space.n)
    probe.close()
    policy = TorchPolicy(NatureCNNAgent(num_actions), device="cpu")
    seeds = [args.seed + k for k in range(args.episodes)]
    work = Path(tempfile.mkdtemp(prefix="rlviz-bench-"))
    print(f"# bench_render: {ENV_ID}, {args.episodes} episodes (<= {args.max_steps} steps), preset {args.preset}, "
          f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")
    try:
        # -- play: bare, then rlviz's trace (internals computed in batches), then both recorders
        play(make(20), policy, args.seed)  # warm-up: torch, ALE ROM load, first allocations
        t0 = time.perf_counter()
        bare_steps = sum(play(make(args.max_steps), policy, s) for s in seeds)
        t_bare = time.perf_counter() - t0
        t0 = time.perf_counter()
        traces = [record_trace(policy, s, args.max_steps, k, str(work)) for k, s in enumerate(seeds)]
        internals = [compute_internals(tr, policy, 0.99, args.saliency) for tr in traces]
        t_trace = time.perf_counter() - t0
        frames = sum(tr.num_steps + 1 for tr in traces)
        assert sum(tr.num_steps for tr in traces) == bare_steps, "episodes differ between runs"
        comps = [Compositor(tr, it) for tr, it in zip(traces, internals)]
        size = comps[0].size
        print(f"episodes: {[tr.num_steps for tr in traces]} steps, {frames} frames; canvas {size[0]}x{size[1]}")

        t_rv = None
        try:
            import moviepy  # noqa: F401  (RecordVideo encodes through it)
        except ImportError:
            print("moviepy is not installed (pip install moviepy): skipping gymnasium RecordVideo")
            args.skip_recordvideo = True
        if not args.skip_recordvideo:
            import gymnasium as gym

            env = gym.wrappers.RecordVideo(make(args.max_steps), str(work / "recordvideo"),
                                           episode_trigger=lambda e: True, disable_logger=True)
            t0 = time.perf_counter()
            rv_steps = sum(play(env, policy, s) for s in seeds)
            env.close()
            t_rv = time.perf_counter() - t0
            assert rv_steps == bare_steps, "RecordVideo episodes differ"
        env = RecordEpisode(make(args.max_steps), work / "rlviz", policy=policy,
                            options=RecordOptions(saliency=args.saliency, save_data=False, spool_dir=str(work)))
        t0 = time.perf_counter()
        re_steps = sum(run_episode(env, seed=s, rng=s).length for s in seeds)
        env.close()
        t_re = time.perf_counter() - t0
        assert re_steps == bare_steps, "RecordEpisode episodes differ"

        # -- (b) matplotlib, on frames spread over the episodes
        stride = max(1, frames // max(args.mpl_frames, 1))
        mpl = {}
        for blit in (False, True):
            n, t_sum = 0, 0.0
            for tr, it, comp in zip(traces, internals, comps):
                t0 = time.perf_counter()
                m = MplCompositor(tr, it, size, comp.layout.game[2], blit=blit)
                for t in range(0, tr.num_steps + 1, stride):
                    m.render(t)
                    n += 1
                t_sum += time.perf_counter() - t0
            mpl[blit] = rate(n, t_sum)

        # -- (c) compose alone, (d) encoder alone, (e) whole pipeline; interleaved repeats
        rendered = Spool((size[1], size[0], 3), np.uint8, str(work), "rendered")
        buf = np.empty((size[1], size[0], 3), np.uint8)
        for tr, comp in zip(traces, comps):
            for t in range(tr.num_steps + 1):
                rendered.append(comp.render(t, out=buf))
        pre = rendered.view()
        rc, rd, re = [], [], []
        for r in range(args.repeats):
            t0 = time.perf_counter()
            for tr, it in zip(traces, internals):
                comp = Compositor(tr, it)
                for t in range(tr.num_steps + 1):
                    comp.render(t, out=buf)
            rc.append(rate(frames, time.perf_counter() - t0))
            t0 = time.perf_counter()
            start = 0
            for k, tr in enumerate(traces):
                with VideoWriter(work / f"enc-{r}-{k}.mp4", tr.fps, size, preset=args.preset) as w:
                    for i in range(start, start + tr.num_steps + 1):
                        w.write(pre[i])
                start += tr.num_steps + 1
            rd.append(rate(frames, time.perf_counter() - t0))
            t0 = time.perf_counter()
            for k, (tr, it) in enumerate(zip(traces, internals)):
                write_episode_video(tr, it, work / f"pipe-{r}-{k}.mp4", preset=args.preset)
            re.append(rate(frames, time.perf_counter() - t0))
        c, d, e = statistics.median(rc), statistics.median(rd), statistics.median(re)

        print("\n| what | frames/s |")
        print("|---|---|")
        print(f"| play only (step + policy) | {rate(frames, t_bare):.0f} |")
        print(f"| play + rlviz trace + internals (batched) | {rate(frames, t_trace):.0f} |")
        if t_rv is not None:
            print(f"| (a) gymnasium RecordVideo, play + record raw frames | {rate(frames, t_rv):.0f} |")
        print(f"| (a') rlviz RecordEpisode, play + record game + panels | {rate(frames, t_re):.0f} |")
        print(f"| (b) matplotlib panel, canvas.draw per frame | {mpl[False]:.1f} |")
        print(f"| (b') matplotlib panel, blitting | {mpl[True]:.1f} |")
        print(f"| (c) rlviz Compositor.render | {c:.0f} |")
        print(f"| (d) encoder alone (libx264 {args.preset}, {size[0]}x{size[1]}) | {d:.0f} |")
        print(f"| (e) rlviz compose + encode (write_episode_video) | {e:.0f} |")
        print("\nratios (same run):")
        print(f"  compose vs matplotlib draw:  {c / mpl[False]:.1f}x   (target >= 10x)")
        print(f"  compose vs matplotlib blit:  {c / mpl[True]:.1f}x")
        print(f"  pipeline vs encoder alone:   {e / d:.2f}x   (target >= 0.7x)")
        if t_rv is not None:
            print(f"  RecordVideo vs play only:    {t_bare / t_rv:.2f}x")
            print(f"  RecordEpisode vs RecordVideo: {t_rv / t_re:.2f}x  (rlviz also draws panels + internals)")
        print(f"  RecordEpisode vs play only:  {t_bare / t_re:.2f}x")
        print(f"  repeats (c) {[round(x) for x in rc]}  (d) {[round(x) for x in rd]}  (e) {[round(x) for x in re]}")
        rendered.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
