"""Attention per object over a rollout: every step's shares, the steps before each failure, CIs over episodes.

On the hot path (:func:`rlviz.evaluate.rollouts.lockstep.run_lockstep`) :class:`AttentionTracker`
(:mod:`rlviz.attention.tracker`) gives each step its attribution map (gradient: from the rollout's own forward)
and its objects' shares. Each step's shares go to its episode's :class:`EpisodeAttention`; a
failure (:meth:`EpisodeAttention.failure`, from :class:`~rlviz.evaluate.rollouts.runner.Runner`) puts the last ``window``
steps (the heatmap's lookback) into the before-failure sums and their attribution maps (each normalised to sum 1)
into the attention map at failure. An episode's numbers land in ``EpisodeResult.attention`` (:meth:`attach`);
:func:`summarize_attention` aggregates them with bootstrap CIs over episodes, :func:`attention_findings` raises the
diagnostic, :class:`ShareTrack` draws the shares in the videos (:mod:`rlviz.analysis.attention_plot`: the picture at failure).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np

from ..agent.stepping import start_state
from ..attention.maps import ATTRIBUTION, object_fractions, step_shares
from ..attention.tracker import AttentionSpec, AttentionTracker, EpisodeAttention
from ..choices import DEFAULT_SALIENCY_METHOD
from ..evaluate.statistics.diagnostics import Finding
from ..evaluate.statistics.paired import bootstrap_indices, percentile_ci

__all__ = ["AttentionSpec", "AttentionTracker", "EpisodeAttention", "summarize_attention", "attention_findings",
           "attention_map", "attention_spec", "with_attention", "attention_paired",
           "ShareTrack", "ATTENTION_DROP_ID", "DROP_RATIO", "MIN_SHARE", "MIN_LIFT"]

#: The diagnostic's id: an object's share before failures is below :data:`DROP_RATIO` of its share elsewhere.
ATTENTION_DROP_ID = "attention_drops_before_failure"
#: Before-failure share / share on the other steps at or below which the diagnostic fires (its CI must exclude 1).
DROP_RATIO = 0.5
#: Objects are judged when their share on the other steps (while visible) is at least this, or at least
#: :data:`MIN_LIFT` times the fraction of the observation they cover (a 2-pixel Atari ball): the agent watches them.
MIN_SHARE = 0.05
MIN_LIFT = 2.0


def _ratio(num: np.ndarray, den: np.ndarray) -> float:
    d = float(den.sum())
    return float(num.sum()) / d if d > 0 else float("nan")


def _boot(num: np.ndarray, den: np.ndarray, idx: np.ndarray) -> list:
    """The 95% percentile-bootstrap CI over episodes of sum(num) / sum(den) (resampled episode indices ``idx``)."""
    n, d = num[idx].sum(axis=1), den[idx].sum(axis=1)
    ok = d > 0
    if not ok.any():
        return [None, None]
    return [round(v, 4) for v in percentile_ci(n[ok] / d[ok])]


def _num(x: float) -> float | None:
    return None if x != x else round(float(x), 4)


def summarize_attention(episodes, method: str, target: str | int = "action") -> dict | None:
    """``summary.json["attention"]`` from the episodes' ``attention``: per object (and "other") the mean share over
    all steps, over the steps before failures and over the rest, each with its 95% bootstrap CI over episodes,
    and ``ratio_before_to_elsewhere`` with its CI; per object also ``area``, the mean fraction of the observation's
    pixels it covers (a share far above it: the agent looks at the object more than its size), and the shares over
    the steps where it is visible (``visible_before_failure``: the fraction of before-failure steps it is on the
    screen), on which its ratio is computed. None when no episode carries attention."""
    eps = [e.attention for e in episodes if getattr(e, "attention", None)]
    if not eps:
        return None
    names = tuple(eps[0]["names"]) + ("other",)
    steps = np.array([e["steps"] for e in eps], np.float64)
    bsteps = np.array([e["before_steps"] for e in eps], np.float64)
    total = np.stack([e["total"] for e in eps])
    before = np.stack([e["before"] for e in eps])
    area = np.stack([e["area"] for e in eps])
    idx = bootstrap_indices(len(eps))
    rest_steps, rest = steps - bsteps, total - before
    nobj = len(names) - 1
    seen = np.stack([e["seen"] for e in eps]).astype(np.float64) if nobj else np.zeros((len(eps), 0))
    bseen = np.stack([e["before_seen"] for e in eps]).astype(np.float64) if nobj else np.zeros((len(eps), 0))
    out: dict = {}
    for k, name in enumerate(names):
        row = {
            "share": _num(_ratio(total[:, k], steps)), "ci95": _boot(total[:, k], steps, idx),
            "share_before_failure": _num(_ratio(before[:, k], bsteps)),
            "ci95_before_failure": _boot(before[:, k], bsteps, idx),
            "share_elsewhere": _num(_ratio(rest[:, k], rest_steps)),
            "ci95_elsewhere": _boot(rest[:, k], rest_steps, idx),
        }
        # the drop is judged on the steps where the object is on the screen (an Atari ball leaves it before the
        # life is lost: no attribution can land on it then)
        b_den, r_den = (bseen[:, k], seen[:, k] - bseen[:, k]) if k < nobj else (bsteps, rest_steps)
        if k < nobj:
            row["area"] = _num(_ratio(area[:, k], steps))  # the mean fraction of the observation it covers
            row["visible_before_failure"] = _num(_ratio(b_den, bsteps))
            row["share_before_failure_visible"] = _num(_ratio(before[:, k], b_den))
            row["share_elsewhere_visible"] = _num(_ratio(rest[:, k], r_den))
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios = (before[idx, k].sum(1) / b_den[idx].sum(1)) / (rest[idx, k].sum(1) / r_den[idx].sum(1))
        ratios = ratios[np.isfinite(ratios)]
        point = _ratio(before[:, k], b_den) / _ratio(rest[:, k], r_den) if rest[:, k].sum() > 0 else np.nan
        row["ratio_before_to_elsewhere"] = _num(point)
        row["ci95_ratio"] = [round(v, 4) for v in percentile_ci(ratios)] if ratios.size else [None, None]
        out[name] = row
    return {"method": method, "attribution": ATTRIBUTION.get(method, method), "target": target,
            "steps": int(steps.sum()), "steps_before_failure": int(bsteps.sum()),
            "failures": int(sum(e["failures"] for e in eps)), "episodes": len(eps),
            "objects": {n: out[n] for n in names[:-1]}, "other": out["other"]}


def attention_findings(attention: dict | None) -> list[Finding]:
    """The attention diagnostic (:data:`ATTENTION_DROP_ID`): an object whose share on the steps before failures is at
    most :data:`DROP_RATIO` of its share on the other steps, the bootstrap CI of that ratio below 1 (a real drop)."""
    if not attention or not attention.get("steps_before_failure"):
        return []
    found = []
    for name, row in attention["objects"].items():
        ratio, ci = row["ratio_before_to_elsewhere"], row["ci95_ratio"]
        rest, area = row["share_elsewhere_visible"], row["area"] or 0.0
        if ratio is None or ci[1] is None or rest is None or (rest < MIN_SHARE and rest < MIN_LIFT * area):
            continue
        if ratio <= DROP_RATIO and ci[1] < 1.0:
            before = row["share_before_failure_visible"]
            found.append(Finding(ATTENTION_DROP_ID, "warning",
                f"Before failures the agent's attribution on '{name}' (while it is visible) drops to {before:.3g} of "
                f"the total, {ratio:.2f}x its share on the other steps ({rest:.3g}; 95% CI of the ratio "
                f"{ci[0]:.2f}-{ci[1]:.2f}): it stops looking at '{name}' when it matters. Watch the worst "
                "episodes' videos (their attention track) before each loss; train longer or on more of these states.",
                {"object": name, "share_before_failure": before, "share_elsewhere": rest,
                 "ratio": ratio, "ci95_ratio": ci, "steps_before_failure": attention["steps_before_failure"]}))
    return found


def attention_map(episodes) -> np.ndarray | None:
    """float64 [h, w]: the mean attribution over the steps before failures (each step's map normalised to sum 1),
    in observation pixels; None without such steps."""
    eps = [e.attention for e in episodes if getattr(e, "attention", None)]
    n = sum(e["before_steps"] for e in eps)
    if not n:
        return None
    return np.sum([e["map_before"].astype(np.float64) for e in eps if e["map_before"] is not None], axis=0) / n


def attention_spec(config) -> AttentionSpec | None:
    """The attention a RenderConfig asks for: ``attention`` False: none; True: its saliency method (gradient without
    one); a method name: that method; None (the default): on, with the saliency method, when both ``saliency`` and
    ``heatmap`` are."""
    att = config.attention
    on = att if att is not None else bool(config.saliency and config.heatmap)
    if not on:
        return None
    method = att if isinstance(att, str) else (config.saliency or DEFAULT_SALIENCY_METHOD)
    return AttentionSpec(method, config.saliency_target)


def with_attention(summary: Any, result: Any) -> Any:
    """``summary`` (a :class:`~rlviz.evaluate.statistics.stats.Summary`) with ``attention`` from ``result``'s episodes and the
    attention diagnostic added to its findings (unchanged when the rollout computed no attention)."""
    eps = [e.attention for e in result.episodes if getattr(e, "attention", None)]
    if not eps:
        return summary
    att = summarize_attention(result.episodes, eps[0].get("method", DEFAULT_SALIENCY_METHOD), eps[0].get("target", "action"))
    found = tuple(f.to_dict() for f in attention_findings(att))
    return replace(summary, attention=att, diagnostics=tuple(summary.diagnostics) + found)


def attention_paired(episodes_a, episodes_b) -> dict | None:
    """Compare: per object (and "other"), B's share minus A's over all steps and before failures, each with a paired
    95% bootstrap CI (the same resampled seeds for both agents). None unless both rollouts computed attention."""
    a = [e.attention for e in episodes_a]
    b = [e.attention for e in episodes_b]
    if not a or any(x is None for x in a + b) or tuple(a[0]["names"]) != tuple(b[0]["names"]):
        return None
    idx = bootstrap_indices(len(a))
    out = {}
    for k, name in enumerate(tuple(a[0]["names"]) + ("other",)):
        row: dict[str, Any] = {}
        for key, steps in (("total", "steps"), ("before", "before_steps")):
            na, da = np.array([e[key][k] for e in a]), np.array([e[steps] for e in a], np.float64)
            nb, db = np.array([e[key][k] for e in b]), np.array([e[steps] for e in b], np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                boot = nb[idx].sum(1) / db[idx].sum(1) - na[idx].sum(1) / da[idx].sum(1)
            boot = boot[np.isfinite(boot)]
            label = "share" if key == "total" else "share_before_failure"
            row[f"{label}_diff"] = _num(_ratio(nb, db) - _ratio(na, da))
            row[f"ci95_{label}_diff"] = [round(v, 4) for v in percentile_ci(boot)] if boot.size else [None, None]
        out[name] = row
    return out


class ShareTrack(gym.Wrapper):
    """The videos' share track: wraps a :class:`~rlviz.record.RecordEpisode` (``recorder``, or a wrapper of it) and
    annotates each step with the objects' shares of its attribution (``"attention <name>"``, drawn as curves under
    the panels). One attribution pass per step of exactly the policy's forward rows (a video's steps, not the
    rollout's); ``objects``: the heatmap's extractor (``"module:function"``) or None for the env's default."""

    def __init__(self, recorder, spec: AttentionSpec, policy, env_id: str, objects=None):
        from ..evaluate.failures.objects import extractor_for, load_extractor

        super().__init__(recorder)
        extractor = load_extractor(objects) if isinstance(objects, str) else objects or extractor_for(env_id)
        self.tracker = AttentionTracker(spec, policy, extractor, 1, waves=1)
        self.recorder, self.obs, self.policy, self.state = recorder, None, policy, None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.obs = np.asarray(obs)
        self.tracker.begin(self.env, self.obs, -1)
        self.state = start_state(self.policy)  # a recurrent policy's, carried as the episode's player carries it
        return obs, info

    def step(self, action):
        t = self.tracker
        fr = object_fractions([t._masks(self.env)], t.names, t.pool)
        acts = np.asarray([action if np.ndim(action) == 0 else 0], np.int64)
        shares = step_shares(t.probe.maps(self.obs[None], acts, self.state), fr)[0]
        if self.state is not None:
            _, self.state = self.policy.step(self.obs[None], self.state)
        self.recorder.annotate(**{f"attention {n}": float(v) for n, v in zip(t.names, shares)})
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.obs = np.asarray(obs)
        return obs, reward, terminated, truncated, info
