"""What a run can be asked, written once: each option is a dataclass field with its default, its help
and how the command line spells it (declared with :func:`rlviz.options.option`). The CLI (:mod:`rlviz.cli`) is
generated from these fields, and the library validates the same values the same way (``RenderConfig(...)`` raises
:class:`UsageError`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, make_dataclass
from typing import TYPE_CHECKING, Any

from .choices import DEFAULT_NUM_ENVS, DEFAULT_SALIENCY_METHOD, FAIL_ON, RAY_LOCAL, SALIENCY_METHODS, SALIENCY_TARGETS
from .errors import UsageError
from .options import CliOption, camera_list, cli_options, option, parse_video_spec
from .options import attention_value as _attention
from .options import choice as _choice
from .options import whole as _whole

__all__ = ["RenderConfig", "CompareConfig", "TimelineConfig", "ExploreConfig", "PushConfig", "option", "cli_options",
           "CliOption", "config_dict", "episode_config", "NOT_REPLAYED",
           "parse_video_spec", "COMPARE_SHARED", "COMPARE_PER_AGENT", "COMPARE_ONLY"]


def _wrappers(value: Any) -> tuple[str, ...]:
    """--wrapper: a tuple of 'module:Class' names (one name alone is taken as one)."""
    names = (value,) if isinstance(value, str) else tuple(value or ())
    for name in names:
        if not isinstance(name, str) or re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", name) is None:
            raise UsageError(f"--wrapper {name!r}: expected 'module:Class', e.g. minigrid.wrappers:ImgObsWrapper.")
    return names


#: a Hugging Face repo id: ORG/NAME
_REPO = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def _check_push(config: Any) -> None:
    """``--push-to-hub ORG/NAME`` / ``--push-dry-run DIR`` of render and compare, refused now (not after the run)
    where the push would be: a repo id that is not ORG/NAME, an agent already on the Hub, an agent that needs code."""
    repo = config.push_to_hub
    if repo is not None and _REPO.fullmatch(str(repo)) is None:
        raise UsageError(f"--push-to-hub {repo!r}: expected ORG/NAME, e.g. my-name/ppo-CartPole-v1.")
    if repo is None and config.push_dry_run is None:
        return
    if str(config.checkpoint).startswith("hf://"):  # (compare's: B's, the agent it pushes)
        raise UsageError(f"--push-to-hub: the agent is {config.checkpoint}, already on the Hub; push a run of a "
                         "local file.")
    if config.model:
        raise UsageError(f"--push-to-hub with --model {config.model}: the agent needs its code on the Hub too; run "
                         "without --push-to-hub, then `rlviz push OUT --repo ORG/NAME --include-code FILE`.")


@dataclass(frozen=True)
class RenderConfig:
    """Everything ``rlviz render`` can be asked. Each field is one CLI flag (``--num-envs`` for ``num_envs``);
    invalid values raise :class:`~rlviz.errors.UsageError` here, for the library and the CLI alike."""

    checkpoint: str | os.PathLike[str] = option(
        help="rlviz checkpoint (.pt2), SB3 .zip, rl-zoo3 run folder, torch file (see --model), or "
        "hf://ORG/REPO[@REVISION][/FILE] on the Hugging Face Hub", positional=True)
    env: str | None = option(None, "env id (needed for SB3 zips and state_dicts; overrides the checkpoint's)",
                             metavar="ID")
    model: str | None = option(None, "'module:Class' building the network of a state_dict checkpoint",
                               metavar="MODULE:CLASS")
    model_kwargs: str | None = option(None, "JSON object of the --model class's fields (a flax module's, for a JAX agent)",
                                      metavar="JSON")
    critic: str | None = option(None, "'module:Class' of a flax agent's separate critic (its params under 'critic')",
                                metavar="MODULE:CLASS")
    env_kwargs: str | None = option(None, "JSON object of a JAX env's params / constructor arguments (recorded in the "
                                    "run's recipe; e.g. '{\"max_steps_in_episode\": 500}')", metavar="JSON")
    wrapper: tuple[str, ...] = option((), "'module:Class' observation wrapper the agent was trained with, applied after the "
                            "env's own (repeatable, in order; e.g. minigrid.wrappers:ImgObsWrapper)", kind="append",
                            metavar="MODULE:CLASS")
    vecnormalize: str | os.PathLike[str] | None = option(
        None, "SB3 VecNormalize statistics to apply (default: the vecnormalize.pkl of an rl-zoo3 run)", metavar="PKL")
    trust_checkpoint: bool = option(
        False, "allow what the file alone cannot prove safe: unpickling a full-module torch file, env ids that "
        "import a module (runs code from the file: only for files you trust)")
    critic_kwargs: str | None = option(None, "JSON object of the --critic class's fields (a flax agent's separate "
                                       "critic)", metavar="JSON")
    episodes: int = option(10, "episodes to roll out (default 10)", metavar="N")
    heatmap: bool = option(False, "count object positions on the step before each failure")
    videos: str = option("first:1", "episodes to render: comma list of first:K, worst:K, best:K, median:K, "
                         "random:K, or 'none' (default first:1)", metavar="SPEC")
    out: str | os.PathLike[str] = option("rlviz-out", "output folder, the run's own (default ./rlviz-out)", metavar="DIR")
    overwrite: bool = option(False, "replace the earlier rlviz run in --out (it stays until the new one is complete)")
    seed: int = option(0, "base seed (>= 0); episode k uses a seed derived from it", metavar="S")
    device: str = option("auto", "auto (CUDA when present), cpu, cuda, cuda:N", metavar="DEVICE")
    saliency: str | None = option(None, "saliency overlay in the videos (default none)",
                                  choices=("none",) + SALIENCY_METHODS)
    saliency_target: str | int = option(
        "action", "what the saliency explains: action (chosen logit), logprob, value, or an action index",
        metavar="TARGET")
    memory_window: int = option(
        16, "recurrent policies with --saliency: the memory saliency of each step over its last W observations "
        "(the strip under the video's frame, memory_saliency in the .npz; default 16, 0: none)", metavar="W")
    greedy: bool = option(False, "take the most likely action instead of sampling")
    num_envs: int = option(DEFAULT_NUM_ENVS, f"parallel envs for rollouts (default {DEFAULT_NUM_ENVS})", metavar="N")
    fail_on: str = option("auto", "what counts as a failure (auto: life loss when the env has lives)",
                          choices=FAIL_ON)
    objects: str | None = option(None, "object extractor for the heatmap and attention: 'pixels' (moving pixels), "
                                 "'ram' (the ALE game's RAM map), 'body:NAME' (where a MuJoCo body was, in its own "
                                 "x-z or x-y plane, docs/bodies.md) or 'module:function' (default by env: RAM objects "
                                 "for 20 ALE games, docs/atari-objects.md; the agent's cell for MiniGrid)",
                                 metavar="pixels|ram|body:NAME|MODULE:FUNCTION")
    camera: str | None = option(None, "MuJoCo envs (gymnasium's, dm_control's): the videos' cameras, tiled left to "
                                "right: comma list of default (the env's own view), free, camera ids or names, e.g. "
                                "track,0 (default: the env's own; docs/bodies.md)", metavar="CAMS")
    log_scale: bool = option(False, "log colour scale for the heatmap")
    attention: bool | str | None = option(
        None, "every step's attribution share per heatmap object (summary.json attention, attention_at_failure.png); "
        f"on by default with --saliency METHOD --heatmap, using METHOD; --attention alone: on ({DEFAULT_SALIENCY_METHOD} "
        f"without --saliency; turns the heatmap on); --attention {'|'.join(SALIENCY_METHODS)}: that method (e.g. "
        "gradient attention beside perturbation videos); --attention off", kind="optional", const=True,
        metavar="METHOD")
    gamma: float | None = option(None, "discount for return-to-go (default: checkpoint's)", metavar="G")
    wandb_project: str | None = option(None, "log videos, heatmap and statistics to this W&B project",
                                       flag="--wandb", metavar="PROJECT")
    wandb_run: str | None = option(None, "W&B run name", metavar="NAME")
    tensorboard: str | os.PathLike[str] | None = option(None, "log to TensorBoard event files here", metavar="LOGDIR")
    progress: bool = option(False, "no progress bars (the CLI shows them when stderr is a terminal; the library "
                            "only when progress=True)", flag="--no-progress", kind="negated", cli_default="tty")
    strict: bool = option(False, "exit with code 3 when the diagnostics raise any warning (to gate agents in CI)")
    workers: int = option(1, "worker processes for the rollouts and videos (default 1: this process); the "
                          "outputs are the same for any count", metavar="N")
    ray: str | None = option(None, "run the workers on Ray (one actor per CPU): alone, on a local Ray instance (with --workers N: "
                             "N CPUs); 'auto', ray://HOST:PORT or HOST:PORT joins a cluster (pip install "
                             "\"rlviz[ray]\")", kind="optional", const=RAY_LOCAL, metavar="ADDRESS")
    threads: int = option(1, "torch threads per process (default 1: fastest for rollouts' small batches, and N "
                          "workers do not oversubscribe the cores)", metavar="N")
    push_to_hub: str | None = option(
        None, "once the run has completed, publish it on the Hugging Face Hub as ORG/NAME, as `rlviz push OUT --repo "
        "ORG/NAME` does (the agent, replay.mp4 of the median episode, the heatmap, the report, a model card; the "
        "token from huggingface_hub's usual places); nothing is pushed when the run fails or --strict finds a "
        "warning", metavar="ORG/NAME")
    push_dry_run: str | os.PathLike[str] | None = option(
        None, "write what --push-to-hub would upload into DIR (new or empty) and upload nothing (alone: the repo "
        "name on the card is ORG/NAME)", metavar="DIR")

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.checkpoint is None or str(self.checkpoint) == "":
            raise UsageError("checkpoint is empty; pass the path of an rlviz .pt2, an SB3 .zip or a torch file.")
        set_(self, "episodes", _whole("episodes", self.episodes, 1))
        set_(self, "num_envs", _whole("num_envs", self.num_envs, 1))
        set_(self, "seed", _whole("seed", self.seed, 0))
        set_(self, "workers", _whole("workers", self.workers, 1))
        set_(self, "threads", _whole("threads", self.threads, 1))
        set_(self, "memory_window", _whole("memory_window", self.memory_window, 0))
        set_(self, "wrapper", _wrappers(self.wrapper))
        set_(self, "camera", ",".join(camera_list(self.camera)) or None)
        if self.ray is not None and (not isinstance(self.ray, str) or not self.ray.strip()):
            raise UsageError(f"--ray {self.ray!r}: expected an address ('auto', 'ray://HOST:PORT', 'HOST:PORT') or no "
                             "value for a local Ray instance.")
        saliency = None if self.saliency in (None, "none") else self.saliency
        if saliency is not None:
            _choice("saliency", saliency, SALIENCY_METHODS)
        set_(self, "saliency", saliency)
        _choice("fail_on", self.fail_on, FAIL_ON)
        target = self.saliency_target
        if isinstance(target, str) and target.strip().lstrip("-").isdigit():
            target = int(target)
        if not isinstance(target, int) or isinstance(target, bool):
            _choice("saliency_target", target, SALIENCY_TARGETS)
        elif target < 0:
            raise UsageError(f"saliency_target={target}; an action index is 0..num_actions-1.")
        set_(self, "saliency_target", target)
        if self.gamma is not None:
            try:
                g = float(self.gamma)
            except (TypeError, ValueError):
                raise UsageError(f"gamma={self.gamma!r}; expected a number in [0, 1].") from None
            if not (math.isfinite(g) and 0.0 <= g <= 1.0):
                raise UsageError(f"gamma={self.gamma!r}; expected a number in [0, 1].")
            set_(self, "gamma", g)
        parse_video_spec(self.videos)  # fail now, not after the rollouts
        set_(self, "attention", _attention(self.attention))
        if self.attention not in (None, False):
            set_(self, "heatmap", True)  # attention's objects are the heatmap's
        _check_push(self)


#: The options of ``rlviz render`` that ``rlviz compare`` takes too (declared once, in RenderConfig).
COMPARE_SHARED = ("env", "model", "wrapper", "trust_checkpoint", "episodes", "heatmap", "videos", "out", "overwrite", "seed",
                  "device", "saliency", "saliency_target", "greedy", "num_envs", "fail_on", "objects", "log_scale",
                  "attention", "gamma", "wandb_project", "wandb_run", "tensorboard", "progress", "workers", "ray",
                  "threads", "strict", "memory_window", "camera", "model_kwargs", "critic", "critic_kwargs", "env_kwargs",
                  "push_to_hub", "push_dry_run")
#: The options of ``rlviz render`` that ``rlviz compare`` takes once per agent: RenderConfig's field -> compare's
#: fields for A and B (``checkpoint`` is the positional A and B; ``--vecnormalize-a/-b`` each agent's statistics).
COMPARE_PER_AGENT = {"checkpoint": ("a", "b"), "vecnormalize": ("vecnormalize_a", "vecnormalize_b")}
#: The options only ``rlviz compare`` has (after A, B and the shared ones): the disagreement analysis.
COMPARE_ONLY = ("disagreements", "disagreement_horizon", "disagreement_to_end", "disagreement_videos")
#: What compare says differently (help, default) about a shared option.
_COMPARE_OVERRIDES = {
    "out": {"default": "rlviz-compare", "help": "output folder, the run's own (default ./rlviz-compare)"},
    "videos": {"help": "side-by-side videos of A and B on the same seed: comma list of first:K, worst:K (lowest "
                       "return B - A), best:K, median:K, random:K, or 'none' (default first:1)"},
    "heatmap": {"help": "failure heatmaps of A and B and their difference per failure (heatmap_diff.png/.npz)"},
    "strict": {"help": "exit with code 3 when the diagnostics raise any warning for A or B (to gate agents in CI)"},
    "push_to_hub": {"help": "once the comparison has completed, publish agent B (the candidate) on the Hugging Face Hub "
                            "as ORG/NAME: B's files, replay and card as `rlviz push` writes them, the card with B's "
                            "paired difference against A (its CI, P(B > A)), comparison.json and the A-vs-B report; "
                            "nothing is pushed when the run fails or --strict finds a warning"},
}


def _shared_field(name: str, overrides: dict[str, dict[str, Any]] | None = None, source: Any = None) -> tuple[str, Any, Any]:
    """(name, type, field) of RenderConfig's (or ``source``'s) option ``name`` for another config, with its
    overrides (default: compare's)."""
    f = next(f for f in fields(source or RenderConfig) if f.name == name)
    meta = dict(f.metadata["cli"])
    over = (_COMPARE_OVERRIDES if overrides is None else overrides).get(name, {})
    meta["help"] = over.get("help", meta["help"])
    return name, f.type, field(default=over.get("default", f.default), metadata={"cli": meta})


def _compare_post_init(self: Any) -> None:
    """Validate (and normalise) the shared options exactly as RenderConfig does, for each checkpoint."""
    for side in ("a", "b"):
        if getattr(self, side) is None or str(getattr(self, side)) == "":
            raise UsageError(f"checkpoint {side.upper()} is empty; pass the paths of two checkpoints to compare.")
    checked = self.render_config("b")  # (B's: --push-to-hub publishes B, and is checked with it)
    for name in COMPARE_SHARED:
        object.__setattr__(self, name, getattr(checked, name))
    _check_disagreements(self)


def _check_disagreements(self: Any) -> None:
    """Validate the disagreement analysis's options (compare's, and timeline's between checkpoints)."""
    object.__setattr__(self, "disagreements", _whole("disagreements", self.disagreements, 0))
    object.__setattr__(self, "disagreement_horizon", _whole("disagreement_horizon", self.disagreement_horizon, 1))
    if self.disagreement_videos is not None:
        object.__setattr__(self, "disagreement_videos", _whole("disagreement_videos", self.disagreement_videos, 0))


def _render_config(self: Any, side: str) -> RenderConfig:
    """The RenderConfig of checkpoint ``side`` ("a" or "b") with the shared options (``--push-to-hub``: B's only)."""
    shared = {n: getattr(self, n) for n in COMPARE_SHARED}
    if side == "a":
        shared.update(push_to_hub=None, push_dry_run=None)
    return RenderConfig(**{name: getattr(self, pair["ab".index(side)]) for name, pair in COMPARE_PER_AGENT.items()},
                        **shared)


def _vecnormalize_field(side: str) -> tuple[str, Any, Any]:
    """compare's ``vecnormalize_a`` / ``vecnormalize_b``: RenderConfig's ``vecnormalize`` for one agent."""
    name, type_, f = _shared_field("vecnormalize", {"vecnormalize": {"help": (
        f"SB3 VecNormalize statistics of {side.upper()} (default: found beside {side.upper()}, as render finds them: "
        "the vecnormalize.pkl of an rl-zoo3 run)")}})
    return f"vecnormalize_{side}", type_, f


if TYPE_CHECKING:  # what type checkers see of the dataclass made below
    class CompareConfig:
        a: str | os.PathLike[str]
        b: str | os.PathLike[str]
        vecnormalize_a: str | os.PathLike[str] | None
        vecnormalize_b: str | os.PathLike[str] | None
        disagreements: int
        disagreement_horizon: int
        disagreement_to_end: bool
        disagreement_videos: int | None

        def __init__(self, a: str | os.PathLike[str], b: str | os.PathLike[str], **options: Any) -> None: ...
        def render_config(self, side: str) -> RenderConfig: ...
        def __getattr__(self, name: str) -> Any: ...  # the render options of COMPARE_SHARED

#: Everything ``rlviz compare A B`` can be asked: the two checkpoints and the render options that apply
#: (``COMPARE_SHARED``, declared in :class:`RenderConfig`). Invalid values raise :class:`UsageError`.
CompareConfig = make_dataclass(  # type: ignore[misc,assignment]
    "CompareConfig",
    [("a", "str | os.PathLike", option(help="checkpoint A (the baseline)", positional=True)),
     ("b", "str | os.PathLike", option(help="checkpoint B (e.g. after a fix), run on the same seeds as A",
                                       positional=True)),
     *(_vecnormalize_field(side) for side in "ab"),
     *(_shared_field(n) for n in COMPARE_SHARED),
     ("disagreements", "int", option(
         0, "the K states where A and B disagree most (total variation of their action distributions, each agent "
         "asked on the other's states; one per --disagreement-horizon steps of an episode), each played out by both "
         "agents from the saved state: disagreements.json/.csv, a side-by-side video per state (default 0: off)",
         metavar="K")),
     ("disagreement_horizon", "int", option(50, "steps each agent plays from a disagreement state (default 50)",
                                            metavar="H")),
     ("disagreement_to_end", "bool", option(False, "play the branches from a disagreement state to the end of the "
                                                   "episode instead of --disagreement-horizon steps")),
     ("disagreement_videos", "int | None", option(None, "side-by-side branch videos for the top N states only (default: "
                                                        "one per state; each is one short recording of both branches)",
                                                  metavar="N"))],
    namespace={"__post_init__": _compare_post_init, "render_config": _render_config,
               "__doc__": "Everything ``rlviz compare A B`` can be asked: the two checkpoints and the options of "
                          "``rlviz render`` that apply (declared once, in RenderConfig)."},
    frozen=True,
)
CompareConfig.__module__ = __name__


#: The options of ``rlviz render`` that ``rlviz timeline`` takes too (declared once, in RenderConfig).
TIMELINE_SHARED = ("env", "model", "vecnormalize", "trust_checkpoint", "episodes", "heatmap", "videos", "out",
                   "overwrite", "seed", "device", "saliency", "saliency_target", "greedy", "num_envs", "fail_on",
                   "objects", "log_scale", "gamma", "wandb_project", "wandb_run", "tensorboard", "progress", "workers",
                   "ray", "threads", "attention", "model_kwargs", "critic", "critic_kwargs", "env_kwargs")
#: The options of ``rlviz compare`` that ``rlviz timeline`` takes too (declared once, in CompareConfig): its
#: disagreement analysis between checkpoints (:mod:`rlviz.training.disagreements`).
TIMELINE_DISAGREEMENTS = COMPARE_ONLY
#: What timeline says differently (help, default) about a shared option.
_TIMELINE_OVERRIDES = {
    "disagreements": {"help": "between consecutive checkpoints (or --against STEP), compare's analysis of the K "
                              "states where the two disagree most, each played out by both from the saved state: "
                              "disagreements/<step A>-vs-<step B>/ (default 0: off)"},
    "out": {"default": "rlviz-timeline", "help": "output folder, the run's own (default ./rlviz-timeline)"},
    "episodes": {"help": "episodes per checkpoint, the same seeds at every checkpoint (default 10)"},
    "videos": {"help": "the episode progression.mp4 plays at every checkpoint: first:1 (default), worst:1 or best:1 "
                       "(of the last checkpoint), or 'none'"},
    "heatmap": {"help": "a failure heatmap per checkpoint (how the failures moved over training)"},
    "vecnormalize": {"help": "SB3 VecNormalize statistics for every checkpoint (default: each checkpoint's "
                             "<prefix>_vecnormalize_<steps>_steps.pkl, else rl-zoo3's vecnormalize.pkl)"},
    "wandb_project": {"help": "log each checkpoint's numbers to this W&B project at its training step"},
    "tensorboard": {"help": "log each checkpoint's numbers to TensorBoard event files here, at its training step"},
    "workers": {"help": "worker processes; (checkpoint, episodes) is the unit of work, the outputs are the same "
                        "for any count (default 1: this process)"},
}


def _seconds(name: str, value: Any) -> float:
    message = f"--{name.replace('_', '-')}: expected a positive number of seconds, received {value!r}."
    if isinstance(value, bool):
        raise UsageError(message)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UsageError(message) from None
    if not (math.isfinite(v) and v > 0):
        raise UsageError(message)
    return v


def _timeline_post_init(self: Any) -> None:
    """Validate RUN and ``--follow``'s timings, and the shared options exactly as RenderConfig does."""
    run = self.run
    if isinstance(run, (list, tuple)):
        run = tuple(os.fspath(r) for r in run)
        run = run[0] if len(run) == 1 else run
    if run is None or run == "" or run == ():
        raise UsageError("RUN is empty; pass the folder a training run saves its checkpoints into (e.g. the "
                         "save_path of SB3's CheckpointCallback), or checkpoint files.")
    object.__setattr__(self, "run", run)
    for name in ("poll", "settle", "idle_stop"):
        value = getattr(self, name)
        if value is not None or name != "idle_stop":
            object.__setattr__(self, name, _seconds(name, value))
    checked = self.render_config("checkpoint")
    for name in TIMELINE_SHARED:
        object.__setattr__(self, name, getattr(checked, name))
    if self.disagreements or self.against is not None:  # compare's analysis between checkpoints
        _check_disagreements(self)
        if self.against is not None:
            object.__setattr__(self, "against", _whole("against", self.against, 0))
            if not self.disagreements:
                raise UsageError(f"--against {self.against} picks the checkpoint the others are compared with by "
                                 "--disagreements K; received no --disagreements. Add --disagreements K (e.g. 10).")
        if self.follow and self.disagreements:
            raise UsageError("--disagreements with --follow: the analysis runs once, over the whole run; run "
                             "`rlviz timeline RUN --disagreements K` after training (or without --follow).")


def _timeline_render_config(self: Any, checkpoint: Any) -> RenderConfig:
    """The RenderConfig of one checkpoint of the run with the shared options: ``rlviz render`` of that file."""
    return RenderConfig(checkpoint=checkpoint, **{n: getattr(self, n) for n in TIMELINE_SHARED})


#: Everything ``rlviz timeline RUN`` can be asked: the run, ``--follow``, and the render options that apply
#: (``TIMELINE_SHARED``, declared in :class:`RenderConfig`). Invalid values raise :class:`UsageError`.
TimelineConfig = make_dataclass(
    "TimelineConfig",
    [("run", "str | os.PathLike | tuple", option(
        help="the training run: the folder its checkpoints are saved in (SB3 CheckpointCallback, rl-zoo3 run, "
             ".pt2 with their step), or checkpoint files / globs", positional=True, nargs="+", metavar="RUN")),
     ("follow", "bool", option(False, "keep watching RUN while training writes to it; evaluate each new checkpoint "
                                      "once (Ctrl-C ends it; the outputs stay complete)")),
     ("poll", "float", option(2.0, "--follow: seconds between looks at RUN (default 2)", metavar="S")),
     ("settle", "float", option(1.0, "--follow: seconds a new file's size and time must stay unchanged before it "
                                     "is read (default 1)", metavar="S")),
     ("idle_stop", "float | None", option(None, "--follow: stop after S seconds without a new checkpoint (default: "
                                               "until Ctrl-C)", metavar="S")),
     *(_shared_field(n, _TIMELINE_OVERRIDES) for n in TIMELINE_SHARED),
     *(_shared_field(n, _TIMELINE_OVERRIDES, CompareConfig) for n in TIMELINE_DISAGREEMENTS),
     ("against", "int | None", option(None, "--disagreements: compare the checkpoint at training step STEP with "
                                            "each other one (default: each checkpoint with the previous one)",
                                      metavar="STEP"))],
    namespace={"__post_init__": _timeline_post_init, "render_config": _timeline_render_config,
               "__doc__": "Everything ``rlviz timeline RUN`` can be asked: the run, --follow, and the options of "
                          "``rlviz render`` that apply (declared once, in RenderConfig)."},
    frozen=True,
)
TimelineConfig.__module__ = __name__


@dataclass(frozen=True)
class ExploreConfig:
    """Everything ``rlviz explore OUT`` can be asked: the run folder, where to serve it, and the agent's loading
    rules (the run's own options never grant trust: only these flags do)."""

    out: str | os.PathLike[str] = option(help="a run folder written by rlviz render, compare or timeline (rlviz-run.json marks one)",
                                         positional=True)
    host: str = option("127.0.0.1", "address to serve on (default 127.0.0.1: this machine only)", metavar="HOST")
    port: int = option(8765, "port to serve on (default 8765; 0: any free port)", metavar="PORT")
    browser: bool = option(True, "do not open a browser", flag="--no-browser", kind="negated")
    token: bool = option(True, "with --host off the loopback, serve without the random token the URL must carry "
                         "(anyone who reaches the machine can then open the run and make it render)",
                         flag="--no-token", kind="negated")
    checkpoint: str | None = option(None, "the agent that replays a render run's episodes (default: the one rlviz-run.json names)",
                                    metavar="PATH")
    trust_checkpoint: bool = option(False, "as render's --trust-checkpoint (never taken from the run's options)")
    device: str = option("cpu", "device of the replays (default cpu)", metavar="DEVICE")

    def __post_init__(self) -> None:
        if not str(self.out):
            raise UsageError("OUT is empty; pass a run folder written by `rlviz render --out`.")
        port = _whole("port", self.port, 0)
        if port > 65535:
            raise UsageError(f"--port: expected a port number 0-65535, received {self.port!r}.")
        object.__setattr__(self, "port", port)
        if not str(self.host).strip():
            raise UsageError("--host is empty; pass an address such as 127.0.0.1.")



@dataclass(frozen=True)
class PushConfig:
    """Everything ``rlviz push RUN`` can be asked: the render run, the repo, which episode is the replay, and the
    safety limits (see :mod:`rlviz.jobs.push`)."""

    run: str | os.PathLike[str] = option(help="a run folder written by `rlviz render` (rlviz-run.json marks one)",
                                         positional=True)
    repo: str | None = option(None, "the Hugging Face repo to create or update, ORG/NAME", metavar="ORG/NAME")
    replay: str = option("median", "the episode replay.mp4 shows: median, best, worst or episode:N (default median)",
                         metavar="WHICH")
    dry_run: str | os.PathLike[str] | None = option(
        None, "write exactly what would be uploaded into DIR (new or empty) and upload nothing", metavar="DIR")
    include_code: str | os.PathLike[str] | None = option(
        None, "the Python file defining a --model agent's class, uploaded with it (required for such a run)",
        metavar="FILE")
    algo: str | None = option(None, "the algorithm's name on the card (default: the agent file's name)", metavar="NAME")
    private: bool = option(False, "create the repo private")
    commit_message: str = option("Upload agent evaluated with rlviz", "the commit message", metavar="TEXT")
    max_file_mb: float = option(100.0, "refuse any file over this size in MB (default 100)", metavar="MB")
    trust_checkpoint: bool = option(False, "as render's --trust-checkpoint, for the replay (never taken from the run)")

    def __post_init__(self) -> None:
        if not str(self.run):
            raise UsageError("RUN is empty; pass a run folder written by `rlviz render --out`.")
        if self.repo is not None and _REPO.fullmatch(str(self.repo)) is None:
            raise UsageError(f"--repo {self.repo!r}: expected ORG/NAME, e.g. my-name/ppo-CartPole-v1.")
        which = str(self.replay)
        if which not in ("median", "best", "worst") and re.fullmatch(r"episode:\d+", which) is None:
            raise UsageError(f"--replay {which!r}: expected median, best, worst or episode:N.")
        try:
            mb = float(self.max_file_mb)
        except (TypeError, ValueError):
            mb = -1.0
        if not mb > 0 or math.isinf(mb):
            raise UsageError(f"--max-file-mb: expected a positive number, received {self.max_file_mb!r}.")
        object.__setattr__(self, "max_file_mb", mb)
        if self.repo is None and self.dry_run is None:
            raise UsageError("rlviz push needs --repo ORG/NAME, or --dry-run DIR to write what would be uploaded.")


def config_dict(config: Any) -> dict[str, Any]:
    """A config as plain JSON-able values (paths as strings), e.g. for a W&B run's config."""
    return {f.name: (str(v) if isinstance(v, os.PathLike) else v)
            for f in fields(config) for v in [getattr(config, f.name)]}


#: RenderConfig's options that do not shape an episode or its video: where and how the job ran, what else it
#: wrote, and trust (never taken from a run folder). Every other option is a replay's (:func:`episode_config`).
NOT_REPLAYED = frozenset({"out", "overwrite", "videos", "trust_checkpoint", "device", "workers", "ray", "threads",
                          "wandb_project", "wandb_run", "tensorboard", "progress", "strict", "log_scale",
                          "push_to_hub", "push_dry_run"})


def episode_config(options: Mapping[str, Any], n: int, **run: Any) -> RenderConfig:
    """The RenderConfig of ``rlviz render --videos episode:N`` in the run whose recorded options are ``options``
    (rlviz-run.json's, as :func:`config_dict` wrote them, RenderConfig's names): every option that shapes the
    episode or its video (``--env``, ``--wrapper``, ``--camera``, ``--memory-window``, ``--saliency``, ...: all
    but :data:`NOT_REPLAYED`) is the run's; ``run``: the replay's own (trust, device)."""
    kept = {f.name: options[f.name] for f in fields(RenderConfig) if f.name not in NOT_REPLAYED and f.name in options}
    return RenderConfig(**kept, videos=f"episode:{n}", **run)
