"""Discovery assets: which runs exist, their long metrics frame, averaging reconciliation."""

import warnings
from typing import Any

import dagster as dg
import pandas as pd

from deepecg_assets.resources import (
    AnalysisSettings,
    OutputFolderResource,
    RunRootError,
    RunRootsResource,
)
from deepecg_assets.sensors import EAGER
from deepecgkit._compat import moved_names
from deepecgkit.analysis.aggregation import reconcile_averaging
from deepecgkit.rundir.cache import RunCache
from deepecgkit.rundir.read import discover_runs
from deepecgkit.rundir.records import (
    DIAGNOSTIC_KEYS,
    frame_to_records,
    records_to_frame,
    runs_to_frame,
)

DISCOVERY_GROUP = "discovery"

#: Names that moved (old import paths, one release): the record codec lives with the
#: records, the automation condition with the automation sensor.
__moved__ = {
    "records_to_frame": "deepecgkit.rundir.records",
    "frame_to_records": "deepecgkit.rundir.records",
    "RECORD_COLUMNS": "deepecgkit.rundir.records",
}
__getattr__ = moved_names(__name__, __moved__)

#: Check attached to ``discovered_runs``: every run directory could be read, succeeded, and
#: had nothing set aside.
RUNS_HEALTH_CHECK = "no_unreadable_or_failed_runs"
#: Entries listed per diagnostics key in check metadata.
LISTED_ENTRIES = 20


def runs_health_check(diagnostics: dict[str, list[str]]) -> dg.AssetCheckResult:
    """WARN when a run directory was unreadable, recorded a failure, or had values set aside."""
    unreadable, failed = diagnostics["unreadable"], diagnostics["failed"]
    suspect = diagnostics["suspect"]
    return dg.AssetCheckResult(
        check_name=RUNS_HEALTH_CHECK,
        passed=not unreadable and not failed and not suspect,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{len(unreadable)} unreadable and {len(failed)} failed run director(y/ies), "
            "left out of every statistic; "
            f"{len(suspect)} run(s) with values set aside (out of range, repeated columns, "
            "unusable split sizes or metadata)"
        ),
        metadata={
            "unreadable": dg.MetadataValue.json(unreadable[:LISTED_ENTRIES]),
            "failed": dg.MetadataValue.json(failed[:LISTED_ENTRIES]),
            "suspect": dg.MetadataValue.json(suspect[:LISTED_ENTRIES]),
            "unreadable_count": len(unreadable),
            "failed_count": len(failed),
            "suspect_count": len(suspect),
        },
    )


@dg.asset(
    group_name=DISCOVERY_GROUP,
    kinds={"python", "csv"},
    check_specs=[
        dg.AssetCheckSpec(
            RUNS_HEALTH_CHECK,
            asset="discovered_runs",
            description=(
                "Every run directory is readable, finished with returncode 0, and had "
                "nothing set aside. A failure means the paper's tables are computed "
                "without the runs listed here (or without some of their values): fix or "
                "delete them, or state the exclusion in the paper."
            ),
        )
    ],
)
def discovered_runs(
    context: dg.AssetExecutionContext,
    run_roots: RunRootsResource,
    output_folder: OutputFolderResource,
    analysis: AnalysisSettings,
):
    """One row per usable run under the run roots; every run set aside is listed with its reason.

    Look at: the ``*_count`` metadata (unreadable, no_seed, duplicate, failed,
    suspect) and the ``diagnostics`` lists, which name each run left out and
    why; the check ``no_unreadable_or_failed_runs`` turns yellow when any is
    non-empty.
    """
    analysis.checked()
    try:
        roots = run_roots.checked_roots()
    except RunRootError as exc:
        raise dg.Failure(description=str(exc)) from None
    cache = RunCache.load(output_folder.cache_file())
    try:
        records, diagnostics = discover_runs(
            roots,
            recursive=run_roots.is_recursive(),
            include_legacy=analysis.include_legacy,
            on_duplicate=analysis.on_duplicate,
            include_failed=analysis.include_failed,
            reader=cache.read,
        )
    except ValueError as exc:
        raise dg.Failure(description=str(exc)) from None
    pruned = cache.prune_unvisited()
    cache.save(output_folder.cache_file())
    context.log.info(
        "discovered %d usable run(s); %d parsed, %d reused from the cache",
        len(records),
        cache.misses,
        cache.hits,
    )
    metadata: dict[str, Any] = {
        "roots": ", ".join(map(str, roots)),
        "runs_parsed": cache.misses,
        "runs_reused": cache.hits,
        "cache_entries_pruned": pruned,
        "cache_lines_damaged": cache.damaged,
        "models": len({r.model for r in records}),
        "datasets": len({r.dataset for r in records}),
    }
    for key in DIAGNOSTIC_KEYS:
        metadata[f"{key}_count"] = len(diagnostics[key])
    metadata["diagnostics"] = dg.MetadataValue.json(diagnostics)
    yield dg.Output(records_to_frame(records), metadata=metadata)
    yield runs_health_check(diagnostics)


@dg.asset(group_name=DISCOVERY_GROUP, automation_condition=EAGER, kinds={"pandas", "csv"})
def run_metrics(discovered_runs: pd.DataFrame) -> pd.DataFrame:
    """The long frame every statistic reads: one row per run and metric.

    Look at: the row count (runs x metrics) and the preview, to see which
    metrics the runs report before choosing ``analysis.metric``.
    """
    return runs_to_frame(frame_to_records(discovered_runs))


@dg.multi_asset(
    outs={
        "reconciled_runs": dg.AssetOut(
            description=(
                "The long frame after dropping minority averaging modes: what every "
                "aggregate, rank and flip test is computed from. Look at: runs (how many "
                "went into the statistics)."
            ),
            automation_condition=EAGER,
            kinds={"pandas", "csv"},
        ),
        "averaging_conflicts": dg.AssetOut(
            description=(
                "What reconciliation dropped: one row per (dataset, model) cell whose runs "
                "mixed averaging modes (macro vs weighted ...), with the kept mode and the "
                "runs dropped. Look at: dropped_runs; empty is the healthy state."
            ),
            automation_condition=EAGER,
            kinds={"pandas", "csv"},
        ),
    },
    group_name=DISCOVERY_GROUP,
)
def reconcile(
    context: dg.AssetExecutionContext, run_metrics: pd.DataFrame
) -> tuple[dg.Output[pd.DataFrame], dg.Output[pd.DataFrame]]:
    """Drop runs whose averaging mode is a minority within their (dataset, model) cell."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept, conflicts = reconcile_averaging(run_metrics)
    for warning in caught:
        context.log.warning(str(warning.message))
    dropped = int(conflicts["dropped_runs"].sum()) if len(conflicts) else 0
    return (
        dg.Output(kept, metadata={"runs": int(kept["run_dir"].nunique()) if len(kept) else 0}),
        dg.Output(conflicts, metadata={"conflicts": len(conflicts), "dropped_runs": dropped}),
    )
