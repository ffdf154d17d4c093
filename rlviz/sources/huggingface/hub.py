"""Agents from the Hugging Face Hub: ``hf://ORG/REPO[@REVISION][/FILE]`` wherever a checkpoint path goes.

:func:`fetch_hub_agent` downloads, with ``huggingface_hub`` (extra ``rlviz[hub]``, imported lazily), only the files
the repo's layout needs into the user's Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE``; ``HF_HUB_OFFLINE=1``
reads the cache only; ``HF_TOKEN`` for private and gated repos), and names the local model file for
:func:`rlviz.sources.checkpoint.load_agent` to load as any local file. The layout is told from the repo's file
names alone:

=======================  ================================================  =========================================
layout                   what is downloaded                                the env comes from
=======================  ================================================  =========================================
rl-zoo3 ``push_to_hub``  ``<algo>-<env>.zip``, ``args.yml``, ``config.yml``,  ``args.yml`` and ``config.yml`` (wrappers,
                         ``env_kwargs.yml``, ``vec_normalize.pkl``           frame stack), read by :mod:`.zoo`
huggingface_sb3          ``<name>.zip``, ``README.md``, ``vec_normalize.pkl``  the model card, else the repo name
CleanRL                  ``<exp>.cleanrl_model``, ``README.md``              the model card, else the repo name
rlviz                    ``<name>.pt2``                                    the recipe inside (:mod:`.exported`)
=======================  ================================================  =========================================

Nothing from a repo runs: the model files go through the same restricted readers as local files (no pickle is
unpickled, no YAML tag is built), a training script beside a CleanRL model (``<exp>.py``) is never downloaded,
imported, executed or parsed, and the model card is read as YAML data (``safe_load``). An env id read from the
card or the repo name is acted on under :mod:`rlviz.envs.trust`'s rule: a registered id, or with ``--env`` /
``--trust-checkpoint`` for anything else. :meth:`HubAgent.record` (repo, revision, commit, file) goes into the
agent's metadata and the run's ``summary.json``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

from ... import progress
from ...errors import HubError, UsageError, require
from ..limits import load_yaml, read_text_capped
from .cache import COMMIT, cached_snapshot, check_wanted, snapshot_files

__all__ = ["SCHEME", "HubRef", "HubAgent", "is_hub_ref", "parse_hub_ref", "check_hub_ref", "fetch_hub_agent",
           "pinned_id"]

SCHEME = "hf://"
#: files rlviz loads as an agent (a repo's other files are never opened)
MODEL_SUFFIXES = (".zip", ".cleanrl_model", ".pt2")
_NOT_MODELS = frozenset({"train_eval_metrics.zip"})  # rl-zoo3's monitor logs
_ZOO_FILES = ("args.yml", "config.yml", "env_kwargs.yml", "vec_normalize.pkl", "vecnormalize.pkl")
_STATS_FILES = ("vec_normalize.pkl", "vecnormalize.pkl")
_PART = re.compile(r"[A-Za-z0-9][\w.-]*")
_ENV_LIKE = re.compile(r"[\w.:/-]*-v\d+")
_FORMAT = "hf://ORG/REPO[@REVISION][/FILE], e.g. hf://sb3/ppo-CartPole-v1"
_CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")



@dataclass(frozen=True)
class HubRef:
    """A parsed ``hf://`` id: ``repo_id`` "ORG/REPO", ``revision`` (branch, tag or commit; None: main) and
    ``filename`` (a path inside the repo; None: the one agent file it holds)."""

    repo_id: str
    revision: str | None = None
    filename: str | None = None

    def __str__(self) -> str:
        revision = self.revision or ""
        if self.filename and "/" in revision and not re.fullmatch(r"refs/pr/\d+", revision):
            revision = revision.replace("/", "%2F")  # (parse_hub_ref reads it back as one revision)
        rev = f"@{revision}" if revision else ""
        return f"{SCHEME}{self.repo_id}{rev}" + (f"/{self.filename}" if self.filename else "")


@dataclass(frozen=True)
class HubAgent:
    """A Hub repo's agent, fetched. ``model``: the local file to load (in the Hugging Face cache); ``env``: the env
    id read from the repo's own files and vetted (None: the model's files name it, or the caller did); ``layout``:
    "rl-zoo3" | "sb3" | "cleanrl" | "rlviz"; ``commit``: the revision's commit hash; ``files``: those fetched."""

    ref: HubRef
    commit: str
    layout: str
    model: Path
    env: str | None
    files: tuple[str, ...]

    def record(self) -> dict[str, Any]:
        """What traces a result to the exact files: repo, revision asked for, commit, model file, layout."""
        return {"repo": self.ref.repo_id, "revision": self.ref.revision or "main", "commit": self.commit,
                "file": self.files[0], "layout": self.layout, "files": list(self.files)}

    def stamp(self, agent: Any) -> Any:
        """``agent`` (a :class:`~rlviz.sources.loaded.LoadedAgent`) with :meth:`record` in its metadata."""
        return replace(agent, metadata={**agent.metadata, "hub": self.record()})


def is_hub_ref(path: object) -> bool:
    """True for a ``hf://`` string (checked before anything treats it as a path)."""
    return isinstance(path, str) and path.startswith(SCHEME)


def parse_hub_ref(text: str) -> HubRef:
    """``hf://ORG/REPO[@REVISION][/FILE]`` as a :class:`HubRef`; :class:`UsageError` for anything else.

    REVISION is a branch, tag or commit: ``refs/pr/N`` is one revision, and a branch name with ``/`` is one too when
    no FILE follows (``@feature/x``); before a FILE (a name ending in .zip, .cleanrl_model or .pt2) the revision ends
    at the first ``/``, so write a ``/`` inside it as ``%2F`` (``@feature%2Fx/agent.zip``), as the Hub's URLs do."""
    if not isinstance(text, str) or _CONTROL.search(text):
        raise UsageError(f"{text!r} is not a Hugging Face Hub id (it holds control characters); expected {_FORMAT}.")
    parts = text[len(SCHEME):].split("/") if is_hub_ref(text) else []
    name, at, revision = parts[1].partition("@") if len(parts) > 1 else ("", "", "")
    if not (_PART.fullmatch(parts[0] if parts else "") and _PART.fullmatch(name)) or (at and not revision):
        raise UsageError(f"{text!r} is not a Hugging Face Hub id; expected {_FORMAT}.")
    rest = parts[2:]
    if at:
        revision, rest = _split_revision([revision, *rest])
        if not _REVISION.fullmatch(revision) or ".." in revision or "//" in revision or revision.endswith("/"):
            raise UsageError(f"{text!r}: the revision {revision!r} is not a branch, tag or commit name (letters, "
                             f"digits, '.', '_', '-' and '/', as refs/pr/1); expected {_FORMAT}.")
    filename = "/".join(rest) or None
    if filename is not None and any(p in ("", ".", "..") for p in rest):
        raise UsageError(f"{text!r}: the file part {filename!r} is not a path inside the repo; expected {_FORMAT}.")
    return HubRef(f"{parts[0]}/{name}", revision or None, filename)


def _split_revision(segments: list[str]) -> tuple[str, list[str]]:
    """(revision, the file's path segments) of what follows ``@`` (see :func:`parse_hub_ref`)."""
    if len(segments) >= 3 and segments[:2] == ["refs", "pr"] and segments[2].isdigit():
        revision, rest = "/".join(segments[:3]), segments[3:]
    elif len(segments) > 1 and segments[-1].endswith(MODEL_SUFFIXES):
        revision, rest = segments[0], segments[1:]
    else:
        revision, rest = "/".join(segments), []
    return revision.replace("%2F", "/").replace("%2f", "/"), rest


def pinned_id(checkpoint: Any, agent: Any) -> Any:
    """The ``hf://`` id of the exact files ``agent`` was loaded from (``@<commit>/<file>``), so that workers and
    Ray actors that load it again get the same agent even if the branch moves; ``checkpoint`` itself otherwise."""
    hub = agent.metadata.get("hub")
    return f"{SCHEME}{hub['repo']}@{hub['commit']}/{hub['file']}" if is_hub_ref(checkpoint) and hub else checkpoint


def _hf() -> ModuleType:
    """huggingface_hub with the submodules used here (its package imports them lazily)."""
    hf = require("huggingface_hub", "hub", "hf:// agents from the Hugging Face Hub")
    import huggingface_hub.constants
    import huggingface_hub.repocard
    import huggingface_hub.utils  # noqa: F401

    return hf


def check_hub_ref(text: str) -> HubRef:
    """The CLI's early check (no torch): the id parses, huggingface_hub is installed and, offline, the repo is in
    the cache."""
    ref = parse_hub_ref(text)
    hf = _hf()
    if hf.constants.HF_HUB_OFFLINE:
        _listing(hf, ref)
    return ref


def fetch_hub_agent(text: str, *, env_given: bool = False, trust: bool = False) -> HubAgent:
    """Download what the repo's agent needs (see the module docstring) and say which local file to load."""
    ref = parse_hub_ref(text)
    hf = _hf()
    with progress.phase(f"fetching {ref}"):
        commit, files, cached = _listing(hf, ref)
        layout, wanted = _choose(ref, commit, files)
        folder = _download(hf, ref, commit, wanted, cached)
    env = None if env_given or layout in ("rl-zoo3", "rlviz") else _repo_env(hf, ref, folder, trust)
    return HubAgent(ref, commit, layout, folder / wanted[0], env, tuple(wanted))


# -- listing and downloading ---------------------------------------------------------------------
def _access_error(hf: ModuleType, exc: Exception, ref: HubRef) -> HubError | UsageError | None:
    """The one-line error for a refused or unknown repo or revision; None for other failures (network)."""
    errors = hf.utils
    page = f"https://huggingface.co/{ref.repo_id}"
    if isinstance(exc, errors.GatedRepoError):
        return HubError(f"{ref} is a gated repo: accept its conditions at {page} and set HF_TOKEN (or run "
                        "`hf auth login`; `huggingface-cli login` before huggingface_hub 1.0) with a token of that "
                        "account.")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return HubError(f"{ref}: no such model repo on the Hub, or it is private and no token with access was "
                        f"given; check the name ({page}) or set HF_TOKEN for a private repo.")
    if isinstance(exc, errors.RevisionNotFoundError):
        return HubError(f"{ref}: the repo has no revision {ref.revision!r}; pass a branch, tag or commit hash "
                        "after @, or leave it out for main.")
    if isinstance(exc, errors.HFValidationError):
        return UsageError(f"{ref}: {exc}; expected {_FORMAT}.")
    return None


def _listing(hf: ModuleType, ref: HubRef) -> tuple[str, list[str], bool]:
    """(commit, the repo's file names, whether they come from the cache) at the revision: from the Hub, or from
    the cache when offline or the Hub cannot be reached."""
    why = "HF_HUB_OFFLINE is set"
    if not hf.constants.HF_HUB_OFFLINE:
        try:
            info = hf.HfApi().model_info(ref.repo_id, revision=ref.revision)
            if not COMMIT.fullmatch(str(info.sha)):
                raise HubError(f"{ref}: the Hub answered with commit {str(info.sha)[:60]!r}, not a commit hash (40 "
                               "hex digits); retry later.")
            return str(info.sha), sorted(s.rfilename for s in info.siblings or ()), False
        except HubError:
            raise
        except Exception as exc:  # refused or unknown: say so; unreachable: read the cache
            known = _access_error(hf, exc, ref)
            if known is not None:
                raise known from None
            why = f"the Hub could not be reached ({type(exc).__name__})"
    folder = cached_snapshot(Path(hf.constants.HF_HUB_CACHE), ref)
    if folder is None:
        raise HubError(
            f"{ref} is not in the Hugging Face cache ({hf.constants.HF_HUB_CACHE}) and {why}: run once with "
            f"network access{' (HF_HUB_OFFLINE unset)' if 'OFFLINE' in why else ''} to download it, or check the "
            "repo name.")
    return folder.name, snapshot_files(folder, Path(hf.constants.HF_HUB_CACHE), ref), True


def _choose(ref: HubRef, commit: str, files: list[str]) -> tuple[str, list[str]]:
    """(layout, files to fetch: the model first) from the repo's file names."""
    candidates = [f for f in files if f.endswith(MODEL_SUFFIXES) and PurePosixPath(f).name not in _NOT_MODELS]
    expected = "an SB3 or rl-zoo3 .zip, a CleanRL .cleanrl_model or an rlviz .pt2"
    if ref.filename is not None:
        if ref.filename not in files:
            raise HubError(f"{ref}: the repo has no file {ref.filename!r} at commit {commit[:12]}; its agent "
                           f"files: {candidates or 'none'}.")
        if not ref.filename.endswith(MODEL_SUFFIXES):
            raise HubError(f"{ref}: {ref.filename!r} is not an agent file rlviz loads; expected {expected}.")
        model = ref.filename
    elif not candidates:
        shown = ", ".join(files[:8]) + (" ..." if len(files) > 8 else "")
        raise HubError(f"{ref} holds no agent file rlviz loads ({shown or 'no files'}); expected {expected}.")
    elif len(candidates) > 1:
        raise UsageError(f"{ref} holds {len(candidates)} agent files ({', '.join(candidates[:6])}); say which one: "
                         f"{ref}/{candidates[0]}.")
    else:
        model = candidates[0]
    here = PurePosixPath(model).parent

    def beside(*names: str) -> list[str]:
        return [p for p in (str(here / n) if str(here) != "." else n for n in names) if p in files]

    if model.endswith(".pt2"):
        return "rlviz", [model]
    if model.endswith(".cleanrl_model"):  # never the training script beside it
        return "cleanrl", [model, *beside("README.md")]
    if beside("args.yml"):
        return "rl-zoo3", [model, *beside(*_ZOO_FILES)]
    return "sb3", [model, *beside("README.md", *_STATS_FILES)]


@contextmanager
def _hf_bars(hf: ModuleType) -> Iterator[None]:
    """huggingface_hub's download bars only when rlviz shows progress (the library is silent unless asked)."""
    utils = hf.utils
    if progress.is_enabled() or utils.are_progress_bars_disabled():
        yield
        return
    utils.disable_progress_bars()
    try:
        yield
    finally:
        utils.enable_progress_bars()


def _download(hf: ModuleType, ref: HubRef, commit: str, wanted: list[str], cached: bool) -> Path:
    """The snapshot folder holding ``wanted`` (downloaded into the cache unless ``cached``: the listing came from
    the cache, so the Hub is not asked again)."""
    cache = Path(hf.constants.HF_HUB_CACHE)
    if cached:  # the listing came from the validated cache: its snapshot, as validated
        folder = cached_snapshot(cache, ref, commit)
        if folder is not None:
            return check_wanted(ref, commit, folder, wanted, cache)
    try:
        with _hf_bars(hf):
            folder = Path(hf.snapshot_download(ref.repo_id, revision=commit, allow_patterns=list(wanted),
                                               local_files_only=cached))
    except Exception as exc:
        known = _access_error(hf, exc, ref)
        raise known or HubError(f"{ref}: downloading {', '.join(wanted)} failed ({type(exc).__name__}: "
                                f"{str(exc).splitlines()[0] if str(exc) else ''}); check the connection and "
                                "retry.") from None
    return check_wanted(ref, commit, folder, wanted, cache)


# -- the env, from the repo's own files -----------------------------------------------------------
def _card_names(hf: ModuleType, readme: Path) -> list[str]:
    """Env ids a model card names: model-index datasets (type, name), then tags. YAML data only (safe, bounded)."""
    try:
        meta = _card_metadata(readme) if readme.is_file() else None
    except Exception:  # a malformed card names nothing (an alias bomb, too deep, not YAML: refused unexpanded)
        meta = None
    if not isinstance(meta, dict):
        return []
    names: list[object] = []
    for entry in meta.get("model-index") or ():
        for result in (entry.get("results") or ()) if isinstance(entry, dict) else ():
            dataset = result.get("dataset") if isinstance(result, dict) else None
            if isinstance(dataset, dict):
                names += [dataset.get("type"), dataset.get("name")]
    tags = meta.get("tags")
    names += tags if isinstance(tags, list) else []
    return [n for n in names if isinstance(n, str)]


def _card_metadata(readme: Path) -> Any:
    """The YAML front matter of a model card (``---`` ... ``---`` at its top), read with a cap and safe YAML under
    :mod:`.limits`' node budget (huggingface_hub's ``metadata_load`` would expand an alias bomb)."""
    yaml = require("yaml", "hub", "model cards")
    text = read_text_capped(readme, readme, 1 << 20)
    match = re.match(r"\s*---[\r\n]+([\S\s]*?)[\r\n]+---(\r\n|\n|$)", text)
    return load_yaml(yaml, yaml.SafeLoader, match.group(1), readme) if match else None


def _name_parts(repo_name: str) -> list[str]:
    """Env-id-like pieces of a repo name: "ppo-LunarLander-v2" -> its dash-joined runs ending in ``v<N>``."""
    tokens = repo_name.split("-")
    return ["-".join(tokens[i:j + 1]) for i in range(len(tokens)) for j in range(i, len(tokens))
            if re.fullmatch(r"v\d+", tokens[j]) and j > i]


def _repo_env(hf: ModuleType, ref: HubRef, folder: Path, trust: bool) -> str | None:
    """The env id the repo's card (else its name) names, if rlviz may make it (:mod:`rlviz.envs.trust`): a
    registered id (``ALE/<id>`` for CleanRL's envpool names), or any id with ``trust``. A ``module:`` id raises
    the consent error; an id that is not registered here, :class:`EnvError` with the closest ones; None when
    nothing names an env (the loader then asks for ``--env``)."""
    import gymnasium as gym

    from ...envs.recipe import register_envs
    from ...envs.trust import check_env_id
    from ...errors import EnvError, did_you_mean

    source = f"{ref} (model card)"
    names = [n for n in _card_names(hf, folder / "README.md") + _name_parts(ref.repo_id.split("/")[1])
             if _ENV_LIKE.fullmatch(n)]
    for name in names:
        if ":" in name and not trust:
            check_env_id(name, source)  # raises: the consent rule for an id that imports a module
        for env_id in (name, f"ALE/{name}"):
            register_envs(env_id)
            if env_id in gym.registry or (trust and ":" in env_id):
                return env_id
    if names:  # e.g. the course's LunarLander-v2, which gymnasium 1.x replaced by -v3
        raise EnvError(f"{source} names the env {names[0]!r}, which gymnasium here does not register."
                       f"{did_you_mean(names[0], list(gym.registry))} Pass the env to run it on with --env ID.")
    return None
