"""Can ale-py's native ``AtariVectorEnv`` reproduce rlviz's ALE recipe (gymnasium AtariPreprocessing + frame stack)
byte for byte, for the same per-episode seed and actions? Prints, per piece, what agrees and what does not.

    python scripts/probe_native_ale.py                      # Breakout, 40 episode seeds of rollout(seed=0)
    python scripts/probe_native_ale.py --env ALE/MsPacman-v5 --episodes 20 --steps 300

Pieces (each compared on the same ALE seed and the same actions):
  seeds   rlviz's episode seed -> AtariEnv.seed_game -> (np_seed, ale_seed); the native env takes one int32 seed
          that sets both the ALE's ``random_seed`` and its own no-op RNG, and only seeds >= 0 are applied.
  core    no-ops off on both sides (recipe noop_max=0, native noop_max=0, no fire reset): ALE seeding, sticky
          actions, frame skip, max-pool, grey, INTER_AREA resize, rewards, lives, termination.
  noops   the recipe as shipped (noop_max=30) vs native noop_max=30: the reset no-op count.
  stack   the frame stack's first observations (gymnasium pads with the reset frame, native with zeros).
  limit   the per-episode frame limit, at a small limit, no-ops off.
  reset   the cost of a seeded reset (native: reloads the ROM; rlviz: :mod:`rlviz.envs.ale_seed`).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from ale_py.vector_env import AtariVectorEnv
from gymnasium.utils import seeding

from rlviz.envs import make_env
from rlviz.envs.ale_seed import seeded_reset
from rlviz.envs.recipe import atari_recipe
from rlviz.evaluate.rollouts.rollout import episode_seed_for


def ale_seeds(seed: int) -> tuple:
    """What ``AtariEnv.seed_game(seed)`` derives: (np_seed, ale_seed as the int32 the ALE is given)."""
    np_seed, ale_seed = np.random.SeedSequence(int(seed)).generate_state(n_words=2)
    return int(np_seed), int(np.array(ale_seed, dtype=np.uint32).view(np.int32))


def recipe_noops(np_seed: int, noop_max: int = 30) -> int:
    """The no-op count gymnasium's AtariPreprocessing draws at a seeded reset (from the env's np_random)."""
    rng, _ = seeding.np_random(np_seed)
    return int(rng.integers(1, noop_max + 1))


def play_wrapper(env, seed: int, actions) -> list:
    obs, info = seeded_reset(env, seed)
    return play_wrapper_steps(env, actions, first=(np.asarray(obs).copy(), 0.0, False, int(info["lives"])))


def play_wrapper_noops(env, seed: int, noops: int, actions) -> list:
    """A no-op-free recipe's env after a seeded reset and ``noops`` single-frame NOOPs, as AtariPreprocessing
    plays them (its reset observation is then stale: compare from step 1 on)."""
    seeded_reset(env, seed)
    for _ in range(noops):
        env.unwrapped.ale.act(0)
    return play_wrapper_steps(env, actions)


def play_wrapper_steps(env, actions, first=None) -> list:
    """[first, then (obs, reward, terminated, lives) per action until the episode ends]."""
    out = [first]
    for a in actions:
        obs, r, term, trunc, info = env.step(int(a))
        out.append((np.asarray(obs).copy(), float(r), bool(term), int(info["lives"])))
        if term or trunc:
            break
    return out


def native_noops(wenv, venv, seed: int, ale_seed: int, actions, noop_max: int = 30):
    """The no-op count the native env played at its reset: the j whose wrapper replay matches from step 1 on."""
    n = play_native(venv, ale_seed, actions)[1:]
    for j in range(noop_max + 1):
        if first_difference(play_wrapper_noops(wenv, seed, j, actions)[1:], n) is None:
            return j
    return None


def play_native(venv, ale_seed: int, actions) -> list:
    obs, info = venv.reset(seed=np.array([ale_seed], dtype=np.int64))
    out = [(obs[0].copy(), 0.0, False, int(info["lives"][0]))]
    for a in actions:
        obs, r, term, trunc, info = venv.step(np.array([a], dtype=np.int64))
        out.append((obs[0].copy(), float(r[0]), bool(term[0]), int(info["lives"][0])))
        if term[0] or trunc[0]:
            break
    return out


def first_difference(w: list, n: list, newest_only_until: int = 3):
    """(step, what) of the first difference; frame stacks are compared on their newest frame for the first
    ``newest_only_until`` observations (the padding differs by design), then whole; None if identical."""
    for t, (a, b) in enumerate(zip(w, n)):
        oa, ob = (a[0][-1], b[0][-1]) if t < newest_only_until else (a[0], b[0])
        if not np.array_equal(oa, ob):
            return t, f"obs ({int(np.count_nonzero(oa != ob))} bytes differ, max |d| "\
                      f"{int(np.abs(oa.astype(int) - ob.astype(int)).max())})"
        if a[1:] != b[1:]:
            return t, f"reward/term/lives {a[1:]} vs {b[1:]}"
    if len(w) != len(n):
        return min(len(w), len(n)), f"length {len(w)} vs {len(n)}"
    return None


def native_env(game: str, noop_max: int, frames: int = 108000) -> AtariVectorEnv:
    return AtariVectorEnv(game, 1, num_threads=1, repeat_action_probability=0.25, noop_max=noop_max,
                          use_fire_reset=False, reward_clipping=False, episodic_life=False, stack_num=4,
                          max_num_frames_per_episode=frames)


def truncation(args, game, seeds, derived, frames: int = 402) -> None:
    """The frame limit (v5: 108000 frames) at a small limit, no-ops off: same step and flags?"""
    wenv = make_env(atari_recipe(args.env, noop_max=0, max_num_frames_per_episode=frames), render_mode=None)
    venv = native_env(game, 0, frames)
    acts = np.zeros(frames, dtype=np.int64)  # NOOP until the limit
    for s, (_, a) in zip(seeds, derived):
        if a >= 0:
            w, n = play_wrapper(wenv, s, acts), play_native(venv, a, acts)
            print(f"limit ({frames} frames, no-ops off): wrapper ends after {len(w) - 1} steps, native after "
                  f"{len(n) - 1}; first difference: {first_difference(w, n)}")
            break
    wenv.close()
    venv.close()


def reset_cost(game: str, env_id: str, n: int = 10) -> None:
    venv, wenv = native_env(game, 0), make_env(env_id, render_mode=None)
    venv.reset(seed=np.array([1]))
    seeded_reset(wenv, 1)
    t = time.perf_counter()
    for i in range(n):
        venv.reset(seed=np.array([i + 2]))
    t_native = (time.perf_counter() - t) / n
    t = time.perf_counter()
    for i in range(n):
        seeded_reset(wenv, i + 2)
    t_rlviz = (time.perf_counter() - t) / n
    print(f"reset cost: native seeded reset (reloads the ROM) {t_native * 1e3:.0f} ms, rlviz seeded_reset "
          f"{t_rlviz * 1e3:.0f} ms")
    venv.close()
    wenv.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", default="ALE/Breakout-v5")
    ap.add_argument("--episodes", type=int, default=40)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    game = "".join("_" + c.lower() if c.isupper() else c for c in args.env.split("/")[1].split("-")[0]).lstrip("_")
    seeds = [episode_seed_for(args.seed, k) for k in range(args.episodes)]
    derived = [ale_seeds(s) for s in seeds]
    neg = sum(a < 0 for _, a in derived)
    print(f"seeds: {neg}/{len(seeds)} episode seeds give a negative int32 ALE seed (the native env ignores "
          "seeds < 0: it keeps its RNGs, an unseeded reset)")

    # does the native env apply a negative seed? two resets with the same negative seed, the same random actions
    venv = native_env(game, 0)
    acts = np.random.default_rng(1).integers(0, venv.single_action_space.n, args.steps)
    neg_seed = next((a for _, a in derived if a < 0), -5)
    runs = [play_native(venv, neg_seed, acts) for _ in range(2)]
    print(f"seeds: native reset(seed={neg_seed}) twice -> identical: {first_difference(*runs) is None}")

    # core: no-ops off on both sides, non-negative ALE seeds
    wenv = make_env(atari_recipe(args.env, noop_max=0), render_mode=None)
    core_ok, core_bad = 0, []
    for s, (_, a) in zip(seeds, derived):
        if a < 0:
            continue
        w, n = play_wrapper(wenv, s, acts), play_native(venv, a, acts)
        d = first_difference(w, n)
        core_ok += d is None
        if d is not None:
            core_bad.append((s, d))
    print(f"core (noop_max=0 both): {core_ok}/{len(seeds) - neg} episodes identical over {args.steps} steps "
          f"(newest frame for t<3, whole stack after); first mismatches: {core_bad[:3]}")
    stack_w, stack_n = play_wrapper(wenv, seeds[0], [])[0][0], None
    for _, a in derived:
        if a >= 0:
            stack_n = play_native(venv, a, [])[0][0]
            break
    if stack_n is None:
        print("stack: not compared (no episode seed the native env applies; run more --episodes)")
    else:
        print(f"stack: reset observation frames equal to the newest one -- gymnasium: "
              f"{[bool(np.array_equal(f, stack_w[-1])) for f in stack_w]}, native: "
              f"{[bool(np.array_equal(f, stack_n[-1])) for f in stack_n]} (native pads with zeros: "
              f"{[int(f.max()) for f in stack_n]} = max per frame)")
    wenv.close()
    venv.close()

    # noops: the recipe as shipped vs native noop_max=30
    wenv, venv = make_env(atari_recipe(args.env), render_mode=None), native_env(game, 30)
    same, counts = 0, []
    for s, (np_seed, a) in zip(seeds, derived):
        if a < 0:
            continue
        counts.append(recipe_noops(np_seed))
        same += first_difference(play_wrapper(wenv, s, acts), play_native(venv, a, acts)) is None
    print(f"noops (noop_max=30 both): {same}/{len(seeds) - neg} episodes identical")
    wenv.close()
    zero = make_env(atari_recipe(args.env, noop_max=0), render_mode=None)
    native = [native_noops(zero, venv, s, a, acts) for s, (_, a) in zip(seeds, derived) if a >= 0]
    print(f"noops: count played at reset, recipe (np_random(np_seed).integers(1, 31)) vs native (its mt19937(seed), "
          f"uniform on [0, 29]; found by replaying j single-frame NOOPs): {list(zip(counts, native))[:10]}")
    zero.close()
    venv.close()
    truncation(args, game, seeds, derived)
    reset_cost(game, args.env)


if __name__ == "__main__":
    main()
