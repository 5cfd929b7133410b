"""The identity contract over columns: unchanged runs without predictions, recalled at once.

At 100,000 runs nearly every run of a refresh is one the previous build
already excluded because it kept no predictions (``no_predictions``) or
failed (``failed_run``), and whose files did not change. The per-run road of
:mod:`~deepecgkit.statistical_report.identity` gives such a run a
:class:`~deepecgkit.statistical_report.identity.RunInput`, a memo dict and a
dozen Python calls; here the whole corpus is checked as arrays instead, and
a run recalled this way is a row of :class:`Recalled`'s columns, no object.

A run is recalled here only when the per-run road would recall it from its
memo with the same outcome, the same memo and no file read:

* the memo records no predictions file and the run directory's ``lstat``
  (taken once, by the run ids' resolution: a directory, not a link) has the
  memo's directory signature. That signature is the run's only guard
  against a *new entry*: a ``predictions.csv`` written since, or a
  metadata or split file that was absent (each changes the directory's
  mtime and ctime), so it cannot be spared;
* every file the memo records (the metrics file, and the metadata and split
  files where they were present) is a regular file with the memo's stat
  signature. These ``stat`` calls guard against an *edit in place*: a file
  rewritten through the same inode changes its own mtime and ctime, never
  its directory's, so only its own ``stat`` can see it (tested). The
  metrics file's ``stat`` is also what lets a caller's record stand for the
  file (its mtime);
* a caller's record whose metrics mtime still holds gives the memo's model,
  dataset, seed and returncode (otherwise the per-run road would write a
  new memo), and the memo's facts have the types a memo may hold.

So an unchanged run costs one ``stat`` per file the memo recorded (three on
the scale corpora) and the directory's ``lstat``, which the run id needed
anyway: nothing else. Every other run (no memo, anything changed, a
predictions file, a link) is read: as columns where it is a plain run
without predictions (:mod:`~deepecgkit.statistical_report.fresh_read`),
else by the per-run road, unchanged; the roads' runs are merged in
``run_id`` order by the report. A recalled run's
checks are those of the contract in order: it is readable (its memo was
made from files that were), then excluded by check 2 (``failed_run``, with
the metadata's ``error`` in its detail) or check 3 (``no_predictions``);
checks 4-11 never reach an excluded run, but its fingerprint still counts
towards its cell's reference fingerprint (check 9), so :class:`Recalled`
carries those counts.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from deepecgkit.rundir.format import METRICS_FILENAME
from deepecgkit.rundir.read import available_cpus
from deepecgkit.rundir.records import RunRecord
from deepecgkit.statistical_report.identity import (
    FAILED_RUN,
    HASHED_FILES,
    NO_PREDICTIONS,
    RunFacts,
    _int_column,
    _text_column,
)
from deepecgkit.statistical_report.memo_table import DIRECTORY, MemoRows

__all__ = [
    "RUN_COLUMNS_READ",
    "Recalled",
    "RunColumns",
    "recall_unchanged",
    "record_columns",
    "run_columns",
]

#: The stat fields a signature compares, in the memo table's order.
_SIGNATURE_FIELDS = ("st_size", "st_mtime_ns", "st_ino", "st_ctime_ns", "st_dev")
#: The array type of each field (as the memo table's columns).
_FIELD_TYPES = (np.uint64, np.int64, np.uint64, np.int64, np.uint64)
#: Paths stat-ed per call of the C-level ``map`` (a failure re-does only its batch one by one).
_STAT_BATCH = 4096
#: Threads that ``stat`` batches at most, where the calls wait on the file system.
_STAT_THREADS = 4
#: Mean seconds per ``stat`` (of the first batch) from which the calls are taken to wait
#: on the file system (a network mount), which threads overlap. Below it a call is the
#: kernel's work on this CPU (4-6 us on a local disk), and threads only add handoffs of
#: the interpreter lock: 300,000 calls took 17% longer in 2 threads than in one on a
#: 2-core machine (docs/benchmarks.md, session 32).
_WAITING_STAT_S = 20e-6
#: The bits of ``st_mode`` that give the file type (what ``stat.S_IFMT`` keeps).
_FILE_TYPE_BITS = stat.S_IFMT(0o177777)
_NO_PREDICTIONS_DETAIL = "neither predictions.csv nor predictions.txt"
#: The names of a predictions file a memo may record (never in a recalled run's memo).
_PREDICTIONS_NAMES = ("predictions.csv", "predictions.txt")


@dataclass(frozen=True)
class RunColumns:
    """The facts the contract takes from a caller's records, one list per field.

    The columns of :class:`~deepecgkit.statistical_report.identity.RunFacts`:
    ``run_dir`` text (or ``Path``), model, dataset, seed and returncode
    (exact ints or None) and ``mtime``, the metrics file's float mtime when
    the record was read, as a ``(n,)`` float64 array.
    """

    run_dir: list[str | Path]
    model: list[str]
    dataset: list[str]
    seed: list[int | None]
    returncode: list[int | None]
    mtime: np.ndarray

    def __len__(self) -> int:
        return len(self.run_dir)

    def facts(self, positions: Sequence[int]) -> list[RunFacts]:
        """The :class:`RunFacts` of the records at ``positions`` (for the per-run road)."""
        mtimes = self.mtime.tolist()
        return [
            RunFacts(
                self.run_dir[p],
                self.model[p],
                self.dataset[p],
                self.seed[p],
                self.returncode[p],
                mtimes[p],
            )
            for p in positions
        ]


#: The columns of a records frame :func:`run_columns` reads (a reader may read only these).
RUN_COLUMNS_READ = ("run_dir", "model", "dataset", "seed", "returncode", "mtime")


def run_columns(frame: pd.DataFrame) -> RunColumns:
    """The :class:`RunColumns` of a records frame (``records_to_frame``'s layout).

    The same values :func:`~deepecgkit.statistical_report.identity.run_facts`
    gives, a column each instead of a tuple per run. Only the columns of
    :data:`RUN_COLUMNS_READ` are read.
    """
    texts = [_text_column(frame[name]) for name in ("run_dir", "model", "dataset")]
    seeds, returncodes = (_int_column(frame[name]) for name in ("seed", "returncode"))
    mtimes = frame["mtime"].to_numpy(dtype=np.float64)
    return RunColumns(*texts, seeds, returncodes, mtimes)  # type: ignore[arg-type]


def record_columns(records: Sequence[RunRecord | RunFacts]) -> RunColumns:
    """The :class:`RunColumns` of records given one by one (the CLI's, a test's)."""
    return RunColumns(
        [record.run_dir for record in records],
        [record.model for record in records],
        [record.dataset for record in records],
        [record.seed for record in records],
        [record.returncode for record in records],
        np.array([record.mtime for record in records], dtype=np.float64),
    )


@dataclass(frozen=True)
class Recalled:
    """The runs recalled as columns, all excluded (``failed_run`` or ``no_predictions``).

    Attributes:
        positions: ``(k,)`` int64 positions of the runs among those given, ascending.
        rows: ``(k,)`` int64 rows of their memos in the memo table (kept as they are).
        reason, detail, model, dataset, seed: each run's exclusion and identity.
        hashes: for each of :data:`~deepecgkit.statistical_report.identity.HASHED_FILES`,
            each run's SHA-256 of that file (None where it has none).
        fingerprints: per cell ``(model, dataset)``, the count of each
            fingerprint of the recalled runs that did not fail (check 9's input).
    """

    positions: np.ndarray
    rows: np.ndarray
    reason: list[str]
    detail: list[str]
    model: list[str]
    dataset: list[str]
    seed: list[int | None]
    hashes: dict[str, list[str | None]]
    fingerprints: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)

    @classmethod
    def none(cls) -> Recalled:
        """No run recalled."""
        empty = np.zeros(0, dtype=np.int64)
        return cls(empty, empty, [], [], [], [], [], {name: [] for name in HASHED_FILES})


class _Stats(NamedTuple):
    """``stat`` results of many paths as arrays (a few bytes a value, no object per path).

    ``found`` marks the paths whose ``stat`` succeeded; ``modes``, the five
    signature ``fields`` (in the memo table's order and types) and
    ``mtimes`` (float ``st_mtime``) are 0 where it failed.
    """

    found: np.ndarray
    modes: np.ndarray
    fields: list[np.ndarray]
    mtimes: np.ndarray


def _stat_arrays(infos: list[os.stat_result | None]) -> _Stats | None:
    """The arrays of ``stat`` results (None: a field beyond 64 bits, which no memo holds)."""
    present = [info for info in infos if info is not None]
    found = np.fromiter((info is not None for info in infos), dtype=bool, count=len(infos))

    def spread(name: str, kind: type) -> np.ndarray:
        values = np.zeros(len(infos), dtype=kind)
        values[found] = np.fromiter(map(attrgetter(name), present), dtype=kind, count=len(present))
        return values

    try:
        kinds = zip(_SIGNATURE_FIELDS, _FIELD_TYPES, strict=True)
        fields = [spread(name, kind) for name, kind in kinds]
    except OverflowError:
        return None
    return _Stats(found, spread("st_mode", np.int64), fields, spread("st_mtime", np.float64))


def _stat_batch(batch: list[str]) -> _Stats | None:
    """:func:`_stat_arrays` of ``os.stat`` of each path of one batch (see :func:`_stats`)."""
    try:
        infos: list[os.stat_result | None] = list(map(os.stat, batch))
    except (OSError, ValueError):
        infos = []
        for path in batch:
            try:
                infos.append(os.stat(path))
            except (OSError, ValueError):
                infos.append(None)
    return _stat_arrays(infos)


def _stats(paths: list[str]) -> _Stats | None:
    """``os.stat`` of each path (following links), as arrays; None on a field beyond 64 bits.

    A batch at a time by the C-level ``map``; a batch in which a call fails is
    done again path by path (a changed or broken run is rare). Where the
    first batch shows that a call waits on the file system (at least
    :data:`_WAITING_STAT_S` a path), the other batches go to a few threads:
    ``stat`` releases the interpreter lock, so the waits overlap; calls that
    are CPU work stay in this thread. Each batch's results become arrays at
    once, so no more than a batch of ``stat_result`` objects (about 1 KB
    each) is alive per thread.
    """
    batches = [paths[start : start + _STAT_BATCH] for start in range(0, len(paths), _STAT_BATCH)]
    if not batches:
        return _stat_arrays([])
    started = time.perf_counter()
    parts = [_stat_batch(batches[0])]
    waits = (time.perf_counter() - started) / len(batches[0]) >= _WAITING_STAT_S
    workers = min(available_cpus(), _STAT_THREADS, len(batches) - 1)
    if workers < 2 or not waits:
        parts += [_stat_batch(batch) for batch in batches[1:]]
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="report-stat") as pool:
            parts += pool.map(_stat_batch, batches[1:])
    if any(part is None for part in parts):
        return None
    return _Stats(
        np.concatenate([part.found for part in parts]),
        np.concatenate([part.modes for part in parts]),
        [np.concatenate([part.fields[i] for part in parts]) for i in range(len(_SIGNATURE_FIELDS))],
        np.concatenate([part.mtimes for part in parts]),
    )


def _matches(found: _Stats | None, fields: list[np.ndarray], *, kind: int) -> np.ndarray:
    """``(n,)`` mask: the stat result is of file type ``kind`` and has the five ``fields``."""
    if found is None:  # a stat field beyond 64 bits: the memo table holds none such
        return np.zeros(len(fields[0]), dtype=bool)
    equal = found.found & ((found.modes & _FILE_TYPE_BITS) == kind)
    for values, recorded in zip(found.fields, fields, strict=True):
        equal &= values == recorded
    return equal


def recall_unchanged(
    run_dirs: Sequence[str],
    directories: Sequence[os.stat_result | None],
    *,
    memos: MemoRows,
    records: RunColumns | None,
) -> Recalled:
    """The runs of ``run_dirs`` recalled from ``memos`` as columns (see the module docstring).

    Args:
        run_dirs: each run's resolved directory (text), the memos' keys.
        directories: each run directory's ``lstat`` (None where none was
            taken or it failed): the directory's signature where it is not a link.
        memos: the previous build's memo table.
        records: the caller's records in ``run_dirs`` order, or None.
    """
    rows = memos.rows_of(run_dirs)
    chosen = np.flatnonzero(rows >= 0)
    if not len(chosen):
        return Recalled.none()
    for name in _PREDICTIONS_NAMES:  # a memo with a predictions file: the per-run road
        chosen = chosen[~memos.hashed(name, rows[chosen])]
    chosen = chosen[memos.hashed(METRICS_FILENAME, rows[chosen])]
    predictions = memos.texts("predictions", rows[chosen])
    chosen = chosen[np.fromiter((p is None for p in predictions), dtype=bool, count=len(chosen))]
    recorded, fields = memos.signature(DIRECTORY, rows[chosen])
    same = _matches(_stat_arrays([directories[p] for p in chosen]), fields, kind=stat.S_IFDIR)
    chosen = chosen[recorded & same]
    mtimes = np.zeros(0)
    for name in HASHED_FILES:
        hashed = memos.hashed(name, rows[chosen])
        _, fields = memos.signature(name, rows[chosen][hashed])
        paths = [f"{run_dirs[p]}{os.sep}{name}" for p in chosen[hashed]]
        found = _stats(paths)
        del paths
        keep = np.ones(len(chosen), dtype=bool)
        keep[hashed] = _matches(found, fields, kind=stat.S_IFREG)
        if name == METRICS_FILENAME:  # every chosen run records it
            mtimes = np.zeros(len(chosen)) if found is None else found.mtimes
        mtimes = mtimes[keep]
        chosen = chosen[keep]
    return _recalled(chosen, rows[chosen], mtimes, memos, records)


def _memo_ints(texts: list[str | None]) -> list[int | None] | None:
    """The memo's decimal seed or returncode texts as ints; None when one is not decimal."""
    try:
        return [None if text is None else int(text) for text in texts]
    except ValueError:
        return None


def _recalled(
    chosen: np.ndarray,
    rows: np.ndarray,
    mtimes: np.ndarray,
    memos: MemoRows,
    records: RunColumns | None,
) -> Recalled:
    """:class:`Recalled` of the runs whose files all kept their memo's signatures."""
    model, dataset = memos.texts("model", rows), memos.texts("dataset", rows)
    seed = _memo_ints(memos.texts("seed", rows))
    returncode = _memo_ints(memos.texts("returncode", rows))
    metadata_texts = memos.texts("metadata", rows)
    split_texts = memos.texts("split_info", rows)
    if seed is None or returncode is None:
        return Recalled.none()
    try:
        decoded = {text: json.loads(text) for text in {*metadata_texts, *split_texts} - {None}}
    except ValueError:
        return Recalled.none()
    keep = np.array(
        [
            type(m) is str
            and type(d) is str
            and (meta is None or type(decoded[meta]) is dict)
            and (split is None or type(decoded[split]) is dict)
            for m, d, meta, split in zip(model, dataset, metadata_texts, split_texts, strict=True)
        ],
        dtype=bool,
    )
    if records is not None:
        # A record whose metrics mtime holds gives the facts; they must be the memo's
        # (compared as object arrays: one Python == per value, in C loops).
        held = records.mtime[chosen] == mtimes
        for given, recalled in (
            (records.model, model),
            (records.dataset, dataset),
            (records.seed, seed),
            (records.returncode, returncode),
        ):
            same = _objects(given)[chosen] == _objects(recalled)
            keep &= ~held | same.astype(bool)
    picked = np.flatnonzero(keep)
    model, dataset = _objects(model)[picked].tolist(), _objects(dataset)[picked].tolist()
    seed, returncode = _objects(seed)[picked].tolist(), _objects(returncode)[picked].tolist()
    texts = _objects(metadata_texts)[picked].tolist()
    reasons, details, fingerprints = _outcomes(model, dataset, returncode, texts, decoded)
    rows = rows[keep]
    hashes = {name: memos.texts(f"{name}:sha256", rows) for name in HASHED_FILES}
    return Recalled(
        chosen[keep], rows, reasons, details, model, dataset, seed, hashes, fingerprints
    )


def _objects(values: list) -> np.ndarray:
    """``values`` as a 1-d object array (the very objects; lists are not taken apart)."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def _outcomes(
    model: list[str],
    dataset: list[str],
    returncode: list[int | None],
    metadata_texts: list[str | None],
    decoded: dict[str, dict],
) -> tuple[list[str], list[str], dict[tuple[str, str], Counter[str]]]:
    """Each recalled run's exclusion (check 2, else 3) and the fingerprints of those not failed.

    Only a failed run costs Python of its own (its detail names its code and
    error); the others share one reason and detail, and their fingerprints
    are counted by one ``Counter`` over (model, dataset, fingerprint).
    """
    failed = [code is not None and code != 0 for code in returncode]
    reasons = [NO_PREDICTIONS] * len(model)
    details = [_NO_PREDICTIONS_DETAIL] * len(model)
    for index in (i for i, is_failed in enumerate(failed) if is_failed):
        error = (decoded.get(metadata_texts[index]) or {}).get("error")
        reasons[index] = FAILED_RUN
        details[index] = f"returncode {returncode[index]}" + (
            f": {error}" if isinstance(error, str) else ""
        )
    of_text = {None: None}
    for text, metadata in decoded.items():
        fingerprint = metadata.get("params_fingerprint") if type(metadata) is dict else None
        of_text[text] = fingerprint if isinstance(fingerprint, str) and fingerprint else None
    counted = Counter(
        (m, d, fp)
        for m, d, fp, is_failed in zip(
            model, dataset, map(of_text.get, metadata_texts), failed, strict=True
        )
        if fp is not None and not is_failed
    )
    fingerprints: dict[tuple[str, str], Counter[str]] = {}
    for (m, d, fingerprint), count in sorted(counted.items()):
        fingerprints.setdefault((m, d), Counter())[fingerprint] = count
    return reasons, details, fingerprints
