"""rlviz installs beside torch >= 2.4 (CleanRL pins 2.4.1), but under torch < 2.6 a torch file can run code even
through ``torch.load(weights_only=True)`` (CVE-2025-32434): there every untrusted torch file is refused with one
line naming the CVE and the way out, and a trusted one still loads. The installed torch is 2.6+; the old one is
simulated by its version string, which is all rlviz reads."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from rlviz import load_agent, save_checkpoint
from rlviz.cli import main
from rlviz.errors import UnsafeCheckpointError

OLD = "2.4.1+cu121"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor, self.critic = nn.Linear(4, 2), nn.Linear(4, 1)

    def forward(self, x):
        return self.actor(x), self.critic(x).squeeze(-1)


@pytest.fixture
def files(tmp_path):
    torch.manual_seed(0)
    net = Net()
    torch.save(net.state_dict(), tmp_path / "weights.pt")
    torch.save(net, tmp_path / "whole.pt")
    save_checkpoint(tmp_path / "agent.pt2", net, env="CartPole-v1")
    return tmp_path, net


def test_files_load_under_the_installed_torch(files):
    tmp, _ = files
    assert tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 6)
    assert load_agent(tmp / "agent.pt2").format
    assert load_agent(tmp / "weights.pt", env="CartPole-v1", model=f"{__name__}:Net").format == "torch-state-dict"


@pytest.mark.parametrize("name,kw", [("weights.pt", {"env": "CartPole-v1", "model": f"{__name__}:Net"}),
                                     ("agent.pt2", {})])
def test_torch_before_2_6_refuses_untrusted_files_naming_the_cve(files, monkeypatch, name, kw):
    tmp, _ = files
    monkeypatch.setattr(torch, "__version__", OLD)
    with pytest.raises(UnsafeCheckpointError) as err:
        load_agent(tmp / name, **kw)
    text = str(err.value)
    assert "CVE-2025-32434" in text and "torch 2.4.1" in text and "torch>=2.6" in text and "trust" in text
    assert "\n" not in text and name in text


def test_torch_before_2_6_still_loads_a_file_the_user_trusts(files, monkeypatch):
    tmp, net = files
    monkeypatch.setattr(torch, "__version__", OLD)
    agent = load_agent(tmp / "whole.pt", env="CartPole-v1", trust=True)
    x = torch.randn(3, 4)
    torch.testing.assert_close(agent.policy.forward(x)[0], net(x)[0], rtol=0, atol=0)


def test_an_sb3_zip_is_refused_under_old_torch(tmp_path, monkeypatch):
    sb3 = pytest.importorskip("stable_baselines3")
    sb3.PPO("MlpPolicy", "CartPole-v1", n_steps=64, device="cpu").save(tmp_path / "ppo.zip")
    assert load_agent(tmp_path / "ppo.zip", env="CartPole-v1").format  # loads under the installed torch
    monkeypatch.setattr(torch, "__version__", OLD)
    with pytest.raises(UnsafeCheckpointError, match="CVE-2025-32434"):
        load_agent(tmp_path / "ppo.zip", env="CartPole-v1")


def test_cli_says_it_in_one_line_and_exits_1(files, monkeypatch, capsys):
    tmp, _ = files
    monkeypatch.setattr(torch, "__version__", OLD)
    assert main(["render", str(tmp / "agent.pt2"), "--out", str(tmp / "out"), "--episodes", "1"]) == 1
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "CVE-2025-32434" in lines[0] and "Traceback" not in err
    assert not (tmp / "out").exists()
