"""The docs' snippet runner (tests/_snippets.py) behaves as ``python -c`` in a fresh interpreter would: the exit code,
the output, the namespace, the folder and the environment are the snippet's own."""

from __future__ import annotations

import os
import subprocess

import pytest


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def test_output_exit_codes_and_a_traceback(snippets, tmp_path):
    done = snippets.run("import sys\nprint('out')\nprint('err', file=sys.stderr)", tmp_path, _env(), timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")
    assert snippets.run("import sys; sys.exit(3)", tmp_path, _env(), timeout=60).returncode == 3
    assert snippets.run("raise SystemExit('bye')", tmp_path, _env(), timeout=60).returncode == 1
    done = snippets.run("np.zeros(1)", tmp_path, _env(), timeout=60)  # numpy is loaded in the server, not imported here
    assert done.returncode == 1 and "NameError: name 'np' is not defined" in done.stderr, done.stderr


def test_folder_environment_main_and_atexit(snippets, tmp_path):
    code = ("import atexit, os, sys\n"
            "atexit.register(lambda: open('at_exit', 'w').write(os.environ['ONLY_HERE']))\n"
            "print(os.getcwd(), __name__, sys.argv[0], 'RLVIZ_NOT_THERE' in os.environ)")
    done = snippets.run(code, tmp_path, {k: v for k, v in _env(ONLY_HERE="x").items() if k != "RLVIZ_NOT_THERE"},
                        timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path), "__main__", "-c", "False"]
    assert (tmp_path / "at_exit").read_text() == "x"
    again = snippets.run("import os; print('ONLY_HERE' in os.environ)", tmp_path, _env(), timeout=60)
    assert again.stdout == "False\n"  # nothing of one snippet reaches the next


def test_a_snippet_past_its_timeout_is_killed(snippets, tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        snippets.run("import time; time.sleep(60)", tmp_path, _env(), timeout=1)
    assert snippets.run("print(1)", tmp_path, _env(), timeout=60).stdout == "1\n"  # the server goes on
