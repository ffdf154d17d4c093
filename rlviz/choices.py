"""The names a user chooses from, each list written once: the library validates against these and the CLI
offers them as choices. (A leaf module: importing it loads nothing heavy.)"""

from __future__ import annotations

__all__ = ["RUN_MARKER", "RUN_CACHE_DIR", "ATTRIBUTION_METHODS", "SALIENCY_METHODS", "DEFAULT_SALIENCY_METHOD",
           "SALIENCY_TARGETS", "FAIL_ON", "VIDEO_KINDS", "DEFAULT_NUM_ENVS", "RAY_LOCAL"]

#: The registry of attribution methods, the one place their names live: each name a user chooses (``--saliency``,
#: ``--attention``, ``--memory-saliency``'s method, ``attribute(method=...)``) -> its
#: :class:`~rlviz.explain.attribution.SaliencyMethod` class, as ``"module:Class"`` (so that the CLI parses the names
#: without importing torch; :data:`rlviz.explain.attribution.ATTRIBUTIONS` is this mapping with the classes, and each
#: class's ``name`` is read from here). The class carries the rest: its memory variant, what attention's shares are
#: shares of, whether it takes gradients. Adding a method: its class, and its line here.
ATTRIBUTION_METHODS: dict[str, str] = {
    "gradient": "rlviz.explain.attribution:Gradient",
    "smoothgrad": "rlviz.explain.attribution:SmoothGrad",
    "perturbation": "rlviz.explain.attribution:Perturbation",
}
#: The methods' names, in the registry's order (the CLI's choices).
SALIENCY_METHODS = tuple(ATTRIBUTION_METHODS)
#: The method attention and the API use when none is named: the registry's first.
DEFAULT_SALIENCY_METHOD = SALIENCY_METHODS[0]
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
