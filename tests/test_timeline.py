"""rlviz timeline on a real SB3 training run made here (PPO, CheckpointCallback) and a copy with a planted collapse:
the steps found, a row equal to ``rlviz render`` of its file, the findings, workers, and every bad input."""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from _timeline_runs import COLLAPSE_AT, STEPS, trained_runs
from torch import nn

import rlviz
from rlviz.cli import main
from rlviz.errors import UsageError
from rlviz.sources.run_folders import discover, step_from_file, step_from_name

EP = 12
COMMON = {"env": "CartPole-v1", "episodes": EP, "videos": "none"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return trained_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def healthy(runs, tmp_path_factory):
    return rlviz.timeline(run=runs[0], out=tmp_path_factory.mktemp("t") / "healthy", **COMMON)


@pytest.fixture(scope="module")
def collapsed(runs, tmp_path_factory):
    return rlviz.timeline(run=runs[1], out=tmp_path_factory.mktemp("t") / "collapsed", **COMMON)


def test_steps_found_from_names_and_files(runs, tmp_path):
    found, skipped = discover(runs[0])
    assert [c.step for c in found] == STEPS and skipped == []
    assert [c.name for c in found] == [f"rl_model_{s}_steps.zip" for s in STEPS]
    assert {c.step_source for c in found} == {"name"}
    # rl-zoo3 style names without a step: read from the zip's num_timesteps; a second file for a step is reported
    shutil.copy(runs[0] / "rl_model_2048_steps.zip", tmp_path / "best_model.zip")
    shutil.copy(runs[0] / "rl_model_4096_steps.zip", tmp_path / "CartPole-v1.zip")
    shutil.copy(runs[0] / "rl_model_4096_steps.zip", tmp_path / "rl_model_4096_steps.zip")
    (tmp_path / "rl_model_replay_buffer_4096_steps.pkl").write_bytes(b"never read")
    (tmp_path / "monitor.csv").write_text("never read")
    found, skipped = discover(tmp_path)
    assert [(c.step, c.name, c.step_source) for c in found] == [
        (2048, "best_model.zip", "file"), (4096, "rl_model_4096_steps.zip", "name")]
    assert [s.name for s in skipped] == ["CartPole-v1.zip"] and "second file for step 4096" in skipped[0].why
    assert step_from_file(tmp_path / "best_model.zip") == 2048
    assert step_from_name("CartPole-v1.zip") is None and step_from_name("agent-1000.pt") == 1000


def test_row_equals_render_of_its_file(runs, healthy, tmp_path):
    row = healthy.data["checkpoints"][1]
    assert row["step"] == 2048 and row["checkpoint"] == "rl_model_2048_steps.zip" and row["episodes"] == EP
    rendered = rlviz.render(checkpoint=runs[0] / row["checkpoint"], out=tmp_path / "r", **COMMON).summary
    ret = dict(row["return"])
    ci = ret.pop("ci95")
    assert ret == rendered["returns"] and ci[0] <= ret["mean"] <= ci[1]
    assert row["diagnostics"] == rendered["diagnostics"]
    for key in ("lengths", "failures_per_episode", "mean_relative_entropy", "value_explained_variance", "steps"):
        assert row[key] == rendered[key], key
    csv_rows = list(csv.DictReader(open(healthy.timeline_csv)))
    assert list(csv_rows[0])[0] == "step" and [int(r["step"]) for r in csv_rows] == STEPS
    assert float(csv_rows[1]["return/mean"]) == pytest.approx(rendered["returns"]["mean"])


def test_planted_collapse_first_seen_and_regression(collapsed, healthy):
    data = collapsed.data
    assert data["first_seen"]["policy_collapsed"] == COLLAPSE_AT
    assert data["diagnostics_over_training"]["policy_collapsed"]["persisted"] is True
    assert [r["step"] for r in data["regressions"]][0] == COLLAPSE_AT
    first = data["regressions"][0]
    assert first["vs_step"] < COLLAPSE_AT and first["return_diff"]["ci95"][1] < 0
    at = next(r for r in data["checkpoints"] if r["step"] == COLLAPSE_AT)
    assert at["regression"] and at["policy_change"]["tv_mean"] > 0.3 and at["policy_change"]["kl_mean"] > 0
    assert at["policy_change"]["vs_step"] == 2048
    # the healthy run: no collapse, no regression; the same numbers before the planted step
    assert "policy_collapsed" not in healthy.data["first_seen"] and healthy.data["regressions"] == []
    assert not any(r["regression"] for r in healthy.data["checkpoints"])
    before = [r for r in data["checkpoints"] if r["step"] < COLLAPSE_AT]
    assert [r["return"] for r in before] == [r["return"] for r in healthy.data["checkpoints"][:len(before)]]
    on_disk = json.loads(healthy.timeline_json.read_text())
    assert on_disk["checkpoints"][0]["vs_previous"] is None and on_disk["checkpoints"][1]["vs_previous"]["step"] == 1024
    assert (healthy.out_dir / "rlviz-run.json").is_file()


def _without_wall(data: dict) -> dict:
    return {**data, "checkpoints": [{k: v for k, v in r.items() if k != "wall_s"} for r in data["checkpoints"]]}


def test_workers_identical_to_one_process(runs, healthy, tmp_path):
    two = rlviz.timeline(run=runs[0], out=tmp_path / "w2", workers=2, **COMMON)
    assert _without_wall(two.data) == _without_wall(healthy.data)
    assert all(c.agent is None for c in two.checkpoints)  # the agents were loaded in the workers only


def test_workers_record_the_progression_parts_as_one_process_does(runs, tmp_path, monkeypatch):
    """The default --videos first:1 records one progression part per checkpoint: with --workers the workers record
    them at once (the driver's own recording patched to fail: the run still has every part), and every file equals
    one process's (parts' per-step data, decoded frames, progression.json)."""
    import numpy as np

    from rlviz.media.decode import read_video
    from rlviz.training import views

    opts = {**COMMON, "videos": "first:1", "episodes": 2}
    rlviz.timeline(run=runs[0], out=tmp_path / "p1", **opts)

    def not_here(*args, **kwargs):
        raise AssertionError("the driver recorded a progression part")

    monkeypatch.setattr(views, "record_part", not_here)  # (workers record through progression.record_part_task)
    rlviz.timeline(run=runs[0], out=tmp_path / "p2", workers=2, **opts)
    one, two = (json.loads((tmp_path / p / "progression.json").read_text()) for p in ("p1", "p2"))
    assert one == two and [p["step"] for p in one["parts"]] == STEPS
    for part in one["parts"]:
        a, b = (np.load(tmp_path / p / "progression" / part["video"].replace(".mp4", ".npz")) for p in ("p1", "p2"))
        assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)
    frames = [list(read_video(tmp_path / p / "progression.mp4")) for p in ("p1", "p2")]
    assert len(frames[0]) == sum(p["frames"] for p in one["parts"]) and len(frames[0]) == len(frames[1])
    assert all(np.array_equal(x, y) for x, y in zip(*frames))


def test_task_ranges_end_the_queue_in_short_tasks():
    from rlviz.training.evaluate import task_ranges

    assert task_ranges(3, 200, 1) == [[range(200)]] * 3
    layout = task_ranges(10, 200, 2)
    assert layout[:8] == [[range(200)]] * 8 and layout[8:] == [[range(0, 100), range(100, 200)]] * 2
    assert task_ranges(4, 5, 3)[-1] == [range(0, 2), range(2, 3), range(3, 5)]
    few = task_ranges(1, 200, 4)  # fewer checkpoints than workers: each split so every worker has work
    assert len(few[0]) >= 4 and [e for r in few[0] for e in r] == list(range(200))
    for n, layout in ((7, task_ranges(10, 7, 4)), (1, task_ranges(2, 1, 2))):  # every episode once, no empty task
        assert all([e for r in ranges for e in r] == list(range(n)) and all(ranges) for ranges in layout)


def test_explicit_files_and_glob(runs, tmp_path):
    files = [runs[0] / "rl_model_4096_steps.zip", runs[0] / "rl_model_1024_steps.zip"]
    found, _ = discover(files)
    assert [c.step for c in found] == [1024, 4096]
    found, _ = discover(str(runs[0] / "rl_model_*_steps.zip"))
    assert [c.step for c in found] == STEPS


def _tiny(path: Path, env: str, obs: int, actions: int, step: int | None) -> Path:
    net = nn.Sequential(nn.Linear(obs, 8), nn.Tanh(), nn.Linear(8, actions))
    torch.manual_seed(0)
    meta = {} if step is None else {"step": step}
    rlviz.save_checkpoint(path, net, env=env, kind="logits", metadata=meta)
    return path


def test_pt2_steps_from_metadata_and_mixed_envs(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    _tiny(run / "a.pt2", "CartPole-v1", 4, 2, 100)
    _tiny(run / "b.pt2", "CartPole-v1", 4, 2, 200)
    found, _ = discover(run)
    assert [(c.step, c.step_source) for c in found] == [(100, "file"), (200, "file")]
    _tiny(run / "c.pt2", "Acrobot-v1", 6, 3, 300)
    with pytest.raises(UsageError, match="different runs: a.pt2 and c.pt2"):
        rlviz.timeline(run=run, out=tmp_path / "o", episodes=2, videos="none")
    assert not (tmp_path / "o").exists()


def test_bad_inputs(runs, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="holds no checkpoint"):
        rlviz.timeline(run=empty, out=tmp_path / "o")
    nostep = tmp_path / "nostep"
    nostep.mkdir()
    torch.save({"w": torch.zeros(2)}, nostep / "agent.pt")
    with pytest.raises(UsageError, match="none of its 1 checkpoint.*training step"):
        rlviz.timeline(run=nostep, out=tmp_path / "o")
    with pytest.raises(UsageError, match="matches no file"):
        rlviz.timeline(run=str(tmp_path / "nothing_*.zip"), out=tmp_path / "o")
    with pytest.raises(UsageError, match="RUN is empty"):
        rlviz.TimelineConfig(run=[])
    with pytest.raises(UsageError, match="--poll"):
        rlviz.TimelineConfig(run=empty, poll=0)
    with pytest.raises(UsageError, match="--follow watches a folder"):
        rlviz.timeline(run=str(runs[0] / "rl_model_1024_steps.zip"), follow=True, out=tmp_path / "o")
    # a checkpoint that fails to load among good ones: one line naming it (once), the others written, exit code 0:
    # only a run none of whose checkpoints loads fails
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for s in (1024, 2048):
        shutil.copy(runs[0] / f"rl_model_{s}_steps.zip", mixed)
    (mixed / "rl_model_1536_steps.zip").write_bytes(b"PK\x03\x04 not a real zip")
    rc = main(["timeline", str(mixed), "--env", "CartPole-v1", "--episodes", "2", "--videos", "none",
               "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert rc == 0 and err.count("rl_model_1536_steps.zip") == 1, err
    data = json.loads((tmp_path / "m" / "timeline.json").read_text())
    assert [r["step"] for r in data["checkpoints"]] == [1024, 2048]
    assert [f["step"] for f in data["failed"]] == [1536] and "corrupt" in data["failed"][0]["error"]
    assert data["checkpoints"][1]["policy_change"]["vs_step"] == 1024  # against the good one before the failed
    two = rlviz.timeline(run=mixed, env="CartPole-v1", episodes=2, videos="none", out=tmp_path / "m2", workers=2)
    assert _without_wall(two.data) == _without_wall(data) and len(two.failed) == 1
    assert main(["timeline", str(empty), "--out", str(tmp_path / "e")]) == 2


def test_rlviz_timeline_is_the_job_and_0_3_paths_are_gone():
    import rlviz.training.job

    for old in [m for m in sys.modules if m == "rlviz.timeline" or m.startswith("rlviz.timeline.")]:
        sys.modules.pop(old)
    vars(rlviz).pop("timeline", None)  # (another test's import of the 0.3 path bound it): the root's lazy name again
    assert rlviz.timeline is rlviz.training.job.timeline  # a plain function; its package is rlviz.training
    with pytest.raises(UsageError, match="RUN is empty"):
        rlviz.timeline(run="")
    for old in [m for m in sys.modules if m == "rlviz.timeline" or m.startswith("rlviz.timeline.")]:
        sys.modules.pop(old)
    with pytest.raises(ModuleNotFoundError):  # 0.3's docs did this; kept until 0.5, gone in 0.6
        import rlviz.timeline.plot  # noqa: F401
    assert rlviz.timeline is rlviz.training.job.timeline


def test_tensorboard_scalars_at_the_training_steps(runs, tmp_path):
    from conftest import tb_accumulator

    out = rlviz.timeline(run=runs[0], out=tmp_path / "o", tensorboard=tmp_path / "tb", env="CartPole-v1", episodes=3,
                         videos="none")
    acc = tb_accumulator(tmp_path / "tb")
    events = acc.Scalars("timeline/return/mean")
    assert [e.step for e in events] == STEPS
    assert [e.value for e in events] == pytest.approx([r["return"]["mean"] for r in out.data["checkpoints"]])


def test_sb3_callback_and_loop_write_the_same_timeline(tmp_path):
    from conftest import tb_accumulator
    from stable_baselines3 import PPO

    from rlviz.integrations.loop import TimelineWriter
    from rlviz.integrations.sb3 import RlvizCallback
    from rlviz.sinks import TensorBoardSink
    from rlviz.sources.stable_baselines3.zips import sb3_policy

    with TensorBoardSink(tmp_path / "tb") as sink:
        cb = RlvizCallback("CartPole-v1", every_steps=256, sinks=[sink], timeline=rlviz.TimelineConfig(run=tmp_path / "tl", episodes=3))
        model = PPO("MlpPolicy", "CartPole-v1", n_steps=256, batch_size=128, n_epochs=1, seed=0, device="cpu",
                    policy_kwargs={"net_arch": [16]})
        model.learn(512, callback=cb)
    data = json.loads((tmp_path / "tl" / "timeline.json").read_text())
    assert [r["step"] for r in data["checkpoints"]] == [256, 512]
    assert data["checkpoints"][1]["policy_change"]["vs_step"] == 256 and data["checkpoints"][0]["episodes"] == 3
    assert [e.step for e in tb_accumulator(tmp_path / "tb").Scalars("timeline/return/mean")] == [256, 512]
    # the loop API on the final policy: the same row as rlviz timeline of a file of it would give
    with TimelineWriter(tmp_path / "loop", "CartPole-v1", episodes=3, videos="none") as writer:
        row = writer.add(sb3_policy(model, device="cpu"), 512, gamma=model.gamma)
    assert row["return"] == data["checkpoints"][-1]["return"]
    with pytest.raises(UsageError, match="already"):
        writer.add(sb3_policy(model, device="cpu"), 512)


def test_policy_change_distances():
    import numpy as np

    from rlviz.training.evaluate import _tv_kl_categorical, _tv_kl_gaussian, policy_change

    tv, kl = _tv_kl_categorical(np.array([[0.5, 0.5]]), np.array([[0.9, 0.1]]), None)
    assert tv[0] == pytest.approx(0.4) and kl[0] == pytest.approx(0.5 * np.log(0.5 / 0.9) + 0.5 * np.log(5.0))
    # MultiDiscrete: the mean TV over the parts, the KL summed
    tv, kl = _tv_kl_categorical(np.array([[1.0, 0.0, 0.5, 0.5]]), np.array([[0.0, 1.0, 0.5, 0.5]]), (2, 2))
    assert tv[0] == pytest.approx(0.5) and kl[0] > 20
    tv, kl = _tv_kl_gaussian(np.array([[1.0]]), np.array([[1.0]]), np.array([[0.0]]), np.array([[2.0]]))
    assert kl[0] == pytest.approx(np.log(2.0) + 2.0 / 8.0 - 0.5) and tv[0] == pytest.approx(np.sqrt(kl[0] / 2))
    net = nn.Sequential(nn.Linear(4, 2))
    agent = rlviz.LoadedAgent(rlviz.TorchPolicy(net, kind="logits"), rlviz.EnvRecipe.for_env_id("CartPole-v1"),
                              ("left", "right"), 0.99, "logits")
    same = policy_change(agent, agent, np.zeros((5, 4), np.float32) + 0.1)
    assert same["states"] == 5 and same["tv_mean"] == 0.0 and same["kl_mean"] == pytest.approx(0.0, abs=1e-9)
    assert policy_change(agent, agent, None) is None


def test_rl_zoo3_run_folder_with_vecnormalize_per_checkpoint(tmp_path):
    """An rl-zoo3 run (--save-freq under normalize: True): rl_model_<steps>_steps.zip each with its
    rl_model_vecnormalize_<steps>_steps.pkl, and the final <env id>.zip with <env id>/vecnormalize.pkl; no --env."""
    from collections import OrderedDict

    import yaml
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import CheckpointCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    run = tmp_path / "ppo" / "CartPole-v1_1"
    (run / "CartPole-v1").mkdir(parents=True)
    venv = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=0))
    model = PPO("MlpPolicy", venv, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu",
                policy_kwargs={"net_arch": [16]})
    model.learn(512, callback=CheckpointCallback(256, str(run), save_vecnormalize=True))
    model.save(run / "CartPole-v1.zip")
    venv.save(run / "CartPole-v1" / "vecnormalize.pkl")
    for name, data in (("config.yml", {"normalize": True, "policy": "MlpPolicy"}),
                       ("args.yml", {"algo": "ppo", "env": "CartPole-v1", "env_kwargs": None, "seed": 0})):
        (run / "CartPole-v1" / name).write_text(yaml.dump(OrderedDict(sorted(data.items()))))
    found, skipped = discover(run)
    assert [(c.step, c.name) for c in found] == [(256, "rl_model_256_steps.zip"), (512, "rl_model_512_steps.zip")]
    assert [c.vecnormalize.name for c in found] == ["rl_model_vecnormalize_256_steps.pkl",
                                                    "rl_model_vecnormalize_512_steps.pkl"]
    assert [s.name for s in skipped] == ["CartPole-v1.zip"]  # the final model: a second file for step 512
    out = rlviz.timeline(run=run, episodes=4, videos="none", out=tmp_path / "t")
    assert [r["step"] for r in out.data["checkpoints"]] == [256, 512] and out.data["env_id"] == "CartPole-v1"
    first = found[0]
    rendered = rlviz.render(checkpoint=first.path, vecnormalize=first.vecnormalize, episodes=4, videos="none",
                            out=tmp_path / "r").summary
    assert out.data["checkpoints"][0]["return"]["mean"] == rendered["returns"]["mean"]
    assert out.checkpoints[0].agent.metadata["vecnormalize_stats"].endswith("rl_model_vecnormalize_256_steps.pkl")
