"""The platform on a hostile corpus: a bad run is reported, never fatal, never silent.

Each test is named after an item of issue 9. Corpora are the generated demo
grid of the ``platform`` fixture, edited in the test, or copies of the
bundled example runs; the graph is materialised for real on a Dagster
instance.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from deepecg_assets.assets.tables import compile_check
from deepecg_assets.definitions import defs
from deepecg_assets.parquet_frames import frame_from_parquet, frame_to_parquet
from deepecg_assets.resources import OutputFolderResource, RunRootsResource
from deepecg_assets.sensors import new_runs_sensor
from deepecgkit.analysis.latex import latex_engine
from deepecgkit.rundir.cache import RunCache
from deepecgkit.rundir.format import METADATA_FILENAME, METRICS_FILENAME
from deepecgkit.rundir.write import write_run_directory
from tests.deepecg_assets.run_events import check_evaluations, materializations

DISCOVERY = ["discovered_runs"]
THROUGH_FLIPS = ["discovered_runs", "run_metrics", "reconciled_runs", "averaging_conflicts"]
THROUGH_TABLES = [*THROUGH_FLIPS, "aggregates", "results_tables", "results_index"]


def materialize(platform, names: list[str], config: dict | None = None):
    """Discovery alone in one run; anything more as the build does it (discovery, then the rest)."""
    if list(names) == DISCOVERY:
        return platform.materialize(names, run_config=config or {}, raise_on_error=False)
    return platform.build(names, run_config=config or {}, raise_on_error=False)


def metadata_of(result, asset: str) -> dict:
    metadata = materializations(result).get(asset)
    if metadata is None:
        raise AssertionError(f"{asset} was not materialised")
    return {key: value.value for key, value in metadata.items()}


checks_of = check_evaluations


def failure_of(result) -> str:
    events = [e for run in getattr(result, "runs", [result]) for e in run.all_events]
    failure = next(event for event in events if event.is_step_failure)
    return failure.step_failure_data.user_failure_data.description


def analysis_config(**settings: object) -> dict:
    return {"resources": {"analysis": {"config": settings}}}


# --- 1. one bad input takes everything down -----------------------------------------------------


def test_seeds_of_2_63_or_more_travel_exactly_through_the_platform(platform) -> None:
    for run in platform.runs.iterdir():
        metadata = json.loads((run / METADATA_FILENAME).read_text(encoding="utf-8"))
        metadata["seed"] = 2**64 + metadata["seed"]
        (run / METADATA_FILENAME).write_text(json.dumps(metadata), encoding="utf-8")
    result = materialize(platform, [*THROUGH_FLIPS, "flip_grid", "rank_distribution"])
    assert result.success
    stored = platform.frame("run_metrics")
    assert set(stored["seed"]) == {2**64 + seed for seed in range(5)}, "read back exactly"
    flips = platform.frame("flip_grid")
    assert len(flips) and flips["n_seeds"].max() == 5


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("seed", [2**64 + 1, -1, None, 2**63 - 1]),
        ("seed", [2**53 + 1, None]),
        ("n_train", [800, None]),
        ("seed", [2**53 + 1, -(2**63)]),
    ],
)
def test_integer_columns_round_trip_the_frame_store_exactly(column: str, values: list) -> None:
    from deepecgkit.rundir.int_columns import exact_int_array

    frame = pd.DataFrame({column: exact_int_array(values), "value": [0.5] * len(values)})
    back = frame_from_parquet(frame_to_parquet(frame))
    assert [None if pd.isna(v) else int(v) for v in back[column]] == values
    assert back[column].dtype == frame[column].dtype


def _damage(cache_file: Path) -> None:
    """The cache file cut short, as a full disk or a foreign tool's crash leaves it."""
    data = cache_file.read_bytes()
    cache_file.write_bytes(data[: len(data) - 200])


def test_damaged_discovery_cache_is_rebuilt_not_fatal(platform, caplog) -> None:
    assert materialize(platform, DISCOVERY).success
    cache_file = OutputFolderResource(path=str(platform.output)).cache_file()
    _damage(cache_file)
    with caplog.at_level(logging.WARNING, logger="deepecgkit.rundir.cache"):
        result = materialize(platform, DISCOVERY)
    assert result.success, "a damaged cache never breaks discovery"
    metadata = metadata_of(result, "discovered_runs")
    assert metadata["dagster/row_count"] == 60, "every run is still found"
    assert metadata["runs_parsed"] == 60, "the damaged file is ignored: every run is parsed"
    assert metadata["cache_damaged"] == 1
    assert str(cache_file) in caplog.text, "the event is logged, naming the cache"
    again = materialize(platform, DISCOVERY)
    assert metadata_of(again, "discovered_runs")["runs_parsed"] == 0, "the cache was rewritten"


def test_an_old_json_lines_run_cache_is_ignored_then_removed(platform) -> None:
    output = OutputFolderResource(path=str(platform.output))
    legacy = output.legacy_cache_file()
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text('{"format": 5}\n', encoding="utf-8")
    result = materialize(platform, DISCOVERY)
    assert result.success and metadata_of(result, "discovered_runs")["runs_parsed"] == 60
    assert not legacy.exists() and len(RunCache.load(output.cache_file())) == 60


def test_discovery_cache_is_pruned_of_runs_that_no_longer_exist(platform) -> None:
    assert materialize(platform, DISCOVERY).success
    shutil.rmtree(platform.runs / "cnn_afib_seed0")
    result = materialize(platform, DISCOVERY)
    assert metadata_of(result, "discovered_runs")["cache_entries_pruned"] == 1
    cache = RunCache.load(OutputFolderResource(path=str(platform.output)).cache_file())
    assert len(cache) == 59


def test_directory_name_not_valid_utf8_is_listed_not_fatal(platform) -> None:
    odd = os.path.join(os.fsencode(platform.runs), b"caf\xe9_seed9")
    shutil.copytree(os.fsencode(platform.runs / "cnn_afib_seed0"), odd)
    result = materialize(platform, [*THROUGH_FLIPS, "flip_grid"])
    assert result.success
    check = checks_of(result)["no_unreadable_or_failed_runs"]
    assert not check.passed and check.metadata["unreadable_count"].value == 1
    (entry,) = check.metadata["unreadable"].value
    assert entry.startswith(f"{platform.runs}/caf\\xe9_seed9 (directory name is not valid UTF-8")


@pytest.fixture
def corrupt_checkpoint_platform(platform, example_runs, monkeypatch):
    runs = platform.runs.parent / "bundled"
    example_runs(
        runs, "simple-cnn_synthetic-long-pr", "simple-cnn_synthetic-bradycardia", seeds=(0,)
    )
    (runs / "simple-cnn_synthetic-long-pr_seed0" / "checkpoint.pt").write_bytes(b"not a checkpoint")
    monkeypatch.setenv("DEEPECG_RUNS", str(runs))
    return platform


@pytest.mark.slow
def test_one_corrupt_checkpoint_empties_only_its_cells(corrupt_checkpoint_platform) -> None:
    result = materialize(corrupt_checkpoint_platform, ["discovered_runs", "transfer_matrix"])
    assert result.success, "one bad checkpoint does not fail the matrix"
    cells = corrupt_checkpoint_platform.frame("transfer_matrix")
    failed = cells.loc[cells["score"].isna()]
    assert set(failed["source"]) == {"synthetic-long-pr"} and len(failed) == 2, "its row only"
    assert failed["note"].str.contains("cannot read checkpoint").all()
    assert cells.loc[cells["source"] != "synthetic-long-pr", "score"].notna().all()
    metadata = metadata_of(result, "transfer_matrix")
    assert metadata["failed_cells"] == 2
    check = checks_of(result)["every_transfer_cell_scored"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert "cannot read checkpoint" in json.dumps(check.metadata["notes"].value)


# --- 2. runs that vanish without a word ---------------------------------------------------------


def test_out_of_range_metric_value_is_flagged_by_the_health_check(platform) -> None:
    metrics = platform.runs / "cnn_afib_seed0" / METRICS_FILENAME
    header, row = metrics.read_text(encoding="utf-8").splitlines()
    cells = row.split(",")
    cells[header.split(",").index("f1")] = "7.5"
    metrics.write_text(f"{header}\n{','.join(cells)}\n", encoding="utf-8")
    result = materialize(platform, DISCOVERY)
    check = checks_of(result)["no_unreadable_or_failed_runs"]
    assert not check.passed and check.metadata["suspect_count"].value == 1
    assert "f1 7.5 outside [0, 1]; dropped" in check.metadata["suspect"].value[0]


def test_half_written_metrics_file_is_pending_for_the_sensor(platform) -> None:
    context = dg.build_sensor_context(
        instance=platform.instance,
        cursor=None,
        definitions=defs,
        resources={"run_roots": RunRootsResource(), "output_folder": OutputFolderResource()},
    )
    cursor = new_runs_sensor(context).cursor
    run = platform.runs / "cnn_afib_seed12"
    run.mkdir()
    (run / METRICS_FILENAME).write_text("model,dataset,f1,average\ncnn,afib,0.6", encoding="utf-8")
    context = dg.build_sensor_context(
        instance=platform.instance,
        cursor=cursor,
        definitions=defs,
        resources={"run_roots": RunRootsResource(), "output_folder": OutputFolderResource()},
    )
    waiting = new_runs_sensor(context)
    assert not waiting.run_requests, "a cut-off row is not a finished run"
    assert "1 run(s) not readable yet" in str(waiting.skip_reason)


# --- 3. config typos, empty selections, root settings, tables -----------------------------------


@pytest.mark.parametrize(
    ("settings", "names", "message"),
    [
        (
            {"metric": "f1_score"},
            ["flip_grid"],
            "analysis config metric: no run reports 'f1_score'; metrics in the runs: ",
        ),
        (
            {"models": ["cnn", "nosuch"]},
            ["rank_distribution"],
            "analysis config models: 'nosuch' match(es) no run; models in the runs: "
            "cnn, lstm, resnet, transformer",
        ),
        (
            {"datasets": ["afib", "ptb-xl"]},
            ["flip_grid"],
            "analysis config datasets: 'ptb-xl' match(es) no run; datasets in the runs: "
            "afib, ptbxl, sleep",
        ),
        (
            {"correction": "nadeau_bengio"},
            [],
            "analysis config correction: 'nadeau_bengio' is not allowed; choose one of "
            "nadeau-bengio, none",
        ),
        (
            {"fdr_family": "all"},
            [],
            "analysis config fdr_family: 'all' is not allowed; choose one of testable, significant",
        ),
    ],
)
def test_typo_in_the_analysis_config_fails_naming_the_allowed_values(
    platform, settings: dict, names: list[str], message: str
) -> None:
    result = materialize(platform, [*THROUGH_FLIPS, *names], analysis_config(**settings))
    assert not result.success
    assert failure_of(result).startswith(message)


def test_selection_that_leaves_nothing_to_rank_fails_its_check(platform) -> None:
    for run in list(platform.runs.iterdir()):
        shutil.rmtree(run)
    for model in ("a", "b"):
        for seed in range(3):
            write_run_directory(
                platform.runs / f"{model}_d_seed{seed}",
                model=model,
                dataset="d",
                metrics={"f1": 0.5 + 0.1 * seed, "mcc": float("nan")},
                seed=seed,
            )
    result = materialize(
        platform, [*THROUGH_FLIPS, "rank_distribution", "rank_table"], analysis_config(metric="mcc")
    )
    assert result.success
    check = checks_of(result)["selection_leaves_runs_to_rank"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert check.metadata["selection"].value["metric"] == "mcc"


def test_runs_setting_without_any_root_fails_clearly(platform, monkeypatch) -> None:
    monkeypatch.setenv("DEEPECG_RUNS", os.pathsep)
    result = materialize(platform, DISCOVERY)
    assert not result.success
    assert failure_of(result) == (
        f"$DEEPECG_RUNS ({os.pathsep!r}) names no run root; give one or more folders "
        f"separated by {os.pathsep!r}, or leave it unset for the example corpus"
    )


def test_stale_results_table_of_a_gone_dataset_is_removed_and_listed(platform) -> None:
    assert materialize(platform, THROUGH_TABLES).success
    tables = platform.output / "tables"
    assert (tables / "results_sleep.tex").is_file()
    for run in platform.runs.glob("*_sleep_seed*"):
        shutil.rmtree(run)
    result = materialize(platform, THROUGH_TABLES)
    assert result.success
    assert not (tables / "results_sleep.tex").exists()
    assert not (tables / "results_sleep.png").exists(), "nor its picture"
    removed = metadata_of(result, "results_index")["removed_stale"]
    assert removed == ["results_sleep.png", "results_sleep.tex"]
    index = json.loads((tables / "results_tables.json").read_text(encoding="utf-8"))
    assert index == {"results_afib.tex": "afib", "results_ptbxl.tex": "ptbxl"}


def _add_dataset(platform, dataset: str) -> None:
    for model in ("cnn", "resnet"):
        for seed in range(3):
            write_run_directory(
                platform.runs / f"{model}_extra_seed{seed}",
                model=model,
                dataset=dataset,
                metrics={"f1": 0.6 + 0.01 * seed},
                seed=seed,
            )


def test_long_dataset_name_gives_bounded_table_files_with_an_index(platform) -> None:
    long_name = "x" * 260
    _add_dataset(platform, long_name)
    result = materialize(platform, THROUGH_TABLES)
    assert result.success
    index = json.loads((platform.output / "tables" / "results_tables.json").read_text())
    (stem,) = [name for name, dataset in index.items() if dataset == long_name]
    assert len(stem) < 120 and (platform.output / "tables" / stem).is_file()


@pytest.mark.skipif(latex_engine() is None, reason="needs pdflatex")
def test_unicode_dataset_names_give_tables_that_compile(platform, tmp_path: Path) -> None:
    _add_dataset(platform, "δ-数据")
    result = materialize(platform, THROUGH_TABLES)
    assert result.success
    check = checks_of(result)["results_tables_compile"]
    if latex_engine("中") is None:
        assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    else:
        assert check.passed, check.metadata["failures"].value
        engines = check.metadata["engine"].value
        assert set(engines.values()) == {"pdflatex", Path(latex_engine("中")).name}
    broken = tmp_path / "broken.tex"
    broken.write_text("\\begin{table}\\undefinedcommand\\end{table}\n", encoding="utf-8")
    failed = compile_check([broken])
    assert not failed.passed and failed.severity == dg.AssetCheckSeverity.ERROR
