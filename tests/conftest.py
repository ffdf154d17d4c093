"""Shared test fixtures and read-back helpers: no moviepy, no network, W&B offline, TensorBoard events."""

from __future__ import annotations

import http.server
import importlib
import json
import os
import signal
import socket
import struct
import sys
import threading
from pathlib import Path

import pytest


def pytest_configure(config):
    """Ctrl-C reaches the tests' child processes however pytest itself was started. A shell starts a background job
    (``cmd &`` without job control, ``nohup``) with SIGINT ignored, and an ignored signal stays ignored across exec:
    every child the Ctrl-C tests start (a CLI job, a training loop) would then shrug off its Ctrl-C and run until the
    test's hang guard. A handled signal is reset to the default at exec, so pytest handling it as Python does by
    default gives every child a terminal's Ctrl-C, as a user's process has."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _one_thread_per_process()
    _quick_xla_compiles()
    _sb3_logs_in_a_session_folder()
    if not hasattr(config, "workerinput"):  # (the run's first process: before the xdist workers start)
        _bytecode_once()


def _bytecode_once() -> None:
    """rlviz's modules compiled to bytecode once, before the workers start, where ``PYTHONDONTWRITEBYTECODE`` is set
    (as on this machine): without it no interpreter writes the ``.pyc`` files, so each of the ~240 Python processes
    the suite starts (the workers, the CLI and ``python -c`` subprocesses, Ray's workers, fresh-interpreter import
    checks) compiled the rlviz modules it imports from source again (an import of the CLI's render path, 160
    modules: 1.9-2.0 CPU-s with the files against 2.2-2.3 s without). The setting stops writing, not reading: the files
    written here (``rlviz/**/__pycache__``, what any import writes where the setting is unset; git ignores them)
    are read by every process. The tests' own modules are left to pytest, which rewrites their asserts."""
    if not sys.dont_write_bytecode:
        return
    import compileall

    compileall.compile_dir(Path(__file__).resolve().parents[1] / "rlviz", quiet=2)


def _sb3_logs_in_a_session_folder() -> None:
    """SB3's ``learn`` makes a logger folder even when it logs nowhere (``$SB3_LOGDIR`` or ``/tmp/SB3-<date>``): the
    tests' agents trained for seconds would leave one in /tmp per run. Here it is one folder per test process,
    removed when the process ends."""
    if "SB3_LOGDIR" not in os.environ:
        import atexit
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix="rlviz-tests-sb3-")
        os.environ["SB3_LOGDIR"] = folder
        atexit.register(shutil.rmtree, folder, ignore_errors=True)


#: the thread pools' sizes every test process starts with (xdist workers and the subprocesses tests start inherit them)
_ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _one_thread_per_process() -> None:
    """Each test process computes on one thread. The suite runs as ``-n 2`` processes on 2 cores: with torch's default
    (one OpenMP thread per core) each worker's SB3 training, saliency and CNN forwards spread over both cores, the
    two workers' threads contend, and OpenMP's waiting threads spin: 50 dm_control, Atari, CleanRL LSTM and SB3 tests
    took 220 s of CPU time with it against 111 s on one thread (``-n 0``, cores busy with other work). rlviz's rollouts
    already run with ``--threads 1`` (config.threads); this sets the environment before any worker or subprocess imports
    torch or numpy. A user's own setting is left alone. (A JAX persistent compilation cache shared by the workers was
    tried and dropped: tests/test_jax_*.py took no less CPU time with it, 299 s against 272 s.)"""
    for key, value in _ONE_THREAD.items():
        os.environ.setdefault(key, value)


#: XLA's CPU compiler at its lowest optimisation level (what every test process and the subprocesses tests start
#: inherit). The tests' jitted rollouts run a few steps each: compiling them is most of their cost, and the LLVM
#: passes these switch off are most of compiling (tests/test_jax_*.py: 433 -> 337 CPU-s, the Brax MJX video 69 -> 50 s,
#: Craftax's 59 -> 33 s). Numerics may differ bit-wise from the default level, so what must hold as users run it is
#: also checked under the default flags (:func:`default_xla_env`: tests/test_jax_engine.py's batch invariance,
#: tests/test_seed_story.py's training).
QUICK_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def _quick_xla_compiles() -> None:
    """Sets ``XLA_FLAGS`` to :data:`QUICK_XLA_FLAGS` before any worker or subprocess imports jax; a user's own
    ``XLA_FLAGS`` is left alone."""
    os.environ.setdefault("XLA_FLAGS", QUICK_XLA_FLAGS)


def default_xla_env(**extra: str) -> dict[str, str]:
    """This process's environment for a subprocess that must compile as users do: :data:`QUICK_XLA_FLAGS` taken out
    of ``XLA_FLAGS`` (a user's own flags kept), ``extra`` set."""
    env = dict(os.environ)
    flags = " ".join(f for f in env.get("XLA_FLAGS", "").split() if f not in QUICK_XLA_FLAGS.split())
    env.pop("XLA_FLAGS", None)
    if flags:
        env["XLA_FLAGS"] = flags
    env.update(extra)
    return env


class _BlockMoviepy:
    """A meta-path finder that refuses moviepy (installed or not) and records who asked."""

    def __init__(self):
        self.attempts: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name == "moviepy" or name.startswith("moviepy."):
            self.attempts.append(name)
            raise ImportError(f"test: moviepy is blocked ({name})")
        return None


@pytest.fixture
def no_moviepy(monkeypatch):
    """moviepy cannot be imported during the test (whether or not it is installed); yields the attempts."""
    for mod in [m for m in sys.modules if m == "moviepy" or m.startswith("moviepy.")]:
        monkeypatch.delitem(sys.modules, mod)
    blocker = _BlockMoviepy()
    monkeypatch.setattr(sys, "meta_path", [blocker, *sys.meta_path])
    with pytest.raises(ImportError):
        importlib.import_module("moviepy")
    blocker.attempts.clear()
    yield blocker.attempts


def tb_accumulator(log_dir: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"images": 0, "scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


_BLOCK = 32 * 1024


def wandb_records(path: Path):
    """The records of a .wandb transaction log (LevelDB log format: 32 KiB blocks of
    crc32/length/type-framed chunks; FULL=1, FIRST=2, MIDDLE=3, LAST=4)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B" and struct.unpack("<H", data[4:6])[0] == 0xBEE1
    pos, buf = 7, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pos += 7
        buf += data[pos : pos + length]
        pos += length
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            buf = b""
            yield rec


def wandb_flushed() -> None:
    """run.finish() can return before wandb's service has written the .wandb log to disk
    (seen with wandb 0.31 offline); shutting the service down waits for it."""
    import wandb

    wandb.teardown()


def wandb_items(items) -> dict:
    return {tuple(i.nested_key) or (i.key,): json.loads(i.value_json) for i in items}


@pytest.fixture
def no_network(monkeypatch):
    """Fail (and record) any connection from this process to a non-loopback address, and point W&B at a
    loopback HTTP server that counts requests (W&B's service runs in another process)."""
    attempts: list = []
    hits: list = []

    def loopback(address) -> bool:
        host = address[0] if isinstance(address, tuple) else address
        return not isinstance(host, str) or host in ("localhost", "::1") or host.startswith("127.")

    real_connect, real_create = socket.socket.connect, socket.create_connection

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not loopback(address):
            attempts.append(address)
            raise OSError(f"test: network access to {address} blocked")
        return real_connect(self, address)

    def create_connection(address, *a, **kw):
        if not loopback(address):
            attempts.append(address)
            raise OSError(f"test: network access to {address} blocked")
        return real_create(address, *a, **kw)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_error(503)

        do_POST = do_PUT = do_GET  # noqa: N815

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.server_port}")
    yield attempts, hits
    server.shutdown()
    server.server_close()


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for key, value in {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path / "wandb_dir"),
        "WANDB_SILENT": "true",
        "WANDB_CONSOLE": "off",
        "WANDB_DISABLE_GIT": "true",
        "WANDB_DISABLE_CODE": "true",
        "WANDB_ERROR_REPORTING": "false",
        "WANDB_X_DISABLE_STATS": "true",
        "WANDB_X_DISABLE_META": "true",
        "WANDB_API_KEY": "",
    }.items():
        monkeypatch.setenv(key, value)
    return tmp_path / "wandb_dir"


@pytest.fixture(scope="session")
def minatar_ckpt(tmp_path_factory):
    """A random-weight MinAtar Breakout agent saved as an rlviz checkpoint (gamma 0.9)."""
    import torch

    from rlviz.agent.models import MinAtarAgent
    from rlviz.sources.checkpoint import save_checkpoint

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ckpt") / "agent.pt2"
    save_checkpoint(path, MinAtarAgent(3), env="MinAtar/Breakout-v1", gamma=0.9)
    return path


@pytest.fixture(scope="session")
def ppo_zip(tmp_path_factory):
    """A Stable-Baselines3 PPO trained 2048 steps on CartPole, saved as .zip: (model, path)."""
    sb3 = pytest.importorskip("stable_baselines3")
    from torch import nn

    model = sb3.PPO("MlpPolicy", "CartPole-v1", n_steps=256, batch_size=64, n_epochs=2, seed=0, device="cpu",
                    policy_kwargs={"net_arch": [32, 32], "activation_fn": nn.ReLU})
    model.learn(2048)
    path = tmp_path_factory.mktemp("sb3") / "ppo.zip"
    model.save(path)
    return model, path


@pytest.fixture(scope="session")
def minatar_baseline(tmp_path_factory):
    """The MinAtar sample rendered in one process (32 episodes, --num-envs 8, heatmap, worst and best videos): the run
    folder. Session-scoped: tests/test_scale.py and tests/test_scale_cluster.py only read it."""
    from test_scale import _render

    out = tmp_path_factory.mktemp("one") / "out"
    assert _render(out, "--num-envs", "8", "--videos", "worst:1,best:1") == 0
    return out


@pytest.fixture(scope="session")
def minatar_workers(minatar_baseline, tmp_path_factory):
    """The same run with --workers 2 (every worker joined after it): the run folder, read only, as above."""
    from test_scale import _children, _render

    out = tmp_path_factory.mktemp("w2") / "out"
    before = set(_children())
    assert _render(out, "--num-envs", "8", "--workers", "2", "--videos", "worst:1,best:1") == 0
    assert set(_children()) <= before  # every worker joined
    return out


def zoo_yaml(path: Path, data: dict) -> None:
    """Written as rl-zoo3 writes it: yaml.dump of an OrderedDict (Python tags in the file)."""
    from collections import OrderedDict

    import yaml

    path.write_text(yaml.dump(OrderedDict(sorted(data.items()))))


@pytest.fixture(scope="session")
def zoo_run(tmp_path_factory):
    """(model, run): a PPO trained briefly on CartPole under VecNormalize, laid out as an rl-zoo3 run:
    run/CartPole-v1.zip, run/CartPole-v1/{config.yml,args.yml,vecnormalize.pkl} (checked by hand against
    ``python -m rl_zoo3.train --algo ppo --env CartPole-v1 --hyperparams normalize:True``)."""
    sb3 = pytest.importorskip("stable_baselines3")
    pytest.importorskip("yaml")
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    venv = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=0), gamma=0.98)
    model = sb3.PPO("MlpPolicy", venv, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu", gamma=0.98,
                    policy_kwargs={"net_arch": [16]})
    model.learn(512)
    run = tmp_path_factory.mktemp("logs") / "ppo" / "CartPole-v1_1"
    (run / "CartPole-v1").mkdir(parents=True)
    model.save(run / "CartPole-v1.zip")
    venv.save(run / "CartPole-v1" / "vecnormalize.pkl")
    zoo_yaml(run / "CartPole-v1" / "config.yml", {"normalize": True, "policy": "MlpPolicy", "gamma": 0.98,
                                                   "n_timesteps": 512.0, "batch_size": 64})
    zoo_yaml(run / "CartPole-v1" / "args.yml", {"algo": "ppo", "env": "CartPole-v1", "env_kwargs": None,
                                                 "gym_packages": [], "seed": 0})
    return model, run


@pytest.fixture(scope="session")
def snippets():
    """Runs a docs/README snippet as pasted, forked from a server that imported torch & co once
    (tests/_snippets.py)."""
    from _snippets import SnippetRunner

    runner = SnippetRunner()
    yield runner
    runner.close()
