"""VideoWriter writes real H.264/yuv420p MP4s through ffmpeg, atomically; probe_video/read_video decode them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from _procs import alive, ffmpeg_pids

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
            assert pid is not None and alive(pid)
            raise exc
    assert not path.exists()
    assert os.listdir(tmp_path) == []
    assert not alive(pid)


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


# -- our own ffmpeg process: its error text, a broken pipe, interrupts while finishing -----------------------------
class WarpPreset(VideoWriter):
    """A writer whose ffmpeg command line asks libx264 for a preset it does not have."""

    def ffmpeg_args(self):
        args = super().ffmpeg_args()
        args[args.index("-preset") + 1] = "warp"
        return args


def test_ffmpeg_error_text_surfaces_and_nothing_is_left(tmp_path):
    path = tmp_path / "warp.mp4"
    with pytest.raises(VideoError, match=r"ffmpeg said: .*invalid preset 'warp'") as info:
        with WarpPreset(path, 30, (W, H)) as w:
            for i in range(200):  # ffmpeg dies at the first frame; the pipe breaks soon after
                w.write(smooth_frame(i % 8))
    assert "\n" not in str(info.value) and " @ 0x" not in str(info.value)
    assert os.listdir(tmp_path) == [] and not alive(w.pid)


def test_ffmpeg_error_at_close_is_reported(tmp_path):
    with pytest.raises(VideoError, match=r"\(exit status [1-9]\d*\): ffmpeg said: .*invalid preset 'warp'"):
        with WarpPreset(tmp_path / "warp.mp4", 30, (W, H)) as w:
            w.write(smooth_frame(0))  # one frame fits in the pipe: the failure shows when closing
    assert os.listdir(tmp_path) == []


def test_ffmpeg_cannot_open_its_output(tmp_path):
    path = tmp_path / "v.mp4"
    w = VideoWriter(path, 30, (W, H))
    w.partial.mkdir()  # something ffmpeg cannot write over
    with pytest.raises(VideoError, match=r"ffmpeg said: .*(Is a directory|directory)"):
        with w:
            for i in range(200):
                w.write(smooth_frame(i % 8))
    assert not path.exists() and w.partial.is_dir() and not alive(w.pid)


def test_output_folder_that_cannot_be_made(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(VideoError, match=r"Cannot create the folder .*file"):
        with VideoWriter(tmp_path / "file" / "v.mp4", 30, (W, H)) as w:
            w.write(smooth_frame(0))


def test_ffmpeg_killed_mid_episode_gives_a_video_error(tmp_path):
    path = tmp_path / "killed.mp4"
    with pytest.raises(VideoError, match=r"ffmpeg stopped while writing frame \d+"):
        with VideoWriter(path, 30, (W, H)) as w:
            w.write(smooth_frame(0))
            os.kill(w.pid, signal.SIGKILL)
            for i in range(200):
                w.write(smooth_frame(i % 8))
    assert os.listdir(tmp_path) == [] and not alive(w.pid)


def test_interrupt_while_ffmpeg_finishes_leaves_nothing(tmp_path):
    path = tmp_path / "late.mp4"
    with pytest.raises(KeyboardInterrupt):
        with VideoWriter(path, 30, (W, H)) as w:
            for i in range(5):
                w.write(smooth_frame(i))
            real_wait = w._proc.wait

            def interrupted_wait(timeout=None):
                if timeout is None:  # close() waiting for the encoder: Ctrl-C arrives
                    raise KeyboardInterrupt
                return real_wait(timeout)

            w._proc.wait = interrupted_wait
    assert os.listdir(tmp_path) == [] and not alive(w.pid)


# -- two processes writing the same video ------------------------------------------------------------------------
WRITER = """
import sys
import numpy as np
from rlviz.media import VideoWriter
value = int(sys.argv[2])
with VideoWriter(sys.argv[1], 30, (64, 48), preset="ultrafast") as w:
    for _ in range(10):
        w.write(np.full((48, 64, 3), value, np.uint8))
    print(w.partial, flush=True)
    sys.stdin.readline()  # both writers are mid-video now; finish when told
"""


def test_two_processes_writing_the_same_video_use_different_temporary_files(tmp_path):
    path = tmp_path / "same.mp4"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(v)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env) for v in (40, 200)]
    try:
        partials = [p.stdout.readline().strip() for p in procs]
        deadline = time.monotonic() + 120  # a hang guard: ffmpeg starts slowly on a loaded machine
        while not all(os.path.isfile(q) for q in partials) and time.monotonic() < deadline:
            time.sleep(0.05)  # ffmpeg creates its output once the encoder is up
        assert len(set(partials)) == 2 and all(os.path.isfile(q) for q in partials)
        assert all(os.path.basename(q).endswith(".partial.mp4") for q in partials)  # .gitignore: *.partial.mp4
        for p in procs:
            p.stdin.write("\n")
            p.stdin.flush()
            assert p.wait(timeout=60) == 0
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert os.listdir(tmp_path) == ["same.mp4"]
    frames = list(read_video(path))  # the last one to finish wins, whole
    assert len(frames) == 10
    assert {abs(int(np.median(f)) - 40) <= 4 for f in frames} == {True} or {abs(int(np.median(f)) - 200) <= 4 for f in frames} == {True}


# -- decoding --------------------------------------------------------------------------------------------------
def test_decoder_round_trip_exact_frames_and_early_stop(tmp_path):
    path = tmp_path / "bars.mp4"
    frames = []
    for i in range(30):
        f = np.zeros((H, W, 3), np.uint8)
        f[:, 2 * i : 2 * i + 2] = (255, 128, 0)  # one orange bar that moves 2 px a frame
        frames.append(f)
    with VideoWriter(path, 20, (W, H), crf=0, preset="ultrafast") as w:
        for f in frames:
            w.write(f)
    info = probe_video(path)
    assert (info.num_frames, info.width, info.height, info.fps) == (30, W, H, 20.0)
    assert info.duration == pytest.approx(1.5, abs=0.06)
    decoded = list(read_video(path))
    assert len(decoded) == 30
    for i, d in enumerate(decoded):
        cols = d[..., 0].astype(int).mean(axis=0)
        assert set(np.flatnonzero(cols > 128)) == {2 * i, 2 * i + 1}  # the bar, where it was written
        assert np.abs(d[H // 2, 2 * i].astype(int) - (255, 128, 0)).max() <= 12  # its colour (yuv420p rounding)
    gen = read_video(path)
    next(gen)
    gen.close()  # stopping early kills the decoder
    assert ffmpeg_pids(parent=os.getpid()) == []


def test_decoder_errors_name_the_file(tmp_path):
    bad = tmp_path / "not-a-video.mp4"
    bad.write_bytes(b"hello, not a video")
    with pytest.raises(VideoError, match=r"not-a-video\.mp4.*Invalid data"):
        probe_video(bad)
    with pytest.raises(VideoError, match=r"not-a-video\.mp4"):
        list(read_video(bad))
    assert ffmpeg_pids(parent=os.getpid()) == []



def test_frames_converted_to_yuv_here_decode_as_ffmpegs_own_conversion(tmp_path):
    blocks = np.zeros((H, W, 3), np.uint8)  # saturated blocks 16 px wide: chroma edges on 2x2 boundaries
    for k, color in enumerate([(255, 0, 0), (0, 255, 0), (0, 0, 255), (250, 180, 30)]):
        blocks[:, 16 * k : 16 * (k + 1)] = color
    frames = [smooth_frame(i) for i in range(6)] + [blocks]
    decoded = {}
    for yuv in (False, True):
        path = tmp_path / f"yuv-{yuv}.mp4"
        with VideoWriter(path, 25, (W, H), crf=0, yuv=yuv) as w:
            assert ("yuv420p" if yuv else "rgb24") == w.ffmpeg_args()[w.ffmpeg_args().index("-pix_fmt") + 1]
            for f in frames:
                w.write(f)
        info = probe_video(path)
        assert (info.pix_fmt, info.num_frames) == ("yuv420p", len(frames))
        decoded[yuv] = np.stack(list(read_video(path))).astype(int)
    for got in decoded.values():
        assert np.abs(got - np.stack(frames)).mean() < 3.0
    diff = np.abs(decoded[True] - decoded[False])
    assert diff.mean() < 1.0 and diff[-1].mean() < 1.5  # the same colours as ffmpeg's conversion, within a level


def _busy_frames(w: int, h: int, n: int) -> list[np.ndarray]:
    """Frames with motion, edges and scattered dots: what makes libx264's frame threads decide differently."""
    rng = np.random.default_rng(0)
    out = []
    for t in range(n):
        f = np.full((h, w, 3), 30, np.uint8)
        x = (t * 7) % (w - 40)
        f[h // 4:h // 4 + 40, x:x + 40] = (200, 50, 50)
        f[:, w // 2:] = np.clip(np.arange(w - w // 2)[None, :, None] * 0.5 + t % 50, 0, 255).astype(np.uint8)
        f[(h // 8 + 3 * t) % h, w // 2:] = 255
        f[rng.integers(0, h, 50), rng.integers(0, w, 50)] = 255
        out.append(f)
    return out


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_a_videos_pixels_do_not_depend_on_the_machines_cores(tmp_path):
    """The same frames written by a process that may use one core and by one that may use every core decode to the
    same pixels. libx264 left to pick its threads picks them from the cores it may use (ffmpeg inherits the writing
    thread's affinity): 1 thread on one core, 3 on two, where these 880x480 frames decode to other pixels; rlviz
    fixes the count (rlviz.media.video.x264_threads)."""
    from rlviz.media.video import X264_THREADS, x264_threads

    assert [x264_threads(h) for h in (32, 48, 64, 80, 96, 480, 2160)] == [1, 1, 2, 2, 3, 3, X264_THREADS]
    frames = _busy_frames(880, 480, 60)

    def write(name: str, cpus: set[int]) -> np.ndarray:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cpus)  # (this thread's: the ffmpeg it starts inherits it)
        try:
            with VideoWriter(tmp_path / name, 20, (880, 480)) as w:
                for f in frames:
                    w.write(f)
        finally:
            os.sched_setaffinity(0, before)
        return np.stack(list(read_video(tmp_path / name)))

    every = os.sched_getaffinity(0)
    if len(every) < 2:
        pytest.skip("one core: nothing to compare")
    one = write("one.mp4", {min(every)})
    assert np.array_equal(one, write("all.mp4", every))
