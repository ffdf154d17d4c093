"""One agent as a multi-agent video knows it (:class:`AgentSpec`) and its part of a panel video while the episode
plays (:class:`AgentTrack`: its decisions, rewards, spooled observations and thumbnails), for
:class:`~rlviz.record.agents.video.AgentsVideo`."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...agent.actions import ActionSpec
from ...draw.panels_agents import fit_thumbnail, is_image_observation
from ...envs.pettingzoo_envs import split_observation
from ...episode.trace import Spool, make_spool
from ..internals import Annotations

__all__ = ["AgentSpec", "AgentTrack", "pad"]


@dataclass(frozen=True)
class AgentSpec:
    """One agent as a video knows it: its action ``spec``, its bars' labels, its ``policy`` (or None) and the
    ``observation_space`` the policy takes."""

    spec: ActionSpec
    action_names: tuple[str, ...]
    policy: Any = None
    observation_space: Any = None


class AgentTrack:
    """One agent's part of a panel video: its decisions, rewards, spooled observations and thumbnails."""

    def __init__(self, agent: AgentSpec, thumb_box: tuple[int, int] | None, spool_dir: Any) -> None:
        self.agent, self.thumb_box, self.spool_dir = agent, thumb_box, spool_dir
        self.decisions, self.actions = array("l"), array("d")
        self.rewards, self.frame_rewards = array("d"), array("d")  # per decision, per frame
        self.masks: list[Any] = []
        self.obs: Any = None  # a spool of its observations (with a policy)
        self.thumbs: Spool | None = None
        self.last_obs: Any = None
        self.final = False  # its last observation was given
        self.gone_at = -1
        self.annotations = Annotations(agent.spec)

    def add_obs(self, obs: Any, mask: Any) -> None:
        """The observation of a decision (or the last one): spooled for the policy, thumbnailed."""
        self.last_obs = obs
        self.masks.append(None if mask is None else np.asarray(mask, dtype=bool).reshape(-1))
        obs = split_observation(obs)[0]  # what the policy sees, as the rollout gives it (a classic game's "observation")
        if self.agent.policy is not None and obs is not None:
            if self.obs is None:
                self.obs = make_spool(obs, dir=self.spool_dir, name="obs")
            self.obs.append(obs)
        if self.thumb_box is not None and obs is not None and is_image_observation(obs):
            thumb = fit_thumbnail(obs, self.thumb_box)
            if self.thumbs is None:
                self.thumbs = Spool(thumb.shape, np.uint8, dir=self.spool_dir, name="thumbs")
            self.thumbs.append(thumb)

    def close(self) -> None:
        for spool in (self.obs, self.thumbs):
            if spool is not None:
                spool.close()
        self.obs = self.thumbs = None


def pad(values: array[float], n: int) -> None:
    """Extend ``values`` with zeros to ``n`` items."""
    if len(values) < n:
        values.extend([0.0] * (n - len(values)))
