"""The record of one env family: what rlviz knows of its ids, in one frozen dataclass (nothing of the family is
imported to read it). Each family is one module of :mod:`rlviz.envs.families` holding one ``FAMILY``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Family"]


@dataclass(frozen=True)
class Family:
    """One env family, by its ids. Every field but ``name`` is optional: a family states what it has.

    name: the family as messages name it ("MinAtar").
    prefixes: the start of each of its ids ("MinAtar/"; MiniGrid's "MiniGrid-" and "BabyAI-"; a JAX family's
        "gymnax:"); no two families' prefixes overlap (held by ``tests/test_families.py``).
    matches: the test of an id for a family without a prefix (PettingZoo's ``name_vN``), tried after the prefixes.
    package: the package whose import registers its ids with gymnasium (minigrid, shimmy), imported for an
        unregistered id of it when installed (:func:`rlviz.envs.families.register_family`).
    register: rlviz's own registration of its ids (ALE's, MinAtar's), called once per process.
    always: registered whatever the id (ALE's: 0.1 s), so that any id may be checked against the registry.
    pip: what to install for it, as the hints print it (``"rlviz[minatar]"``, ``shimmy[dm-control]``).
    recipe: the default recipe of a bare id of it, as :meth:`EnvRecipe.to_dict <rlviz.envs.recipe.EnvRecipe.to_dict>`
        writes it (ALE: the Atari stack; MinAtar: nearest-cell saliency); None: the id alone.
    make_kwargs: ``gym.make`` keyword arguments set by default for it ((name, value) pairs; MinAtar's
        ``disable_env_checker``: its float frames and missing fps are handled by rlviz).
    wrappers: observation wrappers (``module:Class``) a recipe read from a file may name without trust.
    objects: the default ``--objects`` of an id of it, or None (evaluate's own default): ``"minatar"`` (the game's
        state channels), ``"grid"`` (the agent's cell), ``"body:<name>"`` (a MuJoCo body).
    body_plane: the heatmap's plane ("xy" or "xz") of a MuJoCo body of an id of it.
    view_key: the observation key that is the agent's egocentric view, drawn beside the render (MiniGrid: "image").
    needs_gl: drawn through MuJoCo's renderer: the OpenGL backend is chosen before its env or package is loaded
        (:mod:`rlviz.envs.headless`).
    entry_points: for ids without a prefix, the packages whose gymnasium entry points are the family's
        (gymnasium's MuJoCo envs: ``gymnasium.envs.mujoco``), read from the registry.
    engine: who rolls it out: "gymnasium", "pettingzoo", or "jax" (:mod:`rlviz.jax`; its ids are none of
        gymnasium's and nothing registers them).
    jax_env: the JAX engine's ``module:Class`` under :mod:`rlviz.jax.envs` that builds an env of it.
    """

    name: str
    prefixes: tuple[str, ...] = ()
    matches: Callable[[str], bool] | None = None
    package: str | None = None
    register: Callable[[], None] | None = None
    always: bool = False
    pip: str = ""
    recipe: Callable[[str], dict] | None = None
    make_kwargs: tuple[tuple[str, Any], ...] = ()
    wrappers: frozenset[str] = frozenset()
    objects: Callable[[str], str | None] | None = None
    body_plane: Callable[[str], str] | None = None
    view_key: str | None = None
    needs_gl: bool = False
    entry_points: tuple[str, ...] = ()
    engine: str = "gymnasium"
    jax_env: str | None = None

    def prefix_of(self, env_id: str) -> str | None:
        """The prefix of this family that ``env_id`` starts with, or None."""
        return next((p for p in self.prefixes if env_id.startswith(p)), None)
