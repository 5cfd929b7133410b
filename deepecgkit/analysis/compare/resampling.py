"""Bootstrap draws as count matrices, and chunked evaluation of batch metrics.

A resample of ``G`` groups drawn with replacement is fully described by how
often each group was drawn, so all ``R`` resamples form one count matrix
``W`` of shape ``(R, G)``; batch metrics turn it into ``R`` values with
matrix products (see :mod:`~deepecgkit.analysis.compare.batch_metrics`).

The draw order is part of the contract (comparisons.md §3.4): with
``rng = np.random.default_rng(seed)``, a stratified bootstrap makes exactly
one call ``rng.integers(0, n_c, size=(R, n_c))`` per stratum (the distinct
group labels in ascending order, a stratum's groups in group order); an
unstratified one makes one call ``rng.integers(0, G, size=(R, G))``. Results
therefore depend only on the seed, ``R`` and the group structure, never on
input row order, on chunking, or on what else is computed.

Intervals: the percentile interval reads the ``alpha/2`` and ``1 - alpha/2``
quantiles of the bootstrap values. At few groups it is too narrow: the
bootstrap variance of a mean of ``n`` units is ``(n - 1) / n`` times the
plug-in one, and a normal quantile stands where a t quantile belongs. The
expanded percentile interval (Hesterberg 2015, "What Teachers Should Know
About the Bootstrap", The American Statistician 69(4):371-386, section 4.3)
keeps the percentile interval's shape and range-respecting ends but reads
the quantiles at ``alpha'/2`` and ``1 - alpha'/2`` with
``Phi^-1(1 - alpha'/2) = sqrt(n / (n - 1)) * t_{n-1}^-1(1 - alpha/2)``. One run's
AUROC uses BCa (Efron 1987) read at the same ``alpha'``
(:func:`expanded_bca_interval`): its distribution is skewed with a rare class
or near the ceiling, which the percentile interval follows too little. The
coverage of all of them is measured in ``benchmarks/bench_interval_coverage.py``
(docs/benchmarks.md).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np

from deepecgkit.analysis.compare.batch_metrics import BatchMetric, BuiltinMetric, batch_metric
from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.analysis.constants import (
    INTERVAL_EXPANDED_PERCENTILE,
    INTERVAL_METHODS,
    INTERVAL_PERCENTILE,
)
from deepecgkit.analysis.distributions import (
    normal_cdf,
    normal_isf,
    normal_ppf,
    normal_sf,
    t_isf,
    t_sf,
)

__all__ = [
    "MAX_BLOCK_ELEMENTS",
    "bootstrap_interval",
    "check_bootstrap_settings",
    "check_interval_method",
    "draw_counts",
    "evaluate_metric",
    "expanded_bca_interval",
    "expanded_p_value",
    "expanded_tail_probability",
    "percentile_interval",
    "resolve_metric",
]

#: Largest number of elements of one weight block handed to a metric (chosen:
#: 2**24 float64 values, 128 MiB). Chunking never changes a result.
MAX_BLOCK_ELEMENTS = 2**24
#: Bins counted by one ``np.bincount`` while turning draws into counts (cache-sized).
_COUNT_BLOCK_ELEMENTS = 2**16
#: Fewest units with a t quantile (one degree of freedom) for the expanded interval.
_MIN_EXPANSION_UNITS = 2


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_bootstrap_settings(
    *, n_resamples: object, confidence_level: object, seed: object, min_groups: object
) -> None:
    """Raise :class:`ComparisonError` for a setting outside its allowed range."""
    if not _is_int(n_resamples) or int(n_resamples) < 1:  # type: ignore[call-overload]
        raise ComparisonError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    if (
        isinstance(confidence_level, bool)
        or not isinstance(confidence_level, numbers.Real)
        or not 0.0 < float(confidence_level) < 1.0
    ):
        raise ComparisonError(
            f"confidence_level must be a number strictly between 0 and 1, got {confidence_level!r}"
        )
    if not _is_int(seed) or int(seed) < 0:  # type: ignore[call-overload]
        raise ComparisonError(f"seed must be a non-negative integer, got {seed!r}")
    if not _is_int(min_groups) or int(min_groups) < 1:  # type: ignore[call-overload]
        raise ComparisonError(f"min_groups must be an integer >= 1, got {min_groups!r}")


def check_interval_method(interval: object) -> str:
    """The interval method, one of ``INTERVAL_METHODS``; :class:`ComparisonError` otherwise."""
    if not isinstance(interval, str) or interval not in INTERVAL_METHODS:
        raise ComparisonError(
            f"interval must be one of {', '.join(INTERVAL_METHODS)}, got {interval!r}"
        )
    return interval


def resolve_metric(metric: str | BatchMetric) -> tuple[str, BatchMetric]:
    """Return ``(name, callable)``; a string names a built-in metric with default bins."""
    if isinstance(metric, str):
        return metric, batch_metric(metric)
    if callable(metric):
        return str(getattr(metric, "__name__", type(metric).__name__)), metric
    raise ComparisonError(
        f"metric must be a metric name or a batch-metric callable, got {type(metric).__name__}"
    )


def _fill_counts(out: np.ndarray, draws: np.ndarray) -> None:
    """Write the counts of each row of ``draws`` (values in ``[0, size)``) into ``out``.

    Row ``r``'s draws are shifted into bins ``r*size … r*size + size - 1``, so
    one ``np.bincount`` counts a whole block of resamples at once. Blocks of
    rows keep the bincount output small enough to stay in cache, which is
    faster than one bincount over all ``R * size`` bins; the counts are the same.
    """
    n_rows, size = draws.shape
    rows = max(1, _COUNT_BLOCK_ELEMENTS // max(size, 1))
    offsets = (np.arange(rows, dtype=draws.dtype) * size)[:, None]
    for start in range(0, n_rows, rows):
        block = draws[start : start + rows]
        n = block.shape[0]
        flat = (block + offsets[:n]).ravel()
        out[start : start + n] = np.bincount(flat, minlength=n * size).reshape(n, size)


def draw_counts(labels: np.ndarray, *, n_resamples: int, seed: int, stratify: bool) -> np.ndarray:
    """Draw ``n_resamples`` bootstrap resamples of groups as a count matrix.

    Args:
        labels: ``(G,)`` int64 label of each group, groups in group order.
        n_resamples: number of resamples ``R``.
        seed: seed of the generator created here.
        stratify: keep each label's group count fixed in every resample.

    Returns:
        Float64 ``(R, G)`` matrix; entry ``[r, g]`` is how many times group
        ``g`` is drawn in resample ``r``. Each row sums to ``G``; stratified,
        each label's columns sum to that label's group count. A stratum whose
        groups are contiguous (labels sorted) is filled by a slice, otherwise
        by fancy indexing; the numbers are the same.
    """
    rng = np.random.default_rng(seed)
    n_groups = labels.size
    counts = np.empty((n_resamples, n_groups), dtype=np.float64)
    if not stratify:
        _fill_counts(counts, rng.integers(0, n_groups, size=(n_resamples, n_groups)))
        return counts
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        draws = rng.integers(0, members.size, size=(n_resamples, members.size))
        first, last = members[0], members[-1]
        if last - first + 1 == members.size:
            _fill_counts(counts[:, first : last + 1], draws)
        else:
            block = np.empty((n_resamples, members.size))
            _fill_counts(block, draws)
            counts[:, members] = block
    return counts


def _evaluator(
    metric: BatchMetric, labels: np.ndarray, prob: np.ndarray
) -> Callable[[np.ndarray], np.ndarray]:
    """Prepare a built-in metric once; wrap any other callable as it is."""
    if isinstance(metric, BuiltinMetric):
        return metric.prepare(labels, prob)

    def call(weights: np.ndarray) -> np.ndarray:
        return metric(labels, prob, weights)

    return call


def evaluate_metric(
    metric: BatchMetric,
    labels: np.ndarray,
    prob: np.ndarray,
    *,
    weights: np.ndarray,
    max_elements: int | None = None,
) -> np.ndarray:
    """Evaluate ``metric`` on every row of ``weights``, in chunks of rows.

    Args:
        metric: a batch metric.
        labels: ``(G,)`` group labels.
        prob: ``(G, K)`` group probabilities.
        weights: ``(R, G)`` counts.
        max_elements: largest block ``rows * G`` per call (default
            :data:`MAX_BLOCK_ELEMENTS`, read at call time); at least one row.

    Returns:
        Float64 ``(R,)`` values, NaN where the metric is undefined.

    Raises:
        ComparisonError: the metric returns something other than one value per row.
    """
    limit = MAX_BLOCK_ELEMENTS if max_elements is None else max_elements
    n_rows, n_groups = weights.shape
    rows = max(1, limit // max(n_groups, 1))
    evaluate = _evaluator(metric, labels, prob)
    pieces = []
    for start in range(0, n_rows, rows):
        block = weights[start : start + rows]
        values = np.asarray(evaluate(block), dtype=np.float64)
        if values.shape != (block.shape[0],):
            name = getattr(metric, "__name__", repr(metric))
            raise ComparisonError(
                f"metric {name} returned shape {values.shape} for {block.shape[0]} weight rows; "
                "a batch metric must return one value per row"
            )
        pieces.append(values)
    return np.concatenate(pieces) if pieces else np.empty(0)


def percentile_interval(values: np.ndarray, confidence_level: float) -> tuple[float, float]:
    """Percentile interval of finite ``values`` (numpy's linear interpolation); NaN if empty."""
    if values.size == 0:
        return math.nan, math.nan
    alpha = 1.0 - confidence_level
    low, high = np.quantile(values, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


def expanded_tail_probability(confidence_level: float, n_units: int) -> float:
    """Two-sided tail probability ``alpha'`` of the expanded percentile interval.

    ``alpha' = 2 * (1 - Phi(sqrt(n / (n - 1)) * t_{n-1}^-1(1 - alpha / 2)))`` with
    ``alpha = 1 - confidence_level`` (Hesterberg 2015). ``alpha' < alpha``
    always, and ``alpha' -> alpha`` as ``n`` grows. Fewer than two units give
    ``alpha`` back (no t quantile exists; such a bootstrap has no spread).

    Example:
        >>> round(expanded_tail_probability(0.95, 15), 4)
        0.0264
    """
    alpha = 1.0 - float(confidence_level)
    if n_units < _MIN_EXPANSION_UNITS:
        return alpha
    factor = math.sqrt(n_units / (n_units - 1.0))
    return float(2.0 * normal_sf(factor * t_isf(alpha / 2.0, n_units - 1)))


def expanded_p_value(p_percentile: float, n_units: int) -> float:
    """The two-sided p-value that matches the expanded interval, from the percentile one.

    The percentile test rejects at level ``alpha'`` when ``p_percentile <=
    alpha'``; inverting :func:`expanded_tail_probability` gives the level
    ``alpha`` at which the expanded interval just excludes the null:
    ``p = 2 * T_{n-1}(-Phi^-1(1 - p_percentile / 2) / sqrt(n / (n - 1)))``.
    So the expanded interval at ``confidence_level`` excludes the null value
    exactly when ``p <= 1 - confidence_level`` (up to the quantile
    interpolation), and ``p >= p_percentile``. NaN stays NaN; fewer than two
    units return ``p_percentile``.
    """
    if not math.isfinite(p_percentile) or n_units < _MIN_EXPANSION_UNITS:
        return p_percentile
    factor = math.sqrt(n_units / (n_units - 1.0))
    statistic = normal_isf(p_percentile / 2.0) / factor
    return float(min(1.0, 2.0 * t_sf(statistic, n_units - 1)))


def expanded_bca_interval(
    values: np.ndarray,
    estimate: float,
    influence: np.ndarray,
    *,
    confidence_level: float,
    n_units: int,
) -> tuple[float, float]:
    """BCa interval of bootstrap ``values`` read at the expanded interval's ``alpha'``.

    The BCa interval (Efron 1987, "Better Bootstrap Confidence Intervals",
    *JASA* 82:171-185; Efron & Tibshirani 1993, chapter 14) reads the
    bootstrap quantiles at ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))`` for
    ``z = Phi^-1(alpha/2)`` and ``Phi^-1(1 - alpha/2)``, with the median bias
    ``z0 = Phi^-1(share of values below the estimate, ties one half)`` and the
    acceleration ``a = sum(l**3) / (6 sum(l**2)**1.5)`` from the influence
    values ``l`` (stratum-centred, see
    :func:`~deepecgkit.analysis.compare.information.auroc_influence`). It
    corrects the percentile interval for bias and skewness; here ``alpha`` is
    replaced by the expanded interval's ``alpha'``
    (:func:`expanded_tail_probability`), which corrects, as for the percentile
    interval, the narrowness at few units that BCa shares with it.

    Returns:
        ``(low, high)``; NaN when ``values`` is empty, when every value lies
        on one side of the estimate (``z0`` infinite) or when a level is
        undefined (``1 - a (z0 + z) <= 0``).
    """
    if values.size == 0:
        return math.nan, math.nan
    below = np.count_nonzero(values < estimate) + 0.5 * np.count_nonzero(values == estimate)
    share = below / values.size
    if not 0.0 < share < 1.0:
        return math.nan, math.nan
    bias = float(normal_ppf(share))
    spread = float(np.sum(influence**2))
    acceleration = float(np.sum(influence**3)) / (6.0 * spread**1.5) if spread > 0 else 0.0
    tail = expanded_tail_probability(confidence_level, n_units)
    shifted = bias + normal_ppf(np.array([tail / 2.0, 1.0 - tail / 2.0]))
    denominator = 1.0 - acceleration * shifted
    if np.any(denominator <= 0.0):
        return math.nan, math.nan
    levels = normal_cdf(bias + shifted / denominator)
    low, high = np.quantile(values, levels)
    return float(low), float(high)


def bootstrap_interval(
    values: np.ndarray, confidence_level: float, *, method: str, n_units: int
) -> tuple[float, float]:
    """Interval of finite bootstrap ``values`` by ``method``; NaN when ``values`` is empty.

    Args:
        values: the valid bootstrap values.
        confidence_level: nominal two-sided coverage.
        method: ``INTERVAL_PERCENTILE`` or ``INTERVAL_EXPANDED_PERCENTILE``.
        n_units: the ``n`` of the expansion (see
            :func:`deepecgkit.analysis.compare.bootstrap.expansion_units`).
    """
    if method == INTERVAL_PERCENTILE:
        return percentile_interval(values, confidence_level)
    if method != INTERVAL_EXPANDED_PERCENTILE:
        raise ComparisonError(
            f"bootstrap_interval computes {INTERVAL_PERCENTILE} or "
            f"{INTERVAL_EXPANDED_PERCENTILE} intervals, got {method!r}"
        )
    tail = expanded_tail_probability(confidence_level, n_units)
    return percentile_interval(values, 1.0 - tail)
