"""dm_control through Shimmy (#46): an SB3 agent on ``dm_control/cheetah-run-v0``'s Dict features observations,
rendered as a user would (``--episodes 20 --num-envs 4 --heatmap --videos first:1 --saliency gradient --camera
side,back``): statistics and a Box diagnosis (no discrete-action finding, no ``never_terminates`` for a suite task
that ends by its time limit only), the failure heatmap in the torso's own x-z plane, a decoded video whose game tiles
the two cameras and whose panels name the actuators and the observation keys.

The whole file skips, saying why, where dm_control cannot build a model: dm_control 1.0.50 needs mujoco 3.x (under
mujoco 4.0: ``MjModel has no attribute 'flex_vertedge'``).
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from _envs import played_frames

from rlviz.envs.recipe import EnvRecipe, make_env
from rlviz.errors import UsageError

ENV = "dm_control/cheetah-run-v0"
#: cheetah-run with a 0.1 s time limit (10 control steps of 10 ms) in place of its 10 s: the test stays short (the
#: video's episode is rendered from two cameras at every step, and replayed by the test from both)
SHORT = {"task_kwargs": {"time_limit": 0.1}}
STEPS = 10
ACTUATORS = ["bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot"]
DISCRETE_IDS = {"policy_uniform", "policy_collapsed", "action_dominant"}


def _dm_control_missing() -> str | None:
    """Why dm_control cannot run here, or None."""
    if importlib.util.find_spec("shimmy") is None or importlib.util.find_spec("dm_control") is None:
        return "dm_control through Shimmy needs shimmy[dm-control] (rlviz[dev])"
    try:
        env = make_env(EnvRecipe(ENV, SHORT), render_mode=None)
        env.reset(seed=0)
        env.close()
    except Exception as exc:  # (mujoco 4.0: AttributeError: 'MjModel' object has no attribute 'flex_vertedge')
        return f"dm_control cannot build a model with this mujoco ({type(exc).__name__}: {exc}); it needs mujoco<4"
    return None


@pytest.fixture(scope="module")
def dm_ok():
    reason = _dm_control_missing()
    if reason:
        pytest.skip(reason)


def _recipe_file(folder: Path) -> Path:
    path = folder / "cheetah-short.json"
    path.write_text(EnvRecipe(ENV, SHORT).to_json())
    return path


@pytest.fixture(scope="module")
def cheetah_zip(dm_ok, tmp_path_factory):
    """An SB3 PPO trained for 64 steps on cheetah-run's Dict observations (position [8], velocity [9])."""
    sb3 = pytest.importorskip("stable_baselines3")
    env = make_env(EnvRecipe(ENV, SHORT), render_mode=None)
    model = sb3.PPO("MultiInputPolicy", env, seed=0, n_steps=64, batch_size=32, n_epochs=1, device="cpu")
    model.learn(64)
    path = tmp_path_factory.mktemp("dm") / "ppo_cheetah.zip"
    model.save(path)
    return path


def test_dm_control_suite_tasks_have_no_terminal_state_but_lqr():
    from rlviz.evaluate.failures.body_objects import default_body_extractor
    from rlviz.evaluate.statistics.diagnostics import has_terminal_state

    assert not has_terminal_state(ENV) and not has_terminal_state("dm_control/humanoid_CMU-run-v0")
    assert has_terminal_state("dm_control/lqr-lqr_2_1-v0")
    assert has_terminal_state("dm_control/CmuHumanoidRunWalls-v0")  # (a composer env: it can end by a fall)
    assert default_body_extractor(ENV).body == "torso" and default_body_extractor("dm_control/reacher-easy-v0") is None


def test_the_opengl_backend_is_chosen_before_shimmy_imports_mujoco():
    """rlviz imports Shimmy for a dm_control/ id it does not know; Shimmy imports dm_control and mujoco, which bind
    their OpenGL backend then: MUJOCO_GL is set first (a process that imported mujoco without it would render the
    MuJoCo envs after it through GLFW, with no display)."""
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("shimmy") is None or importlib.util.find_spec("dm_control") is None:
        pytest.skip("dm_control through Shimmy needs shimmy[dm-control] (rlviz[dev])")
    code = ("import os, sys\nfrom rlviz.envs.recipe import require_registered\nassert 'mujoco' not in sys.modules\n"
            f"require_registered({ENV!r})\nprint(os.environ.get('MUJOCO_GL'), 'mujoco' in sys.modules)")
    clean = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY",
                                                                 "WAYLAND_DISPLAY")}
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**clean, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert got.returncode == 0, got.stderr[-2000:]
    backend, imported = got.stdout.split()
    assert backend in ("egl", "osmesa") and imported == "True"


def test_body_extractor_and_actuator_names_read_dm_controls_physics(dm_ok):
    from rlviz.envs.env_facts import body_action_names
    from rlviz.evaluate.failures.body_objects import BodyExtractor

    env = make_env(EnvRecipe(ENV, SHORT), render_mode=None)
    env.reset(seed=1)
    for a in np.random.default_rng(0).uniform(-1, 1, (5, 6)):
        env.step(a)
    physics = env.unwrapped._env.physics
    ex = BodyExtractor("torso")
    ex.begin_episode(env)
    assert ex.plane == "xz"  # the cheetah runs in the x-z plane
    got = ex.capture(None, env)
    np.testing.assert_array_equal(got, physics.named.data.xpos["torso"])
    row, col = ex.pixel(got)
    assert ex.masks(got)["torso"][row, col]
    with pytest.raises(UsageError, match="no body 'tail'; its bodies: .*torso, bthigh"):
        BodyExtractor("tail").capture(None, env)
    assert list(body_action_names(env, 6)) == ACTUATORS == [physics.model.id2name(i, "actuator") for i in range(6)]


def _replayed_views(recipe: Path, seed: int, actions: np.ndarray) -> list[np.ndarray]:
    """The side and back cameras' frames of an episode replayed by hand, tiled left to right."""
    from rlviz.envs import with_cameras
    from rlviz.envs.recipe import read_recipe_file

    return played_frames(with_cameras(make_env(read_recipe_file(str(recipe))), "side,back"), actions, seed)


def test_sb3_agent_renders_statistics_body_heatmap_two_cameras_and_key_saliency(cheetah_zip, tmp_path):
    from rlviz.cli import main
    from rlviz.draw.video import video_timing
    from rlviz.evaluate.failures.body_objects import BodyExtractor
    from rlviz.jobs.videos import MIN_VIDEO_SECONDS
    from rlviz.media import probe_video, read_video

    recipe, out = _recipe_file(tmp_path), tmp_path / "o"
    assert main(["render", str(cheetah_zip), "--env", str(recipe), "--episodes", "20", "--num-envs", "4", "--heatmap",
                 "--videos", "first:1", "--saliency", "gradient", "--camera", "side,back", "--out", str(out),
                 "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    ids = {f["id"] for f in summary["diagnostics"]}
    assert summary["episodes"] == 20 and not ids & DISCRETE_IDS and "never_terminates" not in ids
    assert "gaussian_uniform" in ids  # trained for seconds: its std is still e^0 = 1, half the [-1, 1] range
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    assert [(r["length"], r["terminated"], r["truncated"]) for r in rows] == [(str(STEPS), "False", "True")] * 20
    # the heatmap is the torso's x-z plane; cheetah-run ends by its time limit only, so no failure is counted
    with np.load(out / "heatmap.npz") as hm:
        assert list(hm["object_names"]) == ["torso"] and int(hm["failures"]) == 0
        assert hm["counts"].shape == (1, *BodyExtractor("torso", "xz").shape()) and hm["counts"].sum() == 0
    (video,) = (out / "videos").glob("*.mp4")
    data = np.load(video.with_suffix(".npz"))
    n = STEPS + 1
    assert list(data["action_names"]) == ACTUATORS and data["mean"].shape == (n, 6)
    # Dict saliency key by key, named by dm_control's observation keys (the space's order: sorted)
    sal, pos, vel = data["saliency"], data["saliency_key_position"], data["saliency_key_velocity"]
    assert sal.shape == (n, 17) and pos.shape == (n, 8) and vel.shape == (n, 9)
    np.testing.assert_allclose(pos, sal[:, :8] / sal[:, :8].max(), rtol=1e-6)
    np.testing.assert_allclose(vel, sal[:, 8:] / sal[:, 8:].max(), rtol=1e-6)
    # the video: 100 frames a second (one per 10 ms control step), held to MIN_VIDEO_SECONDS
    info = probe_video(video)
    rate, held = video_timing(n, 100.0, MIN_VIDEO_SECONDS)
    assert info.num_frames == n + held and info.fps == pytest.approx(rate, rel=1e-3)
    # its game: the side and back cameras (320x240 each) tiled, upscaled x2, beside the 400-pixel panel
    assert info.width == 2 * 640 + 400 and info.height >= 480
    want = _replayed_views(recipe, int(rows[0]["seed"]), data["actions"])
    top = (info.height - 480) // 2
    for t, got in enumerate(read_video(video)):
        if t >= n:
            break
        game = got[top : top + 480 : 2, 0:1280:2].astype(int)
        assert np.abs(game - want[t]).mean() < 4.0  # H.264, not bit-exact
        assert np.abs(game[:, :320] - want[t][:, 320:]).mean() > 4.0  # (the two cameras differ)


def test_an_unknown_dm_control_camera_is_refused_before_the_rollout(cheetah_zip, tmp_path, capsys, monkeypatch):
    render_job = importlib.import_module("rlviz.jobs.render")  # (rlviz.jobs.render is also the function's name)
    from rlviz.cli import main

    def no_rollout(*args, **kwargs):
        raise AssertionError("the rollout ran before the camera was checked")

    monkeypatch.setattr(render_job, "run_rollouts", no_rollout)
    code = main(["render", str(cheetah_zip), "--env", str(_recipe_file(tmp_path)), "--episodes", "2", "--camera",
                 "top", "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].endswith(f"--camera 'top': {ENV} has no such camera; its cameras: default (the env's own view), "
                            "free (-1), 0 (side), 1 (back).")


PIXELS = {**SHORT, "render_kwargs": {"width": 64, "height": 64}}
FRAMES = "gymnasium.wrappers:AddRenderObservation"
# each episode renders every step's frame for the agent: 4 episodes (all time-limited: never_terminates would fire
# for an env that can end) check what 20 did, played one after another in one env (--num-envs 1: each env renders
# from its own OpenGL context, slow to make on a software OpenGL)
PIXEL_EPISODES = 4


def test_a_pixels_agent_renders_its_saliency_on_the_frames_it_saw(dm_ok, tmp_path):
    """dm_control on pixels: gymnasium's AddRenderObservation makes the 64x64 frame the observation (Shimmy has no
    pixels ids of its own); rlviz makes the env with frames wherever it reads its spaces, and turns the default
    attention off for a Box agent (attention explains a Discrete action's logit)."""
    sb3 = pytest.importorskip("stable_baselines3")
    from gymnasium.wrappers import AddRenderObservation

    from rlviz.cli import main
    from rlviz.draw.video import video_timing
    from rlviz.jobs.videos import MIN_VIDEO_SECONDS
    from rlviz.media import probe_video

    env = AddRenderObservation(make_env(EnvRecipe(ENV, PIXELS)))
    assert env.observation_space.shape == (64, 64, 3)
    # saved untrained: nothing below depends on its weights, and learning would render 65 more frames (~0.2 s each
    # on a software OpenGL)
    model = sb3.PPO("CnnPolicy", env, seed=0, n_steps=64, batch_size=32, n_epochs=1, device="cpu")
    model.save(tmp_path / "ppo_pixels.zip")
    recipe, out = tmp_path / "pixels.json", tmp_path / "o"
    recipe.write_text(EnvRecipe(ENV, PIXELS).to_json())
    assert main(["render", str(tmp_path / "ppo_pixels.zip"), "--env", str(recipe), "--wrapper", FRAMES, "--episodes",
                 str(PIXEL_EPISODES), "--num-envs", "1", "--heatmap", "--videos", "first:1", "--saliency", "gradient",
                 "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    ids = {f["id"] for f in summary["diagnostics"]}
    assert summary["episodes"] == PIXEL_EPISODES and not ids & DISCRETE_IDS and "never_terminates" not in ids
    assert not summary.get("attention")  # (off by default for a Box agent)
    with np.load(out / "heatmap.npz") as hm:
        assert list(hm["object_names"]) == ["torso"] and int(hm["failures"]) == 0
    (video,) = (out / "videos").glob("*.mp4")
    data = np.load(video.with_suffix(".npz"))
    n = STEPS + 1
    assert list(data["action_names"]) == ACTUATORS and data["mean"].shape == (n, 6)
    info = probe_video(video)
    rate, held = video_timing(n, 100.0, MIN_VIDEO_SECONDS)
    # the 64x64 frame the agent saw, upscaled x7 (448 pixels), its saliency tinted on it, beside the panel
    assert info.num_frames == n + held and info.width == 448 + 400

