"""A timeline written during training: every N steps, the policy as it is now plays the run's fixed episode seeds and
becomes the next checkpoint of a timeline folder (the same files as ``rlviz timeline``), logged to the sinks at the
training step. :class:`~rlviz.integrations.sb3.RlvizCallback` (``timeline=``) and hand-written loops use it::

    from rlviz.integrations.loop import TimelineWriter

    timeline = TimelineWriter("runs/timeline", "CartPole-v1", episodes=20, sinks=[sink])
    ...
    if global_step % 50_000 < num_envs:
        timeline.add(TorchPolicy(agent_net), global_step)
    ...
    timeline.close()   # the progression video and timeline.png to the sinks

Each added policy is copied (``copy.deepcopy``; training goes on changing the original), so the next checkpoint's
``policy_change`` and the progression video see it as it was. The copies stay in memory for the run's views.
"""

from __future__ import annotations

import copy
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..agent import Policy
from ..config import TimelineConfig, config_dict
from ..envs.recipe import EnvRecipe
from ..errors import UsageError
from ..jobs.inputs import written_files
from ..jobs.outdir import MARKER, write_marker
from ..sinks.base import Sink, as_sinks, check_step
from ..sources import LoadedAgent
from ..sources.loaded import coerce_recipe, env_facts
from ..sources.run_folders import TimelineCheckpoint
from .outputs import Evaluator, log_end, log_rows, write_outputs
from .publish import prepare_out_folder

__all__ = ["TimelineWriter"]


def _children(obj: Any) -> list:
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return list(vars(obj).values()) if hasattr(obj, "__dict__") and not isinstance(obj, type) else []


def _snapshot(policy: Policy) -> Policy:
    """A copy of ``policy`` that training no longer changes, in eval mode. Not copied: the optimizers a network
    holds (SB3 keeps its own in the policy; the copy only acts); tensors of the last forward's graph (SB3's
    ``action_dist``) are copied detached (a graph cannot be deep-copied)."""
    import torch

    memo: dict = {}

    def visit(obj: Any, depth: int) -> None:
        if id(obj) in memo or depth > 6:
            return
        if isinstance(obj, torch.optim.Optimizer):
            memo[id(obj)] = None
        elif isinstance(obj, torch.Tensor):
            if not obj.is_leaf:
                memo[id(obj)] = obj.detach()
        else:
            for value in _children(obj):
                visit(value, depth + 1)

    visit(policy, 0)
    frozen = copy.deepcopy(policy, memo)
    module = getattr(frozen, "module", None)
    if isinstance(module, torch.nn.Module):
        module.eval()
    return frozen


class TimelineWriter:
    """Appends checkpoints to the timeline folder ``out`` as training runs (see the module docstring).

    env: the env id or :class:`~rlviz.envs.EnvRecipe` the policy acts in (observations as it was trained on);
    episodes, seed: as ``rlviz timeline`` (the same N seeds at every checkpoint); videos: the progression video's
    episode ("none": no video); sinks: logged at each training step; overwrite: replace an earlier rlviz run in
    ``out``; config: a :class:`~rlviz.config.TimelineConfig` with the other options of ``rlviz timeline`` that
    apply (greedy, heatmap, fail_on, gamma, num_envs...). Its ``run`` and ``out`` are ``out``; ``episodes``,
    ``seed``, ``videos`` and ``overwrite``, when given (not None), replace its fields (defaults: the config's:
    10, 0, "first:1", False).
    """

    def __init__(self, out: str | os.PathLike, env: EnvRecipe | str, *, episodes: int | None = None,
                 seed: int | None = None, videos: str | None = None, sinks: Sink | list[Sink] | None = None,
                 overwrite: bool | None = None,
                 config: TimelineConfig | None = None):  # type: ignore[valid-type]  # (made by make_dataclass)
        self.recipe = coerce_recipe(env)
        if config is not None and not isinstance(config, TimelineConfig):
            raise UsageError(f"TimelineWriter(config={config!r}): expected a rlviz.TimelineConfig (the options of "
                             "`rlviz timeline`) or None.")
        given = {k: v for k, v in (("episodes", episodes), ("seed", seed), ("videos", videos),
                                   ("overwrite", overwrite)) if v is not None}
        self.config = replace(config or TimelineConfig(run=os.fspath(out)), run=os.fspath(out), out=out, **given)
        self.out = Path(out)
        self.sinks = as_sinks(sinks)
        self._names: tuple | None = None
        self._evaluator = Evaluator(self.config)
        self.data: dict = {"checkpoints": []}
        prepare_out_folder(self.out, self.config, inputs=())  # (its config's run is the folder itself)

    def add(self, policy: Policy, step: int, *, action_names: tuple | None = None,
            gamma: float = 0.99) -> dict:
        """Evaluate ``policy`` (copied now) as the checkpoint at training ``step`` on the run's seeds, rewrite the
        timeline's files, log its row to the sinks at ``step``; returns its row of timeline.json."""
        step = check_step(step)
        if not isinstance(policy, Policy):
            raise UsageError(f"TimelineWriter.add: policy is a {type(policy).__name__}; expected an rlviz Policy "
                             "(e.g. TorchPolicy(net), or sb3_policy(model)).")
        if self._names is None:
            self._names = tuple(action_names) if action_names else tuple(env_facts(self.recipe)[2])
        frozen = _snapshot(policy)
        return self.add_agent(LoadedAgent(frozen, self.recipe, self._names, float(gamma), frozen.kind, {"step": step},
                                          None, "live"), step)

    def add_agent(self, agent: LoadedAgent, step: int, path: Path | None = None) -> dict:
        """:meth:`add` for an agent that training no longer changes (a torch policy copied by :meth:`add`, or a flax
        agent built from a training loop's params: :class:`rlviz.integrations.jax_loop.JaxTimeline`); its row.
        ``path``: the file the agent was saved to in the folder (its ``checkpoint`` in timeline.json), if any."""
        step = check_step(step)
        if any(c.step == step for c in self._evaluator.done):
            raise UsageError(f"TimelineWriter.add: step {step} is already in {self.out}; add each step once.")
        path = Path(path) if path is not None else self.out / f"step_{step}"
        cp = TimelineCheckpoint(step, path, path.name, "training", agent=agent)
        done = self._evaluator.add(cp)
        if done.error is not None:
            raise UsageError(f"TimelineWriter.add: {done.error}")
        self.data = write_outputs(self.out, self._evaluator.done, [], self.config)
        write_marker(self.out, "timeline", config_dict(self.config),  # what --overwrite may remove later
                     [f for f in written_files(self.out) if f != MARKER])
        log_rows(self.sinks, self.data, {step})
        return next(r for r in self.data["checkpoints"] if r["step"] == step)

    @property
    def checkpoints(self) -> list[TimelineCheckpoint]:
        return list(self._evaluator.done)

    def close(self) -> None:
        """The progression video and timeline.png to the sinks, at the last checkpoint's step (the sinks stay
        open: they are the caller's)."""
        log_end(self.sinks, self.out, self.data)

    def __enter__(self) -> TimelineWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
