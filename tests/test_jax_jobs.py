"""The jobs on flax agents and JAX envs beyond render: ``rlviz compare A B`` (paired on the same episode keys, its
statistics against a paired computation written here by hand from a plain gymnax loop) and ``rlviz explore``
(an episode replayed on demand, equal to ``rlviz render --videos episode:N``; the run folder's trust checks)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("gymnax")
import flax.serialization as fs  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from tests._flax_seed import SeedActor, seed_params  # noqa: E402

ENV = "gymnax:Breakout-MinAtar"
STEPS = 60  # --env-kwargs max_steps_in_episode: short episodes, a few compiled chunks
FLAGS = {"env": ENV, "model": "tests._flax_seed:SeedActor", "critic": "tests._flax_seed:SeedCritic",
         "env_kwargs": json.dumps({"max_steps_in_episode": STEPS})}


@pytest.fixture(scope="module")
def agents(tmp_path_factory) -> tuple[Path, Path]:
    """Two seed-shaped agents (flax actor + critic, separate params) with different weights."""
    folder = tmp_path_factory.mktemp("agents")
    paths = []
    for s in (0, 1):
        path = folder / f"agent{s}.msgpack"
        path.write_bytes(fs.to_bytes(seed_params(s)))
        paths.append(path)
    return paths[0], paths[1]


def _returns_by_hand(params_file: Path, episodes: int, seed: int) -> np.ndarray:
    """Each episode's return from a plain gymnax loop, one step at a time: episode k's key is
    ``jax.random.key(episode_seed_for(seed, k))`` split into the reset's and the steps' keys; step t's key is
    ``fold_in(steps_key, t)`` split into the action's and the env's (the engine's documented scheme); the action is a
    sample of the actor's logits; the episode ends when gymnax says done or after STEPS steps."""
    import gymnax

    from rlviz.evaluate.rollouts.rollout import episode_seed_for

    p = fs.msgpack_restore(params_file.read_bytes())
    env, env_params = gymnax.make("Breakout-MinAtar")
    env_params = env_params.replace(max_steps_in_episode=STEPS)

    @jax.jit
    def step(state, obs, key, t):
        k_act, k_env = jax.random.split(jax.random.fold_in(key, t))
        logits = SeedActor().apply({"params": p["actor"]}, obs.reshape(-1, 10, 10, 4).astype(jnp.float32))[0]
        action = jax.random.categorical(k_act, logits)
        obs2, state2, reward, done, _ = env.step_env(k_env, state, action, env_params)
        return state2, obs2, reward, done

    out = []
    for k in range(episodes):
        k_reset, k_steps = jax.random.split(jax.random.key(episode_seed_for(seed, k)))
        obs, state = env.reset_env(k_reset, env_params)
        ret, t, done = 0.0, 0, False
        while not done and t < STEPS:
            state, obs, reward, done = step(state, obs, k_steps, t)
            ret += float(reward)
            t += 1
        out.append(ret)
    return np.array(out)


def test_compare_two_flax_agents_gives_the_hand_written_paired_statistics(agents, tmp_path):
    import rlviz
    from rlviz.evaluate.statistics.paired import BOOTSTRAP_SEED, RESAMPLES

    a, b = agents
    n, seed = 24, 3
    out = rlviz.compare(a=str(a), b=str(b), episodes=n, seed=seed, heatmap=True, videos="worst:1",
                        out=tmp_path / "cmp", **FLAGS)
    ra, rb = _returns_by_hand(a, n, seed), _returns_by_hand(b, n, seed)
    d = rb - ra
    assert np.any(d != 0)  # two agents that play differently
    c = json.loads(Path(out.comparison_json).read_text())
    assert c["episodes"] == n and c["env_id"] == ENV
    assert c["return_diff"]["mean"] == pytest.approx(d.mean(), abs=1e-12)
    assert c["return_diff"]["median"] == pytest.approx(np.median(d), abs=1e-12)
    assert c["prob_improvement"] == pytest.approx(np.mean(d > 0) + 0.5 * np.mean(d == 0), abs=1e-12)
    idx = np.random.default_rng(BOOTSTRAP_SEED).integers(0, n, size=(RESAMPLES, n))  # the paired bootstrap, by hand
    np.testing.assert_allclose(c["return_diff"]["ci95"], np.percentile(d[idx].mean(axis=1), [2.5, 97.5]), atol=1e-12)
    cut = n // 4

    def iqm(x):
        return np.sort(x, axis=-1)[..., cut:n - cut].mean(axis=-1)

    assert c["iqm"]["diff"]["value"] == pytest.approx(iqm(rb) - iqm(ra), abs=1e-12)
    np.testing.assert_allclose(c["iqm"]["diff"]["ci95"], np.percentile(iqm(rb[idx]) - iqm(ra[idx]), [2.5, 97.5]),
                               atol=1e-12)
    assert c["a"]["returns"]["mean"] == pytest.approx(ra.mean()) and c["b"]["returns"]["mean"] == pytest.approx(rb.mean())
    rows = list(csv.DictReader(Path(out.episodes_csv).open()))
    assert [float(r["a_return"]) for r in rows] == ra.tolist() and [float(r["b_return"]) for r in rows] == rb.tolist()
    assert [float(r["return_diff"]) for r in rows] == d.tolist()
    # the heatmap difference and the worst pair's videos: both agents on the same episode, side by side
    assert out.heatmap_npz is not None and Path(out.heatmap_npz).is_file()
    worst = int(np.argsort(d, kind="stable")[0])
    assert [Path(v).name for v in out.videos] == [f"worst-{worst}.mp4"]
    for side, r in (("a", ra), ("b", rb)):
        data = np.load(tmp_path / "cmp" / "videos" / side / f"worst-{worst}-episode-0.npz")
        assert float(data["rewards"].sum()) == r[worst]


def test_compare_on_a_jax_env_refuses_what_it_cannot_do(agents, tmp_path):
    import rlviz
    from rlviz.errors import UsageError

    a, b = agents
    with pytest.raises(UsageError, match="--disagreements 2: .* JAX env"):
        rlviz.compare(a=str(a), b=str(b), episodes=2, disagreements=2, out=tmp_path / "c1", **FLAGS)
    with pytest.raises(UsageError, match="--attention: the JAX engine measures no attention"):
        rlviz.compare(a=str(a), b=str(b), episodes=2, attention=True, saliency="gradient", heatmap=True,
                      out=tmp_path / "c2", **FLAGS)
    with pytest.raises(UsageError, match="failed-at:11,3: the pixel is outside the failure heatmap's 10x10"):
        rlviz.compare(a=str(a), b=str(b), episodes=2, heatmap=True, videos="failed-at:11,3", out=tmp_path / "c3",
                      **FLAGS)


def test_explore_opens_an_episode_of_a_jax_run_equal_to_videos_episode_n(agents, tmp_path):
    """A render run of the seed agent (no videos) opened in the explorer: episode N replayed on demand gives the
    files ``rlviz render --videos episode:N`` writes (every frame and every array of the .npz equal)."""
    import rlviz
    from rlviz.config import ExploreConfig
    from rlviz.errors import UnsafeCheckpointError, UsageError
    from rlviz.explore.replay import EpisodeRenderer
    from rlviz.explore.server import open_run
    from rlviz.media import read_video

    a, _ = agents
    common = dict(checkpoint=str(a), episodes=20, seed=5, heatmap=True, saliency="gradient", **FLAGS)
    run = rlviz.render(videos="none", out=tmp_path / "run", **common)
    rows = list(csv.DictReader(Path(run.episodes_csv).open()))
    n = max(range(20), key=lambda k: (int(rows[k]["length"]), -k))  # the longest episode
    ref = rlviz.render(videos=f"episode:{n}", out=tmp_path / "ref", **common)
    want = Path(ref.videos[0])
    assert want.name == f"episode-{n}-episode-0.mp4"
    # the run names code (--model, --critic): refused without --trust-checkpoint, each named
    options = json.loads((tmp_path / "run" / "rlviz-run.json").read_text())["options"]
    with pytest.raises(UsageError, match="--model tests._flax_seed:SeedActor, --critic tests._flax_seed:SeedCritic"):
        EpisodeRenderer(options)
    index, cache = open_run(ExploreConfig(out=tmp_path / "run", port=0, browser=False, trust_checkpoint=True))
    assert index.job == "render"
    cache.render(n)  # what the page's "open" runs (in the server's worker thread)
    got = cache.video(n)
    assert got is not None and got.name == want.name and cache.video(n, "plain") is not None
    frames_got, frames_want = list(read_video(got)), list(read_video(want))
    assert len(frames_got) == len(frames_want) > int(rows[n]["length"])
    assert all(np.array_equal(x, y) for x, y in zip(frames_got, frames_want))
    with np.load(got.with_suffix(".npz")) as zg, np.load(want.with_suffix(".npz")) as zw:
        assert zg.files == zw.files and "value" in zg.files
        for k in zg.files:
            np.testing.assert_array_equal(zg[k], zw[k], err_msg=k)
    # the run folder's env id: a JAX family's is made by rlviz's own table (no import by name), another module's is not
    plain = {"checkpoint": str(a), "env": ENV, "env_kwargs": FLAGS["env_kwargs"]}
    assert EpisodeRenderer(plain).options["env"] == ENV
    with pytest.raises(UnsafeCheckpointError, match="import the module 'evil'"):
        EpisodeRenderer({**plain, "env": "evil:Breakout-MinAtar"})
    with pytest.raises(UnsafeCheckpointError, match="env keyword argument"):
        EpisodeRenderer({**plain, "env_kwargs": json.dumps({"generator": "evil.mod:Gen"})})
