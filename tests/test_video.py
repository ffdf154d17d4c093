"""VideoWriter writes real H.264/yuv420p MP4s through ffmpeg, atomically; probe_video/read_video decode them."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rlviz.errors import UsageError, VideoError
from rlviz.media.video import VideoWriter, partial_path, probe_video, read_video

W, H = 64, 48


def smooth_frame(i: int) -> np.ndarray:
    """A smooth RGB gradient that changes with i (compresses well, so decoding is close to exact)."""
    y, x = np.mgrid[0:H, 0:W]
    r = x * 200 // (W - 1) + 4 * i
    g = 20 + y * 200 // (H - 1)
    b = np.full_like(x, 40 + 15 * i)
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def _alive(pid: int) -> bool:
    """True while process pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_roundtrip_h264_yuv420p_exact_count_and_pixels(tmp_path):
    path = tmp_path / "ep.mp4"
    frames = [smooth_frame(i) for i in range(12)]
    with VideoWriter(path, fps=25, size=(W, H)) as w:
        for f in frames:
            w.write(f)
        # ffmpeg writes under the temporary name; the final name does not exist yet
        with open(f"/proc/{w.pid}/cmdline", "rb") as fh:
            args = fh.read().split(b"\0")
        assert str(partial_path(path)).encode() in args and str(path).encode() not in args
        assert partial_path(path).name == f".ep.{os.getpid()}.partial.mp4" and not path.exists()
    assert path.is_file() and not partial_path(path).exists()
    info = probe_video(path)
    assert (info.codec, info.pix_fmt, info.width, info.height, info.num_frames) == ("h264", "yuv420p", W, H, 12)
    assert info.fps == pytest.approx(25.0)
    decoded = list(read_video(path))
    assert len(decoded) == 12
    for f, d in zip(frames, decoded):
        assert d.shape == (H, W, 3) and d.dtype == np.uint8
        assert np.abs(d.astype(int) - f.astype(int)).mean() < 4.0
    # frames are not interchangeable: frame 5 is far closer to written frame 5 than to frame 0
    assert np.abs(decoded[5].astype(int) - frames[5]).mean() < np.abs(decoded[5].astype(int) - frames[0]).mean() / 3


def test_faststart_puts_moov_before_mdat(tmp_path):
    path = tmp_path / "fs.mp4"
    with VideoWriter(path, 30, (W, H)) as w:
        for i in range(3):
            w.write(smooth_frame(i))
    data = path.read_bytes()
    assert 0 < data.find(b"moov") < data.find(b"mdat")


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_exception_inside_with_leaves_no_file_and_kills_ffmpeg(tmp_path, exc):
    path = tmp_path / "bad.mp4"
    with pytest.raises(type(exc)):
        with VideoWriter(path, 30, (W, H)) as w:
            for i in range(4):
                w.write(smooth_frame(i))
            pid = w.pid
            assert pid is not None and _alive(pid)
            raise exc
    assert not path.exists()
    assert os.listdir(tmp_path) == []
    assert not _alive(pid)


def test_failed_write_keeps_an_existing_video(tmp_path):
    path = tmp_path / "keep.mp4"
    path.write_bytes(b"previous video")
    with pytest.raises(ValueError):
        with VideoWriter(path, 30, (W, H)) as w:
            w.write(smooth_frame(0))
            raise ValueError("stop")
    assert path.read_bytes() == b"previous video"
    assert sorted(os.listdir(tmp_path)) == ["keep.mp4"]


@pytest.mark.parametrize("size", [(63, 48), (64, 47), (0, 48), (64, -2)])
def test_odd_or_empty_sizes_are_refused(tmp_path, size):
    with pytest.raises(UsageError, match="multiples of 16"):
        VideoWriter(tmp_path / "x.mp4", 30, size)


def test_wrong_frame_shape_or_dtype_names_both(tmp_path):
    with VideoWriter(tmp_path / "x.mp4", 30, (W, H)) as w:
        with pytest.raises(UsageError, match=r"uint8 \[48, 64, 3\].*float32 \[48, 64, 3\]"):
            w.write(smooth_frame(0).astype(np.float32))
        with pytest.raises(UsageError, match=r"uint8 \[64, 48, 3\]"):
            w.write(np.zeros((W, H, 3), np.uint8))
        w.write(smooth_frame(0))
    assert probe_video(tmp_path / "x.mp4").num_frames == 1


def test_no_frames_is_an_error_and_leaves_nothing(tmp_path):
    with pytest.raises(VideoError, match="No frames"):
        with VideoWriter(tmp_path / "empty.mp4", 30, (W, H)):
            pass
    assert os.listdir(tmp_path) == []


def test_bad_arguments(tmp_path):
    with pytest.raises(UsageError, match="preset"):
        VideoWriter(tmp_path / "x.mp4", 30, (W, H), preset="warp")
    with pytest.raises(UsageError, match="crf"):
        VideoWriter(tmp_path / "x.mp4", 30, (W, H), crf=99)
    with pytest.raises(UsageError, match="fps"):
        VideoWriter(tmp_path / "x.mp4", 0, (W, H))
    with pytest.raises(UsageError, match="No video file"):
        probe_video(tmp_path / "missing.mp4")


def test_writer_cannot_be_reused_after_close(tmp_path):
    w = VideoWriter(tmp_path / "once.mp4", 30, (W, H))
    w.write(smooth_frame(0))  # opens lazily without `with`
    assert w.close() == tmp_path / "once.mp4"
    with pytest.raises(UsageError, match="already closed"):
        w.write(smooth_frame(1))
    assert probe_video(tmp_path / "once.mp4").num_frames == 1
