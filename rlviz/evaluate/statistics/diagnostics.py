"""Diagnostics: the classic RL bugs read off the rollouts, as findings a user can act on.

Fed by :func:`rlviz.evaluate.rollouts.rollout` (no second pass over the env): each episode carries an
:class:`EpisodeDiagnostics` accumulator, folded a whole episode (or a part of a long one) at a time from the
rollout's :class:`~rlviz.evaluate.rollouts.steplog.StepLog` (counts and running sums, a hash of each observation for loop
detection, the last 64 kept: memory does not grow with episode length), whose
:meth:`~EpisodeDiagnostics.finish` dict lands in ``EpisodeResult.diag``. :func:`diagnose`
turns a rollout's episodes into :class:`Finding` objects.

Warnings (thresholds; tuned so that the shipped healthy agents raise none over 1000 episodes):

==================== ===================================================================================
id                   triggered when
==================== ===================================================================================
nan_internals        any step with non-finite logits, probabilities or value
policy_uniform       mean relative entropy >= 0.9 (discrete actions, not Q-learning; Box actions: box_findings.py)
policy_collapsed     relative entropy < 0.01 on >= 95% of steps (stochastic policies only, not Q-learning)
action_dominant      one action taken on >= 95% of steps, >= 2 actions
value_wrong_sign     correlation of V with the discounted return-to-go G <= -0.1
value_uninformative  explained variance of V against G <= 0.1 (not raised with value_wrong_sign)
value_biased         |mean(V - G)| > std(G) (not raised with value_wrong_sign)
episode_loops        an episode whose observations repeat an exact cycle (period <= 64) for >= 100 steps
never_terminates     >= 90% of episodes end by the time limit (not for envs with no terminal state, below)
==================== ===================================================================================

Envs with no terminal state end only by their time limit, by design: ``never_terminates`` is not raised for them.
rlviz knows them from a table of the known ones, :data:`NO_TERMINAL_STATE` (Pendulum, HalfCheetah, Swimmer, Reacher,
Pusher, HumanoidStandup, any version or namespace; add your own env's name to it), and from the env's own
definition where it has a switch for it (MuJoCo's ``terminate_when_unhealthy=False`` in the run's env kwargs).
dm_control's suite through Shimmy (``dm_control/<domain>-<task>-v0``) has none either, but for lqr's tasks.
An env that can end but did not in any episode (a stalling agent) is not in the table and still gets the warning:
one episode cannot tell "cannot end" from "did not end".

Info: ``returns_constant`` (every episode has the same return), ``rewards_one_sign`` (no reward of the
other sign in any episode), ``value_skipped_nonfinite`` is folded into ``nan_internals``' evidence.
Value findings need at least :data:`MIN_VALUE_STEPS` steps with a value and a non-constant return.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..rollouts.step_checks import nonfinite_rows, obs_keys
from .box_findings import box_policy_findings

__all__ = ["Finding", "EpisodeDiagnostics", "diagnose", "nonfinite_rows", "obs_keys", "THRESHOLDS", "WARNING_IDS",
           "MIN_VALUE_STEPS", "NO_TERMINAL_STATE", "has_terminal_state"]

#: The thresholds of the warnings (see the module docstring).
THRESHOLDS = {
    "policy_uniform_entropy": 0.9,
    "collapsed_entropy": 0.01,
    "collapsed_fraction": 0.95,
    "dominant_fraction": 0.95,
    "wrong_sign_correlation": -0.1,
    "uninformative_ev": 0.1,
    "loop_steps": 100,
    "loop_max_period": 64,
    "never_terminates_fraction": 0.9,
}
WARNING_IDS = ("nan_internals", "policy_uniform", "policy_collapsed", "action_dominant", "value_uninformative",
               "value_wrong_sign", "value_biased", "episode_loops", "never_terminates",
               "attention_drops_before_failure")  # the last: rlviz.analysis.attention (with attention on)
MIN_VALUE_STEPS = 20
#: Env names (no namespace, no version) whose episodes end only by the time limit: no terminal state.
NO_TERMINAL_STATE = {"Pendulum", "HalfCheetah", "Swimmer", "Reacher", "Pusher", "HumanoidStandup"}
#: dm_control's suite through Shimmy: its tasks end by their time limit only (lqr's excepted: they end at the goal)
_DM_CONTROL_SUITE = re.compile(r"dm_control/(?P<domain>[A-Za-z_]+)-[A-Za-z0-9_]+-v\d+")


@dataclass(frozen=True)
class Finding:
    """One diagnostic. id: a fixed name (see :data:`WARNING_IDS`); severity: "warning" or "info";
    message: what was seen, what it usually means and what to check; evidence: the numbers (JSON values)."""

    id: str
    severity: str
    message: str
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"id": self.id, "severity": self.severity, "message": self.message, "evidence": self.evidence}


class EpisodeDiagnostics:
    """Per-episode accumulator, fed chunks of steps (:meth:`fold`: the rollouts fold a whole episode, or the part
    of it in their step log, at once), then :meth:`finish`."""

    __slots__ = ("n", "nonfinite", "first_nonfinite", "low_entropy", "counts", "pos", "neg", "_last", "_period",
                 "_streak", "loop_steps", "loop_period")

    def __init__(self, num_actions: int):
        self.n = self.nonfinite = self.low_entropy = self.pos = self.neg = 0
        self.first_nonfinite: int | None = None
        self.counts = np.zeros(max(int(num_actions), 1), np.int64)
        self._last = np.zeros(0, np.uint64)  # the keys of the last loop_max_period steps (the loop window)
        self._period = self._streak = self.loop_steps = self.loop_period = 0

    def step(self, obs, action: int, entropy: float, reward: float, bad: bool = False) -> None:
        """One step. obs: the observation the action was chosen on; entropy: relative entropy; bad: non-finite
        internals."""
        self.fold(np.asarray(obs_keys(np.asarray(obs)[None]), np.uint64), np.array([action]), np.array([entropy]),
                  np.array([reward], np.float64), [0] if bad else None)

    def fold(self, keys: np.ndarray, actions: np.ndarray, entropies: np.ndarray, rewards: np.ndarray,
             bad=None) -> None:
        """The next T steps at once: keys uint64 [T] (:func:`obs_keys` of the observations the actions were
        chosen on), actions [T] (the Discrete action, -1 for other kinds), relative entropies [T], rewards [T],
        bad: the steps (0..T-1, ascending) with non-finite internals, or None."""
        t0, T = self.n, len(keys)
        self.n = t0 + T
        low = np.asarray(entropies, np.float64) < THRESHOLDS["collapsed_entropy"]  # in float64, not float32
        if bad is not None and len(bad):
            self.nonfinite += len(bad)
            if self.first_nonfinite is None:
                self.first_nonfinite = t0 + int(bad[0])
            low[np.asarray(bad, np.intp)] = False
        self.low_entropy += int(np.count_nonzero(low))
        a = np.asarray(actions)
        self.counts += np.bincount(a[(a >= 0) & (a < len(self.counts))], minlength=len(self.counts))
        self.pos += int(np.count_nonzero(rewards > 0))
        self.neg += int(np.count_nonzero(rewards < 0))
        self._loops(np.asarray(keys, np.uint64), t0)

    def _loops(self, keys: np.ndarray, t0: int) -> None:
        """Loop detection: the current run of steps whose observation equals the one ``period`` steps before; a
        step that breaks the run starts one with the distance to the latest equal observation within
        ``loop_max_period`` steps (none: no run). match[j, d - 1]: step j's key equals the one d steps before."""
        w = int(THRESHOLDS["loop_max_period"])
        past = self._last
        seen = np.concatenate([past, keys])
        self._last = seen[-w:]
        if not self._period:
            seen = np.sort(seen)
            if not (seen[1:] == seen[:-1]).any():  # no key twice (the usual case): no run starts
                return
        padded = np.concatenate([np.zeros(w - len(past), np.uint64), past, keys])
        windows = np.lib.stride_tricks.sliding_window_view(padded, w + 1)
        match = windows[:, w - 1 :: -1] == windows[:, w:]
        if t0 < w:  # no steps before the episode's first
            match &= np.arange(1, w + 1) <= np.arange(t0, t0 + len(keys))[:, None]
        if not self._period and not match.any():
            return
        nearest = np.where(match.any(axis=1), match.argmax(axis=1) + 1, 0)
        p, s, j, T = self._period, self._streak, 0, len(keys)
        while j < T:
            if p:
                run = _run_length(match[j:, p - 1])
                s, j = s + run, j + run
                if s + p > self.loop_steps:
                    self.loop_steps, self.loop_period = s + p, p
                if j == T:
                    break
            else:
                later = np.flatnonzero(nearest[j:])
                if not len(later):
                    break
                j += int(later[0])
            p = int(nearest[j])
            s = 1 if p else 0
            if p and s + p > self.loop_steps:
                self.loop_steps, self.loop_period = s + p, p
            j += 1
        self._period, self._streak = p, s

    def finish(self) -> dict:
        """The episode's numbers (JSON values) for ``EpisodeResult.diag``."""
        return {"steps": self.n, "nonfinite_steps": self.nonfinite, "first_nonfinite_step": self.first_nonfinite,
                "low_entropy_steps": self.low_entropy, "action_counts": self.counts.tolist(),
                "positive_rewards": self.pos, "negative_rewards": self.neg,
                "loop_steps": self.loop_steps, "loop_period": self.loop_period}


def _run_length(same: np.ndarray) -> int:
    """How many leading entries of ``same`` (bool) are True (looked at in growing windows: a run is read once)."""
    n, size = 0, 64
    while n < len(same):
        part = same[n : n + size]
        k = int(part.argmin())
        if not part[k]:
            return n + k
        n, size = n + len(part), size * 2
    return n


# ---------------------------------------------------------------------------------------------- findings
def _warn(id_: str, message: str, **evidence) -> Finding:
    return Finding(id_, "warning", message, evidence)


def _info(id_: str, message: str, **evidence) -> Finding:
    return Finding(id_, "info", message, evidence)


def _num(x: float, nd: int = 4) -> float:
    return round(float(x), nd)


def _ids(episodes, limit: int = 10) -> list:
    return [int(e.index) for e in episodes[:limit]]


def _nan_finding(eps) -> list:
    bad = [e for e in eps if e.diag["nonfinite_steps"]]
    if not bad:
        return []
    total = sum(e.diag["nonfinite_steps"] for e in bad)
    first = bad[0]
    return [_warn(
        "nan_internals",
        f"{total} step(s) in {len(bad)} episode(s) had non-finite logits, probabilities or value (first: episode "
        f"{first.index}, step {first.diag['first_nonfinite_step']}). Usually a diverged training run (check the "
        "losses), a division by zero in observation normalisation, or inputs outside the range the network "
        "saw; statistics skip these steps.",
        steps=total, episodes=len(bad), first_episode=int(first.index),
        first_step=first.diag["first_nonfinite_step"], episode_ids=_ids(bad))]


def _policy_findings(eps, kind: str, steps: int) -> list:
    out = []
    counts = np.sum([e.diag["action_counts"] for e in eps], axis=0)
    ent = [(e.mean_entropy, e.length) for e in eps if math.isfinite(e.mean_entropy)]
    mean_ent = sum(m * n for m, n in ent) / max(1, sum(n for _, n in ent)) if ent else math.nan
    if kind != "q" and counts.size >= 2:
        if mean_ent >= THRESHOLDS["policy_uniform_entropy"]:
            out.append(_warn(
                "policy_uniform",
                f"Mean relative policy entropy is {mean_ent:.3f} (1 = uniform over {counts.size} actions). The "
                "policy barely prefers any action: it never learned, or the wrong weights or observation "
                "preprocessing (frame stack, scaling, channel order) are loaded. Check the checkpoint and the "
                "env recipe match training.", mean_relative_entropy=_num(mean_ent)))
        low = sum(e.diag["low_entropy_steps"] for e in eps) / max(1, steps)
        if low >= THRESHOLDS["collapsed_fraction"]:
            out.append(_warn(
                "policy_collapsed",
                f"Relative entropy is below {THRESHOLDS['collapsed_entropy']} on {low:.1%} of steps: the stochastic "
                "policy has collapsed to a deterministic one. Often a missing or too small entropy bonus (check "
                "it reaches the loss), or a too high learning rate.",
                low_entropy_fraction=_num(low), mean_relative_entropy=_num(mean_ent)))
    total = int(counts.sum())
    if counts.size >= 2 and total:
        a = int(np.argmax(counts))
        frac = counts[a] / total
        if frac >= THRESHOLDS["dominant_fraction"]:
            out.append(_warn(
                "action_dominant",
                f"Action {a} was taken on {frac:.1%} of {total} steps. The agent ignores the other "
                f"{counts.size - 1} action(s): a collapsed policy, an action mapping that differs from training, "
                "or observations the network cannot tell apart (check preprocessing).",
                action=a, fraction=_num(frac), action_counts=[int(c) for c in counts]))
    return out


def _value_moments(eps):
    sums = [e.value_sums for e in eps if e.value_sums is not None]
    if not sums:
        return None
    n, sv, sg, svv, sgg, svg = np.sum(np.asarray(sums, dtype=np.float64), axis=0)
    if n < MIN_VALUE_STEPS:
        return None
    mv, mg = sv / n, sg / n
    var_v, var_g = max(svv / n - mv * mv, 0.0), max(sgg / n - mg * mg, 0.0)
    cov = svg / n - mv * mg
    if var_g <= 1e-12 * max(1.0, sgg / n):
        return None
    ev = 1.0 - (var_g - 2 * cov + var_v) / var_g
    corr = cov / math.sqrt(var_v * var_g) if var_v > 1e-12 * max(1.0, svv / n) else math.nan
    return int(n), mv, mg, math.sqrt(var_g), ev, corr


def _value_findings(eps, gamma: float) -> list:
    m = _value_moments(eps)
    if m is None:
        return []
    n, mv, mg, sd_g, ev, corr = m
    ev_ = dict(steps=n, explained_variance=_num(ev), correlation=None if math.isnan(corr) else _num(corr),
               value_mean=_num(mv), return_mean=_num(mg), return_std=_num(sd_g), gamma=gamma)
    if corr <= THRESHOLDS["wrong_sign_correlation"]:
        return [_warn(
            "value_wrong_sign",
            f"The value correlates negatively (r = {corr:.3f}) with the discounted return that came (gamma "
            f"{gamma:g}): it is high where the return is low. Check the sign of the value head or of the rewards "
            "(a cost fed as a reward), and that V is not computed on the wrong observations.", **ev_)]
    out = []
    if ev <= THRESHOLDS["uninformative_ev"]:
        hint = (f" It does track the return (correlation {corr:.2f}), on another scale: a reward scale or discount "
                "that differs from training." if corr >= 0.5 else "")
        out.append(_warn(
            "value_uninformative",
            f"The value explains {ev:.3f} of the variance of the discounted return-to-go (gamma {gamma:g}; 1 = "
            "perfect, <= 0.1 flagged). The value head was not trained (value loss coefficient 0, a detached "
            f"head), or it was trained with another discount or reward scale.{hint} Check the value loss and "
            "--gamma.", **ev_))
    if abs(mv - mg) > sd_g:
        out.append(_warn(
            "value_biased",
            f"The value is off by {mv - mg:+.3g} on average (mean V {mv:.3g}, mean discounted return {mg:.3g}), more "
            f"than the return's spread (std {sd_g:.3g}). Usually the discount differs from training (this run uses "
            f"gamma {gamma:g}: pass --gamma), the rewards were scaled or normalised in training and not undone, "
            "or the reward clipping differs.", **ev_))
    return out


def has_terminal_state(env_id: str, env_kwargs: dict | None = None) -> bool:
    """False for envs that end only by their time limit (see the module docstring), True otherwise."""
    suite = _DM_CONTROL_SUITE.fullmatch(str(env_id))
    if suite is not None:
        return suite["domain"] == "lqr"
    name = str(env_id).rsplit("/", 1)[-1].rsplit("-v", 1)[0]
    return name not in NO_TERMINAL_STATE and (env_kwargs or {}).get("terminate_when_unhealthy", True) is not False


def _env_can_end(result) -> bool:
    try:
        kwargs = json.loads(getattr(result, "recipe_json", "") or "{}").get("env_kwargs")
    except (ValueError, AttributeError):
        kwargs = None
    return has_terminal_state(getattr(result, "env_id", ""), kwargs if isinstance(kwargs, dict) else None)


def _episode_findings(eps, can_end: bool = True) -> list:
    out = []
    loops = [e for e in eps if e.diag["loop_steps"] >= THRESHOLDS["loop_steps"]]
    if loops:
        worst = max(loops, key=lambda e: e.diag["loop_steps"])
        out.append(_warn(
            "episode_loops",
            f"{len(loops)} episode(s) repeat an exact cycle of observations for >= {THRESHOLDS['loop_steps']} steps "
            f"(longest: episode {worst.index}, {worst.diag['loop_steps']} steps with period "
            f"{worst.diag['loop_period']}). The agent is stuck in a loop the env does not end: render one "
            "(--videos worst:1) and check whether an action it never takes would get out; a time limit hides it.",
            episodes=len(loops), episode_ids=_ids(loops), longest=worst.diag["loop_steps"],
            longest_episode=int(worst.index), period=worst.diag["loop_period"]))
    trunc = sum(bool(e.truncated) for e in eps) / len(eps)
    if can_end and trunc >= THRESHOLDS["never_terminates_fraction"]:
        out.append(_warn(
            "never_terminates",
            f"{trunc:.0%} of episodes ended by the time limit, not by the game. The agent neither wins nor loses: "
            "often a stalling policy (no FIRE, a loop), or a time limit shorter than the game needs.",
            truncated_fraction=_num(trunc)))
    return out


def _info_findings(eps) -> list:
    out = []
    rets = np.array([e.ret for e in eps], dtype=np.float64)
    if len(eps) >= 2 and np.all(rets == rets[0]):
        out.append(_info("returns_constant", f"Every episode returned {rets[0]:g}: the statistics cannot tell "
                         "episodes apart (a deterministic env and policy, or a reward that never varies).",
                         value=float(rets[0])))
    pos = sum(e.diag["positive_rewards"] for e in eps)
    neg = sum(e.diag["negative_rewards"] for e in eps)
    if (pos == 0) != (neg == 0):
        sign = "positive" if pos else "negative"
        out.append(_info("rewards_one_sign", f"All {pos + neg} non-zero rewards are {sign}: fine for many games, "
                         "but a value that is mostly of the other sign points to a sign error.",
                         positive=int(pos), negative=int(neg)))
    return out


def diagnose(result, kind: str = "actor_critic") -> list[Finding]:
    """Findings over a rollout's episodes (warnings first). kind: the policy's kind ("q": no entropy findings)."""
    eps = [e for e in getattr(result, "episodes", ()) if getattr(e, "diag", None) is not None]
    if not eps:
        return []
    steps = sum(e.diag["steps"] for e in eps)
    space = getattr(result, "action_space", None)  # None: Discrete
    if isinstance(space, dict) and space.get("kind") == "box":  # no discrete finding on a Box (box_findings.py)
        policy = box_policy_findings(eps, space, lambda i, sev, msg, **ev: Finding(i, sev, msg, ev))
    else:
        policy = _policy_findings(eps, kind, steps)
    found = (_nan_finding(eps) + policy + _value_findings(eps, float(result.gamma))
             + _episode_findings(eps, _env_can_end(result)) + _info_findings(eps))
    return [f for f in found if f.severity == "warning"] + [f for f in found if f.severity != "warning"]
