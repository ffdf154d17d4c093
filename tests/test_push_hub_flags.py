"""``--push-to-hub`` / ``--push-dry-run`` on ``rlviz render`` and ``rlviz compare`` (the push only after the run has
completed, and not past ``--strict``), a compare run's agent B published with its paired difference against A, and
rl-zoo3's run layout published as ``rl_zoo3.push_to_hub`` publishes it (its files read back as
``rl_zoo3.load_from_hub`` lays them out, and through ``hf://``). Real SB3 agents, no network."""

from __future__ import annotations

import csv
import io
import json
import shlex
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from _hub import cache_repo, offline_hub

from rlviz.cli import main
from rlviz.config import CompareConfig, RenderConfig
from rlviz.errors import UsageError
from rlviz.jobs.compare import compare
from rlviz.jobs.push import choose_episode, push
from rlviz.jobs.render import render
from rlviz.media.decode import read_video

hf = pytest.importorskip("huggingface_hub")
sb3 = pytest.importorskip("stable_baselines3")
yaml = pytest.importorskip("yaml")

from test_push import _card, stand_in_hub  # noqa: E402


@pytest.fixture(scope="module")
def weak(tmp_path_factory):
    """A PPO trained 256 steps on CartPole (its diagnostics warn: policy_uniform...), saved as a.zip."""
    model = sb3.PPO("MlpPolicy", "CartPole-v1", n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu",
                    policy_kwargs={"net_arch": [16]})
    model.learn(256)
    path = tmp_path_factory.mktemp("weak") / "a.zip"
    model.save(path)
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _same_push(one: Path, other: Path) -> None:
    """Two repo folders with the same files and bytes (results.json: but for its eval_datetime)."""
    a, b = _files(one), _files(other)
    assert set(a) == set(b)
    for name in a:
        if name == "results.json":
            strip = [{k: v for k, v in json.loads(x[name]).items() if k != "eval_datetime"} for x in (a, b)]
            assert strip[0] == strip[1]
        else:
            assert a[name] == b[name], name


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_render_push_dry_run_is_rlviz_push_of_the_finished_run(weak, tmp_path, capsys):
    run, dry = tmp_path / "run", tmp_path / "dry"
    assert main(["render", str(weak), "--env", "CartPole-v1", "--episodes", "4", "--greedy", "--videos", "none",
                 "--out", str(run), "--push-dry-run", str(dry), "--no-progress"]) == 0
    assert f"dry run: the repo folder is {dry}" in capsys.readouterr().out
    options = json.loads((run / "rlviz-run.json").read_text())["options"]
    assert options["push_to_hub"] is None and options["push_dry_run"] is None  # a replay of the run never pushes
    push(run=str(run), dry_run=str(tmp_path / "again"))
    _same_push(dry, tmp_path / "again")
    _, meta = _card(dry)
    assert meta["model-index"][0]["name"] == "a" and "a.zip" in _files(dry)


def test_render_push_to_hub_uploads_after_the_run(weak, monkeypatch, tmp_path, capsys):
    import huggingface_hub.constants as constants

    offline_hub(monkeypatch, tmp_path)  # no token anywhere
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    args = ["render", str(weak), "--env", "CartPole-v1", "--episodes", "3", "--greedy", "--videos", "none",
            "--no-progress", "--push-to-hub", "me/ppo-a"]
    assert main([*args, "--out", str(tmp_path / "refused")]) == 2  # before the run, not after it
    assert "no Hugging Face token" in capsys.readouterr().err and not (tmp_path / "refused").exists()
    with stand_in_hub(monkeypatch) as server:
        assert main([*args, "--out", str(tmp_path / "run")]) == 0
        assert "pushed me/ppo-a: " in capsys.readouterr().out
    assert server.created[0]["name"] == "ppo-a" and server.validated == [True]
    push(run=str(tmp_path / "run"), repo="me/ppo-a", dry_run=str(tmp_path / "dry"))
    expected = _files(tmp_path / "dry")
    assert set(server.files) == set(expected)
    for name in set(expected) - {"results.json"}:
        assert server.files[name] == expected[name], name


def test_nothing_is_pushed_when_the_run_fails_or_strict_warns(weak, tmp_path, capsys):
    dry = tmp_path / "dry"
    code = main(["render", str(weak), "--env", "Acrobot-v1", "--episodes", "2", "--videos", "none", "--no-progress",
                 "--out", str(tmp_path / "bad"), "--push-dry-run", str(dry)])  # the agent's 4 inputs, Acrobot's 6
    assert code in (1, 2) and not dry.exists()
    capsys.readouterr()
    run = tmp_path / "run"
    assert main(["render", str(weak), "--env", "CartPole-v1", "--episodes", "3", "--greedy", "--videos", "none",
                 "--no-progress", "--strict", "--out", str(run), "--push-dry-run", str(dry)]) == 3
    err = capsys.readouterr().err
    assert "nothing was pushed" in err and (run / "summary.json").is_file() and not dry.exists()
    with pytest.warns(UserWarning, match="nothing was pushed"):
        out = render(checkpoint=str(weak), env="CartPole-v1", episodes=3, greedy=True, videos="none", strict=True,
                     out=str(tmp_path / "lib"), push_dry_run=str(dry))
    assert out.warnings and out.pushed is None and not dry.exists()


def test_push_options_refused_before_the_run(tmp_path):
    with pytest.raises(UsageError, match="expected ORG/NAME"):
        RenderConfig(checkpoint="a.zip", push_to_hub="no-slash")
    with pytest.raises(UsageError, match="--include-code FILE"):
        RenderConfig(checkpoint="state.pt", model="mynet:Net", push_dry_run="d")
    with pytest.raises(UsageError, match="already on the Hub"):
        RenderConfig(checkpoint="hf://sb3/ppo-CartPole-v1", push_to_hub="me/x")
    assert CompareConfig("hf://sb3/ppo-CartPole-v1", "b.zip", push_to_hub="me/x").push_to_hub == "me/x"  # A: a baseline
    assert CompareConfig("a.zip", "b.zip", push_to_hub="me/x").render_config("a").push_to_hub is None
    with pytest.raises(UsageError, match="already on the Hub"):
        CompareConfig("a.zip", "hf://sb3/ppo-CartPole-v1", push_to_hub="me/x")
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    with pytest.raises(UsageError, match="--push-dry-run .* not empty"):
        render(checkpoint="a.zip", env="CartPole-v1", out=str(tmp_path / "run"), push_dry_run=str(full))
    assert not (tmp_path / "run").exists()


def test_compare_pushes_b_with_its_paired_difference_against_a(weak, ppo_zip, tmp_path):
    _, strong = ppo_zip
    dry = tmp_path / "dry"
    out = compare(a=str(weak), b=str(strong), env="CartPole-v1", episodes=5, greedy=True, videos="none",
                  out=str(tmp_path / "cmp"), push_dry_run=str(dry))
    c = out.comparison
    assert out.pushed is not None and Path(out.pushed.folder) == dry
    files = _files(dry)
    assert strong.name in files and weak.name not in files and files[strong.name] == strong.read_bytes()
    published = json.loads(files["comparison.json"])
    assert published["a_checkpoint"] == published["baseline"] == weak.name and published["b_checkpoint"] == strong.name
    assert published["return_diff"] == c["return_diff"] and published["b"]["returns"] == c["b"]["returns"]
    card, meta = _card(dry)
    metric = meta["model-index"][0]["results"][0]["metrics"][0]["value"]
    assert metric == f"{c['b']['returns']['mean']:.2f} +/- {c['b']['returns']['std']:.2f}"
    lo, hi = c["return_diff"]["ci95"]
    assert f"| mean return | {c['return_diff']['mean']:+.2f} | [{lo:+.2f}, {hi:+.2f}] |" in card.text
    assert f"baseline A (`{weak.name}`)" in card.text
    assert all(str(tmp_path).encode() not in data for data in files.values())
    # the replay is B's median episode, as `rlviz render B --videos episode:N` draws it
    rows = [{"episode": r["episode"], "return": r["b_return"]} for r in _rows(tmp_path / "cmp" / "episodes.csv")]
    n = choose_episode(rows, "median")
    render(checkpoint=str(strong), env="CartPole-v1", episodes=5, greedy=True, videos=f"episode:{n}",
           out=str(tmp_path / "ref"))
    assert _rows(tmp_path / "ref" / "episodes.csv")[n]["return"] == rows[n]["return"]
    ours = np.stack(list(read_video(dry / "replay.mp4")))
    theirs = np.stack(list(read_video(next((tmp_path / "ref" / "videos").glob(f"episode-{n}-*.mp4")))))
    assert ours.shape == theirs.shape and np.array_equal(ours, theirs)


MONITOR = '#{"t_start": 1700000000.0, "env_id": "CartPole-v1"}\nr,l,t\n12.0,12,0.01\n30.0,30,0.05\n'


def test_rl_zoo3_run_published_as_rl_zoo3_push_to_hub(zoo_run, tmp_path, monkeypatch, capsys, no_network):
    """``rlviz render logs/ppo/CartPole-v1_1 --push-to-hub ORG/ppo-CartPole-v1``: rl_zoo3.push_to_hub's files
    (its source read: <algo>-<env>.zip, args.yml, config.yml, env_kwargs.yml, vec_normalize.pkl,
    train_eval_metrics.zip), loaded back as rl_zoo3.load_from_hub lays them out, and through hf://."""
    run = tmp_path / "logs" / "ppo" / "CartPole-v1_1"
    shutil.copytree(zoo_run[1], run)
    np.savez(run / "evaluations.npz", timesteps=np.array([256, 512]), results=np.array([[9.0], [21.0]]))
    (run / "0.monitor.csv").write_text(MONITOR)
    out, dry = tmp_path / "out", tmp_path / "dry"
    assert main(["render", str(run), "--episodes", "4", "--greedy", "--videos", "none", "--no-progress", "--out",
                 str(out), "--push-to-hub", "me/ppo-CartPole-v1", "--push-dry-run", str(dry)]) == 0
    files = _files(dry)
    assert set(files) == {"ppo-CartPole-v1.zip", "args.yml", "config.yml", "env_kwargs.yml", "vec_normalize.pkl",
                          "train_eval_metrics.zip", "README.md", "results.json", "replay.mp4", "replay-worst.mp4",
                          "report.html", "rlviz.json"}
    params = run / "CartPole-v1"
    assert files["ppo-CartPole-v1.zip"] == (run / "CartPole-v1.zip").read_bytes()
    assert files["vec_normalize.pkl"] == (params / "vecnormalize.pkl").read_bytes()
    assert files["args.yml"] == (params / "args.yml").read_bytes()
    assert files["config.yml"] == (params / "config.yml").read_bytes()
    assert yaml.safe_load(files["env_kwargs.yml"]) == {}
    with zipfile.ZipFile(io.BytesIO(files["train_eval_metrics.zip"])) as z:
        assert sorted(z.namelist()) == ["0.monitor.csv", "evaluations.npz"]
        assert z.read("0.monitor.csv") == MONITOR.encode()
        assert z.read("evaluations.npz") == (run / "evaluations.npz").read_bytes()
    card, meta = _card(dry)
    assert meta["library_name"] == "stable-baselines3" and meta["model-index"][0]["name"] == "PPO"
    assert "python -m rl_zoo3.load_from_hub --algo ppo --env CartPole-v1 -orga me -f logs/" in card.text
    assert "normalize: true" in card.text  # config.yml's hyperparameters
    # rl_zoo3.load_from_hub's layout (its source: <env>.zip, <env>/{args,config,env_kwargs}.yml, vecnormalize.pkl,
    # train_eval_metrics.zip extracted into the run) renders the same episodes
    back = tmp_path / "downloaded" / "ppo" / "CartPole-v1_1"
    (back / "CartPole-v1").mkdir(parents=True)
    (back / "CartPole-v1.zip").write_bytes(files["ppo-CartPole-v1.zip"])
    for name in ("args.yml", "config.yml", "env_kwargs.yml"):
        (back / "CartPole-v1" / name).write_bytes(files[name])
    (back / "CartPole-v1" / "vecnormalize.pkl").write_bytes(files["vec_normalize.pkl"])
    zipfile.ZipFile(io.BytesIO(files["train_eval_metrics.zip"])).extractall(back)
    render(checkpoint=str(back), episodes=4, greedy=True, videos="none", out=str(tmp_path / "zoo-again"))
    assert (tmp_path / "zoo-again" / "episodes.csv").read_text() == (out / "episodes.csv").read_text()
    # and hf://, with the card's own command
    cache_repo(offline_hub(monkeypatch, tmp_path), "me/ppo-CartPole-v1", {n: dry / n for n in files})
    line = next(x for x in card.text.splitlines() if x.startswith("rlviz render hf://"))
    assert main([*shlex.split(line)[1:], "--videos", "none", "--out", str(tmp_path / "from-hub"), "--no-progress"]) == 0
    assert (tmp_path / "from-hub" / "episodes.csv").read_text() == (out / "episodes.csv").read_text()
    assert no_network[0] == []


def test_sb3_zip_with_its_statistics_beside_it(zoo_run, tmp_path, monkeypatch, no_network):
    """The statistics render found beside a plain SB3 zip go up as huggingface_sb3's vec_normalize.pkl."""
    agent = tmp_path / "agent"
    agent.mkdir()
    shutil.copyfile(zoo_run[1] / "CartPole-v1.zip", agent / "ppo.zip")
    shutil.copyfile(zoo_run[1] / "CartPole-v1" / "vecnormalize.pkl", agent / "vecnormalize.pkl")
    run = tmp_path / "run"
    render(checkpoint=str(agent / "ppo.zip"), env="CartPole-v1", episodes=3, greedy=True, videos="none",
           out=str(run), push_to_hub="me/ppo-CartPole-v1", push_dry_run=str(tmp_path / "dry"))
    files = _files(tmp_path / "dry")
    assert files["vec_normalize.pkl"] == (agent / "vecnormalize.pkl").read_bytes() and "ppo.zip" in files
    cache_repo(offline_hub(monkeypatch, tmp_path), "me/ppo-CartPole-v1", files)
    assert main(["render", "hf://me/ppo-CartPole-v1", "--env", "CartPole-v1", "--episodes", "3", "--greedy",
                 "--videos", "none", "--out", str(tmp_path / "from-hub"), "--no-progress"]) == 0
    assert (tmp_path / "from-hub" / "episodes.csv").read_text() == (run / "episodes.csv").read_text()


def test_a_model_run_with_its_code_replays_from_the_repo_folder(tmp_path, monkeypatch):
    """--model with --include-code: the card's commands (download, then render the state file with --model in the
    repo's folder) replay the run from the uploaded files alone."""
    torch = pytest.importorskip("torch")
    code = "import torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n" \
           "        self.actor = nn.Linear(4, 2)\n        self.critic = nn.Linear(4, 1)\n\n" \
           "    def forward(self, x):\n        return self.actor(x), self.critic(x)\n"
    home = tmp_path / "work"
    home.mkdir()
    (home / "pushnet58.py").write_text(code)
    monkeypatch.chdir(home)
    monkeypatch.syspath_prepend(str(home))
    from pushnet58 import Net

    torch.manual_seed(0)
    torch.save(Net().state_dict(), home / "state.pt")
    render(checkpoint="state.pt", model="pushnet58:Net", env="CartPole-v1", episodes=3, videos="none", out="run")
    dry = tmp_path / "dry"
    push(run="run", repo="me/net", dry_run=str(dry), include_code=str(home / "pushnet58.py"))
    assert {"state.pt", "pushnet58.py"} <= set(_files(dry))
    lines = (dry / "README.md").read_text().splitlines()
    fetch = lines.index("hf download me/net --local-dir net && cd net")
    words = shlex.split(lines[fetch + 1])
    assert words[:3] == ["rlviz", "render", "state.pt"] and words[words.index("--model") + 1] == "pushnet58:Net"
    monkeypatch.delitem(sys.modules, "pushnet58")
    monkeypatch.chdir(dry)  # (the downloaded repo's folder)
    monkeypatch.syspath_prepend(str(dry))
    assert main([*words[1:], "--videos", "none", "--out", str(tmp_path / "again"), "--no-progress"]) == 0
    assert (tmp_path / "again" / "episodes.csv").read_text() == (home / "run" / "episodes.csv").read_text()
