"""The statistical report asset: group-bootstrap comparisons from stored predictions.

The report is given the records of ``discovered_runs`` (the roots are not
searched again, and a run's metrics file is not parsed again while it keeps
the mtime discovery read) and writes into the same folder on every refresh, so the
rows and figures of unchanged runs and pairs are reused
(:mod:`deepecgkit.statistical_report.reuse`); the metadata says how many.
"""

from pathlib import Path

import dagster as dg
import pandas as pd
from pydantic import Field

from deepecg_assets.assets.analysis import restricted
from deepecg_assets.metadata_images import figure_metadata
from deepecg_assets.parquet_frames import COLUMNS_METADATA, markdown_preview
from deepecg_assets.resources import AnalysisSettings, OutputFolderResource
from deepecg_assets.sensors import EAGER
from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.analysis.constants import DEFAULT_BOOTSTRAP_SEED, DEFAULT_N_RESAMPLES, REPORT_BINS
from deepecgkit.statistical_report import statistical_report as build_report
from deepecgkit.statistical_report.frame_recall import RUN_COLUMNS_READ, run_columns
from deepecgkit.statistical_report.report import MAX_REPORT_BINS

REPORT_GROUP = "report"
#: Dagster's step priority tag: of the steps ready to run, a run's executor starts the
#: highest first (default 0).
PRIORITY_TAG = "dagster/priority"
#: The report's priority: below every other step, so a refresh brings the paper's tables
#: (flip, rank, tau, results) up to date before the report, which reads only discovery's
#: frame and at 100,000 runs takes 5.5 s of a 19 s refresh (docs/benchmarks.md,
#: session 23). The run's work is the same; the tables are current that much sooner.
AFTER_THE_TABLES = "-1"
#: Folder of the report under the output folder.
REPORT_FOLDER = "report"
RELIABILITY_TITLE = "reliability diagram"
_SHOWN_FORMAT = "png"


def _shown_figure(manifest: dict, out_dir: Path, *, plots: bool) -> dict[str, dg.MetadataValue]:
    """The ``figure`` metadata: the reliability diagram of the first run (by run id) with one.

    One picture keeps the event small; the manifest lists every figure.
    """
    entries = sorted(
        (entry["run_id"], entry["path"])
        for entry in manifest.get("figures", [])
        if entry["format"] == _SHOWN_FORMAT
    )
    if not entries:
        reason = "no run was included" if plots else "plots are off (plots=False)"
        return figure_metadata(None, alt=RELIABILITY_TITLE, reason=reason)
    run_id, relative = entries[0]
    return figure_metadata(out_dir / relative, alt=f"{RELIABILITY_TITLE} of {run_id}")


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
    plots: bool = Field(default=True, description="draw reliability diagrams (PNG)")
    pdf: bool = Field(default=False, description="also write each diagram as a vector PDF")


@dg.asset(
    group_name=REPORT_GROUP,
    automation_condition=EAGER,
    kinds={"python", "csv", "png"},
    op_tags={PRIORITY_TAG: AFTER_THE_TABLES},
    # Of discovery's frame only what the report reads: at 100,000 runs the metrics texts
    # alone are 80 of its 98 MB.
    ins={"discovered_runs": dg.AssetIn(metadata={COLUMNS_METADATA: list(RUN_COLUMNS_READ)})},
)
def statistical_report(
    config: ReportConfig,
    discovered_runs: pd.DataFrame,
    output_folder: OutputFolderResource,
    analysis: AnalysisSettings,
) -> dg.MaterializeResult:
    """The group-bootstrap report of the discovered runs that kept predictions, with exclusions.

    Reports exactly the runs of ``discovered_runs`` (its roots, depth,
    duplicate, legacy and failed-run settings) restricted to the ``analysis``
    models and datasets, written to ``<output>/report`` (CSV tables,
    ``figures/``, ``manifest.json``). Runs are named by their path relative
    to the common folder of the reported run directories. Look at:
    included_runs and exclusion_reasons (runs the report could not use, and
    why), run_summary (per-run intervals, ECE among them), and
    reused_runs / computed_runs, reused_pairs / computed_pairs (how much of
    the report was recomputed).
    """
    analysis.checked()
    runs = restricted(discovered_runs, analysis)
    out_dir = output_folder.root() / REPORT_FOLDER
    try:
        result = build_report(
            None,
            out_dir,
            records=run_columns(runs),
            bins=config.bins,
            n_resamples=config.n_resamples,
            confidence_level=analysis.confidence_level,
            reference=config.reference,
            allow_partial=config.allow_partial,
            plots=config.plots,
            pdf=config.pdf,
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
            "reused_runs": result.reused_runs,
            "computed_runs": result.computed_runs,
            "reused_pairs": result.reused_pairs,
            "computed_pairs": result.computed_pairs,
            "figures": len(result.figures),
            "run_summary": dg.MetadataValue.md(markdown_preview(result.run_summary)),
            **_shown_figure(result.manifest, out_dir, plots=config.plots),
        }
    )
