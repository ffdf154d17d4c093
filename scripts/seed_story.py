"""Seed 003's story, reproduced with rlviz: a JAX PPO on gymnax Breakout-MinAtar trained twice, once with the seed's
bug (the entropy bonus left out of the loss that is differentiated) and once fixed, each run evaluated from inside
its jit-compiled loop every K updates into a timeline folder (:class:`rlviz.integrations.jax_loop.JaxTimeline` called
through :func:`rlviz.jax.every`), then the two final agents compared on the same seeds (``rlviz compare buggy fixed
--heatmap --videos worst:1 --saliency gradient``).

    python scripts/seed_story.py --out story                 # the short setting (CI: tests/test_seed_story.py)
    python scripts/seed_story.py --out story --setting long  # the documented one (docs/story.md)

Writes into ``--out``: ``buggy/`` and ``fixed/`` (each a timeline folder: timeline.json, timeline.csv,
timeline.png, heatmaps, report.html, videos/step_<N>-worst-*.mp4), ``buggy.msgpack`` / ``fixed.msgpack`` (the final
params, ``{"actor", "critic"}``), ``compare/`` (the comparison) and ``story.json`` (the figures the docs quote:
each run's return, entropy, value explained variance, its timeline's ``first_seen``, the paired difference).
Deterministic: fixed seeds for training and evaluation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from seed_ppo import OBS_SHAPE, Actor, Critic, PPOConfig, make_train  # noqa: E402

ENV = "gymnax:Breakout-MinAtar"
MODEL, CRITIC = f"{HERE / 'seed_ppo.py'}:Actor", f"{HERE / 'seed_ppo.py'}:Critic"

#: ``updates`` of ``num_envs`` envs x ``num_steps`` steps, an evaluation every ``every`` updates on ``episodes`` seeds,
#: the comparison of the final agents on ``compare_episodes`` seeds. short (CI): 64 x 64 (4,096 env steps an update,
#: 409,600 a run; the cheapest setting where the story's conclusions held on training seeds 0, 1 and 2: docs/story.md);
#: long: 64 x 128 (8,192 an update, 2.05M a run)
SETTINGS = {
    "short": {"updates": 100, "num_envs": 64, "num_steps": 64, "every": 25, "episodes": 64, "compare_episodes": 100},
    "long": {"updates": 250, "num_envs": 64, "num_steps": 128, "every": 25, "episodes": 500, "compare_episodes": 1000},
}


def template_policy(hidden: int) -> Any:
    """The runs' :class:`~rlviz.jax.FlaxPolicy` (the loop's params replace its own at each evaluation). One for both
    runs: their evaluations share the engine compiled for its module and critic (``rlviz.training.jax_checkpoints``
    keys it by them), so the second run's evaluations reuse the rollout the first compiled."""
    import jax
    import jax.numpy as jnp

    from rlviz.jax import FlaxPolicy, FlaxPolicyOptions

    obs = jnp.zeros((1, *OBS_SHAPE))
    actor, critic = Actor(3, hidden), Critic(hidden)
    return FlaxPolicy(actor, actor.init(jax.random.PRNGKey(0), obs)["params"], critic=critic,
                      critic_params=critic.init(jax.random.PRNGKey(0), obs)["params"],
                      options=FlaxPolicyOptions(obs_shape=OBS_SHAPE))


class Trainer:
    """One ``jax.jit(make_train(cfg))`` for both runs, compiled once: the entropy flag is an argument of the compiled
    train (traced, :mod:`seed_ppo`), and its in-loop evaluations go to the timeline of the run in progress (a host
    function, looked up when called)."""

    def __init__(self, cfg: PPOConfig, every_k: int) -> None:
        import jax

        from rlviz.jax import every

        self.cfg, self.timeline = cfg, None
        self.train = jax.jit(make_train(cfg, callback=lambda u, a, c: every(every_k, u, self._evaluate, a, c)))

    def _evaluate(self, step: int, actor: Any, critic: Any) -> None:
        self.timeline(step, actor, critic)

    def __call__(self, timeline: Any, entropy_in_loss: bool) -> Any:
        import jax

        self.timeline = timeline
        return self.train(jax.random.PRNGKey(self.cfg.seed), jax.numpy.asarray(entropy_in_loss))


def train_run(out: Path, name: str, trainer: Trainer, entropy_in_loss: bool, episodes: int, template: Any) -> dict:
    """Train one run (``trainer``; the seed's bug: ``entropy_in_loss=False``) with its in-loop timeline in
    ``out/name``; save its final params; its figures. ``template``: :func:`template_policy`."""
    import flax.serialization
    import jax

    from rlviz import TimelineConfig
    from rlviz.integrations.jax_loop import JaxTimeline

    cfg = trainer.cfg
    folder = out / name
    timeline = JaxTimeline(folder, template, ENV, steps_per_update=cfg.steps_per_update, episodes=episodes,
                           videos="worst:1", config=TimelineConfig(run=str(folder), heatmap=True, saliency="gradient",
                                                                    seed=0, overwrite=True))
    t0 = time.perf_counter()
    actor, critic, metrics = jax.block_until_ready(trainer(timeline, entropy_in_loss))
    wall = time.perf_counter() - t0
    timeline.close()
    (out / f"{name}.msgpack").write_bytes(flax.serialization.to_bytes({"actor": actor, "critic": critic}))
    data = timeline.writer.data
    rows = data["checkpoints"]
    return {"train_seconds_with_evaluations": round(wall, 1), "env_steps": cfg.updates * cfg.steps_per_update,
            "first_seen": data["first_seen"], "regressions": data["regressions"],
            "checkpoints": [{"step": r["step"], "return": round(r["return"]["mean"], 3),
                             "entropy": round(r["mean_relative_entropy"], 4),
                             "value_ev": None if r.get("value_explained_variance") is None
                             else round(r["value_explained_variance"], 4),
                             "warnings": [f["id"] for f in r["diagnostics"] if f["severity"] == "warning"]}
                            for r in rows],
            "value_within_episodes": value_flatness(timeline.writer.checkpoints[-1].result.episodes)}


def value_flatness(episodes: Any) -> dict:
    """How much V and the discounted return-to-go G move within an episode (the seed's "value stuck at a fixed
    point"), from each episode's value sums ``(n, sum v, sum g, sum v^2, sum g^2, sum v*g)``: the pooled
    within-episode standard deviation of V (of G), over the steps of all episodes, and that relative to the mean of
    V (of G). A flat value panel: a small ``v_within_rel``."""
    sums = np.array([e.value_sums for e in episodes if e.value_sums is not None], np.float64)
    n, sv, sg, svv, sgg = sums[:, 0], sums[:, 1], sums[:, 2], sums[:, 3], sums[:, 4]
    within_v = float(np.sqrt(np.sum(svv - sv * sv / n) / n.sum()))
    within_g = float(np.sqrt(np.sum(sgg - sg * sg / n) / n.sum()))
    mean_v, mean_g = float(sv.sum() / n.sum()), float(sg.sum() / n.sum())
    return {"episodes": len(sums), "mean_length": round(float(n.mean()), 1), "v_mean": round(mean_v, 3),
            "g_mean": round(mean_g, 3), "v_within_std": round(within_v, 3), "g_within_std": round(within_g, 3),
            "v_within_rel": round(within_v / abs(mean_v), 3), "g_within_rel": round(within_g / abs(mean_g), 3)}


def compare_runs(out: Path, episodes: int) -> dict:
    """``rlviz compare buggy.msgpack fixed.msgpack --heatmap --videos worst:1 --saliency gradient`` on the same seeds;
    the paired difference (fixed - buggy) and each side's summary."""
    import rlviz

    done = rlviz.compare(a=str(out / "buggy.msgpack"), b=str(out / "fixed.msgpack"), model=MODEL, critic=CRITIC,
                         env=ENV, episodes=episodes, heatmap=True, videos="worst:1", saliency="gradient",
                         out=str(out / "compare"), overwrite=True)
    c = done.comparison
    return {"episodes": episodes, "return_diff": c["return_diff"], "prob_improvement": c.get("prob_improvement"),
            "a": _side(c["a"]), "b": _side(c["b"])}


def _side(summary: dict) -> dict:
    return {"return_mean": summary["returns"]["mean"], "return_std": summary["returns"]["std"],
            "entropy": summary["mean_relative_entropy"], "value_ev": summary.get("value_explained_variance"),
            "warnings": [f["id"] for f in summary.get("diagnostics", ()) if f["severity"] == "warning"]}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default="story", help="output folder (default: story)")
    p.add_argument("--setting", choices=sorted(SETTINGS), default="short", help="short: CI; long: docs/story.md")
    p.add_argument("--seed", type=int, default=0, help="training seed (the same for both runs)")
    p.add_argument("--lr", type=float, default=2.5e-3, help="Adam learning rate of actor and critic (default 2.5e-3)")
    p.add_argument("--updates", type=int, default=None, help="override the setting's number of updates")
    p.add_argument("--every", type=int, default=None, help="override the setting's updates between evaluations")
    p.add_argument("--episodes", type=int, default=None, help="override the seeds of each evaluation")
    p.add_argument("--compare-episodes", type=int, default=None, help="override the paired seeds of the comparison")
    p.add_argument("--num-envs", type=int, default=None, help="override the setting's envs per update")
    p.add_argument("--num-steps", type=int, default=None, help="override the setting's steps per env per update")
    args = p.parse_args(argv)
    s = dict(SETTINGS[args.setting])
    s.update({k: v for k, v in (("updates", args.updates), ("every", args.every), ("episodes", args.episodes),
                                ("compare_episodes", args.compare_episodes), ("num_envs", args.num_envs),
                                ("num_steps", args.num_steps)) if v is not None})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = PPOConfig(updates=s["updates"], num_envs=s["num_envs"], num_steps=s["num_steps"], lr=args.lr, seed=args.seed)
    story: dict[str, Any] = {"setting": args.setting, "config": {**base.__dict__, "every": s["every"],
                                                                 "episodes": s["episodes"]}}
    template, trainer = template_policy(base.hidden), Trainer(base, s["every"])
    for name, bonus in (("buggy", False), ("fixed", True)):
        story[name] = train_run(out, name, trainer, bonus, s["episodes"], template)
        print(f"{name}: {json.dumps(story[name]['checkpoints'][-1])}; first seen {story[name]['first_seen']}; value "
              f"within episodes {json.dumps(story[name]['value_within_episodes'])}", flush=True)
    t0 = time.perf_counter()
    story["compare"] = compare_runs(out, s["compare_episodes"])
    story["compare"]["seconds"] = round(time.perf_counter() - t0, 1)
    d = story["compare"]["return_diff"]
    print(f"fixed - buggy: {d['mean']:+.2f} (95% CI [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]) over "
          f"{story['compare']['episodes']} paired episodes; buggy {story['compare']['a']['return_mean']:.2f}, fixed "
          f"{story['compare']['b']['return_mean']:.2f}", flush=True)
    (out / "story.json").write_text(json.dumps(story, indent=1, default=float) + "\n")
    return story


if __name__ == "__main__":
    main()
