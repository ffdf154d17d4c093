import csv
import json

import numpy as np
import pytest

from rlviz.evaluate.rollouts.rollout import EpisodeRecord, RolloutResult
from rlviz.evaluate.statistics.stats import (
    explained_variance,
    format_table,
    iqm,
    summarize,
    write_episodes_csv,
    write_summary_json,
)


def test_iqm_and_explained_variance_exact():
    assert iqm([1, 2, 3, 4, 5, 6, 7, 100]) == 4.5  # mean of 3, 4, 5, 6
    assert iqm([10, 1, 2, 3, 4]) == 3.0  # n=5: floor(1.25) = 1 cut per side -> mean(2, 3, 4)
    assert explained_variance([1, 2, 3], [1, 2, 3]) == 1.0
    assert explained_variance([0, 0, 0, 0], [1, -1, 1, -1]) == 0.0
    assert explained_variance([2, 0], [1, -1]) == 1.0  # constant residual: explains all variance
    assert np.isnan(explained_variance([1, 2], [3, 3]))


def _rec(i, ret, length, v=None, g=None, success=None, failures=1):
    sums = None
    if v is not None:
        v, g = np.asarray(v, float), np.asarray(g, float)
        sums = (len(v), v.sum(), g.sum(), v @ v, g @ g, v @ g)
    return EpisodeRecord(i, 100 + i, ret, length, failures, True, False, success, 0.5, False, sums)


def test_summarize_known_arrays(tmp_path):
    v1, g1 = [1.0, 2.0], [1.5, 2.5]
    v2, g2 = [0.0, 4.0, 1.0], [1.0, 3.0, 2.0]
    recs = (_rec(0, 1.0, 2, v1, g1, True), _rec(1, 3.0, 3, v2, g2, False, failures=3),
            _rec(2, 5.0, 5, success=True), _rec(3, 7.0, 6))
    res = RolloutResult("probe", recs, None, 16, 2.0, 0.9, 0, "termination")
    s = summarize(res)
    assert (s.returns.mean, s.returns.median, s.returns.min, s.returns.max) == (4.0, 4.0, 1.0, 7.0)
    assert s.returns.iqm == 4.0 and s.returns.std == pytest.approx(np.std([1, 3, 5, 7]))
    assert s.returns.p25 == np.percentile([1, 3, 5, 7], 25)
    assert s.lengths.mean == 4.0 and s.failures_per_episode == 1.5
    assert s.solve_rate == pytest.approx(2 / 3)
    v, g = np.array(v1 + v2), np.array(g1 + g2)
    assert s.value_mean == pytest.approx(v.mean()) and s.discounted_return_mean == pytest.approx(g.mean())
    assert s.value_residual == pytest.approx((g - v).mean())
    assert s.value_explained_variance == pytest.approx(explained_variance(v, g))
    table = format_table(s)
    assert "iqm" in table and "66.7%" in table and "probe" in table
    d = json.loads(write_summary_json(s, tmp_path / "s.json").read_text())
    assert d["returns"]["iqm"] == 4.0 and d["solve_rate"] == pytest.approx(2 / 3)
    rows = list(csv.DictReader(open(write_episodes_csv(res, tmp_path / "e.csv"))))
    assert [r["return"] for r in rows] == ["1.0", "3.0", "5.0", "7.0"] and rows[1]["seed"] == "101"
    assert rows[3]["is_success"] == "" and rows[0]["is_success"] == "True"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.csv", "s.json"]
