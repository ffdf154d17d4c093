"""The path a call takes through rlviz's modules, measured as it runs: how many modules it enters, how often it moves
between them, and how often it goes back to a module it had left (a module that other modules keep calling back
into holds what they share, or is hosting what belongs elsewhere).

    python scripts/module_path.py load      # load_agent on the shipped MinAtar .pt2
    python scripts/module_path.py render    # a small render (8 episodes, heatmap, one video, gradient saliency)
    python scripts/module_path.py annotate  # RecordEpisode.annotate(logits=, value=) on CartPole to its MP4
    python scripts/module_path.py agents    # a PettingZoo recording (RecordParallelEpisode, 4 pistons, annotated)
    PYTHONPATH=/path/to/other/tree python scripts/module_path.py load   # another checkout, for a before/after

Each Python-level call (of those that receive the thing followed: the file's path or bytes for ``load``, a
``RenderConfig`` for ``render``) that enters an rlviz module other than the last one counts as a move (torch and
numpy calls in between are not rlviz modules and are skipped); a move into a module visited before, after the path
had left it, is a return. Printed: the totals, then the modules with the most returns; then the same at the
scale of packages (rlviz.sources.pt2, rlviz.evaluate, ...).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "minatar_breakout_ppo.pt2"


def _module_of(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name.startswith("rlviz") else None


def trace(fn, carries=None) -> list[str]:
    """The rlviz modules ``fn()`` enters, in order, consecutive repeats collapsed; with ``carries(value) -> bool``,
    only the calls that receive such a value (the path of one thing through the code: a RenderConfig, a file path)."""
    path: list[str] = []

    def profile(frame, event, arg):
        if event != "call":
            return
        mod = _module_of(frame)
        if mod is None or (path and path[-1] == mod):
            return
        if carries is not None:
            code = frame.f_code
            args = [frame.f_locals.get(n) for n in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]]
            if not any(carries(a) for a in args):
                return
        path.append(mod)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return path


def packages(path: list[str]) -> list[str]:
    """The same path at the scale of packages (a module's package; consecutive repeats collapsed)."""
    import importlib

    out: list[str] = []
    for mod in path:
        pkg = mod if hasattr(importlib.import_module(mod), "__path__") else mod.rpartition(".")[0]
        if not out or out[-1] != pkg:
            out.append(pkg)
    return out


def report(path: list[str], what: str) -> None:
    seen: set[str] = set()
    returns: Counter[str] = Counter()
    for i, mod in enumerate(path):
        if mod in seen and path[i - 1] != mod:
            returns[mod] += 1
        seen.add(mod)
    print(f"{what}: {len(seen)} modules entered, {len(path) - 1} moves between modules, "
          f"{sum(returns.values())} returns to a module it had left")
    for mod, n in returns.most_common(8):
        print(f"  {n:5d} returns to {mod}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("load", "render", "annotate", "agents"))
    args = ap.parse_args()
    import rlviz

    if args.what == "load":
        rlviz.load_agent(str(SAMPLE))  # (imports and caches warmed outside the trace)
        path = trace(lambda: rlviz.load_agent(str(SAMPLE)))
        report(path, f"load_agent({SAMPLE.name}), every call")
        report(packages(path), "  the same, by package")
        path = trace(lambda: rlviz.load_agent(str(SAMPLE)),
                     lambda a: isinstance(a, (str, Path, bytes)) and (str(a) == str(SAMPLE) or (
                         isinstance(a, bytes) and len(a) == SAMPLE.stat().st_size)))
        report(path, f"load_agent({SAMPLE.name}), the calls that receive its path or its bytes")
    elif args.what in ("annotate", "agents"):
        import numpy as np

        episode = _annotated_cartpole if args.what == "annotate" else _annotated_pistons
        with tempfile.TemporaryDirectory() as d:
            episode(Path(d) / "warm")
            path = trace(lambda: episode(Path(d) / "traced"))
            report(path, f"{episode.__doc__}, every call")
            report(packages(path), "  the same, by package")
            path = trace(lambda: episode(Path(d) / "traced2"), lambda a: isinstance(a, (np.ndarray, dict)))
            report(path, f"{episode.__doc__}, the calls that receive an array or a dict (the annotations, frames)")
    else:
        with tempfile.TemporaryDirectory() as d:
            def run(out: str) -> None:
                rlviz.render(rlviz.RenderConfig(checkpoint=str(SAMPLE), episodes=8, heatmap=True, videos="first:1",
                                                saliency="gradient", out=out))
            run(str(Path(d) / "warm"))
            path = trace(lambda: run(str(Path(d) / "traced")), lambda a: isinstance(a, rlviz.RenderConfig))
        report(path, "render(8 episodes, --heatmap, --videos first:1, --saliency gradient), the calls that receive "
                     "a RenderConfig")


def _annotated_cartpole(folder: Path) -> None:
    """RecordEpisode(CartPole-v1).annotate(logits, value), one 40-step episode to its MP4"""
    import gymnasium as gym
    import numpy as np

    from rlviz import RecordEpisode

    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array", max_episode_steps=40), str(folder))
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    done = False
    while not done:
        logits = rng.normal(size=2).astype(np.float32)
        env.annotate(logits=logits, value=float(logits[0]))
        _, _, term, trunc, _ = env.step(int(np.argmax(logits)))
        done = term or trunc
    env.close()


def _annotated_pistons(folder: Path) -> None:
    """RecordParallelEpisode(pistonball_v6, 4 pistons, 10 cycles).annotate(mean=, value=), one episode to its MP4"""
    import numpy as np
    from pettingzoo.butterfly import pistonball_v6

    try:
        from rlviz.record import RecordParallelEpisode
    except ImportError:  # (before 0.6: only from its module)
        from rlviz.record.pettingzoo import RecordParallelEpisode

    env = RecordParallelEpisode(pistonball_v6.parallel_env(render_mode="rgb_array", n_pistons=4, max_cycles=10),
                                str(folder))
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    while env.agents:
        acts = {a: rng.uniform(-1, 1, size=1).astype(np.float32) for a in env.agents}
        env.annotate(mean={a: v for a, v in acts.items()}, value={a: float(v[0]) for a, v in acts.items()})
        env.step(acts)
    env.close()


if __name__ == "__main__":
    main()
