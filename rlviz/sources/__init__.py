"""Where agents come from: one module per source, format detection and dispatch in one place
(:func:`load_agent`, :mod:`.checkpoint`).

* what every source builds: :mod:`.loaded` (:class:`LoadedAgent` and the checks at load);
* rlviz ``.pt2`` checkpoints: :mod:`.exported` (loading), :mod:`.safety` (vetting the archive first),
  :mod:`.saving` (writing);
* torch files (``torch.save``: state_dicts, with ``model=``): :mod:`.files` (bytes, format detection, a
  ``torch.load`` that refuses pickled code), :mod:`.weights` (finding and loading the state_dict);
* Stable-Baselines3 zips and objects: :mod:`.sb3` (+ :mod:`.sb3_continuous`, :mod:`.sb3_recurrent`), their
  ``VecNormalize`` statistics :mod:`.vecnormalize`;
* rl-zoo3 run folders: :mod:`.zoo` (+ :mod:`.zoo_yaml`, the YAML read without building any tag);
* CleanRL scripts' saved state_dicts: :mod:`.cleanrl_scripts` (+ :mod:`.cleanrl_continuous`);
* networks already in memory (SB3, CleanRL, any ``nn.Module``): :mod:`.adapters` (:func:`to_policy`);
* the Hugging Face Hub (``hf://ORG/REPO``): :mod:`.hub`, which fetches a repo's files for the loaders above.

Every source returns the :mod:`rlviz.agent` contract (a :class:`~rlviz.agent.policy.Policy` in a
:class:`LoadedAgent`); nothing from an untrusted file runs code, and every name it carries passes
:mod:`rlviz.envs.trust`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: ``rlviz.sources.huggingface.hub`` alone loads no torch,
#: so the CLI checks an ``hf://`` id before the heavy imports)
_EXPORTS = {"LoadedAgent": "loaded", "load_agent": "checkpoint", "load_checkpoint": "checkpoint",
            "save_checkpoint": "checkpoint", "cleanrl_policy": "adapters", "to_policy": "adapters"}

__all__ = [*_EXPORTS]  # the public surface: _EXPORTS, listed once


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .adapters import cleanrl_policy as cleanrl_policy
    from .adapters import to_policy as to_policy
    from .checkpoint import load_agent as load_agent
    from .checkpoint import load_checkpoint as load_checkpoint
    from .checkpoint import save_checkpoint as save_checkpoint
    from .loaded import LoadedAgent as LoadedAgent
