"""Seeded rollouts: the plan, the runner's loop, lockstep play, per-step logs and checks."""
