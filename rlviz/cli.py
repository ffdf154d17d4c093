"""``rlviz`` command line: flags -> :class:`rlviz.render.RenderConfig` -> one library call.

Exit codes: 0 success, 1 failure (bad checkpoint, env error...), 2 usage error, 130 interrupted.
User errors print one line, no traceback (``--debug`` shows it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import RlvizError

__all__ = ["main", "build_parser"]

EXAMPLES = """\
examples:
  rlviz render samples/minatar_breakout_ppo.pt2 --episodes 1000 --heatmap
  rlviz render samples/ale_breakout_ppo.pt2 --episodes 100 --videos worst:1,best:1 --saliency perturbation
  rlviz render model.zip --env CartPole-v1 --episodes 50            # Stable-Baselines3 model
  rlviz render state.pt --model mypkg.nets:Agent --env ALE/Pong-v5   # a state_dict + its class
  rlviz render agent.pt2 --episodes 200 --wandb my-project --tensorboard runs/eval
"""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, received {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, received {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlviz",
        description="See what your RL agent does and why: episode videos with the agent's internals, "
        "saliency, failure heatmaps and statistics over many rollouts.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
    )
    parser.add_argument("--version", action="version", version=f"rlviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    r = sub.add_parser(
        "render",
        help="roll out an agent, write statistics, a failure heatmap and videos of chosen episodes",
        description="Roll out CHECKPOINT for N episodes; write summary.json, episodes.csv, the failure "
        "heatmap (PNG + npz) and MP4 videos (game + action probabilities, value, entropy, saliency).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
    )
    r.add_argument("checkpoint", type=Path, help="rlviz checkpoint (.pt2), SB3 .zip, or torch file (see --model)")
    r.add_argument("--env", help="env id (needed for SB3 zips and state_dicts; overrides the checkpoint's)")
    r.add_argument("--model", help="'module:Class' building the network of a state_dict checkpoint")
    r.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="allow unpickling a full-module torch file (runs code from the file: only for files you trust)",
    )
    r.add_argument("--episodes", type=_positive_int, default=10, help="episodes to roll out (default 10)")
    r.add_argument("--heatmap", action="store_true", help="count object positions on the step before each failure")
    r.add_argument(
        "--videos",
        default="first:1",
        help="episodes to render: comma list of first:K, worst:K, best:K, median:K, random:K, or 'none' "
        "(default first:1)",
    )
    r.add_argument("--out", type=Path, default=Path("rlviz-out"), help="output folder (default ./rlviz-out)")
    r.add_argument("--seed", type=int, default=0, help="base seed; episode k uses a seed derived from it")
    r.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:N")
    r.add_argument(
        "--saliency", choices=["none", "gradient", "smoothgrad", "perturbation"], default="none",
        help="saliency overlay in the videos (default none)",
    )
    r.add_argument(
        "--saliency-target", default="action",
        help="what the saliency explains: action (chosen logit), logprob, value, or an action index",
    )
    r.add_argument("--greedy", action="store_true", help="take the most likely action instead of sampling")
    r.add_argument("--num-envs", type=_positive_int, default=16, help="parallel envs for rollouts (default 16)")
    r.add_argument(
        "--fail-on", choices=["auto", "termination", "life-loss"], default="auto",
        help="what counts as a failure (auto: life loss when the env has lives)",
    )
    r.add_argument("--objects", help="'module:function' object extractor for the heatmap (default by env)")
    r.add_argument("--log-scale", action="store_true", help="log colour scale for the heatmap")
    r.add_argument("--gamma", type=float, default=None, help="discount for return-to-go (default: checkpoint's)")
    r.add_argument("--wandb", metavar="PROJECT", help="log videos, heatmap and statistics to this W&B project")
    r.add_argument("--wandb-run", metavar="NAME", help="W&B run name")
    r.add_argument("--tensorboard", metavar="LOGDIR", type=Path, help="log to TensorBoard event files here")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from .render import RenderConfig, render

        config = RenderConfig(
            checkpoint=args.checkpoint,
            env=args.env,
            model=args.model,
            trust_checkpoint=args.trust_checkpoint,
            episodes=args.episodes,
            heatmap=args.heatmap,
            videos=args.videos,
            out=args.out,
            seed=args.seed,
            device=args.device,
            saliency=None if args.saliency == "none" else args.saliency,
            saliency_target=args.saliency_target,
            greedy=args.greedy,
            num_envs=args.num_envs,
            fail_on=args.fail_on,
            objects=args.objects,
            log_scale=args.log_scale,
            gamma=args.gamma,
            wandb_project=args.wandb,
            wandb_run=args.wandb_run,
            tensorboard=args.tensorboard,
            progress=not args.no_progress,
        )
        outputs = render(config)
    except RlvizError as exc:
        if args.debug:
            raise
        print(f"rlviz: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("rlviz: interrupted; no partial outputs were left under final names", file=sys.stderr)
        return 130
    except Exception as exc:  # an rlviz bug or an unexpected library failure
        if args.debug:
            raise
        print(f"rlviz: error: {type(exc).__name__}: {exc} (run again with --debug for the traceback)", file=sys.stderr)
        return 1
    print(outputs.table)
    print(f"outputs in {outputs.out_dir}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
