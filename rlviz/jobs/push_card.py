"""What ``rlviz push`` writes about a run besides its files: the model card (``README.md``: YAML metadata that
``huggingface_hub``'s ``ModelCard`` and ``metadata_load`` read, then the replay, the statistics, the findings, the
heatmap and the commands that reproduce the run) and ``results.json`` in the keys huggingface_sb3 and CleanRL write.

Everything here is built from the run's own numbers (``summary.json``, ``episodes.csv``) and the options that
decide its episodes; no path, user name or token enters it (the push checks the whole folder again)."""

from __future__ import annotations

import datetime
import json
import shlex
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CardFacts", "model_card", "results_json", "iqm_ci", "mean_reward_text", "reproduce_command", "CARD_OPTIONS"]

#: the run's options a reproduction passes on the command line (the rest are how it was drawn, not what it was)
CARD_OPTIONS = ("env", "env_kwargs", "model", "model_kwargs", "critic", "critic_kwargs", "episodes", "seed", "greedy",
                "fail_on", "gamma", "heatmap", "wrapper", "saliency")


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


def reproduce_command(repo_id: str, options: dict[str, Any], agent: str | None = None) -> str:
    """``rlviz render hf://ORG/NAME`` with the options that decide the run's episodes; a ``--model`` agent (its
    file ``agent`` and the module beside it, which ``hf://`` never imports): the repo downloaded first, then
    ``rlviz render AGENT --model ...`` in its folder."""
    words = ["rlviz", "render", f"hf://{repo_id}"]
    first = ""
    if options.get("model") and agent:
        folder = repo_id.split("/")[-1]
        first = " ".join(shlex.quote(w) for w in ["hf", "download", repo_id, "--local-dir", folder]) + \
            f" && cd {shlex.quote(folder)}\n"
        words[2] = agent
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
    return first + " ".join(shlex.quote(w) for w in words)


def _yaml_metadata(meta: dict[str, Any]) -> str:
    from ..errors import require

    yaml = require("yaml", "hub", "model cards")
    return str(yaml.safe_dump(meta, sort_keys=False, allow_unicode=True))


def _against_baseline(c: dict[str, Any], baseline: str) -> str:
    """A compare run's card section: B's paired difference against A on the same seeds."""
    diff, iqm = c["return_diff"], c["iqm"]["diff"]
    lo, hi = (float(x) for x in diff["ci95"])
    ilo, ihi = (float(x) for x in iqm["ci95"])
    plo, phi = (float(x) for x in c["prob_improvement_ci95"])
    return ("## Against the baseline\n\n"
            f"This agent (B) and the baseline A (`{baseline}`) played the same {c['episodes']} episodes (the same "
            "seeds); paired bootstrap 95% CIs:\n\n"
            "| B - A | value | 95% CI |\n|---|---|---|\n"
            f"| mean return | {float(diff['mean']):+.2f} | [{lo:+.2f}, {hi:+.2f}] |\n"
            f"| IQM return | {float(iqm['value']):+.2f} | [{ilo:+.2f}, {ihi:+.2f}] |\n"
            f"| P(B > A) | {float(c['prob_improvement']):.3f} | [{plo:.3f}, {phi:.3f}] |\n\n"
            "`comparison.json` holds every number; `report.html` shows A and B side by side.\n")


def _zoo_usage(repo_id: str, zoo: dict[str, str]) -> str:
    """An rl-zoo3 run's card section: rl_zoo3's own commands for the repo, and the hyperparameters."""
    org, name = repo_id.split("/", 1)
    default = f"{zoo['algo']}-{zoo['env'].replace('/', '-')}"
    named = "" if name == default else f" -name {shlex.quote(name)}"
    fetch = f"python -m rl_zoo3.load_from_hub --algo {zoo['algo']} --env {zoo['env']} -orga {org}{named} -f logs/"
    text = ("## Usage with the RL Zoo\n\nThe repo holds the files `rl_zoo3.push_to_hub` writes:\n\n"
            f"```bash\n{fetch}\npython -m rl_zoo3.enjoy --algo {zoo['algo']} --env {zoo['env']} -f logs/\n```\n")
    if zoo.get("config"):
        text += "\n### Hyperparameters (`config.yml`)\n\n```yaml\n" + zoo["config"].rstrip() + "\n```\n"
    return text


@dataclass(frozen=True)
class CardFacts:
    """What a model card says: ``returns`` float per episode (episodes.csv's order); ``summary``: the run's
    summary.json; ``options``: the run's public options (:data:`CARD_OPTIONS`); ``replay``: the chosen episode, its
    return, the worst episode and its return, whether a heatmap is there; ``comparison``: a compare run's
    comparison.json (B against A, with ``baseline``: A's name); ``zoo``: an rl-zoo3 run's alias, env and config.yml
    text; ``agent``: the agent file's name in the repo."""

    repo_id: str
    env_id: str
    algo: str
    library: str
    summary: dict[str, Any]
    returns: list[float]
    options: dict[str, Any]
    replay: dict[str, Any]
    comparison: dict[str, Any] | None = None
    zoo: dict[str, str] | None = None
    agent: str | None = None


def model_card(facts: CardFacts) -> str:
    """The README.md: metadata (library_name, tags, model-index with mean_reward and IQM), then the page."""
    repo_id, env_id, algo, library = facts.repo_id, facts.env_id, facts.algo, facts.library
    summary, returns, options, replay = facts.summary, facts.returns, facts.options, facts.replay
    comparison, zoo, agent = facts.comparison, facts.zoo, facts.agent
    r = summary["returns"]
    middle, low, high = iqm_ci(returns)
    mean_text = mean_reward_text(float(r["mean"]), float(r["std"]))
    meta = {
        "library_name": library,
        "tags": [env_id, "reinforcement-learning", "deep-reinforcement-learning", "rlviz",
                 *([library] if library in ("stable-baselines3", "cleanrl") else [])],
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
    command = reproduce_command(repo_id, options, agent)
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
    if comparison is not None:
        parts.append(_against_baseline(comparison, str(comparison.get("baseline", "A"))))
    if replay.get("heatmap"):
        parts.append("## Failure heatmap\n\n![where episodes failed](heatmap.png)\n")
    if zoo:
        parts.append(_zoo_usage(repo_id, zoo))
    parts.append("## Reproduce\n\n```bash\npip install \"rlviz[hub]\"\n" + command + "\n```\n\n"
                 "The same episodes (seeds) give the same returns; `report.html` is the run's full report.\n")
    return "\n".join(parts)


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"
