"""Where the agent looks, step by step: each object's share of the attribution on every step of a rollout.

maps.py: the attribution maps of a forward batch (:class:`~rlviz.attention.maps.AttributionProbe`) and each
object's share of them (frame masks pooled to observation pixels); tracker.py: the rollout's per-step hook
(:class:`~rlviz.attention.tracker.AttentionTracker`, told each lockstep step; each episode's running sums in
:class:`~rlviz.attention.tracker.EpisodeAttention`).

This package sits below :mod:`rlviz.evaluate` (its rollouts run the tracker); what the episodes add up to, and its
plot, is analysis over evaluate's results: :mod:`rlviz.analysis` (see :mod:`rlviz._layers`). Nothing is imported
here: import the module you need.
"""

__all__: list[str] = []
