"""``rlviz push`` and ``package_to_hub``: the repo folder (card validated by huggingface_hub itself, results.json,
replay.mp4 = ``--videos episode:N``'s frames), the round trip through a Hugging Face cache, the safety refusals,
and the upload against a stand-in of the Hub's endpoints on 127.0.0.1 (no network)."""

from __future__ import annotations

import base64
import contextlib
import csv
import getpass
import json
import os
import shlex
import shutil
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from _hub import cache_repo, offline_hub

from rlviz.cli import main
from rlviz.errors import UsageError
from rlviz.jobs.push import choose_episode, push
from rlviz.jobs.render import render
from rlviz.media.decode import probe_video, read_video

hf = pytest.importorskip("huggingface_hub")
sb3 = pytest.importorskip("stable_baselines3")

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
FAKE_TOKEN = "hf_rlvizFakeToken0123456789abcdefXYZ"


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """One SB3 PPO CartPole agent, trained a few seconds, and its render run (5 greedy episodes, heatmap)."""
    model = sb3.PPO("MlpPolicy", "CartPole-v1", n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu",
                    policy_kwargs={"net_arch": [16]})
    model.learn(256)
    root = tmp_path_factory.mktemp("push")
    zip_path = root / "ppo-cartpole.zip"
    model.save(zip_path)
    run = root / "run"
    render(checkpoint=str(zip_path), env="CartPole-v1", episodes=5, greedy=True, videos="none", out=str(run),
           progress=False)
    dry = root / "dry"
    push(run=str(run), repo="me/ppo-cartpole", dry_run=str(dry))
    return model, zip_path, run, dry


def _card(folder: Path):
    from huggingface_hub import ModelCard
    from huggingface_hub.repocard import metadata_load

    card = ModelCard.load(folder / "README.md")  # a local file: no network
    meta = metadata_load(folder / "README.md")
    assert meta == card.data.to_dict()
    return card, meta


def _check_card(folder: Path, run: Path, env_id: str) -> dict:
    card, meta = _card(folder)
    summary = json.loads((run / "summary.json").read_text())
    summary["returns"] = summary.get("returns") or summary["team_return"]  # (a PettingZoo run: the team's)
    assert {env_id, "reinforcement-learning", "deep-reinforcement-learning", "rlviz"} <= set(meta["tags"])
    result = meta["model-index"][0]["results"][0]
    assert result["dataset"]["type"] == env_id
    metric = {m["type"]: m["value"] for m in result["metrics"]}
    mean, std = (float(x) for x in metric["mean_reward"].split(" +/- "))
    assert mean == pytest.approx(summary["returns"]["mean"], abs=0.005)
    assert std == pytest.approx(summary["returns"]["std"], abs=0.005)
    assert "95% CI" in metric["iqm_reward"]
    assert card.data.eval_results and card.data.eval_results[0].metric_type == "mean_reward"
    results = json.loads((folder / "results.json").read_text())
    assert set(results) == {"mean_reward", "std_reward", "n_eval_episodes", "eval_datetime", "env_id"}
    assert results["mean_reward"] == pytest.approx(summary["returns"]["mean"], rel=1e-12) and results["env_id"] == env_id
    assert results["n_eval_episodes"] == summary["episodes"]
    info = probe_video(folder / "replay.mp4")
    assert (info.codec, info.pix_fmt) == ("h264", "yuv420p") and info.width % 2 == 0 and info.height % 2 == 0
    return meta


def test_sb3_dry_run_card_validates_and_holds_the_run(cartpole):
    _, zip_path, run, dry = cartpole
    _check_card(dry, run, "CartPole-v1")
    names = sorted(p.name for p in dry.iterdir())
    assert names == sorted(["README.md", "results.json", "rlviz.json", "replay.mp4", "replay-worst.mp4",
                            "report.html", "config.json", zip_path.name])
    assert (dry / zip_path.name).read_bytes() == zip_path.read_bytes()  # the agent as loaded
    config = json.loads((dry / "config.json").read_text())  # huggingface_sb3's: the zip's data + system_info
    with zipfile.ZipFile(zip_path) as z:
        assert {k: v for k, v in config.items() if k != "system_info"} == json.loads(z.read("data"))
    assert config["system_info"]["Stable-Baselines3"] == sb3.__version__


def test_replay_is_the_chosen_episode_frames_equal_videos_episode_n(cartpole, tmp_path):
    _, zip_path, run, dry = cartpole
    rows = list(csv.DictReader((run / "episodes.csv").open()))
    n = choose_episode(rows, "median")
    ranked = sorted(float(r["return"]) for r in rows)
    assert float(rows[n]["return"]) == ranked[(len(ranked) - 1) // 2]
    worst = choose_episode(rows, "worst")
    assert float(rows[worst]["return"]) == ranked[0]
    ref = render(checkpoint=str(zip_path), env="CartPole-v1", episodes=5, greedy=True,
                 videos="episode:" + ",".join(str(e) for e in sorted({n, worst})), out=str(tmp_path / "ref"),
                 progress=False)
    for clip, episode in (("replay.mp4", n), ("replay-worst.mp4", worst)):  # the worst episode: the second clip
        ours = np.stack(list(read_video(dry / clip)))
        theirs = np.stack(list(read_video(Path(ref.out_dir) / "videos" / f"episode-{episode}-episode-0.mp4")))
        assert ours.shape == theirs.shape and np.array_equal(ours, theirs), clip
    assert json.loads((dry / "rlviz.json").read_text())["worst_episode"] == worst


def test_choose_episode_median_best_worst_episode_n():
    rows = [{"episode": str(i), "return": r} for i, r in enumerate(["5", "9", "1", "9", "1", "7"])]
    assert choose_episode(rows, "median") == 0  # ranked 1,1,5,7,9,9: the lower middle, 5
    assert choose_episode(rows, "best") == 1 and choose_episode(rows, "worst") == 2  # ties: the lower episode
    assert choose_episode(rows, "episode:4") == 4
    with pytest.raises(UsageError, match="episodes 0-5"):
        choose_episode(rows, "episode:6")


def test_round_trip_through_a_hugging_face_cache(cartpole, monkeypatch, tmp_path, no_network):
    _, _, run, dry = cartpole
    cache = offline_hub(monkeypatch, tmp_path)
    cache_repo(cache, "me/ppo-cartpole", {p.name: p for p in dry.iterdir()})
    line = next(x for x in (dry / "README.md").read_text().splitlines() if x.startswith("rlviz render hf://"))
    words = shlex.split(line)  # the card's own command, as a reader would run it
    assert words[:3] == ["rlviz", "render", "hf://me/ppo-cartpole"] and "--greedy" in words
    assert main([*words[1:], "--videos", "none", "--out", str(tmp_path / "again"), "--no-progress"]) == 0
    assert (tmp_path / "again" / "episodes.csv").read_text() == (run / "episodes.csv").read_text()
    assert no_network[0] == []


def test_no_machine_path_user_name_or_token_in_any_file(cartpole, monkeypatch, tmp_path):
    _, _, run, _ = cartpole
    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    out = tmp_path / "dry"
    assert main(["push", str(run), "--repo", "me/x", "--dry-run", str(out), "--replay", "episode:3"]) == 0
    assert json.loads((out / "rlviz.json").read_text())["replay_episode"] == 3
    assert "`replay.mp4`: episode 3 (the episode:3 episode" in (out / "README.md").read_text()
    needles = {str(tmp_path), str(run.parent), os.path.expanduser("~"), getpass.getuser(), FAKE_TOKEN}
    for f in out.rglob("*"):
        data = f.read_bytes()
        for needle in needles:
            if len(needle) > 2:
                assert needle.encode() not in data, (f.name, needle)


def test_refusals_one_line(cartpole, tmp_path, capsys):
    _, zip_path, run, _ = cartpole
    assert main(["push", str(tmp_path), "--dry-run", str(tmp_path / "d")]) == 2  # not a run
    assert "not an rlviz run" in capsys.readouterr().err
    assert main(["push", str(run), "--dry-run", str(tmp_path / "d"), "--max-file-mb", "0.001"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "over --max-file-mb" in err and not (tmp_path / "d").exists()
    with pytest.raises(UsageError, match="ORG/NAME"):
        push(run=str(run), repo="no-slash", dry_run=str(tmp_path / "e"))
    with pytest.raises(UsageError, match="episodes 0-4"):
        push(run=str(run), repo="me/x", dry_run=str(tmp_path / "e"), replay="episode:9")


def test_a_replay_that_cannot_be_made_is_an_error(cartpole, tmp_path, capsys):
    """Never "continue without a video": a run whose episodes no longer come out as recorded, or whose replay
    cannot run, exits non-zero with one line and writes no folder."""
    _, _, run, _ = cartpole
    changed = tmp_path / "changed"
    shutil.copytree(run, changed)
    lines = (changed / "episodes.csv").read_text().splitlines()
    cells = lines[1].split(",")
    cells[2] = str(float(cells[2]) + 1.0)  # episode 0's return, as if the agent had changed since the run
    (changed / "episodes.csv").write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    assert main(["push", str(changed), "--dry-run", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert "the replay's episodes differ from the run's" in err and err.count("\n") == 1
    broken = tmp_path / "broken"
    shutil.copytree(run, broken)
    meta = json.loads((broken / "rlviz-run.json").read_text())
    meta["options"]["env"] = "Acrobot-v1"  # the agent's 4 inputs, Acrobot's 6: the replay cannot run
    (broken / "rlviz-run.json").write_text(json.dumps(meta))
    assert main(["push", str(broken), "--dry-run", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert "could not make the replay" in err and "nothing was pushed" in err and err.count("\n") == 1
    assert not (tmp_path / "d").exists()


def test_a_model_run_needs_include_code(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from torch import nn

    code = tmp_path / "mynet.py"
    code.write_text("import torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.actor = nn.Linear(4, 2)\n        self.critic = nn.Linear(4, 1)\n\n"
                    "    def forward(self, x):\n        return self.actor(x), self.critic(x)\n")
    torch.manual_seed(0)
    net = nn.Module()
    net.actor, net.critic = nn.Linear(4, 2), nn.Linear(4, 1)
    torch.save(net.state_dict(), tmp_path / "state.pt")
    run = tmp_path / "run"
    (run).mkdir()
    (run / "rlviz-run.json").write_text(json.dumps({"job": "render", "options": {
        "checkpoint": str(tmp_path / "state.pt"), "model": "mynet:Net", "env": "CartPole-v1", "episodes": 1}}))
    (run / "summary.json").write_text(json.dumps({"returns": {"mean": 1.0}}))
    (run / "episodes.csv").write_text("episode,seed,return,length\n0,1,1.0,1\n")
    assert main(["push", str(run), "--dry-run", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "--include-code FILE" in err and err.count("\n") == 1


def test_minatar_pt2_run(tmp_path):
    run = tmp_path / "run"
    render(checkpoint=str(SAMPLES / "minatar_breakout_ppo.pt2"), episodes=2, heatmap=True, videos="none",
           out=str(run), progress=False)
    push(run=str(run), repo="me/breakout", dry_run=str(tmp_path / "dry"), replay="worst")
    _check_card(tmp_path / "dry", run, "MinAtar/Breakout-v1")
    dry = tmp_path / "dry"
    assert (dry / "heatmap.png").read_bytes() == (run / "heatmap.png").read_bytes()
    assert (dry / "minatar_breakout_ppo.pt2").read_bytes() == (SAMPLES / "minatar_breakout_ppo.pt2").read_bytes()
    assert (dry / "replay.mp4").read_bytes() == (dry / "replay-worst.mp4").read_bytes()  # --replay worst
    text = (dry / "README.md").read_text()  # the replay, the statistics, the findings, the heatmap, the commands
    order = [text.index(s) for s in ('<video controls src="replay.mp4">', "## Statistics", "## Findings",
                                     "![where episodes failed](heatmap.png)", "## Reproduce", "rlviz render hf://")]
    assert order == sorted(order)


def test_package_to_hub_on_a_dummy_vec_env(cartpole, tmp_path):
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    from rlviz.integrations.sb3 import package_to_hub

    model = cartpole[0]
    eval_env = make_vec_env("CartPole-v1", n_envs=1, vec_env_cls=DummyVecEnv)  # no render_mode: the course's env
    out = package_to_hub(model=model, model_name="ppo-CartPole-v1", model_architecture="PPO", env_id="CartPole-v1",
                         eval_env=eval_env, repo_id="student/ppo-CartPole-v1", commit_message="Upload PPO",
                         n_eval_episodes=3, dry_run=str(tmp_path / "dry"))
    folder = Path(out.folder)
    assert {"README.md", "results.json", "config.json", "ppo-CartPole-v1.zip", "replay.mp4"} <= set(out.files)
    _, meta = _card(folder)
    assert meta["model-index"][0]["name"] == "PPO" and "CartPole-v1" in meta["tags"]
    info = probe_video(folder / "replay.mp4")
    game = gym.make("CartPole-v1", render_mode="rgb_array")
    game.reset(seed=0)
    width = game.render().shape[1]
    assert info.num_frames > 1 and info.width > width + 100  # the game and the agent's panels beside it (annotated)
    assert json.loads((folder / "results.json").read_text())["n_eval_episodes"] == 3


class _Hub(BaseHTTPRequestHandler):
    """The Hub's create_repo, preupload and commit endpoints; what is committed lands in ``server.files``."""

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, body: dict, status: int = 200):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.calls.append(self.path)
        base = f"http://127.0.0.1:{self.server.server_port}"
        if self.path == "/api/repos/create":
            req = json.loads(body)
            self.server.created.append(req)
            return self._reply({"url": f"{base}/{req.get('organization') or 'me'}/{req['name']}"})
        if self.path == "/api/validate-yaml":  # the README's metadata, checked as the Hub would (YAML, model-index)
            import yaml

            text = json.loads(body)["content"]
            meta = yaml.safe_load(text.split("---\n")[1]) if text.startswith("---\n") else None
            ok = isinstance(meta, dict) and isinstance(meta.get("model-index"), list)
            self.server.validated.append(ok)
            return self._reply({"warnings": []} if ok else {"error": "bad metadata"}, 200 if ok else 400)
        if "/preupload/" in self.path:
            files = json.loads(body)["files"]
            return self._reply({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                          for f in files]})
        if "/commit/" in self.path:
            for line in body.splitlines():
                item = json.loads(line)
                if item["key"] == "file":
                    self.server.files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                elif item["key"] == "header":
                    self.server.message = item["value"]["summary"]
            repo = self.path.split("/api/models/")[1].split("/commit/")[0]
            return self._reply({"commitUrl": f"{base}/{repo}/commit/{'a' * 40}", "commitOid": "a" * 40})
        return self._reply({"error": f"not a stand-in endpoint: {self.path}"}, 404)


@contextlib.contextmanager
def stand_in_hub(monkeypatch):
    """The stand-in Hub on 127.0.0.1, huggingface_hub pointed at it with a fake token; yields the server (its
    ``created``, ``files``, ``message``, ``validated`` say what it was sent)."""
    import huggingface_hub.constants as constants

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    server.calls, server.created, server.files, server.message, server.validated = [], [], {}, None, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_port}"
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
        yield server
    finally:
        server.shutdown()


def test_upload_commits_the_dry_run_files(cartpole, monkeypatch, tmp_path, capsys):
    _, _, run, _ = cartpole
    with stand_in_hub(monkeypatch) as server:
        assert main(["push", str(run), "--repo", "me/ppo-cartpole", "--commit-message", "rlviz test"]) == 0
        assert "pushed to" in capsys.readouterr().out
        push(run=str(run), repo="me/ppo-cartpole", dry_run=str(tmp_path / "dry"))
    assert server.created and server.created[0]["name"] == "ppo-cartpole"
    assert server.message == "rlviz test" and server.validated == [True]
    expected = {p.name: p.read_bytes() for p in (tmp_path / "dry").iterdir()}
    assert set(server.files) == set(expected)
    for name in ("replay.mp4", "replay-worst.mp4", "ppo-cartpole.zip", "report.html", "rlviz.json"):
        assert server.files[name] == expected[name]
    assert all(FAKE_TOKEN.encode() not in data for data in server.files.values())


def test_cleanrl_ppo_run(tmp_path):
    from test_cleanrl_scripts import PPOAgent, _save

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    state = _save(PPOAgent(4, 2), tmp_path / "ppo.cleanrl_model")
    run = tmp_path / "run"
    render(checkpoint=str(state), env="CartPole-v1", episodes=3, videos="none", out=str(run), progress=False)
    push(run=str(run), repo="me/cleanrl-cartpole", dry_run=str(tmp_path / "dry"))
    meta = _check_card(tmp_path / "dry", run, "CartPole-v1")
    assert meta["library_name"] == "cleanrl" and (tmp_path / "dry" / "ppo.cleanrl_model").is_file()


def test_cleanrl_jax_flax_params_run(tmp_path):
    """A CleanRL JAX script's flax params (dqn_jax.py's .cleanrl_model, read with no JAX) go up as saved."""
    from test_cleanrl_jax import fixture

    path, _ = fixture("dqn_jax", tmp_path / "runs")
    run = tmp_path / "run"
    render(checkpoint=str(path), episodes=2, videos="none", out=str(run), progress=False)
    push(run=str(run), repo="me/dqn-jax", dry_run=str(tmp_path / "dry"))
    meta = _check_card(tmp_path / "dry", run, json.loads((run / "summary.json").read_text())["env_id"])
    assert meta["library_name"] == "cleanrl" and (tmp_path / "dry" / path.name).read_bytes() == path.read_bytes()


def test_pettingzoo_run(tmp_path):
    pytest.importorskip("pettingzoo")
    torch = pytest.importorskip("torch")
    from torch import nn

    from rlviz.envs.recipe import pettingzoo_recipe
    from rlviz.sources.pt2.saving import save_checkpoint

    recipe = pettingzoo_recipe("pistonball_v6", {"n_pistons": 3, "max_cycles": 12, "continuous": False},
                               [("color_reduction_v0", {"mode": "B"}), ("resize_v1", {"x_size": 16, "y_size": 16}),
                                ("frame_stack_v1", {"stack_size": 3})])
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(768, 3))
    ckpt = save_checkpoint(tmp_path / "pistonball.pt2", net, env=recipe, kind="logits")
    run = tmp_path / "run"
    render(checkpoint=str(ckpt), episodes=2, videos="none", out=str(run), progress=False)
    push(run=str(run), repo="me/spread", dry_run=str(tmp_path / "dry"))
    _check_card(tmp_path / "dry", run, json.loads((run / "summary.json").read_text())["env_id"])
