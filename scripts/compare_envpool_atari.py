"""rlviz's rebuild of envpool's Atari observations (rlviz/envs/envpool_atari.py) against envpool itself.

    python scripts/compare_envpool_atari.py [--game Breakout-v5] [--steps 3000] [--seed 1] [--record FILE.npz]

Run it where envpool installs (``pip install envpool``, with gymnasium and ale-py); rlviz's test suite does not
need it. envpool is made as CleanRL's ``ppo_atari_envpool_xla_jax_scan.py`` makes it (``episodic_life=True,
reward_clip=True``, the rest default). Both are stepped with the same random actions. At each reset envpool makes
(the first, after a lost life, after a game over) it draws its NOOP count from its own generator: the count is
found by trying 0..29 in rlviz's wrapper until the ALE RAM equals envpool's (``info["ram"]``). Every observation
(the whole [4, 84, 84] stack) and every raw reward (``info["reward"]``) is then compared. ``--record`` saves
rlviz's calls (reset or step, action), the NOOP counts found and envpool's observations, which
tests/test_envpool_atari.py replays without envpool (tests/fixtures/cleanrl_jax/envpool_breakout_trace.npz).
"""

from __future__ import annotations

import argparse

import ale_py  # noqa: F401 - registers the ALE ids with gymnasium
import envpool
import gymnasium as gym
import numpy as np

from rlviz.envs.envpool_atari import ENVPOOL_KWARGS, EnvpoolAtari, ale_id


class Fixed:
    """A generator whose ``integers`` always gives ``k``: the NOOP count to try."""

    def __init__(self, k: int):
        self.k = k

    def integers(self, low, high=None):
        return self.k


def _save(env: EnvpoolAtari):
    return (env.unwrapped.ale.cloneState(), env._stack.copy(), [p.copy() for p in env._pool], env._lives,
            env._elapsed)


def _restore(env: EnvpoolAtari, saved) -> None:
    state, stack, pool, lives, elapsed = saved
    env.unwrapped.ale.restoreState(state)
    env._stack[:], env._pool, env._lives, env._elapsed = stack, [p.copy() for p in pool], lives, elapsed


def _ram(env) -> np.ndarray:
    return env.unwrapped.ale.getRAM()


def _search(env: EnvpoolAtari, info: dict, obs: np.ndarray, call):
    """Try NOOP counts 0..29: the result of ``call()`` whose ALE RAM equals envpool's ``info["ram"]`` (envpool
    < 1.0 reports none: whose observation equals envpool's, the first such count), else (None, the last result)."""
    saved, out = _save(env), None
    for k in range(30):
        _restore(env, saved)
        env.unwrapped.np_random = Fixed(k)
        out = call()
        same = np.array_equal(_ram(env), info["ram"][0]) if "ram" in info else np.array_equal(out[0], obs)
        if same:
            return k, out
    return None, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--game", default="Breakout-v5")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--record", help="save the calls, NOOP counts and envpool's observations here (.npz)")
    args = ap.parse_args()
    ep = envpool.make(args.game, env_type="gymnasium", num_envs=1, episodic_life=True, reward_clip=True,
                      seed=args.seed)
    env = EnvpoolAtari(gym.make(ale_id(args.game), **ENVPOOL_KWARGS))
    env.reset(seed=0)
    rng = np.random.default_rng(args.seed)
    stats = {"steps": 0, "compared_obs": 0, "equal_obs": 0, "max_abs_diff": 0, "equal_rewards": 0, "resets": 0, "resets_found": 0}

    calls: list[tuple[int, int]] = []  # (1 reset / 0 step, action) of each rlviz call compared
    expected: list[np.ndarray] = []
    noops: list[int] = []

    def compare(ours: np.ndarray, theirs: np.ndarray, reset: bool = False, action: int = 0) -> None:
        calls.append((int(reset), action))
        expected.append(theirs.copy())
        stats["compared_obs"] += 1
        stats["equal_obs"] += int(np.array_equal(ours, theirs))
        stats["max_abs_diff"] = max(stats["max_abs_diff"], int(np.abs(ours.astype(int) - theirs).max()))

    obs, info = ep.reset()
    k, (ours, _) = _search(env, info, obs[0], lambda: env.reset())
    stats["resets"] += 1
    stats["resets_found"] += k is not None
    noops.append(-1 if k is None else k)
    compare(ours, obs[0], reset=True)
    pending = None  # envpool's done step: its next call resets
    for _ in range(args.steps):
        action = int(rng.integers(env.action_space.n))
        obs, _, term, trunc, info = ep.step(np.array([action]))
        if pending is not None:  # envpool reset (the action is ignored): rlviz did it inside its own step
            kind, saved_action = pending
            pending = None
            stats["resets"] += 1
            if kind == "life":
                k, out = _search(env, info, obs[0], lambda a=saved_action: env.step(a))
                ours = out[0]
            else:
                k, (ours, _) = _search(env, info, obs[0], lambda: env.reset())
            stats["resets_found"] += k is not None
            noops.append(-1 if k is None else k)
            compare(ours, obs[0], reset=kind != "life", action=saved_action)
            continue
        stats["steps"] += 1
        if term[0] or trunc[0]:
            if info["terminated"][0] or trunc[0]:  # a game over: both end the episode here
                ours, reward, *_ = env.step(action)
                compare(ours, obs[0], action=action)
                stats["equal_rewards"] += float(reward) == float(info["reward"][0])
                pending = ("game", action)
            else:  # a lost life: rlviz steps and plays envpool's next reset in one call
                stats["equal_rewards"] += 1 if _life_reward(env, action, info) else 0
                pending = ("life", action)
            continue
        ours, reward, *_ = env.step(action)
        compare(ours, obs[0], action=action)
        stats["equal_rewards"] += float(reward) == float(info["reward"][0])
    if args.record:
        np.savez_compressed(args.record, game=args.game, calls=np.array(calls, np.int64), noops=np.array(noops),
                            obs=np.stack(expected))
    print(f"{args.game}, seed {args.seed}, {args.steps} envpool calls: {stats}")


def _life_reward(env: EnvpoolAtari, action: int, info) -> bool:
    """The reward of the step that lost the life (rlviz's step, its reset undone: the search replays it)."""
    saved = _save(env)
    env.unwrapped.np_random = Fixed(0)
    _, reward, *_ = env.step(action)
    _restore(env, saved)
    return float(reward) == float(info["reward"][0])


if __name__ == "__main__":
    main()
