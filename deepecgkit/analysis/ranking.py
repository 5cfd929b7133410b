"""Rankings within seeds, paired model differences and cross-dataset flip tests.

Ranks are formed inside one dataset and one seed, so averaging differences
between datasets never leak into them. Comparisons of two models on one
dataset are paired by seed: within a seed both models are trained and
evaluated on the same split, so the split effect cancels in the difference.

Conventions:

* Direction: a metric named in ``LOWER_IS_BETTER`` is better when smaller.
  Ranking and claim direction honour it; paired differences (always
  ``A - B``), flip verdicts and ``p_reversal`` are sign-symmetric and do not
  need it.
* Reversal evidence: ``p_flip`` (the larger two-sided component p) is kept
  for compatibility, but it tests "both differences are non-zero", not "they
  have opposite signs". The directional ``p_reversal``, its FDR adjustment
  ``q_reversal`` and ``survives_fdr`` are what tables and summaries use.
* Standard errors: every paired and flip row records the correction it
  actually got (``correction_applied``: ``nadeau-bengio``, ``none`` or
  ``unavailable`` when the split sizes are unknown, with a note saying which).
* Per-seed value: the mean of the finite values of all rows with the same
  (dataset, model, seed, metric); there is normally one row.
* Rows without a seed (runs whose seed could not be determined) are never
  ranked or paired, because "same seed means same split" cannot hold for an
  unknown seed. Seeds are exact integers of any size; -1 is an ordinary seed.
* Verdicts follow the fixed decision order of docs/statistics.md (flip table).

:func:`all_flip_tests` does not loop over :func:`flip_test`: it evaluates
every component with the vectorised engine of
:mod:`deepecgkit.analysis._paired_grid`, which gives the same numbers.

Cross-dataset results are combines of per-dataset summaries: the
:func:`paired_differences` of each dataset, computed separately (one
dataset partition of the platform each), concatenated in any order and
passed to :func:`flip_tests_from_differences` (the flip grid) or
:func:`rank_claim_from_differences` (a rank claim) give exactly what
:func:`all_flip_tests` and :func:`evaluate_rank_claim` give on the runs;
both of those are such a combine.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from deepecgkit.analysis import _paired_grid
from deepecgkit.analysis._paired_grid import (
    _REASON_CONTRADICTED,
    _REASON_NO_SEEDS,
    _REASON_NOT_REPRODUCED,
    _REASON_ONE_SEED,
    _REASON_STRICT_CORRECTION,
    _REASON_SUPPORTED,
    _REASON_UNRESOLVED,
    _REASON_ZERO_VARIANCE,
    UNTESTED_VERDICTS,
    few_for_claim_reason,
    few_seeds_reason,
    strict_correction_reason,
    too_few_groups_reason,
    usable_rows as _usable_rows,
)
from deepecgkit.analysis.constants import (
    CONFIDENCE_LEVEL,
    CORRECTION_UNAVAILABLE,
    DEFAULT_FDR_METHOD,
    DEFAULT_N_PERMUTATIONS,
    DEFAULT_PERMUTATION_SEED,
    DEFAULT_RANK_METRIC,
    FDR_FAMILIES,
    FDR_FAMILY_SIGNIFICANT,
    FDR_FAMILY_TESTABLE,
    MIN_MODELS_FOR_TAU,
    MIN_SEEDS_FOR_CLAIM,
    MIN_SEEDS_FOR_INTERVAL,
    MIN_TEST_GROUPS,
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
from deepecgkit.analysis.schemas import (
    DISTRIBUTION_HEAD,
    DISTRIBUTION_TAIL,
    FLIP_COLUMNS,
    RANK_COLUMNS,
    SLICE_COLUMNS,
    TAU_COLUMNS,
    empty_frame,
)
from deepecgkit.analysis.statistics import (
    _check_confidence_level,
    _check_correction,
    _check_count,
    _check_fdr_method,
    _check_non_negative_count,
    benjamini_yekutieli_adjust,
    collapse_gap_floor,
    fdr_adjust,
    is_bimodal,
    jackknife_mean_tau,
    kendall_w,
    kendall_w_p_value,
    min_attainable_kendall_p,
    min_attainable_kendall_p_given_ties,
    one_sided_p_value,
    paired_summary,
    reversal_p_value,
)
from deepecgkit.rundir.format import AVERAGING_UNKNOWN, LOWER_IS_BETTER

__all__ = [
    "FLIP_COLUMNS",
    "PAIRED_DIFFERENCE_COLUMNS",
    "TAU_COLUMNS",
    "all_flip_tests",
    "distribution_of_ranks",
    "evaluate_rank_claim",
    "flip_test",
    "flip_tests_from_differences",
    "paired_difference",
    "paired_differences",
    "rank_claim_from_differences",
    "rank_distribution",
    "rank_within_seed",
    "tau_of_ranks",
    "tau_summary",
]

_NAN = float("nan")
#: Columns of :func:`paired_differences`, in order.
PAIRED_DIFFERENCE_COLUMNS = _paired_grid.COMPONENT_COLUMNS

#: Verdicts whose p-value enters the "significant" BY family.
_SIGNIFICANT_VERDICTS = (VERDICT_SUPPORTED, VERDICT_SUGGESTIVE, VERDICT_CONTRADICTED)

_REASON_WRONG_DIRECTION = "the ordering reverses, but opposite to the claimed direction"


# --- helpers -------------------------------------------------------------------------------


def _better_sign(metric: str) -> float:
    """-1.0 for a lower-is-better metric, +1.0 otherwise."""
    return -1.0 if metric in LOWER_IS_BETTER else 1.0


def _names(value: Sequence[str] | str | None) -> list[str] | None:
    """A bare string counts as one name."""
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _metric_slice(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows of ``runs`` for ``metric`` (a copy, input order, ``value`` coerced to float).

    Requires ``dataset``, ``model``, ``seed``, ``metric``, ``value``. An
    absent metric gives an empty frame and no error. Rows with a missing
    dataset or model are dropped (they cannot be placed anywhere).
    """
    if len(runs) == 0:
        return empty_frame(SLICE_COLUMNS)
    missing = [column for column in SLICE_COLUMNS if column not in runs.columns]
    if missing:
        raise ValueError(f"the runs frame needs column(s) {', '.join(map(repr, missing))}")
    selected = runs.loc[runs["metric"] == metric].copy()
    selected["value"] = pd.to_numeric(selected["value"], errors="coerce").astype(np.float64)
    selected = selected.loc[selected["dataset"].notna() & selected["model"].notna()]
    return selected


def _ranking_rows(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per-seed values ``(dataset, model, seed, value)`` eligible for ranking."""
    usable = _usable_rows(_metric_slice(runs, metric))
    if usable.empty:
        return pd.DataFrame({"dataset": [], "model": [], "seed": [], "value": []})
    per_seed = usable.groupby(["dataset", "model", "seed"], sort=True)["value"].mean()
    return per_seed.reset_index()


def _paired_values(
    selected: pd.DataFrame, model_a: str, model_b: str, dataset: str
) -> tuple[list[int], np.ndarray, np.ndarray, pd.DataFrame]:
    """Per-seed values of two models on one dataset, aligned on their shared seeds.

    Returns ``(seeds, a_values, b_values, contributing)``: the sorted shared
    seeds, both models' per-seed values (duplicate rows averaged) and every
    row that entered them, sorted by (seed, model, run_dir when present). A
    seed present for only one model is unpaired and dropped.
    """
    rows = selected.loc[
        (selected["dataset"] == dataset) & selected["model"].isin([model_a, model_b])
    ]
    rows = _usable_rows(rows)
    per_seed = rows.groupby(["model", "seed"], sort=True)["value"].mean()
    a = per_seed.loc[model_a] if model_a in per_seed.index.get_level_values(0) else pd.Series()
    b = per_seed.loc[model_b] if model_b in per_seed.index.get_level_values(0) else pd.Series()
    seeds = sorted(set(a.index) & set(b.index))
    a_values = a.reindex(seeds).to_numpy(dtype=np.float64)
    b_values = b.reindex(seeds).to_numpy(dtype=np.float64)
    contributing = rows.loc[rows["seed"].isin(seeds)]
    order = ["seed", "model"] + (["run_dir"] if "run_dir" in contributing.columns else [])
    contributing = contributing.sort_values(order, kind="mergesort").reset_index(drop=True)
    return seeds, a_values, b_values, contributing


def _mean_optional(frame: pd.DataFrame, column: str) -> float | None:
    """Mean of the known sizes in ``column``; None when absent, empty or all unknown.

    A size is known when finite and positive: a count of zero or less is unknown.
    """
    if column not in frame.columns or frame.empty:
        return None
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    finite = values[np.isfinite(values) & (values > 0)]
    return float(finite.mean()) if finite.size else None


def _joined_averaging(contributing: pd.DataFrame) -> str:
    if "averaging" not in contributing.columns or contributing.empty:
        return AVERAGING_UNKNOWN
    modes = sorted({str(mode) for mode in contributing["averaging"].dropna()})
    return "+".join(modes) if modes else AVERAGING_UNKNOWN


def _classify_flip(
    first: dict[str, Any],
    second: dict[str, Any],
    n_seeds: int,
    min_seeds: int,
    min_seeds_for_claim: int,
) -> tuple[str, str]:
    """Verdict and reason of a flip test, in the fixed decision order of docs/statistics.md."""
    components = (first, second)
    for component in components:
        if not component["testable"]:
            return VERDICT_UNTESTABLE, f"{component['dataset']}: {component['reason']}"
    if n_seeds < min_seeds:
        return VERDICT_UNTESTABLE, few_seeds_reason(n_seeds, min_seeds)
    for component in components:
        if math.isnan(component["lower_ci"]) or math.isnan(component["upper_ci"]):
            return VERDICT_UNTESTABLE, f"{component['dataset']}: {component['reason']}"
    for component in components:
        if component["bimodal"]:
            return VERDICT_BIMODAL, f"{component['dataset']}: {component['reason']}"
    both_exclude = first["excludes_zero"] and second["excludes_zero"]
    if first["mean"] * second["mean"] < 0:
        if not both_exclude:
            return VERDICT_UNRESOLVED, _REASON_UNRESOLVED
        if n_seeds >= min_seeds_for_claim:
            return VERDICT_SUPPORTED, _REASON_SUPPORTED
        return VERDICT_SUGGESTIVE, few_for_claim_reason(n_seeds)
    if both_exclude:
        return VERDICT_CONTRADICTED, _REASON_CONTRADICTED
    return VERDICT_NOT_REPRODUCED, _REASON_NOT_REPRODUCED


# --- ranks --------------------------------------------------------------------------------


def rank_within_seed(runs: pd.DataFrame, metric: str = DEFAULT_RANK_METRIC) -> pd.DataFrame:
    """Rank models within each (dataset, seed), best first.

    The ranked score is ``value`` for higher-is-better metrics and
    ``-value`` for ``LOWER_IS_BETTER`` ones. Ties are exact float equality.

    Returns:
        Columns ``dataset``, ``seed`` (int), ``model``, ``value`` (the
        per-seed value), ``rank`` (int, "min" method: 1, 2, 2, 4, for display
        and counting) and ``rank_average`` (float, "average" method: 1, 2.5,
        2.5, 4, what Kendall's tau uses). Sorted by dataset, seed, then
        (rank, model). Empty input gives an empty frame with these columns.
    """
    rows = _ranking_rows(runs, metric)
    if rows.empty:
        return empty_frame(RANK_COLUMNS)
    score = _better_sign(metric) * rows["value"]
    by_block = score.groupby([rows["dataset"], rows["seed"]], sort=False)
    rows["rank"] = by_block.rank(method="min", ascending=False).astype(np.int64)
    rows["rank_average"] = by_block.rank(method="average", ascending=False).astype(np.float64)
    rows = rows.sort_values(["dataset", "seed", "rank", "model"], kind="mergesort")
    return rows.loc[:, list(RANK_COLUMNS)].reset_index(drop=True)


def rank_distribution(runs: pd.DataFrame, metric: str = DEFAULT_RANK_METRIC) -> pd.DataFrame:
    """How often each model attained each rank over the seeds of its dataset.

    Returns:
        One row per (dataset, model), sorted, with columns ``dataset``,
        ``model``, ``n_seeds``, ``n_models``, ``rank_1`` ... ``rank_K`` (K the
        largest model count of any dataset; NaN for ranks beyond the
        dataset's own model count, which cannot occur), ``mode_rank`` (ties
        resolve to the best rank), ``mode_fraction``, ``top1_fraction``,
        ``mean_value`` and ``std_value`` (ddof 1, NaN for one seed). Because
        ties share the better rank, one column may over-fill while the next
        stays empty. Empty input gives the columns without ``rank_k``.
    """
    return distribution_of_ranks(rank_within_seed(runs, metric))


def distribution_of_ranks(ranks: pd.DataFrame) -> pd.DataFrame:
    """:func:`rank_distribution` of the ranks :func:`rank_within_seed` gave.

    For a caller that also needs :func:`tau_of_ranks`: the seeds are ranked
    once for both (at 5,000 runs of 50 models that ranking is 0.06 s).
    """
    if ranks.empty:
        return empty_frame(DISTRIBUTION_HEAD + DISTRIBUTION_TAIL)
    n_models = ranks.groupby("dataset")["model"].nunique()
    max_models = int(n_models.max())
    counts = pd.crosstab([ranks["dataset"], ranks["model"]], ranks["rank"])
    counts = counts.reindex(columns=range(1, max_models + 1), fill_value=0)
    grouped = ranks.groupby(["dataset", "model"], sort=True)
    result = pd.DataFrame(
        {
            "n_seeds": grouped.size().astype(np.int64),
            "mean_value": grouped["value"].mean(),
            "std_value": grouped["value"].std(ddof=1),
        }
    )
    result["n_models"] = n_models.reindex(result.index.get_level_values("dataset")).to_numpy()
    count_matrix = counts.reindex(result.index).to_numpy(dtype=np.float64)
    possible = np.arange(1, max_models + 1)[None, :] <= result["n_models"].to_numpy()[:, None]
    rank_columns = {
        f"rank_{k}": np.where(possible[:, k - 1], count_matrix[:, k - 1], np.nan)
        for k in range(1, max_models + 1)
    }
    mode_index = np.argmax(count_matrix, axis=1)  # first maximum = best rank on ties
    n_seeds = result["n_seeds"].to_numpy(dtype=np.float64)
    frame = pd.DataFrame(
        {
            "dataset": result.index.get_level_values("dataset"),
            "model": result.index.get_level_values("model"),
            "n_seeds": result["n_seeds"].to_numpy(),
            "n_models": result["n_models"].to_numpy(dtype=np.int64),
            **rank_columns,
            "mode_rank": (mode_index + 1).astype(np.int64),
            "mode_fraction": count_matrix[np.arange(len(result)), mode_index] / n_seeds,
            "top1_fraction": count_matrix[:, 0] / n_seeds,
            "mean_value": result["mean_value"].to_numpy(),
            "std_value": np.where(n_seeds > 1, result["std_value"].to_numpy(), np.nan),
        }
    )
    return frame.reset_index(drop=True)


def _tau_b_matrix(rank_matrix: np.ndarray) -> np.ndarray:
    """Kendall tau-b between every pair of rows of ``rank_matrix`` (seeds x models).

    Equal to :func:`~deepecgkit.analysis.statistics.kendall_tau` on each pair
    of rows, computed with one matrix product: with ``S[s]`` the signs of all
    model-pair rank differences at seed ``s``, ``C - D = S S^T`` and the tie
    counts are the zero entries of each row.
    """
    upper = np.triu_indices(rank_matrix.shape[1], k=1)
    signs = np.sign(rank_matrix[:, upper[0]] - rank_matrix[:, upper[1]])
    n0 = signs.shape[1]
    untied = n0 - np.count_nonzero(signs == 0, axis=1)
    denominator = np.sqrt(np.outer(untied, untied).astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (signs @ signs.T) / denominator, np.nan)


def _kendall_floor(matrix: np.ndarray, taus: np.ndarray) -> float:
    """Smallest attainable two-sided Kendall p over the seed pairs with a defined tau.

    Computed from each pair's actual tie structure, once per distinct pair of
    tie patterns (without ties every seed shares one). A seed's pattern is
    where its sorted values change, which fixes its tie-group sizes in order.
    """
    n_models = matrix.shape[1]
    first, second = np.triu_indices(matrix.shape[0], k=1)
    defined = np.isfinite(taus[first, second])
    if not defined.any():
        return min_attainable_kendall_p(n_models)
    patterns = np.diff(np.sort(matrix, axis=1), axis=1) != 0
    representative: dict[bytes, int] = {}
    codes = np.array(
        [representative.setdefault(row.tobytes(), i) for i, row in enumerate(patterns)]
    )  # each seed's code is the first seed with its tie pattern
    pairs = np.unique(np.stack([codes[first[defined]], codes[second[defined]]], axis=1), axis=0)
    return float(
        min(min_attainable_kendall_p_given_ties(matrix[i], matrix[j]) for i, j in pairs.tolist())
    )


def _permutation_seed(seed: int, dataset: Any) -> list[int]:
    """Seed of one dataset's permutations: independent of which other datasets are present."""
    return [seed, zlib.crc32(str(dataset).encode("utf-8"))]


def _tau_row(
    dataset: Any,
    table: pd.DataFrame,
    confidence_level: float,
    n_permutations: int,
    seed: int,
) -> dict[str, Any]:
    common = table.columns[table.notna().all(axis=0).to_numpy()]
    n_models, n_seeds = len(common), len(table)
    row: dict[str, Any] = {
        "dataset": dataset,
        "n_models": n_models,
        "n_seeds": n_seeds,
        "n_pairs": 0,
        **{column: _NAN for column in TAU_COLUMNS[4:-1]},
        "n_permutations": n_permutations,
    }
    if n_models < MIN_MODELS_FOR_TAU:
        return row
    row["min_attainable_p"] = min_attainable_kendall_p(n_models)
    if n_seeds < 2:
        return row
    matrix = table[sorted(common)].to_numpy(dtype=np.float64)
    tau_matrix = _tau_b_matrix(matrix)
    taus = tau_matrix[np.triu_indices(n_seeds, k=1)]
    taus = taus[np.isfinite(taus)]
    jackknife = jackknife_mean_tau(tau_matrix, confidence_level)
    p_w, permutations = kendall_w_p_value(
        matrix, n_permutations=n_permutations, seed=_permutation_seed(seed, dataset)
    )
    row.update(
        n_pairs=int(taus.size),
        tau_mean=float(taus.mean()) if taus.size else _NAN,
        tau_min=float(taus.min()) if taus.size else _NAN,
        tau_max=float(taus.max()) if taus.size else _NAN,
        min_attainable_p=_kendall_floor(matrix, tau_matrix),
        tau_se=jackknife["se"],
        tau_lower=jackknife["lower"],
        tau_upper=jackknife["upper"],
        kendall_w=kendall_w(matrix),
        p_kendall_w=p_w,
        n_permutations=permutations,
    )
    return row


def tau_summary(
    runs: pd.DataFrame,
    metric: str = DEFAULT_RANK_METRIC,
    *,
    confidence_level: float = CONFIDENCE_LEVEL,
    n_permutations: int = DEFAULT_N_PERMUTATIONS,
    seed: int = DEFAULT_PERMUTATION_SEED,
) -> pd.DataFrame:
    """Agreement of the per-seed rankings within each dataset: Kendall tau-b and W.

    Only models present at every seed of a dataset (``common``) are compared;
    a model missing at one seed drops out for the whole dataset. Taus of
    all-tied seeds (NaN) are ignored.

    * ``tau_mean``, ``tau_min``, ``tau_max``: over every pair of seeds. The
      pairs share seeds, so [min, max] is a range, not an interval (it widens
      as seeds are added).
    * ``tau_se``, ``tau_lower``, ``tau_upper``: the leave-one-seed-out
      jackknife standard error and Student-t interval of ``tau_mean``
      (:func:`~deepecgkit.analysis.statistics.jackknife_mean_tau`), at least
      three seeds; bounds are not clipped to [-1, 1].
    * ``kendall_w``, ``p_kendall_w``, ``n_permutations``: Kendall's
      coefficient of concordance across all seeds and its p-value, the one
      pooled test the dependent taus cannot give: a permutation test seeded by
      ``seed`` and the dataset name, with the requested ``n_permutations``
      unless the dataset is too large for them
      (:func:`~deepecgkit.analysis.statistics.kendall_w_p_value`); the column
      records the count used, 0 for the chi-squared approximation.
    * ``min_attainable_p``: the smallest two-sided p-value the exact Kendall
      null can reach for any seed pair, from the pairs' actual tie structure
      (``2/n_models!`` only without ties; also when no pair has a defined
      tau); NaN below three models.

    Args:
        runs: the long runs frame.
        metric: the ranked metric.
        confidence_level: coverage of the jackknife interval.
        n_permutations: replicates of the W permutation test, at least 1.
        seed: base seed of the permutations.

    Returns:
        :data:`TAU_COLUMNS`, one row per dataset with ranked rows, sorted.
    """
    n_permutations, seed = _tau_options(confidence_level, n_permutations, seed)
    return _tau_frame(rank_within_seed(runs, metric), confidence_level, n_permutations, seed)


def tau_of_ranks(
    ranks: pd.DataFrame,
    *,
    confidence_level: float = CONFIDENCE_LEVEL,
    n_permutations: int = DEFAULT_N_PERMUTATIONS,
    seed: int = DEFAULT_PERMUTATION_SEED,
) -> pd.DataFrame:
    """:func:`tau_summary` of the ranks :func:`rank_within_seed` gave (same options and checks)."""
    n_permutations, seed = _tau_options(confidence_level, n_permutations, seed)
    return _tau_frame(ranks, confidence_level, n_permutations, seed)


def _tau_options(confidence_level: float, n_permutations: int, seed: int) -> tuple[int, int]:
    """The tau summary's options checked: ``(n_permutations, seed)`` as ints; ValueError else."""
    _check_confidence_level(confidence_level)
    n_permutations = _check_count("n_permutations", n_permutations)
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be at least 1, got {n_permutations}")
    seed = _check_non_negative_count("seed", seed)
    return n_permutations, seed


def _tau_frame(
    ranks: pd.DataFrame, confidence_level: float, n_permutations: int, seed: int
) -> pd.DataFrame:
    """One :func:`_tau_row` per dataset of ``ranks``, sorted; the options already checked."""
    if ranks.empty:
        return empty_frame(TAU_COLUMNS)
    rows = [
        _tau_row(
            dataset,
            block.pivot(index="seed", columns="model", values="rank_average").sort_index(),
            confidence_level,
            n_permutations,
            seed,
        )
        for dataset, block in ranks.groupby("dataset", sort=True)
    ]
    return pd.DataFrame(rows, columns=list(TAU_COLUMNS))


# --- paired differences and flips ------------------------------------------------------------


def _component_reason(
    summary: dict[str, Any],
    enough_groups: bool,
    strict_blocked: bool,
    n_test_groups: float | None,
    bimodal: tuple[tuple[bool, str], tuple[bool, str]],
    models: tuple[str, str],
) -> str:
    if not enough_groups:
        return too_few_groups_reason(n_test_groups)
    if strict_blocked:
        return strict_correction_reason(summary["correction_note"])
    if summary["n"] == 0:
        return _REASON_NO_SEEDS
    if summary["n"] == 1:
        return _REASON_ONE_SEED
    if summary["std"] <= ZERO_VARIANCE_TOL:
        return _REASON_ZERO_VARIANCE
    for model, (flag, reason) in zip(models, bimodal, strict=True):
        if flag:
            return f"{model}: {reason}"
    return ""


def _paired_difference(
    selected: pd.DataFrame,
    model_a: str,
    model_b: str,
    dataset: str,
    metric: str,
    confidence_level: float,
    correction: str,
    min_test_groups: int,
    strict_correction: bool,
) -> dict[str, Any]:
    """:func:`paired_difference` on an already sliced frame."""
    seeds, a_values, b_values, contributing = _paired_values(selected, model_a, model_b, dataset)
    n_train = _mean_optional(contributing, "n_train")
    n_test = _mean_optional(contributing, "n_test")
    n_test_groups = _mean_optional(contributing, "n_test_groups")
    summary = paired_summary(
        a_values - b_values,
        confidence_level=confidence_level,
        correction=correction,
        n_train=n_train,
        n_test=n_test,
    )
    floor = collapse_gap_floor(metric)
    bimodal = (is_bimodal(a_values, min_gap=floor), is_bimodal(b_values, min_gap=floor))
    enough_groups = not (n_test_groups is not None and n_test_groups < min_test_groups)
    strict_blocked = strict_correction and summary["correction_applied"] == CORRECTION_UNAVAILABLE
    testable = enough_groups and not strict_blocked
    reason = _component_reason(
        summary, enough_groups, strict_blocked, n_test_groups, bimodal, (model_a, model_b)
    )
    return {
        **summary,
        "model_a": model_a,
        "model_b": model_b,
        "dataset": dataset,
        "metric": metric,
        "seeds": seeds,
        "averaging": _joined_averaging(contributing),
        "n_train": n_train,
        "n_test": n_test,
        "n_test_groups": n_test_groups,
        "bimodal": bool(bimodal[0][0] or bimodal[1][0]),
        "testable": testable,
        "reason": reason,
    }


def paired_difference(
    runs: pd.DataFrame,
    model_a: str,
    model_b: str,
    dataset: str,
    *,
    metric: str = DEFAULT_RANK_METRIC,
    confidence_level: float = CONFIDENCE_LEVEL,
    correction: str = NADEAU_BENGIO,
    min_test_groups: int = MIN_TEST_GROUPS,
    strict_correction: bool = False,
) -> dict[str, Any]:
    """Paired per-seed difference ``A - B`` of one metric on one dataset.

    Args:
        runs: the long runs frame (``runs_to_frame``, usually reconciled).
        model_a, model_b: the two models; A is the minuend.
        dataset: where they are compared.
        metric: compared metric.
        confidence_level: two-sided coverage in (0, 1).
        correction: ``"nadeau-bengio"`` (split sizes averaged over the
            contributing runs) or ``"none"``.
        min_test_groups: fewer known test groups than this make the
            comparison untestable: with a handful of patients the seed-to-seed
            spread is dominated by which units land in the test set.
        strict_correction: when True, a comparison for which Nadeau-Bengio
            was requested but is unavailable (split sizes unknown) is
            untestable instead of falling back to the plain standard error,
            whose Type-I error with overlapping training sets is several
            times nominal.

    Returns:
        The :func:`~deepecgkit.analysis.statistics.paired_summary` keys (with
        ``correction_applied`` and ``correction_note``), then ``model_a``,
        ``model_b``, ``dataset``, ``metric``, ``seeds`` (list of int),
        ``averaging``, ``n_train``, ``n_test``, ``n_test_groups`` (float or
        None), ``bimodal``, ``testable`` and ``reason`` (empty when nothing is
        wrong). ``bimodal`` uses the metric's floor
        (:func:`~deepecgkit.analysis.statistics.collapse_gap_floor`).
    """
    if model_a == model_b:
        raise ValueError(f"paired_difference needs two different models, got {model_a!r} twice")
    _check_correction(correction)
    _check_confidence_level(confidence_level)
    min_test_groups = _check_non_negative_count("min_test_groups", min_test_groups)
    selected = _metric_slice(runs, metric)
    return _paired_difference(
        selected,
        model_a,
        model_b,
        dataset,
        metric,
        confidence_level,
        correction,
        min_test_groups,
        bool(strict_correction),
    )


def _flip_from_components(
    first: dict[str, Any],
    second: dict[str, Any],
    metric: str,
    min_seeds: int,
    min_seeds_for_claim: int,
    *,
    p_reversal: float | None = None,
) -> dict[str, Any]:
    """The flip row of two components; ``p_reversal`` when the caller computed it already.

    (A rank claim computes the reversal p-values of all its components in one
    array call, which is what makes it cheap; the value is the same.)
    """
    n_seeds = min(first["n"], second["n"])
    verdict, reason = _classify_flip(first, second, n_seeds, min_seeds, min_seeds_for_claim)
    untested = verdict in UNTESTED_VERDICTS
    if p_reversal is None and not untested:
        p_reversal = reversal_p_value(
            first["p_value"], second["p_value"], mean_1=first["mean"], mean_2=second["mean"]
        )
    return {
        "model_a": first["model_a"],
        "model_b": first["model_b"],
        "dataset_1": first["dataset"],
        "dataset_2": second["dataset"],
        "metric": metric,
        "difference_1": first,
        "difference_2": second,
        "mean_1": first["mean"],
        "mean_2": second["mean"],
        "lower_1": first["lower_ci"],
        "upper_1": first["upper_ci"],
        "lower_2": second["lower_ci"],
        "upper_2": second["upper_ci"],
        "wins_1": first["n_wins"],
        "wins_2": second["n_wins"],
        "n_1": first["n"],
        "n_2": second["n"],
        "n_seeds": n_seeds,
        "averaging_1": first["averaging"],
        "averaging_2": second["averaging"],
        "comparable_magnitudes": first["averaging"] == second["averaging"],
        "verdict": verdict,
        "p_flip": _NAN if untested else float(max(first["p_value"], second["p_value"])),
        "reason": reason,
        "p_reversal": _NAN if untested else float(p_reversal),
        "correction_applied_1": first["correction_applied"],
        "correction_applied_2": second["correction_applied"],
        "correction_note_1": first["correction_note"],
        "correction_note_2": second["correction_note"],
    }


def flip_test(
    runs: pd.DataFrame,
    model_a: str,
    model_b: str,
    dataset_1: str,
    dataset_2: str,
    *,
    metric: str = DEFAULT_RANK_METRIC,
    confidence_level: float = CONFIDENCE_LEVEL,
    correction: str = NADEAU_BENGIO,
    min_test_groups: int = MIN_TEST_GROUPS,
    min_seeds: int = MIN_SEEDS_FOR_INTERVAL,
    min_seeds_for_claim: int = MIN_SEEDS_FOR_CLAIM,
    strict_correction: bool = False,
) -> dict[str, Any]:
    """Intersection-union test for a ranking reversal of A and B between two datasets.

    A reversal is claimed only when both component nulls are rejected, so
    the test has level alpha when each component is tested at alpha (Berger
    1982, Technometrics 24(4):295-300); no correction between the two
    components is needed.

    Two p-values are reported, NaN for ``untestable`` and ``bimodal``:

    * ``p_reversal`` (use this one): the intersection-union p-value of "the
      difference changes sign", built from one-sided component tests
      (:func:`~deepecgkit.analysis.statistics.reversal_p_value`):
      ``max(p1, p2) / 2`` when the means have opposite signs (or one is
      zero), else ``1 - max(p1, p2) / 2`` (at least 0.5). Its size is alpha
      under the least-favourable null.
    * ``p_flip``: the larger two-sided component p-value, kept with its
      historical meaning. It tests "both differences are non-zero", so a
      large same-sign pair (a ``contradicted`` row) gets a small ``p_flip``;
      it is not evidence of a reversal.

    ``comparable_magnitudes`` is False when the two differences come from
    differently averaged scores (binary against macro F1), which can be
    compared in sign but not in size. ``correction_applied_*`` and
    ``correction_note_*`` say which standard error each component used.

    Returns:
        ``model_a``, ``model_b``, ``dataset_1``, ``dataset_2``, ``metric``,
        ``difference_1``/``difference_2`` (the :func:`paired_difference`
        dicts), ``mean_*``, ``lower_*``, ``upper_*``, ``wins_*``, ``n_*``,
        ``n_seeds``, ``averaging_*``, ``comparable_magnitudes``, ``verdict``,
        ``p_flip``, ``reason``, ``p_reversal``, ``correction_applied_1``,
        ``correction_applied_2``, ``correction_note_1``, ``correction_note_2``.
    """
    if dataset_1 == dataset_2:
        raise ValueError(f"flip_test needs two different datasets, got {dataset_1!r} twice")
    if model_a == model_b:
        raise ValueError(f"flip_test needs two different models, got {model_a!r} twice")
    _check_correction(correction)
    _check_confidence_level(confidence_level)
    min_test_groups = _check_non_negative_count("min_test_groups", min_test_groups)
    min_seeds = _check_non_negative_count("min_seeds", min_seeds)
    min_seeds_for_claim = _check_non_negative_count("min_seeds_for_claim", min_seeds_for_claim)
    selected = _metric_slice(runs, metric)
    args = (metric, confidence_level, correction, min_test_groups, bool(strict_correction))
    first = _paired_difference(selected, model_a, model_b, dataset_1, *args)
    second = _paired_difference(selected, model_a, model_b, dataset_2, *args)
    return _flip_from_components(first, second, metric, min_seeds, min_seeds_for_claim)


def _restrict(
    selected: pd.DataFrame,
    models: Sequence[str] | str | None,
    datasets: Sequence[str] | str | None,
) -> pd.DataFrame:
    model_names, dataset_names = _names(models), _names(datasets)
    if model_names is not None:
        selected = selected.loc[selected["model"].isin(model_names)]
    if dataset_names is not None:
        selected = selected.loc[selected["dataset"].isin(dataset_names)]
    return selected


def _adjust_family(
    flips: dict[str, Any], fdr_family: str, fdr_method: str, confidence_level: float
) -> dict[str, Any]:
    """FDR columns: BY over ``p_flip`` (``p_adjusted``) and ``fdr_method`` over ``p_reversal``.

    Both adjustments run over the same family (NaN outside it): every row
    with a finite p-value, or for ``"significant"`` only the supported,
    suggestive and contradicted ones. ``flips`` maps column names to arrays;
    the FDR columns are added to it.
    """
    p_flip = np.asarray(flips["p_flip"], dtype=np.float64)
    p_reversal = np.asarray(flips["p_reversal"], dtype=np.float64)
    verdicts = pd.Series(flips["verdict"])
    in_family = np.isfinite(p_flip)
    if fdr_family == FDR_FAMILY_SIGNIFICANT:
        in_family &= verdicts.isin(_SIGNIFICANT_VERDICTS).to_numpy()
    adjusted = np.full(len(p_flip), np.nan)
    adjusted[in_family] = benjamini_yekutieli_adjust(p_flip[in_family])
    q_reversal = np.full(len(p_flip), np.nan)
    q_reversal[in_family] = fdr_adjust(p_reversal[in_family], fdr_method)
    flips["p_adjusted"] = adjusted
    flips["fdr_family"] = fdr_family
    flips["fdr_family_size"] = int(in_family.sum())
    flips["q_reversal"] = q_reversal
    flips["fdr_method"] = fdr_method
    with np.errstate(invalid="ignore"):
        flips["survives_fdr"] = (verdicts == VERDICT_SUPPORTED).to_numpy(dtype=bool) & (
            q_reversal <= 1.0 - confidence_level
        )
    return flips


def _check_fdr_options(fdr_family: str, fdr_method: str) -> None:
    if fdr_family not in FDR_FAMILIES:
        raise ValueError(
            f"fdr_family must be one of {', '.join(map(repr, FDR_FAMILIES))}, got {fdr_family!r}"
        )
    _check_fdr_method(fdr_method)


def paired_differences(
    runs: pd.DataFrame,
    metric: str = DEFAULT_RANK_METRIC,
    *,
    confidence_level: float = CONFIDENCE_LEVEL,
    correction: str = NADEAU_BENGIO,
    models: Sequence[str] | str | None = None,
    datasets: Sequence[str] | str | None = None,
    min_test_groups: int = MIN_TEST_GROUPS,
    strict_correction: bool = False,
) -> pd.DataFrame:
    """Seed-paired differences of every model pair on every dataset: a flip row's components.

    Each row is one (dataset, model pair a < b) comparison as
    :func:`paired_difference` defines it (mean of ``A - B`` over shared seeds,
    its interval and two-sided p-value with the correction actually applied,
    wins, ``n``, the joined averaging, the bimodality flag and the reason when
    it is untestable). A row depends on its own dataset's runs only, so the
    frame of a corpus is the concatenation of its datasets' frames; that is
    what lets one new run recompute one dataset (:func:`flip_tests_from_differences`
    combines them without reading a run).

    Returns:
        :data:`PAIRED_DIFFERENCE_COLUMNS`, ordered by dataset then model pair;
        empty with these columns when no dataset holds two models.
    """
    _check_correction(correction)
    _check_confidence_level(confidence_level)
    min_test_groups = _check_non_negative_count("min_test_groups", min_test_groups)
    selected = _restrict(_metric_slice(runs, metric), models, datasets)
    return _paired_grid.grid_components(
        selected,
        metric=metric,
        confidence_level=confidence_level,
        correction=correction,
        min_test_groups=min_test_groups,
        strict_correction=bool(strict_correction),
    )


def _restrict_differences(
    differences: pd.DataFrame,
    models: Sequence[str] | str | None,
    datasets: Sequence[str] | str | None,
) -> pd.DataFrame:
    """Rows of a paired-differences frame between two of ``models`` on one of ``datasets``.

    Equal to restricting the runs first: a row depends only on its own two
    models' runs on its own dataset.
    """
    model_names, dataset_names = _names(models), _names(datasets)
    if model_names is not None:
        keep = differences["model_a"].isin(model_names) & differences["model_b"].isin(model_names)
        differences = differences.loc[keep.to_numpy()]
    if dataset_names is not None:
        differences = differences.loc[differences["dataset"].isin(dataset_names).to_numpy()]
    return differences


def flip_tests_from_differences(
    differences: pd.DataFrame,
    *,
    models: Sequence[str] | str | None = None,
    datasets: Sequence[str] | str | None = None,
    confidence_level: float = CONFIDENCE_LEVEL,
    fdr_family: str = FDR_FAMILY_TESTABLE,
    fdr_method: str = DEFAULT_FDR_METHOD,
) -> pd.DataFrame:
    """The FDR-adjusted flip grid of a :func:`paired_differences` frame.

    ``differences`` may be the concatenation of per-dataset frames computed
    separately (and stored), in any order of datasets or rows; the result
    equals :func:`all_flip_tests` on the runs they came from, value for value,
    when the options match:

    * ``correction``, ``min_test_groups`` and ``strict_correction`` act on
      each dataset's runs and are fixed when the differences are computed;
    * ``models`` and ``datasets`` restrict the grid here as they restrict the
      runs there (a bare string is one name), so per-dataset frames can hold
      every model and the selection can change without recomputing them;
    * ``confidence_level`` must be the one the differences were computed with
      (it sets the intervals there and ``survives_fdr`` here);
    * ``fdr_family`` and ``fdr_method`` act on the whole grid, as in
      :func:`all_flip_tests`.

    Raises:
        ValueError: the frame holds more than one metric, a (dataset, model
            pair) twice (a dataset concatenated twice), or lacks a pair of
            models that both hold rows on a dataset (a truncated frame).
    """
    _check_fdr_options(fdr_family, fdr_method)
    _check_confidence_level(confidence_level)
    flips = _paired_grid.flip_columns(
        _restrict_differences(differences, models, datasets),
        min_seeds=MIN_SEEDS_FOR_INTERVAL,
        min_seeds_for_claim=MIN_SEEDS_FOR_CLAIM,
    )
    if flips is None:
        return empty_frame(FLIP_COLUMNS)
    flips = _adjust_family(flips, fdr_family, fdr_method, confidence_level)
    return pd.DataFrame({column: flips[column] for column in FLIP_COLUMNS})


def all_flip_tests(
    runs: pd.DataFrame,
    *,
    metric: str = DEFAULT_RANK_METRIC,
    confidence_level: float = CONFIDENCE_LEVEL,
    correction: str = NADEAU_BENGIO,
    models: Sequence[str] | str | None = None,
    datasets: Sequence[str] | str | None = None,
    min_test_groups: int = MIN_TEST_GROUPS,
    fdr_family: str = FDR_FAMILY_TESTABLE,
    fdr_method: str = DEFAULT_FDR_METHOD,
    strict_correction: bool = False,
) -> pd.DataFrame:
    """Flip tests for every model pair on every dataset pair, FDR-adjusted over the grid.

    For each pair of datasets (d1 < d2) the shared models are those with at
    least one row on both; every pair (a < b) of them is tested. A model
    left out on one dataset (it failed to converge there, say) is simply not
    compared on that pair.

    Args:
        runs: the long runs frame.
        metric, confidence_level, correction, min_test_groups,
            strict_correction: as in :func:`flip_test` (default seed
            thresholds).
        models, datasets: optional restrictions (a bare string is one name).
        fdr_family: ``"testable"`` (default: every row with a finite
            ``p_flip``) or ``"significant"`` (only supported, suggestive and
            contradicted rows, the historical behaviour). Choosing the family
            by verdict means choosing it from the very p-values being
            adjusted, which loses FDR control; the whole grid is exploratory.
        fdr_method: adjustment of ``q_reversal``: ``"by"`` (default,
            Benjamini-Yekutieli, valid under any dependence) or ``"bh"``
            (Benjamini-Hochberg, which assumes positive regression dependence
            that the grid's directional p-values need not have).

    Returns:
        :data:`FLIP_COLUMNS`, sorted by (dataset_1, dataset_2, p_reversal
        with NaN last, model_a, model_b). Beyond :func:`flip_test`'s keys:
        ``p_adjusted`` (Benjamini-Yekutieli of ``p_flip``, its historical
        meaning), ``fdr_family``, ``fdr_family_size``, ``q_reversal`` (the
        ``fdr_method`` adjustment of ``p_reversal`` over the same family),
        ``fdr_method`` and ``survives_fdr`` (verdict ``supported`` and
        ``q_reversal <= 1 - confidence_level``: a reversal that survives
        multiplicity, as opposed to a nominal one). No comparisons give an
        empty frame with these columns. It is :func:`paired_differences`
        followed by :func:`flip_tests_from_differences`.
    """
    _check_fdr_options(fdr_family, fdr_method)
    differences = paired_differences(
        runs,
        metric,
        confidence_level=confidence_level,
        correction=correction,
        models=models,
        datasets=datasets,
        min_test_groups=min_test_groups,
        strict_correction=strict_correction,
    )
    return flip_tests_from_differences(
        differences,
        confidence_level=confidence_level,
        fdr_family=fdr_family,
        fdr_method=fdr_method,
    )


# --- claims -------------------------------------------------------------------------------------


def _claim_verdict(verdicts: list[str]) -> str:
    """Overall claim verdict: only unanimous support supports a claim."""
    if not verdicts:
        return VERDICT_UNTESTABLE
    if all(v == VERDICT_SUPPORTED for v in verdicts):
        return VERDICT_SUPPORTED
    if VERDICT_CONTRADICTED in verdicts:
        return VERDICT_CONTRADICTED
    if any(v in UNTESTED_VERDICTS for v in verdicts):
        return VERDICT_UNTESTABLE
    if VERDICT_NOT_REPRODUCED in verdicts:
        return VERDICT_NOT_REPRODUCED
    return VERDICT_UNRESOLVED


#: Paired-difference columns a claim component reads (besides dataset and models).
_CLAIM_VALUES = tuple(
    column
    for column in PAIRED_DIFFERENCE_COLUMNS
    if column not in ("dataset", "model_a", "model_b", "metric")
)


class _ClaimRows:
    """The paired differences of a claim's two datasets, as plain Python values.

    Only the name columns of the two datasets' rows are read as arrays; the
    other columns only for the rows that involve the claimed model (one per
    opponent and dataset), so a claim costs little however large the frame.
    """

    def __init__(
        self, differences: pd.DataFrame, metric: str, model: str, datasets: tuple[str, str]
    ) -> None:
        self.names: dict[str, np.ndarray] = {
            c: np.empty(0, dtype=object) for c in ("dataset", "model_a", "model_b")
        }
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.values: dict[str, list[Any]] = {column: [] for column in _CLAIM_VALUES}
        if differences.empty:
            return
        missing = [c for c in PAIRED_DIFFERENCE_COLUMNS if c not in differences.columns]
        if missing:
            raise ValueError(
                f"a paired-differences frame needs column(s) {', '.join(map(repr, missing))}"
            )
        metrics = differences["metric"].unique().tolist()
        if metrics != [metric]:
            raise ValueError(f"paired differences of metric {metric!r} expected, got {metrics}")
        rows = np.flatnonzero(differences["dataset"].isin(datasets).to_numpy(dtype=bool))
        self.names = {
            column: np.asarray(differences[column].array.take(rows), dtype=object)
            for column in self.names
        }
        involved = np.flatnonzero(
            (self.names["model_a"] == model) | (self.names["model_b"] == model)
        )
        self.values = {
            column: np.asarray(differences[column].array.take(rows[involved])).tolist()
            for column in _CLAIM_VALUES
        }
        for i, position in enumerate(involved.tolist()):
            a, b = self.names["model_a"][position], self.names["model_b"][position]
            opponent = b if a == model else a
            row = {column: values[i] for column, values in self.values.items()}
            row["reversed"] = a != model
            self.stored[(self.names["dataset"][position], opponent)] = row

    def models_on(self, dataset: str) -> set[str]:
        """Models that the frame places on ``dataset``."""
        on = self.names["dataset"] == dataset
        return set(self.names["model_a"][on].tolist()) | set(self.names["model_b"][on].tolist())

    def check_options(self, correction: str, strict_correction: bool) -> None:
        """Refuse differences computed with another ``correction`` or ``strict_correction``.

        The options cannot be read back from every row, but a row that
        contradicts them can be recognised: ``correction="none"`` applies no
        correction to any row; ``"nadeau-bengio"`` applies it or records it
        as unavailable; ``strict_correction`` leaves no row that fell back to
        the plain error testable, and without it no reason names it. Only
        the rows the claim reads are checked.
        """
        if correction == NO_CORRECTION:
            allowed = {NO_CORRECTION}
        else:
            allowed = {NADEAU_BENGIO, CORRECTION_UNAVAILABLE}
        if not set(self.values["correction_applied"]) <= allowed:
            raise ValueError(
                f"these paired differences were not computed with correction={correction!r}"
            )
        rows = zip(
            self.values["correction_applied"],
            self.values["testable"],
            self.values["reason"],
            strict=True,
        )
        for applied, testable, reason in rows:
            fell_back = applied == CORRECTION_UNAVAILABLE and bool(testable)
            marked = str(reason).endswith(_REASON_STRICT_CORRECTION)
            if (strict_correction and fell_back) or (not strict_correction and marked):
                raise ValueError(
                    "these paired differences were not computed with "
                    f"strict_correction={strict_correction}"
                )

    def component(self, model: str, opponent: str, dataset: str) -> dict[str, Any] | None:
        """The stored difference read as ``model - opponent`` (plain Python scalars), or None.

        A row stores its pair by name (a < b). When ``model`` is its ``b``,
        the difference is negated: the mean and bounds change sign (the
        bounds swap), wins and losses swap and the reason is the one that
        names the models in that order; the p-value, counts, flags, averaging
        and correction do not depend on the order. ``x + 0.0`` turns a
        negated zero into the +0.0 that computing ``model - opponent``
        directly gives.
        """
        row = self.stored.get((dataset, opponent))
        if row is None:
            return None
        mean, lower, upper = float(row["mean"]), float(row["lower_ci"]), float(row["upper_ci"])
        wins, reason = int(row["wins"]), str(row["reason"])
        if row["reversed"]:
            mean, lower, upper = -mean + 0.0, -upper + 0.0, -lower + 0.0
            wins, reason = int(row["losses"]), str(row["reason_reversed"])
        return {
            "model_a": model,
            "model_b": opponent,
            "dataset": dataset,
            "mean": mean,
            "lower_ci": lower,
            "upper_ci": upper,
            "p_value": float(row["p_value"]),
            "n": int(row["n"]),
            "n_wins": wins,
            "excludes_zero": bool(row["excludes_zero"]),
            "testable": bool(row["testable"]),
            "bimodal": bool(row["bimodal"]),
            "reason": reason,
            "averaging": str(row["averaging"]),
            "correction_applied": str(row["correction_applied"]),
            "correction_note": str(row["correction_note"]),
        }


def rank_claim_from_differences(
    differences: pd.DataFrame,
    model: str,
    *,
    dataset_best: str,
    dataset_worst: str,
    metric: str = DEFAULT_RANK_METRIC,
    opponents: Sequence[str] | str | None = None,
    correction: str = NADEAU_BENGIO,
    strict_correction: bool = False,
    dataset_models: Mapping[str, Collection[str]] | None = None,
) -> dict[str, Any]:
    """:func:`evaluate_rank_claim` computed from a :func:`paired_differences` frame.

    ``differences`` may be the concatenation of per-dataset frames computed
    separately, in any order; only the rows of ``dataset_best`` and
    ``dataset_worst`` are read, and no run. The result equals
    :func:`evaluate_rank_claim` on the runs they came from, key for key,
    when the options match. The two datasets are keyword-only here (the
    claim reads "best on ``dataset_best``, worst on ``dataset_worst``", which
    a positional call could swap unnoticed).

    * ``confidence_level`` and ``min_test_groups`` act on each dataset's runs
      and are fixed when the differences are computed;
    * ``correction`` and ``strict_correction`` are fixed there too, and are
      also needed here: an opponent without a row on a dataset (a named
      model without runs there) gets the component :func:`paired_difference`
      gives for no shared seeds, whose correction and testability they set.
      Differences that contradict them raise a ``ValueError``;
    * ``dataset_models`` (dataset -> the models with at least one row on it)
      matters only for the default opponents, every other model with rows on
      both datasets. Without it the models come from the frame, which holds
      rows only for datasets with two models or more: a dataset where a
      single model has runs contributes no opponent unless this names it.

    Returns:
        The dict of :func:`evaluate_rank_claim`.
    """
    if dataset_best == dataset_worst:
        raise ValueError(f"a rank claim needs two different datasets, got {dataset_best!r} twice")
    _check_correction(correction)
    strict_correction = bool(strict_correction)
    rows = _ClaimRows(differences, metric, model, (dataset_best, dataset_worst))
    rows.check_options(correction, strict_correction)
    named = _names(opponents)
    if named is not None:
        candidates = set(named)
    elif dataset_models is not None:
        candidates = set(dataset_models.get(dataset_best, ())) & set(
            dataset_models.get(dataset_worst, ())
        )
    else:
        candidates = rows.models_on(dataset_best) & rows.models_on(dataset_worst)
    candidates.discard(model)
    pairs = [
        tuple(
            rows.component(model, opponent, dataset)
            or _absent_component(model, opponent, dataset, metric, correction, strict_correction)
            for dataset in (dataset_best, dataset_worst)
        )
        for opponent in sorted(candidates)
    ]
    sign = _better_sign(metric)
    p_best, mean_best, p_worst, mean_worst = (
        np.array([pair[i][key] for pair in pairs], dtype=np.float64)
        for i in (0, 1)
        for key in ("p_value", "mean")
    )
    p_reversal = reversal_p_value(p_best, p_worst, mean_1=mean_best, mean_2=mean_worst)
    # Larger one-sided p of "better on the best dataset" and "worse on the worst dataset".
    p_directional = np.maximum(
        one_sided_p_value(p_best, mean_best, direction=sign),
        one_sided_p_value(p_worst, mean_worst, direction=-sign),
    )
    components: list[dict[str, Any]] = []
    for i, (first, second) in enumerate(pairs):
        flip = _flip_from_components(
            first,
            second,
            metric,
            MIN_SEEDS_FOR_INTERVAL,
            MIN_SEEDS_FOR_CLAIM,
            p_reversal=float(p_reversal[i]),
        )
        del flip["difference_1"], flip["difference_2"]
        claimed = bool(sign * flip["mean_1"] > 0 and sign * flip["mean_2"] < 0)
        if flip["verdict"] in (VERDICT_SUPPORTED, VERDICT_SUGGESTIVE) and not claimed:
            flip["verdict"], flip["reason"] = VERDICT_CONTRADICTED, _REASON_WRONG_DIRECTION
        flip["claimed_direction"] = claimed
        flip["p_directional"] = _NAN if math.isnan(flip["p_flip"]) else float(p_directional[i])
        components.append(flip)
    verdicts = [component["verdict"] for component in components]
    p_values = [c["p_flip"] for c in components if math.isfinite(c["p_flip"])]
    directional = [c["p_directional"] for c in components if math.isfinite(c["p_directional"])]
    return {
        "model": model,
        "dataset_best": dataset_best,
        "dataset_worst": dataset_worst,
        "metric": metric,
        "components": components,
        "n_components": len(components),
        "n_supported": verdicts.count(VERDICT_SUPPORTED),
        "n_supported_in_direction": sum(
            c["verdict"] == VERDICT_SUPPORTED and c["claimed_direction"] for c in components
        ),
        "n_untestable": sum(v in UNTESTED_VERDICTS for v in verdicts),
        "verdict": _claim_verdict(verdicts),
        "p_claim": float(max(p_values)) if p_values else _NAN,
        "p_claim_directional": float(max(directional)) if directional else _NAN,
    }


def _absent_component(
    model: str,
    opponent: str,
    dataset: str,
    metric: str,
    correction: str,
    strict_correction: bool,
) -> dict[str, Any]:
    """The component of a pair without shared rows: :func:`paired_difference` of no runs."""
    return _paired_difference(
        empty_frame(SLICE_COLUMNS),
        model,
        opponent,
        dataset,
        metric,
        CONFIDENCE_LEVEL,  # no seeds, no interval: the level cannot show
        correction,
        MIN_TEST_GROUPS,  # no runs, no known test groups: the threshold cannot show
        strict_correction,
    )


def evaluate_rank_claim(
    runs: pd.DataFrame,
    model: str,
    dataset_best: str,
    dataset_worst: str,
    *,
    metric: str = DEFAULT_RANK_METRIC,
    opponents: Sequence[str] | str | None = None,
    confidence_level: float = CONFIDENCE_LEVEL,
    correction: str = NADEAU_BENGIO,
    min_test_groups: int = MIN_TEST_GROUPS,
    strict_correction: bool = False,
) -> dict[str, Any]:
    """Test "``model`` is best on ``dataset_best`` and worst on ``dataset_worst``".

    The claim is broken into one flip test against each opponent. The flip
    test is symmetric, the claim is not: a supported or suggestive reversal
    in the opposite direction is relabelled ``contradicted``. Untestable
    components are reported, not dropped; otherwise a claim could appear
    supported on a quietly reduced set of opponents.

    It is :func:`paired_differences` of the two datasets followed by
    :func:`rank_claim_from_differences`, so a claim read from stored
    per-dataset differences gives the same dict.

    Args:
        opponents: restrict the opponents (a bare string is one name); every
            named opponent gets a component, untestable if it has no runs.
            Default: every other model with rows on both datasets.
        strict_correction: as in :func:`paired_difference`.

    Returns:
        ``model``, ``dataset_best``, ``dataset_worst``, ``metric``,
        ``components`` (flip rows plus ``claimed_direction`` and
        ``p_directional``, in opponent order), ``n_components``,
        ``n_supported``, ``n_supported_in_direction``, ``n_untestable``
        (untestable or bimodal), ``verdict``, ``p_claim`` (largest finite
        ``p_flip``, else NaN; kept with its historical meaning, it is small
        for a claim that holds in the opposite direction) and
        ``p_claim_directional`` (use this one). A component's
        ``p_directional`` is the larger of its two one-sided p-values in the
        claimed direction (better on ``dataset_best``, worse on
        ``dataset_worst``, oriented by the metric's better sign): the
        intersection-union p-value of that component. ``p_claim_directional``
        is the largest over the components (every opponent must reverse),
        NaN when none is finite; a claim that holds the other way round has
        ``p_claim_directional >= 0.5``.
    """
    if dataset_best == dataset_worst:
        raise ValueError(
            f"evaluate_rank_claim needs two different datasets, got {dataset_best!r} twice"
        )
    _check_correction(correction)
    _check_confidence_level(confidence_level)
    min_test_groups = _check_non_negative_count("min_test_groups", min_test_groups)
    claim_datasets = [dataset_best, dataset_worst]
    selected = _restrict(_metric_slice(runs, metric), None, claim_datasets)
    named = _names(opponents)
    if named is not None:
        selected = _restrict(selected, [model, *named], None)
    dataset_models = {
        dataset: set(selected.loc[selected["dataset"] == dataset, "model"])
        for dataset in claim_datasets
    }
    differences = _paired_grid.grid_components(
        selected,
        metric=metric,
        confidence_level=confidence_level,
        correction=correction,
        min_test_groups=min_test_groups,
        strict_correction=bool(strict_correction),
    )
    return rank_claim_from_differences(
        differences,
        model,
        dataset_best=dataset_best,
        dataset_worst=dataset_worst,
        metric=metric,
        opponents=opponents,
        correction=correction,
        strict_correction=strict_correction,
        dataset_models=dataset_models,
    )
