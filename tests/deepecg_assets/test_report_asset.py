"""The statistical_report asset runs deepecg report's library code over the discovered runs."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from deepecg_assets.definitions import defs
from deepecg_assets.metadata_images import embeddable_png
from deepecgkit.analysis.constants import REPORT_PAIRED_METRICS
from deepecgkit.evaluation.run_scoring import write_run_report
from deepecgkit.rundir.write import write_failed_run_report

N_SAMPLES, N_GROUPS = 120, 40


def write_prediction_runs(root: Path) -> None:
    """Two models x one dataset x two seeds with stored predictions, plus one failed run."""
    rng = np.random.default_rng(7)
    groups = np.repeat([f"patient{g:03d}" for g in range(N_GROUPS)], N_SAMPLES // N_GROUPS)
    labels_per_group = rng.integers(0, 3, size=N_GROUPS)
    y_true = np.repeat(labels_per_group, N_SAMPLES // N_GROUPS)
    for seed in (0, 1):
        for model, skill in (("cnn", 2.0), ("resnet", 1.0)):
            logits = rng.normal(size=(N_SAMPLES, 3))
            logits[np.arange(N_SAMPLES), y_true] += skill
            prob = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            write_run_report(
                root / f"{model}_afib_seed{seed}",
                y_true,
                prob,
                model=model,
                dataset="afib",
                logits=logits,
                groups=groups,
                split_info={"n_train": 400, "n_val": 60},
                metadata={"seed": seed, "params": {"model": model}},
            )
    write_failed_run_report(root / "lstm_afib_seed0", "lstm", "afib", error="RuntimeError: boom")


def _materialization(result: dg.ExecuteInProcessResult, asset: str):
    """The one materialisation event of ``asset`` in ``result``."""
    (event,) = [
        event
        for event in result.get_asset_materialization_events()
        if event.asset_key == dg.AssetKey(asset)
    ]
    return event


@pytest.fixture
def prediction_platform(platform):
    for child in sorted(platform.runs.iterdir()):
        for item in child.iterdir():
            item.unlink()
        child.rmdir()
    write_prediction_runs(platform.runs)
    return platform


def test_statistical_report_asset(prediction_platform) -> None:
    job = defs.resolve_implicit_global_asset_job_def()
    config = {"ops": {"statistical_report": {"config": {"reference": "resnet", "plots": False}}}}
    result = job.execute_in_process(
        instance=prediction_platform.instance,
        # The report reads the runs discovered_runs found (one search of the roots).
        asset_selection=[dg.AssetKey("discovered_runs"), dg.AssetKey("statistical_report")],
        run_config=config,
    )
    assert result.success
    event = _materialization(result, "statistical_report")
    metadata = event.materialization.metadata
    assert metadata["included_runs"].value == 4
    # The failed run is set aside once, by discovery (its diagnostics and health
    # check name it); the report is given only the runs discovery kept.
    assert metadata["exclusion_reasons"].value == {}
    discovered = _materialization(result, "discovered_runs")
    assert discovered.materialization.metadata["failed_count"].value == 1
    (check,) = [
        evaluation
        for evaluation in result.get_asset_check_evaluations()
        if evaluation.asset_key == dg.AssetKey("discovered_runs")
        and evaluation.check_name == "no_unreadable_or_failed_runs"
    ]
    assert not check.passed and "lstm_afib_seed0" in json.dumps(check.metadata["failed"].value)
    paired = 2 * len(REPORT_PAIRED_METRICS)
    assert metadata["paired_comparison_rows"].value == paired, "2 seeds x the paired metrics"
    report = prediction_platform.output / "report"
    assert (report / "manifest.json").is_file()
    assert "lstm_afib_seed0" not in (report / "exclusions.csv").read_text()
    assert metadata["figure"].value == (
        "No picture of the reliability diagram: plots are off (plots=False)"
    )


def test_statistical_report_shows_the_first_runs_reliability_diagram(prediction_platform) -> None:
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=prediction_platform.instance,
        asset_selection=[dg.AssetKey("discovered_runs"), dg.AssetKey("statistical_report")],
        run_config={"ops": {"statistical_report": {"config": {"n_resamples": 20}}}},
    )
    assert result.success
    event = _materialization(result, "statistical_report")
    metadata = event.materialization.metadata
    report = prediction_platform.output / "report"
    manifest = json.loads((report / "manifest.json").read_text())
    first = min(e["run_id"] for e in manifest["figures"])
    (path,) = [
        e["path"] for e in manifest["figures"] if e["run_id"] == first and e["format"] == "png"
    ]
    prefix = f"![reliability diagram of {first}](data:image/png;base64,"
    text = metadata["figure"].value
    assert text.startswith(prefix) and text.endswith(")")
    shown = base64.b64decode(text[len(prefix) : -1])
    assert shown == embeddable_png((report / path).read_bytes())


def test_a_refresh_reuses_every_unchanged_run_and_pair(prediction_platform) -> None:
    job = defs.resolve_implicit_global_asset_job_def()
    config = {"ops": {"statistical_report": {"config": {"reference": "resnet", "plots": False}}}}
    selection = [dg.AssetKey("discovered_runs"), dg.AssetKey("statistical_report")]

    def refresh() -> dict[str, int]:
        result = job.execute_in_process(
            instance=prediction_platform.instance, asset_selection=selection, run_config=config
        )
        assert result.success
        metadata = _materialization(result, "statistical_report").materialization.metadata
        keys = ("reused_runs", "computed_runs", "reused_pairs", "computed_pairs")
        return {key: metadata[key].value for key in keys}

    assert refresh() == {
        "reused_runs": 0,
        "computed_runs": 4,
        "reused_pairs": 0,
        "computed_pairs": 2,
    }
    assert refresh() == {
        "reused_runs": 4,
        "computed_runs": 0,
        "reused_pairs": 2,
        "computed_pairs": 0,
    }
    cnn = prediction_platform.runs / "cnn_afib_seed1" / "predictions.csv"
    cnn.write_text(cnn.read_text().replace("patient000", "patientX"), encoding="utf-8")
    assert refresh() == {
        "reused_runs": 3,
        "computed_runs": 1,
        "reused_pairs": 1,
        "computed_pairs": 1,
    }


def test_the_report_reads_discovered_runs_not_the_roots() -> None:
    report = defs.resolve_assets_def("statistical_report")
    assert "run_roots" not in report.required_resource_keys
    assert report.keys_by_input_name["discovered_runs"] == dg.AssetKey("discovered_runs")
