"""`rlviz render --wandb/--tensorboard`: the run's outputs read back from W&B's offline run and TB events."""

from __future__ import annotations

import csv
import glob
import io
import json
import sys
from pathlib import Path

import imageio_ffmpeg
import numpy as np
from conftest import tb_accumulator, wandb_flushed, wandb_items, wandb_records
from PIL import Image

from rlviz.cli import main
from rlviz.draw.video import video_timing
from rlviz.jobs.videos import MIN_VIDEO_SECONDS


def _run(ckpt, out, *extra):
    args = ["render", str(ckpt), "--episodes", "6", "--num-envs", "3", "--heatmap", "--out", str(out), "--no-progress"]
    assert main([*args, *extra]) == 0
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    return json.loads((out / "summary.json").read_text()), rows


def test_render_logs_to_wandb_offline_without_network(minatar_ckpt, tmp_path, wandb_offline, no_network, no_moviepy):
    summary, rows = _run(minatar_ckpt, tmp_path / "out", "--wandb", "rlviz-cli", "--wandb-run", "cli-run")
    wandb_flushed()
    attempts, hits = no_network
    assert attempts == [] and hits == [] and no_moviepy == [] and "moviepy" not in sys.modules

    (run_dir,) = (Path(p) for p in glob.glob(str(wandb_offline / "wandb" / "offline-run-*")))
    (video,) = (run_dir / "files" / "media" / "videos").rglob("*.mp4")
    reader = imageio_ffmpeg.read_frames(str(video))
    meta = next(reader)
    assert "h264" in meta["codec"]
    T = int(rows[0]["length"])  # the first episode, uploaded as is (short ones last 2 s: MinAtar at 30 fps)
    assert sum(1 for _ in reader) == T + 1 + video_timing(T + 1, 30.0, MIN_VIDEO_SECONDS)[1]
    assert list((run_dir / "files" / "media" / "images").rglob("*.png"))  # the heatmap

    records = list(wandb_records(next(run_dir.glob("run-*.wandb"))))
    logged: dict = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            logged.update(wandb_items(r.summary.update))
    assert logged[("rlviz/returns/mean",)] == summary["returns"]["mean"]
    assert logged[("rlviz/lengths/max",)] == summary["lengths"]["max"]
    run = [r.run for r in records if r.WhichOneof("record_type") == "run"][0]
    assert run.display_name == "cli-run" and run.project == "rlviz-cli"


def test_render_logs_to_tensorboard(minatar_ckpt, tmp_path, no_moviepy):
    logdir = tmp_path / "tb"
    summary, rows = _run(minatar_ckpt, tmp_path / "out", "--tensorboard", str(logdir))
    acc = tb_accumulator(logdir)
    tags = acc.Tags()
    (video_tag,) = [t for t in tags["images"] if "first-0" in t]
    event = acc.Images(video_tag)[0]
    gif = Image.open(io.BytesIO(event.encoded_image_string))
    assert gif.format == "GIF" and gif.n_frames > 1 and event.step == 0
    assert "rlviz/failure_heatmap" in tags["images"]
    (mean,) = acc.Scalars("rlviz/returns/mean")
    assert mean.step == 0 and np.isclose(mean.value, summary["returns"]["mean"])
    assert no_moviepy == []
