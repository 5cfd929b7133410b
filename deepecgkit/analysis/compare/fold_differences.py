"""Descriptive differences between models on matched folds (or seeds).

A *fold* is any evaluation unit every model was scored on under the same
conditions: a cross-validation fold, or, in our seed grids, the seed (runs
with one seed share split and initial conditions). This module answers only
"by how much did two models differ on the same folds, and how often in the
same direction?".

It deliberately computes no p-values and no intervals: folds share most of
their training data and seeds share split and data, so fold deltas are not
independent replicates and a paired t-test or Wilcoxon test on them would be
miscalibrated (typically too confident). Inference over seeds belongs to
:func:`deepecgkit.analysis.statistics.paired_summary` with the Nadeau-Bengio
correction; inference over test patients belongs to the group bootstrap.
The three ``False`` flags of :attr:`PairedFoldDifferences.design` make that
refusal machine-readable.

Conventions: ``delta = value_a - value_b`` always; ``improvement_for_a`` is
``delta`` for higher-is-better metrics and ``-delta`` otherwise, so a
positive improvement always favours ``a``. A metric is lower-is-better by
default exactly when its name is in ``LOWER_IS_BETTER``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.analysis.constants import DEFAULT_TIE_TOLERANCE
from deepecgkit.rundir.format import LOWER_IS_BETTER

__all__ = ["PairedFoldDifferences", "paired_fold_differences"]

_REQUIRED = ("model", "fold", "metric", "value")
_MAX_NAMED = 10
_MIN_MODELS = 2
WIN_A = "win_a"
WIN_B = "win_b"
TIE = "tie"
UNPAIRED = "unpaired"

SUMMARY_COLUMNS = (
    "model_a",
    "model_b",
    "metric",
    "higher_is_better",
    "n_folds",
    "mean_delta",
    "median_delta",
    "std_delta",
    "min_delta",
    "max_delta",
    "mean_improvement_for_a",
    "wins_a",
    "ties",
    "wins_b",
)
FOLD_DELTA_COLUMNS = (
    "model_a",
    "model_b",
    "metric",
    "fold",
    "value_a",
    "value_b",
    "delta",
    "improvement_for_a",
    "outcome",
)


@dataclass(frozen=True)
class PairedFoldDifferences:
    """Result of :func:`paired_fold_differences`.

    Attributes:
        summary: one row per model pair x metric (columns ``SUMMARY_COLUMNS``).
        fold_deltas: one row per pair x metric x fold, unpaired folds
            included (columns ``FOLD_DELTA_COLUMNS``).
        design: how the table was built, including the refusal flags
            ``inferential_p_values``, ``confidence_intervals`` and
            ``folds_treated_as_independent_replicates`` (all False).
    """

    summary: pd.DataFrame
    fold_deltas: pd.DataFrame
    design: dict[str, Any] = field(default_factory=dict)


def _plain(value: Any) -> Any:
    """A numpy scalar as its Python value (readable in messages and JSON)."""
    return value.item() if isinstance(value, np.generic) else value


def _show(model: Any, fold: Any) -> str:
    model, fold = _plain(model), _plain(fold)
    shown_model = f'"{model}"' if isinstance(model, str) else repr(model)
    shown_fold = f'"{fold}"' if isinstance(fold, str) else repr(fold)
    return f"({shown_model}, {shown_fold})"


def _sorted_folds(folds: list[Any]) -> list[Any]:
    """Folds ascending by value, or by ``str`` when values are not mutually comparable."""
    try:
        return sorted(folds)
    except TypeError:
        return sorted(folds, key=str)


def _check_frame(fold_metrics: pd.DataFrame) -> pd.DataFrame:
    """Validate the long table; return ``model, fold, metric, value`` with float values."""
    if not isinstance(fold_metrics, pd.DataFrame):
        raise ComparisonError(
            f"fold_metrics must be a pandas DataFrame, got {type(fold_metrics).__name__}"
        )
    missing = [c for c in _REQUIRED if c not in fold_metrics.columns]
    if missing:
        raise ComparisonError(
            f"fold_metrics lacks the columns {missing}; required: {list(_REQUIRED)}"
        )
    if fold_metrics.empty:
        raise ComparisonError("fold_metrics is empty; it needs one row per model, fold and metric")
    frame = fold_metrics.loc[:, list(_REQUIRED)].copy()
    raw = frame["value"]
    if pd.api.types.is_bool_dtype(raw):
        raise ComparisonError("fold_metrics['value'] must be numeric, got booleans")
    values = pd.to_numeric(raw, errors="coerce")
    non_numeric = values.isna() & raw.notna()
    if non_numeric.any():
        raise ComparisonError(
            f"fold_metrics['value'] must be numeric; found {raw[non_numeric].head(5).tolist()}"
        )
    values = values.astype(np.float64)
    infinite = np.isinf(values.to_numpy())
    if infinite.any():
        rows = frame.loc[infinite, ["model", "fold", "metric"]].head(5)
        raise ComparisonError(
            "fold_metrics['value'] must be finite or NaN; ±inf at "
            f"{[tuple(map(_plain, r)) for r in rows.itertuples(index=False)]}"
        )
    frame["value"] = values
    duplicated = frame.duplicated(subset=["model", "fold", "metric"], keep=False)
    if duplicated.any():
        keys = frame.loc[duplicated, ["model", "fold", "metric"]].drop_duplicates().head(5)
        raise ComparisonError(
            "each (model, fold, metric) must appear once; repeated: "
            f"{[tuple(map(_plain, r)) for r in keys.itertuples(index=False)]}"
        )
    return frame


def _check_design(frame: pd.DataFrame) -> tuple[list[Any], list[Any]]:
    """Return sorted models and folds; raise when the design is not complete."""
    models = sorted(frame["model"].unique().tolist(), key=str)
    if len(models) < _MIN_MODELS:
        raise ComparisonError(
            f"fold_metrics needs at least two models to pair, got {[_plain(m) for m in models]}"
        )
    folds = _sorted_folds(frame["fold"].unique().tolist())
    present = set(frame[["model", "fold"]].drop_duplicates().itertuples(index=False, name=None))
    absent = [(m, f) for m in models for f in folds if (m, f) not in present]
    if absent:
        named = ", ".join(_show(m, f) for m, f in absent[:_MAX_NAMED])
        more = f" and {len(absent) - _MAX_NAMED} more" if len(absent) > _MAX_NAMED else ""
        raise ComparisonError(
            "incomplete design: every model must be present on the same folds; missing "
            f"(model, fold) pairs: {named}{more}. Comparing only the shared folds would "
            "silently change the design."
        )
    return models, folds


def _directions(
    metrics: list[Any], higher_is_better: bool | Mapping[str, bool] | None
) -> dict[Any, bool]:
    """Resolve the direction of every metric (``True`` = higher is better)."""
    default = {m: m not in LOWER_IS_BETTER for m in metrics}
    if higher_is_better is None:
        return default
    if isinstance(higher_is_better, (bool, np.bool_)):
        return dict.fromkeys(metrics, bool(higher_is_better))
    if isinstance(higher_is_better, Mapping):
        for key, flag in higher_is_better.items():
            if not isinstance(flag, (bool, np.bool_)):
                raise ComparisonError(
                    f"higher_is_better[{key!r}] must be True or False, got {flag!r}"
                )
        return {m: bool(higher_is_better.get(m, default[m])) for m in metrics}
    raise ComparisonError(
        "higher_is_better must be None, a bool or a mapping of metric -> bool, got "
        f"{type(higher_is_better).__name__}"
    )


def _outcomes(improvement: np.ndarray, tie_tolerance: float) -> np.ndarray:
    """Outcome of each fold; a difference exactly at the tolerance is a tie."""
    outcome = np.full(improvement.shape, TIE, dtype=object)
    outcome[improvement > tie_tolerance] = WIN_A
    outcome[improvement < -tie_tolerance] = WIN_B
    outcome[np.isnan(improvement)] = UNPAIRED
    return outcome


def _summary_row(
    model_a: Any,
    model_b: Any,
    metric: Any,
    higher: bool,
    delta: np.ndarray,
    improvement: np.ndarray,
    outcome: np.ndarray,
) -> dict[str, Any]:
    paired = ~np.isnan(delta)
    deltas, gains = delta[paired], improvement[paired]
    n_folds = int(paired.sum())
    row: dict[str, Any] = {
        "model_a": model_a,
        "model_b": model_b,
        "metric": metric,
        "higher_is_better": higher,
        "n_folds": n_folds,
        "mean_delta": math.nan,
        "median_delta": math.nan,
        "std_delta": math.nan,
        "min_delta": math.nan,
        "max_delta": math.nan,
        "mean_improvement_for_a": math.nan,
    }
    if n_folds:
        row.update(
            mean_delta=float(np.mean(deltas)),
            median_delta=float(np.median(deltas)),
            min_delta=float(np.min(deltas)),
            max_delta=float(np.max(deltas)),
            mean_improvement_for_a=float(np.mean(gains)),
        )
    if n_folds >= _MIN_MODELS:
        row["std_delta"] = float(np.std(deltas, ddof=1))
    row["wins_a"] = int(np.count_nonzero(outcome == WIN_A))
    row["ties"] = int(np.count_nonzero(outcome == TIE))
    row["wins_b"] = int(np.count_nonzero(outcome == WIN_B))
    return row


def paired_fold_differences(
    fold_metrics: pd.DataFrame,
    *,
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
    higher_is_better: bool | Mapping[str, bool] | None = None,
) -> PairedFoldDifferences:
    """Describe every pair of models on matched folds; no p-values, by design.

    Args:
        fold_metrics: long table with columns ``model``, ``fold``, ``metric``,
            ``value`` (others ignored), for one design (one dataset). NaN means
            the metric is missing for that model and fold. To use seeds as
            folds, rename ``seed`` to ``fold`` and drop rows without a seed.
        tie_tolerance: ``|improvement|`` at or below this is a tie (finite,
            >= 0). It absorbs last-bit differences such as
            ``0.3 - (0.1 + 0.2) = -5.55e-17``.
        higher_is_better: None for the default rule (lower-is-better exactly
            for names in ``LOWER_IS_BETTER``), a bool for every metric, or a
            mapping overriding some metrics.

    Returns:
        :class:`PairedFoldDifferences`. Models are sorted by ``str``, pairs
        are ``(a, b)`` with ``a`` before ``b``; metrics are sorted; folds are
        sorted by value (by ``str`` when not comparable). A fold with a value
        missing on either side is ``unpaired`` for that metric; a metric one
        model never reports gives ``n_folds = 0`` with NaN statistics.

    Raises:
        ComparisonError: a missing column, an empty table, a non-numeric or
            infinite value, a repeated ``(model, fold, metric)``, fewer than
            two models, an incomplete design (a model absent on a fold where
            another is present; up to 10 pairs are named), or a bad
            ``tie_tolerance`` / ``higher_is_better``.
    """
    if (
        isinstance(tie_tolerance, bool)
        or not isinstance(tie_tolerance, numbers.Real)
        or not math.isfinite(float(tie_tolerance))
        or float(tie_tolerance) < 0
    ):
        raise ComparisonError(f"tie_tolerance must be a finite number >= 0, got {tie_tolerance!r}")
    tolerance = float(tie_tolerance)
    frame = _check_frame(fold_metrics)
    models, folds = _check_design(frame)
    metrics = sorted(frame["metric"].unique().tolist(), key=str)
    directions = _directions(metrics, higher_is_better)

    wide = frame.set_index(["metric", "fold", "model"])["value"].unstack("model")
    full_index = pd.MultiIndex.from_product([metrics, folds], names=["metric", "fold"])
    wide = wide.reindex(index=full_index, columns=models)

    summary_rows: list[dict[str, Any]] = []
    delta_blocks: list[pd.DataFrame] = []
    for i, model_a in enumerate(models):
        for model_b in models[i + 1 :]:
            for metric in metrics:
                block = wide.loc[metric]
                value_a = block[model_a].to_numpy(dtype=np.float64)
                value_b = block[model_b].to_numpy(dtype=np.float64)
                delta = (value_a - value_b) + 0.0
                higher = directions[metric]
                # Adding 0.0 turns a negative zero into 0.0, so a tie prints as 0.0.
                improvement = (delta if higher else -delta) + 0.0
                outcome = _outcomes(improvement, tolerance)
                summary_rows.append(
                    _summary_row(model_a, model_b, metric, higher, delta, improvement, outcome)
                )
                delta_blocks.append(
                    pd.DataFrame(
                        {
                            "model_a": [model_a] * len(folds),
                            "model_b": [model_b] * len(folds),
                            "metric": [metric] * len(folds),
                            "fold": pd.Series(folds, dtype=frame["fold"].dtype),
                            "value_a": value_a,
                            "value_b": value_b,
                            "delta": delta,
                            "improvement_for_a": improvement,
                            "outcome": outcome.astype(str),
                        }
                    )
                )
    summary = pd.DataFrame(summary_rows, columns=list(SUMMARY_COLUMNS))
    fold_deltas = pd.concat(delta_blocks, ignore_index=True).loc[:, list(FOLD_DELTA_COLUMNS)]
    design = {
        "design": "matched_folds",
        "delta": "model_a - model_b",
        "improvement_for_a": "delta if higher_is_better else -delta",
        "tie_tolerance": tolerance,
        "lower_is_better_metrics": sorted((m for m in metrics if not directions[m]), key=str),
        "models": [_plain(m) for m in models],
        "folds": [_plain(f) for f in folds],
        "inferential_p_values": False,
        "confidence_intervals": False,
        "folds_treated_as_independent_replicates": False,
    }
    return PairedFoldDifferences(summary=summary, fold_deltas=fold_deltas, design=design)
