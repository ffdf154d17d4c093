"""Looking at processes from outside (Linux /proc): is a pid alive, which ffmpeg processes are running."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while process pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def ffmpeg_pids(*, parent: int | None = None, mentioning: str | None = None) -> list[int]:
    """Live ffmpeg processes, optionally only children of ``parent`` or those whose command line
    contains ``mentioning`` (e.g. the folder they write into)."""
    found = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if b"ffmpeg" not in os.path.basename(argv[0]) or not alive(int(d)):
            continue
        if (parent is None or ppid == parent) and (mentioning is None or mentioning.encode() in b" ".join(argv)):
            found.append(int(d))
    return found


class Watched:
    """``python -X importtime -m rlviz *args`` in a session of its own, its stderr on a terminal (a pseudo-terminal
    160 columns wide, so the CLI shows its progress bars: "starting", "loading X", "rollouts: 3/400", "encode: ...")
    read by a thread; ``-X importtime`` (unless ``importtime=False``) adds a line as each module's import completes. Signal moments follow the job's
    own progress: :meth:`wait_for` a pattern in what it has written, then :meth:`interrupt` it (Ctrl-C to the
    group). ``text()``: everything it wrote to stderr, carriage returns and the terminal's CRLF as newlines."""

    def __init__(self, args: list, cwd, env: dict, importtime: bool = True):
        import fcntl
        import pty
        import struct
        import subprocess
        import sys
        import termios
        import threading

        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
        flags = ["-X", "importtime"] if importtime else []
        self.proc = subprocess.Popen([sys.executable, *flags, "-m", "rlviz", *map(str, args)], cwd=cwd,
                                     env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave,
                                     start_new_session=True)
        os.close(slave)
        self._master, self._chunks, self._seen = master, [], threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                chunk = b""
            with self._seen:
                self._chunks.append(chunk)
                self._seen.notify_all()
            if not chunk:
                return

    def text(self) -> str:
        with self._seen:
            raw = b"".join(self._chunks).decode(errors="replace")
        return raw.replace("\r\n", "\n").replace("\r", "\n")

    def said(self) -> list[str]:
        """The lines of :meth:`text` other than progress bars (and their terminal escapes) and ``-X importtime``'s."""
        import re

        lines = (re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", ln).strip() for ln in self.text().splitlines())
        return [ln for ln in lines if ln and not re.match(r"^[^|]*:\s+\d+%\|", ln) and not ln.startswith("import time:")]

    def wait_for(self, pattern: str, timeout: float = 600) -> None:
        """Return once stderr has shown ``pattern`` (a regular expression, multi-line); an AssertionError when the
        job ends first or ``timeout`` (a hang guard, far beyond any wait) passes."""
        import re
        import time

        found = re.compile(pattern, re.MULTILINE)
        end = time.monotonic() + timeout
        with self._seen:
            while not found.search(self.text()):
                ended = bool(self._chunks) and self._chunks[-1] == b""
                assert not ended and time.monotonic() < end, \
                    f"{pattern!r} not seen (exit {self.proc.poll()}): {self.text()[-3000:]}"
                self._seen.wait(1.0)

    def interrupt(self) -> float:
        """Ctrl-C to the job's process group (python, ffmpeg, any worker alike); the moment it was sent
        (time.monotonic)."""
        import signal
        import time

        assert self.proc.poll() is None, f"the job ended before the signal: {self.text()[-3000:]}"
        os.killpg(self.proc.pid, signal.SIGINT)
        return time.monotonic()

    def finish(self, timeout: float = 120) -> int:
        """Its exit code, once it and the terminal's reader are done (killed after ``timeout``)."""
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.close()

    def close(self) -> None:
        import signal

        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._reader.join(timeout=10)
        try:
            os.close(self._master)
        except OSError:
            pass
