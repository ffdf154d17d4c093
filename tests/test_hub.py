"""Agents from the Hugging Face Hub (``hf://ORG/REPO``), against a real huggingface_hub cache with no network:
HF_HOME in a temporary folder, HF_HUB_OFFLINE=1, repos laid out as huggingface_hub stores them (tests/_hub.py)."""

from __future__ import annotations

import csv
import json
import os
import pickle
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
from _hub import cache_repo, model_card, offline_hub, repo_folder
from test_cleanrl_scripts import PPOAgent, _save

from rlviz.cli import main
from rlviz.errors import EnvError, HubError, UnsafeCheckpointError, UsageError
from rlviz.jobs.render import render
from rlviz.sources.checkpoint import load_agent

hf = pytest.importorskip("huggingface_hub")
yaml = pytest.importorskip("yaml")

_OPENED: list | None = None  # while a list: every file this process opens or compiles (an audit hook, below)


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event in ("open", "compile", "exec") and args and isinstance(args[0], (str, bytes)):
        _OPENED.append(os.fsdecode(args[0]) if event == "open" else f"{event}:{args[-1]}")


sys.addaudithook(_audit)


@pytest.fixture
def hub(monkeypatch, tmp_path, no_network):
    """The offline cache (no connection leaves this process: ``no_network``)."""
    yield offline_hub(monkeypatch, tmp_path)
    assert no_network[0] == []


def _zoo_repo(run: Path) -> dict:
    """What rl-zoo3's push_to_hub uploads for that run (the model renamed <algo>-<env>.zip, the statistics
    vec_normalize.pkl), with the files rlviz must not need: metrics, video, results, card."""
    cfg = run / "CartPole-v1"
    return {"ppo-CartPole-v1.zip": run / "CartPole-v1.zip", "config.yml": cfg / "config.yml",
            "args.yml": cfg / "args.yml", "env_kwargs.yml": yaml.dump(OrderedDict()),
            "vec_normalize.pkl": cfg / "vecnormalize.pkl", "results.json": '{"mean_reward": 9.5}',
            "train_eval_metrics.zip": b"PK\x05\x06" + bytes(18), "replay.mp4": b"\0\0\0\x18ftypmp42",
            "README.md": model_card("CartPole-v1")}


def _returns(out: Path) -> list[tuple[str, str, str]]:
    return [(r["seed"], r["return"], r["length"]) for r in csv.DictReader((out / "episodes.csv").open())]


def test_zoo_repo_renders_as_the_same_files_in_a_local_run_folder(zoo_run, hub, tmp_path):
    model, run = zoo_run
    snapshot = cache_repo(hub, "sb3/ppo-CartPole-v1", _zoo_repo(run))
    local = render(checkpoint=str(run), episodes=4, greedy=True, videos="none", out=str(tmp_path / "local"))
    remote = render(checkpoint="hf://sb3/ppo-CartPole-v1", episodes=4, greedy=True, videos="none", workers=2,
                    out=str(tmp_path / "hub"))
    assert _returns(tmp_path / "hub") == _returns(tmp_path / "local")
    # the run records (and its workers load) the exact commit and file, whatever main points to later
    options = json.loads((tmp_path / "hub" / "rlviz-run.json").read_text())["options"]
    assert options["checkpoint"] == f"hf://sb3/ppo-CartPole-v1@{snapshot.name}/ppo-CartPole-v1.zip"
    assert remote.summary["returns"] == local.summary["returns"]
    wanted = ["ppo-CartPole-v1.zip", "args.yml", "config.yml", "env_kwargs.yml", "vec_normalize.pkl"]
    assert remote.summary["hub"] == {"repo": "sb3/ppo-CartPole-v1", "revision": "main", "commit": snapshot.name,
                                     "file": "ppo-CartPole-v1.zip", "layout": "rl-zoo3", "files": wanted}
    assert "hub" not in local.summary
    assert json.loads(remote.summary_json.read_text())["hub"]["commit"] == snapshot.name
    page = remote.report_html.read_text()
    assert "Hub commit" in page and snapshot.name in page and "sb3/ppo-CartPole-v1" in page
    from rlviz.jobs.compare import compare

    both = compare(a=str(run), b="hf://sb3/ppo-CartPole-v1", episodes=4, greedy=True, videos="none",
                   out=str(tmp_path / "compare"))
    assert both.comparison["return_diff"]["mean"] == 0.0 and "a_hub" not in both.comparison
    assert both.comparison["b_hub"]["commit"] == snapshot.name
    # normalisation included: the Hub's vec_normalize.pkl, applied as SB3's VecNormalize applies it
    agent = load_agent("hf://sb3/ppo-CartPole-v1")
    assert agent.metadata["vecnormalize_stats"].endswith("vec_normalize.pkl")
    assert agent.recipe.env_id == "CartPole-v1" and agent.gamma == pytest.approx(0.98)
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    venv = VecNormalize.load(str(snapshot / "vec_normalize.pkl"), make_vec_env("CartPole-v1", n_envs=1))
    obs = np.random.default_rng(0).normal(0, 2, (16, 4)).astype(np.float32)
    with torch.no_grad():
        probs = model.policy.get_distribution(torch.as_tensor(venv.normalize_obs(obs))).distribution.probs.numpy()
    np.testing.assert_allclose(agent.policy.evaluate(obs).probs, probs, atol=1e-6)


def test_sb3_package_to_hub_repo_takes_its_env_from_the_model_card(zoo_run, hub):
    model, run = zoo_run
    cache_repo(hub, "student/ppo-lander", {  # the repo name names no env: the card does
        "ppo-CartPole-v1.zip": run / "CartPole-v1.zip", "README.md": model_card("CartPole-v1"),
        "config.json": "{}", "results.json": "{}", "ppo-CartPole-v1/data": "{}",
        "vec_normalize.pkl": run / "CartPole-v1" / "vecnormalize.pkl"})
    agent = load_agent("hf://student/ppo-lander")
    assert (agent.recipe.env_id, agent.metadata["hub"]["layout"]) == ("CartPole-v1", "sb3")
    assert agent.metadata["hub"]["files"] == ["ppo-CartPole-v1.zip", "README.md", "vec_normalize.pkl"]
    assert agent.metadata["vecnormalize_stats"].endswith("vec_normalize.pkl")


_SCRIPT = "from pathlib import Path\nPath({marker!r}).write_text('the training script ran')\n"


def test_cleanrl_repo_renders_with_no_model_and_its_script_never_runs(hub, tmp_path):
    global _OPENED
    marker = tmp_path / "script-ran"
    state = _save(PPOAgent(8, 4), tmp_path / "ppo.cleanrl_model")  # 8 inputs, 4 actions: the weights name no env
    with pytest.raises(UsageError, match="--env"):
        load_agent(state)
    snapshot = cache_repo(hub, "cleanrl/LunarLander-v3-ppo-seed1", {
        "ppo.cleanrl_model": state, "ppo.py": _SCRIPT.format(marker=str(marker)),
        "README.md": model_card("LunarLander-v3", "cleanrl"), "pyproject.toml": "[tool.poetry]\n",
        "events.out.tfevents.1.host": b"\0"})
    script = {str(snapshot / "ppo.py"), str((snapshot / "ppo.py").resolve())}
    _OPENED = []
    try:
        assert main(["render", "hf://cleanrl/LunarLander-v3-ppo-seed1", "--episodes", "1", "--videos", "none",
                     "--out", str(tmp_path / "out"), "--no-progress"]) == 0
        touched = [p for p in _OPENED if p in script or p.endswith("ppo.py")]
    finally:
        _OPENED = None
    assert touched == [] and not marker.exists()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["env_id"] == "LunarLander-v3"
    assert summary["hub"]["files"] == ["ppo.cleanrl_model", "README.md"]


def test_rlviz_checkpoint_repo_and_revisions(hub, tmp_path):
    from torch import nn

    from rlviz.sources.pt2.saving import save_checkpoint

    torch.manual_seed(0)
    a = save_checkpoint(tmp_path / "a.pt2", nn.Linear(4, 2), env="CartPole-v1", kind="logits")
    b = save_checkpoint(tmp_path / "b.pt2", nn.Linear(4, 2), env="CartPole-v1", gamma=0.5, kind="logits")
    old = cache_repo(hub, "me/cartpole", {"agent.pt2": a}, revision="v1")
    new = cache_repo(hub, "me/cartpole", {"agent.pt2": b, "other/agent.pt2": a})
    with pytest.raises(UsageError, match=r"2 agent files \(agent.pt2, other/agent.pt2\).*hf://me/cartpole/agent.pt2"):
        load_agent("hf://me/cartpole")
    assert load_agent("hf://me/cartpole/agent.pt2").gamma == 0.5
    pinned = load_agent(f"hf://me/cartpole@{new.name}/other/agent.pt2")
    assert pinned.metadata["hub"]["commit"] == new.name and pinned.metadata["hub"]["file"] == "other/agent.pt2"
    tagged = load_agent("hf://me/cartpole@v1")
    assert tagged.gamma == 0.99 and tagged.metadata["hub"] | {"files": None} == {
        "repo": "me/cartpole", "revision": "v1", "commit": old.name, "file": "agent.pt2", "layout": "rlviz",
        "files": None}
    with pytest.raises(HubError, match="no file 'missing.pt2'.*agent.pt2"):
        load_agent("hf://me/cartpole/missing.pt2")
    with pytest.raises(HubError, match=r"hf://me/cartpole@v2 is not in the Hugging Face cache .*HF_HUB_OFFLINE"):
        load_agent("hf://me/cartpole@v2")


def test_repos_without_an_agent_or_naming_a_module_env_are_refused(hub, zoo_run):
    _, run = zoo_run
    cache_repo(hub, "student/ppo-LunarLander-v2", {"ppo-LunarLander-v2.zip": run / "CartPole-v1.zip",
                                                   "README.md": model_card("LunarLander-v2")})
    with pytest.raises(EnvError, match=r"names the env 'LunarLander-v2'.* Did you mean 'LunarLander-v3'.*--env"):
        load_agent("hf://student/ppo-LunarLander-v2")
    cache_repo(hub, "someone/notes", {"README.md": "# notes\n", "model.safetensors": b"\0"})
    with pytest.raises(HubError, match=r"hf://someone/notes holds no agent file .*README.md, model.safetensors"):
        load_agent("hf://someone/notes")
    cache_repo(hub, "someone/evil", {"ppo.zip": run / "CartPole-v1.zip",
                                     "README.md": model_card("evil_pkg_for_rlviz_test:Env-v0")})
    with pytest.raises(UnsafeCheckpointError, match="evil_pkg_for_rlviz_test.*--env.*--trust-checkpoint"):
        load_agent("hf://someone/evil")
    assert "evil_pkg_for_rlviz_test" not in sys.modules
    with pytest.warns(UserWarning, match="VecNormalize"):  # no statistics in that repo
        agent = load_agent("hf://someone/evil", env="CartPole-v1")  # --env: consent
    assert agent.recipe.env_id == "CartPole-v1"


def test_absent_repo_offline_is_one_line_naming_it(hub, tmp_path, capsys):
    with pytest.raises(HubError, match=r"^hf://nobody/absent is not in the Hugging Face cache .* HF_HUB_OFFLINE"):
        load_agent("hf://nobody/absent")
    assert main(["render", "hf://nobody/absent", "--out", str(tmp_path / "out"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "hf://nobody/absent" in err and "network access" in err
    assert main(["render", "hf://nobody", "--no-progress"]) == 2
    assert "expected hf://ORG/REPO[@REVISION][/FILE]" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not repo_folder(hub, "nobody/absent").exists()


def test_without_huggingface_hub_the_error_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if not installed: importing it fails
    assert main(["render", "hf://sb3/ppo-CartPole-v1", "--out", str(tmp_path / "out"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install "rlviz[hub]"' in err


def test_cli_in_a_fresh_process_reads_hf_home_and_fails_before_torch(hub, tmp_path):
    """The environment variables alone (HF_HOME, HF_HUB_OFFLINE) steer a new process; the id is checked
    against the cache before torch loads."""
    cache_repo(hub, "org/present", {"agent.pt2": b"not used"})
    code = ("import sys; from rlviz.cli import main\nrc = main(sys.argv[1:])\n"
            "print('torch' in sys.modules, rc)")
    for ref, why in (("hf://org/absent", "hf://org/absent is not in the Hugging Face cache"),
                     ("hf://org/present@dev", "hf://org/present@dev is not in the Hugging Face cache")):
        out = subprocess.run([sys.executable, "-c", code, "render", ref, "--no-progress"], capture_output=True,
                             text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
        assert out.stdout.split() == ["False", "1"], out.stderr
        assert out.stderr.count("\n") == 1 and why in out.stderr and str(hub) in out.stderr


@pytest.mark.parametrize("error, status, expected", [
    ("GatedRepoError", 403, r"^hf://org/gated@dev is a gated repo: accept its conditions at "
                            r"https://huggingface.co/org/gated and set HF_TOKEN"),
    ("RepositoryNotFoundError", 401, r"^hf://org/gated@dev: no such model repo on the Hub, or it is private .* "
                                     r"set HF_TOKEN"),
    ("RevisionNotFoundError", 404, r"^hf://org/gated@dev: the repo has no revision 'dev'"),
])
def test_refused_repos_online_are_one_line_naming_the_fix(hub, monkeypatch, error, status, expected):
    """Online (HF_HUB_OFFLINE off), the Hub's own refusals: huggingface_hub's exception classes, raised where the
    Hub's answer would raise them, with the HTTP response it would carry (no connection leaves the test)."""
    import huggingface_hub.constants as constants
    from huggingface_hub import errors
    from huggingface_hub.errors import Response

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def refuse(self, repo_id, **kwargs):
        response = Response(status, request=__import__("httpx2").Request("GET", f"https://huggingface.co/{repo_id}"))
        raise getattr(errors, error)(f"{error} for {repo_id}", response=response)

    monkeypatch.setattr(hf.HfApi, "model_info", refuse)
    with pytest.raises(HubError, match=expected) as caught:
        load_agent("hf://org/gated@dev")
    assert "\n" not in str(caught.value)


def test_unreachable_hub_falls_back_to_the_cache(hub, monkeypatch, tmp_path, no_network):
    """A connection failure online reads the cache, as huggingface_hub itself does, asking the Hub once."""
    import huggingface_hub.constants as constants
    from torch import nn

    from rlviz.sources.pt2.saving import save_checkpoint

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    agent = save_checkpoint(tmp_path / "a.pt2", nn.Linear(4, 2), env="CartPole-v1", kind="logits")
    snapshot = cache_repo(hub, "me/cached", {"agent.pt2": agent})
    assert load_agent("hf://me/cached").metadata["hub"]["commit"] == snapshot.name
    with pytest.raises(HubError, match=r"hf://me/other is not in the Hugging Face cache .* could not be reached"):
        load_agent("hf://me/other")
    assert {host for host, _ in no_network[0]} == {"huggingface.co"}  # asked (and refused), then the cache
    no_network[0].clear()


def test_vec_normalize_pickle_in_a_repo_is_read_without_unpickling_code(hub, zoo_run, tmp_path):
    _, run = zoo_run
    target = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (target,))

    files = _zoo_repo(run) | {"vec_normalize.pkl": pickle.dumps({"obs_rms": Payload()})}
    cache_repo(hub, "sb3/ppo-CartPole-v1", files)
    with pytest.raises(UnsafeCheckpointError, match="pathlib"):
        load_agent("hf://sb3/ppo-CartPole-v1")
    assert not target.exists()


def test_sb3_atari_repo_rebuilds_rl_zoo3s_env(hub, tmp_path):
    """The docs' repo (hf://sb3/ppo-BreakoutNoFrameskip-v4) in the layout rl-zoo3's push_to_hub writes for an
    Atari PPO (here untrained): SB3's Atari wrappers and frame stack from config.yml, SB3's probabilities on the
    observations of that env. (Rendering it is render's own Atari path: about 15 s here, so not repeated.)"""
    pytest.importorskip("cv2")
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    from rlviz.envs.recipe import make_env, register_envs

    register_envs("BreakoutNoFrameskip-v4")  # ALE's ids, for SB3's make_atari_env
    venv = VecFrameStack(make_atari_env("BreakoutNoFrameskip-v4", n_envs=1, seed=0), 4)
    model = PPO("CnnPolicy", venv, n_steps=64, batch_size=64, seed=0, device="cpu")
    model.save(tmp_path / "ppo.zip")
    config = {"env_wrapper": ["stable_baselines3.common.atari_wrappers.AtariWrapper"], "frame_stack": 4,
              "policy": "CnnPolicy", "n_envs": 8, "n_timesteps": 10000000.0}
    cache_repo(hub, "sb3/ppo-BreakoutNoFrameskip-v4", {
        "ppo-BreakoutNoFrameskip-v4.zip": tmp_path / "ppo.zip", "config.yml": yaml.dump(OrderedDict(config)),
        "args.yml": yaml.dump(OrderedDict(algo="ppo", env="BreakoutNoFrameskip-v4", env_kwargs=None)),
        "env_kwargs.yml": yaml.dump(OrderedDict()), "README.md": model_card("BreakoutNoFrameskip-v4")})
    agent = load_agent("hf://sb3/ppo-BreakoutNoFrameskip-v4")
    assert [w.name for w in agent.recipe.wrappers] == ["sb3_atari", "sb3_frame_stack"]
    env = make_env(agent.recipe, render_mode=None)
    obs = np.stack([env.reset(seed=s)[0] for s in range(3)])
    with torch.no_grad():
        probs = model.policy.get_distribution(torch.as_tensor(obs)).distribution.probs.numpy()
    np.testing.assert_allclose(agent.policy.evaluate(obs).probs, probs, atol=1e-5)
    assert agent.metadata["hub"]["files"] == ["ppo-BreakoutNoFrameskip-v4.zip", "args.yml", "config.yml",
                                              "env_kwargs.yml"]
