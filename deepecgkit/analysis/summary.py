"""What a build found, in the few lines a researcher reads first.

A full build of the platform produces a dozen frames and tables; the person
who started it wants to know, before opening any of them, how many runs went
in (and why the others did not), what the flip grid concluded, which
reversals survive the false-discovery-rate adjustment, and how well
calibrated the models are. :func:`build_summary` computes exactly that from
the frames the build wrote, and :func:`format_summary` renders it as plain
text of about twenty lines. Both are pure: the numbers come only from their
arguments, so a test can recompute every printed number from the same frames.

Conventions:

- Runs *set aside* are runs discovery found but no statistic uses, counted
  per reason: the diagnostics keys of
  :func:`~deepecgkit.analysis.aggregation.discover_runs` that the discovery
  policy drops (``unreadable`` and ``duplicate`` always; ``no_seed`` and
  ``failed`` unless the policy keeps them), plus the runs
  :func:`~deepecgkit.analysis.aggregation.reconcile_averaging` dropped for a
  minority averaging mode. ``suspect`` runs are used, with the offending
  values set aside, and are counted on their own.
- A reversal *survives* when its flip row has ``survives_fdr`` (verdict
  ``supported`` and ``q_reversal`` at most ``1 - confidence_level``; see
  ``docs/statistics.md``). ``model_a`` leads on ``dataset_1`` when
  ``mean_1`` (the mean of ``model_a - model_b`` there) is positive.
- The calibration headline is the group-level expected calibration error
  (ECE, equal-width bins; Guo et al. 2017, "On calibration of modern neural
  networks", ICML) of the statistical report's ``run_summary``: its mean over
  each model's runs, and the single worst run with its bootstrap interval.
  Lower is better; a model whose runs have no finite ECE is left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from deepecgkit.analysis.constants import VERDICTS

__all__ = [
    "CALIBRATION_METRIC",
    "SET_ASIDE_LABELS",
    "SUMMARY_FLIP_COLUMNS",
    "BuildSummary",
    "CalibrationHeadline",
    "Reversal",
    "build_summary",
    "calibration_headline",
    "format_summary",
    "set_aside_counts",
    "surviving_reversals",
    "verdict_census",
]

#: The flip grid's columns :func:`build_summary` reads (the verdict census and the
#: surviving reversals): at 100,000 runs the grid has 33 columns of 232,750 rows.
SUMMARY_FLIP_COLUMNS = (
    "model_a",
    "model_b",
    "dataset_1",
    "dataset_2",
    "mean_1",
    "verdict",
    "p_reversal",
    "q_reversal",
    "survives_fdr",
)
#: Reason key of the runs dropped for a minority averaging mode.
AVERAGING_MINORITY = "averaging_minority"
#: Reasons a run is set aside, in the order the summary lists them, with their wording.
SET_ASIDE_LABELS: dict[str, str] = {
    "unreadable": "unreadable",
    "no_seed": "without a seed",
    "duplicate": "duplicate",
    "failed": "failed (non-zero returncode)",
    AVERAGING_MINORITY: "minority averaging mode",
}
#: The report metric of the calibration headline (group level, lower is better).
CALIBRATION_METRIC = "ece"
#: Digits of every score, p-value and q-value the summary prints.
DIGITS = 3
#: Values below this print in scientific notation (they would round to zero).
SMALLEST_FIXED = 0.5 * 10.0**-DIGITS
#: Reversals named one per line; the rest are counted.
LISTED_REVERSALS = 5


@dataclass(frozen=True)
class Reversal:
    """One supported cross-dataset reversal that survives the FDR adjustment.

    ``leader_1`` leads on ``dataset_1`` and the other model on ``dataset_2``.
    """

    model_a: str
    model_b: str
    dataset_1: str
    dataset_2: str
    leader_1: str
    leader_2: str
    p_reversal: float
    q_reversal: float


@dataclass(frozen=True)
class CalibrationHeadline:
    """Group-level ECE of the report's runs: per-model means and the worst run."""

    mean_by_model: dict[str, float]
    runs_by_model: dict[str, int]
    worst_run: str
    worst_model: str
    worst_dataset: str
    worst_value: float
    worst_low: float
    worst_high: float


@dataclass(frozen=True)
class BuildSummary:
    """Everything :func:`format_summary` prints; see the module docstring for definitions."""

    runs_discovered: int
    runs_used: int
    set_aside: dict[str, int]
    runs_suspect: int
    datasets: tuple[str, ...]
    models: tuple[str, ...]
    metric: str
    verdicts: dict[str, int]
    fdr_method: str
    reversals: tuple[Reversal, ...]
    report_included: int | None = None
    report_excluded: dict[str, int] = field(default_factory=dict)
    calibration: CalibrationHeadline | None = None
    locations: dict[str, Path] = field(default_factory=dict)

    @property
    def runs_set_aside(self) -> int:
        return sum(self.set_aside.values())

    @property
    def flip_tests(self) -> int:
        return sum(self.verdicts.values())


def set_aside_counts(
    diagnostics: Mapping[str, Sequence[str]],
    *,
    averaging_dropped: int = 0,
    include_legacy: bool = False,
    include_failed: bool = False,
) -> dict[str, int]:
    """Runs set aside per reason (keys of :data:`SET_ASIDE_LABELS`, every one present).

    Args:
        diagnostics: the diagnostics of ``discover_runs`` (lists per key; a
            missing key counts zero).
        averaging_dropped: runs ``reconcile_averaging`` dropped (the sum of
            ``averaging_conflicts.dropped_runs``).
        include_legacy, include_failed: the discovery policy; a run the policy
            keeps is used, not set aside, so its key counts zero.
    """
    kept = {"no_seed": include_legacy, "failed": include_failed}
    counts = {
        key: 0 if kept.get(key, False) else len(diagnostics.get(key, ()))
        for key in SET_ASIDE_LABELS
        if key != AVERAGING_MINORITY
    }
    counts[AVERAGING_MINORITY] = int(averaging_dropped)
    return counts


def verdict_census(flip_grid: pd.DataFrame) -> dict[str, int]:
    """Rows of the flip grid per verdict, every verdict of ``VERDICTS`` present, in that order."""
    counts = flip_grid["verdict"].value_counts() if len(flip_grid) else pd.Series(dtype=int)
    return {verdict: int(counts.get(verdict, 0)) for verdict in VERDICTS}


def surviving_reversals(flip_grid: pd.DataFrame) -> tuple[Reversal, ...]:
    """The rows with ``survives_fdr``, smallest ``q_reversal`` first (ties keep grid order)."""
    if flip_grid.empty:
        return ()
    rows = flip_grid.loc[flip_grid["survives_fdr"].astype(bool)]
    rows = rows.sort_values("q_reversal", kind="mergesort")
    reversals = []
    for row in rows.itertuples(index=False):
        a_leads_first = float(row.mean_1) > 0
        reversals.append(
            Reversal(
                model_a=str(row.model_a),
                model_b=str(row.model_b),
                dataset_1=str(row.dataset_1),
                dataset_2=str(row.dataset_2),
                leader_1=str(row.model_a if a_leads_first else row.model_b),
                leader_2=str(row.model_b if a_leads_first else row.model_a),
                p_reversal=float(row.p_reversal),
                q_reversal=float(row.q_reversal),
            )
        )
    return tuple(reversals)


def calibration_headline(run_summary: pd.DataFrame) -> CalibrationHeadline | None:
    """Per-model mean group-level ECE and the worst run; None without a finite ECE.

    Args:
        run_summary: the report's ``run_summary`` frame (``run_id``, ``model``,
            ``dataset``, ``metric``, ``estimate``, ``ci_low``, ``ci_high``).
    """
    if run_summary.empty:
        return None
    rows = run_summary.loc[run_summary["metric"] == CALIBRATION_METRIC]
    rows = rows.loc[pd.to_numeric(rows["estimate"], errors="coerce").notna()]
    if rows.empty:
        return None
    estimates = rows["estimate"].astype(float)
    by_model = estimates.groupby(rows["model"].astype(str), sort=True)
    worst = rows.loc[estimates.idxmax()]
    return CalibrationHeadline(
        mean_by_model={str(m): float(v) for m, v in by_model.mean().items()},
        runs_by_model={str(m): int(v) for m, v in by_model.size().items()},
        worst_run=str(worst["run_id"]),
        worst_model=str(worst["model"]),
        worst_dataset=str(worst["dataset"]),
        worst_value=float(worst["estimate"]),
        worst_low=float(worst["ci_low"]),
        worst_high=float(worst["ci_high"]),
    )


def _sorted_names(frame: pd.DataFrame, column: str) -> tuple[str, ...]:
    return tuple(sorted(frame[column].astype(str).unique())) if len(frame) else ()


def build_summary(
    *,
    discovered_runs: pd.DataFrame,
    diagnostics: Mapping[str, Sequence[str]],
    reconciled_runs: pd.DataFrame,
    averaging_conflicts: pd.DataFrame,
    flip_grid: pd.DataFrame,
    metric: str,
    fdr_method: str,
    include_legacy: bool = False,
    include_failed: bool = False,
    report_run_summary: pd.DataFrame | None = None,
    report_exclusions: pd.DataFrame | None = None,
    locations: Mapping[str, Path] | None = None,
) -> BuildSummary:
    """The summary of one build, from the frames it wrote.

    Args:
        discovered_runs: one row per run discovery kept (a ``run_dir`` column).
        diagnostics: discovery's diagnostics (see :func:`set_aside_counts`).
        reconciled_runs: the long frame the statistics use (``run_dir``,
            ``model``, ``dataset``).
        averaging_conflicts: what reconciliation dropped (``dropped_runs``).
        flip_grid: the flip grid (``all_flip_tests`` columns; those of
            :data:`SUMMARY_FLIP_COLUMNS` are enough).
        metric: the metric the flip grid compares.
        fdr_method: the adjustment of ``q_reversal`` (``"by"`` or ``"bh"``).
        include_legacy, include_failed: the discovery policy.
        report_run_summary, report_exclusions: the statistical report's
            frames, or None when no report was built.
        locations: labelled paths to print (tables, report, figures ...).
    """
    dropped = int(averaging_conflicts["dropped_runs"].sum()) if len(averaging_conflicts) else 0
    excluded: dict[str, int] = {}
    if report_exclusions is not None and len(report_exclusions):
        counts = report_exclusions["reason"].astype(str).value_counts()
        excluded = {str(reason): int(n) for reason, n in sorted(counts.items())}
    included = None
    if report_run_summary is not None:
        included = int(report_run_summary["run_id"].nunique()) if len(report_run_summary) else 0
    return BuildSummary(
        runs_discovered=int(discovered_runs["run_dir"].nunique()) if len(discovered_runs) else 0,
        runs_used=int(reconciled_runs["run_dir"].nunique()) if len(reconciled_runs) else 0,
        set_aside=set_aside_counts(
            diagnostics,
            averaging_dropped=dropped,
            include_legacy=include_legacy,
            include_failed=include_failed,
        ),
        runs_suspect=len(diagnostics.get("suspect", ())),
        datasets=_sorted_names(reconciled_runs, "dataset"),
        models=_sorted_names(reconciled_runs, "model"),
        metric=metric,
        verdicts=verdict_census(flip_grid),
        fdr_method=fdr_method,
        reversals=surviving_reversals(flip_grid),
        report_included=included,
        report_excluded=excluded,
        calibration=(
            calibration_headline(report_run_summary) if report_run_summary is not None else None
        ),
        locations=dict(locations or {}),
    )


def _number(value: float) -> str:
    """A score, p- or q-value at :data:`DIGITS` decimals (``nan`` for a missing one).

    A positive value that would print as ``0.000`` is printed in scientific
    notation with two significant digits instead (``2.1e-04``): a p-value
    shown as zero claims more than the test can.
    """
    if not math.isfinite(value):
        return "nan"
    if 0 < abs(value) < SMALLEST_FIXED:
        return f"{value:.1e}"
    return f"{value:.{DIGITS}f}"


def _counts(counts: Mapping[str, int], labels: Mapping[str, str] | None = None) -> str:
    """``"3 unreadable, 1 duplicate"``: the non-zero counts, or ``"none"``."""
    parts = [f"{n} {(labels or {}).get(key, key)}" for key, n in counts.items() if n]
    return ", ".join(parts) if parts else "none"


def _reversal_lines(summary: BuildSummary) -> list[str]:
    method = summary.fdr_method.upper()
    if not summary.reversals:
        return [f"Reversals that survive {method}: none"]
    lines = [f"Reversals that survive {method} ({len(summary.reversals)}):"]
    for r in summary.reversals[:LISTED_REVERSALS]:
        lines.append(
            f"  {r.leader_1} > {r.leader_2} on {r.dataset_1}, "
            f"{r.leader_2} > {r.leader_1} on {r.dataset_2}  "
            f"(p_reversal = {_number(r.p_reversal)}, q_reversal = {_number(r.q_reversal)})"
        )
    hidden = len(summary.reversals) - LISTED_REVERSALS
    if hidden > 0:
        lines.append(f"  ... and {hidden} more (flip_grid, survives_fdr)")
    return lines


def _report_lines(summary: BuildSummary) -> list[str]:
    if summary.report_included is None:
        return ["Statistical report: not built"]
    excluded = sum(summary.report_excluded.values())
    lines = [
        f"Statistical report: {summary.report_included} run(s) with predictions, "
        f"{excluded} excluded ({_counts(summary.report_excluded)})"
        if excluded
        else f"Statistical report: {summary.report_included} run(s) with predictions, 0 excluded"
    ]
    headline = summary.calibration
    if headline is not None:
        means = ", ".join(f"{m} {_number(v)}" for m, v in headline.mean_by_model.items())
        lines.append(f"Calibration (group-level ECE, mean over runs; lower is better): {means}")
        lines.append(
            f"  worst run: {headline.worst_model} on {headline.worst_dataset} "
            f"({headline.worst_run}), ECE {_number(headline.worst_value)} "
            f"[{_number(headline.worst_low)}, {_number(headline.worst_high)}]"
        )
    return lines


def format_summary(summary: BuildSummary) -> str:
    """The summary as plain text, about twenty lines, ending with a newline.

    Every count, score, p- and q-value printed is a field of ``summary``
    (scores at :data:`DIGITS` decimals), so nothing here computes a number.
    """
    verdicts = _counts(summary.verdicts)
    lines = [
        f"Runs: {summary.runs_used} used, {summary.runs_set_aside} set aside"
        + (f" ({_counts(summary.set_aside, SET_ASIDE_LABELS)})" if summary.runs_set_aside else ""),
        f"  {summary.runs_suspect} used run(s) had values set aside (suspect)"
        if summary.runs_suspect
        else "  no used run had values set aside",
        f"Datasets ({len(summary.datasets)}): {', '.join(summary.datasets) or 'none'}",
        f"Models ({len(summary.models)}): {', '.join(summary.models) or 'none'}",
        f"Flip grid ({summary.metric}, {summary.flip_tests} test(s)): {verdicts}",
        *_reversal_lines(summary),
        *_report_lines(summary),
    ]
    if summary.locations:
        width = max(len(label) for label in summary.locations)
        lines.append("Written:")
        lines += [f"  {label.ljust(width)}  {path}" for label, path in summary.locations.items()]
    return "\n".join(lines) + "\n"
