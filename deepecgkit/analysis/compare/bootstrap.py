"""Group (cluster) bootstrap of one run's metric and of a paired difference.

Whole groups are resampled with replacement, because the segments of one
recording (the recordings of one patient) are not independent: resampling
them individually would pretend there is more evidence than there is. The
question answered is the one a deployment decision turns on: how much would
the metric, or the difference between two runs, move on a fresh draw of
patients? It says nothing about another training seed, fold or
configuration.

Choices (comparisons.md §3): resampling is stratified by group label by
default, because the test set's class mix is a design choice, not a random
quantity, and keeping each class's group count fixed keeps AUROC defined in
every resample; the interval is the percentile interval (no normality
assumption, respects the metric's range; BCa would need a jackknife over
groups for a modest gain at 1,000 resamples); resamples where a metric is
undefined are dropped and counted.

Sign convention: ``difference = metric(a) - metric(b)``, positive when
``a``'s number is larger, whatever the metric's direction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from deepecgkit.analysis.compare.batch_metrics import BatchMetric
from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.analysis.compare.groups import (
    GroupedData,
    aggregate_groups,
    by_label,
    validate_predictions,
)
from deepecgkit.analysis.compare.resampling import (
    check_bootstrap_settings,
    draw_counts,
    evaluate_metric,
    percentile_interval,
    resolve_metric,
)
from deepecgkit.analysis.constants import (
    CONFIDENCE_LEVEL,
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_N_RESAMPLES,
    MIN_TEST_GROUPS,
)

__all__ = [
    "BootstrapDifference",
    "BootstrapInterval",
    "cluster_bootstrap_difference",
    "cluster_bootstrap_metric",
    "difference_from_grouped",
    "difference_statistics",
    "draw_for",
    "interval_from_grouped",
]

_NAN = math.nan


@dataclass(frozen=True)
class BootstrapInterval:
    """Percentile bootstrap interval of one run's group-level metric.

    ``values`` holds the finite resample values in resample order; the
    interval fields are NaN when no resample was drawn (fewer groups than
    ``min_groups``) or none was valid.
    """

    metric: str
    estimate: float
    ci_low: float
    ci_high: float
    n_samples: int
    n_groups: int
    n_resamples: int
    n_valid_resamples: int
    confidence_level: float
    seed: int
    stratified: bool
    values: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class BootstrapDifference:
    """Paired group bootstrap of ``metric(a) - metric(b)``.

    ``differences`` holds the valid ``d_r`` in resample order. ``p_value`` is
    two-sided, ``prob_a_larger`` / ``prob_a_smaller`` the shares of valid
    resamples with ``d_r > 0`` / ``d_r < 0`` (exact zeros count in neither).
    """

    metric: str
    estimate_a: float
    estimate_b: float
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    prob_a_larger: float
    prob_a_smaller: float
    n_samples: int
    n_groups: int
    n_resamples: int
    n_valid_resamples: int
    confidence_level: float
    seed: int
    stratified: bool
    differences: np.ndarray = field(repr=False)


def difference_statistics(
    differences: np.ndarray, confidence_level: float
) -> tuple[float, float, float, float, float]:
    """Interval, p-value and direction shares of valid bootstrap differences.

    Args:
        differences: the ``B`` valid differences ``d_r``.
        confidence_level: two-sided coverage of the percentile interval.

    Returns:
        ``(ci_low, ci_high, p_value, prob_a_larger, prob_a_smaller)``; all NaN
        when ``B == 0``. With ``L = (1 + #{d <= 0}) / (B + 1)`` and
        ``U = (1 + #{d >= 0}) / (B + 1)``, ``p_value = min(1, 2 min(L, U))``.
        The ``+1`` keeps p away from 0 (a finite simulation cannot certify an
        impossible event; the smallest value is ``2 / (B + 1)``), and exact
        zeros count in both tails so identical models give ``p = 1``.

    Example:
        >>> d = np.array([0.02, 0.01, -0.01, 0.03, 0.0, 0.04, 0.02, 0.05, 0.01])
        >>> [round(v, 6) for v in difference_statistics(d, 0.95)]
        [-0.008, 0.048, 0.6, 0.777778, 0.111111]
    """
    n_valid = differences.size
    if n_valid == 0:
        return _NAN, _NAN, _NAN, _NAN, _NAN
    ci_low, ci_high = percentile_interval(differences, confidence_level)
    lower_tail = (1 + np.count_nonzero(differences <= 0)) / (n_valid + 1)
    upper_tail = (1 + np.count_nonzero(differences >= 0)) / (n_valid + 1)
    p_value = min(1.0, 2.0 * min(lower_tail, upper_tail))
    larger = np.count_nonzero(differences > 0) / n_valid
    smaller = np.count_nonzero(differences < 0) / n_valid
    return ci_low, ci_high, float(p_value), float(larger), float(smaller)


def _point(metric: BatchMetric, labels: np.ndarray, prob: np.ndarray) -> float:
    """The metric on all groups (one row of unit weights)."""
    ones = np.ones((1, labels.size))
    return float(evaluate_metric(metric, labels, prob, ones)[0])


def interval_from_grouped(
    grouped: GroupedData,
    metric: BatchMetric,
    name: str,
    weights: np.ndarray | None,
    *,
    n_resamples: int,
    confidence_level: float,
    seed: int,
    stratified: bool,
) -> BootstrapInterval:
    """Build a :class:`BootstrapInterval` from aggregated data and drawn counts.

    ``weights`` is the ``(R, G)`` count matrix, or None when too few groups
    allowed no draws. The report calls this with one count matrix per run for
    every metric, which gives the same numbers as one public call per metric.
    """
    labels, prob = grouped.labels, grouped.probs[0]
    estimate = _point(metric, labels, prob)
    if weights is None:
        values = np.empty(0)
    else:
        values = evaluate_metric(metric, labels, prob, weights)
        values = values[np.isfinite(values)]
    ci_low, ci_high = percentile_interval(values, confidence_level)
    return BootstrapInterval(
        metric=name,
        estimate=estimate,
        ci_low=ci_low,
        ci_high=ci_high,
        n_samples=grouped.n_samples,
        n_groups=grouped.n_groups,
        n_resamples=n_resamples,
        n_valid_resamples=int(values.size),
        confidence_level=float(confidence_level),
        seed=seed,
        stratified=stratified,
        values=values,
    )


def difference_from_grouped(
    grouped: GroupedData,
    metric: BatchMetric,
    name: str,
    weights: np.ndarray | None,
    *,
    n_resamples: int,
    confidence_level: float,
    seed: int,
    stratified: bool,
) -> BootstrapDifference:
    """Build a :class:`BootstrapDifference` of ``grouped.probs[0]`` minus ``probs[1]``."""
    labels = grouped.labels
    prob_a, prob_b = grouped.probs
    estimate_a = _point(metric, labels, prob_a)
    estimate_b = _point(metric, labels, prob_b)
    if weights is None:
        differences = np.empty(0)
    else:
        values_a = evaluate_metric(metric, labels, prob_a, weights)
        values_b = evaluate_metric(metric, labels, prob_b, weights)
        valid = np.isfinite(values_a) & np.isfinite(values_b)
        differences = values_a[valid] - values_b[valid]
    ci_low, ci_high, p_value, larger, smaller = difference_statistics(differences, confidence_level)
    return BootstrapDifference(
        metric=name,
        estimate_a=estimate_a,
        estimate_b=estimate_b,
        difference=estimate_a - estimate_b,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        prob_a_larger=larger,
        prob_a_smaller=smaller,
        n_samples=grouped.n_samples,
        n_groups=grouped.n_groups,
        n_resamples=n_resamples,
        n_valid_resamples=int(differences.size),
        confidence_level=float(confidence_level),
        seed=seed,
        stratified=stratified,
        differences=differences,
    )


def _prepare(
    y_true: ArrayLike,
    probs: dict[str, ArrayLike],
    groups: ArrayLike,
    n_resamples: int,
    confidence_level: float,
    seed: int,
    stratify: bool,
    min_groups: int,
) -> tuple[GroupedData, np.ndarray | None]:
    """Validate, aggregate to groups and draw the count matrix (None below ``min_groups``)."""
    check_bootstrap_settings(n_resamples, confidence_level, seed, min_groups)
    if not isinstance(stratify, (bool, np.bool_)):
        raise ComparisonError(f"stratify must be True or False, got {stratify!r}")
    labels, matrices, group_ids = validate_predictions(y_true, probs, groups)
    grouped = aggregate_groups(labels, matrices, group_ids)
    return draw_for(grouped, int(n_resamples), int(seed), bool(stratify), int(min_groups))


def draw_for(
    grouped: GroupedData, n_resamples: int, seed: int, stratify: bool, min_groups: int
) -> tuple[GroupedData, np.ndarray | None]:
    """The groups (reordered by label when stratified) and their count matrix.

    Returns None instead of a count matrix below ``min_groups`` groups: fewer
    independent units than that cannot support an interval.
    """
    if grouped.n_groups < min_groups:
        return grouped, None
    ordered = by_label(grouped) if stratify else grouped
    return ordered, draw_counts(ordered.labels, n_resamples, seed, stratify)


def cluster_bootstrap_metric(
    y_true: ArrayLike,
    prob: ArrayLike,
    groups: ArrayLike,
    metric: str | BatchMetric,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    confidence_level: float = CONFIDENCE_LEVEL,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
    stratify: bool = True,
    *,
    min_groups: int = MIN_TEST_GROUPS,
) -> BootstrapInterval:
    """Percentile group-bootstrap interval of one run's group-level metric.

    Args:
        y_true: ``(n,)`` integer-valued class indices in ``[0, K-1]``.
        prob: ``(n, K)`` probabilities, or ``(n,)`` read as P(class 1).
        groups: ``(n,)`` group ids (patients, recordings), compared as strings.
        metric: a name understood by :func:`batch_metric` (``"ece"`` then uses
            ``DEFAULT_CALIBRATION_BINS``) or a batch-metric callable.
        n_resamples: bootstrap resamples ``R`` (>= 1).
        confidence_level: two-sided coverage, strictly between 0 and 1.
        seed: non-negative seed of the generator created inside the call.
        stratify: keep each label's group count fixed in every resample.
        min_groups: fewest groups that can support an interval; below it the
            point estimate is returned with NaN interval and no draws.

    Returns:
        :class:`BootstrapInterval`; ``estimate`` is the metric on all groups.

    Raises:
        ComparisonError: any input violating comparisons.md §3.1, or a bad setting.
    """
    name, function = resolve_metric(metric)
    grouped, weights = _prepare(
        y_true, {"prob": prob}, groups, n_resamples, confidence_level, seed, stratify, min_groups
    )
    return interval_from_grouped(
        grouped,
        function,
        name,
        weights,
        n_resamples=int(n_resamples),
        confidence_level=float(confidence_level),
        seed=int(seed),
        stratified=bool(stratify),
    )


def cluster_bootstrap_difference(
    y_true: ArrayLike,
    prob_a: ArrayLike,
    prob_b: ArrayLike,
    groups: ArrayLike,
    metric: str | BatchMetric,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    confidence_level: float = CONFIDENCE_LEVEL,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
    stratify: bool = True,
    *,
    min_groups: int = MIN_TEST_GROUPS,
) -> BootstrapDifference:
    """Paired group bootstrap of ``metric(a) - metric(b)`` on the same samples.

    Both models are aggregated to the same groups and every resample serves
    both (that is what makes the bootstrap paired). A resample is valid when
    both metric values are finite; invalid ones are dropped and counted.

    Args:
        y_true: ``(n,)`` integer-valued class indices in ``[0, K-1]``.
        prob_a: ``(n, K)`` or ``(n,)`` probabilities of model ``a``.
        prob_b: probabilities of model ``b``, the same shape as ``prob_a``.
        groups: ``(n,)`` group ids, compared as strings.
        metric: a built-in metric name or a batch-metric callable.
        n_resamples: bootstrap resamples ``R`` (>= 1).
        confidence_level: two-sided coverage, strictly between 0 and 1.
        seed: non-negative seed of the generator created inside the call.
        stratify: keep each label's group count fixed in every resample.
        min_groups: fewest groups that can support an interval.

    Returns:
        :class:`BootstrapDifference`. Below ``min_groups`` groups (or with no
        valid resample) the interval, p-value and shares are NaN and only the
        point estimates are reported.

    Raises:
        ComparisonError: any input violating comparisons.md §3.1, or a bad setting.

    Example:
        >>> import numpy as np
        >>> y = np.repeat([0, 1], 20)
        >>> p = np.where(y[:, None] == [0, 1], 0.8, 0.2)
        >>> cluster_bootstrap_difference(y, p, p, np.arange(40), "accuracy").p_value
        1.0
    """
    name, function = resolve_metric(metric)
    grouped, weights = _prepare(
        y_true,
        {"prob_a": prob_a, "prob_b": prob_b},
        groups,
        n_resamples,
        confidence_level,
        seed,
        stratify,
        min_groups,
    )
    return difference_from_grouped(
        grouped,
        function,
        name,
        weights,
        n_resamples=int(n_resamples),
        confidence_level=float(confidence_level),
        seed=int(seed),
        stratified=bool(stratify),
    )
