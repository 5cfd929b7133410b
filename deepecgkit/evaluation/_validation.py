"""Input checks V1–V7 shared by every public function of the evaluation package.

Bad input is a caller error and must never pass as a number, so each check
raises ``ValueError`` with a message naming the argument, what was wrong and
what would be right. The checks are never turned into NaN; NaN is reserved
for metrics that are mathematically undefined on valid input.

=====  =====================================================================
V1     first dimensions of paired arrays agree
V2     at least one sample
V3     no NaN or infinity
V4     probabilities within ``[-PROBABILITY_RANGE_TOLERANCE, 1 + tolerance]``,
       then clipped to [0, 1]
V5     single-label probability rows sum to one within
       ``PROBABILITY_SUM_TOLERANCE``
V6     labels are integer class indices (single-label) or 0/1 (multi-label)
V7     at most two dimensions
=====  =====================================================================
"""

from __future__ import annotations

import math
import numbers
from typing import Any, NamedTuple

import numpy as np

from deepecgkit.evaluation.constants import (
    DEFAULT_TEMPERATURE_BOUNDS,
    MULTICLASS_THRESHOLD,
    PROBABILITY_RANGE_TOLERANCE,
    TASK_BINARY,
    TASK_MULTICLASS,
    TASK_MULTILABEL,
    TASKS,
)
from deepecgkit.rundir.format import PROBABILITY_SUM_TOLERANCE

#: Arrays have samples along axis 0 and, at most, classes along axis 1.
MATRIX_NDIM = 2
_NUMERIC_KINDS = "biuf"


def to_numpy(value: Any) -> np.ndarray:
    """Return ``value`` as a numpy array; torch tensors are detached and moved to CPU.

    The check is by duck typing (``detach`` and ``cpu``) so that this module
    never imports torch.
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def as_numeric(value: Any, name: str) -> np.ndarray:
    """Convert ``value`` to a numeric array of one or two dimensions (V7).

    Raises:
        ValueError: for a scalar, more than two dimensions, or a non-numeric dtype.
    """
    array = to_numpy(value)
    if array.ndim == 0:
        raise ValueError(f"{name} must be an array with one entry per sample, got a scalar")
    if array.ndim > MATRIX_NDIM:
        raise ValueError(
            f"{name} must have at most {MATRIX_NDIM} dimensions (samples, classes), "
            f"got shape {array.shape}"
        )
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
    return array


def check_not_empty(array: np.ndarray, name: str) -> None:
    """V2: raise when ``array`` holds no samples."""
    if array.shape[0] == 0:
        raise ValueError(f"{name} has no samples; at least one sample is needed")


def check_same_length(
    array: np.ndarray, name: str, *, reference: np.ndarray, ref_name: str
) -> None:
    """V1: raise when the first dimensions of ``array`` and ``reference`` differ."""
    if array.shape[0] != reference.shape[0]:
        raise ValueError(
            f"{name} has {array.shape[0]} samples but {ref_name} has {reference.shape[0]}; "
            "both must describe the same samples"
        )


def check_finite(array: np.ndarray, name: str) -> None:
    """V3: raise when ``array`` holds NaN or an infinity (message gives the count)."""
    if array.dtype.kind != "f":
        return
    bad = int(np.count_nonzero(~np.isfinite(array)))
    if bad:
        raise ValueError(
            f"{name} contains {bad} non-finite value(s) (NaN or inf); every entry must be finite"
        )


def paired_arrays(target: Any, other: Any, *, other_name: str) -> tuple[np.ndarray, np.ndarray]:
    """``y_true`` and a second per-sample array, numeric, non-empty, aligned and finite.

    Args:
        target: the ``y_true`` argument.
        other: the array scored against it (``y_prob``, ``y_pred``).
        other_name: the argument name of ``other``, for the messages.

    Raises:
        ValueError: V7, V2, V1 or V3, naming the argument at fault.
    """
    y = as_numeric(target, "y_true")
    values = as_numeric(other, other_name)
    check_not_empty(y, "y_true")
    check_same_length(values, other_name, reference=y, ref_name="y_true")
    check_finite(y, "y_true")
    check_finite(values, other_name)
    return y, values


def check_probability_range(array: np.ndarray, name: str) -> np.ndarray:
    """V4: require entries in [0, 1] up to ``PROBABILITY_RANGE_TOLERANCE``, then clip.

    Returns:
        A float64 copy clipped to [0, 1].
    """
    values = array.astype(np.float64)
    low, high = -PROBABILITY_RANGE_TOLERANCE, 1.0 + PROBABILITY_RANGE_TOLERANCE
    outside = int(np.count_nonzero((values < low) | (values > high)))
    if outside:
        raise ValueError(
            f"{name} has {outside} value(s) outside [0, 1] (range {values.min():.6g} to "
            f"{values.max():.6g}); pass probabilities, for example a softmax or sigmoid "
            "of the logits"
        )
    return np.clip(values, 0.0, 1.0)


def check_row_sums(matrix: np.ndarray, name: str) -> None:
    """V5: every row of a single-label probability matrix must sum to one."""
    deviation = np.abs(matrix.sum(axis=1) - 1.0)
    bad = int(np.count_nonzero(deviation > PROBABILITY_SUM_TOLERANCE))
    if bad:
        raise ValueError(
            f"{name} has {bad} row(s) whose probabilities do not sum to 1 (largest deviation "
            f"{deviation.max():.3g}, tolerance {PROBABILITY_SUM_TOLERANCE}); convert logits "
            "with a softmax first, or pass task='multilabel' for independent labels"
        )


def check_integer_valued(array: np.ndarray, name: str) -> np.ndarray:
    """Return ``array`` as int64, raising when a float entry is not a whole number."""
    if array.dtype.kind == "f":
        check_finite(array, name)
        fractional = int(np.count_nonzero(array != np.round(array)))
        if fractional:
            raise ValueError(
                f"{name} has {fractional} non-integer value(s); class labels must be whole "
                "numbers such as 0, 1, 2"
            )
    return array.astype(np.int64)


def check_class_labels(y: np.ndarray, name: str, *, n_columns: int | None = None) -> np.ndarray:
    """V6 (single-label): integer class indices, within ``[0, n_columns)`` when given.

    Returns:
        The labels as a 1-D int64 array.
    """
    labels = check_integer_valued(y, name)
    if n_columns is not None:
        bad = int(np.count_nonzero((labels < 0) | (labels >= n_columns)))
        if bad:
            raise ValueError(
                f"{name} has {bad} label(s) outside [0, {n_columns}) (range {labels.min()} to "
                f"{labels.max()}); labels must index the {n_columns} probability columns"
            )
    return labels


def check_multilabel_targets(y: np.ndarray, name: str, *, n_columns: int) -> np.ndarray:
    """V6 (multi-label): a 0/1 matrix with ``n_columns`` columns.

    Returns:
        The targets as a 2-D int64 array.
    """
    if y.ndim != MATRIX_NDIM or y.shape[1] != n_columns:
        raise ValueError(
            f"{name} must be a multi-hot matrix with {n_columns} columns (one per label), "
            f"got shape {y.shape}"
        )
    bad = int(np.count_nonzero((y != 0) & (y != 1)))
    if bad:
        raise ValueError(f"{name} has {bad} entries that are not 0 or 1; multi-hot targets only")
    return y.astype(np.int64)


def is_multilabel_target(y: np.ndarray) -> bool:
    """Multi-hot targets are the only 2-D targets with more than one column."""
    return y.ndim == MATRIX_NDIM and y.shape[1] > 1


def as_label_vector(y: np.ndarray) -> np.ndarray:
    """Treat an ``(n, 1)`` target as the 1-D label vector it is."""
    return y.reshape(-1) if y.ndim == MATRIX_NDIM and y.shape[1] == 1 else y


def expand_binary(p: np.ndarray) -> np.ndarray:
    """Turn a positive-class probability ``(n,)`` or ``(n, 1)`` into ``[1 - p, p]``."""
    p = p.reshape(-1)
    return np.column_stack([1.0 - p, p])


def check_task(task: str | None) -> str | None:
    """Return ``task`` unchanged when it is None or one of ``TASKS``."""
    if task is not None and task not in TASKS:
        raise ValueError(f"task must be one of {list(TASKS)} or None, got {task!r}")
    return task


def task_from_shapes(y_true: np.ndarray, y_prob: np.ndarray, *, task: str | None = None) -> str:
    """Resolve the prediction shape (section 2.1) from explicit ``task`` or the array shapes."""
    if check_task(task) is not None:
        return task
    if is_multilabel_target(y_true):
        return TASK_MULTILABEL
    if y_prob.ndim == 1 or y_prob.shape[1] <= MULTICLASS_THRESHOLD:
        return TASK_BINARY
    return TASK_MULTICLASS


def check_n_bins(n_bins: Any) -> int:
    """``n_bins`` must be an int >= 1 (bool rejected)."""
    if isinstance(n_bins, (bool, np.bool_)) or not isinstance(n_bins, numbers.Integral):
        raise ValueError(f"n_bins must be an integer >= 1, got {n_bins!r}")
    if n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1, got {n_bins}")
    return int(n_bins)


def check_temperature(temperature: Any) -> float:
    """A temperature must be a finite real number > 0 (NaN rejected)."""
    valid = (
        isinstance(temperature, numbers.Real)
        and not isinstance(temperature, (bool, np.bool_))
        and math.isfinite(float(temperature))
        and float(temperature) > 0.0
    )
    if not valid:
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    return float(temperature)


def check_bounds(bounds: Any) -> tuple[float, float]:
    """Temperature bounds must be finite with ``0 < low < high``."""
    try:
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"bounds must be a pair (low, high) of numbers, got {bounds!r}; "
            f"for example {DEFAULT_TEMPERATURE_BOUNDS}"
        ) from exc
    if not (math.isfinite(low) and math.isfinite(high) and 0.0 < low < high):
        raise ValueError(f"bounds must be finite with 0 < low < high, got {bounds!r}")
    return low, high


class ProbabilityInputs(NamedTuple):
    """Validated targets and probabilities of one split.

    Attributes:
        y_true: ``(n,)`` int64 class indices, or ``(n, K)`` int64 multi-hot.
        y_prob: ``(n, C)`` float64 probability matrix in [0, 1] (a positive-class
            vector already expanded to ``[1 - p, p]``), or ``(n, K)`` label
            probabilities.
        task: one of ``TASKS``.
    """

    y_true: np.ndarray
    y_prob: np.ndarray
    task: str


def validate_probability_inputs(
    y_true: Any, y_prob: Any, *, task: str | None = None
) -> ProbabilityInputs:
    """Run V1–V7 on a targets/probabilities pair and resolve its task shape.

    Raises:
        ValueError: naming the argument and the problem.
    """
    y, prob = paired_arrays(y_true, y_prob, other_name="y_prob")
    resolved = task_from_shapes(y, prob, task=task)
    if resolved == TASK_MULTILABEL:
        y = y.reshape(-1, 1) if y.ndim == 1 else y
        prob = prob.reshape(-1, 1) if prob.ndim == 1 else prob
        if prob.shape[1] != y.shape[1]:
            raise ValueError(
                f"y_prob has {prob.shape[1]} columns but y_true has {y.shape[1]} labels; "
                "multi-label probabilities need one column per label"
            )
        targets = check_multilabel_targets(y, "y_true", n_columns=y.shape[1])
        return ProbabilityInputs(targets, check_probability_range(prob, "y_prob"), resolved)
    if is_multilabel_target(y):
        raise ValueError(
            f"y_true is a multi-hot matrix of shape {y.shape} but task={resolved!r}; "
            "pass task='multilabel' or None for multi-label targets"
        )
    y = as_label_vector(y)
    if prob.ndim == 1 or prob.shape[1] == 1:
        matrix = expand_binary(check_probability_range(prob, "y_prob"))
    else:
        matrix = check_probability_range(prob, "y_prob")
        check_row_sums(matrix, "y_prob")
    if resolved == TASK_BINARY and matrix.shape[1] > MULTICLASS_THRESHOLD:
        raise ValueError(
            f"task='binary' needs one or two probability columns, got {matrix.shape[1]}; "
            "use task='multiclass'"
        )
    labels = check_class_labels(y, "y_true", n_columns=matrix.shape[1])
    return ProbabilityInputs(labels, matrix, resolved)


def logit_layout_error(name: str, shape: tuple[int, ...], *, task: str, n_columns: int) -> str:
    """Message for logits whose class dimension does not fit the task."""
    expected = (
        f"{n_columns} columns (one per label)"
        if task == TASK_MULTILABEL
        else f"a single logit (n,) or (n, 1), or {n_columns} columns"
    )
    return f"{name} has shape {shape}, which does not fit a {task} task; expected {expected}"


def validate_logits(
    logits: Any, name: str, *, task: str, n_columns: int, n_samples: int | None = None
) -> np.ndarray:
    """V1/V3/V7 and the layout rule for logits of a known task.

    Args:
        logits: raw model outputs.
        name: argument name for messages.
        task: the task of the probabilities they belong to.
        n_columns: the probability matrix's class (or label) count.
        n_samples: expected sample count, or None to skip V1.

    Returns:
        The logits as float64, in their original layout.
    """
    array = as_numeric(logits, name).astype(np.float64)
    if n_samples is not None and array.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {array.shape[0]} samples but the predictions have {n_samples}; "
            "both must describe the same samples"
        )
    check_finite(array, name)
    single_logit = array.ndim == 1 or array.shape[1] == 1
    if task == TASK_MULTILABEL:
        width = 1 if array.ndim == 1 else array.shape[1]
        fits = width == n_columns
    else:
        fits = single_logit or array.shape[1] == n_columns
        if single_logit and n_columns > MULTICLASS_THRESHOLD:
            fits = False
    if not fits:
        raise ValueError(logit_layout_error(name, array.shape, task=task, n_columns=n_columns))
    return array


def validate_logit_targets(
    y_true: Any, logits: np.ndarray, name: str, *, multilabel: bool
) -> np.ndarray:
    """V1/V3/V6 for targets scored against logits (temperature fitting, NLL).

    Returns:
        int64 labels: 1-D class indices, or a multi-hot matrix matching ``logits``.
    """
    y = as_numeric(y_true, name)
    check_same_length(y, name, reference=logits, ref_name="logits")
    check_finite(y, name)
    if multilabel:
        y = y.reshape(-1, 1) if y.ndim == 1 else y
        width = 1 if logits.ndim == 1 else logits.shape[1]
        return check_multilabel_targets(y, name, n_columns=width)
    y = as_label_vector(y)
    if y.ndim != 1:
        raise ValueError(
            f"{name} is a multi-hot matrix of shape {y.shape}; pass task='multilabel' for "
            "multi-label targets"
        )
    single_logit = logits.ndim == 1 or logits.shape[1] == 1
    return check_class_labels(y, name, n_columns=2 if single_logit else logits.shape[1])
