"""The agent's files in the repo ``rlviz push`` builds, named as the tools that read such repos expect them.

==================  ==========================================================================================
the run's agent     the repo's files
==================  ==========================================================================================
rlviz ``.pt2``      the file (its env recipe is inside)
SB3 ``.zip``        the zip, ``config.json`` (the zip's ``data`` and SB3's system info), and its VecNormalize
                    statistics as ``vec_normalize.pkl`` (``--vecnormalize``, or those the render found beside
                    it): huggingface_sb3's ``package_to_hub`` layout
rl-zoo3 run         ``<algo>-<env>.zip``, ``args.yml``, ``config.yml``, ``env_kwargs.yml``, ``vec_normalize.pkl``,
                    ``train_eval_metrics.zip`` (the run's ``evaluations.npz`` and monitor CSVs): what
                    ``rl_zoo3.push_to_hub`` uploads and ``rl_zoo3.load_from_hub`` downloads
CleanRL             the ``.cleanrl_model``
``--model``         the state file and the ``--include-code`` file (required)
==================  ==========================================================================================

Each is a layout :mod:`rlviz.sources.huggingface.hub` recognises, so ``rlviz render hf://ORG/NAME`` loads it."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import PushConfig
from ..errors import UsageError

__all__ = ["AgentFiles", "agent_files", "zoo_model_name"]

_LIBRARY = {".zip": "stable-baselines3", ".cleanrl_model": "cleanrl", ".pt2": "rlviz"}
#: rl-zoo3's algorithm aliases -> the class names its cards show (rl_zoo3.ALGOS); others: upper case
_ZOO_CLASSES = {"ppo_lstm": "RecurrentPPO", "qrdqn": "QRDQN", "trpo": "TRPO", "ars": "ARS", "tqc": "TQC"}


@dataclass(frozen=True)
class AgentFiles:
    """``files``: repo file name -> a local file or the bytes to write; ``library``: the card's library_name;
    ``algo``: the algorithm's name when the files say it (rl-zoo3's args.yml), else None; ``zoo``: for an
    rl-zoo3 run, {"algo": alias, "env": env id, "config": config.yml's text} (the card's RL Zoo usage)."""

    files: dict[str, Path | bytes]
    library: str
    algo: str | None = None
    zoo: dict[str, str] = field(default_factory=dict)


def zoo_model_name(algo: str, env_id: str) -> str:
    """huggingface_sb3's ``ModelName(algo, EnvironmentName(env_id))``: ``<algo>-<env id with / as ->``."""
    return f"{algo}-{env_id.replace('/', '-')}"


def _metrics_zip(run: Path) -> bytes:
    """rl-zoo3's ``train_eval_metrics.zip``: the run's evaluations.npz and monitor CSVs (empty when it has none;
    ``rl_zoo3.load_from_hub`` needs the file). Members are dated 1980-01-01: the same run gives the same bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for f in [run / "evaluations.npz", *sorted(run.glob("*.csv"))]:
            if f.is_file():
                archive.writestr(zipfile.ZipInfo(f.name, (1980, 1, 1, 0, 0, 0)), f.read_bytes(),
                                 zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def _sb3_config(model: Path) -> bytes | None:
    """huggingface_sb3's ``config.json``: the zip's ``data`` (the model's arguments and spaces as SB3 saved them)
    with ``system_info`` (``stable_baselines3.get_system_info``, where SB3 is installed), as its
    ``package_to_hub`` writes it; None when the zip holds no readable ``data``."""
    try:
        with zipfile.ZipFile(model) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    if not isinstance(data, dict):
        return None
    try:
        import stable_baselines3

        data["system_info"] = stable_baselines3.get_system_info(print_info=False)[0]
    except ImportError:
        pass
    return json.dumps(data).encode()


def _plain(value: Any) -> Any:
    """rl-zoo3's YAML data (:func:`~rlviz.sources.stable_baselines3.zoo_yaml.read_zoo_yaml`) as plain YAML data: a
    tagged node (a Python name or object, never built) as its tag and value in one string."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return f"{getattr(value, 'tag', type(value).__name__)} {getattr(value, 'value', '')}".strip()


def _hyperparameters(path: Path) -> str:
    """config.yml's hyperparameters as the card shows them (plain YAML, in the file's order); "" without one."""
    from ..errors import require
    from ..sources.stable_baselines3.zoo_yaml import read_zoo_yaml

    yaml = require("yaml", "sb3", "rl-zoo3 config files")

    if not path.is_file():
        return ""
    return str(yaml.safe_dump(_plain(read_zoo_yaml(path)), sort_keys=False, default_flow_style=False))


def _zoo_files(zoo: Any, stats: Path | None) -> AgentFiles:
    """The files ``rl_zoo3.push_to_hub`` uploads, from the run folder around ``zoo.model``."""
    from ..errors import require

    yaml = require("yaml", "sb3", "rl-zoo3 config files")

    env_id = zoo.recipe.env_id
    alias = zoo.algo or zoo.model.stem
    folder = Path(zoo.folder)
    files: dict[str, Path | bytes] = {f"{zoo_model_name(alias, env_id)}.zip": zoo.model}
    for name in ("args.yml", "config.yml"):
        if (folder / name).is_file():
            files[name] = folder / name
    own = folder / "env_kwargs.yml"
    files["env_kwargs.yml"] = own if own.is_file() else \
        yaml.safe_dump(dict(zoo.recipe.env_kwargs), default_flow_style=False).encode()
    if stats is not None:
        files["vec_normalize.pkl"] = stats
    files["train_eval_metrics.zip"] = _metrics_zip(zoo.model.parent)
    config = _hyperparameters(folder / "config.yml")
    shown = _ZOO_CLASSES.get(alias, alias.upper()) if zoo.algo else None
    return AgentFiles(files, "stable-baselines3", shown, {"algo": alias, "env": env_id, "config": config})


def agent_files(options: dict[str, Any], config: PushConfig) -> AgentFiles:
    """The agent's repo files for the run whose render options are ``options`` (refused: an agent on the Hub
    already, one that is gone, a ``--model`` agent without ``--include-code``)."""
    checkpoint = str(options.get("checkpoint") or "")
    if checkpoint.startswith("hf://"):
        raise UsageError(f"the run's agent is {checkpoint}, already on the Hub; push a run of a local file.")
    path = Path(checkpoint)
    if options.get("model"):
        if not config.include_code:
            raise UsageError(f"the run's agent needs code (--model {options['model']}); pass --include-code FILE "
                             "naming the file that defines it, to upload it with the agent.")
        code = Path(config.include_code)
        if not code.is_file():
            raise UsageError(f"--include-code {code.name}: no such file; name the module that defines the agent.")
        from ..envs.jax_ids import is_jax_env_id

        return AgentFiles({path.name: path, code.name: code}, "flax" if is_jax_env_id(options.get("env")) else "pytorch")
    if not path.exists():
        raise UsageError(f"the run's agent {path.name} is gone; render the run again where it is.")
    given = Path(options["vecnormalize"]) if options.get("vecnormalize") else None
    if path.is_dir() or path.suffix == ".zip":  # an rl-zoo3 run (the folder, or a zip in one), or an SB3 zip
        from ..sources.stable_baselines3.zoo import find_zoo_run

        zoo = find_zoo_run(path, trusted=bool(config.trust_checkpoint))
        stats = given or zoo.vecnormalize  # (the render's own choice: --vecnormalize, else the one found)
        if zoo.folder is not None and zoo.recipe is not None:
            return _zoo_files(zoo, stats)
        files: dict[str, Path | bytes] = {zoo.model.name: zoo.model}
        config_json = _sb3_config(zoo.model)
        if config_json is not None:
            files["config.json"] = config_json
        if stats is not None:
            files["vec_normalize.pkl"] = stats
        return AgentFiles(files, "stable-baselines3")
    return AgentFiles({path.name: path}, _LIBRARY.get(path.suffix, "rlviz"))
