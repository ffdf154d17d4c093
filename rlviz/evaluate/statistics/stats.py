"""Statistics over a rollout: returns, lengths, solve rate, failures, value vs return, entropy."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ...errors import UsageError
from ...media.atomic import atomic_write

__all__ = ["Distribution", "Summary", "summarize", "iqm", "explained_variance", "format_table",
           "write_summary_json", "write_episodes_csv", "format_diagnostics", "flat_numbers",
           "fmt_number", "entropy_label", "DIFFERENTIAL"]

PERCENTILES = (5, 25, 75, 95)


def iqm(x) -> float:
    """Interquartile mean as rliable computes it (``scipy.stats.trim_mean(x, 0.25)``): the mean of
    the sorted samples after cutting ``floor(n / 4)`` from each end."""
    a = np.sort(np.asarray(x, dtype=np.float64).ravel())
    if a.size == 0:
        return float("nan")
    cut = int(0.25 * a.size)
    return float(a[cut : a.size - cut].mean())


def explained_variance(values, targets) -> float:
    """1 - Var(target - value) / Var(target); nan when the targets are constant."""
    v, g = np.asarray(values, np.float64), np.asarray(targets, np.float64)
    var = g.var()
    return float("nan") if var == 0 else float(1.0 - (g - v).var() / var)


@dataclass(frozen=True)
class Distribution:
    """mean, std (population), median, min, max, iqm, p5, p25, p75, p95 of n samples."""

    n: int
    mean: float
    std: float
    median: float
    min: float
    max: float
    iqm: float
    p5: float
    p25: float
    p75: float
    p95: float

    @classmethod
    def of(cls, x) -> Distribution:
        a = np.asarray(x, dtype=np.float64).ravel()
        if a.size == 0:
            nan = float("nan")
            return cls(0, *([nan] * 10))
        p = np.percentile(a, PERCENTILES)
        return cls(int(a.size), float(a.mean()), float(a.std()), float(np.median(a)), float(a.min()),
                   float(a.max()), iqm(a), *map(float, p))


@dataclass(frozen=True)
class Summary:
    """What :func:`summarize` reports. ``value_*`` are None without a value head; ``solve_rate``
    is None unless the env reports ``info["is_success"]``. value_residual = mean(G - V) over all steps.
    nonfinite_steps: steps whose logits, probabilities or value were NaN/inf (the value statistics skip them);
    diagnostics: the findings of :func:`rlviz.evaluate.statistics.diagnostics.diagnose` as dicts (id, severity, message,
    evidence); hub: where an ``hf://`` agent came from (repo, revision, commit, files), else None."""

    env_id: str
    episodes: int
    steps: int
    wall_s: float
    returns: Distribution
    lengths: Distribution
    failures_per_episode: float
    terminated_rate: float
    truncated_rate: float
    solve_rate: float | None
    mean_relative_entropy: float
    value_mean: float | None
    discounted_return_mean: float | None
    value_residual: float | None
    value_explained_variance: float | None
    gamma: float
    fail_on: str
    nonfinite_steps: int = 0
    diagnostics: tuple = ()
    hub: dict | None = None  # the agent's Hugging Face Hub repo, revision and commit (rlviz.sources.huggingface.hub), if any
    attention: dict | None = None  # per-object attribution shares (rlviz.analysis.attention.summarize_attention)
    heatmap_note: str | None = None  # why the heatmap shows what it shows, when it is not the game's objects
    #: what ``mean_relative_entropy`` measures when it is not H / ln|A|: ``"differential_nats"`` for Box actions (the
    #: Gaussian's differential entropy, nats summed over the dimensions); None (absent from summary.json): relative
    entropy_measure: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["diagnostics"] = [dict(f) for f in self.diagnostics]
        if d["hub"] is None:  # only agents from the Hub carry it
            del d["hub"]
        if d["heatmap_note"] is None:  # only heatmaps that fell back to moving pixels carry it
            del d["heatmap_note"]
        if d["entropy_measure"] is None:  # only Box agents' summaries carry it
            del d["entropy_measure"]
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    @property
    def warnings(self) -> list:
        """The diagnostics of severity "warning"."""
        return [f for f in self.diagnostics if f["severity"] == "warning"]


def _value_stats(records, n_total):
    sums = [r.value_sums for r in records if r.value_sums is not None]
    if not sums:
        return None, None, None, None
    n, sv, sg, svv, sgg, svg = np.sum(np.asarray(sums, dtype=np.float64), axis=0)
    if n == 0:
        return None, None, None, None
    mv, mg = sv / n, sg / n
    var_g = sgg / n - mg * mg
    # residual e = g - v: E[e] = mg - mv, E[e^2] = sgg - 2 svg + svv
    me = mg - mv
    var_e = (sgg - 2 * svg + svv) / n - me * me
    ev = float("nan") if var_g <= 1e-12 * max(1.0, sgg / n) else float(1.0 - var_e / var_g)
    return float(mv), float(mg), float(me), ev


def summarize(result, diagnostics=()) -> Summary:
    """A :class:`Summary` of a :class:`~rlviz.evaluate.rollouts.rollout.RolloutResult`; ``diagnostics``: its findings
    (:class:`~rlviz.evaluate.statistics.diagnostics.Finding` objects or dicts) to carry along."""
    recs = list(getattr(result, "episodes", ()))
    if not recs:
        raise UsageError("summarize() received a rollout with no episodes; run at least one episode.")
    n = len(recs)
    succ = [r.is_success for r in recs if r.is_success is not None]
    mv, mg, me, ev = _value_stats(recs, n)
    return Summary(
        env_id=result.env_id,
        episodes=n,
        steps=int(result.steps),
        wall_s=float(result.wall_s),
        returns=Distribution.of([r.ret for r in recs]),
        lengths=Distribution.of([r.length for r in recs]),
        failures_per_episode=float(np.mean([r.failures for r in recs])),
        terminated_rate=float(np.mean([r.terminated for r in recs])),
        truncated_rate=float(np.mean([r.truncated for r in recs])),
        solve_rate=float(np.mean(succ)) if succ else None,
        mean_relative_entropy=float(np.sum([r.mean_entropy * r.length for r in recs]) / max(1, sum(r.length for r in recs))),
        value_mean=mv,
        discounted_return_mean=mg,
        value_residual=me,
        value_explained_variance=ev,
        gamma=float(result.gamma),
        fail_on=str(result.fail_on),
        nonfinite_steps=sum(int(r.diag["nonfinite_steps"]) for r in recs if r.diag),
        diagnostics=tuple(f.to_dict() if hasattr(f, "to_dict") else dict(f) for f in diagnostics),
        entropy_measure=DIFFERENTIAL if _box(result) else None,
    )


#: ``Summary.entropy_measure`` of a Box agent: its entropy is the Gaussian's differential entropy, in nats
DIFFERENTIAL = "differential_nats"


def _box(result) -> bool:
    space = getattr(result, "action_space", None)  # None: Discrete
    return isinstance(space, dict) and space.get("kind") == "box"


def entropy_label(summary, short: bool = False) -> str:
    """The name of ``mean_relative_entropy`` in a summary (a :class:`Summary` or its dict): a Box agent's is the
    Gaussian's mean differential entropy in nats, not a relative entropy (``short``: for a 26-character column)."""
    measure = summary.get("entropy_measure") if isinstance(summary, dict) else getattr(summary, "entropy_measure", None)
    if measure == DIFFERENTIAL:
        return "mean diff. entropy (nats)" if short else "mean differential entropy (nats)"
    return "mean relative entropy"


def fmt_number(x, nd=2) -> str:
    """``x`` for a table cell: floats with ``nd`` decimals, None and NaN as "-", anything else as str()."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def format_table(s: Summary) -> str:
    """A plain-text table for the terminal."""
    rows = [("env", s.env_id), ("episodes", str(s.episodes)), ("steps", str(s.steps)),
            ("steps/s", fmt_number(s.steps / s.wall_s if s.wall_s > 0 else None, 0))]
    head = f"{'':<10}{'mean':>9}{'std':>9}{'iqm':>9}{'median':>9}{'min':>9}{'max':>9}{'p5':>9}{'p25':>9}{'p75':>9}{'p95':>9}"
    dist = []
    for name, d in (("return", s.returns), ("length", s.lengths)):
        vals = (d.mean, d.std, d.iqm, d.median, d.min, d.max, d.p5, d.p25, d.p75, d.p95)
        dist.append(f"{name:<10}" + "".join(f"{fmt_number(v):>9}" for v in vals))
    rows += [
        (f"failures/episode ({s.fail_on})", fmt_number(s.failures_per_episode)),
        ("terminated / truncated", f"{s.terminated_rate:.0%} / {s.truncated_rate:.0%}"),
        ("solve rate", "-" if s.solve_rate is None else f"{s.solve_rate:.1%}"),
        (entropy_label(s), fmt_number(s.mean_relative_entropy, 3)),
        ("value mean / disc. return mean", f"{fmt_number(s.value_mean)} / {fmt_number(s.discounted_return_mean)} (gamma {s.gamma})"),
        ("value residual (G - V)", fmt_number(s.value_residual, 3)),
        ("value explained variance", fmt_number(s.value_explained_variance, 3)),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows[:4]] + ["", head, *dist, ""]
    lines += [f"{k:<{width}}  {v}" for k, v in rows[4:]]
    if s.nonfinite_steps:
        lines.append(f"{'non-finite steps (skipped)':<{width}}  {s.nonfinite_steps}")
    if s.attention:
        lines += ["", f"attention ({s.attention['attribution']}): share of attribution, all steps / before failures"]
        for name, r in {**s.attention["objects"], "other": s.attention["other"]}.items():
            lines.append(f"  {name:<{width - 2}}  {fmt_number(r['share'], 3)} / {fmt_number(r['share_before_failure'], 3)}")
    return "\n".join(lines + format_diagnostics(s.diagnostics))


def format_diagnostics(findings) -> list[str]:
    """Lines for the terminal, under the table: one per finding, warnings first ("no warnings" when none)."""
    warn = [f for f in findings if f["severity"] == "warning"]
    lines = ["", f"diagnostics: {len(warn)} warning(s)" if warn else "diagnostics: no warnings"]
    return lines + [f"  {f['severity']}: {f['id']}: {f['message']}" for f in findings]


def write_summary_json(summary: Summary, path) -> Path:
    return atomic_write(path, json.dumps(summary.to_dict(), indent=2, sort_keys=False) + "\n")


def write_episodes_csv(result, path) -> Path:
    """One row per episode: episode, seed, return, length, failures, terminated, truncated, is_success, mean_entropy."""
    import io

    buf = io.StringIO()
    recs = list(result.episodes)
    fields = list(recs[0].to_row()) if recs else ["episode", "seed", "return", "length"]
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for r in recs:
        w.writerow(r.to_row())
    return atomic_write(path, buf.getvalue())


def flat_numbers(d: dict, prefix: str = "") -> dict:
    """A nested dict of results (a summary, a comparison, a timeline row) -> ``{"returns/mean": 1.0, ...}``: its
    numbers only, as floats, keys joined with ``/`` (bools, NaN, strings and lists left out). For scalar sinks,
    compare's differences of every number and timeline.csv's columns."""
    flat = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            flat.update(flat_numbers(v, key + "/"))
        elif isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and v == v:
            flat[key] = float(v)
    return flat
