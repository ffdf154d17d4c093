"""Attention per object over a rollout: every step's shares, the steps before each failure, CIs over episodes.

On the hot path (:func:`rlviz.evaluate.lockstep.run_lockstep`) :meth:`AttentionTracker.observe` runs once per step:
the active envs' observations, actions and object masks (the heatmap's extractor, a copy of its own: exact extractors
read the env's state; extractors that need frames get ``env.render()`` on every step) join a pending batch, and a full
batch runs as one attribution pass (:class:`~rlviz.explain.attention.AttributionProbe`: one forward + backward of a
fixed number of rows, so batch-invariant). Each step's shares go to its episode's :class:`EpisodeAttention`; a
failure (:meth:`EpisodeAttention.failure`, from :class:`~rlviz.evaluate.runner.Runner`) puts the last ``window``
steps (the heatmap's lookback) into the before-failure sums and their attribution maps (each normalised to sum 1)
into the attention map at failure. An episode's numbers land in ``EpisodeResult.attention`` (:meth:`attach`);
:func:`summarize_attention` aggregates them with bootstrap CIs over episodes, :func:`attention_findings` raises the
diagnostic, :class:`ShareTrack` draws the shares in the videos.
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np

from ..envs.frames import to_rgb_frame
from ..errors import UsageError
from ..explain.attention import ATTRIBUTION, BATCH_WAVES, AttributionProbe, object_fractions, pooling, step_shares
from .diagnostics import Finding
from .paired import bootstrap_indices, percentile_ci

__all__ = ["AttentionSpec", "AttentionTracker", "EpisodeAttention", "summarize_attention", "attention_findings",
           "attention_map", "attention_spec", "with_attention", "attention_paired", "plot_attention_at_failure",
           "ShareTrack", "ATTENTION_DROP_ID", "DROP_RATIO", "MIN_SHARE", "MIN_LIFT"]

#: The diagnostic's id: an object's share before failures is below :data:`DROP_RATIO` of its share elsewhere.
ATTENTION_DROP_ID = "attention_drops_before_failure"
#: Before-failure share / share on the other steps at or below which the diagnostic fires (its CI must exclude 1).
DROP_RATIO = 0.5
#: Objects are judged when their share on the other steps (while visible) is at least this, or at least
#: :data:`MIN_LIFT` times the fraction of the observation they cover (a 2-pixel Atari ball): the agent watches them.
MIN_SHARE = 0.05
MIN_LIFT = 2.0


class AttentionSpec:
    """What the rollout's attention pass computes: ``method`` (a saliency method), ``target`` (as saliency's)."""

    def __init__(self, method: str = "gradient", target: str | int = "action"):
        self.method, self.target = str(method), target

    def __repr__(self) -> str:
        return f"AttentionSpec({self.method!r}, {self.target!r})"


class EpisodeAttention:
    """One episode's running sums; shares float64 [K + 1] per step (objects, then "other"). Steps arrive in order
    (:meth:`add`, when their attribution pass ran), failures as the steps that led to them (:meth:`failure`,
    always before that step's :meth:`add`)."""

    def __init__(self, names: tuple, hw: tuple[int, int], window: int):
        k = len(names) + 1
        self.names, self.window = names, window
        self.steps, self.total = 0, np.zeros(k, np.float64)
        self.area = np.zeros(k - 1, np.float64)  # the objects' summed cover of the observation (fraction of pixels)
        self.before_steps, self.before = 0, np.zeros(k, np.float64)
        self.seen, self.before_seen = np.zeros(k - 1, np.int64), np.zeros(k - 1, np.int64)  # steps it was visible
        self.map_before: np.ndarray | None = None
        self.hw = hw
        self.fail_steps: list = []
        self.recent: deque = deque(maxlen=window)  # (shares, map) of the steps not yet in a failure's window

    def failure(self, t: int) -> None:
        """Step ``t``'s action led to a failure."""
        self.fail_steps.append(int(t))

    def add(self, t: int, shares: np.ndarray, amap: np.ndarray, area: np.ndarray) -> None:
        """Step ``t``'s shares and map; a failure at ``t`` counts it and the steps before it in its window (those
        not already counted for an earlier failure)."""
        if np.isnan(shares[0]):
            self.recent.append(None)
        else:
            self.steps += 1
            self.total += shares
            self.area += area
            self.seen += area > 0
            self.recent.append((shares, amap, area > 0))
        if t in self.fail_steps:
            for item in self.recent:
                if item is not None:
                    self.before_steps += 1
                    self.before += item[0]
                    self.before_seen += item[2]
                    s = float(item[1].sum())
                    if s > 0:
                        if self.map_before is None:
                            self.map_before = np.zeros(self.hw, np.float64)
                        self.map_before += item[1] / s
            self.recent.clear()

    def result(self) -> dict:
        """What ``EpisodeResult.attention`` holds: names, steps, total (sum of shares), before_steps, before,
        failures, map_before (float32 [h, w], the sum of the before-failure steps' maps each normalised to 1, or
        None without one)."""
        return {"names": self.names, "steps": self.steps, "total": self.total, "area": self.area,
                "before_steps": self.before_steps, "seen": self.seen, "before_seen": self.before_seen,
                "before": self.before, "failures": len(self.fail_steps),
                "map_before": None if self.map_before is None else self.map_before.astype(np.float32)}


class AttentionTracker:
    """The rollout's attention pass. ``begin`` (each episode start), ``observe`` (each lockstep step: the step's rows
    and masks join a pending batch, which runs as one attribution pass when full), ``attach`` (at the end: the
    last pass, then each result gets its episode's numbers)."""

    def __init__(self, spec: AttentionSpec, policy, extractor, window: int, waves: int = BATCH_WAVES):
        if extractor is None:
            raise UsageError("attention needs the heatmap's object masks; turn the heatmap on (--heatmap).")
        self.spec, self.policy, self.window, self.waves = spec, policy, max(1, int(window)), waves
        self.extractor = copy.deepcopy(extractor)  # its own per-env state (motion), apart from the heatmap's
        self.probe: Any = None  # an AttributionProbe from the first episode's observation
        self.pool: Any = None  # a Pooling from the first masks' frame size
        self.names: tuple = ()
        self.episodes: dict = {}  # episode index -> EpisodeAttention
        self.method = {"method": spec.method, "target": spec.target}
        self.pending: list = []  # (obs [B, *obs], actions [B], fractions [B, K, h, w], [(EpisodeAttention, t)])
        self.count = 0  # rows pending

    def begin(self, env, obs, index: int) -> EpisodeAttention:
        if self.probe is None:
            self.probe = AttributionProbe(self.policy, obs, self.spec.method, self.spec.target, self.waves)
        self.extractor.begin_episode(env)
        if not self.names:
            self.names = tuple(self.extractor.names or self._masks(env))
        ep = self.episodes[index] = EpisodeAttention(self.names, self.probe.hw, self.window)
        return ep

    def _masks(self, env) -> dict:
        x = self.extractor
        frame = to_rgb_frame(env.render()) if x.needs_frame else None
        masks = x.masks(x.capture(frame, env))
        if self.pool is None and masks:
            self.pool = pooling(np.shape(next(iter(masks.values())))[:2], self.probe.hw)
        return masks

    def observe(self, buf: np.ndarray, rows: np.ndarray, indices: np.ndarray, envs: list, slots: list) -> None:
        """The step of the active envs ``rows`` (their observations in the input buffer ``buf``, their actions
        ``indices``): observations, actions and object masks join the pending batch (run first if it is full)."""
        if self.count + len(rows) > self.probe.rows:
            self._run()
        masks = [self._masks(envs[i]) for i in rows]
        self.pending.append((buf[rows].copy(), np.asarray(indices, np.int64).copy(),
                             object_fractions(masks, self.names, self.pool),
                             [(slots[i].attention, slots[i].length) for i in rows]))
        self.count += len(rows)

    def _run(self) -> None:
        """One attribution pass over the pending rows (padded to the probe's rows); shares to their episodes."""
        if not self.pending:
            return
        obs = np.concatenate([p[0] for p in self.pending])
        acts = np.concatenate([p[1] for p in self.pending])
        fr = np.concatenate([p[2] for p in self.pending])
        maps = self.probe.maps(obs, acts)
        shares = step_shares(maps, fr)
        area = fr.mean(axis=(2, 3), dtype=np.float64)
        for j, (ep, t) in enumerate(who for p in self.pending for who in p[3]):
            ep.add(t, shares[j], maps[j], area[j])
        self.pending, self.count = [], 0

    def attach(self, records: list) -> list:
        """The rollout's results, each with its episode's ``attention`` (after the last pass)."""
        self._run()
        return [replace(r, attention={**self.method, **self.episodes.pop(r.index).result()}) for r in records]


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
    method = att if isinstance(att, str) else (config.saliency or "gradient")
    return AttentionSpec(method, config.saliency_target)


def with_attention(summary: Any, result: Any) -> Any:
    """``summary`` (a :class:`~rlviz.evaluate.stats.Summary`) with ``attention`` from ``result``'s episodes and the
    attention diagnostic added to its findings (unchanged when the rollout computed no attention)."""
    eps = [e.attention for e in result.episodes if getattr(e, "attention", None)]
    if not eps:
        return summary
    att = summarize_attention(result.episodes, eps[0].get("method", "gradient"), eps[0].get("target", "action"))
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


def plot_attention_at_failure(result: Any, heatmap: Any, path: Any) -> Any:
    """attention_at_failure.png: the failure heatmap (all objects) beside the mean attribution over the steps before
    failures, in frame pixels, over the heatmap's background frame; None when no step preceded a failure."""
    from .heatmap import _figure, _panel, _save

    amap = attention_map(result.episodes)
    if amap is None or heatmap is None:
        return None
    from matplotlib.colors import Normalize

    frame_map = pooling(heatmap.frame_shape, amap.shape).up(amap)
    total = heatmap.total()
    fig, axes = _figure(heatmap.frame_shape, 2)
    _panel(fig, axes[0], "failure heatmap (all objects)", heatmap.background,
           np.ma.masked_where(total <= 0, total), cmap="inferno", norm=Normalize(0, max(int(total.max()), 1)),
           alpha=0.85)
    _panel(fig, axes[1], "attention before failures", heatmap.background, frame_map / max(frame_map.max(), 1e-12),
           cmap="viridis", norm=Normalize(0, 1), alpha=0.7, label="mean attribution (max = 1)")
    att = summarize_attention(result.episodes, "") or {"objects": {}}
    parts = ", ".join(f"{n} {r['share_before_failure']:.3g} (elsewhere {r['share_elsewhere']:.3g})"
                      for n, r in att["objects"].items() if r["share_before_failure"] is not None)
    fig.suptitle(f"{heatmap.env_id}: share of attribution before failures: {parts}", fontsize=8)
    return _save(fig, path, 120)


class ShareTrack(gym.Wrapper):
    """The videos' share track: wraps a :class:`~rlviz.record.RecordEpisode` (``recorder``, or a wrapper of it) and
    annotates each step with the objects' shares of its attribution (``"attention <name>"``, drawn as curves under
    the panels). One attribution pass per step of exactly the policy's forward rows (a video's steps, not the
    rollout's); ``objects``: the heatmap's extractor (``"module:function"``) or None for the env's default."""

    def __init__(self, recorder, spec: AttentionSpec, policy, env_id: str, objects=None):
        from .objects import extractor_for, load_extractor

        super().__init__(recorder)
        extractor = load_extractor(objects) if isinstance(objects, str) else objects or extractor_for(env_id)
        self.tracker = AttentionTracker(spec, policy, extractor, 1, waves=1)
        self.recorder, self.obs = recorder, None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.obs = np.asarray(obs)
        self.tracker.begin(self.env, self.obs, -1)
        return obs, info

    def step(self, action):
        t = self.tracker
        fr = object_fractions([t._masks(self.env)], t.names, t.pool)
        acts = np.asarray([action if np.ndim(action) == 0 else 0], np.int64)
        shares = step_shares(t.probe.maps(self.obs[None], acts), fr)[0]
        self.recorder.annotate(**{f"attention {n}": float(v) for n, v in zip(t.names, shares)})
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.obs = np.asarray(obs)
        return obs, reward, terminated, truncated, info
