"""Regenerate tests/fixtures/cleanrl_jax/: CleanRL's eight JAX scripts' saved models and flax's outputs on them.

    python scripts/make_cleanrl_jax_fixtures.py /path/to/cleanrl-checkout [--out tests/fixtures/cleanrl_jax] [--full]

Run it in a venv with the versions that run CleanRL's JAX scripts unchanged: jax/jaxlib 0.4.30, flax 0.8.5,
optax 0.2.3, numpy 1.26, gymnasium 0.29.1, ale-py 0.9.1, tyro, tensorboard, stable-baselines3 (replay buffer),
moviepy 1.0.3 (the scripts' evaluation records a video), huggingface_hub. rlviz's own venv needs none of them.

What it does, per script (each run in a temporary folder, ``PYTHONPATH`` = the checkout):

* ``dqn_jax``, ``c51_jax`` (CartPole-v1), ``td3_continuous_action_jax``, ``ddpg_continuous_action_jax``
  (Pendulum-v1: MuJoCo's Hopper is not installed here), ``dqn_atari_jax``, ``c51_atari_jax`` (Breakout) are run
  unchanged with ``--save-model`` for a few thousand steps; the file they write is kept under its run folder's
  name ``{env_id}__{exp_name}__{seed}__{time}`` (which is where the env id of a dqn/td3/ddpg file lives).
* ``qdagger_dqn_atari_jax_impalacnn`` downloads its teacher from the Hub: it is given this run's own
  ``dqn_atari_jax`` file from an offline Hugging Face cache (``HF_HOME`` + ``HF_HUB_OFFLINE=1``) as
  ``cleanrl/BreakoutNoFrameskip-v4-dqn_atari_jax-seed1``.
* ``ppo_atari_envpool_xla_jax_scan`` does not run unchanged with jax 0.4.30: envpool 0.8.4's XLA ops use
  ``jax.interpreters.xla.backend_specific_translations`` (gone from jax), envpool 1.2.5's pool refuses the script's
  ``envs.num_envs = num_envs``. Its ``Network``/``Actor``/``Critic``
  classes and ``Args`` are taken from the script's source (``ast``), initialised as the script does (seed 1) and
  saved with the script's own expression ``to_bytes([vars(args), [network, actor, critic]])``: untrained.

References (``<exp>.npz`` beside each model): the script's own flax modules (again from its source) applied to
fixed observations: CartPole/Pendulum observations from seeded resets and random steps; for Atari, real frames
from the script's own ``make_env`` chain (the envpool PPO gets the same frames: its reference only checks the
network).

Size: a Nature-CNN file is ~6.7 MB of float32, the IMPALA one ~4 MB. Unless ``--full``, the Atari files are
compacted before the references are computed: every float rounded to bfloat16's precision and 95% of the
first Dense kernel (the flatten -> 512/256 layer, ~95% of the parameters) zeroed at fixed random places, then
re-serialised with ``flax.serialization.msgpack_serialize`` in the file's own key order, and gzipped
(``<exp>.cleanrl_model.gz``). The layout, shapes, dtypes and key order are those the script wrote.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

BREAKOUT = "BreakoutNoFrameskip-v4"
SMALL = ["--total-timesteps", "3000", "--learning-starts", "1000", "--buffer-size", "3000"]
RUNS = {
    "dqn_jax": ["--env-id", "CartPole-v1", *SMALL, "--target-network-frequency", "100"],
    "c51_jax": ["--env-id", "CartPole-v1", *SMALL, "--target-network-frequency", "100"],
    "td3_continuous_action_jax": ["--env-id", "Pendulum-v1", "--total-timesteps", "1500", "--learning-starts", "500",
                                  "--buffer-size", "1500"],
    "ddpg_continuous_action_jax": ["--env-id", "Pendulum-v1", "--total-timesteps", "1500", "--learning-starts", "500",
                                   "--buffer-size", "1500"],
    "dqn_atari_jax": ["--env-id", BREAKOUT, "--total-timesteps", "1500", "--learning-starts", "1000",
                      "--buffer-size", "1500", "--target-network-frequency", "100"],
    "c51_atari_jax": ["--env-id", BREAKOUT, "--total-timesteps", "1500", "--learning-starts", "1000",
                      "--buffer-size", "1500", "--target-network-frequency", "100"],
    "qdagger_dqn_atari_jax_impalacnn": ["--env-id", BREAKOUT, "--total-timesteps", "600", "--learning-starts", "300",
                                        "--buffer-size", "1000", "--teacher-steps", "600", "--offline-steps", "300",
                                        "--teacher-eval-episodes", "1", "--target-network-frequency", "100"],
}
ATARI = {"dqn_atari_jax", "c51_atari_jax", "qdagger_dqn_atari_jax_impalacnn", "ppo_atari_envpool_xla_jax_scan"}
PPO = "ppo_atari_envpool_xla_jax_scan"


def script_namespace(path: Path, classes: tuple[str, ...], extra: str = "") -> dict:
    """The script's imports (but envpool, wandb, torch, cleanrl_utils) and the named classes, executed alone."""
    tree = ast.parse(path.read_text())
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(n.split(".")[0] in ("envpool", "gym", "wandb", "torch", "cleanrl_utils", "cleanrl", "stable_baselines3",
                                       "huggingface_hub", "rich") for n in names):
                continue
            keep.append(node)
        elif isinstance(node, ast.ClassDef) and node.name in classes:
            keep.append(node)
    module = ast.Module(body=keep, type_ignores=[])
    mod = types.ModuleType("fixture_" + path.stem)
    mod.__file__ = str(path)
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    ns = mod.__dict__
    exec(compile(module, str(path), "exec"), ns)  # noqa: S102 - CleanRL's own source, the point of the script
    if extra:
        exec(extra, ns)  # noqa: S102
    return ns


def run_script(checkout: Path, exp: str, work: Path, env: dict) -> Path:
    found = sorted(work.glob(f"runs/*__{exp}__1__*/{exp}.cleanrl_model"))
    if found:  # --work: a folder of an earlier run
        return found[-1]
    cmd = [sys.executable, str(checkout / "cleanrl" / f"{exp}.py"), "--save-model", "--seed", "1", *RUNS[exp]]
    log = work / f"{exp}.log"
    print("running", " ".join(cmd[1:]), flush=True)
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, cwd=work, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    found = sorted(work.glob(f"runs/*__{exp}__1__*/{exp}.cleanrl_model"))
    if not found:
        raise SystemExit(f"{exp}: no model written (exit {rc}); see {log}")
    print(f"  {found[-1]} (script exit {rc}: the evaluation after saving may fail without affecting the file)")
    return found[-1]


def ppo_file(checkout: Path, work: Path) -> Path:
    """The envpool PPO's file, untrained, from the script's own classes and save expression."""
    import flax
    import jax
    import jax.numpy as jnp  # noqa: F401

    path = checkout / "cleanrl" / f"{PPO}.py"
    ns = script_namespace(path, ("Args", "Network", "Critic", "Actor"))
    args = ns["Args"]()
    # as the script does after tyro (its Breakout-v5 has 4 actions and 4x84x84 uint8 observations)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    key = jax.random.PRNGKey(args.seed)
    key, network_key, actor_key, critic_key = jax.random.split(key, 4)
    network, actor, critic = ns["Network"](), ns["Actor"](action_dim=4), ns["Critic"]()
    sample = np.zeros((1, 4, 84, 84), np.uint8)
    network_params = network.init(network_key, sample)
    actor_params = actor.init(actor_key, network.apply(network_params, sample))
    critic_params = critic.init(critic_key, network.apply(network_params, sample))
    out = work / "runs" / f"{args.env_id}__{args.exp_name}__{args.seed}__0" / f"{args.exp_name}.cleanrl_model"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(flax.serialization.to_bytes([vars(args), [network_params, actor_params, critic_params]]))
    return out


def hub_cache(home: Path, repo_id: str, files: dict[str, bytes]) -> None:
    """An offline Hugging Face cache holding ``files`` as ``repo_id``'s main revision."""
    repo = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    commit = hashlib.sha1(b"".join(files.values())).hexdigest()
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)


def compact(data: bytes) -> bytes:
    """bfloat16-precision floats, 95% of the largest kernel zeroed; same tree, key order, shapes and dtypes."""
    from flax.serialization import msgpack_restore, msgpack_serialize

    tree = msgpack_restore(data)
    arrays = []

    def walk(node):
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, np.ndarray) and node.dtype == np.float32:
            arrays.append(node)

    walk(tree)
    biggest = max(arrays, key=lambda a: a.size)
    rng = np.random.default_rng(0)

    def fix(node):
        if isinstance(node, dict):
            return {k: fix(v) for k, v in node.items()}
        if isinstance(node, np.ndarray) and node.dtype == np.float32:
            bits = node.view(np.uint32) & np.uint32(0xFFFF0000)
            out = bits.view(np.float32).copy()
            if node is biggest:
                out[rng.random(out.shape) < 0.95] = 0.0
            return out
        return node

    return msgpack_serialize(fix(tree))


def observations(checkout: Path, exp: str, n: int = 8) -> np.ndarray:
    """Fixed observations: seeded resets and random steps of the script's own env chain."""
    import ale_py  # noqa: F401 - registers the Atari ids
    import gymnasium as gym

    if exp in ATARI:
        ns = script_namespace(checkout / "cleanrl" / "dqn_atari_jax.py", ("QNetwork",),
                              "from cleanrl_utils.atari_wrappers import *\n" + _make_env_src(checkout))
        env = ns["make_env"](BREAKOUT, 1, 0, False, "fixture")()
    else:
        env = gym.make(RUNS[exp][1])
    rng = np.random.default_rng(1)
    obs, _ = env.reset(seed=1)
    rows = []
    env.action_space.seed(1)
    for _ in range(n * 12):
        obs, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            obs, _ = env.reset()
        if rng.random() < 0.1 or len(rows) < 1:
            rows.append(np.array(obs))
        if len(rows) == n:
            break
    while len(rows) < n:
        rows.append(np.array(env.step(env.action_space.sample())[0]))
    return np.stack(rows)


def _make_env_src(checkout: Path) -> str:
    tree = ast.parse((checkout / "cleanrl" / "dqn_atari_jax.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "make_env")
    return ast.unparse(fn)


def references(checkout: Path, exp: str, data: bytes, obs: np.ndarray) -> dict[str, np.ndarray]:
    import flax
    import jax.numpy as jnp
    from flax.serialization import msgpack_restore

    tree = msgpack_restore(data)
    src = checkout / "cleanrl" / f"{exp}.py"
    x = jnp.asarray(obs, dtype=jnp.float32)
    out = {"obs": obs}
    if exp in ("dqn_jax", "dqn_atari_jax", "qdagger_dqn_atari_jax_impalacnn"):
        ns = script_namespace(src, ("QNetwork", "ResidualBlock", "ConvSequence"))
        actions = tree["params"][max(k for k in tree["params"] if k.startswith("Dense_"))]["bias"].shape[0]
        q = ns["QNetwork"](action_dim=actions).apply(tree, x)
        out.update(q=np.asarray(q), action=np.asarray(q.argmax(-1)))
    elif exp in ("c51_jax", "c51_atari_jax"):
        ns = script_namespace(src, ("QNetwork",))
        a = tree["args"]
        last = tree["model_weights"]["params"][max(k for k in tree["model_weights"]["params"] if k.startswith("Dense_"))]
        actions = last["bias"].shape[0] // int(a["n_atoms"])
        pmfs = ns["QNetwork"](action_dim=actions, n_atoms=int(a["n_atoms"])).apply(tree["model_weights"], x)
        atoms = jnp.asarray(np.linspace(a["v_min"], a["v_max"], num=int(a["n_atoms"])))
        q = (pmfs * atoms).sum(axis=-1)
        out.update(pmfs=np.asarray(pmfs), atoms=np.asarray(atoms), q=np.asarray(q), action=np.asarray(q.argmax(-1)))
    elif exp in ("td3_continuous_action_jax", "ddpg_continuous_action_jax"):
        import gymnasium as gym

        ns = script_namespace(src, ("Actor", "QNetwork"))
        space = gym.make(RUNS[exp][1]).action_space
        actor = ns["Actor"](action_dim=int(np.prod(space.shape)),
                            action_scale=jnp.array((space.high - space.low) / 2.0),
                            action_bias=jnp.array((space.high + space.low) / 2.0))
        act = actor.apply(tree["0"], x)
        q = ns["QNetwork"]().apply(tree["1"], x, act).reshape(-1)
        out.update(action=np.asarray(act), q=np.asarray(q))
    elif exp == PPO:
        ns = script_namespace(src, ("Network", "Actor", "Critic"))
        nets = tree["1"]
        hidden = ns["Network"]().apply(nets["0"], x)
        logits = ns["Actor"](action_dim=nets["1"]["params"]["Dense_0"]["bias"].shape[0]).apply(nets["1"], hidden)
        value = ns["Critic"]().apply(nets["2"], hidden)
        out.update(logits=np.asarray(logits), value=np.asarray(value).reshape(-1))
    else:
        raise SystemExit(f"no reference for {exp}")
    del flax
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path, help="a CleanRL checkout (its cleanrl/ and cleanrl_utils/)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "tests/fixtures/cleanrl_jax")
    ap.add_argument("--full", action="store_true", help="keep the Atari files as written (~4-7 MB each)")
    ap.add_argument("--only", nargs="*", help="these scripts only")
    ap.add_argument("--work", type=Path, help="reuse the models an earlier run left in this folder")
    args = ap.parse_args()
    checkout = args.checkout.resolve()
    work = args.work.resolve() if args.work else Path(tempfile.mkdtemp(prefix="cleanrl_jax_"))
    sys.path.insert(0, str(checkout))
    # ale-py 0.9 registers the Atari ids with gymnasium when imported: a sitecustomize does it for the scripts
    (work / "site").mkdir(exist_ok=True)
    (work / "site" / "sitecustomize.py").write_text("import ale_py  # noqa: F401\n")
    env = dict(os.environ, PYTHONPATH=f"{work / 'site'}{os.pathsep}{checkout}", MPLBACKEND="Agg", XLA_FLAGS="--xla_cpu_multi_thread_eigen=false",
               HF_HOME=str(work / "hf"), HF_HUB_OFFLINE="1")
    wanted = args.only or [*RUNS, PPO]
    files: dict[str, Path] = {}
    for exp in [e for e in RUNS if e in wanted and e != "qdagger_dqn_atari_jax_impalacnn"]:
        files[exp] = run_script(checkout, exp, work, env)
    if "qdagger_dqn_atari_jax_impalacnn" in wanted:
        teacher = files.get("dqn_atari_jax") or run_script(checkout, "dqn_atari_jax", work, env)
        hub_cache(work / "hf", f"cleanrl/{BREAKOUT}-dqn_atari_jax-seed1", {"dqn_atari_jax.cleanrl_model":
                                                                           teacher.read_bytes()})
        files["qdagger_dqn_atari_jax_impalacnn"] = run_script(checkout, "qdagger_dqn_atari_jax_impalacnn", work, env)
    if PPO in wanted:
        files[PPO] = ppo_file(checkout, work)
    args.out.mkdir(parents=True, exist_ok=True)
    for exp, path in files.items():
        data = path.read_bytes()
        if exp in ATARI and not args.full:
            data = compact(data)
        folder = args.out / path.parent.name
        for old in args.out.glob(f"*__{exp}__*"):
            shutil.rmtree(old)
        folder.mkdir(parents=True)
        if exp in ATARI and not args.full:
            with gzip.GzipFile(folder / f"{exp}.cleanrl_model.gz", "wb", mtime=0) as fh:
                fh.write(data)
        else:
            (folder / f"{exp}.cleanrl_model").write_bytes(data)
        refs = references(checkout, exp, data, observations(checkout, exp))
        np.savez_compressed(folder / f"{exp}.npz", **refs)
        print(f"{exp}: {len(data)} bytes, references {sorted(refs)}", flush=True)
    print("work folder (logs):", work)


if __name__ == "__main__":
    main()
