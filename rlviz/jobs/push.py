"""``rlviz push RUN --repo ORG/NAME``: a render run published on the Hugging Face Hub with its annotated replay.

It lives with the jobs (a job built on render's, as the timeline is) because it is one: the replay is rlviz's own
``--videos episode:N`` path (:func:`rlviz.jobs.render.render` run again on the run's options and seeds, the
episodes checked equal to the run's), so ``replay.mp4``'s frames are those ``rlviz render --videos episode:N``
writes and no second encoder exists. :func:`build_repo_folder` writes the folder (the agent file as loaded, the
env's recipe in the card, ``replay.mp4`` and ``replay-worst.mp4``, ``heatmap.png``, ``report.html``,
``README.md``, ``results.json``, ``rlviz.json``); :func:`push` uploads it with ``huggingface_hub`` (the token from
its usual places, never written) unless ``--dry-run DIR``.

Refused: a folder that is not an rlviz render run; a run whose agent needs code (``--model``) without
``--include-code FILE``; a file over ``--max-file-mb``; a file that names a path of this machine, the user name or
the token; a replay that cannot be made (never "continue without a video")."""

from __future__ import annotations

import csv
import getpass
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import PushConfig, RenderConfig
from ..errors import RlvizError, UsageError, VideoError
from ..media.atomic import temp_name
from .push_card import dumps, model_card, results_json

__all__ = ["push", "build_repo_folder", "PushOutputs", "choose_episode", "secrets_in"]

#: the run's options the replay takes (what decides an episode and how its video is drawn)
_REPLAY = ("checkpoint", "env", "model", "vecnormalize", "episodes", "seed", "greedy", "fail_on", "gamma",
           "heatmap", "objects", "saliency", "saliency_target", "attention", "num_envs", "wrapper", "trust_checkpoint")
_LIBRARY = {".zip": "stable-baselines3", ".cleanrl_model": "cleanrl", ".pt2": "rlviz"}


@dataclass(frozen=True)
class PushOutputs:
    """``folder``: what was (or would be) uploaded; ``files``: its files; ``url``: the commit's, None for a dry run."""

    folder: Path
    files: tuple[str, ...]
    url: str | None


def _read_run(run: Path) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, str]]]:
    marker = run / "rlviz-run.json"
    try:
        meta = json.loads(marker.read_text())
        summary = json.loads((run / "summary.json").read_text())
        rows = list(csv.DictReader((run / "episodes.csv").open()))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{run} is not an rlviz render run ({type(exc).__name__} reading its rlviz-run.json, "
                         "summary.json and episodes.csv); pass the --out folder of `rlviz render`.") from None
    if not isinstance(meta, dict) or meta.get("job") != "render" or not isinstance(meta.get("options"), dict):
        raise UsageError(f"{run} is a {meta.get('job') if isinstance(meta, dict) else '?'!r} run; rlviz push "
                         "publishes a render run: pass the --out folder of `rlviz render`.")
    if rows and "team_return" in rows[0]:  # a PettingZoo run: the team's return is the episode's
        rows = [{**r, "return": r["team_return"], "length": r.get("steps", "0")} for r in rows]
        summary = _team_summary(summary, rows)
    if not rows or "returns" not in summary:
        raise UsageError(f"{run} holds no episodes; render at least one episode before pushing it.")
    return meta["options"], summary, rows


def _team_summary(summary: dict[str, Any], rows: list[dict[str, str]]) -> dict[str, Any]:
    """A multi-agent run's summary with ``returns`` and ``lengths`` (the team's) as a single agent's reads."""
    import numpy as np

    def stats(values: list[float], given: dict[str, Any] | None) -> dict[str, Any]:
        x = np.asarray(values, dtype=float)
        out = {"n": int(x.size), "mean": float(x.mean()), "std": float(x.std()), "median": float(np.median(x)),
               "min": float(x.min()), "max": float(x.max())}
        return {**out, **{k: v for k, v in (given or {}).items() if k in ("mean", "std", "min", "max")}}

    return {**summary, "returns": stats([float(r["return"]) for r in rows], summary.get("team_return")),
            "lengths": stats([float(r["length"]) for r in rows], summary.get("episode_steps"))}


def choose_episode(rows: list[dict[str, str]], choice: str) -> int:
    """The episode ``--replay`` names: median (the episode whose return is the median's, lower middle), best,
    worst (ties: the lowest episode number), or episode:N."""
    ranked = sorted(rows, key=lambda r: (float(r["return"]), int(r["episode"])))
    if choice.startswith("episode:"):
        n = int(choice.partition(":")[2])
        if not any(int(r["episode"]) == n for r in rows):
            raise UsageError(f"--replay {choice}: the run has episodes 0-{len(rows) - 1}; pick one of them.")
        return n
    if choice == "best":
        return int(max(rows, key=lambda r: (float(r["return"]), -int(r["episode"])))["episode"])
    if choice == "worst":
        return int(ranked[0]["episode"])
    return int(ranked[(len(ranked) - 1) // 2]["episode"])


def _replay(options: dict[str, Any], episodes: list[int], trust: bool, rows: list[dict[str, str]],
            scratch: Path) -> dict[int, Path]:
    """The run's episodes ``episodes`` recorded by ``rlviz render --videos episode:N`` again, in ``scratch``."""
    from .render import render

    kwargs = {k: options[k] for k in _REPLAY if k in options}
    kwargs["trust_checkpoint"] = bool(trust)
    spec = "episode:" + ",".join(str(n) for n in episodes)
    try:
        config = RenderConfig(**kwargs, videos=spec, out=str(scratch / "replay"), progress=False)
        render(config)
    except RlvizError as exc:
        raise VideoError(f"could not make the replay ({exc}); nothing was pushed.") from None
    again = list(csv.DictReader((scratch / "replay" / "episodes.csv").open()))
    key = "team_return" if again and "team_return" in again[0] else "return"
    if [(r["seed"], r[key]) for r in again] != [(r["seed"], r["return"]) for r in rows]:
        raise VideoError("the replay's episodes differ from the run's (the agent or env changed since it ran); "
                         "render the run again, then push it.")
    out = {}
    for n in episodes:
        found = sorted((scratch / "replay" / "videos").glob(f"episode-{n}-episode-*.mp4"))
        found = found or sorted((scratch / "replay" / "videos").glob(f"episode-episode-{n}.mp4"))  # (PettingZoo)
        path = found[0] if found else scratch / "replay" / "videos" / f"episode-{n}-episode-0.mp4"
        if not path.is_file():
            raise VideoError(f"could not make the replay: episode {n}'s video was not written; nothing was pushed.")
        out[n] = path
    return out


def _agent_files(options: dict[str, Any], config: PushConfig) -> tuple[dict[str, Path], str]:
    """repo file name -> local file (the agent as loaded), and the library name for the card."""
    checkpoint = str(options.get("checkpoint") or "")
    if checkpoint.startswith("hf://"):
        raise UsageError(f"the run's agent is {checkpoint}, already on the Hub; push a run of a local file.")
    path = Path(checkpoint)
    if options.get("model"):
        if not config.include_code:
            raise UsageError(f"the run's agent needs code (--model {options['model']}); pass --include-code FILE "
                             "naming the file that defines it, to upload it with the agent.")
        code = Path(config.include_code)
        if not code.is_file():
            raise UsageError(f"--include-code {code.name}: no such file; name the module that defines the agent.")
        return {path.name: path, code.name: code}, "pytorch"
    if path.is_dir():
        raise UsageError(f"the run's agent is a folder ({path.name}); push a run of an agent file "
                         "(.pt2, SB3 .zip, .cleanrl_model).")
    if not path.is_file():
        raise UsageError(f"the run's agent file {path.name} is gone; render the run again where it is.")
    files = {path.name: path}
    stats = options.get("vecnormalize")
    if stats:
        files["vec_normalize.pkl"] = Path(stats)
    return files, _LIBRARY.get(path.suffix, "rlviz")


def _needles() -> dict[str, bytes]:
    """What no uploaded file may hold: the home folder, the user name, the token (HF_TOKEN or huggingface_hub's)."""
    needles: dict[str, bytes] = {}
    home = os.path.expanduser("~")
    if len(home) > 1:
        needles["the home folder"] = home.encode()
    try:
        user = getpass.getuser()
        if len(user) > 2:
            needles["the user name"] = user.encode()
    except Exception:
        pass
    token = os.environ.get("HF_TOKEN") or ""
    try:
        from huggingface_hub import get_token

        token = token or get_token() or ""
    except Exception:
        pass
    if token:
        needles["the token"] = token.encode()
    return needles


def secrets_in(folder: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """The files of ``folder`` (zip members too) that hold a path of this machine ($HOME, the run's and the agent's
    folders: ``extra``), the user name or the token: "file: what"."""
    import zipfile

    needles = _needles()
    for i, e in enumerate(extra):
        if e and len(e) > 1:
            needles[f"a local path ({i})"] = e.encode()
    found = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        blobs = [f.read_bytes()]
        if f.suffix == ".zip" and zipfile.is_zipfile(f):
            with zipfile.ZipFile(f) as z:
                blobs += [z.read(i) for i in z.infolist() if i.file_size < 200 * 2**20]
        text = f.suffix in (".md", ".json", ".html", ".txt", ".yml", ".yaml", ".py", ".csv")
        for what, needle in needles.items():
            if what == "the user name" and not text:
                continue  # (a short name occurs by chance in a video's or a model's bytes; paths and tokens do not)
            if any(needle in b for b in blobs):
                found.append(f"{f.relative_to(folder)}: {what}")
    return found


def _scrub(text: str, paths: list[str]) -> str:
    for p in sorted({p for p in paths if p and len(p) > 1}, key=len, reverse=True):
        text = text.replace(p, Path(p).name or ".")
    return text


def build_repo_folder(config: PushConfig, folder: Path) -> list[str]:
    """Write into ``folder`` every file the repo gets; returns their names. Nothing is uploaded."""
    run = Path(config.run)
    if not (run / "rlviz-run.json").is_file():
        raise UsageError(f"{run} is not an rlviz run (no rlviz-run.json); pass the --out folder of `rlviz render`.")
    options, summary, rows = _read_run(run)
    agent_files, library = _agent_files(options, config)
    n = choose_episode(rows, config.replay)
    worst = choose_episode(rows, "worst")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rlviz-push-") as scratch:
        videos = _replay(options, sorted({n, worst}), config.trust_checkpoint, rows, Path(scratch))
        for name, src in agent_files.items():
            shutil.copyfile(src, folder / name)
        shutil.copyfile(videos[n], folder / "replay.mp4")
        shutil.copyfile(videos[worst], folder / "replay-worst.mp4")
    checkpoint = Path(str(options.get("checkpoint") or ""))
    local = [str(checkpoint.resolve()), str(checkpoint.resolve().parent), str(run.resolve()), str(run),
             str(checkpoint), str(options.get("out") or "")]
    if (run / "heatmap.png").is_file():
        shutil.copyfile(run / "heatmap.png", folder / "heatmap.png")
    if (run / "report.html").is_file():
        (folder / "report.html").write_text(_scrub((run / "report.html").read_text(errors="replace"), local))
    env_id = str(summary.get("env_id") or options.get("env") or "unknown")
    public = {k: options.get(k) for k in ("env", "episodes", "seed", "greedy", "fail_on", "gamma", "heatmap",
                                            "wrapper", "saliency")}
    returns = {int(r["episode"]): float(r["return"]) for r in rows}
    algo = config.algo or Path(str(options.get("checkpoint"))).stem
    card = model_card(repo_id=config.repo or "ORG/NAME", env_id=env_id, algo=algo, library=library,
                      summary=summary, returns=[float(r["return"]) for r in rows], options=public,
                      replay={"episode": n, "choice": config.replay, "return": returns[n], "worst": worst,
                              "worst_return": returns[worst], "heatmap": (folder / "heatmap.png").is_file()})
    (folder / "README.md").write_text(card)
    (folder / "results.json").write_text(dumps(results_json(summary, env_id)))
    (folder / "rlviz.json").write_text(dumps({"env_id": env_id, "agent": sorted(agent_files), "replay_episode": n,
                                              "worst_episode": worst, "options": public}))
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    limit = float(config.max_file_mb) * 2**20
    for name in names:
        size = (folder / name).stat().st_size
        if size > limit:
            raise UsageError(f"{name} is {size / 2**20:.1f} MB, over --max-file-mb {config.max_file_mb:g}; "
                             "raise the limit or push a smaller run (fewer or shorter episodes).")
    leaks = secrets_in(folder, tuple(p for p in local if os.sep in p and len(p) > 4))
    if leaks:
        raise UsageError(f"refusing to push: {leaks[0]} (a file names this machine); remove it from the run.")
    return names


def push(config: PushConfig | None = None, **kwargs: Any) -> PushOutputs:
    """Build the repo folder from the run and upload it (``config.dry_run``: write it there, upload nothing)."""
    if config is None:
        config = PushConfig(**kwargs)
    if config.dry_run:
        out = Path(config.dry_run)
        if out.exists() and any(out.iterdir()):
            raise UsageError(f"--dry-run {out}: the folder is not empty; pass a new or empty folder.")
        tmp = temp_name(out)
        try:
            names = build_repo_folder(config, tmp)
            if out.exists():
                out.rmdir()
            os.replace(tmp, out)  # (complete, or not there)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return PushOutputs(out, tuple(names), None)
    if not config.repo:
        raise UsageError("rlviz push needs --repo ORG/NAME (or --dry-run DIR to see what would be uploaded).")
    from ..errors import require

    hf = require("huggingface_hub", "hub", "uploads to the Hugging Face Hub")
    with tempfile.TemporaryDirectory(prefix="rlviz-push-") as scratch:
        folder = Path(scratch) / "repo"
        names = build_repo_folder(config, folder)
        api = hf.HfApi()
        try:
            api.create_repo(config.repo, private=config.private, exist_ok=True)
            info = api.upload_folder(folder_path=str(folder), repo_id=config.repo,
                                     commit_message=config.commit_message)
        except Exception as exc:
            raise RlvizError(f"the upload to {config.repo} failed ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}); nothing was written elsewhere.") from None
    return PushOutputs(folder, tuple(names), str(getattr(info, "commit_url", info)))
