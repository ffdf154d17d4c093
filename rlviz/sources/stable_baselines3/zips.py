"""Stable-Baselines3 models as rlviz policies (extra ``rlviz[sb3]``; imported lazily).

Supported: PPO and A2C (``ActorCriticPolicy``, ``ActorCriticCnnPolicy``; Discrete, MultiDiscrete, MultiBinary or
Box actions) -> kind "actor_critic"; DQN (``DQNPolicy``, ``CnnPolicy``) and sb3-contrib QR-DQN (``QRDQNPolicy``,
``CnnPolicy``: Q = mean of the quantiles, as ``QRDQN.predict``; the quantiles themselves in
``PolicyOutput.quantiles``) -> kind "q"; SAC, TD3, DDPG and sb3-contrib TQC (Box actions,
:mod:`rlviz.sources.stable_baselines3.continuous`, which says what their panels show) -> kind "actor_critic"; sb3-contrib
RecurrentPPO (:mod:`rlviz.sources.stable_baselines3.recurrent_ppo`, stateful) and MaskablePPO (:mod:`rlviz.agent.masking`, the env's
action masks applied; Discrete actions) -> kind "actor_critic". Box or Discrete observations. Observations may be
normalised first by ``VecNormalize`` statistics (:mod:`rlviz.sources.stable_baselines3.vecnormalize`).

The wrappers take the raw observations the env gives (float32 tensors) and run SB3's own
preprocessing (``preprocess_obs``: ``/255`` for image spaces when ``normalize_images``, one-hot
for Discrete) inside the forward pass, so saliency gradients go back to the raw pixels.

**Loading a .zip safely.** SB3's ``load`` calls ``cloudpickle.loads`` on every ``:serialized:``
entry of the zip's ``data`` JSON (``save_util.json_to_data``): policy_class, observation_space,
action_space, policy_kwargs (when it holds classes), lr_schedule, clip_range, buffers... Any of
them can run code. :func:`load_sb3_zip` by default unpickles nothing: it reads ``data`` with
``json``, takes the policy class from an allowlist (:mod:`rlviz.envs.trust`, the rule for every name a file
carries) by the name SB3 writes beside the pickle
(``__module__`` and ``<function ActorCriticPolicy.__init__ ...>``), rebuilds ``policy_kwargs`` from
their plain-text copies (allowlisted activation and feature-extractor classes, literal net_arch and
kwargs; the optimizer is dropped, inference does not need it), builds the policy on the spaces of
the env the caller names (checked against the shapes recorded in the zip) and loads
``policy.pth`` with ``torch.load(weights_only=True)`` and ``strict=True``. Anything outside the
allowlist raises :class:`UnsafeCheckpointError`; ``trust=True`` then uses SB3's own
``load_from_zip_file`` (cloudpickle) and the unpickled policy class.
"""

from __future__ import annotations

import ast
import io
import re
import warnings
import zipfile
import zlib
from typing import Any

import torch
from torch import nn

from ...agent.actions import action_spec
from ...agent.masking import MaskedTorchPolicy
from ...agent.policy import Policy, TorchPolicy, check_action_space, resolve_device
from ...envs.env_facts import describe_space
from ...envs.trust import ACTIVATION_CLASSES, EXTRACTOR_CLASSES, POLICY_CLASSES, allowed_class
from ...errors import CheckpointError, EnvError, UnsafeCheckpointError, UsageError, require
from ..files import quiet_torch_load, require_safe_torch_load
from ..limits import MAX_MEMBER_BYTES, check_archive, loads_json, read_member
from ..schema import NUMBER, Field, check_fields, check_sizes
from ..weights import load_weights
from .continuous import actor_critic_head, offpolicy_algorithm, offpolicy_module, refuse_sde
from .dict_obs import SB3DictInput, dict_policy_space
from .recurrent_ppo import SB3RecurrentPolicy, is_recurrent
from .vecnormalize import ObsNormalizer, VecNormalizeStats, check_stats_shape

__all__ = ["SB3ActorCritic", "SB3QNetwork", "SB3QuantileNetwork", "sb3_policy", "load_sb3_zip"]

_LITERAL_KEYS = {"net_arch", "features_extractor_kwargs", "normalize_images", "share_features_extractor",
                 "n_quantiles", "n_critics", "clip_mean"}
_LITERAL_KEYS |= {"lstm_hidden_size", "n_lstm_layers", "shared_lstm", "enable_critic_lstm", "lstm_kwargs"}  # RecurrentPPO
_IGNORED_KEYS = {"optimizer_class", "optimizer_kwargs", "ortho_init", "log_std_init", "full_std", "use_expln",
                 "squash_output", "use_sde"}
_NONE = type(None)
#: The fields of an SB3 zip's ``data`` JSON that rlviz reads, with the types SB3 writes.
_DATA_FIELDS = {"policy_class": Field((dict,)), "policy_kwargs": Field((dict, _NONE)),
                "observation_space": Field((dict, _NONE)), "action_space": Field((dict, _NONE)),
                "gamma": Field((*NUMBER, _NONE)), "num_timesteps": Field((int, _NONE)),
                "use_sde": Field((bool, _NONE))}
_CLASS_REPR = re.compile(r"<class '([\w.]+)'>")
_WRAPPER_HINT = (" (a Dict: name the observation wrapper it was trained with, e.g. --wrapper "
                 "minigrid.wrappers:ImgObsWrapper)")
_SPACE_TYPE = re.compile(r"<class 'gymnasium\.spaces\.\w+\.(\w+)'>")


class SB3ActorCritic(nn.Module):
    """raw obs [B, *obs] -> (log pi [B, A] as ``policy.get_distribution(obs).distribution.logits``,
    V [B] as ``policy.predict_values(obs)``), in one pass through the features extractor(s); other action
    spaces: :func:`rlviz.sources.stable_baselines3.continuous.actor_critic_head` (Box: {"mean", "log_std", "value"})."""

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy: Any = policy  # an SB3 policy (its submodules by name)

    def forward(self, obs: torch.Tensor):
        p = self.policy
        features = p.extract_features(obs)
        if p.share_features_extractor:
            latent_pi, latent_vf = p.mlp_extractor(features)
        else:
            latent_pi = p.mlp_extractor.forward_actor(features[0])
            latent_vf = p.mlp_extractor.forward_critic(features[1])
        return actor_critic_head(p, p.action_net(latent_pi), p.value_net(latent_vf).reshape(-1))


class SB3QNetwork(nn.Module):
    """raw obs [B, *obs] -> Q-values [B, A] (``policy.q_net(obs)``, preprocessing included)."""

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy: Any = policy  # an SB3 policy (its submodules by name)

    def forward(self, obs: torch.Tensor):
        return self.policy.q_net(obs)


class SB3QuantileNetwork(nn.Module):
    """raw obs [B, *obs] -> Q-values [B, A]: the mean of QR-DQN's quantiles [B, n_quantiles, A], which is what
    ``QRDQN.predict`` takes the argmax of. ``quantiles(obs)`` gives the quantiles themselves."""

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy: Any = policy  # an SB3 policy (its submodules by name)

    def quantiles(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy.quantile_net(obs)

    def forward(self, obs: torch.Tensor):
        quantiles = self.quantiles(obs)
        return {"logits": quantiles.mean(dim=1), "quantiles": quantiles}


def sb3_policy(model, *, device="auto", vecnormalize: VecNormalizeStats | None = None,
               observation_space=None) -> Policy:
    """Policy for an SB3 algorithm (``PPO``, ``A2C``, ``DQN``, ``SAC``, ``TD3``, ``DDPG``; sb3-contrib ``QRDQN``,
    ``TQC``) or its ``.policy``; ``vecnormalize``: the statistics it was trained under
    (:func:`rlviz.sources.stable_baselines3.vecnormalize.read_vecnormalize`), applied to the raw observations in front of the network
    as SB3's ``VecNormalize`` does at evaluation. ``observation_space``: the env's, for a ``MultiInputPolicy``
    (Dict observations, :mod:`rlviz.sources.stable_baselines3.dict_obs`) whose image keys SB3 trained channels
    first; default: the policy's own."""
    require("stable_baselines3", "sb3", "Stable-Baselines3 models")
    from gymnasium import spaces
    from stable_baselines3.common.policies import ActorCriticPolicy
    from stable_baselines3.dqn.policies import DQNPolicy

    policy = getattr(model, "policy", model)
    dict_obs = isinstance(policy.observation_space, spaces.Dict)
    if dict_obs and (vecnormalize is not None or is_recurrent(policy)
                     or type(policy).__module__.startswith("sb3_contrib.common.maskable")):
        raise UsageError(f"This {type(policy).__name__} takes Dict observations; rlviz renders Dict (MultiInputPolicy) "
                         "agents of PPO, A2C, DQN, SAC, TD3, DDPG, QR-DQN and TQC without VecNormalize.")
    action_spec(policy.action_space)  # a clear error for action spaces rlviz cannot draw
    policy.set_training_mode(False)
    if vecnormalize is not None:
        check_stats_shape(vecnormalize, tuple(policy.observation_space.shape or ()), "the model's")
    norm = ObsNormalizer(vecnormalize) if vecnormalize is not None and vecnormalize.norm_obs else None
    norm = norm.to(resolve_device(device)) if norm is not None else None
    if is_recurrent(policy):
        return SB3RecurrentPolicy(policy, check_action_space(policy.action_space), device=device, obs_transform=norm)
    if type(policy).__module__.startswith("sb3_contrib.common.maskable"):
        out: TorchPolicy = MaskedTorchPolicy(SB3ActorCritic(policy), num_actions=check_action_space(policy.action_space),
                                kind="actor_critic", device=device, obs_transform=norm)
        out.obs_format = "raw"
        return out
    squash = False
    module: nn.Module
    if isinstance(policy, ActorCriticPolicy):
        refuse_sde(policy.use_sde, f"This {type(policy).__name__}")
        module, kind = SB3ActorCritic(policy), "actor_critic"
    elif isinstance(policy, DQNPolicy):
        module, kind = SB3QNetwork(policy), "q"
    elif type(policy).__module__.startswith("sb3_contrib.qrdqn"):
        module, kind = SB3QuantileNetwork(policy), "q"
    elif (off := offpolicy_module(policy)) is not None:
        (module, squash), kind = off, "actor_critic"
    else:
        raise UsageError(
            f"rlviz supports SB3 PPO/A2C (ActorCriticPolicy), DQN (DQNPolicy), SAC, TD3, DDPG and sb3-contrib "
            f"QR-DQN, TQC, RecurrentPPO, MaskablePPO; got {type(policy).__name__}."
        )
    if dict_obs:  # rlviz flattens the Dict (obs_format "flat"); the module puts it back into SB3's dict
        given = observation_space if isinstance(observation_space, spaces.Dict) else policy.observation_space
        module = SB3DictInput(module, policy, given)
    out = TorchPolicy(module, kind=kind, device=device, obs_transform=norm, action_space=policy.action_space,
                      squash=squash)
    out.obs_format = "flat" if dict_obs else "raw"  # SB3 one-hots Discrete observations itself (preprocess_obs)
    return out


# -- .zip files -----------------------------------------------------------------------------------
def _unsafe(source: str, why: str) -> UnsafeCheckpointError:
    return UnsafeCheckpointError(
        f"{source}: {why}. Rebuilding it would mean unpickling it with cloudpickle (as SB3's load does), which "
        "runs code from the file. If you trust the file: trust=True (CLI: --trust-checkpoint)."
    )


def _policy_class(entry, source: str):
    if not isinstance(entry, dict):
        raise CheckpointError(f"{source}: the zip's data has no policy_class entry; is it an SB3 model?")
    init = str(entry.get("__init__", ""))
    m = re.match(r"<function (\w+)\.__init__ at", init)
    name = f"{entry.get('__module__')}.{m.group(1) if m else None}"
    return allowed_class(name, source, POLICY_CLASSES, what="the policy class")


def _class_from_repr(value, allowed, source: str, key: str):
    m = _CLASS_REPR.fullmatch(str(value))
    return allowed_class(m.group(1) if m else str(value), source, allowed, what=f"policy_kwargs[{key!r}] class")


def _policy_kwargs(entry, source: str) -> dict:
    if entry is None:
        return {}
    if not isinstance(entry, dict):
        raise CheckpointError(f"{source}: policy_kwargs is a {type(entry).__name__}, expected a dict.")
    kwargs = {}
    for key, value in entry.items():
        if key in (":type:", ":serialized:") or key in _IGNORED_KEYS:
            continue
        if key == "activation_fn":
            kwargs[key] = _class_from_repr(value, ACTIVATION_CLASSES, source, key)
        elif key == "features_extractor_class":
            kwargs[key] = _class_from_repr(value, EXTRACTOR_CLASSES, source, key)
        elif key in _LITERAL_KEYS:
            try:
                kwargs[key] = check_sizes(ast.literal_eval(value) if isinstance(value, str) else value, source,
                                          f"policy_kwargs[{key!r}]")
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise _unsafe(source, f"policy_kwargs[{key!r}] = {str(value)[:80]!r} is not a plain literal") from None
        else:
            raise _unsafe(source, f"policy_kwargs[{key!r}] is not a setting rlviz can restore from text")
    return kwargs


def _saved_shape(saved: dict) -> tuple | None:
    shape = saved.get("_shape")
    try:
        return tuple(ast.literal_eval(shape) if isinstance(shape, str) else shape) if shape is not None else None
    except (ValueError, SyntaxError, TypeError):
        return None


def channels_first_space(space):
    """The Box SB3's ``VecTransposeImage`` gives for an [H, W, C] uint8 image ``space`` ([C, H, W]), else None."""
    from gymnasium import spaces

    if not (isinstance(space, spaces.Box) and space.dtype == "uint8" and len(space.shape) == 3):
        return None
    return spaces.Box(space.low.transpose(2, 0, 1), space.high.transpose(2, 0, 1), dtype=space.dtype)


def _check_spaces(data: dict, observation_space, action_space, source: str) -> bool:
    """Checks the env's spaces against the zip's; True when the zip's observations are the env's image transposed
    channels first (SB3's ``VecTransposeImage``, applied by SB3 to every image env it trains on)."""
    saved = data.get("observation_space") or {}
    shape = _saved_shape(saved)
    transposed = channels_first_space(observation_space)
    if shape is not None and transposed is not None and tuple(observation_space.shape) != shape and tuple(
            transposed.shape) == shape:
        return True
    if shape is not None and tuple(observation_space.shape or ()) != shape:
        raise EnvError(
            f"{source} was trained on observations of shape {shape} ({saved.get('dtype')}), but the env gives "
            f"{describe_space(observation_space)}; pass the env (and preprocessing) it was trained on"
            f"{_WRAPPER_HINT if type(observation_space).__name__ == 'Dict' else ''}."
        )
    saved = data.get("action_space") or {}
    kind = _SPACE_TYPE.fullmatch(str(saved.get(":type:", "")))
    n, nvec = str(saved.get("n", "")).strip(), re.findall(r"\d+", str(saved.get("nvec", "")))
    wrong = ((kind is not None and kind.group(1) != type(action_space).__name__)
             or (_saved_shape(saved) not in (None, tuple(action_space.shape or ())))
             or (n.isdigit() and int(n) != getattr(action_space, "n", None))
             or (nvec and [int(v) for v in nvec] != [int(v) for v in getattr(action_space, "nvec", [])]))
    if wrong:
        what = f"{kind.group(1) if kind else 'an action space'} {f'of {n} actions' if n.isdigit() else ''}"
        raise EnvError(f"{source} was trained with {what.strip()} (shape {_saved_shape(saved)}); the env has "
                       f"{action_space}; pass the env it was trained on.")
    return False


def _trained_under_vecnormalize(doc: dict) -> bool:
    """On-policy SB3 algorithms (PPO, A2C) keep ``_last_original_obs`` only under VecNormalize. (Off-policy ones
    keep it always, as the previous observation: no signal there; rl-zoo3's config.yml still tells.)"""
    off_policy = "exploration_rate" in doc or "learning_starts" in doc
    return doc.get("_last_original_obs") is not None and not off_policy


def load_sb3_zip(data: bytes, source: str, *, observation_space, action_space, trust: bool = False,
                 device="auto", vecnormalize: VecNormalizeStats | None = None) -> tuple[TorchPolicy, float, dict]:
    """(policy, gamma, metadata) from the bytes of an SB3 ``model.save`` zip; see the module docstring.
    ``vecnormalize``: statistics to apply (see :func:`sb3_policy`); ``metadata["vecnormalize"]`` says whether
    the zip shows it was trained under VecNormalize (SB3 then saved ``_last_original_obs``)."""
    require("stable_baselines3", "sb3", "Stable-Baselines3 .zip files")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        check_archive(archive, source)  # declared sizes first: a bomb is refused before a byte is inflated
        doc = loads_json(read_member(archive, "data", source), source, "the zip's data")
        weights_blob = read_member(archive, "policy.pth", source, MAX_MEMBER_BYTES)
        version = read_member(archive, "_stable_baselines3_version", source, 256).decode().strip() if (
            "_stable_baselines3_version" in archive.namelist()) else None
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, ValueError, OSError, EOFError, zlib.error,
            NotImplementedError, RuntimeError) as exc:  # (zipfile: unknown compression, encrypted members)
        raise CheckpointError(f"{source}: corrupt Stable-Baselines3 zip ({str(exc)[:200]}).") from None
    if not isinstance(doc, dict):
        raise CheckpointError(f"{source}: the zip's data is not a JSON object.")
    check_fields(doc, _DATA_FIELDS, source, "the zip's data")
    action_spec(action_space)  # a clear error for action spaces rlviz cannot draw
    saved_kwargs: Any = doc.get("policy_kwargs") if isinstance(doc.get("policy_kwargs"), dict) else {}
    refuse_sde(doc.get("use_sde") or saved_kwargs.get("use_sde"), source)
    if trust:
        from stable_baselines3.common.save_util import load_from_zip_file

        try:
            full, params, _ = load_from_zip_file(io.BytesIO(data), device="cpu")
            cls, kwargs = full["policy_class"], dict(full.get("policy_kwargs") or {})  # type: ignore[index, union-attr]
            state = params["policy"]
        except Exception as exc:
            raise CheckpointError(f"{source}: Stable-Baselines3 could not load it ({type(exc).__name__}: {exc}).") from exc
    else:
        cls = _policy_class(doc.get("policy_class"), source)
        kwargs = _policy_kwargs(doc.get("policy_kwargs"), source)
        require_safe_torch_load(source)
        try:
            with quiet_torch_load():
                state = torch.load(io.BytesIO(weights_blob), map_location="cpu", weights_only=True)
        except Exception as exc:
            raise CheckpointError(f"{source}: policy.pth does not load as plain weights ({type(exc).__name__}).") from None
    env_space = observation_space
    saved_space = doc.get("observation_space")
    if isinstance(saved_space, dict) and _SPACE_TYPE.fullmatch(str(saved_space.get(":type:", ""))) and (
            _SPACE_TYPE.fullmatch(str(saved_space.get(":type:"))).group(1) == "Dict"):  # type: ignore[union-attr]
        observation_space = dict_policy_space(saved_space, observation_space, source)  # (a MultiInputPolicy)
    channels_first = _check_spaces(doc, observation_space, action_space, source)
    if channels_first:  # the caller puts the "channels_first" wrapper on the recipe (meta says so)
        observation_space = channels_first_space(observation_space)
    try:
        policy = cls(observation_space=observation_space, action_space=action_space, lr_schedule=lambda _: 0.0,
                     **kwargs)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise CheckpointError(f"{source}: cannot rebuild {cls.__name__} with {sorted(kwargs)} ({first}).") from exc
    if not isinstance(state, dict):
        raise CheckpointError(f"{source}: policy.pth holds a {type(state).__name__}, expected a state_dict.")
    load_weights(policy, state, source)
    gamma = doc.get("gamma")
    gamma = float(gamma) if isinstance(gamma, (int, float)) and 0 < gamma <= 1 else 0.99
    algorithm = "DQN" if "exploration_rate" in doc else "PPO" if "clip_range" in doc else "A2C" if (
        "gae_lambda" in doc) else None
    algorithm = "QRDQN" if cls.__module__.startswith("sb3_contrib.qrdqn") else algorithm
    contrib = {"sb3_contrib.common.recurrent.": "RecurrentPPO", "sb3_contrib.common.maskable.": "MaskablePPO"}
    algorithm = next((a for m, a in contrib.items() if cls.__module__.startswith(m)), algorithm)
    algorithm = offpolicy_algorithm(doc, cls.__module__) or algorithm
    meta = {"sb3_version": version, "policy_class": cls.__name__, "algorithm": algorithm,
            "num_timesteps": doc.get("num_timesteps") if isinstance(doc.get("num_timesteps"), int) else None,
            "vecnormalize": _trained_under_vecnormalize(doc),
            "vecnormalize_stats": vecnormalize.source if vecnormalize is not None else None,
            "channels_first": channels_first}
    if meta["vecnormalize"] and vecnormalize is None:
        warnings.warn(
            f"{source} was trained under VecNormalize (its data has _last_original_obs) but no statistics were "
            "found beside it: it will act on raw observations, i.e. as a different agent. Pass the "
            "vecnormalize.pkl saved with it (--vecnormalize PATH).", UserWarning, stacklevel=3)
    return sb3_policy(policy, device=device, vecnormalize=vecnormalize, observation_space=env_space), gamma, meta
