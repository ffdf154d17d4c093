"""Every file reader survives a fuzzer: for each mutated input it loads and one forward runs, or it raises exactly
one :class:`RlvizError` with a one-line message; never another exception type, never a hang, never code run.

Readers are registered in :data:`READERS` (name -> :class:`Reader`: ``build`` writes a valid file set into an empty
folder and returns what to load; ``load`` loads it). Each input mutates one file of one reader's set
(tests/_mutate.py), loads it, runs one forward on the env's first observation and restores the file. Planted
payloads (a pickle ``__reduce__``, a YAML ``!!python/object/apply`` tag, an SB3 ``:serialized:`` entry) would
create a marker file if anything ran them; the marker must never appear.

The folders around the files are fuzzed too (:func:`test_run_folders_and_hub_caches_survive_mutation`): a training
run's folder and a Hub cache, copied per input and changed 1-3 times (symlink loops, dangling links, links out of
them, a FIFO or a folder with an agent's name, a mutated checkpoint, an empty one; refs holding paths, ``..``, control
characters or another hash; a snapshot linked outside, blobs deleted, a YAML bomb for a model card): discovery,
loading and (every 6th) a whole ``timeline`` job load or raise one RlvizError line, never hang, and nothing outside
``--out`` is written or deleted (every entry's lstat compared).

Environment: ``RLVIZ_FUZZ_SEED`` (default 0, so the suite is deterministic; ``random``: a fresh seed, printed on
failure, to explore), ``RLVIZ_FUZZ_COUNT`` (inputs
per run across all readers, default 600; the inputs are split into ``FUZZ_SHARDS`` parametrised shards of
consecutive indices, so xdist spreads them; deep runs: ``RLVIZ_FUZZ_COUNT=2000`` or more), ``RLVIZ_FUZZ_ONLY`` (one input index: reproduce one failure),
``RLVIZ_FUZZ_FOLDERS`` (sandboxes of the folder test, default 60).
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import signal
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from _mutate import mutate_file

from rlviz.envs.probe import probe_reset, shared_probes
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
    from rlviz.sources.cleanrl.scripts import CleanRLPPO

    torch.manual_seed(0)
    torch.save(CleanRLPPO(4, 2).state_dict(), folder / "ppo.cleanrl_model")
    return folder / "ppo.cleanrl_model"


@reader("torch-state-dict-cleanrl-continuous")  # ppo_continuous_action.py's state_dict (Pendulum: env from the name)
def _cleanrl_continuous(folder: Path) -> Path:
    from rlviz.sources.cleanrl.continuous import CleanRLPPOContinuous

    torch.manual_seed(0)
    path = folder / "Pendulum-v1__ppo_continuous_action__1__1.cleanrl_model"
    torch.save(CleanRLPPOContinuous(3, 1).state_dict(), path)
    return path


@reader("torch-state-dict-cleanrl-lstm")  # ppo_atari_lstm.py's state_dict, the env from CleanRL's run folder's name
def _cleanrl_lstm(folder: Path) -> Path:
    from rlviz.sources.cleanrl.scripts import CleanRLLSTM

    torch.manual_seed(0)
    run = folder / "runs" / "BreakoutNoFrameskip-v4__ppo_atari_lstm__1__1"
    run.mkdir(parents=True)
    torch.save(CleanRLLSTM(1, 4, hidden=16).state_dict(), run / "ppo_atari_lstm.cleanrl_model")
    return run / "ppo_atari_lstm.cleanrl_model"


if importlib.util.find_spec("pettingzoo") and importlib.util.find_spec("supersuit") and importlib.util.find_spec("mpe2"):
    @reader("pettingzoo-recipe-json", load=lambda p: load_agent(p.parent / "spread.pt2", env=str(p)))
    def _pettingzoo_recipe(folder: Path) -> Path:  # --env run/env-recipe.json: a recipe file the user names
        from rlviz.envs.recipe import pettingzoo_recipe
        from rlviz.sources import save_checkpoint

        recipe = pettingzoo_recipe("simple_spread_v3", {"max_cycles": 5, "N": 3}, [("dtype_v0", {"dtype": "float32"})])
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(18, 8), torch.nn.Tanh(), torch.nn.Linear(8, 5))
        save_checkpoint(folder / "spread.pt2", net, env=recipe, kind="logits")
        (folder / "env-recipe.json").write_text(recipe.to_json())
        return folder / "env-recipe.json"


def _ppo(env_id: str = "CartPole-v1"):
    from stable_baselines3 import PPO

    return PPO("MlpPolicy", env_id, n_steps=64, seed=0, device="cpu", policy_kwargs={"net_arch": [16]})


@reader("sb3-zip", load=lambda p: load_agent(p, env="CartPole-v1"))  # data JSON, policy.pth
def _sb3(folder: Path) -> Path:
    _ppo().save(folder / "ppo.zip")
    return folder / "ppo.zip"


def _dict_recipe():
    from rlviz.envs.recipe import EnvRecipe, WrapperSpec

    return EnvRecipe("MiniGrid-Empty-5x5-v0", wrappers=(WrapperSpec("_dict_envs:ImageDirection"),))


@reader("sb3-zip-dict", load=lambda p: load_agent(p, env=_dict_recipe()))  # a MultiInputPolicy's: Dict spaces text
def _sb3_dict(folder: Path) -> Path:
    import minigrid  # noqa: F401  (registers the ids)
    from _dict_envs import ImageDirection
    from stable_baselines3 import PPO

    env = ImageDirection(gym.make("MiniGrid-Empty-5x5-v0"))
    PPO("MultiInputPolicy", env, n_steps=64, seed=0, device="cpu", policy_kwargs={"net_arch": [16]}).save(
        folder / "ppo_dict.zip")
    return folder / "ppo_dict.zip"


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

    first, space, _ = probe_reset(agent.recipe, 0)  # (the module's scope: one env and reset per recipe, a copy each)
    obs = ObsAdapter(space).batch([first])
    if agent.policy.needs_action_masks:
        return
    if agent.policy.stateful:  # one step from the state an episode starts in
        agent.policy.step(obs, agent.policy.initial_state(len(obs)))
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


@pytest.fixture(scope="module", autouse=True)
def _probes():
    """The module's looks at the readers' envs share one env and one reset per recipe (rlviz.envs.probe: an Atari
    env takes ~0.5 s to make; the same recipe makes the same env and first observation). A load inside uses it too."""
    with shared_probes():
        yield


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


FUZZ_SHARDS = 4  # parametrised shards of consecutive input indices (xdist runs them on different workers)
_SEED_GIVEN = os.environ.get("RLVIZ_FUZZ_SEED", "0")
_SEED = secrets.randbits(32) if _SEED_GIVEN == "random" else int(_SEED_GIVEN)  # one seed for every shard


@pytest.mark.parametrize("shard", range(FUZZ_SHARDS))
def test_every_reader_survives_mutated_files(built, tmp_path, shard):
    seed = _SEED
    count = int(os.environ.get("RLVIZ_FUZZ_COUNT", "600"))
    only = os.environ.get("RLVIZ_FUZZ_ONLY")
    if only is not None and shard != 0:
        pytest.skip("RLVIZ_FUZZ_ONLY: the one input runs in shard 0")
    lo, hi = shard * count // FUZZ_SHARDS, (shard + 1) * count // FUZZ_SHARDS
    marker = tmp_path / "marker"
    names = sorted(built)
    tally = {name: {"ok": 0, "refused": 0} for name in names}
    failures: list[str] = []
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as rollouts run (evaluate/threads.py); many threads on few cores slow each load
    start = time.perf_counter()
    try:
        for i in [int(only)] if only is not None else range(lo, hi):
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
    print(f"\nfuzz seed {seed}, shard {shard}: {hi - lo if only is None else 1} inputs in {wall:.1f} s: {tally}")
    assert not failures, f"{len(failures)} of the inputs (seed {seed}) escaped:\n" + "\n".join(failures[:20])
    if only is None:
        assert all(t["refused"] > 0 for t in tally.values()), tally  # the mutator reaches every reader


# -- run folders and Hub caches: the folders around the files -------------------------------------------------------
FOLDER_INPUTS = int(os.environ.get("RLVIZ_FUZZ_FOLDERS", "60"))  # sandboxes mutated (a timeline job every 6th)
FOLDER_REPO = "fuzz/agent"


def _sandbox(root: Path) -> None:
    """A training run's folder, a Hub cache holding an agent, and a folder ``outside`` nothing may touch."""
    from _hub import cache_repo, model_card

    from rlviz.sources.pt2.saving import save_checkpoint

    run = root / "run"
    run.mkdir(parents=True)
    model = _ppo()
    model.save(run / "rl_model_64_steps.zip")
    model.num_timesteps = 128
    model.save(run / "final.zip")
    torch.manual_seed(0)
    save_checkpoint(run / "step_200.pt2", torch.nn.Linear(4, 2), env="CartPole-v1", kind="logits")
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_text("never read, written or deleted")
    cache = root / "hf" / "hub"
    cache_repo(cache, FOLDER_REPO, {"agent.pt2": run / "step_200.pt2", "README.md": model_card("CartPole-v1")})


def _tree(root: Path, skip: Path) -> dict:
    """Every entry under ``root`` but ``skip``: (kind, size, mtime) by lstat, links not followed."""
    found = {}
    for top, dirs, names in os.walk(root, followlinks=False):
        if Path(top) == skip or skip in Path(top).parents:
            continue
        for name in (*dirs, *names):
            p = Path(top) / name
            if p == skip:
                continue
            st = p.lstat()
            found[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns,
                                               os.readlink(p) if p.is_symlink() else None)
    return found


def _mutate_run(run: Path, outside: Path, kind: int, rng: np.random.Generator, marker: Path) -> None:
    """One change to a training run's folder: links (loops, dangling, out of it), odd entries, a mutated file."""
    if kind == 0 and not (run / "a.zip").is_symlink():
        (run / "a.zip").symlink_to(run / "b.zip")
        (run / "b.zip").symlink_to(run / "a.zip")
    elif kind == 1:
        (run / f"gone_{rng.integers(1 << 30)}.pt").symlink_to(run / "nothing")
    elif kind == 2 and not (run / "rl_model_7_steps.zip").is_symlink():
        (run / "rl_model_7_steps.zip").symlink_to(outside / "secret.txt")
    elif kind == 3 and not (run / "d_9.zip").is_symlink():
        (run / "d_9.zip").symlink_to(outside, target_is_directory=True)
    elif kind == 4 and not (run / "sub_11.pt").exists():
        (run / "sub_11.pt").mkdir()
        os.mkfifo(run / "pipe_13.zip")
    elif kind == 5:
        victims = sorted(p for p in run.iterdir() if p.is_file() and not p.is_symlink() and p.stat().st_size)
        if victims:
            mutate_file(victims[int(rng.integers(len(victims)))], rng, marker)
    else:
        (run / "step_300.pt2").write_bytes(b"")  # a checkpoint still being written: empty


def _mutate_cache(repo: Path, outside: Path, kind: int, rng: np.random.Generator) -> None:
    """One change to a Hub cache's repo folder: its ref, its snapshot, the snapshot's links, its blobs, its card."""
    snapshot = next((repo / "snapshots").iterdir())
    ref = repo / "refs" / "main"
    if snapshot.is_symlink():
        return
    if kind == 0:
        values = ["../../../../outside", str(outside), "main", "", "a" * 40, "G" * 40, "0" * 40,
                  snapshot.name + "\nrlviz: forged", "\0" * 40, "../" * 8 + "outside/secret.txt"]
        ref.unlink()
        ref.write_text(values[int(rng.integers(len(values)))])
    elif kind == 1:
        ref.unlink()
        ref.symlink_to([outside / "secret.txt", ref, repo / "refs"][int(rng.integers(3))])
    elif kind == 2:
        shutil.rmtree(snapshot)
        snapshot.symlink_to(outside, target_is_directory=True)
    elif kind == 3:
        link = snapshot / "agent.pt2"
        link.unlink(missing_ok=True)
        link.symlink_to([outside / "secret.txt", link, repo.parent][int(rng.integers(3))])
    elif kind == 4:
        for blob in (repo / "blobs").iterdir():
            blob.unlink()
    elif kind == 5 and not (snapshot / "loop").is_symlink():
        (snapshot / "loop").symlink_to(snapshot, target_is_directory=True)
    else:
        from _bombs import DEEP_YAML, YAML_BOMB

        readme = snapshot / "README.md"
        readme.unlink(missing_ok=True)
        readme.write_text("---\n" + [YAML_BOMB, DEEP_YAML][int(rng.integers(2))] + "---\n")


def _mutate_folders(root: Path, rng: np.random.Generator, marker: Path) -> str:
    """1-3 changes to the run folder or the Hub cache, as a hostile or careless user makes them; what was done."""
    from _hub import repo_folder

    done = []
    for _ in range(int(rng.integers(1, 4))):
        kind = int(rng.integers(14))
        if kind < 7:
            _mutate_run(root / "run", root / "outside", kind, rng, marker)
        else:
            _mutate_cache(repo_folder(root / "hf" / "hub", FOLDER_REPO), root / "outside", kind - 7, rng)
        done.append(str(kind))
    return "mutations " + ",".join(done)


def _folder_calls(root: Path, out: Path, config: SimpleNamespace, job: bool) -> list[Callable[[], object]]:
    """Discovery and loading of the run (links that lead nowhere are listed among the skipped files, never dropped
    silently), the Hub agent (the commit it records is the resolved hash), and a timeline job."""
    import re

    import rlviz
    from rlviz.sources.run_folders import AGENT_SUFFIXES, discover

    def run_folder() -> None:
        found, skipped = discover(root / "run")
        broken = {p.name for p in (root / "run").iterdir() if p.is_symlink() and not p.exists()
                  and p.name.endswith(AGENT_SUFFIXES) and not p.name.startswith(".")}
        assert broken <= {s.name for s in skipped}, f"links that lead nowhere, not listed: {broken}"
        for cp in found:
            cp.load(config)

    def hub() -> None:
        commit = load_agent(f"hf://{FOLDER_REPO}").metadata["hub"]["commit"]
        assert re.fullmatch(r"[0-9a-f]{40}", commit), f"recorded commit {commit!r}"

    calls: list[Callable[[], object]] = [run_folder, hub]
    if job:
        calls.append(lambda: rlviz.timeline(run=root / "run", env="CartPole-v1", episodes=1, videos="none", out=out))
    return calls


def test_run_folders_and_hub_caches_survive_mutation(tmp_path):
    """Each sandbox mutated (links, loops, refs, snapshots, files): discovery and loading of the run, and the Hub
    agent, load or raise one RlvizError line; a timeline job (every 6th) writes nothing outside its --out; nothing
    hangs; ``outside`` never changes."""
    given = os.environ.get("RLVIZ_FUZZ_SEED", "0")
    seed = secrets.randbits(32) if given == "random" else int(given)
    base = tmp_path / "base"
    _sandbox(base)
    marker = tmp_path / "marker"
    config = SimpleNamespace(env="CartPole-v1", model=None, trust_checkpoint=False, device="cpu", vecnormalize=None)
    failures: list[str] = []
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(FOLDER_INPUTS):
            rng = np.random.default_rng([seed, 10_000 + i])
            root = tmp_path / f"in{i}"
            shutil.copytree(base, root, symlinks=True)
            how = _mutate_folders(root, rng, marker)
            out = root / "out"
            before = _tree(root, out)
            where = f"input {i} ({how}); reproduce with RLVIZ_FUZZ_SEED={seed}"
            signal.setitimer(signal.ITIMER_REAL, 3 * PER_INPUT_S)
            try:
                with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    from _hub import offline_hub

                    offline_hub(mp, root)
                    for call in _folder_calls(root, out, config, job=i % 6 == 0):
                        try:
                            call()
                        except RlvizError as exc:
                            assert "\n" not in str(exc).strip(), f"a message of several lines: {exc}"
            except _Hang:
                failures.append(f"hang on {where}")
            except Exception as exc:
                failures.append(f"{type(exc).__name__} escaped on {where}: {str(exc).splitlines()[:1]}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            after = _tree(root, out)
            if after != before:
                changed = sorted(set(after.items()) ^ set(before.items()))[:3]
                failures.append(f"written or deleted outside --out on {where}: {changed}")
            assert (root / "outside" / "secret.txt").read_text() == "never read, written or deleted"
            assert not marker.exists(), f"code from a file ran on {where}"
            shutil.rmtree(root)
    finally:
        signal.signal(signal.SIGALRM, old_handler)
    assert not failures, f"{len(failures)} of {FOLDER_INPUTS} sandboxes (seed {seed}):\n" + "\n".join(failures[:20])
