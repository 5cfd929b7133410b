"""Run directories in the format :mod:`deepecgkit.analysis` reads.

A run directory is the hand-over between producing numbers and analysing
them (00-decisions.md, "Files a run directory may hold"). Each file is written
atomically (temporary name in the destination folder, flush and fsync, then
``os.replace``) and ``classification_metrics.csv`` comes last: its presence is
what marks a run directory, so a reader that sees it finds every other file
already complete, and a concurrent reader never sees half a run.

Predictions are stored at full float precision (shortest round-trip repr),
with logits where the caller has them, because probabilities rebuilt into
logits lose exactly the saturated, confidently wrong cases that calibration
work is about.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import numbers
import os
import re
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import pandas as pd

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
    AVERAGING_MACRO_LABEL,
    DEFAULT_CALIBRATION_BINS,
    METADATA_FILENAME,
    METRICS_FILENAME,
    MULTI_LABEL_COLUMNS,
    NEUTRAL_TEMPERATURE,
    PREDICTIONS_FILENAME,
    SINGLE_LABEL_COLUMNS,
    SPLIT_INFO_FILENAME,
    TASK_MULTILABEL,
    VAL_PREDICTIONS_FILENAME,
)
from deepecgkit.evaluation.metrics import calculate_classification_metrics, resolve_average
from deepecgkit.evaluation.recalibration import apply_temperature, calibration_report

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "params_fingerprint",
    "write_failed_run_report",
    "write_run_report",
]

logger = logging.getLogger(__name__)

#: The directory-name rule of the analysis: ``resnet_af_seed3`` has seed 3.
_SEED_PATTERN = re.compile(r"seed(\d+)$")
#: Keys written first in ``run_metadata.json``, in this order.
_METADATA_HEAD = ("seed", "returncode", "params_fingerprint")
#: Keys written first in ``split_info.json``, in this order.
_SPLIT_HEAD = ("n_train", "n_val", "n_test", "n_test_groups")
#: Lengths of the ``val`` tuple: ``(y, logits)`` or ``(y, logits, groups)``.
_VAL_LENGTHS = (2, 3)
_CSV_LINE_END = "\n"
_SINGLE_LABEL_METRICS = ("accuracy", "balanced_accuracy", "precision", "recall", "f1", "auc", "mcc")
_MULTI_LABEL_METRICS = (
    "label_accuracy",
    "exact_match_accuracy",
    "precision",
    "recall",
    "f1",
    "auc",
)


# --- atomic files ------------------------------------------------------------------------


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never a prefix.

    The bytes go to ``.<name>.<random>.tmp`` in the destination directory
    (created if missing; the leading dot keeps discovery from mistaking it for
    a real file), are flushed and fsynced, then moved into place with
    ``os.replace``. On any exception the temporary file is removed and the
    exception re-raised.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.parent / f".{target.name}.{secrets.token_hex(8)}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Atomically write ``text``, line ends kept as given; see :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode(encoding))


# --- JSON --------------------------------------------------------------------------------


def _json_safe(value: Any, *, nan_to_null: bool) -> Any:
    """Numpy scalars/arrays to Python, Paths to str, tuples to lists; NaN to None if asked.

    Raises:
        TypeError: a value JSON cannot represent.
    """
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return None if nan_to_null and not math.isfinite(number) else number
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist(), nan_to_null=nan_to_null)
    if isinstance(value, Mapping):
        return {
            _json_key(key): _json_safe(item, nan_to_null=nan_to_null) for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_json_safe(item, nan_to_null=nan_to_null) for item in value]
    raise TypeError(f"{type(value).__name__} value {value!r} is not JSON serialisable")


def _json_key(key: Any) -> str:
    """JSON object keys are strings; integer keys are written as their decimal text."""
    if isinstance(key, str):
        return key
    if isinstance(key, numbers.Integral) and not isinstance(key, (bool, np.bool_)):
        return str(int(key))
    raise TypeError(f"JSON object keys must be strings, got {type(key).__name__} {key!r}")


def _json_text(payload: Mapping[str, Any]) -> str:
    return json.dumps(_json_safe(payload, nan_to_null=True), indent=2, allow_nan=False) + "\n"


def params_fingerprint(params: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON of ``params``.

    Canonical: sorted keys, ``(",", ":")`` separators, ASCII only, NaN
    rejected, after converting numpy scalars to Python, tuples to lists and
    Paths to str. Identical hyperparameters give the same string on any
    machine and in any key order. Callers exclude the seed, so runs that
    differ only in seed share a fingerprint.

    Raises:
        TypeError: ``params`` is not a mapping or holds an unserialisable value.
        ValueError: ``params`` holds NaN or an infinity.
    """
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping, got {type(params).__name__}")
    canonical = _json_safe(params, nan_to_null=False)
    try:
        text = json.dumps(
            canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
        )
    except ValueError as exc:
        raise ValueError(
            f"params must not contain NaN or infinity (they have no canonical JSON): {exc}"
        ) from exc
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# --- validation helpers ------------------------------------------------------------------


def _check_name(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValueError(f"metadata must be a mapping, got {type(metadata).__name__}")
    for key in ("seed", "returncode"):
        if key in metadata and not _is_int(metadata[key]):
            raise ValueError(f"metadata[{key!r}] must be an int (not bool), got {metadata[key]!r}")
    return dict(metadata)


def _check_split_info(split_info: Mapping[str, Any] | None) -> dict[str, Any]:
    if split_info is None:
        return {}
    if not isinstance(split_info, Mapping):
        raise ValueError(f"split_info must be a mapping, got {type(split_info).__name__}")
    return dict(split_info)


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


def _seed_from(run_dir: Path, metadata: Mapping[str, Any]) -> int | None:
    """The run's seed; None (written as ``null``: no seed) when neither source has one.

    An unknown seed is recorded out of band, never as a number: ``LEGACY_SEED``
    (-1) is an ordinary seed to every reader, and a run of unknown seed must
    not pair with a real seed -1.
    """
    if "seed" in metadata:
        return int(metadata["seed"])
    match = _SEED_PATTERN.search(run_dir.name)
    if match:
        return int(match.group(1))
    logger.warning(
        "no seed in metadata and none in the directory name %s; recording seed null "
        "(LEGACY_SEED is no longer written)",
        run_dir.name,
    )
    return None


def _fingerprint_from(metadata: Mapping[str, Any]) -> str:
    if "params_fingerprint" in metadata:
        return str(metadata["params_fingerprint"])
    if "params" in metadata:
        return params_fingerprint(metadata["params"])
    return ""


def _package_version() -> str:
    from deepecgkit import __version__

    return __version__


def _metadata_payload(
    run_dir: Path,
    metadata: Mapping[str, Any],
    returncode: int,
    computed: Mapping[str, Any],
) -> dict[str, Any]:
    """``seed``, ``returncode``, ``params_fingerprint`` first, then ours, then the caller's."""
    payload: dict[str, Any] = {
        "seed": _seed_from(run_dir, metadata),
        "returncode": returncode,
        "params_fingerprint": _fingerprint_from(metadata),
    }
    payload.update(computed)
    payload["written_at"] = datetime.now(UTC).isoformat()
    payload["deepecgkit_version"] = _package_version()
    payload.update({key: value for key, value in metadata.items() if key not in _METADATA_HEAD})
    return payload


def _split_payload(split_info: Mapping[str, Any], computed: Mapping[str, Any]) -> dict[str, Any]:
    payload = {key: computed.get(key, split_info.get(key)) for key in _SPLIT_HEAD}
    payload.update({key: value for key, value in split_info.items() if key not in _SPLIT_HEAD})
    return payload


# --- predictions files -------------------------------------------------------------------


def _predictions_frame(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    logits: np.ndarray | None,
    groups: np.ndarray | None,
) -> pd.DataFrame:
    n = y_true.shape[0]
    sample_id = np.arange(n)
    columns: dict[str, Any] = {
        "sample_id": sample_id,
        "group_id": groups if groups is not None else sample_id,
    }
    if y_true.ndim == 1:
        columns["y_true"] = y_true.astype(np.int64)
    else:
        columns.update(
            {f"y_true_{k}": y_true[:, k].astype(np.int64) for k in range(y_true.shape[1])}
        )
    columns.update({f"prob_{k}": y_prob[:, k] for k in range(y_prob.shape[1])})
    if logits is not None:
        matrix = logits.reshape(n, -1)
        columns.update({f"logit_{k}": matrix[:, k] for k in range(matrix.shape[1])})
    return pd.DataFrame(columns)


def _csv_text(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator=_CSV_LINE_END)


# --- write_run_report --------------------------------------------------------------------


def _classification_row(
    model: str, dataset: str, y_true: np.ndarray, y_prob: np.ndarray, task: str, mode: str
) -> dict[str, Any]:
    names = _MULTI_LABEL_METRICS if task == TASK_MULTILABEL else _SINGLE_LABEL_METRICS
    values = calculate_classification_metrics(y_true, y_prob, list(names), average=mode)
    row: dict[str, Any] = {"model": model, "dataset": dataset}
    row.update({("auroc" if name == "auc" else name): value for name, value in values.items()})
    return row


def write_run_report(
    run_dir: str | Path,
    model: str,
    dataset: str,
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    logits: np.ndarray | None = None,
    val: tuple | None = None,
    groups: Sequence[Any] | np.ndarray | None = None,
    split_info: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    calibration_bins: int = DEFAULT_CALIBRATION_BINS,
    average: str = "auto",
) -> dict[str, Any]:
    """Write one run directory: predictions, split sizes, metadata, then the metrics row.

    Args:
        run_dir: directory to write (created if missing); a name ending in
            ``seed<N>`` gives the seed when ``metadata`` has none.
        model, dataset: non-empty names recorded in the metrics CSV.
        y_true: ``(n,)`` class indices or ``(n, K)`` multi-hot targets.
        y_prob: ``(n,)``/``(n, 1)`` positive-class probabilities, ``(n, C)``
            class probabilities or ``(n, K)`` label probabilities.
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
    directory = Path(run_dir)
    model = _check_name(model, "model")
    dataset = _check_name(dataset, "dataset")
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
        validate_logits(logits, "logits", task, n_columns, n) if logits is not None else None
    )
    group_array = _check_groups(groups, "groups", n) if groups is not None else None
    val_parts = _check_val(val, task, n_columns)
    info = _check_split_info(split_info)
    meta = _check_metadata(metadata)
    n_groups = len(np.unique(group_array)) if group_array is not None else n
    for key, actual in (("n_test", n), ("n_test_groups", n_groups)):
        if key in info and info[key] != actual:
            raise ValueError(
                f"split_info[{key!r}]={info[key]!r} contradicts the data ({actual}); the "
                "predictions do not belong to that split"
            )

    mode = AVERAGE_MACRO if multilabel else resolve_average(inputs.y_true, average, n_columns)
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

    atomic_write_text(
        directory / PREDICTIONS_FILENAME,
        _csv_text(_predictions_frame(inputs.y_true, inputs.y_prob, logit_array, group_array)),
    )
    val_path = directory / VAL_PREDICTIONS_FILENAME
    if val_parts:
        y_val, logits_val, groups_val = val_parts
        val_prob = apply_temperature(logits_val, NEUTRAL_TEMPERATURE, task)
        atomic_write_text(
            val_path, _csv_text(_predictions_frame(y_val, val_prob, logits_val, groups_val))
        )
    else:
        # A stale file from an earlier run would be paired with the wrong test predictions.
        val_path.unlink(missing_ok=True)
    n_val = info.get("n_val", val_parts[0].shape[0] if val_parts else None)
    split_payload = _split_payload(
        info,
        {"n_train": info.get("n_train"), "n_val": n_val, "n_test": n, "n_test_groups": n_groups},
    )
    atomic_write_text(directory / SPLIT_INFO_FILENAME, _json_text(split_payload))
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
    returncode = int(meta.get("returncode", 0))
    atomic_write_text(
        directory / METADATA_FILENAME,
        _json_text(_metadata_payload(directory, meta, returncode, computed)),
    )
    atomic_write_text(directory / METRICS_FILENAME, _csv_text(pd.DataFrame([row], columns=columns)))
    return row


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
    logits_val = validate_logits(val[1], "val logits", task, n_columns)
    y_val = validate_logit_targets(val[0], logits_val, "val y_true", multilabel=multilabel)
    groups_val = (
        _check_groups(val[2], "val groups", logits_val.shape[0])
        if len(val) == _VAL_LENGTHS[1] and val[2] is not None
        else None
    )
    return y_val, logits_val, groups_val


# --- write_failed_run_report -------------------------------------------------------------


def write_failed_run_report(
    run_dir: str | Path,
    model: str,
    dataset: str,
    *,
    multilabel: bool = False,
    returncode: int = 1,
    error: BaseException | str | None = None,
    split_info: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Record a failed run so that discovery reports it as failed instead of losing it.

    Writes ``run_metadata.json`` (with the non-zero ``returncode`` and
    ``error``, the exception type and message), ``split_info.json`` when
    given, then ``classification_metrics.csv`` with ``model``, ``dataset`` and
    every metric column empty (single-label: ``average`` empty too, which the
    analysis reads as unknown).

    Raises:
        ValueError: empty names, ``returncode`` not a non-zero int, bad metadata.
    """
    directory = Path(run_dir)
    model = _check_name(model, "model")
    dataset = _check_name(dataset, "dataset")
    if not _is_int(returncode) or returncode == 0:
        raise ValueError(f"returncode of a failed run must be a non-zero int, got {returncode!r}")
    meta = _check_metadata(metadata)
    info = _check_split_info(split_info)
    if isinstance(error, BaseException):
        error_text: str | None = f"{type(error).__name__}: {error}"
    else:
        error_text = None if error is None else str(error)
    if info:
        atomic_write_text(directory / SPLIT_INFO_FILENAME, _json_text(_split_payload(info, {})))
    payload = _metadata_payload(
        directory, meta, int(returncode), {"model": model, "dataset": dataset}
    )
    payload["error"] = error_text
    atomic_write_text(directory / METADATA_FILENAME, _json_text(payload))
    columns = MULTI_LABEL_COLUMNS if multilabel else SINGLE_LABEL_COLUMNS
    row = dict.fromkeys(columns)
    row.update({"model": model, "dataset": dataset})
    atomic_write_text(directory / METRICS_FILENAME, _csv_text(pd.DataFrame([row], columns=columns)))
