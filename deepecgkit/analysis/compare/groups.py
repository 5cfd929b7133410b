"""Validation of sample-level predictions and their aggregation to groups.

The group bootstrap resamples groups (patients, recordings), because the
segments of one recording are not independent. To keep the point estimate
and the interval about one quantity, every metric is also *scored* on
groups: a group's probability vector is the arithmetic mean of its samples'
rows, its label the samples' common label, its prediction the argmax of the
mean (lowest index on ties) and its confidence the maximum of the mean. Each
patient then counts once however many segments it has.

Input conventions (checked by :func:`validate_predictions`): ``y_true`` integer-valued class
indices; ``prob`` of shape ``(n, K)``, ``K >= 2``, or ``(n,)`` read as
P(class 1); every probability finite and in [0, 1], every row summing to 1
within ``PROBABILITY_SUM_TOLERANCE`` (no renormalisation: a wrong softmax
axis must be fixed at the source); ``groups`` converted with
``np.asarray(groups).astype(str)``, so ``7`` and ``"7"`` are one group and
groups are ordered by their strings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.rundir.format import PROBABILITY_SUM_TOLERANCE

__all__ = ["GroupedData", "aggregate_groups", "by_label", "validate_predictions"]

_MAX_SHOWN = 5


@dataclass(frozen=True)
class GroupedData:
    """Predictions of one or more models aggregated to the same groups.

    Attributes:
        group_ids: ``(G,)`` sorted unique group ids (strings).
        labels: ``(G,)`` int64 label of each group.
        probs: one ``(G, K)`` float64 mean-probability matrix per model.
        n_samples: number of sample rows aggregated.
    """

    group_ids: np.ndarray
    labels: np.ndarray
    probs: tuple[np.ndarray, ...]
    n_samples: int

    @property
    def n_groups(self) -> int:
        """Number of groups ``G``."""
        return int(self.group_ids.size)


def _check_prob(name: str, prob: ArrayLike, n: int) -> np.ndarray:
    """Validate one probability input; return it as float64 ``(n, K)``."""
    try:
        matrix = np.asarray(prob, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ComparisonError(f"{name} must be numeric probabilities: {exc}") from exc
    if matrix.ndim == 1:
        matrix = np.column_stack([1.0 - matrix, matrix])
        binary = True
    else:
        binary = False
    if matrix.ndim != 2 or matrix.shape[1] < 2:
        raise ComparisonError(
            f"{name} must have shape (n, K) with K >= 2 or (n,), got {matrix.shape}"
        )
    if matrix.shape[0] != n:
        raise ComparisonError(f"{name} has {matrix.shape[0]} rows but y_true has {n} samples")
    # Two reductions for the common case: min and max inside [0, 1] imply every
    # value is finite (a NaN makes both NaN, which fails the comparison); the
    # diagnosis runs only on failure.
    if matrix.size and not (matrix.min() >= 0.0 and matrix.max() <= 1.0):
        finite = np.isfinite(matrix)
        if not finite.all():
            rows = np.flatnonzero(~finite.all(axis=1))[:_MAX_SHOWN].tolist()
            raise ComparisonError(f"{name} must be finite; non-finite values in rows {rows}")
        outside = (matrix < 0.0) | (matrix > 1.0)
        worst = float(matrix[outside][np.argmax(np.abs(matrix[outside] - 0.5))])
        raise ComparisonError(f"{name} must lie in [0, 1]; found {worst!r}")
    if not binary:
        deviation = np.abs(matrix.sum(axis=1) - 1.0)
        bad = deviation > PROBABILITY_SUM_TOLERANCE
        if bad.any():
            raise ComparisonError(
                f"{name} rows must sum to 1 within {PROBABILITY_SUM_TOLERANCE}; "
                f"{int(bad.sum())} rows do not (worst deviation {float(deviation.max()):.6g}); "
                "probabilities are not renormalised"
            )
    return matrix


def _check_labels(y_true: ArrayLike, n_classes: int) -> np.ndarray:
    """Validate integer-valued labels in ``[0, n_classes - 1]``; return int64 ``(n,)``."""
    y = np.asarray(y_true)
    if y.ndim != 1:
        raise ComparisonError(f"y_true must be 1-D, got shape {y.shape}")
    if y.dtype.kind == "b" or y.dtype.kind not in "iuf":
        raise ComparisonError(f"y_true must hold integer class indices, got dtype {y.dtype}")
    if y.dtype.kind == "f":
        integral = np.isfinite(y) & (y == np.round(y))
        if not integral.all():
            raise ComparisonError(
                f"y_true must be integer-valued, got {y[~integral][:_MAX_SHOWN].tolist()}"
            )
    labels = y.astype(np.int64)
    outside = (labels < 0) | (labels >= n_classes)
    if outside.any():
        raise ComparisonError(
            f"y_true must lie in [0, {n_classes - 1}] for {n_classes} classes, got "
            f"{sorted(set(labels[outside].tolist()))[:_MAX_SHOWN]}"
        )
    return labels


def validate_predictions(
    y_true: ArrayLike, probs: dict[str, ArrayLike], groups: ArrayLike
) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
    """Check sample-level inputs against the input conventions of this module's docstring.

    Args:
        y_true: ``(n,)`` class indices.
        probs: argument name -> probability input; all must share one shape.
        groups: ``(n,)`` group ids of any type.

    Returns:
        ``(labels int64 (n,), probability matrices (n, K) each, group ids (n,))``;
        the group ids are returned as given and compared as strings by
        :func:`aggregate_groups`.

    Raises:
        ComparisonError: for any violation, naming the argument.
    """
    y = np.asarray(y_true)
    if y.ndim != 1:
        raise ComparisonError(f"y_true must be 1-D, got shape {y.shape}")
    n = y.shape[0]
    if n < 1:
        raise ComparisonError("y_true is empty; at least one sample is needed")
    matrices = tuple(_check_prob(name, prob, n) for name, prob in probs.items())
    shapes = {m.shape for m in matrices}
    if len(shapes) > 1:
        raise ComparisonError(
            f"{' and '.join(probs)} must have the same shape, got "
            f"{' and '.join(str(m.shape) for m in matrices)}"
        )
    labels = _check_labels(y, matrices[0].shape[1])
    group_array = np.asarray(groups)
    if group_array.shape != (n,):
        raise ComparisonError(f"groups must have shape ({n},) like y_true, got {group_array.shape}")
    return labels, matrices, group_array


def _group_index(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique group ids as strings, and each sample's position among them.

    Equivalent to ``np.unique(groups.astype(str), return_inverse=True)``, but
    the values are factorised first (hashing, no string conversion per
    sample), and only the distinct values are converted to strings and
    sorted; distinct values with the same string (``7`` and ``"7"``) merge.
    """
    codes, distinct = pd.factorize(groups, use_na_sentinel=False)
    distinct_ids = np.asarray(distinct, dtype=object).astype(str)
    group_ids, positions = np.unique(distinct_ids, return_inverse=True)
    return group_ids, positions[codes]


def aggregate_groups(
    labels: np.ndarray, probs: tuple[np.ndarray, ...], groups: np.ndarray
) -> GroupedData:
    """Average each model's probability rows per group.

    Args:
        labels: validated ``(n,)`` int64 labels.
        probs: validated ``(n, K)`` matrices, one per model.
        groups: ``(n,)`` group ids of any type, compared as strings.

    Returns:
        The groups in ascending string order with their labels and mean
        probability rows. Summation is vectorised with one ``np.bincount``
        per class.

    Raises:
        ComparisonError: a group whose samples carry different labels.
    """
    group_ids, inverse = _group_index(groups)
    n_groups = group_ids.size
    counts = np.bincount(inverse, minlength=n_groups).astype(np.float64)
    group_labels = np.zeros(n_groups, dtype=np.int64)
    group_labels[inverse] = labels
    conflicting = group_labels[inverse] != labels
    if conflicting.any():
        bad = np.unique(group_ids[inverse[conflicting]])
        raise ComparisonError(
            f"every group must carry exactly one label; {bad.size} groups do not, e.g. "
            f"{bad[:_MAX_SHOWN].tolist()}"
        )
    means = []
    for matrix in probs:
        sums = np.column_stack(
            [np.bincount(inverse, weights=column, minlength=n_groups) for column in matrix.T]
        )
        means.append(sums / counts[:, None])
    return GroupedData(group_ids, group_labels, tuple(means), int(labels.size))


def by_label(grouped: GroupedData) -> GroupedData:
    """The same groups reordered by label (stable: group order within a label).

    Each stratum of the stratified bootstrap is then a contiguous block of
    columns, so the draws fill the count matrix by slices. Metrics are sums
    over groups and do not depend on the column order.
    """
    order = np.argsort(grouped.labels, kind="stable")
    return GroupedData(
        grouped.group_ids[order],
        grouped.labels[order],
        tuple(prob[order] for prob in grouped.probs),
        grouped.n_samples,
    )
