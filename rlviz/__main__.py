"""``python -m rlviz`` and the ``rlviz`` command (:func:`run`): the CLI, with a Ctrl-C during its own start-up
(importing the CLI) said in one line and exit code 130 like any other moment (:func:`rlviz.cli.main`)."""

import sys


def run() -> int:
    try:
        from .cli import main
    except KeyboardInterrupt:
        print("rlviz: interrupted; no partial outputs were left under final names", file=sys.stderr, flush=True)
        return 130
    return main()


if __name__ == "__main__":
    code = run()
    if code == 130:  # interrupted: the job has cleaned up (temporary files, workers, ffmpeg) and said so in one line;
        import os  # exit now, so that Python's own shutdown cannot turn the Ctrl-C into a death by SIGINT (rc -2)

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    sys.exit(code)
