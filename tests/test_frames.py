"""The one frame converter: every stage turns env.render() output into uint8 RGB the same way."""

import numpy as np
import pytest

from rlviz.envs import to_rgb_frame
from rlviz.errors import EnvError


def test_uint8_frames_pass_through_unchanged():
    f = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    out = to_rgb_frame(f)
    assert out.dtype == np.uint8 and np.array_equal(out, f)


def test_float_frames_in_unit_range_are_scaled_and_rounded():
    out = to_rgb_frame(np.array([[[0.0, 0.5, 1.0]]], dtype=np.float64))
    assert out.tolist() == [[[0, 128, 255]]]  # 0.5 * 255 = 127.5 rounds to 128
    assert to_rgb_frame(np.array([[[0.2, 0.4, 0.6]]], dtype=np.float32)).tolist() == [[[51, 102, 153]]]


def test_float_frames_in_byte_range_are_kept_on_that_scale():
    out = to_rgb_frame(np.array([[[0.0, 100.0, 200.0]]]))
    assert out.tolist() == [[[0, 100, 200]]]
    assert to_rgb_frame(np.array([[[-5.0, 127.5, 300.0]]])).tolist() == [[[0, 128, 255]]]


def test_nan_bool_grey_and_alpha():
    assert to_rgb_frame(np.array([[[np.nan, 0.5, 1.0]]])).tolist() == [[[0, 128, 255]]]
    assert to_rgb_frame(np.array([[True, False]])).tolist() == [[[255] * 3, [0] * 3]]
    grey = to_rgb_frame(np.array([[7, 9]], dtype=np.uint8))
    assert grey.shape == (1, 2, 3) and grey[0, 1].tolist() == [9, 9, 9]
    rgba = to_rgb_frame(np.zeros((2, 2, 4), dtype=np.uint8) + np.array([1, 2, 3, 4], dtype=np.uint8))
    assert rgba.shape == (2, 2, 3) and rgba.flags["C_CONTIGUOUS"] and rgba[0, 0].tolist() == [1, 2, 3]


def test_none_and_bad_shapes_say_what_to_do():
    with pytest.raises(EnvError, match="render_mode='rgb_array'"):
        to_rgb_frame(None)
    with pytest.raises(EnvError, match=r"shape \(3,\)"):
        to_rgb_frame(np.zeros(3))
