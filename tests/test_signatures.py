"""Signatures that read as the design: no public callable of rlviz (a name in any module's ``__all__``) takes more
than 8 parameters. Config dataclasses (frozen records: their fields are the options) aside; a drop-in keeps the
signature of what it replaces plus ``policy`` and one ``options`` object, no more. And 0.3's keywords, gathered into
those objects in 0.4, still work for one release: they warn and land where the new call puts them."""

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
    "rlviz.record.wrapper.RecordEpisode": (RECORD_VIDEO, {"policy", "options"}),
    # PettingZoo's RecordVideoParallel / RecordVideo (gymnasium's arguments), plus the agents' policies and options
    "rlviz.record.pettingzoo.RecordParallelEpisode": (RECORD_VIDEO, {"policies", "options"}),
    "rlviz.record.pettingzoo.RecordAECEpisode": (RECORD_VIDEO, {"policies", "options"}),
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
    for name in ("rlviz.evaluate.rollouts.rollout.rollout", "rlviz.record.wrapper.RecordEpisode",
                 "rlviz.evaluate.rollouts.runner.Runner", "rlviz.record.frames.EpisodeVideo"):
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


def test_record_episode_takes_0_3_keywords_with_a_warning(tmp_path):
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    with pytest.warns(DeprecationWarning, match=r"saliency=.*preset=.*RecordOptions"):
        rec = rlviz.RecordEpisode(env, tmp_path, saliency=None, preset="ultrafast", gamma=0.5, strip=True,
                                  options=rlviz.RecordOptions(crf=30), action_names=["left", "right"])
    assert rec.options == rlviz.RecordOptions(preset="ultrafast", gamma=0.5, strip=True, crf=30,
                                              action_names=("left", "right"))
    assert rec.action_names == ("left", "right")
    rec.close()
    with pytest.raises(TypeError):  # a keyword that never existed is still an error
        rlviz.RecordEpisode(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path, presett="fast")


def test_rollout_takes_0_3_arguments_with_a_warning():
    from rlviz.agent.callable_policy import CallablePolicy
    from rlviz.evaluate import RolloutPlan, RolloutProbes, rollout

    env = gym.make("CartPole-v1")
    policy = CallablePolicy(lambda obs: obs[:, 2:4] * [[-1.0, 1.0]], num_actions=2)
    new = rollout("CartPole-v1", policy, RolloutPlan(5, seed=3, num_envs=2, max_steps=40, progress=False))
    with pytest.warns(DeprecationWarning, match=r"rollout\(num_envs=.*RolloutPlan"):
        old = rollout("CartPole-v1", policy, 5, num_envs=2, seed=3, max_steps=40, progress=False)
    assert [(e.seed, e.ret, e.length) for e in old.episodes] == [(e.seed, e.ret, e.length) for e in new.episodes]
    assert old.seed == new.seed == 3
    with pytest.warns(DeprecationWarning):  # the episode count alone, positionally, is 0.3's form too
        assert len(rollout("CartPole-v1", policy, 2, progress=False, max_steps=5).episodes) == 2
    with pytest.raises(rlviz.UsageError, match="RolloutPlan"):
        rollout("CartPole-v1", policy, RolloutProbes())
    env.close()


def test_torch_policy_and_attribute_take_0_3_keywords_with_a_warning():
    import numpy as np
    import torch

    from rlviz.agent.policy import TorchPolicy, TorchPolicyOptions
    from rlviz.explain import AttributionOptions, attribute, episode_saliency

    module = torch.nn.Linear(4, 2)
    with pytest.warns(DeprecationWarning, match=r"batch_size=.*TorchPolicyOptions"):
        old = TorchPolicy(module, device="cpu", batch_size=3)
    assert old.batch_size == 3 == TorchPolicy(module, device="cpu", options=TorchPolicyOptions(batch_size=3)).batch_size
    with pytest.warns(DeprecationWarning, match="positional"):  # 0.3's 7th positional argument: batch_size
        assert TorchPolicy(module, None, "auto", "cpu", None, None, 5).batch_size == 5
    obs = np.random.default_rng(0).random((6, 4), dtype=np.float32)
    policy = TorchPolicy(module, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the common call does not warn
        new = attribute(policy, obs, method="gradient", target="action")
        assert np.array_equal(attribute(policy, obs, options=AttributionOptions(batch_size=2)), new)
    with pytest.warns(DeprecationWarning, match=r"attribute\(batch_size=.*AttributionOptions"):
        assert np.array_equal(attribute(policy, obs, "gradient", batch_size=2), new)
    actions = policy.evaluate(obs).logits.argmax(-1)[:-1]
    ref, label = episode_saliency(policy, obs, actions, options=AttributionOptions(chunk=2, percentile=90.0))
    with pytest.warns(DeprecationWarning, match="AttributionOptions"):
        old_maps, old_label = episode_saliency(policy, obs, actions, "gradient", "action", 2, percentile=90.0)
    assert np.array_equal(np.asarray(old_maps), np.asarray(ref)) and old_label == label
    with pytest.raises(rlviz.UsageError, match="AttributionOptions"):
        attribute(policy, obs, options={"batch_size": 2})


def test_loop_and_timeline_writer_take_0_3_keywords_with_a_warning(tmp_path):
    from rlviz.integrations.loop import LogOptions, TimelineWriter, log_episode
    from rlviz.record import RecordOptions

    policy = rlviz.TorchPolicy(__import__("torch").nn.Linear(4, 2), device="cpu")
    with pytest.warns(DeprecationWarning, match=r"log_episode\(.*LogOptions"):
        old = log_episode("CartPole-v1", policy, None, 3, seed=1, video_folder=tmp_path / "old", greedy=True,
                          max_steps=4, gamma=0.5, name="x")
    new = log_episode("CartPole-v1", policy, None, 3, seed=1, video_folder=tmp_path / "new",
                      options=LogOptions(greedy=True, max_steps=4, name="x", record=RecordOptions(gamma=0.5)))
    assert (old.episode_return, old.length, old.video_path.name) == (new.episode_return, new.length,
                                                                      new.video_path.name)
    with pytest.raises(TypeError):  # not a keyword of 0.3's log_episode
        log_episode("CartPole-v1", policy, None, 3, video_folder=tmp_path, verbose=1)
    with pytest.warns(DeprecationWarning, match=r"num_envs=.*TimelineConfig"):
        writer = TimelineWriter(tmp_path / "tl", "CartPole-v1", episodes=3, num_envs=2, greedy=True)
    assert (writer.config.episodes, writer.config.num_envs, writer.config.greedy) == (3, 2, True)
    assert writer.config == rlviz.TimelineConfig(run=str(tmp_path / "tl"), out=tmp_path / "tl", episodes=3,
                                                 num_envs=2, greedy=True)
    writer.close()


def test_callback_and_record_part_take_0_3_keywords_with_a_warning(tmp_path):
    pytest.importorskip("stable_baselines3")
    from rlviz.integrations.loop import LogOptions
    from rlviz.integrations.sb3 import RlvizCallback
    from rlviz.training.progression import PartOptions, _fold_part

    with pytest.warns(DeprecationWarning, match=r"RlvizCallback\(.*LogOptions"):
        old = RlvizCallback("CartPole-v1", 256, timeline=tmp_path / "tl", timeline_episodes=3, greedy=True,
                            max_steps=9, verbose=1)
    new = RlvizCallback("CartPole-v1", 256, timeline=rlviz.TimelineConfig(run=str(tmp_path / "tl"), episodes=3),
                        options=LogOptions(greedy=True, max_steps=9, verbose=1))
    assert old.timeline == rlviz.TimelineConfig(run=str(tmp_path / "tl"), episodes=3) == new.timeline
    assert (old.options.greedy, old.options.max_steps, old.verbose) == (True, 9, 1) == (
        new.options.greedy, new.options.max_steps, new.verbose)
    kwargs: dict = {}
    _fold_part((), kwargs, {"options": "key", "greedy": True, "size": (64, 48)})
    assert kwargs["part"] == PartOptions(key="key", greedy=True, size=(64, 48))
