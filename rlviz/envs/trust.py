"""The one rule for names read from a file: nothing a file says may load code without the user's consent.

A checkpoint's JSON recipe, an SB3 zip's ``data`` and an rl-zoo3 ``config.yml`` all carry *names*: env ids,
env keyword arguments, wrapper names, class names. Acting on a name can import code: gymnasium's ``make``
imports whatever module stands before the colon of ``"module:Env-v0"``, a class path is imported to be
built. A file is not vetted the way a program is, so from a file rlviz acts only on names it knows:

* env ids registered with gymnasium (after :func:`rlviz.envs.recipe.register_envs`) and needing no import:
  no ``module:`` prefix; PettingZoo ids and JAX env ids (``gymnax:``, ``craftax:``, ``brax:``, ``jumanji:``: the
  module is rlviz's, from its table of families, never the name's);
* env and wrapper keyword arguments that are plain JSON values (no import paths, no ``entry_point``-like keys);
* wrapper names of :data:`rlviz.envs.wrappers.WRAPPERS` (or a caller's own translation table), and the
  ``module:Class`` observation wrappers of :data:`rlviz.envs.families.KNOWN_WRAPPER_CLASSES` (MiniGrid's, and
  gymnasium's ``AddRenderObservation``);
* classes on an allow-list (:data:`POLICY_CLASSES`, :data:`ACTIVATION_CLASSES`, :data:`EXTRACTOR_CLASSES`).

Anything else raises :class:`~rlviz.errors.UnsafeCheckpointError` naming the name, the reason, and how to
consent: pass the env id yourself (``--env`` / ``env=``: your command line is your consent for that id) or
trust the whole file (``--trust-checkpoint`` / ``trust=True``). Names in the caller's own code need no check.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Collection, Iterable, Mapping

import gymnasium as gym

from ..errors import CheckpointError, UnsafeCheckpointError
from .families import KNOWN_WRAPPER_CLASSES
from .jax_ids import is_jax_env_id
from .pettingzoo_envs import SUPERSUIT_WRAPPERS, is_agents_env_id
from .wrappers import WRAPPERS

__all__ = [
    "POLICY_CLASSES",
    "ACTIVATION_CLASSES",
    "EXTRACTOR_CLASSES",
    "check_env_id",
    "check_env_kwargs",
    "MAX_KWARG_NUMBER",
    "MAX_KWARG_COUNT",
    "check_wrapper_name",
    "check_recipe_names",
    "check_class_name",
    "allowed_class",
]

#: Stable-Baselines3 policy classes rlviz rebuilds from an SB3 zip without unpickling (module.Class).
#: (sb3-contrib: QR-DQN, TQC, RecurrentPPO, MaskablePPO. DDPG saves TD3's policy classes. Each is built only
#: from the spaces of the env the caller names and keyword arguments read as plain literals or allowlisted
#: classes: see rlviz.sources.stable_baselines3.zips.)
POLICY_CLASSES = frozenset({
    "stable_baselines3.common.policies.ActorCriticPolicy",
    "stable_baselines3.common.policies.ActorCriticCnnPolicy",
    "stable_baselines3.dqn.policies.DQNPolicy",
    "stable_baselines3.dqn.policies.CnnPolicy",
    "stable_baselines3.sac.policies.SACPolicy",
    "stable_baselines3.sac.policies.CnnPolicy",
    "stable_baselines3.td3.policies.TD3Policy",
    "stable_baselines3.td3.policies.CnnPolicy",
    "sb3_contrib.qrdqn.policies.QRDQNPolicy",
    "sb3_contrib.qrdqn.policies.CnnPolicy",
    "sb3_contrib.tqc.policies.TQCPolicy",
    "sb3_contrib.tqc.policies.CnnPolicy",
}) | frozenset({  # sb3-contrib RecurrentPPO and MaskablePPO
    "sb3_contrib.common.recurrent.policies.RecurrentActorCriticPolicy",
    "sb3_contrib.common.recurrent.policies.RecurrentActorCriticCnnPolicy",
    "sb3_contrib.common.maskable.policies.MaskableActorCriticPolicy",
    "sb3_contrib.common.maskable.policies.MaskableActorCriticCnnPolicy",
}) | frozenset({  # MultiInputPolicy (Dict observations: rlviz.sources.stable_baselines3.dict_obs)
    "stable_baselines3.common.policies.MultiInputActorCriticPolicy",
    "stable_baselines3.dqn.policies.MultiInputPolicy",
    "stable_baselines3.sac.policies.MultiInputPolicy",
    "stable_baselines3.td3.policies.MultiInputPolicy",
    "sb3_contrib.qrdqn.policies.MultiInputPolicy",
    "sb3_contrib.tqc.policies.MultiInputPolicy",
})
#: torch activations an SB3 ``policy_kwargs["activation_fn"]`` may name.
ACTIVATION_CLASSES = frozenset(
    {f"torch.nn.modules.activation.{n}" for n in ("ReLU", "Tanh", "ELU", "LeakyReLU", "GELU", "SiLU", "Sigmoid",
                                                   "SELU", "Mish", "Softplus", "Hardswish")}
    | {"torch.nn.modules.linear.Identity"}
)
#: SB3 features extractors an SB3 ``policy_kwargs["features_extractor_class"]`` may name.
EXTRACTOR_CLASSES = frozenset({
    "stable_baselines3.common.torch_layers.NatureCNN",
    "stable_baselines3.common.torch_layers.FlattenExtractor",
    "stable_baselines3.common.torch_layers.CombinedExtractor",
})

_TRUST = "--trust-checkpoint (trust=True)"
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_CODE_KEYS = frozenset({"entry_point", "vector_entry_point", "env_creator", "wrappers", "additional_wrappers",
                        "callback", "callbacks", "module", "class", "class_name", "import"})


def _refuse(source: str, what: str, name, why: str, env_consent: bool = False) -> UnsafeCheckpointError:
    if env_consent:
        ways = f"pass --env {name} yourself (env={name!r} in load_agent) or {_TRUST}"
    else:
        ways = f"pass {_TRUST}"
    return UnsafeCheckpointError(
        f"{source} names {what} {str(name)[:120]!r}, which rlviz does not act on from a file: {why}. "
        f"If you trust the file, {ways}."
    )


def check_env_id(env_id, source: str, trusted: bool = False, consented: str | None = None) -> str:
    """``env_id`` read from ``source``, if rlviz may make it: a gymnasium-registered id without a ``module:``
    prefix (call ``register_envs()`` first), or the id the caller passed (``consented``), or ``trusted``."""
    if not isinstance(env_id, str) or not env_id:
        raise CheckpointError(f"{source}: the env id {env_id!r} is not a non-empty string; the file is malformed.")
    if trusted or env_id == consented or is_agents_env_id(env_id) or is_jax_env_id(env_id):
        return env_id  # PettingZoo, JAX families (gymnax:, craftax:, brax:, jumanji:): rlviz's table picks the module
    if ":" in env_id:
        module = env_id.split(":", 1)[0]
        raise _refuse(source, "the env", env_id,
                      f"gymnasium would import the module {module!r} to make it, running that module's code", True)
    if env_id not in gym.registry:
        raise _refuse(source, "the env", env_id,
                      "it is not a registered gymnasium env here (ALE and MinAtar envs are; others are registered "
                      "by importing their package)", True)
    return env_id


def _plain(value, depth: int = 0) -> bool:
    if depth > 8:
        return False
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        return _IMPORT_PATH.fullmatch(value) is None
    if isinstance(value, (list, tuple)):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and k not in _CODE_KEYS and _plain(v, depth + 1) for k, v in value.items())
    return False


#: The largest number a recipe read from a file may pass an env or wrapper (max_episode_steps of a full Atari
#: game is 108,000), and the largest for a key that counts things each made in memory (a frame stack's size, agents,
#: pistons, pixels): ``ss:frame_stack_v1 {"stack_size": 1e7}`` or ``n_pistons: 1e9`` grew a process to 24 GB.
MAX_KWARG_NUMBER = 10**7
MAX_KWARG_COUNT = 4096
_COUNT_KEY = re.compile(r"stack|width|height|size|resolution|^n_|_n$|^num_|agents|pistons|players|length", re.I)


def _out_of_bounds(key: str, value, depth: int = 0) -> str | None:
    """The first number under ``key`` beyond the bounds, as ``key=value``; None when all are within."""
    if isinstance(value, bool) or depth > 8:
        return None
    if isinstance(value, (int, float)):
        limit = MAX_KWARG_COUNT if _COUNT_KEY.search(key) else MAX_KWARG_NUMBER
        return None if value != value or abs(value) <= limit else f"{key}={value!r} (at most {limit:,})"
    if isinstance(value, (list, tuple)):
        return next((f for v in value if (f := _out_of_bounds(key, v, depth + 1))), None)
    if isinstance(value, Mapping):
        return next((f for k, v in value.items() if (f := _out_of_bounds(str(k), v, depth + 1))), None)
    return None


def check_env_kwargs(kwargs, source: str, trusted: bool = False, owner: str = "env") -> dict:
    """``kwargs`` read from ``source`` as a dict, if every key and value is plain data: JSON scalars, lists and
    dicts, no string shaped like an import path (``pkg.mod:attr``), no key such as ``entry_point``; and every number
    within :data:`MAX_KWARG_NUMBER` (:data:`MAX_KWARG_COUNT` for a count of things made in memory), trusted or
    not: trust is about code, and a number alone can exhaust the machine."""
    if not isinstance(kwargs, Mapping):
        raise CheckpointError(f"{source}: the {owner} keyword arguments are a {type(kwargs).__name__}, expected a "
                              "JSON object; the file is malformed.")
    for key, value in kwargs.items():
        found = _out_of_bounds(str(key), value)
        if found is not None:
            raise CheckpointError(f"{source}: the {owner} keyword argument {found[:160]} is beyond what rlviz "
                                  "accepts from a file; pass the env's kwargs yourself (--env ID) or fix the file.")
    if trusted:
        return dict(kwargs)
    for key, value in kwargs.items():
        if not _plain({key: value}):
            raise _refuse(source, f"the {owner} keyword argument", f"{key}={value!r}",
                          "only plain values are accepted (no import paths, callables or entry points)")
    return dict(kwargs)


def check_wrapper_name(name, source: str, trusted: bool = False, known: Collection[str] = ()) -> str:
    """``name`` read from ``source``, if it is one of rlviz's wrappers (:data:`WRAPPERS`) or in ``known`` (a
    caller's translation table, e.g. rl-zoo3 class paths rlviz rebuilds itself). Nothing is ever imported here:
    with ``trusted`` the name is returned for the caller to resolve."""
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"{source}: the wrapper name {name!r} is not a non-empty string; the file is malformed.")
    if trusted or name in WRAPPERS or name in known or name in KNOWN_WRAPPER_CLASSES or name in SUPERSUIT_WRAPPERS:
        return name
    if ":" in name:  # a 'module:Class' the file chose: the user consents by naming it too
        raise UnsafeCheckpointError(
            f"{source} names the wrapper {name[:120]!r}, which is not one rlviz knows (gymnasium's, MiniGrid's, "
            f"SuperSuit's, rlviz's own), and applying it would import code the file chose. If you trust it, name it "
            f"yourself with --wrapper {name[:120]} (or trust the whole file: {_TRUST}).")
    listed = sorted(set(WRAPPERS) | set(known))
    raise _refuse(source, "the wrapper", name,
                  f"it is not one of rlviz's wrappers ({', '.join(listed)}), and building it would import code "
                  "the file chose")


def check_recipe_names(env_id, env_kwargs, wrappers: Iterable, source: str, trusted: bool = False,
                       consented: str | None = None, known_wrappers: Collection[str] = ()) -> None:
    """Every name of a recipe read from ``source``: the env id, its kwargs, each wrapper (``.name``, ``.kwargs``).
    ``known_wrappers``: ``module:Class`` names the user gave too (``--wrapper``: their consent)."""
    check_env_id(env_id, source, trusted, consented)
    check_env_kwargs(env_kwargs, source, trusted)
    for w in wrappers:
        check_wrapper_name(w.name, source, trusted, known=known_wrappers)
        check_env_kwargs(w.kwargs, source, trusted, owner=f"wrapper {w.name!r}")


def check_class_name(qualified, source: str, allowed: Collection[str], trusted: bool = False,
                     what: str = "the class") -> str:
    """``qualified`` (``"package.module.Class"``) read from ``source``, if it is in ``allowed`` or ``trusted``."""
    if not isinstance(qualified, str) or "." not in qualified:
        raise CheckpointError(f"{source}: {what} {qualified!r} is not a 'module.Class' name; the file is malformed.")
    if trusted or qualified in allowed:
        return qualified
    raise _refuse(source, what, qualified,
                  "it is not on rlviz's allow-list of classes it rebuilds without running code from the file")


def allowed_class(qualified, source: str, allowed: Collection[str], trusted: bool = False, what: str = "the class"):
    """The class ``qualified`` names, imported only after :func:`check_class_name` accepted it."""
    module, _, name = check_class_name(qualified, source, allowed, trusted, what).rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise CheckpointError(f"{source} names {what} {qualified!r}, which is not importable here ({exc}).") from None
