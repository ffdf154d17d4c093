"""Wrong shapes fail at once and silent results speak (issue 42, the parts outside the training-loop recorders):
each case as a new user meets it, each failing on release 0.4.0.

A network that cannot take the env's observations fails at load, in one line naming the file and both shapes, for
every source; ``compare --disagreements`` between deterministic actors measures their action gap; a run that finds
fewer states than asked says so; a C51 file with ``v_min >= v_max`` is refused; ``render <folder>`` says what the
folder holds before anything about ``--out``, and points a folder of checkpoints at ``rlviz timeline``; a heatmap
that falls back to moving pixels says so.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from rlviz.cli import main
from rlviz.errors import CheckpointError, EnvError
from rlviz.sources.checkpoint import load_agent

ROOT = Path(__file__).resolve().parents[1]
JAX = ROOT / "tests" / "fixtures" / "cleanrl_jax"
SAMPLE = ROOT / "samples" / "minatar_breakout_ppo.pt2"


def _jax(exp: str, dest: Path) -> Path:
    (folder,) = JAX.glob(f"*__{exp}__*")
    run = dest / folder.name
    run.mkdir(parents=True)
    return Path(shutil.copy(folder / f"{exp}.cleanrl_model", run))


def _cli_error(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("rlviz: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return code, lines[0]


# -- part 2: wrong observation shapes, at load, one line naming the file and both shapes ----------------------------
class QNetwork(nn.Module):  # CleanRL's dqn.py network (its state_dict is recognised with no --model)
    def __init__(self, obs_dim: int, n: int):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(obs_dim, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                                     nn.Linear(84, n))


def _torch_dqn(dest: Path) -> Path:
    torch.manual_seed(0)
    path = dest / "CartPole-v1__dqn__1__1.cleanrl_model"
    torch.save(QNetwork(4, 2).state_dict(), path)
    return path


def _bare_program(dest: Path) -> Path:
    torch.manual_seed(0)
    path = dest / "bare.pt2"
    torch.export.save(torch.export.export(nn.Linear(4, 2).eval(), (torch.zeros(2, 4),),
                                          dynamic_shapes=({0: torch.export.Dim("batch", min=1)},)), path)
    return path


@pytest.mark.parametrize("source", ["cleanrl-jax", "cleanrl-torch", "torch-export"])
def test_a_network_meets_an_observation_of_another_shape_at_load(tmp_path, capsys, source):
    """Blackjack's observations are a Tuple (flattened to 45 numbers); these CartPole networks take 4. 0.4 let the
    rollout find out: ``rlviz: error: RuntimeError: mat1 and mat2 shapes cannot be multiplied``, no file named."""
    path = {"cleanrl-jax": lambda: _jax("dqn_jax", tmp_path), "cleanrl-torch": lambda: _torch_dqn(tmp_path),
            "torch-export": lambda: _bare_program(tmp_path)}[source]()
    code, line = _cli_error(["render", str(path), "--env", "Blackjack-v1", "--episodes", "2", "--out",
                             str(tmp_path / "out"), "--no-progress"], capsys)
    assert code == 1 and line.startswith(f"rlviz: error: {path}: its network cannot take the observations of env "
                                         "'Blackjack-v1': the env gives shape (45,) (Tuple space, flattened), "), line
    takes = "shape (4,)" if source == "torch-export" else "vectors of 4 (its first layer's inputs)"
    assert f"the network takes {takes} (" in line, line
    assert "pass the env (--env)" in line and not (tmp_path / "out").exists()
    with pytest.raises(EnvError, match=r"its network cannot take .* shape \(45,\)"):  # the library: the same line
        load_agent(path, env="Blackjack-v1")


def test_a_box_of_another_size_names_both_shapes_for_a_continuous_jax_actor(tmp_path):
    path = _jax("td3_continuous_action_jax", tmp_path)
    with pytest.raises(EnvError) as err:
        load_agent(path, env="MountainCarContinuous-v0")
    msg = str(err.value)
    assert msg.startswith(f"{path}: its network cannot take the observations of the env: the env gives shape (2,), "
                          "the network takes vectors of 3 (its first layer's inputs) (RuntimeError: "), msg


def test_the_hub_names_the_file_too(tmp_path, monkeypatch, capsys):
    from _hub import cache_repo, model_card, offline_hub

    hub = offline_hub(monkeypatch, tmp_path)
    (folder,) = JAX.glob("*__dqn_jax__*")
    snapshot = cache_repo(hub, "cleanrl/CartPole-v1-dqn_jax-seed1", {
        "README.md": model_card("CartPole-v1", library="cleanrl", algo="DQN"),
        "dqn_jax.cleanrl_model": folder / "dqn_jax.cleanrl_model"})
    code, line = _cli_error(["render", "hf://cleanrl/CartPole-v1-dqn_jax-seed1", "--env", "Blackjack-v1",
                             "--out", str(tmp_path / "out"), "--no-progress"], capsys)
    assert code == 1 and line.startswith(f"rlviz: error: {snapshot / 'dqn_jax.cleanrl_model'}: its network cannot "
                                         "take the observations of env 'Blackjack-v1': the env gives shape (45,)"), line


def test_the_right_env_still_loads_and_acts_as_before(tmp_path):
    """The check at load changes nothing: the same numbers as the flax references."""
    path = _jax("dqn_jax", tmp_path)
    refs = dict(np.load(next(JAX.glob("*__dqn_jax__*")) / "dqn_jax.npz"))
    out = load_agent(path).policy.evaluate(refs["obs"].astype(np.float32))
    np.testing.assert_allclose(out.logits, refs["q"], rtol=1e-5, atol=1e-5 * float(np.abs(refs["q"]).max()))


# -- part 6: a C51 file whose atoms run backwards ------------------------------------------------------------------
def test_c51_with_v_min_above_v_max_is_refused_at_load(tmp_path):
    """c51_jax.py's args hold v_min=-100 (msgpack int8 d0 9c), v_max=100 (fixint 0x64): swapped, 0.4 played it
    (its Q-values negated: mean return 104.5 where the agent earns 10)."""
    path = _jax("c51_jax", tmp_path)
    data = path.read_bytes()
    given = b"\xa5v_min\xd0\x9c\xa5v_maxd"
    assert data.count(given) == 1
    path.write_bytes(data.replace(given, b"\xa5v_mind\xa5v_max\xd0\x9c"))  # the same length: v_min=100, v_max=-100
    with pytest.raises(CheckpointError) as err:
        load_agent(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: a CleanRL c51 file whose args give n_atoms=101, v_min=100, v_max=-100 ") and \
        "v_min < v_max" in msg and "\n" not in msg, msg


# -- part 6: render <folder> ------------------------------------------------------------------------------------
def test_an_empty_folder_is_reported_before_an_out_conflict(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")  # an --out rlviz would refuse
    code, line = _cli_error(["render", str(tmp_path / "empty"), "--out", str(busy)], capsys)
    assert code == 2 and line == (f"rlviz: error: {tmp_path / 'empty'} is a folder but not an rl-zoo3 run with one "
                                  "model: expected <env id>.zip or best_model.zip in it, found nothing: the folder is "
                                  "empty; pass the model file."), line
    code, line = _cli_error(["compare", str(SAMPLE), str(tmp_path / "empty"), "--out", str(busy)], capsys)
    assert code == 2 and f"{tmp_path / 'empty'} is a folder but not an rl-zoo3 run" in line, line


def test_a_folder_of_checkpoints_points_at_rlviz_timeline(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    for step in (100, 200):
        shutil.copy(SAMPLE, run / f"step_{step}.pt2")
    (run / "replay_buffer_100.pkl").write_bytes(b"x")  # not an agent
    code, line = _cli_error(["render", str(run), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and line.endswith(f"found no .zip; pass the model file (2 checkpoint file(s) here, e.g. "
                                       f"step_100.pt2: `rlviz timeline {run}` evaluates a folder of a training run's "
                                       "checkpoints)."), line


# -- part 6: a heatmap of moving pixels says so ---------------------------------------------------------------------
class _Still(nn.Module):
    """Any Atari frame stack -> logits favouring NOOP (18 actions)."""

    def forward(self, x):
        return x.flatten(1)[:, :18] * 0 + torch.arange(18, dtype=torch.float32).neg()


def test_a_heatmap_without_an_object_map_says_it_shows_moving_pixels(tmp_path):
    from dataclasses import replace

    from rlviz.envs.recipe import EnvRecipe
    from rlviz.jobs.render import render
    from rlviz.sources.pt2.saving import save_checkpoint

    recipe = EnvRecipe.for_env_id("ALE/Alien-v5")
    recipe = replace(recipe, env_kwargs={**recipe.env_kwargs, "max_episode_steps": 40})  # short episodes
    ckpt = save_checkpoint(tmp_path / "alien.pt2", _Still(), env=recipe, kind="logits")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = render(checkpoint=ckpt, episodes=1, heatmap=True, videos="none", out=tmp_path / "out", num_envs=1)
    note = json.loads(out.summary_json.read_text())["heatmap_note"]
    assert note.startswith("ALE/Alien-v5 has no object map in rlviz (no RAM map, no known state layout): its heatmap "
                           "counts 'moving' pixels"), note
    assert [str(w.message) for w in caught if str(w.message).startswith("ALE/Alien-v5 has no object map")] == [note]


def test_a_game_with_an_object_map_has_no_note(tmp_path):
    from rlviz.jobs.render import render

    out = render(checkpoint=SAMPLE, episodes=2, heatmap=True, videos="none", out=tmp_path / "out")
    assert "heatmap_note" not in json.loads(out.summary_json.read_text())


# -- part 5 and 6: compare --disagreements between deterministic actors; fewer states than asked ---------------------
def test_deterministic_actors_disagree_by_their_action_gap(tmp_path):
    """TD3 and DDPG give an action each, no distribution: 0.4 wrote 0 states, tv_mean null, no note. Their gap is
    |a_TD3 - a_DDPG| / (high - low), Pendulum's torque bounds [-2, 2]."""
    from rlviz.evaluate.statistics.distance import ACTION_GAP, disagreement

    td3, ddpg = load_agent(_jax("td3_continuous_action_jax", tmp_path)), load_agent(
        _jax("ddpg_continuous_action_jax", tmp_path))
    obs = dict(np.load(next(JAX.glob("*__td3_continuous_action_jax__*")) / "td3_continuous_action_jax.npz"))["obs"]
    a, b = td3.policy.evaluate(obs.astype(np.float32)), ddpg.policy.evaluate(obs.astype(np.float32))
    measure, gap = disagreement(a, b, td3.policy.action_spec)
    assert measure == ACTION_GAP and a.std is None and b.std is None
    np.testing.assert_allclose(gap, np.abs(a.mean[:, 0].astype(np.float64) - b.mean[:, 0]) / 4.0, rtol=1e-12)
    assert gap.max() > 1e-3


def _compare(tmp_path, a: Path, b: Path, k: int, name: str):
    from rlviz.jobs.compare import compare

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compare(a=a, b=b, episodes=1, disagreements=k, videos="none", out=tmp_path / name, seed=7)
    lines = [str(w.message) for w in caught if str(w.message).startswith("--disagreements")]
    return json.loads((out.out_dir / "disagreements.json").read_text()), out.comparison, lines


def test_compare_td3_and_ddpg_finds_states_and_says_when_k_is_capped(tmp_path):
    td3, ddpg = _jax("td3_continuous_action_jax", tmp_path), _jax("ddpg_continuous_action_jax", tmp_path)
    data, comparison, lines = _compare(tmp_path, td3, ddpg, 100000, "pair")
    assert data["measure"] == "action_gap" and "scaled by the action bounds" in data["measure_is"]
    both = data["summary"]["all"]
    assert both["states"] == 2 * 200 and both["tv_mean"] > 0 and both["disagree_share"] > 0
    n = len(data["states"])
    # one episode each of 200 steps, one state per 50-step window: at most 4 per episode, 8 in all
    assert 0 < n <= 8 and data["branches"]["states"] == n
    assert data["note"] == (f"{n} of the 100000 states asked: the states where A and B act differently (action gap "
                            ">= 0.001) give no more, at most one per 50 steps of an episode and a state met again "
                            "once; more --episodes or a shorter --disagreement-horizon give more.")
    assert lines == [f"--disagreements 100000: {data['note']}"]  # the same line on stderr (a warning)
    assert comparison["disagreements"]["measure"] == "action_gap"
    tvs = [s["tv"] for s in data["states"]]
    assert tvs == sorted(tvs, reverse=True) and all(0.001 <= t <= 1 for t in tvs)


def test_an_agent_against_itself_finds_no_states_and_says_why(tmp_path):
    td3 = _jax("td3_continuous_action_jax", tmp_path)
    data, _, lines = _compare(tmp_path, td3, td3, 3, "same")
    assert data["states"] == [] and data["summary"]["all"]["tv_mean"] == 0.0
    assert data["note"] == ("no states: A and B act the same on all 400 states (action gap below 0.001 everywhere; "
                            "e.g. the same agent twice), so there is nothing to branch from.")
    assert lines == [f"--disagreements 3: {data['note']}"]
