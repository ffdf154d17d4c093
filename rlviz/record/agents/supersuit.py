"""Recording inside a training loop on SuperSuit-vectorised PettingZoo envs (``pettingzoo_env_to_vec_env_v1`` +
``concat_vec_envs_v1``, what CleanRL's and PettingZoo's PPO tutorials train on): :class:`RecordSuperSuitGame`.

The vector's rows are agents: a game of n agents is n consecutive rows (``concat_vec_envs_v1`` puts game g at rows
``g*n .. g*n+n-1``). The recorder takes one game (``game=``) and records its episodes as
:class:`~rlviz.record.agents.pettingzoo.RecordParallelEpisode` does, one panel column per agent: it sits inside SuperSuit's
``MarkovVectorEnv`` of that game, around its parallel env, so each episode's last frame is captured before
SuperSuit's automatic reset starts the next. The loop's numbers for the whole batch go to ``annotate`` as they are
(``logits`` [num_envs, A], ``value`` [num_envs], torch tensors included); the recorder keeps its game's rows.

    envs = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(parallel_env), 4, num_cpus=0, base_class="gymnasium")
    envs = RecordSuperSuitGame(envs, "videos", episode_trigger=lambda e: e % 10 == 0)
    ...
    logits, value = agent(obs)
    envs.annotate(logits=logits, value=value)
    obs, rewards, terms, truncs, infos = envs.step(actions)

Each finished video goes to ``options.sinks`` as the vector recorders' do (``RecordOptions(sinks=...)``: ``"auto"``, the
default, logs to the active W&B run if there is one; a TensorBoard ``SummaryWriter``, an rlviz Sink, a list, or None)
under ``videos/game-{game}``, at the vector step its episode ended (``step()`` calls x ``num_envs``, CleanRL's
``global_step``). Everything else (``reset``, ``step``, ``num_envs``, spaces, attributes set by the loop) is the vector env's. The game's
parallel env must render images (``render_mode="rgb_array"`` on the PettingZoo env, before SuperSuit's
preprocessing: the video shows the full-colour game, the thumbnails what the agents see). SuperSuit's process-based
concatenation (``num_cpus`` > 0) keeps its games in other processes: record with ``num_cpus=0``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import UsageError
from ..episode_video import RecordOptions
from ..vector_parts import VideoSinks
from .pettingzoo import RecordParallelEpisode
from .video import AgentsOptions

__all__ = ["RecordSuperSuitGame", "game_rows"]


def _markov_envs(envs: Any) -> list[Any]:
    """The per-game ``MarkovVectorEnv`` s of a SuperSuit vector env, in row order (through an SB3 wrapper's ``venv``)."""
    e = envs
    for _ in range(8):
        if hasattr(e, "par_env") and hasattr(e, "num_envs"):
            return [e]
        if hasattr(e, "vec_envs"):
            return list(e.vec_envs)
        if hasattr(e, "venv"):
            e = e.venv
        elif hasattr(e, "env"):
            e = e.env
        else:
            break
    raise UsageError(f"RecordSuperSuitGame received {type(envs).__name__}; expected SuperSuit's "
                     "pettingzoo_env_to_vec_env_v1(...) or concat_vec_envs_v1(..., num_cpus=0) (its games in this "
                     "process: num_cpus > 0 keeps them in other processes).")


def game_rows(envs: Any, game: int = 0) -> range:
    """The rows of ``game`` in a SuperSuit vector env (one per agent of that game)."""
    games = _markov_envs(envs)
    if not 0 <= int(game) < len(games):
        raise UsageError(f"game={game}; this vector env holds {len(games)} game(s) (0..{len(games) - 1}).")
    start = sum(int(g.num_envs) for g in games[: int(game)])
    return range(start, start + int(games[int(game)].num_envs))


class RecordSuperSuitGame:
    """Record one game of a SuperSuit vector env, every agent's panel (see the module docstring).

    Args:
        envs: ``pettingzoo_env_to_vec_env_v1(...)`` or ``concat_vec_envs_v1(..., num_cpus=0)`` (any ``base_class``).
        video_folder, episode_trigger, name_prefix, fps: as :class:`~rlviz.record.agents.pettingzoo.RecordParallelEpisode`
            (``episode_trigger`` counts this game's episodes; default: every one of them when ``policies`` are
            given, else gymnasium's capped cubic schedule).
        game: which game (0: the first ``num_agents`` rows).
        policies: one policy shared by the agents, ``{agent: policy}``, or None (the loop's ``annotate``).
        options: :class:`~rlviz.record.agents.video.AgentsOptions` or :class:`~rlviz.record.RecordOptions`.
    """

    def __init__(self, envs: Any, video_folder: str | os.PathLike[str],
                 episode_trigger: Callable[[int], bool] | None = None, name_prefix: str = "rl-video",
                 fps: float | None = None, game: int = 0, *, policies: Any = None,
                 options: AgentsOptions | RecordOptions | None = None) -> None:
        self.envs = envs
        self.rows = game_rows(envs, game)
        markov = _markov_envs(envs)[int(game)]
        sinks = VideoSinks(AgentsOptions.of(options).record.sinks)  # checked before the recorder is made
        # made last of the checks: a recorder that raises leaves nothing registered, and the game's env untouched
        self.recorder = RecordParallelEpisode(markov.par_env, video_folder, episode_trigger, name_prefix=name_prefix,
                                              fps=fps, gc_trigger=None, policies=policies, options=options)
        markov.par_env = self.recorder  # SuperSuit's game now steps (and resets) through the recorder
        self._markov = markov
        self.agents = list(markov.par_env.possible_agents)
        self.game = int(game)
        self._sinks = sinks
        self.recorder.on_video = self._log

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("envs", "recorder"):
            raise AttributeError(name)
        return getattr(self.envs, name)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        return self.envs.reset(*args, **kwargs)

    def step(self, actions: Any) -> Any:
        return self.envs.step(actions)

    def annotate(self, logits: Any = None, value: Any = None, **extra: Any) -> None:
        """The loop's numbers for the whole batch (one row per vector row); this game's rows go to its agents that
        are playing. A no-op while the game's episode is not recorded."""
        if not self.recorder.recording:
            return
        from ..arrays import as_numpy

        playing = set(self.recorder.env.agents)
        fields: dict[str, Any] = {}
        for key, v in dict(extra, logits=logits, value=value).items():
            if v is None:
                continue
            arr = as_numpy(v, np.float32)
            if arr.ndim == 0 or arr.shape[0] != self.num_rows:
                raise UsageError(f"annotate({key}=...) received {list(arr.shape)}; expected one row per vector row "
                                 f"({self.num_rows} = num_envs), as the batch the loop computed.")
            mine = arr[self.rows.start: self.rows.stop]
            fields[key] = {a: mine[i] for i, a in enumerate(self.agents) if a in playing}
        if fields:
            self.recorder.annotate(**fields)

    @property
    def num_rows(self) -> int:
        """The vector env's rows (``num_envs``)."""
        return int(sum(int(g.num_envs) for g in _markov_envs(self.envs)))

    @property
    def recording(self) -> bool:
        return self.recorder.recording

    @property
    def last_video_path(self) -> Path | None:
        """The last finished video of the game (complete on disk when this returns)."""
        return self.recorder.last_video_path

    def wait(self) -> None:
        """Block until every video finished so far is written."""
        self.recorder.wait()

    def close(self) -> None:
        """Close the vector env: the game's recorder finishes its current video (a game cut short) with it, and
        every video is logged to the sinks."""
        try:
            self.envs.close()
        finally:
            self._sinks.close()

    def _log(self, path: Path, episode_id: int, steps: int, episode_return: float, step_id: int) -> None:
        """A finished video to the sinks, at the vector env's step it ended (``step()`` calls x ``num_envs``, as
        CleanRL's ``global_step``)."""
        self._sinks.log(f"videos/game-{self.game}", path, (step_id + 1) * self.num_rows, self.recorder.frames_per_sec,
                        f"{path.stem}: episode {episode_id}, {steps} steps, team return {episode_return:.6g}")
