"""A Hugging Face Hub cache with no network, laid out as ``huggingface_hub`` stores downloads (importable as
``_hub`` from tests/): ``hub/models--ORG--NAME/{blobs/<hash>, snapshots/<commit>/<path> -> ../../blobs/<hash>,
refs/<revision>}``. :func:`offline_hub` points ``HF_HOME`` at a temporary folder with ``HF_HUB_OFFLINE=1`` (for
this process and its subprocesses); :func:`cache_repo` puts a repo's files in it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["offline_hub", "cache_repo", "repo_folder", "model_card"]


def offline_hub(monkeypatch, root: Path) -> Path:
    """HF_HOME = ``root/hf``, HF_HUB_OFFLINE=1, no token: in the environment (subprocesses read it at import) and
    in ``huggingface_hub.constants`` (read at import, possibly before this test). Returns the hub cache folder."""
    import huggingface_hub.constants as constants

    home = root / "hf"
    cache = home / "hub"
    cache.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("HF_HUB_CACHE", "HF_TOKEN", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"HF_HOME": str(home), "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": True,
                        "HF_TOKEN_PATH": str(home / "token"),
                        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens")}.items():
        monkeypatch.setattr(constants, name, value)
    return cache


def repo_folder(cache: Path, repo_id: str) -> Path:
    """``models--ORG--NAME``: where the cache keeps a model repo."""
    return cache / ("models--" + repo_id.replace("/", "--"))


def cache_repo(cache: Path, repo_id: str, files: dict[str, bytes | str | Path], revision: str = "main",
               commit: str | None = None) -> Path:
    """Put ``files`` (path in the repo -> bytes, text or a file to copy) in the cache as revision ``revision`` of
    ``repo_id`` at ``commit`` (default: a hash of the contents); returns the snapshot folder. Blobs are named by
    the SHA-256 of their bytes and linked from the snapshot by relative symlinks, as huggingface_hub does."""
    contents = {name: (Path(v).read_bytes() if isinstance(v, Path) else v.encode() if isinstance(v, str) else v)
                for name, v in files.items()}
    if commit is None:
        digest = hashlib.sha1()
        for name in sorted(contents):
            digest.update(name.encode() + b"\0" + contents[name])
        commit = digest.hexdigest()
    repo = repo_folder(cache, repo_id)
    snapshot = repo / "snapshots" / commit
    for name, data in contents.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs" / revision).parent.mkdir(parents=True, exist_ok=True)  # (refs/pr/1, feature/x: folders)
    (repo / "refs" / revision).write_text(commit)
    return snapshot


def model_card(env_id: str, library: str = "stable-baselines3", algo: str = "PPO") -> str:
    """A README.md as huggingface_sb3's package_to_hub and CleanRL's push_to_hub write it: YAML front matter
    with the env as a tag and as the model-index dataset, then the card's text."""
    return (f"---\nlibrary_name: {library}\ntags:\n- {env_id}\n- deep-reinforcement-learning\n"
            f"- reinforcement-learning\nmodel-index:\n- name: {algo}\n  results:\n  - task:\n"
            f"      type: reinforcement-learning\n      name: reinforcement-learning\n    dataset:\n"
            f"      name: {env_id}\n      type: {env_id}\n    metrics:\n    - type: mean_reward\n"
            f"      value: 10.00 +/- 1.00\n      name: mean_reward\n---\n\n# **{algo}** Agent playing **{env_id}**\n")
