"""Module paths of release 0.1 (``rlviz.checkpoint``, ``rlviz.compose``...), kept for one release.

Importing one gives the module's new home under the stage subpackages, with a ``DeprecationWarning``
that names it. Nothing else in rlviz imports these paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

__all__ = ["MOVED", "install"]

#: old module path -> new module path
MOVED = {
    "rlviz.checkpoint": "rlviz.agent.checkpoint",
    "rlviz.checkpoint_files": "rlviz.agent.files",
    "rlviz.checkpoint_safety": "rlviz.agent.safety",
    "rlviz.adapters": "rlviz.agent.adapters",
    "rlviz.adapters_sb3": "rlviz.agent.sb3",
    "rlviz.models": "rlviz.agent.models",
    "rlviz.policy": "rlviz.agent.policy",
    "rlviz._ale_seed": "rlviz.envs.ale_seed",
    "rlviz.trace": "rlviz.episode.trace",
    "rlviz.saliency": "rlviz.explain.saliency",
    "rlviz.perturbation": "rlviz.explain.perturbation",
    "rlviz.obs_layout": "rlviz.explain.layout",
    "rlviz.saliency_scale": "rlviz.explain.scale",
    "rlviz.compose": "rlviz.draw.compose",
    "rlviz.overlay": "rlviz.draw.overlay",
    "rlviz.video": "rlviz.media.video",
    "rlviz._atomic": "rlviz.media.atomic",
    "rlviz.rollout": "rlviz.evaluate.rollout",
    "rlviz.heatmap": "rlviz.evaluate.heatmap",
    "rlviz.objects": "rlviz.evaluate.objects",
    "rlviz.stats": "rlviz.evaluate.stats",
    "rlviz.render": "rlviz.jobs.render",
}


class _CallableModule(types.ModuleType):
    """The old ``rlviz.render`` module: importing it makes it the package's ``render`` attribute, so it must stay
    callable as the function of that name."""

    def __call__(self, *args, **kwargs):
        return self.render(*args, **kwargs)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return _CallableModule(spec.name)  # filled from the new module by exec_module

    def exec_module(self, module) -> None:
        new = importlib.import_module(self.target)
        warnings.warn(
            f"{module.__name__} moved to {self.target} in rlviz 0.2; import it from there (or use the top-level "
            f"rlviz names). The old path goes away in rlviz 0.3.",
            DeprecationWarning,
            stacklevel=2,
        )
        names = getattr(new, "__all__", None) or [n for n in vars(new) if not n.startswith("__")]
        module.__dict__.update({n: getattr(new, n) for n in dir(new) if not n.startswith("__")})
        module.__all__ = list(names)
        module.__doc__ = f"Deprecated alias of :mod:`{self.target}`."


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, _AliasLoader(MOVED[fullname]))
        return None


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
