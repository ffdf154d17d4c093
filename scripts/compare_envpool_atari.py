"""rlviz's rebuild of envpool's Atari observations (rlviz/envs/envpool_atari.py) against envpool itself.

    python scripts/compare_envpool_atari.py [--game Breakout-v5] [--steps 3000] [--seed 1] [--record FILE.npz]

Run it where envpool installs (``pip install envpool``, with gymnasium and ale-py); rlviz's test suite does not
need it. envpool is made as CleanRL's ``ppo_atari_envpool_xla_jax_scan.py`` makes it (``episodic_life=True,
reward_clip=True``, the rest default) with ``seed=S`` and one env; rlviz's wrapper is reset with ``seed=S``. Both
are stepped with the same random actions and every observation (the whole [4, 84, 84] stack) and raw reward
(``info["reward"]``) is compared, and the ALE RAM where envpool reports it (``info["ram"]``, envpool >= 1.0).
envpool's next call after a lost life is its reset between lives, which rlviz plays inside the step that lost the
life: that step's observation is compared with envpool's reset. A game over's reset goes on drawing NOOP counts
from the same generator in envpool; the rlviz side does the same here (:class:`Continuing`).

``--record`` saves rlviz's calls (reset or step, action) and envpool's observations, which
tests/test_envpool_atari.py replays without envpool (tests/fixtures/cleanrl_jax/envpool_breakout_trace.npz).
"""

from __future__ import annotations

import argparse

import ale_py  # noqa: F401 - registers the ALE ids with gymnasium
import envpool
import gymnasium as gym
import numpy as np

from rlviz.envs.envpool_atari import ENVPOOL_KWARGS, EnvpoolAtari, ale_id


class Continuing(EnvpoolAtari):
    """As envpool's pool env: a reset with no seed keeps drawing from the NOOP generator the last seed made."""

    def _seed_noops(self, seed):
        if seed is not None:
            super()._seed_noops(seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--game", default="Breakout-v5")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--record", help="save the calls and envpool's observations here (.npz)")
    args = ap.parse_args()
    ep = envpool.make(args.game, env_type="gymnasium", num_envs=1, episodic_life=True, reward_clip=True,
                      seed=args.seed)
    env = Continuing(gym.make(ale_id(args.game), **ENVPOOL_KWARGS))
    rng = np.random.default_rng(args.seed)
    stats = {"envpool_calls": 0, "compared_obs": 0, "equal_obs": 0, "max_abs_diff": 0, "compared_rewards": 0,
             "equal_rewards": 0, "compared_ram": 0, "equal_ram": 0, "resets": 0}
    calls: list[tuple[int, int]] = []  # (1 reset / 0 step, action) of each rlviz call compared
    expected: list[np.ndarray] = []

    def compare(ours: np.ndarray, info: dict, theirs: np.ndarray, reset: bool, action: int) -> None:
        calls.append((int(reset), action))
        expected.append(theirs.copy())
        stats["compared_obs"] += 1
        stats["equal_obs"] += int(np.array_equal(ours, theirs))
        stats["max_abs_diff"] = max(stats["max_abs_diff"], int(np.abs(ours.astype(int) - theirs).max()))
        if "ram" in info:
            stats["compared_ram"] += 1
            stats["equal_ram"] += int(np.array_equal(env.unwrapped.ale.getRAM(), info["ram"][0]))

    obs, info = ep.reset()
    compare(env.reset(seed=args.seed)[0], info, obs[0], True, 0)
    stats["resets"] += 1
    pending = None  # what envpool's next call is after a done: "life" or "game"
    step_out, pending_action = None, 0
    for _ in range(args.steps):
        action = int(rng.integers(env.action_space.n))
        obs, _, term, trunc, info = ep.step(np.array([action]))
        stats["envpool_calls"] += 1
        if pending == "life":  # envpool's reset between lives: rlviz played it inside the step that lost the life
            compare(step_out, info, obs[0], False, pending_action)
        elif pending == "game":
            compare(env.reset()[0], info, obs[0], True, 0)
        if pending is not None:
            stats["resets"] += 1
            pending = None
            continue
        step_out, reward, terminated, truncated, _ = env.step(action)
        stats["compared_rewards"] += 1
        stats["equal_rewards"] += float(reward) == float(info["reward"][0])
        if (term[0] or trunc[0]) and not (info["terminated"][0] or trunc[0]):
            pending, pending_action = "life", action
            continue
        compare(step_out, info, obs[0], False, action)
        if term[0] or trunc[0]:
            pending = "game"
    if args.record:
        np.savez_compressed(args.record, game=args.game, seed=args.seed, calls=np.array(calls, np.int64),
                            obs=np.stack(expected))
    print(f"{args.game}, envpool {envpool.__version__}, seed {args.seed}: {stats}")


if __name__ == "__main__":
    main()
