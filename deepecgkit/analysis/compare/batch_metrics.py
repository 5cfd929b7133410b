"""Batch metrics: one metric evaluated on many weighted resamples at once.

A *batch metric* is a callable ``metric(y_true, prob, weights) -> values``
with ``y_true`` of shape ``(G,)`` (class indices), ``prob`` of shape
``(G, K)`` and ``weights`` of shape ``(R, G)``. Row ``r`` of ``weights`` says
how many times each unit is counted in resample ``r``; the result has shape
``(R,)``. With integer weights, row ``r`` equals the ordinary metric on the
data obtained by repeating unit ``g`` exactly ``weights[r, g]`` times
(``np.repeat``): that identity is what the tests check against scikit-learn.

Why weights instead of resampled index arrays: a bootstrap resample of
groups is fully described by how often each group is drawn, so every
additive quantity (correct counts, per-class counts, Brier and NLL sums, ECE
bin sums) becomes one matrix product ``W @ X`` with per-unit columns ``X``
computed once, and rank metrics (AUROC, average precision) become weighted
cumulative sums over scores sorted once. No Python loop runs over resamples
or units; loops run over classes only.

Conventions: ``pred`` is the argmax of a probability row (lowest index on
ties), ``conf`` its maximum, ``correct = pred == y``. A value is NaN when the
metric is undefined on a resample (AUROC without a class that has both
positives and negatives, a recall of an absent class, a resample of total
weight zero). Directions (higher or lower is better) are the caller's
concern; see :data:`METRIC_DIRECTIONS`.

References: Guo et al. (2017), *On Calibration of Modern Neural Networks*
(ECE); Kull et al. (2019), *Beyond temperature scaling* (class-wise ECE);
Brier (1950) (multi-class Brier score, range [0, 2]).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Protocol

import numpy as np
from scipy import special

from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.analysis.constants import PROBABILITY_FLOOR, REPORT_PAIRED_METRICS
from deepecgkit.rundir.format import DEFAULT_CALIBRATION_BINS
from deepecgkit.rundir.metrics import direction as metric_direction

__all__ = [
    "INTERVAL_METRICS",
    "METRIC_DIRECTIONS",
    "BatchMetric",
    "batch_metric",
    "report_metric_names",
]

#: A prepared metric: maps a float64 weight block ``(R, G)`` to values ``(R,)``.
Evaluator = Callable[[np.ndarray], np.ndarray]

#: Metrics of the report that take intervals, in canonical order: the paired metrics,
#: then ``recall_<k>`` (one metric per class index, expanded by
#: :func:`report_metric_names`) and the diagnostics.
INTERVAL_METRICS = (
    *REPORT_PAIRED_METRICS,
    "recall_<k>",
    "mean_normalized_entropy",
    "class_coverage",
    "max_predicted_class_fraction",
)
#: Point-only flags that follow the interval metrics in the report.
COLLAPSE_FLAGS = ("exact_class_collapse", "near_class_collapse")

#: Which way is better for each report metric (``recall_<k>`` is higher-is-better), from
#: the metric registry.
METRIC_DIRECTIONS: dict[str, str] = {
    name: metric_direction(name) for name in (*INTERVAL_METRICS, *COLLAPSE_FLAGS) if "<" not in name
}

_RECALL_PATTERN = re.compile(r"recall_(\d+)")
_HALF = 0.5
#: A two-class problem is scored on its positive class by the class-wise ECE.
_TWO_CLASSES = 2


class BatchMetric(Protocol):
    """``metric(y_true (G,), prob (G, K), weights (R, G)) -> (R,)`` float64."""

    __name__: str

    def __call__(self, y_true: np.ndarray, prob: np.ndarray, weights: np.ndarray) -> np.ndarray: ...


def report_metric_names(n_classes: int) -> list[str]:
    """Canonical metric order of the report for ``n_classes`` classes.

    ``recall_<k>`` expands to ``recall_0 … recall_{K-1}``; the collapse flags
    come last.
    """
    names: list[str] = []
    for name in INTERVAL_METRICS:
        if name == "recall_<k>":
            names.extend(f"recall_{k}" for k in range(n_classes))
        else:
            names.append(name)
    return [*names, *COLLAPSE_FLAGS]


# --- shared per-unit quantities -------------------------------------------------------------


def _one_hot(index: np.ndarray, width: int) -> np.ndarray:
    """Float64 indicator matrix ``(len(index), width)`` of ``index``."""
    matrix = np.zeros((index.size, width), dtype=np.float64)
    matrix[np.arange(index.size), index] = 1.0
    return matrix


def _predictions(prob: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Argmax (lowest index on ties) and maximum of each probability row."""
    pred = np.argmax(prob, axis=1)
    return pred, prob[np.arange(prob.shape[0]), pred]


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator`` with NaN wherever the denominator is zero."""
    out = np.full(np.broadcast(numerator, denominator).shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def _mean_where(values: np.ndarray, include: np.ndarray) -> np.ndarray:
    """Row means of ``values`` over the entries ``include`` marks; NaN for an empty row."""
    total = np.where(include, values, 0.0).sum(axis=1)
    return _ratio(total, include.sum(axis=1).astype(np.float64))


def _with_units(*columns: np.ndarray) -> np.ndarray:
    """Stack per-unit columns and a final column of ones.

    ``W @`` the result gives every weighted sum and, in its last column, the
    number of units of each resample, in one matrix product (one pass over W).
    """
    n_units = columns[0].shape[0]
    blocks = [c[:, None] if c.ndim == 1 else c for c in columns]
    return np.hstack([*blocks, np.ones((n_units, 1))])


def _unit_mean(values: np.ndarray) -> Evaluator:
    """Evaluator of ``(W @ values) / (W @ 1)``: a per-unit average."""
    columns = _with_units(values)

    def evaluate(weights: np.ndarray) -> np.ndarray:
        sums = weights @ columns
        return _ratio(sums[:, 0], sums[:, 1])

    return evaluate


# --- the metrics (each returns an evaluator prepared once per data set) -----------------------


def _prepare_accuracy(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    pred, _ = _predictions(prob)
    return _unit_mean((pred == y).astype(np.float64))


def _prepare_balanced_accuracy(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    pred, _ = _predictions(prob)
    labels = _one_hot(y, prob.shape[1])
    columns = np.hstack([labels, labels * (pred == y)[:, None]])
    n_classes = prob.shape[1]

    def evaluate(weights: np.ndarray) -> np.ndarray:
        counts = weights @ columns
        support, hits = counts[:, :n_classes], counts[:, n_classes:]
        return _mean_where(_ratio(hits, support), support > 0)

    return evaluate


def _prepare_macro_f1(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    pred, _ = _predictions(prob)
    n_classes = prob.shape[1]
    labels = _one_hot(y, n_classes)
    columns = np.hstack([labels, _one_hot(pred, n_classes), labels * (pred == y)[:, None]])

    def evaluate(weights: np.ndarray) -> np.ndarray:
        counts = weights @ columns
        support = counts[:, :n_classes]
        predicted = counts[:, n_classes : 2 * n_classes]
        hits = counts[:, 2 * n_classes :]
        # 2TP + FP + FN = support + predicted; a class neither true nor predicted
        # is outside scikit-learn's default label set and so outside the mean.
        present = support + predicted
        return _mean_where(_ratio(2.0 * hits, present), present > 0)

    return evaluate


def _prepare_brier(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    residual = prob - _one_hot(y, prob.shape[1])
    return _unit_mean(np.sum(residual * residual, axis=1))


def _prepare_nll(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    true_class = prob[np.arange(y.size), y]
    return _unit_mean(-np.log(np.maximum(true_class, PROBABILITY_FLOOR)))


def _prepare_entropy(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    entropy = special.entr(prob).sum(axis=1) / np.log(prob.shape[1])
    return _unit_mean(entropy)


def calibration_bin(confidence: np.ndarray, bins: int) -> np.ndarray:
    """Equal-width bin of each confidence: ``min(floor(conf * bins), bins - 1)``.

    The last bin is closed at 1, so a confidence of exactly 1.0 falls in the
    top bin, never in an extra one.
    """
    return np.minimum(np.floor(confidence * bins).astype(np.int64), bins - 1)


def _prepare_ece(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    pred, conf = _predictions(prob)
    membership = _one_hot(calibration_bin(conf, bins), bins)
    columns = _with_units(membership * (pred == y)[:, None], membership * conf[:, None])

    def evaluate(weights: np.ndarray) -> np.ndarray:
        sums = weights @ columns
        # sum_b (n_b / N) |acc_b - conf_b| = sum_b |hits_b - conf_sum_b| / N; empty bins add 0.
        gaps = np.abs(sums[:, :bins] - sums[:, bins:-1]).sum(axis=1)
        return _ratio(gaps, sums[:, -1])

    return evaluate


def classwise_classes(n_classes: int) -> list[int]:
    """Classes scored by the class-wise ECE: class 1 of a two-class problem, else every class."""
    return [1] if n_classes == _TWO_CLASSES else list(range(n_classes))


def _prepare_classwise_ece(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    # Kull et al. (2019): per scored class k, equal-width bins of p_k (not folded at
    # 0.5), sum_b |#(y = k)_b - sum(p_k)_b| / N; the mean over scored classes. All
    # classes' bin sums are columns of one matrix product.
    classes = classwise_classes(prob.shape[1])
    blocks = []
    for k in classes:
        membership = _one_hot(calibration_bin(prob[:, k], bins), bins)
        blocks.extend([membership * (y == k)[:, None], membership * prob[:, k][:, None]])
    columns = _with_units(*blocks)
    n_scored = len(classes)

    def evaluate(weights: np.ndarray) -> np.ndarray:
        sums = weights @ columns
        per_class = sums[:, :-1].reshape(weights.shape[0], n_scored, 2, bins)
        gaps = np.abs(per_class[:, :, 0, :] - per_class[:, :, 1, :]).sum(axis=(1, 2))
        return _ratio(gaps, sums[:, -1] * n_scored)

    return evaluate


def _prepare_class_coverage(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    pred, _ = _predictions(prob)
    n_classes = prob.shape[1]
    columns = _with_units(_one_hot(pred, n_classes))

    def evaluate(weights: np.ndarray) -> np.ndarray:
        sums = weights @ columns
        covered = np.count_nonzero(sums[:, :-1] > 0, axis=1).astype(np.float64)
        return np.where(sums[:, -1] > 0, covered / n_classes, np.nan)

    return evaluate


def _prepare_max_fraction(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    pred, _ = _predictions(prob)
    columns = _with_units(_one_hot(pred, prob.shape[1]))

    def evaluate(weights: np.ndarray) -> np.ndarray:
        sums = weights @ columns
        return _ratio(sums[:, :-1].max(axis=1), sums[:, -1])

    return evaluate


def _cumulative(weights: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Cumulative weight of ``columns`` in the given order, with a leading zero column.

    Entry ``[r, j]`` is the total weight of the first ``j`` listed units in
    resample ``r``; shape ``(R, len(columns) + 1)``.
    """
    out = np.zeros((weights.shape[0], columns.size + 1))
    np.cumsum(weights[:, columns], axis=1, out=out[:, 1:])
    return out


def _one_vs_rest(
    y: np.ndarray, prob: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per class ``c`` in order: its score column and its positive and negative unit indices."""
    for c in range(prob.shape[1]):
        yield prob[:, c], np.flatnonzero(y == c), np.flatnonzero(y != c)


def _class_mean(
    per_class: list[tuple[np.ndarray, ...]],
    one_class: Callable[[np.ndarray, tuple[np.ndarray, ...]], np.ndarray],
) -> Evaluator:
    """Evaluator of the macro mean over classes of ``one_class(weights, per_class[c])``.

    ``one_class`` returns the ``(R,)`` values of one class; a class that is
    NaN in a resample (no positive or no negative weight) is left out of that
    resample's mean, which is NaN only when every class is.
    """

    def evaluate(weights: np.ndarray) -> np.ndarray:
        values = np.empty((weights.shape[0], len(per_class)))
        for c, prepared in enumerate(per_class):
            values[:, c] = one_class(weights, prepared)
        return _mean_where(values, ~np.isnan(values))

    return evaluate


def _prepare_auroc(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    # One-vs-rest Mann-Whitney AUROC per class, ties counted one half: each
    # positive scores the negative weight strictly below it plus half of the
    # negative weight tied with it. With the negatives sorted by score once,
    # both are columns of one cumulative sum (found by searchsorted), so a
    # resample costs a gather, a cumulative sum and a weighted sum.
    per_class = []
    for scores, positives, negatives in _one_vs_rest(y, prob):
        negatives = negatives[np.argsort(scores[negatives], kind="stable")]
        sorted_negative = scores[negatives]
        below = np.searchsorted(sorted_negative, scores[positives], side="left")
        at_or_below = np.searchsorted(sorted_negative, scores[positives], side="right")
        per_class.append((positives, negatives, below, at_or_below))

    def one_class(weights: np.ndarray, prepared: tuple[np.ndarray, ...]) -> np.ndarray:
        positives, negatives, below, at_or_below = prepared
        negative_weight = _cumulative(weights, negatives)
        positive_weight = weights[:, positives]
        ranked = negative_weight[:, below] + negative_weight[:, at_or_below]
        concordant = _HALF * np.einsum("rg,rg->r", positive_weight, ranked)
        total = positive_weight.sum(axis=1) * negative_weight[:, -1]
        return _ratio(concordant, total)

    return _class_mean(per_class, one_class)


def _prepare_macro_auprc(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
    # Step-wise average precision sum_t (R_t - R_{t-1}) P_t over distinct
    # thresholds in descending score order (scikit-learn's definition),
    # written per positive unit: AP = (1/P) sum_g w_g TP(s_g) / (TP(s_g) + FP(s_g)),
    # where TP/FP(s) is the positive/negative weight scoring >= s. Positives
    # and negatives are each sorted once in descending order; TP and FP are
    # columns of their cumulative sums.
    per_class = []
    for scores, positives, negatives in _one_vs_rest(y, prob):
        positives = positives[np.argsort(-scores[positives], kind="stable")]
        negatives = negatives[np.argsort(-scores[negatives], kind="stable")]
        ascending_pos = np.sort(scores[positives])
        ascending_neg = np.sort(scores[negatives])
        at_least_pos = positives.size - np.searchsorted(
            ascending_pos, scores[positives], side="left"
        )
        at_least_neg = negatives.size - np.searchsorted(
            ascending_neg, scores[positives], side="left"
        )
        per_class.append((positives, negatives, at_least_pos, at_least_neg))

    def one_class(weights: np.ndarray, prepared: tuple[np.ndarray, ...]) -> np.ndarray:
        positives, negatives, at_least_pos, at_least_neg = prepared
        true_pos_curve = _cumulative(weights, positives)
        true_pos = true_pos_curve[:, at_least_pos]
        retrieved = true_pos + _cumulative(weights, negatives)[:, at_least_neg]
        precision = np.zeros_like(true_pos)
        np.divide(true_pos, retrieved, out=precision, where=retrieved > 0)
        weighted = np.einsum("rg,rg->r", weights[:, positives], precision)
        return _ratio(weighted, true_pos_curve[:, -1])

    return _class_mean(per_class, one_class)


def _prepare_recall(k: int) -> Callable[[np.ndarray, np.ndarray, int], Evaluator]:
    def prepare(y: np.ndarray, prob: np.ndarray, bins: int) -> Evaluator:
        if k >= prob.shape[1]:
            raise ComparisonError(
                f"metric recall_{k} needs class index {k}, but prob has only "
                f"{prob.shape[1]} classes (use recall_0 … recall_{prob.shape[1] - 1})"
            )
        pred, _ = _predictions(prob)
        in_class = (y == k).astype(np.float64)
        columns = np.column_stack([in_class * (pred == y), in_class])

        def evaluate(weights: np.ndarray) -> np.ndarray:
            counts = weights @ columns
            return _ratio(counts[:, 0], counts[:, 1])

        return evaluate

    return prepare


_PREPARERS: dict[str, Callable[[np.ndarray, np.ndarray, int], Evaluator]] = {
    "balanced_accuracy": _prepare_balanced_accuracy,
    "accuracy": _prepare_accuracy,
    "macro_f1": _prepare_macro_f1,
    "auroc": _prepare_auroc,
    "macro_auprc": _prepare_macro_auprc,
    "brier": _prepare_brier,
    "nll": _prepare_nll,
    "ece": _prepare_ece,
    "classwise_ece": _prepare_classwise_ece,
    "mean_normalized_entropy": _prepare_entropy,
    "class_coverage": _prepare_class_coverage,
    "max_predicted_class_fraction": _prepare_max_fraction,
}


def _check_arrays(y_true: np.ndarray, prob: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shape checks shared by every built-in metric; returns int64 labels, float64 prob."""
    prob = np.asarray(prob, dtype=np.float64)
    y = np.asarray(y_true)
    if prob.ndim != 2 or prob.shape[1] < 2:
        raise ComparisonError(f"prob must have shape (G, K) with K >= 2, got {prob.shape}")
    if y.shape != (prob.shape[0],):
        raise ComparisonError(
            f"y_true must have shape ({prob.shape[0]},) to match prob, got {y.shape}"
        )
    if y.size and (y.dtype.kind not in "iuf" or np.any(y != np.round(y))):
        raise ComparisonError("y_true must hold integer class indices")
    labels = y.astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= prob.shape[1]):
        raise ComparisonError(
            f"y_true must lie in [0, {prob.shape[1] - 1}], got values "
            f"{labels.min()} … {labels.max()}"
        )
    return labels, prob


def _check_weights(weights: np.ndarray, n_units: int) -> np.ndarray:
    """Weights as a float64 ``(R, G)`` block of non-negative counts."""
    block = np.asarray(weights, dtype=np.float64)
    if block.ndim != 2 or block.shape[1] != n_units:
        raise ComparisonError(f"weights must have shape (R, {n_units}), got {block.shape}")
    if block.size and not (np.all(np.isfinite(block)) and block.min() >= 0):
        raise ComparisonError("weights must be finite non-negative counts")
    return block


class BuiltinMetric:
    """A named built-in batch metric.

    Besides the batch-metric call it offers :meth:`prepare`, which does the
    per-unit work (argmax, one-hot columns, the per-class score sorts) once so
    the bootstrap can evaluate many weight blocks without repeating it.
    """

    def __init__(self, name: str, bins: int, preparer: Callable[..., Evaluator]) -> None:
        self.__name__ = name
        self.bins = bins
        self._preparer = preparer

    def __repr__(self) -> str:
        return f"batch_metric({self.__name__!r}, bins={self.bins})"

    def prepare(self, y_true: np.ndarray, prob: np.ndarray) -> Evaluator:
        """Validate ``(y_true, prob)`` and return an evaluator of weight blocks.

        The evaluator expects float64 ``(R, G)`` counts and does not re-check
        them: the bootstrap hands it its own count matrix, chunk by chunk.
        """
        labels, matrix = _check_arrays(y_true, prob)
        return self._preparer(labels, matrix, self.bins)

    def __call__(self, y_true: np.ndarray, prob: np.ndarray, weights: np.ndarray) -> np.ndarray:
        labels, matrix = _check_arrays(y_true, prob)
        block = _check_weights(weights, labels.size)
        return self._preparer(labels, matrix, self.bins)(block)


def batch_metric(name: str, *, bins: int = DEFAULT_CALIBRATION_BINS) -> BatchMetric:
    """Return the built-in batch metric called ``name``.

    Args:
        name: one of ``accuracy``, ``balanced_accuracy``, ``macro_f1``,
            ``auroc``, ``macro_auprc``, ``brier``, ``nll``, ``ece``,
            ``classwise_ece``, ``recall_<k>`` (class index ``k``), ``mean_normalized_entropy``,
            ``class_coverage``, ``max_predicted_class_fraction``.
        bins: equal-width confidence bins on [0, 1], used by ``ece`` and ``classwise_ece`` only
            (default ``DEFAULT_CALIBRATION_BINS``; the report passes its own).

    Returns:
        A callable ``metric(y_true (G,), prob (G, K), weights (R, G)) -> (R,)``
        whose ``__name__`` is ``name``. ``recall_<k>`` with ``k >= K`` raises
        :class:`ComparisonError` when called.

    Raises:
        ComparisonError: an unknown name, or ``bins`` not an integer >= 1.

    Example:
        >>> import numpy as np
        >>> acc = batch_metric("accuracy")
        >>> acc(np.array([0, 1]), np.array([[0.9, 0.1], [0.6, 0.4]]), np.array([[1, 1], [2, 0]]))
        array([0.5, 1. ])
    """
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ComparisonError(f"bins must be an integer >= 1, got {bins!r}")
    if not isinstance(name, str):
        raise ComparisonError(f"metric name must be a string, got {type(name).__name__}")
    recall = _RECALL_PATTERN.fullmatch(name)
    if recall is not None:
        return BuiltinMetric(name, int(bins), _prepare_recall(int(recall.group(1))))
    if name not in _PREPARERS:
        known = ", ".join([*(n for n in INTERVAL_METRICS if n in _PREPARERS), "recall_<k>"])
        raise ComparisonError(f"unknown metric {name!r} (choose from {known})")
    return BuiltinMetric(name, int(bins), _PREPARERS[name])
