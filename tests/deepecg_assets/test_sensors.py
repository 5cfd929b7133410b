"""new_runs_sensor on a real instance, and eager automation for first builds and refreshes."""

from __future__ import annotations

import dagster as dg
import pytest

from deepecg_assets.definitions import defs
from deepecg_assets.resources import OutputFolderResource, RunRootsResource
from deepecg_assets.sensors import (
    SENSOR_INTERVAL_ENV,
    SENSOR_INTERVAL_SECONDS,
    new_runs_sensor,
    sensor_interval_seconds,
)
from deepecgkit.rundir.write import write_run_directory


def tick(platform, cursor: str | None) -> dg.SensorResult:
    context = dg.build_sensor_context(
        instance=platform.instance,
        cursor=cursor,
        resources={"run_roots": RunRootsResource(), "output_folder": OutputFolderResource()},
    )
    return new_runs_sensor(context)


def add_run(platform, name: str, seed: int) -> None:
    write_run_directory(
        platform.runs / name, model="cnn", dataset="afib", metrics={"f1": 0.7}, seed=seed
    )


def test_first_tick_requests_unchanged_tree_skips(platform) -> None:
    first = tick(platform, None)
    assert len(first.run_requests) == 1
    assert first.run_requests[0].run_key == f"start->{first.cursor}"
    assert len(first.cursor) == 16, "the cursor is a short digest, not the listing"
    second = tick(platform, first.cursor)
    assert not second.run_requests
    assert "no run directory added, changed or removed: 60 run(s)" in str(second.skip_reason)
    retried = tick(platform, None)
    assert retried.run_requests[0].run_key == first.run_requests[0].run_key, (
        "a retried tick asks for the same run key, which Dagster launches once"
    )


def test_adding_one_run_requests_exactly_one_run(platform) -> None:
    cursor = tick(platform, None).cursor
    add_run(platform, "cnn_afib_seed11", 11)
    result = tick(platform, cursor)
    assert len(result.run_requests) == 1
    assert result.run_requests[0].run_key == f"{cursor}->{result.cursor}"
    assert result.cursor != cursor
    assert not tick(platform, result.cursor).run_requests


def test_removed_and_rewritten_runs_trigger(platform) -> None:
    cursor = tick(platform, None).cursor
    victim = platform.runs / "cnn_afib_seed0" / "classification_metrics.csv"
    content = victim.read_bytes()
    victim.unlink()
    removed = tick(platform, cursor)
    assert len(removed.run_requests) == 1
    victim.write_bytes(content)
    restored = tick(platform, removed.cursor)
    assert len(restored.run_requests) == 1
    assert restored.run_requests[0].run_key != removed.run_requests[0].run_key


def test_half_written_metrics_file_is_retried_not_lost(platform) -> None:
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
    assert len(ready.run_requests) == 1

    job = defs.resolve_implicit_global_asset_job_def()
    run_result = job.execute_in_process(
        instance=platform.instance, asset_selection=[dg.AssetKey("discovered_runs")]
    )
    stored = (platform.output / "frames" / "discovered_runs.csv").read_text()
    assert run_result.success and "cnn_afib_seed12" in stored


def test_missing_root_skips_with_reason(platform, monkeypatch) -> None:
    monkeypatch.setenv("DEEPECG_RUNS", str(platform.runs / "gone"))
    result = tick(platform, None)
    assert not result.run_requests
    assert "does not exist" in str(result.skip_reason)


ALL_KEYS = [
    dg.AssetKey(name)
    for name in (
        "run_metrics",
        "reconciled_runs",
        "averaging_conflicts",
        "aggregates",
        "rank_distribution",
        "tau_summary",
        "flip_grid",
        "rank_claims",
        "results_tables",
        "rank_table",
        "tau_table",
        "flip_table",
    )
]


def _settle(platform, cursor) -> tuple[object, set[str]]:
    """Evaluate eager automation (as the daemon does, with its cursor) until it requests nothing.

    Every request is executed in-process; returns the new cursor and what was refreshed.
    """
    job = defs.resolve_implicit_global_asset_job_def()
    refreshed: set[str] = set()
    for _ in range(10):
        evaluation = dg.evaluate_automation_conditions(
            defs=defs, instance=platform.instance, cursor=cursor
        )
        cursor = evaluation.cursor
        requested = [key for key in ALL_KEYS if evaluation.get_num_requested(key)]
        if not requested:
            return cursor, refreshed
        refreshed |= {key.to_user_string() for key in requested}
        result = job.execute_in_process(instance=platform.instance, asset_selection=requested)
        assert result.success
    raise AssertionError("automation did not settle")


def test_eager_automation_fires_for_first_build_and_refresh(platform) -> None:
    job = defs.resolve_implicit_global_asset_job_def()
    discover = [dg.AssetKey("discovered_runs")]
    baseline, nothing = _settle(platform, None)
    assert nothing == set(), "nothing is built before the runs are discovered"

    job.execute_in_process(instance=platform.instance, asset_selection=discover)
    cursor, first = _settle(platform, baseline)
    downstream = {key.to_user_string() for key in ALL_KEYS}
    assert first == downstream

    add_run(platform, "cnn_afib_seed13", 13)
    job.execute_in_process(instance=platform.instance, asset_selection=discover)
    _, refresh = _settle(platform, cursor)
    assert refresh == downstream
    assert "cnn_afib_seed13" in (platform.output / "frames" / "run_metrics.csv").read_text()


def test_sensor_interval_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(SENSOR_INTERVAL_ENV, raising=False)
    assert sensor_interval_seconds() == SENSOR_INTERVAL_SECONDS
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, " 5 ")
    assert sensor_interval_seconds() == 5
    for bad in ("0", "-3", "1.5", "soon"):
        monkeypatch.setenv(SENSOR_INTERVAL_ENV, bad)
        with pytest.raises(ValueError, match="positive whole number"):
            sensor_interval_seconds()
