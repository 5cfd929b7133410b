"""Reading ECG datasets from a documented on-disk layout.

Nothing is downloaded: data are prepared by the user (or by
``deepecg synth``) in this layout, and every reader of the toolkit goes
through it::

    <data_dir>/
      dataset.json                  name, sampling_rate, leads, task, classes,
                                    optional segment_seconds, description
      labels.csv                    record_id, optional patient_id, optional
                                    start_s, end_s, then label (single-label:
                                    class name or index) or one 0/1 column per
                                    class (multi-label)
      records/<record_id>.npz       key "signal" (n_leads, n_samples) in mV,
                                    optional "fs"
      records/<record_id>.hea/.dat  WFDB, read with wfdb.rdrecord

A labels row with ``start_s``/``end_s`` labels only that span of its record
(an empty cell means the record's start or end); a window lying entirely
inside one span takes its label, a window crossing a boundary is dropped.
Spans of one record must not overlap, which also means a record without
spans has exactly one row.

Every error names the file, and the line or key where it applies, and says
what was expected: :class:`DatasetNotFoundError` for something missing,
:class:`DatasetFormatError` for something malformed.
"""

from __future__ import annotations

import csv
import itertools
import json
import logging
import math
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deepecgkit.datasets.base import (
    DEFAULT_SEGMENT_SECONDS,
    TASK_BINARY,
    TASK_MULTILABEL,
    TASKS,
    BaseECGDataset,
    LoadedWindows,
)
from deepecgkit.datasets.errors import DatasetFormatError, DatasetNotFoundError
from deepecgkit.datasets.preprocessing import select_leads, window_signals

__all__ = [
    "DATASET_JSON",
    "LABELS_CSV",
    "RECORDS_DIR",
    "DatasetDescription",
    "LabelRow",
    "LocalECGDataset",
    "read_dataset_json",
    "read_labels_csv",
    "read_record",
]

logger = logging.getLogger(__name__)

DATASET_JSON = "dataset.json"
LABELS_CSV = "labels.csv"
RECORDS_DIR = "records"
NPZ_SUFFIX = ".npz"
WFDB_HEADER_SUFFIX = ".hea"
#: Column names with a fixed meaning in labels.csv.
RECORD_COLUMN = "record_id"
PATIENT_COLUMN = "patient_id"
START_COLUMN = "start_s"
END_COLUMN = "end_s"
LABEL_COLUMN = "label"
#: Tolerance (s) when matching a window to a span, for float round-off.
SPAN_TOLERANCE_S = 1e-9
_PREPARE_HINT = (
    "deepecgkit cannot download data (no network access); prepare the folder in the local "
    "layout (dataset.json, labels.csv, records/) or, for synthetic data, run "
    "'deepecg synth <dataset> --out <dir>'"
)


@dataclass(frozen=True)
class DatasetDescription:
    """The validated content of ``dataset.json``."""

    name: str
    sampling_rate: float
    leads: list[str]
    task: str
    classes: list[str]
    segment_seconds: float | None
    description: str


@dataclass(frozen=True)
class LabelRow:
    """One row of ``labels.csv``: a record, its patient, an optional span and a label."""

    line: int
    record_id: str
    patient_id: str
    start_s: float | None
    end_s: float | None
    label: Any  # int class index or an int8 multi-hot array


def _format_error(path: Path, message: str) -> DatasetFormatError:
    return DatasetFormatError(f"{path}: {message}")


def read_dataset_json(path: Path) -> DatasetDescription:
    """Read and validate ``dataset.json``.

    Raises:
        DatasetNotFoundError: the file is missing.
        DatasetFormatError: not JSON, not an object, or a key missing or of the
            wrong kind (the message names the key and what it should hold).
    """
    if not path.is_file():
        raise DatasetNotFoundError(f"{path}: dataset description not found; {_PREPARE_HINT}")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _format_error(path, f"not valid JSON ({exc})") from exc
    if not isinstance(meta, dict):
        raise _format_error(path, f"expected a JSON object, got {type(meta).__name__}")

    def require(key: str, check: Any, expected: str) -> Any:
        if key not in meta:
            raise _format_error(path, f"missing key {key!r} ({expected})")
        value = meta[key]
        if not check(value):
            raise _format_error(path, f"key {key!r} must be {expected}, got {value!r}")
        return value

    def is_names(value: Any) -> bool:
        return (
            isinstance(value, list)
            and len(value) > 0
            and all(isinstance(v, str) and v for v in value)
            and len(set(value)) == len(value)
        )

    def is_rate(value: Any) -> bool:
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value > 0
        )

    name = require("name", lambda v: isinstance(v, str) and v, "a non-empty string")
    rate = require("sampling_rate", is_rate, "a positive number of Hz")
    leads = require("leads", is_names, "a non-empty list of distinct lead names")
    task = require("task", lambda v: v in TASKS, f"one of {', '.join(TASKS)}")
    classes = require("classes", is_names, "a non-empty list of distinct class names")
    if task == TASK_BINARY and len(classes) != 2:
        raise _format_error(path, f"a binary task needs exactly 2 classes, got {classes}")
    segment = meta.get("segment_seconds")
    if segment is not None and not is_rate(segment):
        raise _format_error(
            path, f"key 'segment_seconds' must be a positive number, got {segment!r}"
        )
    description = meta.get("description", "")
    return DatasetDescription(
        name=name,
        sampling_rate=float(rate),
        leads=list(leads),
        task=task,
        classes=list(classes),
        segment_seconds=float(segment) if segment is not None else None,
        description=str(description or ""),
    )


def _valid_record_id(record_id: str) -> bool:
    return (
        bool(record_id)
        and not record_id.startswith(".")
        and not any(sep in record_id for sep in ("/", "\\", "\0"))
    )


def _parse_seconds(path: Path, line: int, column: str, cell: str) -> float | None:
    if cell == "":
        return None
    try:
        value = float(cell)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise _format_error(
            path, f"line {line}: {column} must be a non-negative number of seconds, got {cell!r}"
        )
    return value


def _parse_single_label(path: Path, line: int, cell: str, classes: list[str]) -> int:
    if cell in classes:
        return classes.index(cell)
    try:
        index = int(cell)
    except ValueError:
        index = -1
    if 0 <= index < len(classes):
        return index
    raise _format_error(
        path,
        f"line {line}: label {cell!r} is neither a class name ({', '.join(classes)}) "
        f"nor a class index in [0, {len(classes)})",
    )


def _parse_multi_hot(path: Path, line: int, row: dict[str, str], classes: list[str]) -> np.ndarray:
    values = np.zeros(len(classes), dtype=np.int8)
    for k, name in enumerate(classes):
        cell = (row.get(name) or "").strip()
        if cell not in ("0", "1"):
            raise _format_error(
                path,
                f"line {line}: column {name!r} must be 0 or 1 for a multi-label task, got {cell!r}",
            )
        values[k] = int(cell)
    return values


def read_labels_csv(path: Path, description: DatasetDescription) -> list[LabelRow]:
    """Read and validate ``labels.csv`` against the dataset description.

    Raises:
        DatasetNotFoundError: the file is missing.
        DatasetFormatError: a required column is missing, a cell is invalid
            (line number given), a span is empty or reversed, or two spans of
            one record overlap.
    """
    if not path.is_file():
        raise DatasetNotFoundError(f"{path}: labels file not found; {_PREPARE_HINT}")
    multilabel = description.task == TASK_MULTILABEL
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            header = [h.strip() for h in (reader.fieldnames or [])]
            reader.fieldnames = header
            raw_rows = list(reader)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise _format_error(path, f"not a readable UTF-8 CSV file ({exc})") from exc
    required = [RECORD_COLUMN, *(description.classes if multilabel else [LABEL_COLUMN])]
    missing = [column for column in required if column not in header]
    if missing:
        raise _format_error(
            path,
            f"missing column(s) {', '.join(missing)}; header is {header}, expected "
            f"{RECORD_COLUMN}, optional {PATIENT_COLUMN}, {START_COLUMN}, {END_COLUMN}, then "
            + ("one 0/1 column per class" if multilabel else LABEL_COLUMN),
        )
    rows: list[LabelRow] = []
    for offset, raw in enumerate(raw_rows):
        line = offset + 2  # the header is line 1
        cells = {key: (value or "").strip() for key, value in raw.items() if key is not None}
        record_id = cells.get(RECORD_COLUMN, "")
        if not _valid_record_id(record_id):
            raise _format_error(
                path,
                f"line {line}: record_id {record_id!r} must be a non-empty file name "
                "without path separators",
            )
        start = _parse_seconds(path, line, START_COLUMN, cells.get(START_COLUMN, ""))
        end = _parse_seconds(path, line, END_COLUMN, cells.get(END_COLUMN, ""))
        if start is not None and end is not None and end <= start:
            raise _format_error(path, f"line {line}: end_s ({end}) must exceed start_s ({start})")
        label = (
            _parse_multi_hot(path, line, cells, description.classes)
            if multilabel
            else _parse_single_label(path, line, cells.get(LABEL_COLUMN, ""), description.classes)
        )
        rows.append(
            LabelRow(
                line=line,
                record_id=record_id,
                patient_id=cells.get(PATIENT_COLUMN, "") or record_id,
                start_s=start,
                end_s=end,
                label=label,
            )
        )
    if not rows:
        raise _format_error(path, "no rows; expected one row per record (or per labelled span)")
    _check_spans(path, rows)
    return rows


def _check_spans(path: Path, rows: list[LabelRow]) -> None:
    """Reject overlapping spans of one record, and a record split across patients."""
    by_record: dict[str, list[LabelRow]] = {}
    for row in rows:
        by_record.setdefault(row.record_id, []).append(row)
    for record_id, record_rows in by_record.items():
        patients = {row.patient_id for row in record_rows}
        if len(patients) > 1:
            raise _format_error(
                path, f"record {record_id!r} is assigned to several patients: {sorted(patients)}"
            )
        ordered = sorted(record_rows, key=lambda r: r.start_s or 0.0)
        for previous, current in itertools.pairwise(ordered):
            previous_end = math.inf if previous.end_s is None else previous.end_s
            current_start = current.start_s or 0.0
            if current_start < previous_end - SPAN_TOLERANCE_S:
                raise _format_error(
                    path,
                    f"lines {previous.line} and {current.line}: spans of record {record_id!r} "
                    "overlap; a record without spans must have exactly one row",
                )


def read_record(
    records_dir: Path, record_id: str, *, description: DatasetDescription
) -> tuple[np.ndarray, list[str], Path]:
    """Read one record as float64 ``(n_leads, n_samples)`` with its lead names.

    Returns:
        ``(signal, lead_names, path)``.

    Raises:
        DatasetNotFoundError: neither ``<id>.npz`` nor ``<id>.hea`` exists.
        DatasetFormatError: both exist (ambiguous), the file cannot be read,
            the array is not 2-D with one row per declared lead, holds
            non-finite values, or the stored rate differs from the declared one.
    """
    npz = records_dir / f"{record_id}{NPZ_SUFFIX}"
    header = records_dir / f"{record_id}{WFDB_HEADER_SUFFIX}"
    if npz.is_file() and header.is_file():
        raise DatasetFormatError(
            f"{records_dir}: record {record_id!r} exists both as {npz.name} and as WFDB "
            f"{header.name}; keep exactly one"
        )
    if npz.is_file():
        signal, leads, path = _read_npz(npz, description), description.leads, npz
    elif header.is_file():
        signal, leads = _read_wfdb(header, description)
        path = header
    else:
        raise DatasetNotFoundError(
            f"{npz} (or WFDB {header.name}) not found: labels.csv lists record {record_id!r}"
        )
    if not np.isfinite(signal).all():
        raise _format_error(
            path, f"signal holds {int((~np.isfinite(signal)).sum())} non-finite values"
        )
    return signal, leads, path


def _read_npz(path: Path, description: DatasetDescription) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as archive:
            keys = list(archive.keys())
            signal = archive["signal"] if "signal" in keys else None
            fs = archive["fs"] if "fs" in keys else None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise _format_error(path, f"not a readable .npz archive ({exc})") from exc
    if signal is None:
        raise _format_error(path, f"no 'signal' array (keys: {keys}); expected key 'signal'")
    if signal.dtype.kind not in "fiu":
        raise _format_error(path, f"'signal' must be numeric, got dtype {signal.dtype}")
    expected = f"(n_leads={len(description.leads)}, n_samples >= 1)"
    if signal.ndim != 2 or signal.shape[0] != len(description.leads) or signal.shape[1] == 0:
        raise _format_error(path, f"'signal' has shape {signal.shape}, expected {expected}")
    if fs is not None and (np.size(fs) != 1 or float(fs) != description.sampling_rate):
        raise _format_error(
            path, f"'fs' is {fs}, but dataset.json declares {description.sampling_rate:g} Hz"
        )
    return signal.astype(np.float64)


def _read_wfdb(header: Path, description: DatasetDescription) -> tuple[np.ndarray, list[str]]:
    try:
        with warnings.catch_warnings():
            # wfdb uses pandas APIs deprecated in pandas 3 (at import and in its
            # header parser); the warning concerns wfdb, not the data
            warnings.simplefilter("ignore", DeprecationWarning)
            import wfdb

            record = wfdb.rdrecord(str(header.with_suffix("")))
    except Exception as exc:  # wfdb raises bare Exceptions and OSErrors for bad files
        raise _format_error(
            header, f"not a readable WFDB record ({type(exc).__name__}: {exc})"
        ) from exc
    if record.p_signal is None or record.p_signal.ndim != 2 or record.p_signal.shape[0] == 0:
        raise _format_error(header, "WFDB record has no physical signal samples")
    if float(record.fs) != description.sampling_rate:
        raise _format_error(
            header,
            f"sampling rate is {record.fs:g} Hz, but dataset.json declares "
            f"{description.sampling_rate:g} Hz",
        )
    return np.asarray(record.p_signal, dtype=np.float64).T, list(record.sig_name)


def _span_mask(
    starts: np.ndarray, ends: np.ndarray, span_start: float | None, span_end: float | None
) -> np.ndarray:
    lower = 0.0 if span_start is None else span_start
    upper = math.inf if span_end is None else span_end
    return (starts >= lower - SPAN_TOLERANCE_S) & (ends <= upper + SPAN_TOLERANCE_S)


class LocalECGDataset(BaseECGDataset):
    """A dataset read from the local layout described in this module.

    Args:
        data_dir: the dataset folder (required unless the subclass has a
            registered name, whose default folder is then used).
        sampling_rate: target rate (Hz); the native rate when None.
        leads: lead names; every lead of ``dataset.json`` when None (named
            datasets narrow this default).
        segment_seconds: window length; ``dataset.json``'s, else 10 s, when None.
        download, force_download, verbose, transform, target_transform: see
            :class:`~deepecgkit.datasets.base.BaseECGDataset`.

    Raises:
        DatasetNotFoundError: the folder, ``dataset.json``, ``labels.csv`` or
            a record is missing.
        DatasetFormatError: a malformed file (named, with the row or key).
    """

    #: Classes a subclass requires ``dataset.json`` to declare (None: any).
    expected_classes: tuple[str, ...] | None = None
    #: Task a subclass requires (None: any).
    expected_task: str | None = None
    #: Leads kept by default: the first N of ``dataset.json`` (None: all).
    default_lead_count: int | None = None

    def _resolve_dir(self) -> Path:
        if self.data_dir is not None:
            return self.data_dir
        return type(self).get_default_data_dir()

    def _load(self) -> LoadedWindows:
        root = self._resolve_dir()
        if not root.is_dir():
            raise DatasetNotFoundError(f"{root}: dataset folder not found; {_PREPARE_HINT}")
        description = read_dataset_json(root / DATASET_JSON)
        self._check_expected(root / DATASET_JSON, description)
        rows = read_labels_csv(root / LABELS_CSV, description)
        # explicit names even by default, so WFDB records listing their leads in
        # another order still come out in one channel order
        leads = self.requested_leads or description.leads[: self.default_lead_count]
        target_rate = float(self.requested_sampling_rate or description.sampling_rate)
        window_s = float(
            self.segment_seconds or description.segment_seconds or DEFAULT_SEGMENT_SECONDS
        )
        return self._windows(root, description, rows, leads, target_rate, window_s)

    def _check_expected(self, path: Path, description: DatasetDescription) -> None:
        if (
            self.expected_classes is not None
            and tuple(description.classes) != self.expected_classes
        ):
            raise _format_error(
                path,
                f"classes {description.classes} do not match the "
                f"{self.name or type(self).__name__} classes {list(self.expected_classes)}",
            )
        if self.expected_task is not None and description.task != self.expected_task:
            raise _format_error(
                path,
                f"task {description.task!r} does not match the expected {self.expected_task!r}",
            )

    def _windows(
        self,
        root: Path,
        description: DatasetDescription,
        rows: list[LabelRow],
        leads: list[str],
        target_rate: float,
        window_s: float,
    ) -> LoadedWindows:
        records_dir = root / RECORDS_DIR
        by_record: dict[str, list[LabelRow]] = {}
        for row in rows:
            by_record.setdefault(row.record_id, []).append(row)
        signals: list[np.ndarray] = []
        labels: list[Any] = []
        groups: list[str] = []
        record_ids: list[str] = []
        for record_id, record_rows in by_record.items():
            signal, lead_names, path = read_record(records_dir, record_id, description=description)
            try:
                indices = select_leads(lead_names, leads, source=str(path))
            except ValueError as exc:
                raise DatasetFormatError(str(exc)) from exc
            windows = window_signals(
                signal[indices][np.newaxis],
                native_rate=description.sampling_rate,
                target_rate=target_rate,
                window_s=window_s,
            )
            for row in record_rows:
                keep = _span_mask(windows.start_s, windows.end_s, row.start_s, row.end_s)
                count = int(keep.sum())
                if count == 0:
                    continue
                signals.append(windows.signals[keep])
                labels.extend([row.label] * count)
                groups.extend([row.patient_id] * count)
                record_ids.extend([record_id] * count)
        if not signals:
            raise _format_error(
                root / LABELS_CSV,
                f"no labelled window of {window_s:g} s fits inside the given spans",
            )
        multilabel = description.task == TASK_MULTILABEL
        return LoadedWindows(
            name=self.name or description.name,
            signals=np.concatenate(signals, axis=0),
            labels=np.stack(labels).astype(np.int8) if multilabel else np.asarray(labels, np.int64),
            groups=np.asarray(groups, dtype=str),
            record_ids=np.asarray(record_ids, dtype=str),
            class_names=description.classes,
            task=description.task,
            sampling_rate=target_rate,
            leads=list(leads),
        )
