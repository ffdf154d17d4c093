"""What every recorder shares, written once: its arguments' rules and defaults (:func:`recorder_settings`,
:func:`default_triggers`, :func:`settle_policy`) and :class:`RecorderBase`: the writer thread, ``wait()``, the refusal
of a ``reset()`` after ``close()``, a finish that a Ctrl-C cannot cut in half, and what happens when the process
ends without ``close()``.

Ctrl-C (or an exception) in a training loop that never calls ``close()``: at interpreter exit every recorder still
alive first writes the videos of the episodes that had ended (queued on its writer thread), then drops the video in
progress (its spools and partial file deleted), so a finished episode is never lost and nothing is left in the
temporary folder. A process killed outright (SIGKILL) leaves its spools and partial files, named for its pid
(:mod:`rlviz.record.leftovers`); the next recorder made on that folder deletes them.

A recorder built on this (``RecordEpisode``, ``RecordVectorEpisode``, ``VecRecordEpisode``, one of several agents)
calls :meth:`RecorderBase.setup_recorder` in its constructor and lists its videos in progress in
:meth:`RecorderBase.take_videos` (any number: one per sub-env, per agent). It goes live (leftovers cleaned, finished
at exit) only once its outermost constructor has returned: every ``__init__`` of a subclass is wrapped for that
(:meth:`RecorderBase.__init_subclass__`), so a constructor that raises, whichever check it was, leaves nothing
registered and no thread started. Nothing here imports torch.
"""

from __future__ import annotations

import atexit
import functools
import math
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .episode_video import EpisodeVideo, RecordOptions
from .setup import capped_cubic_video_schedule, probe_callable
from .writer import BackgroundWriter

__all__ = ["RecorderSettings", "recorder_settings", "default_triggers", "settle_policy", "RecorderBase",
           "every_episode"]


@dataclass(frozen=True)
class RecorderSettings:
    """A recorder's checked arguments: where its videos go, their name prefix, their frame rate and the most frames
    a video holds (``math.inf``: whole episodes)."""

    video_folder: Path
    name_prefix: str
    fps: float
    video_length: float


def _whole_number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number == value else None


def recorder_settings(owner: str, video_folder: Any, name_prefix: Any, fps: Any, metadata: Any, video_length: Any,
                      *, whole: float = math.inf, least: int = 0) -> RecorderSettings:
    """Check a recorder's common arguments and settle their defaults: ``name_prefix`` a file name prefix (no path);
    ``video_length`` a whole number >= ``least`` (0: ``whole``); ``fps`` positive (default: ``metadata["render_fps"]``,
    else 30). Creates the video folder."""
    if not isinstance(name_prefix, str) or re.search(r"[\\/\x00]", name_prefix) or name_prefix in (".", ".."):
        raise UsageError(f"{owner}(name_prefix={name_prefix!r}): name_prefix must be a file name prefix, not a path; "
                         "put the folder in video_folder.")
    length = _whole_number(video_length)
    if length is None or length < least:
        expected = "a positive number of steps" if least > 0 else "0 (whole episodes) or a number of frames"
        raise UsageError(f"video_length={video_length!r}; expected {expected}.")
    rate = fps or (metadata or {}).get("render_fps") or 30
    try:
        rate = float(rate)
    except (TypeError, ValueError):
        rate = float("nan")
    if not rate > 0 or math.isinf(rate):
        raise UsageError(f"fps={fps!r}; expected a positive number.")
    folder = Path(video_folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(f"video_folder={str(video_folder)!r} is a file; pass a folder for the videos.") from None
    return RecorderSettings(folder, name_prefix, rate, length if length else whole)


def every_episode(episode_id: int) -> bool:
    """The trigger that records every episode."""
    return True


def default_triggers(episode_trigger: Callable[[int], bool] | None, step_trigger: Callable[[int], bool] | None,
                     default: Callable[[int], bool] = capped_cubic_video_schedule
                     ) -> tuple[Callable[[int], bool] | None, Callable[[int], bool] | None]:
    """``(episode_trigger, step_trigger)``, each callable or None; neither given: ``default`` chooses episodes
    (gymnasium's capped cubic schedule unless the recorder says otherwise)."""
    for name, trigger in (("episode_trigger", episode_trigger), ("step_trigger", step_trigger)):
        if trigger is not None and not callable(trigger):
            raise UsageError(f"{name}={trigger!r}; expected a function of the episode (or step) count, e.g. "
                             f"{name}=lambda k: k % 100 == 0.")
    if episode_trigger is None and step_trigger is None:
        episode_trigger = default
    return episode_trigger, step_trigger


def settle_policy(policy: Any, action_space: Any, observation_space: Any, squash: bool, owner: str) -> Any:
    """``policy`` as an rlviz Policy checked against the env: its actions, and (a callable or module the recorder
    wraps) one forward on a sampled observation, so a policy made for another env fails here in one line. None
    stays None (frames only); torch loads only here, with a policy."""
    if policy is None:
        return None
    from ..agent.actions import check_policy_actions
    from ..agent.callable_policy import CallablePolicy, as_policy

    settled = as_policy(policy, action_space, squash)
    check_policy_actions(settled, action_space)
    if settled is not policy and (not isinstance(settled, CallablePolicy) or settled.fn is policy):
        probe_callable(settled, policy, observation_space, owner)
    return settled


# -- the process's recorders, finished at exit ----------------------------------------------------
_LIVE: weakref.WeakSet[RecorderBase] = weakref.WeakSet()
_REGISTERED = threading.Lock()
_registered = False


def _register(recorder: RecorderBase) -> None:
    global _registered
    with _REGISTERED:
        _LIVE.add(recorder)
        if not _registered:
            atexit.register(_at_exit)
            _registered = True


def _at_exit() -> None:
    """Interpreter exit without ``close()`` (Ctrl-C, an exception, the end of a script): the ended episodes' videos
    are written, the ones in progress dropped, and nothing of this process stays in the temporary folder."""
    recorders = list(_LIVE)
    for recorder in recorders:
        recorder.drain()
    folders, spools = [], []
    for recorder in recorders:
        for video in recorder.take_videos():
            video.writer = None  # (no thread may start at exit: dropped here)
            try:
                video.abort()
            except Exception:  # noqa: S110 - best effort at exit; the files are deleted below
                pass
        folders.append(recorder.video_folder)
        spools.append(recorder.options.spool_dir)
    from .leftovers import clean_own

    clean_own(folders, spools)


class RecorderBase:
    """The shared part of the recorders (a mixin beside their gymnasium / SB3 base class)."""

    video_folder: Any
    name_prefix: str
    fps: float
    frames_per_sec: float
    options: RecordOptions
    _writer: BackgroundWriter | None = None
    _closed = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Wrap the subclass's own ``__init__`` (if it has one) so that the recorder goes live when the outermost
        constructor returns: the checks of every class in between (a user's subclass too) have passed by then."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_rlviz_goes_live", False):
            return

        @functools.wraps(init)
        def __init__(self: RecorderBase, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            if type(self).__init__ is __init__:  # the outermost constructor: every check has passed
                self._go_live()

        __init__._rlviz_goes_live = True  # type: ignore[attr-defined]
        setattr(cls, "__init__", __init__)  # noqa: B010 - (mypy refuses an assignment to a method)

    def setup_recorder(self, settings: RecorderSettings, options: RecordOptions | None) -> RecordOptions:
        """Keep ``settings`` and ``options`` as this recorder's attributes and make its writer
        (``options.background``; its thread starts with the first video). Returns the options. Nothing is
        registered or deleted here: the recorder goes live (:meth:`_go_live`) once its constructor has returned."""
        if options is not None and not isinstance(options, RecordOptions):
            raise UsageError(f"options={options!r}; expected a rlviz.record.RecordOptions(...).")
        self.options = opt = options or RecordOptions()
        self.video_folder = settings.video_folder
        self.name_prefix = settings.name_prefix
        self.fps = self.frames_per_sec = settings.fps
        self._writer = BackgroundWriter() if opt.background else None  # encodes and draws off the loop's thread
        from .. import interrupts  # noqa: F401 - loaded here so that finishing() never imports under a Ctrl-C
        from . import leftovers  # noqa: F401 - (both loaded by the first recorder, not by ``import rlviz``)

        return opt

    def _go_live(self) -> None:
        """The constructor has returned: delete what killed recorders left in this recorder's folders, and have it
        finished at exit."""
        from .leftovers import clean_stale

        clean_stale(Path(self.video_folder), self.options.spool_dir)
        _register(self)

    def wait(self) -> None:
        """Block until every video finished so far is written (they are encoded on the recorder's thread)."""
        if self._writer is not None:
            self._writer.wait()

    def _after_write(self, fn: Callable[..., None], *args: Any) -> None:
        """``fn(*args)`` once the videos finished so far are written (on the writer's thread when there is one)."""
        if self._writer is None:
            fn(*args)
        else:
            self._writer.submit(fn, *args)

    def take_videos(self) -> list[EpisodeVideo]:
        """The videos in progress, handed over (the recorder forgets them): at exit they are dropped. A recorder
        with videos overrides this."""
        return []

    @staticmethod
    def write_at_exit(video: Any) -> list[Any]:
        """A frames-only ``video`` whose episode has ended (it waits for the next reset to close it), finished here at
        exit, on this thread (no thread may start then). [] once written; ``[video]`` (to be dropped, as the videos in
        progress are) when it could not be."""
        video.writer = None
        try:
            video.finish()
            return []
        except Exception:  # noqa: BLE001 - at exit: dropped as the others are
            return [video]

    def drain(self) -> None:
        """Let the writer finish what it was given (at exit; errors were the loop's to see, and it is gone)."""
        try:
            self.wait()
        except BaseException:  # noqa: S110 - at exit: the other videos still get written
            pass
        if self._writer is not None:
            self._writer.stop_worker()

    def check_open(self, call: str) -> None:
        """Refuse ``call`` once the recorder is closed (a video started then would never be finished)."""
        if self._closed:
            raise UsageError(f"{type(self).__name__}.{call}() after close(): a closed recorder records nothing more; "
                             "make a new recorder (or a new env) to go on.")

    def mark_closed(self) -> None:
        """The recorder is closed (its videos finished): its drawing process, if any, ends."""
        self._closed = True
        _LIVE.discard(self)
        if self._writer is not None:
            self._writer.stop_worker()

    @contextmanager
    def finishing(self) -> Iterator[None]:
        """A video's finish (taken from the recorder, handed to the writer) with Ctrl-C held until it is handed over,
        so an ended episode is never lost half-way (:func:`rlviz.interrupts.deferred_sigint`). A video drawn here
        (no writer thread, or saliency) is not held: a Ctrl-C stops it at once and its files are removed."""
        if self._writer is None or self.options.saliency is not None:
            yield
            return
        from ..interrupts import deferred_sigint

        with deferred_sigint():
            yield

