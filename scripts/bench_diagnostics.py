"""Cost of the diagnostics: the whole ``rlviz render`` job with them against the same job without them.

    python scripts/bench_diagnostics.py                        # samples/minatar_breakout_ppo.pt2, 1000 episodes
    python scripts/bench_diagnostics.py --episodes 200 --repeats 5

"Without" swaps the rollout's per-episode accumulator for one whose ``fold`` does nothing and skips the
batch NaN check, the batch's observation keys (:func:`~rlviz.evaluate.statistics.diagnostics.obs_keys`) and
:func:`diagnose` (the hook's bare method call per episode and the step log's row of keys stay: what a disabled stage would cost). Runs are interleaved (on, off, off, on, ...) and repeated; prints each run's wall time, the
min and median of each variant and their ratio (with / without), measured in this same run, after a short
warm-up run that is not counted (the first load of an exported program is slow).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import tempfile
import time
from contextlib import contextmanager

import torch

from rlviz.jobs.render import render

rollout_mod = importlib.import_module("rlviz.evaluate.rollouts.rollout")  # the package exports a function of that name
lockstep_mod = importlib.import_module("rlviz.evaluate.rollouts.lockstep")
steplog_mod = importlib.import_module("rlviz.evaluate.rollouts.steplog")
render_mod = importlib.import_module("rlviz.jobs.render")


class _NoDiagnostics:
    __slots__ = ()

    def __init__(self, num_actions: int):
        pass

    def fold(self, keys, actions, entropies, rewards, bad=None) -> None:
        return None

    def finish(self) -> None:
        return None


@contextmanager
def diagnostics_off():
    saved = (rollout_mod.EpisodeDiagnostics, steplog_mod.nonfinite_rows, lockstep_mod.obs_keys,
             render_mod.diagnose)
    rollout_mod.EpisodeDiagnostics = _NoDiagnostics
    steplog_mod.nonfinite_rows = lambda logits, probs, value: None
    lockstep_mod.obs_keys = lambda batch: [0] * len(batch)
    render_mod.diagnose = lambda result, kind="actor_critic": []
    try:
        yield
    finally:
        (rollout_mod.EpisodeDiagnostics, steplog_mod.nonfinite_rows, lockstep_mod.obs_keys,
         render_mod.diagnose) = saved


def one_run(checkpoint: str, episodes: int, diagnostics: bool) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of this process, findings) of one render."""
    with tempfile.TemporaryDirectory() as out:
        t0, c0 = time.perf_counter(), time.process_time()
        if diagnostics:
            outputs = render(checkpoint=checkpoint, episodes=episodes, videos="none", progress=False, out=f"{out}/run",
                             device="cpu")
        else:
            with diagnostics_off():
                outputs = render(checkpoint=checkpoint, episodes=episodes, videos="none", progress=False, out=f"{out}/run",
                                 device="cpu")
        return time.perf_counter() - t0, time.process_time() - c0, len(outputs.summary["diagnostics"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", default="samples/minatar_breakout_ppo.pt2")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    times: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    one_run(args.checkpoint, min(args.episodes, 8), True)  # warm-up, not counted (first load of the program)
    for r in range(args.repeats):
        order = (True, False) if r % 2 == 0 else (False, True)
        for on in order:
            wall, c, n = one_run(args.checkpoint, args.episodes, on)
            times[on].append(wall)
            cpu[on].append(c)
            print(f"repeat {r} diagnostics {'on ' if on else 'off'}: {wall:7.2f} s wall, {c:7.2f} s CPU ({n} findings)",
                  flush=True)
    print(f"{args.checkpoint}, {args.episodes} episodes, {args.repeats} repeats, interleaved")
    for what, t in (("wall", times), ("CPU", cpu)):
        on_min, off_min = min(t[True]), min(t[False])
        on_med, off_med = statistics.median(t[True]), statistics.median(t[False])
        print(f"{what:>4} with diagnostics:    min {on_min:7.2f} s  median {on_med:7.2f} s")
        print(f"{what:>4} without diagnostics: min {off_min:7.2f} s  median {off_med:7.2f} s")
        print(f"{what:>4} ratio with/without:  min {on_min / off_min:.3f}  median {on_med / off_med:.3f}")


if __name__ == "__main__":
    main()
