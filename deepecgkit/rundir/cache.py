"""Memoised run reading and the state of a tree of run directories.

Re-discovering a grid of 100,000 runs should not parse 100,000 metrics files
again when only one run was added. :class:`RunCache` memoises
:func:`~deepecgkit.rundir.read.read_run` by the path,
modification time (nanoseconds) and size of each run's metrics file. Keying
on the metrics file is sound because writers put
``classification_metrics.csv`` in place last (see
:mod:`deepecgkit.rundir.write`): a rewritten run always changes it.

The cache is columnar: one row per run (:data:`CACHE_SCHEMA`), with the
metrics file's state, the run's dataset, the record's fields as a records
frame holds them (the metrics as ``json.dumps`` text, the ``suspect``
notes as JSON text, integers as decimal text so that a seed of any size
stays exact) and, for a run that could not be read, its reason. A warm
refresh ``stat``-s every candidate, compares the states with the cache's
columns at once (numpy), parses only the runs that changed, and takes the
unchanged runs' rows out of the columns
(:meth:`RunCache.candidate_columns`): no Python record per unchanged run.

On disk the cache is one JSON header line (format version and the SHA-256
of the body) followed by the body, the rows as Parquet, sorted by path. A
file is used only when its header names this format and its checksum, its
Parquet and its schema are whole; anything else (a file another tool
edited, a file cut short, an older format) is ignored as a whole, logged,
and every run parsed again: never a wrong record, never a crash.

:func:`scan_tree_state` summarises a tree as the sorted (path, mtime, size)
triples of its *readable* runs plus a short digest of them. A sensor stores
only the digest as its cursor (Dagster stores the cursor on every tick, so
the listing itself would be too large) and compares digests to decide
whether anything was added, changed or removed. A run whose metrics file
cannot be read yet (still being written in place by a non-atomic writer) is
listed as pending and left out of the digest, so it changes the digest, and
is picked up, on the tick where it becomes readable. A metrics file without
its final line break, or whose row is shorter than its header, is such a
file (see :func:`~deepecgkit.rundir.read.read_run`).

The platform recomputes per dataset, so the sensor and the discovery asset
also need the state of each dataset's runs: :meth:`RunCache.dataset_digests`
gives the same short digest per dataset over the runs the cache visited.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deepecgkit.io import (
    REASON_MISSING,
    UnreadableFileError,
    atomic_write_bytes,
    display_path,
    read_regular_file,
)
from deepecgkit.memory import release_free_memory
from deepecgkit.rundir.format import METRICS_FILENAME, SPLIT_SIZE_KEYS
from deepecgkit.rundir.listing import ListingRecord
from deepecgkit.rundir.read import (
    CandidateColumns,
    find_run_candidate_paths,
    read_chunks,
    read_run,
    read_runs,
)
from deepecgkit.rundir.records import (
    RECORD_INT_FIELDS,
    EncodedRecord,
    RunRecord,
    UnreadableRun,
)

__all__ = [
    "CACHE_SCHEMA",
    "FileState",
    "FileStates",
    "RunCache",
    "ScannedRun",
    "TreeState",
    "entry_digests",
    "metrics_file_state",
    "scan_tree_runs",
    "scan_tree_state",
    "tree_state_of",
]

logger = logging.getLogger(__name__)

#: Hex characters of SHA-256 kept in a tree digest (64 bits: collisions are not a concern).
DIGEST_LENGTH = 16
#: Version of the cache file format; a file of another version is ignored. Version 3
#: added unreadable runs' reasons and the records' ``suspect`` notes; version 4 the
#: dataset of each readable run as a field of its own; version 5 the records'
#: ``checkpoint``, each record's metrics text as a field of its own, and the SHA-256 of
#: the body in the header; version 6 replaced the JSON lines by a Parquet body, one
#: row per run (:data:`CACHE_SCHEMA`).
CACHE_FORMAT_VERSION = 6

#: Fields of a record kept as text (null when the record has none).
_TEXT_FIELDS = ("model", "dataset", "averaging", "metrics", "fingerprint", "suspect", "checkpoint")

#: The columns of a saved cache, one row per run. ``path`` is the run directory as
#: ``os.fsencode`` gives it (a name need not be UTF-8); ``mtime_ns`` and ``size`` the
#: metrics file's state the run was read at; ``reason`` says why a run is unreadable
#: (null for a readable run, whose record fields are null otherwise). ``metrics`` is
#: ``json.dumps`` of the record's metrics and ``suspect`` the JSON list of its notes,
#: as a records frame (:func:`~deepecgkit.rundir.records.records_to_frame`) holds them.
CACHE_SCHEMA = pa.schema(
    [
        ("path", pa.binary()),
        ("mtime_ns", pa.int64()),
        ("size", pa.int64()),
        ("reason", pa.string()),
        ("model", pa.string()),
        ("dataset", pa.string()),
        ("seed", pa.string()),
        ("multi_label", pa.bool_()),
        ("averaging", pa.string()),
        ("metrics", pa.string()),
        *[(field, pa.string()) for field in SPLIT_SIZE_KEYS],
        ("mtime", pa.float64()),
        ("returncode", pa.string()),
        ("fingerprint", pa.string()),
        ("suspect", pa.string()),
        ("checkpoint", pa.string()),
    ]
)
#: The record fields of :data:`CACHE_SCHEMA`, in :class:`RunRecord` order (no ``run_dir``).
RECORD_FIELDS = tuple(field for field in RunRecord._fields if field != "run_dir")
#: Fields every readable row holds (the others are null when the record has none).
_REQUIRED_FIELDS = ("model", "dataset", "multi_label", "averaging", "metrics", "mtime", "suspect")

#: A run directory's path plus this is its metrics file's path.
_METRICS_SUFFIX = os.sep + METRICS_FILENAME


class FileState(NamedTuple):
    """Identity of a run's metrics file: path of the run directory, mtime (ns) and size (bytes)."""

    path: str
    mtime_ns: int
    size: int


#: Runs as parallel lists: directories, metrics-file mtimes (ns), sizes and datasets (None:
#: no readable record).
_Entries = tuple[list[str], list[int], list[int], list[str | None]]


class FileStates(Sequence[FileState]):
    """Many metrics file states as three parallel columns, each :class:`FileState` made on demand.

    What :meth:`~deepecgkit.rundir.tree_index.TreeIndex.unchanged_candidates`
    gives for 100,000 runs: the index already holds the paths, mtimes (ns)
    and sizes as lists, and a tuple per run (made, then taken apart again
    for the comparison with the cache's columns) cost a few tenths of a
    second of every refresh. Every state is of a regular file.
    """

    __slots__ = ("mtimes", "paths", "sizes")

    def __init__(self, paths: Sequence[str], mtimes: Sequence[int], sizes: Sequence[int]) -> None:
        if not len(paths) == len(mtimes) == len(sizes):
            raise ValueError(
                f"{len(paths)} paths, {len(mtimes)} mtimes and {len(sizes)} sizes differ in length"
            )
        self.paths, self.mtimes, self.sizes = paths, mtimes, sizes

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int | slice) -> Any:  # (FileState, or FileStates of a slice)
        if isinstance(index, slice):
            return FileStates(self.paths[index], self.mtimes[index], self.sizes[index])
        return FileState(self.paths[index], self.mtimes[index], self.sizes[index])

    def __eq__(self, other: object) -> bool:
        """Equal to a list of the same states, or to another :class:`FileStates` of them."""
        return isinstance(other, (list, FileStates)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  (mutable columns, as a list)


def metrics_file_state(run_dir: Path | str) -> FileState | None:
    """The :class:`FileState` of a run's metrics file, or None when it is not a regular file."""
    directory = os.fspath(run_dir)
    # What os.path.join gives, without its call (one per run of every rescan).
    joined = directory + _METRICS_SUFFIX if directory[-1:] not in ("", os.sep) else None
    try:
        info = os.stat(joined or os.path.join(directory, METRICS_FILENAME))
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return FileState(directory, info.st_mtime_ns, info.st_size)


def _int_text(value: int | None) -> str | None:
    return None if value is None else str(value)


def _suspect_text(notes: tuple[str, ...]) -> str:
    """The notes as a records frame holds them: ``[]`` for none, else their JSON list."""
    return "[]" if notes == () else json.dumps(list(notes))


def _result_values(result: RunRecord | UnreadableRun) -> dict[str, Any]:
    """One parsed result as the values of a cache row (all but path and file state)."""
    if isinstance(result, UnreadableRun):
        return {"reason": result.reason}
    values: dict[str, Any] = dict(zip(RunRecord._fields, result, strict=True))
    del values["run_dir"]
    for field in RECORD_INT_FIELDS:
        values[field] = _int_text(values[field])
    values["metrics"] = json.dumps(result.metrics)
    values["suspect"] = _suspect_text(result.suspect)
    values["reason"] = None
    return values


def _metrics_of(text: str) -> dict[str, float]:
    """A saved metrics text decoded, every value a float (null: NaN)."""
    return {
        name: math.nan if value is None else float(value)
        for name, value in json.loads(text).items()
    }


def _result_of(values: Mapping[str, Any], run_dir: Path) -> RunRecord | UnreadableRun:
    """The :class:`RunRecord` (or :class:`UnreadableRun`) of one cache row's values."""
    if values["reason"] is not None:
        return UnreadableRun(run_dir, values["reason"])
    fields = {field: values[field] for field in RECORD_FIELDS}
    for field in RECORD_INT_FIELDS:
        fields[field] = None if fields[field] is None else int(fields[field])
    fields["metrics"] = _metrics_of(fields["metrics"])
    fields["suspect"] = tuple(json.loads(fields["suspect"]))
    return RunRecord(run_dir=run_dir, **fields)


def _encoded_of(values: Mapping[str, Any], run_dir: str) -> EncodedRecord | UnreadableRun:
    """The :class:`EncodedRecord` (or :class:`UnreadableRun`) of one cache row's values."""
    if values["reason"] is not None:
        return UnreadableRun(Path(run_dir), values["reason"])
    fields = {field: values[field] for field in RECORD_FIELDS}
    for field in RECORD_INT_FIELDS:
        fields[field] = None if fields[field] is None else int(fields[field])
    fields["suspect"] = tuple(json.loads(fields["suspect"]))
    return EncodedRecord(run_dir=run_dir, **fields)


def _path_array(paths: Sequence[str]) -> pa.Array:
    """Run directories as the ``path`` column (bytes, as ``os.fsencode`` gives them)."""
    try:
        return pa.array(paths, pa.string()).cast(pa.binary())
    except (UnicodeEncodeError, pa.ArrowException):  # a name that is not UTF-8
        return pa.array([os.fsencode(path) for path in paths], pa.binary())


def _path_list(column: pa.ChunkedArray) -> list[str]:
    """The ``path`` column as directory strings (``os.fsdecode`` of each)."""
    try:
        return column.cast(pa.string()).to_pylist()
    except pa.ArrowException:  # a name that is not UTF-8: surrogate escapes, as os.fsdecode
        return [os.fsdecode(path) for path in column.to_pylist()]


def _empty_table() -> pa.Table:
    return CACHE_SCHEMA.empty_table()


def _rows_table(rows: Sequence[tuple[str, int, int, dict[str, Any]]]) -> pa.Table:
    """Cache rows ``(path, mtime_ns, size, values)`` as a table of :data:`CACHE_SCHEMA`.

    ``ValueError`` when a value cannot be stored (a reason that is not UTF-8).
    """
    columns: dict[str, Any] = {
        "path": _path_array([row[0] for row in rows]),
        "mtime_ns": pa.array([row[1] for row in rows], pa.int64()),
        "size": pa.array([row[2] for row in rows], pa.int64()),
    }
    for field in CACHE_SCHEMA.names[3:]:
        kind = CACHE_SCHEMA.field(field).type
        try:
            columns[field] = pa.array([row[3].get(field) for row in rows], kind)
        except (UnicodeEncodeError, pa.ArrowException) as exc:
            raise ValueError(f"{field} cannot be stored: {exc}") from None
    return pa.table(columns, schema=CACHE_SCHEMA)


#: The columns a reader's chunk task gives (:func:`_read_rows`): every one after the state.
_VALUE_FIELDS = CACHE_SCHEMA.names[3:]


def _read_rows(run_dirs: list[str]) -> pa.Table | list[RunRecord | UnreadableRun]:
    """A reader's task: :func:`read_run` of each directory, as the values of its cache row.

    One table (the :data:`_VALUE_FIELDS` columns of :data:`CACHE_SCHEMA`, a
    row per directory) instead of a record per run: the per-run work of
    :func:`_result_values` and :func:`_rows_table` is done where the run was
    read (in a worker, when many), and one Arrow table is cheap to send
    back. A chunk holding a value that cannot be stored (a reason that is
    not UTF-8) comes back as its results, which the cache keeps one by one
    as it keeps any parsed result.
    """
    results = [read_run(run_dir) for run_dir in run_dirs]
    values = [_result_values(result) for result in results]
    columns: dict[str, pa.Array] = {}
    for field in _VALUE_FIELDS:
        try:
            columns[field] = pa.array(
                [row.get(field) for row in values], CACHE_SCHEMA.field(field).type
            )
        except (UnicodeEncodeError, pa.ArrowException):
            return results
    return pa.table(columns)


def _damage_in(table: pa.Table) -> str | None:
    """Why the rows of a loaded table cannot all be whole (None when they can).

    Cheap column-wide checks (the checksum already vouches for every byte):
    a readable row holds every required field, an unreadable one no record,
    and no path appears twice.
    """
    readable = table.column("reason").is_null()
    for field in _REQUIRED_FIELDS:
        if pc.any(pc.and_(readable, table.column(field).is_null())).as_py():
            return f"a readable run without its {field}"
    if pc.any(pc.and_(pc.invert(readable), table.column("model").is_valid())).as_py():
        return "an unreadable run with a record"
    if pc.count_distinct(table.column("path")).as_py() != len(table):
        return "a run directory listed twice"
    return None


#: A parsed run kept since the cache was created or loaded: directory, state (mtime_ns,
#: size), result, and the result as the values of its row (:func:`_result_values`).
_Fresh = tuple[str, int, int, RunRecord | UnreadableRun, dict[str, Any]]


class RunCache:
    """:func:`~deepecgkit.rundir.read.read_run` memoised by the state of each metrics file.

    Use :meth:`read` as the ``reader`` of
    :func:`~deepecgkit.rundir.read.discover_runs`, or the cache itself as
    the ``cache`` of :func:`~deepecgkit.rundir.read.discover_run_frame`
    (which asks :meth:`candidate_columns`). Unreadable runs are cached too,
    with their reason, so a corrupt directory is not parsed on every
    refresh; it is parsed again as soon as its metrics file changes.

    The runs of a loaded file stay in its columns (a pyarrow table, with
    each row's path, state and dataset in plain arrays for the lookups);
    runs parsed since are kept as results beside them, and a lookup of a
    directory finds its current row in one dictionary. A cache is never a
    source of truth: a damaged file is ignored and rebuilt, and the event
    is logged with the cache's path. Runs that the last scan did not visit
    are dropped by :meth:`prune_unvisited`.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = None if path is None else Path(path)
        self.hits = 0
        self.misses = 0
        #: 1 when the file this cache was loaded from was damaged (and ignored), else 0.
        self.damaged = 0
        self._set_table(_empty_table(), [])
        self._fresh: list[_Fresh] = []
        self._visited: set[str] = set()
        #: ``(path, mtime_ns, size)`` of a saved file that holds exactly these entries
        #: (None once an entry is added, replaced or dropped): :meth:`save` need not
        #: write it again.
        self._saved_file: tuple[Path, int, int] | None = None
        #: Entries added, replaced or dropped since the cache was loaded or saved.
        self._unsaved = 0

    def _set_table(self, table: pa.Table, paths: list[str]) -> None:
        """Take ``table``'s rows (directories ``paths``) as this cache's entries."""
        self._table = table
        self._mtime = table.column("mtime_ns").to_numpy()
        self._size = table.column("size").to_numpy()
        self._datasets: list[str | None] = table.column("dataset").to_pylist()
        self._paths = paths
        #: Every entry's current row: below ``len(paths)`` one of the table, above one
        #: of ``_fresh`` (its position plus ``len(paths)``).
        self._rows: dict[str, int] = dict(zip(paths, range(len(paths)), strict=True))

    def __len__(self) -> int:
        return len(self._rows)

    def _where(self) -> str:
        return "in memory" if self.path is None else display_path(self.path)

    # --- one entry ------------------------------------------------------------------------------

    def _state_at(self, row: int) -> tuple[int, int]:
        """``(mtime_ns, size)`` of the entry at ``row``."""
        if row < len(self._paths):
            return int(self._mtime[row]), int(self._size[row])
        _, mtime_ns, size, _, _ = self._fresh[row - len(self._paths)]
        return mtime_ns, size

    def _dataset_at(self, row: int) -> str | None:
        """The dataset of the entry at ``row``; None for an unreadable run."""
        if row < len(self._paths):
            return self._datasets[row]
        result = self._fresh[row - len(self._paths)][3]
        return result.dataset if isinstance(result, RunRecord) else None

    def _store(self, state: FileState, result: RunRecord | UnreadableRun) -> None:
        """Keep a parsed result under the state seen *before* parsing it (counted as a miss).

        If the file changed in between, the next lookup misses and parses again.
        """
        values = _result_values(result)
        self._fresh.append((state.path, state.mtime_ns, state.size, result, values))
        self._rows[state.path] = len(self._paths) + len(self._fresh) - 1
        self._saved_file = None
        self._unsaved += 1
        self.misses += 1

    def known_readable(self, state: FileState) -> bool | None:
        """Whether the run at ``state`` was readable; None when it must be parsed."""
        self._visited.add(state.path)
        row = self._rows.get(state.path)
        if row is None or self._state_at(row) != (state.mtime_ns, state.size):
            return None
        return self._dataset_at(row) is not None

    # --- many lookups at once -------------------------------------------------------------------

    def _lookup(
        self, run_dirs: Sequence[str], states: Sequence[tuple[str, int, int]] | None = None
    ) -> tuple[np.ndarray, list[FileState | None]]:
        """``stat`` each directory's metrics file and find its current entry.

        Returns each directory's row (-1 when it must be parsed: no entry, or
        one of another state) and its state (None when the metrics file is
        no regular file; such a directory's entry is dropped). Marks every
        directory visited. The states are compared with the table's columns
        at once. ``states``, when given, are the metrics files' states just
        read by the caller (one per directory, in order): no ``stat`` again.
        """
        count = len(run_dirs)
        if states is None:
            states = [metrics_file_state(run_dir) for run_dir in run_dirs]
        elif not isinstance(states, FileStates):
            # Plain (path, mtime_ns, size) tuples are accepted (read.py's MetricsState).
            states = list(map(FileState._make, states))
        if len(states) != count:
            raise ValueError(f"{len(states)} states for {count} run directories")
        rows = np.fromiter(map(self._rows.get, run_dirs, [-1] * count), np.int64, count)
        if isinstance(states, FileStates):  # every one of a regular file
            mtimes = np.array(states.mtimes, dtype=np.int64)
            sizes = np.array(states.sizes, dtype=np.int64)
        else:
            mtimes = np.fromiter((0 if s is None else s.mtime_ns for s in states), np.int64, count)
            sizes = np.fromiter((-1 if s is None else s.size for s in states), np.int64, count)
        present = sizes >= 0
        for number in np.flatnonzero(~present & (rows >= 0)):
            del self._rows[run_dirs[number]]
            self._saved_file = None
            self._unsaved += 1
        in_table = present & (rows >= 0) & (rows < len(self._paths))
        same = np.zeros(count, dtype=bool)
        table_rows = rows[in_table]
        same[in_table] = (self._mtime[table_rows] == mtimes[in_table]) & (
            self._size[table_rows] == sizes[in_table]
        )
        for number in np.flatnonzero(present & (rows >= len(self._paths))):
            same[number] = self._state_at(int(rows[number])) == (mtimes[number], sizes[number])
        rows[~same] = -1
        self._visited.update(run_dirs)
        return rows, states

    def _table_values(self, rows: np.ndarray, fields: Sequence[str]) -> dict[str, list[Any]]:
        """The values of ``fields`` at the table's ``rows``, one list per field."""
        taken = self._table.select(list(fields)).take(pa.array(rows, pa.int64()))
        return {field: taken.column(field).to_pylist() for field in fields}

    def _row_values(self, rows: np.ndarray) -> list[dict[str, Any]]:
        """Each of the table's ``rows`` as ``{field: value}`` of its result's fields."""
        fields = CACHE_SCHEMA.names[3:]
        columns = self._table_values(rows, fields)
        return [
            dict(zip(fields, values, strict=True)) for values in zip(*columns.values(), strict=True)
        ]

    def _parse_misses(
        self,
        run_dirs: Sequence[Any],
        misses: Sequence[int],
        states: Sequence[FileState | None],
        workers: int | None,
    ) -> list[RunRecord | UnreadableRun]:
        """Parse the directories at ``misses`` (in parallel when many) and keep each result.

        A directory without a regular metrics file is parsed (read_run says
        why it cannot be read) but not kept.
        """
        paths = [Path(run_dirs[number]) for number in misses]
        parsed = read_runs(paths, workers=workers)
        for number, result in zip(misses, parsed, strict=True):
            state = states[number]
            if state is not None:
                self._store(state, result)
        return parsed

    def _keep_parsed(
        self,
        run_dirs: Sequence[str],
        misses: Sequence[int],
        states: Sequence[FileState | None],
        workers: int | None,
    ) -> tuple[np.ndarray, dict[int, dict[str, Any]]]:
        """Parse the directories at ``misses`` (in parallel when many) and keep each result.

        The workers give each chunk's rows as a table (:func:`_read_rows`),
        appended to this cache's table as they are: no Python record per
        parsed run in this process. A directory without a regular metrics
        file is parsed (read_run says why it cannot be read) but not kept:
        its row is appended without an entry naming it, so it is never saved.

        Returns:
            ``(places, values)``: each miss's row in the table now, or -1 for
            a miss whose chunk came back as results (see :func:`_read_rows`),
            whose row values are ``values[number]`` (its number in ``run_dirs``).
        """
        places = np.full(len(misses), -1, dtype=np.int64)
        values: dict[int, dict[str, Any]] = {}
        if not misses:
            return places, values
        chunks = read_chunks([run_dirs[number] for number in misses], _read_rows, workers=workers)
        tables: list[pa.Table] = []
        tabled: list[int] = []
        start = 0
        for chunk in chunks:
            count = chunk.num_rows if isinstance(chunk, pa.Table) else len(chunk)
            numbers = range(start, start + count)
            start += count
            if isinstance(chunk, pa.Table):
                tables.append(chunk)
                tabled += numbers
                continue
            for position, result in zip(numbers, chunk, strict=True):
                number = misses[position]
                state = states[number]
                if state is None:
                    values[number] = _result_values(result)
                else:
                    self._store(state, result)
                    values[number] = self._fresh[-1][4]
        if tables:
            # One chunk (every take from the table would join 200 of them otherwise); the
            # workers' tables are let go at once, so the rows are held once.
            parsed = pa.concat_tables(tables).combine_chunks()
            tables.clear()
            chunks.clear()
            first = self._append_rows(
                [run_dirs[misses[position]] for position in tabled],
                [states[misses[position]] for position in tabled],
                parsed,
            )
            places[tabled] = np.arange(first, first + len(tabled))
        return places, values

    def _append_rows(
        self, paths: list[str], states: list[FileState | None], values: pa.Table
    ) -> int:
        """Append rows (their :data:`_VALUE_FIELDS` ``values``) to the table; their first row.

        Each row with a state becomes its directory's entry, stored under the
        state seen *before* parsing (counted as a miss), as :meth:`_store`
        keeps a result; a row without one is kept nameless. The entries of
        parsed results kept beside the table move up by the rows added.
        """
        first, count = len(self._paths), len(paths)
        mtimes = np.fromiter((0 if s is None else s.mtime_ns for s in states), np.int64, count)
        sizes = np.fromiter((0 if s is None else s.size for s in states), np.int64, count)
        columns: dict[str, Any] = {
            "path": _path_array(paths),
            "mtime_ns": pa.array(mtimes, pa.int64()),
            "size": pa.array(sizes, pa.int64()),
        }
        columns.update((field, values.column(field)) for field in _VALUE_FIELDS)
        added = pa.table(columns, schema=CACHE_SCHEMA)
        table = pa.concat_tables(
            [self._table, added.replace_schema_metadata(self._table.schema.metadata)]
        )
        for number, entry in enumerate(self._fresh):
            if self._rows.get(entry[0]) == first + number:
                self._rows[entry[0]] = first + count + number
        self._table = table
        self._mtime = np.concatenate([self._mtime, mtimes])
        self._size = np.concatenate([self._size, sizes])
        self._datasets += values.column("dataset").to_pylist()
        self._paths += paths
        rows = self._rows
        for row, (path, state) in enumerate(zip(paths, states, strict=True), start=first):
            if state is not None:
                rows[path] = row
                self.misses += 1
                self._unsaved += 1
                self._saved_file = None
        return first

    def _results(self, run_dirs: Sequence[Any], workers: int | None, *, encoded: bool) -> list[Any]:
        """:meth:`read_many` (``encoded``: :meth:`read_encoded`) of the given directories."""
        texts = [os.fspath(run_dir) for run_dir in run_dirs]
        rows, states = self._lookup(texts)
        results: list[Any] = [None] * len(texts)
        table = np.flatnonzero((rows >= 0) & (rows < len(self._paths)))
        for number, values in zip(table, self._row_values(rows[table]), strict=True):
            key = texts[number] if encoded else run_dirs[number]
            results[number] = _encoded_of(values, key) if encoded else _result_of(values, key)
        for number in np.flatnonzero(rows >= len(self._paths)):
            results[number] = self._fresh[int(rows[number]) - len(self._paths)][3]
        self.hits += int((rows >= 0).sum())
        misses = np.flatnonzero(rows < 0).tolist()
        parsed = self._parse_misses(texts, misses, states, workers)
        for number, result in zip(misses, parsed, strict=True):
            results[number] = result
        if encoded:
            return [_encoded_result(result) for result in results]
        return results

    def read(self, run_dir: Path) -> RunRecord | UnreadableRun:
        """The run's record (or why it is unreadable), parsed only when its metrics file changed."""
        return self.read_many([run_dir], workers=1)[0]

    def read_many(
        self, run_dirs: Sequence[Path], *, workers: int | None = None
    ) -> list[RunRecord | UnreadableRun]:
        """:meth:`read` of every directory, in order, the misses parsed in parallel when many.

        The misses go to :func:`~deepecgkit.rundir.read.read_runs`, which
        parses them in ``workers`` processes (None: one per available CPU)
        when there are at least
        :data:`~deepecgkit.rundir.read.PARALLEL_MIN_RUNS`; results, counts
        and cache contents are those of calling :meth:`read` on each. A hit
        holds the directory as the caller gave it.
        """
        paths = [run_dir if isinstance(run_dir, Path) else Path(run_dir) for run_dir in run_dirs]
        return self._results(paths, workers, encoded=False)

    def read_encoded(
        self, run_dirs: Sequence[str], *, workers: int | None = None
    ) -> list[EncodedRecord | UnreadableRun]:
        """:meth:`read_many` of directories given as text, records as :class:`EncodedRecord`.

        Each result is ``encoded_record`` of what :meth:`read_many` gives (an
        unreadable run as it is), with the same counts and cache contents; a
        cached record's metrics text is used as saved.
        """
        return self._results(run_dirs, workers, encoded=True)

    def candidate_columns(
        self,
        run_dirs: Sequence[str],
        *,
        workers: int | None = None,
        states: Sequence[tuple[str, int, int]] | None = None,
    ) -> CandidateColumns:
        """Every directory's result as columns: what a records frame is selected from.

        ``{field: values}`` with one value per directory in the given order:
        ``reason`` an object array (why a run is unreadable; None for a
        readable one), every record field of :data:`CACHE_SCHEMA` a pyarrow
        array as a row of the cache holds it (integers as decimal text,
        metrics and suspect notes as JSON text; null for an unreadable run
        and for a field the record has none of), each gathered from the
        cache's rows only when asked for
        (:class:`~deepecgkit.rundir.read.CandidateColumns`). Counts and cache
        contents are those of :meth:`read_encoded`: the misses are parsed (in
        parallel when many), and the unchanged runs' rows are taken from the
        table at once, without a Python value per run. ``states`` are the
        metrics files' states when the caller has just read them
        (:meth:`~deepecgkit.rundir.tree_index.TreeIndex.unchanged_candidates`),
        so they are not read again.
        """
        rows, states = self._lookup(run_dirs, states)
        self.hits += int((rows >= 0).sum())
        misses = np.flatnonzero(rows < 0).tolist()
        # Entries kept beside the table give their row values; their rows move on an append.
        first = len(self._paths)
        fresh = np.flatnonzero(rows >= first)
        extra = {number: self._fresh[int(rows[number]) - first][4] for number in fresh.tolist()}
        rows[fresh] = -1
        places, values = self._keep_parsed(run_dirs, misses, states, workers)
        rows[misses] = places
        extra.update(values)
        table = np.flatnonzero(rows >= 0)
        fields = CACHE_SCHEMA.names[4:]
        reasons = np.full(len(run_dirs), None, dtype=object)
        reasons[table] = _object_array(self._table.column("reason").take(rows[table]).to_pylist())
        others = sorted(extra)
        for number in others:
            reasons[number] = extra[number]["reason"]
        # The reasons travel as Python text (one need not be UTF-8); the record fields of
        # the parsed runs are stored as the table stores them, then every row put in place.
        added = _rows_table([("", 0, 0, {**extra[n], "reason": None}) for n in others])
        # The table's rows and the added rows side by side; each field is taken when asked.
        kept = self._table.select(fields)
        added = added.select(fields).replace_schema_metadata(kept.schema.metadata)
        source = pa.concat_tables([kept, added])
        del kept, added
        place = np.empty(len(run_dirs), dtype=np.int64)
        place[table] = rows[table]
        place[np.asarray(others, dtype=np.int64)] = len(self._table) + np.arange(len(others))
        return CandidateColumns(source, place, reasons)

    def scan(self, run_dirs: Sequence[str]) -> list[ScannedRun]:
        """What :func:`scan_tree_runs` sees of each directory: its state and dataset.

        Looks every directory up, parses the misses (in parallel when many)
        and keeps them (counted as misses; a scan counts no hits); the
        dataset is None for a run that is not readable.
        """
        rows, states = self._lookup(run_dirs)
        misses = np.flatnonzero((rows < 0) & np.array([s is not None for s in states], bool))
        self._keep_parsed(run_dirs, misses.tolist(), states, None)
        runs: list[ScannedRun] = []
        for run_dir, state in zip(run_dirs, states, strict=True):
            row = None if state is None else self._rows.get(run_dir)
            runs.append((run_dir, state, None if row is None else self._dataset_at(row)))
        return runs

    def scanned_runs(self, run_dirs: Sequence[str]) -> list[ScannedRun]:
        """What :func:`scan_tree_runs` would have seen of each directory, after a read of them all.

        For directories just looked up (by :meth:`candidate_columns`,
        :meth:`read_encoded` or :meth:`read_many`): a directory without a
        regular metrics file has no entry (its state is None), every other
        one has the state it was read at and, when readable, its dataset.
        """
        rows, mtimes, sizes, datasets = self._entries_of(run_dirs)
        return [
            (run_dir, None, None)
            if row < 0
            else (run_dir, FileState(run_dir, mtime, size), dataset)
            for run_dir, row, mtime, size, dataset in zip(
                run_dirs, rows.tolist(), mtimes, sizes, datasets, strict=True
            )
        ]

    def _entries_of(
        self, run_dirs: Sequence[str]
    ) -> tuple[np.ndarray, list[int], list[int], list[str | None]]:
        """Each directory's current row (-1: none), mtime (ns), size and dataset, at once.

        The state and dataset of a directory without an entry are 0, 0 and None.
        """
        count, first = len(run_dirs), len(self._paths)
        rows = np.fromiter(map(self._rows.get, run_dirs, [-1] * count), np.int64, count)
        in_table = (rows >= 0) & (rows < first)
        table_rows = np.where(in_table, rows, 0)
        mtimes = np.where(in_table, self._mtime[table_rows] if first else 0, 0).tolist()
        sizes = np.where(in_table, self._size[table_rows] if first else 0, 0).tolist()
        names = self._datasets
        datasets = [names[row] if 0 <= row < first else None for row in rows.tolist()]
        for number in np.flatnonzero(rows >= first).tolist():
            row = int(rows[number])
            mtimes[number], sizes[number] = self._state_at(row)
            datasets[number] = self._dataset_at(row)
        return rows, mtimes, sizes, datasets

    # --- pruning and per-dataset states ---------------------------------------------------------

    def prune(self, keep: Iterable[str]) -> None:
        """Forget runs whose directories are no longer in ``keep``."""
        wanted = set(keep)
        for path in [p for p in self._rows if p not in wanted]:
            del self._rows[path]
            self._saved_file = None
            self._unsaved += 1

    def prune_unvisited(self) -> int:
        """Forget every run not looked up since the cache was created or loaded.

        Call it after a complete scan, before :meth:`save`, so that run
        directories deleted since the last save leave the cache.

        Returns:
            The number of entries dropped.
        """
        before = len(self._rows)
        self.prune(self._visited)
        return before - len(self._rows)

    def _visited_entries(self) -> _Entries:
        """The visited readable runs' directories, mtimes (ns), sizes and datasets, as lists."""
        visited = [path for path in self._visited if path in self._rows]
        _, mtimes, sizes, datasets = self._entries_of(visited)
        return visited, mtimes, sizes, datasets

    def _dataset_entries(
        self,
        entries: _Entries | None = None,
    ) -> dict[str, list[tuple[str, int, int]]]:
        """The visited readable runs' ``(directory, mtime_ns, size)`` by dataset, both sorted."""
        return _grouped_entries(*(entries or self._visited_entries()))

    def dataset_states(self) -> dict[str, tuple[FileState, ...]]:
        """The :class:`FileState` of every readable run visited, by dataset.

        Visited are the runs looked up since the cache was created or
        loaded (by :func:`scan_tree_state`, by :meth:`read` as the reader
        of :func:`~deepecgkit.rundir.read.discover_runs`, or by
        :func:`~deepecgkit.rundir.read.discover_run_frame`; all look up
        every candidate). Unreadable runs are left out, as from
        :attr:`TreeState.entries`, whose readable runs these are, grouped by
        the dataset named in their metrics file.

        Call it on a cache created or loaded for one complete scan: a cache
        kept across scans still counts a run that vanished after it was
        visited.

        Returns:
            ``{dataset: states}``, datasets sorted by name and each
            dataset's states sorted by path.
        """
        return {
            dataset: tuple(FileState(*entry) for entry in group)
            for dataset, group in self._dataset_entries().items()
        }

    def dataset_digests(self) -> dict[str, str]:
        """The state digest of each dataset's readable runs visited (see :meth:`dataset_states`).

        Each value is what :attr:`TreeState.digest` would be for a tree of
        that dataset's runs alone, so a dataset's digest changes exactly
        when one of its readable runs is added, changed or removed, and a
        dataset without readable runs has no key. The sensor (after
        :func:`scan_tree_state`) and the discovery asset (after
        :func:`~deepecgkit.rundir.read.discover_run_frame`) compute the
        same map for the same tree. Keys are sorted.
        """
        return entry_digests(self._visited_entries())

    # --- the file -------------------------------------------------------------------------------

    def unsaved_changes(self) -> int:
        """How many entries were added, replaced or dropped since the cache was loaded or saved."""
        return self._unsaved

    def worth_saving(self, *, share: float) -> bool:
        """Whether :meth:`save` should write: the saved file is missing, damaged or much older.

        A cache is a speed-up, never a source of truth, so a saved file a few
        entries behind is as correct as a current one: each entry it lacks
        costs the next scan one parse (milliseconds), while writing 100,000
        entries costs a second. True when there is no saved file of these
        entries and the cache was loaded from none (a first scan), from a
        damaged one, or has changed in at least ``share`` of its entries
        since it was loaded or saved; False when the file already holds
        exactly these entries (:meth:`save` would write nothing).

        Args:
            share: the changed share of the entries (0 to 1) that makes a save pay.
        """
        if self._saved_file is not None:
            return False
        if self.damaged or self.path is None or not self.path.is_file():
            return True
        return self._unsaved >= share * len(self)

    def _current_table(self) -> tuple[pa.Table, pa.Array]:
        """Every entry as one table of :data:`CACHE_SCHEMA`, and the order that sorts it by path.

        The table is the cache's own rows where every one is current (no
        copy); :meth:`save` takes the sorted rows a row group at a time.

        A parsed result whose values cannot be stored (a reason that is not
        UTF-8) is left out, logged: its run is parsed again next time.
        """
        table_rows = [row for row in self._rows.values() if row < len(self._paths)]
        fresh = self._current_fresh()
        try:
            added = _rows_table(fresh)
        except ValueError:
            kept = []
            for row in fresh:
                try:
                    _rows_table([row])
                except ValueError as exc:
                    logger.info(
                        "run cache %s: %s not saved (%s)",
                        self._where(),
                        display_path(row[0]),
                        exc,
                    )
                    continue
                kept.append(row)
            added = _rows_table(kept)
        if len(table_rows) == len(self._paths):  # every row (a cold scan's): no copy to take
            old = self._table
        else:
            old = self._table.take(pa.array(sorted(table_rows), pa.int64()))
        added = added.replace_schema_metadata(old.schema.metadata)
        table = pa.concat_tables([old, added])
        return table, pc.sort_indices(table, [("path", "ascending")])

    def _current_fresh(self) -> list[tuple[str, int, int, dict[str, Any]]]:
        """The parsed results that are still entries (not replaced, pruned or dropped)."""
        first = len(self._paths)
        return [
            (path, mtime_ns, size, values)
            for number, (path, mtime_ns, size, _, values) in enumerate(self._fresh)
            if self._rows.get(path) == first + number
        ]

    def save(self, path: Path | str | None = None) -> Path:
        """Write the cache (atomically): a header line, then the rows as Parquet.

        The header is ``{"format": CACHE_FORMAT_VERSION, "sha256": <hex of
        the body>}``. Nothing is written when ``path`` already holds exactly
        these entries: the file this cache was loaded from, or last saved
        to, still at the modification time and size it had then, and no
        entry added, replaced or dropped since. The platform's one-run
        refresh loads a cache its sensor has just saved with that run in it.
        """
        target = self.path if path is None else Path(path)
        if target is None:
            raise ValueError("save() needs a path for a cache that was not loaded from one")
        if self._saved_file is not None and self._saved_file[0] == target:
            try:
                now = os.stat(target)
            except OSError:
                now = None
            if now is not None and (now.st_mtime_ns, now.st_size) == self._saved_file[1:]:
                return target
        # The header's length is fixed (a 64-digit checksum): the body is written after a
        # placeholder and the header put in place, so the file is never copied whole.
        sink = io.BytesIO()
        sink.write(_header(_checksum(b"")))
        table, order = self._current_table()
        with pq.ParquetWriter(sink, table.schema) as writer:
            for start in range(0, len(order), PARQUET_ROW_GROUP_ROWS):
                rows = order[start : start + PARQUET_ROW_GROUP_ROWS]
                writer.write_table(table.take(rows), row_group_size=PARQUET_ROW_GROUP_ROWS)
        del table, order
        # The row groups' sorted copies are gone: give their memory back before the write.
        release_free_memory()
        start = len(_header(_checksum(b"")))
        with sink.getbuffer() as view:
            checksum = _checksum(view[start:])
        sink.seek(0)
        sink.write(_header(checksum))
        with sink.getbuffer() as data:  # bytes-like: written as it is, not copied to bytes
            final = atomic_write_bytes(target, data)  # type: ignore[arg-type]
        del sink
        info = os.stat(final)
        self._saved_file = (target, info.st_mtime_ns, info.st_size)
        self._unsaved = 0
        return final

    @classmethod
    def load(cls, path: Path | str) -> RunCache:
        """Read a saved cache; a file that is not whole gives an empty cache.

        A missing file is the normal first start (nothing is logged). A file
        of another format version (an older JSON-lines cache among them) is
        ignored (logged at info level). A file that cannot be read, whose
        header is damaged, whose body does not match its checksum, is no
        Parquet of :data:`CACHE_SCHEMA` or holds rows that cannot be whole
        is ignored as a whole, logged as a warning that names the cache, and
        counted in :attr:`damaged`: every run is parsed again.
        """
        cache = cls(path)
        try:
            data, info = read_regular_file(path)
        except UnreadableFileError as exc:
            if exc.reason != REASON_MISSING:
                logger.warning(
                    "run cache %s cannot be read (%s); rebuilding it", cache._where(), exc.reason
                )
            return cache
        end = data.find(b"\n")
        end = len(data) if end < 0 else end
        try:
            fields = json.loads(data[:end])
            version = fields.get("format")
        except (ValueError, AttributeError):
            return cache._rejected("has a damaged header")
        if version != CACHE_FORMAT_VERSION:
            logger.info(
                "run cache %s has format %r, not %d; rebuilding it",
                cache._where(),
                version,
                CACHE_FORMAT_VERSION,
            )
            return cache
        body = memoryview(data)[end + 1 :]
        if fields.get("sha256") != _checksum(body):
            return cache._rejected("does not match its checksum")
        try:
            table = pq.read_table(pa.BufferReader(pa.py_buffer(body)))
        except (pa.ArrowException, OSError, ValueError) as exc:
            return cache._rejected(f"is no readable Parquet ({exc})")
        if not table.schema.equals(CACHE_SCHEMA, check_metadata=False):
            return cache._rejected("has other columns than this version writes")
        problem = _damage_in(table)
        if problem is not None:
            return cache._rejected(f"holds {problem}")
        cache._set_table(table, _path_list(table.column("path")))
        cache._saved_file = (Path(path), info.st_mtime_ns, info.st_size)
        return cache

    def _rejected(self, why: str) -> RunCache:
        """This (empty) cache, its file logged and counted as damaged."""
        logger.warning("run cache %s %s; rebuilding it", self._where(), why)
        self.damaged = 1
        return self


#: Rows per Parquet row group of a saved cache. The save sorts a row group's rows at a
#: time (a copy of 16,384 rows at once, not of all 100,000: the step's peak memory).
PARQUET_ROW_GROUP_ROWS = 1 << 14


def _encoded_result(result: RunRecord | EncodedRecord | UnreadableRun) -> Any:
    """A result as :meth:`RunCache.read_encoded` gives it (a record's metrics as JSON text)."""
    if isinstance(result, RunRecord):
        return EncodedRecord(
            str(result.run_dir), *result[1:6], json.dumps(result.metrics), *result[7:]
        )
    return result


def _object_array(values: list[Any]) -> np.ndarray:
    """``values`` as a one-dimensional object array (never split into a second dimension)."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


@dataclass(frozen=True)
class TreeState:
    """What a tree of runs looks like now.

    Attributes:
        entries: (path, mtime, size) of every readable run, sorted by path.
        pending: run directories whose metrics file cannot be read (yet).
        digest: short SHA-256 over ``entries``; equal digests mean nothing
            readable was added, changed or removed.
    """

    entries: tuple[FileState, ...]
    pending: tuple[str, ...]
    digest: str


def _header(checksum: str) -> bytes:
    """A saved cache's first line, its line break included."""
    return json.dumps({"format": CACHE_FORMAT_VERSION, "sha256": checksum}).encode() + b"\n"


def _checksum(body: bytes | memoryview) -> str:
    """The SHA-256 (hex) of a saved cache's body, recorded in its header."""
    return hashlib.sha256(body).hexdigest()


def _digest(entries: Iterable[tuple[str, int, int]]) -> str:
    """SHA-256 of one ``path<TAB>mtime<TAB>size<LF>`` line per :class:`FileState`, shortened.

    Hashed as one text: 100,000 ``update`` calls cost more than the hashing.
    """
    text = "".join([f"{path}\t{mtime_ns}\t{size}\n" for path, mtime_ns, size in entries])
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]


def _grouped_entries(
    paths: list[str], mtimes: list[int], sizes: list[int], datasets: list[str | None]
) -> dict[str, list[tuple[str, int, int]]]:
    """Each dataset's ``(path, mtime_ns, size)`` entries (runs without one left out), both sorted.

    Grouped first, then each group sorted by path (paths are unique, so this
    is the order of sorting the whole tuples): no comparison of dataset
    names per pair of runs.
    """
    numbers: dict[str, list[int]] = {}
    for number, dataset in enumerate(datasets):
        if dataset is not None:
            group = numbers.get(dataset)
            if group is None:
                numbers[dataset] = group = []
            group.append(number)
    groups: dict[str, list[tuple[str, int, int]]] = {}
    for dataset in sorted(numbers):
        order = sorted(numbers[dataset], key=paths.__getitem__)
        groups[dataset] = [(paths[n], mtimes[n], sizes[n]) for n in order]
    return groups


def entry_digests(entries: _Entries) -> dict[str, str]:
    """The state digest of each dataset's runs, from ``(paths, mtimes, sizes, datasets)``.

    Four parallel lists, one item per run: the run directory, its metrics
    file's mtime (ns) and size, and its dataset, None for a run that is not
    readable (it is left out). The one definition of a dataset digest:
    :meth:`RunCache.dataset_digests` (a discovery that walked or proved the tree) and
    :meth:`~deepecgkit.rundir.tree_index.TreeIndex.dataset_digests` (the
    sensor's change tick, and a refresh's discovery that takes that tick's
    scan) both hash through it.
    Columnar where it can be (:func:`_columnar_digests`), else one group at
    a time; keys are sorted.
    """
    digests = _columnar_digests(*entries)
    if digests is not None:
        return digests
    return {dataset: _digest(group) for dataset, group in _grouped_entries(*entries).items()}


def _columnar_digests(
    paths: list[str], mtimes: list[int], sizes: list[int], datasets: list[str | None]
) -> dict[str, str] | None:
    """:func:`_digest` of each dataset's ``(path, mtime_ns, size)`` lines, sorted, as columns.

    The same digests as grouping the runs by dataset, sorting each group by
    path and hashing its text (:meth:`RunCache.dataset_digests`), without a
    Python string per run: Arrow sorts by dataset and path (UTF-8 byte
    order, which is the code-point order ``sorted`` uses), writes every
    line at once, and each dataset's lines, contiguous in the sorted column,
    are hashed straight from its buffer. Runs without a dataset are left
    out. None (the caller takes the Python road) where a path or a name is
    not valid UTF-8 (an undecodable byte kept as a surrogate) or a state
    does not fit 64 bits.
    """
    try:
        table = pa.table(
            {
                "dataset": pa.array(datasets, pa.string()),
                "path": pa.array(paths, pa.string()),
                "mtime": pa.array(mtimes, pa.int64()),
                "size": pa.array(sizes, pa.int64()),
            }
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError):
        return None
    table = table.filter(pc.is_valid(table["dataset"]))
    order = pc.sort_indices(table, sort_keys=[("dataset", "ascending"), ("path", "ascending")])
    table = table.take(order)
    mtime, size = (pc.cast(table[name], pa.string()) for name in ("mtime", "size"))
    lines = pc.binary_join_element_wise(table["path"], mtime, size, "\t")
    lines = pc.binary_join_element_wise(lines, "", "\n")  # each line ends with its break
    lines = lines.combine_chunks().cast(pa.large_string())
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset :]
    data = memoryview(lines.buffers()[2] or b"")
    # Sorted by dataset, so each dataset's runs are one stretch, in the order counted.
    counts = pc.value_counts(table["dataset"])
    sizes_of = counts.field("counts").to_numpy(zero_copy_only=False)
    ends = np.cumsum(sizes_of)
    starts = ends - sizes_of
    return {
        name: hashlib.sha256(data[offsets[start] : offsets[end]]).hexdigest()[:DIGEST_LENGTH]
        for name, start, end in zip(
            counts.field("values").to_pylist(), starts.tolist(), ends.tolist(), strict=True
        )
    }


#: What a scan saw of one candidate: its directory, its metrics file's state (None when
#: that is no regular file) and its dataset (None when the run is not readable).
ScannedRun = tuple[str, FileState | None, str | None]


def tree_state_of(runs: Sequence[ScannedRun], unlistable: Sequence[str]) -> TreeState:
    """The :class:`TreeState` of a scan's runs and its unlistable directories (display paths).

    Pending are the unlistable directories, then every run that is not
    readable, in the scan's order, as :func:`scan_tree_runs` lists them.
    """
    readable = sorted(state for _, state, dataset in runs if dataset is not None)
    pending = [*unlistable]
    pending += [display_path(d) for d, state, dataset in runs if state is None or dataset is None]
    return TreeState(entries=tuple(readable), pending=tuple(pending), digest=_digest(readable))


def scan_tree_state(
    roots: Sequence[Path | str] | Path | str,
    *,
    recursive: bool = True,
    cache: RunCache | None = None,
) -> TreeState:
    """Scan ``roots`` and summarise the readable runs as a :class:`TreeState`.

    Only runs whose metrics file is new or changed since ``cache`` saw it are
    parsed, so an unchanged tree costs one ``stat`` per run. Pending are the
    runs that cannot be read now (a half-written metrics file among them)
    and the directories that cannot be listed.
    """
    return scan_tree_runs(roots, recursive=recursive, cache=cache)[0]


def scan_tree_runs(
    roots: Sequence[Path | str] | Path | str,
    *,
    recursive: bool = True,
    cache: RunCache | None = None,
    listing: ListingRecord | None = None,
    known: Mapping[str, tuple[int, bool]] | None = None,
) -> tuple[TreeState, list[ScannedRun]]:
    """:func:`scan_tree_state`, and what it saw of every candidate (:data:`ScannedRun`).

    ``listing`` and ``known`` are passed to
    :func:`~deepecgkit.rundir.read.find_run_candidate_paths`; with the
    candidates the listing is what :class:`~deepecgkit.rundir.tree_index.TreeIndex`
    is built from, and ``known`` spares the listings an earlier index proves.
    """
    cache = RunCache() if cache is None else cache
    candidates, problems = find_run_candidate_paths(
        roots, recursive=recursive, listing=listing, known=known
    )
    runs = cache.scan(candidates)
    unlistable = [display_path(problem.run_dir) for problem in problems]
    return tree_state_of(runs, unlistable), runs
