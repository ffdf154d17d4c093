"""atomic_path: an output appears complete or not at all."""

from __future__ import annotations

import numpy as np
import pytest

from rlviz.media.atomic import atomic_path


def test_completed_block_renames_and_keeps_the_suffix(tmp_path):
    target = tmp_path / "sub" / "data.npz"
    with atomic_path(target) as tmp:
        assert tmp.parent == target.parent and tmp.suffix == ".npz" and tmp != target
        np.savez(tmp, x=np.arange(3))  # np.savez would append .npz to a name without it
    np.testing.assert_array_equal(np.load(target)["x"], [0, 1, 2])
    assert sorted(p.name for p in target.parent.iterdir()) == ["data.npz"]


def test_failed_block_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "summary.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
