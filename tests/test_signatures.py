"""Signatures that read as the design: no public callable of rlviz (a name in any module's ``__all__``) takes more
than 8 parameters. Config dataclasses (frozen records: their fields are the options) aside; a drop-in keeps the
signature of what it replaces plus ``policy`` and one ``options`` object, no more. And 0.3's keywords, gathered into
those objects in 0.4 and kept with a warning until 0.5, are gone."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import warnings

import gymnasium as gym
import pytest

import rlviz

MAX_PARAMS = 8

#: drop-ins: name -> (the parameters of what it replaces, what it adds). Each must keep all the original's
#: parameters (under the same names) and add nothing beyond ``policy`` and ``options`` (its own names for them).
RECORD_VIDEO = ("env", "video_folder", "episode_trigger", "step_trigger", "video_length", "name_prefix", "fps",
                "disable_logger", "gc_trigger")
DROP_INS = {
    # gymnasium.wrappers.RecordVideo, plus the policy whose internals it draws and the RecordOptions
    "rlviz.record.record_episode.RecordEpisode": (RECORD_VIDEO, {"policy", "options"}),
    # PettingZoo's RecordVideoParallel / RecordVideo (gymnasium's arguments), plus the agents' policies and options
    "rlviz.record.agents.pettingzoo.RecordParallelEpisode": (RECORD_VIDEO, {"policies", "options"}),
    "rlviz.record.agents.pettingzoo.RecordAECEpisode": (RECORD_VIDEO, {"policies", "options"}),
}

#: drop-ins that differ from their original in a way the rule above does not cover, each with its reason.
#: RecordVectorEpisode: RecordVideo on a vector env (CleanRL's one-line change): RecordVideo's arguments with ``envs``
#: for ``env`` and ``envs_to_record`` (which sub-envs: the vector counterpart of wrapping one env), without
#: ``disable_logger`` / ``gc_trigger`` (nothing to silence or collect), plus ``policy`` and ``options``.
VECTOR_DROP_INS = {
    "rlviz.record.vector.RecordVectorEpisode": (
        {"envs", "video_folder", "envs_to_record", "episode_trigger", "step_trigger", "video_length", "name_prefix",
         "fps"}, {"policy", "options"}),
}

#: config dataclasses' own parts: ``config.option`` declares one field of RenderConfig / CompareConfig /
#: TimelineConfig (``dataclasses.field``'s arguments and the CLI's flag, help and choices): the config aside.
CONFIG_PARTS = {"rlviz.config.option", "rlviz.options.option"}

#: Not done yet (name -> its parameter count, which may not grow): empty since the last nine were cut down (0.4).
#: (The count includes ``self`` for none of them: ``inspect.signature`` of a class reads ``__init__`` without it.)
PENDING: dict[str, int] = {}


def _public_callables():
    """(qualified name, object) of every callable named in an ``__all__`` of an rlviz module, where it is defined."""
    seen = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (optional integrations and the 0.3 module aliases warn)
        for info in pkgutil.walk_packages(rlviz.__path__, "rlviz."):
            try:
                module = importlib.import_module(info.name)
            except ImportError:  # an optional integration whose extra is not installed
                continue
            for name in getattr(module, "__all__", ()):
                obj = getattr(module, name, None)
                if callable(obj) and getattr(obj, "__module__", None) == module.__name__:
                    seen[f"{module.__name__}.{name}"] = obj
    return seen


def _is_config_dataclass(obj) -> bool:
    return isinstance(obj, type) and dataclasses.is_dataclass(obj)


def _params(obj) -> list[str]:
    try:
        return list(inspect.signature(obj).parameters)
    except (TypeError, ValueError):  # builtins and C types without a signature
        return []


def test_the_walk_finds_the_packages_public_callables():
    found = _public_callables()
    assert len(found) > 150, len(found)  # every stage's modules were imported
    for name in ("rlviz.evaluate.rollouts.rollout.rollout", "rlviz.record.record_episode.RecordEpisode",
                 "rlviz.evaluate.rollouts.runner.Runner", "rlviz.record.episode_video.EpisodeVideo"):
        assert name in found


def test_no_public_callable_takes_more_than_8_parameters():
    over = {}
    for name, obj in _public_callables().items():
        params = _params(obj)
        if len(params) <= MAX_PARAMS or _is_config_dataclass(obj) or name in CONFIG_PARTS \
                or name in DROP_INS or name in VECTOR_DROP_INS:
            continue
        if name in PENDING and len(params) <= PENDING[name]:
            continue
        over[name] = len(params)
    assert not over, f"public callables over {MAX_PARAMS} parameters (gather them into a frozen dataclass): {over}"


@pytest.mark.parametrize("table", [DROP_INS, VECTOR_DROP_INS])
def test_drop_ins_keep_their_originals_signature_plus_policy_and_options(table):
    found = _public_callables()
    for name, (original, added) in table.items():
        params = set(_params(found[name]))
        assert set(original) <= params, (name, set(original) - params)
        assert params - set(original) <= added, (name, params - set(original) - added)


def test_record_episode_has_gymnasiums_record_video_signature():
    """The drop-in table's copy of RecordVideo's parameters is the installed gymnasium's."""
    theirs = [p for p in inspect.signature(gym.wrappers.RecordVideo).parameters]
    assert set(theirs) == set(RECORD_VIDEO), theirs
    ours = inspect.signature(rlviz.RecordEpisode).parameters
    for name, p in inspect.signature(gym.wrappers.RecordVideo).parameters.items():
        # (fps None: the env's own rate, as theirs; gc_trigger: theirs collects after every video, ours by default
        # never: no frames are held to collect)
        if name not in ("env", "video_folder", "fps", "gc_trigger"):
            assert ours[name].default == p.default, name


def test_pending_entries_still_exist_and_are_not_done():
    """An entry of PENDING that was cut down (or moved) must leave the table, so the table cannot hide a new one."""
    found = _public_callables()
    for name in PENDING:
        assert name in found, f"{name} moved or went: update PENDING"
        assert len(_params(found[name])) > MAX_PARAMS, f"{name} is within {MAX_PARAMS} now: drop it from PENDING"


def test_0_3_keywords_went_in_0_6(tmp_path):
    """0.3's keywords, kept with a warning until 0.5, are gone: a keyword that no longer exists is Python's
    TypeError; one that would reach a method's own options, or an episode count where the plan goes, is one line
    naming what to pass instead."""
    import numpy as np
    import torch

    from rlviz.agent.callable_policy import CallablePolicy
    from rlviz.agent.policy import TorchPolicy
    from rlviz.evaluate import RolloutProbes, rollout
    from rlviz.explain import attribute, episode_saliency

    env = gym.make("CartPole-v1", render_mode="rgb_array")
    with pytest.raises(TypeError):
        rlviz.RecordEpisode(env, tmp_path, saliency=None)
    env.close()
    with pytest.raises(TypeError):
        TorchPolicy(torch.nn.Linear(4, 2), device="cpu", batch_size=3)
    policy = CallablePolicy(lambda obs: obs[:, 2:4] * [[-1.0, 1.0]], num_actions=2)
    with pytest.raises(rlviz.UsageError, match=r"^plan=5; expected a RolloutPlan\(episodes, \.\.\.\): pass "
                                               r"RolloutPlan\(5, num_envs=\.\.\., seed=\.\.\.\), 0\.3's"):
        rollout("CartPole-v1", policy, 5)
    with pytest.raises(rlviz.UsageError, match=r"^plan=RolloutProbes\(.*\); expected a RolloutPlan\(episodes, \.\.\.\)\.$"):
        rollout("CartPole-v1", policy, RolloutProbes())
    torch_policy = TorchPolicy(torch.nn.Linear(4, 2), device="cpu")
    obs = np.random.default_rng(0).random((6, 4), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the common call does not warn
        attribute(torch_policy, obs, method="gradient", target="action")
    with pytest.raises(rlviz.UsageError, match=r"^attribute\(batch_size=\.\.\.\): .* pass "
                                               r"options=AttributionOptions\(batch_size=\.\.\.\)"):
        attribute(torch_policy, obs, "gradient", batch_size=2)
    with pytest.raises(rlviz.UsageError, match=r"^episode_saliency\(chunk=\.\.\., percentile=\.\.\.\)"):
        episode_saliency(torch_policy, obs, np.zeros(5, np.int64), chunk=2, percentile=90.0)
    with pytest.raises(rlviz.UsageError, match="AttributionOptions"):
        attribute(torch_policy, obs, options={"batch_size": 2})
