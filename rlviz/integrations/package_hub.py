"""``package_to_hub`` with huggingface_sb3's arguments, whose replay is always made: the Deep RL Course's last step
(``from rlviz.integrations.sb3 import package_to_hub``).

huggingface_sb3's version records the replay with SB3's ``VecVideoRecorder`` on the eval env and, when that fails
(a ``DummyVecEnv`` without ``render_mode="rgb_array"``: "'DummyVecEnv' object has no attribute 'video_recorder'"),
uploads without one. Here the model is saved (``<model_name>.zip``; a ``VecNormalize`` eval env's statistics as
``vec_normalize.pkl``), evaluated by ``rlviz render`` on ``env_id`` over ``n_eval_episodes`` seeded episodes, and
published by :func:`rlviz.jobs.push.push`: ``replay.mp4`` (the median episode, annotated with the agent's
internals, recorded by rlviz's recorder from ``env_id``'s own ``rgb_array`` env, whatever the eval env renders),
``README.md``, ``results.json``, the heatmap and the report. A replay that cannot be made is an error, never a
card without a video. ``dry_run=DIR`` writes the folder and uploads nothing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ..config import PushConfig
from ..errors import UsageError

__all__ = ["package_to_hub"]


def _check_eval_env(model: Any, eval_env: Any) -> Any:
    """The eval env's VecNormalize (or None), after checking its spaces are the model's."""
    spaces = (getattr(eval_env, "observation_space", None), getattr(eval_env, "action_space", None))
    if spaces[0] is not None and spaces[0] != model.observation_space:
        raise UsageError(f"eval_env's observation space {spaces[0]} is not the model's {model.observation_space}; "
                         "pass the env the model was trained on.")
    try:
        from stable_baselines3.common.vec_env import VecNormalize, unwrap_vec_normalize
    except ImportError:  # pragma: no cover - SB3 is what made the model
        return None
    found = unwrap_vec_normalize(eval_env) if eval_env is not None else None
    return found if isinstance(found, VecNormalize) else None


def package_to_hub(model: Any, model_name: str, model_architecture: str, env_id: str, eval_env: Any,
                   repo_id: str, commit_message: str = "Upload agent", **options: Any) -> Any:
    """huggingface_sb3's ``package_to_hub``: ``options`` takes its ``is_deterministic`` (default True),
    ``n_eval_episodes`` (10), ``token`` (huggingface_hub's usual places when None) and ``video_length``/``logs``
    (accepted, unused: the replay is one whole episode), and rlviz's ``dry_run`` (a folder: write, upload nothing),
    ``replay`` ("median", "best", "worst", "episode:N") and ``seed`` (0). Returns the push's outputs."""
    known = {"is_deterministic", "n_eval_episodes", "token", "video_length", "logs", "dry_run", "replay", "seed"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(f"package_to_hub got unexpected arguments {unknown}; it takes huggingface_sb3's "
                         f"({', '.join(sorted(known))}).")
    from ..jobs.push import push
    from ..jobs.render import render

    stats = _check_eval_env(model, eval_env)
    with tempfile.TemporaryDirectory(prefix="rlviz-package-") as tmp:
        work = Path(tmp) / model_name.replace("/", "_")
        work.mkdir()
        zip_path = work / f"{Path(model_name).name}.zip"
        model.save(zip_path)
        stats_path = None
        if stats is not None:
            stats_path = work / "vec_normalize.pkl"
            stats.save(str(stats_path))
        run = Path(tmp) / "run"
        render(checkpoint=str(zip_path), env=env_id, episodes=int(options.get("n_eval_episodes", 10)),
               greedy=bool(options.get("is_deterministic", True)), seed=int(options.get("seed", 0)),
               vecnormalize=None if stats_path is None else str(stats_path), videos="none", heatmap=False,
               out=str(run), progress=False)
        token = options.get("token")
        saved = os.environ.get("HF_TOKEN")
        if token:
            os.environ["HF_TOKEN"] = str(token)  # (huggingface_hub's own lookup; never written to a file)
        try:
            return push(PushConfig(run=str(run), repo=repo_id, replay=str(options.get("replay", "median")),
                                   dry_run=options.get("dry_run"), algo=model_architecture,
                                   commit_message=commit_message))
        finally:
            if token:
                if saved is None:
                    os.environ.pop("HF_TOKEN", None)
                else:
                    os.environ["HF_TOKEN"] = saved
