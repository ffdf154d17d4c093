"""Run folders, ``--follow``, ``--out`` and the Hub cache are untrusted input too (issue 32): each case as a hostile or
careless user meets it, each failing on release 0.3.0.

inputs as outputs; ``--overwrite`` removes only what the marker lists; one writer per ``--out`` under ``--follow``;
a zip bomb and a YAML alias bomb refused in < 2 s of CPU and < 300 MB; 100,000-deep JSON/YAML in every reader; a bad
checkpoint skipped with its reason; a checkpoint filled in place retried under ``--follow``; the Hub cache validated;
the small items (one name per failure line, no torch warning before rlviz's line, symlink loops listed,
``rlviz.training.__all__``, docstrings naming moved modules). Ctrl-C: tests/test_sigint.py.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from _bombs import DEEP_JSON, DEEP_YAML, YAML_BOMB, measured, zip_with_bomb
from torch import nn

import rlviz
from rlviz.cli import main
from rlviz.errors import CheckpointError, HubError, RlvizError, UsageError

ROOT = Path(__file__).resolve().parents[1]
CODE = str(Path(rlviz.__file__).resolve().parents[1])  # the rlviz under test: subprocesses run the same one
#: what a job has imported before it reads a file (the bombs' time and memory are measured from here)
STARTUP = ("import gymnasium, stable_baselines3, torch, yaml\nimport rlviz.sources.stable_baselines3.zips, rlviz.sources.stable_baselines3.zoo\n"
           "from rlviz.sources import load_agent\n")


def _cartpole_pt2(path: Path, **kw) -> Path:
    from rlviz.sources.pt2.saving import save_checkpoint

    torch.manual_seed(0)
    return save_checkpoint(path, nn.Linear(4, 2), env="CartPole-v1", kind="logits", **kw)


def _rewrite(src: Path, dst: Path, member: str, data: bytes) -> Path:
    """``src`` (a zip) copied to ``dst`` with ``member``'s bytes replaced (its name, layout and order kept)."""
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as out:
        found = False
        for info in z.infolist():
            hit = info.filename == member or info.filename.endswith("/" + member)
            found |= hit
            out.writestr(info, data if hit else z.read(info))
    assert found, member
    return dst


def _cli(capsys, *argv: str) -> tuple[int, str]:
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


# -- 1. inputs are never outputs; --overwrite removes only what rlviz wrote ---------------------------------------
def test_follow_into_its_own_run_folder_or_below_it_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()  # empty: a watch may start before training saves anything
    for out in (run, run / "sub"):
        rc, err = _cli(capsys, "timeline", run, "--follow", "--idle-stop", "0.5", "--poll", "0.1", "--out", out)
        assert rc == 2 and f"the input {run}" in err and err.count("\n") == 1, err
    assert os.listdir(run) == []


def test_timeline_out_holding_the_run_is_refused_even_with_overwrite(tmp_path, capsys):
    parent = tmp_path / "earlier"
    run = parent / "run"
    run.mkdir(parents=True)
    (run / "rl_model_5_steps.zip").write_bytes(b"PK\x03\x04 the user's checkpoint")
    (parent / "rlviz-run.json").write_text(json.dumps({"job": "render", "files": ["run/rl_model_5_steps.zip"]}))
    for extra in ((), ("--overwrite",)):
        rc, err = _cli(capsys, "timeline", run, "--env", "CartPole-v1", "--out", parent, *extra)
        assert rc == 2 and "holds the input" in err, err
        rc, err = _cli(capsys, "timeline", run, "--env", "CartPole-v1", "--out", run / "x", *extra)
        assert rc == 2 and "lies inside the input" in err, err
    assert (run / "rl_model_5_steps.zip").read_bytes() == b"PK\x03\x04 the user's checkpoint"


def test_render_and_compare_refuse_an_out_holding_their_checkpoint(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    model = _cartpole_pt2(out / "agent.pt2")
    (out / "rlviz-run.json").write_text(json.dumps({"job": "render", "files": ["agent.pt2"]}))  # forged
    rc, err = _cli(capsys, "render", model, "--episodes", "1", "--videos", "none", "--out", out, "--overwrite")
    assert rc == 2 and f"holds the input {model}" in err, err
    other = _cartpole_pt2(tmp_path / "a.pt2")
    rc, err = _cli(capsys, "compare", other, model, "--episodes", "1", "--videos", "none", "--out", out, "--overwrite")
    assert rc == 2 and f"holds the input {model}" in err, err
    assert model.is_file()


def test_out_inside_the_hub_cache_is_refused(tmp_path, monkeypatch, capsys, no_network):
    from _hub import cache_repo, offline_hub, repo_folder

    hub = offline_hub(monkeypatch, tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    cache_repo(hub, "me/cartpole", {"agent.pt2": _cartpole_pt2(tmp_path / "a.pt2")})
    out = repo_folder(hub, "me/cartpole") / "rlviz-out"
    rc, err = _cli(capsys, "render", "hf://me/cartpole", "--episodes", "1", "--videos", "none", "--out", out)
    assert rc == 2 and "lies inside the input" in err and not out.exists(), err


def test_overwrite_removes_only_the_files_the_marker_lists(tmp_path, capsys):
    model = _cartpole_pt2(tmp_path / "agent.pt2")
    out = tmp_path / "out"
    args = ["render", model, "--episodes", "1", "--videos", "none", "--out", out]
    assert _cli(capsys, *args)[0] == 0
    listed = json.loads((out / "rlviz-run.json").read_text())["files"]
    assert "summary.json" in listed and all((out / f).exists() for f in listed)
    (out / "notes.txt").write_text("mine")
    rc, err = _cli(capsys, *args, "--overwrite")
    assert rc == 2 and "rlviz did not write" in err and "notes.txt" in err, err
    assert (out / "notes.txt").read_text() == "mine" and (out / "summary.json").is_file()
    (out / "notes.txt").unlink()
    assert _cli(capsys, *args, "--overwrite")[0] == 0 and (out / "summary.json").is_file()


def test_a_forged_marker_never_removes_anything_outside_out(tmp_path):
    from rlviz.jobs.outdir import remove_run

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x").write_text("keep")
    (tmp_path / "victim").write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / "link").symlink_to(outside)
    (out / "ours.txt").write_text("rlviz's")
    (out / "rlviz-run.json").write_text(json.dumps({"files": ["../victim", str(tmp_path / "victim"), "link/x",
                                                              "ours.txt", "link"]}))
    remove_run(out)
    assert (outside / "x").read_text() == "keep" and (tmp_path / "victim").read_text() == "keep"
    assert not (out / "ours.txt").exists() and not (out / "link").is_symlink()  # its own link, unlinked


# -- 2. one writer per --out, --follow included ----------------------------------------------------------------
#: --poll and --settle of the watches: short, so a test waits little (an empty file sits there 4 x SETTLE)
POLL, SETTLE = 0.1, 0.2


def _follow(run: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": CODE}
    cmd = [sys.executable, "-m", "rlviz", "timeline", str(run), "--follow", "--env", "CartPole-v1", "--episodes", "2",
           "--videos", "none", "--poll", str(POLL), "--settle", str(SETTLE), "--out", str(out), *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.communicate(timeout=30)[1]
    finally:
        if proc.poll() is None:
            proc.kill()


# (one writer per --out: checked in test_follow_retries_a_checkpoint_filled_in_place, on its watch)


# -- 3. bounded reading ------------------------------------------------------------------------------------------
def test_a_zip_bomb_is_refused_fast_and_small(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    zip_with_bomb(run / "final.zip", {"policy.pth": b"\0" * 64, "_stable_baselines3_version": b"2.4.0"}, "data")
    assert (run / "final.zip").stat().st_size < 2 << 20
    (run / "rl_model_5_steps.zip").write_bytes(b"PK\x03\x04")  # its step from its name: not read by discovery
    got = measured(STARTUP + "from rlviz.sources.run_folders import discover",
                   f"(lambda f, s: ([c.name for c in f], [x.why for x in s]))(*discover({str(run)!r}))", pythonpath=CODE)
    assert got["cpu"] < 2 and got["mb"] < 300, got
    assert "['rl_model_5_steps.zip']" in got["outcome"] and "final.zip: archive member 'data' inflates" in got["outcome"] \
        and "to 1.0 GiB" in got["outcome"], got
    weights = zip_with_bomb(tmp_path / "w.zip", {"data": b"{}", "_stable_baselines3_version": b"2.4.0"}, "policy.pth")
    got = measured(STARTUP, f"load_agent({str(weights)!r}, env='CartPole-v1')", pythonpath=CODE)
    assert got["cpu"] < 2 and got["mb"] < 300 and got["outcome"].startswith("CheckpointError") \
        and "inflates" in got["outcome"], got


def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(tmp_path):
    run = tmp_path / "CartPole-v1_1"
    (run / "CartPole-v1").mkdir(parents=True)
    (run / "CartPole-v1.zip").write_bytes(b"PK\x03\x04")
    (run / "CartPole-v1" / "config.yml").write_text("policy: MlpPolicy\n")
    (run / "CartPole-v1" / "args.yml").write_text(YAML_BOMB + "env: CartPole-v1\nenv_kwargs: {k: *i}\n")
    got = measured(STARTUP, f"load_agent({str(run)!r})", pythonpath=CODE)
    assert got["cpu"] < 2 and got["mb"] < 300, got
    assert got["outcome"].startswith("CheckpointError") and "100,000 nodes" in got["outcome"] \
        and "args.yml" in got["outcome"], got


def _deep_readers(tmp_path: Path) -> dict:
    """reader -> a call that reads a file holding 100,000-deep JSON/YAML where that reader parses it."""
    from rlviz.sources import load_agent

    pt2 = _cartpole_pt2(tmp_path / "good.pt2")
    sb3 = tmp_path / "sb3.zip"
    with zipfile.ZipFile(sb3, "w") as z:
        z.writestr("data", DEEP_JSON)
        z.writestr("policy.pth", b"\0")
    zoo = tmp_path / "CartPole-v1_1"
    (zoo / "CartPole-v1").mkdir(parents=True)
    shutil.copy(pt2, zoo / "CartPole-v1.zip")

    def zoo_with(name: str):
        def call():
            for n in ("config.yml", "args.yml", "env_kwargs.yml"):
                (zoo / "CartPole-v1" / n).write_text("env: CartPole-v1\n" if n == "args.yml" else "{}\n")
            (zoo / "CartPole-v1" / name).write_text(DEEP_YAML)
            return load_agent(zoo)
        return call

    def card():
        from rlviz.sources.huggingface.hub import _card_metadata

        (tmp_path / "README.md").write_text("---\ntags: " + "[" * 100_000 + "]" * 100_000 + "\n---\n# card\n")
        return _card_metadata(tmp_path / "README.md")

    def marker():
        from rlviz.jobs.outdir import check_out_dir

        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        (out / "rlviz-run.json").write_text('{"files": ' + DEEP_JSON + "}")
        (out / "a.txt").write_text("")
        return check_out_dir(out, overwrite=True)

    def step_of(path: Path):
        from rlviz.sources.run_folders import step_from_file

        return lambda: step_from_file(path)

    return {
        "pt2 extra/rlviz.json": lambda: load_agent(_rewrite(pt2, tmp_path / "e.pt2", "extra/rlviz.json",
                                                            DEEP_JSON.encode())),
        "pt2 models/model.json": lambda: load_agent(_rewrite(pt2, tmp_path / "m.pt2", "models/model.json",
                                                             DEEP_JSON.encode())),
        "pt2 step (run folders)": step_of(_rewrite(pt2, tmp_path / "x.pt2", "extra/rlviz.json", DEEP_JSON.encode())),
        "sb3 data": lambda: load_agent(sb3, env="CartPole-v1"),
        "sb3 data step (run folders)": step_of(sb3),
        "zoo config.yml": zoo_with("config.yml"), "zoo args.yml": zoo_with("args.yml"),
        "zoo env_kwargs.yml": zoo_with("env_kwargs.yml"),
        "hub model card": card,
        "rlviz-run.json marker": marker,
    }


def test_100000_deep_json_and_yaml_in_every_reader(tmp_path):
    for name, call in _deep_readers(tmp_path).items():
        start = time.process_time()  # CPU time: the load of other processes on the machine does not count
        with pytest.raises(RlvizError) as info:
            call()
        assert time.process_time() - start < 2, name
        msg = str(info.value)
        assert "\n" not in msg and "Recursion" not in msg and ("deeper than" in msg or "did not write" in msg), \
            (name, msg)


def test_render_of_a_deep_pt2_is_one_line_and_timeline_skips_it(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _cartpole_pt2(run / "step_100.pt2", metadata={"step": 100})
    _rewrite(run / "step_100.pt2", run / "other.pt2", "extra/rlviz.json", DEEP_JSON.encode())
    rc, err = _cli(capsys, "render", run / "other.pt2", "--out", tmp_path / "r")
    assert rc == 1 and err.count("\n") == 1 and "nests deeper than 100 levels" in err, err
    rc, err = _cli(capsys, "timeline", run, "--episodes", "2", "--videos", "none", "--out", tmp_path / "t")
    assert rc == 0, err
    data = json.loads((tmp_path / "t" / "timeline.json").read_text())
    assert [r["step"] for r in data["checkpoints"]] == [100]
    (skip,) = data["skipped"]
    assert skip["checkpoint"] == "other.pt2" and skip["why"].startswith("other.pt2: ") \
        and skip["why"].count("other.pt2") == 1 and "deeper than" in skip["why"], skip
    page = (tmp_path / "t" / "report.html").read_text()
    assert "other.pt2" in page and "deeper than" in page


def test_only_a_run_where_no_checkpoint_loads_fails(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "rl_model_5_steps.zip").write_bytes(b"PK\x03\x04 broken")
    (run / "rl_model_9_steps.zip").write_bytes(b"PK\x03\x04 broken too")
    rc, err = _cli(capsys, "timeline", run, "--env", "CartPole-v1", "--episodes", "2", "--out", tmp_path / "t")
    assert rc == 1 and "none of its 2 checkpoint(s) could be evaluated" in err and err.count("\n") <= 3, err
    assert not (tmp_path / "t").exists()


# -- 4. a checkpoint filled in place under --follow is tried again ---------------------------------------------------
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from _timeline_runs import trained_runs

    return trained_runs(tmp_path_factory)


def _steps(out: Path, key: str = "checkpoints") -> list[int]:
    try:
        return [r["step"] for r in json.loads((out / "timeline.json").read_text())[key]]
    except (FileNotFoundError, ValueError):
        return []


def _wait(predicate, proc, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_follow_retries_a_checkpoint_filled_in_place(runs, tmp_path):
    """A checkpoint that failed is tried again once filled in place; and, on the same watch (section 2), a second
    --follow into its --out is refused while it watches (its folder untouched, the first still watching)."""
    run, out = tmp_path / "run", tmp_path / "out"
    run.mkdir()
    good = (runs[0] / "rl_model_1024_steps.zip").read_bytes()
    proc = _follow(run, out)
    try:
        _wait(lambda: (out / "rlviz-run.json").exists(), proc)
        second = _follow(run, out, "--overwrite", "--idle-stop", "1")
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2 and "being written by another rlviz run" in err, err
        assert proc.poll() is None  # the first still watches, its folder untouched
        target = run / "rl_model_1024_steps.zip"
        target.write_bytes(b"not yet a zip " * 20)  # complete as far as a watcher can tell; fails to load
        _wait(lambda: _steps(out, "failed") == [1024], proc)
        with open(target, "r+b") as fh:  # filled in place (not renamed), as CheckpointCallback saves
            fh.write(good)
        _wait(lambda: _steps(out) == [1024], proc)
        assert _steps(out, "failed") == []
        empty = run / "rl_model_2048_steps.zip"
        empty.touch()  # empty longer than --settle, then filled in place
        time.sleep(4 * SETTLE)
        empty.write_bytes((runs[0] / "rl_model_2048_steps.zip").read_bytes())
        _wait(lambda: _steps(out) == [1024, 2048], proc)
    finally:
        err = _stop(proc)
    assert err.count("rlviz: step 1024 (") == 1, err  # evaluated once when good


# -- 5. the Hub cache is validated ---------------------------------------------------------------------------------
@pytest.fixture
def hub(monkeypatch, tmp_path, no_network):
    from _hub import offline_hub

    return offline_hub(monkeypatch, tmp_path)


def test_a_hand_edited_ref_never_leads_out_of_the_cache(hub, tmp_path):
    from _hub import cache_repo, repo_folder

    from rlviz.sources import load_agent

    cache_repo(hub, "me/cartpole", {"agent.pt2": _cartpole_pt2(tmp_path / "a.pt2")})
    outside = tmp_path / "outside" / "main"
    outside.mkdir(parents=True)
    _cartpole_pt2(outside / "agent.pt2")  # what the edited ref would lead to
    ref = repo_folder(hub, "me/cartpole") / "refs" / "main"
    depth = len(ref.parent.relative_to(tmp_path).parts) + 1
    ref.write_text("../" * depth + "outside/main")
    with pytest.raises(HubError, match=r"refs/main holds '(\.\./)+outside/main', not a commit hash"):
        load_agent("hf://me/cartpole")
    ref.write_text("main")
    with pytest.raises(HubError, match="not a commit hash"):
        load_agent("hf://me/cartpole")


def test_revisions_are_validated_and_parsed(hub, tmp_path):
    from _hub import cache_repo

    from rlviz.sources import load_agent
    from rlviz.sources.huggingface.hub import parse_hub_ref

    with pytest.raises(UsageError, match="control characters"):
        parse_hub_ref("hf://me/cartpole@main\nrlviz: forged line")
    with pytest.raises(UsageError, match="not a branch, tag or commit"):
        parse_hub_ref("hf://me/cartpole@../../x")
    assert parse_hub_ref("hf://me/cartpole@refs/pr/1").revision == "refs/pr/1"
    assert parse_hub_ref("hf://me/cartpole@refs/pr/1/sub/agent.pt2").filename == "sub/agent.pt2"
    assert parse_hub_ref("hf://me/cartpole@feature/x").revision == "feature/x"
    ref = parse_hub_ref("hf://me/cartpole@feature%2Fx/agent.pt2")
    assert (ref.revision, ref.filename) == ("feature/x", "agent.pt2") and parse_hub_ref(str(ref)) == ref
    pr = cache_repo(hub, "me/cartpole", {"agent.pt2": _cartpole_pt2(tmp_path / "a.pt2")}, revision="refs/pr/1")
    branch = cache_repo(hub, "me/cartpole", {"agent.pt2": _cartpole_pt2(tmp_path / "b.pt2", gamma=0.5)},
                        revision="feature/x")
    for text, snapshot in (("hf://me/cartpole@refs/pr/1", pr), ("hf://me/cartpole@feature/x", branch),
                           ("hf://me/cartpole@feature%2Fx/agent.pt2", branch)):
        record = load_agent(text).metadata["hub"]
        assert record["commit"] == snapshot.name and re.fullmatch(r"[0-9a-f]{40}", record["commit"]), record


def test_snapshot_links_out_of_the_cache_and_loops_are_refused(hub, tmp_path):
    from _hub import cache_repo

    from rlviz.sources import load_agent

    snap = cache_repo(hub, "me/cartpole", {"agent.pt2": _cartpole_pt2(tmp_path / "a.pt2")})
    (snap / "agent.pt2").unlink()
    (snap / "agent.pt2").symlink_to(_cartpole_pt2(tmp_path / "elsewhere.pt2"))
    with pytest.raises(HubError, match="links outside the cache"):
        load_agent("hf://me/cartpole")
    (snap / "agent.pt2").unlink()
    (snap / "loop").symlink_to(snap / "loop2")
    (snap / "loop2").symlink_to(snap / "loop")
    with pytest.raises(HubError, match="in a loop|links outside"):
        load_agent("hf://me/cartpole")


# -- 7. the small items -------------------------------------------------------------------------------------------
def test_symlink_loops_are_listed_among_skipped_files(tmp_path):
    from rlviz.sources.run_folders import discover

    (tmp_path / "a.zip").symlink_to(tmp_path / "b.zip")
    (tmp_path / "b.zip").symlink_to(tmp_path / "a.zip")
    (tmp_path / "gone.pt").symlink_to(tmp_path / "nothing")
    _cartpole_pt2(tmp_path / "step_7.pt2")
    found, skipped = discover(tmp_path)
    assert [c.step for c in found] == [7]
    assert {s.name: s.why for s in skipped} == {"a.zip": "a.zip: a symlink loop; not read.",
                                                "b.zip": "b.zip: a symlink loop; not read.",
                                                "gone.pt": "gone.pt: a symlink to nothing (dangling); not read."}


def test_no_torch_warning_before_rlvizs_one_line(tmp_path):
    path = tmp_path / "model.pt"
    torch.save(nn.Linear(4, 2), path, pickle_protocol=4)  # a full pickle, protocol 4: torch warns, then refuses
    env = {**os.environ, "PYTHONPATH": CODE, "PYTHONWARNINGS": "default"}
    proc = subprocess.run([sys.executable, "-m", "rlviz", "render", str(path), "--env", "CartPole-v1", "--out",
                           str(tmp_path / "o")], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "full pickle" in proc.stderr, proc.stderr


def test_timeline_all_names_resolve():
    import rlviz.training

    for name in rlviz.training.__all__:
        assert getattr(rlviz.training, name) is not None


def test_docstrings_name_modules_that_exist():
    """Every ``rlviz.x.y`` a docstring or comment names is a module (or a name in one) at its 0.3 home, not a path
    kept only for compatibility (rlviz/_deprecated.py)."""
    from rlviz._deprecated import MOVED_0_4, MOVED_0_5

    old = set(MOVED_0_4) | set(MOVED_0_5)
    bad = []
    for f in sorted((Path(CODE) / "rlviz").rglob("*.py")):
        if f.name == "_deprecated.py":
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            for m in re.finditer(r"(?<![\w/])(rlviz(?:\.[A-Za-z_]\w*)+)", line):
                parts = m.group(1).split(".")
                if parts[-1] in ("json", "pt2", "zip", "html", "lock"):
                    continue  # a file name (rlviz.json, rlviz-run.json)
                for k in range(len(parts), 0, -1):
                    mod = ".".join(parts[:k])
                    p = Path(CODE).joinpath(*parts[:k])
                    if p.with_suffix(".py").exists() or (p / "__init__.py").exists():
                        break
                else:
                    bad.append(f"{f.name}:{i} {m.group(1)}")
                    continue
                if mod in old:
                    bad.append(f"{f.name}:{i} {m.group(1)} (moved)")
                    continue
                obj = importlib.import_module(mod)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)  # (0.2's names, named as such)
                    for attr in parts[k:]:
                        obj = getattr(obj, attr, None)
                if obj is None:
                    bad.append(f"{f.name}:{i} {m.group(1)}")
    assert not bad, bad


def test_a_json_error_names_the_file_and_the_limit(tmp_path):
    from rlviz.sources.limits import MAX_JSON_DEPTH, loads_json

    assert loads_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, "f", "x") is not None
    with pytest.raises(CheckpointError, match=rf"^f: x nests deeper than {MAX_JSON_DEPTH} levels"):
        loads_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "f", "x")
