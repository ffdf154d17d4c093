"""One video of a multi-agent episode, fed step by step: the torch-free core of the PettingZoo recorders
(:mod:`rlviz.record.agents.pettingzoo`) and of the SuperSuit vector recorder (:mod:`rlviz.record.agents.supersuit`).

``AgentsVideo(path, fps, agents, options=None, *, labels=None, panels=None, writer=None)``: one MP4 at ``path`` of one
episode; ``agents`` maps each agent id to its :class:`AgentSpec` (action spec, bar labels, policy, observation space),
in column order. Fed in order: ``start(frame)`` (frame 0, uint8 [H, W, 3]); ``annotate(agent, **fields) -> bool`` (the
loop's numbers for the agent's coming decision, as :meth:`rlviz.record.EpisodeVideo.annotate`); ``decide(agent,
action, obs=None, mask=None)`` (it acts on the current frame, having seen ``obs``); ``step(frame, rewards, gone=(),
final_obs=None)`` (the env stepped: the new frame, None for the last one again; ``{agent: reward}``; the agents that
left with it and their last observations); ``finish(terminated=False, truncated=False) -> Path | None``; ``abort()``.
Frames: one from ``start`` and one per ``step`` (N + 1 for N env steps; an AEC env's step is one agent's move). Modes:
frames only (``panels=False``; the frames go straight to the encoder through an
:class:`~rlviz.record.episode_video.EpisodeVideo`, nothing is kept), panels (``panels=True``: the frames, each agent's
thumbnails and, for a policy, its observations are spooled to disk; ``finish`` computes each agent's internals, from
its policy in one batch and/or its annotations, and draws :class:`~rlviz.draw.panels_agents.AgentsCompositor`'s
frames), or ``panels=None``: decided by the first ``decide`` or ``step``: panels when ``annotate`` came before it.

With ``options.save_data`` a panel video writes ``path.with_suffix(".npz")``: ``agents`` (column order), ``fps``,
``num_frames``, and per agent ``<agent>/<name>``: ``decision_frames``, ``frame_rewards`` [N+1], ``gone_at`` (-1:
stayed), ``actions``, ``rewards`` (per decision) and :func:`~rlviz.record.internals.episode_arrays`' arrays.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...draw.panels_agents import AgentsLayout
from ...episode.trace import EpisodeInternals, EpisodeTrace, Spool
from ...errors import UsageError
from ..episode_video import EpisodeVideo, RecordOptions, VideoLabels
from ..internals import compute_internals
from ..writer import BackgroundWriter
from .draw import draw_agents_video
from .draw_worker import WorkerGone
from .track import AgentSpec, AgentTrack, pad

__all__ = ["AgentSpec", "AgentsOptions", "AgentsVideo"]


@dataclass(frozen=True)
class AgentsOptions:
    """The multi-agent recorders' options: ``record`` (a :class:`~rlviz.record.RecordOptions`: ``gamma``, ``preset``
    (default ``ultrafast``: a frame of many columns is large and mostly flat), ``crf``, ``save_data``, ``spool_dir``,
    ``background``), ``layout`` (an :class:`~rlviz.draw.panels_agents.AgentsLayout`) and ``process``: with
    ``record.background``, draw and encode the panel videos in a process of the recorder's own
    (:mod:`rlviz.record.agents.draw_worker`, started when a panel video reaches 64 frames, :data:`PROCESS_FROM`; ended by
    ``close()``), so the drawing does not take the training loop's interpreter lock; shorter videos, while no process
    runs, and False: on the recorder's writer thread. Both write the same file. Panels go to the encoder as YUV 4:2:0."""

    record: RecordOptions = field(default_factory=lambda: RecordOptions(preset="ultrafast"))
    layout: AgentsLayout = field(default_factory=AgentsLayout)
    process: bool = True

    @staticmethod
    def of(options: Any) -> AgentsOptions:
        """``options`` (None, a RecordOptions or an AgentsOptions) as AgentsOptions."""
        if options is None:
            return AgentsOptions()
        if isinstance(options, RecordOptions):
            return AgentsOptions(record=options)
        if not isinstance(options, AgentsOptions):
            raise UsageError(f"options={options!r}; expected rlviz.record.RecordOptions(...) or AgentsOptions(...).")
        return options


class AgentsVideo:
    """One video of one multi-agent episode (see the module docstring for the API and the frame count)."""

    def __init__(self, path: str | os.PathLike[str], fps: float, agents: dict[str, AgentSpec],
                 options: AgentsOptions | RecordOptions | None = None, *, labels: VideoLabels | None = None,
                 panels: bool | None = None, writer: BackgroundWriter | None = None) -> None:
        if not agents:
            raise UsageError("AgentsVideo received no agents; expected {agent_id: AgentSpec(...)}.")
        self.path, self.fps, self.agents = Path(path), float(fps), dict(agents)
        self.options = AgentsOptions.of(options)
        self.labels = labels or VideoLabels()
        self.writer = writer
        self.panels: bool | None = panels
        self.frames = self.steps = 0
        self.episode_return = 0.0  # the sum over agents
        self.ended = False  # every agent has left: the episode is over (set by the recorder)
        self._first: Any = None  # start()'s frame while the mode is not decided
        self._stream: EpisodeVideo | None = None
        self._frames: Spool | None = None
        self._last_frame: Any = None
        box, spool_dir = self.options.layout.thumbnail_box(len(self.agents)), self.options.record.spool_dir
        self._tracks = {a: AgentTrack(s, box, spool_dir) for a, s in self.agents.items()}
        self._annotated = False
        self.open = True
        if panels is False:
            self._open_stream()

    # -- feeding ----------------------------------------------------------------------------------
    def start(self, frame: Any) -> None:
        """Frame 0: what the env shows after its reset."""
        if self.frames:
            raise UsageError(f"AgentsVideo.start() after {self.frames} frames; start() gives frame 0 only.")
        self.frames = 1
        if self.panels is None:
            self._first = frame
        else:
            self._frame(frame, 0.0)

    def annotate(self, agent: str, **fields: Any) -> bool:
        """The loop's numbers for ``agent``'s coming decision; False (nothing kept) when the video is frames only."""
        if self.panels is False:
            return False
        track = self._track(agent)
        track.annotations.add(len(track.decisions), fields)
        self._annotated = True
        return True

    def decide(self, agent: str, action: Any, obs: Any = None, mask: Any = None) -> None:
        """``agent`` takes ``action`` on the current frame, having seen ``obs`` (its action ``mask``, if any)."""
        self.settle()
        if not self.panels:
            return
        track = self._track(agent)
        track.decisions.append(self.frames - 1)
        track.actions.extend(np.asarray(action, dtype=np.float64).reshape(-1).tolist())
        track.rewards.append(0.0)
        track.add_obs(obs if obs is not None else track.last_obs, mask)

    def step(self, frame: Any, rewards: dict[str, float], gone: Any = (), final_obs: dict[str, Any] | None = None) -> None:
        """The env stepped: its new ``frame``, each agent's reward, the agents that ``gone`` left and their last
        observations (``final_obs``)."""
        self.settle()
        t = self.frames
        self.frames += 1
        self.steps += 1
        total = float(sum(float(r) for r in rewards.values()))
        self.episode_return += total
        if self.panels:
            for a, r in rewards.items():
                track = self._tracks.get(a)
                if track is None:
                    continue
                pad(track.frame_rewards, t)
                track.frame_rewards.append(float(r))
                if track.rewards:
                    track.rewards[-1] += float(r)
            for a in gone:
                track = self._tracks.get(a)
                if track is not None and track.gone_at < 0:
                    track.gone_at = t
                    self._final(track, (final_obs or {}).get(a))
            for a, obs in (final_obs or {}).items():
                if a in self._tracks and not self._tracks[a].final:
                    self._final(self._tracks[a], obs)
        self._frame(frame, total)

    def add_frame(self, frame: Any) -> None:
        """A frame between steps (a ``render()`` collection): frames-only videos keep it."""
        self.settle()
        if not self.panels and self._stream is not None:
            self._stream.add_frame(frame)
            self.frames += 1

    def finish(self, terminated: bool = False, truncated: bool = False) -> Path | None:
        """Write the video (and its ``.npz``); its path, or None when it has no frame."""
        if not self.open:
            return None
        if self.panels is None:
            if self._first is None:
                self.open = False
                return None
            self.panels = self._annotated or any(s.policy is not None for s in self.agents.values())
            self._begin()
        self.open = False
        if not self.panels:
            stream, self._stream = self._stream, None
            if stream is None:
                return None
            stream.writer = self.writer  # (None at exit: written here)
            return stream.finish()
        return self._finish_panels(bool(terminated), bool(truncated))

    def abort(self) -> None:
        """Stop without a file."""
        self.open = False
        if self._stream is not None:
            self._stream.writer = self.writer  # (None at exit: no thread may start then, the stream stops here)
            self._stream.abort()
            self._stream = None
        self._close_spools()

    # -- inside -----------------------------------------------------------------------------------
    def _track(self, agent: str) -> AgentTrack:
        track = self._tracks.get(agent)
        if track is None:
            raise UsageError(f"agent {agent!r} is not one of this env's agents {list(self._tracks)}.")
        return track

    def settle(self) -> bool:
        """Decide the mode now if it is not yet (panels when annotated before, or with policies); True for panels."""
        if self.panels is None:
            self.panels = self._annotated or any(s.policy is not None for s in self.agents.values())
            self._begin()
        return bool(self.panels)

    def _begin(self) -> None:
        """The mode is decided: start()'s frame goes to the stream or the spool."""
        if not self.panels:
            self._open_stream()
        first, self._first = self._first, None
        if first is not None:
            self._frame(first, 0.0, count=False)

    def _warm(self) -> None:
        """A panel video reached :data:`PROCESS_FROM` frames: the writer's drawing process starts now (if it is not
        running), so its imports overlap the rest of the episode."""
        if self.writer is not None and self.options.process and not sys.is_finalizing():
            try:
                self.writer.worker().start(_DRAWING)
            except WorkerGone:
                pass  # (the video is drawn on the writer's thread; run() says why)

    def _open_stream(self) -> None:
        first = next(iter(self.agents.values()))
        self._stream = EpisodeVideo(self.path, self.fps, first.spec, self.options.record, labels=self.labels,
                                    panels=False, writer=self.writer)

    def _frame(self, frame: Any, reward: float, count: bool = True) -> None:
        if not self.panels:
            stream = self._stream
            assert stream is not None
            if stream.frames == 0 and stream.steps == 0:
                stream.start(frame)
            else:
                stream.step(frame, reward)
            return
        if frame is None:
            frame = self._last_frame
        if frame is None:
            return
        if self._frames is None:
            self._frames = Spool(np.shape(frame), np.uint8, dir=self.options.record.spool_dir, name="frames")
        self._frames.append(frame)
        self._last_frame = frame
        if len(self._frames) == PROCESS_FROM:
            self._warm()

    def _final(self, track: AgentTrack, obs: Any) -> None:
        if track.decisions and not track.final:
            track.add_obs(obs if obs is not None else track.last_obs, track.masks[-1] if track.masks else None)
            track.final = True

    def _close_spools(self) -> None:
        if self._frames is not None:
            self._frames.close()
            self._frames = None
        for track in self._tracks.values():
            track.close()

    def _finish_panels(self, terminated: bool, truncated: bool) -> Path | None:
        if self._frames is None or not len(self._frames):
            self._close_spools()
            return None
        try:
            num_frames = len(self._frames)
            parts = [(a, *self._internals(a, t, num_frames, terminated, truncated)) for a, t in self._tracks.items()]
        except BaseException:
            self._close_spools()
            raise
        if self.writer is None:
            self._write(parts, num_frames)
        else:
            self.writer.submit(self._write, parts, num_frames, video=True)
        return self.path

    def _internals(self, agent: str, track: AgentTrack, num_frames: int, terminated: bool,
                   truncated: bool) -> tuple[EpisodeTrace | None, EpisodeInternals | None]:
        """The agent's trace over its K decisions (K+1 rows) and its internals (None without numbers)."""
        k = len(track.decisions)
        pad(track.frame_rewards, num_frames)
        if k == 0:
            return None, None
        self._final(track, None)
        spec = track.agent.spec
        masks = track.masks
        obs = track.obs.view() if track.obs is not None else np.zeros((k + 1, 0), np.float32)
        actions = np.asarray(track.actions).reshape((k,) + tuple(spec.shape))
        trace = EpisodeTrace(
            frames=np.zeros((k + 1, 1, 1, 3), np.uint8), observations=obs,
            actions=actions.astype(np.float32 if spec.continuous else np.int64),
            rewards=np.asarray(track.rewards, np.float32), lives=None, terminated=terminated, truncated=truncated,
            action_names=track.agent.action_names, episode_id=self.labels.episode_id, seed=self.labels.seed,
            fps=self.fps, env_id=self.labels.env_id,
            action_masks=np.stack(masks) if masks and all(m is not None for m in masks) else None)
        policy = track.agent.policy
        if policy is None and not any(key in track.annotations.rows for key in ("logits", "mean")):
            return trace, None
        opt = self.options.record
        saliency = opt.saliency if policy is not None else None  # a policy to take apart: each thumbnail's tint
        internals = compute_internals(trace, policy, opt.gamma, saliency, opt.saliency_target, track.annotations, spec,
                                      observation_space=track.agent.observation_space)
        memory = track.annotations.memory(k)  # annotate(state=...): the loop's recurrent state, as RecordEpisode keeps it
        if memory is not None:
            internals = replace(internals, memory=memory, memory_kind=track.annotations.state_kind,
                                memory_start_gap=track.annotations.start_gap)
        return trace, internals

    def _write(self, parts: list[Any], num_frames: int) -> None:
        """Draw and encode the panel video, write its ``.npz`` (on the writer's thread when there is one; the drawing
        in the writer's drawing process, :mod:`rlviz.record.agents.draw_worker`, with ``options.process``)."""
        try:
            timelines = [self._timeline(a, trace, internals, num_frames) for a, trace, internals in parts]
            frames = self._frames.view()  # type: ignore[union-attr]  # (a panel video with frames)
            opt = self.options.record
            args = (str(self.path), self.fps, frames, timelines, self.options.layout, self.labels.env_id, opt.preset,
                    opt.crf)
            drawn, writer = False, self.writer
            if writer is not None and self._in_process(num_frames):
                try:
                    writer.worker().run(draw_agents_video, *args)
                    drawn = True
                except WorkerGone as exc:
                    warnings.warn(f"{exc}; {self.path.name} is drawn on the recorder's thread instead.", RuntimeWarning,
                                  stacklevel=2)
            if not drawn:
                draw_agents_video(*args)
            if opt.save_data:
                self._save(parts, num_frames)
        finally:
            self._close_spools()

    def _in_process(self, num_frames: int) -> bool:
        """Whether this video is drawn in the writer's drawing process: ``options.process``, a writer thread, and a
        video of :data:`PROCESS_FROM` frames or more (or the process already running)."""
        if self.writer is None or not self.options.process or sys.is_finalizing():
            return False
        return num_frames >= PROCESS_FROM or self.writer.worker().pid is not None

    def _timeline(self, agent: str, trace: EpisodeTrace | None, internals: EpisodeInternals | None,
                  num_frames: int) -> Any:
        from ...draw.panels_agents import AgentTimeline

        track = self._tracks[agent]
        decisions = np.asarray(track.decisions, np.int64)
        frames = np.arange(num_frames)
        index = np.searchsorted(decisions, frames, side="right") - 1
        end = track.gone_at if track.gone_at >= 0 else num_frames - 1
        if decisions.size:
            index[frames >= max(end, int(decisions[-1]) + 1)] = decisions.size
        acting = np.zeros(num_frames, bool)
        acting[decisions[decisions < num_frames]] = True
        thumbs = track.thumbs.view() if track.thumbs is not None and len(track.thumbs) >= decisions.size + 1 else None
        actions = trace.actions if trace is not None else np.zeros((0,), np.int64)
        sal = internals.saliency if internals is not None else None
        # image maps tint the thumbnails; a vector observation's (MPE) are a bar per feature where a thumbnail would be
        if sal is not None and not ((sal.ndim == 3 and thumbs is not None) or (sal.ndim == 2 and thumbs is None)):
            sal = None
        return AgentTimeline(agent, internals, actions, track.agent.action_names, index, acting,
                             np.asarray(track.frame_rewards[:num_frames], np.float64), track.gone_at, thumbs, sal)

    def _save(self, parts: list[Any], num_frames: int) -> None:
        from ...media.atomic import atomic_path
        from ..internals import episode_arrays

        data: dict[str, Any] = {"agents": np.asarray(list(self._tracks), dtype=str), "fps": np.float32(self.fps),
                                "num_frames": np.int64(num_frames)}
        for agent, trace, internals in parts:
            track = self._tracks[agent]
            own: dict[str, Any] = {"decision_frames": np.asarray(track.decisions, np.int64),
                                   "frame_rewards": np.asarray(track.frame_rewards[:num_frames], np.float32),
                                   "gone_at": np.int64(track.gone_at)}
            if trace is not None and internals is not None:
                own.update(episode_arrays(trace, internals, self.fps))
            elif trace is not None:
                own.update(actions=trace.actions, rewards=trace.rewards)
            data.update({f"{agent}/{k}": v for k, v in own.items()})
        with atomic_path(self.path.with_suffix(".npz")) as tmp:
            np.savez_compressed(tmp, **data)


#: the frames from which a panel video is drawn in the drawing process (a shorter one's drawing, ~1.6 ms a frame of
#: the interpreter's lock on the writer thread, costs the loop less than starting the process: ~0.35 s of CPU, ~60 MB)
PROCESS_FROM = 64
#: what the drawing process imports as it starts
_DRAWING = ("rlviz.record.agents.draw", "rlviz.draw.panels_agents", "rlviz.media.video", "rlviz.episode.trace")
