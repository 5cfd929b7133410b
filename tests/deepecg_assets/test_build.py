"""``python -m deepecg_assets.build``: one real build, and every number it prints checked.

The build runs once for the module, in-process as the README's first command
runs it, on a small copy of the bundled corpus: two models that trade places
(the feature baseline and ``resnet1d``) on the two contrast datasets, five
seeds each (enough for a ``supported`` verdict), no checkpoint (so the
transfer probes have nothing to do and the test stays fast), plus one
unreadable run and one failed run. Each printed number is then recomputed
from the frames and report files the build wrote, with pandas directly,
never through :mod:`deepecgkit.analysis.summary`.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from deepecg_assets import build
from deepecg_assets.partitions import (
    DATASET_PARTITIONS,
    PARTITIONS_METADATA,
    dataset_keys,
    latest_discovery_metadata,
)
from deepecg_assets.resources import BUNDLED_CORPUS

MODELS = ("logreg-features", "resnet1d")
DATASETS = ("synthetic-irregular-rr", "synthetic-long-pr")
SEEDS = range(1, 6)
#: A number as the summary prints it: not part of a name such as ``seed1`` or ``synthetic-x1``.
NUMBER = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?(?:e-\d+)?(?![\w-])")


@dataclass(frozen=True)
class Build:
    exit_code: int
    stdout: str
    stderr: str
    output: Path
    home: Path


def _corpus(root: Path) -> Path:
    runs = root / "runs"
    for model in MODELS:
        for dataset in DATASETS:
            for seed in SEEDS:
                name = f"{model}_{dataset}_seed{seed}"
                shutil.copytree(BUNDLED_CORPUS / name, runs / name)
    broken = runs / "broken_seed0"
    broken.mkdir()
    (broken / "classification_metrics.csv").write_text("not,a\n", encoding="utf-8")
    failed = runs / "resnet1d_synthetic-long-pr_seed6"
    shutil.copytree(BUNDLED_CORPUS / failed.name, failed, ignore=shutil.ignore_patterns("*.pt"))
    metadata = json.loads((failed / "run_metadata.json").read_text(encoding="utf-8"))
    metadata["returncode"] = 1
    (failed / "run_metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
    return runs


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Build]:
    root = tmp_path_factory.mktemp("build")
    output, home = root / "output", root / "dagster_home"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPECG_RUNS", str(_corpus(root)))
        patch.setenv("DEEPECG_OUTPUT", str(output))
        patch.setenv("DEEPECG_RECURSIVE", "1")
        patch.setenv("DAGSTER_HOME", str(home))
        patch.chdir(root)
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            exit_code = build.main([])
        yield Build(exit_code, stdout.getvalue(), stderr.getvalue(), output, home)


def _frame(built: Build, name: str) -> pd.DataFrame:
    """A stored frame read with pandas: one Parquet file, or a partitioned asset's files joined."""
    frames = built.output / "frames"
    single = frames / f"{name}.parquet"
    if single.is_file():
        return pd.read_parquet(single)
    parts = sorted((frames / name).glob("*.parquet"))
    assert parts, f"no stored frame of {name}"
    return pd.concat([pd.read_parquet(part) for part in parts], ignore_index=True)


def _report(built: Build, name: str) -> pd.DataFrame:
    return pd.read_csv(built.output / "report" / f"{name}.csv", keep_default_na=False)


def _summary_lines(built: Build) -> list[str]:
    lines = built.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Runs: "))
    end = next(i for i, line in enumerate(lines) if line.startswith("Written:"))
    return lines[start:end]


def _line(lines: list[str], prefix: str) -> str:
    (line,) = [line for line in lines if line.startswith(prefix)]
    return line


def _shown(value: object) -> str:
    """Three decimals, or two significant digits where three decimals would read 0.000."""
    number = float(value)
    return f"{number:.1e}" if 0 < abs(number) < 0.0005 else f"{number:.3f}"


def _numbers(text: str) -> list[str]:
    return NUMBER.findall(text)


def _diagnostics(built: Build) -> dict[str, list[str]]:
    """Discovery's diagnostics, read back from the instance the build wrote to."""
    with dg.DagsterInstance.from_config(str(built.home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("discovered_runs"))
    assert event is not None and event.asset_materialization is not None
    return dict(event.asset_materialization.metadata["diagnostics"].value)


def test_build_succeeds_quietly(built: Build) -> None:
    assert built.exit_code == 0, built.stderr
    assert built.stderr == ""
    lines = built.stdout.splitlines()
    # No Dagster step log, and the whole output stays short.
    assert not [line for line in lines if " - dagster - " in line or "STEP_" in line]
    assert len(lines) <= 45, built.stdout
    assert len(_summary_lines(built)) <= 20


def test_runs_line_equals_the_frames_and_diagnostics(built: Build) -> None:
    lines = _summary_lines(built)
    used = _frame(built, "reconciled_runs")["run_dir"].nunique()
    diagnostics = _diagnostics(built)
    dropped = int(_frame(built, "averaging_conflicts")["dropped_runs"].sum())
    unreadable, failed = len(diagnostics["unreadable"]), len(diagnostics["failed"])
    assert (used, unreadable, failed, dropped) == (
        len(MODELS) * len(DATASETS) * len(SEEDS),
        1,
        1,
        0,
    )
    assert _line(lines, "Runs: ") == (
        f"Runs: {used} used, {unreadable + failed} set aside "
        f"({unreadable} unreadable, {failed} failed (non-zero returncode))"
    )
    assert lines[1] == "  no used run had values set aside"
    assert not diagnostics["suspect"]


def test_names_and_verdict_census_equal_the_frames(built: Build) -> None:
    lines = _summary_lines(built)
    runs, flips = _frame(built, "reconciled_runs"), _frame(built, "flip_grid")
    datasets, models = sorted(runs["dataset"].unique()), sorted(runs["model"].unique())
    assert _line(lines, "Datasets") == f"Datasets ({len(datasets)}): {', '.join(datasets)}"
    assert _line(lines, "Models") == f"Models ({len(models)}): {', '.join(models)}"
    census = _line(lines, "Flip grid")
    counts = flips["verdict"].value_counts()
    assert census.startswith(f"Flip grid (f1, {len(flips)} test(s)): ")
    printed = dict(
        (verdict, int(n)) for n, verdict in re.findall(r"(\d+) ([a-z-]+)", census.split(": ", 1)[1])
    )
    assert printed == {str(v): int(n) for v, n in counts.items()}


def test_each_surviving_reversal_is_named_with_its_q_value(built: Build) -> None:
    lines = _summary_lines(built)
    flips = _frame(built, "flip_grid")
    surviving = flips.loc[flips["survives_fdr"].astype(str) == "True"]
    assert len(surviving) >= 1, "the demo's reversal should survive on five seeds"
    header = _line(lines, "Reversals that survive")
    assert header == f"Reversals that survive BY ({len(surviving)}):"
    start = lines.index(header) + 1
    shown = lines[start : start + len(surviving)]
    for row, line in zip(surviving.sort_values("q_reversal").itertuples(), shown, strict=True):
        first, second = (
            (row.model_a, row.model_b) if float(row.mean_1) > 0 else (row.model_b, row.model_a)
        )
        assert line == (
            f"  {first} > {second} on {row.dataset_1}, {second} > {first} on {row.dataset_2}  "
            f"(p_reversal = {_shown(row.p_reversal)}, q_reversal = {_shown(row.q_reversal)})"
        )


def test_report_and_calibration_lines_equal_the_report_files(built: Build) -> None:
    lines = _summary_lines(built)
    summary, exclusions = _report(built, "run_summary"), _report(built, "exclusions")
    reasons = exclusions["reason"].value_counts()
    # The failed run is set aside once, by discovery (the "Runs:" line counts it);
    # the report is given only the runs discovery kept.
    assert not exclusions["run_id"].astype(str).str.contains("seed6").any()
    included = summary["run_id"].nunique()
    expected = (
        f"Statistical report: {included} run(s) with predictions, {len(exclusions)} excluded ("
        + ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
        + ")"
        if len(exclusions)
        else f"Statistical report: {included} run(s) with predictions, 0 excluded"
    )
    assert _line(lines, "Statistical report") == expected
    ece = summary.loc[summary["metric"] == "ece"].astype({"estimate": float})
    means = ece.groupby("model")["estimate"].mean()
    assert _line(lines, "Calibration") == (
        "Calibration (group-level ECE, mean over runs; lower is better): "
        + ", ".join(f"{model} {value:.3f}" for model, value in means.items())
    )
    worst = ece.loc[ece["estimate"].idxmax()]
    assert _line(lines, "  worst run") == (
        f"  worst run: {worst['model']} on {worst['dataset']} ({worst['run_id']}), "
        f"ECE {worst['estimate']:.3f} [{float(worst['ci_low']):.3f}, "
        f"{float(worst['ci_high']):.3f}]"
    )


def test_every_printed_number_was_checked(built: Build) -> None:
    """The lines above account for every number of the summary: none slips in unchecked."""
    checked_prefixes = (
        "Runs: ",
        "  no used run",
        "Datasets",
        "Models",
        "Flip grid",
        "Reversals that survive",
        "  logreg-features > ",
        "  resnet1d > ",
        "Statistical report",
        "Calibration",
        "  worst run",
    )
    unchecked = [
        line
        for line in _summary_lines(built)
        if _numbers(line) and not line.startswith(checked_prefixes)
    ]
    assert unchecked == []


def test_build_ends_with_checks_and_how_to_open_the_ui(built: Build) -> None:
    lines = built.stdout.splitlines()
    command = lines[-2].split()
    assert command[0] == "DAGSTER_HOME=dagster_home"  # relative to the working directory
    assert command[-3:] == ["dev", "-m", "deepecg_assets.definitions"]
    assert Path(command[1]).name == "dagster"
    assert lines[-1] == "  then open http://127.0.0.1:3000"
    checks = _line(lines, "Asset checks: ")
    passed, total = map(int, re.findall(r"\d+", checks))
    warned = [line for line in lines if line.startswith(("  WARN ", "  ERROR "))]
    assert total - passed == len(warned) >= 1  # the unreadable and failed runs are flagged
    assert any("discovered_runs.no_unreadable_or_failed_runs" in line for line in warned)


def test_build_writes_the_instance_the_ui_reads(built: Build) -> None:
    assert "enabled: false" in (built.home / "dagster.yaml").read_text(encoding="utf-8")
    with dg.DagsterInstance.from_config(str(built.home)) as instance:
        records = instance.get_run_records()
        partitions = instance.get_dynamic_partitions(DATASET_PARTITIONS)
    # Two runs: discovery, then every dataset partition and the rest in one go.
    assert len(records) == 2 and all(record.dagster_run.is_success for record in records)
    shown = re.search(r"\(runs ([0-9a-f-]+), ([0-9a-f-]+)\)", built.stdout)
    assert shown and set(shown.groups()) == {record.dagster_run.run_id for record in records}
    assert sorted(partitions) == sorted(DATASETS)


def test_the_report_runs_after_every_table(built: Build) -> None:
    """The report's low step priority: the last run brings the tables up to date first."""
    with dg.DagsterInstance.from_config(str(built.home)) as instance:
        last = instance.get_run_records(limit=1)[0].dagster_run.run_id
        started = [
            event.step_key
            for event in instance.all_logs(last, of_type=dg.DagsterEventType.STEP_START)
        ]
    assert {"flip_table", "rank_table", "tau_table", "results_tables"} <= set(started)
    assert started[-1] == "statistical_report"


def test_latest_discovery_metadata_is_what_the_build_recorded(built: Build) -> None:
    with dg.DagsterInstance.from_config(str(built.home)) as instance:
        metadata = latest_discovery_metadata(instance)
    assert metadata[PARTITIONS_METADATA] == dataset_keys(DATASETS)
    assert metadata["diagnostics"] == _diagnostics(built)
    assert metadata["unreadable_count"] == 1 and metadata["failed_count"] == 1
    with dg.DagsterInstance.ephemeral() as empty:
        assert latest_discovery_metadata(empty) == {}


def _run(argv: list[str]) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = build.main(argv)
    return code, stdout.getvalue(), stderr.getvalue()


def test_a_missing_run_root_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPECG_RUNS", str(tmp_path / "nowhere"))
    monkeypatch.setenv("DEEPECG_OUTPUT", str(tmp_path / "output"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    code, _, stderr = _run([])
    assert code == build.EXIT_USER_ERROR
    assert stderr.splitlines() == [
        f"deepecg-build: error: discovered_runs: run root {tmp_path / 'nowhere'} does not exist"
    ]


def test_a_dagster_home_that_is_a_file_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.write_text("", encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    code, stdout, stderr = _run([])
    assert (code, stdout) == (build.EXIT_USER_ERROR, "")
    assert stderr.splitlines() == [
        f"deepecg-build: error: DAGSTER_HOME {home} is a file; point it at a folder (or unset it)"
    ]


def test_an_existing_dagster_yaml_is_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: true\n", encoding="utf-8")
    environ = {"DAGSTER_HOME": str(home)}
    assert build.prepare_dagster_home(environ) == home.resolve()
    assert (home / "dagster.yaml").read_text(encoding="utf-8").endswith("enabled: true\n")
    fresh = {"DAGSTER_HOME": str(tmp_path / "new" / "home")}
    created = build.prepare_dagster_home(fresh)
    assert (created / "dagster.yaml").read_text(encoding="utf-8") == build.NEW_INSTANCE_YAML
    assert fresh["DAGSTER_HOME"] == str(created)


def test_a_dagster_yaml_an_earlier_version_wrote_is_replaced(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for earlier in build.EARLIER_INSTANCE_YAMLS:
        (home / "dagster.yaml").write_text(earlier, encoding="utf-8")
        build.prepare_dagster_home({"DAGSTER_HOME": str(home)})
        assert (home / "dagster.yaml").read_text(encoding="utf-8") == build.NEW_INSTANCE_YAML
    edited = build.EARLIER_INSTANCE_YAMLS[0] + "# mine\n"
    (home / "dagster.yaml").write_text(edited, encoding="utf-8")
    build.prepare_dagster_home({"DAGSTER_HOME": str(home)})
    assert (home / "dagster.yaml").read_text(encoding="utf-8") == edited


def test_a_new_instance_queues_runs_as_the_deployment_does(tmp_path: Path) -> None:
    """The demo's instance has deploy/dagster.yaml's queue: the same limits, and a look at
    the queue every second (the sensor's run starts seconds sooner than with Dagster's 5)."""
    import yaml

    deploy = Path(__file__).resolve().parents[2] / "deploy" / "dagster.yaml"
    deployed = yaml.safe_load(deploy.read_text(encoding="utf-8"))["run_coordinator"]
    home = build.prepare_dagster_home({"DAGSTER_HOME": str(tmp_path / "home")})
    written = yaml.safe_load((home / "dagster.yaml").read_text(encoding="utf-8"))
    assert written["run_coordinator"] == deployed
    assert written["run_coordinator"]["config"]["dequeue_interval_seconds"] == 1
    assert written["telemetry"] == {"enabled": False}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        coordinator = instance.run_coordinator
        assert isinstance(coordinator, dg.QueuedRunCoordinator)
        assert coordinator.dequeue_interval_seconds == 1
        queue = coordinator.get_run_queue_config()
        assert queue.max_concurrent_runs == deployed["config"]["max_concurrent_runs"]


def test_progress_lines_are_throttled_but_the_last_is_shown() -> None:
    import logging

    now = [0.0]
    stream = io.StringIO()
    handler = build.ProgressHandler(stream, clock=lambda: now[0])

    def record(done: int, total: int) -> logging.LogRecord:
        entry = logging.makeLogRecord({"msg": "m", "levelno": logging.INFO})
        entry.progress = ("runs bootstrapped", done, total)
        return entry

    for done in range(1, 11):
        now[0] = done * 1.0
        handler.emit(record(done, 10))
    assert stream.getvalue().splitlines() == [
        "  runs bootstrapped: 1 of 10",
        "  runs bootstrapped: 6 of 10",
        "  runs bootstrapped: 10 of 10",
    ]
    handler.emit(logging.makeLogRecord({"msg": "anything else", "levelno": logging.INFO}))
    assert len(stream.getvalue().splitlines()) == 3
