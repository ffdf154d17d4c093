"""Episodes of a run, rendered on demand by the replay its job's ``--videos episode:N`` runs: each agent loaded as
render loads it (the trust rules are the explorer's flags, never the run's options), the episode rolled out again
from its seed and replayed into its video by the one function render and compare make their videos with
(:func:`~rlviz.jobs.videos.record_episode`, given the episode's index: episode outcomes do not depend on how many
envs run beside it).

A render run's episode is one video (``episode-<N>-episode-0.mp4`` and its ``.npz``, as ``rlviz render
--videos episode:N`` writes); a compare run's is A's and B's (as ``rlviz compare --videos episode:N`` writes
under videos/a and videos/b: frame-locked, no slowed short episodes); a timeline run's is one per checkpoint
(variant ``step<S>``: ``rlviz render <that checkpoint> --videos episode:N``, found again in the run's folder by
the timeline's own discovery). A flax agent's run on a JAX env (``gymnax:...``) replays on the JAX engine
(:mod:`rlviz.jobs.jax_stages`), into the same files. A run rendered with ``--saliency`` also gets each video without it (the variant
``<side>-plain``), so the page can turn the overlay off.

The replay's config is built from the run's recorded options as render's is (:func:`rlviz.config.episode_config`:
every option that shapes the episode or its video: ``--wrapper``, ``--camera``, ``--memory-window``, ...). An
episode whose replay does not play as the run's table says (its steps or return differ: another agent given with
``--checkpoint``, or a changed env) is refused, naming both, before its video is made."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..choices import RUN_MARKER
from ..config import NOT_REPLAYED, RenderConfig, episode_config
from ..errors import UsageError

__all__ = ["AgentReplay", "EpisodeRenderer", "REPLAY_OPTIONS", "video_name"]

#: The run's options a replay takes from rlviz-run.json (what decides an episode and how its video is drawn: every
#: RenderConfig option but :data:`~rlviz.config.NOT_REPLAYED`); trust, device, workers, sinks and paths of the run
#: are never taken from the folder.
REPLAY_OPTIONS = tuple(f for f in RenderConfig.__dataclass_fields__ if f not in NOT_REPLAYED)
#: A compare run's options per agent: RenderConfig's field -> (A's, B's).
_PER_SIDE = {"checkpoint": ("a", "b"), "vecnormalize": ("vecnormalize_a", "vecnormalize_b")}
_COMPARE_MIN_SECONDS = 0.0  # compare records its single videos frame-locked (the pair is drawn side by side)


def video_name(n: int, variant: str = "") -> str:
    """The file ``--videos episode:N`` writes for episode ``n`` (under videos/, or videos/a, videos/b), with the
    explorer's ``variant-`` in front of it in the cache ("" for a render run's)."""
    return f"{variant + '-' if variant else ''}episode-{n}-episode-0.mp4"


class AgentReplay:
    """One agent's replays: ``options`` (REPLAY_OPTIONS' keys) are the run's; the agent loads on first use."""

    def __init__(self, options: dict[str, Any], trust: bool, device: str, min_seconds: float | None = None,
                 locate: Callable[[], dict[str, Any]] | None = None,
                 expected: Callable[[int], tuple[int, float] | None] | None = None):
        self.options, self.trust, self.device, self.min_seconds = options, bool(trust), str(device), min_seconds
        self._locate = locate  # (a timeline's checkpoint: found on first use, its options' missing part)
        self._expected = expected  # episode n -> (steps, return) as the run's table says, or None
        self._loaded: Any = None
        self._lock = threading.Lock()

    def config(self, n: int) -> RenderConfig:
        """The RenderConfig of ``--videos episode:N`` for this agent."""
        with self._lock:
            if self._locate is not None:
                self.options = {**self.options, **self._locate()}
                self._locate = None
        return episode_config(self.options, n, trust_checkpoint=self.trust, device=self.device)

    def _agent(self, config: RenderConfig) -> tuple[Any, RenderConfig, float]:
        with self._lock:
            if self._loaded is None:
                from ..jobs.skeleton import replay_agent

                if not str(config.checkpoint).startswith("hf://") and not Path(config.checkpoint).exists():
                    raise UsageError(f"No checkpoint at {config.checkpoint} (the run's); pass the agent with "
                                     "--checkpoint PATH.")
                self._loaded = replay_agent(config)
            agent, resolved, gamma = self._loaded
            return agent, replace(resolved, videos=config.videos), gamma

    def warm(self) -> None:
        """Load the agent now; a failure is left to the first render, which reports it."""
        try:
            self._agent(self.config(0))
        except Exception:  # noqa: BLE001, S110 - said by the first render
            pass

    def render(self, n: int, folder: Path, prefix: str, plain: bool = False) -> Path:
        """Episode ``n`` replayed into ``folder`` as ``prefix-episode-0.mp4`` (its .npz beside it): the MP4."""
        from ..evaluate.backends.threads import torch_threads
        from ..jobs.videos import MIN_VIDEO_SECONDS, record_episode

        config = self.config(n)
        if not 0 <= n < config.episodes:
            raise UsageError(f"episode {n}: the run has {config.episodes} episodes (0-{config.episodes - 1}).")
        agent, config, gamma = self._agent(config)
        if plain:  # the same episode as `--videos episode:N` without --saliency draws it
            config = replace(config, saliency=None)
        seconds = MIN_VIDEO_SECONDS if self.min_seconds is None else self.min_seconds
        if _agents_run(agent):
            return self._render_agents(agent, n, folder, prefix, config, gamma)
        with torch_threads(config.threads):
            replayed, _ = record_episode(agent, n, folder, prefix, config, gamma, seconds,
                                         check=lambda record: self._check(n, record, config))
        return Path(str(replayed.video_path))

    def _render_agents(self, agent: Any, n: int, folder: Path, prefix: str, config: RenderConfig,
                       gamma: float) -> Path:
        """A multi-agent (PettingZoo) run's episode ``n``: its video as ``rlviz render --videos episode:N`` writes
        it (the shared frame and one panel column per agent), refused when its team return is not the table's."""
        import warnings

        from ..evaluate.backends.threads import torch_threads
        from ..jobs.agents_episodes import agents_video

        with torch_threads(config.threads), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (its replay-vs-rollout warning: the table is checked below)
            made = agents_video(agent, n, prefix, folder, config, gamma)
        want = self._expected(n) if self._expected is not None else None
        team = float(sum(made["returns"].values()))
        if want is not None and not math.isclose(team, want[1], rel_tol=1e-6, abs_tol=1e-6):
            raise UsageError(
                f"episode {n} replays with team return {team:g}, where the run's table says {want[1]:g}: the agent "
                f"{config.checkpoint} (or the env) is not the run's, so its video would not be this episode. Open "
                "the run without --checkpoint (its own agent), or render that agent's own run with `rlviz render`.")
        return Path(str(made["video"]))

    def _check(self, n: int, record: Any, config: RenderConfig) -> None:
        """Refuse episode ``n`` when its replay does not play as the run's table says (steps, return)."""
        want = self._expected(n) if self._expected is not None else None
        if want is None:
            return
        steps, ret = want
        if record.length != steps or not math.isclose(record.ret, ret, rel_tol=1e-6, abs_tol=1e-6):
            raise UsageError(
                f"episode {n} replays as {record.length} steps, return {record.ret:g}, where the run's table says "
                f"{steps} steps, return {ret:g}: the agent {config.checkpoint} (or the env) is not the run's, so "
                "its video would not be this episode. Open the run without --checkpoint (its own agent), or render "
                "that agent's own run with `rlviz render`.")


class EpisodeRenderer:
    """Renders the episodes of the run whose job is ``job`` and whose options are ``options`` (the marker's):
    ``renderer(n, folder)`` -> {variant: MP4 path}, one per name of :attr:`variants` (the first is the page's
    main video). ``checkpoint``: the agent to use instead of the one a render run names; ``trust`` / ``device``:
    as render's flags; ``base``: where a relative checkpoint path of the run is looked for; ``rows``: episode n ->
    its row of the run's table (a dict by column, or None): a replay that does not play as its row says is
    refused."""

    def __init__(self, options: dict[str, Any], checkpoint: str | None = None, trust: bool = False,
                 device: str = "cpu", base: Path | None = None, job: str = "render", steps: tuple[int, ...] = (),
                 rows: Callable[[int], dict[str, Any] | None] | None = None):
        shared = {k: options[k] for k in REPLAY_OPTIONS if k in options and k not in _PER_SIDE}
        if job in ("compare", "timeline") and checkpoint is not None:
            raise UsageError(f"--checkpoint replaces a render run's agent; a {job} run's agents are its own "
                             "(rlviz-run.json): open it without --checkpoint.")
        locate: dict[str, Any] = {}
        if job == "compare":
            sides = {s: {**shared, **{k: options.get(pair[i]) for k, pair in _PER_SIDE.items()}}
                     for i, s in enumerate("ab")}
        elif job == "timeline":
            if not steps:
                raise UsageError("The timeline run lists no checkpoint (timeline.json); run `rlviz timeline` again.")
            found = _timeline_checkpoints(options.get("run"), base, options.get("vecnormalize"))
            sides = {f"step{k}": {**shared, "checkpoint": "(found on first use)"} for k in steps}
            locate = {f"step{k}": (lambda k=k: found(k)) for k in steps}
        else:
            sides = {"": {**shared, **{k: options[k] for k in _PER_SIDE if k in options}}}
            if checkpoint is not None:
                sides[""]["checkpoint"] = checkpoint
        for opts in sides.values():
            _checked(opts, trust, base, checkpoint is None)
        seconds = _COMPARE_MIN_SECONDS if job == "compare" else None
        self.agents = {s: AgentReplay(o, trust, device, seconds, locate.get(s), _expectation(rows, s))
                       for s, o in sides.items()}
        plain = [f"{s}-plain" if s else "plain" for s in sides] if shared.get("saliency") else []
        self.variants: tuple[str, ...] = (*sides, *plain)
        self.options = next(iter(sides.values()))

    def warm(self) -> None:
        """Load the agents now (the server calls it in a thread after the first page, so that the first episode
        opened waits for its replay only)."""
        for agent in self.agents.values():
            agent.warm()

    def config(self, n: int) -> RenderConfig:
        """The main video's RenderConfig of ``--videos episode:N``."""
        return next(iter(self.agents.values())).config(n)

    def __call__(self, n: int, folder: Path) -> dict[str, Path]:
        """Render episode ``n``'s videos into ``folder``: {variant: MP4 path} (each .npz beside its MP4)."""
        out = {}
        for variant in self.variants:
            side, _, plain = variant.partition("-") if variant != "plain" else ("", "", "plain")
            out[variant] = self.agents[side].render(n, folder, f"{variant + '-' if variant else ''}episode-{n}",
                                                    bool(plain))
        return out


def _expectation(rows: Callable[[int], dict[str, Any] | None] | None,
                 side: str) -> Callable[[int], tuple[int, float] | None] | None:
    """Episode n -> (steps, return) of ``side`` ("" for a render run's, "a" / "b" for a compare run's) as the run's
    table says; None where the table has no such numbers (a timeline run's)."""
    if rows is None or side not in ("", "a", "b"):
        return None
    prefix = f"{side}_" if side else ""

    def expected(n: int) -> tuple[int, float] | None:
        row = rows(n) or {}
        steps, ret = row.get(prefix + "length"), row.get(prefix + "return")
        if not side and "team_return" in row:  # a multi-agent run's: the env's steps, every agent's return
            steps, ret = row.get("steps"), row.get("team_return")
        if type(steps) is not int or isinstance(ret, bool) or not isinstance(ret, (int, float)):
            return None
        return steps, float(ret)

    return expected


def _checked(options: dict[str, Any], trust: bool, base: Path | None, relative_ok: bool) -> None:
    """Refuse code named by the run without --trust-checkpoint, and a run without a checkpoint; a relative
    checkpoint path written from the run's parent is made absolute (in ``options``)."""
    path = options.get("checkpoint")
    if relative_ok and base is not None and isinstance(path, str) and not os.path.isabs(path) \
            and not Path(path).exists() and (base / path).exists():
        options["checkpoint"] = str(base / path)
    code = [f"--{k} {options[k]}" for k in ("model", "critic", "objects") if ":" in str(options.get(k) or "")]
    if code and not trust:
        raise UsageError(f"The run names code to import ({', '.join(code)}); rlviz explore imports nothing a "
                         "folder names unless you pass --trust-checkpoint (only for runs you trust).")
    env = options.get("env")
    if env and not trust and not str(env).endswith(".json"):  # (a recipe file is read under the trust rule)
        from ..envs.recipe import register_envs
        from ..envs.trust import check_env_id

        if ":" not in str(env):
            register_envs(str(env))  # MinAtar, MiniGrid, dm_control: their known packages, before the check
        check_env_id(env, f"the run's {RUN_MARKER} (--env)", trust)
    for flag in ("env_kwargs", "model_kwargs", "critic_kwargs"):  # a JAX run's JSON objects: plain values only
        if options.get(flag):
            from ..envs.trust import check_env_kwargs
            from ..jobs.jax_stages import parse_json_kwargs

            name = "--" + flag.replace("_", "-")
            check_env_kwargs(parse_json_kwargs(options[flag], name), f"the run's {RUN_MARKER} ({name})", trust,
                             owner=flag.split("_")[0])
    wrappers = options.get("wrapper") or ()
    if wrappers:  # --wrapper: replayed as the run applied it, when the name is a known wrapper or trusted
        from ..envs.trust import check_wrapper_name

        for name in [wrappers] if isinstance(wrappers, str) else wrappers:
            check_wrapper_name(name, f"the run's {RUN_MARKER} (--wrapper)", trust)
    if not options.get("checkpoint"):
        raise UsageError("The run's rlviz-run.json names no checkpoint; pass the agent with --checkpoint PATH.")


def _timeline_checkpoints(run: Any, base: Path | None, vecnormalize: Any) -> Callable[[int], dict[str, Any]]:
    """``found(step)``: the options of the timeline run's checkpoint at ``step`` (its file and VecNormalize
    statistics), from the timeline's own discovery of ``run`` (once, on first use: the files may have moved)."""
    found: dict[int, dict[str, Any]] = {}
    lock = threading.Lock()

    def at(step: int) -> dict[str, Any]:
        with lock:
            if not found:
                from ..sources.run_folders import discover

                where = [run] if isinstance(run, str) else list(run or [])
                if base is not None:  # paths written from the run's parent
                    where = [str(base / w) if isinstance(w, str) and not os.path.isabs(w) and not Path(w).exists()
                             and (base / w).exists() else w for w in where]
                if not where:
                    raise UsageError("The timeline run's rlviz-run.json names no training run (its `run`).")
                checkpoints, _ = discover(where[0] if len(where) == 1 else where)
                for c in checkpoints:
                    found[c.step] = {"checkpoint": str(c.path),
                                     "vecnormalize": str(c.vecnormalize) if c.vecnormalize else vecnormalize}
        if step not in found:
            raise UsageError(f"The checkpoint of step {step} is no longer in the training run {run}; the "
                             "timeline's other checkpoints still open.")
        return found[step]

    return at


def _agents_run(agent: Any) -> bool:
    """The agent plays a PettingZoo env (a multi-agent run: :mod:`rlviz.jobs.agents_episodes` replays it)."""
    from ..jobs.agents_episodes import is_agents_agent

    return is_agents_agent(agent)
