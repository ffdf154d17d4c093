"""How an :class:`~rlviz.record.episode_video.EpisodeVideo` takes its frames, one class per mode: :class:`Pending` (not
decided yet: panels if ``annotate`` comes before the first step), :class:`Stream` (frames only, straight to the
encoder), :class:`Panels` (frames and observations spooled to disk, the panels drawn when the episode ends) and
:class:`Finished`. A video holds one as ``mode`` and hands each call to it; a mode that settles hands the video on
to the next (``video.mode = ...``). Nothing here imports torch, matplotlib or ffmpeg."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError

#: an :class:`rlviz.record.episode_video.EpisodeVideo` (not imported: frames imports this module); the modes use its public
#: interface for them: ``open_spool``, ``spool``, ``write_frame``, ``close_stream``, ``finish_panels``, ``annotations``
EpisodeVideo = Any

__all__ = ["VideoMode", "Pending", "Stream", "Panels", "Finished", "initial_mode"]


class VideoMode:
    """One mode of a video (the base: what every mode does unless it says otherwise)."""

    #: a video in this mode keeps the loop's annotations (``annotate`` returns True)
    annotates = False
    #: a video in this mode is still fed (False once finished)
    open = True

    def start(self, video: EpisodeVideo, frame: Any, obs: Any, lives: int, masks: Any) -> None:
        """Frame 0 (``video.frames`` is counted by the video)."""

    def step(self, video: EpisodeVideo, frame: Any, reward: float, action: Any, obs: Any, lives: int, masks: Any,
             label: tuple[int | None, float | None]) -> None:
        """One env step and its frame; ``label``: (step, return) for the strip, None for the video's own."""
        raise NotImplementedError

    def add_frame(self, video: EpisodeVideo, frame: Any) -> None:
        """A frame between steps: only frames-only videos keep it."""

    def finish(self, video: EpisodeVideo, terminated: bool, truncated: bool, policy: Any,
               observation_space: Any) -> Path | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Pending(VideoMode):
    """Not decided yet: ``start``'s frame waits; the first ``step`` (or ``finish``) settles on panels when the loop
    annotated before it, frames only otherwise."""

    annotates = True

    def __init__(self) -> None:
        self.first: tuple[Any, Any, int, Any] | None = None  # start()'s frame, observation, lives and masks

    def start(self, video: EpisodeVideo, frame: Any, obs: Any, lives: int, masks: Any) -> None:
        self.first = (frame, obs, lives, masks)

    def settle(self, video: EpisodeVideo, panels: bool | None = None) -> VideoMode:
        """Pending -> panels (annotated before the first step) or frames only; the waiting frame goes to it."""
        panels = bool(video.annotations) if panels is None else panels
        video.mode = mode = Panels() if panels else Stream()
        if self.first is not None:
            frame, obs, lives, masks = self.first
            self.first = None
            if panels:
                video.open_spool(frame, obs, lives, masks)
            else:
                video.write_frame(frame, 0.0)
        return mode

    def step(self, video: EpisodeVideo, frame: Any, reward: float, action: Any, obs: Any, lives: int, masks: Any,
             label: tuple[int | None, float | None]) -> None:
        self.settle(video).step(video, frame, reward, action, obs, lives, masks, label)

    def finish(self, video: EpisodeVideo, terminated: bool, truncated: bool, policy: Any,
               observation_space: Any) -> Path | None:
        if self.first is None:
            video.mode = Finished()
            return None
        return self.settle(video, bool(video.annotations) or policy is not None).finish(
            video, terminated, truncated, policy, observation_space)


class Stream(VideoMode):
    """Frames only: each goes to the encoder (padded to multiples of 16), nothing is held."""

    def start(self, video: EpisodeVideo, frame: Any, obs: Any, lives: int, masks: Any) -> None:
        video.write_frame(frame, 0.0)

    def step(self, video: EpisodeVideo, frame: Any, reward: float, action: Any, obs: Any, lives: int, masks: Any,
             label: tuple[int | None, float | None]) -> None:
        video.steps += 1
        video.episode_return += float(reward)
        step, ret = label
        video.write_frame(frame, float(reward), video.steps if step is None else step,
                            video.episode_return if ret is None else ret)
        video.frames += frame is not None

    def add_frame(self, video: EpisodeVideo, frame: Any) -> None:
        video.write_frame(frame, 0.0, video.steps, video.episode_return)
        video.frames += 1

    def finish(self, video: EpisodeVideo, terminated: bool, truncated: bool, policy: Any,
               observation_space: Any) -> Path | None:
        video.mode = Finished()
        if video.writer is None:
            closed: Path | None = video.close_stream()
            return closed
        video.writer.submit(video.close_stream)
        return video.path if video.frames else None


class Panels(VideoMode):
    """Frames (and observations when the video keeps them) spooled to disk; ``finish`` draws the panels."""

    annotates = True

    def start(self, video: EpisodeVideo, frame: Any, obs: Any, lives: int, masks: Any) -> None:
        video.open_spool(frame, obs, lives, masks)

    def step(self, video: EpisodeVideo, frame: Any, reward: float, action: Any, obs: Any, lives: int, masks: Any,
             label: tuple[int | None, float | None]) -> None:
        video.steps += 1
        video.episode_return += float(reward)
        if action is None:
            raise UsageError("EpisodeVideo.step(action=None) in a video with panels; pass the action the env took.")
        rec = video.spool
        if rec is None:  # a panel video begun without start(): this step's frame is its frame 0
            if frame is not None:
                video.open_spool(frame, obs, lives, masks, at_step=True)
                video.frames += 1
            return
        rec.append(frame, obs, action, reward, lives, masks)
        video.frames += 1

    def finish(self, video: EpisodeVideo, terminated: bool, truncated: bool, policy: Any,
               observation_space: Any) -> Path | None:
        video.mode = Finished()
        path: Path | None = video.finish_panels(terminated, truncated, policy, observation_space)
        return path


class Finished(VideoMode):
    """Written (or aborted): nothing more is taken."""

    open = False

    def step(self, video: EpisodeVideo, frame: Any, reward: float, action: Any, obs: Any, lives: int, masks: Any,
             label: tuple[int | None, float | None]) -> None:
        raise UsageError(f"EpisodeVideo.step() after finish() of {video.path.name}.")

    def finish(self, video: EpisodeVideo, terminated: bool, truncated: bool, policy: Any,
               observation_space: Any) -> Path | None:
        return None


def initial_mode(panels: bool | None) -> VideoMode:
    """A new video's mode: ``panels`` True (:class:`Panels`), False (:class:`Stream`) or None (:class:`Pending`)."""
    return {None: Pending, True: Panels, False: Stream}[panels]()
