import numpy as np
import pytest
from PIL import Image

from rlviz.errors import UsageError
from rlviz.evaluate.failures.heatmap import FailureHeatmap


def _hm(points, env_id="probe"):
    h = FailureHeatmap((6, 5), ("ball", "paddle"), env_id)
    for p in points:
        m = np.zeros((6, 5), bool)
        m[p] = True
        h.add({"ball": m, "paddle": np.roll(m, 1, axis=1)})
    h.episodes += len(points)
    return h


def test_add_merge_and_total():
    a, b = _hm([(0, 0), (1, 1)]), _hm([(1, 1)])
    m = FailureHeatmap.merged([a, b])
    assert m.counts["ball"][1, 1] == 2 and m.counts["ball"].sum() == 3
    assert m.counts["paddle"][1, 2] == 2 and m.total().sum() == 6
    assert (m.failures, m.episodes) == (3, 3)
    assert a.counts["ball"].sum() == 2  # merged() does not modify its inputs
    with pytest.raises(UsageError, match="merge"):
        a.merge(_hm([], env_id="other"))
    with pytest.raises(UsageError, match="shape"):
        a.add({"ball": np.zeros((2, 2), bool)})
    with pytest.raises(UsageError, match="unknown"):
        a.add({"wall": np.zeros((6, 5), bool)})


def test_save_load_roundtrip_and_plot(tmp_path):
    h = _hm([(2, 3), (2, 3), (5, 4)])
    h.background = np.full((6, 5, 3), 40, np.uint8)
    p = h.save(tmp_path / "hm.npz")
    g = FailureHeatmap.load(p)
    assert g.object_names == ("ball", "paddle") and g.env_id == "probe"
    assert (g.failures, g.episodes) == (3, 3)
    assert all(np.array_equal(g.counts[n], h.counts[n]) and g.counts[n].dtype == np.int64 for n in g.object_names)
    assert np.array_equal(g.background, h.background)
    with np.load(p, allow_pickle=False) as z:  # no pickled objects inside
        assert set(z.files) == {"counts", "object_names", "env_id", "failures", "episodes", "background",
                                "contrib_episode", "contrib_object", "contrib_offsets", "contrib_runs"}
    for log in (False, True):
        out = g.plot(tmp_path / f"hm{log}.png", log=log)
        img = Image.open(out)
        assert img.format == "PNG" and img.size[0] > img.size[1] > 50
    assert sorted(x.name for x in tmp_path.iterdir()) == ["hm.npz", "hmFalse.png", "hmTrue.png"]
    (tmp_path / "bad.npz").write_bytes(b"nope")
    with pytest.raises(UsageError, match="heatmap"):
        FailureHeatmap.load(tmp_path / "bad.npz")


def test_the_plot_draws_the_counts_where_they_are(tmp_path):
    """Same colour scale and title, one count in a different cell: only the heat can make the PNGs differ."""
    a = np.asarray(Image.open(_hm([(1, 1)]).plot(tmp_path / "a.png")).convert("RGB")).astype(int)
    b = np.asarray(Image.open(_hm([(4, 3)]).plot(tmp_path / "b.png")).convert("RGB")).astype(int)
    again = np.asarray(Image.open(_hm([(1, 1)]).plot(tmp_path / "a2.png")).convert("RGB")).astype(int)
    assert a.shape == b.shape and np.array_equal(a, again)  # deterministic
    changed = np.abs(a - b).max(-1) > 30
    assert changed.sum() > 100  # whole heat cells moved (in each of the three panels)
    cols = np.flatnonzero(changed.any(0))
    assert cols.max() - cols.min() > a.shape[1] // 2  # in more than one panel, not just one spot
