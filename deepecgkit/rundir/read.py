"""Reading run directories: the one way the analysis, the report and the platform see runs.

Everything that reads a run directory reads it through this module:
:func:`read_run` (one directory into a :class:`RunRecord`, or the reason it
cannot be used), :func:`discover_runs` (every run under some roots, with a
diagnostic for each one set aside), :func:`read_metadata`, the predictions
files (:func:`read_predictions`, :func:`parse_predictions`) and the encoder
checkpoints the runs kept (:func:`find_encoder_checkpoints`). The format
itself is :mod:`deepecgkit.rundir.format` (docs/run-directory.md).

A run directory is any directory holding ``classification_metrics.csv``.
There are two metrics schemas, single-label and multi-label, which share
only precision, recall, F1, AUROC and the calibration columns, so the schema
(``multi_label``) and the averaging mode travel with every record. Metric
columns are looked up one by one: a run written before a metric existed is
still readable and simply contributes nothing to that metric.

Discovery never raises on a bad run and never hangs on one. Every file is
opened through :func:`~deepecgkit.io.read_regular_file` (no blocking on a
FIFO, a type check on the open descriptor, a bounded read). Every directory
that cannot be used lands in one of the diagnostics lists (``unreadable``,
``no_seed``, ``duplicate``, ``failed``) with its reason, and every usable run
from which something was set aside (an out-of-range value, a repeated
column, an unusable split size) in ``suspect``, so nothing vanishes
silently. Seeds are kept as exact Python ints of any size; a run whose seed
cannot be determined has none (``None``), so -1 is an ordinary seed.

Reading is deliberately done with the standard library's ``csv`` and
``json`` modules rather than ``pandas.read_csv``: a grid of 100,000 runs
means 300,000 small files, and pandas' per-call overhead (about a
millisecond) would dominate the actual I/O.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import multiprocessing
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from deepecgkit.io import (
    REASON_MISSING,
    REASON_PERMISSION,
    UnreadableFileError,
    display_path,
    read_regular_file,
)
from deepecgkit.memory import release_free_memory
from deepecgkit.progress import logged_progress
from deepecgkit.rundir._predictions import (
    parse_predictions,
    predictions_path,
    read_predictions,
    read_predictions_file,
)
from deepecgkit.rundir.format import (
    AVERAGING_MACRO_LABEL,
    AVERAGING_UNKNOWN,
    CHECKPOINT_KEY,
    MAX_RUN_FILE_BYTES,
    METADATA_FILENAME,
    METRIC_RANGE_TOLERANCE,
    METRIC_RANGES,
    METRICS_FILENAME,
    MULTI_LABEL_MARKER,
    MULTI_LABEL_METRICS,
    SEED_SUFFIX,
    SINGLE_LABEL_METRICS,
    SPLIT_INFO_FILENAME,
    SPLIT_SIZE_KEYS,
)
from deepecgkit.rundir.int_columns import INT64_LIMIT
from deepecgkit.rundir.listing import (
    CHILD_LISTING,
    PROBLEM_LIST,
    PROBLEM_SEARCH,
    ROOT_LISTING,
    UNKNOWN_STAMP,
    WALKED_LISTING,
    ListingRecord,
    child_directories,
    directory_entries,
    directory_stamp,
    listing_signature,
    metrics_entry_error,
)
from deepecgkit.rundir.records import (
    DIAGNOSTIC_KEYS,
    RECORD_COLUMNS,
    RECORD_INT_FIELDS,
    EncodedRecord,
    RunRecord,
    UnreadableRun,
    record_columns_to_frame,
    records_to_frame,
)

#: A metrics file's state as ``(path, mtime_ns, size)``: what
#: :class:`~deepecgkit.rundir.cache.FileState` holds (cache.py imports this module).
MetricsState = tuple[str, int, int]

__all__ = [
    "DIAGNOSTIC_KEYS",
    "ON_DUPLICATE_ALL",
    "ON_DUPLICATE_ERROR",
    "ON_DUPLICATE_NEWEST",
    "ON_DUPLICATE_POLICIES",
    "BatchReader",
    "EncodedBatchReader",
    "RunRecord",
    "UnreadableRun",
    "available_cpus",
    "discover_run_frame",
    "discover_runs",
    "encoder_checkpoints",
    "find_encoder_checkpoints",
    "find_run_candidate_paths",
    "find_run_candidates",
    "find_run_directories",
    "is_run_directory",
    "parse_predictions",
    "predictions_path",
    "read_chunks",
    "read_metadata",
    "read_predictions",
    "read_predictions_file",
    "read_run",
    "read_run_file",
    "read_run_metrics",
    "read_runs",
]

logger = logging.getLogger(__name__)
#: Corpora of fewer run directories are read without progress records (well under a second).
PROGRESS_MIN_RUNS = 500

#: Duplicate policies of :func:`discover_runs`: keep the newest run of a
#: (dataset, model, seed, fingerprint), raise, or keep every run.
ON_DUPLICATE_NEWEST = "newest"
ON_DUPLICATE_ERROR = "error"
ON_DUPLICATE_ALL = "all"
ON_DUPLICATE_POLICIES = (ON_DUPLICATE_NEWEST, ON_DUPLICATE_ERROR, ON_DUPLICATE_ALL)

#: Runs to parse from which :func:`read_runs` parses in forked worker processes.
#: A run costs about 50 us to read and parse, so two workers save about 25 us a
#: run; forking them costs a few tens of milliseconds, which a batch this size
#: repays (see docs/benchmarks.md, "discovery").
PARALLEL_MIN_RUNS = 5_000
#: The same for spawned workers (a process running threads): each new interpreter
#: imports numpy and pandas (about a second, in parallel), which only a batch
#: this size repays on two cores.
SPAWN_MIN_RUNS = 20_000
#: Run directories per task sent to a worker: big enough that a task's round trip
#: costs little next to reading it, small enough that the workers finish together.
PARALLEL_CHUNK_RUNS = 500

#: Reason of a metrics file that was listed by the scan and then could not be found.
REASON_VANISHED = "vanished"
#: Cells pandas would read as missing; a model called "NA" is treated as absent, too.
_MISSING_CELLS = frozenset(
    {
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    }
)


# --- low-level readers -----------------------------------------------------------------


def _read_json(path: str | os.PathLike) -> dict | None:
    """Parse ``path`` as UTF-8 JSON; the dict when the top level is an object, else None.

    Never raises: a missing or non-regular file, an ``OSError``, invalid
    UTF-8, invalid JSON and a non-object top level all give None. Use
    :func:`_read_json_reason` to learn why.
    """
    parsed, _ = _read_json_reason(path)
    return parsed


def _read_json_reason(path: str | os.PathLike) -> tuple[dict | None, str | None]:
    """``(object, None)``, ``(None, None)`` when the file is absent, else ``(None, reason)``."""
    try:
        data, _ = read_regular_file(path, max_bytes=MAX_RUN_FILE_BYTES)
    except UnreadableFileError as exc:
        return None, None if exc.reason == REASON_MISSING else exc.reason
    try:
        parsed = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not valid UTF-8"
    except (ValueError, RecursionError) as exc:
        return None, f"not valid JSON ({exc})"
    if not isinstance(parsed, dict):
        return None, f"holds a JSON {type(parsed).__name__}, not an object"
    return parsed, None


def read_metadata(run_dir: Path | str) -> dict | None:
    """The run's ``run_metadata.json`` object; None when it is absent or cannot be used."""
    return _read_json(os.path.join(os.fspath(run_dir), METADATA_FILENAME))


def is_run_directory(path: Path | str) -> bool:
    """Whether ``path`` holds an entry named ``classification_metrics.csv``, of any type.

    That is what makes a directory a run directory to discovery; whether the
    entry can be read is :func:`read_run`'s to say.
    """
    return os.path.lexists(os.path.join(os.fspath(path), METRICS_FILENAME))


def read_run_file(run_dir: Path | str, name: str) -> tuple[bytes, os.stat_result] | None:
    """The bytes and ``fstat`` of the file ``name`` of a run directory; None when absent.

    Raises:
        UnreadableFileError: the file exists but cannot be read as a regular
            file (permission denied, a FIFO, a directory ...), with its reason.
    """
    try:
        return read_regular_file(os.path.join(os.fspath(run_dir), name))
    except UnreadableFileError as exc:
        if exc.reason == REASON_MISSING:
            return None
        raise


def _seed_from_directory(run_dir: Path) -> int | None:
    """The N of a final path component ending in ``seed<N>`` (case-sensitive), else None."""
    match = SEED_SUFFIX.search(Path(run_dir).name)
    return int(match.group(1)) if match else None


def _strict_int(value: Any) -> int | None:
    """``value`` when it is an int and not a bool, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _cell_float(cell: str) -> float:
    """A metric cell as float; empty or unconvertible cells are NaN."""
    try:
        return float(cell)
    except ValueError:
        return math.nan


def _parse_metrics_csv(data: bytes) -> tuple[list[str], list[str]] | str:
    """Header and first data row of a metrics CSV, or the reason it cannot be used.

    UTF-8 (a BOM is allowed), blank lines skipped, any row longer than the
    header rejected as pandas would. A file that does not end with a line
    break, or whose first data row has fewer cells than the header, is still
    being written (or was cut off): every writer of this project ends the
    file with a newline and replaces it atomically, so such a file is never
    read as a finished run, whose last number might be cut short.
    """
    if not data.endswith(b"\n"):
        return "does not end with a line break (half-written?)"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return "not valid UTF-8"
    try:
        rows = [row for row in csv.reader(io.StringIO(text, newline="")) if row]
    except csv.Error as exc:
        return f"cannot be parsed as CSV ({exc})"
    if len(rows) < 2:
        return "has no data row"
    header, first = rows[0], rows[1]
    if any(len(row) > len(header) for row in rows[1:]):
        return "has a row longer than its header"
    if len(first) < len(header):
        return f"first row has {len(first)} of the header's {len(header)} cells (half-written?)"
    return header, first


def _first_cells(header: list[str], row: list[str]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Cells by column name (the first of repeated names) and every repeated name's cells."""
    cells: dict[str, str] = dict(zip(header, row, strict=True))
    repeated: dict[str, list[str]] = {}
    if len(cells) == len(header):  # the usual case: no name repeated
        return cells, repeated
    cells = {}
    for name, cell in zip(header, row, strict=True):
        if name in cells:
            repeated.setdefault(name, [cells[name]]).append(cell)
        else:
            cells[name] = cell
    return cells, repeated


#: Each metric's range widened by the rounding tolerance, looked up once per cell.
_ACCEPTED = {
    name: (low - METRIC_RANGE_TOLERANCE, high + METRIC_RANGE_TOLERANCE)
    for name, (low, high) in METRIC_RANGES.items()
}


def _out_of_range(name: str, value: float, notes: list[str]) -> float:
    """NaN, with a note saying that ``value`` lies outside the metric's range."""
    low, high = METRIC_RANGES[name]
    notes.append(f"{name} {value!r} outside [{low:g}, {high:g}]; dropped")
    return math.nan


def _split_size(split_info: dict, key: str, notes: list[str]) -> int | None:
    """A usable split size, or None (with a note when a present value is unusable).

    Sizes are counts: a training, test or test-group count of zero or less,
    a negative validation count, and a count of 2^63 or more (beyond any real
    data set, and beyond the int64 columns sizes travel in) are unknown, as
    is anything that is not an integer. An absent or null size is simply not
    recorded (no note).
    """
    value = split_info.get(key)
    if value is None:  # absent, or written as null: not recorded
        return None
    size = _strict_int(value)
    smallest = 0 if key == "n_val" else 1
    if size is not None and smallest <= size < INT64_LIMIT:
        return size
    notes.append(f"{SPLIT_INFO_FILENAME} {key} {value!r} is not a usable count; unknown")
    return None


def _metadata_int(metadata: dict, key: str, notes: list[str]) -> int | None:
    """An int field of ``run_metadata.json``; a present non-int value is noted and ignored."""
    if key not in metadata or metadata[key] is None:
        return None
    value = _strict_int(metadata[key])
    if value is None:
        notes.append(f"{METADATA_FILENAME} {key} {metadata[key]!r} is not an integer; ignored")
    return value


# --- reading one run ------------------------------------------------------------------------


def read_run(run_dir: Path | str) -> RunRecord | UnreadableRun:
    """Read one run directory into a :class:`RunRecord`, or say why it cannot be used.

    Unusable (an :class:`UnreadableRun` with the reason): the directory name
    is not valid UTF-8 (it could not be written to any output); the metrics
    file is not a readable regular file (permission denied, a FIFO, a
    directory, a dangling link, vanished); it is half-written (no final line
    break, or a first row shorter than the header), cannot be parsed, has no
    data row, lacks a ``model`` or ``dataset`` column, repeats one of them
    with different values, or its first row's model or dataset is blank.

    The CSV's first row is the authority for model and dataset (kept as
    strings, so ``007`` stays ``007``). The seed comes from
    ``run_metadata.json`` when it is an int (not a bool; any size, kept
    exactly), else from a directory name ending in ``seed<N>``, else None.
    Split sizes from ``split_info.json`` are kept when they are usable counts
    (see :func:`_split_size`).

    Everything set aside from a usable run is listed in ``suspect``: a metric
    value outside its range (:data:`METRIC_RANGES`; the value becomes NaN,
    so no statistic uses it), a repeated metric column (NaN: which cell is
    meant cannot be known), an unusable split size or metadata field, and a
    metadata or split file that exists but cannot be read (read as absent).
    """
    # Plain strings inside: pathlib parses a path on every construction and
    # join, which was a tenth of discovery time at 100,000 runs.
    run_dir = run_dir if isinstance(run_dir, Path) else Path(run_dir)
    directory = os.fspath(run_dir)
    try:
        directory.encode("utf-8")
    except UnicodeEncodeError:
        return UnreadableRun(run_dir, "directory name is not valid UTF-8; rename it to use it")
    try:
        data, info = read_regular_file(
            os.path.join(directory, METRICS_FILENAME), max_bytes=MAX_RUN_FILE_BYTES
        )
    except UnreadableFileError as exc:
        reason = REASON_VANISHED if exc.reason == REASON_MISSING else exc.reason
        return UnreadableRun(run_dir, f"{METRICS_FILENAME}: {reason}")
    parsed = _parse_metrics_csv(data)
    if isinstance(parsed, str):
        return UnreadableRun(run_dir, f"{METRICS_FILENAME} {parsed}")
    cells, repeated = _first_cells(*parsed)
    notes: list[str] = []
    for key in ("model", "dataset"):
        if key not in cells:
            return UnreadableRun(run_dir, f"{METRICS_FILENAME} has no {key} column")
        if cells[key].strip() in _MISSING_CELLS:
            return UnreadableRun(run_dir, f"{METRICS_FILENAME} has a blank {key}")
        if len(set(repeated.get(key, ()))) > 1:
            return UnreadableRun(
                run_dir, f"{METRICS_FILENAME} repeats the {key} column with different values"
            )
    model, dataset = cells["model"], cells["dataset"]

    multi_label = MULTI_LABEL_MARKER in cells
    schema = MULTI_LABEL_METRICS if multi_label else SINGLE_LABEL_METRICS
    metrics: dict[str, float] = {}
    for name in schema:
        cell = cells.get(name)
        if cell is None:
            continue
        if repeated and name in repeated:
            notes.append(f"column {name} appears {len(repeated[name])} times; dropped")
            metrics[name] = math.nan
            continue
        value = _cell_float(cell)
        low, high = _ACCEPTED[name]
        # NaN fails both comparisons and equals nothing: missing, not out of range.
        metrics[name] = (
            value if low <= value <= high or value != value else _out_of_range(name, value, notes)
        )
    if multi_label:
        averaging = AVERAGING_MACRO_LABEL
    else:
        average = cells.get("average")
        averaging = AVERAGING_UNKNOWN if average is None or average in _MISSING_CELLS else average

    metadata, problem = _read_json_reason(os.path.join(directory, METADATA_FILENAME))
    if problem is not None:
        notes.append(f"{METADATA_FILENAME} {problem}; read as absent")
    metadata = metadata or {}
    seed = _metadata_int(metadata, "seed", notes)
    if seed is None:
        seed = _seed_from_directory(run_dir)
    fingerprint = metadata.get("params_fingerprint")
    checkpoint = metadata.get(CHECKPOINT_KEY)
    split_info, problem = _read_json_reason(os.path.join(directory, SPLIT_INFO_FILENAME))
    if problem is not None:
        notes.append(f"{SPLIT_INFO_FILENAME} {problem}; split sizes unknown")
    sizes = {key: _split_size(split_info or {}, key, notes) for key in SPLIT_SIZE_KEYS}
    return RunRecord(
        run_dir=run_dir,
        model=model,
        dataset=dataset,
        seed=seed,
        multi_label=multi_label,
        averaging=averaging,
        metrics=metrics,
        mtime=info.st_mtime,
        returncode=_metadata_int(metadata, "returncode", notes),
        fingerprint=fingerprint if isinstance(fingerprint, str) else None,
        suspect=tuple(notes),
        checkpoint=checkpoint if isinstance(checkpoint, str) and checkpoint else None,
        **sizes,
    )


def read_run_metrics(run_dir: Path | str) -> RunRecord | None:
    """Read one run directory into a :class:`RunRecord`, or None when it is unusable.

    The reason a run is unusable, and what :func:`read_run` sets aside from
    a usable one, are described there; this wrapper is for callers that only
    need the record.
    """
    result = read_run(run_dir)
    return result if isinstance(result, RunRecord) else None


# --- finding run directories ------------------------------------------------------------------


def _listing_problem(directory: str, error: OSError) -> UnreadableRun:
    """The diagnostic of a directory whose contents cannot be listed or searched."""
    reason = REASON_PERMISSION if isinstance(error, PermissionError) else error.strerror
    return UnreadableRun(Path(directory), f"cannot be listed: {reason or error}")


def _metrics_entry(directory: str, problems: list[UnreadableRun]) -> bool:
    """Whether ``directory`` holds an entry named like the metrics file, of any type.

    The entry's type is not checked here: a FIFO, a directory or a dangling
    link under that name makes the directory a run that cannot be read, which
    the reader reports with its reason, instead of a directory nobody hears
    of. A directory that cannot be searched is added to ``problems``.
    """
    error = metrics_entry_error(directory)
    if isinstance(error, PermissionError):
        problems.append(_listing_problem(directory, error))
    return error is None


def _record_child(child: str, listing: ListingRecord, problems: list[UnreadableRun]) -> bool:
    """:func:`_metrics_entry` of a flat scan's child, recording what a re-check needs.

    A child without a metrics entry is recorded with its stamp, read before
    a second look: if the entry appeared in between, the stamp is unknown,
    so the next re-check looks again (the entry is not used now, as a scan
    without a record would not use it either).
    """
    error = metrics_entry_error(child)
    if error is None:
        return True
    if isinstance(error, PermissionError):
        problems.append(_listing_problem(child, error))
        listing.problems.append((PROBLEM_SEARCH, child))
        return False
    stamp = directory_stamp(child)
    if metrics_entry_error(child) is None:
        stamp = UNKNOWN_STAMP
    listing.add(child, stamp, listing_signature(CHILD_LISTING, False, (), ()))
    return False


def _immediate_candidates(
    root: str,
    real_root: str,
    problems: list[UnreadableRun],
    listing: ListingRecord | None = None,
) -> list[tuple[str, str]]:
    """Children of ``root`` (symlinked ones included) holding a metrics entry.

    Returns:
        ``(path, resolved path)`` pairs. Only a symlinked child needs
        ``realpath``; any other child resolves to the root's real path plus
        its own name, which costs no system call per run.
    """
    stamp = UNKNOWN_STAMP if listing is None else directory_stamp(root)
    try:
        children, link_names = child_directories(root)
    except OSError as exc:
        logger.warning("cannot list run root %s; skipped", display_path(root))
        problems.append(_listing_problem(root, exc))
        if listing is not None:
            listing.problems.append((PROBLEM_LIST, root))
        return []
    found = [(entry.path, _resolved_child(entry, real_root)) for entry in children]
    if listing is None:
        return [(child, resolved) for child, resolved in found if _metrics_entry(child, problems)]
    names = [entry.name for entry in children]
    listing.add(root, stamp, listing_signature(ROOT_LISTING, False, names, link_names))
    listing.add_links([os.path.join(root, name) for name in link_names])
    return [(child, real) for child, real in found if _record_child(child, listing, problems)]


def _resolved_child(entry: os.DirEntry, real_root: str) -> str:
    """Real path of a child of the root whose real path is ``real_root``."""
    try:
        is_link = entry.is_symlink()
    except OSError:
        is_link = True
    return os.path.realpath(entry.path) if is_link else os.path.join(real_root, entry.name)


def _walk(
    start: str,
    real_start: str,
    visited: set[str],
    found: list[tuple[str, str]],
    links: list[str],
    problems: list[UnreadableRun],
    listing: ListingRecord | None = None,
    known: Mapping[str, tuple[int, bool] | tuple[int, bool, bool]] | None = None,
) -> None:
    """Scan ``start`` and its descendants without following links; collect linked directories.

    Real paths are derived from ``real_start`` without a system call per
    directory (no link is followed inside one walk). ``visited`` receives
    every real path scanned, ``found`` the ``(path, real path)`` of each
    directory holding a metrics entry, ``links`` the symbolic links to
    directories met on the way, and ``problems`` every directory that
    cannot be listed. A directory that vanishes mid-scan is skipped.
    ``listing``, when given, records each directory listed (its stamp read
    before the listing) and every link met. ``known`` (see
    :func:`find_run_candidate_paths`) spares the listing of a directory whose
    stamp is the one recorded there: it holds no subdirectory and no link,
    and the metrics entry as recorded; one whose entry says its change time
    was just read and found to be that stamp is not ``stat``-ed again.
    """
    pending = [(start, real_start)]
    visited.add(real_start)
    stamped = listing is not None or known is not None
    leaf_signatures = {
        held: listing_signature(WALKED_LISTING, held, (), ()) for held in (False, True)
    }
    while pending:
        directory, real = pending.pop()
        recorded = None if known is None else known.get(directory)
        if recorded is not None and recorded[2:] == (True,):
            stamp = recorded[0]  # just read (by a proof that failed elsewhere): still current
        else:
            stamp = directory_stamp(directory) if stamped else UNKNOWN_STAMP
        if recorded is not None and recorded[0] == stamp != UNKNOWN_STAMP:
            # 100,000 run directories on a warm rescan: a stat each, nothing else.
            if listing is not None:
                listing.add(directory, stamp, leaf_signatures[recorded[1]])
            if recorded[1]:
                found.append((directory, real))
            continue
        try:
            holds_metrics, subdirectories, link_entries = directory_entries(directory)
        except FileNotFoundError:
            logger.info("directory %s vanished during the scan", display_path(directory))
            continue
        except OSError as exc:
            problems.append(_listing_problem(directory, exc))
            if listing is not None:
                listing.problems.append((PROBLEM_LIST, directory))
            continue
        prefix = real if real.endswith(os.sep) else real + os.sep
        for name, path in subdirectories:
            child_real = prefix + name
            if child_real not in visited:
                visited.add(child_real)
                pending.append((path, child_real))
        links.extend(path for _, path in link_entries if os.path.isdir(path))
        if listing is not None:
            signature = listing_signature(
                WALKED_LISTING,
                holds_metrics,
                [name for name, _ in subdirectories],
                [name for name, _ in link_entries],
            )
            listing.add(directory, stamp, signature)
            listing.add_links([path for _, path in link_entries])
        if holds_metrics:
            found.append((directory, real))


def _recursive_candidates(
    root: str,
    problems: list[UnreadableRun],
    listing: ListingRecord | None = None,
    known: Mapping[str, tuple[int, bool] | tuple[int, bool, bool]] | None = None,
) -> list[tuple[str, str]]:
    """``root`` and every descendant holding a metrics entry, symbolic links followed once.

    The tree is first walked without following links, so every directory
    that is really inside it is known under its own path. Then each linked
    directory (in sorted order, round after round for links found behind
    links) is walked only if its real path was not visited yet: a link to an
    ancestor, a link loop or a second link to one target is skipped, so the
    scan always ends, and a run inside the tree is always listed under its
    own path rather than through a link.

    Returns:
        ``(path, real path)`` pairs of the candidates.
    """
    visited: set[str] = set()
    found: list[tuple[str, str]] = []
    links: list[str] = []
    _walk(root, os.path.realpath(root), visited, found, links, problems, listing, known)
    while links:
        round_links, links = sorted(links), []
        for link in round_links:
            real = os.path.realpath(link)
            if real in visited:
                logger.debug("skipping %s: its target was already scanned", display_path(link))
                continue
            _walk(link, real, visited, found, links, problems, listing, known)
    return found


def find_run_candidates(
    roots: Sequence[Path | str] | Path | str, recursive: bool = False
) -> tuple[list[Path], list[UnreadableRun]]:
    """Candidate run directories under ``roots``, and the directories that could not be searched.

    The candidates of :func:`find_run_candidate_paths`, as :class:`~pathlib.Path` objects.
    """
    found, problems = find_run_candidate_paths(roots, recursive=recursive)
    return [Path(directory) for directory in found], problems


def find_run_candidate_paths(
    roots: Sequence[Path | str] | Path | str,
    *,
    recursive: bool = False,
    listing: ListingRecord | None = None,
    known: Mapping[str, tuple[int, bool] | tuple[int, bool, bool]] | None = None,
) -> tuple[list[str], list[UnreadableRun]]:
    """Candidate run directories under ``roots`` as path strings, and the unsearchable directories.

    A scan of a large tree (the sensor's, every minute) would spend a second
    of 100,000 runs building :class:`~pathlib.Path` objects; these strings
    are already in the form ``os.fspath(Path(...))`` gives (each root is
    normalised as a Path would normalise it, and children are joined to it),
    so a cache keyed by either form sees the same key.

    Args:
        roots: one root or a sequence of roots, scanned in the given order;
            roots that are not existing directories are skipped.
        recursive: False scans the immediate children of each root
            (symlinked children included); True scans the root itself and
            every descendant, following symbolic links to directories once
            each (see :func:`_recursive_candidates`).
        listing: filled with what each listing saw (its directory's stamp
            read before it), so that :mod:`deepecgkit.rundir.tree_index`
            can later prove nothing changed without listing the tree; costs
            one more ``stat`` per listed directory. The candidates and the
            problems' display paths are recorded too (``candidates``,
            ``unlistable``).
        known: ``{directory: (stamp, holds_metrics)}`` of directories a
            recursive scan need not list while their change time is that
            stamp: each holds no subdirectory and no link, and the metrics
            entry exactly when ``holds_metrics``
            (:meth:`~deepecgkit.rundir.tree_index.TreeIndex.known_listings`
            gives the run directories of an earlier scan). Each directory
            then costs one ``stat`` instead of a listing; the result is the
            same. A third value True, ``(stamp, holds_metrics, True)``, says
            the directory's change time was read just before the scan and
            was that stamp (by the index's proof), so the scan takes it as
            read then, as if it had read it itself before a listing.
            Ignored by a flat scan, which lists no run directory.

    Returns:
        ``(candidates, problems)``. A candidate is a directory holding an
        entry named ``classification_metrics.csv`` of any type (the reader
        says why a non-file cannot be read); paths are as found under their
        root (not resolved), sorted by path string within each root, and a
        directory reached twice (overlapping roots, links) is kept once, at
        its first appearance. ``problems`` lists each directory whose
        contents could not be listed (permission denied), with its reason:
        it may hold runs that would otherwise vanish without a word.
    """
    if isinstance(roots, (str, os.PathLike)):
        roots = [roots]
    seen: set[str] = set()
    candidates: list[str] = []
    problems: list[UnreadableRun] = []
    for root in roots:
        root_text = os.fspath(Path(root))
        if listing is not None:
            listing.add_root(root_text)
        if not os.path.isdir(root_text):
            continue
        if recursive:
            found = _recursive_candidates(root_text, problems, listing, known)
        else:
            found = _immediate_candidates(root_text, os.path.realpath(root_text), problems, listing)
        for directory, resolved in sorted(found):
            if resolved in seen:
                continue
            seen.add(resolved)
            candidates.append(directory)
    unique = {str(problem.run_dir): problem for problem in reversed(problems)}
    problems = [unique[key] for key in dict.fromkeys(str(p.run_dir) for p in problems)]
    if listing is not None:
        listing.candidates = list(candidates)
        listing.unlistable = [display_path(problem.run_dir) for problem in problems]
    return candidates, problems


def find_run_directories(
    roots: Sequence[Path | str] | Path | str, recursive: bool = False
) -> list[Path]:
    """Candidate run directories under ``roots`` (see :func:`find_run_candidates`)."""
    return find_run_candidates(roots, recursive=recursive)[0]


# --- discovery ---------------------------------------------------------------------------------


#: What a candidate's reading gives, and what discovery keeps of it (the rules of
#: :func:`_select_runs` read the same fields of either kind of record).
_Kept = RunRecord | EncodedRecord
_Result = RunRecord | EncodedRecord | UnreadableRun


def _duplicate_key(record: _Kept) -> tuple[str, str, int | None, str | None]:
    return (record.dataset, record.model, record.seed, record.fingerprint)


def _sort_key(record: _Kept) -> tuple:
    # A run without a seed sorts before every seeded run: (False, 0) < (True, seed).
    seed = (record.seed is not None, 0 if record.seed is None else record.seed)
    return (record.dataset, record.model, seed, record.fingerprint or "", str(record.run_dir))


def _resolve_duplicates(records: list[_Kept], on_duplicate: str, dropped: list[str]) -> list[_Kept]:
    """Apply the duplicate policy; append a diagnostic for every dropped record.

    Duplicates are rare, so the keys are first counted as a set: a grid
    without any costs no list per record.
    """
    if on_duplicate == ON_DUPLICATE_ALL:
        return records
    keys = [_duplicate_key(record) for record in records]
    if len(set(keys)) == len(keys):
        return records
    groups: dict[tuple, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    keep = [True] * len(records)
    losers: list[tuple[int, int]] = []
    for (dataset, model, seed, _), members in groups.items():
        if len(members) < 2:
            continue
        if on_duplicate == ON_DUPLICATE_ERROR:
            first, second = records[members[0]], records[members[1]]
            raise ValueError(
                f"duplicate run for model {model!r} on dataset {dataset!r} with seed {seed}: "
                f"{display_path(first.run_dir)} and {display_path(second.run_dir)}"
            )
        winner = members[0]
        for index in members[1:]:
            if records[index].mtime > records[winner].mtime:
                winner = index
        losers += [(index, winner) for index in members if index != winner]
    for index, winner in sorted(losers):
        keep[index] = False
        dropped.append(f"{records[index].run_dir} (dropped; kept {records[winner].run_dir})")
    return [record for record, kept in zip(records, keep, strict=True) if kept]


def _read_with(
    reader: Callable[[Path], RunRecord | UnreadableRun | None], run_dir: Path
) -> RunRecord | UnreadableRun:
    """Call ``reader``; a reader that only answers None gets a generic reason."""
    result = reader(run_dir)
    return UnreadableRun(run_dir, "unreadable") if result is None else result


# --- reading many runs in parallel -------------------------------------------------------------


class BatchReader(Protocol):
    """What :func:`discover_runs` asks for every candidate at once (a :class:`RunCache`)."""

    def read_many(
        self, run_dirs: Sequence[Path], *, workers: int | None = None
    ) -> list[RunRecord | UnreadableRun]: ...


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _read_chunk(run_dirs: list[str]) -> list[tuple[bool, tuple]]:
    """A worker's task: :func:`read_run` of each directory, each result without its path.

    The parent holds the paths already; sending a :class:`~pathlib.Path`
    back would cost more to pickle than the rest of the record. Each item
    is ``(readable, fields after run_dir)``.
    """
    return _chunk_here(run_dirs)


def _chunk_here(run_dirs: list[str]) -> list[tuple[bool, tuple]]:
    """:func:`_read_chunk`'s result, read in this process: what a chunk whose worker failed gets.

    A name of its own, not the worker's task: the parent's fallback never runs
    whatever task a worker died running.
    """
    return [_item_here(run_dir) for run_dir in run_dirs]


def _rebuild(run_dir: Path, readable: bool, fields: tuple) -> RunRecord | UnreadableRun:
    return RunRecord(run_dir, *fields) if readable else UnreadableRun(run_dir, *fields)


def _start_method() -> str:
    """``fork`` when this process runs one thread, else ``spawn``.

    Forking is cheap (no interpreter start, nothing imported again, the
    ``__main__`` of a script without a main guard is not run again) but not
    safe while another thread may hold a lock; a platform process (Dagster)
    runs threads, so it spawns.
    """
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "spawn"


def _item_here(run_dir: str) -> tuple[bool, tuple]:
    """:func:`_read_chunk`'s item of one directory, read in this process."""
    result = read_run(run_dir)
    return isinstance(result, RunRecord), tuple(result)[1:]


def _map_chunks(
    texts: Sequence[str],
    task: Callable[[list[str]], Any],
    here: Callable[[list[str]], Any],
    workers: int,
    method: str,
) -> list[Any] | None:
    """``task`` of each chunk of :data:`PARALLEL_CHUNK_RUNS` directories, in ``workers`` processes.

    A chunk whose worker failed (a worker killed) is done by ``here`` in
    this process instead, so a run is never lost to the parallelism. None
    when no pool can start (the caller then works in this process).
    """
    bounds = range(0, len(texts), PARALLEL_CHUNK_RUNS)
    chunks = [list(texts[start : start + PARALLEL_CHUNK_RUNS]) for start in bounds]
    context = multiprocessing.get_context(method)
    try:
        pool = ProcessPoolExecutor(min(workers, len(chunks)), mp_context=context)
        futures = [pool.submit(task, chunk) for chunk in chunks]
    except Exception as exc:  # no workers here (a daemon process...): read serially
        logger.info("cannot start %d reader processes (%s); reading in this process", workers, exc)
        return None
    done: list[Any] = []
    with pool:
        progress = logged_progress(
            zip(chunks, futures, strict=True),
            total=len(chunks),
            what=f"batches of {PARALLEL_CHUNK_RUNS} run directories read",
            logger=logger,
            min_total=1,
        )
        for chunk, future in progress:
            try:
                done.append(future.result())
            except Exception as exc:  # the runs are read here instead
                logger.warning(
                    "a reader process failed (%s); reading its runs in this process", exc
                )
                done.append(here(chunk))
    return done


def _read_in_workers(
    run_dirs: Sequence[Path], workers: int, method: str
) -> list[RunRecord | UnreadableRun]:
    """:func:`read_run` of each directory in ``workers`` processes, in the given order.

    A chunk whose worker failed (a worker killed, a pool that cannot
    start) is read in this process instead, so a run is never lost to the
    parallelism: the results are those of the serial path.
    """
    texts = [os.fspath(run_dir) for run_dir in run_dirs]
    done = _map_chunks(texts, _read_chunk, _chunk_here, workers, method)
    if done is None:
        return [read_run(run_dir) for run_dir in run_dirs]
    results: list[RunRecord | UnreadableRun] = []
    for start, items in zip(range(0, len(texts), PARALLEL_CHUNK_RUNS), done, strict=True):
        batch = run_dirs[start : start + PARALLEL_CHUNK_RUNS]
        results += [_rebuild(d, *item) for d, item in zip(batch, items, strict=True)]
    return results


def _parallel_workers(count: int, workers: int | None) -> tuple[int, str] | None:
    """``(processes, start method)`` for reading ``count`` runs, or None to read them here.

    The one rule of :func:`read_runs` and :func:`read_chunks`: workers only
    for at least :data:`PARALLEL_MIN_RUNS` runs (:data:`SPAWN_MIN_RUNS` where
    they must be spawned, see :func:`_start_method`), never from a daemonic
    process (which may not start any), and never for ``workers`` below 2.
    """
    processes = available_cpus() if workers is None else workers
    method = _start_method()
    smallest = max(PARALLEL_MIN_RUNS, SPAWN_MIN_RUNS if method == "spawn" else 0)
    if processes < 2 or count < smallest or multiprocessing.current_process().daemon:
        return None
    return processes, method


def read_chunks(
    run_dirs: Sequence[str],
    task: Callable[[list[str]], Any],
    *,
    workers: int | None = None,
) -> list[Any]:
    """``task`` of each chunk of :data:`PARALLEL_CHUNK_RUNS` directories, in order.

    What :func:`read_runs` does with :func:`read_run`, for a task that
    reads a whole chunk and gives one picklable result for it (a table of
    the chunk's runs, say): so that the per-run work of turning a record
    into what the caller keeps is done in the workers too, and only one
    object per chunk comes back. The same rule decides where it runs
    (:func:`read_runs`' ``workers``); a chunk whose worker failed, and every
    chunk when no pool can start, is done in this process by ``task``
    itself. ``task`` must be a module-level function (spawned workers
    import it by name) that never raises for a bad run.
    """
    texts = list(run_dirs)
    plan = _parallel_workers(len(texts), workers)
    done = None if plan is None else _map_chunks(texts, task, task, *plan)
    if done is not None:
        return done
    bounds = range(0, len(texts), PARALLEL_CHUNK_RUNS)
    progress = logged_progress(
        bounds,
        total=len(bounds),
        what=f"batches of {PARALLEL_CHUNK_RUNS} run directories read",
        logger=logger,
        # As read_runs logs: nothing for fewer than PROGRESS_MIN_RUNS runs.
        min_total=1 if len(texts) >= PROGRESS_MIN_RUNS else len(bounds) + 1,
    )
    return [task(texts[start : start + PARALLEL_CHUNK_RUNS]) for start in progress]


def read_runs(
    run_dirs: Sequence[Path], *, workers: int | None = None
) -> list[RunRecord | UnreadableRun]:
    """:func:`read_run` of every directory, in order, in parallel when there are many.

    Args:
        run_dirs: the directories to read.
        workers: worker processes; None means one per available CPU
            (:func:`available_cpus`), 1 reads in this process. Fewer than
            :data:`PARALLEL_MIN_RUNS` directories (:data:`SPAWN_MIN_RUNS`
            where the workers must be spawned, see :func:`_start_method`)
            are read in this process, as they are from a daemonic process
            (which may not start workers).

    Returns:
        One result per directory, equal to ``[read_run(d) for d in run_dirs]``:
        parsing happens in the workers, and every bad run comes back as an
        :class:`UnreadableRun` with its reason, never as an exception.
    """
    plan = _parallel_workers(len(run_dirs), workers)
    if plan is None:
        progress = logged_progress(
            run_dirs,
            total=len(run_dirs),
            what="run directories read",
            logger=logger,
            min_total=PROGRESS_MIN_RUNS,
        )
        return [read_run(run_dir) for run_dir in progress]
    return _read_in_workers(run_dirs, *plan)


def _batch_reader(reader: object) -> BatchReader | None:
    """The object whose ``read_many`` serves ``reader``: itself, or the owner of its ``read``."""
    if hasattr(reader, "read_many"):
        return reader  # type: ignore[return-value]
    owner = getattr(reader, "__self__", None)
    if getattr(reader, "__name__", None) == "read" and hasattr(owner, "read_many"):
        return owner
    return None


def _check_policy(on_duplicate: str) -> None:
    """``ValueError`` for an unknown duplicate policy (before any scanning)."""
    if on_duplicate not in ON_DUPLICATE_POLICIES:
        raise ValueError(
            f"Unknown on_duplicate: {on_duplicate!r} "
            f"(choose from {', '.join(ON_DUPLICATE_POLICIES)})"
        )


def discover_runs(
    roots: Sequence[Path | str] | Path | str,
    *,
    recursive: bool = False,
    include_legacy: bool = False,
    on_duplicate: str = ON_DUPLICATE_NEWEST,
    include_failed: bool = False,
    reader: Callable[[Path], RunRecord | UnreadableRun | None] | BatchReader | None = None,
    workers: int | None = None,
) -> tuple[list[RunRecord], dict[str, list[str]]]:
    """Find and read every run under ``roots``, with a diagnostic for each one set aside.

    Args:
        roots: one root or a sequence of roots (see :func:`find_run_candidates`).
        recursive: search roots at any depth instead of their immediate children.
        include_legacy: keep runs whose seed cannot be determined; their
            ``seed`` stays None (out of band: a real seed -1 is an ordinary
            seed), so they are never ranked or paired. Otherwise they are
            only reported under ``no_seed``.
        on_duplicate: ``"newest"`` keeps the run with the newest metrics file
            per (dataset, model, seed, fingerprint); ``"error"`` raises;
            ``"all"`` keeps every run.
        include_failed: keep runs whose recorded returncode is non-zero.
        reader: reads one directory (default :func:`read_run`) and returns a
            record or an :class:`UnreadableRun` (None counts as unreadable
            without a reason); the platform passes a caching reader so that
            unchanged runs are not parsed again. A :class:`BatchReader` (a
            :class:`~deepecgkit.rundir.cache.RunCache`, or its ``read``
            method) is asked for all candidates at once, so that it parses
            its misses in parallel.
        workers: processes that parse runs when there are at least
            :data:`PARALLEL_MIN_RUNS` to parse (see :func:`read_runs`);
            None means one per available CPU, 1 parses in this process. The
            result is the same either way.

    Returns:
        ``(records, diagnostics)``. Records are sorted by (dataset, model,
        seed, fingerprint, run_dir) under every policy, runs without a seed
        first. Diagnostics has the keys of :data:`DIAGNOSTIC_KEYS` in that
        order, each a list of strings in discovery order: ``unreadable``
        holds ``"<dir> (<reason>)"`` for every run (and every directory that
        could not be listed) that could not be read; ``suspect`` holds
        ``"<dir> (<note>; <note>)"`` for every kept run from which something
        was set aside.

    Raises:
        ValueError: an unknown ``on_duplicate`` (before any scanning), or a
            duplicate under ``on_duplicate="error"``.

    The fingerprint is part of the duplicate key because two runs of one
    pairing and seed with different hyperparameters are different
    experiments; resolving them by modification time would silently pick a
    hyperparameter setting. Failed runs are set aside because a run can
    write its metrics and then crash.
    """
    _check_policy(on_duplicate)
    diagnostics: dict[str, list[str]] = {key: [] for key in DIAGNOSTIC_KEYS}
    candidates, problems = find_run_candidates(roots, recursive=recursive)
    diagnostics["unreadable"] += [problem.entry() for problem in problems]
    batch = None if reader is None else _batch_reader(reader)
    results: Iterable[RunRecord | UnreadableRun]
    if reader is None:
        results = read_runs(candidates, workers=workers)
    elif batch is not None:
        results = batch.read_many(candidates, workers=workers)
    else:
        read = reader
        results = (
            _read_with(read, run_dir)  # type: ignore[arg-type]
            for run_dir in logged_progress(
                candidates,
                total=len(candidates),
                what="run directories read",
                logger=logger,
                min_total=PROGRESS_MIN_RUNS,
            )
        )
    policy = (on_duplicate, include_failed, include_legacy)
    return _select_runs(candidates, results, diagnostics, policy), diagnostics


def _select_runs(
    candidates: Sequence[Path] | Sequence[str],
    results: Iterable[_Result],
    diagnostics: dict[str, list[str]],
    policy: tuple[str, bool, bool],
) -> list[_Kept]:
    """The runs discovery keeps of each candidate's result, sorted; diagnostics appended.

    ``policy`` is ``(on_duplicate, include_failed, include_legacy)`` of :func:`discover_runs`.

    The one definition of what :func:`discover_runs` and
    :func:`discover_run_frame` keep, report and in which order: the results
    may be :class:`RunRecord` or :class:`EncodedRecord` items (the rules read
    no metric), and a candidate given as text reads as its
    :class:`~pathlib.Path` does.
    """
    on_duplicate, include_failed, include_legacy = policy
    records: list[_Kept] = []
    for run_dir, record in zip(candidates, results, strict=True):
        if isinstance(record, UnreadableRun):
            diagnostics["unreadable"].append(record.entry())
            continue
        if record.returncode is not None and record.returncode != 0:
            diagnostics["failed"].append(f"{run_dir} (returncode {record.returncode})")
            if not include_failed:
                continue
        if record.seed is None:
            diagnostics["no_seed"].append(str(run_dir))
            if not include_legacy:
                continue
        if record.suspect:
            diagnostics["suspect"].append(f"{run_dir} ({'; '.join(record.suspect)})")
        records.append(record)
    records = _resolve_duplicates(records, on_duplicate, diagnostics["duplicate"])
    records.sort(key=_sort_key)
    return records


class CandidateColumns(Mapping[str, Any]):
    """Every candidate's result as columns (what ``RunCache.candidate_columns`` gives).

    ``self["reason"]`` is an object array (why a run is unreadable; None for
    a readable one); every other field is a pyarrow column of ``source``, the
    run cache's rows, at ``place`` (the row of each candidate, in the
    candidates' order). A field is gathered from ``source`` only when asked
    for, and :meth:`gathered` takes the rows of some candidates straight
    from ``source``: a records frame's columns are then copied once, in the
    frame's order, instead of once for every candidate and again for the
    frame (at 100,000 runs the metrics texts alone are 84 MB a copy).
    """

    def __init__(self, source: pa.Table, place: np.ndarray, reason: np.ndarray) -> None:
        self._source, self._place, self._reason = source, place, reason
        self._taken: dict[str, pa.ChunkedArray] = {}

    def __getitem__(self, field: str) -> Any:
        if field == "reason":
            return self._reason
        column = self._taken.get(field)
        if column is None:
            column = _take(self._source.column(field), self._place)
            self._taken[field] = column
        return column

    def __iter__(self) -> Iterator[str]:
        return iter(["reason", *self._source.column_names])

    def __len__(self) -> int:
        return 1 + self._source.num_columns

    def gathered(self, field: str, numbers: Sequence[int] | np.ndarray) -> pa.ChunkedArray:
        """``self[field].take(numbers)``: the field of the candidates ``numbers``, in that order."""
        if field in self._taken:
            return _take(self._taken[field], np.asarray(numbers, dtype=np.int64))
        rows = self._place[np.asarray(numbers, dtype=np.int64)]
        return _take(self._source.column(field), rows)


def _take(column: pa.ChunkedArray, rows: np.ndarray) -> pa.ChunkedArray:
    """``column.take(rows)``, from one contiguous copy of the column where that is possible.

    Arrow's take from a column of many chunks at scattered rows looks each
    row's chunk up: at 100,000 runs the metrics texts of a loaded run cache
    (a chunk per row group) took 0.2-0.35 s that way, against 6 ms to join
    the chunks and 16 ms to take from the joined column. A column whose
    joined text would not fit 32-bit offsets (over 2 GiB) is taken chunk by
    chunk, as before.
    """
    indices = pa.array(rows, pa.int64())
    if column.num_chunks > 1:
        try:
            return pa.chunked_array([column.combine_chunks().take(indices)], column.type)
        except (pa.ArrowInvalid, pa.ArrowCapacityError):
            pass
    return column.take(indices)


@runtime_checkable
class ColumnReader(Protocol):
    """A cache that gives every candidate's result as columns (a :class:`RunCache`)."""

    def candidate_columns(
        self,
        run_dirs: Sequence[str],
        *,
        workers: int | None = None,
        states: Sequence[MetricsState] | None = None,
    ) -> CandidateColumns: ...


class EncodedBatchReader(Protocol):
    """What :func:`discover_run_frame` asks for every candidate at once (a :class:`RunCache`)."""

    def read_encoded(
        self, run_dirs: Sequence[str], *, workers: int | None = None
    ) -> list[EncodedRecord | UnreadableRun]: ...


def discover_run_frame(
    roots: Sequence[Path | str] | Path | str,
    *,
    cache: EncodedBatchReader,
    recursive: bool = False,
    include_legacy: bool = False,
    on_duplicate: str = ON_DUPLICATE_NEWEST,
    include_failed: bool = False,
    workers: int | None = None,
    listing: ListingRecord | None = None,
    known: Mapping[str, tuple[int, bool] | tuple[int, bool, bool]] | None = None,
    proven: Sequence[MetricsState] | None = None,
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """:func:`discover_runs` through a run cache, as the records frame the platform stores.

    Equal, frame and diagnostics alike, to::

        records, diagnostics = discover_runs(roots, ..., reader=cache)
        records_to_frame(records), diagnostics

    at a fraction of a warm rescan's cost: candidates stay path strings,
    and each unchanged run comes from the cache as an
    :class:`EncodedRecord` (its metrics as saved JSON text), so no record
    of an unchanged run is decoded into numbers and encoded again. The
    options are :func:`discover_runs`'; ``cache`` parses its misses (in
    ``workers`` processes when many, see :func:`read_runs`). ``listing``
    and ``known`` go to :func:`find_run_candidate_paths`: the platform
    records the scan (for the tree index it saves) and skips the listing of
    every run directory an earlier scan's index proves unchanged.
    ``proven`` skips the scan altogether: it is every candidate's metrics
    file state, in the scan's order, as
    :meth:`~deepecgkit.rundir.tree_index.TreeIndex.unchanged_candidates`
    gives them for a tree it has just proven unchanged (no directory that
    cannot be listed, so no problem to report); the cache then looks the
    runs up by these states without a ``stat`` of its own. ``listing`` and
    ``known`` are unused with it.

    Raises:
        ValueError: as :func:`discover_runs`.
    """
    _check_policy(on_duplicate)
    diagnostics: dict[str, list[str]] = {key: [] for key in DIAGNOSTIC_KEYS}
    if proven is None:
        candidates, problems = find_run_candidate_paths(
            roots, recursive=recursive, listing=listing, known=known
        )
        diagnostics["unreadable"] += [problem.entry() for problem in problems]
    else:
        # (Columns of states, cache.FileStates, give their paths at once.)
        paths = getattr(proven, "paths", None)
        candidates = list(paths) if paths is not None else [path for path, _, _ in proven]
    policy = (on_duplicate, include_failed, include_legacy)
    if isinstance(cache, ColumnReader):
        columns = cache.candidate_columns(candidates, workers=workers, states=proven)
        frame = _select_columns(candidates, columns, diagnostics, policy)
        # Every candidate's columns (a copy of the cache's rows) go before the caller goes on.
        del columns
        release_free_memory()
        return frame, diagnostics
    results = cache.read_encoded(candidates, workers=workers)
    return records_to_frame(_select_runs(candidates, results, diagnostics, policy)), diagnostics


class _KeptRow(NamedTuple):
    """What the rules of :func:`_select_runs` read of a kept run, and its row (``number``)."""

    run_dir: str
    dataset: str
    model: str
    seed: int | None
    fingerprint: str | None
    mtime: float
    number: int


def _present(values: np.ndarray) -> np.ndarray:
    """Which items of an object array are not None (bool array)."""
    return np.fromiter((value is not None for value in values), dtype=bool, count=len(values))


def _exact_ints(texts: Iterable[str | None]) -> list[int | None]:
    """Decimal texts (None: unknown) as exact Python ints."""
    return [None if text is None else int(text) for text in texts]


def _select_columns(
    candidates: Sequence[str],
    columns: CandidateColumns,
    diagnostics: dict[str, list[str]],
    policy: tuple[str, bool, bool],
) -> pd.DataFrame:
    """:func:`_select_runs` then :func:`records_to_frame`, on a run cache's columns.

    ``columns`` are :meth:`~deepecgkit.rundir.cache.RunCache.candidate_columns`
    of ``candidates``. The same rules, diagnostics (in the same order) and
    frame (values and dtypes): failed and seedless runs are found with masks
    over the columns, the few runs listed in the diagnostics get their text
    one by one, duplicates are resolved and the kept runs sorted by
    :func:`_resolve_duplicates` and :func:`_sort_key` themselves, on one
    small tuple per kept run; the frame's columns are the selected rows of
    the cache's (text columns stay Arrow arrays, see :func:`_frame_text`).
    """
    on_duplicate, include_failed, include_legacy = policy
    reasons = columns["reason"]
    readable = ~_present(reasons)
    for number in np.flatnonzero(~readable):
        diagnostics["unreadable"].append(
            UnreadableRun(Path(candidates[number]), reasons[number]).entry()
        )
    returncodes = columns["returncode"].to_numpy(zero_copy_only=False)
    failed = readable & _present(returncodes)
    failed[failed] = returncodes[failed] != "0"
    for number in np.flatnonzero(failed):
        diagnostics["failed"].append(f"{candidates[number]} (returncode {returncodes[number]})")
    kept = readable & ~failed if not include_failed else readable
    seedless = kept & ~columns["seed"].is_valid().to_numpy(zero_copy_only=False)
    diagnostics["no_seed"] += [candidates[number] for number in np.flatnonzero(seedless)]
    if not include_legacy:
        kept &= ~seedless
    notes = columns["suspect"]
    noted = pc.not_equal(notes, "[]").fill_null(False).to_numpy(zero_copy_only=False)
    for number in np.flatnonzero(kept & noted).tolist():
        listed = "; ".join(json.loads(notes[number].as_py()))
        diagnostics["suspect"].append(f"{candidates[number]} ({listed})")
    numbers = np.flatnonzero(kept)
    ordered = _columnar_order(candidates, columns, numbers, on_duplicate)
    if ordered is None:
        ordered = _python_order(candidates, columns, numbers, on_duplicate, diagnostics)
    frame_columns: dict[str, Any] = {"run_dir": [candidates[number] for number in ordered]}
    for field in RECORD_COLUMNS[1:]:
        selected = columns.gathered(field, ordered)
        if field in RECORD_INT_FIELDS:
            frame_columns[field] = _exact_ints(selected.to_pylist())
        elif pa.types.is_string(selected.type):
            frame_columns[field] = _frame_text(selected)
        else:
            frame_columns[field] = selected.to_numpy(zero_copy_only=False)
    return record_columns_to_frame(frame_columns)


def _python_order(
    candidates: Sequence[str],
    columns: CandidateColumns,
    numbers: np.ndarray,
    on_duplicate: str,
    diagnostics: dict[str, list[str]],
) -> list[int]:
    """The kept runs' candidate numbers after :func:`_resolve_duplicates`, in :func:`_sort_key`
    order: one small tuple per kept run, the rules of :func:`_select_runs` themselves."""

    def values(field: str) -> list[Any]:
        return columns.gathered(field, numbers).to_pylist()

    runs = [
        _KeptRow(candidates[number], dataset, model, seed, fingerprint, mtime, number)
        for number, dataset, model, seed, fingerprint, mtime in zip(
            numbers.tolist(),
            values("dataset"),
            values("model"),
            _exact_ints(values("seed")),
            values("fingerprint"),
            values("mtime"),
            strict=True,
        )
    ]
    runs = _resolve_duplicates(runs, on_duplicate, diagnostics["duplicate"])  # type: ignore[arg-type]
    runs.sort(key=_sort_key)
    return [run.number for run in runs]


#: The keys of :func:`_duplicate_key`, as the run cache's column names.
_DUPLICATE_FIELDS = ("dataset", "model", "seed", "fingerprint")


def _columnar_order(
    candidates: Sequence[str],
    columns: CandidateColumns,
    numbers: np.ndarray,
    on_duplicate: str,
) -> list[int] | None:
    """:func:`_python_order` by one Arrow sort, or None where only the Python rules can tell.

    The same order: :func:`_sort_key` compares text by code point, which is
    the order of its UTF-8 bytes (Arrow's order of text); a run without a
    seed comes first (as ``(False, 0)`` against ``(True, seed)``), and a
    missing fingerprint sorts as ``""``: no key holds a null. A run directory is unique
    among the candidates, so the order is total. None (the Python road,
    which gives the same answer or raises the same error) when the kept runs
    hold possible duplicates (the duplicate policy acts on those, and they
    are rare), a seed that is not decimal text within 64 bits, a missing
    dataset or model, or a path that is not valid UTF-8 (an undecodable
    byte kept as a surrogate).
    """
    try:
        run_dir = pa.array([candidates[number] for number in numbers.tolist()], pa.string())
        seed = pc.cast(columns.gathered("seed", numbers), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeEncodeError):
        return None
    table = pa.table(
        {
            "dataset": columns.gathered("dataset", numbers),
            "model": columns.gathered("model", numbers),
            "seed": seed,
            "fingerprint": columns.gathered("fingerprint", numbers),
        }
    )
    if table["dataset"].null_count or table["model"].null_count:
        return None
    if on_duplicate != ON_DUPLICATE_ALL and (
        table.group_by(list(_DUPLICATE_FIELDS)).aggregate([]).num_rows < table.num_rows
    ):
        return None
    sortable = pa.table(
        {
            "dataset": table["dataset"],
            "model": table["model"],
            "seeded": table["seed"].is_valid(),
            "seed": pc.fill_null(table["seed"], 0),
            "fingerprint": pc.fill_null(table["fingerprint"], ""),
            "run_dir": run_dir,
        }
    )
    keys = [(name, "ascending") for name in sortable.column_names]
    order = pc.sort_indices(sortable, sort_keys=keys)
    return numbers[np.asarray(order)].tolist()


#: The dtype pandas gives a column of text (its ``str`` dtype since pandas 3).
_TEXT_DTYPE = pd.Series(["text"]).dtype


def _frame_text(values: Any) -> Any:
    """A pyarrow text column as the records frame holds it, without a Python string per value.

    What pandas infers for the same values as a list: no text at all (every
    value null) is an object column of None; otherwise pandas' text dtype,
    built straight from the Arrow data (or, where that dtype is not
    pandas' Arrow-backed ``str``, from the list).
    """
    if values.null_count == len(values) or not isinstance(_TEXT_DTYPE, pd.StringDtype):
        return values.to_pylist()
    return pd.array(values, dtype=_TEXT_DTYPE)


# --- encoder checkpoints ---------------------------------------------------------------


def _architecture(metadata: dict, record: RunRecord) -> str:
    """Registered architecture of a run: ``params.model``, else the CSV's model name."""
    params = metadata.get("params")
    if isinstance(params, dict) and isinstance(params.get("model"), str):
        return params["model"]
    return record.model


def _checkpoint_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a checkpoint file (None when it is a regular file).

    Only the file's type is checked here, without reading it: whether its
    content loads is learnt when the probe loads it (see
    :func:`deepecgkit.evaluation.transfer.cross_dataset_transfer`).
    """
    try:
        info = os.stat(path)
    except PermissionError:
        return REASON_PERMISSION
    except OSError:
        return "missing" if not os.path.islink(path) else "dangling symbolic link"
    return None if stat.S_ISREG(info.st_mode) else "not a regular file"


def find_encoder_checkpoints(
    records: Iterable[RunRecord],
) -> tuple[dict[str, dict[str, Path]], list[str]]:
    """The checkpoint of each (architecture, dataset), and the recorded ones that are not there.

    ``deepecg train-grid`` records the checkpoint of a torch run in
    ``run_metadata.json`` as ``"checkpoint": "checkpoint.pt"`` (relative to the
    run directory; null when none was kept, as for scikit-learn baselines or
    ``--checkpoints first-seed`` beyond the first seed) and the registered
    architecture as ``params.model``. A transfer matrix needs one frozen
    encoder per (architecture, source dataset); this picks it without
    importing torch, so the platform can decide cheaply whether there is
    anything to probe.

    Args:
        records: discovered runs (runs without a seed are skipped: they
            cannot be ordered, and a seeded run is always available when any is).

    Returns:
        ``(checkpoints, problems)``. ``checkpoints`` is
        ``{architecture: {dataset: checkpoint path}}``, sorted by name, from
        the run with the smallest seed among those whose recorded checkpoint
        is a regular file; runs whose metadata names no checkpoint are
        skipped. ``problems`` has one ``"<path> (<reason>)"`` entry for each
        recorded checkpoint that is missing or not a regular file, so a cell
        that could have been probed never vanishes without a word.
    """
    chosen: dict[tuple[str, str], tuple[int, Path]] = {}
    problems: list[str] = []
    for record in records:
        if record.seed is None:
            continue
        metadata = read_metadata(record.run_dir) or {}
        relative = metadata.get(CHECKPOINT_KEY)
        if not isinstance(relative, str) or not relative:
            continue
        path = Path(record.run_dir) / relative
        problem = _checkpoint_problem(path)
        if problem is not None:
            problems.append(f"{display_path(path)} ({problem})")
            continue
        key = (_architecture(metadata, record), record.dataset)
        if key not in chosen or record.seed < chosen[key][0]:
            chosen[key] = (record.seed, path)
    result: dict[str, dict[str, Path]] = {}
    for (architecture, dataset), (_, path) in sorted(chosen.items()):
        result.setdefault(architecture, {})[dataset] = path
    return result, problems


def encoder_checkpoints(records: Iterable[RunRecord]) -> dict[str, dict[str, Path]]:
    """The checkpoint of each (architecture, dataset) (see :func:`find_encoder_checkpoints`)."""
    return find_encoder_checkpoints(records)[0]
