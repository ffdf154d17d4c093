"""Output folders: a run writes only into a folder of its own, complete or not at all; --overwrite replaces an
earlier run atomically (the old one stays until the new one is complete)."""

from __future__ import annotations

import json

import pytest

from rlviz.cli import main
from rlviz.errors import UsageError
from rlviz.jobs.outdir import MARKER, run_folder


def _render(ckpt, out, *extra):
    return main(["render", str(ckpt), "--episodes", "2", "--num-envs", "2", "--videos", "first:1", "--out", str(out),
                 "--no-progress", *extra])


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_an_earlier_run_is_refused_then_replaced_whole_with_overwrite(minatar_ckpt, tmp_path, capsys):
    out = tmp_path / "run"
    assert _render(minatar_ckpt, out, "--heatmap", "--videos", "first:2") == 0
    assert (out / "heatmap.png").exists() and len(list((out / "videos").glob("*.mp4"))) == 2
    capsys.readouterr()
    assert _render(minatar_ckpt, out) == 2
    line = _one_line(capsys.readouterr().err)
    assert "holds an earlier rlviz run" in line and "--overwrite" in line
    assert (out / "heatmap.png").exists()  # refused: the old run is untouched

    assert _render(minatar_ckpt, out, "--overwrite") == 0
    # nothing of the old run is left beside the new one: no heatmap, one video
    assert not (out / "heatmap.png").exists()
    assert [p.name for p in (out / "videos").glob("*.mp4")] == ["first-0-episode-0.mp4"]
    marker = json.loads((out / MARKER).read_text())
    assert marker["job"] == "render" and marker["options"]["overwrite"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no staging or old folders left


@pytest.mark.parametrize("kind", ["file", "foreign folder"])
def test_out_that_is_not_ours_is_refused_even_with_overwrite(minatar_ckpt, tmp_path, capsys, kind):
    out = tmp_path / "target"
    if kind == "file":
        out.write_text("mine")
    else:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    assert _render(minatar_ckpt, out, "--overwrite") == 2
    line = _one_line(capsys.readouterr().err)
    assert str(out) in line and ("is a file" in line if kind == "file" else "not an rlviz run" in line)
    assert (out.read_text() if kind == "file" else (out / "notes.txt").read_text()) == "mine"


def test_an_empty_folder_is_used(minatar_ckpt, tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert _render(minatar_ckpt, out) == 0 and (out / "summary.json").exists()


def test_a_failed_run_leaves_the_old_run_and_no_staging(tmp_path):
    out = tmp_path / "run"
    with run_folder(out, overwrite=False, job="render", options={}) as staging:
        (staging / "summary.json").write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with run_folder(out, overwrite=True, job="render", options={}) as staging:
            (staging / "summary.json").write_text("new, half written")
            raise KeyboardInterrupt
    assert (out / "summary.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    with pytest.raises(UsageError, match="current"):
        with run_folder(".", overwrite=True, job="render", options={}):
            pass
