"""Output folders: a run writes only into a folder of its own, complete or not at all; --overwrite replaces an
earlier run atomically (the old one stays until the new one is complete)."""

from __future__ import annotations

import json
import subprocess
import sys

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


# -- one --out, one run at a time (real processes) ---------------------------------------------------------------
_HOLD = ("import sys, time\nfrom rlviz.jobs.outdir import claim_out_dir\n"
         "with claim_out_dir(sys.argv[1], False):\n    print('held', flush=True)\n    time.sleep(float(sys.argv[2]))\n")


def _holder(out, seconds):
    """A process holding ``out``'s lock (as a run does from its first check to the rename) for ``seconds``."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(out), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_concurrent_renders_into_one_new_out_give_one_success(minatar_ckpt, tmp_path):
    out = tmp_path / "shared"
    cmd = [sys.executable, "-m", "rlviz", "render", str(minatar_ckpt), "--episodes", "2", "--videos", "first:1",
           "--out", str(out), "--no-progress"]
    procs = [subprocess.Popen(cmd + ["--seed", str(i)], stderr=subprocess.PIPE, text=True) for i in range(3)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(rc for rc, _ in results)
    assert codes == [0, 2, 2], results
    for rc, err in results:  # the refused ones say why in one line: another run holds it, or it already holds a run
        if rc == 2:
            assert "being written by another rlviz run" in err or "holds an earlier rlviz run" in err, err
    winner = next(i for i, (rc, _) in enumerate(results) if rc == 0)
    assert json.loads((out / MARKER).read_text())["options"]["seed"] == winner  # the folder holds the one success
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared"]  # no lock, staging or old folder left


def test_a_run_into_an_out_another_process_writes_refuses_in_one_line(minatar_ckpt, tmp_path, capsys):
    out = tmp_path / "busy"
    holder = _holder(out, 60)
    try:
        assert _render(minatar_ckpt, out) == 2
        line = _one_line(capsys.readouterr().err)
        assert f"pid {holder.pid}" in line and "being written by another rlviz run" in line
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_of_a_dead_process_is_taken_over(minatar_ckpt, tmp_path):
    from rlviz.jobs.outdir import lock_path

    out = tmp_path / "stale"
    holder = _holder(out, 60)
    holder.kill()  # SIGKILL: no clean-up; its lock file stays, naming a dead pid
    holder.wait()
    assert lock_path(out).read_text().strip() == str(holder.pid)
    assert _render(minatar_ckpt, out) == 0 and (out / "summary.json").exists()
    assert not lock_path(out).exists()
