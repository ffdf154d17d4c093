"""``rlviz explore OUT``: a local web app on a run folder, every rolled-out episode one click away.

:mod:`.index` reads the run (its marker, episodes.csv, the heatmap with each episode's contribution) and answers
which episodes a heatmap cell holds; :mod:`.replay` renders one episode by the replay ``--videos episode:N``
runs (a compare run's: A's and B's); :mod:`.cache` keeps those renders in the run's cache area (one render per
episode, written atomically); :mod:`.server` serves the page (``explore.html``/``.js``/``.css`` beside it) and
nothing but the run's own data. Werkzeug is the ``rlviz[explore]`` extra, imported when the server starts.
"""

from __future__ import annotations

__all__ = ["explore"]


def explore(config):  # noqa: ANN001, ANN201 - the CLI's entry (lazy: Werkzeug loads with it)
    """Serve ``config.out`` (an :class:`~rlviz.config.ExploreConfig`) until Ctrl-C."""
    from .server import serve

    return serve(config)
