"""The identity contract over columns for runs read now: plain runs without predictions.

A first build at 100,000 runs reads every run directory, and on the scale
corpora nearly every run keeps no predictions (or failed), so the contract
excludes it at check 2 or 3 after check 1 read its three files. The per-run
road of :mod:`~deepecgkit.statistical_report.identity` spends most of its
time around the reads, not in them: a :class:`RunInput`, a directory
listing, a memo dict and a dozen calls per run, then one log record per
exclusion and one memo object per run for the memo table. Here such runs
are read in one tight loop and come out as columns: a
:class:`~deepecgkit.statistical_report.frame_recall.Recalled` (the same
value the columnar recall of unchanged runs gives, merged with it by
position) and the rows of the memo table
(:func:`~deepecgkit.statistical_report.memo_table.fresh_memos_table`).

A run is read here only when the per-run road would give it exactly this
outcome and this memo from exactly these bytes; anything else hands it to
that road, which then reads it from the start:

* the caller gave its record, and the metrics file's ``fstat`` mtime is the
  record's (the per-run road would take model, dataset, seed and
  returncode from the record too; otherwise it parses the metrics file);
* the run directory's ``lstat`` (taken once, by the run ids' resolution) is
  a directory's, not a link's: it is the signature the memo records, taken
  before anything inside was looked at, as the per-run road takes its own;
* neither ``predictions.csv`` nor ``predictions.txt`` has an entry of any
  type (``lstat`` fails with ``ENOENT``, the per-run road's "not in the
  listing"): a run with predictions, or a dangling link of that name, goes
  the per-run road;
* each of the three hashed files opens with the one safe open's flags
  (:func:`~deepecgkit.io.read_regular_file`), is a regular file by its
  ``fstat`` and gives at least the bytes ``fstat`` reported in one read (the
  one read :func:`~deepecgkit.io.read_regular_file` then returns as it is),
  and the metadata and split files hold JSON objects. A missing optional
  file, a permission, a FIFO, a short read or a parse failure: per-run road
  (its exclusion detail, such as ``unreadable``'s, comes from there).

The bytes hashed are the bytes parsed; the checked fields, exclusion detail
and fingerprint counts are computed by the same rules as
:func:`~deepecgkit.statistical_report.identity.assess_runs` (tested against
it run for run).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from array import array
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np
import pyarrow as pa

from deepecgkit.io import READ_SLACK_BYTES, SAFE_READ_FLAGS
from deepecgkit.rundir.format import (
    METADATA_FILENAME,
    METRICS_FILENAME,
    PREDICTIONS_FILENAME,
    PREDICTIONS_TXT_FILENAME,
    SPLIT_INFO_FILENAME,
)
from deepecgkit.rundir.read import available_cpus
from deepecgkit.statistical_report.frame_recall import Recalled, RunColumns
from deepecgkit.statistical_report.identity import (
    CHECKED_METADATA_FIELDS,
    CHECKED_SPLIT_FIELDS,
    FAILED_RUN,
    HASHED_FILES,
    NO_PREDICTIONS,
)
from deepecgkit.statistical_report.memo_table import fresh_memos_table

__all__ = ["Fresh", "merge_recalled", "read_fresh"]

_NO_PREDICTIONS_DETAIL = "neither predictions.csv nor predictions.txt"
_PREDICTIONS_NAMES = (PREDICTIONS_FILENAME, PREDICTIONS_TXT_FILENAME)
#: The exact types of the checked values equal dicts may share one object for.
_SHARED_TYPES = frozenset({str, int, bool, type(None)})
_U64 = 2**64
_I64 = 2**63
#: Runs per chunk of reads (a thread's task).
_CHUNK_RUNS = 2_000
#: Threads reading at most (the reads wait on the file system, not on a CPU).
_MAX_THREADS = 4
#: Every name a memo may record, in the memo table's column order (``reuse``'s).
MEMO_NAMES = (*HASHED_FILES, *_PREDICTIONS_NAMES)


@dataclass(frozen=True)
class Fresh:
    """The runs read as columns, and those left to the per-run road.

    Attributes:
        recalled: the runs read here, all excluded (``failed_run`` or
            ``no_predictions``), with ``rows`` -1 (they have no earlier memo row).
        table: their memos, as rows of the memo table (sorted by run directory).
        others: ``(m,)`` int64 positions, ascending, of the runs the per-run road reads.
    """

    recalled: Recalled
    table: pa.Table | None
    others: np.ndarray


class _Odd(Exception):
    """The run is not a plain one: the per-run road reads it."""


def _absent(path: str) -> None:
    """Nothing of any type is at ``path`` (else ``_Odd``)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return
    except (OSError, ValueError):
        raise _Odd from None
    raise _Odd


def _read(path: str) -> tuple[bytes, os.stat_result]:
    """The bytes and ``fstat`` of a plain regular file read in one call (else ``_Odd``)."""
    try:
        descriptor = os.open(path, SAFE_READ_FLAGS)
    except (OSError, ValueError):
        raise _Odd from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise _Odd
        data = os.read(descriptor, info.st_size + READ_SLACK_BYTES)
    except OSError:
        raise _Odd from None
    finally:
        os.close(descriptor)
    if len(data) < info.st_size:
        raise _Odd
    return data, info


def _object(data: bytes) -> dict:
    """A JSON file's top-level object (else ``_Odd``: the per-run road words the detail)."""
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Odd from None
    if type(parsed) is not dict:
        raise _Odd
    return parsed


#: The stat fields of a signature and the ``array`` type code each is kept in (a value
#: that does not fit makes its run an odd one: the memo table could not hold it either).
_SIGNATURE = (("st_size", "Q"), ("st_mtime_ns", "q"), ("st_ino", "Q"), ("st_ctime_ns", "q"))
_SIGNATURE_DEV = ("st_dev", "Q")
#: Marks a checked field the file does not hold.
_ABSENT = object()


class _Chunk:
    """What one chunk of runs gave, as columns (a few bytes per value, no object per run).

    ``taken`` marks the runs read here (False: the per-run road's); the
    other columns hold one value per taken run: for each hashed file its
    SHA-256 and five signature arrays, and the checked metadata and split fields.
    """

    def __init__(self) -> None:
        self.taken: list[bool] = []
        self.hashes: list[list[str]] = [[] for _ in HASHED_FILES]
        self.signatures: list[list[array]] = [
            [array(code) for _, code in (*_SIGNATURE, _SIGNATURE_DEV)] for _ in HASHED_FILES
        ]
        self.metadata: list[dict[str, Any]] = []
        self.split_info: list[dict[str, Any]] = []


def _checked(parsed: dict, fields: tuple[str, str], shared: dict[Any, dict]) -> dict[str, Any]:
    """The two ``fields`` of ``parsed``; one object for equal ones (encoded once in the table).

    Only values of the exact types text, int, bool and None are compared
    (with their types: ``1`` never stands for ``True``, nor ``0.0`` for ``-0.0``).
    """
    first, second = fields
    a, b = parsed.get(first, _ABSENT), parsed.get(second, _ABSENT)
    key = (type(a), a, type(b), b)
    if type(a) in _SHARED_TYPES and type(b) in _SHARED_TYPES:
        checked = shared.get(key)
        if checked is not None:
            return checked
    checked = {key: parsed[key] for key in fields if key in parsed}
    if type(a) in _SHARED_TYPES and type(b) in _SHARED_TYPES:
        shared[key] = checked
    return checked


def _read_chunk(prefixes: list[str | None], mtimes: list[float]) -> _Chunk:
    """Read each plain run of a chunk (``taken`` False for one the per-run road must read).

    ``prefixes`` are the run directories with a trailing separator (None: not
    a candidate); ``mtimes`` the records' metrics mtimes. A JSON file's text
    is parsed once per distinct content (the split files of a corpus are
    mostly equal).
    """
    chunk = _Chunk()
    parsed: dict[bytes, dict] = {}
    shared: dict[Any, dict] = {}
    sha256 = hashlib.sha256
    for prefix, mtime in zip(prefixes, mtimes, strict=True):
        if prefix is None:
            chunk.taken.append(False)
            continue
        try:
            for name in _PREDICTIONS_NAMES:
                _absent(prefix + name)
            metrics, metrics_info = _read(prefix + METRICS_FILENAME)
            if metrics_info.st_mtime != mtime:
                raise _Odd
            meta, meta_info = _read(prefix + METADATA_FILENAME)
            facts = parsed.get(meta)
            if facts is None:
                facts = parsed[meta] = _object(meta)
            splits, split_info = _read(prefix + SPLIT_INFO_FILENAME)
            split_facts = parsed.get(splits)
            if split_facts is None:
                split_facts = parsed[splits] = _object(splits)
            signatures = [
                [
                    info.st_size,
                    info.st_mtime_ns,
                    info.st_ino,
                    info.st_ctime_ns,
                    info.st_dev,
                ]
                for info in (metrics_info, meta_info, split_info)
            ]
            for values in signatures:  # each fits its array (checked before any is kept)
                if not (0 <= values[0] < _U64 and 0 <= values[2] < _U64 and 0 <= values[4] < _U64):
                    raise _Odd
                if not (-_I64 <= values[1] < _I64 and -_I64 <= values[3] < _I64):
                    raise _Odd
        except _Odd:
            chunk.taken.append(False)
            continue
        chunk.taken.append(True)
        contents = (metrics, meta, splits)
        for index, (data, values) in enumerate(zip(contents, signatures, strict=True)):
            chunk.hashes[index].append(sha256(data).hexdigest())
            for column, value in zip(chunk.signatures[index], values, strict=True):
                column.append(value)
        chunk.metadata.append(_checked(facts, CHECKED_METADATA_FIELDS, shared))
        chunk.split_info.append(_checked(split_facts, CHECKED_SPLIT_FIELDS, shared))
    return chunk


def _read_all(prefixes: list[str | None], mtimes: list[float]) -> list[_Chunk]:
    """:func:`_read_chunk` of every run, chunks in order, in threads when there are many.

    The reads are system calls, which release the interpreter lock (most of
    a run's cost on a busy file system), so threads overlap them without a
    process, a pickle or a copy; the parsing stays serial under the lock.
    """
    chunks = [
        (prefixes[start : start + _CHUNK_RUNS], mtimes[start : start + _CHUNK_RUNS])
        for start in range(0, len(prefixes), _CHUNK_RUNS)
    ]
    workers = min(available_cpus(), _MAX_THREADS, len(chunks))
    if workers < 2:
        return [_read_chunk(*chunk) for chunk in chunks]
    with ThreadPoolExecutor(workers, thread_name_prefix="report-read") as pool:
        return list(pool.map(lambda chunk: _read_chunk(*chunk), chunks))


def read_fresh(
    run_dirs: Sequence[str],
    directories: Sequence[os.stat_result | None],
    positions: Sequence[int],
    *,
    records: RunColumns,
) -> Fresh:
    """Read the runs at ``positions`` as columns where they are plain (the module docstring).

    Args:
        run_dirs: every run's resolved directory (text).
        directories: every run directory's ``lstat`` (None where none was
            taken or the path is a link).
        positions: the positions (ascending) of the runs to read.
        records: the caller's records, in ``run_dirs`` order.
    """
    mtimes = records.mtime.tolist()
    seen: set[str] = set()
    prefixes: list[str | None] = []
    try:  # (a name that is not UTF-8 cannot be a memo table's text: the per-run road's)
        "".join(run_dirs[p] for p in positions).encode("utf-8")
        encodes = None
    except UnicodeEncodeError:
        encodes = _encodes
    for position in positions:
        path, info = run_dirs[position], directories[position]
        if (
            info is None
            or not stat.S_ISDIR(info.st_mode)
            or path.endswith("/")
            or path in seen
            or (encodes is not None and not encodes(path))
        ):
            prefixes.append(None)  # a link, a root, a second name of one directory ...
            continue
        seen.add(path)
        prefixes.append(path + "/")
    del seen
    chunks = _read_all(prefixes, [mtimes[p] for p in positions])
    del prefixes
    flags = [flag for chunk in chunks for flag in chunk.taken]
    taken = [p for p, flag in zip(positions, flags, strict=True) if flag]
    others = [p for p, flag in zip(positions, flags, strict=True) if not flag]
    model = [records.model[p] for p in taken]
    dataset = [records.dataset[p] for p in taken]
    seed = [records.seed[p] for p in taken]
    returncode = [records.returncode[p] for p in taken]
    metadata = [value for chunk in chunks for value in chunk.metadata]
    reasons, details, fingerprints = _outcomes(model, dataset, returncode, metadata)
    hashes = {
        name: [value for chunk in chunks for value in chunk.hashes[index]]
        for index, name in enumerate(HASHED_FILES)
    }
    signatures = {
        name: [
            np.concatenate(
                [np.frombuffer(chunk.signatures[index][field], dtype=code) for chunk in chunks]
            )
            for field, code in enumerate(("u8", "i8", "u8", "i8", "u8"))
        ]
        for index, name in enumerate(HASHED_FILES)
    }
    table = fresh_memos_table(
        [run_dirs[p] for p in taken],
        _directory_fields([directories[p] for p in taken]),
        {name: (hashes[name], signatures[name]) for name in HASHED_FILES},
        names=MEMO_NAMES,
        model=model,
        dataset=dataset,
        seed=seed,
        returncode=returncode,
        metadata=metadata,
        split_info=[value for chunk in chunks for value in chunk.split_info],
    )
    recalled = Recalled(
        np.array(taken, dtype=np.int64),
        np.full(len(taken), -1, dtype=np.int64),
        reasons,
        details,
        model,
        dataset,
        seed,
        hashes,  # type: ignore[arg-type]
        fingerprints,
    )
    return Fresh(recalled, table, np.array(others, dtype=np.int64))


def _encodes(text: str) -> bool:
    """Whether ``text`` is valid UTF-8 text (no lone surrogate from an undecodable name)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _directory_fields(infos: list[Any]) -> list[list[int]] | None:
    """The five signature fields of the directories' ``lstat`` results, a list each."""
    return [list(map(attrgetter(name), infos)) for name, _ in (*_SIGNATURE, _SIGNATURE_DEV)]


def _outcomes(
    model: list[str],
    dataset: list[str],
    returncode: list[int | None],
    metadata: list[dict],
) -> tuple[list[str], list[str], dict[tuple[str, str], Counter[str]]]:
    """Each run's exclusion (check 2, else 3) and the fingerprints of those that did not fail.

    As :func:`~deepecgkit.statistical_report.identity.assess_runs` words them.
    """
    reasons = [NO_PREDICTIONS] * len(model)
    details = [_NO_PREDICTIONS_DETAIL] * len(model)
    counted: Counter[tuple[str, str, str]] = Counter()
    for index, code in enumerate(returncode):
        if code is not None and code != 0:
            error = metadata[index].get("error")
            reasons[index] = FAILED_RUN
            details[index] = f"returncode {code}" + (f": {error}" if isinstance(error, str) else "")
            continue
        fingerprint = metadata[index].get("params_fingerprint")
        if isinstance(fingerprint, str) and fingerprint:
            counted[(model[index], dataset[index], fingerprint)] += 1
    fingerprints: dict[tuple[str, str], Counter[str]] = {}
    for (m, d, fingerprint), count in sorted(counted.items()):
        fingerprints.setdefault((m, d), Counter())[fingerprint] = count
    return reasons, details, fingerprints


def merge_recalled(first: Recalled, second: Recalled) -> Recalled:
    """The runs of both, by position (``first``'s and ``second``'s positions are disjoint)."""
    if not len(second.positions):
        return first
    if not len(first.positions):
        return second
    positions = np.concatenate([first.positions, second.positions])
    order = np.argsort(positions, kind="stable")

    def merged(a: list, b: list) -> list:
        values = np.empty(len(a) + len(b), dtype=object)
        values[: len(a)] = a
        values[len(a) :] = b
        return values[order].tolist()

    fingerprints = {cell: Counter(counts) for cell, counts in first.fingerprints.items()}
    for cell, counts in second.fingerprints.items():
        fingerprints.setdefault(cell, Counter()).update(counts)
    return Recalled(
        positions[order],
        np.concatenate([first.rows, second.rows])[order],
        merged(first.reason, second.reason),
        merged(first.detail, second.detail),
        merged(first.model, second.model),
        merged(first.dataset, second.dataset),
        merged(first.seed, second.seed),
        {name: merged(first.hashes[name], second.hashes[name]) for name in HASHED_FILES},
        fingerprints,
    )
