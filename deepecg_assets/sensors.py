"""Sensors: ``new_runs_sensor`` watches the run roots, ``automation_sensor`` the eager assets.

``new_runs_sensor`` refreshes exactly the datasets whose runs were added,
changed or removed. Each tick it first asks the tree index saved by the
last full scan (:mod:`deepecgkit.rundir.tree_index`, next to the run cache)
whether the run roots are provably as that scan saw them: one ``stat`` per
listed directory and per metrics file, no listing and no cache load. When
they are and the index's digest is the cursor, the tick launches nothing.
Otherwise it scans the run roots in full (the path, modification time and
size of every readable metrics file, through the run cache; see
:func:`~deepecgkit.rundir.cache.scan_tree_state`), saves a new index, and
compares the tree's digest with its cursor. When the digest moved, it splits the state into one
digest per dataset (:meth:`~deepecgkit.rundir.tree_index.TreeIndex.dataset_digests`
of the index it saved: the run cache's digests of that scan, without a pass over the
cache) and compares each with the state the dataset's partition was last built
from. That baseline is read from the instance, not from the cursor: each
``discovered_runs`` materialisation records the dataset digests it saw, and
a partition was built from the last discovery before its own
materialisation. So the first tick after a build made outside the daemon
(the README's command, a CLI materialisation) launches nothing. Every run
it requests is tagged with the checksum of the index it saved
(:data:`TREE_INDEX_TAG`): the run's discovery takes this scan from that
index instead of proving the tree a second time, seconds later (a change
in between is the next tick's, as any change after a scan is).

One :class:`~dagster.SensorResult` per tick carries:

- dynamic-partition add requests for new datasets and delete requests for
  datasets that are gone (their stored frames are removed at once; their
  tables by ``results_index``);
- one run request per changed dataset, keyed by that dataset's baseline and
  new digest (a retried tick never launches the same work twice; a dataset
  that returns to an earlier state is still refreshed). A single changed
  dataset is refreshed in one run together with the cross-dataset assets,
  since Dagster's fixed cost per launched run is larger than the combine
  itself, but only while no other run is queued or in progress; several
  changed datasets (or one while other runs are in flight; the queued
  coordinator runs several at once) get one run each, and the eager
  cross-dataset assets then run once, after all of them (their condition
  waits until no input partition is in progress). Every run that carries
  the cross-dataset assets is tagged :data:`COMBINES_TAG`, and the queued
  coordinator of ``deploy/dagster.yaml`` runs one such run at a time, so the
  two sensors (separate daemon threads) never run two combines at once;
- with only deletions, one run of the cross-dataset assets.

A run whose metrics file cannot be read yet (among them a half-written
one: no final line break, or a row shorter than its header) and a directory
that cannot be listed are left out of the digests and counted as pending,
so they are picked up on the tick where they become readable.
"""

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import dagster as dg

from deepecg_assets.partitions import (
    DATASET_PARTITIONS,
    DATASET_STATES_METADATA,
    DATASETS,
    DISCOVERY_ASSET,
    LAST_PER_DATASET_ASSET,
    PER_DATASET_ASSETS,
    dataset_keys,
    materialization_metadata,
    remove_stored_partitions,
)
from deepecg_assets.resources import OutputFolderResource, RunRootError, RunRootsResource
from deepecgkit.memory import collector_paused
from deepecgkit.rundir.cache import RunCache
from deepecgkit.rundir.tree_index import TreeIndex, TreeSummary, indexed_tree_state

#: The automation condition of every derived asset: refresh as soon as an input changes.
EAGER = dg.AutomationCondition.eager()
#: Everything that depends on the run roots.
REFRESH_SELECTION = dg.AssetSelection.assets(DISCOVERY_ASSET).downstream()
#: A dataset's refresh: discovery and the dataset's own partition.
DATASET_REFRESH = dg.AssetSelection.assets(DISCOVERY_ASSET, *PER_DATASET_ASSETS)
#: The cross-dataset assets (combines, report, transfer), refreshed after the partitions.
COMBINE_SELECTION = REFRESH_SELECTION - dg.AssetSelection.assets(*PER_DATASET_ASSETS)
#: Tag of every run that materialises the cross-dataset assets (the sensor's and the
#: automation sensor's). ``deploy/dagster.yaml`` limits runs with it to one at a time, so
#: two combines never run at once, whichever daemon thread requested them.
COMBINES_TAG = "deepecg/combines"
#: Tag of a run the sensor requested: the checksum of the tree index its tick saved
#: (:attr:`~deepecgkit.rundir.tree_index.TreeIndex.checksum`). While that index is the
#: saved one, the run's discovery takes the tick's scan from it instead of proving the
#: tree again (:mod:`deepecg_assets.assets.discovery`).
TREE_INDEX_TAG = "deepecg/tree_index"
#: A tick whose scan changed at least this share of the run cache's entries (a new sweep)
#: saves it for the discovery it requests; below it, saving the whole cache would cost the
#: tick more than parsing those runs again costs discovery.
SAVED_CACHE_PARSED_SHARE = 0.1
#: Discovery materialisations searched for the state a partition was built from.
BASELINE_HISTORY = 200
#: Seconds between ticks, unless ``DEEPECG_SENSOR_INTERVAL`` says otherwise.
SENSOR_INTERVAL_SECONDS = 60
#: Environment variable overriding the interval; read when the code location loads,
#: because the interval is part of the sensor's definition.
SENSOR_INTERVAL_ENV = "DEEPECG_SENSOR_INTERVAL"
#: Seconds the sensor's minimum interval is set below the interval a user asked for (see
#: :func:`daemon_minimum_interval`).
DAEMON_LOOP_SLACK_SECONDS = 1
#: Seconds between automation ticks (Dagster's default); a shorter sensor interval
#: shortens it too, so a site (or a test) that polls the runs often also sees the
#: cross-dataset assets refreshed soon after. Dagster's asset daemon ticks at most
#: every 5 s whatever this says.
AUTOMATION_INTERVAL_SECONDS = 30
#: Run statuses of a run that is waiting in the queue or running.
IN_FLIGHT_STATUSES = (
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
)


def sensor_interval_seconds() -> int:
    """``$DEEPECG_SENSOR_INTERVAL`` as a positive whole number of seconds, else the default.

    Raises:
        ValueError: the variable is set to something other than a positive integer.
    """
    text = os.environ.get(SENSOR_INTERVAL_ENV, "").strip()
    if not text:
        return SENSOR_INTERVAL_SECONDS
    if not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"{SENSOR_INTERVAL_ENV}={text!r}: give the seconds between sensor ticks "
            f"as a positive whole number (default {SENSOR_INTERVAL_SECONDS})"
        )
    return int(text)


def daemon_minimum_interval(seconds: int) -> int:
    """The ``minimum_interval_seconds`` under which Dagster's daemon ticks every ``seconds``.

    The sensor daemon looks at its sensors once per loop, every 5 s
    (``MIN_INTERVAL_LOOP_TIME`` in ``dagster._daemon.sensor``, start to start),
    and evaluates a sensor when at least its minimum interval has passed
    since its last tick *started*. With a minimum interval equal to a whole
    number of loops, the loop that should evaluate it comes a few
    milliseconds early about half the time, and the tick waits one more loop:
    an interval of 5 s gave ticks 10 s apart in three of five intervals at
    100,000 runs (``benchmarks/bench_platform.py``, docs/benchmarks.md,
    session 28), so a new run waited up to twice the interval before its
    refresh was requested. A minimum one second shorter
    (:data:`DAEMON_LOOP_SLACK_SECONDS`) is passed by that loop, so the ticks
    come ``seconds`` apart (an interval that is no whole number of loops is
    rounded up to the next loop, as before). At least 1 s.
    """
    return max(1, seconds - DAEMON_LOOP_SLACK_SECONDS)


def built_dataset_states(instance: dg.DagsterInstance) -> dict[str, str]:
    """``{partition key: digest}``: the run state each dataset's partition was last built from.

    A partition was built from the latest ``discovered_runs`` materialisation
    before the partition's own (:data:`~deepecg_assets.partitions.LAST_PER_DATASET_ASSET`);
    that materialisation's ``dataset_states`` metadata holds the digest. A
    partition never built, or built before the last :data:`BASELINE_HISTORY`
    discoveries, has no baseline (it is refreshed).
    """
    built = instance.get_latest_storage_id_by_partition(
        dg.AssetKey(LAST_PER_DATASET_ASSET), dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    if not built:
        return {}
    discoveries = instance.fetch_materializations(
        dg.AssetKey(DISCOVERY_ASSET), limit=BASELINE_HISTORY, ascending=False
    ).records
    states: dict[str, str] = {}
    for key, storage_id in built.items():
        for record in discoveries:  # newest first
            if record.storage_id < storage_id:
                metadata = materialization_metadata(record.asset_materialization)
                digest = metadata.get(DATASET_STATES_METADATA, {}).get(key)
                if digest is not None:
                    states[key] = digest
                break
    return states


def refresh_requests(
    current: Mapping[str, str],
    built: Mapping[str, str],
    registered: set[str],
    *,
    dataset_refresh: Sequence[dg.AssetKey],
    combines: Sequence[dg.AssetKey],
    others_in_flight: bool = False,
    tree_index: str | None = None,
) -> tuple[list[dg.RunRequest], list[str], list[str]]:
    """The run requests of one tick, and the partition keys to add and to delete.

    Args:
        current: ``{partition key: digest}`` of the datasets on disk now.
        built: what each partition was built from (:func:`built_dataset_states`).
        registered: the dataset partitions the instance holds.
        dataset_refresh: the assets of one dataset's refresh (:data:`DATASET_REFRESH`).
        combines: the cross-dataset assets (:data:`COMBINE_SELECTION`).
        others_in_flight: runs are queued or in progress. A run with the combines
            would then run them next to another run's combines or partitions (two
            combines, one reading a partition another run is rewriting), so the
            changed dataset gets a partition-only run and the eager combines wait.
        tree_index: the checksum of the tree index the tick saved, tagged on every
            request (:data:`TREE_INDEX_TAG`); None (not saved) tags nothing.
    """
    added = sorted(set(current) - registered)
    gone = sorted(registered - set(current))
    changed = sorted(key for key, digest in current.items() if built.get(key) != digest)
    single = len(changed) == 1 and not others_in_flight
    scanned = {} if tree_index is None else {TREE_INDEX_TAG: tree_index}
    requests = [
        dg.RunRequest(
            run_key=f"{key}:{built.get(key, 'new')}->{current[key]}",
            partition_key=key,
            asset_selection=[*dataset_refresh, *combines] if single else [*dataset_refresh],
            tags={
                "deepecg/dataset": key,
                "deepecg/dataset_state": current[key],
                **({COMBINES_TAG: "true"} if single else {}),
                **scanned,
            },
        )
        for key in changed
    ]
    if gone and not changed:
        requests.append(
            dg.RunRequest(
                run_key="removed:" + ",".join(f"{key}:{built.get(key, '')}" for key in gone),
                asset_selection=[dg.AssetKey(DISCOVERY_ASSET), *combines],
                tags={
                    "deepecg/removed_datasets": ",".join(gone)[:200],
                    COMBINES_TAG: "true",
                    **scanned,
                },
            )
        )
    return requests, added, gone


def _pending_note(pending: Sequence[str]) -> str:
    """The part of a tick's message about runs that cannot be read yet."""
    if not pending:
        return ""
    return f"; {len(pending)} run(s) not readable yet, retried on a later tick"


def _unchanged_result(summary: TreeSummary) -> dg.SensorResult:
    """The tick's answer when the tree's digest is the cursor: nothing to launch."""
    return dg.SensorResult(
        skip_reason=dg.SkipReason(
            f"no run directory added, changed or removed: {summary.readable} run(s), "
            f"state {summary.digest}{_pending_note(summary.pending)}"
        )
    )


def _save_index(context: dg.SensorEvaluationContext, index: TreeIndex, path: Path) -> str | None:
    """Save the tree index: its checksum, or None when it could not be saved (logged).

    A failure only costs the next tick a full scan, and the requested discovery its proof.
    """
    try:
        index.save(path)
    except OSError as exc:
        context.log.warning("cannot save the tree index %s (%s); ticks scan in full", path, exc)
        return None
    return index.checksum


@dg.sensor(
    name="new_runs_sensor",
    target=REFRESH_SELECTION,
    minimum_interval_seconds=daemon_minimum_interval(sensor_interval_seconds()),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Watches the run roots ($DEEPECG_RUNS) every minute: the path, modification time and "
        "size of every run's metrics file. When runs of a dataset are added, changed or "
        "removed it refreshes that dataset's partition (new datasets get a partition, gone "
        "ones lose theirs) and then the cross-dataset tables; a half-written run is counted "
        "as pending and picked up once readable."
    ),
)
def new_runs_sensor(
    context: dg.SensorEvaluationContext,
    run_roots: RunRootsResource,
    output_folder: OutputFolderResource,
) -> dg.SensorResult:
    # A change tick builds the index of every run directory at once: no cycles to collect.
    with collector_paused():
        return _tick(context, run_roots, output_folder)


def _tick(
    context: dg.SensorEvaluationContext,
    run_roots: RunRootsResource,
    output_folder: OutputFolderResource,
) -> dg.SensorResult:
    """One evaluation of :func:`new_runs_sensor`."""
    try:
        roots = run_roots.checked_roots()
    except RunRootError as exc:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"cannot scan: {exc}"))
    recursive = run_roots.is_recursive()
    index_file = output_folder.tree_index_file()
    index = TreeIndex.load(index_file)
    quick = None if index is None else index.unchanged(roots, recursive=recursive)
    if quick is not None and quick.digest == context.cursor:
        if index is not None and index.refreshed:
            _save_index(context, index, index_file)
        return _unchanged_result(quick)
    cache = RunCache.load(output_folder.cache_file())
    state, index = indexed_tree_state(roots, recursive=recursive, cache=cache, previous=index)
    saved = _save_index(context, index, index_file)
    pending = _pending_note(state.pending)
    if state.digest == context.cursor:
        return _unchanged_result(index.summary())
    try:
        # (The scan's digests, as cache.dataset_digests() gives them, without its pass.)
        by_dataset = index.dataset_digests()
        current = {key: by_dataset[dataset] for key, dataset in dataset_keys(by_dataset).items()}
    except ValueError as exc:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"cannot refresh: {exc}"))
    if cache.worth_saving(share=SAVED_CACHE_PARSED_SHARE):
        # Many parsed runs are remembered, so the requested discovery does not parse them
        # again (a damaged file is written whole again). A few are not: the requested
        # discovery parses them in milliseconds, while writing the whole cache costs the
        # tick a second and a half at 100,000 runs, and discovery writes it anyway.
        cache.prune_unvisited()
        cache.save(output_folder.cache_file())
    registered = set(context.instance.get_dynamic_partitions(DATASET_PARTITIONS))
    graph = context.repository_def.asset_graph
    requests, added, gone = refresh_requests(
        current,
        built_dataset_states(context.instance),
        registered,
        dataset_refresh=sorted(DATASET_REFRESH.resolve(graph)),
        combines=sorted(COMBINE_SELECTION.resolve(graph)),
        others_in_flight=context.instance.get_runs_count(
            dg.RunsFilter(statuses=list(IN_FLIGHT_STATUSES))
        )
        > 0,
        tree_index=saved,
    )
    if gone:
        remove_stored_partitions(output_folder.frames_dir(), gone)
    context.log.info(
        "run state %s -> %s (%d readable run(s)%s): %d dataset(s) to refresh, %d new, %d gone",
        context.cursor,
        state.digest,
        len(state.entries),
        pending,
        len(requests),
        len(added),
        len(gone),
    )
    partition_requests = []
    if added:
        partition_requests.append(DATASETS.build_add_request(added))
    if gone:
        partition_requests.append(DATASETS.build_delete_request(gone))
    if not requests:
        return dg.SensorResult(
            dynamic_partitions_requests=partition_requests,
            skip_reason=dg.SkipReason(
                f"every dataset is built from the current runs (state {state.digest}){pending}"
            ),
            cursor=state.digest,
        )
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=partition_requests,
        cursor=state.digest,
    )


#: Evaluates the eager automation conditions of the downstream assets.
automation_sensor = dg.AutomationConditionSensorDefinition(
    "deepecg_automation_sensor",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    run_tags={COMBINES_TAG: "true"},
    minimum_interval_seconds=min(sensor_interval_seconds(), AUTOMATION_INTERVAL_SECONDS),
    description=(
        "Watches every asset's upstream materialisations and materialises the downstream "
        "assets (frames, tables, report) as soon as an input changes (eager automation)."
    ),
)
