"""Vectorised bootstrap of the evaluator's metrics.

A Python loop over resamples that calls scikit-learn costs a sort and
several passes over n samples per resample and metric, which at 1,000
resamples of 100,000 samples takes minutes. Here every resample of a chunk
is handled at once:

* hard-label metrics (accuracy, balanced accuracy, precision, recall, F1,
  MCC) come from per-resample confusion counts, one ``np.bincount`` over the
  drawn cells of the whole chunk;
* AUC is the Mann–Whitney pair count with ties counted one half, computed
  in integers from resample multiplicities (how often each sample was
  drawn): the samples are sorted by score once, and each resample needs one
  running total of the rarer class, never a sort;
* multi-label counts are matrix products of the multiplicities with 0/1
  indicator columns, and regression sums are weighted by them.

The value of every metric and resample equals, to 1e-12, scikit-learn's on
``(predictions[idx_b], targets[idx_b], scores[idx_b])`` with the concretely
resolved averaging mode (the evaluator's tests check this against a
per-resample loop). A resample on which scikit-learn refuses or returns NaN
(a class missing, an invalid ``pos_label``) is NaN here too.

Group (cluster) resampling: segments of one patient are not independent, and
resampling them one by one makes an interval far too narrow (with 50
segments per patient a nominal 95% interval covers about 0.4 of the time;
``benchmarks/bench_interval_coverage.py``). With groups, a resample draws
``G`` groups with replacement (``np.random.choice(G, size=(B, G))`` from the
same legacy generator, groups in the order of ``np.unique`` of their ids as
strings) and takes every sample of each drawn group; ``idx_b`` is then the
concatenation of the drawn groups' samples, of varying length. Such a
resample is described by per-sample multiplicities (how often each sample's
group was drawn), so every metric runs on the weights path: confusion counts
as sums of multiplicities over the samples of each cell, AUC as before,
regression sums weighted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from deepecgkit.evaluation.constants import (
    AUC_ALIAS,
    AUC_METRIC,
    AVERAGE_BINARY,
    AVERAGE_MICRO,
    AVERAGE_WEIGHTED,
    MULTICLASS_THRESHOLD,
)
from deepecgkit.evaluation.metrics import (
    REGRESSION_ALIASES,
    ClassificationInputs,
    prepare_classification_inputs,
    prepare_regression_inputs,
)

#: Index entries drawn per chunk (rows × n); with a handful of 8-byte
#: intermediates of that size, a chunk stays within a few hundred MB.
BOOTSTRAP_CHUNK_ELEMENTS = 1 << 22
#: Label value scikit-learn treats as positive for binary averaging.
POSITIVE_LABEL = 1
#: Label sets for which scikit-learn infers the positive class of a binary AUC.
_BINARY_AUC_LABEL_SETS = ({0, 1}, {-1, 1})
#: R² needs a variance, so at least two samples (scikit-learn returns NaN below).
MIN_R2_SAMPLES = 2
_NAN = float("nan")


def chunk_rows(n_samples: int, chunk_elements: int = BOOTSTRAP_CHUNK_ELEMENTS) -> int:
    """Resamples per chunk so that a chunk holds about ``chunk_elements`` indices."""
    return max(1, chunk_elements // max(1, n_samples))


def draw_index_chunks(n_samples: int, *, n_bootstrap: int, rows: int) -> Iterator[np.ndarray]:
    """Draw the ``(n_bootstrap, n_samples)`` index matrix from numpy's global generator.

    The legacy generator fills ``np.random.choice(n, size=(B, n))`` in row-major
    order, so drawing consecutive row blocks yields exactly the same matrix as
    one call (and as B successive ``np.random.choice(n, n)`` calls), while
    memory stays bounded by one block.
    """
    done = 0
    while done < n_bootstrap:
        size = min(rows, n_bootstrap - done)
        # The spec fixes numpy's global legacy generator so np.random.seed repeats intervals.
        yield np.random.choice(n_samples, size=(size, n_samples), replace=True)  # noqa: NPY002
        done += size


def group_positions(groups: np.ndarray) -> tuple[np.ndarray, int]:
    """Each sample's group position (groups sorted as strings, like ``np.unique``) and ``G``."""
    _, positions = np.unique(np.asarray(groups).astype(str), return_inverse=True)
    positions = positions.reshape(-1).astype(np.int64)
    return positions, int(positions.max()) + 1 if positions.size else 0


def draw_group_weight_chunks(
    positions: np.ndarray, *, n_groups: int, n_bootstrap: int, rows: int
) -> Iterator[np.ndarray]:
    """Per-sample multiplicities ``(n, rows)`` of group resamples, in row blocks.

    Each block draws ``np.random.choice(n_groups, size=(rows, n_groups))`` from
    numpy's global legacy generator (consecutive blocks give the stream of one
    ``(n_bootstrap, n_groups)`` call), counts how often each group was drawn,
    and gives every sample its group's count. No loop runs over resamples.
    """
    done = 0
    while done < n_bootstrap:
        size = min(rows, n_bootstrap - done)
        # The evaluator's documented generator: np.random.seed repeats intervals.
        drawn = np.random.choice(n_groups, size=(size, n_groups), replace=True)  # noqa: NPY002
        yield _multiplicities(drawn, n_groups)[positions]
        done += size


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Element-wise ratio, 0 where the denominator is 0 (``zero_division=0``)."""
    out = np.zeros(np.broadcast_shapes(numerator.shape, denominator.shape), dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def _multiplicities(idx: np.ndarray, n_samples: int) -> np.ndarray:
    """How often each sample was drawn in each resample, ``(n, rows)`` int64.

    Samples run along axis 0 so that the running totals over sorted samples
    (the AUC's inner step) add contiguous rows of one value per resample,
    which vectorises far better than a running sum along each resample.
    Integers keep every count, running total and pair count exact.
    """
    rows = idx.shape[0]
    cells = idx * rows + np.arange(rows, dtype=np.int64)[:, None]
    counts = np.bincount(cells.ravel(), minlength=n_samples * rows)
    return counts.reshape(n_samples, rows)


# --- precision / recall / F1 from per-class counts ---------------------------------------


def _prf(
    tp: np.ndarray, true_sum: np.ndarray, pred_sum: np.ndarray, present: np.ndarray, mode: str
) -> dict[str, np.ndarray]:
    """Averaged precision, recall and F1 over the ``present`` labels of each resample.

    All arrays are ``(rows, L)``; ``mode`` is micro, macro or weighted.
    """
    mask = present.astype(np.float64)
    if mode == AVERAGE_MICRO:
        tp_total = (tp * mask).sum(axis=1)
        true_total = (true_sum * mask).sum(axis=1)
        pred_total = (pred_sum * mask).sum(axis=1)
        return {
            "precision": _divide(tp_total, pred_total),
            "recall": _divide(tp_total, true_total),
            "f1": _divide(2.0 * tp_total, true_total + pred_total),
        }
    per_class = {
        "precision": _divide(tp, pred_sum),
        "recall": _divide(tp, true_sum),
        "f1": _divide(2.0 * tp, true_sum + pred_sum),
    }
    if mode == AVERAGE_WEIGHTED:
        weights = true_sum * mask
        total = weights.sum(axis=1, keepdims=True)
        # scikit-learn falls back to a plain mean when every weight is zero.
        weights = np.where(total > 0, weights, mask)
    else:
        weights = mask
    norm = weights.sum(axis=1)
    return {name: (values * weights).sum(axis=1) / norm for name, values in per_class.items()}


# --- single-label hard-label metrics -----------------------------------------------------


class _SingleLabelCounts:
    """Per-resample confusion matrices of one single-label problem."""

    def __init__(self, inputs: ClassificationInputs) -> None:
        self.values = np.unique(np.concatenate([inputs.y_true, inputs.labels]))
        self.n_values = self.values.shape[0]
        true_index = np.searchsorted(self.values, inputs.y_true)
        pred_index = np.searchsorted(self.values, inputs.labels)
        self.cells = true_index * self.n_values + pred_index
        hits = np.flatnonzero(self.values == POSITIVE_LABEL)
        self.positive = int(hits[0]) if hits.size else None

        self.cell_order = np.argsort(self.cells, kind="stable")
        sorted_cells = self.cells[self.cell_order]
        self.cell_starts = np.flatnonzero(np.r_[True, sorted_cells[1:] != sorted_cells[:-1]])
        self.present_cells = sorted_cells[self.cell_starts]

    def confusion(self, idx: np.ndarray) -> np.ndarray:
        """``(rows, L, L)`` counts, rows true and columns predicted."""
        rows = idx.shape[0]
        size = self.n_values * self.n_values
        offsets = (np.arange(rows, dtype=np.int64) * size)[:, None]
        counts = np.bincount((self.cells[idx] + offsets).ravel(), minlength=rows * size)
        return counts.reshape(rows, self.n_values, self.n_values).astype(np.float64)

    def weighted_confusion(self, weights: np.ndarray) -> np.ndarray:
        """``(rows, L, L)`` counts from ``(n, rows)`` multiplicities (samples sorted by cell)."""
        rows = weights.shape[1]
        size = self.n_values * self.n_values
        out = np.zeros((size, rows), dtype=np.float64)
        if self.present_cells.size:
            out[self.present_cells] = np.add.reduceat(
                weights[self.cell_order], self.cell_starts, axis=0
            )
        return out.T.reshape(rows, self.n_values, self.n_values)


def _single_label_metrics(
    counts: _SingleLabelCounts, cm: np.ndarray, names: Sequence[str], mode: str
) -> dict[str, np.ndarray]:
    """Hard-label metrics of every resample of a chunk from its ``(rows, L, L)`` confusion counts.

    scikit-learn's formulas on counts.
    """
    n = cm.sum(axis=(1, 2))
    tp = np.diagonal(cm, axis1=1, axis2=2)
    true_sum = cm.sum(axis=2)
    pred_sum = cm.sum(axis=1)
    present = (true_sum + pred_sum) > 0
    out: dict[str, np.ndarray] = {}
    accuracy = tp.sum(axis=1) / n
    for name in ("accuracy", "label_accuracy", "exact_match_accuracy"):
        if name in names:
            out[name] = accuracy
    if "balanced_accuracy" in names:
        in_true = true_sum > 0
        out["balanced_accuracy"] = (_divide(tp, true_sum) * in_true).sum(axis=1) / in_true.sum(
            axis=1
        )
    if "mcc" in names:
        cov_tp = tp.sum(axis=1) * n - np.einsum("ij,ij->i", true_sum, pred_sum)
        cov_pp = n**2 - np.einsum("ij,ij->i", pred_sum, pred_sum)
        cov_tt = n**2 - np.einsum("ij,ij->i", true_sum, true_sum)
        product = cov_pp * cov_tt
        safe = np.where(product == 0, 1.0, product)
        out["mcc"] = np.where(product == 0, 0.0, cov_tp / np.sqrt(safe))
    wanted = [name for name in ("precision", "recall", "f1") if name in names]
    if wanted:
        prf = _single_label_prf(counts, tp, true_sum, pred_sum, present, mode)
        out.update({name: prf[name] for name in wanted})
    return out


def _single_label_prf(
    counts: _SingleLabelCounts,
    tp: np.ndarray,
    true_sum: np.ndarray,
    pred_sum: np.ndarray,
    present: np.ndarray,
    mode: str,
) -> dict[str, np.ndarray]:
    """Precision, recall and F1; ``binary`` follows scikit-learn's ``pos_label=1`` checks."""
    if mode != AVERAGE_BINARY:
        return _prf(tp, true_sum, pred_sum, present, mode)
    n_present = present.sum(axis=1)
    rows = tp.shape[0]
    if counts.positive is None:
        # pos_label 1 never occurs: scikit-learn refuses when two labels are
        # present, and scores the empty positive class as 0 otherwise.
        value = np.where(n_present >= MULTICLASS_THRESHOLD, _NAN, 0.0)
        return {"precision": value, "recall": value.copy(), "f1": value.copy()}
    k = counts.positive
    invalid = (n_present > MULTICLASS_THRESHOLD) | (
        ~present[:, k] & (n_present >= MULTICLASS_THRESHOLD)
    )
    column = np.arange(rows)
    tp_k, true_k, pred_k = tp[column, k], true_sum[column, k], pred_sum[column, k]
    values = {
        "precision": _divide(tp_k, pred_k),
        "recall": _divide(tp_k, true_k),
        "f1": _divide(2.0 * tp_k, true_k + pred_k),
    }
    return {name: np.where(invalid, _NAN, value) for name, value in values.items()}


# --- multi-label hard-label metrics ------------------------------------------------------


class _MultiLabelIndicators:
    """Per-sample indicator columns whose weighted sums give every multi-label count."""

    def __init__(self, inputs: ClassificationInputs) -> None:
        y, pred = inputs.y_true.astype(np.float64), inputs.labels.astype(np.float64)
        self.n_labels = y.shape[1]
        match = (inputs.y_true == inputs.labels).astype(np.float64)
        self.columns = np.column_stack(
            [y * pred, y, pred, match.sum(axis=1), np.all(match == 1.0, axis=1)]
        )


def _multilabel_metrics(
    indicators: _MultiLabelIndicators, weights: np.ndarray, names: Sequence[str], mode: str
) -> dict[str, np.ndarray]:
    """Multi-label metrics of every resample from ``(n, rows)`` multiplicities."""
    k = indicators.n_labels
    sums = (indicators.columns.T @ weights.astype(np.float64)).T
    tp, true_sum, pred_sum = sums[:, :k], sums[:, k : 2 * k], sums[:, 2 * k : 3 * k]
    n = weights.sum(axis=0)
    rows = weights.shape[1]
    out: dict[str, np.ndarray] = {}
    for name in ("accuracy", "label_accuracy"):
        if name in names:
            out[name] = sums[:, 3 * k] / (n * k)
    if "exact_match_accuracy" in names:
        out["exact_match_accuracy"] = sums[:, 3 * k + 1] / n
    for name in ("balanced_accuracy", "mcc"):
        if name in names:
            out[name] = np.full(rows, _NAN)
    wanted = [name for name in ("precision", "recall", "f1") if name in names]
    if wanted:
        if mode == AVERAGE_BINARY:
            prf = {name: np.full(rows, _NAN) for name in wanted}
        else:
            prf = _prf(tp, true_sum, pred_sum, np.ones_like(tp, dtype=bool), mode)
        out.update({name: prf[name] for name in wanted})
    return out


# --- AUC ---------------------------------------------------------------------------------


class _RankedColumn:
    """One binary AUC problem with its samples sorted by score once.

    The AUC counts (positive, negative) pairs with the positive scored
    higher, ties between classes counting one half (Mann–Whitney), each pair
    weighted by how often both samples were drawn. Without tied scores only
    one class needs a running total: the smaller one (call it the cumulated
    class) is summed in score order, and each sample of the other class reads
    how much cumulated weight lies below it, an index fixed once here.
    """

    def __init__(self, positive: np.ndarray, score: np.ndarray) -> None:
        order = np.argsort(score, kind="stable")
        sorted_score = score[order]
        sorted_positive = positive[order].astype(bool)
        starts = np.flatnonzero(np.r_[True, sorted_score[1:] != sorted_score[:-1]])
        self.tied = starts.shape[0] != score.shape[0]
        if self.tied:
            self.order, self.starts = order, starts
            self.sorted_positive = sorted_positive.astype(np.float64)
            return
        self.cumulate_positives = 2 * int(sorted_positive.sum()) <= score.shape[0]
        cumulated = sorted_positive if self.cumulate_positives else ~sorted_positive
        self.cumulated_order = order[cumulated]
        self.other_order = order[~cumulated]
        self.cumulated_below = np.cumsum(cumulated)[~cumulated]

    def _pairs_without_ties(self, weights: np.ndarray) -> tuple[np.ndarray, ...]:
        """(positive-above-negative pair weight, positive total, negative total) per resample."""
        cumulated = weights[self.cumulated_order]
        running = np.zeros((cumulated.shape[0] + 1, weights.shape[1]), dtype=weights.dtype)
        np.cumsum(cumulated, axis=0, out=running[1:])
        other = weights[self.other_order]
        below = np.einsum("ij,ij->j", other, running[self.cumulated_below])
        cumulated_total, other_total = running[-1], other.sum(axis=0)
        if self.cumulate_positives:
            # `below` counts positives under each negative: the complement of what we want.
            return cumulated_total * other_total - below, cumulated_total, other_total
        return below, other_total, cumulated_total

    def _pairs_with_ties(self, weights: np.ndarray) -> tuple[np.ndarray, ...]:
        w = weights[self.order].astype(np.float64)
        pos = np.add.reduceat(w * self.sorted_positive[:, None], self.starts, axis=0)
        neg = np.add.reduceat(w, self.starts, axis=0) - pos
        below = np.cumsum(neg, axis=0) - 0.5 * neg
        return np.einsum("ij,ij->j", pos, below), pos.sum(axis=0), neg.sum(axis=0)

    def auc(self, weights: np.ndarray) -> np.ndarray:
        """AUC per resample from the ``(n, rows)`` multiplicities; NaN without both classes.

        Every quantity is an integer (or half-integer) below 2**53, so the sums
        are exact and the only rounding is the final division.
        """
        pairs = self._pairs_with_ties if self.tied else self._pairs_without_ties
        numerator, total_pos, total_neg = pairs(weights)
        defined = (total_pos > 0) & (total_neg > 0)
        denominator = np.where(defined, total_pos * total_neg, 1)
        return np.where(defined, numerator / denominator, _NAN)


class _AucPlan:
    """The binary problems whose mean is the AUC scikit-learn reports for these inputs."""

    def __init__(self, inputs: ClassificationInputs) -> None:
        scores, y = inputs.scores, inputs.y_true
        self.columns: list[_RankedColumn] = []
        self.undefined = False
        if inputs.multilabel:
            self.columns = [_RankedColumn(y[:, k], scores[:, k]) for k in range(y.shape[1])]
        elif scores.ndim == 2 and scores.shape[1] > MULTICLASS_THRESHOLD:
            self.columns = [_RankedColumn(y == k, scores[:, k]) for k in range(inputs.n_classes)]
        else:
            column = scores[:, -1] if scores.ndim == 2 else scores
            label_set = set(np.unique(y).tolist())
            if scores.ndim == 1 and not any(label_set <= s for s in _BINARY_AUC_LABEL_SETS):
                self.undefined = True
            else:
                self.columns = [_RankedColumn(y == POSITIVE_LABEL, column)]

    def values(self, weights: np.ndarray) -> np.ndarray:
        """Mean over the plan's binary problems of their AUC per resample."""
        if self.undefined:
            return np.full(weights.shape[1], _NAN)
        return np.mean([column.auc(weights) for column in self.columns], axis=0)


# --- regression --------------------------------------------------------------------------


def _weighted_regression_metrics(
    y: np.ndarray, pred: np.ndarray, weights: np.ndarray, names: Sequence[str]
) -> dict[str, np.ndarray]:
    """MSE, MAE, R² and RMSE per resample (uniform output average) from ``(n, rows)`` weights.

    A resample counts sample i ``weights[i, r]`` times, so each sum over its
    samples is a weighted sum over all samples; the R² deviation is taken
    around each resample's own weighted mean. R² is NaN below
    ``MIN_R2_SAMPLES`` samples (scikit-learn's rule).
    """
    targets = y.reshape(y.shape[0], -1)
    residual = targets - pred.reshape(targets.shape)
    w = weights.astype(np.float64)
    total = w.sum(axis=0)
    safe_total = np.where(total > 0, total, 1.0)[:, None]
    sq_sum = (residual**2).T @ w
    canonical = {name: REGRESSION_ALIASES[name] for name in names}
    out: dict[str, np.ndarray] = {}
    mse = (sq_sum.T / safe_total).mean(axis=1)
    for name, metric in canonical.items():
        if metric == "mse":
            out[name] = mse
        elif metric == "rmse":
            out[name] = np.sqrt(mse)
        elif metric == "mae":
            out[name] = ((np.abs(residual).T @ w).T / safe_total).mean(axis=1)
        else:
            mean = (targets.T @ w).T / safe_total
            centred = targets[:, None, :] - mean[None, :, :]
            deviation = np.einsum("nr,nrd->rd", w, centred**2)
            squares = sq_sum.T
            scores = np.ones_like(squares)
            valid = (deviation != 0) & (squares != 0)
            scores[valid] = 1.0 - squares[valid] / deviation[valid]
            scores[(squares != 0) & (deviation == 0)] = 0.0
            values = scores.mean(axis=1)
            out[name] = np.where(total < MIN_R2_SAMPLES, _NAN, values)
    return out


# --- driver ------------------------------------------------------------------------------


def bootstrap_metric_values(
    targets: np.ndarray,
    predictions: np.ndarray,
    scores: np.ndarray | None,
    *,
    names: Sequence[str],
    mode: str,
    index_chunks: Iterable[np.ndarray] | None = None,
    weight_chunks: Iterable[np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Every requested metric on every resample.

    Args:
        targets: the evaluator's targets.
        predictions: the evaluator's predictions (hard-label metrics).
        scores: scores for AUC (None: use ``predictions``).
        names: metric names (classification, ``auc``/``auroc`` or regression).
        mode: the averaging mode resolved once on the full data.
        index_chunks: consecutive row blocks of the ``(B, n)`` index matrix
            (sample resampling), or
        weight_chunks: consecutive blocks of ``(n, rows)`` per-sample
            multiplicities (group resampling, :func:`draw_group_weight_chunks`);
            give exactly one of the two.

    Returns:
        ``{name: (B,) float64}`` in the order of ``names``.
    """
    if (index_chunks is None) == (weight_chunks is None):
        raise ValueError("give exactly one of index_chunks and weight_chunks")
    regression = [name for name in names if name in REGRESSION_ALIASES]
    auc_names = [name for name in names if name in (AUC_METRIC, AUC_ALIAS)]
    hard = [name for name in names if name not in regression and name not in auc_names]
    hard_inputs = prepare_classification_inputs(targets, predictions) if hard else None
    counts = (
        _SingleLabelCounts(hard_inputs)
        if hard_inputs is not None and not hard_inputs.multilabel
        else None
    )
    indicators = (
        _MultiLabelIndicators(hard_inputs)
        if hard_inputs is not None and hard_inputs.multilabel
        else None
    )
    auc_plan = (
        _AucPlan(
            prepare_classification_inputs(targets, scores if scores is not None else predictions)
        )
        if auc_names
        else None
    )
    reg_y, reg_pred = (
        prepare_regression_inputs(targets, predictions) if regression else (None, None)
    )
    pieces: dict[str, list[np.ndarray]] = {name: [] for name in names}
    n_samples = targets.shape[0]
    needs_weights = indicators is not None or auc_plan is not None
    chunks: Iterable[tuple[np.ndarray | None, np.ndarray | None]] = (
        ((idx, None) for idx in index_chunks)
        if index_chunks is not None
        else ((None, weights) for weights in weight_chunks)  # type: ignore[union-attr]
    )
    for idx, given in chunks:
        chunk: dict[str, np.ndarray] = {}
        weights = given
        if weights is None and needs_weights:
            weights = _multiplicities(idx, n_samples)  # type: ignore[arg-type]
        if counts is not None:
            cm = counts.confusion(idx) if idx is not None else counts.weighted_confusion(given)
            chunk.update(_single_label_metrics(counts, cm, hard, mode))
        if indicators is not None:
            chunk.update(_multilabel_metrics(indicators, weights, hard, mode))
        if auc_plan is not None:
            auc = auc_plan.values(weights)
            chunk.update({name: auc for name in auc_names})
        if regression:
            if weights is None:
                weights = _multiplicities(idx, n_samples)  # type: ignore[arg-type]
            chunk.update(_weighted_regression_metrics(reg_y, reg_pred, weights, regression))
        for name in names:
            pieces[name].append(chunk[name])
    return {name: np.concatenate(values) for name, values in pieces.items()}
