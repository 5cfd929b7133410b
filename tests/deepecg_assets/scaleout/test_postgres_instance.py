"""``deploy/dagster.yaml`` for real: PostgreSQL storage, the queued coordinator, the daemon.

The test starts a throw-away PostgreSQL cluster, copies ``deploy/dagster.yaml``
unchanged into a fresh ``DAGSTER_HOME`` and runs ``dagster-daemon run -w
workspace.yaml`` as ``deploy/README.md`` says. The sensor's first tick queues
one run per dataset (its partition), which the daemon dequeues and launches,
and the automation sensor then the cross-dataset assets; one added run is
then refreshed the same way, in one run of its dataset's partition and the
cross-dataset assets. What Dagster stored is read with psycopg2
straight from the database, not through Dagster, and the output folder must
equal, byte for byte, a build of the same runs on an SQLite instance.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import psycopg2.errors
import pytest

from deepecg_assets.definitions import defs
from deepecg_assets.partitions import PER_DATASET_ASSETS, dataset_key
from deepecg_assets.sensors import SENSOR_INTERVAL_ENV
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
#: Seconds between sensor ticks in the test (the default is a minute).
TEST_SENSOR_INTERVAL = "1"
#: Seconds one build may take before the test gives up on it.
BUILD_TIMEOUT_SECONDS = 300
POLL_SECONDS = 0.5
#: The bundled run added after the first build (a fourth seed of one cell).
ADDED_PREFIX, ADDED_SEED = "logreg-features_synthetic-long-pr", 3


def _sensor_runs(cursor) -> list[tuple[str, str, str]]:
    """``(run_id, status, run state)`` of every run the sensor requested, oldest first.

    Empty until the daemon has created Dagster's tables (it does on first use).
    """
    try:
        cursor.execute(
            "SELECT r.run_id, r.status, t.value FROM runs r JOIN run_tags t "
            "ON t.run_id = r.run_id WHERE t.key = %s ORDER BY r.id",
            (RUN_STATE_TAG,),
        )
    except psycopg2.errors.UndefinedTable:
        return []
    return cursor.fetchall()


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


def test_daemon_builds_and_refreshes_on_postgres_like_sqlite(
    tmp_path, small_corpus, postgres_server, reference_build, scaleout
) -> None:
    home, output = tmp_path / "dagster_home", tmp_path / "pg_output"
    home.mkdir()
    shutil.copy(scaleout.REPO_ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    env = scaleout.server_env(
        DAGSTER_HOME=str(home),
        DEEPECG_RUNS=str(small_corpus),
        DEEPECG_OUTPUT=str(output),
        **{SENSOR_INTERVAL_ENV: TEST_SENSOR_INTERVAL},
        **postgres_server.dagster_env(),
    )
    log = tmp_path / "daemon.log"
    connection = postgres_server.connect()
    cursor = connection.cursor()

    def finished_sensor_runs(count: int):
        def check() -> bool:
            runs = _sensor_runs(cursor)
            failed = [run for run in runs if run[1] in FAILED]
            assert not failed, f"sensor run(s) failed: {failed}\n{scaleout.log_tail(log)}"
            return len(runs) == count and all(status == "SUCCESS" for _, status, _ in runs)

        return check

    def nothing_in_flight() -> bool:
        cursor.execute("SELECT status FROM runs")
        return all(status in FINISHED for (status,) in cursor.fetchall())

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
        datasets = len(SMALL_CORPUS_DATASETS)
        _wait(finished_sensor_runs(datasets), daemon, log, "the first tick's build", scaleout)
        _wait(nothing_in_flight, daemon, log, "the cross-dataset runs", scaleout)
        cursor.execute("SELECT run_id FROM runs")
        first_build = {run_id for (run_id,) in cursor.fetchall()}
        scaleout.copy_bundled_runs(small_corpus, ADDED_PREFIX, seeds=(ADDED_SEED,))
        _wait(finished_sensor_runs(datasets + 1), daemon, log, "the added run", scaleout)
        _wait(nothing_in_flight, daemon, log, "the runs in flight", scaleout)
    finally:
        scaleout.stop_process_group(daemon)

    *firsts, (refresh, _, refresh_state) = _sensor_runs(cursor)
    first_ids = [run_id for run_id, _, _ in firsts]
    assert refresh_state not in {state for _, _, state in firsts}
    cursor.execute(
        "SELECT run_id, key, value FROM run_tags WHERE run_id IN %s AND key = %s",
        ((*first_ids, refresh), "dagster/sensor_name"),
    )
    assert {(run, value) for run, _, value in cursor.fetchall()} == {
        (run_id, "new_runs_sensor") for run_id in (*first_ids, refresh)
    }

    def materialized_in(run_ids) -> set[str]:
        """The assets the runs materialised; each went through the queue, and checks ran."""
        found, all_types = set(), set()
        for run_id in run_ids:
            cursor.execute(
                "SELECT dagster_event_type, asset_key FROM event_logs WHERE run_id = %s",
                (run_id,),
            )
            rows = cursor.fetchall()
            types = {event_type for event_type, _ in rows}
            assert types >= QUEUED_RUN_EVENTS, "the run went through the queue, the daemon ran it"
            all_types |= types
            found |= {
                "/".join(json.loads(key))
                for kind, key in rows
                if kind == dg.DagsterEventType.ASSET_MATERIALIZATION.value
            }
        assert dg.DagsterEventType.ASSET_CHECK_EVALUATION.value in all_types
        return found

    every_asset = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert materialized_in(first_build) == every_asset, "the first build built everything"
    assert materialized_in([refresh]) == every_asset, "the refresh: its dataset and the combines"
    cursor.execute(
        "SELECT DISTINCT partition FROM event_logs WHERE run_id = %s AND partition IS NOT NULL",
        (refresh,),
    )
    added_key = dataset_key(ADDED_PREFIX.split("_", 1)[1])
    assert [partition for (partition,) in cursor.fetchall()] == [added_key]
    assert set(PER_DATASET_ASSETS) <= every_asset

    cursor.execute("SELECT status, tick_body FROM job_ticks ORDER BY id")
    bodies = [(status, json.loads(body)) for status, body in cursor.fetchall()]
    # Dagster stores a tick's instigator name under its older field name, job_name.
    ticks = [(status, body) for status, body in bodies if body["job_name"] == "new_runs_sensor"]
    launched = [body["run_ids"] for status, body in ticks if status == "SUCCESS"]
    assert [sorted(ids) for ids in launched] == [sorted(first_ids), [refresh]]
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
    scaleout.assert_same_outputs(output, reference_build(small_corpus))
