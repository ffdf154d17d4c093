"""``annotate(state=...)``: a loop that carries its own recurrent state hands it to the recorder per step (torch or
numpy, one tensor or an LSTM's (h, c), one row per sub-env for the vector recorder); the memory panel and the
``.npz``'s memory are drawn from it; a loop that forgets to reset it at an episode start gets ``state_not_reset``
(one warning, and ``state_not_reset`` in that episode's ``.npz``), a loop that resets does not. Planted on the
memory probe of tests/_memory_probe.py (TinyMemory's "cue" agent latches the cue in its state)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from _memory_probe import CUE_ID, K, TinyMemory

from rlviz import RecordEpisode, RecordOptions, RecordVectorEpisode
from rlviz.errors import UsageError


def _options():
    return RecordOptions(background=False)


def _single_loop(tmp_path, reset: bool, episodes: int = 3, as_tuple: bool = False):
    """The user's own loop: the cue agent's state carried by the loop, annotated before each env step."""
    policy = TinyMemory("cue")
    env = RecordEpisode(gym.make(CUE_ID, render_mode="rgb_array"), tmp_path, episode_trigger=lambda k: True,
                        options=_options())
    state, carried = policy.initial_state(1), []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in range(episodes):
            obs, _ = env.reset(seed=seed)
            if reset:
                state = policy.initial_state(1)
            done, rows = False, []
            while not done:
                h = torch.as_tensor(state[0])
                rows.append(state[0][0].copy())
                out, new = policy.step(obs[None], state)
                env.annotate(logits=torch.as_tensor(out.logits[0]), value=float(out.value[0]),
                             state=(h, torch.zeros_like(h)) if as_tuple else h)
                obs, _, term, trunc, _ = env.step(int(out.logits[0].argmax()))
                state, done = new, term or trunc
            carried.append(np.stack(rows))
        env.close()
    data = [np.load(tmp_path / f"rl-video-episode-{k}.npz") for k in range(episodes)]
    said = [w for w in caught if "state_not_reset" in str(w.message)]
    assert all(w.filename == __file__ for w in said)  # pointed at the loop's annotate line
    return data, carried, [str(w.message) for w in said]


def test_the_npz_memory_is_the_annotated_state(tmp_path):
    data, carried, said = _single_loop(tmp_path, reset=True)
    assert said == []
    for d, rows in zip(data, carried):
        assert d["memory"].shape == (K + 2, 2) and str(d["memory_projection"]) == "units"
        np.testing.assert_allclose(d["memory"][: K + 1], rows, atol=1e-3)  # float16, row t: carried into step t
        np.testing.assert_allclose(d["memory"][K + 1], rows[-1], atol=1e-3)  # the frame after the last step
        np.testing.assert_allclose(d["memory_norm"][: K + 1], np.linalg.norm(rows, axis=1), atol=1e-5)
        assert str(d["memory_kind"]) == "other" and np.isnan(d["memory_saturation"]).all()  # one tensor: not judged
        assert not bool(d["state_not_reset"]) and float(d["state_start_gap"]) == 0.0
        assert "memory_saliency" not in d.files  # no policy: nothing to take apart


def test_a_loop_that_does_not_reset_gets_state_not_reset(tmp_path):
    data, carried, said = _single_loop(tmp_path, reset=False, as_tuple=True)
    assert len(said) == 1 and "\n" not in said[0] and "episode 1" in said[0]  # once, at the first episode it saw
    assert [bool(d["state_not_reset"]) for d in data] == [False, True, True]
    for d, rows in zip(data[1:], carried[1:]):
        assert float(d["state_start_gap"]) == pytest.approx(np.abs(rows[0]).max(), abs=1e-6) and rows[0].any()
        assert np.abs(rows[0][0]) > 0.5  # the cue the episode before latched
    assert str(data[0]["memory_kind"]) == "lstm"  # (h, c): its h is shown and judged for saturation


def _vector_loop(tmp_path, reset: bool, steps: int = 4 * (K + 1)):  # 4 whole episodes per sub-env
    policy = TinyMemory("cue")
    same_step = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP} if hasattr(gym.vector, "AutoresetMode") else {}
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(CUE_ID, render_mode="rgb_array")] * 2,
                                    **same_step)  # gymnasium 0.29 (CleanRL's pin) has only same-step autoreset
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record=(0, 1), episode_trigger=lambda k: True,
                              options=RecordOptions(background=False, sinks=None))
    obs, _ = rec.reset(seed=0)
    state = policy.initial_state(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(steps):
            out, new = policy.step(obs, state)
            rec.annotate(logits=out.logits, state=np.asarray(state[0]))
            obs, _, term, trunc, _ = rec.step(out.logits.argmax(-1))
            done = term | trunc
            state = (np.where(done[:, None], 0.0, new[0]).astype(np.float32),) if reset else new
        rec.close()
    files = sorted(tmp_path.glob("*.npz"))
    return [np.load(f) for f in files], [str(w.message) for w in caught if "state_not_reset" in str(w.message)]


def test_the_vector_recorder_takes_each_sub_envs_row_and_flags_the_loop_that_does_not_reset(tmp_path):
    data, said = _vector_loop(tmp_path / "reset", reset=True)
    assert len(data) == 8 and said == [] and not any(bool(d["state_not_reset"]) for d in data)
    assert all(d["memory"].shape == (K + 2, 2) and not d["memory"][0].any() for d in data)
    data, said = _vector_loop(tmp_path / "carried", reset=False)
    assert len(said) == 1 and "sub-env" in said[0]
    flags = sorted(bool(d["state_not_reset"]) for d in data)
    assert flags.count(False) == 2 and flags.count(True) == len(data) - 2  # each sub-env's first episode starts at 0


@pytest.mark.parametrize("value,match", [
    ("abc", "str"), (np.array([np.nan, 1.0]), "non-finite"), (np.zeros(0), "empty"),
    ((torch.zeros(2), "x"), "str"), (np.array([1 + 1j]), "complex"), ({"h": 1}, "dict"),
])
def test_odd_states_are_refused_in_one_line(tmp_path, value, match):
    env = RecordEpisode(gym.make(CUE_ID, render_mode="rgb_array"), tmp_path, episode_trigger=lambda k: True,
                        options=_options())
    env.reset(seed=0)
    with pytest.raises(UsageError, match=match) as err:
        env.annotate(logits=[0.0, 1.0], state=value)
    assert "\n" not in str(err.value)
    env.annotate(logits=[0.0, 1.0], state=np.zeros(2))
    env.step(0)
    with pytest.raises(UsageError, match="same state layout"):
        env.annotate(logits=[0.0, 1.0], state=np.zeros(3))
    env.close()


def test_the_vector_recorder_refuses_a_state_without_a_row_per_sub_env(tmp_path):
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(CUE_ID, render_mode="rgb_array")] * 2)
    rec = RecordVectorEpisode(envs, tmp_path, envs_to_record=(0, 1), episode_trigger=lambda k: True,
                              options=RecordOptions(background=False, sinks=None))
    rec.reset(seed=0)
    with pytest.raises(UsageError, match="one row per sub-env") as err:
        rec.annotate(logits=np.zeros((2, 2)), state=np.zeros((3, 4)))
    assert "\n" not in str(err.value)
    rec.annotate(logits=np.zeros((2, 2)), state=(torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)))  # nn.LSTM's layout
    rec.close()
