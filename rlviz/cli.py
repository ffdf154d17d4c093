"""``rlviz`` command line: flags -> a config dataclass -> one library call.

The flags are generated from the config dataclasses' fields (:mod:`rlviz.config`), so each option is written
once. Exit codes: 0 success, 1 failure (bad checkpoint, env error...), 2 usage error, 3 a diagnostics warning
with ``--strict`` (every output is still written), 130 interrupted.
Errors print one line, no traceback (``--debug`` shows it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from . import progress
from ._version import __version__
from .config import CompareConfig, ExploreConfig, PushConfig, RenderConfig, TimelineConfig, cli_options
from .errors import Interrupted, RlvizError, did_you_mean

__all__ = ["main", "build_parser"]

EXAMPLES = """\
examples:
  rlviz render samples/minatar_breakout_ppo.pt2 --episodes 1000 --heatmap
  rlviz render samples/ale_breakout_ppo.pt2 --episodes 100 --videos worst:1,best:1 --saliency perturbation
  rlviz render model.zip --env CartPole-v1 --episodes 50            # Stable-Baselines3 model
  rlviz render state.pt --model mypkg.nets:Agent --env ALE/Pong-v5   # a state_dict + its class
  rlviz render agent.pt2 --episodes 200 --wandb my-project --tensorboard runs/eval
  rlviz compare before.pt2 after.pt2 --episodes 1000 --heatmap --videos worst:1   # same seeds, error bars
  rlviz render model.zip --env CartPole-v1 --episodes 100 --push-to-hub me/ppo-CartPole-v1   # then publish it
  rlviz timeline checkpoints/ --env CartPole-v1 --episodes 100 --follow   # every checkpoint of a training run
  rlviz explore rlviz-out                 # the run in a browser: click a heatmap cell, watch those episodes
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (with "did you mean" for a mistyped flag), exit code 2."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        if message.startswith("unrecognized arguments:"):
            flags = [a for a in message.split(":", 1)[1].split() if a.startswith("-")]
            known = [s for a in self._actions for s in a.option_strings]
            for sub in self._subparsers._group_actions if self._subparsers else ():
                for p in getattr(sub, "choices", {}).values():
                    known += [s for a in p._actions for s in a.option_strings]
            if flags:
                message += "." + did_you_mean(flags[0].split("=")[0], known)
        elif "invalid choice:" in message:
            import re

            m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
            if m:
                choices = [c.strip(" '") for c in m.group(2).split(",")]
                message += "." + did_you_mean(m.group(1), choices)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_config_arguments(parser: argparse.ArgumentParser, config_cls) -> None:
    """One argument per field of ``config_cls`` that carries CLI metadata (see :func:`rlviz.config.option`)."""
    for opt in cli_options(config_cls):
        if opt.positional:
            extra: dict[str, Any] = {"nargs": opt.nargs, "metavar": opt.metavar} if opt.nargs else {}
            parser.add_argument(opt.name, help=opt.help, **extra)
        elif opt.kind == "switch":
            parser.add_argument(str(opt.flag), dest=opt.name, action="store_true", help=opt.help)
        elif opt.kind == "negated":
            parser.add_argument(str(opt.flag), dest=opt.name, action="store_false", help=opt.help)
        elif opt.kind == "append":
            parser.add_argument(str(opt.flag), dest=opt.name, action="append", metavar=opt.metavar, help=opt.help,
                                default=argparse.SUPPRESS)
        elif opt.kind == "optional":
            parser.add_argument(str(opt.flag), dest=opt.name, nargs="?", const=opt.const, metavar=opt.metavar,
                                help=opt.help, default=argparse.SUPPRESS)
        else:
            parser.add_argument(str(opt.flag), dest=opt.name, choices=opt.choices, metavar=opt.metavar, help=opt.help,
                                default=argparse.SUPPRESS)
    parser.set_defaults(**{o.name: _cli_default(o) for o in cli_options(config_cls) if not o.positional})


def _cli_default(opt):
    if opt.kind == "append":
        return []  # (argparse appends to it)
    if opt.cli_default == "tty":
        return sys.stderr.isatty()
    return opt.default if opt.cli_default is None else opt.cli_default


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rlviz",
        description="See what your RL agent does and why: episode videos with the agent's internals, "
        "saliency, failure heatmaps and statistics over many rollouts.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
    )
    parser.add_argument("--version", action="version", version=f"rlviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    r = sub.add_parser(
        "render",
        help="roll out an agent, write statistics, a failure heatmap and videos of chosen episodes",
        description="Roll out CHECKPOINT for N episodes; write summary.json, episodes.csv, the failure "
        "heatmap (PNG + npz) and MP4 videos (game + action probabilities, value, entropy, saliency).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
    )
    add_config_arguments(r, RenderConfig)
    r.add_argument("--debug", action="store_true", help="show tracebacks")
    c = sub.add_parser(
        "compare",
        help="roll out agents A and B on the same seeds: paired difference with bootstrap CIs, heatmap "
        "difference, side-by-side videos",
        description="Roll out checkpoints A and B on the same N episode seeds; write comparison.json (the return "
        "difference B - A with a paired bootstrap 95%% CI, the probability of improvement, IQMs, every diagnostic's "
        "difference), episodes.csv (both agents per seed), heatmap_diff.png/.npz and side-by-side MP4s.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
    )
    add_config_arguments(c, CompareConfig)
    c.add_argument("--debug", action="store_true", help="show tracebacks")
    _add_job(
        sub, "timeline", TimelineConfig,
        help="every checkpoint of a training run on the same seeds: when each diagnostic appeared, regressions "
        "beyond noise, how the policy changed (--follow: while training runs)",
        description="Evaluate each checkpoint of RUN on the same N episode seeds (each row equals `rlviz render` of "
        "that file); write timeline.json / timeline.csv (statistics, diagnostics, first_seen, regressions, "
        "policy_change per checkpoint) and the views (timeline.png, progression.mp4, report.html).",
    )
    _add_job(
        sub, "explore", ExploreConfig,
        help="a local web app on a run folder: click a heatmap cell or a histogram bar, open any episode "
        "(rendered on demand, as --videos episode:N writes it) and step through it",
        description="Serve the run folder OUT (written by rlviz render, compare or timeline) on 127.0.0.1: its failure "
        "heatmap, histograms and episodes, each episode rendered on demand into OUT/.rlviz-cache/ (a compare run's: A "
        "and B side by side; a timeline's: every checkpoint) and scrubbed step by step with its per-step trace. Needs the rlviz[explore] extra (Werkzeug).",
    )
    _add_job(
        sub, "push", PushConfig,
        help="publish a render run on the Hugging Face Hub: the agent, an annotated replay.mp4, the heatmap, the "
        "report and a model card with the statistics (--dry-run DIR: write the folder, upload nothing)",
        description="Build a Hugging Face model repo from the render run RUN (the agent file, replay.mp4 of the "
        "chosen episode and replay-worst.mp4 re-rendered as --videos episode:N renders them, heatmap.png, "
        "report.html, README.md with model-index metadata, results.json) and upload it with huggingface_hub.",
    )
    return parser


def _add_job(sub, name: str, config_cls, **texts: str) -> None:
    """A subcommand whose flags are ``config_cls``'s fields (and ``--debug``)."""
    p = sub.add_parser(name, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES, **texts)
    add_config_arguments(p, config_cls)
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def _config(config_cls, args: argparse.Namespace):
    values = {o.name: getattr(args, o.name) for o in cli_options(config_cls)}
    return config_cls(**values)


def _run_render(args) -> int:
    config = _config(RenderConfig, args)  # validated before the heavy imports: bad input fails fast
    _check_inputs(config)
    with progress.enabled(config.progress), progress.phase("starting (torch, gymnasium)"):  # visible at once
        from .jobs.render import render

    outputs = render(config)
    print(outputs.table)
    print(f"outputs in {outputs.out_dir}")
    _said_push(config, outputs.pushed)
    return _strict(args, outputs.warnings)


def _said_push(config, pushed) -> None:
    """What ``--push-to-hub`` / ``--push-dry-run`` did (held back by --strict: the job's warning said why)."""
    if pushed is None:
        return
    print(f"dry run: the repo folder is {pushed.folder}; nothing was uploaded" if pushed.url is None
          else f"pushed {config.push_to_hub}: {pushed.url}")


def _strict(args, found: list) -> int:
    """3 (and one line naming them) when ``--strict`` and the diagnostics raised warnings; 0 otherwise."""
    if args.strict and found:
        ids = ", ".join(f"{f['agent'].upper()}: {f['id']}" if "agent" in f else f["id"] for f in found)
        held = "; nothing was pushed" if getattr(args, "push_to_hub", None) or getattr(args, "push_dry_run", None) else ""
        print(f"rlviz: --strict: {len(found)} diagnostics warning(s) ({ids}){held}; exit code 3", file=sys.stderr)
        return 3
    return 0


def _check_inputs(config) -> None:
    """Checks that need the filesystem or gymnasium but not torch: a missing checkpoint, an unknown --env."""
    from .sources.huggingface.hub import check_hub_ref, is_hub_ref

    if is_hub_ref(config.checkpoint):  # hf://ORG/REPO: its form, the extra, and (offline) the cache
        check_hub_ref(config.checkpoint)
    elif not Path(config.checkpoint).exists():
        from .errors import CheckpointError

        raise CheckpointError(f"No checkpoint at {config.checkpoint}; check the path (an rlviz .pt2, an SB3 .zip, "
                              "a torch file, an rl-zoo3 run folder, or hf://ORG/REPO on the Hugging Face Hub).")
    if config.env:
        from .envs.recipe import require_registered

        _import_typed_env(config.env)
        require_registered(config.env)


def _import_typed_env(env: str) -> None:
    """``--env module:Env-v0`` typed by the user: their consent to that module, imported now so it is found in the
    working folder too (``python -m rlviz`` keeps the folder off the import path for names read from files)."""
    if ":" in env and not env.endswith(".json"):
        from .errors import EnvError
        from .options import import_user_module

        module = env.split(":", 1)[0]
        try:
            import_user_module(module)
        except ImportError as exc:
            raise EnvError(f"--env {env}: cannot import {module} ({exc}); check the name and that the module is "
                           "installed or in the working folder.") from None


def _run_compare(args) -> int:
    config = _config(CompareConfig, args)
    for side in ("a", "b"):
        _check_inputs(config.render_config(side))
    with progress.enabled(config.progress), progress.phase("starting (torch, gymnasium)"):  # visible at once
        from .jobs.compare import compare

    outputs = compare(config)
    print(outputs.table)
    print(f"outputs in {outputs.out_dir}")
    _said_push(config, outputs.pushed)
    return _strict(args, outputs.warnings)


def _run_timeline(args) -> int:
    config = _config(TimelineConfig, args)
    if config.env:
        from .envs.recipe import require_registered

        _import_typed_env(config.env)
        require_registered(config.env)
    with progress.enabled(config.progress), progress.phase("starting (torch, gymnasium)"):  # visible at once
        from .training.job import timeline

    outputs = timeline(config)
    print(outputs.table)
    print(f"outputs in {outputs.out_dir}")
    for line in outputs.failed:  # listed in timeline.json and the report too; the job fails only when none loads
        print(f"rlviz: failed: {line}", file=sys.stderr)
    return 0


def _run_explore(args) -> int:
    config = _config(ExploreConfig, args)
    from .explore import explore

    return int(explore(config))


def _run_push(args) -> int:
    config = _config(PushConfig, args)
    with progress.enabled(False):
        from .jobs.push import push

    outputs = push(config)
    print("\n".join(outputs.files))
    print(f"dry run: the repo folder is {outputs.folder}; nothing was uploaded" if outputs.url is None
          else f"pushed to {outputs.url}")
    return 0


COMMANDS = {"push": _run_push, "render": _run_render, "compare": _run_compare, "timeline": _run_timeline, "explore": _run_explore}


def _from_interrupt(exc: BaseException) -> bool:
    """Whether a Ctrl-C lies under ``exc``: Python wraps one raised in ``__set_name__`` (a class being defined while
    a module imports) in a RuntimeError, and a reader then reports that as a file it could not load."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def _interrupted(exc: BaseException | None) -> int:
    said = str(exc).strip().splitlines()[0] if isinstance(exc, Interrupted) and str(exc).strip() else \
        "no partial outputs were left under final names"
    print(f"rlviz: interrupted; {said}", file=sys.stderr, flush=True)
    return 130


def main(argv: list[str] | None = None) -> int:
    args = argparse.Namespace(debug=False)
    try:  # (a Ctrl-C while the arguments are parsed is one line too)
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except KeyboardInterrupt as exc:  # (Interrupted: the job says what it left)
        return _interrupted(exc)
    except RlvizError as exc:
        if _from_interrupt(exc):  # a Ctrl-C that a library turned into an error (e.g. inside torch's imports)
            return _interrupted(None)
        if args.debug:
            raise
        print(f"rlviz: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # an rlviz bug or an unexpected library failure
        if _from_interrupt(exc):
            return _interrupted(None)
        if args.debug:
            raise
        print(f"rlviz: error: {type(exc).__name__}: {exc} (run again with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
