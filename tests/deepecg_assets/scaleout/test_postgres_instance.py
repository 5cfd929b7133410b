"""``deploy/dagster.yaml`` for real: PostgreSQL storage, the queued coordinator, the daemon.

The test starts a throw-away PostgreSQL cluster, copies ``deploy/dagster.yaml``
unchanged into a fresh ``DAGSTER_HOME`` and runs ``dagster-daemon run -w
workspace.yaml`` as ``deploy/README.md`` says. Three refreshes follow, each
waited for until every asset is current:

1. the sensor's first tick queues one run per dataset (its partition), which
   the daemon dequeues and launches together (``max_concurrent_runs: 2``), and
   the automation sensor then the cross-dataset assets, once;
2. one added run is refreshed in one run of its dataset's partition and the
   cross-dataset assets;
3. runs added to both datasets at once: again one run per dataset, side by
   side, and the cross-dataset assets once, after both.

What Dagster stored is read with psycopg2 straight from the database, not
through Dagster: the runs (the dataset runs of one refresh launched before
any of them ended, from the queue's events; every run with the cross-dataset assets
carries the tag the queue limits to one run at a time, and none overlapped
another), the event log (which run materialised what), the sensor ticks. The output
folder must equal, byte for byte, a build of the same runs on an SQLite
instance.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pandas as pd
import psycopg2.errors
import pytest

from deepecg_assets.definitions import defs
from deepecg_assets.partitions import PER_DATASET_ASSETS, dataset_key
from deepecg_assets.sensors import COMBINES_TAG, SENSOR_INTERVAL_ENV
from tests.deepecg_assets.scaleout.conftest import SMALL_CORPUS_DATASETS

#: They start servers and build the corpus more than once (tens of seconds).
pytestmark = pytest.mark.slow
#: The tag the sensor puts on every run it requests (its dataset's state digest).
RUN_STATE_TAG = "deepecg/dataset_state"
#: Run statuses that mean the run is over, and those that mean it went wrong.
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}
FAILED = {"FAILURE", "CANCELED"}
#: Events a queued run leaves in the event log: enqueued by the sensor, "starting" when the
#: daemon's queue loop dequeues and launches it, then its own start and success. The stored
#: names are Dagster's older ones ("PIPELINE_ENQUEUED" ...), hence the enum values.
QUEUED_RUN_EVENTS = {
    dg.DagsterEventType.RUN_ENQUEUED.value,
    dg.DagsterEventType.RUN_STARTING.value,
    dg.DagsterEventType.RUN_START.value,
    dg.DagsterEventType.RUN_SUCCESS.value,
}
MATERIALIZATION = dg.DagsterEventType.ASSET_MATERIALIZATION.value
#: Seconds between sensor ticks in the test (the default is a minute).
TEST_SENSOR_INTERVAL = "1"
#: Seconds a call of the daemon to its code server may take (Dagster's default is 60). On a
#: loaded 2-core machine launching a run took longer once and failed the run, not the code.
GRPC_TIMEOUT_SECONDS = "180"
#: Seconds one refresh may take before the test gives up on it (a bound on failing: under a
#: load of 20 on the 2-core machine the first build took over 300 s).
BUILD_TIMEOUT_SECONDS = 600
POLL_SECONDS = 0.5
#: The bundled run added after the first build (a fourth seed of one cell).
ADDED_PREFIX, ADDED_SEED = "logreg-features_synthetic-long-pr", 3
#: Runs then added to both datasets at once (moved in with one rename).
PARALLEL_PREFIXES = ("logreg-features_synthetic-irregular-rr", "simple-cnn_synthetic-long-pr")
PARALLEL_SEED = 4
#: The sensor that runs the eager cross-dataset assets.
AUTOMATION_SENSOR = "deepecg_automation_sensor"
#: Cross-dataset assets that read every dataset's partition.
PARTITION_COMBINES = ("flip_grid", "flip_table")
EVERY_ASSET = frozenset(key.to_user_string() for key in defs.resolve_all_asset_keys())
COMBINES = EVERY_ASSET - {*PER_DATASET_ASSETS, "discovered_runs"}


@dataclass(frozen=True)
class Run:
    """A row of Dagster's ``runs`` table, with the sensor's dataset-state tag (None if absent)."""

    id: int
    run_id: str
    status: str
    start: float | None
    end: float | None
    state: str | None


def _runs(cursor) -> list[Run]:
    """Every run, oldest first; empty until the daemon has created Dagster's tables."""
    try:
        cursor.execute(
            "SELECT r.id, r.run_id, r.status, r.start_time, r.end_time, t.value FROM runs r "
            "LEFT JOIN run_tags t ON t.run_id = r.run_id AND t.key = %s ORDER BY r.id",
            (RUN_STATE_TAG,),
        )
    except psycopg2.errors.UndefinedTable:
        return []
    return [Run(*row) for row in cursor.fetchall()]


def _materialized(cursor, run_ids) -> dict[str, set[str]]:
    """``{run_id: assets it materialised}``, checking that each run went through the queue."""
    found = {}
    for run_id in run_ids:
        cursor.execute(
            "SELECT dagster_event_type, asset_key FROM event_logs WHERE run_id = %s", (run_id,)
        )
        rows = cursor.fetchall()
        assert {kind for kind, _ in rows} >= QUEUED_RUN_EVENTS, f"run {run_id} skipped the queue"
        found[run_id] = {"/".join(json.loads(key)) for kind, key in rows if kind == MATERIALIZATION}
    return found


def _wait(condition, daemon: subprocess.Popen, log: Path, what: str, scaleout) -> None:
    """Poll ``condition()`` until it is true; fail at once if the daemon dies or a run fails."""
    deadline = time.monotonic() + BUILD_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        if daemon.poll() is not None:
            pytest.fail(f"the daemon exited while waiting for {what}:\n{scaleout.log_tail(log)}")
        time.sleep(POLL_SECONDS)
    pytest.fail(f"timed out waiting for {what}:\n{scaleout.log_tail(log)}")


def _in_flight_together(cursor, runs: list[Run]) -> bool:
    """The daemon launched every one of ``runs`` before any of them ended.

    Launched: the queue's "starting" event (the coordinator dequeued the run
    and started its process). With ``max_concurrent_runs: 1`` the second run
    leaves the queue only once the first has ended. The runs' own start and
    end times need not overlap: launching a run (a new process importing the
    code location) takes about as long as a small dataset's refresh here.
    """
    cursor.execute(
        "SELECT run_id, EXTRACT(EPOCH FROM timestamp) FROM event_logs "
        "WHERE dagster_event_type = %s AND run_id IN %s",
        (dg.DagsterEventType.RUN_STARTING.value, tuple(run.run_id for run in runs)),
    )
    launched = dict(cursor.fetchall())
    assert set(launched) == {run.run_id for run in runs}
    return max(float(t) for t in launched.values()) < min(run.end for run in runs)


def _tagged(cursor, runs: list[Run], key: str) -> set[str]:
    """The ids of those of ``runs`` that carry the tag ``key``."""
    cursor.execute(
        "SELECT run_id FROM run_tags WHERE key = %s AND run_id IN %s",
        (key, tuple(run.run_id for run in runs)),
    )
    return {run_id for (run_id,) in cursor.fetchall()}


def _one_at_a_time(runs: list[Run]) -> bool:
    """No two of ``runs`` were in progress at once (each started after the previous ended)."""
    ordered = sorted(runs, key=lambda run: run.start)
    return all(later.start >= earlier.end for earlier, later in itertools.pairwise(ordered))


def test_daemon_builds_and_refreshes_in_parallel_on_postgres_like_sqlite(
    tmp_path, small_corpus, postgres_server, reference_build, scaleout, monkeypatch
) -> None:
    home, output = tmp_path / "dagster_home", tmp_path / "pg_output"
    home.mkdir()
    shutil.copy(scaleout.REPO_ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    for name, value in postgres_server.dagster_env().items():
        monkeypatch.setenv(name, value)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        queue = instance.run_coordinator.get_run_queue_config()
    assert queue.max_concurrent_runs > 1
    assert {"key": COMBINES_TAG, "limit": 1} in queue.tag_concurrency_limits
    env = scaleout.server_env(
        DAGSTER_HOME=str(home),
        DEEPECG_RUNS=str(small_corpus),
        DEEPECG_OUTPUT=str(output),
        **{SENSOR_INTERVAL_ENV: TEST_SENSOR_INTERVAL},
        DAGSTER_GRPC_TIMEOUT_SECONDS=GRPC_TIMEOUT_SECONDS,
        **postgres_server.dagster_env(),
    )
    log = tmp_path / "daemon.log"
    connection = postgres_server.connect()
    cursor = connection.cursor()

    def current(sensor_runs: int):
        """The sensor requested ``sensor_runs`` runs, all succeeded, and every asset was
        materialised after the last of them was requested; nothing is in flight."""

        def check() -> bool:
            runs = _runs(cursor)
            failed = [run for run in runs if run.status in FAILED]
            assert not failed, f"run(s) failed: {failed}\n{scaleout.log_tail(log)}"
            requested = [run for run in runs if run.state is not None]
            if len(requested) != sensor_runs or any(run.status not in FINISHED for run in runs):
                return False
            since = [run.run_id for run in runs if run.id >= requested[-1].id]
            cursor.execute(
                "SELECT DISTINCT asset_key FROM event_logs "
                "WHERE dagster_event_type = %s AND run_id IN %s",
                (MATERIALIZATION, tuple(since)),
            )
            return {"/".join(json.loads(key)) for (key,) in cursor.fetchall()} >= COMBINES

        return check

    def automation_caught_up() -> bool:
        """The automation sensor finished a tick that began after the last run ended."""
        runs = _runs(cursor)
        if any(run.status not in FINISHED for run in runs):
            return False
        last_end = max(run.end for run in runs)
        cursor.execute("SELECT status, tick_body FROM job_ticks")
        return any(
            body["job_name"] == AUTOMATION_SENSOR
            and status in {"SUCCESS", "SKIPPED"}
            and body["timestamp"] > last_end
            for status, body in ((s, json.loads(b)) for s, b in cursor.fetchall())
        )

    datasets = len(SMALL_CORPUS_DATASETS)
    with log.open("wb") as log_file:
        daemon = subprocess.Popen(
            [scaleout.venv_command("dagster-daemon"), "run", "-w", "workspace.yaml"],
            cwd=scaleout.REPO_ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait(current(datasets), daemon, log, "the first tick's build", scaleout)
        scaleout.copy_bundled_runs(small_corpus, ADDED_PREFIX, seeds=(ADDED_SEED,))
        _wait(current(datasets + 1), daemon, log, "the added run", scaleout)
        # Both datasets change in one rename, so one sensor tick sees both.
        batch = tmp_path / "staging" / "batch"
        scaleout.copy_bundled_runs(batch, *PARALLEL_PREFIXES, seeds=(PARALLEL_SEED,))
        batch.rename(small_corpus / batch.name)
        _wait(current(2 * datasets + 1), daemon, log, "the runs added at once", scaleout)
        _wait(automation_caught_up, daemon, log, "a later automation tick", scaleout)
    finally:
        scaleout.stop_process_group(daemon)

    runs = _runs(cursor)
    sensor_runs = [run for run in runs if run.state is not None]
    first, (refresh,), parallel = (
        sensor_runs[:datasets],
        sensor_runs[datasets : datasets + 1],
        sensor_runs[datasets + 1 :],
    )
    assert len(parallel) == datasets
    materialized = _materialized(cursor, [run.run_id for run in runs])
    cursor.execute(
        "SELECT run_id, value FROM run_tags WHERE key = 'dagster/sensor_name' AND run_id IN %s",
        (tuple(run.run_id for run in runs),),
    )
    sensor_of = dict(cursor.fetchall())
    assert {sensor_of[run.run_id] for run in sensor_runs} == {"new_runs_sensor"}

    def phase(dataset_runs: list[Run], end: int | None) -> list[Run]:
        """The runs from the first of ``dataset_runs`` up to (not including) run ``end``."""
        return [r for r in runs if r.id >= dataset_runs[0].id and (end is None or r.id < end)]

    added_key = dataset_key(ADDED_PREFIX.split("_", 1)[1])
    for dataset_runs, end in ((first, refresh.id), (parallel, None)):
        assert _in_flight_together(cursor, dataset_runs), f"one after another: {dataset_runs}"
        assert all(
            materialized[r.run_id] == {"discovered_runs", *PER_DATASET_ASSETS} for r in dataset_runs
        )
        others = [r for r in phase(dataset_runs, end) if r not in dataset_runs]
        assert {sensor_of.get(r.run_id) for r in others} == {AUTOMATION_SENSOR}
        for asset in COMBINES:
            (run,) = [r for r in others if asset in materialized[r.run_id]]
            if asset in PARTITION_COMBINES:
                assert run.start > max(r.end for r in dataset_runs), f"{asset} before its inputs"
        assert (
            set().union(*(materialized[r.run_id] for r in phase(dataset_runs, end))) == EVERY_ASSET
        )
    combining = [r for r in runs if materialized[r.run_id] & COMBINES]
    assert _tagged(cursor, combining, COMBINES_TAG) == {r.run_id for r in combining}, (
        "a run with the cross-dataset assets escaped the queue's limit"
    )
    assert _one_at_a_time(combining), f"two runs of the combines at once: {combining}"
    assert phase([refresh], parallel[0].id) == [refresh], "the refresh needed no other run"
    assert materialized[refresh.run_id] == EVERY_ASSET, "the refresh: its dataset and the combines"
    cursor.execute(
        "SELECT DISTINCT partition FROM event_logs WHERE run_id = %s AND partition IS NOT NULL",
        (refresh.run_id,),
    )
    assert [partition for (partition,) in cursor.fetchall()] == [added_key]

    cursor.execute("SELECT status, tick_body FROM job_ticks ORDER BY id")
    bodies = [(status, json.loads(body)) for status, body in cursor.fetchall()]
    # Dagster stores a tick's instigator name under its older field name, job_name.
    ticks = [(status, body) for status, body in bodies if body["job_name"] == "new_runs_sensor"]
    launched = [sorted(body["run_ids"]) for status, body in ticks if status == "SUCCESS"]
    assert launched == [sorted(r.run_id for r in group) for group in (first, [refresh], parallel)]
    assert any(
        "no run directory added, changed or removed" in (body.get("skip_reason") or "")
        for status, body in ticks
        if status == "SKIPPED"
    ), "unchanged ticks are stored with their reason"
    connection.close()

    assert not list(home.rglob("*.db")), "nothing was stored in SQLite files"
    added = f"{ADDED_PREFIX}_seed{ADDED_SEED}"
    stored = pd.read_parquet(output / "frames" / "discovered_runs.parquet")
    assert added in set(stored["run_dir"].map(lambda path: Path(path).name))
    scaleout.assert_same_outputs(output, reference_build(small_corpus, on_sqlite=True))
