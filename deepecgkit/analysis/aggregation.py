"""Averaging reconciliation and the per-seed summary of every metric.

Runs are read by :mod:`deepecgkit.rundir.read` and flattened into the long
runs frame by :func:`deepecgkit.rundir.records.runs_to_frame`; this module
works on that frame: :func:`reconcile_averaging` drops runs whose averaging
mode is a minority within their cell, and :func:`aggregate_runs` summarises
every (dataset, model, metric) across its seeds with a Student-t interval.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from deepecgkit._compat import moved_names
from deepecgkit.analysis.constants import CONFIDENCE_LEVEL
from deepecgkit.analysis.distributions import t_critical
from deepecgkit.analysis.schemas import AGGREGATE_COLUMNS, CONFLICT_COLUMNS
from deepecgkit.analysis.statistics import _check_confidence_level
from deepecgkit.rundir.format import AVERAGING_UNKNOWN
from deepecgkit.rundir.int_columns import exact_int_series

__all__ = ["aggregate_runs", "reconcile_averaging"]

#: Names that moved to the run-directory package (old import paths, one release).
__moved__ = {
    **dict.fromkeys(
        (
            "find_run_candidates",
            "find_run_directories",
            "discover_runs",
            "read_run",
            "read_run_metrics",
            "REASON_VANISHED",
        ),
        "deepecgkit.rundir.read",
    ),
    **dict.fromkeys(
        ("DIAGNOSTIC_KEYS", "RUN_FRAME_COLUMNS", "RunRecord", "UnreadableRun", "runs_to_frame"),
        "deepecgkit.rundir.records",
    ),
}
__getattr__ = moved_names(__name__, __moved__)


def _empty_frame(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype=object) for column in columns})


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


def _joined_seeds(seeds: pd.Series) -> str:
    return ",".join(map(str, sorted(int(seed) for seed in seeds)))


def _joined_per_group(
    ordered: pd.DataFrame, keys: list[str], texts: list[str], separator: str
) -> pd.Series:
    """``texts`` (one per row of ``ordered``, sorted by ``keys``) joined per group of ``keys``.

    The groups come in ``groupby(keys, sort=True)`` order, which is the order
    of rows sorted by ``keys``; joining slices of a list avoids pandas'
    per-group Python aggregation, which iterates a text column element by element.
    """
    counts = ordered.groupby(keys, sort=True).size()
    ends = np.cumsum(counts.to_numpy())
    starts = ends - counts.to_numpy()
    joined = [separator.join(texts[start:end]) for start, end in zip(starts, ends, strict=True)]
    return pd.Series(joined, index=counts.index, dtype=object)


def _seed_lists(seeded: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Per group of ``keys``: its seeds sorted numerically and joined with ``,``.

    An int64 seed column is sorted once for every group (a Python sort per
    group cost seconds at 100,000 runs); Python ints beyond int64 take the
    per-group path of :func:`_joined_seeds`.
    """
    if seeded["seed"].dtype != np.int64:
        return seeded.groupby(keys, sort=True)["seed"].agg(_joined_seeds)
    ordered = seeded.sort_values([*keys, "seed"], kind="stable")
    return _joined_per_group(ordered, keys, list(map(str, ordered["seed"].tolist())), ",")


def _mode_lists(frame: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Per group of ``keys``: its distinct averaging modes as text, sorted and joined with ``+``.

    Duplicates are dropped before anything is converted, so the Python work
    grows with the distinct (group, mode) pairs, not with the rows.
    """
    distinct = frame[[*keys, "averaging"]].drop_duplicates()
    distinct = distinct.assign(averaging=[str(mode) for mode in distinct["averaging"].tolist()])
    distinct = distinct.drop_duplicates().sort_values([*keys, "averaging"], kind="stable")
    return _joined_per_group(distinct, keys, distinct["averaging"].tolist(), "+")


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
    modes = _mode_lists(frame, keys).reindex(stats_frame.index)
    seeded = frame.assign(seed=exact_int_series(frame["seed"]))
    seeded = seeded.loc[finite & seeded["seed"].notna().to_numpy(), [*keys, "seed"]]
    # Python ints sort and print exactly whatever their size (seeds are identifiers).
    seeds = _seed_lists(seeded, keys)

    result = stats_frame.reset_index()
    result["averaging"] = modes.to_numpy()
    result["seeds"] = seeds.reindex(stats_frame.index, fill_value="").to_numpy()
    n = result["n"].to_numpy(dtype=np.int64)
    std = np.where(n >= 2, result["std"].to_numpy(dtype=np.float64), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        sem = std / np.sqrt(n)
        half_width = t_critical(confidence_level, np.where(n >= 2, n - 1, np.nan)) * sem
    mean = result["mean"].to_numpy(dtype=np.float64)
    result["std"] = std
    result["sem"] = sem
    result["lower_ci"] = mean - half_width
    result["upper_ci"] = mean + half_width
    result["n_runs"] = result["n_runs"].astype(np.int64)
    result["n"] = n
    return result.loc[:, list(AGGREGATE_COLUMNS)].reset_index(drop=True)
