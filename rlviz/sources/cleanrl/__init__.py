"""CleanRL scripts' saved models: torch state_dicts (scripts, continuous) and JAX/flax files read without JAX (jax_files, jax_nets, flax_msgpack)."""
