"""``annotate`` survives a fuzzer: every input a training loop might hand it (numbers of any shape and dtype, NaN and
inf, ragged lists, strings, dicts, torch tensors of any dtype) is taken, or refused with exactly one
:class:`RlvizError` of one line; never another exception type. The episode's video is then written (its panels drawn
from what was taken), or its end raises one RlvizError line. Any warning is one line too.

Each step may also carry a recurrent state (``annotate(state=...)``: tensors, arrays, ``(h, c)`` tuples, and odd
ones: empty, ragged, text, NaN, a layout that changes, no row per sub-env). Three recorders are fuzzed: ``RecordEpisode`` on CartPole (Discrete) and Pendulum (Box), ``RecordVectorEpisode`` on
two CartPole sub-envs (batched rows). ``RLVIZ_FUZZ_SEED`` (default 0: deterministic; ``random``: a fresh seed,
printed on failure) and ``RLVIZ_FUZZ_EPISODES`` (per recorder, default 6) as in tests/test_fuzz.py.
"""

from __future__ import annotations

import os
import secrets
import warnings

import gymnasium as gym
import numpy as np
import pytest

from rlviz import RecordEpisode, RecordOptions, RecordVectorEpisode
from rlviz.errors import RlvizError

torch = pytest.importorskip("torch")

STEPS = 6  # steps per fuzzed episode (each step annotated with 1-3 fuzzed fields)


def _seed() -> int:
    given = os.environ.get("RLVIZ_FUZZ_SEED", "0")
    return secrets.randbelow(1 << 30) if given == "random" else int(given)


SPECIAL = [np.nan, np.inf, -np.inf, 1e40, -0.0, 3.0]


def _with_special(rng, shape):
    arr = rng.normal(size=shape)
    if arr.size:
        arr.flat[rng.integers(arr.size)] = rng.choice(SPECIAL)
    return arr


#: one fuzzed annotation value each: f(rng, shape)
MAKERS = [
    lambda rng, shape: float(rng.choice(SPECIAL)),
    lambda rng, shape: int(rng.integers(-5, 5)),
    lambda rng, shape: bool(rng.integers(2)),
    lambda rng, shape: rng.normal(size=shape).astype(
        [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int64, np.bool_][rng.integers(7)]),
    _with_special,
    lambda rng, shape: rng.normal(size=shape).astype(np.complex64),
    lambda rng, shape: np.array(["1", "x"][: max(1, min(2, int(np.prod(shape))))]),
    lambda rng, shape: [[1.0], [1.0, 2.0]] if rng.random() < 0.5 else [1.0, [2.0, 3.0]],
    lambda rng, shape: ["abc", "1.5", b"2", ""][rng.integers(4)],
    lambda rng, shape: {"logits": [0.0, 1.0]},
    lambda rng, shape: rng.normal(size=shape).tolist(),
    lambda rng, shape: torch.as_tensor(rng.normal(size=shape)).to(
        [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.float64][rng.integers(5)]),
    lambda rng, shape: torch.as_tensor(rng.normal(size=shape), dtype=torch.float32).requires_grad_(True) * 2,
    lambda rng, shape: torch.as_tensor(_with_special(rng, shape)).to(torch.float32),
    lambda rng, shape: np.array([object(), 1.0], dtype=object),
    lambda rng, shape: (float(rng.normal()),) * int(rng.integers(1, 4)),
]


def _value(rng: np.random.Generator, rows: int | None):
    """One fuzzed annotation value (``rows``: the vector recorder's sub-env count, to make batched shapes likely)."""
    shape = [(), (1,), (2,), (3,), (2, 1), (1, 2), (0,), (2, 2), (4,)][rng.integers(9)]
    if rows is not None and rng.random() < 0.6:
        shape = (rows,) + shape[:1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the fuzzer's own casts: 1e40 to float32)
        return MAKERS[rng.integers(len(MAKERS))](rng, shape)


def _fields(rng: np.random.Generator, rows: int | None, continuous: bool) -> dict:
    keys = ["mean", "std", "log_std", "value", "q_taken"] if continuous else ["logits", "value", "q_taken"]
    fields = {}
    for _ in range(int(rng.integers(1, 4))):
        key = keys[rng.integers(len(keys))]
        fields[key] = _value(rng, rows)
    return fields


#: one fuzzed recurrent state each (``annotate(state=...)``): f(rng, rows) with rows the sub-env count (None: one env)
STATE_MAKERS = [
    lambda rng, rows: torch.zeros(1 if rows is None else rows, 4),
    lambda rng, rows: np.zeros((4,) if rows is None else (rows, 4), np.float32),
    lambda rng, rows: (torch.randn(1, rows or 1, 3), torch.randn(1, rows or 1, 3)),  # nn.LSTM's (h, c)
    lambda rng, rows: [torch.randn(rows or 1, 3), np.ones((rows or 1, 3))],
    lambda rng, rows: (torch.randn(rows or 1, 3),),
    lambda rng, rows: (torch.randn(rows or 1, 3), None),
    lambda rng, rows: (torch.randn(rows or 1, 3), "c"),
    lambda rng, rows: (),
    lambda rng, rows: torch.randn(rows or 1, int(rng.integers(1, 5))),  # a layout that changes between steps
    lambda rng, rows: torch.randn(3, 5, 2),  # no row per sub-env
    lambda rng, rows: torch.randn(rows or 1, 2).to(torch.bfloat16).requires_grad_(True),
    lambda rng, rows: torch.full((rows or 1, 2), float(rng.choice(SPECIAL))),
    lambda rng, rows: np.zeros((rows or 1, 0)),
    lambda rng, rows: np.array([["a", "b"]] * (rows or 1)),
    lambda rng, rows: np.ones((rows or 1, 2), np.complex64),
    lambda rng, rows: np.ones((rows or 1, 2), bool),
    lambda rng, rows: [[1.0, 2.0], [3.0]],
    lambda rng, rows: {"h": torch.zeros(1, 2)},
    lambda rng, rows: 1.5,
]


def _state(rng: np.random.Generator, rows: int | None) -> dict:
    """``{"state": ...}`` on about half the steps (its own generator: the other fields' sequence is unchanged)."""
    if rng.random() < 0.5:
        return {}
    return {"state": STATE_MAKERS[rng.integers(len(STATE_MAKERS))](rng, rows)}


def _one_line(exc: BaseException, where: str) -> None:
    assert isinstance(exc, RlvizError), f"{where}: raw {type(exc).__name__}: {exc}"
    text = str(exc)
    assert text and "\n" not in text, f"{where}: not one line: {text!r}"


RECORDERS = {
    "CartPole": lambda folder: RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), folder,
                                             episode_trigger=lambda k: True,
                                             options=RecordOptions(background=False)),
    "Pendulum": lambda folder: RecordEpisode(gym.make("Pendulum-v1", render_mode="rgb_array"), folder,
                                             episode_trigger=lambda k: True,
                                             options=RecordOptions(background=False)),
    "vector": lambda folder: RecordVectorEpisode(
        gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array") for _ in range(2)]),
        folder, envs_to_record=(0, 1), episode_trigger=lambda k: True,
        options=RecordOptions(background=False, sinks=None)),
}


@pytest.mark.parametrize("name", sorted(RECORDERS))
def test_annotate_takes_or_refuses_in_one_line_every_input(tmp_path, name):
    seed = _seed()
    rng = np.random.default_rng([seed, sorted(RECORDERS).index(name)])
    states = np.random.default_rng([seed, sorted(RECORDERS).index(name), 1])
    episodes = int(os.environ.get("RLVIZ_FUZZ_EPISODES", "6"))
    rec = RECORDERS[name](tmp_path)
    vector = name == "vector"
    space = rec.single_action_space if vector else rec.action_space
    continuous = isinstance(space, gym.spaces.Box)
    taken = refused = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for episode in range(episodes):
            where = f"{name} episode {episode}; reproduce with RLVIZ_FUZZ_SEED={seed}"
            rec.reset(seed=episode)
            for t in range(STEPS):
                fields = _fields(rng, 2 if vector else None, continuous) | _state(states, 2 if vector else None)
                try:
                    rec.annotate(**fields)
                    taken += 1
                except Exception as exc:  # noqa: BLE001 - the assertion says which
                    _one_line(exc, f"{where}, step {t}, annotate({fields!r})")
                    refused += 1
                try:
                    rec.step(space.sample() if not vector else rec.action_space.sample())
                except Exception as exc:  # noqa: BLE001
                    _one_line(exc, f"{where}, step {t} (after annotate({fields!r}))")
            try:
                if vector:
                    rec._finish_all()  # every sub-env's video written now (as close() does, the env kept)
                else:
                    rec.finish_episode()
            except Exception as exc:  # noqa: BLE001
                _one_line(exc, f"{where}, the episode's end")
        rec.close()
    assert taken and refused, (taken, refused)  # the fuzzer reached both sides
    for w in caught:
        assert "\n" not in str(w.message).strip(), f"a warning of several lines: {w.message}"
    for path in tmp_path.glob("*.mp4"):
        assert path.stat().st_size > 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
