"""Shared by the explorer's tests: one 200-episode MinAtar run (made once per session, on disk) and a server on
it in a thread, bound to 127.0.0.1 on a free port."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rlviz.config import ExploreConfig

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "minatar_breakout_ppo.pt2"
EPISODES = 200


def minatar_run(tmp_path_factory: Any) -> Path:
    """``rlviz render samples/minatar_breakout_ppo.pt2 --episodes 200 --heatmap --videos none`` (once a session)."""
    out = tmp_path_factory.getbasetemp() / "explore-minatar-run"
    if not (out / "rlviz-run.json").is_file():
        from rlviz.jobs.render import render

        render(checkpoint=str(SAMPLE), episodes=EPISODES, heatmap=True, videos="none", out=out)
    return out


def reference_video(tmp_path_factory: Any, n: int) -> Path:
    """The video of episode ``n`` written by ``rlviz render ... --videos episode:N`` (the CLI, in this process)."""
    from rlviz.cli import main

    out = tmp_path_factory.getbasetemp() / f"explore-reference-{n}"
    if not (out / "rlviz-run.json").is_file():
        assert main(["render", str(SAMPLE), "--episodes", str(EPISODES), "--heatmap", "--videos", f"episode:{n}",
                     "--out", str(out), "--no-progress"]) == 0
    return out / "videos" / f"episode-{n}-episode-0.mp4"


@contextlib.contextmanager
def serving(run: Path, **options: Any) -> Iterator[SimpleNamespace]:
    """The explorer on ``run`` in a thread: .base (http://127.0.0.1:PORT), .cache, .index."""
    from rlviz.explore.gate import host_names
    from rlviz.explore.server import create_app, make_server, open_run

    config = ExploreConfig(out=run, port=0, browser=False, **options)
    index, cache = open_run(config)
    server = make_server("127.0.0.1", 0, create_app(index, cache, hosts=host_names("127.0.0.1")))
    port = server.server_port
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    before = set(threading.enumerate())
    try:
        yield SimpleNamespace(base=f"http://127.0.0.1:{port}", port=port, cache=cache, index=index)
    finally:
        server.shutdown()
        server.server_close()
        # (the first /api/run starts loading the agents in a daemon thread: it ends here, not in the next test,
        # whose reads of files it would otherwise join; the render threads wait on their queue and read nothing)
        for t in set(threading.enumerate()) - before:
            if t.name == "rlviz-explore-warm":
                t.join(300)


def wait_until(check: Any, timeout: float = 300.0, every: float = 0.1) -> Any:
    """Poll ``check()`` until it returns something truthy (its value); AssertionError after ``timeout`` s (generous:
    the tests wait on conditions, never on durations)."""
    end = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout} s: {check}")
        time.sleep(every)
