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

import collections
import json
from collections.abc import Collection, Iterator, Sequence
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
    "RECORD_INT_FIELDS",
    "RUN_FRAME_COLUMNS",
    "EncodedRecord",
    "MetricNames",
    "RunRecord",
    "UnreadableRun",
    "encoded_record",
    "frame_metric_names",
    "frame_to_records",
    "record_columns_to_frame",
    "record_frame_to_runs",
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
    ``checkpoint`` is the encoder checkpoint ``run_metadata.json`` records
    (its text, relative to the run directory), None when it records none:
    knowing it from discovery spares the transfer matrix a read of every
    run's metadata (see :func:`~deepecgkit.rundir.read.find_encoder_checkpoints`).
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
    checkpoint: str | None = None


#: A :class:`RunRecord` whose metrics are already the JSON text a records frame holds.
#: What a warm discovery works with (see
#: :func:`~deepecgkit.rundir.read.discover_run_frame`): the run cache keeps each
#: record's metrics as the text ``json.dumps(record.metrics)`` gave when it was
#: saved, so a run that did not change goes into the records frame without its 24
#: numbers being decoded and encoded again (at 20,000 runs that round trip cost most
#: of a second). The fields are :class:`RunRecord`'s, with the same defaults;
#: ``run_dir`` is the directory as text and ``metrics`` that JSON text.
EncodedRecord = collections.namedtuple(
    "EncodedRecord", RunRecord._fields, defaults=tuple(RunRecord._field_defaults.values())
)


def encoded_record(record: RunRecord) -> EncodedRecord:
    """``record`` with its metrics encoded as a records frame holds them (one encoder call)."""
    return EncodedRecord(str(record.run_dir), *record[1:6], json.dumps(record.metrics), *record[7:])


class UnreadableRun(NamedTuple):
    """A run directory that could not be read, and why (one short sentence)."""

    run_dir: Path
    reason: str

    def entry(self) -> str:
        """The diagnostics entry: ``"<run dir> (<reason>)"``, printable as UTF-8."""
        return f"{display_path(self.run_dir)} ({self.reason})"


#: Columns of the frame of :func:`records_to_frame`: the RunRecord fields, metrics as JSON text.
RECORD_COLUMNS = list(RunRecord._fields)
#: Integer fields of a record, stored as exact integer columns (a run cache keeps them as
#: decimal text: :mod:`deepecgkit.rundir.cache`).
RECORD_INT_FIELDS = ("seed", *SPLIT_SIZE_KEYS, "returncode")


def _empty_frame(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype=object) for column in columns})


def _long_frame(columns: dict[str, list[Any]], metrics: Sequence[dict[str, float]]) -> pd.DataFrame:
    """The long runs frame of per-record ``columns`` (one list per field) and ``metrics``.

    ``columns`` holds, for every record in order, the values of
    :data:`RUN_FRAME_COLUMNS` except ``metric`` and ``value``: ``run_dir`` as
    text, split sizes and seeds as exact ints or None. Each record's row is
    repeated once per metric, in the metrics' dict order.

    The per-record frame is built first and its rows are then taken once per
    metric: pandas decides each column's type (and converts text to its string
    type) over one value per record, not over the 18 rows of each.
    """
    counts = np.fromiter(map(len, metrics), dtype=np.int64, count=len(metrics))
    rows = np.repeat(np.arange(len(metrics)), counts)
    per_record = pd.DataFrame(
        {
            "run_dir": np.asarray(columns["run_dir"], dtype=object),
            "model": np.asarray(columns["model"], dtype=object),
            "dataset": np.asarray(columns["dataset"], dtype=object),
            "seed": exact_int_array(columns["seed"]),
            "averaging": np.asarray(columns["averaging"], dtype=object),
            "multi_label": np.asarray(columns["multi_label"], dtype=bool),
            **{key: exact_int_array(columns[key]) for key in SPLIT_SIZE_KEYS},
        }
    )
    total = int(counts.sum())
    frame = per_record.take(rows).reset_index(drop=True)
    frame["metric"] = np.fromiter(
        (name for values in metrics for name in values), dtype=object, count=total
    )
    frame["value"] = np.fromiter(
        (value for values in metrics for value in values.values()), dtype=np.float64, count=total
    )
    return frame


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
    columns: dict[str, list[Any]] = {
        field: [getattr(r, field) for r in records]
        for field in ("model", "dataset", "seed", "averaging", "multi_label", *SPLIT_SIZE_KEYS)
    }
    columns["run_dir"] = [str(r.run_dir) for r in records]
    return _long_frame(columns, [r.metrics for r in records])


def record_frame_to_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """The long runs frame of a :func:`records_to_frame` frame, without building records.

    Equal, dtypes included, to ``runs_to_frame(frame_to_records(frame))``, at
    a fraction of its cost: the columns are converted once each instead of
    one :class:`RunRecord` per row, which at 100,000 runs cost seconds in
    every per-dataset step of the platform.
    """
    if frame.empty:
        return _empty_frame(RUN_FRAME_COLUMNS)
    columns: dict[str, list[Any]] = {
        field: [str(value) for value in frame[field].tolist()]
        for field in ("run_dir", "model", "dataset", "averaging")
    }
    columns["multi_label"] = [bool(value) for value in frame["multi_label"].tolist()]
    for field in ("seed", *SPLIT_SIZE_KEYS):
        columns[field] = [exact_int_value(value) for value in frame[field].tolist()]
    # One decoder call for every row: the values are JSON numbers, made float64 by _long_frame.
    metrics = json.loads("[" + ",".join(frame["metrics"].tolist()) + "]")
    return _long_frame(columns, metrics)


def records_to_frame(records: Sequence[RunRecord] | Sequence[EncodedRecord]) -> pd.DataFrame:
    """One row per record; ``metrics`` and ``suspect`` become JSON text so the frame fits a CSV.

    Seeds, split sizes and return codes are exact integer columns (int64,
    nullable Int64, or Python ints for a seed beyond int64), never float.
    Built column by column (one list per field, the records transposed at
    once), not row by row. A record without suspect notes (nearly all) gets
    the text ``[]`` without a call to the encoder. :class:`EncodedRecord`
    items bring their metrics text along (it is used as it is); the two
    kinds give the same frame for the same runs.
    """
    fields = list(zip(*records, strict=True)) or [()] * len(RECORD_COLUMNS)
    columns: dict[str, Any] = {
        field: list(values) for field, values in zip(RECORD_COLUMNS, fields, strict=True)
    }
    columns["run_dir"] = [str(path) for path in columns["run_dir"]]
    columns["metrics"] = [
        metrics if isinstance(metrics, str) else json.dumps(metrics)
        for metrics in columns["metrics"]
    ]
    columns["suspect"] = [
        "[]" if notes == () else json.dumps(list(notes)) for notes in columns["suspect"]
    ]
    return record_columns_to_frame(columns)


def record_columns_to_frame(columns: dict[str, list[Any]]) -> pd.DataFrame:
    """The records frame of its columns, one list per field of :data:`RECORD_COLUMNS`.

    The one place where the frame's dtypes are decided (:func:`records_to_frame`,
    and :func:`~deepecgkit.rundir.read.discover_run_frame` from a run cache's
    columns, give equal frames for the same runs): ``run_dir`` as text, ``metrics``
    and ``suspect`` as their JSON texts, the integer fields as exact Python ints
    or None (made exact integer columns here), the other fields as a record
    holds them. Lists of equal length; none for no records.
    """
    columns = dict(columns)
    for field in RECORD_INT_FIELDS:
        columns[field] = exact_int_array(columns[field])
    if not len(columns["run_dir"]):  # empty object columns (not float), the integer ones int64
        return pd.DataFrame(columns=RECORD_COLUMNS).assign(
            **{field: columns[field] for field in RECORD_INT_FIELDS}
        )
    return pd.DataFrame(columns, columns=RECORD_COLUMNS)


def _quoted_names(texts: Any) -> set[str]:
    """The distinct pieces between the 1st and 2nd, 3rd and 4th... quote of every text.

    ``texts`` is a pyarrow string array of texts that each hold an even
    number of quotes and no backslash. Its bytes are scanned once for quotes
    (numpy); the pieces become one string array over the same bytes (no
    copy), made unique by pyarrow.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    _, offsets, data = texts.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32)[texts.offset : texts.offset + len(texts) + 1]
    body = np.frombuffer(data, dtype=np.uint8)[: int(bounds[-1])] if len(texts) else np.empty(0)
    quotes = np.flatnonzero(body == ord('"')).astype(np.int32)
    quotes = quotes[quotes >= bounds[0]]
    if len(quotes) < 2:
        return set()
    quotes[0::2] += 1  # a piece starts after its opening quote and ends at its closing one
    pieces = pa.StringArray.from_buffers(len(quotes) - 1, pa.py_buffer(quotes), data)
    names = pieces.filter(pa.array(np.arange(len(quotes) - 1) % 2 == 0))
    return set(pc.unique(names).to_pylist())


def _metrics_texts(frame: pd.DataFrame) -> Any:
    """A records frame's ``metrics`` texts as one pyarrow text array (``string`` or
    ``large_string``, as the column holds them: pandas' text dtype is ``large_string``)."""
    import pyarrow as pa

    column = frame["metrics"]
    texts = pa.array(column.tolist() if column.dtype == object else column)
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        texts = texts.cast(pa.string())
    return texts


def _text_bytes(texts: Any) -> bytes:
    """The UTF-8 bytes of a text array's values, one after the other (one copy)."""
    import pyarrow as pa

    _, offsets, data = texts.buffers()
    if data is None or not len(texts):
        return b""
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    bounds = np.frombuffer(offsets, dtype=width)[texts.offset : texts.offset + len(texts) + 1]
    start, end = int(bounds[0]), int(bounds[-1])
    return data.slice(start, end - start).to_pybytes()


def _split_escaped(texts: Any) -> tuple[Any, list[dict]]:
    """The texts without a backslash (a pyarrow ``string`` array), and the others decoded by
    the JSON decoder (a text with an escaped character is rare)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = texts.cast(pa.string())
    decoded: list[dict] = []
    data = texts.buffers()[2]
    if data is not None and (np.frombuffer(data, dtype=np.uint8) == ord("\\")).any():
        escaped = pc.match_substring(texts, "\\").fill_null(False)
        decoded = [json.loads(text) for text in texts.filter(escaped).to_pylist()]
        texts = texts.filter(pc.invert(escaped))
    return texts, decoded


#: Characters of a metric name that :class:`MetricNames` leaves to the full set of names.
_UNSEARCHABLE = frozenset(':"\\{}')


class MetricNames(Collection[str]):
    """The metric names a records frame reports, asked about one name at a time.

    ``name in MetricNames(frame)`` is ``name in frame_metric_names(frame)``
    at the cost of one substring search of the ``metrics`` texts: in a text
    without a backslash every piece between two consecutive quotes is either
    a key or the text between two keys, which always holds a colon (values
    are numbers, :func:`frame_metric_names`), so a name without a colon, a
    quote or a backslash is a key of some text exactly when ``"name"``
    occurs in it. Other names, a frame whose texts hold an escape (a
    backslash: the name may be written escaped), iteration and ``len`` use
    the full set, computed once. The texts' bytes are also gathered once, on
    the first search. Non-ASCII names match as written (the texts are UTF-8).
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame
        self._names: set[str] | None = None
        self._body: bytes | None = None

    def _all(self) -> set[str]:
        if self._names is None:
            self._names = frame_metric_names(self._frame)
        return self._names

    def __contains__(self, name: object) -> bool:
        if self._names is not None or not isinstance(name, str) or not name:
            return name in self._all()
        if _UNSEARCHABLE & set(name):
            return name in self._all()
        if self._body is None:
            self._body = _text_bytes(_metrics_texts(self._frame))
        body = self._body
        if b"\\" in body:  # an escaped character somewhere: the decoder's names decide
            return name in self._all()
        # Every text is a JSON object, ``{`` to ``}``, and the name holds no brace, so the
        # quoted name cannot run from one text into the next.
        return f'"{name}"'.encode() in body

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def frame_metric_names(frame: pd.DataFrame) -> set[str]:
    """Every metric name any row of a records frame reports (the keys of its ``metrics`` texts).

    Equal to ``{name for record in frame_to_records(frame) for name in record.metrics}``
    without decoding a single value. Values are JSON numbers, ``NaN`` or
    ``Infinity``, which hold no quote, so in a text without a backslash
    (no escaped character) every second piece between quotes is a key, and
    the pieces of all such texts are found at once (:func:`_quoted_names`);
    a text with a backslash goes through the JSON decoder.
    """
    texts, decoded = _split_escaped(_metrics_texts(frame))
    names: set[str] = set()
    for metrics in decoded:
        names.update(metrics)
    return names | _quoted_names(texts)


def frame_to_records(frame: pd.DataFrame) -> list[RunRecord]:
    """Inverse of :func:`records_to_frame` (as stored and reloaded by the IO manager)."""
    columns = {column: frame[column].tolist() for column in frame.columns}
    missing: list[Any] = [None] * len(frame)
    fingerprints = columns.get("fingerprint", missing)
    suspects = columns.get("suspect", missing)
    checkpoints = columns.get("checkpoint", missing)
    ints = [[exact_int_value(value) for value in columns[field]] for field in RECORD_INT_FIELDS]
    records = []
    for i, (fingerprint, suspect) in enumerate(zip(fingerprints, suspects, strict=True)):
        records.append(
            RunRecord(
                run_dir=Path(columns["run_dir"][i]),
                model=str(columns["model"][i]),
                dataset=str(columns["dataset"][i]),
                multi_label=bool(columns["multi_label"][i]),
                averaging=str(columns["averaging"][i]),
                metrics={k: float(v) for k, v in json.loads(columns["metrics"][i]).items()},
                mtime=float(columns["mtime"][i]),
                fingerprint=fingerprint if isinstance(fingerprint, str) and fingerprint else None,
                **{field: values[i] for field, values in zip(RECORD_INT_FIELDS, ints, strict=True)},
                suspect=tuple(json.loads(suspect or "[]")),
                checkpoint=checkpoints[i] if isinstance(checkpoints[i], str) else None,
            )
        )
    return records
