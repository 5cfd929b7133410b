"""Writing run directories: the one place that puts files into one.

A run directory is the hand-over between producing numbers and analysing
them (docs/run-directory.md). Each file is written atomically (temporary
name in the destination folder, flush and fsync, then ``os.replace``, see
:mod:`deepecgkit.io`) and ``classification_metrics.csv`` comes last: its
presence is what marks a run directory, so a reader that sees it finds every
other file already complete, and a concurrent reader never sees half a run.

Three producers call this module: the evaluation package, which scores a
run's predictions and hands the row to :func:`write_run_files`
(:func:`deepecgkit.evaluation.write_run_report`); the training grid, which
records failed and interrupted runs (:func:`write_failed_run_report`,
:func:`write_interrupted_run`) and clears a run before redoing it
(:func:`clear_run_files`); and the synthetic corpora of tests, benchmarks
and demos (:func:`write_run_directory`, values given, nothing computed).

Predictions are stored at full float precision (shortest round-trip repr),
with logits where the caller has them, because probabilities rebuilt into
logits lose exactly the saturated, confidently wrong cases that calibration
work is about.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import numbers
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from deepecgkit.io import (
    atomic_write_frame,
    atomic_write_json,
    atomic_write_text,
    json_ready,
)
from deepecgkit.rundir.format import (
    CHECKPOINT_FILENAME,
    ERROR_LOG_FILENAME,
    METADATA_FILENAME,
    METADATA_HEAD,
    METRICS_FILENAME,
    MULTI_LABEL_COLUMNS,
    MULTI_LABEL_MARKER,
    MULTI_LABEL_METRICS,
    PREDICTIONS_FILENAME,
    SEED_SUFFIX,
    SINGLE_LABEL_COLUMNS,
    SINGLE_LABEL_METRICS,
    SPLIT_INFO_FILENAME,
    SPLIT_SIZE_KEYS,
    TRAINING_LOG_FILENAME,
    VAL_PREDICTIONS_FILENAME,
)

__all__ = [
    "checked_metadata",
    "checked_name",
    "checked_split_info",
    "clear_run_files",
    "params_fingerprint",
    "predictions_frame",
    "remove_temporaries",
    "split_payload",
    "write_error_log",
    "write_failed_run_report",
    "write_interrupted_run",
    "write_run_directory",
    "write_run_files",
    "write_training_log",
]

logger = logging.getLogger(__name__)

#: Files a (re)run rewrites, metrics first so that a reader never pairs an old
#: result with new predictions while the run is under way.
RUN_FILE_NAMES = (
    METRICS_FILENAME,
    METADATA_FILENAME,
    SPLIT_INFO_FILENAME,
    PREDICTIONS_FILENAME,
    VAL_PREDICTIONS_FILENAME,
    CHECKPOINT_FILENAME,
    TRAINING_LOG_FILENAME,
    ERROR_LOG_FILENAME,
)
#: Averaging written for single-label runs of a synthetic corpus unless told otherwise.
DEFAULT_AVERAGING = "macro"


# --- validation ----------------------------------------------------------------------------


def checked_name(value: Any, name: str) -> str:
    """``value`` when it is a non-empty string (a model or dataset name); else ``ValueError``."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def checked_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``metadata`` whose ``seed`` and ``returncode``, when present, are ints."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValueError(f"metadata must be a mapping, got {type(metadata).__name__}")
    for key in ("seed", "returncode"):
        if key in metadata and not _is_int(metadata[key]):
            raise ValueError(f"metadata[{key!r}] must be an int (not bool), got {metadata[key]!r}")
    return dict(metadata)


def checked_split_info(split_info: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``split_info`` (a mapping; None gives ``{}``)."""
    if split_info is None:
        return {}
    if not isinstance(split_info, Mapping):
        raise ValueError(f"split_info must be a mapping, got {type(split_info).__name__}")
    return dict(split_info)


# --- metadata and split sizes -----------------------------------------------------------------


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
    canonical = json_ready(params, nan_to_null=False)
    try:
        text = json.dumps(
            canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
        )
    except ValueError as exc:
        raise ValueError(
            f"params must not contain NaN or infinity (they have no canonical JSON): {exc}"
        ) from exc
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _seed_from(run_dir: Path, metadata: Mapping[str, Any]) -> int | None:
    """The run's seed; None (written as ``null``: no seed) when neither source has one.

    An unknown seed is recorded out of band, never as a number: ``LEGACY_SEED``
    (-1) is an ordinary seed to every reader, and a run of unknown seed must
    not pair with a real seed -1.
    """
    if "seed" in metadata:
        return int(metadata["seed"])
    match = SEED_SUFFIX.search(run_dir.name)
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
    payload.update({key: value for key, value in metadata.items() if key not in METADATA_HEAD})
    return payload


def _split_payload(split_info: Mapping[str, Any], computed: Mapping[str, Any]) -> dict[str, Any]:
    payload = {key: computed.get(key, split_info.get(key)) for key in SPLIT_SIZE_KEYS}
    payload.update({key: value for key, value in split_info.items() if key not in SPLIT_SIZE_KEYS})
    return payload


# --- predictions files ---------------------------------------------------------------------------


def predictions_frame(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    logits: np.ndarray | None,
    groups: np.ndarray | None,
) -> pd.DataFrame:
    """A predictions file: ``sample_id``, ``group_id``, targets, ``prob_<k>``, ``logit_<k>``.

    Args:
        y_true: ``(n,)`` class indices or ``(n, K)`` multi-hot targets.
        y_prob: ``(n, C)`` probabilities.
        logits: raw outputs (any shape with ``n`` rows) or None.
        groups: ``(n,)`` group ids, or None for each sample its own group.
    """
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


# --- a scored run -------------------------------------------------------------------------


def write_run_files(
    run_dir: str | Path,
    row: Mapping[str, Any],
    *,
    multi_label: bool,
    predictions: pd.DataFrame,
    val_predictions: pd.DataFrame | None,
    split_info: Mapping[str, Any],
    metadata: Mapping[str, Any],
    computed: Mapping[str, Any],
) -> None:
    """Write a scored run: predictions, validation predictions, split sizes, metadata, metrics.

    Args:
        run_dir: the directory (created if missing); a name ending in
            ``seed<N>`` gives the seed when ``metadata`` has none.
        row: the metrics row, column -> value, in ``SINGLE_LABEL_COLUMNS`` or
            ``MULTI_LABEL_COLUMNS`` order (``multi_label`` says which).
        predictions: the test predictions (:func:`predictions_frame`).
        val_predictions: the validation predictions, or None (a stale
            ``val_predictions.csv`` is then removed: it would be paired with
            the wrong test predictions).
        split_info: ``split_info.json`` content; its four sizes come first.
        metadata: checked metadata of the caller (``seed``, ``returncode``,
            ``params`` ...), written after ``computed``.
        computed: what the scorer determined (model, dataset, task ...).

    Raises:
        TypeError: a metadata value that JSON cannot represent.
    """
    directory = Path(run_dir)
    columns = MULTI_LABEL_COLUMNS if multi_label else SINGLE_LABEL_COLUMNS
    atomic_write_frame(directory / PREDICTIONS_FILENAME, predictions)
    val_path = directory / VAL_PREDICTIONS_FILENAME
    if val_predictions is not None:
        atomic_write_frame(val_path, val_predictions)
    else:
        val_path.unlink(missing_ok=True)
    atomic_write_json(directory / SPLIT_INFO_FILENAME, _split_payload(split_info, {}))
    returncode = int(metadata.get("returncode", 0))
    atomic_write_json(
        directory / METADATA_FILENAME, _metadata_payload(directory, metadata, returncode, computed)
    )
    atomic_write_frame(directory / METRICS_FILENAME, pd.DataFrame([dict(row)], columns=columns))


def split_payload(split_info: Mapping[str, Any], **sizes: Any) -> dict[str, Any]:
    """``split_info`` with the four sizes first, each taken from ``sizes`` when given there."""
    return _split_payload(split_info, sizes)


# --- failed, interrupted and rerun runs ----------------------------------------------------------


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
    model = checked_name(model, "model")
    dataset = checked_name(dataset, "dataset")
    if not _is_int(returncode) or returncode == 0:
        raise ValueError(f"returncode of a failed run must be a non-zero int, got {returncode!r}")
    meta = checked_metadata(metadata)
    info = checked_split_info(split_info)
    if isinstance(error, BaseException):
        error_text: str | None = f"{type(error).__name__}: {error}"
    else:
        error_text = None if error is None else str(error)
    if info:
        atomic_write_json(directory / SPLIT_INFO_FILENAME, _split_payload(info, {}))
    payload = _metadata_payload(
        directory, meta, int(returncode), {"model": model, "dataset": dataset}
    )
    payload["error"] = error_text
    atomic_write_json(directory / METADATA_FILENAME, payload)
    columns = MULTI_LABEL_COLUMNS if multilabel else SINGLE_LABEL_COLUMNS
    row = dict.fromkeys(columns)
    row.update({"model": model, "dataset": dataset})
    atomic_write_frame(directory / METRICS_FILENAME, pd.DataFrame([row], columns=columns))


def write_error_log(run_dir: str | Path, text: str) -> Path:
    """Write the traceback of a failed run to its ``error.log``."""
    return atomic_write_text(Path(run_dir) / ERROR_LOG_FILENAME, text)


def clear_run_files(run_dir: str | Path) -> None:
    """Remove every file a run writes (metrics first), before the run is done again."""
    directory = Path(run_dir)
    for name in RUN_FILE_NAMES:
        (directory / name).unlink(missing_ok=True)


def remove_temporaries(run_dir: str | Path) -> None:
    """Remove the temporary files (``.<name>.<random>.tmp``) an interrupted writer left."""
    for leftover in Path(run_dir).glob(".*.tmp"):
        leftover.unlink(missing_ok=True)


def write_interrupted_run(run_dir: str | Path, metadata: Mapping[str, Any]) -> None:
    """Leave an interrupted run without a metrics file (so it is no run) and with its metadata.

    Temporary files are removed first; ``metadata`` is written as it is
    (NaN as ``null``).
    """
    directory = Path(run_dir)
    remove_temporaries(directory)
    (directory / METRICS_FILENAME).unlink(missing_ok=True)
    atomic_write_json(directory / METADATA_FILENAME, metadata)


# --- a run directory from given values (synthetic corpora) ---------------------------------------


def _csv_cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    text = str(value)
    if any(char in text for char in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _csv_line(values: Iterable[Any]) -> str:
    return ",".join(_csv_cell(value) for value in values)


def write_run_directory(
    run_dir: Path | str,
    *,
    model: str,
    dataset: str,
    metrics: Mapping[str, float],
    seed: int | None = None,
    average: str | None = DEFAULT_AVERAGING,
    multi_label: bool = False,
    split_sizes: Mapping[str, Any] | Any | None = None,
    returncode: int | None = 0,
    fingerprint: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write one run directory from given metric values, in the format of docs/run-directory.md.

    Nothing is computed or validated: this is how tests, benchmarks and demos
    plant a run whose numbers are known. Files are replaced atomically but
    not fsynced (a synthetic corpus of 300,000 small files is regenerated at
    will, and syncing each would take minutes).

    Args:
        run_dir: the directory (created with parents).
        model, dataset: written as the CSV's ``model`` and ``dataset``.
        metrics: metric name -> value; NaN is written as an empty cell.
        seed: recorded in ``run_metadata.json``; None leaves the key out, so
            readers fall back to the directory name.
        average: the ``average`` column of a single-label run (None leaves
            the column out); ignored for multi-label runs.
        multi_label: write the multi-label schema (marked by the
            ``exact_match_accuracy`` column, which is always written).
        split_sizes: ``split_info.json`` content (a mapping, or an object with
            ``to_dict()`` such as :class:`~deepecgkit.rundir.synthetic.SplitSizes`);
            None writes no file.
        returncode: recorded in ``run_metadata.json`` (None leaves it out).
        fingerprint: ``params_fingerprint`` (None leaves it out).
        metadata: extra metadata keys.

    Returns:
        The run directory. ``classification_metrics.csv`` is written last:
        its presence marks a complete run.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {}
    if seed is not None:
        record["seed"] = seed
    if returncode is not None:
        record["returncode"] = returncode
    if fingerprint is not None:
        record["params_fingerprint"] = fingerprint
    record.update({"model": model, "dataset": dataset, **dict(metadata or {})})
    # Plain json.dumps, not the strict writer: a test may plant values a strict
    # writer would refuse (NaN), to see how readers take them.
    atomic_write_text(
        run_dir / METADATA_FILENAME, json.dumps(record, indent=2) + "\n", durable=False
    )
    if split_sizes is not None:
        sizes = (
            split_sizes.to_dict()
            if hasattr(split_sizes, "to_dict") and not isinstance(split_sizes, Mapping)
            else dict(split_sizes)
        )
        atomic_write_text(
            run_dir / SPLIT_INFO_FILENAME, json.dumps(sizes, indent=2) + "\n", durable=False
        )

    schema = MULTI_LABEL_METRICS if multi_label else SINGLE_LABEL_METRICS
    row: dict[str, Any] = {"model": model, "dataset": dataset}
    row.update({name: float(metrics[name]) for name in schema if name in metrics})
    if multi_label:
        row.setdefault(MULTI_LABEL_MARKER, math.nan)
    elif average is not None:
        row["average"] = average
    text = f"{_csv_line(row)}\n{_csv_line(row.values())}\n"
    atomic_write_text(run_dir / METRICS_FILENAME, text, durable=False)
    return run_dir


def write_training_log(log_dir: str | Path, text: str) -> Path:
    """Write a torch run's per-epoch log (``training_log.csv``) into ``log_dir``."""
    return atomic_write_text(Path(log_dir) / TRAINING_LOG_FILENAME, text)
