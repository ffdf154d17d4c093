"""Multi-agent panel videos (rlviz.record.agents.pettingzoo, record.agents_video, draw.panels_agents): every number in the
``.npz`` derived from the toy env's known rewards and the loop's annotations, the video decoded back (frame count,
size, the shared frame, the gone agent greyed out), policies evaluated per agent, masks of an AEC game."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from _marl_envs import Tag  # noqa: E402
from pettingzoo.classic import connect_four_v3  # noqa: E402
from pettingzoo.utils import parallel_to_aec  # noqa: E402

from rlviz.draw.panels_agents import AgentsLayout, fit_thumbnail, is_image_observation  # noqa: E402
from rlviz.errors import UsageError  # noqa: E402
from rlviz.media import probe_video, read_video  # noqa: E402
from rlviz.record import RecordOptions  # noqa: E402
from rlviz.record.agents.pettingzoo import RecordAECEpisode, RecordParallelEpisode  # noqa: E402
from rlviz.record.agents.video import AgentsOptions  # noqa: E402

COL = AgentsLayout().column_width


def _logits(step: int, i: int) -> np.ndarray:
    return np.array([step, i, -1.0], np.float32)


def _play(env, annotate=None, steps: int = 6):
    """One episode of Tag: agent i takes (step + i) % 3; ``annotate(env, step)`` before each step."""
    obs, _ = env.reset(seed=5)
    s = 0
    while env.agents:
        if annotate is not None:
            annotate(env, s)
        env.step({a: (s + int(a[-1])) % 3 for a in env.agents})
        s += 1
    env.close()
    return env.last_video_path


def _dicts(env, s):
    env.annotate(logits={a: _logits(s, int(a[-1])) for a in env.agents},
                 value={a: 10.0 * s + int(a[-1]) for a in env.agents})


def test_annotated_parallel_episode_has_each_agents_numbers(tmp_path):
    env = RecordParallelEpisode(Tag(n=3, leave=(1, 3), length=6), tmp_path, episode_trigger=lambda e: True)
    path = _play(env, _dicts)
    assert path.name == "rl-video-episode-0.mp4"
    info = probe_video(path)
    assert info.num_frames == 7  # the reset's frame and one per step
    assert (info.width, info.height) == (-(-(640 + 3 * COL) // 16) * 16, 480)  # 24x32 frames x20, three columns
    z = np.load(path.with_suffix(".npz"))
    assert list(z["agents"]) == ["agent_0", "agent_1", "agent_2"] and int(z["num_frames"]) == 7
    for i in range(3):
        a = f"agent_{i}"
        k = 3 if i == 1 else 6  # agent_1 leaves with step 3
        np.testing.assert_array_equal(z[f"{a}/decision_frames"], np.arange(k))
        assert int(z[f"{a}/gone_at"]) == (3 if i == 1 else -1)
        actions = (np.arange(k) + i) % 3
        np.testing.assert_array_equal(z[f"{a}/actions"], actions)
        np.testing.assert_array_equal(z[f"{a}/rewards"], (i + 1) * actions)
        frame_rewards = np.zeros(7)
        frame_rewards[1: k + 1] = (i + 1) * actions
        np.testing.assert_array_equal(z[f"{a}/frame_rewards"], frame_rewards)
        logits = np.stack([_logits(s, i) for s in range(k)] + [_logits(k - 1, i)])  # last row: the last step's
        np.testing.assert_array_equal(z[f"{a}/logits"], logits)
        e = np.exp(logits - logits.max(1, keepdims=True))
        np.testing.assert_allclose(z[f"{a}/probs"], e / e.sum(1, keepdims=True), rtol=1e-6)
        np.testing.assert_array_equal(z[f"{a}/value"], [10.0 * s + i for s in range(k)] + [10.0 * (k - 1) + i])
        assert bool(z[f"{a}/truncated"]) and not bool(z[f"{a}/terminated"])


def test_the_video_shows_the_shared_frame_and_greys_out_the_gone_agent(tmp_path):
    env = RecordParallelEpisode(Tag(n=3, leave=(1, 3), length=6), tmp_path, episode_trigger=lambda e: True)
    frames = list(read_video(_play(env, _dicts)))
    for t, frame in enumerate(frames):
        game = frame[8:472, 8:632].astype(np.float64)  # the 24x32 render filled with 20 * t, upscaled x20
        assert abs(game.mean() - min(20 * t, 120)) < 3, t
    cell = [np.asarray(f[40:400, 640 + COL: 640 + 2 * COL], np.float64).mean() for f in frames]  # agent_1's column
    assert cell[3] < 0.6 * cell[2] and cell[6] < 0.6 * cell[2]  # gone from frame 3 on
    other = [np.asarray(f[40:400, 640: 640 + COL], np.float64).mean() for f in frames]  # agent_0's stays lit
    assert other[4] > 0.8 * other[2]


def test_annotations_as_rows_follow_env_agents(tmp_path):
    env = RecordParallelEpisode(Tag(n=3, leave=(1, 3), length=6), tmp_path, episode_trigger=lambda e: True)

    def rows(env, s):  # one array, rows in env.agents' order (agent_1 missing after it left)
        env.annotate(logits=np.stack([_logits(s, int(a[-1])) for a in env.agents]))

    z = np.load(_play(env, rows).with_suffix(".npz"))
    np.testing.assert_array_equal(z["agent_2/logits"][:6], np.stack([_logits(s, 2) for s in range(6)]))
    np.testing.assert_array_equal(z["agent_1/logits"][:3], np.stack([_logits(s, 1) for s in range(3)]))
    assert "agent_2/value" not in z.files


def test_annotate_per_agent_and_mistakes(tmp_path):
    env = RecordParallelEpisode(Tag(n=2, leave=None, length=3), tmp_path, episode_trigger=lambda e: True)
    env.reset()
    with pytest.raises(UsageError, match="3 rows.*env.agents .2."):
        env.annotate(logits=np.zeros((3, 3)))
    with pytest.raises(UsageError, match="agent_7"):
        env.annotate(logits={"agent_7": np.zeros(3)})
    with pytest.raises(UsageError, match="4 numbers"):
        env.annotate("agent_0", logits=np.zeros(4))
    env.annotate("agent_0", logits=[0.0, 1.0, 2.0])
    for _ in range(3):
        env.step({"agent_0": 0, "agent_1": 1})
    env.close()
    z = np.load(env.last_video_path.with_suffix(".npz"))
    np.testing.assert_array_equal(z["agent_0/logits"][0], [0, 1, 2])
    assert np.isnan(z["agent_0/logits"][1]).all()  # steps not annotated are NaN
    assert "agent_1/logits" not in z.files and list(z["agent_1/actions"]) == [1, 1, 1]  # no numbers: rewards only


def _by_pixel(obs):
    v = np.asarray(obs, np.float32).reshape(len(obs), -1)[:, 0] / 10.0
    return np.stack([v, -v, np.zeros_like(v)], 1)


def test_a_shared_policy_is_evaluated_on_each_agents_observations(tmp_path):
    env = RecordParallelEpisode(Tag(n=3, leave=(1, 3), length=6), tmp_path, policies=_by_pixel)
    z = np.load(_play(env).with_suffix(".npz"))
    for i, k in ((0, 6), (1, 3), (2, 6)):
        seen = (10.0 * np.arange(k + 1) + i) / 10.0  # its observations, the last one from the step it left with
        np.testing.assert_allclose(z[f"agent_{i}/logits"], np.stack([seen, -seen, 0 * seen], 1), rtol=1e-6)


def test_policies_per_agent_and_annotations_win(tmp_path):
    zero = lambda obs: np.zeros((len(obs), 3), np.float32)  # noqa: E731
    env = RecordParallelEpisode(Tag(n=2, leave=None, length=4), tmp_path,
                                policies={"agent_0": _by_pixel, "agent_1": zero})
    z = np.load(_play(env, lambda env, s: env.annotate("agent_1", logits=_logits(s, 1))).with_suffix(".npz"))
    np.testing.assert_allclose(z["agent_0/logits"][:, 0], np.arange(5), rtol=1e-6)
    np.testing.assert_array_equal(z["agent_1/logits"][:4], np.stack([_logits(s, 1) for s in range(4)]))


def test_without_annotations_a_video_is_frames_only(tmp_path):
    env = RecordParallelEpisode(Tag(n=3, leave=(1, 3), length=6), tmp_path, episode_trigger=lambda e: True)
    path = _play(env)
    info = probe_video(path)
    assert (info.num_frames, info.width, info.height) == (7, 32, 32)  # the bare frames, padded to 16
    assert not path.with_suffix(".npz").exists()


def test_many_agents_are_grouped_in_rows_of_columns(tmp_path):
    options = AgentsOptions(RecordOptions(save_data=False), AgentsLayout(max_columns=4))
    env = RecordParallelEpisode(Tag(n=10, leave=(9, 2), length=3), tmp_path, episode_trigger=lambda e: True,
                                options=options)
    info = probe_video(_play(env, _dicts))
    assert info.width == -(-(640 + 4 * COL) // 16) * 16 and info.num_frames == 4
    assert info.height > 480  # three rows of cells, taller than the game


def test_aec_game_with_masks_records_each_players_turns(tmp_path):
    env = RecordAECEpisode(connect_four_v3.env(render_mode="rgb_array"), tmp_path, episode_trigger=lambda e: True)
    env.reset(seed=0)
    masks: dict[str, list] = {"player_0": [], "player_1": []}
    steps = 0
    for agent in env.agent_iter():
        obs, _, term, trunc, _ = env.last()
        if term or trunc:
            env.step(None)
        else:
            masks[agent].append(obs["action_mask"].astype(bool))
            env.annotate(logits=np.arange(7, dtype=np.float32) * (1 if agent == "player_0" else -1), value=steps)
            env.step(int(np.flatnonzero(obs["action_mask"])[steps % 2]))
        steps += 1
    env.close()
    path = env.last_video_path
    assert probe_video(path).num_frames == steps + 1
    z = np.load(path.with_suffix(".npz"))
    moves = len(masks["player_0"]) + len(masks["player_1"])
    np.testing.assert_array_equal(z["player_0/decision_frames"], np.arange(0, moves, 2))
    np.testing.assert_array_equal(z["player_1/decision_frames"], np.arange(1, moves, 2))
    for p in masks:
        k = len(masks[p])
        np.testing.assert_array_equal(z[f"{p}/action_masks"][:k], np.stack(masks[p]))
        np.testing.assert_array_equal(z[f"{p}/value"][:k], z[f"{p}/decision_frames"])
    assert float(z["player_0/frame_rewards"].sum()) == -float(z["player_1/frame_rewards"].sum()) != 0


def test_aec_wrapper_of_a_parallel_env_keeps_frame_per_move(tmp_path):
    env = RecordAECEpisode(parallel_to_aec(Tag(n=2, leave=None, length=3)), tmp_path, episode_trigger=lambda e: True)
    env.reset()
    for _agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        if not (term or trunc):
            env.annotate(logits=[1.0, 2.0, 3.0])
        env.step(None if term or trunc else 1)
    env.close()
    z = np.load(env.last_video_path.with_suffix(".npz"))
    assert int(z["num_frames"]) == probe_video(env.last_video_path).num_frames == 2 * 3 + 2 + 1  # moves, dead steps
    np.testing.assert_array_equal(z["agent_0/decision_frames"], [0, 2, 4])
    np.testing.assert_array_equal(z["agent_1/rewards"], [2.0, 2.0, 2.0])


def test_thumbnails_fit_their_box():
    img = np.arange(8 * 8 * 3, dtype=np.uint8).reshape(8, 8, 3)
    th = fit_thumbnail(img, (50, 30))
    assert th.shape == (24, 24, 3) and th[0, 0].tolist() == img[0, 0].tolist()  # x3 nearest
    assert fit_thumbnail(np.zeros((457, 120, 3), np.uint8), (204, 96)).shape == (96, 25, 3)
    stacked = np.zeros((84, 84, 4), np.float32)
    stacked[..., -1] = 1.0
    th = fit_thumbnail(stacked, (42, 42))
    assert th.shape == (42, 42, 3) and (th == 255).all()  # stacked greys: the last frame, floats in [0, 1] x255
    assert is_image_observation(img) and not is_image_observation(np.zeros((27, 5)))
    assert not is_image_observation({"observation": img}) and not is_image_observation(np.zeros(8))


def _turns(obs):
    """Logits picking (step + i) % 3 from Tag's observation 10 * step + i (a 50-point margin: greedy and sampled
    actions agree)."""
    v = np.asarray(obs, np.int64).reshape(len(obs), -1)[:, 0]
    return 50.0 * np.eye(3, dtype=np.float32)[(v // 10 + v % 10) % 3]


def test_play_agents_with_a_shared_policy_gives_each_agents_statistics(tmp_path):
    from rlviz.record.agents.play import play_agents

    env = RecordParallelEpisode(Tag(n=3, leave=(1, 3), length=6), tmp_path, policies=_turns)
    result = play_agents(env, seed=4, greedy=True)
    assert result.steps == 6 and result.lengths == {"agent_0": 6, "agent_1": 3, "agent_2": 6}
    for i in range(3):
        k = result.lengths[f"agent_{i}"]
        assert result.returns[f"agent_{i}"] == float((i + 1) * ((np.arange(k) + i) % 3).sum())
    assert result.terminated == {"agent_0": False, "agent_1": True, "agent_2": False}
    assert result.truncated == {"agent_0": True, "agent_1": False, "agent_2": True}
    assert result.video_path == tmp_path / "rl-video-episode-0.mp4"
    z = np.load(result.video_path.with_suffix(".npz"))
    np.testing.assert_array_equal(z["agent_2/actions"], (np.arange(6) + 2) % 3)
    again = play_agents(Tag(n=3, leave=(1, 3), length=6), {f"agent_{i}": _turns for i in range(3)}, seed=4)
    assert (again.returns, again.video_path) == (result.returns, None)  # sampled: exp(-50) away from the argmax
    cut = play_agents(Tag(n=3, leave=None, length=6), _turns, seed=0, max_steps=2)
    assert cut.steps == 2 and not any(cut.terminated.values()) and not any(cut.truncated.values())
    with pytest.raises(UsageError, match="policy for every agent"):
        play_agents(Tag(), {"agent_0": _turns})


def _state(step: int, i: int) -> np.ndarray:
    return np.array([step + 1.0, 0.5 * i, -0.25 * step], np.float32)  # agent i's recurrent state at its step


@pytest.mark.parametrize("how", ["rows", "dict", "lstm"])
def test_annotated_states_are_each_agents_memory_in_the_npz_and_the_column(tmp_path, how, monkeypatch):
    """annotate(state=...) in a parallel env: all agents' rows at once ([agents, H], nn.LSTM's ([1, agents, H],) * 2)
    or a dict; each agent's memory in the .npz is its own state per decision (the frame after its last step repeats
    it), its norm and change derive from it; the column draws its memory plot, and the decoded video shows it."""
    from rlviz.draw import panels_agents

    drawn = []

    class Spy(panels_agents.AgentsCompositor):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            drawn.append(self)
            for cell in self.cells:  # the thumbnails' spool is gone once the video is written: kept here
                if cell.tl.thumbnails is not None:
                    cell.tl.thumbnails = np.asarray(cell.tl.thumbnails[:])

    monkeypatch.setattr(panels_agents, "AgentsCompositor", Spy)

    def annotate(env, s):
        ids = [int(a[-1]) for a in env.agents]
        rows = np.stack([_state(s, i) for i in ids])
        state = {"rows": rows, "dict": {a: _state(s, int(a[-1])) for a in env.agents},
                 "lstm": (rows[None], np.zeros_like(rows)[None])}[how]
        _dicts(env, s)
        env.annotate(logits={a: _logits(s, int(a[-1])) for a in env.agents}, state=state)

    here = AgentsOptions(process=False)  # (drawn in this process, where the spy is)
    env = RecordParallelEpisode(Tag(n=3, leave=(1, 3), length=6), tmp_path / "with", episode_trigger=lambda e: True,
                                options=here)
    path = _play(env, annotate)
    plain = _play(RecordParallelEpisode(Tag(n=3, leave=(1, 3), length=6), tmp_path / "without",
                                        episode_trigger=lambda e: True, options=here), _dicts)
    z = np.load(path.with_suffix(".npz"))
    for i in range(3):
        a, k = f"agent_{i}", 3 if i == 1 else 6
        memory = np.stack([_state(s, i) for s in range(k)] + [_state(k - 1, i)])
        np.testing.assert_array_equal(z[f"{a}/memory"].astype(np.float32), memory)  # 3 units: kept as they are
        np.testing.assert_allclose(z[f"{a}/memory_norm"], np.linalg.norm(memory, axis=1), rtol=1e-6)
        change = np.r_[0.0, np.linalg.norm(np.diff(memory, axis=0), axis=1)]
        np.testing.assert_allclose(z[f"{a}/memory_change"], change, rtol=1e-6, atol=1e-7)
        assert float(z[f"{a}/state_start_gap"]) == pytest.approx(np.abs(_state(0, i)).max())
    with_memory, without = probe_video(path), probe_video(plain)
    assert with_memory.num_frames == without.num_frames == 7 and with_memory.width == without.width
    comp = drawn[0]  # the recorder's compositor (the first video's): each column has its memory plot
    frames = list(read_video(path))
    for i, cell in enumerate(comp.cells):
        k = 3 if i == 1 else 6
        norm = np.linalg.norm(np.stack([_state(s, i) for s in range(k)] + [_state(k - 1, i)]), axis=1)
        assert cell.memory is not None and cell.memory.series[0][0] == "|h| / max"
        np.testing.assert_allclose(cell.memory.series[0][1], norm / norm.max(), rtol=1e-6)
        x, y, w, h = cell.memory.box
        for t in (0, 2) if i == 1 else (0, 2, 6):  # the decoded video shows what the compositor draws (agent_1: gone at 3)
            want = comp.render(t, np.full((24, 32, 3), 20 * t, np.uint8))[y: y + h, x: x + w].astype(float)
            got = frames[t][y: y + h, x: x + w].astype(float)
            assert np.abs(got - want).mean() < 8.0  # (the codec blurs thin coloured lines: 4:2:0 chroma)
            if t == 2:  # by then the traces are revealed over 2/3 (agent_1) or 1/3 of the plot: more than a cursor
                assert (np.abs(want - np.array([22, 24, 30])).max(axis=2) > 60).sum() > w // 2 + h
    assert all(c.memory is None for c in drawn[1].cells)  # the video without states: no memory plot
