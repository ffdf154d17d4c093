"""What a file may make rlviz do (#55 item 4, #60 items 1-2): a recipe file names only known wrappers (others need
``--wrapper`` or ``--trust-checkpoint``), ``--wrapper`` takes a wrapper class or a function of the user's and calls
nothing else, and the explorer's state-changing requests come from its own page (off the loopback: with a token).
Each case failed on release 0.5's main."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rlviz.envs import EnvRecipe, WrapperSpec
from rlviz.errors import UnsafeCheckpointError, UsageError

ROOT = Path(__file__).resolve().parents[1]


def _recipe_file(tmp_path: Path, wrappers: list[str], env_id: str = "CartPole-v1") -> Path:
    path = tmp_path / "env-recipe.json"
    path.write_text(EnvRecipe(env_id, wrappers=tuple(WrapperSpec(w) for w in wrappers)).to_json())
    return path


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


# the probe: read each recipe as `rlviz render --env FILE` does (the job's agent_env), then list what that read
# imported. One interpreter reads them all, one after another (the refusals first, so nothing a consent's read
# imports is in sys.modules before a refusal's); each read's imports are those new during it.
_PROBE = """
import sys, json
from rlviz.config import RenderConfig
from rlviz.jobs.stages import agent_env
for key, path, wrappers, trust in json.loads(sys.argv[1]):
    before = set(sys.modules)
    try:
        recipe = agent_env(RenderConfig(checkpoint="x.zip", env=path, wrapper=tuple(wrappers), trust_checkpoint=trust))
        result = "accepted " + ",".join(w.name for w in recipe.wrappers)
    except Exception as exc:
        result = type(exc).__name__ + ": " + str(exc)
    print(json.dumps({"key": key, "result": result, "imported": sorted(set(sys.modules) - before)}), flush=True)
"""
REFUSED = ["this:s", "os:system", "some_package.wrappers:Anything"]
CONSENTED = "gymnasium.wrappers:TimeAwareObservation"  # not on rlviz's list: a module:Class the file chose


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> tuple[dict, str]:
    """key -> {"result", "imported"} of each recipe read in the probe's interpreter, and its whole stdout."""
    reads = []
    for i, name in enumerate(REFUSED):
        folder = tmp_path_factory.mktemp(f"refused{i}")
        reads.append([name, str(_recipe_file(folder, [name])), [], False])
    for consent in ("wrapper", "trust"):
        folder = tmp_path_factory.mktemp(consent)
        reads.append([consent, str(_recipe_file(folder, [CONSENTED])), [CONSENTED] if consent == "wrapper" else [],
                      consent == "trust"])
    cwd = tmp_path_factory.mktemp("probe")
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(reads)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    lines = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith('{"key": ')]
    assert [ln["key"] for ln in lines] == [r[0] for r in reads], done.stdout
    return {ln["key"]: ln for ln in lines}, done.stdout


@pytest.mark.parametrize("name", REFUSED)
def test_a_recipe_file_naming_an_unknown_wrapper_is_refused_before_anything_is_imported(probed, name):
    results, stdout = probed
    out = results[name]
    assert out["result"].startswith("UnsafeCheckpointError: ") and name in out["result"]
    assert f"--wrapper {name}" in out["result"] and "--trust-checkpoint" in out["result"]
    assert "\n" not in out["result"]
    module = name.split(":")[0]
    assert module not in out["imported"] and "this" not in out["imported"]
    assert "The Zen of Python" not in stdout


@pytest.mark.parametrize("consent", ["wrapper", "trust"])
def test_the_same_recipe_is_accepted_with_the_users_consent_and_a_named_wrapper_is_applied_once(probed, consent):
    out = probed[0][consent]
    assert out["result"] == f"accepted {CONSENTED}", out  # once: --wrapper consents to the file's, it adds no second copy


def test_known_wrappers_in_a_recipe_file_need_no_consent(tmp_path):
    from rlviz.config import RenderConfig
    from rlviz.jobs.stages import agent_env

    path = _recipe_file(tmp_path, ["minigrid.wrappers:ImgObsWrapper"], env_id="MiniGrid-Empty-5x5-v0")
    recipe = agent_env(RenderConfig(checkpoint="x.zip", env=str(path)))
    assert [w.name for w in recipe.wrappers] == ["minigrid.wrappers:ImgObsWrapper"]


def test_an_env_id_that_imports_a_module_in_a_recipe_file_is_refused(tmp_path):
    from rlviz.config import RenderConfig
    from rlviz.jobs.stages import agent_env

    path = _recipe_file(tmp_path, [], env_id="this:Foo-v0")
    with pytest.raises(UnsafeCheckpointError, match="'this:Foo-v0'.*would import the module 'this'"):
        agent_env(RenderConfig(checkpoint="x.zip", env=str(path)))
    assert "this" not in sys.modules or True  # (the subprocess tests prove nothing is imported; here: the refusal)


@pytest.mark.parametrize("name", ["os:system", "builtins:print", "shutil:rmtree", "collections:OrderedDict"])
def test_wrapper_flag_takes_only_a_wrapper_class_or_a_function_of_the_users_and_calls_nothing_else(name):
    from rlviz.envs.user_wrappers import user_wrapper

    with pytest.raises(UsageError, match=r"expected a gymnasium\.Wrapper subclass .* Nothing was called\.$"):
        user_wrapper(name)


def test_wrapper_flag_os_system_is_refused_by_the_cli_without_being_called(tmp_path):
    marker = tmp_path / "called"
    sample = ROOT / "samples" / "minatar_breakout_ppo.pt2"
    done = subprocess.run([sys.executable, "-m", "rlviz", "render", str(sample), "--env", "MinAtar/Breakout-v1",
                           "--wrapper", "os:system", "--episodes", "1", "--videos", "none", "--out",
                           str(tmp_path / "out"), "--no-progress"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode in (1, 2), done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "os:system" in done.stderr and "Nothing was called" in done.stderr
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_a_wrapper_function_of_the_users_is_called_with_the_env_and_must_return_an_env(tmp_path):
    import gymnasium as gym

    from rlviz.envs import make_env
    from rlviz.errors import EnvError

    (tmp_path / "my_wrappers_h5.py").write_text(
        "import gymnasium as gym\n"
        "def timed(env):\n    return gym.wrappers.TimeAwareObservation(env)\n"
        "def broken(env):\n    return 3\n")
    sys.path.insert(0, str(tmp_path))
    try:
        env = make_env(EnvRecipe("CartPole-v1", wrappers=(WrapperSpec("my_wrappers_h5:timed"),)))
        assert isinstance(env, gym.wrappers.TimeAwareObservation) and env.observation_space.shape == (5,)
        env.close()
        with pytest.raises(EnvError, match="returned a int, not a gymnasium Env"):
            make_env(EnvRecipe("CartPole-v1", wrappers=(WrapperSpec("my_wrappers_h5:broken"),)))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_wrappers_h5", None)


def test_a_wrapper_given_twice_is_one_line_not_an_attribute_error():
    from rlviz.envs import make_env
    from rlviz.errors import EnvError

    pytest.importorskip("minigrid")
    twice = tuple(WrapperSpec("minigrid.wrappers:ImgObsWrapper") for _ in range(2))
    with pytest.raises(EnvError, match="Cannot apply the wrapper 'minigrid.wrappers:ImgObsWrapper'.*named once"):
        make_env(EnvRecipe("MiniGrid-Empty-5x5-v0", wrappers=twice))


# -- the explorer's gate -----------------------------------------------------------------------------------------
class _App:
    """A stand-in app behind the gate: answers 200 and counts the calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, environ, start_response):
        self.calls += 1
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]


def _call(app, method="GET", query="", headers=None):
    from wsgiref.util import setup_testing_defaults

    environ = {"REQUEST_METHOD": method, "PATH_INFO": "/api/episode/1/open", "QUERY_STRING": query,
               "HTTP_HOST": "127.0.0.1:8765", **(headers or {})}
    setup_testing_defaults(environ)
    got = {}

    def start_response(status, headers, *exc):
        got["status"], got["headers"] = status, headers

    body = b"".join(app(environ, start_response))
    return int(got["status"].split()[0]), dict(got["headers"]), body


def test_the_gate_refuses_cross_site_and_form_posts_and_lets_the_page_through():
    from rlviz.explore.gate import Gate

    inner = _App()
    app = Gate(inner)
    json_type = {"CONTENT_TYPE": "application/json"}
    assert _call(app, "POST", headers={"HTTP_ORIGIN": "http://evil.example", **json_type})[0] == 403
    assert _call(app, "POST", headers={"HTTP_SEC_FETCH_SITE": "cross-site", **json_type})[0] == 403
    assert _call(app, "POST", headers={"CONTENT_TYPE": "application/x-www-form-urlencoded"})[0] == 415
    assert _call(app, "POST", headers={"HTTP_ORIGIN": "http://127.0.0.1:8765", "CONTENT_TYPE": "text/plain"})[0] == 415
    assert inner.calls == 0
    assert _call(app, "POST", headers={"HTTP_ORIGIN": "http://127.0.0.1:8765", "HTTP_SEC_FETCH_SITE": "same-origin",
                                       **json_type})[0] == 200
    assert _call(app, "GET")[0] == 200 and inner.calls == 2


def test_with_a_token_every_request_needs_it_and_the_url_token_sets_a_cookie():
    from rlviz.explore.gate import TOKEN_COOKIE, Gate

    app = Gate(_App(), token="s3cret-token")
    assert _call(app, "GET")[0] == 403
    assert _call(app, "GET", query="token=wrong")[0] == 403
    code, headers, _ = _call(app, "GET", query="token=s3cret-token")
    assert code == 200 and headers["Set-Cookie"].startswith(f"{TOKEN_COOKIE}=s3cret-token;")
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    assert _call(app, "GET", headers={"HTTP_COOKIE": f"{TOKEN_COOKIE}=s3cret-token"})[0] == 200
    assert _call(app, "GET", headers={"HTTP_COOKIE": f"{TOKEN_COOKIE}=other"})[0] == 403


def _own_address() -> str | None:
    """This machine's non-loopback IPv4 address (the one its default route leaves from; no packet is sent), or
    None when it has none."""
    import ipaddress
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))
            address = s.getsockname()[0]
        with socket.socket() as s:
            s.bind((address, 0))
    except OSError:
        return None
    return None if ipaddress.ip_address(address).is_loopback else address


def test_explore_off_the_loopback_warns_and_answers_403_without_the_token_or_for_another_host(tmp_path):
    """``--host 0.0.0.0`` and ``--host`` this machine's own address (when it has one; the gate's table in
    tests/test_fuzz_explore.py covers both without a network): each warns and answers 403 without the URL's token;
    on the address a request naming another host is 403 with the token too; on the wildcard it is answered."""
    import http.client
    import os
    import re
    import socket

    import torch

    from rlviz.sources.pt2.saving import save_checkpoint

    torch.manual_seed(0)
    agent = tmp_path / "agent.pt2"
    save_checkpoint(agent, torch.nn.Linear(4, 2), env="CartPole-v1", kind="logits")
    from rlviz.cli import main

    run = tmp_path / "run"
    assert main(["render", str(agent), "--episodes", "2", "--videos", "none", "--out", str(run), "--no-progress"]) == 0
    hosts = [h for h in ("0.0.0.0", _own_address()) if h is not None]
    procs = {}
    for host in hosts:  # (started together: their start-ups overlap)
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        procs[host] = port, subprocess.Popen(
            [sys.executable, "-m", "rlviz", "explore", str(run), "--host", host, "--port", str(port), "--no-browser"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        for host, (port, proc) in procs.items():
            token = re.search(r"\?token=([\w-]+)", proc.stdout.readline()).group(1)

            def get(path, headers=None, host=host, port=port):
                conn = http.client.HTTPConnection("127.0.0.1" if host == "0.0.0.0" else host, port, timeout=60)
                conn.request("GET", path, headers=headers or {})
                resp = conn.getresponse()
                return resp.status, resp.read()

            assert get("/api/run")[0] == 403
            assert get("/")[0] == 403
            assert get(f"/api/run?token={token}")[0] == 200
            code, body = get(f"/api/run?token={token}", {"Host": f"evil.example:{port}"})
            assert (code, b"evil.example" in body) == ((200, False) if host == "0.0.0.0" else (403, True)), host
    finally:
        errs = {}
        for host, (_, proc) in procs.items():
            proc.terminate()
            errs[host] = proc.communicate(timeout=60)[1]
    assert "WARNING: serving on 0.0.0.0, off the loopback" in errs["0.0.0.0"]
    assert "the Host header is not checked" in errs["0.0.0.0"]
    for host in hosts[1:]:
        assert f"WARNING: serving on {host}, off the loopback" in errs[host]
        assert f"requests must name {host} as their Host" in errs[host]


def test_fifty_opens_at_once_render_at_most_the_slots_at_a_time(tmp_path):
    """50 opens at once: RENDER_SLOTS renders run (on as many threads), the other 48 wait in the queue (their status
    says so), and memory holds RENDER_SLOTS renders' worth at most (each render here holds 4 MiB while it runs: 50
    at once held 200 MiB, as the 0.5 explorer's 55 threads grew it from 291 to 593 MB)."""
    import tracemalloc

    from rlviz.explore.cache import RENDER_SLOTS, EpisodeCache

    running, peak, lock, gate = [0], [0], threading.Lock(), threading.Event()
    each = 4 << 20

    def renderer(n: int, folder: Path) -> Path:  # a blocking render holding memory: it counts who runs at once
        held = bytearray(each)
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        gate.wait(60)
        (folder / "v.npz").write_bytes(b"")
        video = folder / "v.mp4"
        video.write_bytes(bytes(held[:1]))
        with lock:
            running[0] -= 1
        return video

    cache = EpisodeCache(tmp_path, renderer)
    threads_before = threading.active_count()
    tracemalloc.start()
    try:
        states = [cache.start(n)["state"] for n in range(50)]
        deadline = time.monotonic() + 60
        while running[0] < RENDER_SLOTS:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.1)  # (a third render, were there no queue, would have started by now)
        queued = [n for n in range(50) if cache.status(n).get("queued")]
        assert states == ["rendering"] * 50 and len(queued) == 50 - RENDER_SLOTS and running[0] == RENDER_SLOTS
        assert threading.active_count() - threads_before == RENDER_SLOTS  # two threads of its own, not 50
        gate.set()
        while any(cache.status(n)["state"] != "done" for n in range(50)):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        top = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        gate.set()
    assert peak[0] == RENDER_SLOTS and sum(cache.renders.values()) == 50
    assert top < (RENDER_SLOTS + 1) * each, top  # RENDER_SLOTS renders' memory at most, not 50


# -- a run folder is untrusted input (#60 item 1) -------------------------------------------------------------------
def _tampered_run(tmp_path: Path, **options) -> Path:
    """A real render run (2 CartPole episodes), its rlviz-run.json then tampered with ``options``."""
    import torch

    from rlviz.cli import main
    from rlviz.sources.pt2.saving import save_checkpoint

    torch.manual_seed(0)
    agent = tmp_path / "agent.pt2"
    save_checkpoint(agent, torch.nn.Linear(4, 2), env="CartPole-v1", kind="logits")
    run = tmp_path / "run"
    assert main(["render", str(agent), "--episodes", "2", "--videos", "none", "--out", str(run), "--no-progress"]) == 0
    marker = run / "rlviz-run.json"
    data = json.loads(marker.read_text())
    data["options"].update(options)
    marker.write_text(json.dumps(data))
    return run


def test_a_run_folders_env_that_imports_a_module_is_refused_by_the_explorer_and_nothing_is_imported(tmp_path):
    run = _tampered_run(tmp_path, env="this:Foo-v0")
    code = f"""
import sys, json
from rlviz.config import ExploreConfig
from rlviz.explore.server import open_run
index, cache = open_run(ExploreConfig(out={str(run)!r}, port=0, browser=False))
try:
    cache.renderer(0, __import__("pathlib").Path({str(tmp_path)!r}))
    said = "rendered"
except Exception as exc:
    said = type(exc).__name__ + ": " + str(exc)
getattr(cache.renderer, "warm", lambda: None)()
print(json.dumps({{"said": said, "this": "this" in sys.modules}}))
"""
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"said": out["said"], "this": False} and "The Zen of Python" not in done.stdout
    assert "UnsafeCheckpointError" in out["said"] and "'this:Foo-v0'" in out["said"]


def test_python_m_rlviz_keeps_the_working_folder_off_the_import_path_for_what_it_imports(tmp_path):
    """A ``gymnasium.py`` in the folder ``python -m rlviz`` starts in would shadow gymnasium (and run) before."""
    marker = tmp_path / "shadow-ran"
    (tmp_path / "gymnasium.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError('shadow')\n")
    sample = ROOT / "samples" / "minatar_breakout_ppo.pt2"
    import os

    done = subprocess.run([sys.executable, "-m", "rlviz", "render", str(sample), "--episodes", "1", "--videos", "none",
                           "--out", str(tmp_path / "out"), "--no-progress"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert not marker.exists(), done.stderr
    assert done.returncode == 0, done.stderr


def test_a_wrapper_the_user_types_is_found_in_the_working_folder(tmp_path):
    """docs/bodies.md's ``--wrapper my_wrappers:ImageDirection`` from the folder holding my_wrappers.py: the name
    typed on the command line is the user's consent, so its module is looked for there too."""
    import os

    (tmp_path / "my_wrappers_cwd.py").write_text(
        "import gymnasium as gym\nclass Timed(gym.wrappers.TimeAwareObservation):\n    pass\n")
    code = """
from rlviz.envs.user_wrappers import user_wrapper
print(user_wrapper("my_wrappers_cwd:Timed").__name__)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONSAFEPATH": "1"})  # (-c: no cwd on path)
    assert done.returncode == 0 and done.stdout.strip() == "Timed", done.stderr


# -- numbers in a recipe are bounded (#60 item 7) ---------------------------------------------------------------------
@pytest.mark.parametrize("trust", [False, True])
@pytest.mark.parametrize("env_id, kwargs, wrapper", [
    ("pistonball_v6", {"n_pistons": 1e9}, None),
    ("pistonball_v6", {}, ("ss:frame_stack_v1", {"stack_size": 1e7})),
    ("CartPole-v1", {"max_episode_steps": 10**12}, None),
])
def test_huge_numbers_in_a_recipe_file_are_refused_before_anything_is_made(tmp_path, env_id, kwargs, wrapper, trust):
    from rlviz.config import RenderConfig
    from rlviz.errors import CheckpointError
    from rlviz.jobs.stages import agent_env

    wrappers = (WrapperSpec(wrapper[0], wrapper[1]),) if wrapper else ()
    path = tmp_path / "env-recipe.json"
    path.write_text(EnvRecipe(env_id, env_kwargs=kwargs, wrappers=wrappers).to_json())
    with pytest.raises(CheckpointError, match=r"keyword argument \w+=.* is beyond what rlviz accepts from a file"):
        agent_env(RenderConfig(checkpoint="x.zip", env=str(path), trust_checkpoint=trust))
    with pytest.raises(CheckpointError, match="beyond what rlviz accepts"):
        EnvRecipe.from_json(path.read_text(), "a checkpoint", trusted=trust)


def test_ordinary_numbers_in_a_recipe_pass():
    from rlviz.envs.trust import check_env_kwargs

    ok = {"max_episode_steps": 108_000, "repeat_action_probability": 0.25, "stack_size": 4, "n_pistons": 20,
          "width": 480, "frameskip": 4, "size": 8}
    assert check_env_kwargs(ok, "a file") == ok


def test_an_mpe_env_without_mpe2_names_the_package(tmp_path):
    """#60 item 12: ``--env simple_spread_v3`` without mpe2 said "check the version suffix"."""
    import os
    import textwrap

    code = textwrap.dedent("""
        import sys
        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name == "mpe2" or name.startswith("mpe2."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, Blocker())
        sys.modules["mpe2"] = None  # what `not installed` looks like to find_spec
        from rlviz.cli import main
        sys.exit(main(["render", "x.pt2", "--env", "simple_spread_v3"]))
    """)
    (tmp_path / "x.pt2").write_bytes(b"x")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode != 0 and "pip install mpe2" in proc.stderr and "version suffix" not in proc.stderr, \
        proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
