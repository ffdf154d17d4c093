"""What ``rlviz push`` writes about a run besides its files: the model card (``README.md``: YAML metadata that
``huggingface_hub``'s ``ModelCard`` and ``metadata_load`` read, then the replay, the statistics, the findings, the
heatmap and the commands that reproduce the run) and ``results.json`` in the keys huggingface_sb3 and CleanRL write.

Everything here is built from the run's own numbers (``summary.json``, ``episodes.csv``) and the options that
decide its episodes; no path, user name or token enters it (the push checks the whole folder again)."""

from __future__ import annotations

import datetime
import json
import shlex
from typing import Any

import numpy as np

__all__ = ["model_card", "results_json", "iqm_ci", "mean_reward_text"]

#: the run's options a reproduction passes on the command line (the rest are how it was drawn, not what it was)
CARD_OPTIONS = ("env", "episodes", "seed", "greedy", "fail_on", "gamma", "heatmap", "wrapper", "saliency")


def mean_reward_text(mean: float, std: float) -> str:
    """The model-index value as huggingface_sb3 writes it: "μ +/- σ" with two decimals."""
    return f"{mean:.2f} +/- {std:.2f}"


def iqm_ci(returns: list[float]) -> tuple[float, float, float]:
    """(IQM, 95% bootstrap CI low, high) of the episode returns, with rlviz's own bootstrap (same seed, same draws)."""
    from ..evaluate.statistics.paired import bootstrap_ci
    from ..evaluate.statistics.stats import iqm

    values = np.asarray(returns, dtype=float)
    low, high = bootstrap_ci(values, stat=iqm)
    return float(iqm(values)), float(low), float(high)


def results_json(summary: dict[str, Any], env_id: str, when: datetime.datetime | None = None) -> dict[str, Any]:
    """huggingface_sb3 / CleanRL's results.json keys (mean_reward, std_reward, n_eval_episodes, eval_datetime,
    env_id), from the run's summary."""
    r = summary["returns"]
    stamp = (when or datetime.datetime.now()).isoformat()
    return {"env_id": env_id, "mean_reward": float(r["mean"]), "std_reward": float(r["std"]),
            "n_eval_episodes": int(r["n"]), "eval_datetime": stamp}


def reproduce_command(repo_id: str, options: dict[str, Any]) -> str:
    """``rlviz render hf://ORG/NAME`` with the options that decide the run's episodes."""
    words = ["rlviz", "render", f"hf://{repo_id}"]
    for name in CARD_OPTIONS:
        value = options.get(name)
        flag = "--" + name.replace("_", "-")
        if value is None or value is False or value in ((), []) or (name == "fail_on" and value == "auto"):
            continue
        if value is True:
            words.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                words += [flag, str(v)]
        else:
            words += [flag, str(value)]
    return " ".join(shlex.quote(w) for w in words)


def _yaml_metadata(meta: dict[str, Any]) -> str:
    from ..errors import require

    yaml = require("yaml", "hub", "model cards")
    return str(yaml.safe_dump(meta, sort_keys=False, allow_unicode=True))


def model_card(*, repo_id: str, env_id: str, algo: str, library: str, summary: dict[str, Any],
               returns: list[float], options: dict[str, Any], replay: dict[str, Any]) -> str:
    """The README.md: metadata (library_name, tags, model-index with mean_reward and IQM), then the page."""
    r = summary["returns"]
    middle, low, high = iqm_ci(returns)
    mean_text = mean_reward_text(float(r["mean"]), float(r["std"]))
    meta = {
        "library_name": library,
        "tags": [env_id, "reinforcement-learning", "deep-reinforcement-learning", "rlviz"],
        "model-index": [{
            "name": algo,
            "results": [{
                "task": {"type": "reinforcement-learning", "name": "reinforcement-learning"},
                "dataset": {"name": env_id, "type": env_id},
                "metrics": [
                    {"type": "mean_reward", "value": mean_text, "name": "mean_reward", "verified": False},
                    {"type": "iqm_reward", "value": f"{middle:.2f} (95% CI {low:.2f} to {high:.2f})",
                     "name": "IQM reward", "verified": False},
                ],
            }],
        }],
    }
    rows = [("episodes", str(r["n"])), ("mean return", mean_text),
            ("IQM (95% bootstrap CI)", f"{middle:.2f} [{low:.2f}, {high:.2f}]"),
            ("median", f"{float(r['median']):.2f}"), ("min / max", f"{float(r['min']):.2f} / {float(r['max']):.2f}"),
            ("mean length", f"{float(summary['lengths']['mean']):.1f}")]
    for key in ("terminated_rate", "truncated_rate", "solve_rate"):
        if summary.get(key) is not None:
            rows.append((key.replace("_", " "), f"{float(summary[key]):.3f}"))
    table = "| statistic | value |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)
    findings = [f"- **{d.get('severity', 'info')}** `{d.get('id')}`: {d.get('message', '')}"
                for d in summary.get("diagnostics") or []]
    command = reproduce_command(repo_id, options)
    parts = [
        "---\n" + _yaml_metadata(meta) + "---\n",
        f"# **{algo}** agent playing **{env_id}**\n",
        f"Evaluated with [rlviz](https://pypi.org/project/rlviz/) over {r['n']} episodes: mean return "
        f"{mean_text}, IQM {middle:.2f} (95% CI {low:.2f} to {high:.2f}).\n",
        f"## Replay\n\n`replay.mp4`: episode {replay['episode']} (the {replay['choice']} episode, return "
        f"{replay['return']:.2f}), annotated with the agent's internals. `replay-worst.mp4`: the worst episode "
        f"({replay['worst']}, return {replay['worst_return']:.2f}).\n\n"
        '<video controls src="replay.mp4"></video>\n',
        "## Statistics\n\n" + table,
        "## Findings\n\n" + ("\n".join(findings) if findings else "No diagnostics warning.") + "\n",
    ]
    if replay.get("heatmap"):
        parts.append("## Failure heatmap\n\n![where episodes failed](heatmap.png)\n")
    parts.append("## Reproduce\n\n```bash\npip install rlviz[hub]\n" + command + "\n```\n\n"
                 "The same episodes (seeds) give the same returns; `report.html` is the run's full report.\n")
    return "\n".join(parts)


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"
