"""``rlviz compare A B --disagreements K`` on PettingZoo env ids (rlviz.disagree.agents): per agent id.

pistonball (parallel): A the shared-parameter torch agent of tests/test_render_agents.py trained for seconds, B the
same network untrained. Each agent id's numbers are recomputed here from scratch: its observations taken from a
replay of each episode (``play_episode``'s tap), both networks' softmax on them, the total variation and the argmax
compared, and the files' summary and ranked states checked against them. connect_four (AEC, action masks): the
distributions compared are the masked ones, and the playing side's branch to the end of the episode is the
episode's own end (its return, decisions, failure). A against A: no states, and the note says why.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pymunk")
pytest.importorskip("supersuit")
torch = pytest.importorskip("torch")

from test_render_agents import AGENTS, C4, Agent, _recipe, _train_torch_agent  # noqa: E402

from rlviz.cli import main  # noqa: E402
from rlviz.disagree.select import MIN_TV  # noqa: E402
from rlviz.envs.pettingzoo_envs import make_agents_env  # noqa: E402
from rlviz.evaluate.rollouts.agents import play_episode  # noqa: E402
from rlviz.sources import load_agent  # noqa: E402
from rlviz.sources.pt2.saving import save_checkpoint  # noqa: E402

EPISODES, K, WINDOW = 2, 3, 5


@pytest.fixture(scope="module")
def pistonball_pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("agents")
    trained = _train_torch_agent()
    torch.manual_seed(1)
    untrained = Agent()
    a = save_checkpoint(folder / "trained.pt2", trained, env=_recipe())
    b = save_checkpoint(folder / "untrained.pt2", untrained, env=_recipe())
    recipe = folder / "env-recipe.json"
    recipe.write_text(_recipe().to_json())
    return (a, b, recipe), (trained.eval(), untrained.eval())


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _decisions(ckpt, recipe, episodes: int, seed: int = 0) -> list[dict[str, list]]:
    """Per episode, per agent id: (observation, mask or None) of each of its decisions, as ``ckpt`` played them."""
    agent = load_agent(str(ckpt), env=str(recipe)) if recipe is not None else load_agent(str(ckpt))
    out = []
    for k in range(episodes):
        seen: dict[str, list] = {}

        def probe(agents, x, masks, _out, seen=seen):
            for j, a in enumerate(agents):
                seen.setdefault(a, []).append((x[j].copy(), None if masks is None else masks[j].copy()))

        env = make_agents_env(agent.recipe, render_mode="rgb_array")
        play_episode(env, agent.policy, k, seed, probe=probe)
        env.close()
        out.append(seen)
    return out


def _probs(net, x, mask):
    with torch.no_grad():
        logits = net(torch.as_tensor(x[None], dtype=torch.float32))[0][0].double()
    if mask is not None:
        logits = torch.where(torch.as_tensor(mask), logits, torch.tensor(-torch.inf, dtype=torch.float64))
    return torch.softmax(logits, -1).numpy()


def _measured(nets, decisions):
    """{(side, episode, agent): (tv [T], differ [T])}: TV = half the L1 distance of the two softmaxes."""
    out = {}
    for side, eps in zip("ab", decisions):
        for k, per_agent in enumerate(eps):
            for a, steps in per_agent.items():
                pa = np.array([_probs(nets[0], x, m) for x, m in steps])
                pb = np.array([_probs(nets[1], x, m) for x, m in steps])
                out[side, k, a] = (0.5 * np.abs(pa - pb).sum(1), pa.argmax(1) != pb.argmax(1))
    return out


def test_pistonball_disagreements_per_agent_are_each_agents_own_states(pistonball_pair, tmp_path, capsys):
    (a, b, recipe), nets = pistonball_pair
    out = tmp_path / "cmp"
    code = main(["compare", str(a), str(b), "--env", str(recipe), "--episodes", str(EPISODES), "--disagreements",
                 str(K), "--disagreement-horizon", str(WINDOW), "--videos", "none", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    rows = _rows(out / "episodes.csv")
    measured = _measured(nets, [_decisions(a, recipe, EPISODES), _decisions(b, recipe, EPISODES)])
    comparison = json.loads((out / "comparison.json").read_text())
    assert list(comparison["disagreements"]) == AGENTS
    for agent in AGENTS:
        data = json.loads((out / "disagreements" / agent / "disagreements.json").read_text())
        csv_rows = _rows(out / "disagreements" / agent / "disagreements.csv")
        summary = data["summary"]
        assert comparison["disagreements"][agent]["all"] == summary["all"]
        for side in "ab":  # its states: its decisions in that side's episodes, as episodes.csv counts them
            assert summary[f"on_{side}_states"]["states"] == sum(int(r[f"{side}_{agent}_length"]) for r in rows)
            assert all(len(measured[side, k, agent][0]) == int(rows[k][f"{side}_{agent}_length"])
                       for k in range(EPISODES))
        tv = np.concatenate([measured[s, k, agent][0] for s in "ab" for k in range(EPISODES)])
        differ = np.concatenate([measured[s, k, agent][1] for s in "ab" for k in range(EPISODES)])
        assert summary["all"]["states"] == tv.size
        assert summary["all"]["greedy_differ_share"] == pytest.approx(differ.mean(), abs=1e-12)
        assert summary["all"]["tv_mean"] == pytest.approx(tv.mean(), rel=1e-5)
        states = data["states"]
        assert len(states) == K and [s["rank"] for s in states] == list(range(1, K + 1))
        assert [r["step"] for r in csv_rows] == [str(s["step"]) for s in states]
        assert states[0]["tv"] == pytest.approx(tv.max(), rel=1e-5)  # the largest TV of its states comes first
        assert all(x["tv"] >= y["tv"] >= MIN_TV for x, y in zip(states, states[1:]))
        for s in states:
            t_tv, t_differ = measured[s["states_of"], s["episode"], agent]
            assert s["tv"] == pytest.approx(t_tv[s["step"]], rel=1e-5) and s["greedy_differ"] == bool(t_differ[s["step"]])
            assert s["seed"] == int(rows[s["episode"]]["seed"])
            left = int(rows[s["episode"]][f"{s['states_of']}_{agent}_length"]) - s["step"]
            # the playing side's branch is its own episode's continuation: WINDOW decisions or to the episode's end
            assert s[f"{s['states_of']}_steps"] == min(WINDOW, left)
            assert 1 <= s["a_steps"] <= WINDOW and 1 <= s["b_steps"] <= WINDOW and s["video"] is None
            assert s["better"] in ("a", "b", "tie")
        for x in states:  # at most one per window of an episode's decisions
            assert all(abs(x["step"] - y["step"]) >= WINDOW for y in states
                       if y is not x and (y["states_of"], y["episode"]) == (x["states_of"], x["episode"]))
        assert data["branches"]["states"] == K and sum(data["branches"]["better"].values()) == K


def test_an_agent_against_itself_has_no_disagreement_states(pistonball_pair, tmp_path, capsys):
    (a, _, recipe), _ = pistonball_pair
    out = tmp_path / "self"
    with pytest.warns(UserWarning, match="no states: A and B act the same"):
        code = main(["compare", str(a), str(a), "--env", str(recipe), "--episodes", "2", "--disagreements", "2",
                     "--videos", "none", "--out", str(out), "--tensorboard", str(tmp_path / "tb")])
    assert code == 0, capsys.readouterr().err
    from conftest import tb_accumulator  # comparison.json's per-agent numbers go to the sinks

    acc = tb_accumulator(tmp_path / "tb")
    for agent in AGENTS:
        data = json.loads((out / "disagreements" / agent / "disagreements.json").read_text())
        assert data["states"] == [] and data["summary"]["all"]["greedy_differ_share"] == 0.0
        assert data["summary"]["all"]["tv_mean"] == 0.0 and "act the same" in data["note"]
        key = f"rlviz/compare/disagreements/{agent}/all/"
        assert [e.value for e in acc.Scalars(key + "greedy_differ_share")] == [0.0]
        assert [e.value for e in acc.Scalars(key + "states")] == [data["summary"]["all"]["states"]]


def test_connect_four_compares_the_masked_distributions_and_branches_to_the_end(tmp_path, capsys):
    """An AEC game with action masks: TV of the masked softmaxes; with --disagreement-to-end the playing side's
    branch from a state of its own episode is that episode's end (connect_four pays only at the end)."""
    torch.manual_seed(0)
    nets = (C4().eval(), C4().eval())
    a, b = (save_checkpoint(tmp_path / f"{s}.pt2", n, env="connect_four_v3") for s, n in zip("ab", nets))
    out = tmp_path / "cmp"
    episodes = 3
    code = main(["compare", str(a), str(b), "--episodes", str(episodes), "--disagreements", "4",
                 "--disagreement-horizon", "3", "--disagreement-to-end", "--videos", "none", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    rows = _rows(out / "episodes.csv")
    decisions = [_decisions(a, None, episodes), _decisions(b, None, episodes)]
    assert any(m is not None and not m.all() for eps in decisions for d in eps for s in d.values() for _, m in s)
    measured = _measured(nets, decisions)
    for agent in ("player_0", "player_1"):
        data = json.loads((out / "disagreements" / agent / "disagreements.json").read_text())
        tv = np.concatenate([measured[s, k, agent][0] for s in "ab" for k in range(episodes)])
        assert data["summary"]["all"]["states"] == tv.size
        assert data["summary"]["all"]["tv_mean"] == pytest.approx(tv.mean(), rel=1e-5)
        assert data["states"] and data["to_end"] and data["horizon"] is None
        for s in data["states"]:
            side, row = s["states_of"], rows[s["episode"]]
            assert s["tv"] == pytest.approx(measured[side, s["episode"], agent][0][s["step"]], rel=1e-5)
            assert s[f"{side}_steps"] == int(row[f"{side}_{agent}_length"]) - s["step"]
            assert s[f"{side}_return"] == float(row[f"{side}_{agent}_return"])
            assert s[f"{side}_failed"] == bool(int(row[f"{side}_{agent}_failed"]))
            assert s[f"{side}_terminated"] == bool(int(row[f"{side}_{agent}_terminated"])) is True
            other = "b" if side == "a" else "a"
            assert s[f"{other}_terminated"] and s[f"{other}_return"] in (-1.0, 0.0, 1.0)
