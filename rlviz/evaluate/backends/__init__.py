"""Where rollout shards run: worker processes, Ray, torch's thread count."""
