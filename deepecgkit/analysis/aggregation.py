"""Discover finished run directories, read them, and summarise every metric across seeds.

A run directory is any directory holding ``classification_metrics.csv`` (see
``00-decisions.md``). There are two metrics schemas, single-label and
multi-label, which share only precision, recall, F1, AUROC and the
calibration columns, so the schema (``multi_label``) and the averaging mode
travel with every record. Metric columns are looked up one by one: a run
written before a metric existed is still readable and simply contributes
nothing to that metric.

Discovery never raises on a bad run. Every directory that cannot be used
lands in one of four diagnostics lists (``unreadable``, ``no_seed``,
``duplicate``, ``failed``) with its reason, so nothing vanishes silently.

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
import os
import re
import stat
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from deepecgkit.analysis.constants import (
    AVERAGING_MACRO_LABEL,
    AVERAGING_UNKNOWN,
    CONFIDENCE_LEVEL,
    LEGACY_SEED,
    METADATA_FILENAME,
    METRICS_FILENAME,
    MULTI_LABEL_METRICS,
    ON_DUPLICATE_ALL,
    ON_DUPLICATE_ERROR,
    ON_DUPLICATE_NEWEST,
    ON_DUPLICATE_POLICIES,
    SINGLE_LABEL_METRICS,
    SPLIT_INFO_FILENAME,
)
from deepecgkit.analysis.statistics import _check_confidence_level, _t_quantile

__all__ = [
    "DIAGNOSTIC_KEYS",
    "RUN_FRAME_COLUMNS",
    "RunRecord",
    "aggregate_runs",
    "discover_runs",
    "find_run_directories",
    "read_run_metrics",
    "reconcile_averaging",
    "runs_to_frame",
]

logger = logging.getLogger(__name__)

#: Diagnostics keys, in the order every report lists them.
DIAGNOSTIC_KEYS = ("unreadable", "no_seed", "duplicate", "failed")

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

#: Columns of the conflict frame returned by :func:`reconcile_averaging`.
CONFLICT_COLUMNS = ("dataset", "model", "kept_averaging", "dropped_runs")

#: Columns of :func:`aggregate_runs`.
AGGREGATE_COLUMNS = (
    "dataset",
    "model",
    "metric",
    "averaging",
    "n_runs",
    "n",
    "mean",
    "std",
    "sem",
    "lower_ci",
    "upper_ci",
    "seeds",
)

_SPLIT_SIZE_KEYS = ("n_train", "n_val", "n_test", "n_test_groups")
#: Read-only, never blocking on a FIFO, not inherited by child processes.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
#: Bytes asked for beyond the file's size, so that one read normally reaches end-of-file.
_READ_SLACK = 1024
_SEED_SUFFIX = re.compile(r"seed(\d+)$")
_MULTI_LABEL_MARKER = "exact_match_accuracy"
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


class RunRecord(NamedTuple):
    """One finished run, as read from its directory.

    ``metrics`` keys follow the order of the schema's metric tuple
    (``SINGLE_LABEL_METRICS`` or ``MULTI_LABEL_METRICS``); ``mtime`` is the
    modification time of ``classification_metrics.csv`` in seconds since the
    epoch. Split sizes are None when unknown.
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


# --- low-level readers -----------------------------------------------------------------


def _read_regular_file(path: str | os.PathLike) -> tuple[bytes, os.stat_result] | None:
    """Bytes and stat of ``path`` when it is a readable regular file, else None.

    The file is opened once and its type checked with ``fstat`` on the open
    descriptor, rather than ``stat`` followed by ``open``: the path is
    resolved once instead of twice, which is a third of discovery's system
    calls at 300,000 files, and the check applies to the very file read.
    ``O_NONBLOCK`` keeps the open of a FIFO from blocking (it is then
    rejected as not regular); it changes nothing for regular files.
    """
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return None
        chunks = []
        while chunk := os.read(descriptor, info.st_size + _READ_SLACK):
            chunks.append(chunk)
        return b"".join(chunks), info
    except OSError:
        return None
    finally:
        os.close(descriptor)


def _read_json(path: str | os.PathLike) -> dict | None:
    """Parse ``path`` as UTF-8 JSON; the dict when the top level is an object, else None.

    Never raises: a missing or non-regular file, an ``OSError``, invalid
    UTF-8, invalid JSON and a non-object top level all give None.
    """
    loaded = _read_regular_file(path)
    if loaded is None:
        return None
    try:
        parsed = json.loads(loaded[0].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _seed_from_directory(run_dir: Path) -> int | None:
    """The N of a final path component ending in ``seed<N>`` (case-sensitive), else None."""
    match = _SEED_SUFFIX.search(Path(run_dir).name)
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


def _parse_metrics_csv(data: bytes) -> tuple[list[str], list[str]] | None:
    """Header and first data row of a metrics CSV, or None when pandas could not parse it.

    Mirrors what ``pandas.read_csv`` accepts: UTF-8 (a BOM is allowed),
    blank lines skipped, short rows padded, and any row longer than the
    header rejected as a parse error. Only the first data row is returned.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    try:
        rows = [row for row in csv.reader(io.StringIO(text, newline="")) if row]
    except csv.Error:
        return None
    if len(rows) < 2:
        return None
    header = rows[0]
    if any(len(row) > len(header) for row in rows[1:]):
        return None
    first = rows[1] + [""] * (len(header) - len(rows[1]))
    return header, first


# --- reading one run ------------------------------------------------------------------------


def read_run_metrics(run_dir: Path | str) -> RunRecord | None:
    """Read one run directory into a :class:`RunRecord`, or None when it is unusable.

    Unusable means: ``classification_metrics.csv`` is not a regular file,
    cannot be parsed, has no data rows, lacks a ``model`` or ``dataset``
    column, or its first row's model or dataset is missing or blank.

    The CSV's first row is the authority for model and dataset (kept as
    strings, so ``007`` stays ``007``). The seed comes from
    ``run_metadata.json`` when it is an int (not a bool), else from a
    directory name ending in ``seed<N>``, else None: runs written before
    seeds were recorded stay readable through their names. Split sizes from
    ``split_info.json`` are kept only when they are ints.
    """
    # Plain strings inside: pathlib parses a path on every construction and
    # join, which was a tenth of discovery time at 100,000 runs.
    run_dir = run_dir if isinstance(run_dir, Path) else Path(run_dir)
    directory = os.fspath(run_dir)
    loaded = _read_regular_file(os.path.join(directory, METRICS_FILENAME))
    if loaded is None:
        return None
    data, info = loaded
    parsed = _parse_metrics_csv(data)
    if parsed is None:
        return None
    header, row = parsed
    cells: dict[str, str] = {}
    for name, cell in zip(header, row, strict=True):
        cells.setdefault(name, cell)
    model, dataset = cells.get("model"), cells.get("dataset")
    if model is None or dataset is None:
        return None
    if model.strip() in _MISSING_CELLS or dataset.strip() in _MISSING_CELLS:
        return None

    multi_label = _MULTI_LABEL_MARKER in cells
    schema = MULTI_LABEL_METRICS if multi_label else SINGLE_LABEL_METRICS
    metrics = {name: _cell_float(cells[name]) for name in schema if name in cells}
    if multi_label:
        averaging = AVERAGING_MACRO_LABEL
    else:
        average = cells.get("average")
        averaging = AVERAGING_UNKNOWN if average is None or average in _MISSING_CELLS else average

    metadata = _read_json(os.path.join(directory, METADATA_FILENAME)) or {}
    seed = _strict_int(metadata.get("seed"))
    if seed is None:
        seed = _seed_from_directory(run_dir)
    fingerprint = metadata.get("params_fingerprint")
    split_info = _read_json(os.path.join(directory, SPLIT_INFO_FILENAME)) or {}
    sizes = {key: _strict_int(split_info.get(key)) for key in _SPLIT_SIZE_KEYS}
    return RunRecord(
        run_dir=run_dir,
        model=model,
        dataset=dataset,
        seed=seed,
        multi_label=multi_label,
        averaging=averaging,
        metrics=metrics,
        mtime=info.st_mtime,
        returncode=_strict_int(metadata.get("returncode")),
        fingerprint=fingerprint if isinstance(fingerprint, str) else None,
        **sizes,
    )


# --- finding run directories ------------------------------------------------------------------


def _has_metrics_file(directory: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(os.path.join(directory, METRICS_FILENAME)).st_mode)
    except OSError:
        return False


def _immediate_candidates(root: str, real_root: str) -> list[tuple[str, str]]:
    """Children of ``root`` (symlinked ones included) holding a metrics file.

    Returns:
        ``(path, resolved path)`` pairs. Only a symlinked child needs
        ``realpath``; any other child resolves to the root's real path plus
        its own name, which costs no system call per run.
    """
    try:
        with os.scandir(root) as entries:
            children = [
                (entry.path, _resolved_child(entry, real_root))
                for entry in entries
                if _is_directory(entry, follow=True)
            ]
    except OSError:
        logger.warning("cannot list run root %s; skipped", root)
        return []
    return [(child, resolved) for child, resolved in children if _has_metrics_file(child)]


def _resolved_child(entry: os.DirEntry, real_root: str) -> str:
    """Real path of a child of the root whose real path is ``real_root``."""
    try:
        is_link = entry.is_symlink()
    except OSError:
        is_link = True
    return os.path.realpath(entry.path) if is_link else os.path.join(real_root, entry.name)


def _is_directory(entry: os.DirEntry, *, follow: bool) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow)
    except OSError:
        return False


def _recursive_candidates(root: str) -> list[str]:
    """``root`` and every descendant holding a metrics file, never following symlinks.

    Not following symbolic links to directories means a link loop cannot hang
    the scan and a link cannot pull in a tree outside the root. A directory
    that vanishes or cannot be listed mid-scan is skipped.
    """
    found: list[str] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as entries:
                holds_metrics = False
                for entry in entries:
                    if _is_directory(entry, follow=False):
                        pending.append(entry.path)
                    elif entry.name == METRICS_FILENAME:
                        try:
                            holds_metrics = entry.is_file(follow_symlinks=True)
                        except OSError:
                            holds_metrics = False
        except OSError:
            logger.info("directory %s vanished or cannot be listed during the scan", directory)
            continue
        if holds_metrics:
            found.append(directory)
    return found


def _resolved_descendant(directory: str, root: str, real_root: str) -> str:
    """Real path of a directory found by :func:`_recursive_candidates` under ``root``.

    No link below the root is followed, so the real path is the root's real
    path plus the relative part: no system call per run.
    """
    return os.path.normpath(os.path.join(real_root, os.path.relpath(directory, root)))


def find_run_directories(
    roots: Sequence[Path | str] | Path | str, recursive: bool = False
) -> list[Path]:
    """Candidate run directories under ``roots``: directories holding the metrics file.

    Args:
        roots: one root or a sequence of roots, scanned in the given order;
            roots that are not existing directories are skipped.
        recursive: False scans the immediate children of each root; True
            scans the root itself and every descendant, never following
            symbolic links to directories.

    Returns:
        Paths as found under their root (not resolved), sorted by path string
        within each root. A directory reached twice (overlapping roots, or a
        symlinked child) is kept once, at its first appearance.
    """
    if isinstance(roots, (str, os.PathLike)):
        roots = [roots]
    seen: set[str] = set()
    candidates: list[Path] = []
    for root in roots:
        root_text = os.fspath(root)
        if not os.path.isdir(root_text):
            continue
        real_root = os.path.realpath(root_text)
        if recursive:
            found = [
                (directory, _resolved_descendant(directory, root_text, real_root))
                for directory in _recursive_candidates(root_text)
            ]
        else:
            found = _immediate_candidates(root_text, real_root)
        for directory, resolved in sorted(found):
            if resolved in seen:
                continue
            seen.add(resolved)
            candidates.append(Path(directory))
    return candidates


# --- discovery ---------------------------------------------------------------------------------


def _duplicate_key(record: RunRecord) -> tuple[str, str, int | None, str | None]:
    return (record.dataset, record.model, record.seed, record.fingerprint)


def _sort_key(record: RunRecord) -> tuple:
    seed = LEGACY_SEED if record.seed is None else record.seed
    return (record.dataset, record.model, seed, record.fingerprint or "", str(record.run_dir))


def _resolve_duplicates(
    records: list[RunRecord], on_duplicate: str, dropped: list[str]
) -> list[RunRecord]:
    """Apply the duplicate policy; append a diagnostic for every dropped record."""
    if on_duplicate == ON_DUPLICATE_ALL:
        return records
    groups: dict[tuple, list[int]] = {}
    for index, record in enumerate(records):
        groups.setdefault(_duplicate_key(record), []).append(index)
    keep = [True] * len(records)
    losers: list[tuple[int, int]] = []
    for (dataset, model, seed, _), members in groups.items():
        if len(members) < 2:
            continue
        if on_duplicate == ON_DUPLICATE_ERROR:
            first, second = records[members[0]], records[members[1]]
            raise ValueError(
                f"duplicate run for model {model!r} on dataset {dataset!r} with seed {seed}: "
                f"{first.run_dir} and {second.run_dir}"
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


def discover_runs(
    roots: Sequence[Path | str] | Path | str,
    recursive: bool = False,
    include_legacy: bool = False,
    on_duplicate: str = ON_DUPLICATE_NEWEST,
    include_failed: bool = False,
    *,
    reader: Callable[[Path], RunRecord | None] | None = None,
) -> tuple[list[RunRecord], dict[str, list[str]]]:
    """Find and read every run under ``roots``, with a diagnostic for each one set aside.

    Args:
        roots: one root or a sequence of roots (see :func:`find_run_directories`).
        recursive: search roots at any depth instead of their immediate children.
        include_legacy: keep runs whose seed cannot be determined, with seed
            ``LEGACY_SEED``; otherwise they are only reported under ``no_seed``.
        on_duplicate: ``"newest"`` keeps the run with the newest metrics file
            per (dataset, model, seed, fingerprint); ``"error"`` raises;
            ``"all"`` keeps every run.
        include_failed: keep runs whose recorded returncode is non-zero.
        reader: reads one directory (default :func:`read_run_metrics`); the
            platform passes a caching reader so that unchanged runs are not
            parsed again.

    Returns:
        ``(records, diagnostics)``. Records are sorted by (dataset, model,
        seed, fingerprint, run_dir) under every policy. Diagnostics has the
        keys ``unreadable``, ``no_seed``, ``duplicate``, ``failed`` in that
        order, each a list of strings in discovery order.

    Raises:
        ValueError: an unknown ``on_duplicate`` (before any scanning), or a
            duplicate under ``on_duplicate="error"``.

    The fingerprint is part of the duplicate key because two runs of one
    pairing and seed with different hyperparameters are different
    experiments; resolving them by modification time would silently pick a
    hyperparameter setting. Failed runs are set aside because a run can
    write its metrics and then crash.
    """
    if on_duplicate not in ON_DUPLICATE_POLICIES:
        raise ValueError(
            f"Unknown on_duplicate: {on_duplicate!r} "
            f"(choose from {', '.join(ON_DUPLICATE_POLICIES)})"
        )
    read = read_run_metrics if reader is None else reader
    diagnostics: dict[str, list[str]] = {key: [] for key in DIAGNOSTIC_KEYS}
    records: list[RunRecord] = []
    for run_dir in find_run_directories(roots, recursive=recursive):
        record = read(run_dir)
        if record is None:
            diagnostics["unreadable"].append(str(run_dir))
            continue
        if record.returncode is not None and record.returncode != 0:
            diagnostics["failed"].append(f"{run_dir} (returncode {record.returncode})")
            if not include_failed:
                continue
        if record.seed is None:
            diagnostics["no_seed"].append(str(run_dir))
            if not include_legacy:
                continue
            record = record._replace(seed=LEGACY_SEED)
        records.append(record)
    records = _resolve_duplicates(records, on_duplicate, diagnostics["duplicate"])
    records.sort(key=_sort_key)
    return records, diagnostics


# --- the long frame -----------------------------------------------------------------------------


def _optional_int_column(values: Iterable[int | None]) -> np.ndarray:
    """int64 when every value is known, else float64 with NaN for the unknown ones."""
    items = list(values)
    if all(v is not None for v in items):
        return np.asarray(items, dtype=np.int64)
    return np.asarray([np.nan if v is None else v for v in items], dtype=np.float64)


def _empty_frame(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype=object) for column in columns})


def runs_to_frame(records: Sequence[RunRecord]) -> pd.DataFrame:
    """Flatten records into the long runs frame: one row per record and metric.

    Records keep their input order and metrics their dict order. Columns are
    :data:`RUN_FRAME_COLUMNS`. Unknown split sizes (and seeds) are missing
    values: such a column is float with NaN when any value is unknown, int
    otherwise. NaN metric values are kept as rows. No records give an empty
    frame with exactly these columns.
    """
    if not records:
        return _empty_frame(RUN_FRAME_COLUMNS)
    counts = np.fromiter((len(r.metrics) for r in records), dtype=np.int64, count=len(records))

    def repeat(values: Iterable[Any], dtype: Any = object) -> np.ndarray:
        return np.repeat(np.asarray(list(values), dtype=dtype), counts)

    frame = pd.DataFrame(
        {
            "run_dir": repeat(str(r.run_dir) for r in records),
            "model": repeat(r.model for r in records),
            "dataset": repeat(r.dataset for r in records),
            "seed": np.repeat(_optional_int_column(r.seed for r in records), counts),
            "averaging": repeat(r.averaging for r in records),
            "multi_label": repeat((r.multi_label for r in records), dtype=bool),
            **{
                key: np.repeat(_optional_int_column(getattr(r, key) for r in records), counts)
                for key in _SPLIT_SIZE_KEYS
            },
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


def _require_columns(frame: pd.DataFrame, columns: Iterable[str], function: str) -> None:
    """``ValueError`` naming the first required column a non-empty frame lacks."""
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(f"{function} needs column(s) {', '.join(map(repr, missing))}")


def _present(frame: pd.DataFrame, columns: Iterable[str]) -> pd.Series:
    """Rows whose key columns are all present (rows with a missing key are ignored)."""
    mask = pd.Series(True, index=frame.index)
    for column in columns:
        mask &= frame[column].notna()
    return mask


# --- averaging reconciliation --------------------------------------------------------------------


def _majority(mode_counts: dict[str, int]) -> str:
    """Mode held by most runs; ties go to a mode other than "unknown", then the smallest name."""
    return min(
        mode_counts,
        key=lambda mode: (-mode_counts[mode], mode == AVERAGING_UNKNOWN, mode),
    )


def reconcile_averaging(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Drop runs whose averaging mode is a minority within their (dataset, model) cell.

    For single-label runs the averaging is ``binary`` whenever the test split
    holds two or fewer classes, so precision, recall and F1 are then
    positive-class values while elsewhere they are macro averages: pooling
    the two would average incommensurable quantities. The minority is
    dropped rather than blanking the cell, because one unlucky split should
    not throw away four sound runs. Each conflict emits one
    ``RuntimeWarning``.

    Returns:
        ``(surviving rows with a fresh index, conflicts)`` where the conflict
        frame has columns ``dataset``, ``model``, ``kept_averaging``,
        ``dropped_runs`` (number of distinct dropped run directories). Rows
        with a missing dataset or model are passed through untouched.
    """
    if len(runs) == 0:
        return runs, _empty_frame(CONFLICT_COLUMNS)
    _require_columns(runs, ("dataset", "model", "run_dir", "averaging"), "reconcile_averaging")
    keyed = runs.loc[
        _present(runs, ("dataset", "model")), ["dataset", "model", "run_dir", "averaging"]
    ]
    per_run = keyed.drop_duplicates(subset=["dataset", "model", "run_dir"])
    modes = per_run.groupby(["dataset", "model", "averaging"], sort=True, dropna=False).size()
    n_modes = modes.groupby(level=["dataset", "model"], sort=True).size()
    conflicted = n_modes[n_modes > 1]
    if conflicted.empty:
        return runs.reset_index(drop=True), _empty_frame(CONFLICT_COLUMNS)

    conflicts: list[dict[str, Any]] = []
    for dataset, model in conflicted.index:
        counts = {str(mode): int(count) for mode, count in modes.loc[(dataset, model)].items()}
        kept = _majority(counts)
        dropped_runs = sum(count for mode, count in counts.items() if mode != kept)
        conflicts.append(
            {
                "dataset": dataset,
                "model": model,
                "kept_averaging": kept,
                "dropped_runs": dropped_runs,
            }
        )
        warnings.warn(
            f"averaging conflict for model {model!r} on dataset {dataset!r}: "
            f"modes {sorted(counts)}; kept {kept!r}, dropped {dropped_runs} run(s)",
            RuntimeWarning,
            stacklevel=2,
        )
    conflict_frame = pd.DataFrame(conflicts, columns=list(CONFLICT_COLUMNS))
    kept_index = pd.MultiIndex.from_frame(conflict_frame[["dataset", "model"]])
    kept_by_cell = pd.Series(conflict_frame["kept_averaging"].to_numpy(), index=kept_index)
    row_cells = pd.MultiIndex.from_frame(runs[["dataset", "model"]])
    kept_per_row = kept_by_cell.reindex(row_cells).to_numpy(dtype=object)
    averaging = runs["averaging"].astype(str).to_numpy(dtype=object)
    in_conflict = pd.notna(kept_per_row)
    drop = in_conflict & (averaging != kept_per_row)
    return runs.loc[~drop].reset_index(drop=True), conflict_frame


# --- aggregation ----------------------------------------------------------------------------------


def _joined_modes(modes: pd.Series) -> str:
    distinct = sorted({str(mode) for mode in modes})
    return "+".join(distinct)


def aggregate_runs(runs: pd.DataFrame, confidence_level: float = CONFIDENCE_LEVEL) -> pd.DataFrame:
    """Summarise every (dataset, model, metric) across its runs.

    Uses every row rather than per-seed values: with ``on_duplicate="all"``
    the user asked for every run, so each counts. The interval is the plain
    Student-t interval of :func:`~deepecgkit.analysis.statistics.summarize_scores`
    (no Nadeau-Bengio factor); it describes how much a model moves between
    seeds and is not a test.

    Returns:
        One row per (dataset, model, metric), sorted by those three, with
        columns :data:`AGGREGATE_COLUMNS`. ``n_runs`` counts rows, finite or
        not; ``n`` counts finite values; ``seeds`` lists the seeds of rows
        with a finite value, sorted numerically and joined with ``,``.
    """
    _check_confidence_level(confidence_level)
    if len(runs) == 0:
        return _empty_frame(AGGREGATE_COLUMNS)
    _require_columns(
        runs, ("dataset", "model", "metric", "value", "seed", "averaging"), "aggregate_runs"
    )
    keys = ["dataset", "model", "metric"]
    frame = runs.loc[_present(runs, keys), [*keys, "value", "seed", "averaging"]].copy()
    if frame.empty:
        return _empty_frame(AGGREGATE_COLUMNS)
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(np.float64)
    finite = np.isfinite(frame["value"].to_numpy())
    frame["finite_value"] = np.where(finite, frame["value"].to_numpy(), np.nan)
    grouped = frame.groupby(keys, sort=True)
    stats_frame = grouped.agg(
        n_runs=("value", "size"),
        n=("finite_value", "count"),
        mean=("finite_value", "mean"),
        std=("finite_value", "std"),
    )
    modes = grouped["averaging"].agg(_joined_modes)
    seeded = frame.loc[finite & frame["seed"].notna().to_numpy(), [*keys, "seed"]]
    seeded = seeded.assign(seed=seeded["seed"].astype(np.int64)).sort_values([*keys, "seed"])
    seeds = seeded.groupby(keys, sort=True)["seed"].agg(lambda s: ",".join(map(str, s)))

    result = stats_frame.reset_index()
    result["averaging"] = modes.to_numpy()
    result["seeds"] = seeds.reindex(stats_frame.index, fill_value="").to_numpy()
    n = result["n"].to_numpy(dtype=np.int64)
    std = np.where(n >= 2, result["std"].to_numpy(dtype=np.float64), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        sem = std / np.sqrt(n)
        half_width = _t_quantile(confidence_level, np.where(n >= 2, n - 1, np.nan)) * sem
    mean = result["mean"].to_numpy(dtype=np.float64)
    result["std"] = std
    result["sem"] = sem
    result["lower_ci"] = mean - half_width
    result["upper_ci"] = mean + half_width
    result["n_runs"] = result["n_runs"].astype(np.int64)
    result["n"] = n
    return result.loc[:, list(AGGREGATE_COLUMNS)].reset_index(drop=True)
