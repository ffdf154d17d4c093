"""Analysis over a rollout's episodes, above :mod:`rlviz.evaluate` (it reads its results): attention.py, what the
episodes' per-object attention adds up to (``summary.json["attention"]`` with bootstrap CIs, the
``attention_drops_before_failure`` diagnostic, compare's paired differences, the videos' share track);
attention_plot.py, ``attention_at_failure.png``. The per-step side (the attribution maps and the rollout's hook) is
:mod:`rlviz.attention`, below evaluate. Nothing is imported here: import the module you need.
"""

__all__: list[str] = []
