"""new_runs_sensor on a real instance: per-dataset refreshes, partitions, eager combines."""

from __future__ import annotations

import io

import dagster as dg
import pandas as pd
import pytest

from deepecg_assets import sensors
from deepecg_assets.assets.discovery import SCAN_PROVEN, SCAN_TICKED, SCAN_WALKED
from deepecg_assets.build import materialize_everything
from deepecg_assets.definitions import defs
from deepecg_assets.partitions import PER_DATASET_ASSETS
from deepecg_assets.resources import OutputFolderResource, RunRootsResource
from deepecg_assets.sensors import (
    SENSOR_INTERVAL_ENV,
    SENSOR_INTERVAL_SECONDS,
    daemon_minimum_interval,
    new_runs_sensor,
    sensor_interval_seconds,
)
from deepecgkit.rundir.tree_index import TreeIndex
from deepecgkit.rundir.write import write_run_directory

DATASETS = ["afib", "ptbxl", "sleep"]
FLIP_GRID = dg.AssetKey("flip_grid")


def tick(platform, cursor: str | None) -> dg.SensorResult:
    context = dg.build_sensor_context(
        instance=platform.instance,
        cursor=cursor,
        definitions=defs,
        resources={"run_roots": RunRootsResource(), "output_folder": OutputFolderResource()},
    )
    return new_runs_sensor(context)


def add_run(platform, name: str, seed: int, dataset: str = "afib") -> None:
    write_run_directory(
        platform.runs / name, model="cnn", dataset=dataset, metrics={"f1": 0.7}, seed=seed
    )


def build(platform) -> None:
    """The README's command on the platform's instance (outside the daemon)."""
    assert materialize_everything(platform.instance, verbose=False, stream=io.StringIO()).success


def execute(platform, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=platform.instance,
        asset_selection=list(request.asset_selection or []),
        partition_key=request.partition_key,
        tags=request.tags,
    )
    assert result.success
    return result


def test_first_tick_on_a_fresh_instance_adds_every_dataset(platform) -> None:
    first = tick(platform, None)
    (added,) = first.dynamic_partitions_requests
    assert isinstance(added, dg.AddDynamicPartitionsRequest)
    assert sorted(added.partition_keys) == DATASETS
    assert sorted(r.partition_key for r in first.run_requests) == DATASETS
    for request in first.run_requests:
        assert FLIP_GRID not in request.asset_selection, "several datasets: combined once, later"
        assert set(PER_DATASET_ASSETS) <= {k.to_user_string() for k in request.asset_selection}
    assert len(first.cursor) == 16, "the cursor is a short digest, not the listing"
    second = tick(platform, first.cursor)
    assert not second.run_requests and not second.dynamic_partitions_requests
    assert "no run directory added, changed or removed: 60 run(s)" in str(second.skip_reason)
    retried = tick(platform, None)
    assert [r.run_key for r in retried.run_requests] == [r.run_key for r in first.run_requests], (
        "a retried tick asks for the same run keys, which Dagster launches once"
    )


def test_after_a_build_outside_the_daemon_nothing_is_launched(platform) -> None:
    build(platform)
    result = tick(platform, None)
    assert not result.run_requests and not result.dynamic_partitions_requests
    assert "every dataset is built from the current runs" in str(result.skip_reason)


def test_adding_one_run_refreshes_its_dataset_and_the_combines_in_one_run(platform) -> None:
    build(platform)
    cursor = tick(platform, None).cursor
    add_run(platform, "cnn_afib_seed11", 11)
    result = tick(platform, cursor)
    (request,) = result.run_requests
    assert request.partition_key == "afib"
    assert FLIP_GRID in request.asset_selection
    assert request.run_key.startswith("afib:") and "->" in request.run_key
    assert result.cursor != cursor
    assert not tick(platform, result.cursor).run_requests
    execute(platform, request)
    assert not tick(platform, None).run_requests, "the instance now says afib is current"


def _parsed_by_discovery(platform, request: dg.RunRequest) -> int:
    (event,) = execute(platform, request).asset_materializations_for_node("discovered_runs")
    return event.metadata["runs_parsed"].value


def test_a_tick_saves_the_run_cache_only_for_many_parsed_runs(platform) -> None:
    """One new run: the tick leaves the cache file alone (discovery parses the run); a new
    sweep of at least SAVED_CACHE_PARSED_SHARE of the runs: the tick saves what it parsed."""
    build(platform)
    cache_file = OutputFolderResource().cache_file()
    cursor = tick(platform, None).cursor
    saved = cache_file.read_bytes()
    add_run(platform, "cnn_afib_seed11", 11)
    result = tick(platform, cursor)
    assert cache_file.read_bytes() == saved, "one parsed run: the 60-run cache is not rewritten"
    (request,) = result.run_requests
    assert _parsed_by_discovery(platform, request) == 1

    saved = cache_file.read_bytes()
    sweep = range(20, 20 + int(sensors.SAVED_CACHE_PARSED_SHARE * 61) + 1)
    for seed in sweep:
        add_run(platform, f"cnn_afib_seed{seed}", seed)
    (request,) = tick(platform, result.cursor).run_requests
    assert cache_file.read_bytes() != saved
    assert _parsed_by_discovery(platform, request) == 0, "the tick's parsed runs were saved"


def test_a_no_change_tick_is_answered_from_the_tree_index(platform, monkeypatch) -> None:
    """The full scan saves the index; an unchanged tree is then proven without the run cache.

    While the run cache cannot be loaded at all, a tick on an unchanged tree
    still says nothing changed; once a run is added, the tick takes the full
    path again (and needs the cache).
    """
    first = tick(platform, None)
    assert (platform.output / "cache" / "tree_index.json").is_file()

    class NoCache(sensors.RunCache):
        @classmethod
        def load(cls, path):
            raise AssertionError("the quick path must not load the run cache")

    with monkeypatch.context() as patched:
        patched.setattr(sensors, "RunCache", NoCache)
        second = tick(platform, first.cursor)
        assert "no run directory added, changed or removed: 60 run(s)" in str(second.skip_reason)
        add_run(platform, "cnn_afib_seed12", 12)
        with pytest.raises(AssertionError, match="must not load the run cache"):
            tick(platform, first.cursor)
    third = tick(platform, first.cursor)
    assert third.cursor != first.cursor and "afib" in {r.partition_key for r in third.run_requests}


def test_one_changed_dataset_while_a_run_is_in_flight_leaves_the_combines_to_automation(
    platform,
) -> None:
    """With several runs at once (the queued coordinator), a run with the combines would
    run them next to the run in flight: twice, one of them reading a partition being
    rewritten."""
    build(platform)
    cursor = tick(platform, None).cursor
    job = defs.resolve_implicit_global_asset_job_def()
    running = platform.instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTED)
    add_run(platform, "cnn_afib_seed11", 11)
    (request,) = tick(platform, cursor).run_requests
    assert request.partition_key == "afib"
    assert FLIP_GRID not in request.asset_selection, "the eager combines run once, later"
    platform.instance.report_run_canceled(running)
    (alone,) = tick(platform, cursor).run_requests
    assert FLIP_GRID in alone.asset_selection, "nothing in flight: one run with the combines"


def test_removed_and_rewritten_runs_trigger(platform) -> None:
    build(platform)
    cursor = tick(platform, None).cursor
    victim = platform.runs / "cnn_afib_seed0" / "classification_metrics.csv"
    content = victim.read_bytes()
    victim.unlink()
    removed = tick(platform, cursor)
    assert [r.partition_key for r in removed.run_requests] == ["afib"]
    victim.write_bytes(content)
    restored = tick(platform, removed.cursor)
    assert [r.partition_key for r in restored.run_requests] == ["afib"]
    assert restored.run_requests[0].run_key != removed.run_requests[0].run_key


def test_a_dataset_that_is_gone_loses_its_partition_and_frames(platform) -> None:
    build(platform)
    cursor = tick(platform, None).cursor
    stored = platform.output / "frames" / "aggregates" / "sleep.parquet"
    assert stored.is_file()
    for run in platform.runs.iterdir():
        if "sleep" in run.name:
            for path in run.iterdir():
                path.unlink()
            run.rmdir()
    result = tick(platform, cursor)
    (deleted,) = result.dynamic_partitions_requests
    assert isinstance(deleted, dg.DeleteDynamicPartitionsRequest)
    assert list(deleted.partition_keys) == ["sleep"]
    (request,) = result.run_requests
    assert request.partition_key is None and FLIP_GRID in request.asset_selection
    assert not stored.exists(), "a clean build holds no frames of a dataset that is gone"


def test_half_written_metrics_file_is_retried_not_lost(platform) -> None:
    build(platform)
    cursor = tick(platform, None).cursor
    run = platform.runs / "cnn_afib_seed12"
    run.mkdir()
    metrics = run / "classification_metrics.csv"
    metrics.write_text("model,dataset,f1,average\n")  # the writer has not reached the row yet
    waiting = tick(platform, cursor)
    assert not waiting.run_requests
    assert "1 run(s) not readable yet" in str(waiting.skip_reason)
    metrics.write_text("model,dataset,f1,average\ncnn,afib,0.71,macro\n")
    ready = tick(platform, cursor)
    (request,) = ready.run_requests
    execute(platform, request)
    assert "cnn_afib_seed12" in set(platform.frame("run_metrics")["run_dir"].map(str).str[-15:])


def test_missing_root_skips_with_reason(platform, monkeypatch) -> None:
    monkeypatch.setenv("DEEPECG_RUNS", str(platform.runs / "gone"))
    result = tick(platform, None)
    assert not result.run_requests
    assert "does not exist" in str(result.skip_reason)


def _settle(platform, cursor) -> tuple[object, set[str]]:
    """Evaluate eager automation (as the daemon does, with its cursor) until it requests nothing.

    Every request is executed in-process; returns the new cursor and what was refreshed.
    """
    job = defs.resolve_implicit_global_asset_job_def()
    keys = defs.resolve_asset_graph().get_all_asset_keys()
    refreshed: set[str] = set()
    for _ in range(10):
        evaluation = dg.evaluate_automation_conditions(
            defs=defs, instance=platform.instance, cursor=cursor
        )
        cursor = evaluation.cursor
        requested = [key for key in keys if evaluation.get_num_requested(key)]
        if not requested:
            return cursor, refreshed
        refreshed |= {key.to_user_string() for key in requested}
        result = job.execute_in_process(instance=platform.instance, asset_selection=requested)
        assert result.success
    raise AssertionError("automation did not settle")


def test_eager_combines_run_once_after_several_dataset_refreshes(platform) -> None:
    build(platform)
    cursor, nothing = _settle(platform, None)
    assert nothing == set(), "a complete build leaves automation nothing to do"
    sensor_cursor = tick(platform, None).cursor
    add_run(platform, "cnn_afib_seed13", 13)
    add_run(platform, "cnn_sleep_seed13", 13, dataset="sleep")
    result = tick(platform, sensor_cursor)
    assert sorted(r.partition_key for r in result.run_requests) == ["afib", "sleep"]
    for request in result.run_requests:
        execute(platform, request)
    _, combined = _settle(platform, cursor)
    assert "flip_grid" in combined and "flip_table" in combined and "rank_table" in combined
    assert not set(PER_DATASET_ASSETS) & combined, "automation never recomputes a partition"
    assert "cnn_afib_seed13" in "".join(platform.frame("run_metrics")["run_dir"].map(str))


def _seconds_between_ticks(minimum: int, drift: float) -> float:
    """When Dagster's daemon (a loop every 5 s, each ``drift`` s off) ticks again after a tick."""
    from dagster._daemon.sensor import MIN_INTERVAL_LOOP_TIME

    loop = 1
    while loop * MIN_INTERVAL_LOOP_TIME + drift < minimum:  # the sensor is not due yet
        loop += 1
    return loop * MIN_INTERVAL_LOOP_TIME


def test_the_sensor_ticks_at_the_daemon_loop_that_ends_its_interval() -> None:
    """A minimum interval equal to the interval misses the loop that comes a hair early."""
    assert new_runs_sensor.minimum_interval_seconds == daemon_minimum_interval(
        sensor_interval_seconds()
    )
    for interval, expected in ((1, 5), (5, 5), (7, 10), (10, 10), (60, 60)):
        for drift in (-0.05, -0.001, 0.001, 0.05):
            assert _seconds_between_ticks(daemon_minimum_interval(interval), drift) == expected
    assert _seconds_between_ticks(5, -0.001) == 10, "the interval itself waits a loop more"


def test_sensor_interval_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(SENSOR_INTERVAL_ENV, raising=False)
    assert sensor_interval_seconds() == SENSOR_INTERVAL_SECONDS
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, " 5 ")
    assert sensor_interval_seconds() == 5
    for bad in ("0", "-3", "1.5", "soon"):
        monkeypatch.setenv(SENSOR_INTERVAL_ENV, bad)
        with pytest.raises(ValueError, match="positive whole number"):
            sensor_interval_seconds()


def test_the_requested_discovery_takes_the_ticks_scan_and_a_later_change_is_the_next_ticks(
    platform,
) -> None:
    """A requested run names the index its tick saved; its discovery takes that scan (no
    proof, nothing walked). A run written after the tick is the next tick's: it requests
    afib again, and the refreshed frame is the one a discovery without any index gives."""
    build(platform)
    cursor = tick(platform, None).cursor
    add_run(platform, "cnn_afib_seed11", 11)
    result = tick(platform, cursor)
    (request,) = result.run_requests
    index = TreeIndex.load(OutputFolderResource().tree_index_file())
    assert index is not None and request.tags[sensors.TREE_INDEX_TAG] == index.checksum
    late = platform.runs / "cnn_afib_seed12"
    add_run(platform, late.name, 12)
    ran = execute(platform, request)
    (event,) = ran.asset_materializations_for_node("discovered_runs")
    assert event.metadata["scan"].value == SCAN_TICKED
    assert str(late) not in set(platform.frame("discovered_runs")["run_dir"]), "as of the tick"

    (again,) = tick(platform, result.cursor).run_requests
    assert again.partition_key == "afib" and again.tags[sensors.TREE_INDEX_TAG] != index.checksum
    execute(platform, again)
    refreshed = platform.frame("discovered_runs")
    assert str(late) in set(refreshed["run_dir"])
    OutputFolderResource().tree_index_file().unlink()
    walked = platform.materialize(["discovered_runs"])
    (event,) = walked.asset_materializations_for_node("discovered_runs")
    assert event.metadata["scan"].value == SCAN_WALKED
    pd.testing.assert_frame_equal(platform.frame("discovered_runs"), refreshed)


def test_a_run_whose_index_was_replaced_proves_the_tree_instead(platform) -> None:
    """The tagged index is no longer the saved one (a later tick saved another): the
    discovery proves the saved index, as any run not requested by the sensor does."""
    build(platform)
    cursor = tick(platform, None).cursor
    add_run(platform, "cnn_afib_seed11", 11)
    (request,) = tick(platform, cursor).run_requests
    stale = dg.RunRequest(
        partition_key=request.partition_key,
        asset_selection=request.asset_selection,
        tags={**request.tags, sensors.TREE_INDEX_TAG: "0" * 64},
    )
    (event,) = execute(platform, stale).asset_materializations_for_node("discovered_runs")
    assert event.metadata["scan"].value == SCAN_PROVEN
