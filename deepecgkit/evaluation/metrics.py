"""Classification and regression metrics with explicit averaging.

Every number here is scikit-learn's on the same inputs; what this module adds
is a single, documented reading of the three prediction shapes (section 2.1:
binary, multiclass softmax, multi-label sigmoid) and the averaging mode that
precision, recall and F1 actually used, which is returned with them instead of
being guessed afterwards.

Conventions:

* Higher is better for every classification metric and for R²; lower is
  better for MSE, MAE and RMSE.
* Every value is a Python ``float``. NaN means "undefined on this input" (AUC
  with one class present, MCC for multi-label targets) and is always
  accompanied by a logged warning; bad input is a ``ValueError`` instead.
* ``zero_division=0``: a class never predicted (or never present) contributes
  0 to precision, recall and F1, matching what the trainer logs.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    confusion_matrix,
    matthews_corrcoef,
    mean_absolute_error,
    mean_squared_error,
    precision_recall_fscore_support,
    r2_score,
    roc_auc_score,
)

from deepecgkit.evaluation._validation import (
    MATRIX_NDIM,
    as_label_vector,
    as_numeric,
    check_class_labels,
    check_finite,
    check_multilabel_targets,
    check_not_empty,
    check_probability_range,
    check_row_sums,
    check_same_length,
    is_multilabel_target,
    paired_arrays,
)
from deepecgkit.evaluation.constants import (
    AUC_ALIAS,
    AUC_METRIC,
    AVERAGE_AUTO,
    AVERAGE_BINARY,
    AVERAGE_MACRO,
    AVERAGE_MODES,
    BINARY_THRESHOLD,
    CLASSIFICATION_METRICS,
    DEFAULT_EVALUATOR_METRICS,
    MULTICLASS_THRESHOLD,
    PROBABILITY_RANGE_TOLERANCE,
    TASK_BINARY,  # noqa: F401 - still importable from here
    TASK_MULTICLASS,  # noqa: F401 - still importable from here
    TASK_MULTILABEL,  # noqa: F401 - still importable from here
)

#: The task names (``TASK_*``) are listed by the constants module, their home.
__all__ = [
    "calculate_classification_metrics",
    "calculate_regression_metrics",
    "confusion_matrix_analysis",
    "resolve_average",
]

logger = logging.getLogger(__name__)

_NAN = float("nan")
#: Accepted classification names: the hard-label metrics plus AUC and its alias.
CLASSIFICATION_NAMES = CLASSIFICATION_METRICS | {AUC_METRIC, AUC_ALIAS}
#: Regression names and the metric each spelling means.
REGRESSION_ALIASES = {
    "mse": "mse",
    "mean_squared_error": "mse",
    "mae": "mae",
    "mean_absolute_error": "mae",
    "r2": "r2",
    "r2_score": "r2",
    "rmse": "rmse",
}
DEFAULT_REGRESSION_METRICS = ("mse", "mae", "r2")
_PRF_INDEX = {"precision": 0, "recall": 1, "f1": 2}


class ClassificationInputs(NamedTuple):
    """Validated targets and predictions, read as section 3 of the specification says.

    Attributes:
        y_true: ``(n,)`` int64 class labels, or ``(n, K)`` int64 multi-hot.
        labels: hard predictions in the same layout as ``y_true``.
        scores: float64 scores for AUC: ``(n,)``, ``(n, C)`` or ``(n, K)``.
        n_classes: the class count C (or label count K) that sets the averaging.
        multilabel: whether ``y_true`` is multi-hot.
    """

    y_true: np.ndarray
    labels: np.ndarray
    scores: np.ndarray
    n_classes: int
    multilabel: bool


def _check_average(average: str) -> None:
    if average not in AVERAGE_MODES:
        raise ValueError(f"average must be one of {list(AVERAGE_MODES)}, got {average!r}")


def resolve_average(
    y_true: np.ndarray, *, average: str = "auto", n_classes: int | None = None
) -> str:
    """Return the averaging mode actually applied to precision, recall and F1.

    Args:
        y_true: ``(n,)`` labels or ``(n, K)`` multi-hot targets.
        average: one of ``AVERAGE_MODES``; anything but ``"auto"`` is returned as is.
        n_classes: class count to use instead of the labels present (so a test
            split missing a class cannot flip the mode between seeds).

    Returns:
        ``"macro"`` for multi-hot targets; otherwise ``"binary"`` (pos_label 1)
        when the class count is at most ``MULTICLASS_THRESHOLD``, else ``"macro"``.
    """
    _check_average(average)
    if average != AVERAGE_AUTO:
        return average
    y = np.asarray(y_true)
    if is_multilabel_target(y):
        return AVERAGE_MACRO
    count = int(n_classes) if n_classes is not None else len(np.unique(y))
    return AVERAGE_BINARY if count <= MULTICLASS_THRESHOLD else AVERAGE_MACRO


def _multilabel_inputs(y: np.ndarray, pred: np.ndarray) -> ClassificationInputs:
    n_labels = y.shape[1]
    targets = check_multilabel_targets(y, "y_true", n_columns=n_labels)
    if pred.ndim != MATRIX_NDIM or pred.shape[1] != n_labels:
        raise ValueError(
            f"y_pred has shape {pred.shape} but y_true has {n_labels} labels; multi-label "
            "predictions need one column per label"
        )
    if pred.dtype.kind == "f":
        probabilities = check_probability_range(pred, "y_pred")
        labels = (probabilities > BINARY_THRESHOLD).astype(np.int64)
        return ClassificationInputs(targets, labels, probabilities, n_labels, True)
    labels = check_multilabel_targets(pred, "y_pred", n_columns=n_labels)
    return ClassificationInputs(targets, labels, labels.astype(np.float64), n_labels, True)


def _matrix_inputs(y: np.ndarray, pred: np.ndarray) -> ClassificationInputs:
    n_columns = pred.shape[1]
    if pred.dtype.kind == "f":
        scores = check_probability_range(pred, "y_pred")
        check_row_sums(scores, "y_pred")
        sums = scores.sum(axis=1, keepdims=True)
        # scikit-learn's multiclass AUC insists on rows summing to 1 with
        # np.allclose defaults; rows accepted by V5 but off by more than that
        # are renormalised so the AUC is computed rather than refused.
        if not np.allclose(1.0, sums):
            scores = scores / sums
    else:
        scores = pred.astype(np.float64)
    labels = check_class_labels(y, "y_true", n_columns=n_columns)
    return ClassificationInputs(labels, np.argmax(scores, axis=1), scores, n_columns, False)


def _vector_inputs(y: np.ndarray, pred: np.ndarray) -> ClassificationInputs:
    labels_true = check_class_labels(y, "y_true")
    n_true = len(np.unique(labels_true))
    if pred.dtype.kind == "f":
        in_range = bool(
            np.all(pred >= -PROBABILITY_RANGE_TOLERANCE)
            and np.all(pred <= 1.0 + PROBABILITY_RANGE_TOLERANCE)
        )
        if in_range and n_true <= MULTICLASS_THRESHOLD:
            probabilities = np.clip(pred.astype(np.float64), 0.0, 1.0)
            labels = (probabilities > BINARY_THRESHOLD).astype(np.int64)
            return ClassificationInputs(labels_true, labels, probabilities, 2, False)
        fractional = int(np.count_nonzero(pred != np.round(pred)))
        if fractional:
            raise ValueError(
                f"y_pred holds {fractional} non-integer value(s); a 1-D y_pred must be class "
                "labels, or positive-class probabilities in [0, 1] when y_true has at most "
                f"{MULTICLASS_THRESHOLD} classes (pass a (n, C) matrix for more classes)"
            )
    return ClassificationInputs(
        labels_true, pred.astype(np.int64), pred.astype(np.float64), n_true, False
    )


def prepare_classification_inputs(y_true: Any, y_pred: Any) -> ClassificationInputs:
    """Validate (V1–V7) and interpret a targets/predictions pair.

    Hard labels, AUC scores and the class count follow the table of section 3:
    multi-label floats are thresholded at 0.5; a single-label matrix is
    argmaxed; a 1-D float in [0, 1] with at most two classes is a
    positive-class probability; any other 1-D input is integer labels.
    """
    y, pred = paired_arrays(y_true, y_pred, other_name="y_pred")
    if is_multilabel_target(y):
        return _multilabel_inputs(y, pred)
    y = as_label_vector(y)
    if y.ndim != 1:
        raise ValueError(f"y_true must be (n,) labels or (n, K) multi-hot, got shape {y.shape}")
    pred = as_label_vector(pred)
    if pred.ndim == MATRIX_NDIM:
        return _matrix_inputs(y, pred)
    return _vector_inputs(y, pred)


# --- individual metrics on validated inputs ----------------------------------------------


def _accuracy(inputs: ClassificationInputs, mode: str) -> float:
    if inputs.multilabel:
        return float(np.mean(inputs.labels == inputs.y_true))
    return float(accuracy_score(inputs.y_true, inputs.labels))


def _exact_match(inputs: ClassificationInputs, mode: str) -> float:
    if inputs.multilabel:
        return float(np.mean(np.all(inputs.labels == inputs.y_true, axis=1)))
    return float(accuracy_score(inputs.y_true, inputs.labels))


def _undefined_for_multilabel(name: str) -> float:
    logger.warning("%s is undefined for multi-label targets; returning NaN", name)
    return _NAN


def _balanced_accuracy(inputs: ClassificationInputs, mode: str) -> float:
    if inputs.multilabel:
        return _undefined_for_multilabel("balanced_accuracy")
    return float(balanced_accuracy_score(inputs.y_true, inputs.labels))


def _mcc(inputs: ClassificationInputs, mode: str) -> float:
    if inputs.multilabel:
        return _undefined_for_multilabel("mcc")
    return float(matthews_corrcoef(inputs.y_true, inputs.labels))


def _auc(inputs: ClassificationInputs, mode: str) -> float:
    scores = inputs.scores
    if inputs.multilabel:
        return float(roc_auc_score(inputs.y_true, scores, average="macro"))
    if scores.ndim == MATRIX_NDIM and scores.shape[1] > MULTICLASS_THRESHOLD:
        return float(
            roc_auc_score(
                inputs.y_true,
                scores,
                multi_class="ovr",
                average="macro",
                labels=np.arange(inputs.n_classes),
            )
        )
    if scores.ndim == MATRIX_NDIM:
        return float(roc_auc_score(inputs.y_true, scores[:, -1]))
    if len(np.unique(inputs.y_true)) > MULTICLASS_THRESHOLD:
        logger.warning("AUC from 1-D scores is undefined for more than two classes")
        return _NAN
    return float(roc_auc_score(inputs.y_true, scores))


def _quietly(compute: Callable[[], float]) -> float:
    """Run a scikit-learn call with its undefined-metric chatter silenced (we log our own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        warnings.filterwarnings("ignore", message="y_pred contains classes not in y_true")
        warnings.filterwarnings("ignore", message="A single label was found")
        return compute()


def _guarded(name: str, compute: Callable[[], float]) -> float:
    """Compute one metric; an exception on valid input becomes NaN plus a warning."""
    try:
        value = _quietly(compute)
    except Exception as exc:  # any scikit-learn refusal on valid input is an undefined metric
        logger.warning(
            "%s could not be computed (%s: %s); returning NaN", name, type(exc).__name__, exc
        )
        return _NAN
    if math.isnan(value):
        logger.warning("%s is undefined on this input; returning NaN", name)
    return value


_HARD_LABEL_METRICS: dict[str, Callable[[ClassificationInputs, str], float]] = {
    "accuracy": _accuracy,
    "label_accuracy": _accuracy,
    "exact_match_accuracy": _exact_match,
    "balanced_accuracy": _balanced_accuracy,
    "mcc": _mcc,
    AUC_METRIC: _auc,
    AUC_ALIAS: _auc,
}


def default_classification_metrics(multilabel: bool) -> list[str]:
    """Default names: the evaluator's defaults, then exact match (multi-label) or MCC."""
    return [*DEFAULT_EVALUATOR_METRICS, "exact_match_accuracy" if multilabel else "mcc"]


def check_classification_names(names: Sequence[str]) -> None:
    """Raise ``ValueError`` listing any name that is not a classification metric."""
    unknown = [name for name in names if name not in CLASSIFICATION_NAMES]
    if unknown:
        raise ValueError(
            f"unknown classification metric(s) {unknown}; supported: {sorted(CLASSIFICATION_NAMES)}"
        )


def metrics_from_inputs(
    inputs: ClassificationInputs, *, names: Sequence[str], mode: str
) -> dict[str, float]:
    """Every requested metric on already validated inputs, each in its own guard.

    Precision, recall and F1 share one ``precision_recall_fscore_support`` call.
    """
    cache: dict[str, tuple[float, ...] | Exception] = {}

    def prf(position: int) -> float:
        if "prf" not in cache:
            try:
                cache["prf"] = _quietly(
                    lambda: tuple(
                        float(v)
                        for v in precision_recall_fscore_support(
                            inputs.y_true, inputs.labels, average=mode, zero_division=0
                        )[:3]
                    )
                )
            except Exception as exc:  # re-raised for each of the three names' guards
                cache["prf"] = exc
        values = cache["prf"]
        if isinstance(values, Exception):
            raise values
        return values[position]

    result: dict[str, float] = {}
    for name in names:
        if name in _PRF_INDEX:
            position = _PRF_INDEX[name]
            result[name] = _guarded(name, lambda position=position: prf(position))
        else:
            metric = _HARD_LABEL_METRICS[name]
            result[name] = _guarded(name, lambda metric=metric: metric(inputs, mode))
    return result


def calculate_classification_metrics(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    *,
    metrics: list[str] | None = None,
    average: str = "auto",
) -> dict[str, float]:
    """Classification metrics equal to scikit-learn's on the same inputs.

    Args:
        y_true: ``(n,)`` integer labels (``(n, 1)`` accepted) or ``(n, K)`` multi-hot.
        y_pred: hard labels, a positive-class probability vector, a ``(n, C)``
            probability matrix, or ``(n, K)`` label probabilities / 0-1 labels
            (section 3's table decides which).
        metrics: names among ``accuracy``, ``label_accuracy``,
            ``exact_match_accuracy``, ``balanced_accuracy``, ``precision``,
            ``recall``, ``f1``, ``auc`` (alias ``auroc``), ``mcc``. Default:
            ``accuracy, precision, recall, f1, auc`` then ``exact_match_accuracy``
            (multi-hot targets) or ``mcc``.
        average: one of ``AVERAGE_MODES``; resolved by :func:`resolve_average`
            with the class count of the predictions.

    Returns:
        Exactly the requested keys, in order, as Python floats (NaN where undefined).

    Raises:
        ValueError: unknown metric or average, or input failing V1–V7.

    Example:
        >>> y_true, y_pred = np.array([0, 1, 1]), np.array([0, 1, 0])
        >>> calculate_classification_metrics(y_true, y_pred, metrics=["accuracy"])
        {'accuracy': 0.6666666666666666}
    """
    _check_average(average)
    if metrics is not None:
        check_classification_names(metrics)
    inputs = prepare_classification_inputs(y_true, y_pred)
    names = (
        list(metrics) if metrics is not None else default_classification_metrics(inputs.multilabel)
    )
    mode = resolve_average(inputs.y_true, average=average, n_classes=inputs.n_classes)
    return metrics_from_inputs(inputs, names=names, mode=mode)


def prepare_regression_inputs(y_true: Any, y_pred: Any) -> tuple[np.ndarray, np.ndarray]:
    """V1–V3 and V7 for regression targets; an ``(n, 1)`` side is flattened to match ``(n,)``."""
    y = as_numeric(y_true, "y_true").astype(np.float64)
    pred = as_numeric(y_pred, "y_pred").astype(np.float64)
    check_not_empty(y, "y_true")
    check_same_length(pred, "y_pred", reference=y, ref_name="y_true")
    check_finite(y, "y_true")
    check_finite(pred, "y_pred")
    if y.ndim != pred.ndim:
        y, pred = as_label_vector(y), as_label_vector(pred)
    if y.shape != pred.shape:
        raise ValueError(
            f"y_true has shape {y.shape} but y_pred has shape {pred.shape}; "
            "regression targets and predictions must have the same shape"
        )
    return y, pred


def check_regression_names(names: Sequence[str]) -> None:
    """Raise ``ValueError`` listing any name that is not a regression metric."""
    unknown = [name for name in names if name not in REGRESSION_ALIASES]
    if unknown:
        raise ValueError(
            f"unknown regression metric(s) {unknown}; supported: {sorted(REGRESSION_ALIASES)}"
        )


def _regression_value(metric: str, y: np.ndarray, pred: np.ndarray) -> float:
    if metric == "mse":
        return float(mean_squared_error(y, pred))
    if metric == "mae":
        return float(mean_absolute_error(y, pred))
    if metric == "r2":
        return float(r2_score(y, pred))
    return math.sqrt(float(mean_squared_error(y, pred)))


def calculate_regression_metrics(
    y_true: np.ndarray, y_pred: np.ndarray, *, metrics: list[str] | None = None
) -> dict[str, float]:
    """Regression metrics by scikit-learn; keys keep the caller's spelling.

    Args:
        y_true: ``(n,)`` or ``(n, d)`` real targets.
        y_pred: predictions of the same shape (``(n, 1)`` against ``(n,)`` is accepted).
        metrics: among ``mse``/``mean_squared_error``, ``mae``/``mean_absolute_error``,
            ``r2``/``r2_score`` and ``rmse`` (square root of the MSE). Default
            ``["mse", "mae", "r2"]``.

    Returns:
        Python floats; R² with a single sample is NaN (scikit-learn's value).

    Raises:
        ValueError: unknown metric name or input failing V1–V3/V7.
    """
    names = list(metrics) if metrics is not None else list(DEFAULT_REGRESSION_METRICS)
    check_regression_names(names)
    y, pred = prepare_regression_inputs(y_true, y_pred)
    return {
        name: _guarded(name, lambda name=name: _regression_value(REGRESSION_ALIASES[name], y, pred))
        for name in names
    }


def _safe_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Element-wise ratio that is 0 where the denominator is 0."""
    out = np.zeros(numerator.shape, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def confusion_matrix_analysis(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, Any]:
    """Confusion matrix with per-class and macro precision, recall and F1.

    Args:
        y_true: ``(n,)`` integer labels.
        y_pred: ``(n,)`` integer labels, or a ``(n, C)`` score matrix (argmaxed).

    Returns:
        ``confusion_matrix`` (rows true, columns predicted, labels the sorted
        union), ``per_class_precision``, ``per_class_recall``, ``per_class_f1``
        (arrays; 0 where a denominator is 0) and their unweighted means
        ``macro_precision``, ``macro_recall``, ``macro_f1`` (floats).
    """
    y = as_label_vector(as_numeric(y_true, "y_true"))
    pred = as_label_vector(as_numeric(y_pred, "y_pred"))
    check_not_empty(y, "y_true")
    check_same_length(pred, "y_pred", reference=y, ref_name="y_true")
    check_finite(y, "y_true")
    check_finite(pred, "y_pred")
    if y.ndim != 1:
        raise ValueError(f"y_true must be (n,) class labels, got shape {y.shape}")
    labels_true = check_class_labels(y, "y_true")
    labels_pred = (
        np.argmax(pred, axis=1) if pred.ndim == MATRIX_NDIM else check_class_labels(pred, "y_pred")
    )
    cm = confusion_matrix(labels_true, labels_pred)
    diagonal = np.diag(cm).astype(np.float64)
    precision = _safe_ratio(diagonal, cm.sum(axis=0).astype(np.float64))
    recall = _safe_ratio(diagonal, cm.sum(axis=1).astype(np.float64))
    f1 = _safe_ratio(2.0 * precision * recall, precision + recall)
    return {
        "confusion_matrix": cm,
        "per_class_precision": precision,
        "per_class_recall": recall,
        "per_class_f1": f1,
        "macro_precision": float(np.mean(precision)),
        "macro_recall": float(np.mean(recall)),
        "macro_f1": float(np.mean(f1)),
    }
