"""Per-dataset assets: everything that depends on one dataset's runs only, partitioned by dataset.

One step computes a dataset's frames, in the order the analysis needs them:
its long metrics frame (``run_metrics``), the averaging reconciliation
(``reconciled_runs``, ``averaging_conflicts``), the per-seed ``aggregates``,
the ``rank_distribution``, the ``tau_summary``, and the seed-paired
``paired_differences`` of every model pair (everything a flip row needs:
mean, standard error, n, wins, averaging, correction, bimodal flag). Each is
its own asset with one stored frame per dataset; they are computed in one
step because a Dagster step costs a fixed tenth of a second or more, which at
seven assets per dataset would dwarf the work of a small dataset.

None of these assets has an automation condition: ``discovered_runs`` is
shared by every dataset, so an eager condition would recompute every
partition whenever one dataset changed. The run sensor
(:mod:`deepecg_assets.sensors`) requests exactly the partitions whose runs
changed; the cross-dataset assets downstream are eager.
"""

import warnings
from collections.abc import Mapping, Sequence

import dagster as dg
import pandas as pd

from deepecg_assets.assets.analysis import ANALYSIS_GROUP, LISTED_ROWS, WARN_SEVERITY, restricted
from deepecg_assets.assets.discovery import DISCOVERY_GROUP
from deepecg_assets.parquet_frames import STORED_METADATA, StoredFrame
from deepecg_assets.partitions import DATASETS, SINGLE_RUN, dataset_key, frames_by_key, joined
from deepecg_assets.resources import AnalysisSettings
from deepecgkit.analysis.aggregation import aggregate_runs, reconcile_averaging
from deepecgkit.analysis.ranking import (
    distribution_of_ranks,
    paired_differences,
    rank_within_seed,
    tau_of_ranks,
)
from deepecgkit.analysis.statistics import collapse_gap_floor, is_bimodal
from deepecgkit.rundir.format import SPLIT_SIZE_KEYS
from deepecgkit.rundir.records import record_frame_to_runs

_KINDS = {"pandas", "parquet"}
#: The per-dataset checks (:data:`DATASET_CHECKS`).
AVERAGING_CHECK = "no_dropped_averaging_minorities"
BIMODAL_CHECK = "no_bimodal_cells"
#: The columns of ``discovered_runs`` a dataset's frames are computed from: those
#: :func:`~deepecgkit.rundir.records.record_frame_to_runs` reads.
RECORD_COLUMNS_READ = (
    "run_dir",
    "model",
    "dataset",
    "seed",
    "multi_label",
    "averaging",
    "metrics",
    *SPLIT_SIZE_KEYS,
)

#: The per-dataset assets, in the order they are computed, with what each holds.
DATASET_ASSETS: dict[str, tuple[str, str]] = {
    "run_metrics": (
        DISCOVERY_GROUP,
        "The long frame every statistic reads: one row per run and metric, of one dataset. "
        "Look at: the row count (runs x metrics) and the preview, to see which metrics the "
        "runs report before choosing analysis.metric.",
    ),
    "reconciled_runs": (
        DISCOVERY_GROUP,
        "The long frame after dropping minority averaging modes: what every aggregate, rank "
        "and flip test is computed from. Look at: runs (how many went into the statistics).",
    ),
    "averaging_conflicts": (
        DISCOVERY_GROUP,
        "What reconciliation dropped: one row per (dataset, model) cell whose runs mixed "
        "averaging modes (macro vs weighted ...), with the kept mode and the runs dropped. "
        "Look at: dropped_runs; empty is the healthy state.",
    ),
    "aggregates": (
        ANALYSIS_GROUP,
        "Per model and metric: mean, SD and Student-t interval across seeds (what the results "
        "table prints). Look at: n (seeds per cell) and the interval widths; a cell of few "
        "seeds has a wide interval, not a wrong one.",
    ),
    "rank_distribution": (
        ANALYSIS_GROUP,
        "Per model: how often each rank was attained over the seeds. Look at: mode_fraction "
        "and top1_fraction; a model that is best on only half its seeds does not hold rank 1.",
    ),
    "tau_summary": (
        ANALYSIS_GROUP,
        "Kendall tau-b between seed rankings (jackknife interval) and Kendall's W: how stable "
        "the ranking is across seeds. Look at: tau_mean with its interval and p_kendall_w.",
    ),
    "paired_differences": (
        ANALYSIS_GROUP,
        "Seed-paired difference of every model pair (mean, interval, p-value with the "
        "correction applied, wins, n, averaging, bimodal flag): the components of every flip "
        "test and rank claim, combined across datasets by flip_grid. Look at: reason (why a "
        "pair is untestable) and correction_applied.",
    ),
}


def dataset_frames(
    records: pd.DataFrame,
    analysis: AnalysisSettings,
    *,
    log: dg.DagsterLogManager | None = None,
) -> dict[str, pd.DataFrame]:
    """Every per-dataset frame of one dataset's rows of ``discovered_runs``, by asset name."""
    runs = record_frame_to_runs(records)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept, conflicts = reconcile_averaging(runs)
    for warning in caught:
        if log is not None:
            log.warning(str(warning.message))
    # Ranked once for both the rank distribution and the tau summary.
    ranks = rank_within_seed(restricted(kept, analysis), analysis.metric)
    return {
        "run_metrics": runs,
        "reconciled_runs": kept,
        "averaging_conflicts": conflicts,
        "aggregates": aggregate_runs(kept, analysis.confidence_level),
        "rank_distribution": distribution_of_ranks(ranks),
        "tau_summary": tau_of_ranks(ranks, confidence_level=analysis.confidence_level),
        "paired_differences": paired_differences(
            kept,
            analysis.metric,
            confidence_level=analysis.confidence_level,
            correction=analysis.correction,
            models=analysis.models,
            datasets=analysis.datasets,
            min_test_groups=analysis.min_test_groups,
            strict_correction=analysis.strict_correction,
        ),
    }


def _summary(name: str, frames: Mapping[str, pd.DataFrame]) -> dict[str, object]:
    """Metadata a person can act on, summed over the step's datasets."""
    if name == "reconciled_runs":
        return {"runs": sum(int(f["run_dir"].nunique()) for f in frames.values() if len(f))}
    if name == "averaging_conflicts":
        return {
            "conflicts": sum(len(f) for f in frames.values()),
            "dropped_runs": sum(int(f["dropped_runs"].sum()) for f in frames.values() if len(f)),
        }
    return {}


def averaging_minorities_check(conflicts: Mapping[str, pd.DataFrame]) -> dg.AssetCheckResult:
    """``no_dropped_averaging_minorities`` of the step's datasets' ``averaging_conflicts``."""
    averaging_conflicts = joined(dict(conflicts))
    dropped = int(averaging_conflicts["dropped_runs"].sum()) if len(averaging_conflicts) else 0
    return dg.AssetCheckResult(
        asset_key="averaging_conflicts",
        check_name=AVERAGING_CHECK,
        passed=dropped == 0,
        severity=WARN_SEVERITY,
        description=f"{dropped} run(s) dropped from {len(averaging_conflicts)} cell(s)",
        metadata={
            "dropped_runs": dropped,
            "cells": dg.MetadataValue.json(
                averaging_conflicts.head(LISTED_ROWS).to_dict("records")
            ),
        },
    )


def bimodal_cells(runs: pd.DataFrame, metric: str) -> list[dict[str, str]]:
    """(dataset, model) cells whose per-seed scores of ``metric`` converge or collapse.

    Per-seed values are the ranking's: finite values of seeded runs, duplicates averaged.
    The rule is the flip grid's, with the metric's floor.
    """
    per_seed = rank_within_seed(runs, metric)
    floor = collapse_gap_floor(metric)
    cells = []
    for (dataset, model), block in per_seed.groupby(["dataset", "model"], sort=True):
        flagged, reason = is_bimodal(block["value"], min_gap=floor)
        if flagged:
            cells.append({"dataset": str(dataset), "model": str(model), "reason": reason})
    return cells


def bimodal_cells_check(
    reconciled_runs: Mapping[str, pd.DataFrame], metric: str
) -> dg.AssetCheckResult:
    """``no_bimodal_cells`` of the step's datasets' ``reconciled_runs``, on ``aggregates``.

    A cell lies in one dataset, so the cells are those of each dataset, sorted.
    """
    cells = sorted(
        (cell for frame in reconciled_runs.values() for cell in bimodal_cells(frame, metric)),
        key=lambda cell: (cell["dataset"], cell["model"]),
    )
    return dg.AssetCheckResult(
        asset_key="aggregates",
        check_name=BIMODAL_CHECK,
        passed=not cells,
        severity=WARN_SEVERITY,
        description=f"{len(cells)} bimodal cell(s) in {metric}",
        metadata={"metric": metric, "cells": dg.MetadataValue.json(cells[:LISTED_ROWS])},
    )


#: The checks of the per-dataset assets, evaluated by the step that computes them on the
#: frames it holds, for the step's datasets (partitioned like the assets): as check steps of
#: their own they read each dataset's long frame back, 0.6-0.9 s per range of 50,000 runs.
DATASET_CHECKS = [
    dg.AssetCheckSpec(
        AVERAGING_CHECK,
        asset="averaging_conflicts",
        partitions_def=DATASETS,
        description=(
            "No run was dropped for its averaging mode. A failure means some runs of a "
            "(dataset, model) cell were averaged differently (macro vs weighted ...) and the "
            "minority was left out of every table: the cell rests on fewer seeds than were run."
        ),
    ),
    dg.AssetCheckSpec(
        BIMODAL_CHECK,
        asset="aggregates",
        partitions_def=DATASETS,
        description=(
            "No (dataset, model) cell converges on some seeds and collapses on others. A "
            "failure means a mean and interval in the results table average two regimes; the "
            "flip table marks such rows bimodal instead of ranking them. Report the collapse "
            "rate."
        ),
    ),
]


def records_of(discovered_runs: StoredFrame, keys: Sequence[str]) -> dict[str, pd.DataFrame]:
    """``{key: that dataset's rows of discovered_runs}`` for the partitions ``keys``.

    Only the rows of these datasets and the :data:`RECORD_COLUMNS_READ` are
    read: at 100,000 runs, one dataset's rows are 5% of the frame, and the
    columns left out (times, notes, fingerprints) are discovery's. Rows keep
    their stored order; a key without runs gets an empty frame.
    """
    wanted = set(keys)
    rows = discovered_runs.read(
        columns=RECORD_COLUMNS_READ,
        where=("dataset", lambda name: dataset_key(str(name)) in wanted),
    )
    return frames_by_key(rows, keys)


@dg.multi_asset(
    outs={
        name: dg.AssetOut(group_name=group, description=description, kinds=_KINDS)
        for name, (group, description) in DATASET_ASSETS.items()
    },
    ins={"discovered_runs": dg.AssetIn(metadata={STORED_METADATA: True})},
    partitions_def=DATASETS,
    backfill_policy=SINGLE_RUN,
    check_specs=DATASET_CHECKS,
)
def dataset_analysis(
    context: dg.AssetExecutionContext, discovered_runs: StoredFrame, analysis: AnalysisSettings
):
    """The frames of each dataset of this step (one partition, or all in a single-run backfill),
    and the checks of :data:`DATASET_CHECKS` on them."""
    analysis.checked()
    keys = list(context.partition_keys)
    records = records_of(discovered_runs, keys)
    by_asset: dict[str, dict[str, pd.DataFrame]] = {name: {} for name in DATASET_ASSETS}
    for key in keys:
        for name, frame in dataset_frames(records[key], analysis, log=context.log).items():
            by_asset[name][key] = frame
    checks = [
        averaging_minorities_check(by_asset["averaging_conflicts"]),
        bimodal_cells_check(by_asset["reconciled_runs"], analysis.metric),
    ]
    for name, frames in by_asset.items():
        yield dg.Output(frames, output_name=name, metadata=_summary(name, frames))
    yield from checks
