"""sb3-contrib RecurrentPPO and MaskablePPO loaded from their zips (nothing unpickled) and rendered through the CLI:
per-step outputs equal SB3's own (the LSTM state carried as ``predict`` carries it; the env's action masks applied),
``--greedy`` returns equal sb3's ``evaluate_policy`` on the same seeds, masked actions drawn as such."""

from __future__ import annotations

import csv

import _envs  # noqa: F401  (registers rlviz-probe/Masked-v0)
import gymnasium as gym
import numpy as np
import pytest
import torch
from _tolerance import assert_close_along, gain, recurrent_atol, sb3_gains
from _zips import rewrite_sb3_data

from rlviz.cli import main
from rlviz.draw.compose import ComposeOptions, Compositor
from rlviz.draw.style import COLORS
from rlviz.episode.trace import EpisodeInternals, EpisodeTrace
from rlviz.evaluate import RolloutPlan
from rlviz.media import probe_video, read_video
from rlviz.sources.checkpoint import load_agent

contrib = pytest.importorskip("sb3_contrib")
MASKED = "rlviz-probe/Masked-v0"


@pytest.fixture(scope="module")
def recurrent(tmp_path_factory):
    model = contrib.RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=32, batch_size=32, n_epochs=2, seed=0,
                                 device="cpu", policy_kwargs={"lstm_hidden_size": 16, "net_arch": [16]})
    model.learn(64)
    with torch.no_grad():  # decisive logits, so that what the LSTM remembers shows in every probability
        model.policy.action_net.weight.mul_(100.0)
    path = tmp_path_factory.mktemp("recurrent") / "recurrent.zip"
    model.save(path)
    return model, path


@pytest.fixture(scope="module")
def maskable(tmp_path_factory):
    model = contrib.MaskablePPO("MlpPolicy", MASKED, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu",
                                policy_kwargs={"net_arch": [16]})
    model.learn(256)
    path = tmp_path_factory.mktemp("maskable") / "maskable.zip"
    model.save(path)
    return model, path


def _render(path, env: str, out, *flags) -> list[dict]:
    assert main(["render", str(path), "--env", env, "--out", str(out), "--no-progress", *flags]) == 0
    return list(csv.DictReader((out / "episodes.csv").open()))


def _sb3_returns(model, env_id: str, seeds, evaluate) -> list[float]:
    from stable_baselines3.common.env_util import make_vec_env

    returns = []
    for seed in seeds:
        venv = make_vec_env(env_id, n_envs=1)
        venv.seed(int(seed))
        got, _ = evaluate(model, venv, n_eval_episodes=1, deterministic=True, return_episode_rewards=True)
        returns.append(float(got[0]))
    return returns


# -- RecurrentPPO -----------------------------------------------------------------------------------
def _sb3_recurrent_step(model, obs, rnn, start: bool):
    """SB3's probabilities, value and new RNNStates for one observation (as collect_rollouts / predict step)."""
    x, starts = torch.as_tensor(obs[None]), torch.tensor([float(start)])
    with torch.no_grad():
        dist, _ = model.policy.get_distribution(x, rnn.pi, starts)
        _, value, _, rnn = model.policy.forward(x, rnn, starts)
    return dist.distribution.probs.numpy()[0], float(value[0, 0]), rnn


def _recurrent_tolerances(model, steps: int):
    """The tolerances along ``steps`` LSTM steps (tests/_tolerance.py) of the probabilities (through the policy's
    16x16 layer and its action net, scaled x100 here), the value (the value layer and net) and the state itself."""
    to_logits, to_value = sb3_gains(model)
    return recurrent_atol(to_logits, steps), recurrent_atol(to_value, steps), recurrent_atol(gain(), steps)


def _zero_rnn(model):
    from sb3_contrib.common.recurrent.type_aliases import RNNStates

    zeros = torch.zeros(model.policy.lstm_hidden_state_shape)
    return RNNStates((zeros, zeros.clone()), (zeros.clone(), zeros.clone()))


def test_recurrent_steps_equal_sb3_across_episodes(recurrent):
    """Step by step over 80 steps (two episode starts on the way): probabilities, value and predict's action."""
    model, path = recurrent
    agent = load_agent(path, env="CartPole-v1")
    policy = agent.policy
    assert policy.stateful and (agent.kind, agent.metadata["algorithm"]) == ("actor_critic", "RecurrentPPO")
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=3)
    mine, rnn, sb3_state, start, episode, starts_seen = policy.initial_state(1), _zero_rnn(model), None, True, [], 0
    tol_p, tol_v, tol_h = _recurrent_tolerances(model, 80)
    for _ in range(80):
        out, mine = policy.step(obs[None], mine)
        probs, value, rnn = _sb3_recurrent_step(model, obs, rnn, start)
        action, sb3_state = model.predict(obs, state=sb3_state, episode_start=np.array([start]), deterministic=True)
        t = len(episode)  # the step in the episode: float32 rounding of the LSTM grows along it (tests/_tolerance.py)
        assert_close_along(out.probs, probs[None], tol_p, t)
        assert_close_along(out.value, [value], tol_v, t)
        assert int(out.logits[0].argmax()) == int(action)
        assert_close_along(mine[0][:, 0][None], sb3_state[0][:, 0][None], tol_h, t)  # predict's actor state, rows first
        episode.append((obs, out.probs[0], out.value[0]))
        obs, _, terminated, truncated, _ = env.step(int(action))
        start = terminated or truncated
        if start:
            starts_seen += 1
            whole = policy.evaluate(np.stack([o for o, _, _ in episode]), batch_size=7)  # chunks carry the state
            assert_close_along(whole.probs, np.stack([p for _, p, _ in episode]), tol_p)
            assert_close_along(whole.value, [v for _, _, v in episode], tol_v)
            obs, _ = env.reset()
            mine, episode = policy.initial_state(1), []
    assert starts_seen >= 2


def test_recurrent_steps_are_batch_invariant(recurrent):
    """A row's step gives the same bits alone as among 20 rows (two padded forwards)."""
    _, path = recurrent
    policy = load_agent(path, env="CartPole-v1").policy
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(20, 4)).astype(np.float32)
    state = tuple(rng.normal(size=s.shape).astype(np.float32) for s in policy.initial_state(20))
    out, new = policy.step(obs, state)
    for i in (0, 7, 19):
        alone, new_alone = policy.step(obs[i : i + 1], tuple(s[i : i + 1] for s in state))
        assert np.array_equal(alone.probs[0], out.probs[i]) and np.array_equal(alone.value[0], out.value[i])
        assert all(np.array_equal(a[0], b[i]) for a, b in zip(new_alone, new))


def test_recurrent_torch_step_equals_step_and_carries_gradients(recurrent):
    """The 0.5 contract: torch_step on state_tensors gives step()'s probabilities, value and new state rows (over
    a carried sequence of 12 steps, 3 rows), gradients reach the observations and the state; memory_of is the
    actor LSTM's last-layer h; state_arrays(state_tensors(rows)) is the rows."""
    model, path = recurrent
    policy = load_agent(path, env="CartPole-v1").policy
    assert policy.memory_kind == "lstm"
    rng = np.random.default_rng(1)
    rows = policy.initial_state(3)
    state = policy.state_tensors(rows)
    assert all(np.array_equal(a, b) for a, b in zip(policy.state_arrays(state), rows))
    for _ in range(12):
        obs = rng.normal(size=(3, 4)).astype(np.float32)
        out, rows = policy.step(obs, rows)
        heads, state = policy.torch_step(policy.to_tensor(obs), state)
        np.testing.assert_allclose(torch.exp(heads["logits"]).detach().numpy(), out.probs, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(heads["value"].detach().numpy(), out.value, rtol=1e-6, atol=1e-7)
        for a, b in zip(policy.state_arrays(state), rows):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    memory = policy.memory_of(rows)
    assert memory.shape == (3, 16) and memory.dtype == np.float32
    assert np.array_equal(memory, rows[0][:, -1, :]) and not np.array_equal(memory, rows[1][:, -1, :])
    x = policy.to_tensor(rng.normal(size=(2, 4)).astype(np.float32)).requires_grad_(True)
    s = tuple(t.clone().requires_grad_(True) for t in policy.state_tensors(tuple(r[:2] for r in rows)))
    heads, new = policy.torch_step(x, s)
    (heads["logits"][:, 0].sum() + heads["value"].sum()).backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    assert s[0].grad is not None and s[0].grad.abs().sum() > 0  # the actor's h reaches the decision
    assert new[0].shape == (2, 1, 16)


def _sb3_recurrent_episode(model, seed: int) -> dict:
    """SB3 playing the greedy episode of ``seed`` step by step: its probabilities, values, actions and the mean
    relative entropy (what rlviz's episodes.csv reports)."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    rnn, state, done, steps = _zero_rnn(model), None, False, []
    while not done:
        probs, value, rnn = _sb3_recurrent_step(model, obs, rnn, not steps)
        action, state = model.predict(obs, state=state, episode_start=np.array([not steps]), deterministic=True)
        steps.append((probs, value, int(action)))
        obs, _, terminated, truncated, _ = env.step(int(action))
        done = terminated or truncated
    probs = np.stack([p for p, _, _ in steps])
    entropy = -(probs * np.log(probs)).sum(-1) / np.log(2)
    return {"probs": probs, "value": np.array([v for _, v, _ in steps]), "actions": [a for _, _, a in steps],
            "mean_entropy": float(entropy.mean())}


def test_recurrent_renders_through_the_cli_with_sb3s_returns_and_outputs(recurrent, tmp_path):
    from stable_baselines3.common.evaluation import evaluate_policy

    model, path = recurrent
    rows = _render(path, "CartPole-v1", tmp_path / "out", "--episodes", "4", "--num-envs", "3", "--greedy",
                   "--videos", "first:1")
    assert len(rows) == 4
    seeds = [int(r["seed"]) for r in rows]
    assert [float(r["return"]) for r in rows] == _sb3_returns(model, "CartPole-v1", seeds, evaluate_policy)
    for row, seed in zip(rows, seeds):  # the rollout (3 envs in lockstep) carried each env's state as SB3 does
        assert float(row["mean_entropy"]) == pytest.approx(_sb3_recurrent_episode(model, seed)["mean_entropy"],
                                                           abs=1e-5)
    video = next((tmp_path / "out" / "videos").glob("*.mp4"))
    data = np.load(video.with_suffix(".npz"))
    sb3 = _sb3_recurrent_episode(model, seeds[0])  # the recorded episode's internals are SB3's, step by step
    assert list(data["actions"]) == sb3["actions"]
    # the rollout's batch of 3 (padded) against SB3's batch of 1 along the whole episode: the tolerance grows with
    # the step (tests/_tolerance.py's argument: U (t+1)^1.5 times the heads' gain)
    tol_p, tol_v, _ = _recurrent_tolerances(model, len(sb3["probs"]))
    assert_close_along(data["probs"][:-1], sb3["probs"], tol_p)
    assert_close_along(data["value"][:-1], sb3["value"], tol_v)
    assert probe_video(video).num_frames >= len(data["actions"]) + 1


def test_recurrent_renders_gradient_saliency_given_the_carried_state(recurrent, tmp_path):
    """--saliency gradient --heatmap on RecurrentPPO (saliency refused in 0.4): the recorded episode's per-feature
    saliency in its .npz is each step's given the LSTM state carried into it (explain.episode_saliency of the
    episode); CartPole's vector observations turn attention off (tests/test_memory_attention.py has it on MinAtar)."""
    from rlviz.explain import episode_saliency

    _, path = recurrent
    rows = _render(path, "CartPole-v1", tmp_path / "o", "--episodes", "2", "--saliency", "gradient",
                   "--videos", "first:1", "--heatmap")
    assert len(rows) == 2 and (tmp_path / "o" / "heatmap.png").exists()
    (npz,) = (tmp_path / "o" / "videos").glob("*.npz")
    data = np.load(npz)
    policy = load_agent(path, env="CartPole-v1").policy
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=int(rows[0]["seed"]))
    observations, state = [obs], policy.initial_state(1)
    for action in data["actions"]:
        _, state = policy.step(obs[None], state)
        obs, *_ = env.step(int(action))
        observations.append(obs)
    want, _ = episode_saliency(policy, np.stack(observations).astype(np.float32), data["actions"])
    assert data["saliency"].shape == want.shape
    np.testing.assert_allclose(data["saliency"], want, atol=1e-5)


# -- MaskablePPO ------------------------------------------------------------------------------------
def _masked_steps(n: int = 60):
    """(observations, masks) of random valid play on the masked probe env."""
    env, rng, obs_list, masks = gym.make(MASKED), np.random.default_rng(0), [], []
    obs, _ = env.reset(seed=0)
    for _ in range(n):
        m = env.unwrapped.action_masks()
        obs_list.append(obs)
        masks.append(m)
        obs, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(m))))
        if te or tr:
            obs, _ = env.reset()
    return np.stack(obs_list), np.stack(masks)


def test_maskable_outputs_equal_sb3_with_the_masks(maskable):
    model, path = maskable
    agent = load_agent(path, env=MASKED)
    assert agent.policy.needs_action_masks and agent.metadata["algorithm"] == "MaskablePPO"
    obs, masks = _masked_steps()
    assert (~masks).any()  # some actions are masked on the way
    out = agent.policy.evaluate(obs, masks=masks)
    x = torch.as_tensor(obs)
    with torch.no_grad():
        dist = model.policy.get_distribution(x, action_masks=masks).distribution
        values = model.policy.predict_values(x)[:, 0].numpy()
    np.testing.assert_allclose(out.probs, dist.probs.numpy(), atol=1e-5)
    np.testing.assert_allclose(out.logits, dist.logits.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.value, values, rtol=1e-5, atol=1e-5)
    assert (out.probs[~masks] == 0).all()
    np.testing.assert_array_equal(out.logits.argmax(-1), model.predict(obs, action_masks=masks, deterministic=True)[0])


def _row_mean(frame: np.ndarray, layout, row: int, x0: int, x1: int) -> np.ndarray:
    y = layout.bar_rows[row]
    return frame[y + 2 : y + layout.bar_h - 2, x0:x1].reshape(-1, 3).mean(axis=0)


def test_maskable_renders_masked_actions_and_greedy_returns_equal_sb3(maskable, tmp_path):
    from sb3_contrib.common.maskable.evaluation import evaluate_policy

    model, path = maskable
    # sampled actions: the probe env raises on any masked action, so this passes only if none was taken
    sampled = _render(path, MASKED, tmp_path / "sampled", "--episodes", "6", "--num-envs", "3", "--videos", "none")
    assert len(sampled) == 6
    rows = _render(path, MASKED, tmp_path / "out", "--episodes", "4", "--num-envs", "3", "--greedy",
                   "--videos", "first:1")
    seeds = [int(r["seed"]) for r in rows]
    assert [float(r["return"]) for r in rows] == pytest.approx(_sb3_returns(model, MASKED, seeds, evaluate_policy))
    video = next((tmp_path / "out" / "videos").glob("*.mp4"))
    data = np.load(video.with_suffix(".npz"))
    masks, actions = data["action_masks"], data["actions"]
    env = gym.make(MASKED)
    env.reset(seed=seeds[0])
    for t, action in enumerate(actions):  # the stored masks are the env's, before each action
        np.testing.assert_array_equal(masks[t], env.unwrapped.action_masks())
        env.step(int(action))
    assert (data["probs"][~masks] == 0).all() and (~masks[:-1]).any()
    # the drawn panel: a masked action's track is filled with the "masked" colour, an allowed one's is not
    n = len(actions)
    trace = EpisodeTrace(np.zeros((n + 1, 16, 16, 3), np.uint8), np.zeros((n + 1, 3), np.float32), actions,
                         data["rewards"], None, True, False, tuple(str(a) for a in range(4)), 0, None, 10.0, MASKED)
    internals = EpisodeInternals(data["logits"], data["probs"], data["value"], "actor_critic", entropy=data["entropy"],
                                 returns_to_go=data["returns_to_go"], gamma=0.99, action_masks=masks)
    layout = Compositor(trace, internals, ComposeOptions(min_seconds=2.0)).layout
    x0, x1 = layout.bar_x0 + layout.bar_len // 2, layout.bar_x0 + layout.bar_len - 2  # right half: no prob bar
    frames = list(read_video(video))
    assert len(frames) >= n + 1
    for t in range(n):
        for a in range(4):
            color = _row_mean(frames[t], layout, a, x0, x1)
            if masks[t, a]:
                assert np.abs(color - COLORS["masked"]).max() > 40
            else:
                assert np.abs(color - COLORS["masked"]).max() < 20, (t, a, color)


def test_a_recurrent_zip_with_code_in_its_policy_kwargs_is_refused(recurrent, tmp_path, monkeypatch):
    """lstm_kwargs are read as a literal: an expression that would create a file is refused, nothing runs."""
    from rlviz.errors import UnsafeCheckpointError

    _, path = recurrent
    monkeypatch.chdir(tmp_path)
    bad = rewrite_sb3_data(path, tmp_path / "bad.zip", lambda doc: doc["policy_kwargs"].update(
        lstm_kwargs="__import__('pathlib').Path('pwned').touch()"))
    with pytest.raises(UnsafeCheckpointError, match="lstm_kwargs"):
        load_agent(bad, env="CartPole-v1")
    assert not (tmp_path / "pwned").exists()


def test_a_masked_policy_on_an_env_without_action_masks_says_so():
    from rlviz.agent.masking import MaskedTorchPolicy
    from rlviz.errors import EnvError
    from rlviz.evaluate.rollouts.rollout import rollout

    policy = MaskedTorchPolicy(lambda x: torch.zeros(x.shape[0], 2), num_actions=2, kind="logits", device="cpu")
    with pytest.raises(EnvError, match="no action_masks"):
        rollout("rlviz-probe/Probe-v0", policy, RolloutPlan(1))
