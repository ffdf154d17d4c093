"""Where episodes fail: the failure heatmap (objects or pixels) and the object extractors (MinAtar, classic control, Atari RAM maps)."""
