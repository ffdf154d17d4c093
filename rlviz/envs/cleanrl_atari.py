"""What CleanRL's gymnasium Atari scripts do after a lost life, rebuilt for evaluation.

CleanRL's Atari chain (``dqn_atari*.py``, ``c51_atari*.py``, ``qdagger_*``; their evaluation helpers in
``cleanrl_utils/evals`` use the same ``make_env``) is ``NoopResetEnv(30) -> MaxAndSkipEnv(4) -> EpisodicLifeEnv ->
FireResetEnv -> ResizeObservation(84) -> GrayScaleObservation -> FrameStack(4)``, SB3's wrappers copied into
``cleanrl_utils/atari_wrappers.py``. ``EpisodicLifeEnv`` ends the agent's episode at each lost life and its next
reset keeps the game: one NOOP step (``step(0)``), then ``FireResetEnv`` presses FIRE (``step(1)``) and action 2
(``step(2)``), a new game where one ends meanwhile. So the agent never had to press FIRE after losing a life.

:class:`CleanRLLifeReset` sits on the max-pooled, frame-skipping wrapper
(:class:`rlviz.envs.sb3_atari.SB3AtariPreprocessing` with ``warp=False``, which does CleanRL's no-op reset,
max-and-skip and fire reset) and plays those three steps after a step that lost a life (lives fell and stay
above 0), returning the observation CleanRL's reset returns. The game goes on (rlviz plays whole games, as
CleanRL's evaluation counts them); the rewards of those three steps are dropped, as the resets drop them.
"""

from __future__ import annotations

import gymnasium as gym

__all__ = ["CleanRLLifeReset"]


class CleanRLLifeReset(gym.Wrapper):
    """After a lost life: NOOP, FIRE, action 2 (CleanRL's ``EpisodicLifeEnv`` + ``FireResetEnv`` resets)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]  # an ALE env
        self.fire = "FIRE" in meanings and meanings[1] == "FIRE" and len(meanings) >= 3
        self._lives = 0

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())  # type: ignore[attr-defined]

    def reset(self, **kwargs):
        out = self.env.reset(**kwargs)
        self._lives = self._ale_lives()
        return out

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self._ale_lives()
        if not (terminated or truncated) and 0 < lives < self._lives:
            for a in ((0, 1, 2) if self.fire else (0,)):
                obs, _, terminated, truncated, info = self.env.step(a)
                if terminated or truncated:  # the game ended meanwhile: the episode ends here
                    break
            lives = self._ale_lives()
        self._lives = lives
        return obs, reward, terminated, truncated, info
