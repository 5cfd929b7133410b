"""The report's file memos as one columnar table (``report_memos.parquet``).

Each run directory's file memo (:mod:`~deepecgkit.statistical_report.file_memo`)
is a small JSON object of about 750 bytes: three SHA-256 hashes and twenty
nanosecond stat fields. As JSON inside the gzip'd reuse cache, the memos of
100,000 runs were 75 MB of text that every refresh decoded, encoded again
and compressed (about six seconds of a one-run refresh), although one run
had changed. Kept as columns of a Parquet file instead (one row per run
directory, sorted by it), they are read and written at the speed of arrays
and Python builds only the memo objects.

Columns: ``run_dir``; for the directory and for each file name a memo may
record, the five stat fields (``<name>:size`` ... ``<name>:dev``, null where
the memo records no such file) and, for files, ``<name>:sha256``; the facts
``model``, ``dataset`` and ``predictions`` as text, ``seed`` and
``returncode`` as decimal text (exact at any size), ``metadata`` and
``split_info`` as JSON text. A memo that a column cannot hold as it is (a
file name outside the given names, a stat field beyond 64 bits) is left
out: that run is read again on the next build, exactly as any other miss.
The table converts back to the very memo objects it was made from (the
layout :func:`~deepecgkit.statistical_report.file_memo.memo_entry` makes).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from json.encoder import c_make_encoder, encode_basestring_ascii
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["DIRECTORY", "MemoRows", "fresh_memos_table", "memos_from_table", "memos_table"]

DIRECTORY = ":directory"
#: The stat fields of a signature, in its order, with their column types.
_SIGNATURE_FIELDS = (
    ("size", pa.uint64()),
    ("mtime_ns", pa.int64()),
    ("ino", pa.uint64()),
    ("ctime_ns", pa.int64()),
    ("dev", pa.uint64()),
)
_TEXT_FACTS = ("model", "dataset", "predictions")
_INT_FACTS = ("seed", "returncode")
_JSON_FACTS = ("metadata", "split_info")
#: The facts in the order a memo holds them (file_memo._FACT_TYPES).
_FACTS = ("model", "dataset", "seed", "returncode", "metadata", "split_info", "predictions")


def _signature_columns(prefix: str) -> list[str]:
    return [f"{prefix}:{name}" for name, _ in _SIGNATURE_FIELDS]


def _schema(names: Sequence[str]) -> pa.Schema:
    fields = [pa.field("run_dir", pa.string(), nullable=False)]
    for prefix in (DIRECTORY, *names):
        if prefix != DIRECTORY:
            fields.append(pa.field(f"{prefix}:sha256", pa.string()))
        fields.extend(
            pa.field(column, kind)
            for column, (_, kind) in zip(_signature_columns(prefix), _SIGNATURE_FIELDS, strict=True)
        )
    fields.extend(pa.field(name, pa.string()) for name in _FACTS)
    return pa.schema(fields)


def _json_encoder() -> Callable[[Any], str]:
    """Compact JSON text with NaN allowed, on the C encoder where CPython has it.

    Built once: :func:`json.dumps` builds an encoder per call, most of the
    cost of encoding a memo's small ``metadata`` object 100,000 times.
    """
    if c_make_encoder is None:  # pragma: no cover - interpreters without the _json module
        return json.JSONEncoder(allow_nan=True).encode
    chunks = c_make_encoder(
        None, None, encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
    return lambda value: "".join(chunks(value, 0))


_ENCODE = _json_encoder()


def _json_texts(values: list[Any]) -> list[str | None]:
    """Each value's JSON text (None stays None), one encoding per distinct object."""
    texts: dict[int, str] = {}
    out: list[str | None] = []
    for value in values:
        if value is None:
            out.append(None)
            continue
        text = texts.get(id(value))
        if text is None:
            text = texts[id(value)] = _ENCODE(value)
        out.append(text)
    return out


def _signature_arrays(recorded: Sequence[Any], *, offset: int) -> list[pa.Array]:
    """The five stat-field arrays of signatures at ``offset`` in each list (None: all null)."""
    return [
        pa.array([None if r is None else r[offset + index] for r in recorded], kind)
        for index, (_, kind) in enumerate(_SIGNATURE_FIELDS)
    ]


def memos_table(memos: Mapping[str, Any], *, names: Sequence[str]) -> tuple[pa.Table, int]:
    """``(table, memos left out)`` of the memos by run directory, rows sorted by directory.

    Columns are built a whole column at a time (a comprehension each), not
    memo by memo.

    Args:
        memos: run directory -> memo (the layout ``memo_entry`` makes).
        names: every file name a memo may record, in column order.
    """
    known = set(names)
    run_dirs = [d for d in sorted(memos) if known.issuperset(memos[d]["files"])]
    chosen = [memos[d] for d in run_dirs]
    schema = _schema(names)
    # Each column is converted as soon as it is built, so only one list of
    # 100,000 values lives beside the arrays at a time.
    arrays = [pa.array(run_dirs, type=pa.string())]
    try:
        recorded: Sequence[Any] = [m["directory"] for m in chosen]
        arrays.extend(_signature_arrays(recorded, offset=0))
        for name in names:
            recorded = [m["files"].get(name) for m in chosen]
            arrays.append(pa.array([None if r is None else r[0] for r in recorded], pa.string()))
            arrays.extend(_signature_arrays(recorded, offset=1))
        del recorded
        facts: dict[str, pa.Array] = {}
        for key in _TEXT_FACTS:
            facts[key] = pa.array([m[key] for m in chosen], pa.string())
        for key in _INT_FACTS:
            texts = [None if v is None else int.__repr__(v) for v in (m[key] for m in chosen)]
            facts[key] = pa.array(texts, pa.string())
        for key in _JSON_FACTS:
            facts[key] = pa.array(_json_texts([m[key] for m in chosen]), pa.string())
        arrays.extend(facts[key] for key in _FACTS)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        # A stat field beyond 64 bits somewhere: no memo is kept (every run is read next time).
        return pa.Table.from_pylist([], schema=schema), len(memos)
    return pa.Table.from_arrays(arrays, schema=schema), len(memos) - len(run_dirs)


def fresh_memos_table(
    run_dirs: Sequence[str],
    directories: Sequence[Any],
    files: Mapping[str, tuple[Sequence[str], Sequence[Any]]],
    *,
    names: Sequence[str],
    model: Sequence[str],
    dataset: Sequence[str],
    seed: Sequence[int | None],
    returncode: Sequence[int | None],
    metadata: Sequence[Any],
    split_info: Sequence[Any],
) -> pa.Table | None:
    """The memo table of runs read now without predictions, from columns; None on overflow.

    The rows :func:`memos_table` makes of the memos
    :func:`~deepecgkit.statistical_report.file_memo.memo_entry` would give
    these runs, sorted by run directory, without a memo object per run:
    ``directories`` (the five signature fields, a sequence each, in the
    signature's order) and the ``files`` (name -> each run's SHA-256 and its
    five signature fields) give the signatures; every name of ``names`` not in
    ``files`` is recorded absent, and ``predictions`` is null. None when a
    stat field does not fit its column (no memo is kept, as
    :func:`memos_table` does).
    """
    count = len(run_dirs)
    schema = _schema(names)
    arrays = [pa.array(run_dirs, type=pa.string())]
    try:
        arrays.extend(
            pa.array(values, kind)
            for values, (_, kind) in zip(directories, _SIGNATURE_FIELDS, strict=True)
        )
        for name in names:
            if name in files:
                hashes, fields = files[name]
                arrays.append(pa.array(hashes, pa.string()))
                arrays.extend(
                    pa.array(values, kind)
                    for values, (_, kind) in zip(fields, _SIGNATURE_FIELDS, strict=True)
                )
            else:
                arrays.append(pa.nulls(count, pa.string()))
                arrays.extend(pa.nulls(count, kind) for _, kind in _SIGNATURE_FIELDS)
        facts: dict[str, pa.Array] = {
            "model": pa.array(model, pa.string()),
            "dataset": pa.array(dataset, pa.string()),
            "predictions": pa.nulls(count, pa.string()),
        }
        for key, values in (("seed", seed), ("returncode", returncode)):
            texts = [None if v is None else int.__repr__(v) for v in values]
            facts[key] = pa.array(texts, pa.string())
        for key, values in (("metadata", metadata), ("split_info", split_info)):
            facts[key] = pa.array(_json_texts(list(values)), pa.string())
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    arrays.extend(facts[key] for key in _FACTS)
    table = pa.Table.from_arrays(arrays, schema=schema)
    return table.take(pc.sort_indices(table["run_dir"]))  # Python's order of the code points


def memos_from_table(table: pa.Table, *, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The memos of a table :func:`memos_table` wrote, by run directory.

    Memos whose ``metadata`` (or ``split_info``) has the same JSON text share
    one decoded object: the identity contract only reads them.

    Raises:
        ValueError: the table does not have the columns of these ``names``.
    """
    if table.schema.names != _schema(names).names:
        raise ValueError("the memo table does not have the columns of this version")
    column = {name: table.column(name).to_pylist() for name in table.schema.names}
    run_dirs = column["run_dir"]
    directories = [
        None if fields[0] is None else list(fields)
        for fields in zip(*(column[c] for c in _signature_columns(DIRECTORY)), strict=True)
    ]
    files: list[dict[str, list[Any]]] = [{} for _ in run_dirs]
    for name in names:
        hashes = column[f"{name}:sha256"]
        if all(h is None for h in hashes):
            continue
        fields = zip(hashes, *(column[c] for c in _signature_columns(name)), strict=True)
        for recorded_files, recorded in zip(files, fields, strict=True):
            if recorded[0] is not None:
                recorded_files[name] = list(recorded)
    facts: dict[str, list[Any]] = {key: column[key] for key in _TEXT_FACTS}
    for key in _INT_FACTS:
        facts[key] = [None if text is None else int(text) for text in column[key]]
    for key in _JSON_FACTS:
        texts = column[key]
        decoded = {text: json.loads(text) for text in set(texts) if text is not None}
        facts[key] = [None if text is None else decoded[text] for text in texts]
    rows = zip(run_dirs, files, directories, *(facts[key] for key in _FACTS), strict=True)
    return {
        run_dir: {
            "files": recorded_files,
            "directory": directory,
            "model": model,
            "dataset": dataset,
            "seed": seed,
            "returncode": returncode,
            "metadata": metadata,
            "split_info": split_info,
            "predictions": predictions,
        }
        for (
            run_dir,
            recorded_files,
            directory,
            model,
            dataset,
            seed,
            returncode,
            metadata,
            split_info,
            predictions,
        ) in rows
    }


class MemoRows(Mapping[str, dict[str, Any]]):
    """The memos of a memo table by run directory, each built only when it is asked for.

    A refresh at 100,000 runs asks for one or two (the changed runs: see
    :mod:`~deepecgkit.statistical_report.frame_recall`, which compares the
    unchanged ones as columns), so the table stays columns and no memo
    object is made for a run that did not change. A row that does not convert
    (a damaged value) is a miss (:meth:`get` gives None), never an error.

    Raises:
        ValueError: the table does not have the columns of these ``names``.
    """

    def __init__(self, table: pa.Table, *, names: Sequence[str]) -> None:
        if table.schema.names != _schema(names).names:
            raise ValueError("the memo table does not have the columns of this version")
        self.table = table
        self.names = tuple(names)
        directories = table.column("run_dir").to_pylist()
        self._rows = {run_dir: row for row, run_dir in enumerate(directories)}

    @classmethod
    def empty(cls, *, names: Sequence[str]) -> MemoRows:
        """No memo at all (the table of a first build)."""
        return cls(_schema(names).empty_table(), names=names)

    def __getitem__(self, run_dir: str) -> dict[str, Any]:
        row = self._rows[run_dir]
        return memos_from_table(self.table.slice(row, 1), names=self.names)[run_dir]

    def get(self, run_dir: str, default: Any = None) -> Any:
        """The memo of ``run_dir``; ``default`` when there is none or its row does not convert."""
        try:
            return self[run_dir]
        except (KeyError, ValueError, TypeError, pa.ArrowException):
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def rows_of(self, run_dirs: Sequence[str]) -> np.ndarray:
        """``(n,)`` int64 row of each run directory in the table, -1 where it has none."""
        find = self._rows.get
        return np.fromiter((find(d, -1) for d in run_dirs), dtype=np.int64, count=len(run_dirs))

    def signature(self, prefix: str, rows: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """``(recorded, fields)`` of the signatures of ``prefix`` (a file name or DIRECTORY).

        ``recorded`` is the ``(len(rows),)`` mask of rows that record one;
        ``fields`` the five stat-field arrays at ``rows`` (size, mtime_ns,
        ino, ctime_ns, dev; uint64 or int64, 0 where none is recorded).
        """
        columns = [self.table.column(name) for name in _signature_columns(prefix)]
        recorded = np.asarray(columns[0].is_valid())[rows]
        fields = [np.asarray(pc.fill_null(column, 0))[rows] for column in columns]
        return recorded, fields

    def hashed(self, name: str, rows: np.ndarray) -> np.ndarray:
        """``(len(rows),)`` mask of the rows whose memo records the file ``name``."""
        return np.asarray(self.table.column(f"{name}:sha256").is_valid())[rows]

    def texts(self, column: str, rows: np.ndarray) -> list[str | None]:
        """The values of a text column (a hash, a fact) at ``rows``, as Python text or None."""
        return self.table.column(column).take(pa.array(rows, pa.int64())).to_pylist()
