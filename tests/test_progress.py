"""Progress: bars with rates and ETA on every long phase in a terminal; nothing in a pipe; the library silent
unless asked."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

from rlviz import RenderConfig, render


def _run_in_pty(args: list[str], cwd, timeout: float = 240) -> tuple[int, str]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a 160-column terminal
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "160", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=30), b"".join(chunks).decode(errors="replace")


def _args(ckpt, out) -> list[str]:
    return [sys.executable, "-m", "rlviz", "render", str(ckpt), "--episodes", "6", "--num-envs", "2", "--heatmap",
            "--videos", "first:1", "--saliency", "gradient", "--out", str(out)]


def test_a_terminal_sees_every_phase_with_rates(minatar_ckpt, tmp_path):
    code, text = _run_in_pty(_args(minatar_ckpt, tmp_path / "out"), cwd=tmp_path)
    assert code == 0, text[-2000:]
    for phase in ("loading agent.pt2", "rollouts", "heatmap", "video first:0", "saliency (gradient)", "encode"):
        assert phase in text, f"no progress for {phase!r} in:\n{text[-3000:]}"
    assert re.search(r"\d+/6 \[", text) and re.search(r"ep/s|s/ep", text)  # counts, elapsed/ETA, rate
    assert re.search(r"frame/s|s/frame", text)


def test_a_pipe_and_no_progress_see_no_bars(minatar_ckpt, tmp_path):
    piped = subprocess.run(_args(minatar_ckpt, tmp_path / "a"), capture_output=True, text=True, cwd=tmp_path,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=240)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr.strip() == "" and "rollouts" not in piped.stdout
    code, text = _run_in_pty(_args(minatar_ckpt, tmp_path / "b") + ["--no-progress"], cwd=tmp_path)
    assert code == 0 and "rollouts" not in text and "%|" not in text


def test_the_library_is_silent_unless_asked(minatar_ckpt, tmp_path, capfd):
    render(RenderConfig(checkpoint=minatar_ckpt, episodes=2, num_envs=2, videos="first:1", out=tmp_path / "a"))
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    render(RenderConfig(checkpoint=minatar_ckpt, episodes=2, num_envs=2, videos="none", out=tmp_path / "b",
                        progress=True))
    assert "rollouts" in capfd.readouterr().err
