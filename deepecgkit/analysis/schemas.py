"""Column lists of every frame the analysis produces, defined once.

The library functions build their frames with these columns, in this order;
the LaTeX emitters check their input against them, and the command line and
the Dagster platform store frames with them. The long runs frame the
analysis starts from is the run-directory package's
(:data:`deepecgkit.rundir.records.RUN_FRAME_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

__all__ = [
    "AGGREGATE_COLUMNS",
    "CONFLICT_COLUMNS",
    "DISTRIBUTION_HEAD",
    "DISTRIBUTION_TAIL",
    "FLIP_COLUMNS",
    "RANK_COLUMNS",
    "SLICE_COLUMNS",
    "TAU_COLUMNS",
    "empty_frame",
]

#: Columns of the conflict frame of
#: :func:`~deepecgkit.analysis.aggregation.reconcile_averaging`.
CONFLICT_COLUMNS = ("dataset", "model", "kept_averaging", "dropped_runs")

#: Columns of :func:`~deepecgkit.analysis.aggregation.aggregate_runs`.
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

#: Columns a metric slice of the long runs frame needs.
SLICE_COLUMNS = ("dataset", "model", "seed", "metric", "value")
#: Columns of :func:`~deepecgkit.analysis.ranking.rank_within_seed`, in order.
RANK_COLUMNS = ("dataset", "seed", "model", "value", "rank", "rank_average")
#: Columns of :func:`~deepecgkit.analysis.ranking.tau_summary`, in order.
TAU_COLUMNS = (
    "dataset",
    "n_models",
    "n_seeds",
    "n_pairs",
    "tau_mean",
    "tau_min",
    "tau_max",
    "min_attainable_p",
    "tau_se",
    "tau_lower",
    "tau_upper",
    "kendall_w",
    "p_kendall_w",
    "n_permutations",
)
#: Columns of :func:`~deepecgkit.analysis.ranking.rank_distribution` before and after its
#: ``rank_<r>`` count columns.
DISTRIBUTION_HEAD = ("dataset", "model", "n_seeds", "n_models")
DISTRIBUTION_TAIL = ("mode_rank", "mode_fraction", "top1_fraction", "mean_value", "std_value")

#: Columns of :func:`~deepecgkit.analysis.ranking.all_flip_tests`, in order.
FLIP_COLUMNS = (
    "model_a",
    "model_b",
    "dataset_1",
    "dataset_2",
    "metric",
    "mean_1",
    "mean_2",
    "lower_1",
    "upper_1",
    "lower_2",
    "upper_2",
    "wins_1",
    "wins_2",
    "n_1",
    "n_2",
    "n_seeds",
    "averaging_1",
    "averaging_2",
    "comparable_magnitudes",
    "verdict",
    "p_flip",
    "reason",
    "p_adjusted",
    "fdr_family",
    "fdr_family_size",
    "p_reversal",
    "q_reversal",
    "fdr_method",
    "survives_fdr",
    "correction_applied_1",
    "correction_applied_2",
    "correction_note_1",
    "correction_note_2",
)


def empty_frame(columns: Sequence[str]) -> pd.DataFrame:
    """A frame with exactly ``columns`` and no rows (object dtype)."""
    return pd.DataFrame({column: pd.Series(dtype=object) for column in columns})
