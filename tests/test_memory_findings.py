"""The memory findings in ``rlviz render``'s outputs: the planted probe agents of tests/_memory_probe.py as torch
modules with the recurrent protocol, rendered from their saved state_dicts: the agent that ignores its state gets
``memory_unused`` in summary.json (and on the report page), the cue agent gets no memory finding, the pinned one
``memory_saturated``; the findings do not depend on the batch; the rollouts' sample of an episode's steps is
bounded and decided by the episode alone; a feed-forward agent keeps nothing for them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from _memory_probe import CUE_ID, K, TinyMemory, play

from rlviz.cli import main
from rlviz.evaluate.rollouts.memory_sample import SAMPLE_STEPS, MemorySample
from rlviz.evaluate.statistics.memory_checks import memory_findings, memory_stats
from rlviz.explain import carried_states

PROBE = Path(__file__).with_name("_memory_probe.py")
MEMORY_IDS = {"memory_unused", "memory_saturated", "state_not_reset"}


def _render(tmp_path: Path, name: str, *flags: str) -> dict:
    import _memory_probe

    state = tmp_path / f"{name}.pt"
    torch.save(getattr(_memory_probe, name)().state_dict(), state)
    out = tmp_path / f"out-{name}-{len(flags)}"
    assert main(["render", str(state), "--model", f"{PROBE}:{name}", "--env", CUE_ID, "--out", str(out),
                 "--no-progress", "--videos", "none", "--episodes", "6", *flags]) == 0
    summary = json.loads((out / "summary.json").read_text())
    summary["_page"] = (out / "report.html").read_text()
    return summary


def _memory(summary: dict) -> dict:
    return {d["id"]: d for d in summary["diagnostics"] if d["id"] in MEMORY_IDS}


def test_render_flags_the_memoryless_agent_and_not_the_cue_agent(tmp_path, capsys):
    cue = _render(tmp_path, "CueModule")
    assert _memory(cue) == {}
    capsys.readouterr()
    memoryless = _render(tmp_path, "MemorylessModule")
    found = _memory(memoryless)
    assert set(found) == {"memory_unused"} and found["memory_unused"]["severity"] == "warning"
    # 6 episodes of K + 1 steps; the steps t >= 1 (K per episode) re-run: its outputs never read the state
    assert found["memory_unused"]["evidence"] == {"max_change": 0.0, "mean_change": 0.0, "steps": 6 * K}
    assert "memory_unused" in capsys.readouterr().out  # the summary printed at the end
    assert "memory_unused" in memoryless["_page"]


def test_render_flags_the_saturated_agent(tmp_path):
    found = _memory(_render(tmp_path, "SaturatedModule"))
    # h = tanh(10 h + 10 x): every state carried into a step t >= 1 has both units at |h| > 0.95
    assert set(found) == {"memory_saturated"}
    assert found["memory_saturated"]["evidence"] == {"mean_saturated_share": 1.0, "steps": 6 * K}


def test_render_memory_findings_do_not_depend_on_the_batch(tmp_path):
    one = _render(tmp_path, "SaturatedModule", "--num-envs", "1")
    four = _render(tmp_path, "SaturatedModule", "--num-envs", "4", "--seed", "0")
    assert one["diagnostics"] == four["diagnostics"]


def test_the_sample_is_bounded_even_and_the_episodes_own():
    sample = MemorySample()
    for t in range(1000):
        sample.offer(t, np.array([float(t)]), (np.full((1, 1), t, np.float32),))
    kept = [int(o[0]) for o in sample.obs]
    assert SAMPLE_STEPS // 2 < len(kept) <= SAMPLE_STEPS and kept[0] == 1
    assert len(set(np.diff(kept))) == 1 and kept[-1] > 1000 - 2 * np.diff(kept)[0]  # evenly over the whole episode
    assert [int(s[0][0, 0]) for s in sample.states] == kept
    short = MemorySample()
    for t in range(K + 1):
        short.offer(t, np.zeros(2, np.float32), (np.zeros((1, 2), np.float32),))
    assert len(short.obs) == K  # every step t >= 1 of a short episode


def test_the_stats_of_a_sample_are_the_findings_of_its_steps():
    policy = TinyMemory("cue")
    obs = play(policy, 0)[0]
    states = carried_states(policy, obs)
    stats = memory_stats(policy, obs[1:], tuple(s[1:] for s in states))
    assert stats["steps"] == K + 1 and stats["max_change"] > 0.4  # the decision without its cue: a coin flip
    assert memory_findings(policy, [(obs, states)]) == []


def test_a_feed_forward_rollout_keeps_nothing_for_the_memory():
    from rlviz.agent.policy import TorchPolicy
    from rlviz.evaluate import RolloutPlan, rollout

    policy = TorchPolicy(torch.nn.Sequential(torch.nn.Linear(4, 2)), device="cpu")
    result = rollout("CartPole-v1", policy, RolloutPlan(2, seed=0, progress=False))
    assert all(e.diag and "memory" not in e.diag for e in result.episodes)


def test_only_the_first_episodes_keep_a_sample_whatever_the_batch():
    from rlviz.evaluate import RolloutPlan, rollout
    from rlviz.evaluate.rollouts.memory_sample import MEMORY_EPISODES

    runs = [rollout(CUE_ID, TinyMemory("cue"), RolloutPlan(MEMORY_EPISODES + 2, seed=0, num_envs=n, progress=False))
            for n in (1, 5)]
    for result in runs:
        kept = [e.index for e in result.episodes if "memory" in e.diag]
        assert kept == list(range(MEMORY_EPISODES))
        assert all(e.diag["memory"]["steps"] == K for e in result.episodes if "memory" in e.diag)
    one, five = ([e.diag.get("memory") for e in r.episodes] for r in runs)
    assert one == five  # the same episodes, the same steps, the same numbers
