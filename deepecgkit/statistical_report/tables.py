"""Rows of the statistical report's tables, one run or one pair at a time.

Column lists and their order are part of the report's public contract (the
files a script reads) and are defined here once. Every interval is a stratified group
bootstrap seeded with the report's seed, so a run's intervals do not depend
on which other runs are in the report; all metrics of a run (or pair) are
evaluated on one count matrix, which gives the same numbers as one
:func:`cluster_bootstrap_metric` call per metric.

Levels: ``group`` is the unit of every estimate and interval (probabilities
averaged per group); ``sample`` values are diagnostics only. The report's
``ece`` and ``classwise_ece`` use the report's bins at group level and must
not be compared with the sample-level columns of ``classification_metrics.csv``.

Reliability rows come in curves: ``top_label`` (confidence of the predicted
class against accuracy, the curve behind ``ece``) and ``class_<k>`` (mean
``p_k`` against the fraction of groups of class k, the curves behind
``classwise_ece``; class 1 only for two classes). The figure of a two-class
run draws ``class_1``: the top-label curve folds the diagram at 0.5 and can
hide a shift of every probability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from deepecgkit.analysis.compare.batch_metrics import (
    COLLAPSE_FLAGS,
    METRIC_DIRECTIONS,
    BatchMetric,
    batch_metric,
    calibration_bin,
    classwise_classes,
    report_metric_names,
)
from deepecgkit.analysis.compare.bootstrap import (
    METRIC_REFUSALS,
    GroupDraws,
    difference_from_grouped,
    draw_for,
    interval_from_grouped,
)
from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.analysis.compare.groups import GroupedData, aggregate_groups
from deepecgkit.analysis.compare.mcnemar import mcnemar, mcnemar_mid_p
from deepecgkit.analysis.compare.resampling import evaluate_metric
from deepecgkit.analysis.constants import (
    INTERVAL_AUTO,
    MIN_BOOTSTRAP_GROUPS,
    MIN_BOOTSTRAP_GROUPS_PER_CLASS,
    NEAR_COLLAPSE_THRESHOLD,
    REPORT_PAIRED_METRICS,
)
from deepecgkit.rundir.int_columns import exact_int_array
from deepecgkit.rundir.metrics import is_lower_better
from deepecgkit.statistical_report.identity import RunInput, ValidPredictions, predictions_of

__all__ = [
    "EXCLUSION_COLUMNS",
    "LEVEL_METRICS_COLUMNS",
    "MCNEMAR_COLUMNS",
    "PAIRED_COLUMNS",
    "RELIABILITY_COLUMNS",
    "RUN_ROW_IDENTITY",
    "RUN_SUMMARY_COLUMNS",
    "PairOutcome",
    "ReportSettings",
    "RunScores",
    "column_table",
    "compare_pair",
    "pair_identity",
    "run_identity",
    "score_run",
    "table",
    "withheld_intervals",
]

RUN_SUMMARY_COLUMNS = {
    "run_id": "str",
    "model": "str",
    "dataset": "str",
    "seed": "int64",
    "params_fingerprint": "str",
    "partial": "bool",
    "n_samples": "int64",
    "n_groups": "int64",
    "metric": "str",
    "direction": "str",
    "estimate": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "n_resamples": "Int64",
    "n_valid_resamples": "Int64",
    "confidence_level": "float64",
    "interval_method": "str",
    "no_interval_reason": "str",
}
LEVEL_METRICS_COLUMNS = {
    "run_id": "str",
    "model": "str",
    "dataset": "str",
    "seed": "int64",
    "level": "str",
    "n_units": "int64",
    "metric": "str",
    "value": "float64",
}
RELIABILITY_COLUMNS = {
    "run_id": "str",
    "model": "str",
    "dataset": "str",
    "seed": "int64",
    "bin": "int64",
    "bin_lower": "float64",
    "bin_upper": "float64",
    "count": "int64",
    "fraction": "float64",
    "mean_confidence": "float64",
    "accuracy": "float64",
    "gap": "float64",
    "curve": "str",
}
PAIRED_COLUMNS = {
    "dataset": "str",
    "seed": "int64",
    "reference_model": "str",
    "candidate_model": "str",
    "reference_run_id": "str",
    "candidate_run_id": "str",
    "partial": "bool",
    "metric": "str",
    "higher_is_better": "bool",
    "n_samples": "int64",
    "n_groups": "int64",
    "reference_value": "float64",
    "candidate_value": "float64",
    "delta": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "p_value": "float64",
    "p_holm": "float64",
    "probability_candidate_better": "float64",
    "n_resamples": "int64",
    "n_valid_resamples": "int64",
    "confidence_level": "float64",
    "interval_method": "str",
    "no_interval_reason": "str",
}
MCNEMAR_COLUMNS = {
    "dataset": "str",
    "seed": "int64",
    "reference_model": "str",
    "candidate_model": "str",
    "reference_run_id": "str",
    "candidate_run_id": "str",
    "level": "str",
    "n_units": "int64",
    "only_reference_correct": "int64",
    "only_candidate_correct": "int64",
    "p_value": "float64",
    "p_mid": "float64",
    "anti_conservative": "bool",
}
EXCLUSION_COLUMNS = {
    "scope": "str",
    "run_id": "str",
    "model": "str",
    "dataset": "str",
    "seed": "Int64",
    "reference_run_id": "str",
    "reason": "str",
    "detail": "str",
}

#: The column holding seeds: exact integers whatever the dtype named above (see :func:`table`).
SEED_COLUMN = "seed"

LEVEL_SAMPLE = "sample"
LEVEL_GROUP = "group"
CURVE_TOP_LABEL = "top_label"
CURVE_CLASS_PREFIX = "class_"
CLASS_MISMATCH = "class_mismatch"
UNMATCHED_SAMPLES = "unmatched_samples"
LABEL_MISMATCH = "label_mismatch"
_MAX_SHOWN = 5


@dataclass(frozen=True)
class ReportSettings:
    """Settings shared by every bootstrap of one report."""

    bins: int
    n_resamples: int
    confidence_level: float
    seed: int


@dataclass
class RunScores:
    """Everything the report writes about one included run."""

    summary: list[dict[str, Any]] = field(default_factory=list)
    levels: list[dict[str, Any]] = field(default_factory=list)
    reliability: list[dict[str, Any]] = field(default_factory=list)
    ece: float = math.nan
    classwise_ece: float = math.nan
    figure_curve: str = CURVE_TOP_LABEL
    n_groups: int = 0
    too_few_groups: bool = False
    no_interval_reason: str | None = None
    #: ``metric -> no_interval_reason`` of the metrics refused one by one (too few
    #: informative groups, ...) when the run as a whole has intervals.
    withheld: dict[str, str] = field(default_factory=dict)


@dataclass
class PairOutcome:
    """Rows of one accepted pair, or the reason it was rejected."""

    paired: list[dict[str, Any]] = field(default_factory=list)
    mcnemar: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    detail: str = ""


def table(rows: list[dict[str, Any]], columns: dict[str, str]) -> pd.DataFrame:
    """A frame with exactly ``columns`` in order and their dtypes (also when empty).

    The seed is an identifier and is built straight from the rows as exact
    integers (int64, ``Int64`` when some seed is unknown, Python ints beyond
    int64), never through the float column pandas would infer for ints mixed
    with None.
    """
    frame = pd.DataFrame(rows, columns=list(columns))
    seeds = [row.get(SEED_COLUMN) for row in rows] if SEED_COLUMN in columns else []
    return _typed(frame, columns, seeds)


def column_table(values: dict[str, list[Any]], columns: dict[str, str]) -> pd.DataFrame:
    """:func:`table` of rows given as one list per column (``values`` has every column).

    The same frame as ``table`` of the rows these lists make, without a dict
    per row (100,000 excluded runs at 100,000 runs).
    """
    frame = pd.DataFrame({name: values[name] for name in columns}, columns=list(columns))
    return _typed(frame, columns, values.get(SEED_COLUMN, []))


def _typed(frame: pd.DataFrame, columns: dict[str, str], seeds: list[Any]) -> pd.DataFrame:
    """``frame`` with the dtypes of ``columns``, its seeds (when a column) as exact integers."""
    frame = frame.astype({name: kind for name, kind in columns.items() if name != SEED_COLUMN})
    if SEED_COLUMN in columns:
        frame[SEED_COLUMN] = exact_int_array(seeds)
    return frame


#: The identity columns of ``level_metrics.csv`` and ``reliability.csv`` rows.
RUN_ROW_IDENTITY = ("run_id", "model", "dataset", "seed")


def run_identity(run: RunInput) -> dict[str, Any]:
    """The identity columns of a ``run_summary.csv`` row (the first four: of every run row)."""
    return {
        "run_id": run.run_id,
        "model": run.model,
        "dataset": run.dataset,
        "seed": run.seed,
        "params_fingerprint": run.fingerprint,
        "partial": bool(run.partial_reasons),
    }


def pair_identity(reference: RunInput, candidate: RunInput) -> dict[str, Any]:
    """The identity columns of a ``paired_comparisons.csv`` row (all but ``partial``: McNemar's)."""
    return {
        "dataset": reference.dataset,
        "seed": reference.seed,
        "reference_model": reference.model,
        "candidate_model": candidate.model,
        "reference_run_id": reference.run_id,
        "candidate_run_id": candidate.run_id,
        "partial": bool(reference.partial_reasons or candidate.partial_reasons),
    }


def _validated(run: RunInput) -> ValidPredictions:
    """The validated predictions of an included run (parsed now when their verdict was known)."""
    try:
        return predictions_of(run)
    except ValueError as exc:
        raise ComparisonError(str(exc)) from None


def _report_metrics(n_classes: int, bins: int) -> dict[str, BatchMetric]:
    """The batch metric of every interval metric, in canonical order."""
    return {
        name: batch_metric(name, bins=bins)
        for name in report_metric_names(n_classes)
        if name not in COLLAPSE_FLAGS
    }


def _collapse_flags(max_fraction: float) -> dict[str, float]:
    """Point-only class-collapse flags from the largest predicted-class fraction."""
    return {
        "exact_class_collapse": 1.0 if max_fraction == 1.0 else 0.0,
        "near_class_collapse": 1.0 if max_fraction >= NEAR_COLLAPSE_THRESHOLD else 0.0,
    }


def _point_values(
    metrics: dict[str, BatchMetric], labels: np.ndarray, prob: np.ndarray
) -> dict[str, float]:
    """Every report metric once on all units (interval metrics and collapse flags)."""
    ones = np.ones((1, labels.size))
    values = {
        name: float(evaluate_metric(metric, labels, prob, weights=ones)[0])
        for name, metric in metrics.items()
    }
    values.update(_collapse_flags(values["max_predicted_class_fraction"]))
    return values


def figure_curve(n_classes: int) -> str:
    """The curve a run's figure draws: ``class_1`` for two classes, else ``top_label``."""
    classes = classwise_classes(n_classes)
    return f"{CURVE_CLASS_PREFIX}{classes[0]}" if len(classes) == 1 else CURVE_TOP_LABEL


def _reliability(grouped: GroupedData, bins: int) -> list[dict[str, Any]]:
    """Per-bin calibration at group level, empty bins included: top label, then each class."""
    prob = grouped.probs[0]
    pred = np.argmax(prob, axis=1)
    confidence = prob[np.arange(pred.size), pred]
    correct = (pred == grouped.labels).astype(np.float64)
    rows = _curve_rows(confidence, correct, bins, CURVE_TOP_LABEL)
    for k in classwise_classes(prob.shape[1]):
        in_class = (grouped.labels == k).astype(np.float64)
        rows.extend(_curve_rows(prob[:, k], in_class, bins, f"{CURVE_CLASS_PREFIX}{k}"))
    return rows


def _curve_rows(
    confidence: np.ndarray, correct: np.ndarray, bins: int, curve: str
) -> list[dict[str, Any]]:
    """One reliability curve's rows: ``mean_confidence`` against ``accuracy`` per bin."""
    n_units = confidence.size
    index = calibration_bin(confidence, bins)
    counts = np.bincount(index, minlength=bins)
    confidence_sums = np.bincount(index, weights=confidence, minlength=bins)
    correct_sums = np.bincount(index, weights=correct, minlength=bins)
    rows = []
    for b in range(bins):
        count = int(counts[b])
        mean_confidence = confidence_sums[b] / count if count else math.nan
        accuracy = correct_sums[b] / count if count else math.nan
        rows.append(
            {
                "bin": b,
                "bin_lower": b / bins,
                "bin_upper": (b + 1) / bins,
                "count": count,
                "fraction": count / n_units,
                "mean_confidence": mean_confidence,
                "accuracy": accuracy,
                "gap": mean_confidence - accuracy,
                "curve": curve,
            }
        )
    return rows


def _report_draws(
    y_true: np.ndarray,
    probs: tuple[np.ndarray, ...],
    group_id: np.ndarray,
    settings: ReportSettings,
) -> GroupDraws:
    """Stratified group draws at the report's minima (overall and per class)."""
    return draw_for(
        aggregate_groups(y_true, probs, group_id),
        n_resamples=settings.n_resamples,
        seed=settings.seed,
        stratify=True,
        min_groups=MIN_BOOTSTRAP_GROUPS,
        min_groups_per_class=MIN_BOOTSTRAP_GROUPS_PER_CLASS,
    )


def score_run(run: RunInput, settings: ReportSettings) -> RunScores:
    """Group-level intervals, both levels' point values and the reliability table of one run."""
    data = _validated(run)
    summary_identity = run_identity(run)
    identity = {name: summary_identity[name] for name in RUN_ROW_IDENTITY}
    metrics = _report_metrics(data.n_classes, settings.bins)
    draws = _report_draws(data.y_true, (data.prob,), data.group_id, settings)
    grouped = draws.grouped
    scores = RunScores(
        n_groups=grouped.n_groups,
        too_few_groups=draws.reason is not None,
        no_interval_reason=draws.reason,
    )
    common = {
        **summary_identity,
        "n_samples": grouped.n_samples,
        "n_groups": grouped.n_groups,
    }
    group_values: dict[str, float] = {}
    for name, metric in metrics.items():
        interval = interval_from_grouped(
            draws,
            metric,
            name,
            n_resamples=settings.n_resamples,
            confidence_level=settings.confidence_level,
            seed=settings.seed,
            stratified=True,
            interval=INTERVAL_AUTO,
        )
        group_values[name] = interval.estimate
        if draws.reason is None and interval.no_interval_reason is not None:
            scores.withheld[name] = interval.no_interval_reason
        scores.summary.append(
            {
                **common,
                "metric": name,
                "direction": METRIC_DIRECTIONS.get(name, "higher"),
                "estimate": interval.estimate,
                "ci_low": interval.ci_low,
                "ci_high": interval.ci_high,
                "n_resamples": interval.n_resamples,
                "n_valid_resamples": interval.n_valid_resamples,
                "confidence_level": interval.confidence_level,
                "interval_method": interval.interval_method,
                "no_interval_reason": interval.no_interval_reason,
            }
        )
    for name, value in _collapse_flags(group_values["max_predicted_class_fraction"]).items():
        group_values[name] = value
        scores.summary.append(
            {**common, "metric": name, "direction": METRIC_DIRECTIONS[name], "estimate": value}
        )
    sample_values = _point_values(metrics, data.y_true, data.prob)
    for level, n_units, values in (
        (LEVEL_SAMPLE, grouped.n_samples, sample_values),
        (LEVEL_GROUP, grouped.n_groups, group_values),
    ):
        scores.levels.extend(
            {**identity, "level": level, "n_units": n_units, "metric": name, "value": value}
            for name, value in values.items()
        )
    scores.reliability = [{**identity, **row} for row in _reliability(grouped, settings.bins)]
    scores.ece = group_values["ece"]
    scores.classwise_ece = group_values["classwise_ece"]
    scores.figure_curve = figure_curve(data.n_classes)
    return scores


def _shown(values: Any) -> str:
    items = list(values)
    text = ", ".join(repr(v) for v in items[:_MAX_SHOWN])
    return text + (f" (+{len(items) - _MAX_SHOWN} more)" if len(items) > _MAX_SHOWN else "")


def _align(
    reference: ValidPredictions, candidate: ValidPredictions
) -> tuple[np.ndarray | None, str | None, str]:
    """Candidate row order matching the reference's samples, or a rejection reason."""
    if reference.n_classes != candidate.n_classes:
        return (
            None,
            CLASS_MISMATCH,
            f"reference has {reference.n_classes} classes, candidate {candidate.n_classes}",
        )
    only_reference = np.setdiff1d(reference.sample_id, candidate.sample_id)
    only_candidate = np.setdiff1d(candidate.sample_id, reference.sample_id)
    if only_reference.size or only_candidate.size:
        return (
            None,
            UNMATCHED_SAMPLES,
            f"{only_reference.size} sample_id only in the reference "
            f"({_shown(only_reference.tolist())}), {only_candidate.size} only in the candidate "
            f"({_shown(only_candidate.tolist())})",
        )
    order = pd.Index(candidate.sample_id).get_indexer(reference.sample_id)
    differs = (candidate.group_id[order] != reference.group_id) | (
        candidate.y_true[order] != reference.y_true
    )
    if differs.any():
        return (
            None,
            LABEL_MISMATCH,
            f"{int(differs.sum())} samples differ in group_id or y_true, e.g. "
            f"{_shown(reference.sample_id[differs].tolist())}",
        )
    return order, None, ""


def _mcnemar_rows(
    base: dict[str, Any],
    reference: ValidPredictions,
    candidate_prob: np.ndarray,
    grouped: GroupedData,
) -> list[dict[str, Any]]:
    """Sample- and group-level McNemar rows (reference first, as in ``mcnemar.csv``)."""
    rows = []
    levels = (
        (LEVEL_SAMPLE, reference.y_true, reference.prob, candidate_prob),
        (LEVEL_GROUP, grouped.labels, grouped.probs[1], grouped.probs[0]),
    )
    for level, labels, prob_reference, prob_candidate in levels:
        reference_correct = np.argmax(prob_reference, axis=1) == labels
        candidate_correct = np.argmax(prob_candidate, axis=1) == labels
        only_reference, only_candidate, p_value = mcnemar(reference_correct, candidate_correct)
        rows.append(
            {
                **base,
                "level": level,
                "n_units": int(labels.size),
                "only_reference_correct": only_reference,
                "only_candidate_correct": only_candidate,
                "p_value": p_value,
                "p_mid": mcnemar_mid_p(reference_correct, candidate_correct),
                "anti_conservative": level == LEVEL_SAMPLE and grouped.n_samples > grouped.n_groups,
            }
        )
    return rows


def compare_pair(
    reference: RunInput, candidate: RunInput, *, settings: ReportSettings
) -> PairOutcome:
    """Paired bootstrap and McNemar rows of ``candidate`` against ``reference``.

    The bootstrap is ``cluster_bootstrap_difference(y, prob_candidate,
    prob_reference, group_id, ...)``: ``delta = candidate - reference``.
    ``p_holm`` is left NaN here; the report fills it per ``(dataset, metric)``.
    """
    ref_data, cand_data = _validated(reference), _validated(candidate)
    order, reason, detail = _align(ref_data, cand_data)
    if order is None:
        return PairOutcome(reason=reason, detail=detail)
    candidate_prob = cand_data.prob[order]
    draws = _report_draws(
        ref_data.y_true, (candidate_prob, ref_data.prob), ref_data.group_id, settings
    )
    grouped = draws.grouped
    base = pair_identity(reference, candidate)
    partial = base.pop("partial")
    outcome = PairOutcome()
    for name in REPORT_PAIRED_METRICS:
        result = difference_from_grouped(
            draws,
            batch_metric(name, bins=settings.bins),
            name,
            n_resamples=settings.n_resamples,
            confidence_level=settings.confidence_level,
            seed=settings.seed,
            stratified=True,
            interval=INTERVAL_AUTO,
        )
        higher = not is_lower_better(name)
        outcome.paired.append(
            {
                **base,
                "partial": partial,
                "metric": name,
                "higher_is_better": higher,
                "n_samples": result.n_samples,
                "n_groups": result.n_groups,
                "reference_value": result.estimate_b,
                "candidate_value": result.estimate_a,
                "delta": result.difference,
                "ci_low": result.ci_low,
                "ci_high": result.ci_high,
                "p_value": result.p_value,
                "p_holm": math.nan,
                "probability_candidate_better": (
                    result.prob_a_larger if higher else result.prob_a_smaller
                ),
                "n_resamples": result.n_resamples,
                "n_valid_resamples": result.n_valid_resamples,
                "confidence_level": result.confidence_level,
                "interval_method": result.interval_method,
                "no_interval_reason": result.no_interval_reason,
            }
        )
    outcome.mcnemar = _mcnemar_rows(base, ref_data, candidate_prob, grouped)
    return outcome


def _metric_refusal(reason: Any) -> bool:
    return isinstance(reason, str) and reason.split(":", 1)[0] in METRIC_REFUSALS


def withheld_intervals(run_summary: pd.DataFrame, paired: pd.DataFrame) -> list[dict[str, str]]:
    """Rows whose interval was withheld for the metric alone, for the manifest.

    Run-wide refusals (too few groups overall or in a class) are listed under
    their own caveat; these are the metric-level ones
    (:data:`~deepecgkit.analysis.compare.bootstrap.METRIC_REFUSALS`), in table
    order: ``{"run_id", "metric", "reason"}`` for a run's interval and
    ``{"candidate_run_id", "reference_run_id", "metric", "reason"}`` for a
    paired difference.
    """
    entries: list[dict[str, str]] = []
    for row in run_summary.itertuples(index=False):
        if _metric_refusal(row.no_interval_reason):
            entries.append(
                {"run_id": row.run_id, "metric": row.metric, "reason": row.no_interval_reason}
            )
    for row in paired.itertuples(index=False):
        if _metric_refusal(row.no_interval_reason):
            entries.append(
                {
                    "candidate_run_id": row.candidate_run_id,
                    "reference_run_id": row.reference_run_id,
                    "metric": row.metric,
                    "reason": row.no_interval_reason,
                }
            )
    return entries
