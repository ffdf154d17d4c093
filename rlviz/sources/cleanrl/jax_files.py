"""CleanRL's JAX scripts' saved agents (``flax.serialization.to_bytes`` files): read with no JAX
(:mod:`rlviz.sources.cleanrl.flax_msgpack`), recognised from the tree's keys and shapes, rebuilt as torch modules
(:mod:`rlviz.sources.cleanrl.jax_nets`). Nothing of the script is run, imported or read.

=====================================  ==========================================================  =============
script                                 the file holds                                              rebuilt as
=====================================  ==========================================================  =============
``dqn_jax.py``                         ``{params: {Dense_0..2}}``: 120-84-A, ReLU                   Q-values
``dqn_atari_jax.py``                   ``{params: {Conv_0..2, Dense_0 (3136->512), Dense_1}}``      Q-values
``qdagger_dqn_atari_jax_impalacnn.py`` ``{params: {ConvSequence_0..2 {Conv_0, ResidualBlock_0/1},  Q-values
                                       Dense_0 (->256), Dense_1}}``
``c51_jax.py``, ``c51_atari_jax.py``   ``{model_weights: {params: ...}, args}``: out A x n_atoms;   Q = sum p z,
                                       atoms ``linspace(v_min, v_max, n_atoms)`` from ``args``     quantiles
``td3_continuous_action_jax.py``       ``{"0": actor, "1": qf1, "2": qf2}``, each ``{params:        action, Q_1
                                       {Dense_0..2}}``; actor 256-256-D, tanh
``ddpg_continuous_action_jax.py``      ``{"0": actor, "1": qf1}``                                   action, Q_1
``ppo_atari_envpool_xla_jax_scan.py``  ``{"0": vars(args), "1": {"0": network, "1": actor,           logits, value
                                       "2": critic}}``
=====================================  ==========================================================  =============

TD3/DDPG: the action is ``tanh(actor(s)) * scale + bias`` with scale and bias from the env's action space (the
file does not hold them, the script computes them so); the value is the first critic's Q at that action.

The env, first found: ``env=`` (``--env``; an Atari id gets the script's pipeline); ``args["env_id"]`` inside the
file (c51, PPO); the Hub repo's card or name (:mod:`.hub`); the run folder CleanRL saves into,
``runs/{env_id}__{exp_name}__{seed}__{time}/``; an observation and action size that names exactly one
classic-control env. An env id read from a file passes :mod:`rlviz.envs.trust` (a registered id). The Atari
scripts' pipeline is :func:`cleanrl_jax_atari_recipe` (CleanRL's wrappers as its evaluation plays them,
:mod:`rlviz.envs.cleanrl_atari`); the envpool PPO's is :mod:`rlviz.envs.envpool_atari`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from ...agent.actions import action_spec
from ...agent.policy import TorchPolicy
from ...envs.envpool_atari import ENVPOOL_KWARGS, ale_id
from ...envs.recipe import EnvRecipe, WrapperSpec, register_envs
from ...envs.trust import check_env_id
from ...errors import CheckpointError, EnvError, UsageError
from ..loaded import LoadedAgent, env_facts, settle_kind
from ..schema import MAX_SIZE
from . import jax_nets as nets
from .continuous import CLASSIC_BOX
from .flax_msgpack import describe_tree, read_flax
from .scripts import cleanrl_atari_recipe, run_folder_env

__all__ = ["JaxLayout", "recognise_jax", "envpool_recipe", "cleanrl_jax_atari_recipe", "load_cleanrl_jax", "SCRIPTS"]

SCRIPTS = ("dqn_jax.py", "dqn_atari_jax.py", "c51_jax.py", "c51_atari_jax.py", "td3_continuous_action_jax.py",
           "ddpg_continuous_action_jax.py", "ppo_atari_envpool_xla_jax_scan.py", "qdagger_dqn_atari_jax_impalacnn.py")
_CLASSIC = {(4, 2): "CartPole-v1", (6, 3): "Acrobot-v1", (2, 3): "MountainCar-v0"}


def _is_array(x: Any, ndim: int) -> bool:
    return isinstance(x, np.ndarray) and x.ndim == ndim and x.dtype.kind == "f" and 0 < x.size and all(
        0 < d <= MAX_SIZE for d in x.shape)


def _dense(p: Any, fan_in: int | None = None, out: int | None = None) -> tuple[int, int] | None:
    """(in, out) of an ``nn.Dense``'s params ``{kernel [in, out], bias [out]}``, else None."""
    if not (isinstance(p, dict) and set(p) == {"kernel", "bias"} and _is_array(p["kernel"], 2)
            and _is_array(p["bias"], 1) and p["bias"].shape[0] == p["kernel"].shape[1]):
        return None
    i, o = p["kernel"].shape
    return (i, o) if (fan_in in (None, i) and out in (None, o)) else None


def _conv(p: Any, k: int, cin: int | None, cout: int) -> int | None:
    """The input channels of an ``nn.Conv`` ``{kernel [k, k, I, cout], bias [cout]}``, else None."""
    if not (isinstance(p, dict) and set(p) == {"kernel", "bias"} and _is_array(p["kernel"], 4)
            and _is_array(p["bias"], 1)):
        return None
    kh, kw, i, o = p["kernel"].shape
    return i if (kh, kw, o) == (k, k, cout) and cin in (None, i) and p["bias"].shape == (cout,) else None


def _mlp(params: Any, hidden: tuple[int, int]) -> tuple[int, int] | None:
    """(input, output) of ``{Dense_0, Dense_1, Dense_2}`` = in -> hidden[0] -> hidden[1] -> out."""
    if not (isinstance(params, dict) and set(params) == {"Dense_0", "Dense_1", "Dense_2"}):
        return None
    a, b = _dense(params["Dense_0"], out=hidden[0]), _dense(params["Dense_1"], hidden[0], hidden[1])
    c = _dense(params["Dense_2"], hidden[1])
    return (a[0], c[1]) if a and b and c else None


def _nature(params: Any, extra: set[str]) -> int | None:
    """The input channels of the Nature CNN torso ``Conv_0..2`` + ``Dense_0`` (3136 -> 512) plus ``extra`` keys."""
    if not (isinstance(params, dict) and set(params) == {"Conv_0", "Conv_1", "Conv_2", "Dense_0"} | extra):
        return None
    c = _conv(params["Conv_0"], 8, None, 32)
    ok = c and _conv(params["Conv_1"], 4, 32, 64) and _conv(params["Conv_2"], 3, 64, 64) and _dense(
        params["Dense_0"], 3136, 512)
    return c if ok else None


def _impala(params: Any) -> tuple[int, int] | None:
    """(input channels, actions) of qdagger's IMPALA CNN Q-network, else None."""
    seqs = sorted(k for k in params if k.startswith("ConvSequence_")) if isinstance(params, dict) else []
    if not seqs or set(params) != {*seqs, "Dense_0", "Dense_1"} or seqs != [f"ConvSequence_{i}" for i in
                                                                             range(len(seqs))] or len(seqs) > 8:
        return None
    cin, first, side = None, None, 84
    for name in seqs:
        s = params[name]
        if not (isinstance(s, dict) and set(s) == {"Conv_0", "ResidualBlock_0", "ResidualBlock_1"}):
            return None
        k = s["Conv_0"].get("kernel") if isinstance(s["Conv_0"], dict) else None
        cout = int(k.shape[3]) if isinstance(k, np.ndarray) and _is_array(k, 4) else -1
        got = _conv(s["Conv_0"], 3, cin, cout)
        blocks = [s[f"ResidualBlock_{j}"] for j in (0, 1)]
        if got is None or not all(isinstance(b, dict) and set(b) == {"Conv_0", "Conv_1"} and _conv(
                b["Conv_0"], 3, cout, cout) and _conv(b["Conv_1"], 3, cout, cout) for b in blocks):
            return None
        first, cin, side = first or got, cout, -(-side // 2)
    fc, head = _dense(params["Dense_0"], side * side * (cin or 0)), None
    head = _dense(params["Dense_1"], fc[1]) if fc else None
    return (first, head[1]) if first and head else None


@dataclass(frozen=True)
class JaxLayout:
    """A recognised CleanRL JAX file: ``script``, the policy ``kind``, ``atari`` (image observations
    [channels, 84, 84]), ``obs_dim`` (or channels), ``num_actions`` (Box: dimensions), ``args`` (the file's own
    ``vars(args)``, or {})."""

    script: str
    kind: str
    atari: bool
    obs_dim: int
    num_actions: int
    tree: dict
    args: dict

    @property
    def box(self) -> bool:
        return self.script.startswith(("td3", "ddpg"))

    def build(self, action_space: Any, source: str) -> nn.Module:
        t, s = self.tree, self.script
        if s in ("dqn_jax.py", "dqn_atari_jax.py", "qdagger_dqn_atari_jax_impalacnn.py"):
            torso = {"dqn_jax.py": "mlp", "dqn_atari_jax.py": "nature"}.get(s, "impala")
            return nets.QNet(t["params"], torso)
        if s.startswith("c51"):
            n, lo, hi = self.args["n_atoms"], self.args["v_min"], self.args["v_max"]
            atoms = np.linspace(lo, hi, num=n).astype(np.float32)
            return nets.C51Net(t["model_weights"]["params"], "nature" if self.atari else "mlp", atoms)
        if self.box:
            spec = action_spec(action_space)
            if spec.kind != "box" or spec.size != self.num_actions or spec.low is None or spec.high is None or not (
                    np.all(np.isfinite(spec.low)) and np.all(np.isfinite(spec.high))):
                raise EnvError(f"{source} is CleanRL {s}'s agent for {self.num_actions}-dimensional bounded Box "
                               f"actions; the env's actions are {action_space}. Pass the env it was trained on (--env).")
            low, high = np.asarray(spec.low, np.float32), np.asarray(spec.high, np.float32)
            return nets.DeterministicActorCritic(t["0"]["params"], t["1"]["params"], (high - low) / 2.0,
                                                 (high + low) / 2.0)
        nw = t["1"]
        return nets.PPOAgent(nw["0"]["params"], nw["1"]["params"], nw["2"]["params"])

    def policy(self, module: nn.Module, action_space: Any, device: str = "auto") -> TorchPolicy:
        return TorchPolicy(module, kind=self.kind, device=device, action_space=action_space)

    def recipe(self, env: Any, source: str) -> EnvRecipe:
        """The env: ``env`` (the caller's id or recipe) or the file's own env id (vetted), else inferred."""
        if isinstance(env, EnvRecipe):
            return env
        if env:
            return self._recipe_for(str(env))
        env_id = self.args.get("env_id") if isinstance(self.args.get("env_id"), str) else None
        env_id = env_id or run_folder_env(source)
        if env_id:
            vetted = ale_id(env_id) if self.script.startswith("ppo_atari_envpool") else env_id
            register_envs(vetted)
            check_env_id(vetted, source)
            return self._recipe_for(env_id)
        inferred = None if self.atari else (CLASSIC_BOX if self.box else _CLASSIC).get((self.obs_dim, self.num_actions))
        if inferred is None:
            raise UsageError(
                f"{source} is CleanRL {self.script}'s agent ({self.obs_dim} {'frames' if self.atari else 'inputs'}, "
                f"{self.num_actions} {'action dimensions' if self.box else 'actions'}); the file does not say which "
                "env it played and it is not in CleanRL's run folder runs/{env_id}__{exp_name}__{seed}__{time}/: "
                f"pass --env {'BreakoutNoFrameskip-v4' if self.atari else '<env id>'} (env=...).")
        return EnvRecipe(inferred)

    def _recipe_for(self, env_id: str) -> EnvRecipe:
        if self.script.startswith("ppo_atari_envpool"):
            return envpool_recipe(env_id, self.obs_dim)
        return cleanrl_jax_atari_recipe(env_id, self.obs_dim) if self.atari else EnvRecipe.for_env_id(env_id)


def cleanrl_jax_atari_recipe(env_id: str, stack: int = 4) -> EnvRecipe:
    """CleanRL's gymnasium Atari chain as its evaluation plays it: 0.3's chain for CleanRL's torch Atari agents
    (:func:`~.cleanrl_scripts.cleanrl_atari_recipe`) with the NOOP, FIRE, 2 its resets play after a lost life
    (:mod:`rlviz.envs.cleanrl_atari`) right after the max-and-skip step."""
    base = cleanrl_atari_recipe(env_id, stack)
    wrappers = (base.wrappers[0], WrapperSpec("cleanrl_life_reset", {}), *base.wrappers[1:])
    return EnvRecipe(base.env_id, base.env_kwargs, wrappers, base.saliency_mode)


def envpool_recipe(env_id: str, stack: int = 4) -> EnvRecipe:
    """envpool's Atari ``<Game>-v5`` as CleanRL makes it, on gymnasium's ALE (:mod:`rlviz.envs.envpool_atari`)."""
    return EnvRecipe(ale_id(env_id), dict(ENVPOOL_KWARGS),
                     (WrapperSpec("envpool_atari", {"stack_num": int(stack)}),), saliency_mode="linear")


def _args(x: Any) -> dict | None:
    """A ``vars(args)`` map: string keys, plain values (the numbers c51 needs are checked where used)."""
    return x if isinstance(x, dict) and "env_id" in x and all(not isinstance(v, (dict, np.ndarray))
                                                                 for v in x.values()) else None


def _c51_args(args: dict, outputs: int, source: str) -> int:
    n, lo, hi = args.get("n_atoms"), args.get("v_min"), args.get("v_max")
    bounds = [float(v) for v in (lo, hi) if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)]
    ok = isinstance(n, int) and not isinstance(n, bool) and 1 < n <= MAX_SIZE and outputs % n == 0 and \
        len(bounds) == 2 and bounds[0] < bounds[1]
    if not ok or not isinstance(n, int):
        raise CheckpointError(f"{source}: a CleanRL c51 file whose args give n_atoms={n!r}, v_min={lo!r}, "
                              f"v_max={hi!r} for {outputs} outputs; expected n_atoms dividing the outputs and finite "
                              "v_min < v_max (the atoms' support).")
    return outputs // n


def recognise_jax(tree: dict, source: str) -> JaxLayout:
    """The CleanRL JAX script whose file ``tree`` (read by :func:`~.flax_msgpack.read_flax`) is; a
    :class:`CheckpointError` naming the supported scripts and what the tree held otherwise."""
    layout = _recognise(tree, source)
    if layout is None:
        raise CheckpointError(
            f"{source} is a flax (msgpack) file that is none of CleanRL's JAX scripts' agents rlviz knows "
            f"({', '.join(SCRIPTS)}); it holds {describe_tree(tree)}.")
    return layout


def _recognise(t: dict, source: str) -> JaxLayout | None:
    keys = set(t)
    if keys == {"params"}:
        p = t["params"]
        mlp = _mlp(p, (120, 84))
        if mlp:
            return JaxLayout("dqn_jax.py", "q", False, mlp[0], mlp[1], t, {})
        c = _nature(p, {"Dense_1"})
        head = _dense(p["Dense_1"], 512) if c else None
        if c and head:
            return JaxLayout("dqn_atari_jax.py", "q", True, c, head[1], t, {})
        impala = _impala(p)
        if impala:
            return JaxLayout("qdagger_dqn_atari_jax_impalacnn.py", "q", True, impala[0], impala[1], t, {})
        return None
    if keys == {"model_weights", "args"} and _args(t["args"]) is not None and isinstance(t["model_weights"], dict) \
            and set(t["model_weights"]) == {"params"}:
        p, args = t["model_weights"]["params"], t["args"]
        mlp = _mlp(p, (120, 84))
        if mlp:
            return JaxLayout("c51_jax.py", "q", False, mlp[0], _c51_args(args, mlp[1], source), t, args)
        c = _nature(p, {"Dense_1"})
        head = _dense(p["Dense_1"], 512) if c else None
        if c and head:
            return JaxLayout("c51_atari_jax.py", "q", True, c, _c51_args(args, head[1], source), t, args)
        return None
    if keys in ({"0", "1", "2"}, {"0", "1"}) and all(isinstance(t[k], dict) and set(t[k]) == {"params"} for k in keys):
        actor = _mlp(t["0"]["params"], (256, 256))
        critics = [_mlp(t[k]["params"], (256, 256)) for k in sorted(keys - {"0"})]
        if actor and all(c == (actor[0] + actor[1], 1) for c in critics):
            script = "td3_continuous_action_jax.py" if len(keys) == 3 else "ddpg_continuous_action_jax.py"
            return JaxLayout(script, "actor_critic", False, actor[0], actor[1], t, {})
        return None
    if keys == {"0", "1"} and _args(t["0"]) is not None and isinstance(t["1"], dict) and set(t["1"]) == {"0", "1", "2"}:
        net, act, crit = (t["1"][k].get("params") if isinstance(t["1"][k], dict) and set(t["1"][k]) == {"params"}
                          else None for k in ("0", "1", "2"))
        c = _nature(net, set())
        a = _dense(act.get("Dense_0"), 512) if isinstance(act, dict) and set(act) == {"Dense_0"} else None
        v = _dense(crit.get("Dense_0"), 512, 1) if isinstance(crit, dict) and set(crit) == {"Dense_0"} else None
        if c and a and v:
            return JaxLayout("ppo_atari_envpool_xla_jax_scan.py", "actor_critic", True, c, a[1], t, t["0"])
    return None


def load_cleanrl_jax(data: bytes, source: str, *, env: Any = None, device: str = "auto") -> LoadedAgent:
    """A CleanRL JAX file (bytes) as a :class:`LoadedAgent`: the tree read, recognised, rebuilt in torch."""
    layout = recognise_jax(read_flax(data, source), source)
    recipe = layout.recipe(env, source)
    obs_space, act_space, names = env_facts(recipe)
    spec = action_spec(act_space)
    if not layout.box and (spec.kind != "discrete" or spec.size != layout.num_actions):
        raise EnvError(f"{source} is CleanRL {layout.script}'s agent for {layout.num_actions} actions; "
                       f"{recipe.env_id} has {act_space}. Pass the env it was trained on (--env).")
    policy = layout.policy(layout.build(act_space, source), act_space, device)
    settle_kind(policy, obs_space, source)
    gamma = layout.args.get("gamma")
    gamma = float(gamma) if isinstance(gamma, float) and 0.0 <= gamma <= 1.0 else 0.99
    meta = {"cleanrl_script": layout.script}
    return LoadedAgent(policy, recipe, tuple(names), gamma, policy.kind, meta, Path(source), "flax-msgpack")
