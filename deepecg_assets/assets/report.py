"""The statistical report asset: group-bootstrap comparisons from stored predictions."""

import dagster as dg
import pandas as pd
from pydantic import Field

from deepecg_assets.assets.analysis import restricted
from deepecg_assets.io_managers import markdown_preview
from deepecg_assets.resources import (
    AnalysisSettings,
    OutputFolderResource,
    RunRootError,
    RunRootsResource,
)
from deepecg_assets.sensors import EAGER
from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.analysis.constants import DEFAULT_BOOTSTRAP_SEED, DEFAULT_N_RESAMPLES, REPORT_BINS
from deepecgkit.statistical_report import statistical_report as build_report
from deepecgkit.statistical_report.report import MAX_REPORT_BINS

REPORT_GROUP = "report"
#: Folder of the report under the output folder.
REPORT_FOLDER = "report"


class ReportConfig(dg.Config):
    """Settings of ``deepecg report``, editable in the launchpad."""

    reference: str | None = Field(
        default=None, description="model every other model is compared with (None: no pairs)"
    )
    bins: int = Field(
        default=REPORT_BINS, ge=1, le=MAX_REPORT_BINS, description="equal-width reliability bins"
    )
    n_resamples: int = Field(default=DEFAULT_N_RESAMPLES, ge=1, description="bootstrap resamples")
    seed: int = Field(default=DEFAULT_BOOTSTRAP_SEED, ge=0, description="bootstrap seed")
    allow_partial: bool = Field(default=False, description="admit partial runs (exploratory)")
    plots: bool = Field(default=True, description="draw reliability diagrams (PNG and PDF)")


@dg.asset(
    group_name=REPORT_GROUP,
    automation_condition=EAGER,
    kinds={"python", "csv", "pdf"},
)
def statistical_report(
    config: ReportConfig,
    discovered_runs: pd.DataFrame,
    run_roots: RunRootsResource,
    output_folder: OutputFolderResource,
    analysis: AnalysisSettings,
) -> dg.MaterializeResult:
    """The group-bootstrap report of the discovered runs that kept predictions, with exclusions.

    Reports exactly the runs of ``discovered_runs`` (its roots, depth,
    duplicate, legacy and failed-run settings) restricted to the ``analysis``
    models and datasets; the roots only name the runs.
    """
    analysis.checked()
    try:
        roots = run_roots.checked_roots()
    except RunRootError as exc:
        raise dg.Failure(description=str(exc)) from None
    runs = restricted(discovered_runs, analysis)
    out_dir = output_folder.root() / REPORT_FOLDER
    try:
        result = build_report(
            roots,
            out_dir,
            run_dirs=list(runs["run_dir"]) if len(runs) else [],
            bins=config.bins,
            n_resamples=config.n_resamples,
            confidence_level=analysis.confidence_level,
            reference=config.reference,
            allow_partial=config.allow_partial,
            plots=config.plots,
            overwrite=True,
            seed=config.seed,
        )
    except ComparisonError as exc:
        raise dg.Failure(description=f"statistical report not built: {exc}") from None
    exclusions = result.exclusions
    reasons = exclusions["reason"].value_counts() if len(exclusions) else pd.Series(dtype=int)
    included = len(result.manifest.get("included_runs", []))
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(out_dir)),
            "included_runs": included,
            "excluded": len(exclusions),
            "exclusion_reasons": dg.MetadataValue.json(
                {str(k): int(v) for k, v in reasons.items()}
            ),
            "exclusions": dg.MetadataValue.md(markdown_preview(exclusions)),
            "paired_comparison_rows": len(result.paired_comparisons),
            "figures": len(result.figures),
            "run_summary": dg.MetadataValue.md(markdown_preview(result.run_summary)),
        }
    )
