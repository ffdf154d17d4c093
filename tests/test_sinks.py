"""Sinks: a folder, TensorBoard event files (read back), a W&B offline run (read back, no network)."""

from __future__ import annotations

import csv
import glob
import importlib
import io
import json
import sys
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest
from conftest import tb_accumulator, wandb_flushed, wandb_items, wandb_records

from rlviz.errors import MissingDependencyError, UsageError
from rlviz.media.video import VideoWriter
from rlviz.sinks import FolderSink, read_video_frames

N_FRAMES, FPS, W, H = 45, 30.0, 480, 320
BAR = 10  # frame i has a white vertical bar at x = BAR * i .. BAR * i + BAR - 1


def bar_frame(i: int) -> np.ndarray:
    f = np.zeros((H, W, 3), np.uint8)
    f[:, BAR * i : BAR * (i + 1)] = 255
    return f


def bar_index(frame: np.ndarray) -> int:
    """Which source frame a (possibly scaled) frame shows: where the bar is, in source pixels."""
    cols = frame.astype(np.float32).mean(axis=(0, 2))
    x = float(np.argmax(cols)) * W / frame.shape[1]
    return int(round((x - BAR / 2 + 0.5) / BAR))


@pytest.fixture
def mp4(tmp_path) -> Path:
    path = tmp_path / "src" / "ep.mp4"
    with VideoWriter(path, FPS, (W, H), preset="ultrafast") as w:
        for i in range(N_FRAMES):
            w.write(bar_frame(i))
    np.savez(path.with_suffix(".npz"), actions=np.arange(N_FRAMES - 1))
    return path


HEAT = np.stack(np.meshgrid(np.arange(40, dtype=np.uint8) * 6, np.arange(30, dtype=np.uint8) * 8), -1)
HEAT = np.concatenate([HEAT, np.full((30, 40, 1), 7, np.uint8)], -1)  # uint8 [30, 40, 3], all pixels distinct


# -- reading frames back -----------------------------------------------------------------------------------------
def test_read_video_frames_subsamples_in_time_and_downscales(mp4):
    clip = read_video_frames(mp4, max_size=160, max_frames=200, max_fps=15)
    assert clip.stride == 2 and clip.source_fps == FPS and clip.fps == 15.0 and clip.source_size == (W, H)
    assert clip.frames.shape == (23, 107, 160, 3) and clip.frames.dtype == np.uint8
    assert [bar_index(f) for f in clip.frames] == list(range(0, N_FRAMES, 2))

    few = read_video_frames(mp4, max_size=None, max_frames=5, max_fps=None)
    assert few.stride == 9 and few.frames.shape == (5, H, W, 3)
    assert [bar_index(f) for f in few.frames] == [0, 9, 18, 27, 36]


def test_read_video_frames_rejects_what_is_not_an_mp4(tmp_path):
    with pytest.raises(UsageError, match="MP4"):
        read_video_frames(tmp_path / "x.gif")
    with pytest.raises(UsageError, match="No video"):
        read_video_frames(tmp_path / "missing.mp4")


# -- folder ------------------------------------------------------------------------------------------------------
def test_folder_sink_writes_video_image_scalars_table(tmp_path, mp4):
    out = tmp_path / "out"
    with FolderSink(out) as sink:
        dst = sink.log_video("eval/episode", mp4, 1024, fps=FPS, caption="return 3")
        png = sink.log_image("eval/heatmap", HEAT, 1024)
        sink.log_scalars({"return": 3.5, "length": np.int64(44)}, 1024, prefix="eval/")
        sink.log_scalars({"return": float("nan")}, 2048, prefix="eval/")
        table = sink.log_table("eval/episodes", ["seed", "return"], [[0, 1.5], [1, 2.0]], 2048)
    assert dst == out / "eval" / "episode-step1024.mp4"
    assert dst.read_bytes() == mp4.read_bytes() and mp4.exists()  # copied, not moved
    assert np.load(dst.with_suffix(".npz"))["actions"].tolist() == list(range(N_FRAMES - 1))
    import imageio.v3 as iio

    assert png == out / "eval" / "heatmap-step1024.png" and np.array_equal(iio.imread(png), HEAT)
    lines = [json.loads(x) for x in (out / "scalars.jsonl").read_text().splitlines()]
    assert lines == [{"step": 1024, "eval/return": 3.5, "eval/length": 44.0}, {"step": 2048, "eval/return": "nan"}]
    assert json.loads((out / "summary.json").read_text()) == {"eval/return": "nan", "eval/length": 44.0}
    with open(table, newline="") as fh:
        assert list(csv.reader(fh)) == [["seed", "return"], ["0", "1.5"], ["1", "2.0"]]
    media = [json.loads(x) for x in (out / "media.jsonl").read_text().splitlines()]
    assert [(m["kind"], m["path"], m["step"]) for m in media] == [
        ("video", "eval/episode-step1024.mp4", 1024),
        ("image", "eval/heatmap-step1024.png", 1024),
        ("table", "eval/episodes-step2048.csv", 2048),
    ]
    assert media[0]["fps"] == FPS and media[0]["caption"] == "return 3"


def test_folder_sink_move_and_bad_input(tmp_path, mp4):
    sink = FolderSink(tmp_path / "out", move=True)
    data = mp4.read_bytes()
    dst = sink.log_video("ep", mp4, 5, fps=FPS)
    assert dst.read_bytes() == data and not mp4.exists() and not mp4.with_suffix(".npz").exists()
    with pytest.raises(UsageError, match="file name"):
        sink.log_image("../escape", HEAT, 1)
    with pytest.raises(UsageError, match="real number"):
        sink.log_scalars({"x": "high"}, 1)
    with pytest.raises(UsageError, match="non-negative integer"):
        sink.log_scalars({"x": 1.0}, -3)
    with pytest.raises(UsageError, match="shape"):
        sink.log_image("bad", np.zeros((4, 4, 2), np.uint8), 1)


# -- TensorBoard -------------------------------------------------------------------------------------------------
def test_tensorboard_sink_gif_image_scalars_without_moviepy(tmp_path, mp4, no_moviepy):
    from PIL import Image

    from rlviz.sinks import TensorBoardSink

    with TensorBoardSink(tmp_path / "tb", max_size=160, max_frames=200, max_fps=15) as sink:
        sink.log_video("eval/episode", mp4, 7, fps=FPS, caption="return 3")
        sink.log_image("eval/heatmap", HEAT, 7)
        sink.log_scalars({"return": 3.5, "length": 44}, 7, prefix="eval/")
        sink.log_scalars({"return": 5.25}, 9, prefix="eval/")
        sink.log_table("eval/episodes", ["seed", "return"], [[0, 1.5]], 9)
    assert no_moviepy == [] and "moviepy" not in sys.modules

    acc = tb_accumulator(tmp_path / "tb")
    (video,) = acc.Images("eval/episode")
    assert video.step == 7 and (video.width, video.height) == (160, 107)
    gif = Image.open(io.BytesIO(video.encoded_image_string))
    assert gif.format == "GIF" and gif.size == (160, 107) and gif.n_frames == 23
    shown = []
    for k in range(gif.n_frames):
        gif.seek(k)
        assert gif.info["duration"] == 70  # 15 fps -> 66.7 ms, GIF delays are whole centiseconds
        shown.append(bar_index(np.asarray(gif.convert("RGB"))))
    assert shown == list(range(0, N_FRAMES, 2))

    (heat,) = acc.Images("eval/heatmap")
    assert heat.step == 7 and np.array_equal(np.asarray(Image.open(io.BytesIO(heat.encoded_image_string))), HEAT)
    assert [(s.step, s.value) for s in acc.Scalars("eval/return")] == [(7, 3.5), (9, 5.25)]
    assert [(s.step, s.value) for s in acc.Scalars("eval/length")] == [(7, 44.0)]
    caption = acc.Tensors("eval/episode/caption/text_summary")[0]
    assert caption.step == 7 and caption.tensor_proto.string_val[0] == b"return 3"
    table = acc.Tensors("eval/episodes/text_summary")[0].tensor_proto.string_val[0].decode()
    assert table.splitlines() == ["| seed | return |", "|---|---|", "| 0 | 1.5 |"]


def test_tensorboard_sink_long_video_is_capped_and_shared_writer_stays_open(tmp_path, mp4):
    from PIL import Image
    from torch.utils.tensorboard import SummaryWriter

    from rlviz.sinks import TensorBoardSink

    writer = SummaryWriter(str(tmp_path / "tb"))
    sink = TensorBoardSink(writer=writer, max_size=64, max_frames=6, max_fps=None)
    sink.log_video("v", mp4, 3, fps=FPS)
    sink.close()
    writer.add_scalar("after", 1.0, 4)  # the caller's writer is still usable
    writer.close()
    acc = tb_accumulator(tmp_path / "tb")
    (video,) = acc.Images("v")
    gif = Image.open(io.BytesIO(video.encoded_image_string))
    assert max(gif.size) == 64 and 1 < gif.n_frames <= 6
    assert gif.info["duration"] == 270  # stride 8 at 30 fps: 266.7 ms
    assert [s.step for s in acc.Scalars("after")] == [4]
    with pytest.raises(UsageError, match="closed"):
        sink.log_scalars({"x": 1.0}, 5)
    with pytest.raises(UsageError, match="log_dir"):
        TensorBoardSink()


# -- W&B offline -------------------------------------------------------------------------------------------------
def test_wandb_sink_offline_uploads_mp4_as_is(tmp_path, mp4, wandb_offline, no_network, no_moviepy):
    from rlviz.sinks import WandbSink

    attempts, hits = no_network
    with WandbSink("rlviz-test", "run-a", dir=wandb_offline, config={"gamma": 0.99}) as sink:
        sink.log_video("eval/episode", mp4, 1024, fps=FPS, caption="return 3")
        sink.log_image("eval/heatmap", HEAT, 1024)
        sink.log_scalars({"return": 3.5, "length": 44}, 1024, prefix="eval/")
        sink.log_scalars({"return": 5.25}, 2048, prefix="eval/")
        sink.log_table("eval/episodes", ["seed", "return"], [[0, 1.5], [1, 2.0]], 2048)
    wandb_flushed()
    assert no_moviepy == [] and "moviepy" not in sys.modules
    assert attempts == [] and hits == []

    (run_dir,) = glob.glob(str(wandb_offline / "wandb" / "offline-run-*"))
    run_dir = Path(run_dir)
    (video,) = (run_dir / "files" / "media" / "videos").rglob("*.mp4")
    assert video.read_bytes() == mp4.read_bytes()  # uploaded as is: no GIF, no re-encoding
    reader = imageio_ffmpeg.read_frames(str(video))
    meta = next(reader)
    assert "h264" in meta["codec"] and meta["size"] == (W, H)
    assert sum(1 for _ in reader) == N_FRAMES
    (png,) = (run_dir / "files" / "media" / "images").rglob("*.png")
    import imageio.v3 as iio

    assert np.array_equal(iio.imread(png)[..., :3], HEAT)
    (table,) = (run_dir / "files" / "media" / "table").rglob("*.table.json")
    assert json.loads(table.read_text())["data"] == [[0, 1.5], [1, 2.0]]

    (log,) = run_dir.glob("run-*.wandb")
    records = list(wandb_records(log))
    history = {r.history.step.num: wandb_items(r.history.item) for r in records if r.WhichOneof("record_type") == "history"}
    assert sorted(history) == [1024, 2048]
    assert history[1024][("eval/return",)] == 3.5 and history[1024][("eval/length",)] == 44
    assert history[1024][("eval/episode", "_type")] == "video-file"
    assert history[1024][("eval/episode", "path")] == video.relative_to(run_dir / "files").as_posix()
    assert history[1024][("eval/episode", "caption")] == "return 3"
    assert history[1024][("eval/heatmap", "_type")] == "image-file"
    assert history[2048][("eval/return",)] == 5.25 and history[2048][("eval/episodes", "_type")] == "table-file"
    summary: dict = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary.update(wandb_items(r.summary.update))
    assert summary[("eval/return",)] == 5.25 and summary[("eval/length",)] == 44
    config = [r.run.config for r in records if r.WhichOneof("record_type") == "run"][0]
    assert {i.key: json.loads(i.value_json) for i in config.update}["gamma"] == 0.99


def test_wandb_sink_uses_an_existing_run_and_step_key(tmp_path, mp4, wandb_offline, no_network):
    import wandb

    from rlviz.sinks import WandbSink

    run = wandb.init(project="rlviz-test", dir=str(wandb_offline))
    run.log({"train/loss": 1.0})  # the user's own logging moves W&B's step on
    sink = WandbSink(run=run, step_key="global_step")
    sink.log_scalars({"return": 2.0}, 500, prefix="eval/")
    sink.close()
    assert run.summary["eval/return"] == 2.0 and run.summary["global_step"] == 500
    run.log({"train/loss": 0.5})  # the run is still open: the sink does not finish a run it was handed
    run.finish()
    wandb_flushed()
    (log,) = Path(glob.glob(str(wandb_offline / "wandb" / "offline-run-*"))[0]).glob("run-*.wandb")
    rows = [wandb_items(r.history.item) for r in wandb_records(log) if r.WhichOneof("record_type") == "history"]
    assert [(row.get(("eval/return",)), row.get(("global_step",))) for row in rows] == [
        (None, None), (2.0, 500), (None, None)]
    with pytest.raises(UsageError, match="closed"):
        sink.log_scalars({"x": 1.0}, 501)


def test_optional_sinks_name_their_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    from rlviz.sinks import WandbSink

    with pytest.raises(MissingDependencyError, match=r"rlviz\[wandb\]"):
        WandbSink("p")
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    from rlviz.sinks import TensorBoardSink

    with pytest.raises(MissingDependencyError, match=r"rlviz\[tensorboard\]"):
        TensorBoardSink("runs")
    assert importlib.import_module("rlviz.sinks").FolderSink is FolderSink
