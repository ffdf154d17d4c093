"""Numbers over episodes: statistics, paired comparisons, diagnostics, action distances."""
