"""rlviz checkpoints: exact round trips (outputs and input gradients), safety, and clear errors."""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import re
import zipfile

import numpy as np
import pytest
import torch
from torch import nn

from rlviz.agent.models import MinAtarAgent, NatureCNNAgent
from rlviz.envs import EnvRecipe, atari_recipe
from rlviz.errors import CheckpointError, UnsafeCheckpointError, UsageError
from rlviz.sources.checkpoint import (
    FORMAT_VERSION,
    LoadedAgent,
    detect_format,
    load_agent,
    load_checkpoint,
    save_checkpoint,
)

torch.set_num_threads(1)
ATARI_NAMES = ("NOOP", "FIRE", "RIGHT", "LEFT")


class QNet(nn.Module):
    def __init__(self, obs_dim: int = 4, num_actions: int = 2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 16), nn.ReLU(), nn.Linear(16, num_actions))

    def forward(self, x):
        return self.net(x)


class Branchy(nn.Module):
    """Data-dependent Python control flow: torch.export cannot trace it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, x):
        return self.lin(x) if x.sum() > 0 else -self.lin(x)


class Evil:
    """A pickle whose loading runs a shell command that creates ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _grads(fn, x):
    x = x.clone().requires_grad_(True)
    logits, value = fn(x)
    score = logits[:, 1].sum() + (value.sum() if value is not None else 0)
    (g,) = torch.autograd.grad(score, x)
    return logits.detach(), (None if value is None else value.detach()), g


def _atari_save(tmp_path, name="agent.pt2", **kw):
    torch.manual_seed(0)
    model = NatureCNNAgent(4)
    example = np.random.default_rng(0).integers(0, 256, (1, 4, 84, 84), dtype=np.uint8)
    path = save_checkpoint(tmp_path / name, model, env=atari_recipe(), example_obs=example,
                           action_names=ATARI_NAMES, **kw)
    return model, path


def test_nature_cnn_round_trip_outputs_and_gradients_on_other_batch_sizes(tmp_path):
    model, path = _atari_save(tmp_path, gamma=0.97, metadata={"command": "train.py --steps 10", "steps": np.int64(10)})
    agent = load_checkpoint(path, device="cpu")
    assert isinstance(agent, LoadedAgent) and agent.format == "rlviz" and agent.kind == "actor_critic"
    assert agent.recipe == atari_recipe() and agent.action_names == ATARI_NAMES and agent.gamma == 0.97
    assert agent.metadata == {"command": "train.py --steps 10", "steps": 10}
    with pytest.raises(dataclasses.FrozenInstanceError):
        agent.kind = "q"
    for batch in (5, 1):  # the program was traced with batch 2
        x = torch.rand(batch, 4, 84, 84, generator=torch.Generator().manual_seed(batch)) * 255
        ref_l, ref_v, ref_g = _grads(model, x)
        got_l, got_v, got_g = _grads(agent.policy.forward, x)
        assert got_l.shape == (batch, 4) and got_v.shape == (batch,)
        torch.testing.assert_close(got_l, ref_l, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got_v, ref_v, rtol=1e-5, atol=1e-6)
        assert ref_g.abs().max() > 0
        torch.testing.assert_close(got_g, ref_g, rtol=1e-5, atol=1e-6 * float(ref_g.abs().max()))
    out = agent.policy.evaluate(np.zeros((3, 4, 84, 84), dtype=np.uint8))
    assert out.probs.shape == (3, 4) and np.allclose(out.probs.sum(-1), 1.0)
    # An env given at load time overrides the stored recipe (same actions required).
    variant = atari_recipe(repeat_action_probability=0.0)
    assert load_agent(path, env=variant).recipe == variant
    with pytest.raises(UsageError, match="has 4 actions but env 'CartPole-v1' has 2"):
        load_agent(path, env="CartPole-v1")


def test_minatar_round_trip_derives_example_and_action_names_from_env(tmp_path):
    torch.manual_seed(1)
    model = MinAtarAgent(3)
    path = save_checkpoint(tmp_path / "minatar.pt2", model, env="MinAtar/Breakout-v1")
    agent = load_agent(path)
    assert agent.recipe == EnvRecipe("MinAtar/Breakout-v1", saliency_mode="nearest")
    assert agent.action_names == ("NOOP", "LEFT", "RIGHT") and agent.gamma == 0.99
    x = (torch.rand(7, 10, 10, 4, generator=torch.Generator().manual_seed(0)) > 0.7).float()
    ref_l, ref_v, ref_g = _grads(model, x)
    got_l, got_v, got_g = _grads(agent.policy.forward, x)
    torch.testing.assert_close(got_l, ref_l, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_v, ref_v, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_g, ref_g, rtol=1e-5, atol=1e-6 * float(ref_g.abs().max()))


def test_exported_program_checks_each_input_shape_once_and_still_refuses_bad_ones(tmp_path, monkeypatch):
    """torch's per-forward input check (15-20% of a small forward) runs once per (shape, dtype, device) (on
    torch.export's loader: rlviz's own, tests/test_pt2_graph.py, checks once per shape too)."""
    import torch.export._unlift as unlift

    monkeypatch.setenv("RLVIZ_PT2_LOADER", "torch")
    calls = []
    check = unlift._check_input_constraints_for_module
    monkeypatch.setattr(unlift, "_check_input_constraints_for_module", lambda *a: (calls.append(1), check(*a))[1])
    torch.manual_seed(1)
    model = MinAtarAgent(3)
    agent = load_agent(save_checkpoint(tmp_path / "minatar.pt2", model, env="MinAtar/Breakout-v1"))
    calls.clear()  # (loading ran forwards of its own)
    x = torch.rand(5, 10, 10, 4)
    first, again = agent.policy.forward(x), agent.policy.forward(x)
    assert len(calls) == 1
    torch.testing.assert_close(again[0], first[0], rtol=0, atol=0)
    torch.testing.assert_close(first[0], model(x)[0], rtol=1e-5, atol=1e-6)
    agent.policy.forward(torch.rand(3, 10, 10, 4))
    assert len(calls) == 2  # a new batch size is checked once too
    for _ in range(2):  # a bad input is refused with torch's message every time, never remembered as checked
        with pytest.raises(Exception, match=r"shape\[3\] to be equal to 4, but got 5"):
            agent.policy.forward(torch.rand(5, 10, 10, 5))
    assert len(calls) == 4


@pytest.mark.parametrize("net", ["minatar", "nature_cnn"])
def test_exported_program_runs_its_plain_forward_with_the_same_numbers(tmp_path, net, monkeypatch):
    """After the first input of a shape (run by torch's own program, checked), the graph runs as a plain function:
    the same outputs and input gradients, bit for bit, on other inputs of that shape (torch.export's loader)."""
    from rlviz.sources.pt2.exported import ExportedNetwork

    monkeypatch.setenv("RLVIZ_PT2_LOADER", "torch")
    torch.manual_seed(2)
    if net == "minatar":
        path = save_checkpoint(tmp_path / "m.pt2", MinAtarAgent(3), env="MinAtar/Breakout-v1")
        shape = (6, 10, 10, 4)
    else:
        path = _atari_save(tmp_path)[1]
        shape = (3, 4, 84, 84)
    module = load_agent(path).policy.module
    assert isinstance(module, ExportedNetwork)
    g = torch.Generator().manual_seed(3)
    module(torch.rand(shape, generator=g))
    assert callable(module._plain)  # built, and equal on that input
    for _ in range(2):
        x = (torch.rand(shape, generator=g) * 255).requires_grad_(True)
        mine = module(x)
        ref = module.program(x)
        for a, b in zip(mine, ref):
            assert torch.equal(a, b)
        ga = torch.autograd.grad(mine[0][:, 1].sum(), x)[0]
        gb = torch.autograd.grad(ref[0][:, 1].sum(), x)[0]
        assert torch.equal(ga, gb) and ga.abs().max() > 0


def test_exported_program_keeps_its_own_call_when_the_plain_forward_differs(tmp_path, monkeypatch):
    """A binding that would change the numbers (relu called as sigmoid here) is caught on the first input: the
    program's own call is kept."""
    from rlviz.sources.pt2 import exported

    monkeypatch.setenv("RLVIZ_PT2_LOADER", "torch")
    monkeypatch.setattr(exported, "aten_bindings", lambda: {torch.ops.aten.relu.default: torch.sigmoid})
    torch.manual_seed(1)
    model = MinAtarAgent(3)
    module = load_agent(save_checkpoint(tmp_path / "m.pt2", model, env="MinAtar/Breakout-v1")).policy.module
    x, y = torch.rand(5, 10, 10, 4), torch.rand(5, 10, 10, 4)
    with torch.no_grad():
        first = module(x)
        assert module._plain is False
        again = module(y)  # (a checked shape: the program's own call)
        torch.testing.assert_close(first[0], model(x)[0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(again[0], model(y)[0], rtol=1e-5, atol=1e-6)
    assert exported.plain_forward(nn.Sequential(nn.Linear(2, 2))) is None  # not an exported program's module


def test_q_network_round_trip(tmp_path):
    torch.manual_seed(2)
    model = QNet()
    path = save_checkpoint(tmp_path / "q.pt2", model, env="CartPole-v1", kind="q")
    agent = load_checkpoint(path)
    assert agent.kind == "q" and agent.policy.kind == "q" and agent.action_names == ("0", "1")
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    ref_l, _, ref_g = _grads(lambda t: (model(t), None), x)
    got_l, got_v, got_g = _grads(agent.policy.forward, x)
    torch.testing.assert_close(got_l, ref_l, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_v, ref_l.max(-1).values, rtol=1e-5, atol=1e-6)  # value = max_a Q
    out = agent.policy.evaluate(x.numpy())
    assert np.array_equal(out.probs.argmax(-1), ref_l.argmax(-1).numpy()) and set(np.unique(out.probs)) <= {0.0, 1.0}


def test_file_is_self_describing_and_versioned(tmp_path):
    _, path = _atari_save(tmp_path)
    data = path.read_bytes()
    assert detect_format(data) == "rlviz"
    members = zipfile.ZipFile(io.BytesIO(data)).namelist()
    meta_name = next(n for n in members if n.endswith("extra/rlviz.json"))
    import json

    meta = json.loads(zipfile.ZipFile(io.BytesIO(data)).read(meta_name))
    assert meta["format"] == "rlviz-checkpoint" and meta["format_version"] == FORMAT_VERSION
    assert meta["obs_shape"] == [4, 84, 84] and meta["obs_dtype"] == "uint8" and meta["num_actions"] == 4
    assert not any("pickle" in n or n.endswith(".pkl") for n in members)


def test_failed_save_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "agent.pt2"
    path.write_bytes(b"old contents")
    with pytest.raises(UsageError, match="torch.export could not trace Branchy"):
        save_checkpoint(path, Branchy(), env="CartPole-v1", kind="logits")
    assert path.read_bytes() == b"old contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.pt2"]


def test_newer_format_version_is_refused(tmp_path):
    _, path = _atari_save(tmp_path)
    bumped = tmp_path / "future.pt2"
    _rewrite(path, bumped, lambda name, data: data.replace(b'"format_version": 1', b'"format_version": 99')
             if name.endswith("rlviz.json") else data)
    with pytest.raises(CheckpointError, match="format 99; this rlviz reads up to 1"):
        load_checkpoint(bumped)


# -- safety ---------------------------------------------------------------------------------------
def _rewrite(src, dst, edit):
    src_zip = zipfile.ZipFile(src)
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as out:
        for info in src_zip.infolist():
            out.writestr(info, edit(info.filename, src_zip.read(info.filename)))


@pytest.mark.parametrize("via", ["torch.save", "pickle.dump"])
def test_malicious_pickle_is_refused_without_running(tmp_path, via):
    marker = tmp_path / "PWNED"
    path = tmp_path / "agent.pt"
    if via == "torch.save":
        torch.save({"weights": Evil(marker)}, path)
    else:
        path.write_bytes(pickle.dumps(Evil(marker), protocol=2))
    with pytest.raises(UnsafeCheckpointError, match="--trust-checkpoint") as info:
        load_agent(path, env="CartPole-v1")
    assert str(path) in str(info.value) and "runs whatever code" in str(info.value)
    assert not marker.exists()
    # The payload is live: opting in runs it (so the refusal above is what protected us).
    with pytest.raises(CheckpointError):
        load_agent(path, env="CartPole-v1", trust=True)
    assert marker.exists()


def test_crafted_export_that_would_eval_code_is_refused(tmp_path):
    _, path = _atari_save(tmp_path)
    marker = tmp_path / "PWNED"
    evil = tmp_path / "evil.pt2"
    payload = f"__import__('os').system('touch {marker}') or Symbol('s9')"

    def edit(name, data):
        if name.endswith("models/model.json"):
            return re.sub(r"Symbol\('s\d+', positive=True, integer=True\)", payload, data.decode(), count=1).encode()
        return data

    _rewrite(path, evil, edit)
    with pytest.raises(UnsafeCheckpointError, match="shape expression"):
        load_checkpoint(evil)
    assert not marker.exists()
    # torch.export.load itself evaluates it (sympy.sympify): opting in runs the payload.
    with pytest.raises(CheckpointError):
        load_checkpoint(evil, trust=True)
    assert marker.exists()


@pytest.mark.parametrize(
    "name_suffix, old, new, reason",
    [
        ("models/model.json", b'"torch.ops.aten.relu.default"', b'"torch.os.system"', "only aten operators"),
        ("models/model.json", b'"guards_code": []', b'"guards_code": ["True"]', "guard code"),
        ("model_weights_config.json", b'"use_pickle": false', b'"use_pickle": true', "stored as a pickle"),
    ],
)
def test_crafted_export_with_code_paths_is_refused(tmp_path, name_suffix, old, new, reason):
    _, path = _atari_save(tmp_path)
    evil = tmp_path / "evil.pt2"
    _rewrite(path, evil, lambda name, data: data.replace(old, new, 1) if name.endswith(name_suffix) else data)
    assert evil.read_bytes() != path.read_bytes()
    with pytest.raises(UnsafeCheckpointError, match=reason):
        load_agent(evil)


def test_weights_stored_for_another_device_are_refused_clearly(tmp_path):
    _, path = _atari_save(tmp_path)
    moved = tmp_path / "cuda.pt2"
    _rewrite(path, moved, lambda name, data: data.replace(b'"type": "cpu"', b'"type": "cuda"')
             if name.endswith("model_weights_config.json") else data)
    with pytest.raises(CheckpointError, match="stored for device 'cuda'; rlviz checkpoints keep weights on the CPU"):
        load_checkpoint(moved)


# -- unusable files -------------------------------------------------------------------------------
def _bad_files(tmp_path):
    _, good = _atari_save(tmp_path, "good.pt2")
    data = good.read_bytes()
    sd = tmp_path / "sd.pt"
    torch.save(QNet().state_dict(), sd)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
    files = {
        "empty.pt2": b"",
        "truncated.pt2": data[: len(data) // 2],
        "head.pt2": data[:100],
        "truncated_state_dict.pt": sd.read_bytes()[:300],
        "image.pt2": png,
        "notes.pt": b"this is a text file, not a checkpoint\n",
        "random.bin": bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8)),
        "other.zip": _zip_bytes({"readme.txt": b"hello"}),
        "bad_json.pt2": _edit_bytes(good, "models/model.json", lambda d: d[: len(d) // 2]),
    }
    for name, blob in files.items():
        (tmp_path / name).write_bytes(blob)
    return [tmp_path / n for n in files] + [tmp_path / "missing.pt2", tmp_path]


def _zip_bytes(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, v in members.items():
            z.writestr(k, v)
    return buf.getvalue()


def _edit_bytes(path, suffix, fn):
    buf = io.BytesIO()
    _rewrite(path, buf, lambda name, data: fn(data) if name.endswith(suffix) else data)
    return buf.getvalue()


def test_unusable_files_raise_checkpoint_error_naming_the_file(tmp_path):
    for path in _bad_files(tmp_path):
        for loader in (lambda p: load_agent(p, env="CartPole-v1"), load_checkpoint):
            try:
                loader(path)
            except CheckpointError as exc:
                msg = str(exc)
                assert str(path) in msg, msg
                assert "\n" not in msg, msg
                assert type(exc) is CheckpointError, (path.name, msg)
            except Exception as exc:  # noqa: BLE001 - the point of the test
                pytest.fail(f"{path.name}: {type(exc).__name__} instead of CheckpointError: {exc}")
            else:
                pytest.fail(f"{path.name} loaded")


def test_wrong_kind_messages_say_what_was_expected(tmp_path):
    png = tmp_path / "frame.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    with pytest.raises(CheckpointError, match="is a PNG image; expected an rlviz checkpoint"):
        load_agent(png)
    empty = tmp_path / "empty.pt2"
    empty.write_bytes(b"")
    with pytest.raises(CheckpointError, match="is empty"):
        load_agent(empty)
    sd = tmp_path / "sd.pt"
    torch.save(QNet().state_dict(), sd)
    with pytest.raises(CheckpointError, match="is a torch.save file, not an rlviz checkpoint"):
        load_checkpoint(sd)


# -- plain torch files ----------------------------------------------------------------------------
def test_state_dict_with_model_spec(tmp_path):
    torch.manual_seed(3)
    model = NatureCNNAgent(4)
    path = tmp_path / "agent.cleanrl_model"
    torch.save({"model_state_dict": model.state_dict(), "optimizer": torch.optim.Adam(model.parameters()).state_dict(),
                "step": 10}, path)
    with pytest.raises(UsageError, match="model="):
        load_agent(path, env="ALE/Breakout-v5")
    with pytest.raises(UsageError, match="does not record its environment"):
        load_agent(path, model="rlviz.agent.models:NatureCNNAgent")
    agent = load_agent(path, env="ALE/Breakout-v5", model="rlviz.agent.models:NatureCNNAgent", device="cpu")
    assert agent.format == "torch-state-dict" and agent.kind == "actor_critic" and agent.action_names == ATARI_NAMES
    x = torch.rand(3, 4, 84, 84, generator=torch.Generator().manual_seed(0)) * 255
    torch.testing.assert_close(agent.policy.forward(x)[0], model(x)[0], rtol=0, atol=0)
    with pytest.raises(CheckpointError, match=r"do not fit MinAtarAgent \(missing: \['torso.3.weight', 'torso.3.bias'\]; unexpected: .*"
                       r"torso.0.weight \(32, 4, 8, 8\) vs \(16, 4, 3, 3\)"):
        load_agent(path, env="ALE/Breakout-v5", model="rlviz.agent.models:MinAtarAgent(in_channels=4)")


def test_pickled_module_needs_trust(tmp_path):
    torch.manual_seed(4)
    model = QNet()
    path = tmp_path / "whole.pt"
    torch.save(model, path)
    with pytest.raises(UnsafeCheckpointError, match="trust=True"):
        load_agent(path, env="CartPole-v1")
    agent = load_agent(path, env="CartPole-v1", trust=True)
    assert agent.format == "torch-pickle" and agent.kind == "q"  # QNet is named like a Q-network
    x = torch.randn(4, 4)
    torch.testing.assert_close(agent.policy.forward(x)[0], model(x), rtol=0, atol=0)


def test_bare_torch_export_program_needs_env(tmp_path):
    torch.manual_seed(5)
    model = QNet()
    ep = torch.export.export(model, (torch.randn(2, 4),), dynamic_shapes=({0: torch.export.Dim("b", min=1)},))
    path = tmp_path / "bare.pt2"
    torch.export.save(ep, path)
    with pytest.raises(UsageError, match="pass env="):
        load_agent(path)
    agent = load_agent(path, env="CartPole-v1", kind="q")
    assert agent.format == "torch-export" and agent.kind == "q"
    x = torch.randn(5, 4)
    torch.testing.assert_close(agent.policy.forward(x)[0], model(x), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_checkpoint_saved_from_a_cuda_module_loads_on_the_cpu(tmp_path):
    torch.manual_seed(0)
    module = NatureCNNAgent(4).cuda()
    path = save_checkpoint(tmp_path / "gpu.pt2", module, env=atari_recipe("ALE/Breakout-v5"))
    obs = torch.randint(0, 255, (3, 4, 84, 84), dtype=torch.uint8)
    cpu = load_checkpoint(path, device="cpu").policy
    assert cpu.device.type == "cpu"
    with torch.no_grad():
        ref_logits, ref_value = module(obs.cuda())
        logits, value = cpu.forward(cpu.to_tensor(obs))
    torch.testing.assert_close(logits, ref_logits.cpu(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(value, ref_value.cpu(), rtol=1e-4, atol=1e-5)
    gpu = load_checkpoint(path, device="cuda").policy  # and back onto the GPU
    with torch.no_grad():
        torch.testing.assert_close(gpu.forward(gpu.to_tensor(obs))[0].cpu(), ref_logits.cpu(), rtol=1e-4, atol=1e-5)
