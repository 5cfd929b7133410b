"""Analysis assets: per-seed aggregates, rank distributions, Kendall tau, flips, claims."""

import json
from typing import Any

import dagster as dg
import pandas as pd

from deepecg_assets.resources import AnalysisSettings
from deepecg_assets.sensors import EAGER
from deepecgkit.analysis.aggregation import aggregate_runs
from deepecgkit.analysis.constants import VERDICTS
from deepecgkit.analysis.ranking import (
    all_flip_tests,
    evaluate_rank_claim,
    rank_distribution as rank_distribution_frame,
    tau_summary as tau_summary_frame,
)
from deepecgkit.io import json_ready

ANALYSIS_GROUP = "analysis"
_KINDS = {"pandas", "csv"}

#: Columns of the ``rank_claims`` frame (``components`` holds the flip rows as JSON).
CLAIM_COLUMNS = [
    "model",
    "dataset_best",
    "dataset_worst",
    "metric",
    "verdict",
    "p_claim",
    "p_claim_directional",
    "n_components",
    "n_supported",
    "n_supported_in_direction",
    "n_untestable",
    "components",
]


def restricted(frame: pd.DataFrame, analysis: AnalysisSettings) -> pd.DataFrame:
    """The rows of the configured models and datasets (all rows when unrestricted)."""
    if analysis.models and len(frame):
        frame = frame.loc[frame["model"].isin(analysis.models)]
    if analysis.datasets and len(frame):
        frame = frame.loc[frame["dataset"].isin(analysis.datasets)]
    return frame


@dg.asset(group_name=ANALYSIS_GROUP, automation_condition=EAGER, kinds=_KINDS)
def aggregates(reconciled_runs: pd.DataFrame, analysis: AnalysisSettings) -> pd.DataFrame:
    """Per dataset, model and metric: mean, SD and Student-t interval across seeds.

    What the results tables print. Look at: n (seeds per cell) and the
    interval widths; a cell of few seeds has a wide interval, not a wrong one.
    """
    analysis.checked()
    return aggregate_runs(reconciled_runs, analysis.confidence_level)


@dg.asset(group_name=ANALYSIS_GROUP, automation_condition=EAGER, kinds=_KINDS)
def rank_distribution(reconciled_runs: pd.DataFrame, analysis: AnalysisSettings) -> pd.DataFrame:
    """Per dataset and model: how often each rank was attained over the seeds.

    Look at: mode_fraction and top1_fraction; a model that is "best" on only
    half its seeds does not hold rank 1.
    """
    analysis.check_selection(reconciled_runs)
    return rank_distribution_frame(restricted(reconciled_runs, analysis), analysis.metric)


@dg.asset(group_name=ANALYSIS_GROUP, automation_condition=EAGER, kinds=_KINDS)
def tau_summary(reconciled_runs: pd.DataFrame, analysis: AnalysisSettings) -> pd.DataFrame:
    """Per dataset: Kendall tau-b between seed rankings (jackknife interval) and Kendall's W.

    How stable the ranking is across seeds. Look at: tau_mean with its
    interval and p_kendall_w; a low tau means the seeds disagree on the order.
    """
    analysis.check_selection(reconciled_runs)
    return tau_summary_frame(
        restricted(reconciled_runs, analysis),
        analysis.metric,
        confidence_level=analysis.confidence_level,
    )


@dg.asset(group_name=ANALYSIS_GROUP, automation_condition=EAGER, kinds=_KINDS)
def flip_grid(reconciled_runs: pd.DataFrame, analysis: AnalysisSettings) -> dg.Output:
    """Every cross-dataset flip test, with its directional p-value and FDR-adjusted q-value.

    One row per (model pair, dataset pair): does A beat B on one dataset and B
    beat A on the other, beyond seed variance? Look at: the verdict counts in
    the metadata, and the rows with survives_fdr (the reversals a paper may claim).
    """
    analysis.check_selection(reconciled_runs)
    flips = all_flip_tests(
        reconciled_runs,
        metric=analysis.metric,
        confidence_level=analysis.confidence_level,
        correction=analysis.correction,
        models=analysis.models,
        datasets=analysis.datasets,
        min_test_groups=analysis.min_test_groups,
        fdr_family=analysis.fdr_family,
        fdr_method=analysis.fdr_method,
        strict_correction=analysis.strict_correction,
    )
    counts = flips["verdict"].value_counts() if len(flips) else pd.Series(dtype=int)
    metadata: dict[str, Any] = {f"verdict_{v}": int(counts.get(v, 0)) for v in VERDICTS}
    metadata["fdr_family"] = analysis.fdr_family
    metadata["fdr_family_size"] = int(flips["fdr_family_size"].iloc[0]) if len(flips) else 0
    metadata["fdr_method"] = analysis.fdr_method
    metadata["survives_fdr"] = int(flips["survives_fdr"].sum()) if len(flips) else 0
    return dg.Output(flips, metadata=metadata)


@dg.asset(group_name=ANALYSIS_GROUP, automation_condition=EAGER, kinds=_KINDS)
def rank_claims(reconciled_runs: pd.DataFrame, analysis: AnalysisSettings) -> pd.DataFrame:
    """Verdicts for the configured "best on one dataset, worst on another" claims.

    Empty unless ``analysis.claims`` names some. Look at: verdict and
    p_claim_directional of each claim.
    """
    analysis.check_selection(reconciled_runs)
    rows = []
    for claim in analysis.claims:
        result = evaluate_rank_claim(
            reconciled_runs,
            claim.model,
            claim.dataset_best,
            claim.dataset_worst,
            metric=analysis.metric,
            opponents=claim.opponents,
            confidence_level=analysis.confidence_level,
            correction=analysis.correction,
            min_test_groups=analysis.min_test_groups,
            strict_correction=analysis.strict_correction,
        )
        result["components"] = json.dumps(json_ready(result["components"]))
        rows.append({column: result[column] for column in CLAIM_COLUMNS})
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)
