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
3. The combine (:func:`flip_columns`) reads only those components, never a
   run, so per-dataset frames computed separately and concatenated in any
   order give the same grid. Dataset and model names become integer codes
   into their sorted distinct values; every flip row picks its two
   components by index, is classified with ``np.select`` in the fixed
   decision order of docs/statistics.md (flip table, ``verdict``) and gets
   its directional ``p_reversal`` from the two components' p-values and
   means. The rows are put in the grid's order on those codes (a stable sort
   of each dataset pair's ``p_reversal``), and each text column is built
   once per distinct value and gathered by code.

Reason strings that carry numbers are formatted once per distinct number.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

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
from deepecgkit.analysis.distributions import t_critical, t_sf
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
#: Verdicts of flip rows that are not tested (NaN p-values, outside every FDR family).
UNTESTED_VERDICTS = (VERDICT_UNTESTABLE, VERDICT_BIMODAL)


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
        half_width = t_critical(confidence_level, dof) * sem
        t_stat = mean / sem
        p_value = np.where(defined, 2.0 * t_sf(np.abs(t_stat), dof), np.nan)
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
    reversed_reason = reason.copy()
    for i in np.flatnonzero(testable & defined & (bimodal_a | bimodal_b)):
        texts = [
            f"{cells.models[model]}: {is_bimodal(values[shared[i]], min_gap=floor)[1]}"
            for model, values, flag in (
                (ca[i], a_values[i], bimodal_a[i]),
                (cb[i], b_values[i], bimodal_b[i]),
            )
            if flag
        ]
        # The reason names the first flagged model of the pair as it is read.
        reason[i], reversed_reason[i] = texts[0], texts[-1]
    components = {
        "mean": mean,
        "lower_ci": lower,
        "upper_ci": upper,
        "p_value": p_value,
        "n": n,
        "wins": wins,
        "losses": (shared & (differences < 0)).sum(axis=1),
        "excludes_zero": (lower > 0) | (upper < 0),
        "testable": testable,
        "bimodal": bimodal_a | bimodal_b,
        "reason": reason,
        "reason_reversed": reversed_reason,
        "averaging": _component_averaging(cells, cd, ca, cb, shared),
        "correction_applied": applied,
        "correction_note": notes,
    }
    return components, ca, cb


#: Where a flip row's reason comes from, beside a fixed text (see :func:`_classify`).
_FROM_FIRST, _FROM_SECOND, _FEW_SEEDS, _FEW_FOR_CLAIM = range(4)


def few_seeds_reason(n_seeds: int, min_seeds: int) -> str:
    """Reason of a flip row whose two components share fewer than ``min_seeds`` seeds."""
    return f"only {n_seeds} shared seed(s); at least {min_seeds} needed"


def few_for_claim_reason(n_seeds: int) -> str:
    """Reason of a suggestive flip row: supported but for its seed count."""
    return f"{_REASON_SUPPORTED}, but only {n_seeds} shared seed(s)"


def _classify(
    first: dict[str, np.ndarray],
    second: dict[str, np.ndarray],
    min_seeds: int,
    min_seeds_for_claim: int,
) -> tuple[np.ndarray, list[str], list[str | int], np.ndarray]:
    """Rule of every flip row in the fixed decision order of docs/statistics.md (flip table).

    Returns ``(rule, verdicts, reasons, n_seeds)``: each row's rule index
    (``len(verdicts) - 1`` is the fall-through ``not-reproduced``), the verdict
    and reason of each rule (a reason is a text or one of ``_FROM_FIRST``,
    ``_FROM_SECOND`` (the component's own reason), ``_FEW_SEEDS`` and
    ``_FEW_FOR_CLAIM`` (formatted from the row's seed count)), and the
    shared seed count of each row.
    """
    n_seeds = np.minimum(first["n"], second["n"])
    undefined_1 = np.isnan(first["lower_ci"]) | np.isnan(first["upper_ci"])
    undefined_2 = np.isnan(second["lower_ci"]) | np.isnan(second["upper_ci"])
    opposite = first["mean"] * second["mean"] < 0
    both_exclude = first["excludes_zero"] & second["excludes_zero"]
    rules: list[tuple[np.ndarray, str, str | int]] = [
        (~first["testable"], VERDICT_UNTESTABLE, _FROM_FIRST),
        (~second["testable"], VERDICT_UNTESTABLE, _FROM_SECOND),
        (n_seeds < min_seeds, VERDICT_UNTESTABLE, _FEW_SEEDS),
        (undefined_1, VERDICT_UNTESTABLE, _FROM_FIRST),
        (undefined_2, VERDICT_UNTESTABLE, _FROM_SECOND),
        (first["bimodal"], VERDICT_BIMODAL, _FROM_FIRST),
        (second["bimodal"], VERDICT_BIMODAL, _FROM_SECOND),
        (
            opposite & both_exclude & (n_seeds >= min_seeds_for_claim),
            VERDICT_SUPPORTED,
            _REASON_SUPPORTED,
        ),
        (opposite & both_exclude, VERDICT_SUGGESTIVE, _FEW_FOR_CLAIM),
        (opposite, VERDICT_UNRESOLVED, _REASON_UNRESOLVED),
        (both_exclude, VERDICT_CONTRADICTED, _REASON_CONTRADICTED),
    ]
    rule = np.select([condition for condition, _, _ in rules], np.arange(len(rules)), len(rules))
    verdicts = [verdict for _, verdict, _ in rules] + [VERDICT_NOT_REPRODUCED]
    reasons = [reason for _, _, reason in rules] + [_REASON_NOT_REPRODUCED]
    return rule, verdicts, reasons, n_seeds


#: Columns of a paired-differences frame: one row per (dataset, model pair a < b).
#: ``mean``, the bounds, ``wins`` (seeds with ``A - B > 0``) and ``reason`` read the
#: pair as ``A - B``; ``losses`` (seeds with ``A - B < 0``) and ``reason_reversed``
#: (the reason as ``B - A`` gives it: it differs only when both models' values are
#: bimodal, and the first named is the one read first) are what reading it as
#: ``B - A`` needs, as a rank claim of model B does. The other columns do not
#: depend on the order.
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
    "losses",
    "excludes_zero",
    "testable",
    "bimodal",
    "reason",
    "reason_reversed",
    "averaging",
    "correction_applied",
    "correction_note",
)


#: The dtype of each non-text component column (the others hold text).
_COMPONENT_DTYPES = {
    "mean": np.float64,
    "lower_ci": np.float64,
    "upper_ci": np.float64,
    "p_value": np.float64,
    "n": np.int64,
    "wins": np.int64,
    "losses": np.int64,
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


def _factorized(*columns: pd.Series) -> tuple[list[np.ndarray], np.ndarray]:
    """Codes of each column into the sorted distinct values of them all.

    Missing values are a value of their own. Each column is factorised in
    its own storage (fast for Arrow strings) and only the distinct values are
    merged.
    """
    parts = [pd.factorize(column, sort=True, use_na_sentinel=False) for column in columns]
    if len(parts) == 1:
        codes, uniques = parts[0]
        return [codes.astype(np.int64, copy=False)], np.asarray(uniques, dtype=object)
    merged = pd.Index(np.concatenate([np.asarray(u, dtype=object) for _, u in parts])).unique()
    uniques = np.asarray(merged.sort_values(), dtype=object)
    index = pd.Index(uniques)
    return [
        index.get_indexer(np.asarray(u, dtype=object))[codes].astype(np.int64, copy=False)
        for codes, u in parts
    ], uniques


def _decoded(uniques: np.ndarray | list, codes: np.ndarray) -> Any:
    """The column ``uniques[codes]``, typed as the frame constructor types ``uniques``.

    The values are converted once (``len(uniques)``, not once per row) and
    gathered with the array's own ``take``: a flip grid holds few distinct
    texts in hundreds of thousands of rows.
    """
    return pd.Series(np.asarray(uniques, dtype=object)).array.take(codes)


class _Texts:
    """One table of distinct texts that rows address by integer code."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def add(self, values: list[Any]) -> np.ndarray:
        """Append ``values``; returns their codes."""
        start = len(self.values)
        self.values.extend(values)
        return np.arange(start, len(self.values), dtype=np.int64)

    def formatted(self, counts: np.ndarray, text: Any) -> np.ndarray:
        """Codes of ``text(k)`` for every count ``k``, each distinct count formatted once."""
        distinct, inverse = np.unique(counts, return_inverse=True)
        return self.add([text(int(k)) for k in distinct])[inverse]


def _pair_count(n: int) -> int:
    """Number of unordered pairs of ``n`` items."""
    return n * (n - 1) // 2


def _flip_rows(
    dataset_codes: np.ndarray,
    a_codes: np.ndarray,
    b_codes: np.ndarray,
    n_datasets: int,
    n_models: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The (dataset pair, model pair) of every flip row and its two components' positions.

    A model is on a dataset when a component of that dataset names it; every
    pair (a < b) of models on both datasets of a pair (d1 < d2) is a flip row.
    Returns ``(block, pair, first, second)``: the dataset pair's index in
    ``np.triu_indices(n_datasets, 1)`` order, the model pair's index in
    ``np.triu_indices(n_models, 1)`` order, and the positions of the d1 and d2
    components. Rows come ordered by (d1, d2, a, b).
    """
    if (a_codes >= b_codes).any():
        raise ValueError("paired differences must name model_a before model_b (a < b by name)")
    n_pairs = _pair_count(n_models)
    pair = a_codes * n_models - a_codes * (a_codes + 1) // 2 + (b_codes - a_codes - 1)
    flat = dataset_codes * n_pairs + pair
    if np.unique(flat).size != flat.size:
        raise ValueError(
            "paired differences hold a (dataset, model pair) twice: concatenate each "
            "dataset's frame once"
        )
    component = np.full(n_datasets * n_pairs, -1, dtype=np.int64)
    component[flat] = np.arange(flat.size)
    component = component.reshape(n_datasets, n_pairs)
    present = np.zeros((n_datasets, n_models), dtype=bool)
    present[dataset_codes, a_codes] = True
    present[dataset_codes, b_codes] = True
    d1, d2 = np.triu_indices(n_datasets, k=1)
    pair_a, pair_b = np.triu_indices(n_models, k=1)
    on_both = present[d1] & present[d2]
    block, pair = np.nonzero(on_both[:, pair_a] & on_both[:, pair_b])
    first, second = component[d1[block], pair], component[d2[block], pair]
    if (first < 0).any() or (second < 0).any():
        raise ValueError("paired differences are missing a model pair that both datasets hold")
    return block, pair, first, second


#: Component values a flip row prints (beside its verdict, reason and p-values).
_FLIP_VALUES = ("mean", "lower_ci", "upper_ci", "wins", "n")


def _grid_order(
    block: np.ndarray, pair: np.ndarray, p_reversal: np.ndarray, n_datasets: int, n_models: int
) -> np.ndarray:
    """Positions of the flip rows sorted by (dataset pair, ``p_reversal`` with NaN last, pair).

    The rows come in (dataset pair, model pair) order. Each dataset pair's
    ``p_reversal`` values are laid out on one row of a (dataset pairs x model
    pairs) matrix and sorted along it with a stable sort, which keeps
    (model_a, model_b) order among ties and NaN last; the cells of model
    pairs absent from a dataset pair are NaN too and are dropped afterwards
    (they follow the real rows' NaNs in pair order, so they cannot reorder
    them).
    """
    n_blocks, n_pairs = _pair_count(n_datasets), _pair_count(n_models)
    keys = np.full((n_blocks, n_pairs), np.nan)
    keys[block, pair] = p_reversal
    rows = np.full((n_blocks, n_pairs), -1, dtype=np.int64)
    rows[block, pair] = np.arange(block.size)
    ordered = np.take_along_axis(rows, np.argsort(keys, axis=1, kind="stable"), axis=1).ravel()
    return ordered[ordered >= 0]


def flip_columns(
    components: pd.DataFrame,
    *,
    min_seeds: int,
    min_seeds_for_claim: int,
) -> dict[str, Any] | None:
    """Every flip test that a paired-differences frame supports, without the FDR columns.

    For each pair of datasets (d1 < d2), every model pair with a component on
    both is a flip row. This is a combine of stored summaries: it never reads
    a run, and it does not depend on the order of the rows (or of the
    concatenated per-dataset frames) of ``components``. Names are handled as
    integer codes into their sorted distinct values, so every text column is
    built once per distinct value, not per row.

    Args:
        components: :data:`COMPONENT_COLUMNS` rows of one metric (from
            :func:`dataset_components`, possibly stored and reloaded).
        min_seeds, min_seeds_for_claim: as in
            :func:`~deepecgkit.analysis.ranking.flip_test`.

    Returns:
        The flip columns of :data:`~deepecgkit.analysis.schemas.FLIP_COLUMNS`
        except the FDR ones, as arrays in the grid's order (dataset_1,
        dataset_2, ``p_reversal`` with NaN last, model_a, model_b); None when
        there is nothing to compare.
    """
    if components.empty:
        return None
    metrics = components["metric"].unique().tolist()
    if len(metrics) != 1:
        raise ValueError(f"paired differences of one metric expected, got {metrics}")
    [dataset_codes], datasets = _factorized(components["dataset"])
    [a_codes, b_codes], models = _factorized(components["model_a"], components["model_b"])
    if len(datasets) < 2:
        return None
    block, pair, first_index, second_index = _flip_rows(
        dataset_codes, a_codes, b_codes, len(datasets), len(models)
    )
    if block.size == 0:
        return None
    values = {
        column: components[column].to_numpy(dtype=dtype)
        for column, dtype in _COMPONENT_DTYPES.items()
    }
    first = {key: value[first_index] for key, value in values.items()}
    second = {key: value[second_index] for key, value in values.items()}
    rule, rule_verdicts, rule_reasons, n_seeds = _classify(
        first, second, min_seeds, min_seeds_for_claim
    )
    untested = np.isin(rule, [i for i, v in enumerate(rule_verdicts) if v in UNTESTED_VERDICTS])
    p_flip = np.where(untested, np.nan, np.maximum(first["p_value"], second["p_value"]))
    p_reversal = np.where(
        untested,
        np.nan,
        reversal_p_value(
            first["p_value"], second["p_value"], mean_1=first["mean"], mean_2=second["mean"]
        ),
    )
    order = _grid_order(block, pair, p_reversal, len(datasets), len(models))
    block, pair, rule, n_seeds = block[order], pair[order], rule[order], n_seeds[order]
    p_flip, p_reversal = p_flip[order], p_reversal[order]
    first_index, second_index = first_index[order], second_index[order]
    first = {key: first[key][order] for key in _FLIP_VALUES}
    second = {key: second[key][order] for key in _FLIP_VALUES}

    texts = _Texts()
    [reason_codes], reasons = _factorized(components["reason"])
    prefixed, prefixed_codes = np.unique(
        dataset_codes * len(reasons) + reason_codes, return_inverse=True
    )
    prefixed_codes = texts.add(
        [
            f"{datasets[code // len(reasons)]}: {reasons[code % len(reasons)]}"
            for code in prefixed.tolist()
        ]
    )[prefixed_codes]
    reason = np.empty(len(rule), dtype=np.int64)
    for position, source in enumerate(rule_reasons):
        chosen = rule == position
        if not chosen.any():
            continue
        if source == _FROM_FIRST:
            reason[chosen] = prefixed_codes[first_index[chosen]]
        elif source == _FROM_SECOND:
            reason[chosen] = prefixed_codes[second_index[chosen]]
        elif source == _FEW_SEEDS:
            reason[chosen] = texts.formatted(
                n_seeds[chosen], lambda k: few_seeds_reason(k, min_seeds)
            )
        elif source == _FEW_FOR_CLAIM:
            reason[chosen] = texts.formatted(n_seeds[chosen], few_for_claim_reason)
        else:
            reason[chosen] = texts.add([source])[0]

    d1, d2 = np.triu_indices(len(datasets), k=1)
    pair_a, pair_b = np.triu_indices(len(models), k=1)
    [averaging_codes], averagings = _factorized(components["averaging"])
    known_averaging = np.asarray(pd.notna(averagings), dtype=bool)
    columns: dict[str, Any] = {
        "model_a": _decoded(models, pair_a[pair]),
        "model_b": _decoded(models, pair_b[pair]),
        "dataset_1": _decoded(datasets, d1[block]),
        "dataset_2": _decoded(datasets, d2[block]),
        "metric": metrics[0],
        "mean_1": first["mean"],
        "mean_2": second["mean"],
        "lower_1": first["lower_ci"],
        "upper_1": first["upper_ci"],
        "lower_2": second["lower_ci"],
        "upper_2": second["upper_ci"],
        "wins_1": first["wins"],
        "wins_2": second["wins"],
        "n_1": first["n"],
        "n_2": second["n"],
        "n_seeds": n_seeds.astype(np.int64),
        "averaging_1": _decoded(averagings, averaging_codes[first_index]),
        "averaging_2": _decoded(averagings, averaging_codes[second_index]),
        "comparable_magnitudes": (averaging_codes[first_index] == averaging_codes[second_index])
        & known_averaging[averaging_codes[first_index]],
        "verdict": _decoded(rule_verdicts, rule),
        "p_flip": p_flip,
        "reason": _decoded(texts.values, reason),
        "p_reversal": p_reversal,
    }
    for column in ("correction_applied", "correction_note"):
        [codes], uniques = _factorized(components[column])
        columns[f"{column}_1"] = _decoded(uniques, codes[first_index])
        columns[f"{column}_2"] = _decoded(uniques, codes[second_index])
    return columns
