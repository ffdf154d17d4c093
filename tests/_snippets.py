"""Run a documentation snippet as pasted, in an interpreter forked from one that has already imported the heavy
libraries the snippets import (torch, gymnasium, matplotlib, stable-baselines3, rlviz's job modules).

A snippet still gets what a fresh interpreter gives it: its own process, its own ``__main__`` namespace (a name it
forgot to import is a ``NameError``), its working folder and environment, its own stdout/stderr, its exit code (an
uncaught exception prints its traceback and exits 1, ``sys.exit(n)`` exits ``n``), atexit handlers run at its end.
What it does not pay is ~2.5 CPU-seconds of imports per snippet (the docs and README hold ~55 snippets). The server
imports no library that starts threads at import (JAX does: a JAX snippet imports JAX itself, after the fork), so
the fork is safe. ``RLVIZ_SNIPPETS_FRESH=1`` runs each snippet in a new interpreter instead (the old way).

Protocol (one line of JSON each way, over the server's stdin/stdout): ``{"code", "cwd", "env", "out", "err"}`` ->
``{"pid"}`` once forked, then ``{"rc"}`` when the child exited.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["SnippetRunner"]

#: (torch._dynamo: what an optimizer's first step and torch.export import, ~2 CPU-s; 8 of the docs' 36 snippets
#: train or save a checkpoint. torch's own internals only: a module a snippet must import itself, ale_py's env
#: registration say, is not preloaded, so a forgotten import still fails as it would in a fresh interpreter)
PRELOAD = ("numpy", "torch", "torch._dynamo", "torch.export._trace", "gymnasium", "matplotlib", "matplotlib.pyplot",
           "stable_baselines3", "rlviz", "rlviz.cli", "rlviz.jobs.render", "rlviz.jobs.compare", "rlviz.record")

_SERVER = r'''
import atexit, json, os, sys, traceback
os.environ["MPLBACKEND"] = "Agg"
import importlib
for name in PRELOAD:
    try:
        importlib.import_module(name)
    except Exception:
        pass
import threading
assert threading.active_count() == 1, [t.name for t in threading.enumerate()]  # (a fork copies one thread only)
sys.stdout.write(json.dumps({"ready": True}) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        rc = 0
        try:
            out = os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            err = os.open(job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(out, 1); os.dup2(err, 2)
            sys.stdin = open(0); sys.stdout = open(1, "w", buffering=1); sys.stderr = open(2, "w", buffering=1)
            os.chdir(job["cwd"])
            os.environ.clear(); os.environ.update(job["env"])
            sys.path[0] = ""  # (python -c: the working folder first)
            sys.argv = ["-c"]
            main = type(sys)("__main__")
            sys.modules["__main__"] = main
            try:
                exec(compile(job["code"], "<string>", "exec"), main.__dict__)
            except SystemExit as exc:
                code = exc.code
                rc = code if isinstance(code, int) else (0 if code is None else 1)
                if not isinstance(code, int) and code is not None:
                    print(code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
                rc = 1
            try:
                atexit._run_exitfuncs()
            except BaseException:
                traceback.print_exc()
                rc = rc or 1
            sys.stdout.flush(); sys.stderr.flush()
        finally:
            os._exit(rc)
    sys.stdout.write(json.dumps({"pid": pid}) + "\n"); sys.stdout.flush()
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n"); sys.stdout.flush()
'''


class SnippetRunner:
    """One preloaded server per test process (a session fixture); :meth:`run` behaves as
    ``subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=...)``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self.fresh = os.environ.get("RLVIZ_SNIPPETS_FRESH") == "1"

    def _server(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            root = str(Path(__file__).resolve().parents[1])  # (this checkout's rlviz, as the snippets' PYTHONPATH)
            env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "MPLBACKEND": "Agg",
                   "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
            code = f"PRELOAD = {PRELOAD!r}\n{_SERVER}"
            self._proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          text=True, env=env)
            assert self._proc.stdout is not None
            ready = self._proc.stdout.readline()
            if not ready:
                raise RuntimeError("the snippet server did not start")
        return self._proc

    def run(self, code: str, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        if self.fresh:
            return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env,
                                  timeout=timeout)
        out, err = Path(cwd).parent / f".{Path(cwd).name}.out", Path(cwd).parent / f".{Path(cwd).name}.err"
        with self._lock:
            proc = self._server()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps({"code": code, "cwd": str(cwd), "env": env, "out": str(out),
                                         "err": str(err)}) + "\n")
            proc.stdin.flush()
            pid = json.loads(proc.stdout.readline())["pid"]
            timer = threading.Timer(timeout, os.kill, (pid, 9))
            timer.start()
            try:
                line = proc.stdout.readline()
            finally:
                timer.cancel()
            if not line:
                raise RuntimeError("the snippet server died")
            rc = json.loads(line)["rc"]
        if rc == -9:
            raise subprocess.TimeoutExpired([sys.executable, "-c", code], timeout)
        return subprocess.CompletedProcess([sys.executable, "-c", code], rc, out.read_text(errors="replace"),
                                           err.read_text(errors="replace"))

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
