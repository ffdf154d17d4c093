"""Where the agent looks: each object's share of the attribution on every step of a rollout.

maps.py: the attribution maps of a forward batch (:class:`~rlviz.attention.maps.AttributionProbe`) and each
object's share of them (frame masks pooled to observation pixels); tracker.py: the rollout's per-step hook
(:class:`~rlviz.attention.tracker.AttentionTracker`, told each lockstep step; each episode's running sums in
:class:`~rlviz.attention.tracker.EpisodeAttention`); summary.py: what the rollout's episodes add up to
(``summary.json["attention"]`` with bootstrap CIs, the ``attention_drops_before_failure`` diagnostic, compare's paired
differences, the videos' share track); plot.py: attention_at_failure.png.

maps.py and tracker.py sit below :mod:`rlviz.evaluate` (its rollouts run the tracker); summary.py and plot.py above
it (they read its results): see :mod:`rlviz._layers`. Nothing is imported here: import the module you need.
"""

__all__: list[str] = []
