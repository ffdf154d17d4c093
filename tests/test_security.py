"""Nothing a file says may load code without the user's consent; and the errors a security review found raw,
each one line with its fix and exit code."""

from __future__ import annotations

import errno
import importlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import rlviz
from rlviz.cli import main
from rlviz.envs.recipe import EnvRecipe, make_env
from rlviz.envs.trust import check_env_id, check_wrapper_name
from rlviz.episode.trace import Spool
from rlviz.errors import CheckpointError, EnvError, StorageError, UnsafeCheckpointError
from rlviz.sources.checkpoint import load_agent, load_checkpoint, save_checkpoint
from rlviz.sources.stable_baselines3.zoo_yaml import Tagged, read_zoo_yaml, zoo_env_wrappers

torch.set_num_threads(1)
ROOT = Path(rlviz.__file__).resolve().parents[1]


class ActorCritic(nn.Module):
    """obs [B, n] -> (logits [B, 2], value [B])."""

    def __init__(self, n: int = 4):
        super().__init__()
        self.pi, self.v = nn.Linear(n, 2), nn.Linear(n, 1)

    def forward(self, x):
        return self.pi(x), self.v(x)[:, 0]


class FrameEnv(gym.Env):
    """obs float32 [4] zeros, Discrete(2), terminates after ``length`` steps; ``size`` x ``size`` black frames."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode=None, size: int = 16, length: int = 3):
        self.render_mode, self.size, self.length, self.t = render_mode, size, length, 0
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(4, np.float32), 1.0, self.t >= self.length, False, {}

    def render(self):
        return np.zeros((self.size, self.size, 3), np.uint8)


class NoFramesEnv(FrameEnv):
    """No render modes, and (as gymnasium's env template does) an assert on render_mode in __init__."""

    metadata = {"render_modes": [], "render_fps": 10}

    def __init__(self, render_mode=None):
        assert render_mode is None or render_mode in self.metadata["render_modes"]
        super().__init__(render_mode)


for _id, _entry, _kw in [("rlviz-sec/Frame-v0", FrameEnv, {}), ("rlviz-sec/NoFrames-v0", NoFramesEnv, {}),
                         ("rlviz-sec/Big-v0", FrameEnv, {"size": 256, "length": 12})]:
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry, kwargs=_kw)


@pytest.fixture(scope="module")
def frame_ckpt(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return save_checkpoint(tmp_path_factory.mktemp("sec") / "agent.pt2", ActorCritic(), env="rlviz-sec/Frame-v0")


def _craft(src: Path, dst: Path, edit) -> Path:
    """Copy an rlviz checkpoint, applying ``edit(meta)`` to its extra/rlviz.json."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            blob = zin.read(info.filename)
            if info.filename.endswith("extra/rlviz.json"):
                meta = json.loads(blob)
                edit(meta)
                blob = json.dumps(meta, sort_keys=True).encode()
            zout.writestr(info, blob)
    return dst


def _env_id(env_id):
    def edit(meta):
        meta["recipe"]["env_id"] = env_id
    return edit


def _cli(args, capsys) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    return code, lines[0]


# -- names read from a file --------------------------------------------------------------------------
EVILMOD = """
import pathlib
import gymnasium as gym

pathlib.Path(__file__).with_name("IMPORTED").write_text("evilmod ran")
gym.register("Evil-v0", entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv")  # obs [4], 2 actions
"""


def _python_m_rlviz(args, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m rlviz`` run from ``cwd``: the folder is on sys.path, which is the attack."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "rlviz", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


def _refusal(name: str, module: str) -> str:
    return (
        f"rlviz: error: crafted.pt2 names the env {name!r}, which rlviz does not act on from a file: gymnasium would "
        f"import the module {module!r} to make it, running that module's code. If you trust the file, pass --env "
        f"{name} yourself (env={name!r} in load_agent) or --trust-checkpoint (trust=True)."
    )


def test_a_checkpoint_naming_a_module_imports_nothing(frame_ckpt, tmp_path):
    (tmp_path / "evilmod.py").write_text(EVILMOD)
    _craft(frame_ckpt, tmp_path / "crafted.pt2", _env_id("evilmod:Evil-v0"))
    proc = _python_m_rlviz(["render", "crafted.pt2", "--episodes", "1", "--videos", "none", "--no-progress"],
                           tmp_path)
    assert proc.returncode == 1, proc.stderr
    rlviz_lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rlviz")]
    assert rlviz_lines == [_refusal("evilmod:Evil-v0", "evilmod")] and "Traceback" not in proc.stderr
    assert not (tmp_path / "IMPORTED").exists()
    assert not list(tmp_path.rglob("summary.json"))  # nothing rolled out, not even in a staging folder


def test_a_checkpoint_naming_the_zen_of_python_prints_nothing(frame_ckpt, tmp_path, capsys, monkeypatch):
    """``this:Zen-v0``: importing ``this`` prints the Zen of Python (in-process: ``this`` is not imported yet)."""
    monkeypatch.chdir(tmp_path)
    was_imported = "this" in sys.modules
    _craft(frame_ckpt, tmp_path / "crafted.pt2", _env_id("this:Zen-v0"))
    try:
        code = main(["render", "crafted.pt2", "--episodes", "1", "--videos", "none", "--no-progress"])
    finally:
        captured = capsys.readouterr()
    assert code == 1 and captured.err.splitlines() == [_refusal("this:Zen-v0", "this")]
    assert "Beautiful is better" not in captured.out + captured.err
    assert was_imported or "this" not in sys.modules


def test_passing_the_same_env_yourself_is_consent(frame_ckpt, tmp_path):
    (tmp_path / "evilmod.py").write_text(EVILMOD)
    _craft(frame_ckpt, tmp_path / "crafted.pt2", _env_id("evilmod:Evil-v0"))
    proc = _python_m_rlviz(["render", "crafted.pt2", "--env", "evilmod:Evil-v0", "--episodes", "1", "--videos",
                            "none", "--no-progress"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "IMPORTED").read_text() == "evilmod ran"
    summary = json.loads((tmp_path / "rlviz-out" / "summary.json").read_text())
    assert summary["episodes"] == 1 and summary["returns"]["mean"] == summary["lengths"]["mean"] > 0  # CartPole


def test_library_refuses_then_obeys_consent(frame_ckpt, tmp_path, monkeypatch):
    """load_agent / load_checkpoint follow the rule: refused by default; trust=True and env= are consent."""
    module = "rlviz_sec_evil_lib"
    (tmp_path / f"{module}.py").write_text(EVILMOD.replace('"Evil-v0"', '"EvilLib-v0"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    crafted = _craft(frame_ckpt, tmp_path / "crafted.pt2", _env_id(f"{module}:EvilLib-v0"))
    for load in (load_agent, load_checkpoint):
        with pytest.raises(UnsafeCheckpointError, match=f"names the env '{module}:EvilLib-v0'"):
            load(crafted)
    with pytest.raises(UnsafeCheckpointError):
        EnvRecipe.from_json(json.dumps({"env_id": f"{module}:EvilLib-v0"}), "recipe.json")
    assert module not in sys.modules and not (tmp_path / "IMPORTED").exists()

    agent = load_agent(crafted, trust=True)  # the file's recipe as is, nothing imported yet
    assert agent.recipe.env_id == f"{module}:EvilLib-v0" and module not in sys.modules
    make_env(agent.recipe).close()  # building the env imports the module: the user consented
    assert (tmp_path / "IMPORTED").exists()
    assert load_agent(crafted, env=f"{module}:EvilLib-v0").recipe.env_id == f"{module}:EvilLib-v0"


@pytest.mark.parametrize(
    "edit, message",
    [
        (_env_id("NotRegistered-v0"),
         "names the env 'NotRegistered-v0', which rlviz does not act on from a file: it is not a registered "
         "gymnasium env here"),
        (lambda m: m["recipe"].update(wrappers=[{"name": "evil.wrappers.Evil", "kwargs": {}}]),
         "names the wrapper 'evil.wrappers.Evil', which rlviz does not act on from a file: it is not one of "
         "rlviz's wrappers (atari, channels_first, cleanrl_life_reset, clip_reward, envpool_atari, frame_stack, grayscale, resize, "
         "sb3_atari, sb3_frame_stack, time_limit)"),
        (lambda m: m["recipe"].update(env_kwargs={"entry_point": "os:system"}),
         "names the env keyword argument \"entry_point='os:system'\", which rlviz does not act on from a file: "
         "only plain values are accepted"),
        (lambda m: m["recipe"].update(wrappers=[{"name": "time_limit", "kwargs": {"max_episode_steps": "os:getcwd"}}]),
         "names the wrapper 'time_limit' keyword argument \"max_episode_steps='os:getcwd'\""),
    ],
)
def test_recipe_names_from_a_file_are_checked(frame_ckpt, tmp_path, edit, message):
    crafted = _craft(frame_ckpt, tmp_path / "crafted.pt2", edit)
    with pytest.raises(UnsafeCheckpointError) as info:
        load_agent(crafted)
    assert message in str(info.value) and str(info.value).endswith("--trust-checkpoint (trust=True)."), info.value
    load_agent(crafted, trust=True)  # the user's consent: accepted (nothing is built until an env is made)


def test_the_rule_itself():
    assert check_env_id("CartPole-v1", "f") == "CartPole-v1"
    assert check_env_id("x:Y-v0", "f", consented="x:Y-v0") == "x:Y-v0"
    assert check_env_id("x:Y-v0", "f", trusted=True) == "x:Y-v0"
    with pytest.raises(CheckpointError, match="not a non-empty string"):
        check_env_id(["CartPole-v1"], "f")
    assert check_wrapper_name("frame_stack", "f") == "frame_stack"
    assert check_wrapper_name("pkg.W", "f", known={"pkg.W"}) == "pkg.W"
    with pytest.raises(UnsafeCheckpointError, match="'pkg.W'"):
        check_wrapper_name("pkg.W", "f")


def test_crafted_sb3_zip_naming_an_unknown_class_is_refused(ppo_zip, tmp_path, capsys):
    _, path = ppo_zip
    marker = tmp_path / "IMPORTED"
    (tmp_path / "evil_policies.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    crafted = tmp_path / "crafted.zip"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(crafted, "w") as zout:
        for info in zin.infolist():
            blob = zin.read(info.filename)
            if info.filename == "data":
                doc = json.loads(blob)
                doc["policy_class"]["__module__"] = "evil_policies"
                blob = json.dumps(doc).encode()
            zout.writestr(info, blob)
    code, line = _cli(["render", str(crafted), "--env", "CartPole-v1", "--out", str(tmp_path / "o")], capsys)
    assert code == 1
    assert line == (
        f"rlviz: error: {crafted} names the policy class 'evil_policies.ActorCriticPolicy', which rlviz does not act "
        "on from a file: it is not on rlviz's allow-list of classes it rebuilds without running code from the "
        "file. If you trust the file, pass --trust-checkpoint (trust=True)."
    )
    assert "evil_policies" not in sys.modules and not marker.exists()


ZOO_CONFIG = """\
!!python/object/apply:collections.OrderedDict
- - - batch_size
    - 64
  - - env_wrapper
    - - stable_baselines3.common.atari_wrappers.AtariWrapper
      - evil_wrappers.Evil:
          strength: 3
  - - frame_stack
    - 4
  - - callback
    - !!python/object/apply:os.system ["touch {marker}"]
"""


def test_crafted_zoo_config_naming_an_unknown_wrapper_is_refused(tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "config.yml"
    path.write_text(ZOO_CONFIG.format(marker=marker))
    config = read_zoo_yaml(path)
    assert not marker.exists()  # the os.system tag stayed data
    assert config["callback"] == Tagged("tag:yaml.org,2002:python/object/apply:os.system", [f"touch {marker}"])
    assert config["batch_size"] == 64 and config["frame_stack"] == 4
    atari = "stable_baselines3.common.atari_wrappers.AtariWrapper"
    with pytest.raises(UnsafeCheckpointError) as info:
        zoo_env_wrappers(config, str(path), known={atari})
    assert str(info.value) == (
        f"{path} names the wrapper 'evil_wrappers.Evil', which rlviz does not act on from a file: it is not one of "
        f"rlviz's wrappers (atari, channels_first, cleanrl_life_reset, clip_reward, envpool_atari, frame_stack, grayscale, resize, "
        f"sb3_atari, sb3_frame_stack, {atari}, time_limit), and building it would import "
        "code the file chose. If you trust the file, pass --trust-checkpoint (trust=True)."
    )
    with pytest.raises(UnsafeCheckpointError, match=f"names the wrapper '{atari}'"):
        zoo_env_wrappers(config, str(path))  # a known class only with the caller's translation table
    assert zoo_env_wrappers(config, str(path), trusted=True) == [(atari, {}), ("evil_wrappers.Evil", {"strength": 3})]
    assert zoo_env_wrappers({"env_wrapper": "frame_stack"}, "f") == [("frame_stack", {})]
    assert "evil_wrappers" not in sys.modules and not marker.exists()


# -- raw errors turned into one line ------------------------------------------------------------------
def test_env_without_rgb_array_render_mode(frame_ckpt, tmp_path, capsys):
    code, line = _cli(["render", str(frame_ckpt), "--env", "rlviz-sec/NoFrames-v0", "--episodes", "1",
                       "--out", str(tmp_path / "o"), "--no-progress"], capsys)
    assert code == 1
    assert line == (
        "rlviz: error: Env 'rlviz-sec/NoFrames-v0' cannot render frames: its render modes are [], and rlviz draws "
        "videos and heatmaps from render_mode='rgb_array' frames. Use an env that supports render_mode='rgb_array'."
    )
    assert not list(tmp_path.rglob("summary.json"))
    env = NoFramesEnv()
    env.render_mode = "rgb_array"  # an env made around its own check: RecordEpisode reads the metadata
    with pytest.raises(EnvError, match=r"Env 'NoFramesEnv' cannot render frames: its render modes are \[\]"):
        rlviz.RecordEpisode(env, tmp_path / "v", rlviz.load_agent(frame_ckpt).policy)


def test_observation_shape_mismatch_is_one_line(frame_ckpt, tmp_path, capsys):
    from _envs import register

    register()
    code, line = _cli(["render", str(frame_ckpt), "--env", "rlviz-probe/Probe-v0", "--episodes", "1",
                       "--out", str(tmp_path / "o"), "--no-progress"], capsys)
    assert code == 2
    assert line == (
        f"rlviz: error: {frame_ckpt} was saved for observations of shape (4,) but env 'rlviz-probe/Probe-v0' gives "
        "(3,); pass the env (and preprocessing) it was trained on, or leave --env out to use the checkpoint's own."
    )
    assert not list(tmp_path.rglob("summary.json"))
    # a bare torch.export program (no recorded shape): the network's refusal, checked right after loading
    program = tmp_path / "bare.pt2"
    torch.export.save(torch.export.export(ActorCritic().eval(), (torch.zeros(2, 4),),
                                          dynamic_shapes=({0: torch.export.Dim("batch", min=1)},)), program)
    with pytest.raises(EnvError, match=r"bare.pt2: its network cannot take the observations of the env: the env gives shape \(3,\), the network takes shape \(4,\) \("):
        load_agent(program, env="rlviz-probe/Probe-v0")


def test_seed_minus_one_is_a_usage_error(frame_ckpt, capsys):
    code, line = _cli(["render", str(frame_ckpt), "--seed", "-1"], capsys)
    assert (code, line) == (2, "rlviz: error: --seed: expected a whole number >= 0, received '-1'.")


def test_save_checkpoint_of_a_nan_model_says_nan(tmp_path):
    module = ActorCritic()
    with torch.no_grad():
        module.pi.weight.fill_(float("nan"))
    path = tmp_path / "nan.pt2"
    with pytest.raises(CheckpointError) as info:
        save_checkpoint(path, module, env="rlviz-sec/Frame-v0")
    assert str(info.value) == (
        f"{path}: the module outputs NaN (logits) for the example observation; not written. Check the network's "
        "weights (a diverged training run?) and example_obs."
    )
    assert info.value.exit_code == 1 and list(tmp_path.iterdir()) == []


class Detached(nn.Module):
    """A network whose outputs carry no gradient w.r.t. its input (exports fine, loads fine)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3)
        self.pi, self.v = nn.Linear(256, 3), nn.Linear(256, 1)

    def forward(self, x):
        h = torch.relu(self.conv(x.detach().permute(0, 3, 1, 2))).flatten(1)
        return self.pi(h), self.v(h)[:, 0]


def test_gradient_saliency_the_agent_cannot_take_is_refused_before_the_rollout(tmp_path, capsys, monkeypatch):
    job = importlib.import_module("rlviz.jobs.render")

    def no_rollout(*args, **kwargs):
        raise AssertionError("the rollout ran")

    monkeypatch.setattr(job, "run_rollouts", no_rollout)
    detached = save_checkpoint(tmp_path / "detached.pt2", Detached(), env="MinAtar/Breakout-v1")
    code, line = _cli(["render", str(detached), "--saliency", "gradient", "--out", str(tmp_path / "o")], capsys)
    assert (code, line) == (2, (
        f"rlviz: error: --saliency gradient needs gradients of the policy's outputs with respect to the observation, "
        f"but {detached}'s outputs carry none (its network detaches the input or computes outside torch autograd); "
        "use --saliency perturbation, which needs forward passes only."
    ))
    vector = save_checkpoint(tmp_path / "vector.pt2", ActorCritic(), env="rlviz-sec/Frame-v0")
    code, line = _cli(["render", str(vector), "--saliency", "perturbation", "--out", str(tmp_path / "o")], capsys)
    assert (code, line) == (2, (
        "rlviz: error: Perturbation saliency blurs image regions; the observations are a vector of 4 numbers with no "
        "regions to blur. Use --saliency gradient (or smoothgrad; API: method='gradient'), which gives one number per "
        "observation feature."
    ))
    assert not list(tmp_path.rglob("summary.json"))


def _full_message(folder) -> str:
    return (
        f"The temporary folder {folder} is full (no space left on device) while spooling episode frames; free space "
        "there or point rlviz at a larger folder: set TMPDIR, or pass spool_dir= to RecordEpisode."
    )


def test_a_full_spool_folder_is_one_line(tmp_path):
    class FullDisk:
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            pass

    spool = Spool((2,), np.float32, dir=tmp_path)
    spool._fh = FullDisk()
    with pytest.raises(StorageError) as info:
        spool.append(np.zeros(2, np.float32))
    assert str(info.value) == _full_message(tmp_path)
    spool.close()
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 1 MiB tmpfs (needs root and mount rights: skipped elsewhere)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.decode().strip()})")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_a_full_temporary_folder_during_render_is_one_line(tmp_path, tiny_tmpfs, capsys, monkeypatch):
    ckpt = save_checkpoint(tmp_path / "big.pt2", ActorCritic(), env="rlviz-sec/Big-v0")
    monkeypatch.setattr(tempfile, "tempdir", str(tiny_tmpfs))  # what TMPDIR sets
    out = tmp_path / "o"
    code, line = _cli(["render", str(ckpt), "--episodes", "1", "--out", str(out), "--no-progress"], capsys)
    assert (code, line) == (1, "rlviz: error: " + _full_message(tiny_tmpfs))
    assert list(tiny_tmpfs.iterdir()) == []  # the spools were removed
    assert not list(tmp_path.rglob("*.mp4")) and not list(tmp_path.rglob("*.npz"))  # no video, final or partial
