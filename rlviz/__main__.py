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


if __name__ == "__main__":
    sys.exit(run())
