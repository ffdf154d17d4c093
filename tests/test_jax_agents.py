"""The agents side of rlviz's JAX engine (rlviz.jax.policy, .params, .load, .saliency): flax modules as JaxPolicies,
their params files read safely, the seed-shaped agent loaded from the command line's flags, saliency in JAX."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("distrax")
import flax.serialization as fs  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from rlviz.errors import CheckpointError, RlvizError, UsageError  # noqa: E402
from rlviz.jax import FlaxPolicy, FlaxPolicyOptions, JaxAgentOptions, load_jax_agent  # noqa: E402
from rlviz.jax.contract import JaxPolicy  # noqa: E402
from tests._flax_seed import (  # noqa: E402
    ActorCritic,
    ActorCriticRNN,
    GaussianActor,
    QNetwork,
    ScannedRNN,
    SeedActor,
    SeedCritic,
    seed_params,
)

ENV = "gymnax:Breakout-MinAtar"
SEED_FLAGS = {"model": "tests._flax_seed:SeedActor", "critic": "tests._flax_seed:SeedCritic", "env": ENV}


def _obs(n: int = 6, shape=(10, 10, 4), seed: int = 1):
    return jax.random.uniform(jax.random.PRNGKey(seed), (n, *shape))


def _batched(policy, obs):
    return jax.jit(jax.vmap(policy.apply, (None, 0)))(policy.params, obs)


@pytest.fixture(scope="module")
def seed_file(tmp_path_factory) -> tuple[Path, dict]:
    p = seed_params()
    path = tmp_path_factory.mktemp("seed") / "agent.msgpack"
    path.write_bytes(fs.to_bytes(p))
    return path, p


# -- part 1: FlaxPolicy ------------------------------------------------------------------------------------------
def test_seed_agent_loads_and_matches_module_apply(seed_file):
    path, p = seed_file
    agent = load_jax_agent(path, **SEED_FLAGS)
    assert isinstance(agent.policy, JaxPolicy) and agent.policy.kind == "logits" and agent.kind == "actor_critic"
    assert agent.recipe.env_id == ENV and agent.format == "flax-msgpack" and len(agent.action_names) == 3
    obs = _obs(8)
    out = _batched(agent.policy, obs)
    want_logits = SeedActor().apply({"params": p["actor"]}, obs.reshape(-1, 10, 10, 4))
    want_value = SeedCritic().apply({"params": p["critic"]}, obs.reshape(-1, 10, 10, 4))
    np.testing.assert_allclose(jax.nn.softmax(out.logits), jax.nn.softmax(want_logits), atol=1e-5)
    np.testing.assert_allclose(out.value, want_value, atol=1e-5)


def test_params_that_do_not_fit_the_class_say_so_in_one_line(seed_file):
    path, _ = seed_file
    with pytest.raises(CheckpointError) as e:
        load_jax_agent(path, **SEED_FLAGS, model_kwargs='{"hidden": 32}')
    msg = str(e.value)
    assert "\n" not in msg and "Dense_0/kernel (400, 64) vs (400, 32)" in msg and "actor" in msg
    with pytest.raises(CheckpointError, match="not {'actor'"):
        load_jax_agent(_single(path.parent), **SEED_FLAGS)
    with pytest.raises(UsageError, match="JAX env"):
        load_jax_agent(path, model=SEED_FLAGS["model"], critic=SEED_FLAGS["critic"], env="CartPole-v1")
    with pytest.raises(UsageError, match="--model"):
        load_jax_agent(path, env=ENV)


def _single(folder: Path) -> Path:
    path = folder / "actor_only.msgpack"
    path.write_bytes(fs.to_bytes(seed_params()["actor"]))
    return path


def test_actor_alone_has_no_value_and_params_wrapper_is_understood(tmp_path):
    p = seed_params()["actor"]
    for i, tree in enumerate((p, {"params": p})):
        path = tmp_path / f"a{i}.msgpack"
        path.write_bytes(fs.to_bytes(tree))
        agent = load_jax_agent(path, model="tests._flax_seed:SeedActor", env=ENV)
        out = _batched(agent.policy, _obs(2))
        assert agent.kind == "logits" and out.value is None
        np.testing.assert_allclose(out.logits, SeedActor().apply({"params": p}, _obs(2)), atol=1e-5)


def _init(module, *args):
    return module.init(jax.random.PRNGKey(0), *args)


@pytest.mark.parametrize("case", ["categorical_tuple", "normal", "mvn_diag", "tanh", "q"])
def test_each_output_shape_gives_the_right_policy_out(case):
    obs = _obs(3, (4,))
    if case == "categorical_tuple":
        m = ActorCritic()
        v = _init(m, jnp.zeros((1, 4)))
        pol = FlaxPolicy(m, v, options=FlaxPolicyOptions(obs_shape=(4,)))
        out = _batched(pol, obs)
        pi, value = m.apply(v, obs)
        assert pol.kind == "logits" and not pol.squash
        np.testing.assert_allclose(out.logits, pi.logits, atol=1e-5)
        np.testing.assert_allclose(out.value, value, atol=1e-5)
        return
    if case == "q":
        m = QNetwork()
        v = _init(m, jnp.zeros((1, 4)))
        pol = FlaxPolicy(m, v, options=FlaxPolicyOptions(obs_shape=(4,), kind="q"))
        out = _batched(pol, obs)
        assert pol.kind == "q" and out.logits is None and out.value is None
        np.testing.assert_allclose(out.q, m.apply(v, obs), atol=1e-5)
        # without kind="q" the same output reads as logits (they look alike)
        assert FlaxPolicy(m, v, options=FlaxPolicyOptions(obs_shape=(4,))).kind == "logits"
        return
    m = GaussianActor(diag=case == "mvn_diag", tanh=case == "tanh")
    v = _init(m, jnp.zeros((1, 4)))
    pol = FlaxPolicy(m, v, options=FlaxPolicyOptions(obs_shape=(4,)))
    out = _batched(pol, obs)
    assert pol.kind == "gaussian" and pol.squash == (case == "tanh") and pol.action_size == 2
    dist = m.apply(v, obs)
    base = dist.distribution if case == "tanh" else dist
    np.testing.assert_allclose(out.mean, base.mean(), atol=1e-5)
    np.testing.assert_allclose(out.std, base.stddev(), atol=1e-5)
    np.testing.assert_allclose(out.std, np.full((3, 2), np.exp(-0.5)), atol=1e-6)


def test_recurrent_ppo_rnn_agent_carries_and_resets_its_memory():
    m = ActorCriticRNN()
    h0 = ScannedRNN.initialize_carry(1, 16)
    v = _init(m, h0, (jnp.zeros((1, 1, 4)), jnp.zeros((1, 1), bool)))
    pol = FlaxPolicy(m, v, options=FlaxPolicyOptions(obs_shape=(4,), recurrent=True,
                                                     initial_carry=lambda: ScannedRNN.initialize_carry(1, 16)))
    assert pol.recurrent and pol.kind == "logits" and pol.action_size == 3
    obs = _obs(5, (4,))
    dones = jnp.array([True, False, False, True, False])
    # the module over the whole sequence at once (time-major, batch 1), as ppo_rnn trains it
    _, pi, value = m.apply(v, h0, (obs[:, None], dones[:, None]))
    step = jax.jit(pol.apply_recurrent)
    carry = pol.initial_carry()
    for t in range(5):
        carry, out = step(pol.params, carry, obs[t], dones[t])
        np.testing.assert_allclose(out.logits, pi.logits[t, 0], atol=1e-5)
        np.testing.assert_allclose(out.value, value[t, 0], atol=1e-5)
    with pytest.raises(UsageError, match="initial_carry"):
        FlaxPolicy(m, v, options=FlaxPolicyOptions(obs_shape=(4,), recurrent=True))


def test_flax_policy_needs_a_shape_or_a_kind():
    m = QNetwork()
    with pytest.raises(UsageError, match="obs_shape"):
        FlaxPolicy(m, _init(m, jnp.zeros((1, 4))))
    with pytest.raises(UsageError, match="kind="):
        FlaxPolicy(m, _init(m, jnp.zeros((1, 4))), options=FlaxPolicyOptions(kind="values"))


# -- part 3: the command line routes a flax params file given with --model to rlviz.jax.load ----------------------
def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.run([sys.executable, "-m", "rlviz", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_render_routes_a_flax_file_with_model_to_the_jax_loader(seed_file, tmp_path):
    path, _ = seed_file
    # was: "none of CleanRL's JAX scripts' agents rlviz knows"; now the JAX loader's own one line
    r = _cli("render", str(path), "--model", SEED_FLAGS["model"], "--critic", SEED_FLAGS["critic"], "--env",
             "CartPole-v1", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 2 and "CleanRL" not in r.stderr and "Traceback" not in r.stderr
    assert "a flax agent runs on a JAX env" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_resolve_agent_loads_the_seed_agent_from_the_config(seed_file):
    from rlviz.config import RenderConfig
    from rlviz.jobs.stages import resolve_agent, wants_jax_agent

    path, p = seed_file
    config = RenderConfig(checkpoint=str(path), env=ENV, model=SEED_FLAGS["model"], critic=SEED_FLAGS["critic"],
                          critic_kwargs='{"hidden": 64}', env_kwargs='{"max_steps_in_episode": 300}')
    assert wants_jax_agent(config)
    agent, _, gamma = resolve_agent(config)
    assert isinstance(agent.policy, FlaxPolicy) and gamma == pytest.approx(0.99)
    assert agent.recipe.env_kwargs == {"max_steps_in_episode": 300}
    out = _batched(agent.policy, _obs(2))
    np.testing.assert_allclose(out.value, SeedCritic().apply({"params": p["critic"]}, _obs(2)), atol=1e-5)
    # CleanRL's JAX files (no --model, a gymnasium id) stay on the torch path
    assert not wants_jax_agent(RenderConfig(checkpoint=str(path), env="CartPole-v1"))


def test_import_rlviz_and_the_torch_paths_import_no_jax():
    code = ("import sys, rlviz, rlviz.jax, rlviz.jobs.stages, rlviz.jobs.render, rlviz.sources.cleanrl.jax_files; "
            "assert not [m for m in sys.modules if m == 'jax' or m.startswith(('jax.', 'flax', 'orbax'))], "
            "sorted(m for m in sys.modules if m.startswith(('jax', 'flax')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_missing_jax_names_the_extra_in_one_line(seed_file, tmp_path):
    path, _ = seed_file
    code = ("import sys; sys.modules['flax'] = None\n"
            "from rlviz.errors import UsageError\nimport rlviz.jax\n"
            "try:\n    rlviz.jax.load_jax_agent\nexcept UsageError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    assert 'pip install "rlviz[jax]"' in r.stdout and "flax" in r.stdout, r.stderr[-2000:]


# -- part 4: saliency in JAX -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def seed_policy():
    p = seed_params()
    return FlaxPolicy(SeedActor(), p["actor"], critic=SeedCritic(), critic_params=p["critic"],
                      options=FlaxPolicyOptions(obs_shape=(10, 10, 4))), p


def test_gradient_saliency_equals_a_hand_computed_jax_grad(seed_policy):
    from rlviz.jax.saliency import gradient, smoothgrad

    policy, p = seed_policy
    obs = _obs(3)
    maps = np.asarray(gradient(policy, policy.params, obs))
    assert maps.shape == obs.shape and maps.dtype == np.float32 and (maps >= 0).all() and maps.max() > 0
    for i in range(3):
        a = int(jnp.argmax(SeedActor().apply({"params": p["actor"]}, obs[i][None])[0]))
        hand = jax.grad(lambda o, a=a: SeedActor().apply({"params": p["actor"]}, o[None])[0, a])(obs[i])
        np.testing.assert_allclose(maps[i], np.abs(hand), rtol=1e-5, atol=1e-7)
    hand_v = jax.grad(lambda o: SeedCritic().apply({"params": p["critic"]}, o[None])[0])(obs[0])
    np.testing.assert_allclose(gradient(policy, policy.params, obs[:1], target="value")[0], np.abs(hand_v),
                               rtol=1e-5, atol=1e-7)
    # SmoothGrad without noise is the gradient; with noise, a mean of |gradients|: shaped alike, >= 0
    np.testing.assert_allclose(smoothgrad(policy, policy.params, obs, n_samples=2, noise_level=0.0), maps,
                               rtol=1e-5, atol=1e-7)
    sg = np.asarray(smoothgrad(policy, policy.params, obs, n_samples=4))
    assert sg.shape == obs.shape and (sg >= 0).all() and not np.allclose(sg, maps)
    with pytest.raises(UsageError, match="target="):
        gradient(policy, policy.params, obs, target="logits")


def test_perturbation_saliency_is_greydanus_score_per_cell(seed_policy):
    from rlviz.explain.perturbation import mask_grid
    from rlviz.jax.saliency import perturbation

    policy, p = seed_policy
    obs = (_obs(2) > 0.8).astype(jnp.float32)  # one-hot-like MinAtar planes
    maps = np.asarray(perturbation(policy, policy.params, obs))
    assert maps.shape == obs.shape and (maps >= 0).all() and maps.max() > 0
    masks = mask_grid(10, 10, 0.5, 1).masks.numpy()  # the torch method's masks: radius 0.5, stride 1
    logits = np.asarray(SeedActor().apply({"params": p["actor"]}, obs))
    for f, (i, j) in ((0, (3, 4)), (1, (9, 0))):
        o = np.asarray(obs[f])
        pert = o + (o.mean(axis=(0, 1), keepdims=True) - o) * masks[i * 10 + j][..., None]
        lp = np.asarray(SeedActor().apply({"params": p["actor"]}, pert[None]))[0]
        want = 0.5 * np.sum((logits[f] - lp) ** 2)
        np.testing.assert_allclose(maps[f, i, j], np.full(4, want), rtol=1e-4, atol=1e-7)
    with pytest.raises(UsageError, match="image observations"):
        m = QNetwork()
        perturbation(FlaxPolicy(m, _init(m, jnp.zeros((1, 4))), options=FlaxPolicyOptions(obs_shape=(4,), kind="q")),
                     None, jnp.zeros((1, 4)))


# -- part 2: each params format round-trips; each reader refuses damage in one line --------------------------------
def _write(fmt: str, tree: dict, folder: Path) -> Path:
    from rlviz.jax.params import flatten_tree

    if fmt == "msgpack":
        path = folder / "agent.msgpack"
        path.write_bytes(fs.to_bytes(tree))
    elif fmt == "npz":
        path = folder / "agent.npz"
        np.savez(path, **flatten_tree(tree))
    else:
        import orbax.checkpoint as ocp

        path = folder / "orbax"
        with ocp.PyTreeCheckpointer() as ckptr:
            ckptr.save(path.resolve(), jax.tree_util.tree_map(np.asarray, tree))
    return path


@pytest.mark.parametrize("fmt", ["msgpack", "npz", "orbax"])
def test_each_params_format_round_trips_and_loads(fmt, tmp_path):
    from rlviz.jax.params import read_params

    p = seed_params(seed=3)
    path = _write(fmt, p, tmp_path)
    tree, found = read_params(path)
    assert found == fmt
    want = jax.tree_util.tree_leaves_with_path(p)
    got = dict(jax.tree_util.tree_leaves_with_path(tree))
    assert len(got) == len(want)
    for k, v in want:
        np.testing.assert_array_equal(got[k], np.asarray(v))
    agent = load_jax_agent(path, **SEED_FLAGS)
    assert agent.format == f"flax-{fmt}"
    out = _batched(agent.policy, _obs(2))
    np.testing.assert_allclose(out.logits, SeedActor().apply({"params": p["actor"]}, _obs(2)), atol=1e-5)


@pytest.mark.parametrize("fmt", ["msgpack", "npz", "orbax"])
def test_damaged_params_files_give_one_line(fmt, tmp_path):
    from rlviz.jax.params import read_params

    path = _write(fmt, seed_params(), tmp_path)
    files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
    rng = np.random.default_rng(0)
    for trial in range(12):
        victim = files[trial % len(files)]
        original = victim.read_bytes()
        data = bytearray(original)
        if trial % 3 == 0:
            data = data[: max(1, int(len(data) * rng.uniform(0.05, 0.95)))]
        else:
            for i in rng.integers(0, len(data), size=max(1, len(data) // 50)):
                data[int(i)] = int(rng.integers(0, 256))
        victim.write_bytes(bytes(data))
        try:
            read_params(path)
        except RlvizError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
        finally:
            victim.write_bytes(original)
    path_bad = tmp_path / "bad.msgpack"
    path_bad.write_bytes(b"\x81\xa1a\xc7\xff\x01" + b"\x00" * 10)  # an ext claiming 255 bytes that are not there
    with pytest.raises(CheckpointError):
        read_params(path_bad)
    with pytest.raises(CheckpointError, match="not a flax params file"):
        (tmp_path / "x.bin").write_bytes(b"hello")
        read_params(tmp_path / "x.bin")


# -- SBX and rejax ------------------------------------------------------------------------------------------------
def test_sbx_zip_is_refused_in_one_line_naming_the_pickle(tmp_path):
    sbx = pytest.importorskip("sbx")
    path = tmp_path / "sbx_ppo.zip"
    sbx.PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, n_epochs=1).save(path)
    with pytest.raises(CheckpointError) as e:
        load_jax_agent(path, env="gymnax:CartPole-v1")
    assert "SBX" in str(e.value) and "unpickle" in str(e.value) and "\n" not in str(e.value)
    r = _cli("render", str(path), "--env", "CartPole-v1", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 1 and "is an SBX" in r.stderr and "Traceback" not in r.stderr  # was: "unknown layout"


def test_rejax_train_state_loads_with_its_classes_and_says_the_flags_without(tmp_path):
    rejax = pytest.importorskip("rejax")
    algo = rejax.PPO.create(env="CartPole-v1", agent_kwargs={"hidden_layer_sizes": (32, 16)})
    ts = algo.init_state(jax.random.PRNGKey(0))
    path = tmp_path / "rejax.msgpack"
    path.write_bytes(fs.to_bytes(ts))
    with pytest.raises(UsageError) as e:
        load_jax_agent(path, env="gymnax:CartPole-v1")
    flags = str(e.value)
    assert "rejax train state" in flags and '"hidden_layer_sizes": [32, 16]' in flags and "\n" not in flags
    kw = {"hidden_layer_sizes": [32, 16], "activation": "swish"}
    agent = load_jax_agent(path, model="rejax.networks:DiscretePolicy", model_kwargs=kw,
                           critic="rejax.networks:VNetwork", critic_kwargs=json.dumps(kw), env="gymnax:CartPole-v1")
    obs = _obs(3, (4,))
    out = _batched(agent.policy, obs)
    assert agent.kind == "actor_critic" and agent.metadata["params_layout"] == "rejax train state"
    want = algo.actor.apply(ts.actor_ts.params, obs, method="_action_dist").logits
    np.testing.assert_allclose(out.logits, want, atol=1e-5)
    np.testing.assert_allclose(out.value, algo.critic.apply(ts.critic_ts.params, obs), atol=1e-5)


def test_the_first_keyword_form_still_works_with_a_deprecation_warning(seed_file):
    """FlaxPolicy(..., obs_shape=, kind=) and load_jax_agent(..., kind=, gamma=): the same objects as the options
    dataclasses give, with a DeprecationWarning naming them."""
    path, p = seed_file
    with pytest.warns(DeprecationWarning, match=r"options=FlaxPolicyOptions\(\.\.\.\)"):
        old = FlaxPolicy(SeedActor(), p["actor"], obs_shape=(10, 10, 4), kind="q")
    new = FlaxPolicy(SeedActor(), p["actor"], options=FlaxPolicyOptions(obs_shape=(10, 10, 4), kind="q"))
    assert (old.kind, old.obs_shape, old.action_names) == (new.kind, new.obs_shape, new.action_names) == (
        "q", (10, 10, 4), ("0", "1", "2"))
    with pytest.warns(DeprecationWarning, match=r"options=JaxAgentOptions\(\.\.\.\)"):
        agent = load_jax_agent(path, **SEED_FLAGS, gamma=0.9)
    assert agent.gamma == 0.9 == load_jax_agent(path, **SEED_FLAGS, options=JaxAgentOptions(gamma=0.9)).gamma
    with pytest.raises(UsageError, match="expected a rlviz.jax.FlaxPolicyOptions"):
        FlaxPolicy(SeedActor(), p["actor"], options={"kind": "q"})
