"""``deepecg_assets.distributed``: every step on a Dask worker, the same outputs as in-process.

The test starts a scheduler and two worker processes on loopback and
materialises the graph with ``dagster asset materialize -m
deepecg_assets.distributed`` against a persistent SQLite instance, with the
output folder and the frame store's base path (the Parquet IO manager's
``base_path``, in the run config) given as ``file://`` URLs of storage the
workers share, then reads the runs' events back from the instance. The per-dataset assets are
partitioned by dataset, and a CLI selection cannot mix partitions
definitions, so the build is the build command's steps spelled out as CLI
runs: discovery, the dataset partitions registered from what it found
(:func:`deepecg_assets.build.sync_dataset_partitions`), the per-dataset assets
over the whole partition range in one run (a single-run backfill, which
dagster-dask's own executor cannot send to Dask: see
:class:`deepecg_assets.distributed.StepCall`), then the cross-dataset assets.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from deepecg_assets.build import sync_dataset_partitions
from deepecg_assets.definitions import defs
from deepecg_assets.distributed import DASK_SCHEDULER_ENV
from deepecg_assets.partitions import PARTITIONS_METADATA, PER_DATASET_ASSETS
from deepecg_assets.sensors import DISCOVERY_ASSET

#: They start servers and build the corpus more than once (tens of seconds).
pytestmark = pytest.mark.slow
#: Seconds the distributed build may take before the test gives up on it.
BUILD_TIMEOUT_SECONDS = 300


@pytest.fixture
def shared_output(tmp_path: Path) -> Path:
    return tmp_path / "shared" / "deepecg_output"


@pytest.fixture
def shared_frames(tmp_path: Path) -> Path:
    """The frame store's base path: shared storage apart from the output folder."""
    return tmp_path / "shared" / "frames"


@pytest.fixture
def dask_cluster_env(small_corpus: Path, shared_output: Path) -> dict[str, str]:
    """The workers read the runs and write the frames where the run's own process does."""
    return {"DEEPECG_RUNS": str(small_corpus), "DEEPECG_OUTPUT": shared_output.as_uri()}


def test_steps_run_on_the_workers_and_build_the_in_process_outputs(
    tmp_path,
    small_corpus,
    shared_output,
    shared_frames,
    dask_cluster,
    dask_cluster_env,
    reference_build,
    scaleout,
) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = scaleout.server_env(
        DAGSTER_HOME=str(home), **{DASK_SCHEDULER_ENV: dask_cluster.address}, **dask_cluster_env
    )
    # Run config, so the workers read it from the run: they share nothing with this process.
    config = {"resources": {"io_manager": {"config": {"base_path": shared_frames.as_uri()}}}}
    materialize = functools.partial(_materialize, scaleout, env, tmp_path, config=config)
    cli_pids = [materialize(DISCOVERY_ASSET)]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(DISCOVERY_ASSET))
        keys = list(event.asset_materialization.metadata[PARTITIONS_METADATA].value)
        order = sync_dataset_partitions(instance, keys, frames_dir=shared_frames)
    assert order, "discovery found datasets"
    per_dataset = ",".join(PER_DATASET_ASSETS)
    cli_pids.append(materialize(per_dataset, f"{order[0]}...{order[-1]}"))
    every = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    rest = ",".join(sorted(every - set(PER_DATASET_ASSETS) - {DISCOVERY_ASSET}))
    cli_pids.append(materialize(rest))
    readme = (scaleout.REPO_ROOT / "deploy" / "README.md").read_text(encoding="utf-8")
    assert all(f"\n{selection}\n" in readme for selection in (per_dataset, rest)), (
        "deploy/README.md shows other selections than the commands this test runs"
    )

    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = sorted(instance.get_run_records(), key=lambda record: record.create_timestamp)
        runs = [record.dagster_run for record in records]
        assert len(runs) == len(cli_pids)
        assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs)
        logs = [[entry.dagster_event for entry in instance.all_logs(r.run_id)] for r in runs]
    events = [event for run_events in logs for event in run_events if event is not None]
    run_starts = [e for e in events if e.event_type == dg.DagsterEventType.RUN_START]
    assert sorted(e.pid for e in run_starts) == sorted(cli_pids), (
        "each run itself ran in its command's process"
    )
    step_events = [e for e in events if e.is_step_event]
    step_pids = {e.pid for e in step_events}
    assert step_pids <= dask_cluster.worker_pids, (
        f"steps ran in {step_pids}, not only in the workers {set(dask_cluster.worker_pids)}"
    )
    assert len(step_pids) == len(dask_cluster.worker_pids), "both workers executed steps"
    succeeded = {e.step_key for e in events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}
    started = {e.step_key for e in events if e.event_type == dg.DagsterEventType.STEP_START}
    assert succeeded == started and {"discovered_runs", "dataset_analysis"} <= succeeded

    scaleout.assert_same_outputs(shared_output, reference_build(small_corpus), frames=shared_frames)


def _materialize(
    scaleout,
    env: dict[str, str],
    cwd: Path,
    selection: str,
    partition_range: str = "",
    *,
    config: dict,
) -> int:
    """``dagster asset materialize`` of ``selection`` on the Dask code location; its pid."""
    command = [scaleout.venv_command("dagster"), "asset", "materialize"]
    command += ["-m", "deepecg_assets.distributed", "--select", selection]
    command += ["--config-json", json.dumps(config)]
    if partition_range:
        command += ["--partition-range", partition_range]
    with subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as cli:
        log, _ = cli.communicate(timeout=BUILD_TIMEOUT_SECONDS)
    assert cli.returncode == 0, f"{selection}: {log[-6000:]}"
    return cli.pid
