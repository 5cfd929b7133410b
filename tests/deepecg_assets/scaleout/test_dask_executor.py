"""``deepecg_assets.distributed``: every step on a Dask worker, the same outputs as in-process.

The test starts a scheduler and two worker processes on loopback, runs the
command of ``deploy/README.md`` (``dagster asset materialize -m
deepecg_assets.distributed --select '*'``) against a persistent SQLite
instance, with the output folder given as a ``file://`` URL of storage the
workers share, and reads the run's events back from the instance.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import dagster as dg
import pytest

from deepecg_assets.distributed import DASK_SCHEDULER_ENV

#: They start servers and build the corpus more than once (tens of seconds).
pytestmark = pytest.mark.slow
#: Seconds the distributed build may take before the test gives up on it.
BUILD_TIMEOUT_SECONDS = 300


@pytest.fixture
def shared_output(tmp_path: Path) -> Path:
    return tmp_path / "shared" / "deepecg_output"


@pytest.fixture
def dask_cluster_env(small_corpus: Path, shared_output: Path) -> dict[str, str]:
    """The workers read the runs and write the frames where the run's own process does."""
    return {"DEEPECG_RUNS": str(small_corpus), "DEEPECG_OUTPUT": shared_output.as_uri()}


def test_steps_run_on_the_workers_and_build_the_in_process_outputs(
    tmp_path, small_corpus, shared_output, dask_cluster, dask_cluster_env, reference_build, scaleout
) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = scaleout.server_env(
        DAGSTER_HOME=str(home), **{DASK_SCHEDULER_ENV: dask_cluster.address}, **dask_cluster_env
    )
    command = [scaleout.venv_command("dagster"), "asset", "materialize"]
    command += ["-m", "deepecg_assets.distributed", "--select", "*"]
    with subprocess.Popen(
        command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as cli:
        log, _ = cli.communicate(timeout=BUILD_TIMEOUT_SECONDS)
    assert cli.returncode == 0, log[-6000:]

    with dg.DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.SUCCESS
        events = [entry.dagster_event for entry in instance.all_logs(run.run_id)]
    events = [event for event in events if event is not None]
    (run_start,) = [e for e in events if e.event_type == dg.DagsterEventType.RUN_START]
    assert run_start.pid == cli.pid, "the run itself ran in the command's process"
    step_events = [e for e in events if e.is_step_event]
    step_pids = {e.pid for e in step_events}
    assert step_pids <= dask_cluster.worker_pids, (
        f"steps ran in {step_pids}, not only in the workers {set(dask_cluster.worker_pids)}"
    )
    assert len(step_pids) == len(dask_cluster.worker_pids), "both workers executed steps"
    succeeded = {e.step_key for e in events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}
    started = {e.step_key for e in events if e.event_type == dg.DagsterEventType.STEP_START}
    assert succeeded == started and "discovered_runs" in succeeded

    scaleout.assert_same_outputs(shared_output, reference_build(small_corpus))
