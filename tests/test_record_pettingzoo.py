"""PettingZoo's RecordVideo tests (PettingZoo test/wrapper_record_video_test.py), rewritten for rlviz's drop-ins
:class:`RecordParallelEpisode` and :class:`RecordAECEpisode`, and PettingZoo's own API tests on wrapped envs.

Each video is checked against PettingZoo's wrapper itself: the same loop runs under ``RecordVideoParallel`` /
``RecordVideo`` with their encoding replaced by a count of the frames they would write (moviepy is not in this
venv: a stub module stands in for their import check), so names and frame counts must agree file by file."""

from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pymunk")  # pettingzoo[butterfly]

from _marl_envs import Tag  # noqa: E402
from pettingzoo.butterfly import pistonball_v6  # noqa: E402
from pettingzoo.classic import connect_four_v3  # noqa: E402
from pettingzoo.test import api_test, parallel_api_test  # noqa: E402
from pettingzoo.utils import parallel_to_aec  # noqa: E402
from pettingzoo.utils.wrappers import RecordVideo, RecordVideoParallel  # noqa: E402

from rlviz.errors import UsageError  # noqa: E402
from rlviz.media import probe_video  # noqa: E402
from rlviz.record.agents.pettingzoo import RecordAECEpisode, RecordParallelEpisode  # noqa: E402
from rlviz.record.setup import RenderModeError  # noqa: E402


@pytest.fixture
def their_counts(monkeypatch):
    """PettingZoo's wrappers with each video's frames counted ({name: frames}) instead of encoded by moviepy."""
    monkeypatch.setitem(sys.modules, "moviepy", types.ModuleType("moviepy"))
    counts: dict[str, int] = {}

    def stop(self):
        if self.recorded_frames:
            counts[f"{self._video_name}.mp4"] = len(self.recorded_frames)
        self.recorded_frames, self.recording, self._video_name = [], False, None

    monkeypatch.setattr(RecordVideo, "stop_recording", stop)
    monkeypatch.setattr(RecordVideoParallel, "stop_recording", stop)
    return counts


def _ours(folder) -> dict[str, int]:
    return {p.name: probe_video(p).num_frames for p in sorted(folder.glob("*.mp4"))}


#: ours without a gc.collect() after each video (PettingZoo's default, which ours keeps): ~0.25 s each in a process
#: holding torch, and no test here is about it
NO_GC = {"gc_trigger": None}


def _pistons(**kw):
    return pistonball_v6.parallel_env(render_mode="rgb_array", n_pistons=4, max_cycles=10, **kw)


def _act(space, rng):
    """The same random actions in their run and ours."""
    if hasattr(space, "n"):
        return int(rng.integers(space.n))
    return rng.uniform(-1, 1, space.shape).astype(np.float32)


def _parallel_loop(env, steps: int) -> None:
    obs, _ = env.reset(seed=123)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, _, terms, truncs, _ = env.step({a: _act(env.action_space(a), rng) for a in obs})
        if any(terms.values()) or any(truncs.values()):
            obs, _ = env.reset()
    env.close()


def _aec_loop(env, episodes: int) -> None:
    rng = np.random.default_rng(0)
    for _ in range(episodes):
        env.reset(seed=123)
        for agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else _act(env.action_space(agent), rng))
    env.close()


def test_parallel_names_and_frames_match_pettingzoos(tmp_path, their_counts):
    """Episode and step triggers together (theirs: episodes 1 and 4, steps 0 and 25), 10-step episodes."""
    kw = dict(name_prefix="video-prefix", episode_trigger=lambda x: x in [1, 4], step_trigger=lambda x: x in [0, 25])
    _parallel_loop(RecordParallelEpisode(_pistons(), tmp_path / "ours", **kw, **NO_GC), 60)
    _parallel_loop(RecordVideoParallel(_pistons(), str(tmp_path / "theirs"), **kw), 60)
    ours = _ours(tmp_path / "ours")
    assert set(ours) == {"video-prefix-step-0.mp4", "video-prefix-step-25.mp4", "video-prefix-episode-1.mp4",
                         "video-prefix-episode-4.mp4"}
    assert ours == their_counts


def test_aec_names_and_frames_match_pettingzoos(tmp_path, their_counts):
    """The same through parallel_to_aec: a frame per agent move, steps counted over all episodes."""
    kw = dict(name_prefix="video-prefix", episode_trigger=lambda x: x in [1, 4], step_trigger=lambda x: x in [0, 25])
    _aec_loop(RecordAECEpisode(parallel_to_aec(_pistons()), tmp_path / "ours", **kw, **NO_GC), 6)
    _aec_loop(RecordVideo(parallel_to_aec(_pistons()), str(tmp_path / "theirs"), **kw), 6)
    ours = _ours(tmp_path / "ours")
    assert set(ours) == {"video-prefix-step-0.mp4", "video-prefix-step-25.mp4", "video-prefix-episode-1.mp4",
                         "video-prefix-episode-4.mp4"}
    assert ours == their_counts


@pytest.mark.parametrize("video_length", [0, 7])
def test_default_schedule_and_video_length_match_pettingzoos(tmp_path, their_counts, video_length):
    """No trigger: gymnasium's capped cubic schedule (episodes 0, 1, 8); ``video_length`` cuts each video."""
    env = Tag(n=2, leave=None, length=4)
    _parallel_loop(RecordParallelEpisode(env, tmp_path / "ours", video_length=video_length, **NO_GC), 45)
    _parallel_loop(RecordVideoParallel(Tag(n=2, leave=None, length=4), str(tmp_path / "theirs"),
                                       video_length=video_length), 45)
    ours = _ours(tmp_path / "ours")
    assert set(ours) == {"rl-video-episode-0.mp4", "rl-video-episode-1.mp4", "rl-video-episode-8.mp4"}
    assert ours == their_counts
    # 4 steps + the reset's frame; with video_length 7 a video goes on through the reset until its 8th frame
    assert ours["rl-video-episode-8.mp4"] == (5 if video_length == 0 else 8)


def test_step_trigger_video_length_across_episodes(tmp_path, their_counts):
    kw = dict(step_trigger=lambda s: s % 9 == 0, video_length=6, name_prefix="s")
    _parallel_loop(RecordParallelEpisode(Tag(n=2, leave=None, length=4), tmp_path / "ours", **kw, **NO_GC), 30)
    _parallel_loop(RecordVideoParallel(Tag(n=2, leave=None, length=4), str(tmp_path / "theirs"), **kw), 30)
    assert _ours(tmp_path / "ours") == their_counts
    assert set(their_counts) == {"s-step-0.mp4", "s-step-9.mp4", "s-step-18.mp4", "s-step-27.mp4"}


def test_attributes_as_pettingzoos(tmp_path):
    env = RecordParallelEpisode(Tag(), tmp_path, fps=None)
    assert (env.frames_per_sec, env.episode_id, env.step_id, env.recording) == (10, -1, -1, False)
    assert env.video_folder == str(tmp_path.resolve())
    env.reset()
    assert env.recording and env.episode_id == 0
    env.close()
    assert not env.recording


@pytest.mark.parametrize("mode", [None, "human", "ansi"])
def test_render_mode_without_images_is_refused(tmp_path, mode):
    with pytest.raises(ValueError, match="render_mode") as info:
        RecordParallelEpisode(Tag(render_mode=mode), tmp_path)
    assert isinstance(info.value, RenderModeError)
    with pytest.raises(ValueError, match="render_mode"):
        RecordAECEpisode(connect_four_v3.env(render_mode=mode), tmp_path)


def test_wrong_kind_of_env_and_bad_arguments(tmp_path):
    with pytest.raises(UsageError, match="RecordAECEpisode"):
        RecordParallelEpisode(connect_four_v3.env(render_mode="rgb_array"), tmp_path)
    with pytest.raises(UsageError, match="RecordParallelEpisode"):
        RecordAECEpisode(Tag(), tmp_path)
    with pytest.raises(UsageError, match="prefix"):
        RecordParallelEpisode(Tag(), tmp_path, name_prefix="a/b")
    with pytest.raises(UsageError, match="agent_9"):
        RecordParallelEpisode(Tag(), tmp_path, policies={"agent_9": lambda obs: np.zeros((len(obs), 3))})


def test_parallel_api_test_passes_on_a_recorded_env(tmp_path):
    env = RecordParallelEpisode(_pistons(), tmp_path, episode_trigger=lambda e: True, **NO_GC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the API test's own warnings about the env)
        parallel_api_test(env, num_cycles=30)
    env.close()
    assert list(tmp_path.glob("*.mp4"))  # it recorded while being tested


def test_parallel_api_test_passes_with_panels(tmp_path):
    shared = lambda obs: np.asarray(obs, np.float32).reshape(len(obs), -1)[:, :3]  # noqa: E731
    env = RecordParallelEpisode(Tag(), tmp_path, policies=shared, **NO_GC)
    parallel_api_test(env, num_cycles=8)
    env.close()
    assert list(tmp_path.glob("*.npz"))


def test_api_test_passes_on_a_recorded_aec_env(tmp_path):
    env = RecordAECEpisode(connect_four_v3.env(render_mode="rgb_array"), tmp_path, episode_trigger=lambda e: True,
                           **NO_GC)
    api_test(env, num_cycles=30)
    env.close()
    assert list(tmp_path.glob("*.mp4"))


def test_api_test_passes_with_panels_on_an_aec_env(tmp_path):
    env = RecordAECEpisode(parallel_to_aec(Tag()), tmp_path, policies=lambda obs: np.zeros((len(obs), 3)), **NO_GC)
    api_test(env, num_cycles=8)
    env.close()
    assert list(tmp_path.glob("*.npz"))


@pytest.mark.parametrize(("ours", "theirs"), [(RecordParallelEpisode, RecordVideoParallel), (RecordAECEpisode, RecordVideo)])
def test_signature_is_pettingzoos_plus_policies_and_options(ours, theirs):
    import inspect

    mine = inspect.signature(ours).parameters
    for name, p in inspect.signature(theirs).parameters.items():
        assert name in mine, name
        if name not in ("env", "gc_trigger"):  # (gc_trigger: both default to collecting after every video)
            assert mine[name].default == p.default, name
    assert set(mine) - set(inspect.signature(theirs).parameters) == {"policies", "options"}


def test_without_pettingzoo_the_import_says_which_extra(tmp_path):
    import subprocess

    code = ("import sys; sys.modules['pettingzoo'] = None\n"
            "try:\n    import rlviz.record.agents.pettingzoo\nexcept ImportError as e:\n    print(type(e).__name__, e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("MissingDependencyError") and 'pip install "rlviz[pettingzoo]"' in out
    assert "\n" not in out.strip()  # one line
