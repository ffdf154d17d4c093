"""Environment recipes: everything needed to rebuild the env an agent was trained on.

An :class:`EnvRecipe` is stored in every rlviz checkpoint (as JSON) and is the one way every
entry point (library, CLI, rollouts, replays) builds environments, so evaluation sees the same
preprocessing as training.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym

from ..errors import EnvError, UsageError, did_you_mean
from .compat import same_step_vector_env
from .families import families, family_hint, family_of, register_family
from .families.ale import atari_recipe_dict
from .jax_ids import is_jax_env_id
from .pettingzoo_envs import SUPERSUIT_WRAPPERS, AgentView, agents_module, is_agents_env_id, make_agents_env
from .render_modes import check_render_mode
from .trust import check_recipe_names
from .wrappers import WRAPPERS

__all__ = [
    "WrapperSpec",
    "EnvRecipe",
    "atari_recipe",
    "register_envs",
    "require_registered",
    "make_env",
    "make_vec_env",
    "WRAPPERS",
    "read_recipe_file",
    "pettingzoo_recipe",
    "RECIPE_FILE",
]

#: The recipe a multi-agent run folder writes (``--env run/env-recipe.json`` replays its env and preprocessing).
RECIPE_FILE = "env-recipe.json"


@dataclass(frozen=True)
class WrapperSpec:
    """One preprocessing step: ``name`` is a key of :data:`WRAPPERS`; ``training_only`` steps
    (reward clipping, life loss as terminal) are applied when training, not when evaluating."""

    name: str
    kwargs: dict = field(default_factory=dict)
    training_only: bool = False


@dataclass(frozen=True)
class EnvRecipe:
    """env id + kwargs for ``gym.make`` and the preprocessing wrapper chain, applied in order.

    ``saliency_mode`` tells how observation-space maps go back to frame pixels:
    "linear" (a resized image, e.g. Atari 84x84 of a 210x160 frame) or "nearest" (a grid world
    such as MinAtar, one cell per block of pixels); None when observations are not images.
    """

    env_id: str
    env_kwargs: dict = field(default_factory=dict)
    wrappers: tuple = ()
    saliency_mode: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["wrappers"] = [asdict(w) for w in self.wrappers]
        return d

    @classmethod
    def from_dict(cls, d: dict, source: str | None = None, *, trusted: bool = False,
                  consented_env: str | None = None) -> EnvRecipe:
        """A recipe from :meth:`to_dict`'s output. ``source``: the file it was read from; then every name in it
        must pass :mod:`rlviz.envs.trust` (the env id, unless it is ``consented_env``, the id the user passed
        themselves; kwargs; wrapper names) unless ``trusted``, else :class:`UnsafeCheckpointError`. A dict
        from the caller's own code (``source=None``) is the caller's consent."""
        try:
            wrappers = tuple(WrapperSpec(**w) for w in d.get("wrappers", ()))
            recipe = cls(d["env_id"], dict(d.get("env_kwargs", {})), wrappers, d.get("saliency_mode"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UsageError(f"Not an env recipe: {d!r} ({exc}); expected keys env_id, env_kwargs, wrappers.") from exc
        if source is not None and not trusted:
            register_envs(recipe.env_id)  # the rule knows registered ids only
            check_recipe_names(recipe.env_id, recipe.env_kwargs, recipe.wrappers, source, consented=consented_env)
        elif source is not None:  # trusted: its names, not its numbers (a number alone can exhaust the machine)
            check_recipe_names(recipe.env_id, recipe.env_kwargs, recipe.wrappers, source, trusted=True)
        return recipe

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str | None = None, *, trusted: bool = False,
                  consented_env: str | None = None) -> EnvRecipe:
        return cls.from_dict(json.loads(text), source, trusted=trusted, consented_env=consented_env)

    @classmethod
    def for_env_id(cls, env_id: str) -> EnvRecipe:
        """A sensible default recipe for a bare env id: its family's (:attr:`Family.recipe
        <rlviz.envs.families.family.Family>`: Atari preprocessing for ``ALE/*``), else the id alone."""
        family = family_of(env_id)
        if family is not None and family.recipe is not None:
            return cls.from_dict(family.recipe(env_id))
        return cls(env_id)


def atari_recipe(
    env_id: str = "ALE/Breakout-v5",
    frame_skip: int = 4,
    screen_size: int = 84,
    stack: int = 4,
    noop_max: int = 30,
    clip_reward: bool = True,
    **env_kwargs: Any,
) -> EnvRecipe:
    """The usual DQN/PPO Atari stack: grey 84x84, frame skip 4 (max-pooled), no-op starts,
    frame stack 4; reward clipping during training only (the ALE family's recipe:
    :func:`rlviz.envs.families.ale.atari_recipe_dict`)."""
    return EnvRecipe.from_dict(atari_recipe_dict(env_id, frame_skip, screen_size, stack, noop_max, clip_reward,
                                                 **env_kwargs))


def pettingzoo_recipe(env_id: str, env_kwargs: dict | None = None, supersuit: Any = (), *,
                      channels_first: bool = False) -> Any:
    """An :class:`~rlviz.envs.recipe.EnvRecipe` of a PettingZoo env with SuperSuit preprocessing: ``supersuit`` a
    sequence of (name, kwargs) in the order applied (``clip_reward_v0`` is marked training-only)."""
    if not is_agents_env_id(env_id):
        raise UsageError(f"{env_id!r} is not a PettingZoo env id; expected e.g. 'pistonball_v6'.")
    wrappers = []
    for name, kwargs in supersuit:
        full = name if name.startswith("ss:") else f"ss:{name}"
        if full not in SUPERSUIT_WRAPPERS:
            raise UsageError(f"SuperSuit wrapper {name!r} is not one rlviz rebuilds; known: "
                             f"{', '.join(sorted(n[3:] for n in SUPERSUIT_WRAPPERS))}.")
        wrappers.append(WrapperSpec(full, dict(kwargs or {}), training_only=full == "ss:clip_reward_v0"))
    if channels_first:
        wrappers.append(WrapperSpec("channels_first"))
    image = any(w.name in ("ss:resize_v1", "ss:color_reduction_v0") for w in wrappers)
    return EnvRecipe(env_id, dict(env_kwargs or {}), tuple(wrappers), "linear" if image else None)


_REGISTERED: set = set()


def register_envs(env_id: str | None = None) -> None:
    """Register the envs of the families rlviz registers itself (ALE's, MinAtar's: :attr:`Family.register
    <rlviz.envs.families.family.Family>`) with gymnasium (idempotent, offline: ROMs ship in ale-py). With
    ``env_id``, only what that id needs (ALE's ids are always registered: 0.1 s; MinAtar's import takes seconds),
    then the package of its family that registers on import (MiniGrid's, Shimmy's), when installed.
    A JAX id (``gymnax:...``: :mod:`rlviz.envs.jax_ids`) is none of gymnasium's: nothing to register."""
    if is_jax_env_id(env_id):
        return
    own = family_of(env_id) if env_id is not None else None
    wanted = [f for f in families() if f.register is not None and (env_id is None or f.always or f is own)]
    for family in wanted:
        if family.name not in _REGISTERED:
            family.register()  # type: ignore[misc]  # (not None: filtered above)
            _REGISTERED.add(family.name)
    if env_id is not None and env_id not in gym.registry and not is_agents_env_id(env_id):
        from .headless import choose_gl

        choose_gl(env_id)  # (dm_control/*: importing Shimmy imports mujoco, so its OpenGL backend is chosen first)
        register_family(env_id)  # MiniGrid-*, dm_control/*: their package, when installed (rlviz.envs.families)


def require_registered(env_id: str) -> None:
    """Fail fast, before torch or the env is loaded, when ``env_id`` is not a gymnasium env: one line, with the
    closest registered ids. A ``module:Env-v0`` id is left to gymnasium (it imports the module: the caller's choice)."""
    if env_id.endswith(".json"):  # a recipe file the user names (--env run/env-recipe.json): its names are checked
        env_id = read_recipe_file(env_id, names_only=True).env_id  # when the job reads it (with the trust flags)
    if is_agents_env_id(env_id):  # PettingZoo: its family's module, or one line saying what is missing
        agents_module(env_id)
        return
    register_envs(env_id)
    if ":" in env_id or env_id in gym.registry:
        return
    hint = did_you_mean(env_id, list(gym.registry))
    family = family_of(env_id)
    if family is not None and family.register is not None and not any(family_of(k) is family for k in gym.registry):
        hint += f" {family.name} envs need: pip install {family.pip}."  # (rlviz registers them: its package is missing)
    hint += family_hint(env_id)
    raise EnvError(f"Unknown env id {env_id!r}: gymnasium has no env registered under that name.{hint or ''} "
                   "For an env of your own package, register it or pass 'your_module:EnvName-v0'.")


def read_recipe_file(path: str, trusted: bool = False, consented_wrappers: Iterable[str] = (),
                     names_only: bool = False) -> EnvRecipe:
    """The recipe in a JSON file the user names (``--env FILE.json``), e.g. a run folder's :data:`RECIPE_FILE`, or
    one written with :meth:`EnvRecipe.to_json`. Naming the file consents to the file, not to every name inside it:
    its env id, kwargs and wrappers pass :mod:`rlviz.envs.trust`'s rule (known wrappers, and those the user also
    names with ``--wrapper``: ``consented_wrappers``), unless ``trusted`` (``--trust-checkpoint``).
    ``names_only``: check only that the names are strings (for reading the env id before the job; nothing is
    imported either way)."""
    try:
        text = open(path, encoding="utf-8").read()  # noqa: SIM115 - read at once
    except OSError as exc:
        raise UsageError(f"--env {path}: cannot read the recipe file ({exc.strerror}); expected an env id or a JSON "
                         f"recipe such as a run folder's {RECIPE_FILE}.") from None
    try:
        recipe = EnvRecipe.from_json(text)
    except ValueError as exc:  # json.JSONDecodeError included
        raise UsageError(f"--env {path}: not a JSON env recipe ({str(exc)[:120]}); expected what "
                         "EnvRecipe.to_json() writes.") from None
    if not isinstance(recipe.env_kwargs, dict) or not all(isinstance(w.kwargs, dict) for w in recipe.wrappers):
        raise UsageError(f"--env {path}: env_kwargs and each wrapper's kwargs must be JSON objects; expected what "
                         "EnvRecipe.to_json() writes.")
    if names_only or trusted:
        check_recipe_names(recipe.env_id, recipe.env_kwargs, recipe.wrappers, path, trusted=True)  # form: strings
        return recipe
    if ":" not in recipe.env_id:
        register_envs(recipe.env_id)  # MinAtar, MiniGrid, dm_control: their known packages, before the check
    check_recipe_names(recipe.env_id, recipe.env_kwargs, recipe.wrappers, f"--env {path}",
                       known_wrappers=tuple(consented_wrappers))
    return recipe


def make_env(recipe: EnvRecipe | str, render_mode: str | None = "rgb_array", training: bool = False) -> gym.Env:
    """Build one env from a recipe (or a bare id, with :meth:`EnvRecipe.for_env_id`)."""
    if isinstance(recipe, str):
        recipe = read_recipe_file(recipe) if recipe.endswith(".json") else EnvRecipe.for_env_id(recipe)
    if is_agents_env_id(recipe.env_id):  # one agent's view (spaces, a reset observation, frames) of a PettingZoo env
        return AgentView(make_agents_env(recipe, render_mode, training), recipe.env_id)
    from .headless import choose_gl, no_gl_wrapper  # not at the top: `from rlviz import RecordEpisode` stays light

    render_mode = _frames_if_observed(recipe, render_mode)
    require_registered(recipe.env_id)
    choose_gl(recipe.env_id)  # MuJoCo: EGL or OSMesa, before mujoco is imported (rlviz.envs.headless)
    check_render_mode(recipe.env_id, render_mode)  # before make: some envs assert it in __init__
    try:
        kwargs = dict(recipe.env_kwargs)
        family = family_of(recipe.env_id)
        for key, value in family.make_kwargs if family is not None else ():  # (MinAtar: disable_env_checker)
            kwargs.setdefault(key, value)
        env = gym.make(recipe.env_id, render_mode=render_mode, **kwargs)
    except gym.error.Error as exc:
        hint = f" {family.name} envs need: pip install {family.pip}." if family is not None and family.register \
            is not None and not family.always else ""
        raise EnvError(f"Cannot make env {recipe.env_id!r}: {exc}.{hint}") from exc
    except (TypeError, ValueError, AssertionError) as exc:  # kwargs the env's constructor refuses (from a file)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise EnvError(f"Cannot make env {recipe.env_id!r} with kwargs {_short(recipe.env_kwargs)}: {first}. "
                       "Pass the env's kwargs it was trained with (or --env ID for its defaults).") from None
    try:
        check_render_mode(env, render_mode)
    except EnvError:
        env.close()
        raise
    if render_mode is not None:
        env = no_gl_wrapper(env, recipe.env_id)
    for w in recipe.wrappers:
        if not (w.training_only and not training):
            env = _apply_wrapper(env, w)
    return env


def _apply_wrapper(env: gym.Env, w: Any) -> gym.Env:
    """``env`` wrapped by the recipe's wrapper ``w`` (one of rlviz's by name, or a ``module:Class`` / function the
    user consented to); ``env`` is closed when it cannot be."""
    from .user_wrappers import is_user_wrapper, user_wrapper

    if w.name not in WRAPPERS and not is_user_wrapper(w.name):
        raise EnvError(f"Unknown wrapper {w.name!r} in the env recipe; known: {sorted(WRAPPERS)} or "
                       "'module:Class' (--wrapper).")
    try:
        make = WRAPPERS[w.name] if w.name in WRAPPERS else user_wrapper(w.name)  # (refusals: their own line)
    except Exception:
        env.close()
        raise
    try:
        wrapped = make(env, **w.kwargs)
    except (TypeError, ValueError, AssertionError, AttributeError) as exc:  # kwargs or an env it does not fit
        env.close()
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise EnvError(f"Cannot apply the wrapper {w.name!r} with kwargs {_short(w.kwargs)} to "
                       f"{_wrapped_name(env)}: {first}. Check the wrapper's order and that it is named once "
                       "(--wrapper, the recipe's own wrappers).") from None
    if not isinstance(wrapped, gym.Env):  # a factory function of the user's
        env.close()
        raise EnvError(f"The wrapper {w.name!r} returned a {type(wrapped).__name__}, not a gymnasium Env; expected "
                       "a function that takes the env and returns the wrapped env.")
    return wrapped


def _frames_if_observed(recipe: EnvRecipe, render_mode: str | None) -> str | None:
    """``rgb_array`` where the recipe has a wrapper whose observations are the env's frames (it renders at every
    step, so it needs the mode even where rlviz needs no frames of its own), else ``render_mode``."""
    from .user_wrappers import FRAME_WRAPPERS

    if render_mode is None and any(w.name in FRAME_WRAPPERS for w in recipe.wrappers):
        return "rgb_array"
    return render_mode


def _wrapped_name(env: gym.Env) -> str:
    """``env`` as an error names it: its wrappers outside in, e.g. ``ImgObsWrapper<MiniGridEnv>``."""
    return str(env)[:160]


def _short(kwargs: dict) -> str:
    text = repr(kwargs)
    return text if len(text) <= 80 else text[:77] + "..."


def make_vec_env(
    recipe: EnvRecipe | str,
    num_envs: int,
    render_mode: str | None = "rgb_array",
    training: bool = False,
    vectorization_mode: str = "sync",
) -> gym.vector.VectorEnv:
    """``num_envs`` copies of :func:`make_env` in a gymnasium vector env (same-step autoreset)."""
    if num_envs < 1:
        raise UsageError(f"num_envs={num_envs}; expected at least 1.")
    fns = [lambda: make_env(recipe, render_mode=render_mode, training=training) for _ in range(num_envs)]
    return same_step_vector_env(fns, asynchronous=vectorization_mode == "async")
