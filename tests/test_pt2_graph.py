"""rlviz's own reader of ``.pt2`` programs (:mod:`rlviz.sources.pt2.graph`) against torch.export's loader.

Every program is loaded both ways (``RLVIZ_PT2_LOADER=torch`` forces torch's) and run on the same inputs: the
outputs and the input gradients must be equal bit for bit, on batch sizes other than the traced one."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from test_continuous import PendulumActorCritic
from torch import nn

from rlviz.agent.models import MinAtarAgent, NatureCNNAgent
from rlviz.agent.policy import TorchPolicy
from rlviz.envs import atari_recipe
from rlviz.sources.checkpoint import load_agent, save_checkpoint
from rlviz.sources.pt2 import graph as pt2_graph
from rlviz.sources.pt2.exported import ExportedNetwork
from rlviz.sources.pt2.graph import GraphNetwork

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(glob.glob(str(ROOT / "samples" / "**" / "*.pt2"), recursive=True))


class Everything(nn.Module):
    """Shape arithmetic (``x.view(x.size(0), -1)``), buffers (persistent and not), layer norm, max pooling,
    softmax, tanh, a concatenation, NaN and infinite constants: operators beyond the plain MLP/CNN ones."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.conv = nn.Conv2d(4, 6, 3)
        self.norm = nn.LayerNorm(6 * 7 * 7)
        self.head = nn.Linear(6 * 7 * 7 + 2, 3)
        self.value = nn.Linear(6 * 7 * 7 + 2, 1)
        self.register_buffer("scale", torch.tensor([0.5, 1.5, 1.0, 2.0]).view(1, 1, 1, 4))
        self.register_buffer("shift", torch.full((1, 1, 1, 4), 0.25), persistent=False)

    def forward(self, obs):
        x = torch.where(obs > 2.0, float("nan"), obs).clamp(max=float("inf"))  # (never NaN: inputs are < 2)
        x = (x * self.scale - self.shift).permute(0, 3, 1, 2)
        h = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2, 1)
        h = self.norm(h.reshape(h.size(0), -1))
        extra = torch.stack([h.mean(1), torch.tanh(h).amax(1)], 1)
        h = torch.cat([h, extra], 1)
        return torch.log_softmax(self.head(h), -1) * 3.0, self.value(h).squeeze(-1)


def _made(tmp_path: Path) -> list[tuple[Path, tuple]]:
    torch.manual_seed(0)
    example = np.random.default_rng(0).integers(0, 256, (1, 4, 84, 84), dtype=np.uint8)
    return [
        (save_checkpoint(tmp_path / "minatar.pt2", MinAtarAgent(3), env="MinAtar/Breakout-v1"), (10, 10, 4)),
        (save_checkpoint(tmp_path / "atari.pt2", NatureCNNAgent(4), env=atari_recipe(), example_obs=example,
                         action_names=("NOOP", "FIRE", "RIGHT", "LEFT")), (4, 84, 84)),
        (save_checkpoint(tmp_path / "q.pt2", nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)),
                         env="CartPole-v1", kind="q"), (4,)),
        (save_checkpoint(tmp_path / "all.pt2", Everything(), env="MinAtar/Breakout-v1"), (10, 10, 4)),
        (save_checkpoint(tmp_path / "pendulum.pt2", PendulumActorCritic(), env="Pendulum-v1"), (3,)),
    ]


def _both(path: Path, monkeypatch) -> tuple[nn.Module, nn.Module]:
    mine = load_agent(path).policy.module
    with monkeypatch.context() as m:
        m.setenv(pt2_graph.LOADER_ENV, "torch")
        theirs = load_agent(path).policy.module
    return mine, theirs


def _flat(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _compare(mine: nn.Module, theirs: nn.Module, shape: tuple, scale: float) -> None:
    g = torch.Generator().manual_seed(len(shape))
    for batch in (1, 5, 16, 3):
        x = (torch.rand(batch, *shape, generator=g) * scale).requires_grad_(True)
        a, b = _flat(mine(x)), _flat(theirs(x))
        assert type(mine(x)) is type(theirs(x)) and len(a) == len(b)
        for p, q in zip(a, b):
            assert p.shape == q.shape and p.dtype == q.dtype and torch.equal(p, q)
        ga = torch.autograd.grad(sum(t.sum() * (i + 1) for i, t in enumerate(a)), x)[0]
        gb = torch.autograd.grad(sum(t.sum() * (i + 1) for i, t in enumerate(b)), x)[0]
        assert torch.equal(ga, gb) and ga.abs().max() > 0


def test_shipped_samples_run_as_torch_runs_them(monkeypatch):
    assert len(SAMPLES) >= 10
    for path in SAMPLES:
        mine, theirs = _both(Path(path), monkeypatch)
        assert isinstance(mine, GraphNetwork) and isinstance(theirs, ExportedNetwork), path
        meta = json.loads(zipfile.ZipFile(path).read("archive/extra/rlviz.json"))
        _compare(mine, theirs, tuple(meta["obs_shape"]), 255.0 if "ale_" in path else 1.0)


def test_saved_programs_of_many_operators_run_as_torch_runs_them(tmp_path, monkeypatch):
    for path, shape in _made(tmp_path):
        mine, theirs = _both(path, monkeypatch)
        assert isinstance(mine, GraphNetwork), path.name
        _compare(mine, theirs, shape, 255.0 if path.name == "atari.pt2" else 1.0)
        assert not any(p.requires_grad for p in mine.parameters())


def test_loading_imports_neither_dynamo_nor_sympy(tmp_path):
    """The start-up this reader exists for: torch.export's loader imports torch._dynamo and sympy (~1.5 s)."""
    code = ("import sys; from rlviz.sources import load_agent; a = load_agent(sys.argv[1]); "
            "a.policy.evaluate(__import__('numpy').zeros((2, 10, 10, 4), 'float32')); "
            "print(sorted(m for m in ('torch._dynamo', 'sympy', 'torch._inductor') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "samples" / "minatar_breakout_ppo.pt2")], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_input_check_runs_once_per_shape_and_refuses_bad_inputs_every_time(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "m.pt2", MinAtarAgent(3), env="MinAtar/Breakout-v1")
    module = load_agent(path).policy.module
    calls = []
    check = module._check
    module._check = lambda x: (calls.append(tuple(x.shape)), check(x))[1]
    x = torch.rand(5, 10, 10, 4)
    first, again = module(x), module(x)
    assert calls == [(5, 10, 10, 4)] and torch.equal(first[0], again[0])
    module(torch.rand(3, 10, 10, 4))
    assert calls[-1] == (3, 10, 10, 4) and len(calls) == 2
    for bad, what in ((torch.rand(5, 10, 10, 5), r"shape \[s\d+, 10, 10, 4\]; got .* shape \[5, 10, 10, 5\]"),
                      (torch.rand(10, 10, 4), r"shape \[5|shape \[10, 10, 4\]"),
                      (torch.rand(5, 10, 10, 4, dtype=torch.float64), r"torch.float64"),
                      (torch.rand(0, 10, 10, 4), r"shape \[0, 10, 10, 4\]")):
        for _ in range(2):  # refused every time, never remembered as checked
            with pytest.raises(ValueError, match=what):
                module(bad)
    assert len(calls) == 10


def test_a_binding_that_changes_the_numbers_is_caught_on_the_first_input(tmp_path, monkeypatch):
    """The graph runs through Python bindings after its first input of a shape ran through the OpOverloads (as
    torch runs it) and both agreed bit for bit; a binding that differs (relu called as sigmoid here) is dropped."""
    torch.manual_seed(1)
    model = MinAtarAgent(3)
    path = save_checkpoint(tmp_path / "m.pt2", model, env="MinAtar/Breakout-v1")
    monkeypatch.setattr(pt2_graph, "aten_bindings", lambda: {torch.ops.aten.relu.default: torch.sigmoid})
    module = load_agent(path).policy.module
    assert isinstance(module, GraphNetwork)
    x, y = torch.rand(5, 10, 10, 4), torch.rand(5, 10, 10, 4)
    with torch.no_grad():
        module(x)
        assert module._run is module._reference
        torch.testing.assert_close(module(y)[0], model(y)[0], rtol=1e-5, atol=1e-6)


def test_what_it_does_not_know_goes_to_torchs_loader(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "m.pt2", MinAtarAgent(3), env="MinAtar/Breakout-v1")
    monkeypatch.setattr(pt2_graph, "SCHEMA_MAJOR", 99)  # a schema version it does not know
    assert isinstance(load_agent(path).policy.module, ExportedNetwork)
    monkeypatch.undo()
    members = {n.removeprefix("archive/"): zipfile.ZipFile(path).read(n) for n in zipfile.ZipFile(path).namelist()}
    assert isinstance(pt2_graph.read_program(members), GraphNetwork)
    program = json.loads(members["models/model.json"])
    program["graph_module"]["graph"]["nodes"][2]["target"] = "torch.ops.aten.not_an_op.default"
    assert pt2_graph.read_program({**members, "models/model.json": json.dumps(program).encode()}) is None
    program = json.loads(members["models/model.json"])
    program["graph_module"]["signature"]["output_specs"][0] = {"buffer_mutation": {"arg": {"name": "x"},
                                                                                   "buffer_name": "b"}}
    assert pt2_graph.read_program({**members, "models/model.json": json.dumps(program).encode()}) is None
    weights = json.loads(members["data/weights/model_weights_config.json"])
    next(iter(weights["config"].values()))["use_pickle"] = True
    assert pt2_graph.read_program({**members, "data/weights/model_weights_config.json":
                                   json.dumps(weights).encode()}) is None
    monkeypatch.setenv(pt2_graph.LOADER_ENV, "torch")
    assert pt2_graph.read_program(members) is None


def test_a_policy_wrapper_with_an_obs_transform_round_trips(tmp_path, monkeypatch):
    """TorchPolicy's obs_transform is exported into the program: the reader runs it too."""
    torch.manual_seed(3)
    policy = TorchPolicy(MinAtarAgent(3), obs_transform=lambda x: x * 2.0 - 0.5)
    path = save_checkpoint(tmp_path / "t.pt2", policy, env="MinAtar/Breakout-v1")
    mine, theirs = _both(path, monkeypatch)
    assert isinstance(mine, GraphNetwork)
    _compare(mine, theirs, (10, 10, 4), 1.0)


def test_a_loaded_network_pickles_and_copies(tmp_path):
    """A policy may be sent to another process or copied (e.g. a timeline's live writer deep-copies policies): the
    network's generated functions are made again from its graph."""
    import copy
    import pickle

    module = load_agent(ROOT / "samples" / "minatar_breakout_ppo.pt2").policy.module
    x = torch.rand(4, 10, 10, 4, generator=torch.Generator().manual_seed(0))
    before = module(x)
    for other in (pickle.loads(pickle.dumps(module)), copy.deepcopy(module)):
        assert isinstance(other, GraphNetwork) and other._checked == set()
        after = other(x)
        assert all(torch.equal(a, b) for a, b in zip(before, after))
        with pytest.raises(ValueError, match="shape"):
            other(torch.rand(4, 10, 10, 5))
