"""Every file reader survives a fuzzer: for each mutated input it loads and one forward runs, or it raises exactly
one :class:`RlvizError` with a one-line message; never another exception type, never a hang, never code run.

Readers are registered in :data:`READERS` (name -> :class:`Reader`: ``build`` writes a valid file set into an empty
folder and returns what to load; ``load`` loads it). Each input mutates one file of one reader's set
(tests/_mutate.py), loads it, runs one forward on the env's first observation and restores the file. Planted
payloads (a pickle ``__reduce__``, a YAML ``!!python/object/apply`` tag, an SB3 ``:serialized:`` entry) would
create a marker file if anything ran them; the marker must never appear.

Environment: ``RLVIZ_FUZZ_SEED`` (default 0, so the suite is deterministic; ``random``: a fresh seed, printed on
failure, to explore), ``RLVIZ_FUZZ_COUNT`` (inputs
per run across all readers, default 2000), ``RLVIZ_FUZZ_ONLY`` (one input index: reproduce one failure).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from _mutate import mutate_file

from rlviz.errors import RlvizError
from rlviz.sources.checkpoint import load_agent

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
PER_INPUT_S = 10.0  # a hang: no input may take longer (a load takes ~50 ms)


@dataclass(frozen=True)
class Reader:
    """build(folder) -> the path to load (it writes a valid file set into the empty ``folder``);
    load(path) -> a LoadedAgent."""

    build: Callable[[Path], Path]
    load: Callable[[Path], object]


READERS: dict[str, Reader] = {}


def reader(name: str, load: Callable[[Path], object] = load_agent):
    """Register ``build`` (a function of the folder) as the reader ``name``, loaded by ``load``."""
    def register(build: Callable[[Path], Path]) -> Callable[[Path], Path]:
        READERS[name] = Reader(build, load)
        return build
    return register


@reader("rlviz-pt2")  # program, weights, extra/rlviz.json
def _pt2(folder: Path) -> Path:
    return Path(shutil.copy(SAMPLES / "minatar_breakout_ppo.pt2", folder / "agent.pt2"))


@reader("torch-state-dict-cleanrl")  # CleanRL ppo.py's state_dict: recognised with no model=
def _cleanrl(folder: Path) -> Path:
    from rlviz.sources.cleanrl_scripts import CleanRLPPO

    torch.manual_seed(0)
    torch.save(CleanRLPPO(4, 2).state_dict(), folder / "ppo.cleanrl_model")
    return folder / "ppo.cleanrl_model"


@reader("torch-state-dict-cleanrl-continuous")  # ppo_continuous_action.py's state_dict (Pendulum: env from the name)
def _cleanrl_continuous(folder: Path) -> Path:
    from rlviz.sources.cleanrl_continuous import CleanRLPPOContinuous

    torch.manual_seed(0)
    path = folder / "Pendulum-v1__ppo_continuous_action__1__1.cleanrl_model"
    torch.save(CleanRLPPOContinuous(3, 1).state_dict(), path)
    return path


def _ppo(env_id: str = "CartPole-v1"):
    from stable_baselines3 import PPO

    return PPO("MlpPolicy", env_id, n_steps=64, seed=0, device="cpu", policy_kwargs={"net_arch": [16]})


@reader("sb3-zip", load=lambda p: load_agent(p, env="CartPole-v1"))  # data JSON, policy.pth
def _sb3(folder: Path) -> Path:
    _ppo().save(folder / "ppo.zip")
    return folder / "ppo.zip"


@reader("rl-zoo3-run")  # <env id>.zip, config.yml, args.yml, env_kwargs.yml, vecnormalize.pkl
def _zoo(folder: Path) -> Path:
    from collections import OrderedDict

    import yaml
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    run = folder / "CartPole-v1_1"
    (run / "CartPole-v1").mkdir(parents=True)
    _ppo().save(run / "CartPole-v1.zip")
    venv = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=0))
    venv.reset()
    for _ in range(20):
        venv.step(np.array([0]))
    venv.save(run / "CartPole-v1" / "vecnormalize.pkl")
    files = {"config.yml": {"normalize": True, "policy": "MlpPolicy", "gamma": 0.98, "n_timesteps": 512.0,
                            "env_wrapper": [{"gymnasium.wrappers.TimeLimit": {"max_episode_steps": 200}}]},
             "args.yml": {"algo": "ppo", "env": "CartPole-v1", "env_kwargs": None, "seed": 0},
             "env_kwargs.yml": {"sutton_barto_reward": False}}
    for name, data in files.items():  # as rl-zoo3 writes them: yaml.dump of an OrderedDict
        (run / "CartPole-v1" / name).write_text(yaml.dump(OrderedDict(sorted(data.items()))))
    return run


HUB_REPO = "rlviz-fuzz/ppo-CartPole-v1"


def _load_hub(root: Path):
    """``hf://`` against the offline cache under ``root`` (HF_HOME and HF_HUB_OFFLINE set for this call only)."""
    from _hub import offline_hub

    with pytest.MonkeyPatch.context() as mp:
        offline_hub(mp, root)
        return load_agent(f"hf://{HUB_REPO}")


@reader("hub-rl-zoo3-repo", load=_load_hub)  # a cached snapshot as push_to_hub lays it out (and refs/main)
def _hub_repo(folder: Path) -> Path:
    from _hub import cache_repo, offline_hub

    run = _zoo(folder / "src")
    files: dict[str, bytes | str | Path] = {
        "ppo-CartPole-v1.zip": run / "CartPole-v1.zip",
        "vec_normalize.pkl": run / "CartPole-v1" / "vecnormalize.pkl",
        **{name: run / "CartPole-v1" / name for name in ("config.yml", "args.yml", "env_kwargs.yml")}}
    root = folder / "cache"
    with pytest.MonkeyPatch.context() as mp:
        cache_repo(offline_hub(mp, root), HUB_REPO, files)
    shutil.rmtree(folder / "src")  # only the cache's files are mutated
    return root


def _load_run(run: Path):
    """A training run's folder as ``rlviz timeline`` reads it: discovery (steps from names and from the files),
    then every checkpoint found loaded with its own statistics; returns the last one."""
    from types import SimpleNamespace

    from rlviz.sources.run_folders import discover

    config = SimpleNamespace(env="CartPole-v1", model=None, trust_checkpoint=False, device="cpu", vecnormalize=None)
    checkpoints, _ = discover(run)
    agents = [cp.load(config) for cp in checkpoints]
    return agents[-1]


@reader("training-run-folder", load=_load_run)  # CheckpointCallback's names + statistics, a step read from a file
def _run_folder(folder: Path) -> Path:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    run = folder / "checkpoints"
    run.mkdir()
    model = _ppo()
    model.save(run / "rl_model_64_steps.zip")
    venv = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=0))
    venv.reset()
    venv.save(run / "rl_model_vecnormalize_64_steps.pkl")
    model.num_timesteps = 128
    model.save(run / "final.zip")  # no step in the name: num_timesteps from the zip's data
    return run


@reader("flax-cleanrl-jax")  # CleanRL c51_jax.py's flax msgpack file (nested maps, ext-type arrays, vars(args))
def _cleanrl_jax(folder: Path) -> Path:
    (source,) = (Path(__file__).resolve().parent / "fixtures" / "cleanrl_jax").glob("*__c51_jax__*/c51_jax.cleanrl_model")
    return Path(shutil.copy(source, folder / "c51_jax.cleanrl_model"))


def _one_forward(agent) -> None:
    """One forward on the first observation of the agent's own env, as a rollout would make it."""
    from rlviz.agent.obs import ObsAdapter
    from rlviz.envs.recipe import make_env

    env = make_env(agent.recipe, render_mode=None)
    try:
        obs = ObsAdapter(env.observation_space).batch([env.reset(seed=0)[0]])
    finally:
        env.close()
    if agent.policy.stateful or agent.policy.needs_action_masks:
        return
    agent.policy.evaluate(obs)


class _Hang(BaseException):
    pass


def _alarm(signum, frame):
    raise _Hang()


def _run_one(rd: Reader, target: Path) -> str:
    """"ok" | "refused" ; raises what escaped (AssertionError for a multi-line message)."""
    signal.setitimer(signal.ITIMER_REAL, PER_INPUT_S)
    try:
        try:
            agent = rd.load(target)
        except RlvizError as exc:
            assert "\n" not in str(exc).strip(), f"a message of several lines: {exc}"
            return "refused"
        try:
            _one_forward(agent)
        except RlvizError as exc:
            raise AssertionError(f"loaded, then the forward raised {type(exc).__name__}: {exc}") from exc
        return "ok"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Each reader's valid file set (loaded once: it must load and run unmutated)."""
    out = {}
    for name, rd in READERS.items():
        folder = tmp_path_factory.mktemp(f"fuzz-{name}")
        target = rd.build(folder)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _one_forward(rd.load(target))
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        out[name] = (rd, target, files)
    return out


def test_every_reader_survives_mutated_files(built, tmp_path):
    given = os.environ.get("RLVIZ_FUZZ_SEED", "0")
    seed = secrets.randbits(32) if given == "random" else int(given)
    count = int(os.environ.get("RLVIZ_FUZZ_COUNT", "2000"))
    only = os.environ.get("RLVIZ_FUZZ_ONLY")
    marker = tmp_path / "marker"
    names = sorted(built)
    tally = {name: {"ok": 0, "refused": 0} for name in names}
    failures: list[str] = []
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as rollouts run (evaluate/threads.py); many threads on few cores slow each load
    start = time.perf_counter()
    try:
        for i in [int(only)] if only is not None else range(count):
            rng = np.random.default_rng([seed, i])
            name = names[i % len(names)]
            rd, target, files = built[name]
            victim = files[int(rng.integers(len(files)))]
            original = victim.read_bytes()
            how = mutate_file(victim, rng, marker)
            where = (f"input {i} ({name}: {how}); reproduce with RLVIZ_FUZZ_SEED={seed} RLVIZ_FUZZ_ONLY={i} "
                     "pytest tests/test_fuzz.py")
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tally[name][_run_one(rd, target)] += 1
            except _Hang:
                failures.append(f"hang (> {PER_INPUT_S:g} s) on {where}")
            except Exception as exc:
                if only is not None:
                    raise  # one input: its traceback
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                failures.append(f"{type(exc).__name__} escaped on {where}: {first}")
            finally:
                victim.write_bytes(original)
            assert not marker.exists(), f"code from the file ran on {where}"
    finally:
        signal.signal(signal.SIGALRM, old_handler)
        torch.set_num_threads(threads)
    wall = time.perf_counter() - start
    print(f"\nfuzz seed {seed}: {count if only is None else 1} inputs in {wall:.1f} s: {tally}")
    assert not failures, f"{len(failures)} of the inputs (seed {seed}) escaped:\n" + "\n".join(failures[:20])
    if only is None:
        assert all(t["refused"] > 0 for t in tally.values()), tally  # the mutator reaches every reader
