"""RecurrentPPO in every job: ``shared_lstm`` and ``enable_critic_lstm=False`` and ``CnnLstmPolicy`` step as
sb3-contrib's own predict path does with the same LSTM states; ``compare --disagreements`` asks each agent with its
memory run along the other's episode and branches restore each agent's memory; the timeline's policy change runs
each checkpoint's memory along one episode."""

from __future__ import annotations

import csv
import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from _tolerance import recurrent_atol, sb3_gains

from rlviz.cli import main
from rlviz.envs import make_env
from rlviz.sources.checkpoint import load_agent

contrib = pytest.importorskip("sb3_contrib")

VARIANTS = {"critic_lstm": {}, "shared_lstm": {"shared_lstm": True, "enable_critic_lstm": False},
            "critic_mlp": {"enable_critic_lstm": False}}


def _train(policy: str, env, seed: int, **kwargs):
    model = contrib.RecurrentPPO(policy, env, n_steps=32, batch_size=32, n_epochs=1, seed=seed, device="cpu",
                                 policy_kwargs={"lstm_hidden_size": 16, "net_arch": [16], **kwargs})
    model.learn(32)
    with torch.no_grad():  # decisive logits, so that what the LSTM remembers shows in every probability
        model.policy.action_net.weight.mul_(100.0)
    return model


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    folder = tmp_path_factory.mktemp("variants")
    out = {}
    for i, (name, kw) in enumerate(VARIANTS.items()):
        model = _train("MlpLstmPolicy", "CartPole-v1", i, **kw)
        model.save(folder / f"{name}.zip")
        out[name] = (model, folder / f"{name}.zip")
    return out


def _zero_rnn(model):
    from sb3_contrib.common.recurrent.type_aliases import RNNStates

    zeros = torch.zeros(model.policy.lstm_hidden_state_shape)
    return RNNStates((zeros, zeros.clone()), (zeros.clone(), zeros.clone()))


def _sb3_step(model, obs, rnn, start: bool):
    """sb3-contrib's probabilities, value and new RNNStates for one observation (its predict / collect_rollouts
    path: obs_to_tensor, get_distribution with the actor's states, forward for the value)."""
    x = model.policy.obs_to_tensor(obs)[0]
    starts = torch.tensor([float(start)])
    with torch.no_grad():
        dist, _ = model.policy.get_distribution(x, rnn.pi, starts)
        _, value, _, rnn = model.policy.forward(x, rnn, starts)
    return dist.distribution.probs.numpy()[0], float(value.reshape(-1)[0]), rnn


def _check_steps(model, path, env_id: str, steps: int, restart_at: int, atol: float = 1e-5):
    loaded = load_agent(path, env=env_id)
    policy, env = loaded.policy, make_env(loaded.recipe)
    obs, _ = env.reset(seed=3)
    mine, rnn, state, start, seen = policy.initial_state(1), _zero_rnn(model), None, True, set()
    for t in range(steps):
        if t == restart_at:  # an episode start: the loop's fresh row, SB3's episode_start
            obs, _ = env.reset(seed=4)
            mine, start = policy.initial_state(1), True
        out, mine = policy.step(obs[None], mine)
        probs, value, rnn = _sb3_step(model, obs, rnn, start)
        action, state = model.predict(obs, state=state, episode_start=np.array([start]), deterministic=True)
        np.testing.assert_allclose(out.probs[0], probs, atol=atol)
        assert out.value[0] == pytest.approx(value, rel=1e-5, abs=atol)
        assert int(out.probs[0].argmax()) == int(action)
        np.testing.assert_allclose(mine[0][0], state[0][:, 0], rtol=1e-5, atol=atol)  # predict's actor h, all layers
        seen.add(round(float(out.value[0]), 4))
        obs, _, terminated, truncated, _ = env.step(int(action))
        start = bool(terminated or truncated)
        if start:
            obs, _ = env.reset()
            mine = policy.initial_state(1)
    assert len(seen) > steps // 3  # the value moves from step to step


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variants_step_as_sb3s_predict_path(variants, name):
    model, path = variants[name]
    policy = load_agent(path, env="CartPole-v1").policy
    assert len(policy.initial_state(1)) == (4 if name == "critic_lstm" else 2)
    _check_steps(model, path, "CartPole-v1", 60, 30)


def test_cnn_lstm_policy_steps_as_sb3s_predict_path(tmp_path):
    pytest.importorskip("ale_py")
    env = make_env("ALE/Pong-v5")  # rlviz's Atari recipe: [4, 84, 84] uint8, as the model is trained on
    model = contrib.RecurrentPPO("CnnLstmPolicy", env, n_steps=8, batch_size=8, n_epochs=1, seed=0, device="cpu",
                                 policy_kwargs={"lstm_hidden_size": 16, "n_lstm_layers": 2,
                                                "features_extractor_kwargs": {"features_dim": 32}})
    with torch.no_grad():
        model.policy.action_net.weight.mul_(100.0)
    model.save(tmp_path / "cnn.zip")
    policy = load_agent(tmp_path / "cnn.zip", env="ALE/Pong-v5").policy
    assert policy.initial_state(1)[0].shape == (1, 2, 16)
    _check_steps(model, tmp_path / "cnn.zip", "ALE/Pong-v5", 12, 6, atol=1e-4)


def _cartpole_episode(policy, seed: int, actions_of=None) -> list:
    """The greedy episode of ``policy`` on ``seed`` (or of ``actions_of``'s actions): its observations."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    seen, state, done = [obs], policy.initial_state(1), False
    while not done:
        out, state = policy.step(obs[None], state)
        obs, _, te, tr, _ = env.step(int(out.probs[0].argmax()))
        seen.append(obs)
        done = te or tr
    return seen[:-1]


def _branch(player, seed: int, observations: list, actions: list, step: int, horizon: int) -> int:
    """Steps ``player`` plays greedily from state ``step`` of the episode (seed ``seed``; its ``observations`` and
    ``actions``), its memory run along the episode's first ``step`` observations: the branch as it should be."""
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    state = player.initial_state(1)
    for obs, a in zip(observations[:step], actions[:step]):  # the episode's actions; the player's memory follows
        _, state = player.step(obs[None], state)
        env.step(a)
    obs, n = observations[step], 0
    while n < horizon:
        out, state = player.step(obs[None], state)
        obs, _, te, tr, _ = env.step(int(out.probs[0].argmax()))
        n += 1
        if te or tr:
            break
    return n


def test_compare_disagreements_on_two_recurrent_agents(variants, tmp_path):
    """Each top state's TV and values are the two agents' with their memories run along the playing agent's
    episode; each branch is the agent playing on from the restored env with its memory of the episode so far, and
    the branch's recorded numbers start from that memory."""
    (model_a, path_a), (model_b, path_b) = variants["critic_lstm"], variants["shared_lstm"]
    # the probe (batched in the rollout) and the branches against evaluate along the episode: float32 LSTM rollouts
    # of other batch shapes, whose difference grows with the step (tests/_tolerance.py: U (t+1)^1.5 x the gain)
    to_logits, to_value = (max(g) for g in zip(sb3_gains(model_a), sb3_gains(model_b)))
    tol_p, tol_v = recurrent_atol(to_logits, 501), recurrent_atol(to_value, 501)
    out = tmp_path / "cmp"
    assert main(["compare", str(path_a), str(path_b), "--env", "CartPole-v1", "--episodes", "3", "--greedy",
                 "--disagreements", "3", "--disagreement-horizon", "15", "--out", str(out), "--no-progress"]) == 0
    rows = list(csv.DictReader((out / "disagreements.csv").open()))
    assert len(rows) == 3
    pa, pb = load_agent(path_a, env="CartPole-v1").policy, load_agent(path_b, env="CartPole-v1").policy
    for row in rows:
        own, other = (pa, pb) if row["states_of"] == "a" else (pb, pa)
        seed, step = int(row["seed"]), int(row["step"])
        episode = _cartpole_episode(own, seed)
        mine, theirs = own.evaluate(np.stack(episode)), other.evaluate(np.stack(episode))
        tv = 0.5 * np.abs(mine.probs[step] - theirs.probs[step]).sum()
        # |dTV| <= (|dp_a| + |dp_b|) summed over 2 actions / 2: twice one distribution's tolerance
        assert float(row["tv"]) == pytest.approx(tv, abs=2 * tol_p[step])
        values = {row["states_of"]: mine.value[step], "ba"[row["states_of"] == "b"]: theirs.value[step]}
        assert float(row["value_a"]) == pytest.approx(values["a"], rel=1e-5, abs=tol_v[step])
        assert float(row["value_b"]) == pytest.approx(values["b"], rel=1e-5, abs=tol_v[step])
        actions = [int(p.argmax()) for p in mine.probs]
        for side, player in (("a", pa), ("b", pb)):
            assert int(row[f"{side}_steps"]) == _branch(player, seed, episode, actions, step, 15)
    first = json.loads((out / "disagreements.json").read_text())["states"][0]
    kept = np.load(out / "videos" / "disagreements" / "a" / "state-1.npz")
    own = pa if first["states_of"] == "a" else pb
    episode = _cartpole_episode(own, first["seed"])
    along = pa.evaluate(np.stack(episode))  # A at that state, its memory run along the episode
    np.testing.assert_allclose(kept["probs"][0], along.probs[first["step"]], atol=tol_p[first["step"]])
    assert kept["value"][0] == pytest.approx(along.value[first["step"]], rel=1e-5, abs=tol_v[first["step"]])


def test_timeline_policy_change_runs_each_checkpoints_memory_along_one_episode(variants, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    variants["critic_lstm"][0].save(run / "rl_model_32_steps.zip")
    _train("MlpLstmPolicy", "CartPole-v1", 7).save(run / "rl_model_64_steps.zip")  # the same layout, other weights
    out = tmp_path / "tl"
    assert main(["timeline", str(run), "--env", "CartPole-v1", "--episodes", "2", "--greedy", "--out", str(out),
                 "--no-progress", "--videos", "none"]) == 0
    change = json.loads((out / "timeline.json").read_text())["checkpoints"][1]["policy_change"]
    early = load_agent(run / "rl_model_32_steps.zip", env="CartPole-v1").policy
    late = load_agent(run / "rl_model_64_steps.zip", env="CartPole-v1").policy
    episode = np.stack(_cartpole_episode(late, _first_seed(out)))  # the later checkpoint's first episode
    new, old = late.evaluate(episode), early.evaluate(episode)
    assert change["states"] == len(episode)
    assert change["tv_mean"] == pytest.approx(float((0.5 * np.abs(new.probs - old.probs).sum(1)).mean()), abs=1e-6)
    assert change["tv_mean"] > 0.01


def _first_seed(out) -> int:
    from rlviz.evaluate.rollouts.rollout import episode_seed_for

    return episode_seed_for(json.loads((out / "timeline.json").read_text())["seed"], 0)
