"""``rlviz render`` on PettingZoo env ids (rlviz.jobs.render_agents, rlviz.evaluate.rollouts.agents).

Two agents trained for seconds here on SuperSuit-vectorised pistonball (4 pistons, 16x16 grey frames stacked 3,
max_cycles 20): a shared-parameter torch actor-critic in the shape of PettingZoo's CleanRL tutorial (one network for
every piston, a few policy-gradient updates) and an SB3 PPO trained on ``concat_vec_envs_v1(..., "stable_baselines3")``
as PettingZoo's SB3 tutorial does. Each is rendered with ``--episodes 20 --heatmap --videos first:1 --saliency
gradient``; the numbers are read back from the files and checked against one another (summary.json against
episodes.csv, the video's frames against the episode's steps, the saliency's decisions against the agent's length).
connect_four (an AEC game with action masks) renders with its statistics.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pymunk")
ss = pytest.importorskip("supersuit")
torch = pytest.importorskip("torch")

from rlviz.cli import main  # noqa: E402
from rlviz.envs.pettingzoo_envs import make_agents_env  # noqa: E402
from rlviz.envs.recipe import EnvRecipe, WrapperSpec, pettingzoo_recipe  # noqa: E402
from rlviz.errors import EnvError, UsageError  # noqa: E402
from rlviz.evaluate.rollouts.agents import play_episode, rollout_agents  # noqa: E402
from rlviz.jobs.render import render  # noqa: E402
from rlviz.media import probe_video, read_video  # noqa: E402
from rlviz.sources import load_agent  # noqa: E402
from rlviz.sources.pt2.saving import save_checkpoint  # noqa: E402

PISTONS, CYCLES, SIZE, STACK = 4, 20, 16, 3
AGENTS = [f"piston_{i}" for i in range(PISTONS)]
PREPROCESS = [("color_reduction_v0", {"mode": "B"}), ("resize_v1", {"x_size": SIZE, "y_size": SIZE}),
              ("frame_stack_v1", {"stack_size": STACK})]


def _recipe() -> EnvRecipe:
    return pettingzoo_recipe("pistonball_v6", {"n_pistons": PISTONS, "max_cycles": CYCLES, "continuous": False},
                             PREPROCESS)


def _vec(base_class: str):
    env = make_agents_env(_recipe(), render_mode=None)  # the same env and preprocessing as the recipe
    env = ss.pettingzoo_env_to_vec_env_v1(env)
    return ss.concat_vec_envs_v1(env, 2, num_cpus=0, base_class=base_class)


class Agent(torch.nn.Module):
    """One network for every piston (shared parameters): stacked 16x16 frames -> 3 logits and a value."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(SIZE * SIZE * STACK, 32), torch.nn.Tanh())
        self.actor, self.critic = torch.nn.Linear(32, 3), torch.nn.Linear(32, 1)

    def forward(self, obs):
        h = self.body(obs / 255.0)
        return self.actor(h), self.critic(h).squeeze(-1)


def _train_torch_agent() -> Agent:
    """A few advantage-weighted policy-gradient updates on the vectorised game (CleanRL's loop shape)."""
    torch.manual_seed(0)
    envs, agent = _vec("gymnasium"), Agent()
    opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
    obs, _ = envs.reset(seed=0)
    for _ in range(3):
        logps, values, rewards = [], [], []
        for _ in range(16):
            logits, value = agent(torch.as_tensor(np.asarray(obs), dtype=torch.float32))
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
            obs, reward, _, _, _ = envs.step(action.numpy())
            logps.append(dist.log_prob(action))
            values.append(value)
            rewards.append(torch.as_tensor(np.asarray(reward), dtype=torch.float32))
        returns = torch.stack(rewards).flip(0).cumsum(0).flip(0)
        adv = returns - torch.stack(values)
        loss = -(torch.stack(logps) * adv.detach()).mean() + 0.5 * adv.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    envs.close()
    return agent


@pytest.fixture(scope="module")
def torch_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("torch-agent") / "pistonball.pt2"
    return save_checkpoint(path, _train_torch_agent(), env=_recipe())


@pytest.fixture(scope="module")
def sb3_zip(tmp_path_factory):
    sb3 = pytest.importorskip("stable_baselines3")
    folder = tmp_path_factory.mktemp("sb3-agent")
    torch.manual_seed(0)  # (SuperSuit's SB3 vector env has no seed(): PPO(seed=...) would call it)
    model = sb3.PPO("MlpPolicy", _vec("stable_baselines3"), n_steps=16, batch_size=32, n_epochs=1, device="cpu",
                    policy_kwargs={"net_arch": [32]})
    model.learn(256)
    model.save(folder / "pistonball_ppo.zip")
    recipe_file = folder / "env-recipe.json"
    recipe_file.write_text(_recipe().to_json())
    return folder / "pistonball_ppo.zip", recipe_file


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _check_run(out, recipe: EnvRecipe, episodes: int = 20):
    """Read the run folder back: per-agent statistics, the heatmap per agent, the video with one column per agent,
    the saliency per agent; every number checked against another file's."""
    summary = json.loads((out / "summary.json").read_text())
    rows = _rows(out / "episodes.csv")
    assert summary["multi_agent"] and summary["episodes"] == episodes == len(rows)
    assert summary["agents_list"] == AGENTS and list(summary["agents"]) == AGENTS
    for a in AGENTS:
        s = summary["agents"][a]
        rets = np.array([float(r[f"{a}_return"]) for r in rows])
        assert s["return"]["mean"] == pytest.approx(rets.mean(), rel=1e-12, abs=1e-12)
        assert s["terminations"] == sum(int(r[f"{a}_terminated"]) for r in rows)
        assert s["truncations"] == sum(int(r[f"{a}_truncated"]) for r in rows)
        assert s["failures"] == sum(int(r[f"{a}_failed"]) for r in rows)
        # every piston leaves each episode once: by the ball reaching the wall (terminated) or the time limit
        assert s["terminations"] + s["truncations"] == episodes
        assert all(1 <= int(r[f"{a}_length"]) <= CYCLES for r in rows)
    team = [float(r["team_return"]) for r in rows]
    assert team == pytest.approx([sum(float(r[f"{a}_return"]) for a in AGENTS) for r in rows])
    assert summary["team_return"]["mean"] == pytest.approx(np.mean(team))
    assert EnvRecipe.from_json((out / "env-recipe.json").read_text()) == recipe
    # the heatmap: one count grid per agent over pistonball's frame (560 x (2 walls + 4 pistons of 40 px))
    with np.load(out / "heatmap.npz") as hm:
        assert list(hm["object_names"]) == AGENTS
        assert hm["counts"].shape == (PISTONS, 560, 80 + 40 * PISTONS)
        assert int(hm["failures"]) == sum(summary["agents"][a]["failures_placed"] for a in AGENTS)
        assert int(hm["episodes"]) == episodes
    assert (out / "heatmap.png").stat().st_size > 0
    # the video of episode 0: its steps + 1 frames, and its .npz one column of numbers per agent
    video = out / "videos" / "first-episode-0.mp4"
    info = probe_video(video)
    steps = int(rows[0]["steps"])
    assert info.num_frames == steps + 1 == sum(1 for _ in read_video(video))
    with np.load(video.with_suffix(".npz")) as data:
        assert list(data["agents"]) == AGENTS and int(data["num_frames"]) == steps + 1
        for a in AGENTS:
            assert len(data[f"{a}/actions"]) == int(rows[0][f"{a}_length"])
    assert info.width >= PISTONS * 220 and info.width % 16 == 0 and info.height % 16 == 0  # a column per agent
    # saliency per agent: one map per decision, averaged over the agent's decisions of that episode
    with np.load(out / "videos" / "first-episode-0-saliency.npz") as sal:
        assert list(sal["agents"]) == AGENTS
        for a in AGENTS:
            assert int(sal[f"{a}/decisions"]) == int(rows[0][f"{a}_length"])
            assert sal[f"{a}/mean"].shape == (SIZE, SIZE) and np.all(sal[f"{a}/mean"] >= 0)
            assert np.all(sal[f"{a}/peak"] >= sal[f"{a}/mean"] - 1e-6) and sal[f"{a}/peak"].max() > 0
    return summary, rows


def test_render_of_a_shared_parameter_torch_agent(torch_checkpoint, tmp_path):
    out = tmp_path / "run"
    result = render(checkpoint=str(torch_checkpoint), episodes=8, heatmap=True, videos="first:1",
                    saliency="gradient", out=str(out))
    summary, rows = _check_run(out, _recipe(), episodes=8)
    _check_report(out, summary, rows)
    assert result.summary == summary and result.videos == (out / "videos" / "first-episode-0.mp4",)
    assert result.report_html == out / "report.html"
    assert "piston_3" in result.table


def test_render_of_an_sb3_model_trained_on_a_supersuit_vector_env(sb3_zip, tmp_path, capsys):
    zip_path, recipe_file = sb3_zip
    out = tmp_path / "run"
    code = main(["render", str(zip_path), "--env", str(recipe_file), "--episodes", "8", "--heatmap", "--videos",
                 "first:1", "--saliency", "gradient", "--out", str(out), "--tensorboard", str(tmp_path / "tb")])
    assert code == 0, capsys.readouterr().err
    # SB3 trained it through VecTransposeImage: the recipe the run records says so
    summary, rows = _check_run(out, replace(_recipe(), wrappers=_recipe().wrappers + (WrapperSpec("channels_first"),)),
                               episodes=8)  # (8 episodes: each render steps a pixel env and its CNN; 20 took 35 s)
    # the run logged to TensorBoard as a single-agent render does: the team's and each agent's numbers, the video, the
    # heatmap
    from conftest import tb_accumulator

    acc = tb_accumulator(tmp_path / "tb")
    (team,) = acc.Scalars("rlviz/team_return/mean")
    assert team.step == 0 and team.value == pytest.approx(summary["team_return"]["mean"], rel=1e-6)
    for a in AGENTS:
        (mean,) = acc.Scalars(f"rlviz/agents/{a}/return/mean")
        assert mean.value == pytest.approx(summary["agents"][a]["return"]["mean"], rel=1e-6, abs=1e-6)
    assert {"rlviz/first-episode-0", "rlviz/failure_heatmap"} <= set(acc.Tags()["images"])
    # the run folder replays: its recipe (with SB3's channels-first transpose) gives the same episodes
    again = tmp_path / "again"
    assert main(["render", str(zip_path), "--env", str(out / "env-recipe.json"), "--episodes", "8",
                 "--videos", "first:0", "--out", str(again)]) == 0
    first, second = _rows(out / "episodes.csv"), _rows(again / "episodes.csv")
    assert [r["team_return"] for r in second] == [r["team_return"] for r in first]
    assert second == first


def test_episodes_depend_only_on_the_seed(torch_checkpoint):
    agent = load_agent(torch_checkpoint)
    a = rollout_agents(agent.recipe, agent.policy, 6, seed=3)
    b = rollout_agents(agent.recipe, agent.policy, 6, seed=3)
    c = rollout_agents(agent.recipe, agent.policy, 3, seed=3)  # a shorter run: its episodes are the same ones
    assert [e.returns for e in a.episodes] == [e.returns for e in b.episodes]
    assert [e.returns for e in c.episodes] == [e.returns for e in a.episodes[:3]]
    assert [e.steps for e in a.episodes] != [0] * 6


class C4(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(84, 32), torch.nn.Tanh())
        self.actor, self.critic = torch.nn.Linear(32, 7), torch.nn.Linear(32, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.actor(h), self.critic(h).squeeze(-1)


def test_connect_four_with_action_masks_renders_with_statistics(tmp_path):
    torch.manual_seed(0)
    ckpt = save_checkpoint(tmp_path / "c4.pt2", C4(), env="connect_four_v3")
    out = tmp_path / "run"
    render(checkpoint=str(ckpt), episodes=12, heatmap=True, videos="first:0", out=str(out))
    summary = json.loads((out / "summary.json").read_text())
    rows = _rows(out / "episodes.csv")
    assert summary["agents_list"] == ["player_0", "player_1"]
    assert "connect_four_v3 is none of them" in summary["heatmap_note"] and not (out / "heatmap.npz").exists()
    for r in rows:
        r0, r1 = float(r["player_0_return"]), float(r["player_1_return"])
        assert (r0, r1) in ((1.0, -1.0), (-1.0, 1.0), (0.0, 0.0))  # a win, a loss or a draw: no illegal move
        assert int(r["player_0_failed"]) == (r0 < 0) and int(r["player_1_failed"]) == (r1 < 0)
        # the players alternate, player_0 first: 7..42 moves, player_0 makes half (rounded up)
        moves = int(r["player_0_length"]) + int(r["player_1_length"])
        assert 7 <= moves <= 42 and int(r["player_0_length"]) == (moves + 1) // 2
    assert summary["agents"]["player_0"]["failures"] == sum(float(r["player_0_return"]) < 0 for r in rows)


def test_mpe_positions_put_failures_on_the_frame():
    from rlviz.evaluate.failures.agent_positions import agent_positions

    pytest.importorskip("mpe2")
    env = make_agents_env(pettingzoo_recipe("simple_spread_v3", {"max_cycles": 5}))
    env.reset(seed=0)
    frame = env.render()
    where = agent_positions(env)
    assert sorted(where) == sorted(env.agents)
    for x, y in where.values():
        assert 0 <= x < frame.shape[1] and 0 <= y < frame.shape[0]
    env.close()


def test_unknown_ids_and_bad_recipe_files_are_one_line(tmp_path):
    with pytest.raises(EnvError, match="knights_archers_zombies_v99"):
        make_agents_env(pettingzoo_recipe("knights_archers_zombies_v99"))
    with pytest.raises(UsageError, match="not one rlviz rebuilds"):
        pettingzoo_recipe("pistonball_v6", {}, [("os_system_v0", {})])
    bad = tmp_path / "env-recipe.json"
    bad.write_text("{not json")
    from rlviz.envs.recipe import read_recipe_file

    with pytest.raises(UsageError, match="not a JSON env recipe") as err:
        read_recipe_file(str(bad))
    assert "\n" not in str(err.value)


def test_an_episode_replays_alone_in_a_game_that_keeps_state_across_resets():
    """knights-archers-zombies' episode after another on the same env differs from the same seed's on a new env:
    the rollout gives every episode a fresh env, so episode k of a run is episode k alone (as its video replays it)."""
    torch.manual_seed(1)
    recipe = pettingzoo_recipe("knights_archers_zombies_v11", {"max_cycles": 150})
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(135, 6))
    from rlviz.agent.callable_policy import as_policy

    policy = as_policy(net, make_agents_env(recipe).action_space("archer_0"))
    run = rollout_agents(recipe, policy, 4, seed=0, heatmap=True)
    for k in (1, 3):
        env = make_agents_env(recipe)
        alone = play_episode(env, policy, k, 0)
        env.close()
        assert alone.returns == run.episodes[k].returns and alone.steps == run.episodes[k].steps
    placed = sum(len(e.where) for e in run.episodes)
    assert run.heatmap is not None and run.heatmap.failures == placed
    assert placed == sum(sum(e.failed.values()) for e in run.episodes)  # every KAZ agent is placed when it fails


class Linear(torch.nn.Module):
    def __init__(self, obs: int, actions: int, scale: float):
        super().__init__()
        self.scale, self.pi = scale, torch.nn.Linear(obs, actions)

    def forward(self, x):
        return self.pi(x.flatten(1).float() / self.scale)


@pytest.mark.parametrize("env_id, kwargs, obs, actions", [
    ("simple_spread_v3", {"max_cycles": 15}, 18, 5),
    ("pistonball_v6", {"n_pistons": 3, "max_cycles": 15, "continuous": False}, 457 * 120 * 3, 3),
    ("connect_four_v3", {}, 84, 7)])
def test_the_games_that_reuse_one_env_reset_cleanly(env_id, kwargs, obs, actions):
    """RESETS_CLEANLY's games run their episodes on one env: episode k after k others must be episode k alone."""
    from rlviz.agent.callable_policy import as_policy
    from rlviz.evaluate.rollouts.agents import RESETS_CLEANLY

    if env_id == "simple_spread_v3":
        pytest.importorskip("mpe2")
    recipe = pettingzoo_recipe(env_id, kwargs)
    env = make_agents_env(recipe)
    assert type(env.unwrapped).__module__.startswith(RESETS_CLEANLY)
    torch.manual_seed(0)
    policy = as_policy(Linear(obs, actions, 255.0 if env_id == "pistonball_v6" else 1.0),
                       env.action_space(env.possible_agents[0]))
    env.close()
    run = rollout_agents(recipe, policy, 4, seed=2)
    for k in (0, 3):
        fresh = make_agents_env(recipe)
        alone = play_episode(fresh, policy, k, 2)
        fresh.close()
        assert alone.returns == run.episodes[k].returns and alone.steps == run.episodes[k].steps


def test_atari_pong_renders_where_its_rom_is_installed_else_one_line(tmp_path):
    pytest.importorskip("multi_agent_ale_py")
    recipe = pettingzoo_recipe("pong_v3", {"max_cycles": 30},
                               [("color_reduction_v0", {"mode": "full"}), ("resize_v1", {"x_size": 16, "y_size": 16})])
    try:
        env = make_agents_env(recipe)
    except EnvError as exc:  # no ROM here (rlviz downloads nothing): said in one line
        assert "rom" in str(exc).lower() and "\n" not in str(exc)
        return
    env.close()
    torch.manual_seed(0)
    ckpt = save_checkpoint(tmp_path / "pong.pt2", Linear(256, 6, 255.0), env=recipe, kind="logits")
    out = render(checkpoint=str(ckpt), episodes=2, videos="first:0", out=str(tmp_path / "run"))
    assert out.summary["agents_list"] == ["first_0", "second_0"] and out.summary["episodes"] == 2


def test_workers_give_the_same_episodes_and_heatmap_as_one_process(torch_checkpoint, tmp_path):
    """--workers 2 runs the episodes in two worker processes (seed-contiguous shards): episodes.csv, the per-agent
    statistics and the failure heatmap equal the one-process run's; --num-envs, which does not apply, gets a note."""
    runs = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        render(checkpoint=str(torch_checkpoint), episodes=7, heatmap=True, videos="first:0", workers=workers,
               seed=5, out=str(out))
        runs[workers] = out
    one, two = runs[1], runs[2]
    assert (one / "episodes.csv").read_text() == (two / "episodes.csv").read_text()
    assert len(_rows(one / "episodes.csv")) == 7
    s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (one, two))
    assert s1["agents"] == s2["agents"] and s1["team_return"] == s2["team_return"]
    assert s1["diagnostics"] == s2["diagnostics"]
    with np.load(one / "heatmap.npz") as h1, np.load(two / "heatmap.npz") as h2:
        assert np.array_equal(h1["counts"], h2["counts"]) and int(h1["episodes"]) == int(h2["episodes"]) == 7
        assert int(h1["failures"]) == int(h2["failures"])
    with pytest.warns(UserWarning, match="--num-envs 4 does not apply to a PettingZoo env"):
        render(checkpoint=str(torch_checkpoint), episodes=2, videos="first:0", num_envs=4, out=str(tmp_path / "n"))


def _check_report(out, summary, rows):
    """report.html of a multi-agent run: its numbers are summary.json's and episodes.csv's, its pictures and videos
    are the run's files."""
    import html as html_mod
    import re

    page = (out / "report.html").read_text()
    blob = re.search(r"<script type='application/json' id='rlviz-data'>(.*?)</script>", page, re.S).group(1)
    data = json.loads(blob.replace("<\\/", "</"))
    assert data["agents"] == summary["agents"] and data["team_return"] == summary["team_return"]
    run = data["runs"][0]
    assert run["columns"] == list(rows[0]) and len(run["rows"]) == len(rows)
    for got, row in zip(run["rows"], rows):  # every cell: the CSV's number (5 significant digits on the page)
        for value, (col, text) in zip(got, row.items()):
            assert value == pytest.approx(float(text), rel=1e-4, abs=1e-9), col
    table = re.search(r"<table class='summary agents'>(.*?)</table>", page, re.S).group(1)
    lines = re.findall(r"<tr data-agent='([^']+)'>(.*?)</tr>", table, re.S)
    assert [a for a, _ in lines] == AGENTS
    for a, cells in lines:
        values = [html_mod.unescape(c) for c in re.findall(r"<td>(.*?)</td>", cells)][1:]
        s = summary["agents"][a]
        want = [s["return"]["mean"], s["return"]["std"], s["return"]["min"], s["return"]["max"],
                s["length"]["mean"], s["terminations"], s["truncations"], s["failures"], s["failures_placed"]]
        assert values == [f"{v:.4g}" if isinstance(v, float) else str(v) for v in want]
        rets = [float(r[f"{a}_return"]) for r in rows]
        assert float(values[0]) == pytest.approx(np.mean(rets), rel=1e-3, abs=1e-6)
        assert int(values[7]) == sum(int(r[f"{a}_failed"]) for r in rows)
    assert len(re.findall(r"<div class='finding ", page)) == len(summary["diagnostics"])
    srcs = re.findall(r"src='([^']+)'", page)
    assert "heatmap.png" in srcs and "videos/first-episode-0.mp4" in srcs
    assert all((out / s).is_file() for s in srcs)
    assert "videos/first-episode-0-saliency.png" in srcs
