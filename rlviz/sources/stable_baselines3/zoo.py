"""rl-zoo3 run folders: the model, its env and its normalisation, from the files rl-zoo3 writes.

Layout (``python -m rl_zoo3.train``; the Hugging Face Hub's copies, ``push_to_hub``, hold ``<algo>-<env id>.zip``
with ``args.yml``, ``config.yml``, ``env_kwargs.yml`` and ``vec_normalize.pkl`` beside it)::

    logs/<algo>/<env id>_<n>/<env id>.zip        final model (rl-zoo3's enjoy default)
    logs/<algo>/<env id>_<n>/best_model.zip      best evaluation model (when evaluations ran)
    logs/<algo>/<env id>_<n>/<env id>/args.yml   command-line arguments: env, env_kwargs, algo
    logs/<algo>/<env id>_<n>/<env id>/config.yml hyperparameters: normalize, env_wrapper, frame_stack, policy, gamma
    logs/<algo>/<env id>_<n>/<env id>/env_kwargs.yml, vecnormalize.pkl (when normalize was on)

The YAML files are read by :func:`rlviz.sources.stable_baselines3.zoo_yaml.read_zoo_yaml` (no tag builds anything); the env id, its
kwargs and the wrapper names pass :mod:`rlviz.envs.trust` (wrappers: those rlviz rebuilds, :data:`ZOO_WRAPPERS`),
nothing is imported.
"""

from __future__ import annotations

import ast
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from ...envs.recipe import EnvRecipe, WrapperSpec
from ...envs.wrappers import WRAPPERS
from ...errors import CheckpointError, UsageError
from ..agent_names import is_agent_name
from ..schema import NUMBER, Field, check_fields, check_recipe
from .vecnormalize import (
    FILE_NAME,
    HUB_FILE_NAME,
    VecNormalizeStats,
    checkpoint_stem,
    checkpoint_vecnormalize,
    find_vecnormalize,
    read_vecnormalize,
)
from .zoo_yaml import Tagged, read_zoo_yaml, zoo_env_wrappers

__all__ = ["ZooRun", "find_zoo_run", "run_model", "zoo_recipe", "sb3_stats", "ZOO_WRAPPERS"]

#: env_wrapper names of rl-zoo3 configs that rlviz rebuilds -> the recipe wrapper that does it.
ZOO_WRAPPERS = {
    "stable_baselines3.common.atari_wrappers.AtariWrapper": "sb3_atari",
    "gymnasium.wrappers.TimeLimit": "time_limit",
    "gymnasium.wrappers.time_limit.TimeLimit": "time_limit",
}
_CONFIG_FILES = ("config.yml", "args.yml")
_NONE = type(None)
#: The settings of args.yml / config.yml rlviz acts on, with the types rl-zoo3 writes (dict literals as strings).
#: (Tagged values of env_kwargs / normalize are refused by _plain, which names their tag.)
_ARGS = {"env": Field((str,), 1, 200), "env_kwargs": Field((dict, str, Tagged, _NONE)),
         "algo": Field((str, _NONE), 0, 40)}
_CONFIG = {"normalize": Field((bool, str, dict, Tagged, _NONE)), "frame_stack": Field((int, bool, _NONE)),
           "gamma": Field((*NUMBER, _NONE), 0.0, 1.0), "env_wrapper": Field((str, dict, list, _NONE))}


@dataclass(frozen=True)
class ZooRun:
    """What an rl-zoo3 run folder says. model: the zip; recipe: the env (None when no args.yml names it);
    vecnormalize: the statistics file or None; normalize: config.yml asked for VecNormalize; algo, gamma, folder."""

    model: Path
    recipe: EnvRecipe | None
    vecnormalize: Path | None
    normalize: bool
    algo: str | None
    gamma: float | None
    folder: Path | None


def _config_folder(run: Path, stem: str | None) -> Path | None:
    """The run's ``<env id>/`` folder for a model named ``stem`` (None: the run folder itself was given): its own
    folder, or for a name rl-zoo3 writes beside it (best_model, checkpoints) the run's only one; a model of
    another name is not assumed to belong to a run folder it was dropped into."""
    if stem and any((run / stem / f).is_file() for f in _CONFIG_FILES):
        return run / stem
    if stem and (run / "args.yml").is_file():
        return run  # the Hub's flat layout: args.yml beside the zip
    if stem is not None and stem != "best_model" and checkpoint_stem(stem) is None:
        return None
    found = [d for d in sorted(run.iterdir()) if d.is_dir() and any((d / f).is_file() for f in _CONFIG_FILES)]
    return found[0] if len(found) == 1 else None


def run_model(run: Path) -> Path:
    """The model file of the rl-zoo3 run folder ``run`` (one line when there is none: what it holds instead)."""
    zips = sorted(run.glob("*.zip"))
    folder = _config_folder(run, None)
    preferred = [run / f"{folder.name}.zip"] if folder is not None else []
    for candidate in preferred + [run / "best_model.zip"]:
        if candidate.is_file():
            return candidate
    if len(zips) == 1:
        return zips[0]
    agents = [p for p in run.iterdir() if p.is_file() and is_agent_name(p.name)] if run.is_dir() else []
    found = [z.name for z in zips] or ("nothing: the folder is empty" if not any(run.iterdir()) else "no .zip")
    hint = (f" ({len(agents)} checkpoint file(s) here, e.g. {sorted(agents)[0].name}: `rlviz timeline {run}` "
            "evaluates a folder of a training run's checkpoints)") if agents else ""
    raise UsageError(f"{run} is a folder but not an rl-zoo3 run with one model: expected <env id>.zip or "
                     f"best_model.zip in it, found {found}; pass the model file{hint}.")


def _yaml_dict(path: Path) -> dict:
    if not path.is_file():
        return {}
    data = read_zoo_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a mapping of settings, got {type(data).__name__}.")
    return data


def _plain(value, source: str, what: str):
    """A YAML value as plain data: rl-zoo3 writes some dicts as Python literals ("dict(norm_obs=False)")."""
    if isinstance(value, Tagged):
        raise CheckpointError(f"{source}: {what} is a {value.tag} object, which rlviz does not build; "
                              "expected plain values.")
    if isinstance(value, str) and value.startswith(("{", "dict(")):
        text = value
        if text.startswith("dict("):
            text = "{" + ", ".join(f"{k.split('=')[0].strip()!r}: {k.split('=', 1)[1]}"
                                   for k in text[5:-1].split(",") if "=" in k) + "}"
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise CheckpointError(f"{source}: {what} = {value[:80]!r} is not a plain literal.") from None
    return value


def _wrappers(config: dict, source: str, trusted: bool) -> list[WrapperSpec]:
    if isinstance(config.get("env_wrapper"), dict) and len(config["env_wrapper"]) == 1:
        (name, kwargs), = config["env_wrapper"].items()
        config = {**config, "env_wrapper": {name: _plain(kwargs, source, f"env_wrapper {name!r} arguments")}}
    out = []
    for name, kwargs in zoo_env_wrappers(config, source, trusted, known=ZOO_WRAPPERS):
        if name not in ZOO_WRAPPERS and name not in WRAPPERS:  # trusted, but still nothing rlviz can build
            raise UsageError(f"{source}: env_wrapper {name[:80]!r} is not one rlviz rebuilds (known: "
                             f"{sorted(ZOO_WRAPPERS)}); nothing was imported. Render the model file with --env.")
        out.append(WrapperSpec(ZOO_WRAPPERS.get(name, name), dict(kwargs)))
    stack = config.get("frame_stack")
    if stack:
        if isinstance(stack, bool) or not isinstance(stack, int) or stack < 1:
            raise CheckpointError(f"{source}: frame_stack = {stack!r}, expected a positive whole number.")
        out.append(WrapperSpec("sb3_frame_stack", {"n_stack": stack}))
    return out


def zoo_recipe(env_id: str, env_kwargs: dict, config: dict, source: str, trusted: bool = False) -> EnvRecipe:
    """The env recipe of an rl-zoo3 run: env id and kwargs, its wrappers (Atari: SB3's chain), frame stack; every
    name passes :mod:`rlviz.envs.trust` (registered env ids, plain kwargs, known wrappers) unless ``trusted``."""
    if not isinstance(env_kwargs, dict):
        raise CheckpointError(f"{source}: env_kwargs is a {type(env_kwargs).__name__}, expected a mapping.")
    wrappers = _wrappers(config, source, trusted)
    atari = any(w.name == "sb3_atari" for w in wrappers)
    raw = {"env_id": env_id, "env_kwargs": dict(env_kwargs), "wrappers": [asdict(w) for w in wrappers],
           "saliency_mode": "linear" if atari else None}
    return EnvRecipe.from_dict(check_recipe(raw, source), source, trusted=trusted)


def _normalize_flag(config: dict, source: str) -> bool:
    value = _plain(config.get("normalize", False), source, "normalize")
    if isinstance(value, dict):
        return bool(value.get("norm_obs", True))
    return bool(value)


def find_zoo_run(path: str | os.PathLike, trusted: bool = False) -> ZooRun:
    """The run around ``path`` (a run folder, or a model zip inside one). A zip outside any run gives a ZooRun
    with no recipe (the caller then needs ``env``) and the ``vecnormalize.pkl`` beside it, if any. Names in the
    run's files pass :mod:`rlviz.envs.trust` unless ``trusted``."""
    p = Path(path)
    model = run_model(p) if p.is_dir() else p
    run = model.parent
    folder = _config_folder(run, model.stem) if run.is_dir() else None
    if folder is None:
        return ZooRun(model, None, find_vecnormalize(model), False, None, None, None)
    source = str(folder)
    config = check_fields(_yaml_dict(folder / "config.yml"), _CONFIG, str(folder / "config.yml"), "config.yml")
    args = check_fields(_yaml_dict(folder / "args.yml"), _ARGS, str(folder / "args.yml"), "args.yml")
    env_id = args.get("env") or folder.name
    env_kwargs = _plain(args.get("env_kwargs") or _yaml_dict(folder / "env_kwargs.yml") or {}, source, "env_kwargs")
    recipe = zoo_recipe(env_id, env_kwargs, config, source, trusted)
    gamma = config.get("gamma")
    gamma = float(gamma) if isinstance(gamma, (int, float)) and not isinstance(gamma, bool) else None
    vecnormalize = checkpoint_vecnormalize(model) or next(  # a checkpoint's own first
        (folder / n for n in (FILE_NAME, HUB_FILE_NAME) if (folder / n).is_file()), None)
    return ZooRun(model, recipe, vecnormalize, _normalize_flag(config, source),
                  str(args.get("algo")) if args.get("algo") else None, gamma, folder)


def sb3_stats(run: ZooRun, vecnormalize: str | os.PathLike | None = None) -> VecNormalizeStats | None:
    """The VecNormalize statistics for a model: ``vecnormalize`` when given, else the run's; warns when the
    run's config.yml asked for normalisation and no statistics are there."""
    path = vecnormalize if vecnormalize is not None else run.vecnormalize
    if path is None:
        if run.normalize:
            warnings.warn(
                f"{run.folder}/config.yml says {run.model.name} was trained under VecNormalize, but there is no "
                "vecnormalize.pkl: it will act on raw observations, i.e. as a different agent. Pass the statistics "
                "saved with it (--vecnormalize PATH).", UserWarning, stacklevel=3)
        return None
    return read_vecnormalize(path)
