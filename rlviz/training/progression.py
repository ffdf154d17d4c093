"""``progression.mp4``: the same episode seed played by each checkpoint of a training run, in training order.

Each checkpoint's part is recorded once, through :class:`~rlviz.record.RecordEpisode` and
:func:`~rlviz.record.run_episode` (so it shows rlviz's panels: action probabilities, value, return-to-go, entropy,
saliency), with a band above the panels naming its training step. A part is its own H.264 file,
``progression/step_<N>.mp4`` with its per-step numbers in ``.npz`` beside it (the report plays a checkpoint's part
from them), streamed frame by frame to :class:`~rlviz.media.VideoWriter` from the recorder's disk spool (no
episode of frames in memory). ``progression.mp4`` is the parts joined without re-encoding
(:func:`rlviz.media.concat_videos`), so while ``--follow`` adds checkpoints only the new part is recorded.

Every part has the canvas of the first one (same env, same panels: normally the same size; another size is scaled
to fit and centred) and one frame per step at the env's frame rate: a part of a T-step episode has T+1 frames.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..draw.compose import ComposeOptions, Compositor
from ..draw.style import COLORS, put_text
from ..envs import make_env
from ..episode.trace import EpisodeInternals, EpisodeTrace
from ..errors import RlvizError, UsageError, VideoError
from ..media import VideoWriter, atomic_write, concat_videos
from ..record import RecordEpisode, run_episode
from ..record.episode_video import EpisodeVideo, RecordOptions
from ..record.internals import save_episode_data
from ..sources import LoadedAgent

__all__ = ["ProgressionPart", "PartOptions", "record_part", "write_progression", "part_path", "load_part", "BAND",
           "PartTask", "record_part_task"]

#: Height in pixels of the label band above each part's panels (a multiple of 16, so frames stay multiples of 16).
BAND = 32


@dataclass(frozen=True)
class ProgressionPart:
    """One checkpoint's part of ``progression.mp4``.

    step: the checkpoint's training step;  checkpoint: its name as shown;  seed: the episode seed played;
    video: the part's own MP4 (``progression/step_<N>.mp4``, a ``.npz`` of per-step numbers beside it);
    frames: frames in the part (episode steps + 1);  fps: its frame rate;  size: (width, height) of its frames;
    ret, length: the episode's return and steps;  first_frame: where the part starts in ``progression.mp4``
    (set by :func:`write_progression`; -1 before);  options: a key of what else decided the part (the file, the
    options), compared by :func:`load_part` before a part is reused.
    """

    step: int
    checkpoint: str
    seed: int
    video: str
    frames: int
    fps: float
    size: tuple[int, int]
    ret: float
    length: int
    first_frame: int = -1
    options: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["size"] = list(self.size)
        return d


def part_path(folder: str | os.PathLike, step: int) -> Path:
    """Where the part of the checkpoint at training ``step`` is written in the parts folder."""
    return Path(folder) / f"step_{int(step)}.mp4"


def load_part(folder: str | os.PathLike, step: int, options: str) -> ProgressionPart | None:
    """The part recorded earlier for ``step`` with the same ``options`` (seed, checkpoint, panels), when its MP4,
    ``.npz`` and ``.json`` are all there; else None (it is recorded again)."""
    video = part_path(folder, step)
    meta = video.with_suffix(".json")
    if not (video.is_file() and meta.is_file() and video.with_suffix(".npz").is_file()):
        return None
    try:
        d = json.loads(meta.read_text())
        part = ProgressionPart(**{**d, "size": tuple(d["size"])})
    except (ValueError, TypeError, KeyError):
        return None
    return part if part.options == options else None


class _PartVideo(EpisodeVideo):
    """One progression part: the label band, then rlviz's panels (:class:`~rlviz.draw.compose.Compositor`), fitted to
    the recorder's ``size`` when given; one frame per step. What it drew is told to the recorder (``part``)."""

    part: _PartRecorder

    def _draw(self, trace: EpisodeTrace, internals: EpisodeInternals) -> None:
        part, opt = self.part, self.options
        comp = Compositor(trace, internals, opt.compose_options or ComposeOptions())
        w, h = part.size or (comp.size[0], comp.size[1] + BAND)
        canvas = np.empty((h, w, 3), np.uint8)
        canvas[:] = COLORS["background"]
        ret = float(np.sum(trace.rewards, dtype=np.float64))
        put_text(canvas, f"{part.label}   return {ret:g} in {trace.num_steps} steps", 12, BAND - 11, "chosen", 0.6)
        cv2.line(canvas, (0, BAND - 2), (w - 1, BAND - 2), COLORS["grid"], 1)
        buf = np.empty((comp.size[1], comp.size[0], 3), np.uint8)
        with VideoWriter(self.path, self.fps, (w, h), preset=opt.preset, crf=opt.crf) as writer:
            for t in range(comp.T + 1):
                _fit_into(canvas[BAND:], comp.render(t, out=buf))
                writer.write(canvas)
        part.frames_written, part.frame_size = comp.T + 1, (w, h)
        save_episode_data(trace, internals, self.path.with_suffix(".npz"), fps=self.fps)


class _PartRecorder(RecordEpisode):
    """A :class:`RecordEpisode` whose episode videos are progression parts (:class:`_PartVideo`)."""

    def __init__(self, env, folder: Path, policy, *, label: str, size: tuple[int, int] | None, **kwargs: Any):
        super().__init__(env, folder, policy, **kwargs)
        self.label, self.size = label, size
        self.frames_written = 0
        self.frame_size: tuple[int, int] | None = None
        recorder = self

        class _Part(_PartVideo):
            part = recorder

        self.video_class = _Part


def _fit_into(dst: np.ndarray, src: np.ndarray) -> None:
    """Copy ``src`` into ``dst`` (both uint8 [h, w, 3]); another size is scaled to fit, centred on the background."""
    if src.shape == dst.shape:
        np.copyto(dst, src)
        return
    dh, dw = dst.shape[:2]
    k = min(dw / src.shape[1], dh / src.shape[0])
    w, h = max(1, int(src.shape[1] * k)), max(1, int(src.shape[0] * k))
    dst[:] = COLORS["background"]
    y, x = (dh - h) // 2, (dw - w) // 2
    dst[y : y + h, x : x + w] = cv2.resize(src, (w, h), interpolation=cv2.INTER_AREA)


@dataclass(frozen=True)
class PartOptions:
    """How :func:`record_part` plays and draws a checkpoint's part.

    label: the band's caption (default "training step <step>   <checkpoint>"); size: (width, height) of the
    frames, band included (default: this part's own canvas); key: a string identifying what else decides the part
    (compared by :func:`load_part`: :attr:`ProgressionPart.options`); gamma (None: the agent's), saliency,
    saliency_target: as :class:`~rlviz.record.RecordOptions`'; greedy, max_steps: as ``rlviz render``'s.
    """

    label: str | None = None
    size: tuple[int, int] | None = None
    key: str = ""
    gamma: float | None = None
    saliency: str | None = None
    saliency_target: str | int = "action"
    greedy: bool = False
    max_steps: int | None = None


def record_part(
    agent: LoadedAgent,
    step: int,
    checkpoint: str,
    seed: int,
    folder: str | os.PathLike,
    *,
    part: PartOptions | None = None,
) -> ProgressionPart:
    """Play episode ``seed`` with ``agent`` (what ``rlviz render`` plays for that seed) and write its part to
    ``folder/step_<step>.mp4`` (+ ``.npz``, and a ``.json`` describing it for :func:`load_part`), as ``part``
    (a :class:`PartOptions`: label, size, key, and how the episode is played and drawn) says."""
    opts = part if part is not None else PartOptions()
    if not isinstance(opts, PartOptions):
        raise UsageError(f"record_part(part={opts!r}): expected a PartOptions or None.")
    folder = Path(folder)
    video = part_path(folder, step)
    env = _PartRecorder(
        make_env(agent.recipe), folder, agent.policy,
        label=opts.label or f"training step {int(step):,}   {checkpoint}", size=opts.size, name_prefix=video.stem,
        options=RecordOptions(gamma=agent.gamma if opts.gamma is None else opts.gamma, saliency=opts.saliency,
                              saliency_target=opts.saliency_target, action_names=agent.action_names, save_data=False,
                              compose_options=ComposeOptions(min_seconds=0.0),
                              background=False),  # a batch job: drawn here, so a Ctrl-C finds no writer thread busy
    )
    try:
        played = run_episode(env, seed=seed, greedy=opts.greedy, max_steps=opts.max_steps)
    finally:
        env.close()
    recorded = Path(played.video_path) if played.video_path is not None else None
    if recorded is None or env.frame_size is None:
        raise VideoError(f"The episode of {checkpoint} (seed {seed}) was not recorded: the env gave no frame. "
                         "Check that it renders rgb_array frames.")  # pragma: no cover - RecordEpisode's check
    if recorded != video:  # RecordEpisode names it <prefix>-episode-0.mp4
        os.replace(recorded, video)
        os.replace(recorded.with_suffix(".npz"), video.with_suffix(".npz"))
    made = ProgressionPart(step=int(step), checkpoint=checkpoint, seed=int(seed), video=video.name,
                           frames=env.frames_written, fps=float(env.fps), size=env.frame_size, ret=float(played.ret),
                           length=int(played.length), options=opts.key)
    atomic_write(video.with_suffix(".json"), json.dumps(made.to_dict(), indent=1))
    return made


@dataclass(frozen=True)
class PartTask:
    """A worker's progression part: the checkpoint ``source`` (a :class:`~rlviz.jobs.shards.AgentSource`, loaded
    once per worker) playing episode ``seed``, drawn as ``part`` says; ``step`` and ``checkpoint`` name it."""

    source: Any
    step: int
    checkpoint: str
    seed: int
    part: PartOptions

    def __str__(self) -> str:
        return f"the progression part of {self.checkpoint}"


def record_part_task(task: PartTask, progress: Any = None) -> tuple[ProgressionPart | None, dict[str, bytes], str]:
    """(the part, its files' bytes by name, "") of one :class:`PartTask`, recorded in a private folder (the driver
    writes the files: :func:`rlviz.jobs.videos.write_video_files`), or (None, {}, the error in one line)."""
    with tempfile.TemporaryDirectory(prefix="rlviz-part-") as d:
        try:
            made = record_part(task.source.load(), task.step, task.checkpoint, task.seed, d, part=task.part)
        except RlvizError as exc:
            return None, {}, str(exc)
        files = {p.name: p.read_bytes() for p in sorted(Path(d).iterdir()) if p.is_file()}
    return made, files, ""


def write_progression(path: str | os.PathLike, parts: Sequence[ProgressionPart],
                      folder: str | os.PathLike) -> list[ProgressionPart]:
    """Join the parts' MP4s (in ``folder``) in the given order into one H.264 file at ``path``, without
    re-encoding; returns the parts with ``first_frame`` set. The parts must share size and frame rate."""
    parts = list(parts)
    first, out = 0, []
    for p in parts:
        out.append(ProgressionPart(**{**p.to_dict(), "size": p.size, "first_frame": first}))
        first += p.frames
    concat_videos([Path(folder) / p.video for p in parts], path)
    return out

