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
from deepecgkit.analysis.constants import (
    CORRECTION_UNAVAILABLE,
    VERDICT_SUPPORTED,
    VERDICT_UNTESTABLE,
    VERDICTS,
)
from deepecgkit.analysis.ranking import (
    PAIRED_DIFFERENCE_COLUMNS,
    flip_tests_from_differences,
    rank_claim_from_differences,
)
from deepecgkit.io import json_ready

ANALYSIS_GROUP = "analysis"
_KINDS = {"pandas", "parquet"}
#: Rows listed in check metadata.
LISTED_ROWS = 20
#: The severity of every data-quality check (see :mod:`deepecg_assets.checks`).
WARN_SEVERITY = dg.AssetCheckSeverity.WARN

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


def no_untestable_flips(flip_grid: pd.DataFrame) -> dg.AssetCheckResult:
    untestable = (
        flip_grid.loc[flip_grid["verdict"] == VERDICT_UNTESTABLE] if len(flip_grid) else flip_grid
    )
    reasons = untestable["reason"].value_counts().head(LISTED_ROWS) if len(untestable) else {}
    return dg.AssetCheckResult(
        passed=len(untestable) == 0,
        severity=WARN_SEVERITY,
        description=f"{len(untestable)} of {len(flip_grid)} flip test(s) untestable",
        metadata={
            "untestable": len(untestable),
            "reasons": dg.MetadataValue.json({str(k): int(v) for k, v in dict(reasons).items()}),
        },
    )


def _flip_row_names(rows: pd.DataFrame) -> list[str]:
    """``A vs B on D1 -> D2`` for the first rows, as check metadata lists them."""
    return [
        f"{r.model_a} vs {r.model_b} on {r.dataset_1} -> {r.dataset_2}"
        for r in rows.head(LISTED_ROWS).itertuples(index=False)
    ]


def supported_flips_survive_fdr(flip_grid: pd.DataFrame) -> dg.AssetCheckResult:
    supported = (
        flip_grid.loc[flip_grid["verdict"] == VERDICT_SUPPORTED] if len(flip_grid) else flip_grid
    )
    surviving = int(supported["survives_fdr"].sum()) if len(supported) else 0
    nominal = (
        supported.loc[~supported["survives_fdr"].astype(bool)] if len(supported) else supported
    )
    method = str(flip_grid["fdr_method"].iloc[0]) if len(flip_grid) else ""
    return dg.AssetCheckResult(
        passed=len(nominal) == 0,
        severity=WARN_SEVERITY,
        description=(
            f"{surviving} of {len(supported)} supported reversal(s) survive the "
            f"{method.upper() or 'FDR'} adjustment of q_reversal"
        ),
        metadata={
            "supported": len(supported),
            "survives_fdr": surviving,
            "fdr_method": method,
            "nominal_only": dg.MetadataValue.json(_flip_row_names(nominal)),
        },
    )


def flips_nadeau_bengio_applied(flip_grid: pd.DataFrame) -> dg.AssetCheckResult:
    if len(flip_grid):
        applied = flip_grid[["correction_applied_1", "correction_applied_2"]]
        uncorrected = flip_grid.loc[(applied == CORRECTION_UNAVAILABLE).any(axis=1).to_numpy()]
    else:
        uncorrected = flip_grid
    notes = (
        pd.concat([uncorrected["correction_note_1"], uncorrected["correction_note_2"]])
        if len(uncorrected)
        else pd.Series(dtype=object)
    )
    reasons = notes[notes.astype(str) != ""].value_counts().head(LISTED_ROWS)
    return dg.AssetCheckResult(
        passed=len(uncorrected) == 0,
        severity=WARN_SEVERITY,
        description=(
            f"{len(uncorrected)} of {len(flip_grid)} flip test(s) fell back to the uncorrected "
            "standard error (split sizes unknown)"
        ),
        metadata={
            "unavailable": len(uncorrected),
            "rows": dg.MetadataValue.json(_flip_row_names(uncorrected)),
            "reasons": dg.MetadataValue.json({str(k): int(v) for k, v in reasons.items()}),
        },
    )


#: The checks of ``flip_grid``: (name, what a failure means, evaluator). ``flip_grid``
#: evaluates them on the grid it has just computed: as a check step of their own they read
#: the 232,750 rows of 100,000 runs back (0.4 s of a one-run refresh) and cost Dagster's fixed
#: price of a step.
FLIP_GRID_CHECKS = (
    (
        "no_untestable_flips",
        "Every flip test could be computed. A failure means some rows of the flip table say "
        "untestable (too few seeds or test groups): that model pair makes no claim there.",
        no_untestable_flips,
    ),
    (
        "supported_flips_survive_fdr",
        "Every nominally supported reversal survives the false-discovery-rate adjustment. A "
        "failure means the flip table holds supported rows that are not significant after "
        "FDR: do not claim them as reversals (see nominal_only).",
        supported_flips_survive_fdr,
    ),
    (
        "flips_nadeau_bengio_applied",
        "Every flip test got the Nadeau-Bengio correction it asked for. A failure means some "
        "flip rows used the uncorrected standard error (split sizes unknown), which is too "
        "narrow for overlapping training sets: their p-values are optimistic.",
        flips_nadeau_bengio_applied,
    ),
)


@dg.asset(
    group_name=ANALYSIS_GROUP,
    automation_condition=EAGER,
    kinds=_KINDS,
    check_specs=[
        dg.AssetCheckSpec(name, asset="flip_grid", description=description)
        for name, description, _ in FLIP_GRID_CHECKS
    ],
)
def flip_grid(
    paired_differences: dict[str, pd.DataFrame],
    analysis: AnalysisSettings,
):
    """Every cross-dataset flip test, with its directional p-value and FDR-adjusted q-value.

    One row per (model pair, dataset pair): does A beat B on one dataset and B
    beat A on the other, beyond seed variance? Combined from every dataset's
    paired differences. Look at: the verdict counts in the metadata, the
    rows with survives_fdr (the reversals a paper may claim), and the checks of
    :data:`FLIP_GRID_CHECKS`, evaluated on this grid with every materialisation
    (an asset's own checks cannot be run without it).
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
    results = [evaluate(flips)._replace(check_name=name) for name, _, evaluate in FLIP_GRID_CHECKS]
    yield dg.Output(flips, metadata=metadata)
    yield from results


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
