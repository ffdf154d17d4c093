"""Bodies and partial views (#46): Box policies diagnosed for the space they act in, Box actions replayed for the
pixel heatmap, headless MuJoCo rendering chosen before mujoco is imported, env ids of packages that register on
import, --wrapper for a bare zip, Dict spaces described, MuJoCo bodies' and MiniGrid agents' failure heatmaps."""

from __future__ import annotations

import csv
import importlib
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from _dict_envs import check_agent_cell_heatmap
from torch import nn

from rlviz.agent.policy import TorchPolicy
from rlviz.envs.recipe import EnvRecipe, make_env
from rlviz.evaluate import RolloutPlan
from rlviz.evaluate.failures.objects import MotionExtractor
from rlviz.evaluate.rollouts.rollout import rollout
from rlviz.evaluate.statistics.box_findings import BOX_THRESHOLDS, gaussian_spread
from rlviz.evaluate.statistics.diagnostics import diagnose

ROOT = Path(__file__).resolve().parents[1]
DISCRETE_IDS = {"policy_uniform", "policy_collapsed", "action_dominant"}
rollout_mod = importlib.import_module("rlviz.evaluate.rollouts.rollout")


class ConstantGaussian(nn.Module):
    """Any Box env: mean 0.1 on every dimension, the same std on every dimension (None: deterministic)."""

    def __init__(self, dims: int, std: float | None):
        super().__init__()
        self.dims, self.std = dims, std
        self.w = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        mean = torch.full((x.shape[0], self.dims), 0.1) + 0 * self.w + 0 * x[:, :1]
        out = {"mean": mean, "value": x[:, 0] * 0}
        if self.std is not None:
            out["std"] = torch.full_like(mean, self.std)
        return out


def _diagnosed(env_id: str, std: float | None, episodes: int = 2, max_steps: int = 20):
    env = make_env(env_id, render_mode=None)
    policy = TorchPolicy(ConstantGaussian(env.action_space.shape[0], std), action_space=env.action_space,
                         device="cpu")
    res = rollout(env_id, policy, RolloutPlan(episodes, num_envs=1, seed=0, max_steps=max_steps, progress=False))
    return res, {f.id: f for f in diagnose(res)}


@pytest.mark.parametrize("std, expected", [(1.0, "gaussian_uniform"), (0.002, "gaussian_collapsed"), (0.2, None)])
def test_box_gaussian_is_judged_against_the_bounds_and_no_discrete_finding(std, expected):
    res, found = _diagnosed("Pendulum-v1", std)  # Box(-2, 2, (1,)): range 4
    assert res.action_space["kind"] == "box" and res.action_space["squash"] is False
    assert not DISCRETE_IDS & set(found)
    box = {i for i in found if i.startswith("gaussian_")}
    assert box == ({expected} if expected else set())
    if expected:
        assert found[expected].evidence["spread"] == pytest.approx(std / 4, rel=1e-5)
    # the spread is sigma / range exactly, for any number of dimensions
    h = 3 * 0.5 * math.log(2 * math.pi * math.e * 0.3**2)
    assert gaussian_spread(h, [-1] * 3, [1] * 3, False) == pytest.approx(0.15)
    assert gaussian_spread(h, [-1] * 3, [1] * 3, True) == pytest.approx(0.15)  # squashed: pre-tanh [-1, 1]
    assert BOX_THRESHOLDS["uniform_spread"] == pytest.approx(1 / math.sqrt(2 * math.pi * math.e))


def test_deterministic_actor_is_recognised_with_no_entropy_finding():
    res, found = _diagnosed("Pendulum-v1", None)
    assert set(found) - {"value_uninformative", "value_biased", "value_wrong_sign", "returns_constant",
                         "rewards_one_sign"} == {"deterministic_actor"}
    assert found["deterministic_actor"].severity == "info"
    assert found["deterministic_actor"].evidence["action_dimensions"] == 1


def test_discrete_agents_keep_their_findings():
    class Uniform(nn.Module):
        def forward(self, x):
            return torch.zeros(x.shape[0], 2), x[:, 0] * 0

    res = rollout("CartPole-v1", TorchPolicy(Uniform(), num_actions=2, device="cpu"),
                  RolloutPlan(3, num_envs=1, seed=0, progress=False))
    assert res.action_space is None and "policy_uniform" in {f.id for f in diagnose(res)}


# -- MuJoCo -----------------------------------------------------------------------------------------------------
# (not imported here: rlviz chooses its OpenGL backend before mujoco is imported)
needs_mujoco = pytest.mark.skipif(importlib.util.find_spec("mujoco") is None,
                                       reason="the MuJoCo family needs mujoco (rlviz[dev])")


def _python(code: str, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY",
                                                                 "WAYLAND_DISPLAY")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**clean, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **env})


@needs_mujoco
def test_headless_mujoco_picks_a_backend_before_mujoco_is_imported_and_renders():
    got = _python("import os, sys\nfrom rlviz.envs import make_env\nassert 'mujoco' not in sys.modules\n"
                  "env = make_env('Hopper-v5'); env.reset(seed=0); f = env.render()\n"
                  "print(os.environ['MUJOCO_GL'], os.environ['PYOPENGL_PLATFORM'], f.shape, int(f.std() > 5))")
    if got.returncode and "MuJoCo cannot render headless" in got.stderr:
        pytest.skip("no EGL or OSMesa on this machine: " + got.stderr.strip().splitlines()[-1])
    assert got.returncode == 0, got.stderr[-2000:]
    backend, platform, *rest = got.stdout.split()
    assert backend in ("egl", "osmesa") and platform == backend and rest[-1] == "1"


@needs_mujoco
def test_mujoco_imported_first_still_renders_headless():
    """mujoco imported before rlviz made its first MuJoCo env (by Brax or MJX, a notebook's own import: it chose GLFW,
    which with no display fails only at the first frame): gymnasium's MuJoCo envs still render through the backend
    rlviz chose (they read MUJOCO_GL when their first frame is drawn)."""
    got = _python("import os, sys, warnings\nwarnings.simplefilter('ignore')\nimport mujoco\n"
                  "assert 'OpenGL' not in sys.modules and 'MUJOCO_GL' not in os.environ\n"
                  "from rlviz.envs import make_env\n"
                  "env = make_env('Hopper-v5'); env.reset(seed=0); f = env.render()\n"
                  "print(os.environ['MUJOCO_GL'], f.shape, int(f.std() > 5))")
    if got.returncode and "MuJoCo cannot render headless" in got.stderr and "FatalError" not in got.stderr:
        pytest.skip("no EGL or OSMesa on this machine: " + got.stderr.strip().splitlines()[-1])
    assert got.returncode == 0, got.stderr[-2000:]
    backend, *rest = got.stdout.split()
    assert backend in ("egl", "osmesa") and rest[-1] == "1"


@needs_mujoco
def test_no_backend_is_one_line_naming_the_system_packages():
    code = ("import rlviz.envs.headless as h\nh._egl_works = h._osmesa_works = lambda: False\n"
            "import gymnasium.envs.mujoco.mujoco_rendering as r\n"
            "def refuse(w, hgt): raise ImportError('no GL here')\n"
            "r._ALL_RENDERERS = {k: refuse for k in r._ALL_RENDERERS}\n"
            "from rlviz.envs import make_env\nfrom rlviz.errors import EnvError\n"
            "env = make_env('Hopper-v5'); env.reset(seed=0)\n"
            "try:\n    env.render()\nexcept EnvError as e:\n    print('ERR', e)\n")
    got = _python(code)
    assert got.returncode == 0, got.stderr[-2000:]
    line = got.stdout.strip()
    assert line.startswith("ERR MuJoCo cannot render headless") and "\n" not in line
    assert "libegl1" in line and "libosmesa6" in line and "MUJOCO_GL" in line


@needs_mujoco
def test_video_fps_follows_the_env():
    from rlviz.envs import make_env
    from rlviz.envs.frames import frame_rate

    hopper = make_env("Hopper-v5", render_mode=None)
    assert frame_rate(hopper) == pytest.approx(1 / hopper.unwrapped.dt) == pytest.approx(125)
    assert frame_rate(make_env("CartPole-v1", render_mode=None)) == 50


class Falls(nn.Module):
    """Hopper: a Gaussian that pushes every joint one way, so the hopper falls within a few dozen steps."""

    def forward(self, x):
        mean = torch.tensor([[0.8, -0.6, 0.7]]).expand(x.shape[0], 3) + 0 * x[:, :3]
        return {"mean": mean, "std": torch.full_like(mean, 0.3), "value": x[:, 0] * 0}


@needs_mujoco
def test_box_actions_replay_for_the_pixel_heatmap_as_rendering_every_step(monkeypatch):
    env = make_env("Hopper-v5", render_mode=None)
    policy = TorchPolicy(Falls(), action_space=env.action_space, device="cpu")
    kw = dict(num_envs=1, seed=3, objects=MotionExtractor(), heatmap=True, progress=False, max_steps=300)
    small = EnvRecipe("Hopper-v5", {"width": 64, "height": 64})  # (software EGL renders slowly)
    monkeypatch.setattr(rollout_mod, "REPLAY_PIXEL_FAILURES", False)
    eager = rollout(small, policy, RolloutPlan(2, **kw))
    monkeypatch.setattr(rollout_mod, "REPLAY_PIXEL_FAILURES", True)
    lazy = rollout(small, policy, RolloutPlan(2, **kw))
    assert lazy.heatmap.failures == sum(e.terminated for e in lazy.episodes) == 2
    assert np.array_equal(eager.heatmap.counts["moving"], lazy.heatmap.counts["moving"])
    assert lazy.heatmap.counts["moving"].sum() > 0
    assert [(e.seed, e.ret, e.length) for e in eager.episodes] == [(e.seed, e.ret, e.length) for e in lazy.episodes]


@needs_mujoco
def test_body_heatmap_counts_where_the_torso_was_on_the_step_before_each_fall():
    from rlviz.evaluate.failures.body_objects import PIXELS_PER_METRE, BodyExtractor

    env = make_env("Hopper-v5", render_mode=None)
    policy = TorchPolicy(Falls(), action_space=env.action_space, device="cpu")
    res = rollout("Hopper-v5", policy, RolloutPlan(3, num_envs=1, seed=5, objects="body:torso", heatmap=True,
                                                     progress=False, max_steps=300))
    hm = res.heatmap
    assert hm.object_names == ("torso",) and hm.failures == 3
    ex = BodyExtractor("torso", "xz")
    assert hm.frame_shape == ex.shape() == (round(2 * PIXELS_PER_METRE), round(12 * PIXELS_PER_METRE))
    # replayed by hand: the torso's (x, z) on the frame each failing action was chosen on
    expected = np.zeros(hm.frame_shape, np.int64)
    for e in res.episodes:
        replay = make_env("Hopper-v5", render_mode=None)
        replay.reset(seed=e.seed)
        for a in e.actions[:-1]:
            replay.step(a)
        expected += ex.masks(replay.unwrapped.data.body("torso").xpos.copy())["torso"]
    assert np.array_equal(hm.counts["torso"], expected)
    assert hm.background.shape == (*hm.frame_shape, 3)
    with pytest.raises(Exception, match="no body 'tail'.*torso"):
        rollout("Hopper-v5", policy, RolloutPlan(1, num_envs=1, seed=5, objects="body:tail", heatmap=True,
                                                 progress=False, max_steps=50))


# -- env families, --wrapper, Dict spaces -----------------------------------------------------------------------
def test_minigrid_id_found_without_its_prefix_and_the_import_is_said():
    pytest.importorskip("minigrid")
    got = _python("import sys\nfrom rlviz.envs.recipe import require_registered\n"
                  "assert 'minigrid' not in sys.modules\nrequire_registered('MiniGrid-Empty-5x5-v0')\n"
                  "print('minigrid' in sys.modules)")
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip() == "True"
    assert "MiniGrid-Empty-5x5-v0 is registered by the minigrid package: imported minigrid" in got.stderr


def test_wrapper_names_from_a_file_follow_the_trust_rule():
    from rlviz.envs.recipe import EnvRecipe
    from rlviz.errors import UnsafeCheckpointError

    known = {"env_id": "CartPole-v1", "wrappers": [{"name": "minigrid.wrappers:ImgObsWrapper"}]}
    EnvRecipe.from_dict(known, "agent.pt2")  # an allow-listed observation wrapper
    for frames in ("gymnasium.wrappers:AddRenderObservation", "gymnasium.wrappers.rendering:AddRenderObservation"):
        pixels = {"env_id": "CartPole-v1", "wrappers": [{"name": frames, "kwargs": {"render_only": True}}]}
        assert EnvRecipe.from_dict(pixels, "env-recipe.json").wrappers[0].name == frames  # a pixels run's recipe
    bad = {"env_id": "CartPole-v1", "wrappers": [{"name": "os:system"}]}
    with pytest.raises(UnsafeCheckpointError, match="os:system"):
        EnvRecipe.from_dict(bad, "agent.pt2")
    assert EnvRecipe.from_dict(bad, "agent.pt2", trusted=True).wrappers[0].name == "os:system"


def test_config_wrapper_is_checked():
    from rlviz.config import RenderConfig
    from rlviz.errors import UsageError

    assert RenderConfig("a.zip", wrapper=["m.w:A", "m:B"]).wrapper == ("m.w:A", "m:B")
    with pytest.raises(UsageError, match="module:Class"):
        RenderConfig("a.zip", wrapper=["not a name"])


@pytest.fixture(scope="module")
def minigrid_zip(tmp_path_factory):
    pytest.importorskip("minigrid")
    sb3 = pytest.importorskip("stable_baselines3")
    from minigrid.wrappers import ImgObsWrapper

    env = ImgObsWrapper(gym.make("MiniGrid-Empty-5x5-v0"))
    model = sb3.PPO("MlpPolicy", env, seed=0, n_steps=64, batch_size=32, n_epochs=1, device="cpu")
    model.learn(64)
    path = tmp_path_factory.mktemp("minigrid") / "ppo_img.zip"
    model.save(path)
    return path


def test_minigrid_zip_needs_its_wrapper_the_error_describes_the_dict(minigrid_zip, tmp_path, capsys):
    from rlviz.cli import main

    code = main(["render", str(minigrid_zip), "--env", "MiniGrid-Empty-5x5-v0", "--episodes", "1",
                 "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert ("the env gives Dict(direction: Discrete(4), image: (7, 7, 3) (uint8), mission: MissionSpace)" in err
            and "--wrapper minigrid.wrappers:ImgObsWrapper" in err and "() (None)" not in err)


def test_minigrid_img_agent_renders_with_its_wrapper_and_the_agent_cell_heatmap(minigrid_zip, tmp_path):
    from rlviz.cli import main
    from rlviz.media import probe_video

    out = tmp_path / "o"
    assert main(["render", str(minigrid_zip), "--env", "MiniGrid-Empty-5x5-v0", "--wrapper",
                 "minigrid.wrappers:ImgObsWrapper", "--episodes", "20", "--heatmap", "--videos", "first:1",
                 "--saliency", "gradient", "--out", str(out), "--no-progress"]) == 0
    check_agent_cell_heatmap(out)  # the agent's cell on the step before each goal: a neighbour of (3, 3)
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    video = next((out / "videos").glob("*.mp4"))
    info = probe_video(video)
    assert info.num_frames == int(rows[0]["length"]) + 1 and info.width > 160  # the game beside its panels
    with np.load(video.with_suffix(".npz")) as data:  # the mission ImgObsWrapper dropped: the env's own
        assert str(data["mission"]) == "get to the green goal square"


# -- acceptance: agents trained here for seconds, rendered as a user would --------------------------------------
def _short_cheetah() -> str:
    env_id = "rlviz-test/HalfCheetahShort-v5"
    if env_id not in gym.registry:  # HalfCheetah never terminates: a short time limit keeps the test fast
        gym.register(env_id, entry_point="gymnasium.envs.mujoco.half_cheetah_v5:HalfCheetahEnv", max_episode_steps=25)
    return env_id


def _sb3_agent(algo: str, env_id: str, path: Path) -> Path:
    sb3 = pytest.importorskip("stable_baselines3")
    env = make_env(env_id, render_mode=None)
    if algo == "sac":
        model = sb3.SAC("MlpPolicy", env, seed=0, learning_starts=64, buffer_size=1000, batch_size=32, device="cpu")
        model.learn(96)
    else:
        model = sb3.PPO("MlpPolicy", env, seed=0, n_steps=64, batch_size=32, n_epochs=1, device="cpu")
        model.learn(64)
    model.save(path)
    return path


def _check_box_run(out: Path, dims: int, fps: float, heatmap_object: str | None = "torso") -> dict:
    from rlviz.draw.video import video_timing
    from rlviz.jobs.videos import MIN_VIDEO_SECONDS
    from rlviz.media import probe_video

    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 20
    ids = {f["id"] for f in summary["diagnostics"]}
    assert not ids & DISCRETE_IDS, ids
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    if heatmap_object is not None:
        with np.load(out / "heatmap.npz") as hm:
            assert list(hm["object_names"]) == [heatmap_object]
            failures, counts = int(hm["failures"]), hm["counts"][0]
        terminated = sum(r["terminated"] == "True" for r in rows)
        assert failures == terminated and (counts.sum() > 0) == (terminated > 0)
    video = next((out / "videos").glob("*.mp4"))
    info = probe_video(video)
    data = np.load(video.with_suffix(".npz"))
    steps = int(rows[0]["length"]) + 1
    rate, held = video_timing(steps, fps, MIN_VIDEO_SECONDS)  # a short episode plays slower, holding its last frame
    assert info.num_frames == steps + held and len(data["mean"]) == steps and info.fps == pytest.approx(rate, rel=1e-3)
    assert data["mean"].shape[1] == dims and info.width * info.height > 480 * 480  # the 480x480 body and its panels
    names = {3: ["thigh_joint", "leg_joint", "foot_joint"], 6: ["bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot"]}
    assert list(data["action_names"]) == names[dims]  # the panels named by the model's actuators
    return summary


@needs_mujoco
@pytest.mark.parametrize("algo, env_id", [("sac", "Hopper-v5"), ("ppo", "Hopper-v5"), ("sac", "cheetah"),
                                          ("ppo", "cheetah")])
def test_sb3_mujoco_agents_render_with_statistics_heatmap_video_and_a_box_diagnosis(algo, env_id, tmp_path):
    from rlviz.cli import main

    env_id = _short_cheetah() if env_id == "cheetah" else env_id
    agent = _sb3_agent(algo, env_id, tmp_path / f"{algo}.zip")
    out = tmp_path / "o"
    # (no --saliency: nothing here reads it; Box saliency is checked in test_dm_control.py)
    args = ["render", str(agent), "--env", env_id, "--episodes", "20", "--heatmap", "--videos", "first:1",
            "--out", str(out), "--no-progress"]
    if "Cheetah" in env_id:
        args += ["--objects", "body:torso"]
    assert main(args) == 0
    summary = _check_box_run(out, 3 if "Hopper" in env_id else 6, 125 if "Hopper" in env_id else 20)
    # an agent trained for seconds keeps its initial std (log std 0): as wide as the bounds, said so
    assert "gaussian_uniform" in {f["id"] for f in summary["diagnostics"]}


@needs_mujoco
def test_cleanrl_ppo_continuous_state_dict_on_hopper(tmp_path):
    from rlviz.cli import main

    torch.manual_seed(0)
    obs_dim, act_dim = 11, 3
    agent = nn.Module()  # ppo_continuous_action.py's Agent, as its state_dict names it
    agent.critic = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    agent.actor_mean = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                                     nn.Linear(64, act_dim))
    agent.actor_logstd = nn.Parameter(torch.full((1, act_dim), -1.0))
    path = tmp_path / "ppo_continuous_action.cleanrl_model"
    torch.save(agent.state_dict(), path)
    out = tmp_path / "o"
    assert main(["render", str(path), "--env", "Hopper-v5", "--episodes", "20", "--heatmap", "--videos", "first:1",
                 "--out", str(out), "--no-progress"]) == 0  # (no --saliency: nothing here reads it)
    summary = _check_box_run(out, act_dim, 125)
    # std e^-1 against Hopper's [-1, 1]: spread 0.184, under the uniform threshold, far above collapse
    assert not {f["id"] for f in summary["diagnostics"]} & {"gaussian_uniform", "gaussian_collapsed"}


# -- MiniGrid partial views -------------------------------------------------------------------------------------
class OneCell(nn.Module):
    """MiniGrid's [7, 7, 3] view image: the action is decided by one view cell's object type alone."""

    def __init__(self, vx: int, vy: int):
        super().__init__()
        self.vx, self.vy = vx, vy

    def forward(self, x):
        s = x[:, self.vx, self.vy, 0].float()
        return torch.stack([s, -s, 0 * s], 1), 0 * s


@pytest.mark.parametrize("agent_dir", [0, 1, 2, 3])
def test_view_saliency_on_one_cell_projects_onto_the_matching_grid_cell(agent_dir):
    pytest.importorskip("minigrid")
    from minigrid.core.world_object import Ball
    from minigrid.wrappers import ImgObsWrapper

    from rlviz import attribute
    from rlviz.explain.partial_view import view_cell_saliency, view_cell_to_grid, view_to_grid

    env = ImgObsWrapper(make_env("MiniGrid-Empty-16x16-v0", render_mode=None))
    env.reset(seed=0)
    u = env.unwrapped
    u.agent_pos, u.agent_dir = np.array((8, 8)), agent_dir
    vx, vy = 2, 3  # a cell ahead and to the left of the agent (at view cell (3, 6))
    x, y = view_cell_to_grid(vx, vy, u.agent_pos, agent_dir)
    assert u.get_view_coords(x, y) == (vx, vy)  # MiniGrid's own world -> view mapping, inverted
    u.grid.set(x, y, Ball("blue"))
    obs = u.gen_obs()["image"]
    assert obs[vx, vy, 0] == 6  # the ball (OBJECT_TO_IDX["ball"]) is where the view cell says
    policy = TorchPolicy(OneCell(vx, vy), num_actions=3, device="cpu")
    sal = attribute(policy, obs[None].astype(np.float32), method="gradient")
    view = view_cell_saliency(np.asarray(sal)[0])
    assert view[vx, vy] / view.sum() >= 0.9
    grid = view_to_grid(view, u.agent_pos, agent_dir, (u.width, u.height))
    assert np.unravel_index(grid.argmax(), grid.shape) == (y, x) and grid.sum() == pytest.approx(view.sum())


@needs_mujoco
@pytest.mark.parametrize("env_id, joints", [("Hopper-v5", 3), ("Walker2d-v5", 6), ("HalfCheetah-v5", 6)])
def test_mujoco_feature_names_follow_the_observation_layout(env_id, joints):
    from rlviz.draw.panels_features import feature_names

    env = make_env(env_id, render_mode=None)
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(env.action_space.sample())
    names = feature_names(env_id, len(obs))
    qpos, qvel = env.unwrapped.data.qpos, env.unwrapped.data.qvel
    assert names[0] == "torso z" and obs[0] == pytest.approx(qpos[1])
    assert names[1] == "torso angle" and obs[1] == pytest.approx(qpos[2])
    assert names[2 + joints] == "torso vel x" and obs[2 + joints] == pytest.approx(qvel[0])
    assert names[-1].endswith("ang.vel") and obs[-1] == pytest.approx(np.clip(qvel[-1], -10, 10))
