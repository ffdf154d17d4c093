"""atomic_path: an output appears complete or not at all."""

from __future__ import annotations

import fnmatch
import os

import numpy as np
import pytest

from rlviz.media.atomic import AtomicFile, atomic_path, atomic_write, temp_name


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


def test_temporary_name_is_hidden_per_process_and_ignored_by_git(tmp_path):
    tmp = temp_name(tmp_path / "ep.mp4")
    assert tmp == tmp_path / f".ep.{os.getpid()}.partial.mp4"
    assert fnmatch.fnmatch(tmp.name, "*.partial.mp4")  # the .gitignore pattern for video temporaries


def test_keyboard_interrupt_removes_the_temporary(tmp_path):
    with pytest.raises(KeyboardInterrupt), atomic_path(tmp_path / "x.bin") as tmp:
        tmp.write_bytes(b"half")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_bytes_and_text(tmp_path):
    assert atomic_write(tmp_path / "a" / "b.bin", b"\x00\x01") == tmp_path / "a" / "b.bin"
    assert (tmp_path / "a" / "b.bin").read_bytes() == b"\x00\x01"
    atomic_write(tmp_path / "t.txt", "héllo\n", fsync=False)
    assert (tmp_path / "t.txt").read_bytes() == "héllo\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "t.txt"]


def test_atomic_file_commit_and_discard(tmp_path):
    keep = AtomicFile(tmp_path / "keep.txt")
    keep.start().write_text("new")
    assert not keep.path.exists() and keep.commit().read_text() == "new"
    (tmp_path / "old.txt").write_text("old")
    drop = AtomicFile(tmp_path / "old.txt")
    drop.start().write_text("half")
    drop.discard()
    drop.discard()  # twice is fine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt", "old.txt"]
    assert (tmp_path / "old.txt").read_text() == "old"
