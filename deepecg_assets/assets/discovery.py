"""Discovery: which runs exist under the run roots, read once for every dataset.

Discovery is the one asset that is not partitioned: finding runs means
scanning the whole tree (a run's dataset is only known once its files are
read), duplicates and failures are resolved per (dataset, model, seed) with
the same rules everywhere, and the run cache makes a rescan cost one ``stat``
per unchanged run's metrics file. The scan also saves the tree index the
sensor keeps (:mod:`deepecgkit.rundir.tree_index`), and reads the last one
first. In a run the sensor requested, while that index is still the one
the requesting tick saved (its checksum is the run's
:data:`~deepecg_assets.sensors.TREE_INDEX_TAG`), the tick's scan is the
scan: its candidates and their states are taken from the index and
nothing is walked or proven again (the tick scanned the tree a few seconds
earlier; a change since is the next tick's). Any other index, when it
proves the tree unchanged since it was written, gives its candidates and
states the same way; otherwise a run directory whose
change time is the one recorded there is not listed again (one more
``stat`` instead of a listing), and an index of this scan that records
exactly what the last one does is not written again. The run cache is saved
only once enough of it changed (:data:`RESAVE_CHANGED_SHARE`). Every per-dataset asset
(:mod:`deepecg_assets.assets.datasets`) reads its dataset's rows of this frame.
"""

from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from deepecg_assets.partitions import (
    DATASET_STATES_METADATA,
    PARTITIONS_METADATA,
    dataset_keys,
)
from deepecg_assets.resources import (
    AnalysisSettings,
    OutputFolderResource,
    RunRootError,
    RunRootsResource,
)
from deepecg_assets.sensors import TREE_INDEX_TAG
from deepecgkit._compat import moved_names
from deepecgkit.memory import collector_paused
from deepecgkit.rundir.cache import FileStates, RunCache
from deepecgkit.rundir.listing import ListingRecord
from deepecgkit.rundir.read import discover_run_frame
from deepecgkit.rundir.records import DIAGNOSTIC_KEYS, MetricNames
from deepecgkit.rundir.tree_index import TreeIndex

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

#: A discovery saves the run cache once at least this share of its entries changed since
#: it was saved: below it, writing the whole cache (a second at 100,000 runs) costs more
#: than the next scan's parses of the few runs the saved file lacks.
RESAVE_CHANGED_SHARE = 0.01

#: The ``scan`` metadata: the run roots were walked, or the candidates were taken from the
#: tree index after it proved the tree unchanged (a refresh after the sensor's tick).
SCAN_WALKED = "walked"
SCAN_PROVEN = "taken from the tree index, proven unchanged"
#: The ``scan`` metadata of a run the sensor requested, while the index its tick saved is
#: still the saved one: that tick's scan, taken from the index without a proof.
SCAN_TICKED = "taken from the tree index of the tick that requested this run"


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


def _remove_legacy_cache(context: dg.AssetExecutionContext, path: Path) -> None:
    """Remove the run cache's JSON-lines file of an earlier version, if one is left (logged)."""
    try:
        path.unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        context.log.warning("cannot remove the old run cache %s (%s)", path, exc)
        return
    context.log.info("removed the old run cache %s (the cache is now columnar)", path)


def _save_tree_index(context: dg.AssetExecutionContext, index: TreeIndex, path: Path) -> None:
    """Save the scan's tree index; a failure only costs the next scan its listings (logged)."""
    try:
        index.save(path)
    except OSError as exc:
        context.log.warning(
            "cannot save the tree index %s (%s); the next scan lists all", path, exc
        )


@dg.asset(
    group_name=DISCOVERY_GROUP,
    kinds={"python", "parquet"},
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
    # The scan builds a record of every run at once: no cycles for the collector to find.
    with collector_paused():
        frame, diagnostics, metadata = _discovered(context, run_roots, output_folder, analysis)
    yield dg.Output(frame, metadata=metadata)
    yield runs_health_check(diagnostics)


def _indexed_candidates(
    context: dg.AssetExecutionContext,
    loaded: TreeIndex | None,
    roots: list[Path],
    *,
    recursive: bool,
) -> tuple[FileStates | None, str]:
    """The candidates the saved tree index gives (None: walk the roots), and the ``scan``.

    In a refresh the index is the sensor's, saved by the tick that requested
    the run: its candidates are that tick's scan, and nothing is walked or
    proven again (200,000 ``stat`` calls at 100,000 runs). Any other index
    gives its candidates only when it proves the tree unchanged since.
    """
    if loaded is None:
        return None, SCAN_WALKED
    requested_for = context.run.tags.get(TREE_INDEX_TAG)
    if requested_for is not None and requested_for == loaded.checksum:
        recorded = loaded.recorded_candidates()
        if recorded is not None:
            return recorded, SCAN_TICKED
    proven = loaded.unchanged_candidates(roots, recursive=recursive)
    return proven, SCAN_WALKED if proven is None else SCAN_PROVEN


def _discovered(
    context: dg.AssetExecutionContext,
    run_roots: RunRootsResource,
    output_folder: OutputFolderResource,
    analysis: AnalysisSettings,
) -> tuple[pd.DataFrame, dict[str, list[str]], dict[str, Any]]:
    """The frame, diagnostics and metadata of :func:`discovered_runs`."""
    analysis.checked()
    try:
        roots = run_roots.checked_roots()
    except RunRootError as exc:
        raise dg.Failure(description=str(exc)) from None
    recursive = run_roots.is_recursive()
    index_file = output_folder.tree_index_file()
    loaded = TreeIndex.load(index_file)
    proven, scan = _indexed_candidates(context, loaded, roots, recursive=recursive)
    known = None
    if loaded is not None and proven is None:
        known = loaded.known_listings(roots, recursive=recursive)
    listing = ListingRecord()
    cache = RunCache.load(output_folder.cache_file())
    try:
        frame, diagnostics = discover_run_frame(
            roots,
            cache=cache,
            recursive=recursive,
            include_legacy=analysis.include_legacy,
            on_duplicate=analysis.on_duplicate,
            include_failed=analysis.include_failed,
            listing=listing,
            known=known,
            proven=proven,
        )
    except ValueError as exc:
        raise dg.Failure(description=str(exc)) from None
    if scan == SCAN_TICKED and loaded is not None:
        states = loaded.dataset_digests()  # the tick's scan: the digests the tick computed
    else:
        states = cache.dataset_digests()
    pruned = cache.prune_unvisited()
    cache_saved = cache.worth_saving(share=RESAVE_CHANGED_SHARE)
    if cache_saved:
        cache.save(output_folder.cache_file())
    _remove_legacy_cache(context, output_folder.legacy_cache_file())
    if proven is None:
        index = TreeIndex.from_discovery(listing, cache, recursive=recursive)
        if not index.same_as(loaded):
            _save_tree_index(context, index, index_file)
        del index
    elif loaded is not None and loaded.refreshed:  # directories listed again, same listings
        _save_tree_index(context, loaded, index_file)
    del loaded
    try:
        keys = dataset_keys(frame["dataset"].tolist())
    except ValueError as exc:
        raise dg.Failure(description=str(exc)) from None
    parsed, reused, damaged = cache.misses, cache.hits, cache.damaged
    # The cache holds every run's columns (about 100 MB at 100,000 runs): let it go before
    # the names are checked, so that it is not resident next to their temporaries.
    del cache, listing, known, proven
    models = set(frame["model"].tolist())
    analysis.check_names(metrics=MetricNames(frame), models=models, datasets=set(keys.values()))
    context.log.info(
        "discovered %d usable run(s); %d parsed, %d reused from the cache",
        len(frame),
        parsed,
        reused,
    )
    metadata: dict[str, Any] = {
        "roots": ", ".join(map(str, roots)),
        "runs_parsed": parsed,
        "runs_reused": reused,
        "cache_entries_pruned": pruned,
        "cache_damaged": damaged,
        "cache_saved": cache_saved,
        "scan": scan,
        "models": len(models),
        "datasets": len(keys),
        PARTITIONS_METADATA: dg.MetadataValue.json(keys),
        DATASET_STATES_METADATA: dg.MetadataValue.json(
            {key: states[dataset] for key, dataset in keys.items() if dataset in states}
        ),
    }
    for key in DIAGNOSTIC_KEYS:
        metadata[f"{key}_count"] = len(diagnostics[key])
    metadata["diagnostics"] = dg.MetadataValue.json(diagnostics)
    return frame, diagnostics, metadata
