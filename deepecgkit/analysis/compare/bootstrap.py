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
every resample; resamples where a metric is undefined are dropped and
counted.

The interval (``interval="auto"``, the default) is the expanded percentile
interval (Hesterberg 2015; see :mod:`~deepecgkit.analysis.compare.resampling`)
with ``n`` the smallest stratum's group count (stratified) or the group
count (unstratified): the percentile interval is too narrow at few groups,
and the stratum that holds the fewest groups limits how well a resample
mimics a fresh draw of patients. One run's AUROC uses the BCa interval at
the same expanded level instead: with a rare class or near the ceiling its
distribution is skewed, and the percentile interval then covers 0.90-0.92.

Group counts are not enough near a metric's ceiling, where a few groups
carry all of the metric's variation. For accuracy and AUROC (the metrics
whose coverage was simulated) the *informative groups* are counted
(:mod:`~deepecgkit.analysis.compare.information`): their count caps ``n``,
so the interval widens as the information shrinks, and below
``MIN_INFORMATIVE_GROUPS`` the interval is withheld.

Below ``MIN_BOOTSTRAP_GROUPS`` groups, or with a class present in fewer than
``MIN_BOOTSTRAP_GROUPS_PER_CLASS`` groups, no resample is drawn; with too few
informative groups the metric gets none. In both cases the point estimate
is returned with a NaN interval and the reason. All of these choices come
from the coverage simulation of ``benchmarks/bench_interval_coverage.py``
(docs/benchmarks.md), where the percentile interval covers 0.6-0.8 at 10
groups and BCa undercovers the accuracy difference (its acceleration is
erratic for a statistic that moves in steps of one group).

Sign convention: ``difference = metric(a) - metric(b)``, positive when
``a``'s number is larger, whatever the metric's direction.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from deepecgkit.analysis.compare.batch_metrics import BatchMetric, BuiltinMetric
from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.analysis.compare.groups import (
    GroupedData,
    aggregate_groups,
    by_label,
    validate_predictions,
)
from deepecgkit.analysis.compare.information import (
    TOO_FEW_INFORMATIVE_GROUPS,
    auroc_influence,
    expansion_cap,
    information_of,
    information_refusal,
)
from deepecgkit.analysis.compare.resampling import (
    bootstrap_interval,
    check_bootstrap_settings,
    check_interval_method,
    draw_counts,
    evaluate_metric,
    expanded_bca_interval,
    expanded_p_value,
    expanded_tail_probability,
    percentile_interval,
    resolve_metric,
)
from deepecgkit.analysis.constants import (
    CONFIDENCE_LEVEL,
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_N_RESAMPLES,
    INTERVAL_AUTO,
    INTERVAL_EXPANDED_BCA,
    INTERVAL_EXPANDED_PERCENTILE,
    INTERVAL_PERCENTILE,
    MIN_BOOTSTRAP_GROUPS,
    MIN_BOOTSTRAP_GROUPS_PER_CLASS,
    MIN_INFORMATIVE_GROUPS,
)

__all__ = [
    "BCA_UNDEFINED",
    "METRIC_REFUSALS",
    "NO_VALID_RESAMPLE",
    "TOO_FEW_GROUPS",
    "TOO_FEW_GROUPS_IN_CLASS",
    "BootstrapDifference",
    "BootstrapInterval",
    "GroupDraws",
    "cluster_bootstrap_difference",
    "cluster_bootstrap_metric",
    "difference_from_grouped",
    "difference_statistics",
    "draw_for",
    "expansion_units",
    "interval_from_grouped",
    "interval_method_for",
    "interval_refusal",
]

_NAN = math.nan
#: Reason codes of a missing interval (the first word of ``no_interval_reason``).
TOO_FEW_GROUPS = "too_few_groups"
TOO_FEW_GROUPS_IN_CLASS = "too_few_groups_in_class"
NO_VALID_RESAMPLE = "no_valid_resample"
BCA_UNDEFINED = "bca_undefined"
#: Reason codes that refuse one metric's interval rather than a whole run's or pair's.
METRIC_REFUSALS = (TOO_FEW_INFORMATIVE_GROUPS, BCA_UNDEFINED, NO_VALID_RESAMPLE)
#: The metric whose single-run interval ``INTERVAL_AUTO`` computes by expanded BCa.
_BCA_METRIC = "auroc"
#: A stratum redrawn with any spread holds at least two groups.
_MIN_STRATUM_SPREAD = 2
#: Distinct (confidence level, n) pairs whose expanded tail is kept: a report
#: asks for a handful of n at one level, thousands of times.
_TAIL_CACHE_SIZE = 1024


@functools.lru_cache(maxsize=_TAIL_CACHE_SIZE)
def _expanded_tail(confidence_level: float, n_units: int) -> float:
    """``expanded_tail_probability``, computed once per level and ``n``.

    Each call costs about a millisecond of scipy's distribution machinery
    (a t and a normal quantile), more than the percentile interval it sets;
    a report asks for the same few values once per metric and run.
    """
    return expanded_tail_probability(confidence_level, n_units)


def _interval(
    values: np.ndarray, confidence_level: float, *, method: str, n_units: int
) -> tuple[float, float]:
    """``bootstrap_interval``, with the expanded tail from :func:`_expanded_tail` (same numbers)."""
    if method == INTERVAL_EXPANDED_PERCENTILE:
        tail = _expanded_tail(float(confidence_level), int(n_units))
        return percentile_interval(values, 1.0 - tail)
    return bootstrap_interval(values, confidence_level, method=method, n_units=n_units)


@dataclass(frozen=True)
class BootstrapInterval:
    """Group-bootstrap interval of one run's group-level metric.

    ``values`` holds the finite resample values in resample order; the
    interval fields are NaN when no resample was drawn (too few groups
    overall or in a class), when the metric has too few informative groups
    (no values either), when none was valid, or when a BCa level is
    undefined, and ``no_interval_reason`` then says which (None when there
    is an interval). ``interval_method`` is the method used
    (``"expanded-bca"`` or ``"expanded-percentile"`` under ``"auto"``).
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
    interval_method: str
    no_interval_reason: str | None
    values: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class BootstrapDifference:
    """Paired group bootstrap of ``metric(a) - metric(b)``.

    ``differences`` holds the valid ``d_r`` in resample order. ``p_value`` is
    two-sided and matches the interval method (see
    :func:`difference_statistics`), ``prob_a_larger`` / ``prob_a_smaller``
    the shares of valid resamples with ``d_r > 0`` / ``d_r < 0`` (exact zeros
    count in neither). ``no_interval_reason`` as in :class:`BootstrapInterval`.
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
    interval_method: str
    no_interval_reason: str | None
    differences: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class GroupDraws:
    """Groups ready for the bootstrap, with their count matrix or the reason there is none.

    Attributes:
        grouped: the groups (reordered by label when stratified).
        weights: the ``(R, G)`` count matrix, or None when ``reason`` is set.
        reason: why no interval can be drawn (``"<code>: <detail>"``), or None.
        n_units: the ``n`` of the expanded interval (:func:`expansion_units`).
    """

    grouped: GroupedData
    weights: np.ndarray | None
    reason: str | None
    n_units: int


def difference_statistics(
    differences: np.ndarray,
    confidence_level: float,
    *,
    method: str = INTERVAL_PERCENTILE,
    n_units: int = 0,
) -> tuple[float, float, float, float, float]:
    """Interval, p-value and direction shares of valid bootstrap differences.

    Args:
        differences: the ``B`` valid differences ``d_r``.
        confidence_level: two-sided coverage of the interval.
        method: ``INTERVAL_PERCENTILE`` or ``INTERVAL_EXPANDED_PERCENTILE``.
        n_units: the ``n`` of the expanded interval (ignored for percentile).

    Returns:
        ``(ci_low, ci_high, p_value, prob_a_larger, prob_a_smaller)``; all NaN
        when ``B == 0``. With ``L = (1 + #{d <= 0}) / (B + 1)`` and
        ``U = (1 + #{d >= 0}) / (B + 1)``, the percentile p-value is
        ``min(1, 2 min(L, U))``. The ``+1`` keeps p away from 0 (a finite
        simulation cannot certify an impossible event; the smallest value is
        ``2 / (B + 1)``), and exact zeros count in both tails so identical
        models give ``p = 1``. For the expanded interval the p-value is
        :func:`~deepecgkit.analysis.compare.resampling.expanded_p_value` of
        it, so interval and p-value agree on whether 0 is excluded.

    Example:
        >>> d = np.array([0.02, 0.01, -0.01, 0.03, 0.0, 0.04, 0.02, 0.05, 0.01])
        >>> [round(v, 6) for v in difference_statistics(d, 0.95)]
        [-0.008, 0.048, 0.6, 0.777778, 0.111111]
    """
    n_valid = differences.size
    if n_valid == 0:
        return _NAN, _NAN, _NAN, _NAN, _NAN
    ci_low, ci_high = _interval(differences, confidence_level, method=method, n_units=n_units)
    lower_tail = (1 + np.count_nonzero(differences <= 0)) / (n_valid + 1)
    upper_tail = (1 + np.count_nonzero(differences >= 0)) / (n_valid + 1)
    p_value = min(1.0, 2.0 * min(lower_tail, upper_tail))
    if method == INTERVAL_EXPANDED_PERCENTILE:
        p_value = expanded_p_value(p_value, n_units)
    larger = np.count_nonzero(differences > 0) / n_valid
    smaller = np.count_nonzero(differences < 0) / n_valid
    return ci_low, ci_high, float(p_value), float(larger), float(smaller)


def _point(metric: BatchMetric, labels: np.ndarray, prob: np.ndarray) -> float:
    """The metric on all groups (one row of unit weights)."""
    ones = np.ones((1, labels.size))
    return float(evaluate_metric(metric, labels, prob, weights=ones)[0])


def _reason(refusal: str | None, n_valid: int) -> str | None:
    """The refusal reason, or ``no_valid_resample`` when draws exist but none was valid."""
    if refusal is not None:
        return refusal
    if n_valid == 0:
        return f"{NO_VALID_RESAMPLE}: the metric is undefined on every resample"
    return None


def interval_method_for(interval: str, metric: BatchMetric, *, paired: bool) -> str:
    """The method ``interval`` stands for: ``auto`` resolves per metric.

    ``auto`` gives ``expanded-bca`` for one run's built-in AUROC and
    ``expanded-percentile`` otherwise (paired differences included: BCa
    undercovers the AUROC difference near the ceiling, docs/benchmarks.md).
    """
    if interval != INTERVAL_AUTO:
        return interval
    if not paired and isinstance(metric, BuiltinMetric) and metric.__name__ == _BCA_METRIC:
        return INTERVAL_EXPANDED_BCA
    return INTERVAL_EXPANDED_PERCENTILE


def _informed(
    draws: GroupDraws, metric: BatchMetric, name: str, probs: tuple[np.ndarray, ...], minimum: int
) -> tuple[str | None, int]:
    """The refusal (group minima first, then information) and the expansion's ``n``."""
    information = information_of(metric, draws.grouped.labels, probs)
    if information is None:
        units = draws.n_units
    else:
        units = min(draws.n_units, expansion_cap(information.count))
    return draws.reason or information_refusal(information, minimum=minimum, metric=name), units


def _resample_fields(
    draws: GroupDraws,
    valid: np.ndarray,
    refusal: str | None,
    method: str,
    *,
    n_resamples: int,
    confidence_level: float,
    seed: int,
    stratified: bool,
) -> dict[str, Any]:
    """The fields :class:`BootstrapInterval` and :class:`BootstrapDifference` share.

    What was resampled and how, and why there is no interval: ``valid`` holds
    the valid resample values (or differences), ``refusal`` the reason found
    before any was drawn (see :func:`_reason`).
    """
    n_valid = int(valid.size)
    return {
        "n_samples": draws.grouped.n_samples,
        "n_groups": draws.grouped.n_groups,
        "n_resamples": n_resamples,
        "n_valid_resamples": n_valid,
        "confidence_level": float(confidence_level),
        "seed": seed,
        "stratified": stratified,
        "interval_method": method,
        "no_interval_reason": _reason(refusal, n_valid),
    }


def interval_from_grouped(
    draws: GroupDraws,
    metric: BatchMetric,
    name: str,
    *,
    n_resamples: int,
    confidence_level: float,
    seed: int,
    stratified: bool,
    interval: str = INTERVAL_AUTO,
    min_informative_groups: int = MIN_INFORMATIVE_GROUPS,
) -> BootstrapInterval:
    """Build a :class:`BootstrapInterval` from drawn groups (:func:`draw_for`).

    The report calls this with one set of draws per run for every metric,
    which gives the same numbers as one public call per metric.
    """
    grouped = draws.grouped
    labels, prob = grouped.labels, grouped.probs[0]
    estimate = _point(metric, labels, prob)
    method = interval_method_for(interval, metric, paired=False)
    refusal, units = _informed(draws, metric, name, (prob,), min_informative_groups)
    if draws.weights is None or refusal is not None:
        values = np.empty(0)
    else:
        values = evaluate_metric(metric, labels, prob, weights=draws.weights)
        values = values[np.isfinite(values)]
    if method == INTERVAL_EXPANDED_BCA:
        influence = auroc_influence(labels, prob)
        ci_low, ci_high = expanded_bca_interval(
            values, estimate, influence, confidence_level=confidence_level, n_units=units
        )
        if values.size and math.isnan(ci_low):
            refusal = (
                f"{BCA_UNDEFINED}: every resample lies on one side of the estimate "
                "or a BCa level is undefined"
            )
    else:
        ci_low, ci_high = _interval(values, confidence_level, method=method, n_units=units)
    return BootstrapInterval(
        metric=name,
        estimate=estimate,
        ci_low=ci_low,
        ci_high=ci_high,
        **_resample_fields(
            draws,
            values,
            refusal,
            method,
            n_resamples=n_resamples,
            confidence_level=confidence_level,
            seed=seed,
            stratified=stratified,
        ),
        values=values,
    )


def difference_from_grouped(
    draws: GroupDraws,
    metric: BatchMetric,
    name: str,
    *,
    n_resamples: int,
    confidence_level: float,
    seed: int,
    stratified: bool,
    interval: str = INTERVAL_AUTO,
    min_informative_groups: int = MIN_INFORMATIVE_GROUPS,
) -> BootstrapDifference:
    """Build a :class:`BootstrapDifference` of ``probs[0]`` minus ``probs[1]`` of the draws."""
    grouped = draws.grouped
    labels = grouped.labels
    prob_a, prob_b = grouped.probs
    estimate_a = _point(metric, labels, prob_a)
    estimate_b = _point(metric, labels, prob_b)
    method = interval_method_for(interval, metric, paired=True)
    refusal, units = _informed(draws, metric, name, (prob_a, prob_b), min_informative_groups)
    if draws.weights is None or refusal is not None:
        differences = np.empty(0)
    else:
        values_a = evaluate_metric(metric, labels, prob_a, weights=draws.weights)
        values_b = evaluate_metric(metric, labels, prob_b, weights=draws.weights)
        valid = np.isfinite(values_a) & np.isfinite(values_b)
        differences = values_a[valid] - values_b[valid]
    ci_low, ci_high, p_value, larger, smaller = difference_statistics(
        differences, confidence_level, method=method, n_units=units
    )
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
        **_resample_fields(
            draws,
            differences,
            refusal,
            method,
            n_resamples=n_resamples,
            confidence_level=confidence_level,
            seed=seed,
            stratified=stratified,
        ),
        differences=differences,
    )


def _check_count(name: str, value: object, smallest: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ComparisonError(f"{name} must be an integer >= {smallest}, got {value!r}")
    if int(value) < smallest:
        raise ComparisonError(f"{name} must be an integer >= {smallest}, got {value!r}")
    return int(value)


def _prepare(
    y_true: ArrayLike,
    probs: dict[str, ArrayLike],
    groups: ArrayLike,
    n_resamples: int,
    confidence_level: float,
    seed: int,
    stratify: bool,
    min_groups: int,
    min_groups_per_class: int,
    min_informative_groups: int,
    interval: str,
) -> GroupDraws:
    """Validate, aggregate to groups and draw the count matrix (none below the minima)."""
    check_bootstrap_settings(
        n_resamples=n_resamples, confidence_level=confidence_level, seed=seed, min_groups=min_groups
    )
    per_class = _check_count("min_groups_per_class", min_groups_per_class)
    _check_count("min_informative_groups", min_informative_groups, smallest=0)
    check_interval_method(interval)
    if not isinstance(stratify, (bool, np.bool_)):
        raise ComparisonError(f"stratify must be True or False, got {stratify!r}")
    labels, matrices, group_ids = validate_predictions(y_true, probs, groups)
    grouped = aggregate_groups(labels, matrices, group_ids)
    return draw_for(
        grouped,
        n_resamples=int(n_resamples),
        seed=int(seed),
        stratify=bool(stratify),
        min_groups=int(min_groups),
        min_groups_per_class=per_class,
    )


def expansion_units(labels: np.ndarray, stratified: bool) -> int:
    """The ``n`` of the expanded percentile interval for these group labels.

    Stratified: the group count of the smallest class among those with at
    least two groups (a class of one group is redrawn as itself and adds no
    spread); unstratified: the number of groups. 0 when no class qualifies
    (the interval is then the percentile one).
    """
    if not stratified:
        return int(labels.size)
    counts = np.bincount(labels) if labels.size else np.zeros(0, dtype=np.int64)
    usable = counts[counts >= _MIN_STRATUM_SPREAD]
    return int(usable.min()) if usable.size else 0


def interval_refusal(
    labels: np.ndarray, *, min_groups: int, min_groups_per_class: int
) -> str | None:
    """Why groups with these labels cannot support an interval, or None.

    Args:
        labels: ``(G,)`` group labels.
        min_groups: fewest groups overall.
        min_groups_per_class: fewest groups of each class that occurs.

    Returns:
        ``"too_few_groups: ..."``, ``"too_few_groups_in_class: ..."`` (naming
        the smallest class) or None. Classes absent from the test set do not
        count: they are not resampled.

    Example:
        >>> interval_refusal(np.array([0, 0, 0, 1]), min_groups=3, min_groups_per_class=2)
        'too_few_groups_in_class: class 1 has 1 test group; an interval needs at least 2 per class'
    """
    if labels.size < min_groups:
        return (
            f"{TOO_FEW_GROUPS}: {labels.size} test groups; an interval needs at least {min_groups}"
        )
    classes, counts = np.unique(labels, return_counts=True)
    smallest = int(np.argmin(counts)) if counts.size else 0
    if counts.size and counts[smallest] < min_groups_per_class:
        count = int(counts[smallest])
        noun = "group" if count == 1 else "groups"
        return (
            f"{TOO_FEW_GROUPS_IN_CLASS}: class {int(classes[smallest])} has {count} test "
            f"{noun}; an interval needs at least {min_groups_per_class} per class"
        )
    return None


def draw_for(
    grouped: GroupedData,
    *,
    n_resamples: int,
    seed: int,
    stratify: bool,
    min_groups: int,
    min_groups_per_class: int = MIN_BOOTSTRAP_GROUPS_PER_CLASS,
) -> GroupDraws:
    """The groups (reordered by label when stratified), their count matrix and the expansion n.

    No count matrix is drawn when :func:`interval_refusal` gives a reason:
    fewer independent units than that cannot support an interval.
    """
    reason = interval_refusal(
        grouped.labels, min_groups=min_groups, min_groups_per_class=min_groups_per_class
    )
    units = expansion_units(grouped.labels, stratify)
    if reason is not None:
        return GroupDraws(grouped, None, reason, units)
    ordered = by_label(grouped) if stratify else grouped
    weights = draw_counts(ordered.labels, n_resamples=n_resamples, seed=seed, stratify=stratify)
    return GroupDraws(ordered, weights, None, units)


def cluster_bootstrap_metric(
    y_true: ArrayLike,
    prob: ArrayLike,
    groups: ArrayLike,
    *,
    metric: str | BatchMetric,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    confidence_level: float = CONFIDENCE_LEVEL,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
    stratify: bool = True,
    min_groups: int = MIN_BOOTSTRAP_GROUPS,
    min_groups_per_class: int = MIN_BOOTSTRAP_GROUPS_PER_CLASS,
    min_informative_groups: int = MIN_INFORMATIVE_GROUPS,
    interval: str = INTERVAL_AUTO,
) -> BootstrapInterval:
    """Group-bootstrap interval of one run's group-level metric.

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
        min_groups: fewest groups that can support an interval.
        min_groups_per_class: fewest groups of every class present. Below
            either minimum the point estimate is returned with a NaN
            interval, no draws and ``no_interval_reason``.
        min_informative_groups: fewest informative groups of a built-in
            ``accuracy`` or ``auroc`` (:mod:`~deepecgkit.analysis.compare.information`);
            below it the interval is withheld the same way. 0 switches the
            rule off (the count still caps the expansion's ``n``).
        interval: ``"auto"`` (default: expanded BCa for the built-in AUROC,
            expanded percentile otherwise), ``"expanded-percentile"`` or
            ``"percentile"``. The informative-group count caps the expansion's
            ``n`` for both expanded methods.

    Returns:
        :class:`BootstrapInterval`; ``estimate`` is the metric on all groups.

    Raises:
        ComparisonError: any input violating comparisons.md §3.1, or a bad setting.
    """
    name, function = resolve_metric(metric)
    draws = _prepare(
        y_true,
        {"prob": prob},
        groups,
        n_resamples,
        confidence_level,
        seed,
        stratify,
        min_groups,
        min_groups_per_class,
        min_informative_groups,
        interval,
    )
    return interval_from_grouped(
        draws,
        function,
        name,
        n_resamples=int(n_resamples),
        confidence_level=float(confidence_level),
        seed=int(seed),
        stratified=bool(stratify),
        interval=interval,
        min_informative_groups=int(min_informative_groups),
    )


def cluster_bootstrap_difference(
    y_true: ArrayLike,
    prob_a: ArrayLike,
    prob_b: ArrayLike,
    groups: ArrayLike,
    *,
    metric: str | BatchMetric,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    confidence_level: float = CONFIDENCE_LEVEL,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
    stratify: bool = True,
    min_groups: int = MIN_BOOTSTRAP_GROUPS,
    min_groups_per_class: int = MIN_BOOTSTRAP_GROUPS_PER_CLASS,
    min_informative_groups: int = MIN_INFORMATIVE_GROUPS,
    interval: str = INTERVAL_AUTO,
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
        min_groups_per_class: fewest groups of every class present.
        min_informative_groups: fewest informative groups of a built-in
            ``accuracy`` or ``auroc`` difference (discordant groups; groups
            whose placement differs).
        interval: ``"auto"`` (default; the expanded percentile interval for
            every difference), ``"expanded-percentile"`` or ``"percentile"``;
            the p-value follows the same method.

    Returns:
        :class:`BootstrapDifference`. Below either minimum (or with no valid
        resample) the interval, p-value and shares are NaN, only the point
        estimates are reported and ``no_interval_reason`` says why.

    Raises:
        ComparisonError: any input violating comparisons.md §3.1, or a bad setting.

    Example:
        >>> import numpy as np
        >>> y = np.repeat([0, 1], 20)
        >>> p = np.where(y[:, None] == [0, 1], 0.8, 0.2)
        >>> groups = np.arange(40)
        >>> cluster_bootstrap_difference(y, p, p, groups, metric="brier", min_groups=40).p_value
        1.0
        >>> same = cluster_bootstrap_difference(y, p, p, groups, metric="accuracy", min_groups=40)
        >>> same.no_interval_reason.split(";")[0]
        'too_few_informative_groups: 0 groups classified correctly by exactly one model'

    """
    name, function = resolve_metric(metric)
    draws = _prepare(
        y_true,
        {"prob_a": prob_a, "prob_b": prob_b},
        groups,
        n_resamples,
        confidence_level,
        seed,
        stratify,
        min_groups,
        min_groups_per_class,
        min_informative_groups,
        interval,
    )
    return difference_from_grouped(
        draws,
        function,
        name,
        n_resamples=int(n_resamples),
        confidence_level=float(confidence_level),
        seed=int(seed),
        stratified=bool(stratify),
        interval=interval,
        min_informative_groups=int(min_informative_groups),
    )
