"""#60 item 1 and its acceptance: a run folder whose every name-bearing field is tampered (env id, wrappers, SuperSuit
steps, kwargs with huge numbers, checkpoint path) imports nothing and makes nothing beyond the limits, under
``rlviz explore`` (each field on its own, with the folder even on the import path), ``python -m rlviz explore .``
started inside the folder (all fields at once, through the served page) and ``python -m rlviz render --env
run/env-recipe.json`` started there. A ``rlviz_pwn.py`` in the folder leaves a marker if anything imports it, and
the tampered checkpoint is a pickle that leaves one if it is unpickled."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlviz.config import ExploreConfig
from rlviz.envs import EnvRecipe, WrapperSpec
from rlviz.errors import RlvizError

pytest.importorskip("werkzeug")
ROOT = Path(__file__).resolve().parents[1]
PWN = "rlviz_pwn_h5"  # the module the folder holds (its own name: no other test's sys.modules entry)


class _Pickled:
    """A torch.save'd object whose unpickling opens (creates) the marker: a checkpoint path pointing at code."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> Path:
    """A real render run (2 CartPole episodes of a linear .pt2 agent), untampered."""
    import torch

    from rlviz.cli import main
    from rlviz.sources.pt2.saving import save_checkpoint

    folder = tmp_path_factory.mktemp("tampered")
    torch.manual_seed(0)
    agent = save_checkpoint(folder / "agent.pt2", torch.nn.Linear(4, 2), env="CartPole-v1", kind="logits")
    run = folder / "run"
    assert main(["render", str(agent), "--episodes", "2", "--videos", "none", "--out", str(run), "--no-progress"]) == 0
    return run


def _folder(clean_run: Path, tmp_path: Path, shadows: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """(a copy of the run holding the bait: rlviz_pwn_h5.py, evil.pt and ``shadows`` (module names); the marker any
    of them leaves)."""
    import torch

    run, marker = tmp_path / "run", tmp_path / "imported-or-unpickled"
    shutil.copytree(clean_run, run)
    (run / f"{PWN}.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Foo: pass\n")
    torch.save(_Pickled(str(marker)), run / "evil.pt")
    for shadow in shadows:  # modules the process imports: from the folder, were it on the import path
        (run / f"{shadow}.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError('shadowed')\n")
    return run, marker


def _tamper(run: Path, options: dict, recipe: EnvRecipe | None = None) -> None:
    path = run / "rlviz-run.json"
    data = json.loads(path.read_text())
    data["options"].update(options)
    path.write_text(json.dumps(data))
    if recipe is not None:
        (run / "env-recipe.json").write_text(recipe.to_json())


def _recipe(env_id: str = "CartPole-v1", kwargs: dict | None = None, wrappers=()) -> EnvRecipe:
    return EnvRecipe(env_id, env_kwargs=kwargs or {}, wrappers=tuple(WrapperSpec(*w) for w in wrappers))


#: (a field, its tampered value(s), the recipe file the run names, what the refusal says)
_FIELDS = [
    ("env id", {"env": f"{PWN}:Foo-v0"}, None, f"'{PWN}:Foo-v0'.*would import the module '{PWN}'"),
    ("wrapper", {"wrapper": [f"{PWN}:Foo"]}, None, f"wrapper '{PWN}:Foo'"),
    ("model", {"model": f"{PWN}:Foo"}, None, f"--model {PWN}:Foo"),
    ("objects", {"objects": f"{PWN}:Foo"}, None, f"--objects {PWN}:Foo"),
    ("env kwargs", {"env_kwargs": json.dumps({"n_pistons": 1e9})}, None, r"n_pistons=1000000000\.0 .*beyond"),
    ("env kwargs code", {"env_kwargs": json.dumps({"cb": f"{PWN}:Foo"})}, None, f"cb='{PWN}:Foo'"),
    ("model kwargs", {"model_kwargs": json.dumps({"width": 10**9})}, None, "width=1000000000 .*beyond"),
    ("recipe env id", {"env": "RECIPE"}, _recipe(f"{PWN}:Foo-v0"), f"would import the module '{PWN}'"),
    ("recipe wrapper", {"env": "RECIPE"}, _recipe(wrappers=[(f"{PWN}:Foo",)]), f"wrapper '{PWN}:Foo'"),
    ("recipe SuperSuit step", {"env": "RECIPE"},
     _recipe("pistonball_v6", wrappers=[("ss:frame_stack_v1", {"stack_size": 1e7})]), r"stack_size=[\d.e+]+ \(at most 4,096\) is beyond"),
    ("recipe kwargs", {"env": "RECIPE"}, _recipe("pistonball_v6", {"n_pistons": 1e9}), r"n_pistons=[\d.e+]+ \(at most 4,096\) is beyond"),
    ("checkpoint pickle", {"checkpoint": "EVIL"}, None, "evil.pt"),
    ("checkpoint module", {"checkpoint": f"{PWN}.py"}, None, f"{PWN}.py"),
]


def test_each_tampered_field_of_a_run_folder_is_refused_by_the_explorer_and_nothing_runs(clean_run, tmp_path,
                                                                                       monkeypatch):
    """Each field on its own (a refusal of one field must not hide another's), with the run folder the working
    folder and first on the import path (what ``python -m`` did): the explorer's page opens, each episode is refused
    in one line naming the field's value, the bait module is never imported and the pickle never unpickled."""
    from rlviz.explore.server import create_app, open_run

    run, marker = _folder(clean_run, tmp_path)
    original = (run / "rlviz-run.json").read_text()
    monkeypatch.chdir(run)
    monkeypatch.syspath_prepend(str(run))
    said = {}
    for field, options, recipe, expected in _FIELDS:
        (run / "rlviz-run.json").write_text(original)
        where = {"RECIPE": str(run / "env-recipe.json"), "EVIL": str(run / "evil.pt")}
        options = {k: where.get(v, v) if isinstance(v, str) else v for k, v in options.items()}
        _tamper(run, options, recipe)
        index, cache = open_run(ExploreConfig(out=run, port=0, browser=False))
        create_app(index, cache)  # (the page's data)
        with pytest.raises(RlvizError) as refused:
            cache.render(0)
        said[field] = message = str(refused.value)
        assert re.search(expected, message), (field, message)
        assert "\n" not in message and cache.status(0)["state"] == "error", (field, message)
        assert not marker.exists() and PWN not in sys.modules, field
    assert len(said) == len(_FIELDS)


def _get(port: int, path: str, method: str = "GET") -> tuple[int, dict]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}"} if method == "POST" else {}
    conn.request(method, path, body=b"{}" if method == "POST" else None, headers=headers)
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read() or b"{}")


def test_every_field_tampered_at_once_under_python_m_rlviz_inside_the_folder(clean_run, tmp_path):
    """``python -m rlviz explore .`` and ``python -m rlviz render AGENT --env env-recipe.json`` started inside the
    folder, every field tampered: the page opens and its episode is refused, the render is refused in one line;
    nothing of the folder's runs, and each process stays far below what the huge numbers would have made."""
    run, marker = _folder(clean_run, tmp_path, shadows=("numpy", "werkzeug", "torch"))
    options = {key: value for _, tampered, _, _ in _FIELDS for key, value in tampered.items()}
    options.update(env="env-recipe.json", checkpoint=str(run / "evil.pt"))
    _tamper(run, options, _recipe(f"{PWN}:Foo-v0", {"n_pistons": 1e9},
                                  [("ss:frame_stack_v1", {"stack_size": 1e7}), (f"{PWN}:Foo",)]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    render = subprocess.Popen([sys.executable, "-m", "rlviz", "render", str(clean_run.parent / "agent.pt2"), "--env",
                               "env-recipe.json", "--episodes", "1", "--videos", "none", "--out", "again",
                               "--no-progress"], cwd=run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
    explore = subprocess.Popen([sys.executable, "-m", "rlviz", "explore", ".", "--port", "0", "--no-browser"], cwd=run,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = explore.stdout.readline()
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", line).group(1))
        assert _get(port, "/api/run")[0] == 200
        assert _get(port, "/api/episode/0/open", "POST")[0] == 200
        deadline = time.monotonic() + 120
        while (status := _get(port, "/api/episode/0/status")[1])["state"] == "rendering":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        peak_kb = int(re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{explore.pid}/status").read_text()).group(1))
    finally:
        explore.send_signal(signal.SIGINT)
        explore.communicate(timeout=60)
    out, err = render.communicate(timeout=300)
    assert status["state"] == "error" and "--trust-checkpoint" in status["message"], status
    assert render.returncode in (1, 2) and len(err.strip().splitlines()) == 1, err
    assert "env-recipe.json" in err and "Traceback" not in err and not (run / "again").exists()
    assert not marker.exists()
    assert peak_kb < 2 << 20  # KiB: under 2 GiB (a stack of 1e7 frames or 1e9 pistons is tens of GB)


def test_a_known_wrapper_a_run_names_is_never_imported_from_the_working_folder(tmp_path, monkeypatch):
    """A known wrapper class (accepted from a file without trust: MiniGrid's) comes from its installed package: a
    run folder explored from inside, holding a package of that name where none is installed, is not imported (the
    working folder is searched only for names the user types). Stood in for by a known name of no installed
    package."""
    import rlviz.envs.user_wrappers as uw
    from rlviz.errors import EnvError

    marker = tmp_path / "imported"
    (tmp_path / "h5_family_pkg").mkdir()
    (tmp_path / "h5_family_pkg" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "h5_family_pkg" / "wrappers.py").write_text("import gymnasium\nclass Img(gymnasium.Wrapper): pass\n")
    monkeypatch.setattr(uw, "KNOWN_WRAPPER_CLASSES", uw.KNOWN_WRAPPER_CLASSES | {"h5_family_pkg.wrappers:Img"})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])  # (as the rlviz script's)
    with pytest.raises(EnvError, match="cannot import Img from h5_family_pkg"):
        uw.user_wrapper("h5_family_pkg.wrappers:Img")
    assert not marker.exists() and "h5_family_pkg" not in sys.modules
