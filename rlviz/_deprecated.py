"""Module paths that moved, kept for one release more: those of 0.4 (the sources by family, evaluate by concern)
until 0.6, those of 0.5 (attention's summary and plot, now :mod:`rlviz.analysis`; the multi-agent recorders, now
:mod:`rlviz.record.agents`) until 0.7; and keyword arguments gathered into one object (:func:`old_keywords`: the
JAX loader's and FlaxPolicy's of 0.6.dev, until 0.7). (The 0.1 and 0.2 paths were removed in 0.5.0; the 0.3 paths,
``rlviz.timeline.plot``..., and 0.3's keywords, ``RecordEpisode(..., saliency=...)``, ``rollout(..., num_envs=...)``,
in 0.6.)

Importing one gives the module's new home, with a ``DeprecationWarning`` that names it. Nothing else in rlviz
imports these paths.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["MOVED_0_4", "MOVED_0_5", "install", "old_keywords"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: release 0.4's module paths -> their home in 0.5: the sources by family (pt2, stable_baselines3, cleanrl,
#: huggingface), evaluate by concern (rollouts, backends, failures, statistics); kept until 0.6
MOVED_0_4 = {
    "rlviz.sources.exported": "rlviz.sources.pt2.exported",
    "rlviz.sources.pt2_graph": "rlviz.sources.pt2.graph",
    "rlviz.sources.pt2_codegen": "rlviz.sources.pt2.codegen",
    "rlviz.sources.safety": "rlviz.sources.pt2.safety",
    "rlviz.sources.saving": "rlviz.sources.pt2.saving",
    "rlviz.sources.sb3": "rlviz.sources.stable_baselines3.zips",
    "rlviz.sources.sb3_continuous": "rlviz.sources.stable_baselines3.continuous",
    "rlviz.sources.sb3_recurrent": "rlviz.sources.stable_baselines3.recurrent_ppo",
    "rlviz.sources.vecnormalize": "rlviz.sources.stable_baselines3.vecnormalize",
    "rlviz.sources.zoo": "rlviz.sources.stable_baselines3.zoo",
    "rlviz.sources.zoo_yaml": "rlviz.sources.stable_baselines3.zoo_yaml",
    "rlviz.sources.cleanrl_scripts": "rlviz.sources.cleanrl.scripts",
    "rlviz.sources.cleanrl_continuous": "rlviz.sources.cleanrl.continuous",
    "rlviz.sources.cleanrl_jax": "rlviz.sources.cleanrl.jax_files",
    "rlviz.sources.cleanrl_jax_nets": "rlviz.sources.cleanrl.jax_nets",
    "rlviz.sources.flax_msgpack": "rlviz.sources.cleanrl.flax_msgpack",
    "rlviz.sources.hub": "rlviz.sources.huggingface.hub",
    "rlviz.sources.hub_cache": "rlviz.sources.huggingface.cache",
    "rlviz.evaluate.rollout": "rlviz.evaluate.rollouts.rollout",
    "rlviz.evaluate.runner": "rlviz.evaluate.rollouts.runner",
    "rlviz.evaluate.plan": "rlviz.evaluate.rollouts.plan",
    "rlviz.evaluate.lockstep": "rlviz.evaluate.rollouts.lockstep",
    "rlviz.evaluate.steplog": "rlviz.evaluate.rollouts.steplog",
    "rlviz.evaluate.step_checks": "rlviz.evaluate.rollouts.step_checks",
    "rlviz.evaluate.workers": "rlviz.evaluate.backends.workers",
    "rlviz.evaluate.ray_backend": "rlviz.evaluate.backends.ray_pool",
    "rlviz.evaluate.threads": "rlviz.evaluate.backends.threads",
    "rlviz.evaluate.heatmap": "rlviz.evaluate.failures.heatmap",
    "rlviz.evaluate.pixel_heatmap": "rlviz.evaluate.failures.pixel_heatmap",
    "rlviz.evaluate.objects": "rlviz.evaluate.failures.objects",
    "rlviz.evaluate.extractor": "rlviz.evaluate.failures.extractor",
    "rlviz.evaluate.classic_objects": "rlviz.evaluate.failures.classic_objects",
    "rlviz.evaluate.atari_ram": "rlviz.evaluate.failures.atari_ram",
    "rlviz.evaluate.stats": "rlviz.evaluate.statistics.stats",
    "rlviz.evaluate.paired": "rlviz.evaluate.statistics.paired",
    "rlviz.evaluate.diagnostics": "rlviz.evaluate.statistics.diagnostics",
    "rlviz.evaluate.distance": "rlviz.evaluate.statistics.distance",
    "rlviz.evaluate.atari_ram.base": "rlviz.evaluate.failures.atari_ram.base",
    "rlviz.evaluate.atari_ram.check": "rlviz.evaluate.failures.atari_ram.check",
    "rlviz.evaluate.atari_ram.maze": "rlviz.evaluate.failures.atari_ram.maze",
    "rlviz.evaluate.atari_ram.racing": "rlviz.evaluate.failures.atari_ram.racing",
    "rlviz.evaluate.atari_ram.registry": "rlviz.evaluate.failures.atari_ram.registry",
    "rlviz.evaluate.atari_ram.screen": "rlviz.evaluate.failures.atari_ram.screen",
    "rlviz.evaluate.atari_ram.shooters": "rlviz.evaluate.failures.atari_ram.shooters",
    "rlviz.evaluate.atari_ram.sports": "rlviz.evaluate.failures.atari_ram.sports",
}

#: release 0.5's module paths -> their home in 0.6: attention's summary and plot, analysis over evaluate's results,
#: in :mod:`rlviz.analysis` (one stage per package); the recorders by what they record; kept until 0.7
MOVED_0_5 = {
    "rlviz.attention.summary": "rlviz.analysis.attention",
    "rlviz.attention.plot": "rlviz.analysis.attention_plot",
    # record/ by what it records: the multi-agent recorders and the drawing process in record/agents/, files named
    # after what they hold
    "rlviz.record.agents_draw": "rlviz.record.agents.draw",
    "rlviz.record.agents_play": "rlviz.record.agents.play",
    "rlviz.record.agents_recording": "rlviz.record.agents.recording",
    "rlviz.record.agents_track": "rlviz.record.agents.track",
    "rlviz.record.agents_video": "rlviz.record.agents.video",
    "rlviz.record.draw_worker": "rlviz.record.agents.draw_worker",
    "rlviz.record.pettingzoo": "rlviz.record.agents.pettingzoo",
    "rlviz.record.supersuit": "rlviz.record.agents.supersuit",
    "rlviz.record.wrapper": "rlviz.record.record_episode",
    "rlviz.record.frames": "rlviz.record.episode_video",
}

_RELEASE = {**{old: ("0.5", "0.6") for old in MOVED_0_4},
            **{old: ("0.6", "0.7") for old in MOVED_0_5}}
_TARGET = {**MOVED_0_4, **MOVED_0_5}


def _warn(old: str, new: str, stacklevel: int) -> None:
    moved_in, gone_in = _RELEASE[old]
    warnings.warn(
        f"{old} moved to {new} in rlviz {moved_in}; import it from there (or use the top-level rlviz names). "
        f"The old path goes away in rlviz {gone_in}.",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class _CallableModule(types.ModuleType):
    """An old module path that shares its name with a function of the package root (``rlviz.render``, 0.1's module;
    ``rlviz.timeline``, 0.3's package): importing it binds it to the root's attribute of that name, so it must stay
    callable as that function."""

    def __call__(self, *args, **kwargs):
        return getattr(self, self.__name__.rpartition(".")[2])(*args, **kwargs)

    def __getattr__(self, name: str):
        new = self.__dict__.get("_new_module")  # names the new module loads on first use (a lazy package's)
        if new is None or name.startswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return getattr(new, name)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return _CallableModule(spec.name)  # filled from the new module by exec_module

    def exec_module(self, module) -> None:
        new = importlib.import_module(self.target)
        _warn(module.__name__, self.target, stacklevel=2)
        names = getattr(new, "__all__", None) or [n for n in vars(new) if not n.startswith("__")]
        module.__dict__.update({n: getattr(new, n) for n in dir(new) if not n.startswith("__")})
        module.__all__ = list(names)
        module.__doc__ = f"Deprecated alias of :mod:`{self.target}`."
        module._new_module = new
        if hasattr(new, "__path__"):  # a package: its old submodule paths are found by name (_AliasFinder)
            module.__path__ = []


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in _TARGET:
            return importlib.util.spec_from_loader(fullname, _AliasLoader(_TARGET[fullname]))
        return None


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())


def old_keywords(names: Iterable[str], fold: Callable[[tuple, dict, dict], tuple], into: str, *, release: str,
                 until: str, also: Callable[[tuple], bool] | None = None) -> Callable[[_F], _F]:
    """Decorator: the function (or ``__init__``) also takes ``names``, its keyword arguments of ``release``, for one
    more release. Given any of them (or when ``also(args)`` says the positional arguments are the old ones), the
    call warns (a ``DeprecationWarning`` naming them and ``into``, the object that holds them now) and
    ``fold(args, kwargs, old) -> args`` moves them onto the new arguments (``kwargs`` edited in place). The
    function's signature, as ``inspect.signature`` reads it, is the new one alone."""
    names = frozenset(names)

    def decorate(func: _F) -> _F:
        where = func.__qualname__.removesuffix(".__init__")

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            old = {k: kwargs.pop(k) for k in [k for k in kwargs if k in names]}
            if old or (also is not None and also(args)):
                given = ", ".join(f"{k}=..." for k in old) or "positional arguments"
                warnings.warn(f"{where}({given}): the call of rlviz {release}; pass {into} instead. The old "
                              f"form goes away in rlviz {until}.", DeprecationWarning, stacklevel=2)
                args = fold(args, kwargs, old)
            return func(*args, **kwargs)

        wrapper.__rlviz_old_keywords__ = tuple(sorted(names))  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
