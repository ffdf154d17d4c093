"""Where two agents disagree (``rlviz compare A B --disagreements K``): each agent asked on the other's states
(:mod:`.probe`, hooked into the rollouts' loop), the states of largest disagreement (:mod:`.select`), both agents
played out from each saved state (:mod:`.branches`, on :mod:`rlviz.envs.snapshot`), the whole analysis
(:mod:`.run`) and its files (:mod:`.outputs`); on PettingZoo envs the same per agent id (:mod:`.agents`). Built on
evaluate/, envs/, record/ and draw/; used by :func:`rlviz.jobs.compare`."""

from __future__ import annotations

from .probe import DisagreementProbe, EpisodeDisagreement
from .run import BranchedState, Disagreements, analyse, probed_rollouts
from .select import Pick, summarize_disagreement, top_states

__all__ = ["DisagreementProbe", "EpisodeDisagreement", "BranchedState", "Disagreements", "analyse", "probed_rollouts",
           "Pick", "summarize_disagreement", "top_states"]
