"""Materialise the whole graph in-process and compare every stored frame with the library.

The tests that read a full build share one per module (``built_platform``);
those that change it after the build work on a copy of it (``platform_copy``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from deepecg_assets.definitions import defs
from deepecg_assets.parquet_frames import frame_from_parquet, frame_to_parquet
from deepecg_assets.partitions import PER_DATASET_ASSETS
from deepecgkit.analysis.aggregation import aggregate_runs, reconcile_averaging
from deepecgkit.analysis.latex import (
    flip_survival_table,
    rank_distribution_table,
    results_table,
    tau_table,
)
from deepecgkit.analysis.ranking import (
    all_flip_tests,
    evaluate_rank_claim,
    paired_differences,
    rank_distribution,
    tau_summary,
)
from deepecgkit.rundir.read import discover_runs
from deepecgkit.rundir.records import frame_to_records, records_to_frame, runs_to_frame
from deepecgkit.rundir.write import write_run_directory
from tests.deepecg_assets.run_events import check_evaluations, materializations, materialized_keys

#: Spelled out on purpose: the asset graph of the contract (README, "Assets"); the
#: code derives its lists from ``defs``, this test pins what ``defs`` must hold.
CONTRACT_ASSETS = {
    "discovered_runs",
    "run_metrics",
    "reconciled_runs",
    "averaging_conflicts",
    "aggregates",
    "rank_distribution",
    "tau_summary",
    "paired_differences",
    "flip_grid",
    "rank_claims",
    "results_tables",
    "results_index",
    "rank_table",
    "tau_table",
    "flip_table",
    "statistical_report",
    "transfer_matrix",
    "transfer_table",
}
FRAME_ASSETS = CONTRACT_ASSETS - {
    "transfer_matrix",
    "transfer_table",
    "results_tables",
    "results_index",
    "rank_table",
    "tau_table",
    "flip_table",
    "statistical_report",
}
#: Seconds the ``dagster`` command may take on a loaded machine.
CLI_TIMEOUT_SECONDS = 300
BUILT_PLATFORM_RUN_CONFIG = CLAIM_CONFIG = {
    "resources": {
        "analysis": {
            "config": {
                "claims": [{"model": "cnn", "dataset_best": "afib", "dataset_worst": "ptbxl"}]
            }
        }
    }
}


def library_frames(runs: Path) -> dict[str, pd.DataFrame]:
    """Every frame of the graph computed directly with deepecgkit."""
    records, _ = discover_runs([runs], recursive=True)
    long_frame = runs_to_frame(records)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        reconciled, conflicts = reconcile_averaging(long_frame)
    claim = evaluate_rank_claim(reconciled, "cnn", "afib", "ptbxl")
    return {
        "discovered_runs": records_to_frame(records),
        "run_metrics": long_frame,
        "reconciled_runs": reconciled,
        "averaging_conflicts": conflicts,
        "aggregates": aggregate_runs(reconciled),
        "rank_distribution": rank_distribution(reconciled),
        "tau_summary": tau_summary(reconciled),
        "paired_differences": paired_differences(reconciled),
        "flip_grid": all_flip_tests(reconciled),
        "claim": claim,
    }


def test_definitions_hold_the_contract() -> None:
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert keys >= CONTRACT_ASSETS
    assert defs.resolve_sensor_def("new_runs_sensor") is not None
    assert defs.resolve_schedule_def("nightly_refresh") is not None
    for name in keys - {"discovered_runs"}:
        node = graph.get(dg.AssetKey(name))
        if name in PER_DATASET_ASSETS:
            # Refreshed per dataset by the run sensor: an eager condition would
            # recompute every dataset whenever discovered_runs changed.
            assert node.partitions_def is not None, f"{name} is not partitioned by dataset"
            assert node.automation_condition is None, f"{name} would refresh every dataset"
        else:
            assert node.automation_condition is not None, f"{name} has no automation condition"


def test_full_build_matches_the_library(built_platform) -> None:
    platform, result = built_platform.platform, built_platform.result
    assert result.success
    assert materialized_keys(result) == CONTRACT_ASSETS
    assert built_platform.partitions == ["afib", "ptbxl", "sleep"]
    expected = library_frames(platform.runs)
    for asset in FRAME_ASSETS - {"rank_claims"}:
        stored = platform.frame(asset)
        pd.testing.assert_frame_equal(
            stored.reset_index(drop=True),
            expected[asset].reset_index(drop=True),
            check_exact=True,
            obj=asset,
        )
    for asset in set(PER_DATASET_ASSETS) & FRAME_ASSETS:
        stored = sorted(p.name for p in (platform.frames_dir / asset).iterdir())
        assert stored == ["afib.parquet", "ptbxl.parquet", "sleep.parquet"], asset
    claims = platform.frame("rank_claims")
    assert claims.loc[0, "verdict"] == expected["claim"]["verdict"]
    assert claims.loc[0, "n_components"] == expected["claim"]["n_components"]
    components = json.loads(claims.loc[0, "components"])
    assert [c["verdict"] for c in components] == [
        c["verdict"] for c in expected["claim"]["components"]
    ]

    tables = platform.output / "tables"
    aggregates = expected["aggregates"]
    for dataset in ("afib", "ptbxl", "sleep"):
        assert (tables / f"results_{dataset}.tex").read_text() == results_table(aggregates, dataset)
    index = json.loads((tables / "results_tables.json").read_text())
    assert index == {f"results_{d}.tex": d for d in ("afib", "ptbxl", "sleep")}
    assert (tables / "rank_distribution.tex").read_text() == rank_distribution_table(
        expected["rank_distribution"], expected["tau_summary"]
    )
    assert (tables / "kendall_tau.tex").read_text() == tau_table(expected["tau_summary"])
    assert (tables / "flip_survival.tex").read_text() == flip_survival_table(expected["flip_grid"])


def test_discovered_runs_round_trip_to_records(platform) -> None:
    records, _ = discover_runs([platform.runs], recursive=True)
    stored = frame_from_parquet(frame_to_parquet(records_to_frame(records)))
    assert frame_to_records(stored) == records


def test_materialisations_carry_metadata(built_platform) -> None:
    platform = built_platform.platform
    events = materializations(built_platform.result)
    for asset in FRAME_ASSETS:
        metadata = events[asset]
        assert "dagster/row_count" in metadata, asset
        if asset in PER_DATASET_ASSETS:
            # Many partitions from one step share one metadata entry: the rows of all.
            assert metadata["dagster/row_count"].value == len(platform.frame(asset)), asset
        else:
            assert "preview" in metadata, asset
            assert Path(metadata["path"].value).is_file(), asset
    discovery = events["discovered_runs"]
    assert discovery["dagster/row_count"].value == 60
    assert discovery["unreadable_count"].value == 0
    assert set(discovery["diagnostics"].value) == {
        "unreadable",
        "no_seed",
        "duplicate",
        "failed",
        "suspect",
    }
    assert events["averaging_conflicts"]["dropped_runs"].value == 1
    assert events["flip_grid"]["fdr_family"].value == "testable"
    assert events["flip_grid"]["fdr_method"].value == "by"
    assert events["flip_grid"]["survives_fdr"].value >= 0
    for table in ("results_tables", "rank_table", "tau_table", "flip_table"):
        paths = [v.value for k, v in events[table].items() if k.startswith("path_")]
        assert paths and all(Path(p).is_file() for p in paths), table
        assert "```latex" in events[table]["preview"].value
        pictures = [v.value for k, v in events[table].items() if k.startswith("image_")]
        assert len(pictures) == len(paths), table
        assert all(p.startswith("![") and "data:image/png;base64," in p for p in pictures), table


def test_one_partition_carries_its_preview(built_platform, platform_copy) -> None:
    assert built_platform.result.success
    platform = platform_copy(built_platform)
    result = platform.materialize(["aggregates"], partitions=["ptbxl"])
    assert result.success
    events = [
        e for e in result.get_asset_materialization_events() if e.asset_key.path == ["aggregates"]
    ]
    assert [e.partition for e in events] == ["ptbxl"]
    metadata = events[0].materialization.metadata
    ptbxl_rows = platform.frame("aggregates").query("dataset == 'ptbxl'")
    assert metadata["dagster/row_count"].value == len(ptbxl_rows)
    assert "ptbxl" in metadata["preview"].value and "afib" not in metadata["preview"].value


def test_flip_table_alone_reuses_the_stored_flip_grid(built_platform, platform_copy) -> None:
    assert built_platform.result.success
    platform = platform_copy(built_platform)
    grid_file = platform.frames_dir / "flip_grid.parquet"
    before = grid_file.stat().st_mtime_ns
    (platform.output / "tables" / "flip_survival.tex").unlink()

    result = platform.materialize(["flip_table"])
    assert result.success
    assert materialized_keys(result) == {"flip_table"}
    steps = {event.step_key for event in result.all_events if event.is_step_start}
    assert steps <= {"flip_table", "flip_table_flip_survival_tex_compiles"}
    loaded = [e for e in result.all_events if e.event_type_value == "LOADED_INPUT"]
    assert [e.event_specific_data.input_name for e in loaded] == ["flip_grid"]
    assert grid_file.stat().st_mtime_ns == before, "flip_grid was not rewritten"
    table = platform.output / "tables" / "flip_survival.tex"
    written = table.read_bytes()

    # The command of issue 12, as a user types it, on an instance that never saw the build:
    # the flip table comes from the stored grid alone.
    table.unlink()
    home = platform.output.parent / "cli_home"
    home.mkdir()
    dagster = Path(sys.executable).with_name("dagster")
    command = [str(dagster), "asset", "materialize", "-m", "deepecg_assets.definitions"]
    cli = subprocess.run(
        [*command, "--select", "flip_table"],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert table.read_bytes() == written
    assert grid_file.stat().st_mtime_ns == before, "flip_grid was not rewritten"


def test_checks_report_with_severities(built_platform) -> None:
    evaluations = check_evaluations(built_platform.result)
    assert evaluations["no_unreadable_or_failed_runs"].passed
    dropped = evaluations["no_dropped_averaging_minorities"]
    assert not dropped.passed and dropped.severity == dg.AssetCheckSeverity.WARN
    bimodal = evaluations["no_bimodal_cells"]
    assert not bimodal.passed and bimodal.severity == dg.AssetCheckSeverity.WARN
    assert "lstm" in json.dumps(bimodal.metadata["cells"].value)
    survival = evaluations["supported_flips_survive_fdr"]
    assert survival.severity == dg.AssetCheckSeverity.WARN
    assert survival.metadata["fdr_method"].value == "by"
    supported, surviving = (survival.metadata[k].value for k in ("supported", "survives_fdr"))
    assert survival.passed == (supported == surviving)
    assert evaluations["flips_nadeau_bengio_applied"].passed, "the corpus records its split sizes"
    for name in (
        "results_tables_compile",
        "rank_distribution_tex_compiles",
        "kendall_tau_tex_compiles",
        "flip_survival_tex_compiles",
    ):
        assert evaluations[name].passed, name
        assert evaluations[name].metadata["checked"].value is True


def test_unreadable_and_failed_runs_fail_the_warn_check(platform) -> None:
    (platform.runs / "broken_seed0").mkdir()
    (platform.runs / "broken_seed0" / "classification_metrics.csv").write_bytes(b"")
    write_run_directory(
        platform.runs / "crashed_seed9",
        model="cnn",
        dataset="afib",
        metrics={"f1": 0.1},
        seed=9,
        returncode=1,
    )
    result = platform.materialize(["discovered_runs"])
    check = next(
        e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    )
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["unreadable_count"].value == 1
    assert check.metadata["failed_count"].value == 1


def test_rediscovery_does_not_reparse_unchanged_runs(platform) -> None:
    first = platform.materialize(["discovered_runs"])
    metadata = first.get_asset_materialization_events()[0].materialization.metadata
    assert metadata["runs_parsed"].value == 60 and metadata["runs_reused"].value == 0
    write_run_directory(
        platform.runs / "cnn_afib_seed7",
        model="cnn",
        dataset="afib",
        metrics={"f1": 0.7},
        seed=7,
    )
    second = platform.materialize(["discovered_runs"])
    metadata = second.get_asset_materialization_events()[0].materialization.metadata
    assert metadata["runs_parsed"].value == 1 and metadata["runs_reused"].value == 60
    assert metadata["dagster/row_count"].value == 61


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_bad_roots_fail_with_one_clear_message(platform, monkeypatch, kind: str) -> None:
    bad = platform.runs.parent / "bad"
    if kind == "file":
        bad.write_text("not a folder")
    monkeypatch.setenv("DEEPECG_RUNS", str(bad))
    result = platform.materialize(["discovered_runs"], raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    data = failure.step_failure_data
    expected = (
        "does not exist" if kind == "missing" else "is a file, not a folder of run directories"
    )
    assert data.user_failure_data.description == f"run root {bad} {expected}"
    assert data.error.cause is None and data.error.context is None


def _root_error_message(root: str) -> str:
    """What :meth:`RunRootsResource.checked_roots` says about ``root`` ("" when it accepts it)."""
    from deepecg_assets.resources import RunRootError, RunRootsResource

    try:
        RunRootsResource(roots=root).checked_roots()
    except RunRootError as exc:
        return str(exc)
    return ""


def test_root_without_permission_fails_with_one_clear_message(as_unprivileged) -> None:
    # Not under pytest's tmp_path: that folder is private to its owner, and the
    # unprivileged user of the root case must be able to reach the locked folder.
    base = Path(tempfile.mkdtemp(prefix="deepecg-perm-"))
    os.chmod(base, 0o755)
    locked = base / "locked"
    locked.mkdir()
    os.chmod(locked, 0)
    try:
        message = as_unprivileged(_root_error_message, str(locked))
    finally:
        os.chmod(locked, 0o700)
        shutil.rmtree(base)
    assert message == f"run root {locked} cannot be read: permission denied"


def test_readme_lists_every_asset_of_the_definitions() -> None:
    """The README's asset table is prose, so it is checked against ``defs`` instead of copied."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("| asset | per dataset | holds |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    listed = {name for row in rows for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])}
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert listed == keys


def test_one_dataset_refreshes_while_another_is_not_built_yet(platform) -> None:
    """The sensor's first tick refreshes one dataset per run: its checks read that dataset only."""
    first = platform.materialize(["discovered_runs"])
    platform.sync_partitions(first)
    result = platform.materialize(PER_DATASET_ASSETS, partitions=["afib"], raise_on_error=False)
    failures = [e.step_failure_data.error for e in result.all_events if e.is_step_failure]
    assert result.success, failures
    assert sorted(p.name for p in (platform.frames_dir / "aggregates").iterdir()) == [
        "afib.parquet"
    ]
    evaluations = check_evaluations(result)
    assert evaluations["results_tables_compile"].passed
    assert evaluations["results_tables_compile"].description == "1 of 1 table(s) compile"
