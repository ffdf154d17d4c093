"""The repo folder ``rlviz push`` builds from a run, and its upload (:func:`publish`), given the job that replays the
run's episodes (``rlviz render``'s: :mod:`rlviz.jobs.push` and :mod:`rlviz.jobs.push_after` pass it, so this module
imports no job and ``render --push-to-hub`` makes no import cycle).

The replay is rlviz's own ``--videos episode:N`` path (the render job run again on the run's options and seeds, the
episodes checked equal to the run's), so ``replay.mp4``'s frames are those ``rlviz render --videos episode:N``
writes and no second encoder exists. :func:`build_repo_folder` writes the folder (the agent's files as loaded, in
the layout its tool publishes, :mod:`.push_agent`; the card, ``replay.mp4`` and ``replay-worst.mp4``,
``heatmap.png``, ``report.html``, ``README.md``, ``results.json``, ``rlviz.json``); :func:`publish` uploads it with
``huggingface_hub`` (the token from its usual places, never written) unless ``--dry-run DIR``.

Refused: a folder that is not an rlviz render or compare run; a run whose agent needs code (``--model``) without
``--include-code FILE``; a file over ``--max-file-mb``; a file that names a path of this machine, the user name or
the token; a replay that cannot be made (never "continue without a video")."""

from __future__ import annotations

import csv
import getpass
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config import PushConfig, episode_config
from ..errors import RlvizError, UsageError, VideoError
from ..media.atomic import temp_name
from .push_agent import agent_files
from .push_card import CARD_OPTIONS, CardFacts, dumps, model_card, results_json
from .push_runs import PushedRun, read_run

__all__ = ["publish", "build_repo_folder", "PushOutputs", "choose_episode", "secrets_in", "check_upload",
           "check_dry_run", "Replay"]

#: the job that replays a run's episodes: ``rlviz.jobs.render.render`` (a RenderConfig in, the run written)
Replay = Callable[[Any], Any]


@dataclass(frozen=True)
class PushOutputs:
    """``folder``: what was (or would be) uploaded; ``files``: its files; ``url``: the commit's, None for a dry run."""

    folder: Path
    files: tuple[str, ...]
    url: str | None


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


def _replay(render: Replay, options: dict[str, Any], episodes: list[int], trust: bool, rows: list[dict[str, str]],
            scratch: Path) -> dict[int, Path]:
    """The run's episodes ``episodes`` recorded by ``rlviz render --videos episode:N`` (``render``) again, in
    ``scratch``."""
    spec = "episode:" + ",".join(str(n) for n in episodes)
    try:  # every option that shapes an episode or its video is the run's (config.episode_config)
        config = replace(episode_config(options, episodes[0], trust_checkpoint=bool(trust)), videos=spec,
                         out=str(scratch / "replay"), progress=False)
        render(config)
    except RlvizError as exc:
        raise VideoError(f"could not make the replay ({exc}); nothing was pushed.") from None
    with (scratch / "replay" / "episodes.csv").open(newline="") as f:
        again = list(csv.DictReader(f))
    key = "team_return" if again and "team_return" in again[0] else "return"
    if [(r["seed"], float(r[key])) for r in again] != [(r["seed"], float(r["return"])) for r in rows]:
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


def _comparison(run: PushedRun, local: list[str]) -> dict[str, Any] | None:
    """A compare run's comparison.json as published: each agent named by its file name, A's as ``baseline``."""
    if run.comparison is None:
        return None
    names = {k: Path(str(run.comparison.get(k) or "")).name or str(run.comparison.get(k))
             for k in ("a_checkpoint", "b_checkpoint")}
    if str(run.comparison.get("a_checkpoint", "")).startswith("hf://"):
        names["a_checkpoint"] = str(run.comparison["a_checkpoint"])  # (a Hub baseline: its repo and commit)
    published: dict[str, Any] = json.loads(_scrub(json.dumps({**run.comparison, **names,
                                                              "baseline": names["a_checkpoint"]}), local))
    return published


def build_repo_folder(config: PushConfig, folder: Path, render: Replay) -> list[str]:
    """Write into ``folder`` every file the repo gets, the replay made by ``render``; returns their names. Nothing
    is uploaded."""
    run = read_run(Path(config.run))
    options, summary, rows = run.options, run.summary, run.rows
    agent = agent_files(options, config)
    n = choose_episode(rows, config.replay)
    worst = choose_episode(rows, "worst")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rlviz-push-") as scratch:
        videos = _replay(render, options, sorted({n, worst}), config.trust_checkpoint, rows, Path(scratch))
        for name, src in agent.files.items():
            if isinstance(src, bytes):
                (folder / name).write_bytes(src)
            else:
                shutil.copyfile(src, folder / name)
        shutil.copyfile(videos[n], folder / "replay.mp4")
        shutil.copyfile(videos[worst], folder / "replay-worst.mp4")
        heatmap = run.heatmap or Path(scratch, "replay", "heatmap.png")  # (the replay's: B's own, for a compare)
        if heatmap.is_file():
            shutil.copyfile(heatmap, folder / "heatmap.png")
    checkpoint = Path(str(options.get("checkpoint") or ""))
    local = [str(run.folder.resolve()), str(run.folder), str(options.get("out") or "")]
    for given in (checkpoint, (run.comparison or {}).get("a_checkpoint"), options.get("vecnormalize")):
        if given and not str(given).startswith("hf://"):  # (the agents' files and folders: by name only)
            local += [str(Path(given).resolve()), str(Path(given).resolve().parent), str(given)]
    if run.report is not None:
        (folder / "report.html").write_text(_scrub(run.report.read_text(errors="replace"), local))
    comparison = _comparison(run, local)
    if comparison is not None:
        (folder / "comparison.json").write_text(dumps(comparison))
    env_id = str(summary.get("env_id") or options.get("env") or agent.zoo.get("env") or "unknown")
    public = {k: options.get(k) for k in CARD_OPTIONS}
    returns = {int(r["episode"]): float(r["return"]) for r in rows}
    algo = config.algo or agent.algo or checkpoint.stem
    card = model_card(CardFacts(repo_id=config.repo or "ORG/NAME", env_id=env_id, algo=algo, library=agent.library,
                      summary=summary, returns=[float(r["return"]) for r in rows], options=public,
                      replay={"episode": n, "choice": config.replay, "return": returns[n], "worst": worst,
                              "worst_return": returns[worst], "heatmap": (folder / "heatmap.png").is_file()},
                      comparison=comparison, zoo=agent.zoo or None, agent=checkpoint.name))
    (folder / "README.md").write_text(card)
    (folder / "results.json").write_text(dumps(results_json(summary, env_id)))
    (folder / "rlviz.json").write_text(dumps({"env_id": env_id, "agent": sorted(agent.files), "replay_episode": n,
                                              "worst_episode": worst, "options": public,
                                              "job": "compare" if comparison is not None else "render"}))
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


def check_dry_run(folder: str | os.PathLike[str], flag: str = "--dry-run") -> Path:
    """The dry run's folder, refused unless new or empty."""
    out = Path(folder)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{flag} {out}: the folder is not empty; pass a new or empty folder.")
    return out


def check_upload(repo: str) -> Any:
    """``huggingface_hub``, once an upload to ``repo`` can start: it is installed and finds a token (HF_TOKEN,
    ``hf auth login``); one line otherwise, before any work."""
    from ..errors import require

    hf = require("huggingface_hub", "hub", "uploads to the Hugging Face Hub")
    if not hf.get_token():
        raise UsageError(f"no Hugging Face token to push {repo} with (HF_TOKEN, or `hf auth login`); log in, or "
                         "pass a dry-run folder to see what would be uploaded.")
    return hf


def publish(config: PushConfig, render: Replay) -> PushOutputs:
    """Build the repo folder from the run (its replay made by ``render``) and upload it (``config.dry_run``: write
    it there, upload nothing)."""
    if config.dry_run:
        out = check_dry_run(config.dry_run)
        tmp = temp_name(out)
        try:
            names = build_repo_folder(config, tmp, render)
            if out.exists():
                out.rmdir()
            os.replace(tmp, out)  # (complete, or not there)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return PushOutputs(out, tuple(names), None)
    if not config.repo:
        raise UsageError("rlviz push needs --repo ORG/NAME (or --dry-run DIR to see what would be uploaded).")
    hf = check_upload(config.repo)
    with tempfile.TemporaryDirectory(prefix="rlviz-push-") as scratch:
        folder = Path(scratch) / "repo"
        names = build_repo_folder(config, folder, render)
        api = hf.HfApi()
        try:
            api.create_repo(config.repo, private=config.private, exist_ok=True)
            info = api.upload_folder(folder_path=str(folder), repo_id=config.repo,
                                     commit_message=config.commit_message)
        except Exception as exc:
            raise RlvizError(f"the upload to {config.repo} failed ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}); nothing was written elsewhere.") from None
    return PushOutputs(folder, tuple(names), str(getattr(info, "commit_url", info)))
