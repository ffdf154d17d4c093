"""Errors that teach: one line, what was received, what was expected, the fix; "did you mean" for flags, choices
and env ids; unknown env ids and missing files fail before torch is imported."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import rlviz
import rlviz.errors
from rlviz.agent.models import NatureCNNAgent
from rlviz.cli import main


def _cli(args, capsys) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return code, lines[0]


@pytest.mark.parametrize("args, code, expected", [
    (["render", "x.pt2", "--episdes", "3"], 2, "Did you mean '--episodes'"),
    (["render", "x.pt2", "--saliency", "gradiant"], 2, "Did you mean 'gradient'"),
    (["render", "x.pt2", "--fail-on", "life_loss"], 2, "Did you mean 'life-loss'"),
    (["rendr", "x.pt2"], 2, "Did you mean 'render'"),
    (["render", "x.pt2", "--episodes", "0"], 2, "--episodes: expected a positive whole number, received '0'"),
    (["render", "x.pt2", "--seed", "1.5"], 2, "--seed: expected a whole number >= 0, received '1.5'"),
    (["render", "x.pt2", "--gamma", "1.5"], 2, "gamma='1.5'; expected a number in [0, 1]"),
    (["render", "x.pt2", "--videos", "wrost:1"], 2, "Did you mean 'worst'"),
    (["render", "x.pt2", "--saliency-target", "valeu"], 2, "Did you mean 'value'"),
    (["render", "MISSING.pt2"], 1, "No checkpoint at MISSING.pt2"),
])
def test_bad_input_is_one_line_with_the_fix(tmp_path, monkeypatch, capsys, args, code, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.pt2").write_bytes(b"")
    got, line = _cli(args, capsys)
    assert got == code and expected in line, line


def test_did_you_mean_lists_each_suggestion_once(capsys):
    _, line = _cli(["render", "x.pt2", "--episdes", "5"], capsys)
    suggestions = re.findall(r"'(--[\w-]+)'", line.split("Did you mean", 1)[1])
    assert suggestions and suggestions[0] == "--episodes" and len(suggestions) == len(set(suggestions)), line
    assert rlviz.errors.did_you_mean("a", ["ab", "ab", "ab"]) == " Did you mean 'ab'?"


def test_an_unknown_env_id_names_the_closest_ones_before_torch_loads(tmp_path):
    (tmp_path / "x.pt2").write_bytes(b"")
    code = ("import sys; from rlviz.cli import main\n"
            "rc = main(['render', 'x.pt2', '--env', 'CartPol-v1'])\n"
            "print(rc, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.stdout.split() == ["1", "False"], out.stderr
    assert out.stderr.count("\n") == 1 and "Unknown env id 'CartPol-v1'" in out.stderr
    assert "Did you mean 'CartPole-v1'" in out.stderr


def test_attribute_on_one_unbatched_observation_says_add_a_batch_axis():
    policy = rlviz.TorchPolicy(NatureCNNAgent(4))
    with pytest.raises(rlviz.UsageError, match=r"for one observation pass obs\[None\]"):
        rlviz.attribute(policy, np.zeros((4, 84, 84), np.uint8))
    assert rlviz.attribute(policy, np.zeros((1, 4, 84, 84), np.uint8)).shape == (1, 84, 84)


def test_the_library_validates_the_same_way():
    with pytest.raises(rlviz.UsageError, match="--episodes: expected a positive whole number"):
        rlviz.RenderConfig(checkpoint="x.pt2", episodes=0)
    with pytest.raises(rlviz.UsageError, match="Did you mean 'perturbation'"):
        rlviz.RenderConfig(checkpoint="x.pt2", saliency="perturbaton")
