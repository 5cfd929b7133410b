"""Sensors: ``new_runs_sensor`` watches the run roots, ``automation_sensor`` the eager assets.

``new_runs_sensor`` requests a refresh when run directories are added, changed or removed.

Run directories are not Dagster partitions (a partition per seed would mean
one Dagster run per seed and tens of thousands of partitions); instead the
graph is unpartitioned and this sensor watches the state of the run roots:
the path, modification time and size of every readable metrics file. The
cursor holds only a short digest of that state, because Dagster stores the
cursor on every tick. A run whose metrics file cannot be read yet (among them
a half-written one: no final line break, or a row shorter than its header)
and a directory that cannot be listed are left out of the digest and counted
as pending, so they are picked up on the tick where they become readable.

The run key is derived from the previous and the new digest: a retried tick
never launches the same work twice, while a tree that returns to an earlier
state (a run deleted and written again) is still refreshed.
"""

import os

import dagster as dg

from deepecg_assets.resources import OutputFolderResource, RunRootError, RunRootsResource
from deepecgkit.rundir.cache import RunCache, scan_tree_state

#: The automation condition of every derived asset: refresh as soon as an input changes.
EAGER = dg.AutomationCondition.eager()
#: Everything that depends on the run roots.
REFRESH_SELECTION = dg.AssetSelection.assets("discovered_runs").downstream()
#: Seconds between ticks, unless ``DEEPECG_SENSOR_INTERVAL`` says otherwise.
SENSOR_INTERVAL_SECONDS = 60
#: Environment variable overriding the interval; read when the code location loads,
#: because the interval is part of the sensor's definition.
SENSOR_INTERVAL_ENV = "DEEPECG_SENSOR_INTERVAL"


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


@dg.sensor(
    name="new_runs_sensor",
    target=REFRESH_SELECTION,
    minimum_interval_seconds=sensor_interval_seconds(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Watches the run roots ($DEEPECG_RUNS) every minute: the path, modification time and "
        "size of every run's metrics file. When a run directory is added, changed or removed "
        "it refreshes discovered_runs and everything downstream; a half-written run is "
        "counted as pending and picked up once readable."
    ),
)
def new_runs_sensor(
    context: dg.SensorEvaluationContext,
    run_roots: RunRootsResource,
    output_folder: OutputFolderResource,
) -> dg.SensorResult:
    try:
        roots = run_roots.checked_roots()
    except RunRootError as exc:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"cannot scan: {exc}"))
    cache = RunCache.load(output_folder.cache_file())
    state = scan_tree_state(roots, recursive=run_roots.is_recursive(), cache=cache)
    pending = (
        f"; {len(state.pending)} run(s) not readable yet, retried on a later tick"
        if state.pending
        else ""
    )
    if state.digest == context.cursor:
        return dg.SensorResult(
            skip_reason=dg.SkipReason(
                f"no run directory added, changed or removed: {len(state.entries)} run(s), "
                f"state {state.digest}{pending}"
            )
        )
    if cache.misses or cache.damaged:
        # Parsed runs are remembered, so the requested discovery does not parse them again;
        # runs that no longer exist, and damaged lines, leave the cache.
        cache.prune_unvisited()
        cache.save(output_folder.cache_file())
    context.log.info(
        "run state %s -> %s (%d readable run(s)%s)",
        context.cursor,
        state.digest,
        len(state.entries),
        pending,
    )
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=f"{context.cursor or 'start'}->{state.digest}",
                tags={"deepecg/run_state": state.digest},
            )
        ],
        cursor=state.digest,
    )


#: Evaluates the eager automation conditions of the downstream assets.
automation_sensor = dg.AutomationConditionSensorDefinition(
    "deepecg_automation_sensor",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Watches every asset's upstream materialisations and materialises the downstream "
        "assets (frames, tables, report) as soon as an input changes (eager automation)."
    ),
)
