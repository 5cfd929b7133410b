"""Vectorised paired differences and flip verdicts for every model pair of a grid.

:func:`deepecgkit.analysis.ranking.flip_test` computes one comparison at a
time with pandas filtering, which is clear but costs milliseconds per test.
A grid of 50 models x 20 datasets has 232,750 flip tests, so
:func:`~deepecgkit.analysis.ranking.all_flip_tests` uses this engine
instead. It follows the same definitions step for step:

1. Per-seed values ``V[d, m, s]`` (mean of the usable rows of a cell) and
   per-cell sums of the split sizes are accumulated with ``np.bincount``.
2. Every model pair *component* of a dataset is evaluated at once on
   ``(components x seeds)`` arrays, one dataset at a time (a component
   depends on its dataset's runs only, which is what lets the platform
   recompute one dataset's components and combine): shared seeds, mean and SD of the
   differences, wins, the Nadeau-Bengio factor from the contributing runs'
   mean sizes (and the correction actually applied), the Student-t interval
   and p-value, the scale-aware bimodality flag.
3. Every flip row picks its two components by index and is classified with
   ``np.select`` in the fixed decision order of docs/statistics.md (flip table,
   ``verdict``); its
   directional ``p_reversal`` comes from the two components' p-values and
   means.

Only the human-readable reason strings that carry numbers are formatted per
row, and only for the rows that need them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from deepecgkit.analysis.constants import (
    CORRECTION_UNAVAILABLE,
    NADEAU_BENGIO,
    NO_CORRECTION,
    VERDICT_BIMODAL,
    VERDICT_CONTRADICTED,
    VERDICT_NOT_REPRODUCED,
    VERDICT_SUGGESTIVE,
    VERDICT_SUPPORTED,
    VERDICT_UNRESOLVED,
    VERDICT_UNTESTABLE,
    ZERO_VARIANCE_TOL,
)
from deepecgkit.analysis.statistics import (
    bimodal_flags,
    collapse_gap_floor,
    correction_note,
    is_bimodal,
    reversal_p_value,
)
from deepecgkit.rundir.format import AVERAGING_UNKNOWN
from deepecgkit.rundir.int_columns import exact_int_series

_SIZE_COLUMNS = ("n_train", "n_test", "n_test_groups")
#: Distinct averaging strings representable in one uint64 bit mask.
_MAX_MASK_MODES = 64

_REASON_SUPPORTED = "both intervals exclude zero with opposite signs"
_REASON_UNRESOLVED = "the mean ordering reverses but an interval covers zero"
_REASON_CONTRADICTED = "both intervals exclude zero with the same sign"
_REASON_NOT_REPRODUCED = "the mean ordering does not reverse"
_REASON_NO_SEEDS = "no shared seeds"
_REASON_ONE_SEED = "a single shared seed carries no dispersion"
_REASON_ZERO_VARIANCE = (
    "zero variance across seeds; the interval is undefined, not infinitely precise"
)
#: Appended to the correction note of a component that ``strict_correction`` makes untestable.
_REASON_STRICT_CORRECTION = "strict_correction makes the comparison untestable"


def too_few_groups_reason(n_test_groups: float) -> str:
    """Reason of a component whose test partition holds too few independent units."""
    return (
        f"test partition holds {n_test_groups:g} independent unit(s), "
        "which cannot support an interval"
    )


def strict_correction_reason(note: str) -> str:
    """Reason of a component untestable because Nadeau-Bengio was required but unavailable."""
    return f"{note}; {_REASON_STRICT_CORRECTION}"


def usable_rows(selected: pd.DataFrame) -> pd.DataFrame:
    """Rows that can be ranked or paired: a finite value and a known seed.

    The seed column of the result holds exact integers (int64, or Python ints
    when a seed does not fit). Runs without a seed are left out because "same
    seed means same split" cannot hold for an unknown seed; a negative seed
    is an ordinary seed.
    """
    if selected.empty:
        return selected.assign(seed=pd.Series(dtype=np.int64))
    seeds = exact_int_series(selected["seed"])
    keep = np.isfinite(selected["value"].to_numpy()) & seeds.notna().to_numpy()
    usable = selected.loc[keep].copy()
    usable["seed"] = exact_int_series(seeds[keep])
    return usable


class _Cells:
    """Per-(dataset, model, seed) accumulations of the usable rows."""

    def __init__(self, usable: pd.DataFrame, datasets: list, models: list) -> None:
        self.datasets, self.models = datasets, models
        s, self.seeds = pd.factorize(usable["seed"], sort=True)
        d = pd.Index(datasets).get_indexer(usable["dataset"])
        m = pd.Index(models).get_indexer(usable["model"])
        shape = (len(datasets), len(models), len(self.seeds))
        self.shape = shape
        flat = np.ravel_multi_index((d, m, s), shape)
        size = int(np.prod(shape))
        counts = np.bincount(flat, minlength=size).reshape(shape)
        sums = np.bincount(flat, weights=usable["value"].to_numpy(np.float64), minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.values = np.where(counts > 0, sums.reshape(shape) / counts, np.nan)
        self.size_sums: dict[str, np.ndarray] = {}
        self.size_counts: dict[str, np.ndarray] = {}
        for column in _SIZE_COLUMNS:
            if column not in usable.columns:
                continue
            sizes = pd.to_numeric(usable[column], errors="coerce").to_numpy(dtype=np.float64)
            known = np.isfinite(sizes) & (sizes > 0)  # a count of zero or less is unknown
            self.size_sums[column] = np.bincount(
                flat[known], weights=sizes[known], minlength=size
            ).reshape(shape)
            self.size_counts[column] = np.bincount(flat[known], minlength=size).reshape(shape)
        self.modes: list[str] = []
        self.mode_masks: np.ndarray | None = None
        self.cell_modes: dict[int, set[str]] | None = None
        if "averaging" in usable.columns:
            self._accumulate_modes(usable["averaging"], flat, size)

    def _accumulate_modes(self, averaging: pd.Series, flat: np.ndarray, size: int) -> None:
        known = averaging.notna().to_numpy()
        labels = averaging.astype(str).to_numpy(dtype=object)
        self.modes = sorted(set(labels[known]))
        if len(self.modes) <= _MAX_MASK_MODES:
            codes = pd.Index(self.modes).get_indexer(labels[known])
            bits = np.left_shift(np.uint64(1), codes.astype(np.uint64))
            masks = np.zeros(size, dtype=np.uint64)
            np.bitwise_or.at(masks, flat[known], bits)
            self.mode_masks = masks.reshape(self.shape)
        else:
            self.cell_modes = {}
            for cell, label in zip(flat[known], labels[known], strict=True):
                self.cell_modes.setdefault(int(cell), set()).add(label)


def _component_averaging(
    cells: _Cells, cd: np.ndarray, ca: np.ndarray, cb: np.ndarray, shared: np.ndarray
) -> np.ndarray:
    """Joined averaging modes of each component's contributing rows."""
    n_components = len(cd)
    if cells.mode_masks is None and cells.cell_modes is None:
        return np.full(n_components, AVERAGING_UNKNOWN, dtype=object)
    if cells.mode_masks is not None:
        combined = np.where(
            shared, cells.mode_masks[cd, ca, :] | cells.mode_masks[cd, cb, :], np.uint64(0)
        )
        masks = np.bitwise_or.reduce(combined, axis=1)
        decoded: dict[int, str] = {}
        result = np.empty(n_components, dtype=object)
        for i, mask in enumerate(masks.tolist()):
            if mask not in decoded:
                names = [mode for bit, mode in enumerate(cells.modes) if mask >> bit & 1]
                decoded[mask] = "+".join(names) if names else AVERAGING_UNKNOWN
            result[i] = decoded[mask]
        return result
    result = np.empty(n_components, dtype=object)
    n_seeds = len(cells.seeds)
    for i in range(n_components):
        modes: set[str] = set()
        for s in np.flatnonzero(shared[i]):
            for m in (ca[i], cb[i]):
                flat = (cd[i] * len(cells.models) + m) * n_seeds + s
                modes |= cells.cell_modes.get(int(flat), set())
        result[i] = "+".join(sorted(modes)) if modes else AVERAGING_UNKNOWN
    return result


def _mean_size(cells: _Cells, column: str, index: tuple, shared: np.ndarray) -> np.ndarray:
    """Mean of ``column`` over the contributing rows; NaN when none is known."""
    if column not in cells.size_sums:
        return np.full(shared.shape[0], np.nan)
    cd, ca, cb = index
    sums, counts = cells.size_sums[column], cells.size_counts[column]
    total = np.where(shared, sums[cd, ca, :] + sums[cd, cb, :], 0.0).sum(axis=1)
    count = np.where(shared, counts[cd, ca, :] + counts[cd, cb, :], 0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / count, np.nan)


def _bimodal(values: np.ndarray, shared: np.ndarray, floor: float) -> np.ndarray:
    """:func:`~deepecgkit.analysis.statistics.bimodal_flags` on each row's shared values."""
    return bimodal_flags(np.where(shared, values, np.nan), floor)


def _applied_corrections(
    correction: str, n_train: np.ndarray, n_test: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`~deepecgkit.analysis.statistics.applied_correction`."""
    size = len(n_train)
    if correction == NO_CORRECTION:
        return np.full(size, NO_CORRECTION, dtype=object), np.full(size, "", dtype=object)
    train_known, test_known = n_train > 0, n_test > 0
    applied = np.where(train_known & test_known, NADEAU_BENGIO, CORRECTION_UNAVAILABLE)
    notes = np.full(size, "", dtype=object)
    for train, test in ((False, True), (True, False), (False, False)):
        chosen = (train_known == train) & (test_known == test)
        notes[chosen] = correction_note(train, test)
    return applied.astype(object), notes


def _components(
    cells: _Cells,
    *,
    metric: str,
    confidence_level: float,
    correction: str,
    min_test_groups: int,
    strict_correction: bool,
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Evaluate every model pair (a < b) of one dataset's cells.

    Returns the component arrays and the model indices ``a`` and ``b`` of
    each component.
    """
    upper = np.triu_indices(len(cells.models), k=1)
    ca, cb = upper[0].astype(np.int64), upper[1].astype(np.int64)
    cd = np.zeros(len(ca), dtype=np.int64)

    a_values, b_values = cells.values[cd, ca, :], cells.values[cd, cb, :]
    shared = np.isfinite(a_values) & np.isfinite(b_values)
    n = shared.sum(axis=1)
    differences = np.where(shared, a_values - b_values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, differences.sum(axis=1) / n, np.nan)
        deviations = np.where(shared, differences - mean[:, None], 0.0)
        std = np.where(n > 1, np.sqrt((deviations**2).sum(axis=1) / (n - 1)), np.nan)
    wins = (shared & (differences > 0)).sum(axis=1)
    index = (cd, ca, cb)
    n_train = _mean_size(cells, "n_train", index, shared)
    n_test = _mean_size(cells, "n_test", index, shared)
    n_test_groups = _mean_size(cells, "n_test_groups", index, shared)

    defined = (n > 1) & (std > ZERO_VARIANCE_TOL)
    safe_n = np.where(n > 0, n, 1)
    applied, notes = _applied_corrections(correction, n_train, n_test)
    with np.errstate(invalid="ignore", divide="ignore"):
        corrected = np.sqrt(1.0 / safe_n + n_test / n_train)
        factor = np.where(applied == NADEAU_BENGIO, corrected, np.sqrt(1.0 / safe_n))
    dof = np.where(defined, n - 1, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sem = np.where(defined, std * factor, np.nan)
        half_width = stats.t.ppf((1.0 + confidence_level) / 2.0, dof) * sem
        t_stat = mean / sem
        p_value = np.where(defined, 2.0 * stats.t.sf(np.abs(t_stat), dof), np.nan)
    lower, upper = mean - half_width, mean + half_width
    enough_groups = ~(np.isfinite(n_test_groups) & (n_test_groups < min_test_groups))
    strict_blocked = strict_correction & (applied == CORRECTION_UNAVAILABLE)
    testable = enough_groups & ~strict_blocked
    floor = collapse_gap_floor(metric)
    bimodal_a = _bimodal(a_values, shared, floor)
    bimodal_b = _bimodal(b_values, shared, floor)

    reason = np.full(len(cd), "", dtype=object)
    reason[(n > 1) & ~defined] = _REASON_ZERO_VARIANCE
    reason[n == 1] = _REASON_ONE_SEED
    reason[n == 0] = _REASON_NO_SEEDS
    for i in np.flatnonzero(enough_groups & strict_blocked):
        reason[i] = strict_correction_reason(notes[i])
    for i in np.flatnonzero(~enough_groups):
        reason[i] = too_few_groups_reason(n_test_groups[i])
    for i in np.flatnonzero(testable & defined & (bimodal_a | bimodal_b)):
        shared_seeds = shared[i]
        for model, values, flag in (
            (ca[i], a_values[i], bimodal_a[i]),
            (cb[i], b_values[i], bimodal_b[i]),
        ):
            if flag:
                _, text = is_bimodal(values[shared_seeds], min_gap=floor)
                reason[i] = f"{cells.models[model]}: {text}"
                break
    components = {
        "mean": mean,
        "lower_ci": lower,
        "upper_ci": upper,
        "p_value": p_value,
        "n": n,
        "wins": wins,
        "excludes_zero": (lower > 0) | (upper < 0),
        "testable": testable,
        "bimodal": bimodal_a | bimodal_b,
        "reason": reason,
        "averaging": _component_averaging(cells, cd, ca, cb, shared),
        "correction_applied": applied,
        "correction_note": notes,
    }
    return components, ca, cb


def _classify(
    first: dict[str, np.ndarray],
    second: dict[str, np.ndarray],
    names_1: np.ndarray,
    names_2: np.ndarray,
    min_seeds: int,
    min_seeds_for_claim: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Verdicts, reasons and ``n_seeds`` of every flip row, in the fixed decision order."""
    n_seeds = np.minimum(first["n"], second["n"])
    undefined_1 = np.isnan(first["lower_ci"]) | np.isnan(first["upper_ci"])
    undefined_2 = np.isnan(second["lower_ci"]) | np.isnan(second["upper_ci"])
    opposite = first["mean"] * second["mean"] < 0
    both_exclude = first["excludes_zero"] & second["excludes_zero"]
    reason_1 = names_1 + ": " + first["reason"]
    reason_2 = names_2 + ": " + second["reason"]
    rules = [
        (~first["testable"], VERDICT_UNTESTABLE, reason_1),
        (~second["testable"], VERDICT_UNTESTABLE, reason_2),
        (n_seeds < min_seeds, VERDICT_UNTESTABLE, None),
        (undefined_1, VERDICT_UNTESTABLE, reason_1),
        (undefined_2, VERDICT_UNTESTABLE, reason_2),
        (first["bimodal"], VERDICT_BIMODAL, reason_1),
        (second["bimodal"], VERDICT_BIMODAL, reason_2),
        (
            opposite & both_exclude & (n_seeds >= min_seeds_for_claim),
            VERDICT_SUPPORTED,
            _REASON_SUPPORTED,
        ),
        (opposite & both_exclude, VERDICT_SUGGESTIVE, None),
        (opposite, VERDICT_UNRESOLVED, _REASON_UNRESOLVED),
        (both_exclude, VERDICT_CONTRADICTED, _REASON_CONTRADICTED),
    ]
    rule = np.select([condition for condition, _, _ in rules], np.arange(len(rules)), len(rules))
    verdicts = np.array([v for _, v, _ in rules] + [VERDICT_NOT_REPRODUCED], dtype=object)[rule]
    reasons = np.full(len(rule), _REASON_NOT_REPRODUCED, dtype=object)
    for position, (_, verdict, text) in enumerate(rules):
        chosen = rule == position
        if not chosen.any():
            continue
        if verdict == VERDICT_SUGGESTIVE:
            reasons[chosen] = [
                f"{_REASON_SUPPORTED}, but only {k} shared seed(s)" for k in n_seeds[chosen]
            ]
        elif text is None:
            reasons[chosen] = [
                f"only {k} shared seed(s); at least {min_seeds} needed" for k in n_seeds[chosen]
            ]
        else:
            reasons[chosen] = text[chosen] if isinstance(text, np.ndarray) else text
    return verdicts, reasons, n_seeds


#: Columns of a paired-differences frame: one row per (dataset, model pair a < b).
COMPONENT_COLUMNS = (
    "dataset",
    "model_a",
    "model_b",
    "metric",
    "mean",
    "lower_ci",
    "upper_ci",
    "p_value",
    "n",
    "wins",
    "excludes_zero",
    "testable",
    "bimodal",
    "reason",
    "averaging",
    "correction_applied",
    "correction_note",
)
_COMPONENT_VALUES = COMPONENT_COLUMNS[4:]


#: The dtype of each non-text component column (the others hold text).
_COMPONENT_DTYPES = {
    "mean": np.float64,
    "lower_ci": np.float64,
    "upper_ci": np.float64,
    "p_value": np.float64,
    "n": np.int64,
    "wins": np.int64,
    "excludes_zero": np.bool_,
    "testable": np.bool_,
    "bimodal": np.bool_,
}


def _empty_components() -> pd.DataFrame:
    return pd.DataFrame(
        {
            column: pd.Series(dtype=_COMPONENT_DTYPES.get(column, object))
            for column in COMPONENT_COLUMNS
        }
    )


def dataset_components(
    selected: pd.DataFrame,
    *,
    metric: str,
    confidence_level: float,
    correction: str,
    min_test_groups: int,
    strict_correction: bool,
) -> pd.DataFrame:
    """The paired differences of every model pair on one dataset.

    A component depends on its dataset's rows only (seeds are matched within
    the dataset), so the components of a grid are the concatenation of its
    datasets' components, and one new run recomputes one dataset's.

    Args:
        selected: rows of one metric on one dataset, ``value`` as float.
        metric, confidence_level, correction, min_test_groups,
            strict_correction: as in
            :func:`~deepecgkit.analysis.ranking.flip_test`.

    Returns:
        :data:`COMPONENT_COLUMNS`, one row per pair of models (a < b by name)
        that have at least one row on the dataset; empty with these columns
        when fewer than two models do.
    """
    datasets = selected["dataset"].unique().tolist() if not selected.empty else []
    if len(datasets) > 1:
        raise ValueError(f"dataset_components takes one dataset's rows, got {len(datasets)}")
    models = sorted(selected["model"].unique().tolist()) if datasets else []
    if len(models) < 2:
        return _empty_components()
    cells = _Cells(usable_rows(selected), datasets, models)
    components, ca, cb = _components(
        cells,
        metric=metric,
        confidence_level=confidence_level,
        correction=correction,
        min_test_groups=min_test_groups,
        strict_correction=strict_correction,
    )
    model_names = np.asarray(models, dtype=object)
    frame = pd.DataFrame(
        {
            "dataset": np.full(len(ca), datasets[0], dtype=object),
            "model_a": model_names[ca],
            "model_b": model_names[cb],
            "metric": metric,
            **components,
        }
    )
    return frame.astype(_COMPONENT_DTYPES).loc[:, list(COMPONENT_COLUMNS)]


def grid_components(selected: pd.DataFrame, **options: Any) -> pd.DataFrame:
    """:func:`dataset_components` of every dataset of ``selected``, concatenated by dataset name."""
    if selected.empty:
        return _empty_components()
    parts = [
        dataset_components(rows, **options)
        for _, rows in selected.groupby("dataset", sort=True, dropna=False)
    ]
    parts = [part for part in parts if not part.empty]
    if not parts:
        return _empty_components()
    return pd.concat(parts, ignore_index=True)


def flips_from_components(
    components: pd.DataFrame,
    *,
    min_seeds: int,
    min_seeds_for_claim: int,
) -> pd.DataFrame:
    """Every flip test that a paired-differences frame supports, unsorted, without FDR columns.

    For each pair of datasets (d1 < d2), every model pair with a component on
    both is a flip row. This is a combine of stored summaries: it never reads
    a run.

    Args:
        components: :data:`COMPONENT_COLUMNS` rows of one metric (from
            :func:`dataset_components`, possibly stored and reloaded).
        min_seeds, min_seeds_for_claim: as in
            :func:`~deepecgkit.analysis.ranking.flip_test`.

    Returns:
        One row per (dataset pair, model pair) with the flip columns except
        the FDR ones; an empty frame when there is nothing to compare.
    """
    if components.empty:
        return pd.DataFrame()
    metrics = components["metric"].unique().tolist()
    if len(metrics) != 1:
        raise ValueError(f"paired differences of one metric expected, got {metrics}")
    metric = metrics[0]
    datasets = sorted(components["dataset"].unique().tolist())
    models = sorted(set(components["model_a"].tolist()) | set(components["model_b"].tolist()))
    if len(datasets) < 2:
        return pd.DataFrame()
    model_index = pd.Index(models)
    cd = pd.Index(datasets).get_indexer(components["dataset"])
    ca = model_index.get_indexer(components["model_a"])
    cb = model_index.get_indexer(components["model_b"])
    component_id = np.full((len(datasets), len(models), len(models)), -1, dtype=np.int64)
    component_id[cd, ca, cb] = np.arange(len(components))
    present = np.zeros((len(datasets), len(models)), dtype=bool)
    present[cd, ca] = True
    present[cd, cb] = True
    values = {
        column: components[column].to_numpy(dtype=_COMPONENT_DTYPES.get(column, object))
        for column in _COMPONENT_VALUES
    }

    rows_1, rows_2, pair_a, pair_b, index_1, index_2 = [], [], [], [], [], []
    for d1 in range(len(datasets)):
        for d2 in range(d1 + 1, len(datasets)):
            members = np.flatnonzero(present[d1] & present[d2])
            upper = np.triu_indices(len(members), k=1)
            a, b = members[upper[0]], members[upper[1]]
            rows_1.append(np.full(len(a), d1))
            rows_2.append(np.full(len(a), d2))
            pair_a.append(a)
            pair_b.append(b)
            index_1.append(component_id[d1, a, b])
            index_2.append(component_id[d2, a, b])
    first_index = np.concatenate(index_1)
    if first_index.size == 0:
        return pd.DataFrame()
    second_index = np.concatenate(index_2)
    if (first_index < 0).any() or (second_index < 0).any():
        raise ValueError("paired differences are missing a model pair that both datasets hold")
    first = {key: value[first_index] for key, value in values.items()}
    second = {key: value[second_index] for key, value in values.items()}
    dataset_names = np.asarray(datasets, dtype=object)
    model_names = np.asarray(models, dtype=object)
    names_1 = dataset_names[np.concatenate(rows_1)]
    names_2 = dataset_names[np.concatenate(rows_2)]
    verdicts, reasons, n_seeds = _classify(
        first, second, names_1, names_2, min_seeds, min_seeds_for_claim
    )
    untested = np.isin(verdicts, [VERDICT_UNTESTABLE, VERDICT_BIMODAL])
    columns: dict[str, Any] = {
        "model_a": model_names[np.concatenate(pair_a)],
        "model_b": model_names[np.concatenate(pair_b)],
        "dataset_1": names_1,
        "dataset_2": names_2,
        "metric": metric,
        "mean_1": first["mean"],
        "mean_2": second["mean"],
        "lower_1": first["lower_ci"],
        "upper_1": first["upper_ci"],
        "lower_2": second["lower_ci"],
        "upper_2": second["upper_ci"],
        "wins_1": first["wins"].astype(np.int64),
        "wins_2": second["wins"].astype(np.int64),
        "n_1": first["n"].astype(np.int64),
        "n_2": second["n"].astype(np.int64),
        "n_seeds": n_seeds.astype(np.int64),
        "averaging_1": first["averaging"],
        "averaging_2": second["averaging"],
        "comparable_magnitudes": first["averaging"] == second["averaging"],
        "verdict": verdicts,
        "p_flip": np.where(untested, np.nan, np.maximum(first["p_value"], second["p_value"])),
        "reason": reasons,
        "p_reversal": np.where(
            untested,
            np.nan,
            reversal_p_value(
                first["p_value"], second["p_value"], mean_1=first["mean"], mean_2=second["mean"]
            ),
        ),
        "correction_applied_1": first["correction_applied"],
        "correction_applied_2": second["correction_applied"],
        "correction_note_1": first["correction_note"],
        "correction_note_2": second["correction_note"],
    }
    frame = pd.DataFrame(columns)
    frame["comparable_magnitudes"] = frame["comparable_magnitudes"].astype(bool)
    return frame


def flip_grid(
    selected: pd.DataFrame,
    *,
    metric: str,
    confidence_level: float,
    correction: str,
    min_test_groups: int,
    min_seeds: int,
    min_seeds_for_claim: int,
    strict_correction: bool,
) -> pd.DataFrame:
    """Every flip test of a metric slice: components per dataset, then their combine.

    Args:
        selected: rows of one metric (already restricted to the requested
            models and datasets), ``value`` as float.
        metric, confidence_level, correction, min_test_groups, min_seeds,
            min_seeds_for_claim, strict_correction: as in
            :func:`~deepecgkit.analysis.ranking.flip_test`.
    """
    components = grid_components(
        selected,
        metric=metric,
        confidence_level=confidence_level,
        correction=correction,
        min_test_groups=min_test_groups,
        strict_correction=strict_correction,
    )
    return flips_from_components(
        components, min_seeds=min_seeds, min_seeds_for_claim=min_seeds_for_claim
    )
