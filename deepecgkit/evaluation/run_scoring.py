"""Score one finished run's test predictions into the metrics row of its run directory.

:func:`write_run_report` is what the training grid calls after a run: it
validates the predictions, computes every metric column of
``classification_metrics.csv`` (the classification metrics with the run's
averaging, the calibration columns with a temperature fitted on the
validation split, never on the test split) and hands the row, the
predictions and the metadata to :func:`deepecgkit.rundir.write.write_run_files`,
which owns the files and their order (docs/run-directory.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deepecgkit.evaluation._validation import (
    check_finite,
    check_n_bins,
    to_numpy,
    validate_logit_targets,
    validate_logits,
    validate_probability_inputs,
)
from deepecgkit.evaluation.constants import (
    AVERAGE_AUTO,
    AVERAGE_MACRO,
    AVERAGE_MODES,
    NEUTRAL_TEMPERATURE,
    TASK_MULTILABEL,
)
from deepecgkit.evaluation.metrics import calculate_classification_metrics, resolve_average
from deepecgkit.evaluation.recalibration import apply_temperature, calibration_report
from deepecgkit.rundir.format import (
    AVERAGING_MACRO_LABEL,
    CALIBRATION_ERRORS,
    DEFAULT_CALIBRATION_BINS,
    MULTI_LABEL_COLUMNS,
    MULTI_LABEL_METRICS,
    SINGLE_LABEL_COLUMNS,
    SINGLE_LABEL_METRICS,
)
from deepecgkit.rundir.write import (
    checked_metadata,
    checked_name,
    checked_split_info,
    predictions_frame,
    split_payload,
    write_run_files,
)

__all__ = ["write_run_report"]

#: Lengths of the ``val`` tuple: ``(y, logits)`` or ``(y, logits, groups)``.
_VAL_LENGTHS = (2, 3)


def _classification_names(metric_names: Sequence[str]) -> list[str]:
    """The metric columns computed from predictions: those before the calibration columns."""
    return list(metric_names[: list(metric_names).index(CALIBRATION_ERRORS[0])])


_SINGLE_LABEL_SCORES = _classification_names(SINGLE_LABEL_METRICS)
_MULTI_LABEL_SCORES = _classification_names(MULTI_LABEL_METRICS)


def _check_groups(groups: Any, name: str, n_samples: int) -> np.ndarray:
    array = to_numpy(groups)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one group id per sample (1-D), got shape {array.shape}")
    if array.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {array.shape[0]} entries but there are {n_samples} samples; "
            "give one group id per sample"
        )
    if array.dtype.kind == "f":
        check_finite(array, name)
    elif array.dtype.kind == "O" and any(g is None for g in array):
        raise ValueError(f"{name} contains missing group ids (None); every sample needs one")
    return array


def _check_calibration_bins(calibration_bins: Any) -> int:
    try:
        return check_n_bins(calibration_bins)
    except ValueError as exc:
        raise ValueError(
            f"calibration_bins must be an integer >= 1, got {calibration_bins!r}"
        ) from exc


def _check_val(
    val: tuple | None, task: str, n_columns: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """Validate ``(y_true_val, logits_val[, groups_val])`` against the test task and layout."""
    if val is None:
        return None
    if not isinstance(val, (tuple, list)) or len(val) not in _VAL_LENGTHS:
        raise ValueError(
            "val must be (y_true_val, logits_val) or (y_true_val, logits_val, groups_val)"
        )
    multilabel = task == TASK_MULTILABEL
    logits_val = validate_logits(val[1], "val logits", task=task, n_columns=n_columns)
    y_val = validate_logit_targets(val[0], logits_val, "val y_true", multilabel=multilabel)
    groups_val = (
        _check_groups(val[2], "val groups", logits_val.shape[0])
        if len(val) == _VAL_LENGTHS[1] and val[2] is not None
        else None
    )
    return y_val, logits_val, groups_val


def _classification_row(
    model: str, dataset: str, y_true: np.ndarray, y_prob: np.ndarray, task: str, mode: str
) -> dict[str, Any]:
    names = _MULTI_LABEL_SCORES if task == TASK_MULTILABEL else _SINGLE_LABEL_SCORES
    values = calculate_classification_metrics(y_true, y_prob, metrics=names, average=mode)
    return {"model": model, "dataset": dataset, **values}


def write_run_report(
    run_dir: str | Path,
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    model: str,
    dataset: str,
    logits: np.ndarray | None = None,
    val: tuple | None = None,
    groups: Sequence[Any] | np.ndarray | None = None,
    split_info: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    calibration_bins: int = DEFAULT_CALIBRATION_BINS,
    average: str = AVERAGE_AUTO,
) -> dict[str, Any]:
    """Score a run and write its run directory: predictions, split sizes, metadata, metrics row.

    Args:
        run_dir: directory to write (created if missing); a name ending in
            ``seed<N>`` gives the seed when ``metadata`` has none.
        y_true: ``(n,)`` class indices or ``(n, K)`` multi-hot targets.
        y_prob: ``(n,)``/``(n, 1)`` positive-class probabilities, ``(n, C)``
            class probabilities or ``(n, K)`` label probabilities.
        model, dataset: non-empty names recorded in the metrics CSV.
        logits: raw outputs of the same samples (kept at full precision, and
            used for NLL and temperature scaling).
        val: ``(y_true_val, logits_val)`` or ``(y_true_val, logits_val,
            groups_val)``; the temperature is fitted on it, never on the test split.
        groups: test group ids (patient or record); default: each sample its own.
        split_info: ``n_train``, ``n_val`` ... (``n_test``/``n_test_groups``
            must agree with the data when given).
        metadata: ``seed``, ``returncode`` (ints), ``params`` or
            ``params_fingerprint``, and anything else to record.
        calibration_bins: bins of ECE/MCE/adaptive ECE.
        average: averaging of precision/recall/F1; multi-label runs accept only
            ``"auto"`` or ``"macro"`` (macro over labels).

    Returns:
        The metrics row (column -> value) in ``SINGLE_LABEL_COLUMNS`` or
        ``MULTI_LABEL_COLUMNS`` order.

    Raises:
        ValueError: any invalid argument; nothing is written then.
        TypeError: a metadata value that JSON cannot represent.
    """
    model = checked_name(model, "model")
    dataset = checked_name(dataset, "dataset")
    bins = _check_calibration_bins(calibration_bins)
    if average not in AVERAGE_MODES:
        raise ValueError(f"average must be one of {list(AVERAGE_MODES)}, got {average!r}")
    inputs = validate_probability_inputs(y_true, y_prob)
    task, n, n_columns = inputs.task, inputs.y_true.shape[0], inputs.y_prob.shape[1]
    multilabel = task == TASK_MULTILABEL
    if multilabel and average not in (AVERAGE_AUTO, AVERAGE_MACRO):
        raise ValueError(
            f"a multi-label run is always macro over labels; average must be 'auto' or "
            f"'macro', got {average!r}"
        )
    logit_array = (
        validate_logits(logits, "logits", task=task, n_columns=n_columns, n_samples=n)
        if logits is not None
        else None
    )
    group_array = _check_groups(groups, "groups", n) if groups is not None else None
    val_parts = _check_val(val, task, n_columns)
    info = checked_split_info(split_info)
    meta = checked_metadata(metadata)
    n_groups = len(np.unique(group_array)) if group_array is not None else n
    for key, actual in (("n_test", n), ("n_test_groups", n_groups)):
        if key in info and info[key] != actual:
            raise ValueError(
                f"split_info[{key!r}]={info[key]!r} contradicts the data ({actual}); the "
                "predictions do not belong to that split"
            )

    mode = (
        AVERAGE_MACRO
        if multilabel
        else resolve_average(inputs.y_true, average=average, n_classes=n_columns)
    )
    row = _classification_row(model, dataset, inputs.y_true, inputs.y_prob, task, mode)
    fit_targets, fit_logits = (val_parts[0], val_parts[1]) if val_parts else (None, None)
    calibration = calibration_report(
        inputs.y_true,
        inputs.y_prob,
        n_bins=bins,
        fit_targets=fit_targets,
        fit_logits=fit_logits,
        eval_logits=logit_array,
    )
    row.update(calibration)
    label_temperatures = [
        calibration[f"temperature_{k}"]
        for k in range(n_columns)
        if multilabel and f"temperature_{k}" in calibration
    ]
    if not multilabel:
        row["average"] = mode
    columns = MULTI_LABEL_COLUMNS if multilabel else SINGLE_LABEL_COLUMNS
    row = {column: row[column] for column in columns}

    val_frame = None
    if val_parts:
        y_val, logits_val, groups_val = val_parts
        val_prob = apply_temperature(logits_val, NEUTRAL_TEMPERATURE, task=task)
        val_frame = predictions_frame(y_val, val_prob, logits=logits_val, groups=groups_val)
    n_val = info.get("n_val", val_parts[0].shape[0] if val_parts else None)
    computed = {
        "model": model,
        "dataset": dataset,
        "task": task,
        "n_classes": n_columns,
        "calibration_bins": bins,
        "average": AVERAGING_MACRO_LABEL if multilabel else mode,
    }
    if label_temperatures:
        # One temperature per label; the metrics row's ``temperature`` is their geometric mean.
        computed["label_temperatures"] = label_temperatures
    write_run_files(
        run_dir,
        row,
        multi_label=multilabel,
        predictions=predictions_frame(
            inputs.y_true, inputs.y_prob, logits=logit_array, groups=group_array
        ),
        val_predictions=val_frame,
        split_info=split_payload(
            info, n_train=info.get("n_train"), n_val=n_val, n_test=n, n_test_groups=n_groups
        ),
        metadata=meta,
        computed=computed,
    )
    return row
