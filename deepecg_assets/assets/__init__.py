"""Every asset of the platform, grouped by what it holds."""

from deepecg_assets.assets.analysis import (
    aggregates,
    flip_grid,
    rank_claims,
    rank_distribution,
    tau_summary,
)
from deepecg_assets.assets.discovery import discovered_runs, reconcile, run_metrics
from deepecg_assets.assets.report import statistical_report
from deepecg_assets.assets.tables import flip_table, rank_table, results_tables, tau_table
from deepecg_assets.assets.transfer import transfer_matrix, transfer_table

ALL_ASSETS = [
    discovered_runs,
    run_metrics,
    reconcile,
    aggregates,
    rank_distribution,
    tau_summary,
    flip_grid,
    rank_claims,
    results_tables,
    rank_table,
    tau_table,
    flip_table,
    statistical_report,
    transfer_matrix,
    transfer_table,
]

__all__ = ["ALL_ASSETS"]
