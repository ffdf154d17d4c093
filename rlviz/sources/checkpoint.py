"""The one loader every entry point uses: :func:`load_agent` (and :func:`load_checkpoint` for rlviz files).

:func:`load_agent` detects the file kind from its bytes: rlviz checkpoint (written by
:func:`~rlviz.sources.pt2.saving.save_checkpoint`, see there for the format), plain ``torch.export`` program,
``torch.save`` file (a state_dict, with ``model=``; a pickled module only with ``trust=True``),
Stable-Baselines3 ``.zip``, CleanRL's JAX (flax msgpack) files (:mod:`.cleanrl_jax`). Unusable files raise :class:`CheckpointError`. Loading unpickles nothing and
acts on no name a file carries (env ids, wrappers, classes) that rlviz does not know, unless the caller
consents (:mod:`rlviz.envs.trust`): ``env=`` is consent for that env id, ``trust=True`` for the whole file.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from torch import nn

from ..agent.obs import ObsAdapter
from ..agent.policy import KINDS
from ..envs.probe import shared_probes
from ..envs.recipe import EnvRecipe, WrapperSpec
from ..errors import CheckpointError, UnsafeCheckpointError, UsageError
from .adapters import build_model, to_policy
from .cleanrl.jax_files import load_cleanrl_jax
from .cleanrl.scripts import recognise_cleanrl
from .files import EXPECTED, describe, detect_format, read_file, torch_load
from .huggingface.hub import fetch_hub_agent, is_hub_ref
from .loaded import LoadedAgent, check_forward, coerce_recipe, env_facts, settle_kind
from .meet import meet_observation
from .pt2.exported import FORMAT_NAME, FORMAT_VERSION, load_export
from .pt2.saving import save_checkpoint
from .stable_baselines3.zips import load_sb3_zip
from .stable_baselines3.zoo import find_zoo_run, sb3_stats
from .weights import find_state_dict, load_weights

__all__ = ["LoadedAgent", "save_checkpoint", "load_checkpoint", "load_agent", "detect_format", "settle_kind",
           "FORMAT_NAME", "FORMAT_VERSION"]


def load_checkpoint(path, *, device: str = "auto", trust: bool = False) -> LoadedAgent:
    """Load a file written by :func:`save_checkpoint` (anything else: :class:`CheckpointError`)."""
    data = read_file(path)
    fmt = detect_format(data)
    if fmt != "rlviz":
        what = {"sb3-zip": "a Stable-Baselines3 zip", "torch-save": "a torch.save file",
                "torch-export": "a torch.export program without rlviz metadata"}.get(fmt, describe(data))
        raise CheckpointError(
            f"{path} is {what}, not an rlviz checkpoint written by save_checkpoint; use load_agent(path, env=...)."
        )
    return load_export(data, str(path), env=None, trust=trust, device=device, kind="auto")


# -- the generic loader ---------------------------------------------------------------------------
def load_agent(
    path,
    *,
    env: EnvRecipe | str | None = None,
    model: Any = None,
    trust: bool = False,
    device: str = "auto",
    kind: str = "auto",
    vecnormalize=None,
) -> LoadedAgent:
    """Load any supported checkpoint as a :class:`LoadedAgent`; never unpickles code unless ``trust``.

    env: needed for files that do not record it (SB3, torch.save, bare torch.export); for an rlviz
      checkpoint, another env id replaces its recipe, and its own env id is consent to make that env
      with the file's recipe (:mod:`rlviz.envs.trust`). model: for a state_dict file, the network to load it into: an
      ``nn.Module`` instance, a class, or ``"pkg.module:Class"`` / ``"path/to/file.py:Class(k=v)"``
      (constructor arguments named env/envs, observation_space, action_space, num_actions, obs_shape
      are filled from ``env``). kind: "auto" | "actor_critic" | "logits" | "q" for plain torch files.
      vecnormalize: an SB3 ``VecNormalize.save`` file to apply (default: rl-zoo3's ``vecnormalize.pkl`` found
      beside the model). ``path`` may also be an rl-zoo3 run folder (:mod:`rlviz.sources.stable_baselines3.zoo`) or a Hugging Face Hub
      repo, ``"hf://ORG/REPO[@REVISION][/FILE]"`` (:mod:`rlviz.sources.huggingface.hub`; metadata["hub"] says which commit).
    """
    if kind != "auto" and kind not in KINDS:
        raise UsageError(f"kind={kind!r}; expected 'auto' or one of {KINDS}.")
    if is_hub_ref(path):  # hf://ORG/REPO: the files it needs, fetched into the HF cache, loaded as local files
        hub = fetch_hub_agent(path, env_given=env is not None, trust=trust)
        return hub.stamp(load_agent(hub.model, env=env if env is not None else hub.env, model=model, trust=trust,
                                    device=device, kind=kind, vecnormalize=vecnormalize))
    with shared_probes():  # the reader's look at the env and the observation check's: one env (rlviz.envs.probe)
        agent = _load_local(path, env=env, model=model, trust=trust, device=device, kind=kind,
                            vecnormalize=vecnormalize)
        if not (trust and env is None and agent.format == "rlviz"):  # (a trusted file's env is built at make_env)
            meet_observation(agent.policy, env_facts(agent.recipe)[0], agent.recipe, str(agent.path or path))
    return agent


def _load_local(path, *, env, model, trust: bool, device: str, kind: str, vecnormalize) -> LoadedAgent:
    """:func:`load_agent` for a local file or rl-zoo3 folder, before its policy meets an observation."""
    run = find_zoo_run(path, trust) if Path(path).is_dir() else None
    path = run.model if run is not None else path
    data = read_file(path)
    fmt = detect_format(data)
    source = str(path)
    if model is not None and fmt not in ("torch-save",):
        raise UsageError(f"model= is for state_dict files; {source} ({fmt}) carries its own network.")
    if fmt in ("rlviz", "torch-export"):
        return load_export(data, source, env=env, trust=trust, device=device, kind=kind)
    if fmt == "sb3-zip":
        run = run or find_zoo_run(path, trust)
        recipe = coerce_recipe(env, trust) if env is not None else run.recipe
        recipe = recipe or _need_env(env, source, "a Stable-Baselines3 zip outside an rl-zoo3 run folder")
        obs_space, act_space, names = env_facts(recipe)
        stats = sb3_stats(run, vecnormalize)
        policy, gamma, meta = load_sb3_zip(data, source, observation_space=obs_space, action_space=act_space,
                                           trust=trust, device=device, vecnormalize=stats)
        if meta.get("channels_first"):  # SB3's VecTransposeImage, rebuilt by name
            recipe = replace(recipe, wrappers=recipe.wrappers + (WrapperSpec("channels_first"),))
            obs_space = env_facts(recipe)[0]
        given = ObsAdapter(obs_space, policy.capabilities.obs_format)  # (a Dict: flattened for a MultiInputPolicy)
        check_forward(policy, (given.size,) if given.flat else tuple(obs_space.shape or ()), source)
        return LoadedAgent(policy, recipe, tuple(names), gamma, policy.kind, meta, Path(source), "sb3-zip")
    if fmt == "flax-msgpack":  # CleanRL's JAX scripts (rlviz.sources.cleanrl.jax_files); no JAX needed
        return load_cleanrl_jax(data, source, env=env, device=device)
    if fmt == "torch-save":
        return _load_torch_file(data, source, env=env, model=model, trust=trust, device=device, kind=kind)
    if fmt == "corrupt-zip":
        raise CheckpointError(f"{source} is a truncated or corrupt zip archive; expected {EXPECTED}.")
    what = "a zip archive of unknown layout" if fmt == "zip" else describe(data)
    raise CheckpointError(f"{source} is {what}; expected {EXPECTED}.")


def _need_env(env, source: str, what: str) -> EnvRecipe:
    if env is None:
        raise UsageError(f"{source} is {what}, which does not record its environment; pass env=<env id> (--env).")
    return coerce_recipe(env)


def _load_torch_file(data: bytes, source: str, *, env, model, trust: bool, device, kind: str) -> LoadedAgent:

    try:
        obj, fmt = torch_load(data, source, weights_only=True), "torch-state-dict"
    except UnsafeCheckpointError:
        if not trust:
            raise
        obj, fmt = torch_load(data, source, weights_only=False), "torch-pickle"
    layout = recognise_cleanrl(obj) if model is None else None  # CleanRL's standard scripts: no model= needed
    recipe = layout.recipe(env, source) if layout else _need_env(env, source, "a torch.save file")
    obs_space, act_space, names = env_facts(recipe)
    if isinstance(obj, nn.Module):
        if model is not None:
            raise UsageError(f"{source} holds a whole module; model= is only for state_dict files.")
        module = obj
    elif isinstance(obj, dict):
        state = find_state_dict(obj, source)
        if layout is not None:
            model, kind = layout.build(), layout.kind
        if model is None:
            raise UsageError(
                f"{source} holds a state_dict (weights only); say which network they belong to with "
                "model='pkg.module:Class' or 'path/to/file.py:Class' (CLI: --model)."
            )
        module = build_model(model, observation_space=obs_space, action_space=act_space)
        load_weights(module, state, source)
    else:
        raise CheckpointError(f"{source} holds a {type(obj).__name__}; expected a state_dict or an nn.Module.")
    policy = layout.policy(module, act_space, device, source) if layout else to_policy(
        module, observation_space=obs_space, action_space=act_space, kind=kind, device=device)
    settle_kind(policy, obs_space, source)
    meta = {"cleanrl_script": layout.script} if layout else {}
    return LoadedAgent(policy, recipe, tuple(names), 0.99, policy.kind, meta, Path(source), fmt)
