"""``python -m rlviz`` and the ``rlviz`` command (:func:`run`): the CLI, with a Ctrl-C during its own start-up
(importing the CLI) said in one line and exit code 130 like any other moment (:func:`rlviz.cli.main`)."""

import os
import sys


def run() -> int:
    """The CLI as a process: its exit code. Interrupted (130), the process ends here, at once: the job has cleaned
    up (temporary files, workers, ffmpeg) and said so in one line, and Python's own shutdown must not turn the
    Ctrl-C into a death by SIGINT."""
    from .gc_pause import pause, resume

    pause()  # the start-up's imports and loading, without full collections over them (rlviz.gc_pause)
    try:
        from .cli import main

        code = main()
    except KeyboardInterrupt:
        print("rlviz: interrupted; no partial outputs were left under final names", file=sys.stderr, flush=True)
        code = 130
    resume()
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    return code


def _working_folder_off_the_path() -> None:
    """``python -m rlviz`` puts the working folder first on the import path, as the ``rlviz`` script does not: a
    ``rlviz_pwn.py`` or ``gymnasium.py`` in a run folder the user explores would shadow what rlviz imports for the
    names read from files. Taken off here; the names the user types themselves (``--wrapper``, ``--model``,
    ``--objects``) still find their modules there (:func:`rlviz.options.import_user_module`)."""
    cwd = os.getcwd()
    while sys.path and sys.path[0] in ("", cwd):
        sys.path.pop(0)


if __name__ == "__main__":
    _working_folder_off_the_path()
    sys.exit(run())
