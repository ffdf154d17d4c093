"""rlviz.jax.record_batch and batch_recorder: a PureJaxRL batch's episodes cut at ``done`` exactly (an env whose
episode lengths are known), the .npz's probabilities / values / rewards equal to the batch's, the videos decoded back,
frames from observations equal to frames from states, and the recorder inside a whole-jitted train: videos at the
right updates, logged at the right global step, params bit-identical with and without it."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("gymnax")
pytest.importorskip("optax")
jnp = jax.numpy

from rlviz.errors import UsageError  # noqa: E402
from rlviz.jax.batch import cut_episodes  # noqa: E402
from rlviz.jax.envs.base import JaxEnvBase  # noqa: E402
from rlviz.media.decode import read_video  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from _purejaxrl import Transition, make_train, same_params  # noqa: E402


class CountEnv(JaxEnvBase):
    """An episode lasts ``params`` steps (an int per env); the reward of step t is t + 1; the observation is a 4 x 4
    image with the cell of the step count lit, so frames are drawn from observations (or from the state: the same)."""

    env_id, family, obs_shape, action_names, discrete, max_steps, fps = "test:count", "test", (4, 4, 3), \
        ("A", "B", "C"), True, 100, 10.0

    def reset(self, key, params):
        return self._obs(jnp.int32(0)), jnp.int32(0)

    def step(self, key, state, action, params):
        t = state + 1
        return self._obs(t), t, t.astype(jnp.float32), t >= params, jnp.bool_(False)

    @staticmethod
    def _obs(t):
        return jnp.zeros(48).at[3 * (t % 16)].set(1.0).reshape(4, 4, 3)

    def frame(self, state):
        return (np.asarray(self._obs(jnp.int32(state))) * 255).astype(np.uint8)


class VectorCountEnv(CountEnv):
    """CountEnv whose observations are vectors: nothing to draw them from."""

    obs_shape = (48,)

    def frames_from_observations(self, observations):
        return None


def count_batch(lengths, steps, seed=0, keep_state=False):
    """PureJaxRL's collection loop on CountEnv (auto-reset at done), one env per episode length in ``lengths``."""
    env = CountEnv()
    params = jnp.asarray(lengths, jnp.int32)
    n = len(lengths)

    def body(carry, key):
        obs, state = carry
        k1, k2 = jax.random.split(key)
        logits = 3.0 * jax.random.normal(k1, (n, 3))
        value = jax.random.normal(k2, (n,))
        action = jax.random.categorical(k1, logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
        obs2, state2, reward, term, trunc = jax.vmap(env.step, (None, 0, 0, 0))(key, state, action, params)
        done = term | trunc
        obs0, state0 = jax.vmap(env.reset, (None, 0))(key, params)
        obs2 = jnp.where(done[:, None, None, None], obs0, obs2)
        state2 = jnp.where(done, state0, state2)
        return (obs2, state2), Transition(done, action, value, reward, log_prob, obs, logits,
                                          state if keep_state else None)

    start = jax.vmap(env.reset, (None, 0))(jax.random.key(seed), params)
    _, batch = jax.lax.scan(body, start, jax.random.split(jax.random.key(seed), steps))
    return jax.device_get(batch), env


def _softmax(x):
    x = np.asarray(x, np.float64)
    z = np.exp(x - x.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def test_cut_episodes_at_done_exactly():
    done = np.zeros((10, 2), bool)
    done[[2, 5, 9], 0] = True  # env 0: episodes end at rows 2, 5, 9
    done[[6], 1] = True
    got = [(e.env, e.start, e.stop, e.whole, e.ended) for e in cut_episodes(done, None)]
    assert got == [(0, 3, 6, True, True), (0, 6, 10, True, True)]  # rows 0..2 continue an earlier episode
    got = [(e.env, e.start, e.stop, e.whole, e.ended) for e in cut_episodes(done, [1], from_reset=True, partial=True)]
    assert got == [(1, 0, 7, True, True), (1, 7, 10, False, False)]
    with pytest.raises(UsageError, match="not among the batch's 2 envs"):
        cut_episodes(done, [2])


def test_npz_equals_the_batch_and_episodes_have_their_known_lengths(tmp_path):
    import rlviz.jax as rj

    lengths, steps = (3, 5), 10
    batch, env = count_batch(lengths, steps)
    videos = rj.record_batch(batch, env, None, tmp_path, envs=None, episodes=100,
                             options=rj.BatchVideoOptions(from_reset=True))
    want = [(n, k * L) for n, L in enumerate(lengths) for k in range(steps // L)]
    assert [(v.env, v.start) for v in videos] == want
    for v in videos:
        L = lengths[v.env]
        assert v.length == L and v.terminated and not v.truncated
        rows = slice(v.start, v.start + L)
        data = np.load(v.path.with_suffix(".npz"))
        np.testing.assert_allclose(data["probs"][:L], _softmax(batch.logits[rows, v.env]), rtol=0, atol=1e-6)
        np.testing.assert_array_equal(data["probs"][L], data["probs"][L - 1])  # the frame after the end: held
        np.testing.assert_array_equal(data["value"][:L], batch.value[rows, v.env])
        np.testing.assert_array_equal(data["rewards"], batch.reward[rows, v.env])
        np.testing.assert_array_equal(data["rewards"], np.arange(1, L + 1, dtype=np.float32))
        np.testing.assert_array_equal(data["actions"], batch.action[rows, v.env])
        np.testing.assert_array_equal(data["extra_log_prob"][:L], batch.log_prob[rows, v.env])
        assert bool(data["terminated"]) and v.ret == L * (L + 1) / 2
    frames = list(read_video(videos[0].path))
    assert len(frames) >= lengths[0] + 1 and frames[0].ndim == 3


def test_order_partial_and_nothing_found(tmp_path):
    import rlviz.jax as rj

    batch, env = count_batch((4, 6), 10)
    best = rj.record_batch(batch, env, None, tmp_path / "best", envs=None, episodes=1,
                           options=rj.BatchVideoOptions(order="best", from_reset=True))
    assert [(best[0].env, best[0].length)] == [(1, 6)]  # return 21 beats 10
    with pytest.warns(UserWarning, match="No whole episode in envs \\[1\\]"):
        assert rj.record_batch(batch, env, None, tmp_path / "none", envs=[1]) == []  # rows 0..5 began before
    parts = rj.record_batch(batch, env, None, tmp_path / "parts", envs=[1], episodes=5,
                            options=rj.BatchVideoOptions(partial=True))
    assert [(v.start, v.length, v.terminated) for v in parts] == [(0, 6, True), (6, 4, False)]


def test_frames_from_states_equal_frames_from_observations(tmp_path):
    import rlviz.jax as rj

    batch, env = count_batch((3,), 6, keep_state=True)
    a = rj.record_batch(batch, env, None, tmp_path / "state", episodes=1)
    b = rj.record_batch(batch._replace(env_state=None), env, None, tmp_path / "obs", episodes=1)
    for x, y in zip(read_video(a[0].path), read_video(b[0].path)):
        np.testing.assert_array_equal(x, y)


def test_minatar_frames_from_flattened_observations_are_its_state_frames():
    import gymnax
    from gymnax.wrappers.purerl import FlattenObservationWrapper, LogWrapper

    from rlviz.jax_loop.recording import jax_env_of

    base, params = gymnax.make("Breakout-MinAtar")
    env = jax_env_of(LogWrapper(FlattenObservationWrapper(base)))
    assert env.env_id == "gymnax:Breakout-MinAtar"
    obs, state = base.reset(jax.random.key(1), params)
    states, observations = [], []
    for t in range(5):
        states.append(jax.device_get(state))
        observations.append(np.asarray(obs).reshape(-1))
        obs, state, *_ = base.step(jax.random.key(t), state, 1, params)
    from_obs = env.frames_from_observations(np.stack(observations))
    np.testing.assert_array_equal(from_obs, np.stack([env.frame(s) for s in states]))


def test_no_frames_is_one_usage_error_and_one_warning_in_the_loop(tmp_path):
    import rlviz.jax as rj

    batch, _ = count_batch((3,), 6)
    env = VectorCountEnv()
    batch = batch._replace(obs=np.asarray(batch.obs).reshape(6, 1, 48))
    with pytest.raises(UsageError, match="cannot draw frames from its observations .* keep the env states"):
        rj.record_batch(batch, env, None, tmp_path)
    with pytest.raises(UsageError, match="no logits"):
        rj.record_batch(batch._replace(logits=None), CountEnv(), None, tmp_path)
    recorder = rj.batch_recorder(env, None, tmp_path)
    with pytest.warns(UserWarning, match="records nothing: .*cannot draw frames"):
        recorder(0, batch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recorder(1, batch)  # said once
    assert recorder.off and not list(tmp_path.rglob("*.mp4"))


def test_recorder_inside_jitted_train_writes_at_its_updates_and_changes_nothing(tmp_path):
    import rlviz.jax as rj
    from rlviz.sinks.files import FolderSink

    plain, env, env_params = make_train(num_updates=4, epochs=1, minibatches=1, hidden=16)
    sink = FolderSink(tmp_path / "sink")
    recorder = rj.batch_recorder(env, env_params, tmp_path / "videos", envs=None, episodes=1,
                                 options=rj.BatchVideoOptions(partial=True, sinks=sink))
    recording, _, _ = make_train(num_updates=4, epochs=1, minibatches=1, hidden=16, record=recorder,
                                  record_every=2)
    key = jax.random.key(0)
    with_rlviz = jax.block_until_ready(jax.jit(recording)(key))
    recorder.wait()
    without = jax.block_until_ready(jax.jit(plain)(key))
    assert same_params(with_rlviz, without)
    assert sorted(p.name for p in (tmp_path / "videos").iterdir()) == ["update-000000", "update-000002"]
    assert [v.global_step for v in recorder.recorded] == [1 * 128, 3 * 128]  # (update + 1) * T * N
    logged = [json.loads(line) for line in (tmp_path / "sink" / "media.jsonl").read_text().splitlines()]
    assert [(r["name"], r["step"]) for r in logged] == [("videos/env-0", 128), ("videos/env-0", 384)]
    for v in recorder.recorded:
        assert len(list(read_video(v.path))) >= v.length + 1


def test_recorder_calls_of_the_runs_of_a_vmapped_train_go_to_their_own_folders(tmp_path):
    import rlviz.jax as rj

    batch, env = count_batch((3,), 8)
    recorder = rj.batch_recorder(env, None, tmp_path, options=rj.BatchVideoOptions(sinks=None))
    recorder(4, batch, np.int32(100))  # what every() hands over: numpy
    recorder(4, batch, np.int32(100))  # the next run's call at the same update
    recorder.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["update-000004", "update-000004-run-1"]
    assert [(v.start, v.length, v.global_step) for v in recorder.recorded] == [(3, 3, 100), (3, 3, 100)]


def test_recorder_sends_only_the_env_columns_it_draws(tmp_path):
    """Inside the jitted update every() hands the recorder what its on_device keeps (env columns 0..max(envs)); the
    video, its .npz and the default global_step ((update + 1) * T * N, the loop's N) are the whole batch's."""
    import rlviz.jax as rj

    batch, env = count_batch((3, 4, 5, 2), 8)
    opt = rj.BatchVideoOptions(sinks=None)
    whole = rj.batch_recorder(env, None, tmp_path / "whole", envs=(1,), options=opt)
    sent = rj.batch_recorder(env, None, tmp_path / "sent", envs=(1,), options=opt)
    assert sent.on_device(batch)[0].obs.shape == (8, 2, 4, 4, 3)  # columns 0 and 1 of 4
    assert rj.batch_recorder(env, None, tmp_path, envs=None).on_device(batch)[0].obs.shape == (8, 4, 4, 4, 3)
    whole(2, batch)
    jax.jit(lambda b: rj.every(1, jnp.int32(2), sent, b))(batch)
    whole.wait()
    sent.wait()
    (a,), (b,) = whole.recorded, sent.recorded
    assert (b.env, b.start, b.length, b.global_step) == (a.env, a.start, a.length, a.global_step) == (1, 4, 4, 96)
    with np.load(a.path.with_suffix(".npz")) as za, np.load(b.path.with_suffix(".npz")) as zb:
        assert za.files == zb.files
        for k in za.files:
            np.testing.assert_array_equal(za[k], zb[k], err_msg=k)


def test_videos_written_at_once_are_those_written_in_turn(tmp_path):
    import rlviz.jax as rj

    batch, env = count_batch((3,), 9)
    got = {}
    for workers in (1, 3):
        got[workers] = rj.record_batch(batch, env, None, tmp_path / str(workers), episodes=3,
                                       options=rj.BatchVideoOptions(from_reset=True, workers=workers))
    assert [(v.start, v.length) for v in got[3]] == [(v.start, v.length) for v in got[1]] == [(0, 3), (3, 3), (6, 3)]
    for a, b in zip(got[1], got[3]):
        x, y = np.load(a.path.with_suffix(".npz")), np.load(b.path.with_suffix(".npz"))
        assert x.files == y.files and all(np.array_equal(x[k], y[k]) for k in x.files)
        assert b.path.parent.name == "3" and b.path.is_file()
