"""Dict observations (#46): SB3 ``MultiInputPolicy`` agents loaded from their zips, rolled out, explained key by key
(image keys as maps, the other keys as bars; MiniGrid's image as the agent's own view), rendered and compared."""

from __future__ import annotations

import csv

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("minigrid")
sb3 = pytest.importorskip("stable_baselines3")

from _dict_envs import ImageDirection, check_agent_cell_heatmap  # noqa: E402

from rlviz.cli import main  # noqa: E402
from rlviz.media import probe_video  # noqa: E402

ENV = "MiniGrid-Empty-5x5-v0"
WRAPPER = "_dict_envs:ImageDirection"
VX, VY = 3, 5  # the view cell the one-cell probe reads: straight ahead, one cell in front of the agent


def _train(path, seed: int):
    import minigrid  # noqa: F401  (registers the ids)

    env = ImageDirection(gym.make(ENV))
    model = sb3.PPO("MultiInputPolicy", env, seed=seed, n_steps=64, batch_size=32, n_epochs=1, device="cpu")
    model.learn(64)
    model.save(path)
    return model


@pytest.fixture(scope="module")
def dict_zips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dict")
    models = [_train(folder / f"ppo_dict_{s}.zip", s) for s in (0, 1)]
    return [folder / f"ppo_dict_{s}.zip" for s in (0, 1)], models


def _features_column(vx: int, vy: int, c: int = 0) -> int:
    """The column of image cell (vx, vy) channel c in SB3's CombinedExtractor output (keys sorted: direction's
    one-hot [4], then the image flattened [7, 7, 3])."""
    return 4 + (vx * 7 + vy) * 3 + c


def _probe_zip(trained, path, keep: list[int]):
    """The trained model (a fresh copy of its zip) with its first layers reading only the feature columns ``keep``."""
    model = sb3.PPO.load(trained, device="cpu")
    with torch.no_grad():
        for net in (model.policy.mlp_extractor.policy_net, model.policy.mlp_extractor.value_net):
            w = net[0].weight
            mask = torch.zeros(w.shape[1], dtype=torch.bool)
            mask[keep] = True
            w[:, ~mask] = 0.0
    model.save(path)
    return path


def _env_mission(seed: int) -> str:
    env = gym.make(ENV)
    env.reset(seed=seed)
    return env.unwrapped.mission


def _render(zip_path, out, *extra, episodes: int = 20, heatmap: bool = True):
    """``rlviz render`` of a dict zip with a video of its first episode and gradient saliency (the heatmap only where
    a test reads it: it costs a figure)."""
    return main(["render", str(zip_path), "--env", ENV, "--wrapper", WRAPPER, "--episodes", str(episodes),
                 *(["--heatmap"] if heatmap else []), "--videos", "first:1", "--saliency", "gradient", "--out",
                 str(out), "--no-progress", *extra])


def test_the_loaded_dict_policy_is_sb3s_own(dict_zips):
    from rlviz import load_agent
    from rlviz.agent.obs import ObsAdapter
    from rlviz.envs.recipe import EnvRecipe, WrapperSpec

    (path, _), (model, _) = dict_zips
    agent = load_agent(str(path), env=EnvRecipe(ENV, wrappers=(WrapperSpec(WRAPPER),)))
    assert agent.policy.capabilities.obs_format == "flat"
    env = ImageDirection(gym.make(ENV))

    adapter = ObsAdapter(env.observation_space, agent.policy.capabilities.obs_format)
    obs = []
    o, _ = env.reset(seed=3)
    for _ in range(6):
        obs.append(o)
        o, *_ = env.step(env.action_space.sample())
    mine = agent.policy.evaluate(adapter.batch(obs))
    batch = {k: torch.as_tensor(np.stack([x[k] for x in obs])) for k in obs[0]}
    with torch.no_grad():
        theirs = model.policy.get_distribution(batch).distribution.probs.numpy()
        value = model.policy.predict_values(batch).numpy()[:, 0]
    np.testing.assert_allclose(mine.probs, theirs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mine.value, value, rtol=1e-5, atol=1e-6)


def test_acceptance_render_statistics_agent_cell_heatmap_video_and_keys(dict_zips, tmp_path):
    (path, _), _ = dict_zips
    out = tmp_path / "o"
    assert _render(path, out) == 0
    check_agent_cell_heatmap(out)  # the agent's cell on the step before each goal: a neighbour of (3, 3)
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    (video,) = (out / "videos").glob("*.mp4")
    n = int(rows[0]["length"]) + 1
    info = probe_video(video)
    assert info.num_frames == n and info.width > 160
    with np.load(video.with_suffix(".npz")) as data:
        sal, img, dirn = data["saliency"], data["saliency_key_image"], data["saliency_key_direction"]
        mission = str(data["mission"])
    # the mission string the wrapper dropped from the observation: the env's own, kept in the .npz
    assert mission == _env_mission(int(rows[0]["seed"])) == "get to the green goal square"
    assert sal.shape == (n, 4 + 147) and img.shape == (n, 7, 7) and dirn.shape == (n, 4)
    # each key's own: the direction's entries, the image's summed over its 3 channels, each scaled to its maximum
    np.testing.assert_allclose(dirn, sal[:, :4] / sal[:, :4].max(), rtol=1e-6)
    cells = sal[:, 4:].reshape(n, 7, 7, 3).sum(-1)
    np.testing.assert_allclose(img, cells / cells.max(), rtol=1e-5)


def test_one_cell_probe_puts_all_of_its_saliency_on_that_view_cell_and_none_on_direction(dict_zips, tmp_path):
    from rlviz.explain.partial_view import view_cell_to_grid

    (path, _), _ = dict_zips
    probe = _probe_zip(path, tmp_path / "probe.zip", [_features_column(VX, VY, 0)])
    out = tmp_path / "o"
    assert _render(probe, out, episodes=1, heatmap=False) == 0
    (video,) = (out / "videos").glob("*.mp4")
    with np.load(video.with_suffix(".npz")) as data:
        img, dirn = data["saliency_key_image"], data["saliency_key_direction"]
    assert np.all(dirn == 0) and img.max() == 1.0
    mass = img.reshape(len(img), -1).sum(1)
    assert np.all(img[:, VX, VY] == mass)  # every frame: all of it on that cell
    # the cell straight ahead of the agent at (1, 1) heading right (its first frame) is world cell (2, 1)
    assert view_cell_to_grid(VX, VY, (1, 1), 0) == (2, 1)


def test_direction_probe_saliency_is_on_the_direction_bars_only(dict_zips, tmp_path):
    (path, _), _ = dict_zips
    probe = _probe_zip(path, tmp_path / "probe.zip", [0, 1, 2, 3])
    out = tmp_path / "o"
    assert _render(probe, out, episodes=1, heatmap=False) == 0
    (video,) = (out / "videos").glob("*.mp4")
    with np.load(video.with_suffix(".npz")) as data:
        img, dirn = data["saliency_key_image"], data["saliency_key_direction"]
    assert np.all(img == 0) and dirn.max() == 1.0


def test_the_view_panel_draws_the_agents_view_tinted_where_the_saliency_is():
    import minigrid  # noqa: F401

    from rlviz.draw.panels_dict import DictSaliencyPanel, minigrid_view
    from rlviz.explain.dict_obs import key_slices

    env = ImageDirection(gym.make(ENV))
    obs, _ = env.reset(seed=0)
    slices = key_slices(env.observation_space)
    assert [(s.key, s.start, s.size, s.spec) for s in slices] == [("direction", 0, 4, ""), ("image", 4, 147, "hwc")]
    assert slices[0].names == ("direction=0", "direction=1", "direction=2", "direction=3")
    sal = np.zeros((1, 151), np.float32)
    sal[0, _features_column(VX, VY, 0) - 4 + 4] = 1.0
    observations = {"image": obs["image"][None], "direction": np.asarray([obs["direction"]])}
    panel = DictSaliencyPanel(sal, slices, (0, 0, 200), 18, 0.45, observations, ENV)
    canvas = np.zeros((panel.height, 200, 3), np.uint8)
    panel.draw(canvas, 0)
    (_, _, (y0, cell, view)), = [b for b in panel.boxes if b[0].key == "image"]
    assert view and cell == 24
    plain = minigrid_view(obs["image"], cell)
    drawn = canvas[y0 : y0 + 7 * cell, 0 : 7 * cell]
    changed = np.abs(drawn.astype(int) - plain.astype(int)).sum(-1) > 0
    rows, cols = np.nonzero(changed)
    # only the probed cell is tinted: view row VY, column VX (MiniGrid's image[x, y])
    assert set(rows // cell) == {VY} and set(cols // cell) == {VX}


def test_a_dict_zip_on_the_wrong_observations_says_both_in_one_line(dict_zips, tmp_path, capsys):
    (path, _), _ = dict_zips
    code = main(["render", str(path), "--env", ENV, "--episodes", "1", "--out", str(tmp_path / "a"),
                 "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and "trained on Dict observations {'direction': Discrete(4), 'image'" in err
    assert "mission: MissionSpace" in err and "--wrapper" in err and "() (None)" not in err
    code = main(["render", str(path), "--env", ENV, "--wrapper", "minigrid.wrappers:ImgObsWrapper", "--episodes",
                 "1", "--out", str(tmp_path / "b"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and "trained on Dict observations (direction, image)" in err and "(7, 7, 3) (uint8)" in err


def test_compare_of_two_dict_agents(dict_zips, tmp_path):
    (a, b), _ = dict_zips
    out = tmp_path / "o"
    assert main(["compare", str(a), str(b), "--env", ENV, "--wrapper", WRAPPER, "--episodes", "4",
                 "--videos", "first:1", "--saliency", "gradient", "--out", str(out), "--no-progress"]) == 0
    assert (out / "comparison.json").exists()
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    assert len(rows) == 4
    for side in "ab":
        (npz,) = (out / "videos" / side).glob("*.npz")
        with np.load(npz) as data:
            assert data["saliency_key_image"].shape[1:] == (7, 7) and data["saliency_key_direction"].shape[1:] == (4,)
    (side_by_side,) = (out / "videos").glob("*.mp4")
    assert probe_video(side_by_side).num_frames > 1


@pytest.mark.parametrize("channels_first", [False, True])
def test_a_bare_view_agents_saliency_is_drawn_on_its_view_not_over_the_full_render(channels_first):
    """ImgObsWrapper agents (observations [7, 7, 3], or [3, 7, 7] as SB3 trains them): the 7x7 egocentric map is
    drawn on the agent's view beside the render; the full render itself is left as it is."""
    import minigrid  # noqa: F401
    from minigrid.wrappers import ImgObsWrapper

    from rlviz.draw.compose import Compositor
    from rlviz.draw.panels_dict import DictSaliencyPanel, agent_in_render, minigrid_view
    from rlviz.episode.trace import EpisodeInternals, EpisodeTrace
    from rlviz.explain.partial_view import view_cell_to_grid

    env = ImgObsWrapper(gym.make(ENV, render_mode="rgb_array"))
    obs, _ = env.reset(seed=0)
    frame = env.render()
    n = 2
    observations = np.stack([obs.transpose(2, 0, 1) if channels_first else obs] * n)
    trace = EpisodeTrace(np.stack([frame] * n), observations, np.zeros(n - 1, np.int64), np.zeros(n - 1, np.float32),
                         None, False, True, tuple(str(a) for a in range(7)), 0, 0, 10.0, ENV)
    sal = np.zeros((n, 7, 7), np.float32)
    sal[:, VX, VY] = 1.0  # MiniGrid's image[x, y]: the cell ahead of the agent
    probs = np.full((n, 7), 1 / 7, np.float32)
    internals = EpisodeInternals(np.log(probs), probs, np.zeros(n, np.float32), "actor_critic",
                                 entropy=np.ones(n, np.float32), returns_to_go=np.zeros(n, np.float32), gamma=0.99,
                                 saliency=sal, saliency_label="gradient")
    comp = Compositor(trace, internals)
    assert isinstance(comp.features, DictSaliencyPanel)
    # on the full render, only the world cell of that view cell is tinted: the agent at (1, 1) heading right
    # (found in the render), the cell ahead of it (2, 1): pixels 64..95 x 32..63 (no 7x7 tint stretched over it)
    assert agent_in_render(frame) == ((1, 1), 0) and view_cell_to_grid(VX, VY, (1, 1), 0) == (2, 1)
    ys, xs = np.nonzero(np.abs(comp.game_frame(0).astype(int) - frame.astype(int)).sum(-1))
    assert len(ys) and set(ys // 32) == {1} and set(xs // 32) == {2}
    img = comp.render(0)
    ((s, _, (y0, cell, view)),) = comp.features.boxes
    assert view and s.key == "image"
    x0 = comp.features.x
    drawn = img[y0 : y0 + 7 * cell, x0 : x0 + 7 * cell].astype(int)
    rows, cols = np.nonzero(np.abs(drawn - minigrid_view(obs, cell).astype(int)).sum(-1) > 0)
    assert len(rows) and set(rows // cell) == {VY} and set(cols // cell) == {VX}


@pytest.mark.parametrize("agent_dir", [0, 1, 2, 3])
def test_the_agent_is_found_in_the_full_render_beside_a_red_ball(agent_dir):
    from minigrid.core.world_object import Ball

    from rlviz.draw.panels_dict import agent_in_render

    env = gym.make("MiniGrid-Empty-16x16-v0", render_mode="rgb_array")
    env.reset(seed=0)
    u = env.unwrapped
    u.agent_pos, u.agent_dir = np.array((8, 7)), agent_dir
    u.grid.set(9, 7, Ball("red"))  # red, like the agent, in the cell beside it
    assert agent_in_render(env.render()) == ((8, 7), agent_dir)
    u.agent_pos = np.array((1, 1))
    assert agent_in_render(env.render(), tile=32) == ((1, 1), agent_dir)


def _record_with_annotations(folder, monkeypatch, mission: bool):
    """Five steps of MiniGrid-Empty-5x5 through RecordEpisode with the loop's logits (its ImgObsWrapper drops the
    mission from the observation); ``mission=False``: as if the env had none."""
    from minigrid.wrappers import ImgObsWrapper

    import rlviz.envs.env_facts as families
    from rlviz import RecordEpisode

    if not mission:
        monkeypatch.setattr(families, "env_mission", lambda env: "")
    env = RecordEpisode(ImgObsWrapper(gym.make(ENV, render_mode="rgb_array")), folder, episode_trigger=lambda k: True)
    env.reset(seed=4)
    for a in (2, 2, 1, 2, 0):
        env.annotate(logits=np.linspace(-1.0, 1.0, 7), value=0.5)
        env.step(a)
    env.close()
    monkeypatch.undo()
    return env.last_video_path


def test_record_episode_draws_and_keeps_the_mission_the_wrapper_dropped(tmp_path, monkeypatch):
    from rlviz.media import read_video

    told = _record_with_annotations(tmp_path / "told", monkeypatch, True)
    plain = _record_with_annotations(tmp_path / "plain", monkeypatch, False)
    with np.load(told.with_suffix(".npz")) as data:
        assert str(data["mission"]) == _env_mission(4) == "get to the green goal square"
    with np.load(plain.with_suffix(".npz")) as data:
        assert "mission" not in data.files
    a, b = next(iter(read_video(plain))), next(iter(read_video(told)))
    assert a.shape[1] == b.shape[1] and a.shape[0] < b.shape[0]  # (the band makes the canvas taller)
    # the band under the panel's header (3 text lines), one text line high
    lh = _line_height()
    px, header, band = a.shape[1] - 400, 12 + 3 * lh, lh + 4
    assert np.abs(a[:header, px:].astype(int) - b[:header, px:]).mean() < 2.0  # the same header
    told_band = b[header : header + band, px:].astype(int)
    assert np.abs(told_band - a[header : header + band, px:]).mean() > 5.0  # text where the plain panel has none
    # the rest of the panel moved down by the band: the action bars and the value plot alike
    rest = slice(header + band, header + band + 200)
    assert np.abs(b[rest, px:].astype(int) - a[header : header + 200, px:]).mean() < 3.0


def _line_height() -> int:
    """A text line of the panel in pixels (the compositor's: its font at scale 0.45, plus 6)."""
    import cv2

    from rlviz.draw.style import FONT

    (_, th), base = cv2.getTextSize("Ag", FONT, 0.45, 1)
    return th + base + 6
