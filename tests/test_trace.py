"""Spool / SpoolArray: disk-backed episode storage reads back exactly what was written."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rlviz.episode import Spool, returns_to_go
from rlviz.errors import UsageError


def test_spool_reads_back_items_slices_and_tuples(tmp_path):
    spool = Spool((3, 4), np.int16, dir=tmp_path)
    items = [np.arange(12, dtype=np.int16).reshape(3, 4) * k for k in range(10)]
    for item in items:
        spool.append(item)
    view = spool.view()
    expected = np.stack(items)
    assert view.shape == (10, 3, 4) and view.dtype == np.int16 and len(view) == 10
    np.testing.assert_array_equal(view[4], expected[4])
    np.testing.assert_array_equal(view[-1], expected[-1])
    np.testing.assert_array_equal(view[2:7], expected[2:7])
    np.testing.assert_array_equal(view[::3], expected[::3])
    np.testing.assert_array_equal(view[8:20], expected[8:])  # clipped like numpy
    np.testing.assert_array_equal(view[5, 1], expected[5, 1])
    np.testing.assert_array_equal(view[1:3, :, 2], expected[1:3, :, 2])
    np.testing.assert_array_equal(np.asarray(view), expected)
    assert view[2:7].flags.writeable  # torch can take it without a copy warning
    with pytest.raises(IndexError):
        view[10]
    with pytest.raises(UsageError, match="shaped"):
        spool.append(np.zeros((4, 3), np.int16))
    folder = os.path.dirname(spool.path)
    spool.close()
    assert not os.path.exists(folder)


def test_a_reader_keeps_its_spool_alive(tmp_path):
    def make():
        spool = Spool((2,), np.float32, dir=tmp_path)
        spool.append([1.0, 2.0])
        return spool.view()  # the Spool object itself goes out of scope here

    import gc

    view = make()
    gc.collect()
    np.testing.assert_array_equal(view[0], [1.0, 2.0])


def test_returns_to_go_discounts_and_bootstraps():
    np.testing.assert_allclose(returns_to_go(np.array([1.0, 0.0, 2.0]), 0.5), [1.5, 1.0, 2.0, 0.0])
    np.testing.assert_allclose(returns_to_go(np.array([1.0]), 0.9, bootstrap=10.0), [10.0, 10.0])
