"""Hardening 3 (issue #42), the recorders' part: a training loop killed without ``close()`` loses no finished
episode and leaves nothing behind; a policy or model made for another env fails at once in one line; VecNormalize
around ``VecRecordEpisode(model=)``; the argument rules the recorders share; ``annotate``'s odd inputs; the grid.

The loops run in a subprocess, interrupted at moments chosen by their own progress (a marker file the loop writes
after its k-th finished episode), never by the clock: a loop runs until it is interrupted, so it cannot finish first.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlviz import RecordEpisode, RecordOptions, RecordVectorEpisode
from rlviz.errors import UsageError
from rlviz.media.decode import probe_video, read_video
from rlviz.record.leftovers import SPOOL_PREFIX, clean_stale, owner_gone
from rlviz.record.writer import MAX_PENDING_VIDEOS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from _processes import wait_no_drawing_process  # noqa: E402
from _procs import ffmpeg_pids  # noqa: E402

HANG_S = 240.0  # a guard against a hang only: the loop's progress, not the clock, decides when it is signalled

LOOP = textwrap.dedent('''
    import os, sys
    import gymnasium as gym
    import numpy as np
    from rlviz import RecordEpisode, RecordOptions, RecordVectorEpisode

    kind, marker_at, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    videos = os.path.join(out, "videos")
    log = open(os.path.join(out, "ended.log"), "a", buffering=1)
    ended = 0

    def ended_episode(i, k, steps):
        global ended
        log.write(f"{i} {k} {steps}\\n")
        ended += 1
        if ended == marker_at:
            with open(os.path.join(out, "marker.tmp"), "w") as fh:
                fh.write(str(os.getpid()))
            os.replace(os.path.join(out, "marker.tmp"), os.path.join(out, "marker"))

    rng = np.random.default_rng(0)
    if kind == "vector":  # two sub-envs, each episode a panel video (annotated), written on the writer thread
        envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array") for _ in range(2)])
        envs = RecordVectorEpisode(envs, videos, envs_to_record=(0, 1), episode_trigger=lambda k: True,
                                   options=RecordOptions(sinks=None))
        log.write(f"mode {envs.autoreset_mode}\\n")
        envs.reset(seed=0)
        episode, steps, fresh = [0, 0], [0, 0], [False, False]
        while True:  # a training loop without close(): it ends by Ctrl-C
            envs.annotate(logits=rng.normal(size=(2, 2)), value=rng.normal(size=2))
            _, _, term, trunc, _ = envs.step(rng.integers(0, 2, size=2))
            for i in range(2):
                if fresh[i]:  # (next-step autoreset: this step was sub-env i's reset)
                    fresh[i] = False
                    continue
                steps[i] += 1
                if term[i] or trunc[i]:
                    ended_episode(i, episode[i], steps[i])
                    episode[i] += 1
                    steps[i] = 0
                    fresh[i] = envs.autoreset_mode == "next_step"
    elif kind.startswith("pettingzoo"):  # a PettingZoo game of 4 agents: annotated, or "-frames": frames only
        from pettingzoo.butterfly import pistonball_v6
        from rlviz.record.agents.pettingzoo import RecordParallelEpisode

        cycles = 70 if kind == "pettingzoo" else 12  # (panels: 71 frames, drawn in the recorder's drawing process)
        env = RecordParallelEpisode(pistonball_v6.parallel_env(render_mode="rgb_array", n_pistons=4, max_cycles=cycles),
                                    videos, episode_trigger=lambda k: True)
        from rlviz.interrupts import remembered_sigint

        log.write("mode single\\n")
        k = 0
        # (pymunk swallows a Ctrl-C that lands in one of its cffi callbacks, "Exception ignored from cffi
        # callback": a user presses it again; the loop raises it at its next step instead)
        with remembered_sigint() as came:
            while True:
                env.reset(seed=k)
                steps = 0
                while env.agents:
                    mean = {a: rng.uniform(-1, 1, 1).astype(np.float32) for a in env.agents}
                    if kind == "pettingzoo":
                        env.annotate(mean=mean, std={a: np.full(1, 0.3, np.float32) for a in mean},
                                     value={a: float(m[0]) for a, m in mean.items()})
                    env.step(mean)
                    steps += 1
                    if came():
                        raise KeyboardInterrupt
                ended_episode(0, k, steps)
                k += 1
    else:  # one env: "panels" annotated, "frames" frames only (streamed to ffmpeg as they come)
        env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), videos, episode_trigger=lambda k: True)
        log.write("mode single\\n")
        k = 0
        while True:
            env.reset(seed=k)
            steps, done = 0, False
            while not done:
                if kind == "panels":
                    env.annotate(logits=rng.normal(size=2), value=float(rng.normal()))
                _, _, term, trunc, _ = env.step(int(rng.integers(0, 2)))
                steps += 1
                done = term or trunc
            ended_episode(0, k, steps)
            k += 1
''')


def _run_loop(tmp_path: Path, kind: str, marker_at: int, sig: int) -> tuple[subprocess.CompletedProcess, Path]:
    """Start the loop, wait for its marker (episode ``marker_at`` ended), signal it, wait for it to exit."""
    out, tmpdir = tmp_path / "out", tmp_path / "tmpdir"
    out.mkdir()
    tmpdir.mkdir()
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(script), kind, str(marker_at), str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + HANG_S
    while not (out / "marker").exists():
        if proc.poll() is not None:
            pytest.fail(f"the loop ended before its marker: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the loop hung before its marker")
        time.sleep(0.02)
    proc.send_signal(sig)
    try:
        stdout, stderr = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:  # (killed, not left running beside the rest of the suite)
        proc.kill()
        pytest.fail(f"the loop did not exit within {HANG_S:.0f} s of the signal: {proc.communicate()[1][-2000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), out


def _ended(out: Path) -> tuple[str, list[tuple[int, int, int]]]:
    lines = (out / "ended.log").read_text().splitlines()
    mode = lines[0].split()[1]
    return mode, [tuple(int(x) for x in line.split()) for line in lines[1:] if line.count(" ") == 2]  # type: ignore[misc]


def _video_name(kind: str, i: int, k: int) -> str:
    return f"rl-video-env-{i}-episode-{k}.mp4" if kind == "vector" else f"rl-video-episode-{k}.mp4"


@pytest.mark.parametrize(("kind", "marker_at"), [("vector", 1), ("vector", 5), ("panels", 3), ("frames", 2),
                                                 ("pettingzoo", 3), ("pettingzoo-frames", 2)])
def test_ctrl_c_without_close_keeps_every_finished_episode_and_leaves_nothing(tmp_path, kind, marker_at):
    if kind.startswith("pettingzoo"):
        pytest.importorskip("pettingzoo")
        pytest.importorskip("pymunk")  # pettingzoo[butterfly]
    done, out = _run_loop(tmp_path, kind, marker_at, signal.SIGINT)
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr, done.stderr[-2000:]
    mode, ended = _ended(out)
    assert len(ended) >= marker_at
    videos = out / "videos"
    names = {p.name for p in videos.iterdir()}
    assert not [n for n in names if n.startswith(".") or "partial" in n], names  # no temporary file stays
    assert list((tmp_path / "tmpdir").iterdir()) == []  # no spool stays in TMPDIR
    assert wait_no_drawing_process(tmp_path / "tmpdir") == []  # (PettingZoo's panels: their drawing process ended)
    for i, k, steps in ended:  # every finished episode is a whole, decodable video
        name = _video_name(kind, i, k)
        assert name in names, (name, sorted(names))
        frames = steps if mode == "same_step" else steps + 1
        decoded = sum(1 for _ in read_video(videos / name))
        assert decoded == probe_video(videos / name).num_frames
        if kind.endswith("frames"):
            assert decoded == frames
        else:  # a panel video plays at least the panels' minimum length: each step's frame at least once
            assert decoded >= frames
            data = np.load(videos / name.replace(".mp4", ".npz"))
            if kind == "pettingzoo":  # every agent decided at every step of the game
                assert int(data["num_frames"]) == steps + 1 and len(data["agents"]) == 4
                assert all(len(data[f"{a}/rewards"]) == steps for a in data["agents"])
            else:
                assert len(data["rewards"]) == steps
    finished = {_video_name(kind, i, k) for i, k, _ in ended}
    extra = {n for n in names if n.endswith(".mp4")} - finished
    last = {i: max([k for j, k, _ in ended if j == i], default=-1) for i in (0, 1)}
    allowed = {_video_name(kind, i, last[i] + 1) for i in (0, 1)}  # the episode in progress, had it finished
    assert extra <= allowed, (extra, allowed)
    for name in extra:
        assert sum(1 for _ in read_video(videos / name)) > 0


ENDS_WITHOUT_CLOSE = textwrap.dedent('''
    import sys
    import numpy as np
    from pettingzoo.butterfly import pistonball_v6
    from rlviz.record.agents.pettingzoo import RecordParallelEpisode

    cycles = 70 if sys.argv[2] == "panels" else 10  # (panels: 71 frames, drawn in the recorder's drawing process)
    env = RecordParallelEpisode(pistonball_v6.parallel_env(render_mode="rgb_array", n_pistons=4, max_cycles=cycles),
                                sys.argv[1], episode_trigger=lambda k: True)
    for k in range(3):  # two whole episodes, then 4 steps of a third; no close()
        env.reset(seed=k)
        steps = 0
        while env.agents and (k < 2 or steps < 4):
            if sys.argv[2] == "panels":
                env.annotate(mean={a: np.zeros(1) for a in env.agents}, value={a: 0.5 for a in env.agents})
            env.step({a: np.full(1, 0.5, np.float32) for a in env.agents})
            steps += 1
        print(k, steps, flush=True)
''')


@pytest.mark.parametrize("kind", ["panels", "frames"])
def test_a_pettingzoo_loop_ending_without_close_exits_and_keeps_its_ended_episodes(tmp_path, kind):
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pymunk")  # pettingzoo[butterfly]
    (tmp_path / "tmpdir").mkdir()
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmpdir"), PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    videos = tmp_path / "videos"
    try:  # (0.5.0 before this test: the interpreter aborted at exit, "terminate called without an active exception")
        done = subprocess.run([sys.executable, "-c", ENDS_WITHOUT_CLOSE, str(videos), kind], env=env,
                              capture_output=True, text=True, timeout=HANG_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a loop without close() did not exit within {HANG_S:.0f} s")
    assert done.returncode == 0, done.stderr[-2000:]
    steps = [int(line.split()[1]) for line in done.stdout.splitlines()]
    assert steps[2] == 4
    names = sorted(p.name for p in videos.iterdir())
    wanted = [f"rl-video-episode-{k}.{ext}" for k in (0, 1) for ext in (("mp4", "npz") if kind == "panels" else ("mp4",))]
    # the third episode did not end: its video is dropped (frames-only: a whole episode's ends with the next reset,
    # as PettingZoo's; episode 1 ended, and is written at exit)
    assert names == sorted(wanted), names
    for k in (0, 1):
        decoded = sum(1 for _ in read_video(videos / f"rl-video-episode-{k}.mp4"))
        assert decoded == steps[k] + 1 if kind == "frames" else decoded >= steps[k] + 1
    assert list((tmp_path / "tmpdir").iterdir()) == []  # no spool stays
    assert wait_no_drawing_process(tmp_path / "tmpdir") == []


ENDED_THEN_CTRL_C = textwrap.dedent('''
    import os, signal, sys
    import gymnasium as gym
    from rlviz import RecordEpisode
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), sys.argv[1], episode_trigger=lambda k: True)
    env.reset(seed=0)
    steps, done = 0, False
    while not done:
        _, _, term, trunc, _ = env.step(0)
        steps, done = steps + 1, term or trunc
    print(steps, flush=True)
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C after the episode ended, before the loop's next reset
    env.reset(seed=1)
''')


def test_ctrl_c_between_an_episode_end_and_the_next_reset_keeps_its_frames_only_video(tmp_path):
    # A frames-only video is closed by the next reset (as RecordVideo's): a Ctrl-C before it must not drop it.
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", ENDED_THEN_CTRL_C, str(tmp_path / "videos")], env=env,
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr, done.stderr[-2000:]
    steps = int(done.stdout.split()[0])
    names = sorted(p.name for p in (tmp_path / "videos").iterdir())
    assert names == ["rl-video-episode-0.mp4"], names
    assert sum(1 for _ in read_video(tmp_path / "videos" / names[0])) == steps + 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(SPOOL_PREFIX)]


#: the end of the PettingZoo Ctrl-C scripts: two 5-step episodes of their ``Game``, frames only
_TWO_EPISODES = textwrap.dedent('''
    env = RecordParallelEpisode(Game(3, leave=None, length=5), sys.argv[1], episode_trigger=lambda k: True)
    for k in range(2):
        env.reset(seed=k)
        while env.agents:
            env.step({a: 1 for a in env.agents})
''')

CTRL_C_INSIDE_RESET = textwrap.dedent('''
    import os, signal, sys
    from _marl_envs import Tag
    from rlviz.record.agents.pettingzoo import RecordParallelEpisode

    class Interrupted(Tag):  # the Ctrl-C lands inside the next reset: after the game's own, before the recorder's part
        def reset(self, seed=None, options=None):
            out = super().reset(seed, options)
            if seed == 1:
                os.kill(os.getpid(), signal.SIGINT)
            return out

    Game = Interrupted
''') + _TWO_EPISODES


@pytest.mark.skipif(importlib.util.find_spec("pettingzoo") is None, reason="PettingZoo is not installed")
def test_ctrl_c_inside_the_next_reset_keeps_a_pettingzoo_frames_only_video(tmp_path):
    # (before: the reset had refilled env.agents, so the ended episode's video looked in progress and was dropped)
    _only_the_ended_episodes_video_after_ctrl_c(tmp_path, CTRL_C_INSIDE_RESET)


def _only_the_ended_episodes_video_after_ctrl_c(tmp_path: Path, script: str) -> None:
    """``script`` (a PettingZoo loop of 5-step episodes, Ctrl-C'd in its second) exits by the Ctrl-C with the first
    episode's frames-only video whole, and nothing else, in its folder, and no spool left."""
    env = dict(os.environ, TMPDIR=str(tmp_path), OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(Path(__file__).parent)]))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "videos")], env=env,
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr, done.stderr[-2000:]
    names = sorted(p.name for p in (tmp_path / "videos").iterdir())
    assert names == ["rl-video-episode-0.mp4"], names
    assert sum(1 for _ in read_video(tmp_path / "videos" / names[0])) == 5 + 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(SPOOL_PREFIX)]


CTRL_C_AS_THE_VIDEO_FINISHES = textwrap.dedent('''
    import os, signal, sys
    from _marl_envs import Tag
    from rlviz.record.agents.pettingzoo import RecordParallelEpisode
    from rlviz.record.base import RecorderBase

    finishing = RecorderBase.finishing

    def ctrl_c_first(self):  # the Ctrl-C lands as the recorder begins to finish the ended episode's video
        os.kill(os.getpid(), signal.SIGINT)
        return finishing(self)

    RecorderBase.finishing = ctrl_c_first
    Game = Tag
''') + _TWO_EPISODES


@pytest.mark.skipif(importlib.util.find_spec("pettingzoo") is None, reason="PettingZoo is not installed")
def test_ctrl_c_as_a_pettingzoo_frames_only_video_finishes_keeps_it(tmp_path):
    # (before: the recorder let go of the video before it held the Ctrl-C: the ended episode was lost and its
    # .partial file stayed; seen once in the suite under load, in the pettingzoo-frames loop of the Ctrl-C test)
    _only_the_ended_episodes_video_after_ctrl_c(tmp_path, CTRL_C_AS_THE_VIDEO_FINISHES)


def test_sigkill_leaves_only_its_own_named_leftovers_and_the_next_recorder_cleans_them(tmp_path):
    done, out = _run_loop(tmp_path, "vector", 3, signal.SIGKILL)
    assert done.returncode == -signal.SIGKILL
    pid = int((out / "marker").read_text())
    tmpdir, videos = tmp_path / "tmpdir", out / "videos"
    # the killed loop's ffmpeg outlives it until its pipe ends, and may create its .partial only then (a loaded
    # machine): the leftovers are what is on disk once nothing of the loop runs
    deadline = time.monotonic() + 60
    while ffmpeg_pids(mentioning=str(videos)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert wait_no_drawing_process(tmpdir) == []
    left = sorted(p.name for p in tmpdir.iterdir())
    # the episodes in progress (one per sub-env) and at most the finished ones still waiting for the writer
    assert len(left) <= 2 + MAX_PENDING_VIDEOS, left
    assert all(name.startswith(f"{SPOOL_PREFIX}{pid}-") for name in left), left
    partial = [p.name for p in videos.iterdir() if p.name.startswith(".")]
    assert all(f".{pid}.partial" in name for name in partial), partial
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array")])
    rec = RecordVectorEpisode(envs, videos, options=RecordOptions(sinks=None, spool_dir=tmpdir))
    assert list(tmpdir.iterdir()) == []
    assert not [p for p in videos.iterdir() if p.name.startswith(".")]
    rec.close()


def test_a_spool_is_stale_when_its_owner_is_gone_or_started_after_it(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    now = time.time()
    assert owner_gone(child.pid, now)  # no such process any more
    assert not owner_gone(os.getpid(), 0.0)  # this process: never
    parent = os.getppid()
    assert not owner_gone(parent, now)  # alive, and started before the file was made
    if Path(f"/proc/{parent}/stat").exists():
        assert owner_gone(parent, 0.0)  # a file older than the process now under that pid: the pid was reused
    mine = tmp_path / f"{SPOOL_PREFIX}{os.getpid()}-abc"
    theirs = tmp_path / f"{SPOOL_PREFIX}{child.pid}-abc"
    other = tmp_path / "rlviz-unrelated"
    for folder in (mine, theirs, other):
        folder.mkdir()
    partial = tmp_path / f".clip.{child.pid}.partial.mp4"
    partial.write_bytes(b"x")
    assert sorted(p.name for p in clean_stale(tmp_path, tmp_path)) == sorted([theirs.name, partial.name])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, other.name])


# -- wrong shapes fail at once, in one line naming both ----------------------------------------------
def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and isinstance(exc.value, UsageError), text
    return text


def test_a_policy_made_for_another_env_fails_at_construction_naming_both_shapes(tmp_path):
    torch = pytest.importorskip("torch")
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array") for _ in range(2)])
    with pytest.raises(UsageError) as info:
        RecordVectorEpisode(envs, tmp_path / "v", policy=torch.nn.Linear(6, 3))
    text = _one_line(info)
    assert "(6,)" in text and "(4,)" in text, text
    with pytest.raises(UsageError) as info:
        RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path / "e", torch.nn.Linear(6, 3))
    text = _one_line(info)
    assert "(6,)" in text and "(4,)" in text, text
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))  # the right one
    RecordVectorEpisode(envs, tmp_path / "ok", policy=net).close()


def _sb3():
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecEnvWrapper, VecNormalize

    from rlviz.integrations.sb3 import VecRecordEpisode

    def cartpole(n=1):
        return make_vec_env("CartPole-v1", n_envs=n, seed=0, env_kwargs={"render_mode": "rgb_array"})

    return sb3, make_vec_env, VecEnvWrapper, VecNormalize, VecRecordEpisode, cartpole


def test_a_model_for_another_env_fails_when_it_first_meets_an_observation(tmp_path):
    sb3, make_vec_env, _, _, VecRecordEpisode, cartpole = _sb3()
    acrobot = sb3.PPO("MlpPolicy", make_vec_env("Acrobot-v1", n_envs=1, seed=0), n_steps=64, device="cpu")
    with pytest.raises(UsageError) as info:  # given at construction
        VecRecordEpisode(cartpole(), str(tmp_path), lambda s: s == 0, video_length=5, model=acrobot)
    text = _one_line(info)
    assert "(6,)" in text and "(4,)" in text, text
    rec = VecRecordEpisode(cartpole(), str(tmp_path), lambda s: s == 0, video_length=5,
                           options=RecordOptions(sinks=None))
    rec.model = acrobot  # set later (as a model made on this env is): checked at the first observation
    with pytest.raises(UsageError) as info:
        rec.reset()
    assert "(6,)" in _one_line(info)
    rec.model = None
    rec.close()


@pytest.mark.parametrize("placement", ["around", "inside"])
def test_vec_normalize_the_panels_hold_the_probabilities_the_model_acted_on(tmp_path, placement):
    torch = pytest.importorskip("torch")
    sb3, _, VecEnvWrapper, VecNormalize, VecRecordEpisode, cartpole = _sb3()

    from test_sb3_video import KeepObs  # what the model is handed (and acts on)

    opts = RecordOptions(sinks=None)
    if placement == "around":
        rec = VecRecordEpisode(cartpole(), str(tmp_path), lambda s: s == 0, video_length=20, options=opts)
        venv = KeepObs(VecNormalize(rec))
    else:
        rec = VecRecordEpisode(VecNormalize(cartpole()), str(tmp_path), lambda s: s == 0, video_length=20,
                               options=opts)
        venv = KeepObs(rec)
    model = sb3.PPO("MlpPolicy", venv, n_steps=64, n_epochs=1, verbose=0, device="cpu", seed=0)
    rec.model = model
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}  # the clip ends before the first update
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # both placements are known: no warning
        model.learn(total_timesteps=128)
    venv.close()
    (video,) = rec.videos
    data = np.load(video.with_suffix(".npz"))
    model.policy.load_state_dict(before)
    acted = torch.as_tensor(np.stack([o[0] for o in venv.seen[:21]]))
    with torch.no_grad():
        probs = model.policy.get_distribution(acted).distribution.probs.numpy()
    assert data["probs"].shape == probs.shape == (21, 2)
    np.testing.assert_allclose(data["probs"], probs, rtol=1e-5, atol=1e-6)
    assert np.abs(np.stack([o[0] for o in venv.seen[:21]])).max() < 10  # (normalised: clipped to +-10)


def test_a_policy_alone_says_it_cannot_tell_about_vec_normalize(tmp_path):
    sb3, _, _, VecNormalize, VecRecordEpisode, cartpole = _sb3()
    model = sb3.PPO("MlpPolicy", cartpole(), n_steps=64, device="cpu")
    with pytest.warns(UserWarning, match="cannot say whether a VecNormalize") as got:
        rec = VecRecordEpisode(cartpole(), str(tmp_path), lambda s: False, model=model.policy,
                               options=RecordOptions(sinks=None))
    assert all("\n" not in str(w.message) for w in got)
    rec.close()
    with warnings.catch_warnings():  # normalised inside: nothing to say
        warnings.simplefilter("error")
        VecRecordEpisode(VecNormalize(cartpole()), str(tmp_path), lambda s: False, model=model.policy,
                         options=RecordOptions(sinks=None)).close()


# -- the argument rules, written once ---------------------------------------------------------------
def test_name_prefix_is_a_file_name_prefix_for_every_recorder(tmp_path):
    _, _, _, _, VecRecordEpisode, cartpole = _sb3()
    folder = tmp_path / "videos"
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array")])
    makers = {
        "VecRecordEpisode": lambda p: VecRecordEpisode(cartpole(), str(folder), lambda s: True, name_prefix=p),
        "RecordVectorEpisode": lambda p: RecordVectorEpisode(envs, folder, name_prefix=p),
        "RecordEpisode": lambda p: RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), folder,
                                                 name_prefix=p),
    }
    for owner, make in makers.items():
        for prefix in ("../escaped", "a/b", "a\\b", ".."):
            with pytest.raises(UsageError, match="file name prefix") as info:
                make(prefix)
            assert _one_line(info).startswith(owner)
    assert not [p for p in tmp_path.rglob("*") if "escaped" in p.name or p.is_file()]  # nothing written anywhere


def test_envs_to_record_takes_whole_indices_only(tmp_path):
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array") for _ in range(2)])
    for bad in (0, (0.7,), (True,), ("0",), ()):
        with pytest.raises(UsageError, match="envs_to_record") as info:
            RecordVectorEpisode(envs, tmp_path, envs_to_record=bad)
        _one_line(info)
    assert RecordVectorEpisode(envs, tmp_path, envs_to_record=[np.int64(1)]).envs_to_record == (1,)


def test_reset_after_close_is_refused_in_one_line(tmp_path):
    _, _, _, _, VecRecordEpisode, cartpole = _sb3()
    single = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path / "a",
                           episode_trigger=lambda k: True)
    envs = RecordVectorEpisode(
        gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array")]), tmp_path / "b",
        episode_trigger=lambda k: True, options=RecordOptions(sinks=None))
    vec = VecRecordEpisode(cartpole(), str(tmp_path / "c"), lambda s: True, video_length=3,
                           options=RecordOptions(sinks=None))
    for rec in (single, envs, vec):
        rec.reset()
        rec.close()
        with pytest.raises(UsageError, match="after close") as info:
            rec.reset()
        _one_line(info)
        assert not rec.recording
    for folder in "abc":  # the videos cut by close() are whole; no video was started after it
        for path in (tmp_path / folder).glob("*.mp4"):
            assert probe_video(path).num_frames == 1
        assert not [p for p in (tmp_path / folder).iterdir() if p.name.startswith(".")]


def test_grid_tiles_are_shrunk_never_enlarged():
    from rlviz.record.vector_parts import tile_frames

    big = np.full((40, 60, 3), 200, np.uint8)
    small = np.full((10, 20, 3), 90, np.uint8)
    grid = tile_frames([big, small], max_width=1000)  # cells of the first frame's size: 40 x 60
    assert grid.shape == (40, 120, 3)
    np.testing.assert_array_equal(grid[:, :60], 200)
    np.testing.assert_array_equal(grid[:10, 60:80], 90)  # the small frame as it is, top left of its cell
    assert grid[10:, 60:].max() == 0 and grid[:10, 80:].max() == 0
    wide = np.full((40, 240, 3), 50, np.uint8)  # larger than the cell: shrunk to fit it, aspect kept
    grid = tile_frames([big, wide], max_width=1000)
    np.testing.assert_array_equal(grid[:10, 60:120], 50)  # 240 wide -> 60: a quarter, so 10 high
    assert grid[10:, 60:].max() == 0


# -- annotate's odd inputs speak ----------------------------------------------------------------------
def test_annotate_refuses_what_is_not_numbers_in_one_line(tmp_path):
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path, episode_trigger=lambda k: True)
    env.reset(seed=0)
    for bad in ([[1.0], [1.0, 2.0]], [1.0, [2.0, 3.0]], "abc", "1.5", ["1", "2"], {"a": 1.0}, np.ones(2, complex)):
        with pytest.raises(UsageError, match="annotate\\(logits=...\\) received") as info:
            env.annotate(logits=bad)
        _one_line(info)
    with pytest.raises(UsageError) as info:
        env.annotate(logits=[0.0, 0.0], value=[4, 2])
    text = _one_line(info)
    assert "one per action" not in text and "value" in text, text
    vec = RecordVectorEpisode(
        gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array") for _ in range(2)]),
        tmp_path / "vec", episode_trigger=lambda k: True, options=RecordOptions(sinks=None))
    vec.reset(seed=0)
    for bad in ([[1.0], [1.0, 2.0]], "ab", [["a", "b"], ["c", "d"]]):
        with pytest.raises(UsageError) as info:
            vec.annotate(logits=bad)
        _one_line(info)
    env.close()
    vec.close()


def test_annotations_without_the_action_distribution_say_what_is_missing(tmp_path):
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path, episode_trigger=lambda k: True,
                        options=RecordOptions(sinks=None, background=False))
    env.reset(seed=0)
    with pytest.raises(UsageError) as info:
        for _ in range(500):  # the episode's end draws its panels: there the missing logits are named
            env.annotate(value=1.0, state=np.zeros(4, np.float32))
            _, _, term, trunc, _ = env.step(0)
            if term or trunc:
                break
    text = _one_line(info)
    assert "gave value=, state= but no logits=" in text and "policy=" in text, text
    env.close()


def test_non_finite_logits_are_drawn_as_the_softmax_limits_with_one_warning(tmp_path):
    env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path, episode_trigger=lambda k: True)
    env.reset(seed=0)
    given = [[np.inf, 0.0], [-np.inf, 0.0], [np.nan, 0.0], [np.inf, np.inf], [0.0, np.log(3.0)]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for t, logits in enumerate(given):
            env.annotate(logits=np.asarray(logits), value=np.inf if t == 1 else float(t))
            env.step(t % 2)
        result = env.finish_episode()
    said = [str(w.message) for w in caught if "non-finite" in str(w.message)]
    assert len(said) == 2 and all("\n" not in s for s in said), said  # once for logits, once for value
    data = np.load(result.video_path.with_suffix(".npz"))
    want = [[1.0, 0.0], [0.0, 1.0], [np.nan, np.nan], [0.5, 0.5], [0.25, 0.75], [0.25, 0.75]]
    np.testing.assert_allclose(data["probs"], want, rtol=1e-6)
    np.testing.assert_array_equal(data["value"], [0.0, np.nan, 2.0, 3.0, 4.0, 4.0])
    env.close()


def test_an_annotated_panel_video_is_drawn_without_importing_torch(tmp_path):
    """The loop's own numbers drawn beside the game need no torch: a panel video recorded and drawn (the memory
    panel's code path included) leaves torch unimported. (At interpreter exit, after a Ctrl-C, a torch import in the
    writer's thread fails: the finished videos would be lost.)"""
    code = textwrap.dedent(f'''
        import sys
        import gymnasium as gym
        import numpy as np
        from rlviz import RecordEpisode
        env = RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), {str(tmp_path)!r},
                            episode_trigger=lambda k: True)
        env.reset(seed=0)
        for t in range(5):
            env.annotate(logits=np.array([0.2, -0.1]), value=0.5)
            env.step(0)
        env.close()
        print("torch" in sys.modules, sorted(p.name for p in __import__("pathlib").Path({str(tmp_path)!r}).iterdir()))
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-2000:]
    torch_loaded, files = out.stdout.strip().split(" ", 1)
    assert torch_loaded == "False", out.stdout
    assert "rl-video-episode-0.mp4" in files and "rl-video-episode-0.npz" in files, files
