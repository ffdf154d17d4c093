"""CleanRL's JAX scripts' files (flax msgpack) load with no JAX and give flax's numbers.

The fixtures (tests/fixtures/cleanrl_jax/, made by scripts/make_cleanrl_jax_fixtures.py from a CleanRL checkout
in a venv with jax 0.4.30 / flax 0.8.5) are the files the eight scripts saved, each in its run folder
``{env_id}__{exp_name}__{seed}__{time}`` beside ``<exp>.npz``: the observations and flax's outputs on them. The
Atari files are stored gzipped and compacted (see the script); they are unpacked into ``tmp_path`` as
``<exp>.cleanrl_model``. This suite runs with no jax installed. ``RLVIZ_CLEANRL_JAX_FIXTURES=DIR`` runs it on
another folder the script wrote (``--full``: the Atari files exactly as saved, ~4-7 MB each).
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlviz.cli import main
from rlviz.errors import CheckpointError, EnvError
from rlviz.explain.saliency import attribute
from rlviz.sources.checkpoint import load_agent
from rlviz.sources.files import detect_format

# another folder the script wrote (e.g. with --full: the Atari files as the scripts saved them, uncompacted)
FIXTURES = Path(os.environ.get("RLVIZ_CLEANRL_JAX_FIXTURES") or Path(__file__).resolve().parent / "fixtures"
                / "cleanrl_jax")
SCRIPTS = ["dqn_jax", "dqn_atari_jax", "c51_jax", "c51_atari_jax", "td3_continuous_action_jax",
           "ddpg_continuous_action_jax", "ppo_atari_envpool_xla_jax_scan", "qdagger_dqn_atari_jax_impalacnn"]


def fixture(exp: str, dest: Path) -> tuple[Path, dict]:
    """(the script's file unpacked under ``dest`` in its run folder, the flax references)."""
    (folder,) = FIXTURES.glob(f"*__{exp}__*")
    refs = dict(np.load(folder / f"{exp}.npz"))
    run = dest / folder.name
    run.mkdir(parents=True)
    packed = folder / f"{exp}.cleanrl_model.gz"
    if packed.exists():
        (run / f"{exp}.cleanrl_model").write_bytes(gzip.decompress(packed.read_bytes()))
    else:
        shutil.copy(folder / f"{exp}.cleanrl_model", run)
    return run / f"{exp}.cleanrl_model", refs


def close(ours: np.ndarray, flax: np.ndarray, rtol: float = 1e-5, scale: float | None = None) -> None:
    """Equal within float32 precision of the outputs' magnitude (``scale``: of the terms they sum, where larger)."""
    flax = np.asarray(flax, np.float64)
    scale = float(np.abs(flax).max()) if scale is None else scale
    np.testing.assert_allclose(ours, flax, rtol=rtol, atol=rtol * scale + 1e-12)


def greedy_agrees(q: np.ndarray, ref_q: np.ndarray, ref_action: np.ndarray) -> None:
    """Our argmax is flax's wherever flax's top two Q-values are apart by more than float32 noise."""
    top2 = np.sort(ref_q, axis=-1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-4 * float(np.abs(ref_q).max())
    assert clear.sum() >= len(clear) // 2
    np.testing.assert_array_equal(q.argmax(-1)[clear], ref_action[clear])


@pytest.mark.parametrize("exp", SCRIPTS)
def test_outputs_equal_flax(tmp_path, exp):
    path, refs = fixture(exp, tmp_path)
    assert detect_format(path.read_bytes()) == "flax-msgpack"
    agent = load_agent(path)
    assert agent.metadata["cleanrl_script"] == f"{exp}.py"
    obs = refs["obs"].astype(np.float32)
    out = agent.policy.evaluate(obs)
    if exp.startswith(("td3", "ddpg")):
        assert out.std is None  # a deterministic actor
        close(out.mean, refs["action"])
        close(out.value, refs["q"])
    elif exp.startswith("ppo"):
        close(out.logits, refs["logits"])
        close(out.value, refs["value"])
    else:  # C51's Q sums p_i z_i: float32 precision is that of the atoms' magnitude
        close(out.logits, refs["q"], scale=float(np.abs(refs["atoms"]).max()) if "atoms" in refs else None)
        greedy_agrees(out.logits, refs["q"], refs["action"])
    if exp.startswith("c51"):
        module = agent.policy.module
        with torch.no_grad():
            pmfs = module.pmfs(torch.as_tensor(obs)).numpy()
        close(pmfs, refs["pmfs"])
        close(module.atoms.numpy(), refs["atoms"])
        q = out.quantiles  # [B, K, A]: quantiles of each action's distribution, atoms in rising order
        assert q is not None and q.shape[0] == len(obs) and q.shape[2] == refs["q"].shape[1]
        assert np.isin(q, refs["atoms"].astype(np.float32)).all() and (np.diff(q, axis=1) >= 0).all()
    if obs.ndim == 4:  # gradient saliency through the rebuilt network, as for any torch agent
        maps = attribute(agent.policy, obs, "gradient")
        assert maps.shape == (len(obs), 84, 84) and np.isfinite(maps).all() and (maps.reshape(len(obs), -1).max(1) > 0).all()


def test_atari_networks_read_frames_as_flax_does(tmp_path):
    """The NHWC flatten matters: the same weights with the first Dense's rows not permuted give other Q-values."""
    from rlviz.sources.cleanrl.jax_nets import flatten_rows_nhwc

    path, refs = fixture("dqn_atari_jax", tmp_path)
    agent = load_agent(path)
    fc = agent.policy.module.torso.fc
    with torch.no_grad():
        fc.weight.copy_(torch.as_tensor(flatten_rows_nhwc(fc.weight.numpy().T, 64, 7, 7).T.copy()))
    wrong = agent.policy.evaluate(refs["obs"].astype(np.float32)).logits
    assert np.abs(wrong - refs["q"]).max() > 1e-3 * np.abs(refs["q"]).max()


def test_no_jax_is_imported(tmp_path):
    """With (planted) jax and flax packages importable, loading every fixture imports neither."""
    fake = tmp_path / "site"
    for name in ("jax", "flax", "msgpack", "envpool"):
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text(
            f"open({str(tmp_path / ('imported-' + name))!r}, 'w').close()\nraise ImportError('planted')\n")
    paths = [str(fixture(exp, tmp_path / "runs")[0]) for exp in SCRIPTS]
    code = ("import sys, json\nfrom rlviz.sources.checkpoint import load_agent\n"
            f"for p in json.loads({json.dumps(json.dumps(paths))}):\n    load_agent(p)\n"
            "print('loaded', sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'flax', 'msgpack')))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "loaded []" in run.stdout
    assert not list(tmp_path.glob("imported-*"))


def test_unknown_flax_tree_names_the_scripts_and_what_it_held(tmp_path):
    from rlviz.sources.cleanrl.jax_files import SCRIPTS as SUPPORTED

    path, _ = fixture("dqn_jax", tmp_path)
    data = path.read_bytes().replace(b"Dense_2", b"Dense_9")  # same length: a tree no script writes
    bad = tmp_path / "other.cleanrl_model"
    bad.write_bytes(data)
    with pytest.raises(CheckpointError) as info:
        load_agent(bad)
    msg = str(info.value)
    assert "\n" not in msg and str(bad) in msg and all(s in msg for s in SUPPORTED)
    assert "Dense_9" in msg and "float32[84, 2]" in msg


def test_env_from_args_folder_or_flag(tmp_path):
    """c51/PPO carry env_id in their args; dqn/td3/ddpg only in the run folder's name; --env overrides both."""
    path, _ = fixture("c51_jax", tmp_path)
    moved = tmp_path / "elsewhere.cleanrl_model"
    shutil.copy(path, moved)
    assert load_agent(moved).recipe.env_id == "CartPole-v1"  # from the args inside
    path, _ = fixture("td3_continuous_action_jax", tmp_path)
    assert load_agent(path).recipe.env_id == "Pendulum-v1"  # from runs/Pendulum-v1__td3..__1__<t>/
    path, _ = fixture("dqn_atari_jax", tmp_path)
    moved = tmp_path / "dqn_atari_jax.cleanrl_model"
    shutil.copy(path, moved)
    with pytest.raises(Exception, match="--env"):
        load_agent(moved)  # 4 frames and 4 actions name no env
    agent = load_agent(moved, env="ALE/Breakout-v5")
    assert agent.recipe.env_id == "ALE/Breakout-v5" and agent.recipe.wrappers[1].name == "cleanrl_life_reset"
    with pytest.raises(EnvError, match="4 actions.*6"):
        load_agent(moved, env="ALE/Pong-v5")
    path, _ = fixture("ppo_atari_envpool_xla_jax_scan", tmp_path)
    agent = load_agent(path)
    assert agent.recipe.env_id == "ALE/Breakout-v5" and agent.recipe.wrappers[0].name == "envpool_atari"
    assert agent.recipe.env_kwargs["repeat_action_probability"] == 0.0


# Breakout episodes are long and each takes many batched forwards: 3 of them (in 3 envs at once) check what 20 did
ATARI_EPISODES = 3
VECTOR = {"dqn_jax", "c51_jax", "td3_continuous_action_jax", "ddpg_continuous_action_jax"}


def _render(path, out: Path, saliency: bool = True, episodes: int = 20) -> dict:
    flags = ["--saliency", "gradient"] if saliency else []
    assert main(["render", str(path), "--episodes", str(episodes), "--heatmap", "--videos", "first:1", *flags,
                 "--out", str(out), "--no-progress"]) == 0
    assert len(list(csv.DictReader((out / "episodes.csv").open()))) == episodes
    (video,) = (out / "videos").glob("*.mp4")
    data = np.load(video.with_suffix(".npz"))
    assert len(data["actions"]) > 0
    return json.loads((out / "summary.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("exp", SCRIPTS)
def test_render_with_no_other_flag(tmp_path, exp, capsys):
    """The issue's command for each fixture, with --saliency gradient and no other flag. Vector observations
    (CartPole, Pendulum) get one saliency number per observation feature, saved in the .npz as [T+1, D]."""
    path, _ = fixture(exp, tmp_path / "runs")
    episodes = 20 if exp in VECTOR else ATARI_EPISODES
    summary = _render(path, tmp_path / "out", episodes=episodes)
    (video,) = (tmp_path / "out" / "videos").glob("*.mp4")
    data = np.load(video.with_suffix(".npz"))
    if exp in VECTOR:
        d = 4 if "CartPole" in summary["env_id"] else 3
        assert data["saliency"].shape == (len(data["actions"]) + 1, d)
        assert data["saliency"].dtype == np.float32
        assert 0.0 <= data["saliency"].min() and data["saliency"].max() <= 1.0 and data["saliency"].max() > 0.5
    else:
        assert "saliency" not in data.files  # image maps are drawn, not saved (as in 0.3.0)
    assert summary["episodes"] == episodes
    assert summary["env_id"] == {"dqn_jax": "CartPole-v1", "c51_jax": "CartPole-v1",
                                 "ppo_atari_envpool_xla_jax_scan": "ALE/Breakout-v5"}.get(
        exp, "Pendulum-v1" if exp in VECTOR else "BreakoutNoFrameskip-v4")


def _hub_repo(tmp_path, monkeypatch) -> tuple[str, dict, Path]:
    """hf://cleanrl/<env>-<exp>-seed1 in an offline cache, as CleanRL's push_to_hub lays it out: the model, the
    training script beside it (it would leave a marker if anything ran it) and the model card."""
    from _hub import cache_repo, model_card, offline_hub

    cache = offline_hub(monkeypatch, tmp_path)
    path, refs = fixture("ppo_atari_envpool_xla_jax_scan", tmp_path / "runs")
    marker = tmp_path / "script-ran"
    repo = "cleanrl/Breakout-v5-ppo_atari_envpool_xla_jax_scan-seed1"
    cache_repo(cache, repo, {"ppo_atari_envpool_xla_jax_scan.cleanrl_model": path.read_bytes(),
                             "ppo_atari_envpool_xla_jax_scan.py": f"open({str(marker)!r}, 'w').close()\n",
                             "README.md": model_card("Breakout-v5", "cleanrl", "PPO")})
    return repo, refs, marker


def test_hub_cache_copy_loads_with_envpools_pipeline(tmp_path, monkeypatch):
    repo, refs, marker = _hub_repo(tmp_path, monkeypatch)
    agent = load_agent(f"hf://{repo}")
    assert agent.metadata["hub"]["layout"] == "cleanrl" and agent.metadata["hub"]["files"] == [
        "ppo_atari_envpool_xla_jax_scan.cleanrl_model", "README.md"]
    assert agent.recipe.env_id == "ALE/Breakout-v5" and agent.recipe.wrappers[0].name == "envpool_atari"
    out = agent.policy.evaluate(refs["obs"].astype(np.float32))
    close(out.logits, refs["logits"])
    close(out.value, refs["value"])
    assert not marker.exists()


@pytest.mark.slow
def test_render_from_a_hub_cache(tmp_path, monkeypatch):
    """The issue's whole command on the Hub copy (an Atari agent: saliency applies)."""
    repo, _, marker = _hub_repo(tmp_path, monkeypatch)
    summary = _render(f"hf://{repo}", tmp_path / "out", episodes=ATARI_EPISODES)
    assert summary["env_id"] == "ALE/Breakout-v5"
    assert summary["hub"]["repo"] == repo and summary["hub"]["files"] == [
        "ppo_atari_envpool_xla_jax_scan.cleanrl_model", "README.md"]
    assert not marker.exists()
