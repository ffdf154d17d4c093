"""A flax agent from its parameters file and its class: :func:`load_jax_agent` -> :class:`rlviz.sources.LoadedAgent`
whose ``policy`` is a :class:`~rlviz.jax.policy.FlaxPolicy` and ``recipe`` the JAX env's (``gymnax:Breakout-MinAtar``).

The class is named by the user (``--model module:Class``, ``--critic module:Class``: the command line is the consent
to import them, as for torch state_dicts); nothing a file says is imported. Which params go to which module:

* ``{"actor": ..., "critic": ...}`` (the seed's ``to_bytes``) -> the actor to ``model``, the critic to ``critic``;
* rejax's train state (``{"actor_ts": {"params": ...}, "critic_ts": {"params": ...}}``) likewise;
* ``{"params": ...}`` (a variables dict, PureJaxRL's ``network_params``) or a bare params tree -> ``model``.

Each is checked against what the module's ``init`` makes (:func:`jax.eval_shape`, nothing computed); a mismatch is
one line naming the first arrays that differ. SBX zips keep their params only inside a pickle: refused, one line.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._deprecated import old_keywords
from ..errors import CheckpointError, UsageError
from ..options import import_user_attr
from ..sources.limits import check_archive, loads_json, read_member
from ..sources.loaded import LoadedAgent, coerce_recipe
from . import require_jax
from .params import read_params

__all__ = ["load_jax_agent", "JaxAgentOptions", "import_class", "env_facts", "split_params", "check_params", "sbx_refusal", "rejax_flags"]

#: flax.linen activations a ``--model-kwargs`` string may name (rejax's ``activation`` field is a function)
ACTIVATIONS = frozenset({"relu", "tanh", "swish", "silu", "gelu", "elu", "sigmoid", "leaky_relu", "softplus",
                         "selu", "celu", "mish", "hard_tanh"})


def import_class(spec: Any, flag: str = "--model") -> Any:
    """The class of ``'pkg.module:Class'`` or ``'path/file.py:Class'`` (the user's own naming: their consent), or
    ``spec`` itself when it is already a class or module object."""
    if not isinstance(spec, str):
        return spec
    where, _, name = spec.rpartition(":")
    if not where or not name or not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        raise UsageError(f"{flag} {spec!r}: expected 'pkg.module:Class' or 'path/to/file.py:Class'.")
    return import_user_attr(where, name, flag)


def _kwargs(value: Any, flag: str) -> dict:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise UsageError(f"{flag} {value!r} is not JSON ({exc}); expected an object such as "
                             "'{\"action_dim\": 3}'.") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} {value!r}: expected a JSON object of the class's fields.")
    out = {}
    for k, v in value.items():
        if k == "activation" and isinstance(v, str):
            if v not in ACTIVATIONS:
                raise UsageError(f"{flag}: activation {v!r} is none of flax.linen's {', '.join(sorted(ACTIVATIONS))}.")
            import flax.linen as nn

            v = getattr(nn, v)
        elif isinstance(v, list):
            v = tuple(v)
        out[k] = v
    return out


def build_module(spec: Any, kwargs: Any, flag: str, env: dict) -> Any:
    """An instance of the flax module ``spec`` names, built with ``kwargs`` (``action_dim`` filled from the env
    when the class has that field and the user left it out)."""
    cls = import_class(spec, flag)
    if not isinstance(cls, type):
        return cls  # an instance given from Python
    given = _kwargs(kwargs, f"{flag}-kwargs")
    fields = getattr(cls, "__dataclass_fields__", {})
    for name in ("action_dim", "num_actions", "n_actions", "action_size"):
        if name in fields and name not in given and env.get("action_size"):
            given[name] = env["action_size"]
    try:
        return cls(**given)
    except Exception as exc:
        raise UsageError(f"{flag} {getattr(cls, '__name__', cls)}({', '.join(f'{k}={v!r}' for k, v in given.items())}) "
                         f"failed ({type(exc).__name__}: {exc}); give its fields with {flag}-kwargs JSON.") from None


def env_facts(env_id: str, env_kwargs: dict | None = None) -> dict:
    """{obs_shape, action_names, discrete, action_size} of a JAX env id, by the engine's :func:`rlviz.jax.envs.
    make_jax_env` (gymnax's own spaces when the engine is absent)."""
    try:
        from .envs import make_jax_env  # type: ignore[import-not-found,attr-defined,unused-ignore]
    except ImportError as exc:
        if exc.name not in ("rlviz.jax.envs",):
            raise
        return _gymnax_facts(env_id, env_kwargs)
    env = make_jax_env(env_id, env_kwargs)
    names = tuple(env.action_names)
    return {"obs_shape": tuple(env.obs_shape), "action_names": names, "discrete": bool(env.discrete),
            "action_size": len(names)}


def _gymnax_facts(env_id: str, env_kwargs: dict | None) -> dict:
    family, _, name = env_id.partition(":")
    if family != "gymnax":
        raise UsageError(f"--env {env_id}: this rlviz has no JAX env engine (rlviz.jax.envs); only gymnax ids load.")
    try:
        import gymnax  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise UsageError(f'--env {env_id} needs gymnax; pip install "rlviz[jax]".') from None
    try:
        env, params = gymnax.make(name)  # (the spaces do not depend on --env-kwargs: env params)
    except Exception as exc:
        raise UsageError(f"--env {env_id}: gymnax does not know {name!r} ({exc}).") from None
    space = env.action_space(params)
    n = int(getattr(space, "n", 0) or 0)
    discrete = n > 0
    size = n if discrete else int(np.prod(space.shape))
    return {"obs_shape": tuple(env.observation_space(params).shape), "discrete": discrete, "action_size": size,
            "action_names": tuple(str(i) for i in range(size))}


def _unwrap(tree: Any) -> Any:
    while isinstance(tree, dict) and set(tree) == {"params"} and isinstance(tree["params"], dict):
        inner = tree["params"]
        if {"actor", "critic"} <= set(inner) or {"actor_ts", "critic_ts"} <= set(inner):
            return inner
        break
    return tree


def split_params(tree: dict, source: str, with_critic: bool) -> tuple[Any, Any, str]:
    """(actor params, critic params or None, what was found: "actor/critic" | "rejax train state" | "one tree")."""
    t = _unwrap(tree)
    for a, c, what in (("actor", "critic", "actor/critic"), ("actor_ts", "critic_ts", "rejax train state")):
        if isinstance(t, dict) and a in t:
            actor, critic = t[a], t.get(c)
            if what == "rejax train state":
                actor = actor.get("params", actor) if isinstance(actor, dict) else actor
                critic = critic.get("params", critic) if isinstance(critic, dict) else critic
            if with_critic and critic is None:
                raise CheckpointError(f"{source}: holds {sorted(t)} with no {c!r}; --critic needs the critic's params "
                                      f"under {c!r}.")
            return actor, critic if with_critic else None, what
    if with_critic:
        keys = sorted(t) if isinstance(t, dict) else type(t).__name__
        raise CheckpointError(f"{source}: --critic given but the file holds {keys}, not {{'actor': ..., 'critic': "
                              "...}}; save to_bytes({'actor': actor_params, 'critic': critic_params}).")
    return t, None, "one tree"


def _shapes(tree: Any, prefix: str = "") -> dict[str, tuple]:
    """{"Dense_0/kernel": shape} of a params tree (arrays or jax.ShapeDtypeStruct leaves)."""
    if hasattr(tree, "items"):
        out: dict[str, tuple] = {}
        for k, v in tree.items():
            out.update(_shapes(v, f"{prefix}{k}/"))
        return out
    return {prefix[:-1]: tuple(getattr(tree, "shape", np.shape(tree)))}


def check_params(module: Any, params: Any, obs: Any, source: str, what: str, method: str | None = None) -> Any:
    """``params`` (a bare tree or ``{"params": ...}``) as ``module``'s variables with jnp arrays, after comparing
    its arrays with those ``module.init`` makes on ``obs``: one line on the first differences."""
    import jax
    import jax.numpy as jnp

    from .policy import as_variables

    variables = as_variables(params)
    kw = {"method": method} if method else {}
    try:
        expected = jax.eval_shape(lambda k: module.init(k, obs, **kw), jax.random.PRNGKey(0))
    except Exception as exc:
        raise UsageError(f"{type(module).__name__}.init on an observation of shape {tuple(obs.shape[1:])} failed "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}).") from None
    want = _shapes(expected.get("params", {}))
    have = _shapes(variables["params"])
    if want != have:
        missing = [k for k in want if k not in have]
        extra = [k for k in have if k not in want]
        wrong = [f"{k} {have[k]} vs {want[k]}" for k in want if k in have and have[k] != want[k]]
        parts = ([f"missing {', '.join(missing[:3])}"] if missing else []) + \
                ([f"unexpected {', '.join(extra[:3])}"] if extra else []) + \
                ([f"shapes differ: {'; '.join(wrong[:3])}"] if wrong else [])
        raise CheckpointError(f"{source}: the {what} params ({len(have)} arrays) do not fit {type(module).__name__}"
                              f"'s init ({len(want)} arrays): {'; '.join(parts)}; check --model/--critic and their "
                              "--*-kwargs.")
    return jax.tree_util.tree_map(jnp.asarray, variables)


def rejax_flags(tree: Any) -> str | None:
    """The command-line flags that load a rejax PPO-style train state (``actor_ts``/``critic_ts`` holding
    rejax.networks' DiscretePolicy / VNetwork params: their hidden sizes read from the kernels), or None."""
    t = _unwrap(tree)
    try:
        actor = t["actor_ts"]["params"]["params"]
        critic = t["critic_ts"]["params"]["params"]
        sizes = [int(np.shape(actor["features"][f"Dense_{i}"]["kernel"])[1]) for i in range(len(actor["features"]))]
        csizes = [int(np.shape(critic[f"Dense_{i}"]["kernel"])[1]) for i in range(len(critic) - 1)]
    except (KeyError, TypeError, IndexError):
        return None
    if "action_logits" not in actor:
        return None
    return (f"--model rejax.networks:DiscretePolicy --model-kwargs '{{\"hidden_layer_sizes\": {sizes}, "
            f"\"activation\": \"swish\"}}' --critic rejax.networks:VNetwork --critic-kwargs "
            f"'{{\"hidden_layer_sizes\": {csizes}, \"activation\": \"swish\"}}'")


def sbx_refusal(path: Path) -> str | None:
    """The one-line reason an SBX (``sbx-rl``) zip is refused, or None when ``path`` is no SBX zip."""
    try:
        with zipfile.ZipFile(path) as zf:
            check_archive(zf, str(path))
            if "data" not in zf.namelist():
                return None
            data = loads_json(read_member(zf, "data", str(path)), str(path), "its data")
    except (zipfile.BadZipFile, OSError):
        return None
    module = str(data.get("policy_class", {}).get("__module__", "")) if isinstance(data, dict) and isinstance(
        data.get("policy_class"), dict) else ""
    if not module.startswith("sbx."):
        return None
    return (f"{path} is an SBX ({module}) zip: its flax params live only inside the pickled 'policy' of its data, "
            "which rlviz does not unpickle; save them with flax.serialization.to_bytes(model.policy.actor_state.params)"
            " and load that file with --model (docs/jax-agents.md).")


@dataclass(frozen=True)
class JaxAgentOptions:
    """The rarely needed settings of :func:`load_jax_agent`: ``obs_reshape``: the per-observation shape the module
    expects (default the env's observation shape); ``kind``: "q" for a DQN's Q-values (default: found by tracing);
    ``gamma``: the discount of the value-vs-return statistics."""

    obs_reshape: Any = None
    kind: str | None = None
    gamma: float = 0.99


def _fold_agent_options(args: tuple, kwargs: dict, old: dict) -> tuple:
    """``load_jax_agent(..., kind="q", gamma=...)`` -> ``options=JaxAgentOptions(kind="q", gamma=...)``."""
    options = kwargs.get("options")
    kwargs["options"] = replace(options if isinstance(options, JaxAgentOptions) else JaxAgentOptions(), **old)
    return args


@old_keywords(("obs_reshape", "kind", "gamma"), _fold_agent_options, "options=JaxAgentOptions(...)",
              release="0.6.dev (#56)", until="0.7")
def load_jax_agent(path: str | os.PathLike[str], *, model: Any = None, model_kwargs: Any = None, critic: Any = None,
                   critic_kwargs: Any = None, env: Any = None, options: JaxAgentOptions | None = None) -> LoadedAgent:
    """The flax agent in ``path`` (msgpack file, Orbax folder or .npz) built as ``model`` (+ ``critic``) on the
    JAX env ``env`` (an id with its family prefix, or a recipe). ``model_kwargs`` / ``critic_kwargs``: the
    classes' fields (dict or JSON); ``options``: a :class:`JaxAgentOptions` (``obs_reshape``, ``kind``, ``gamma``)."""
    options = options if options is not None else JaxAgentOptions()
    if not isinstance(options, JaxAgentOptions):
        raise UsageError(f"options={options!r}: expected a rlviz.jax.JaxAgentOptions or None.")
    obs_reshape, kind, gamma = options.obs_reshape, options.kind, options.gamma
    require_jax()
    import jax.numpy as jnp

    from .policy import FlaxPolicy, FlaxPolicyOptions

    p = Path(path)
    source = str(path)
    if p.is_file() and zipfile.is_zipfile(p) and p.suffix != ".npz":
        reason = sbx_refusal(p)
        raise CheckpointError(reason or f"{p}: a zip that is no flax params file (.npz); expected a flax msgpack "
                              "file, an Orbax folder or a .npz.")
    if env is None:
        raise UsageError(f"{source}: a flax params file does not say its env; give --env with a JAX id such as "
                         "gymnax:Breakout-MinAtar.")
    recipe = coerce_recipe(env)
    from ..envs.jax_ids import is_jax_env_id

    if not is_jax_env_id(recipe.env_id):
        raise UsageError(f"--env {recipe.env_id}: a flax agent runs on a JAX env (gymnax:, craftax:, brax:, jumanji:"
                         " ids, e.g. gymnax:Breakout-MinAtar); rlviz rolls gymnasium envs out with torch policies.")
    if model is None and p.is_file():
        rejax = rejax_flags(read_params(p)[0])
        if rejax:
            raise UsageError(f"{source} is a rejax train state; the file does not say the networks' activation: give "
                             f"{rejax} (swish is rejax's default; docs/jax-agents.md).")
    if model is None:
        raise UsageError(f"{source}: a flax params file needs its class: --model module:Class (and --critic "
                         "module:Class for a separate critic); see docs/jax-agents.md.")
    facts = env_facts(recipe.env_id, dict(recipe.env_kwargs))
    tree, fmt = read_params(p)
    actor_p, critic_p, layout = split_params(tree, source, critic is not None)
    module = build_module(model, model_kwargs, "--model", facts)
    critic_m = build_module(critic, critic_kwargs, "--critic", {}) if critic is not None else None
    shape = tuple(int(d) for d in obs_reshape if int(d) != -1) if obs_reshape is not None else facts["obs_shape"]
    obs = jnp.zeros((1, *shape), jnp.float32)
    method = "_action_dist" if callable(getattr(type(module), "_action_dist", None)) else None
    actor_v = check_params(module, actor_p, obs, source, "actor" if critic is not None else "model's", method)
    critic_v = check_params(critic_m, critic_p, obs, source, "critic") if critic_m is not None else None
    names = facts["action_names"]
    policy = FlaxPolicy(module, actor_v, critic=critic_m, critic_params=critic_v, options=FlaxPolicyOptions(
        kind=kind, obs_shape=facts["obs_shape"], obs_reshape=obs_reshape, method=method))
    if len(names) == policy.action_size:
        policy.action_names = tuple(names)
    elif facts["discrete"] and policy.kind != "gaussian":
        raise CheckpointError(f"{source}: {type(module).__name__} outputs {policy.action_size} actions; "
                              f"{recipe.env_id} has {len(names)} ({', '.join(names)}).")
    has_value = policy.critic is not None or _has_value(policy)
    loaded_kind = "q" if policy.kind == "q" else ("actor_critic" if has_value else "logits")
    meta = {"params_layout": layout, "model": getattr(model, "__name__", str(model)), "policy_kind": policy.kind,
            "squash": policy.squash}
    if critic is not None:
        meta["critic"] = getattr(critic, "__name__", str(critic))
    return LoadedAgent(policy, recipe, tuple(policy.action_names), float(gamma), loaded_kind,  # type: ignore[arg-type]
                       meta, p, f"flax-{fmt}")


def _has_value(policy: Any) -> bool:
    import jax
    import jax.numpy as jnp

    if policy.recurrent:
        return True
    out = jax.eval_shape(policy.apply, policy.params, jax.ShapeDtypeStruct(policy.obs_shape, jnp.float32))
    return out.value is not None

