"""Cross-dataset analysis assets: the flip grid and the rank claims.

Both are combines of the per-dataset ``paired_differences``
(:mod:`deepecg_assets.assets.datasets`): they never read a run, so one new
run recomputes one dataset's differences and then these cheap combines.
"""

import json
from typing import Any

import dagster as dg
import pandas as pd

from deepecg_assets.parquet_frames import STORED_METADATA, StoredFrame
from deepecg_assets.partitions import joined
from deepecg_assets.resources import AnalysisSettings
from deepecg_assets.sensors import EAGER
from deepecgkit.analysis.constants import VERDICTS
from deepecgkit.analysis.ranking import (
    PAIRED_DIFFERENCE_COLUMNS,
    flip_tests_from_differences,
    rank_claim_from_differences,
)
from deepecgkit.io import json_ready

ANALYSIS_GROUP = "analysis"
_KINDS = {"pandas", "parquet"}

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
def flip_grid(paired_differences: dict[str, pd.DataFrame], analysis: AnalysisSettings) -> dg.Output:
    """Every cross-dataset flip test, with its directional p-value and FDR-adjusted q-value.

    One row per (model pair, dataset pair): does A beat B on one dataset and B
    beat A on the other, beyond seed variance? Combined from every dataset's
    paired differences. Look at: the verdict counts in the metadata, and the
    rows with survives_fdr (the reversals a paper may claim).
    """
    analysis.checked()
    flips = flip_tests_from_differences(
        joined(paired_differences, columns=PAIRED_DIFFERENCE_COLUMNS),
        confidence_level=analysis.confidence_level,
        fdr_family=analysis.fdr_family,
        fdr_method=analysis.fdr_method,
    )
    counts = flips["verdict"].value_counts() if len(flips) else pd.Series(dtype=int)
    metadata: dict[str, Any] = {f"verdict_{v}": int(counts.get(v, 0)) for v in VERDICTS}
    metadata["fdr_family"] = analysis.fdr_family
    metadata["fdr_family_size"] = int(flips["fdr_family_size"].iloc[0]) if len(flips) else 0
    metadata["fdr_method"] = analysis.fdr_method
    metadata["survives_fdr"] = int(flips["survives_fdr"].sum()) if len(flips) else 0
    return dg.Output(flips, metadata=metadata)


_STORED = dg.AssetIn(metadata={STORED_METADATA: True})


@dg.asset(
    group_name=ANALYSIS_GROUP,
    automation_condition=EAGER,
    kinds=_KINDS,
    ins={"paired_differences": _STORED, "aggregates": _STORED},
)
def rank_claims(
    paired_differences: dict[str, StoredFrame],
    aggregates: dict[str, StoredFrame],
    analysis: AnalysisSettings,
) -> pd.DataFrame:
    """Verdicts for the configured "best on one dataset, worst on another" claims.

    Computed from the claimed datasets' paired differences (the models each
    dataset holds come from its aggregates). Empty unless ``analysis.claims``
    names some; then no stored frame is read. Look at: verdict and
    p_claim_directional of each claim.
    """
    analysis.checked()
    if not analysis.claims:
        return pd.DataFrame([], columns=CLAIM_COLUMNS)
    differences = joined(
        {key: stored.read() for key, stored in paired_differences.items()},
        columns=PAIRED_DIFFERENCE_COLUMNS,
    )
    dataset_models = {}
    for stored in aggregates.values():
        frame = stored.read(columns=["dataset", "model"])
        if len(frame):
            dataset_models[str(frame["dataset"].iloc[0])] = set(frame["model"].astype(str))
    rows = []
    for claim in analysis.claims:
        result = rank_claim_from_differences(
            differences,
            claim.model,
            dataset_best=claim.dataset_best,
            dataset_worst=claim.dataset_worst,
            metric=analysis.metric,
            opponents=claim.opponents,
            correction=analysis.correction,
            strict_correction=analysis.strict_correction,
            dataset_models=dataset_models,
        )
        result["components"] = json.dumps(json_ready(result["components"]))
        rows.append({column: result[column] for column in CLAIM_COLUMNS})
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)
