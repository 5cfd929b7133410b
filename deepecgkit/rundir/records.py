"""The in-memory forms of a run: :class:`RunRecord`, :class:`UnreadableRun`, and their frames.

:mod:`deepecgkit.rundir.read` turns a run directory into a :class:`RunRecord`
(or an :class:`UnreadableRun` saying why it cannot be used). This module
holds those two types and the frames made of records: the long runs frame
the analysis works on (:func:`runs_to_frame`, one row per run and metric),
and the one-row-per-record frame the Dagster platform stores between assets
(:func:`records_to_frame` and its inverse :func:`frame_to_records`). Seeds,
split sizes and return codes travel as exact integers
(:mod:`deepecgkit.rundir.int_columns`), never through float.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from deepecgkit.io import display_path
from deepecgkit.rundir.format import SPLIT_SIZE_KEYS
from deepecgkit.rundir.int_columns import exact_int_array, exact_int_value

__all__ = [
    "DIAGNOSTIC_KEYS",
    "RECORD_COLUMNS",
    "RUN_FRAME_COLUMNS",
    "RunRecord",
    "UnreadableRun",
    "frame_to_records",
    "records_to_frame",
    "runs_to_frame",
]

#: Diagnostics keys, in the order every report lists them. ``suspect`` lists
#: usable runs from which something was set aside (an out-of-range value, a
#: repeated column, an unusable split size, an unreadable metadata file).
DIAGNOSTIC_KEYS = ("unreadable", "no_seed", "duplicate", "failed", "suspect")

#: Columns of the long runs frame, in order.
RUN_FRAME_COLUMNS = (
    "run_dir",
    "model",
    "dataset",
    "seed",
    "averaging",
    "multi_label",
    "n_train",
    "n_val",
    "n_test",
    "n_test_groups",
    "metric",
    "value",
)


class RunRecord(NamedTuple):
    """One finished run, as read from its directory.

    ``metrics`` keys follow the order of the schema's metric tuple
    (``SINGLE_LABEL_METRICS`` or ``MULTI_LABEL_METRICS``); ``mtime`` is the
    modification time of ``classification_metrics.csv`` in seconds since the
    epoch. Split sizes and the seed are None when unknown; a seed is kept as
    the exact Python int recorded, whatever its size. ``suspect`` holds one
    note per thing set aside from the run (see :func:`read_run`).
    """

    run_dir: Path
    model: str
    dataset: str
    seed: int | None
    multi_label: bool
    averaging: str
    metrics: dict[str, float]
    n_train: int | None
    n_val: int | None
    n_test: int | None
    n_test_groups: int | None
    mtime: float
    returncode: int | None = None
    fingerprint: str | None = None
    suspect: tuple[str, ...] = ()


class UnreadableRun(NamedTuple):
    """A run directory that could not be read, and why (one short sentence)."""

    run_dir: Path
    reason: str

    def entry(self) -> str:
        """The diagnostics entry: ``"<run dir> (<reason>)"``, printable as UTF-8."""
        return f"{display_path(self.run_dir)} ({self.reason})"


#: Columns of the frame of :func:`records_to_frame`: the RunRecord fields, metrics as JSON text.
RECORD_COLUMNS = list(RunRecord._fields)
#: Integer fields of a record, stored as exact integer columns.
_INT_FIELDS = ("seed", *SPLIT_SIZE_KEYS, "returncode")


def _empty_frame(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype=object) for column in columns})


def runs_to_frame(records: Sequence[RunRecord]) -> pd.DataFrame:
    """Flatten records into the long runs frame: one row per record and metric.

    Records keep their input order and metrics their dict order. Columns are
    :data:`RUN_FRAME_COLUMNS`. Seeds and split sizes are exact integers
    (see :mod:`deepecgkit.rundir.int_columns`): int64 when every value is
    known, nullable ``Int64`` when some is unknown, and Python ints in an
    object column only when a seed does not fit in int64, never float.
    NaN metric values are kept as rows. No records give an empty frame with
    exactly these columns.
    """
    if not records:
        return _empty_frame(RUN_FRAME_COLUMNS)
    counts = np.fromiter((len(r.metrics) for r in records), dtype=np.int64, count=len(records))
    rows = np.repeat(np.arange(len(records)), counts)

    def repeat(values: Iterable[Any], dtype: Any = object) -> np.ndarray:
        return np.repeat(np.asarray(list(values), dtype=dtype), counts)

    def repeat_ints(values: Iterable[int | None]) -> Any:
        return exact_int_array(list(values)).take(rows)

    frame = pd.DataFrame(
        {
            "run_dir": repeat(str(r.run_dir) for r in records),
            "model": repeat(r.model for r in records),
            "dataset": repeat(r.dataset for r in records),
            "seed": repeat_ints(r.seed for r in records),
            "averaging": repeat(r.averaging for r in records),
            "multi_label": repeat((r.multi_label for r in records), dtype=bool),
            **{key: repeat_ints(getattr(r, key) for r in records) for key in SPLIT_SIZE_KEYS},
            "metric": np.fromiter(
                (name for r in records for name in r.metrics), dtype=object, count=counts.sum()
            ),
            "value": np.fromiter(
                (value for r in records for value in r.metrics.values()),
                dtype=np.float64,
                count=counts.sum(),
            ),
        }
    )
    return frame


def records_to_frame(records: list[RunRecord]) -> pd.DataFrame:
    """One row per record; ``metrics`` and ``suspect`` become JSON text so the frame fits a CSV.

    Seeds, split sizes and return codes are exact integer columns (int64,
    nullable Int64, or Python ints for a seed beyond int64), never float.
    """
    rows = []
    for record in records:
        row = record._asdict()
        row["run_dir"] = str(record.run_dir)
        row["metrics"] = json.dumps(record.metrics)
        row["suspect"] = json.dumps(list(record.suspect))
        rows.append(row)
    frame = pd.DataFrame(rows, columns=RECORD_COLUMNS)
    for field in _INT_FIELDS:
        frame[field] = exact_int_array([getattr(record, field) for record in records])
    return frame


def frame_to_records(frame: pd.DataFrame) -> list[RunRecord]:
    """Inverse of :func:`records_to_frame` (as stored and reloaded by the IO manager)."""
    records = []
    for row in frame.to_dict("records"):
        fingerprint = row.get("fingerprint")
        records.append(
            RunRecord(
                run_dir=Path(row["run_dir"]),
                model=str(row["model"]),
                dataset=str(row["dataset"]),
                multi_label=bool(row["multi_label"]),
                averaging=str(row["averaging"]),
                metrics={k: float(v) for k, v in json.loads(row["metrics"]).items()},
                mtime=float(row["mtime"]),
                fingerprint=fingerprint if isinstance(fingerprint, str) and fingerprint else None,
                **{field: exact_int_value(row[field]) for field in _INT_FIELDS},
                suspect=tuple(json.loads(row.get("suspect") or "[]")),
            )
        )
    return records
