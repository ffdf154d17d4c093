"""The JAX engine (rlviz.jax.rollout, rlviz.jax.envs, rlviz.jobs.render_jax): batch invariance, the heatmap against a
count by hand, each env family's video, the whole render job, and ``import rlviz`` without jax."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
nn = pytest.importorskip("flax.linen")
jnp = jax.numpy

from rlviz.envs.recipe import EnvRecipe  # noqa: E402
from rlviz.jax.contract import JaxPolicy, PolicyOut  # noqa: E402


class _MLP(nn.Module):
    n: int

    @nn.compact
    def __call__(self, x):
        h = nn.tanh(nn.Dense(16)(x.reshape(-1)))
        return nn.Dense(self.n)(h), nn.Dense(1)(h)[0]


class TinyPolicy:
    """A flax actor-critic behind the JaxPolicy contract (the tests' own adapter)."""

    kind, squash, recurrent = "logits", False, False

    def __init__(self, obs_shape, n, seed=0):
        self.module = _MLP(n)
        self.params = self.module.init(jax.random.key(seed), jnp.zeros(obs_shape))
        self.action_names = tuple(str(i) for i in range(n))

    def apply(self, params, obs):
        logits, v = self.module.apply(params, obs)
        return PolicyOut(logits=logits, value=v)


class TinyGaussian:
    kind, squash, recurrent = "gaussian", False, False

    def __init__(self, obs_shape, d, seed=0):
        self.module = nn.Dense(d)
        self.params = self.module.init(jax.random.key(seed), jnp.zeros(int(np.prod(obs_shape))))
        self.action_names = tuple(f"a{i}" for i in range(d))

    def apply(self, params, obs):
        return PolicyOut(mean=jnp.tanh(self.module.apply(params, obs.reshape(-1))), std=jnp.full(len(self.action_names), 0.3))


def _gradient(policy, params, obs_batch):
    """Gradient saliency of the top logit (the tests' stand-in for rlviz.jax.saliency.gradient)."""
    def top(o):
        return jnp.max(policy.apply(params, o).logits)
    return jax.vmap(jax.grad(top))(jnp.asarray(obs_batch, jnp.float32))


@pytest.fixture(scope="module")
def cartpole():
    from rlviz.jax.envs import make_jax_env
    from rlviz.jax.rollout import JaxEngine

    env = make_jax_env("gymnax:CartPole-v1")
    return JaxEngine(env, TinyPolicy(env.obs_shape, 2))


@pytest.fixture(scope="module")
def breakout():
    from rlviz.jax.envs import make_jax_env
    from rlviz.jax.rollout import JaxEngine

    env = make_jax_env("gymnax:Breakout-MinAtar")
    return JaxEngine(env, TinyPolicy(env.obs_shape, len(env.action_names)), heatmap=True)


def test_tiny_policy_meets_the_contract(cartpole):
    assert isinstance(cartpole.policy, JaxPolicy)


def test_import_rlviz_imports_no_jax():
    code = ("import sys, rlviz, rlviz.jax, rlviz.envs.recipe, rlviz.jobs.render; from rlviz.envs.recipe import EnvRecipe; "
            "EnvRecipe.for_env_id('gymnax:Breakout-MinAtar'); "
            "bad = [m for m in ('jax', 'flax', 'gymnax', 'brax', 'jumanji', 'craftax') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_jax_env_id_is_not_gymnasiums():
    from rlviz.envs.recipe import register_envs

    register_envs("gymnax:Breakout-MinAtar")  # nothing to register, no gymnasium lookup
    recipe = EnvRecipe.for_env_id("gymnax:Breakout-MinAtar")
    assert recipe.env_id == "gymnax:Breakout-MinAtar" and recipe.saliency_mode == "nearest"


def _rows(result):
    return [e.to_row() for e in result.episodes]


_BATCH_INVARIANCE_SCRIPT = """
import json, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_jax_engine import TinyPolicy
from rlviz.evaluate.statistics.stats import write_episodes_csv
from rlviz.jax.envs import make_jax_env
from rlviz.jax.rollout import JaxEngine, jax_rollout
env = make_jax_env("gymnax:CartPole-v1")
engine = JaxEngine(env, TinyPolicy(env.obs_shape, 2))
texts = []
for n in (1, 7, 200):
    result = jax_rollout(engine, 200, seed=3, num_envs=n)
    write_episodes_csv(result, Path({out!r}) / f"e{{n}}.csv")
    texts.append((Path({out!r}) / f"e{{n}}.csv").read_text())
print(json.dumps({{"texts": texts, "compiled": [list(k) for k in engine._compiled]}}))
"""


def test_batch_invariance(tmp_path):
    """The same 200 CartPole episodes with --num-envs 1, 7 and 200: identical episodes.csv. Run as users compile (in a
    process of its own under the default XLA flags: the tests' own, tests/conftest.py's QUICK_XLA_FLAGS, are not)."""
    import json

    from conftest import default_xla_env

    env = default_xla_env(JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))
    assert "xla_backend_optimization_level" not in env.get("XLA_FLAGS", "")
    code = _BATCH_INVARIANCE_SCRIPT.format(tests=str(Path(__file__).resolve().parent), out=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    texts, compiled = got["texts"], {tuple(k) for k in got["compiled"]}
    assert texts[0] == texts[1] == texts[2]
    # compiled once each: the batches (1 and 7 padded to 8, 200), the smaller batches the running episodes move to
    # (8 times a power of two) and one gather that moves them
    assert {(8, False), (200, False)} <= compiled <= {(200, False), ("jitted", "take")} | {
        (8 * 2**k, False) for k in range(5)}
    assert len(texts[0].splitlines()) == 201


def test_heatmap_counts_equal_a_count_by_hand(breakout):
    """Each failure's ball and paddle cells, found by replaying each episode's states by hand, summed."""
    from rlviz.jax.replay import replay_jax_episode
    from rlviz.jax.rollout import jax_rollout

    result = jax_rollout(breakout, 12, seed=1, num_envs=5)
    hm = result.heatmap
    ball, paddle = np.zeros((10, 10), np.int64), np.zeros((10, 10), np.int64)
    failures = 0
    for e in result.episodes:
        rep = replay_jax_episode(breakout, e.seed)
        assert rep.length == e.length and np.isclose(float(rep.rewards.sum()), e.ret)
        if rep.terminated:  # Breakout fails when the ball is lost: the state before the last step
            s = rep.states
            t = rep.length - 1
            ball[int(s.ball_y[t]), int(s.ball_x[t])] += 1
            paddle[9, int(s.pos[t])] += 1
            failures += 1
    assert failures == hm.failures == sum(e.failures for e in result.episodes) > 0
    np.testing.assert_array_equal(hm.counts["ball"], ball)
    np.testing.assert_array_equal(hm.counts["paddle"], paddle)
    assert hm.episodes == 12 and hm.background.shape == (10, 10, 3)


def _agent(env_id, policy):
    return types.SimpleNamespace(policy=policy, recipe=EnvRecipe.for_env_id(env_id), gamma=0.99)


def test_render_breakout_end_to_end(tmp_path, monkeypatch):
    """rlviz.render on a flax policy and gymnax Breakout-MinAtar: the run folder of a gymnasium run."""
    import rlviz
    from rlviz.jax.envs import make_jax_env
    from rlviz.jobs import render_jax
    from rlviz.media import read_video

    env = make_jax_env("gymnax:Breakout-MinAtar", {"max_steps_in_episode": 5})
    policy = TinyPolicy(env.obs_shape, len(env.action_names))
    monkeypatch.setattr(render_jax, "load_jax", lambda config: _agent("gymnax:Breakout-MinAtar", policy))
    calls = []

    def gradient(policy, params, obs_batch):
        calls.append(np.shape(obs_batch))
        return _gradient(policy, params, obs_batch)

    monkeypatch.setitem(sys.modules, "rlviz.jax.saliency", types.SimpleNamespace(gradient=gradient))
    out = rlviz.render(checkpoint=str(tmp_path / "params.msgpack"), env="gymnax:Breakout-MinAtar", episodes=30,
                       heatmap=True, videos="first:1,worst:1", saliency="gradient", out=tmp_path / "run",
                       env_kwargs='{"max_steps_in_episode": 5}')
    run = Path(out.out_dir)
    for name in ("rlviz-run.json", "summary.json", "episodes.csv", "heatmap.png", "heatmap.npz", "report.html"):
        assert (run / name).is_file(), name
    rows = list(csv.DictReader((run / "episodes.csv").open()))
    assert len(rows) == 30
    assert max(int(r["length"]) for r in rows) <= 5 and any(r["truncated"] == "True" for r in rows)  # --env-kwargs reached the env's params...
    assert '"max_steps_in_episode": 5' in (run / "rlviz-run.json").read_text().replace('\\"', '"')  # ...and the record
    worst = min(range(30), key=lambda k: (float(rows[k]["return"]), k))
    assert [Path(v).name for v in out.videos] == ["first-0-episode-0.mp4"] + (  # a gymnasium run's names
        [f"worst-{worst}-episode-0.mp4"] if worst else [])
    for video in out.videos:
        frames = list(read_video(video))
        assert len(frames) >= 2 and frames[0].ndim == 3
        data = np.load(Path(video).with_suffix(".npz"))
        assert data["probs"].shape == (len(data["actions"]) + 1, 3)
        np.testing.assert_allclose(data["probs"].sum(-1), 1.0, rtol=1e-5)
    assert len(calls) == len(out.videos) and all(c[1:] == (10, 10, 4) for c in calls)  # every step, one batch
    # the panels' numbers are the module's on the episode's observations (replayed alone)
    from rlviz.jax.replay import replay_jax_episode
    from rlviz.jax.rollout import JaxEngine

    seed = int(rows[0]["seed"])
    rep = replay_jax_episode(JaxEngine(env, policy), seed)
    logits, values = jax.vmap(lambda o: policy.module.apply(policy.params, o))(jnp.asarray(rep.observations))
    data = np.load(run / "videos" / "first-0-episode-0.npz")
    np.testing.assert_allclose(data["probs"], jax.nn.softmax(logits), atol=1e-5)
    np.testing.assert_allclose(data["value"], values, atol=1e-5)
    assert out.summary["episodes"] == 30


_FAMILIES = [  # (env id, env kwargs, a policy for it); max 64 steps: one compiled chunk
    ("gymnax:CartPole-v1", None, "logits"),
    ("gymnax:Breakout-MinAtar", None, "logits"),
    ("gymnax:Catch-bsuite", None, "logits"),
    pytest.param("craftax:Craftax-Classic-Symbolic-v1", None, "logits", marks=pytest.mark.slow),  # ~50 s: compiles
    pytest.param("brax:inverted_pendulum", {"backend": "mjx"}, "gaussian", marks=pytest.mark.slow),  # ~80 s: MJX
    ("jumanji:Snake-v1", None, "logits"),
]


@pytest.mark.parametrize(("env_id", "kwargs", "kind"), _FAMILIES,
                         ids=[(f.values if hasattr(f, "values") else f)[0] for f in _FAMILIES])
def test_each_family_renders_a_video_that_decodes(env_id, kwargs, kind, tmp_path, monkeypatch):
    from rlviz.episode import EpisodeResult
    from rlviz.jax.envs import make_jax_env
    from rlviz.jax.replay import replay_jax_episode
    from rlviz.jax.rollout import JaxEngine
    from rlviz.jobs.render_jax import write_jax_video
    from rlviz.media import read_video

    pytest.importorskip(env_id.split(":")[0])
    concrete = []  # Brax: resets run on a concrete key while the env is made (its observation_size: ~570 compiles)
    if env_id.startswith("brax:"):
        from brax.envs import _envs
        from brax.envs.base import PipelineEnv

        cls = _envs[env_id[5:]]  # (Brax's registry: name -> class)
        reset = cls.reset
        monkeypatch.setattr(cls, "reset", lambda self, rng: (concrete.append(not isinstance(rng, jax.core.Tracer)),
                                                             reset(self, rng))[1])
        assert issubclass(cls, PipelineEnv)
    env = make_jax_env(env_id, kwargs)
    assert not any(concrete)
    n = len(env.action_names)
    policy = TinyPolicy(env.obs_shape, n) if kind == "logits" else TinyGaussian(env.obs_shape, n)
    engine = JaxEngine(env, policy, max_steps=64)
    saliency = "gradient" if kind == "logits" else None
    monkeypatch.setitem(sys.modules, "rlviz.jax.saliency", types.SimpleNamespace(gradient=_gradient))
    rep = replay_jax_episode(engine, 1234)  # the episode's return, as a rollout would record it
    record = EpisodeResult(0, 1234, float(rep.rewards.sum(dtype=np.float64)), rep.length)
    config = types.SimpleNamespace(saliency=saliency)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the replay gives the record's return
        done = write_jax_video(engine, record, tmp_path, "first-0", config, 0.99)
    assert done.ret == record.ret and done.length == record.length
    frames = list(read_video(done.video_path))
    assert len(frames) >= done.length + 1 and frames[0].ndim == 3 and frames[0].std() > 0
    data = np.load(done.video_path.with_suffix(".npz"))
    assert len(data["rewards"]) == done.length >= 1
    if env.obs_shape and len(env.obs_shape) == 1 and saliency:  # a vector observation: saliency per feature
        assert data["saliency"].shape == (done.length + 1, env.obs_shape[0])


class TinyRecurrent(TinyPolicy):
    """A recurrent policy: its memory is a running mean of the observations, fed to the network beside them."""

    recurrent = True

    def __init__(self, obs_shape, n, seed=0):
        super().__init__((2 * int(np.prod(obs_shape)),), n, seed)

    def initial_carry(self):
        return jnp.zeros(4, jnp.float32)

    def apply_recurrent(self, params, carry, obs, reset):
        carry = jnp.where(reset, jnp.zeros_like(carry), carry)
        carry = 0.7 * carry + 0.3 * obs.reshape(-1)
        logits, v = self.module.apply(params, jnp.concatenate([obs.reshape(-1), carry]))
        return carry, PolicyOut(logits=logits, value=v)

    def apply(self, params, obs):  # (the contract's; a recurrent policy is run through apply_recurrent)
        return self.apply_recurrent(params, self.initial_carry(), obs, True)[1]


def test_recurrent_policy_carries_its_memory_and_replays(tmp_path):
    """A recurrent policy's memory goes through the scan, reset at each episode's start: the same episodes with 3 and
    16 envs, and a replay alone gives each its return."""
    from rlviz.jax.envs import make_jax_env
    from rlviz.jax.replay import replay_jax_episode
    from rlviz.jax.rollout import JaxEngine, jax_rollout

    env = make_jax_env("gymnax:CartPole-v1")
    engine = JaxEngine(env, TinyRecurrent(env.obs_shape, 2), max_steps=64)
    a = jax_rollout(engine, 12, seed=5, num_envs=3)
    b = jax_rollout(engine, 12, seed=5, num_envs=16)
    assert _rows(a) == _rows(b)
    for e in a.episodes[:3]:
        rep = replay_jax_episode(engine, e.seed)
        assert rep.length == e.length and float(rep.rewards.sum()) == e.ret


def test_gymnax_minatar_frames_are_the_minatar_packages(breakout):
    """Each state of a gymnax Breakout-MinAtar episode before a step, set into the minatar package's Breakout, renders there (its
    gymnasium rgb_array, through rlviz's frame converter) to the very frame rlviz draws from the gymnax state."""
    import gymnasium as gym

    from rlviz.envs.frames import to_rgb_frame
    from rlviz.envs.minatar_import import import_minatar_gym
    from rlviz.jax.replay import replay_jax_episode

    import_minatar_gym().register_envs()
    env = gym.make("MinAtar/Breakout-v1", render_mode="rgb_array")
    env.reset(seed=0)
    game = env.unwrapped.game.env
    rep = replay_jax_episode(breakout, 77)
    for t in range(rep.length):  # (the state after the losing step has the ball off the grid: minatar has none such)
        s = jax.tree_util.tree_map(lambda a, t=t: a[t], rep.states)
        game.ball_x, game.ball_y, game.pos = int(s.ball_x), int(s.ball_y), int(s.pos)
        game.last_x, game.last_y = int(s.last_x), int(s.last_y)
        game.brick_map = np.asarray(s.brick_map).astype(bool)
        np.testing.assert_array_equal(breakout.env.frame(s), to_rgb_frame(env.render()))
    env.close()


_DEVICES_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import jax
from test_jax_engine import TinyPolicy
from rlviz.jax.envs import make_jax_env
from rlviz.jax.rollout import JaxEngine, jax_rollout
env = make_jax_env("gymnax:CartPole-v1")
result = jax_rollout(JaxEngine(env, TinyPolicy(env.obs_shape, 2)), 40, seed=2, num_envs=5)
print(jax.device_count(), json.dumps([[e.ret, e.length, e.mean_entropy, list(e.value_sums)] for e in result.episodes]))
"""


def test_the_same_episodes_on_four_devices(cartpole):
    """The batch sharded over 4 (host) devices gives the episodes one device gives, to the last bit."""
    import json

    from rlviz.jax.rollout import jax_rollout

    flags = " ".join([os.environ.get("XLA_FLAGS", ""), "--xla_force_host_platform_device_count=4"]).strip()
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    code = _DEVICES_SCRIPT.format(tests=str(Path(__file__).resolve().parent))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    count, rows = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert count == "4"
    here = jax_rollout(cartpole, 40, seed=2, num_envs=5)
    assert json.loads(rows) == [[e.ret, e.length, e.mean_entropy, list(e.value_sums)] for e in here.episodes]


class _WeakeningEnv:
    """A JAX env whose reset gives a float32 leaf and whose step makes it weakly typed (as Brax's reward and done
    are): its episodes run to the cap. ``traces`` counts the step's traces."""

    env_id, family, params, obs_shape, obs_dtype, action_names, discrete = "test:weak", "test", None, (4,), \
        np.float32, ("A", "B"), True
    max_steps, object_names, object_grid, fps, action_low, action_high = 96, (), None, 10.0, None, None

    def __init__(self):
        self.traces = 0

    def reset(self, key, params):
        state = {"t": jnp.int32(0), "r": jnp.zeros((), jnp.float32)}
        return jnp.zeros(4, jnp.float32), state

    def step(self, key, state, action, params):
        self.traces += 1
        t = state["t"] + 1
        state2 = {"t": t, "r": jnp.asarray(1.0)}  # (weakly typed, as jnp.asarray of a Python float is)
        return jnp.full(4, 0.01, jnp.float32) * t, state2, state2["r"].astype(jnp.float32), jnp.asarray(False), \
            jnp.asarray(False)

    def objects(self, state):
        return None


def test_a_step_that_weakens_a_leaf_compiles_the_chunk_once():
    """Three chunks of one batch size, one trace of the step (the start's carry and the chunk's own have the same
    types): an env whose step weakens a leaf (Brax's reward, done) compiled the chunk twice, ~6 s each on MJX."""
    from rlviz.jax.rollout import CHUNK, JaxEngine, jax_rollout

    env = _WeakeningEnv()
    engine = JaxEngine(env, TinyPolicy(env.obs_shape, 2))
    result = jax_rollout(engine, 8, seed=0, num_envs=8)
    assert engine.max_steps == 3 * CHUNK and [e.length for e in result.episodes] == [96] * 8
    assert env.traces == 1
