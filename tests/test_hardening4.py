"""0.5.0's hardening (issue 55): a recorder whose constructor raises leaves nothing registered at exit;
a VecNormalize put around VecRecordEpisode after it was made is the one the panels use; the smaller items of 0.5's
notes (the entropy's label, SB3 Dict spaces, AddRenderObservation known, Shimmy's banner silenced, what a render
imports)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rlviz.record import RecordOptions

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter, this checkout first on the path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


# -- 1. a half-made recorder leaves nothing registered -------------------------------------------------------------
_HALF_MADE = """
    import gc, sys
    import gymnasium as gym
    import numpy as np
    import torch
    from rlviz.errors import UsageError
    from rlviz import RecordOptions, RecordEpisode, RecordVectorEpisode
    from rlviz.record import base

    sys.path.insert(0, {tests!r})
    from _marl_envs import Tag

    bad = torch.nn.Linear(6, 2)  # made for a 6-number observation, not CartPole's 4 (nor Tag's images)
    kept = []  # the errors are kept (as a notebook keeps the last one): their frames hold the half-made recorders

    def attempt(name, make, *env):
        try:
            make()
        except UsageError as exc:
            kept.append(exc)
            gc.collect()
            print(name, "UsageError", len(base._LIVE), str(exc).splitlines()[0][:60], flush=True)
        else:
            print(name, "made", flush=True)

    cart = lambda: gym.make("CartPole-v1", render_mode="rgb_array")
    attempt("RecordEpisode-policy", lambda: RecordEpisode(cart(), "v1", policy=bad))
    attempt("RecordEpisode-names", lambda: RecordEpisode(cart(), "v1", options=RecordOptions(action_names=("a",))))
    attempt("RecordVectorEpisode", lambda: RecordVectorEpisode(
        gym.vector.SyncVectorEnv([cart, cart]), "v2", policy=bad))

    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from rlviz.integrations.sb3 import VecRecordEpisode

    acrobot = PPO("MlpPolicy", make_vec_env("Acrobot-v1", n_envs=1, seed=0), n_steps=64, device="cpu")
    venv = make_vec_env("CartPole-v1", n_envs=1, seed=0, env_kwargs={{"render_mode": "rgb_array"}})
    attempt("VecRecordEpisode", lambda: VecRecordEpisode(venv, "v3", lambda s: s == 0, model=acrobot))

    from rlviz.record.agents.pettingzoo import RecordAECEpisode, RecordParallelEpisode
    from pettingzoo.utils.conversions import parallel_to_aec

    attempt("RecordParallelEpisode", lambda: RecordParallelEpisode(Tag(), "v4", policies=bad))
    attempt("RecordAECEpisode", lambda: RecordAECEpisode(parallel_to_aec(Tag()), "v5", policies=bad))

    import supersuit as ss
    from rlviz.record.agents.supersuit import RecordSuperSuitGame

    envs = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(Tag(leave=None)), 1, num_cpus=0,
                                 base_class="gymnasium")
    game = envs.vec_envs[0].par_env
    attempt("RecordSuperSuitGame-policy", lambda: RecordSuperSuitGame(envs, "v6", policies=bad))
    attempt("RecordSuperSuitGame-sinks", lambda: RecordSuperSuitGame(
        envs, "v6", options=RecordOptions(sinks="nowhere")))
    print("untouched", envs.vec_envs[0].par_env is game, flush=True)
"""


def test_a_recorder_whose_constructor_raises_leaves_nothing_registered_at_exit(tmp_path):
    """Every recorder (single, vector, SB3, PettingZoo parallel and AEC, SuperSuit), made with a policy for another
    env (or another late-checked argument), raises its one-line UsageError; none is left among the recorders
    finished at exit, and the interpreter exits without 'Exception ignored in atexit'."""
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("supersuit")
    done = _python(_HALF_MADE.format(tests=str(ROOT / "tests")), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line)
    names = ["RecordEpisode-policy", "RecordEpisode-names", "RecordVectorEpisode", "VecRecordEpisode",
             "RecordParallelEpisode", "RecordAECEpisode", "RecordSuperSuitGame-policy", "RecordSuperSuitGame-sinks"]
    for name in names:
        assert lines.get(name, "").startswith("UsageError 0 "), (name, lines.get(name), done.stderr[-2000:])
    assert lines["untouched"] == "True"  # SuperSuit's game still steps its own env
    assert "Exception ignored" not in done.stderr and "AttributeError" not in done.stderr, done.stderr[-3000:]
    assert not list(tmp_path.rglob("*.mp4"))


# -- 2. a VecNormalize set after the recorder ----------------------------------------------------------------------
def test_vec_normalize_loaded_after_the_recorder_is_the_one_the_panels_use(tmp_path, zoo_run):
    """SB3's way to evaluate a saved agent: ``PPO.load``, ``VecRecordEpisode(venv, model=model)``,
    ``VecNormalize.load(stats, rec)``, ``model.set_env(env)``: P(action) in the ``.npz`` is what the model acted on
    (the normalised observations), not what raw observations would give."""
    sb3 = pytest.importorskip("stable_baselines3")
    torch = pytest.importorskip("torch")
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from rlviz.integrations.sb3 import VecRecordEpisode

    _, run = zoo_run  # a PPO trained 512 steps on CartPole under VecNormalize, its statistics saved
    model = sb3.PPO.load(run / "CartPole-v1.zip", device="cpu")
    venv = make_vec_env("CartPole-v1", n_envs=1, seed=5, env_kwargs={"render_mode": "rgb_array"})
    rec = VecRecordEpisode(venv, str(tmp_path), lambda s: s == 0, video_length=20, model=model,
                           options=RecordOptions(sinks=None))
    env = VecNormalize.load(str(run / "CartPole-v1" / "vecnormalize.pkl"), rec)
    env.training, env.norm_reward = False, False
    model.set_env(env)
    acted = []
    obs = env.reset()
    for _ in range(21):
        acted.append(obs[0].copy())
        action, _ = model.predict(obs, deterministic=True)
        obs, *_ = env.step(action)
    env.close()
    (video,) = rec.videos
    data = np.load(video.with_suffix(".npz"))
    with torch.no_grad():
        probs = model.policy.get_distribution(torch.as_tensor(np.stack(acted))).distribution.probs.numpy()
        raw = np.stack([env.unnormalize_obs(o) for o in acted])
        raw_probs = model.policy.get_distribution(torch.as_tensor(raw, dtype=torch.float32)).distribution.probs.numpy()
    assert data["probs"].shape == probs.shape == (21, 2)
    np.testing.assert_allclose(data["probs"], probs, rtol=1e-5, atol=1e-6)
    # the statistics matter: raw observations (what 0.5 drew) give numbers 100x farther than the tolerance above
    assert np.abs(raw_probs - probs).max() > 1e-4, np.abs(raw_probs - probs).max()


# -- 7a. a Gaussian's differential entropy named for what it is ---------------------------------------------------
def test_a_box_agents_entropy_is_named_its_differential_entropy(tmp_path, capsys):
    """A Box agent's entropy is the Gaussian's differential entropy in nats (it may be negative, it is no share of
    a maximum): the terminal table, the report and summary.json say so; a Discrete agent's stays relative."""
    import json

    from test_continuous import PendulumActorCritic

    from rlviz import save_checkpoint
    from rlviz.cli import main

    ckpt = save_checkpoint(tmp_path / "pendulum.pt2", PendulumActorCritic(), env="Pendulum-v1")
    out = tmp_path / "out"
    assert main(["render", str(ckpt), "--episodes", "2", "--videos", "none", "--out", str(out), "--no-progress"]) == 0
    table = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["entropy_measure"] == "differential_nats"
    assert "mean differential entropy (nats)" in table and "relative entropy" not in table
    page = (out / "report.html").read_text()
    assert "mean differential entropy (nats)" in page and "mean relative entropy" not in page
    from rlviz.evaluate.statistics.stats import entropy_label

    assert entropy_label({"mean_relative_entropy": 0.5}) == "mean relative entropy"  # Discrete: as before


# -- 7b. the SB3 callback takes a Dict env's channels-last images as the env gives them ----------------------------
def _dict_image_env():
    """A Dict env: a channels-last uint8 image (SB3 trains it transposed, through VecTransposeImage) and a vector;
    12 steps; the image's lit row, column and channels move with the step."""
    import gymnasium as gym
    from gymnasium import spaces

    class _DictImage(gym.Env):
        metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

        def __init__(self, render_mode="rgb_array"):
            self.render_mode = render_mode
            self.observation_space = spaces.Dict({"image": spaces.Box(0, 255, (36, 36, 3), np.uint8),
                                                  "vec": spaces.Box(-1, 1, (2,), np.float32)})
            self.action_space = spaces.Discrete(3)
            self.t = 0

        def _obs(self):
            img = np.zeros((36, 36, 3), np.uint8)
            img[(3 * self.t) % 36, :, self.t % 3] = 255
            img[:, (5 * self.t) % 36, (self.t + 1) % 3] = 128
            return {"image": img, "vec": np.array([self.t / 12, -0.5], np.float32)}

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return self._obs(), {}

        def step(self, action):
            self.t += 1
            return self._obs(), float(action == 1), self.t >= 12, False, {}

        def render(self):
            frame = np.zeros((48, 48, 3), np.uint8)
            frame[:, : 4 * self.t] = 200
            return frame

    return _DictImage()


def test_the_sb3_callback_reads_a_dict_envs_channels_last_image_as_the_env_gives_it(tmp_path):
    """RlvizCallback on a MultiInputPolicy whose image key the env gives channels last (SB3 trained it transposed):
    the logged episode's probabilities are the model's on the env's observations (it built the policy on the
    model's own channels-first space before, and drew other numbers than the model's)."""
    sb3 = pytest.importorskip("stable_baselines3")
    torch = pytest.importorskip("torch")
    from stable_baselines3.common.vec_env import DummyVecEnv

    from rlviz.integrations.sb3 import RlvizCallback

    model = sb3.PPO("MultiInputPolicy", DummyVecEnv([_dict_image_env]), n_steps=16, batch_size=16, n_epochs=1,
                    seed=0, device="cpu")
    assert model.policy.observation_space["image"].shape == (3, 36, 36)  # SB3 transposed it for its CNN
    callback = RlvizCallback(_dict_image_env(), every_steps=16, video_folder=tmp_path, seed=0)
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}  # the episode is logged before the update
    model.learn(16, callback=callback)
    model.policy.load_state_dict(before)
    assert len(callback.results) == 1
    (npz,) = tmp_path.glob("*.npz")
    data = np.load(npz)
    env = _dict_image_env()
    obs, _ = env.reset(seed=0)
    seen = [obs]
    for a in data["actions"]:
        obs, *_ = env.step(int(a))
        seen.append(obs)
    batch = {"image": torch.as_tensor(np.stack([o["image"] for o in seen]).transpose(0, 3, 1, 2)),
             "vec": torch.as_tensor(np.stack([o["vec"] for o in seen]))}
    with torch.no_grad():
        probs = model.policy.get_distribution(batch).distribution.probs.numpy()
    assert data["probs"].shape == probs.shape == (13, 3)
    np.testing.assert_allclose(data["probs"], probs, rtol=1e-5, atol=1e-6)


# -- 7d. Shimmy imported through rlviz prints nothing ----------------------------------------------------------------
_GYM_BANNER = "Gym has been unmaintained since 2022 and does not support NumPy 2.0 amongst other critical functionality."


def test_shimmy_imported_through_rlviz_prints_nothing(tmp_path):
    """Shimmy imports the old ``gym`` when it is installed, and gym 0.26.2 prints its end-of-life notice on stderr at
    import (``print(notices.notices[__version__], file=sys.stderr)``). A stand-in ``gym`` that prints it so is put
    first on the path; making a dm_control env through rlviz (which imports Shimmy for it) prints nothing but
    rlviz's own line saying it imported Shimmy."""
    pytest.importorskip("shimmy")
    pytest.importorskip("dm_control")
    fake = tmp_path / "site" / "gym"
    (fake / "wrappers").mkdir(parents=True)
    (fake / "__init__.py").write_text(f"import sys\n__version__ = '0.26.2'\nprint({_GYM_BANNER!r}, file=sys.stderr)\n"
                                      f"print({_GYM_BANNER!r})\n")
    (fake / "wrappers" / "__init__.py").write_text("")
    code = f"""
        import sys
        sys.path.insert(0, {str(tmp_path / "site")!r})
        from rlviz.envs.recipe import make_env
        env = make_env("dm_control/cartpole-balance-v0", render_mode=None)
        assert "shimmy" in sys.modules and "gym" in sys.modules  # (the stand-in was imported, by Shimmy)
        env.close()
    """
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    others = [line for line in done.stderr.splitlines() if line and not line.startswith("rlviz: ")]
    assert not others, done.stderr[-3000:]


# -- 7f. a render loads no compare or disagreement machinery ----------------------------------------------------------
_COUNT_MODULES = """
    import json, sys, torch
    from rlviz import save_checkpoint
    from rlviz.cli import main

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ckpt = save_checkpoint("agent.pt2", net, env="CartPole-v1", kind="logits")
    assert main(["render", str(ckpt), "--episodes", "2", "--videos", "first:1", "--out", "out", "--no-progress"]) == 0
    print(json.dumps(sorted(m for m in sys.modules if m == "rlviz" or m.startswith("rlviz."))))
"""


def test_a_render_loads_no_compare_or_disagreement_machinery(tmp_path):
    """A small render (CartPole, 2 episodes, one video) in a fresh interpreter: the compare job, its multi-agent part,
    the disagreement search and its report section, the side-by-side drawing are not imported (0.5.0: 183 rlviz
    modules, with them; 169 without)."""
    done = _python(_COUNT_MODULES, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    mods = set(__import__("json").loads(done.stdout.strip().splitlines()[-1]))
    assert "rlviz.jobs.render" in mods and "rlviz.report.page" in mods  # (it did render, and wrote its report)
    loaded = sorted(m for m in mods if m.startswith(("rlviz.jobs.compare", "rlviz.disagree", "rlviz.draw.side_by_side",
                                                     "rlviz.report.disagreements", "rlviz.report.agents_page")))
    assert loaded == [], loaded
    print(f"a render imports {len(mods)} rlviz modules")


def test_the_jobs_names_are_the_functions_whatever_was_imported_first():
    """``rlviz.jobs`` loads its modules when used; its names stay the functions even after the submodules of the same
    names were imported (the import system binds a submodule onto its package)."""
    code = """
        import rlviz.jobs.compare, rlviz.jobs.render
        import rlviz
        from rlviz.jobs import compare, render, CompareOutputs, RenderOutputs
        assert callable(compare) and compare.__name__ == "compare" and render.__name__ == "render", (compare, render)
        assert rlviz.compare is compare and rlviz.render is render and rlviz.jobs.compare is compare
        assert CompareOutputs.__name__ == "CompareOutputs" and RenderOutputs.__name__ == "RenderOutputs"
        print("ok")
    """
    done = _python(code, ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
