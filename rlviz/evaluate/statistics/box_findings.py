"""Diagnostics for Box (continuous) actions: the policy judged against the action space it acts in.

:func:`rlviz.evaluate.statistics.diagnostics.diagnose` calls :func:`box_policy_findings` in place of the discrete findings
(``policy_uniform``, ``policy_collapsed``, ``action_dominant``: a relative entropy over n actions means nothing for a
Gaussian over D dimensions). What a rollout keeps of a Box policy per episode is the mean of its Gaussian's
differential entropy ``H = sum_d 0.5 ln(2 pi e sigma_d^2)`` (nats; of the pre-tanh Gaussian when the policy squashes,
SAC's). Against the action bounds it gives one number, the Gaussian's **spread**: the geometric mean over the
dimensions of ``sigma_d / range_d``, where ``range_d`` is ``high_d - low_d`` (a squashed policy's pre-tanh range is
taken as [-1, 1], where tanh is not yet flat), computed as ``exp(H / D - mean_d ln range_d) / sqrt(2 pi e)``.

==================== ===================================================================================
id                   triggered when
==================== ===================================================================================
gaussian_uniform     spread >= 1 / sqrt(2 pi e) = 0.242 (the Gaussian is at least as wide as the uniform
                     distribution over the bounds, whose entropy it then has or exceeds)
gaussian_collapsed   spread < 0.001 (sigma under a thousandth of the range: a stochastic policy that stopped
                     exploring; not raised for deterministic actors)
==================== ===================================================================================

Deterministic actors (TD3, DDPG, CleanRL's ``td3``/``ddpg`` scripts: no std, so no entropy) raise the info
``deterministic_actor`` and no entropy finding. Dimensions with an infinite bound are left out of the spread (no
range to judge against); with none left, no spread finding is raised.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["box_policy_findings", "BOX_THRESHOLDS", "BOX_WARNING_IDS", "gaussian_spread"]

#: The spreads (sigma / range, geometric mean over the dimensions) that raise the findings above.
BOX_THRESHOLDS = {"uniform_spread": 1.0 / math.sqrt(2.0 * math.pi * math.e), "collapsed_spread": 1e-3}
BOX_WARNING_IDS = ("gaussian_uniform", "gaussian_collapsed")


def gaussian_spread(mean_entropy: float, low, high, squash: bool) -> float:
    """The spread (module docstring) of a Gaussian whose differential entropy, summed over its D dimensions, is
    ``mean_entropy`` nats, acting in the Box [low, high] (``squash``: its pre-tanh range, [-1, 1]); NaN when no
    dimension has finite bounds or the entropy is not finite."""
    lo, hi = np.asarray(low, np.float64).reshape(-1), np.asarray(high, np.float64).reshape(-1)
    d = len(lo)
    if not d or not math.isfinite(mean_entropy):
        return math.nan
    rng = np.full(d, 2.0) if squash else hi - lo
    ok = np.isfinite(rng) & (rng > 0)
    if not ok.any():
        return math.nan
    # H / D is the mean of 0.5 ln(2 pi e sigma_d^2) over all dimensions: the dimensions with no range count with
    # the mean log-range of the others (their sigma cannot be told apart from the entropy alone)
    per_dim = mean_entropy / d - float(np.mean(np.log(rng[ok])))
    return math.exp(per_dim) / math.sqrt(2.0 * math.pi * math.e)


def box_policy_findings(eps, space: dict, make) -> list:
    """Findings on a Box policy's entropy over ``eps`` (EpisodeResults with ``mean_entropy`` and ``length``);
    ``space``: the action space as :func:`rlviz.agent.actions.space_to_json` wrote it, with ``squash``;
    ``make(id, severity, message, **evidence)``: the Finding constructor of :mod:`rlviz.evaluate.statistics.diagnostics`."""
    ent = [(float(e.mean_entropy), int(e.length)) for e in eps if e.length]
    finite = [(m, n) for m, n in ent if math.isfinite(m)]
    dims = int(np.prod(space.get("shape") or [0]))
    if ent and not finite:
        return [make("deterministic_actor", "info",
                     f"The actor is deterministic (no Gaussian std: TD3 / DDPG style): it takes its mean action "
                     f"on each of its {dims} action dimensions, so no entropy finding applies. The exploration "
                     "noise of its training is not part of the policy.", action_dimensions=dims)]
    if not finite:
        return []
    mean_ent = sum(m * n for m, n in finite) / max(1, sum(n for _, n in finite))
    squash = bool(space.get("squash"))
    spread = gaussian_spread(mean_ent, space.get("low", ()), space.get("high", ()), squash)
    if not math.isfinite(spread):
        return []
    where = "the pre-tanh Gaussian against [-1, 1] (tanh-squashed)" if squash else "sigma against the action bounds"
    evidence = dict(spread=round(spread, 6), mean_entropy_nats=round(mean_ent, 4), action_dimensions=dims,
                    squashed=squash)
    if spread >= BOX_THRESHOLDS["uniform_spread"]:
        return [make(
            "gaussian_uniform", "warning",
            f"The policy's Gaussian is as wide as the action bounds (spread {spread:.3f}, {where}; "
            f">= {BOX_THRESHOLDS['uniform_spread']:.3f} is at least the entropy of the uniform over the bounds): its "
            "actions are mostly noise. It never learned (an initial log std of 0), or the log std was not loaded "
            "with the weights; evaluate with --greedy to see the mean action.", **evidence)]
    if spread < BOX_THRESHOLDS["collapsed_spread"]:
        return [make(
            "gaussian_collapsed", "warning",
            f"The policy's Gaussian has collapsed (spread {spread:.2e}, {where}: sigma under a thousandth of the "
            "range): the stochastic policy no longer explores. Often a log std driven down without bound (no "
            "minimum, no entropy bonus or target), or a too high learning rate.", **evidence)]
    return []
