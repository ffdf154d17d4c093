"""Hardening 5 (#60) of the explorer and the render job's early checks: replays that are the run's (every option
that shapes an episode or its video; a replay that does not play as the run's table says is refused), a
multi-agent run in the explorer, and ``--videos failed-at`` checked before the rollouts and said when it selects
nothing. Videos are decoded back and compared pixel for pixel."""

from __future__ import annotations

import importlib.util
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from rlviz.cli import main
from rlviz.config import NOT_REPLAYED, ExploreConfig, RenderConfig, config_dict, episode_config
from rlviz.errors import RlvizError, UsageError
from rlviz.media import read_video

pytest.importorskip("werkzeug")
needs_mujoco = pytest.mark.skipif(importlib.util.find_spec("mujoco") is None, reason="needs mujoco (rlviz[dev])")
needs_minigrid = pytest.mark.skipif(importlib.util.find_spec("minigrid") is None, reason="needs minigrid (rlviz[dev])")

#: A recurrent agent on MiniGrid's image (ImgObsWrapper: [7, 7, 3]): its memory is a GRU's 16 units.
GRID_AGENT = '''
import torch
from torch import nn


class GridGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.gru = nn.Linear(147, 32), nn.GRU(32, 16)
        self.pi, self.v = nn.Linear(16, 7), nn.Linear(16, 1)

    def initial_state(self, batch):
        return torch.zeros(1, batch, 16)

    def step(self, obs, state):
        x = torch.tanh(self.body(obs.reshape(obs.shape[0], -1).float() / 5.0))
        out, h = self.gru(x.unsqueeze(0), state)
        return self.pi(out[0]), self.v(out[0])[:, 0], h
'''
GRID_ENV = "MiniGrid-Empty-5x5-v0"
GRID_FLAGS = ("--env", GRID_ENV, "--wrapper", "minigrid.wrappers:ImgObsWrapper", "--memory-window", "4",
              "--saliency", "gradient", "--episodes", "2", "--trust-checkpoint", "--no-progress")


def _grid_agent(folder: Path, seed: int, forward: float = 1.0) -> tuple[Path, str]:
    """(the state_dict file, the --model name) of a GridGRU with weights drawn from ``seed`` that turns and moves
    forward (log-odds ``forward`` against each turn): it reaches the goal after a varying number of steps."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "grid_agents.py").write_text(GRID_AGENT)
    ns: dict = {}
    exec(compile(GRID_AGENT, "grid_agents.py", "exec"), ns)
    torch.manual_seed(seed)
    module = ns["GridGRU"]()
    for p in module.parameters():
        nn.init.normal_(p, 0, 0.8)
    with torch.no_grad():
        module.pi.weight.mul_(0.1)
        module.pi.bias.copy_(torch.tensor([0.0, 0.0, forward, -4.0, -4.0, -4.0, -4.0]))
    path = folder / f"grid-{seed}.pt"
    torch.save(module.state_dict(), path)
    return path, f"{folder / 'grid_agents.py'}:GridGRU"


#: A recurrent agent on InvertedPendulum-v5 (observations [B, 4]) and the wrapper it acts through: rlviz's recurrent
#: agents take Discrete actions (rlviz.agent.recurrent; a .pt2 holds no recurrent state), so a wrapper of the user's
#: turns the pendulum's Box force into 3 pushes.
PUSH_AGENT = '''
import gymnasium as gym
import numpy as np
import torch
from torch import nn


class PushGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.gru = nn.Linear(4, 16), nn.GRU(16, 8)
        self.pi, self.v = nn.Linear(8, 3), nn.Linear(8, 1)

    def initial_state(self, batch):
        return torch.zeros(1, batch, 8)

    def step(self, obs, state):
        out, h = self.gru(torch.tanh(self.body(obs)).unsqueeze(0), state)
        return self.pi(out[0]), self.v(out[0])[:, 0], h


class ThreePushes(gym.ActionWrapper):
    def __init__(self, env):
        super().__init__(env)
        self.action_space = gym.spaces.Discrete(3)

    def action(self, action):
        return np.array([int(action) - 1.0], dtype=np.float32)
'''


def _frames(path: Path) -> list[np.ndarray]:
    return [np.asarray(f) for f in read_video(path)]


def _explorer_replay(run: Path, n: int, **options) -> dict[str, Path]:
    """Episode ``n`` as the explorer renders it on request (its cache): {variant: MP4}."""
    from rlviz.explore.server import open_run

    index, cache = open_run(ExploreConfig(out=run, port=0, browser=False, **options))
    cache.render(n)
    return {v: cache.video(n, v) for v in cache.variants}


def _same_video(replay: Path, reference: Path) -> None:
    """Frame for frame, pixel for pixel; and the per-step numbers of the two .npz files."""
    got, want = _frames(replay), _frames(reference)
    assert len(got) == len(want) and got[0].shape == want[0].shape
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    with np.load(replay.with_suffix(".npz")) as a, np.load(reference.with_suffix(".npz")) as b:
        assert sorted(a.files) == sorted(b.files)
        for k in a.files:
            assert np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind == "f"), k


# -- #60 item 3: the replay is the run's ------------------------------------------------------------------------
def test_episode_config_replays_every_option_that_shapes_an_episode():
    """Every RenderConfig option not declared NOT_REPLAYED comes back from the run's recorded options (a new option
    is replayed unless it is declared not to shape the episode); the run's trust, device, workers never do."""
    shaped = RenderConfig(checkpoint="agent.pt", env="MiniGrid-Empty-5x5-v0", model="m.py:Net",
                          wrapper=("minigrid.wrappers:ImgObsWrapper",), vecnormalize="vn.pkl", episodes=7,
                          heatmap=True, seed=3, saliency="gradient", saliency_target="value", memory_window=4,
                          greedy=True, num_envs=2, fail_on="termination", objects="pixels", camera="track,0",
                          attention=False, gamma=0.9, trust_checkpoint=True, device="cpu", workers=2, threads=2,
                          log_scale=True, strict=True, out="elsewhere", overwrite=True, videos="worst:2")
    replay = episode_config(config_dict(shaped), 5, device="cuda")
    for f in fields(RenderConfig):
        if f.name not in NOT_REPLAYED:
            assert getattr(replay, f.name) == getattr(shaped, f.name), f.name
    assert replay.videos == "episode:5" and replay.device == "cuda"
    assert (replay.trust_checkpoint, replay.workers, replay.threads, replay.out) == (False, 1, 1, "rlviz-out")
    from rlviz.explore.replay import REPLAY_OPTIONS

    assert {"wrapper", "camera", "memory_window", "saliency"} <= set(REPLAY_OPTIONS)


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory):
    """A MiniGrid ImgObsWrapper run of a recurrent agent with --memory-window 4 and --saliency (no videos)."""
    folder = tmp_path_factory.mktemp("grid")
    agent, model = _grid_agent(folder / "agent", 0)
    run = folder / "run"
    assert main(["render", str(agent), "--model", model, *GRID_FLAGS, "--videos", "none", "--out", str(run)]) == 0
    return folder, agent, model, run


@needs_minigrid
def test_the_replay_of_a_wrapper_memory_window_saliency_run_is_its_videos_episode_n(grid_run):
    """A MiniGrid ImgObsWrapper run (every episode used to fail in the explorer: the wrapper was dropped) with a
    memory window of 4 (the replay drew 16) and saliency: the explorer's episode 1 equals ``--videos episode:1`` of
    the same command frame for frame, and its .npz number for number (the 4-step memory window included)."""
    folder, agent, model, run = grid_run
    ref = folder / "ref"
    assert main(["render", str(agent), "--model", model, *GRID_FLAGS, "--videos", "episode:1", "--out", str(ref)]) == 0
    videos = _explorer_replay(run, 1, trust_checkpoint=True)
    assert set(videos) == {"", "plain"}  # with --saliency, the page can turn the overlay off
    _same_video(videos[""], ref / "videos" / "episode-1-episode-0.mp4")


@needs_minigrid
def test_a_replay_by_another_agent_is_refused_naming_the_tables_numbers(grid_run):
    """``rlviz explore RUN --checkpoint OTHER``: an episode the other agent plays differently from the run's row is
    refused in one line naming both (it was shown silently as the row's episode)."""
    folder, _, _, run = grid_run
    other, _ = _grid_agent(folder / "other", 7, forward=3.0)
    with pytest.raises(UsageError, match=r"episode 0 replays as \d+ steps, return .* where the run's table says "
                                         r"\d+ steps, return"):
        _explorer_replay(run, 0, checkpoint=str(other), trust_checkpoint=True)


@needs_mujoco
def test_the_replay_of_a_run_with_wrapper_camera_memory_window_and_saliency_is_its_videos_episode_n(tmp_path,
                                                                                                  monkeypatch):
    """One run with the four options at once: a recurrent agent (a GRU, --model) on InvertedPendulum through a
    --wrapper of the user's (3 pushes: without it the agent is refused), --camera default,free (two views side by
    side: the replay drew the env's own view only), --memory-window 4 (the replay drew 8 columns) and --saliency
    gradient: the explorer's episode 1 equals ``--videos episode:1`` of the same command frame for frame (decoded),
    and its .npz key for key (memory and saliency included)."""
    from rlviz.envs.recipe import EnvRecipe

    (tmp_path / "h5_push.py").write_text(PUSH_AGENT)
    monkeypatch.chdir(tmp_path)  # (--wrapper h5_push:ThreePushes is found in the working folder, as typed)
    ns: dict = {}
    exec(compile(PUSH_AGENT, "h5_push.py", "exec"), ns)
    torch.manual_seed(0)
    module = ns["PushGRU"]()
    for p in module.parameters():
        nn.init.normal_(p, 0, 0.8)
    torch.save(module.state_dict(), tmp_path / "push.pt")
    recipe = tmp_path / "pendulum-96.json"
    recipe.write_text(EnvRecipe("InvertedPendulum-v5", env_kwargs={"width": 96, "height": 96}).to_json())
    flags = ["--model", f"{tmp_path / 'h5_push.py'}:PushGRU", "--env", str(recipe), "--trust-checkpoint",
             "--episodes", "2", "--camera", "default,free", "--wrapper", "h5_push:ThreePushes", "--memory-window", "4",
             "--saliency", "gradient", "--no-progress"]
    agent = str(tmp_path / "push.pt")
    assert main(["render", agent, *flags, "--videos", "none", "--out", str(tmp_path / "run")]) == 0
    assert main(["render", agent, *flags, "--videos", "episode:1", "--out", str(tmp_path / "ref")]) == 0
    videos = _explorer_replay(tmp_path / "run", 1, trust_checkpoint=True)
    assert set(videos) == {"", "plain"}
    reference = tmp_path / "ref" / "videos" / "episode-1-episode-0.mp4"
    with np.load(reference.with_suffix(".npz")) as z:
        assert z["memory"].shape[1] == 8 and z["saliency"].shape[1] == 4 and len(z["actions"]) > 4
        assert set(np.unique(z["actions"])) <= {0, 1, 2}
    _same_video(videos[""], reference)


def test_a_run_naming_an_unknown_wrapper_replays_only_with_trust(tmp_path):
    """A wrapper the run's rlviz-run.json names is imported by the replay only when it is a known one or the
    explorer was given --trust-checkpoint (a folder is not consent)."""
    import json

    from rlviz.explore.replay import EpisodeRenderer

    options = json.loads(json.dumps(config_dict(RenderConfig(checkpoint=str(tmp_path / "a.pt"), env="CartPole-v1",
                                                              wrapper=("this:s",)))))
    with pytest.raises(RlvizError, match="this:s"):
        EpisodeRenderer(options)
    assert EpisodeRenderer(options, trust=True).options["wrapper"] == ["this:s"]
    known = {**options, "wrapper": ["minigrid.wrappers:ImgObsWrapper"]}
    assert EpisodeRenderer(known).options["wrapper"] == ["minigrid.wrappers:ImgObsWrapper"]


# -- #60 item 5: switching episodes in the browser -----------------------------------------------------------------
@pytest.fixture(scope="module")
def minatar_small(tmp_path_factory):
    """Three episodes of the MinAtar sample (no videos: the explorer renders them on request)."""
    from _explore import SAMPLE

    out = tmp_path_factory.mktemp("minatar-small") / "run"
    assert main(["render", str(SAMPLE), "--episodes", "3", "--videos", "none", "--out", str(out), "--no-progress"]) == 0
    return out


def test_switching_between_three_episodes_logs_no_console_error(minatar_small, tmp_path_factory):
    """Open episode 0, play it on to a later step, open episode 1 while its video still fires events, then 2 and
    back to 0: the browser's console holds no error (it raised ``Cannot read properties of null (reading 'T')``:
    the old video's events reached a step readout that read the next episode's trace while it was still null)."""
    from _explore import serving
    from test_report import _browser, _wait

    driver = _browser(tmp_path_factory.mktemp("chromium-switch"))
    try:
        with serving(minatar_small) as srv:
            driver.get(srv.base + "/")
            _wait(driver, "return window.exploreReady === true", 60)
            driver.get_log("browser")  # (what the page logged while loading: not this test's)
            for n in (0, 1, 2, 0):
                driver.execute_script("explore.open(arguments[0])", n)
                _wait(driver, "return window.exploreEpisodeReady === true && explore.n === arguments[0]", 600, n)
                # (the play button, as a user presses it: a play() the next episode's load cuts short is the page's)
                driver.execute_script("explore.seek(5); document.getElementById('play').click()")
                _wait(driver, "return explore.trace.t >= 5", 60)
            logs = driver.get_log("browser")
    finally:
        driver.quit()
    assert [e for e in logs if e["level"] == "SEVERE"] == [], logs


# -- #60 item 11: --videos failed-at ----------------------------------------------------------------------------
def _no_rollout(*args, **kwargs):
    raise AssertionError("the rollouts ran before the check")


def test_failed_at_outside_the_heatmap_or_without_it_is_refused_before_the_rollouts(tmp_path, monkeypatch, capsys):
    """``failed-at:10,0`` on MinAtar's 10x10 heatmap (and failed-at without --heatmap) is a usage error from the
    job's early check: the rollouts never start (it was refused after all of them)."""
    import importlib

    from _explore import SAMPLE

    monkeypatch.setattr(importlib.import_module("rlviz.jobs.render"), "run_rollouts", _no_rollout)
    monkeypatch.setattr(importlib.import_module("rlviz.jobs.compare"), "run_rollouts", _no_rollout)
    base = ["render", str(SAMPLE), "--episodes", "3000", "--no-progress"]
    assert main([*base, "--heatmap", "--videos", "failed-at:10,0", "--out", str(tmp_path / "a")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "--videos failed-at:10,0: the pixel is outside the failure heatmap's 10x10 frame (MinAtar/Breakout-v1); "
        "expected x < 10, y < 10.")
    assert main([*base, "--videos", "failed-at:3,4", "--out", str(tmp_path / "b")]) == 2
    assert "failed-at:3,4 selects by the failure heatmap; add --heatmap" in capsys.readouterr().err
    assert main(["compare", str(SAMPLE), str(SAMPLE), "--episodes", "3000", "--no-progress", "--heatmap",
                 "--videos", "failed-at:0,10", "--out", str(tmp_path / "c")]) == 2
    assert "--videos failed-at:0,10: the pixel is outside" in capsys.readouterr().err
    assert not any((tmp_path / n).exists() for n in "abc")
    from rlviz.evaluate.rollouts.rollout import heatmap_shape

    assert heatmap_shape("MinAtar/Breakout-v1") == (10, 10)  # (the size the check read, before any rollout)


def test_failed_at_a_pixel_where_nothing_failed_says_so(tmp_path):
    """``failed-at:X,Y`` on a pixel no failure touched: exit 0 and no video as before, and now a line saying so
    (with the hottest cell to try)."""
    from _explore import SAMPLE

    from rlviz.evaluate.failures.heatmap import FailureHeatmap

    out = tmp_path / "run"
    with pytest.warns(UserWarning, match="failed-at:0,0") as said:
        assert main(["render", str(SAMPLE), "--episodes", "3", "--heatmap", "--videos", "failed-at:0,0", "--out",
                     str(out), "--no-progress"]) == 0
    err = " ".join(str(w.message) for w in said)
    h = FailureHeatmap.load(out / "heatmap.npz")
    assert h.episodes_at(0, 0) == [] and h.failures > 0
    hy, hx = np.unravel_index(int(np.argmax(h.total())), h.total().shape)
    assert ("--videos failed-at:0,0: no episode's failures put an object on pixel (0, 0) of the failure heatmap "
            f"({h.failures} failure(s) in all; the most are at failed-at:{hx},{hy}), so it selects no video.") in err
    assert not list(out.rglob("*.mp4"))


# -- #60 item 4: a multi-agent run in the explorer ----------------------------------------------------------------
def test_a_multi_agent_run_opens_with_histograms_and_its_episodes_are_its_videos(tmp_path, tmp_path_factory):
    """A PettingZoo (pistonball) run: the page draws its histograms (the team return, the env's steps: they were
    empty) and an episode opens as ``rlviz render --videos episode:N`` draws it, one panel column per agent, frame
    for frame (it failed to open: the single-agent replay cannot play a PettingZoo env); its trace answers."""
    pytest.importorskip("pymunk")
    pytest.importorskip("supersuit")
    import json
    import urllib.request

    from _explore import serving
    from test_render_agents import Agent, _recipe
    from test_report import _browser, _wait

    from rlviz.sources.pt2.saving import save_checkpoint

    torch.manual_seed(0)
    agent = save_checkpoint(tmp_path / "pistons.pt2", Agent(), env=_recipe())
    flags = ["--episodes", "2", "--no-progress"]
    assert main(["render", str(agent), *flags, "--videos", "none", "--out", str(tmp_path / "run")]) == 0
    assert main(["render", str(agent), *flags, "--videos", "episode:1", "--out", str(tmp_path / "ref")]) == 0
    with serving(tmp_path / "run") as srv:
        srv.cache.render(1)
        got = _frames(srv.cache.video(1))
        want = _frames(tmp_path / "ref" / "videos" / "episode-episode-1.mp4")
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
        with urllib.request.urlopen(srv.base + "/api/episode/1/trace") as r:  # noqa: S310 - the test's own server
            trace = json.loads(r.read())
        assert trace["T"] == len(want) - 1 and trace["episode"]["episode"] == 1
        driver = _browser(tmp_path_factory.mktemp("chromium-agents"))
        try:
            driver.get(srv.base + "/")
            _wait(driver, "return window.exploreReady === true", 60)
            bars = driver.execute_script("return [document.querySelectorAll('#hist-return .bar').length, "
                                         "document.querySelectorAll('#hist-length .bar').length]")
            driver.execute_script("explore.open(1)")
            _wait(driver, "return window.exploreEpisodeReady === true", 300)
            title = driver.execute_script("return document.getElementById('viewer-title').textContent")
            logs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        finally:
            driver.quit()
    assert bars[0] > 0 and bars[1] > 0
    assert f"{len(want) - 1} steps" in title and "return" in title, title
    assert logs == []
