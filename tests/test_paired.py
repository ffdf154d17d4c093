"""Paired statistics of ``rlviz compare``: exact values on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from rlviz.errors import UsageError
from rlviz.evaluate.statistics.paired import (
    RESAMPLES,
    bootstrap_ci,
    bootstrap_indices,
    paired_comparison,
    percentile_ci,
    prob_improvement,
)
from rlviz.evaluate.statistics.stats import iqm


def test_percentile_ci_by_hand():
    # 5 bootstrap means 0..4: numpy's linear percentile at 2.5% is 0 + 0.025 * 4 = 0.1, at 97.5% 4 - 0.1 = 3.9
    assert percentile_ci([3.0, 0.0, 4.0, 1.0, 2.0]) == pytest.approx([0.1, 3.9], abs=1e-12)


def test_bootstrap_ci_on_given_resamples_by_hand():
    d = np.array([1.0, 2.0, 3.0, 10.0])
    idx = np.array([[0, 0, 0, 0],    # mean 1
                    [0, 1, 2, 3],    # mean 4
                    [3, 3, 3, 3],    # mean 10
                    [1, 1, 2, 2],    # mean 2.5
                    [0, 1, 1, 2]])   # mean 2
    # sorted means 1, 2, 2.5, 4, 10: 2.5% -> 1 + 0.1 * (2 - 1) = 1.1; 97.5% -> 4 + 0.9 * (10 - 4) = 9.4
    assert bootstrap_ci(d, np.mean, idx) == pytest.approx([1.1, 9.4], abs=1e-12)
    # median of each row: 1, 2.5, 10, 2.5, 2 -> sorted 1, 2, 2.5, 2.5, 10 -> [1 + 0.1 * 1, 2.5 + 0.9 * 7.5]
    assert bootstrap_ci(d, np.median, idx) == pytest.approx([1.1, 9.25], abs=1e-12)


def test_iqm_bootstrap_rows_match_stats_iqm():
    rng = np.random.default_rng(3)
    x = rng.normal(size=37)
    idx = bootstrap_indices(x.size, 50, seed=1)
    want = percentile_ci([iqm(x[r]) for r in idx])
    assert bootstrap_ci(x, iqm, idx) == pytest.approx(want, abs=1e-12)


def test_bootstrap_is_fixed_and_covers_the_normal_interval():
    idx = bootstrap_indices(10, seed=0)
    assert idx.shape == (RESAMPLES, 10) and RESAMPLES >= 2000
    assert np.array_equal(idx, bootstrap_indices(10, seed=0))
    assert np.array_equal(idx, np.random.default_rng(0).integers(0, 10, size=(RESAMPLES, 10)))
    d = np.random.default_rng(5).normal(2.0, 3.0, size=1000)
    lo, hi = bootstrap_ci(d)
    half = 1.96 * d.std() / np.sqrt(d.size)  # the normal approximation, for a sanity check only
    assert lo == pytest.approx(d.mean() - half, abs=0.03) and hi == pytest.approx(d.mean() + half, abs=0.03)


def test_prob_improvement_counts_ties_half():
    a = [0, 1, 2, 3]
    b = [1, 1, 1, 5]  # better, tie, worse, better -> (2 + 0.5) / 4
    assert prob_improvement(a, b) == 0.625
    assert prob_improvement(a, a) == 0.5


def test_paired_comparison_of_identical_returns_is_exactly_zero():
    r = np.random.default_rng(0).integers(0, 30, size=200).astype(float)
    c = paired_comparison(r, r)
    assert c["return_diff"] == {"mean": 0.0, "median": 0.0, "ci95": [0.0, 0.0]}
    assert c["prob_improvement"] == 0.5 and c["prob_improvement_ci95"] == [0.5, 0.5]
    assert c["iqm"]["a"] == c["iqm"]["b"] and c["iqm"]["diff"] == {"value": 0.0, "ci95": [0.0, 0.0]}
    assert c["bootstrap"]["resamples"] >= 2000


def test_paired_comparison_constant_shift():
    a = np.arange(40, dtype=float)
    c = paired_comparison(a, a + 3)
    assert c["return_diff"] == {"mean": 3.0, "median": 3.0, "ci95": [3.0, 3.0]}
    assert c["prob_improvement"] == 1.0
    assert c["iqm"]["b"]["value"] == pytest.approx(c["iqm"]["a"]["value"] + 3)
    assert c["iqm"]["diff"]["ci95"] == pytest.approx([3.0, 3.0])


def test_unpaired_lengths_are_a_usage_error():
    with pytest.raises(UsageError, match="same episodes"):
        paired_comparison([1, 2], [1, 2, 3])


def test_paired_difference_is_paired_comparisons_own_numbers():
    """The timeline's findings use paired_difference: the same return_diff and prob_improvement as compare's."""
    from rlviz.evaluate.statistics.paired import paired_comparison, paired_difference

    rng = np.random.default_rng(3)
    a, b = rng.normal(size=200), rng.normal(0.1, size=200)
    full, part = paired_comparison(a, b), paired_difference(a, b)
    assert part == {k: full[k] for k in ("return_diff", "prob_improvement")}
    assert part["return_diff"]["ci95"][0] < part["return_diff"]["mean"] < part["return_diff"]["ci95"][1]
