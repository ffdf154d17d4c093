"""The explorer's renders, kept in the run's cache area (``OUT/.rlviz-cache/explore/``): each episode rendered
once (a lock per episode: concurrent requests wait for the same render), into a private staging folder that is
renamed into place when complete (the .npz files first, the main video last: its presence means a complete render
of every variant), so an interrupted or failed render leaves nothing under a final name. A failed render is remembered as an error for the
page; the next request tries again."""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..choices import RUN_CACHE_DIR as CACHE_DIR
from ..errors import UsageError
from .index import inside
from .replay import video_name

__all__ = ["EpisodeCache", "RENDER_SLOTS", "STAGING_PREFIX"]

#: Staging folders of renders under way (removed when they end, and at start and exit).
STAGING_PREFIX = ".partial-"
#: At most this many episodes render at once (each replays the agent and encodes a video); the others wait in
#: order, shown as "rendering" with ``queued`` true. 50 opens at once run 2 renders and hold 2 threads, not 50.
RENDER_SLOTS = 2


class EpisodeCache:
    """Episodes of the run at ``root`` rendered by ``renderer(n, folder) -> {variant: mp4 path}`` (or one path:
    the variant "") and kept in its cache area; ``variants``: the renderer's (the first is the main video)."""

    def __init__(self, root: Path, renderer: Callable[[int, Path], Any], variants: tuple[str, ...] | None = None):
        self.root, self.renderer = Path(root), renderer
        self.variants: tuple[str, ...] = tuple(variants or getattr(renderer, "variants", None) or ("",))
        self.rel = f"{CACHE_DIR}/explore"
        self.renders: dict[int, int] = {}  # episode -> renders run (one per episode unless one failed)
        self._state: dict[int, dict[str, Any]] = {}
        self._locks: dict[int, threading.Lock] = {}
        self._guard = threading.Lock()
        self._slots = threading.BoundedSemaphore(RENDER_SLOTS)  # renders at once, page opens and video waits alike
        self._queue: queue.SimpleQueue[int] = queue.SimpleQueue()  # opened episodes, in order
        self._workers = 0
        self.clean()

    @property
    def folder(self) -> Path:
        """The cache folder; refused (UsageError) when it or a folder on the way is a link out of the run."""
        path = inside(self.root, self.rel)
        if path is None or path != self.root.joinpath(*self.rel.split("/")):
            raise UsageError(f"{self.root / self.rel} is a link; the explorer writes only inside the run folder. "
                             "Remove the link and open the run again.")
        return path

    def clean(self) -> None:
        """Remove staging folders left by an interrupted explorer."""
        folder = self.root / CACHE_DIR / "explore"
        if folder.is_dir() and not folder.is_symlink() and inside(self.root, self.rel) is not None:
            for p in folder.iterdir():
                if p.name.startswith(STAGING_PREFIX) and p.is_dir() and not p.is_symlink():
                    import shutil

                    shutil.rmtree(p, ignore_errors=True)

    def video(self, n: int, variant: str | None = None) -> Path | None:
        """Episode ``n``'s cached MP4 of ``variant`` (None: the main one) when the render is complete, or None."""
        main = self._file(video_name(n, self.variants[0]))
        if main is None or variant is None or variant == self.variants[0]:
            return main
        return self._file(video_name(n, variant)) if variant in self.variants else None

    def npz(self, n: int, variant: str | None = None) -> Path | None:
        video = self.video(n, variant)
        return None if video is None else self._file(video.name[: -len(".mp4")] + ".npz")

    def _file(self, name: str) -> Path | None:
        path = inside(self.root, f"{self.rel}/{name}")
        return path if path is not None and path.is_file() and path.parent == self.folder else None

    def status(self, n: int) -> dict[str, Any]:
        """{"state": "done" | "rendering" | "error" | "none", ...}."""
        if self.video(n) is not None:
            return {"state": "done"}
        with self._guard:
            s = dict(self._state.get(n, {"state": "none"}))
        if s.get("state") == "rendering":
            s["seconds"] = round(time.monotonic() - s.pop("since"), 1)
        return s

    def start(self, n: int) -> dict[str, Any]:
        """Queue episode ``n``'s render unless it is cached or under way (at most :data:`RENDER_SLOTS` run at
        once, on as many threads of the cache's own); its status."""
        with self._guard:
            busy = self._state.get(n, {}).get("state") == "rendering"
            if not busy and self.video(n) is None:
                self._state[n] = {"state": "rendering", "since": time.monotonic(), "queued": True}
                self._queue.put(n)
                if self._workers < RENDER_SLOTS:
                    self._workers += 1
                    threading.Thread(target=self._work, name=f"rlviz-explore-{self._workers}", daemon=True).start()
        return self.status(n)

    def _work(self) -> None:
        while True:  # (a daemon: it ends with the server)
            n = self._queue.get()
            with self._guard:
                self._state.get(n, {}).pop("queued", None)
            try:
                self.render(n)
            except Exception:  # noqa: BLE001, S110 - kept in the episode's status for the page
                pass

    def render(self, n: int) -> Path:
        """Episode ``n``'s MP4, rendered now unless cached; a render already under way is waited for."""
        with self._guard:
            lock = self._locks.setdefault(n, threading.Lock())
        with lock:
            done = self.video(n)
            if done is not None:
                self._set(n, {"state": "done"})
                return done
            try:
                path = self._render(n)
            except BaseException as exc:  # noqa: BLE001 - any failure is the page's to show; the server goes on
                self._set(n, {"state": "error", "message": _one_line(exc)})
                raise
            self._set(n, {"state": "done"})
            return path

    def _set(self, n: int, state: dict[str, Any]) -> None:
        with self._guard:
            self._state[n] = state

    def _render(self, n: int) -> Path:
        import tempfile

        folder = self.folder
        folder.mkdir(parents=True, exist_ok=True)
        self.renders[n] = self.renders.get(n, 0) + 1
        with self._slots, tempfile.TemporaryDirectory(prefix=f"{STAGING_PREFIX}{n}-", dir=folder) as tmp:
            made = self.renderer(n, Path(tmp))
            videos = made if isinstance(made, dict) else {self.variants[0]: made}
            if set(videos) != set(self.variants):
                raise RuntimeError(f"the renderer made {sorted(videos)}, not the variants {list(self.variants)}")
            order = [*self.variants[1:], self.variants[0]]  # the main video last: its presence means complete
            for variant in order:
                npz = Path(videos[variant]).with_suffix(".npz")
                if npz.is_file():
                    os.replace(npz, (folder / video_name(n, variant)).with_suffix(".npz"))
            for variant in order:
                os.replace(videos[variant], folder / video_name(n, variant))
        return folder / video_name(n, self.variants[0])


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else 'no message'}"
