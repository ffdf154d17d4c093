"""The names a user chooses from, each list written once: the library validates against these and the CLI
offers them as choices. (A leaf module: importing it loads nothing heavy.)"""

from __future__ import annotations

__all__ = ["RUN_MARKER", "RUN_CACHE_DIR", "SALIENCY_METHODS", "SALIENCY_TARGETS", "FAIL_ON", "VIDEO_KINDS", "DEFAULT_NUM_ENVS", "RAY_LOCAL"]

#: Saliency methods (implemented in :mod:`rlviz.explain.saliency`).
SALIENCY_METHODS = ("gradient", "smoothgrad", "perturbation")
#: Named saliency targets; an action index is accepted too.
SALIENCY_TARGETS = ("action", "logprob", "value")
#: What counts as a failure (:mod:`rlviz.evaluate.rollouts.rollout`): "auto" = life loss when the env reports lives.
FAIL_ON = ("auto", "termination", "life-loss", "negative-reward")
#: Episode selections for videos (``--videos first:1,worst:2``): KIND:COUNT, and the two that name episodes
#: (``episode:N[,M...]``: those episodes; ``failed-at:X,Y``: those whose failures put an object on heatmap pixel X, Y).
VIDEO_KINDS = ("first", "worst", "best", "median", "random", "episode", "failed-at")
#: Envs stepped in lockstep by rollouts, in the library and the CLI alike.
DEFAULT_NUM_ENVS = 16

#: ``--ray`` given without an address: start a local Ray instance for the run.
RAY_LOCAL = "local"

#: The file that marks a folder as an rlviz run, and the run's cache area (``rlviz explore``'s renders): named here
#: so that the explorer finds them without importing the jobs (:mod:`rlviz.jobs.outdir` writes them).
RUN_MARKER = "rlviz-run.json"
RUN_CACHE_DIR = ".rlviz-cache"
