"""One episode of a run, rendered on demand by the replay ``rlviz render --videos episode:N`` runs: the agent
loaded as render loads it (the trust rules are the explorer's flags, never the run's options), the episode
rolled out again from its seed (episode outcomes do not depend on how many envs run beside it), then replayed
through :func:`~rlviz.jobs.videos.record_episode` into ``episode-<N>-episode-0.mp4`` and its ``.npz``."""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..config import RenderConfig
from ..errors import UsageError

__all__ = ["EpisodeRenderer", "REPLAY_OPTIONS", "video_name"]

#: The run's options a replay takes from rlviz-run.json (what decides an episode and how its video is drawn);
#: trust, device, workers, sinks and paths of the run are never taken from the folder.
REPLAY_OPTIONS = ("checkpoint", "env", "model", "vecnormalize", "episodes", "seed", "greedy", "fail_on", "gamma",
                  "heatmap", "objects", "saliency", "saliency_target", "attention", "num_envs")


def video_name(n: int) -> str:
    """The file ``--videos episode:N`` writes for episode ``n`` (under videos/)."""
    return f"episode-{n}-episode-0.mp4"


class EpisodeRenderer:
    """Renders episodes of the run whose options are ``options`` (the marker's). ``checkpoint``: the agent to
    use instead of the one the options name; ``trust`` / ``device``: as render's flags. The agent loads on the
    first render (the server starts without torch)."""

    def __init__(self, options: dict[str, Any], checkpoint: str | None = None, trust: bool = False,
                 device: str = "cpu", base: Path | None = None):
        self.options = {k: options[k] for k in REPLAY_OPTIONS if k in options}
        if checkpoint is not None:
            self.options["checkpoint"] = checkpoint
        elif base is not None and isinstance(self.options.get("checkpoint"), str):
            path = self.options["checkpoint"]
            if not os.path.isabs(path) and not Path(path).exists() and (base / path).exists():
                self.options["checkpoint"] = str(base / path)  # a relative path written from the run's parent
        code = [f"--{k} {self.options[k]}" for k in ("model", "objects") if ":" in str(self.options.get(k) or "")]
        if code and not trust:
            raise UsageError(f"The run names code to import ({', '.join(code)}); rlviz explore imports nothing a "
                             "folder names unless you pass --trust-checkpoint (only for runs you trust).")
        if not self.options.get("checkpoint"):
            raise UsageError("The run's rlviz-run.json names no checkpoint; pass the agent with --checkpoint PATH.")
        self.trust, self.device = bool(trust), str(device)
        self._loaded: Any = None
        self._lock = threading.Lock()

    def config(self, n: int) -> RenderConfig:
        """The RenderConfig of ``rlviz render ... --videos episode:N`` for this run."""
        return RenderConfig(**self.options, videos=f"episode:{n}", trust_checkpoint=self.trust, device=self.device)

    def _agent(self, config: RenderConfig) -> tuple[Any, RenderConfig, float]:
        with self._lock:
            if self._loaded is None:
                from ..jobs.skeleton import vector_attention_off
                from ..jobs.stages import resolve_agent

                if not str(config.checkpoint).startswith("hf://") and not Path(config.checkpoint).exists():
                    raise UsageError(f"No checkpoint at {config.checkpoint} (the run's); pass the agent with "
                                     "--checkpoint PATH.")
                agent, resolved, gamma = resolve_agent(config)
                self._loaded = agent, vector_attention_off(agent, resolved), gamma
            agent, resolved, gamma = self._loaded
            return agent, replace(resolved, videos=config.videos), gamma

    def warm(self) -> None:
        """Load the agent now (the server calls it in a thread at start, so the first episode opened waits for its
        replay only); a failure is left to the first render, which reports it."""
        try:
            self._agent(self.config(0))
        except Exception:  # noqa: BLE001, S110 - said by the first render
            pass

    def __call__(self, n: int, folder: Path) -> Path:
        """Render episode ``n`` into ``folder``: the MP4's path (its .npz beside it)."""
        from ..evaluate.backends.threads import torch_threads
        from ..jobs.videos import record_episode

        config = self.config(n)
        if not 0 <= n < config.episodes:
            raise UsageError(f"episode {n}: the run has {config.episodes} episodes (0-{config.episodes - 1}).")
        agent, config, gamma = self._agent(config)
        with torch_threads(config.threads):
            one = replace(config, num_envs=1)
            result = _rollout_one(agent, one, gamma, n)
            record = next(e for e in result.episodes if e.index == n)
            replayed, _ = record_episode(agent, record, folder, f"episode-{n}", config, gamma)
        return Path(str(replayed.video_path))


def _rollout_one(agent: Any, config: RenderConfig, gamma: float, n: int) -> Any:
    """Episode ``n`` of the run's rollout, alone (render's rollout with ``indices=(n,)``)."""
    from ..attention.summary import attention_spec
    from ..evaluate.rollouts.plan import RolloutPlan, RolloutProbes
    from ..evaluate.rollouts.rollout import rollout

    plan = RolloutPlan(config.episodes, seed=config.seed, num_envs=1, greedy=config.greedy, fail_on=config.fail_on,
                       gamma=gamma, indices=(n,), heatmap=bool(config.heatmap),
                       objects=config.objects if config.heatmap else None, progress=False)
    return rollout(agent.recipe, agent.policy, plan, RolloutProbes(attention=attention_spec(config)))
