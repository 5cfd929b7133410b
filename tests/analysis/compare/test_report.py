"""The statistical report on a corpus with one run per identity-contract violation."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from deepecgkit.analysis.compare import (
    MCNEMAR_CAVEAT,
    ComparisonError,
    batch_metric,
    cluster_bootstrap_difference,
    cluster_bootstrap_metric,
    mcnemar,
    mcnemar_mid_p,
)
from deepecgkit.analysis.constants import (
    MIN_BOOTSTRAP_GROUPS,
    MIN_BOOTSTRAP_GROUPS_PER_CLASS,
    MIN_INFORMATIVE_GROUPS,
    REPORT_PAIRED_METRICS,
)
from deepecgkit.analysis.statistics import holm_adjust
from deepecgkit.rundir.read import read_predictions
from deepecgkit.statistical_report import ReportResult, statistical_report
from deepecgkit.statistical_report.reliability_plot import reliability_figure

N_RESAMPLES = 200
BINS = 8
CSV_COLUMNS = {
    "run_summary.csv": [
        "run_id", "model", "dataset", "seed", "params_fingerprint", "partial", "n_samples",
        "n_groups", "metric", "direction", "estimate", "ci_low", "ci_high", "n_resamples",
        "n_valid_resamples", "confidence_level", "interval_method", "no_interval_reason",
    ],
    "level_metrics.csv": [
        "run_id", "model", "dataset", "seed", "level", "n_units", "metric", "value",
    ],
    "reliability.csv": [
        "run_id", "model", "dataset", "seed", "bin", "bin_lower", "bin_upper", "count",
        "fraction", "mean_confidence", "accuracy", "gap", "curve",
    ],
    "paired_comparisons.csv": [
        "dataset", "seed", "reference_model", "candidate_model", "reference_run_id",
        "candidate_run_id", "partial", "metric", "higher_is_better", "n_samples", "n_groups",
        "reference_value", "candidate_value", "delta", "ci_low", "ci_high", "p_value", "p_holm",
        "probability_candidate_better", "n_resamples", "n_valid_resamples", "confidence_level",
        "interval_method", "no_interval_reason",
    ],
    "mcnemar.csv": [
        "dataset", "seed", "reference_model", "candidate_model", "reference_run_id",
        "candidate_run_id", "level", "n_units", "only_reference_correct",
        "only_candidate_correct", "p_value", "p_mid", "anti_conservative",
    ],
    "exclusions.csv": [
        "scope", "run_id", "model", "dataset", "seed", "reference_run_id", "reason", "detail",
    ],
}  # fmt: skip
METRIC_ORDER = [
    "balanced_accuracy", "accuracy", "macro_f1", "auroc", "macro_auprc", "brier", "nll", "ece",
    "classwise_ece", "recall_0", "recall_1", "recall_2", "mean_normalized_entropy",
    "class_coverage", "max_predicted_class_fraction", "exact_class_collapse",
    "near_class_collapse",
]  # fmt: skip


def _hashes(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        p.relative_to(folder).as_posix(): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_mtime_ns,
        )
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="session")
def report(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> ReportResult:
    out = tmp_path_factory.mktemp("report") / "out"
    return statistical_report(
        [corpus], out, bins=BINS, n_resamples=N_RESAMPLES, reference="resnet", seed=4
    )


@pytest.fixture(scope="session")
def partial_report(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> ReportResult:
    out = tmp_path_factory.mktemp("partial") / "out"
    return statistical_report(
        [corpus], out, n_resamples=50, reference="resnet", allow_partial=True, plots=False
    )


def _read(report: ReportResult, name: str) -> pd.DataFrame:
    return pd.read_csv(report.out_dir / name, dtype={"run_id": str})


def test_each_reason_code_appears_exactly_for_its_run(
    report, expected_run_exclusions, expected_comparison_exclusions
) -> None:
    exclusions = _read(report, "exclusions.csv")
    runs = exclusions[exclusions["scope"] == "run"]
    assert dict(zip(runs["run_id"], runs["reason"], strict=True)) == expected_run_exclusions
    comparisons = exclusions[exclusions["scope"] == "comparison"]
    assert (
        dict(zip(comparisons["run_id"], comparisons["reason"], strict=True))
        == expected_comparison_exclusions
    )
    assert exclusions["detail"].notna().all() and (exclusions["detail"].str.len() > 5).all()
    assert exclusions["scope"].tolist() == ["run"] * len(runs) + ["comparison"] * len(comparisons)
    assert runs["run_id"].is_monotonic_increasing
    assert comparisons["run_id"].is_monotonic_increasing
    rejected_pair = comparisons.set_index("run_id").loc["pairs/label_mismatch_seed1"]
    assert rejected_pair["reference_run_id"] == "good/resnet_af_seed1"


def test_every_discovered_directory_is_accounted_for(report, corpus: Path) -> None:
    inputs = report.manifest["inputs"]
    on_disk = sorted(
        p.parent.relative_to(corpus).as_posix() for p in corpus.rglob("classification_metrics.csv")
    )
    assert [entry["run_id"] for entry in inputs] == on_disk
    included = {run["run_id"] for run in report.manifest["included_runs"]}
    excluded = set(report.exclusions.loc[report.exclusions["scope"] == "run", "run_id"])
    assert included | excluded == set(on_disk) and not included & excluded
    assert set(report.run_summary["run_id"]) == included
    assert "good/20260301-101500-lstm-af-seed1" in included  # upstream predictions.txt


def test_allow_partial_admits_only_partial_runs(report, partial_report, partial_runs) -> None:
    strict = {e["run_id"]: e["status"] for e in report.manifest["inputs"]}
    relaxed = {e["run_id"]: e["status"] for e in partial_report.manifest["inputs"]}
    changed = {run_id for run_id in strict if strict[run_id] != relaxed[run_id]}
    assert changed == set(partial_runs)
    assert all(relaxed[run_id] == "partial" for run_id in partial_runs)
    included = {r["run_id"]: r for r in partial_report.manifest["included_runs"]}
    assert included["partial/missing_metadata_seed1"]["partial_reasons"] == [
        "missing_metadata",
        "missing_fingerprint",
    ]
    assert included["partial/incomplete_seed1"]["partial_reasons"] == ["incomplete_predictions"]
    summary = partial_report.run_summary
    assert set(summary.loc[summary["partial"], "run_id"]) == set(partial_runs)
    caveats = {c["code"]: c for c in partial_report.manifest["caveats"]}
    assert caveats["partial_runs_included"]["run_ids"] == list(partial_runs)


def test_column_lists_and_orders(report) -> None:
    for name, columns in CSV_COLUMNS.items():
        header = (report.out_dir / name).read_text(encoding="utf-8").splitlines()[0]
        assert header.split(",") == columns, name
    summary = report.run_summary
    first_run = summary[summary["run_id"] == "good/resnet_af_seed1"]
    assert first_run["metric"].tolist() == METRIC_ORDER
    assert summary["run_id"].is_monotonic_increasing
    levels = report.level_metrics
    one = levels[levels["run_id"] == "good/resnet_af_seed1"]
    n_metrics = len(METRIC_ORDER)
    assert one["level"].tolist() == ["sample"] * n_metrics + ["group"] * n_metrics
    assert one["n_units"].tolist() == [180] * n_metrics + [60] * n_metrics
    assert one["metric"].tolist() == METRIC_ORDER * 2


def test_csv_format(report) -> None:
    text = (report.out_dir / "run_summary.csv").read_text(encoding="utf-8")
    collapse = next(line for line in text.splitlines() if ",exact_class_collapse," in line)
    assert collapse.endswith(",none,0.0,,,,,,,")
    written = pd.read_csv(report.out_dir / "run_summary.csv")
    np.testing.assert_array_equal(written["estimate"], report.run_summary["estimate"])
    assert set(pd.read_csv(report.out_dir / "mcnemar.csv")["anti_conservative"]) <= {True, False}


def test_group_intervals_equal_the_public_bootstrap(report, corpus: Path) -> None:
    pred = read_predictions(corpus / "good/inception_af_seed2")
    y, groups = pred["y_true"].to_numpy(), pred["group_id"].to_numpy()
    prob = pred[["prob_0", "prob_1", "prob_2"]].to_numpy()
    rows = report.run_summary.query("run_id == 'good/inception_af_seed2'").set_index("metric")
    for name in ("auroc", "ece", "recall_1", "class_coverage"):
        expected = cluster_bootstrap_metric(
            y, prob, groups, metric=batch_metric(name, bins=BINS), n_resamples=N_RESAMPLES, seed=4
        )
        row = rows.loc[name]
        assert (row["estimate"], row["ci_low"], row["ci_high"]) == (
            expected.estimate,
            expected.ci_low,
            expected.ci_high,
        )
        assert row["n_valid_resamples"] == expected.n_valid_resamples


def _titles(report: ReportResult) -> dict[str, str]:
    titles = {}
    for entry in report.manifest["figures"]:
        if entry["format"] == "png":
            with Image.open(report.out_dir / entry["path"]) as image:
                titles[entry["run_id"]] = image.text["Title"]
    return titles


def _curve_ece(rows: pd.DataFrame) -> float:
    filled = rows[rows["count"] > 0]
    return float((filled["fraction"] * filled["gap"].abs()).sum())


def test_ece_agrees_between_title_summary_and_reliability(report) -> None:
    summary = report.run_summary
    ece = summary.query("metric == 'ece'").set_index("run_id")["estimate"]
    classwise = summary.query("metric == 'classwise_ece'").set_index("run_id")["estimate"]
    reliability = report.reliability
    for run_id, value in ece.items():
        rows = reliability[reliability["run_id"] == run_id]
        top = rows[rows["curve"] == "top_label"]
        assert len(top) == BINS
        assert abs(value - _curve_ece(top)) <= 1e-12
        curves = rows[rows["curve"] != "top_label"].groupby("curve")
        per_class = [_curve_ece(curve) for _, curve in curves]
        assert abs(classwise[run_id] - np.mean(per_class)) <= 1e-12
        empty = rows[rows["count"] == 0]
        assert empty[["mean_confidence", "accuracy", "gap"]].isna().all().all()
        assert (empty["fraction"] == 0).all()
    titles = _titles(report)
    assert set(titles) == set(ece.index)
    for run_id, title in titles.items():
        assert f"ECE = {ece[run_id]:.4f} ({BINS} bins, group level)" in title
        assert f"class-wise ECE = {classwise[run_id]:.4f}" in title
        assert "PARTIAL" not in title


def test_two_class_runs_get_the_positive_class_diagram(report) -> None:
    rows = report.reliability.query("run_id == 'tiny/few_groups_seed1'")
    assert sorted(set(rows["curve"])) == ["class_1", "top_label"]
    three = report.reliability.query("run_id == 'good/resnet_af_seed1'")
    assert sorted(set(three["curve"])) == ["class_0", "class_1", "class_2", "top_label"]
    titles = _titles(report)
    assert "diagram: class 1" in titles["tiny/few_groups_seed1"]
    assert "diagram" not in titles["good/resnet_af_seed1"]


def test_empty_bins_are_gaps_in_the_figure(report) -> None:
    rows = report.reliability.query("run_id == 'good/resnet_af_seed1' and curve == 'top_label'")
    empty = (rows["count"] == 0).to_numpy()
    assert empty.any() and (~empty).any()
    figure = reliability_figure(rows, BINS, title="t")
    line = next(ln for ln in figure.axes[0].get_lines() if ln.get_marker() == "o")
    assert np.array_equal(np.isnan(np.asarray(line.get_ydata(), dtype=float)), empty)
    bars = figure.axes[1].patches
    assert [b.get_height() for b in bars] == pytest.approx(rows["fraction"].tolist())


@pytest.mark.parametrize("extra_lines", [0, 3])
def test_the_fixed_layout_keeps_every_text_inside_and_clear_of_the_panels(
    report, extra_lines: int
) -> None:
    """Title above the panels, labels and tick labels inside the figure, y labels aligned.

    The layout is fixed (no tight_layout), so this checks what a measured
    layout would have guaranteed, for a short and a five-line title.
    """
    rows = report.reliability.query("run_id == 'good/resnet_af_seed1' and curve == 'top_label'")
    title = "\n".join(["a model | a dataset | seed 1 | 40 groups | PARTIAL", "ECE = 0.1"])
    title += "".join(f"\nno intervals: reason line {i}" for i in range(extra_lines))
    figure = reliability_figure(rows, BINS, title=title)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    box = figure.bbox
    upper, lower = figure.axes
    heading = figure.get_suptitle()
    assert heading == title
    title_box = figure._suptitle.get_window_extent(renderer)
    assert title_box.y0 >= upper.get_window_extent(renderer).y1
    assert title_box.y1 <= box.y1 and title_box.x0 >= box.x0 and title_box.x1 <= box.x1
    texts = [upper.yaxis.label, lower.yaxis.label, lower.xaxis.label]
    texts += [t for ax in (upper, lower) for t in ax.get_yticklabels() + ax.get_xticklabels()]
    for text in texts:
        if text.get_visible() and text.get_text():
            extent = text.get_window_extent(renderer)
            assert box.x0 <= extent.x0 and extent.x1 <= box.x1, text.get_text()
            assert box.y0 <= extent.y0 and extent.y1 <= box.y1, text.get_text()
    label_edges = {round(label.get_window_extent(renderer).x1, 3) for label in texts[:2]}
    assert len(label_edges) == 1, "the two panels' y labels share one column"
    for ax in (upper, lower):
        ticks = [t.get_window_extent(renderer) for t in ax.get_yticklabels()]
        assert max(t.x1 for t in ticks) < ax.get_window_extent(renderer).x0
        assert ax.yaxis.label.get_window_extent(renderer).x1 < min(t.x0 for t in ticks)


def test_pdf_figures_are_opt_in(corpus, tmp_path) -> None:
    """pdf=True adds a vector PDF next to each PNG, listed and hashed in the manifest."""
    run = [corpus / "partial/missing_split_seed1"]
    kwargs = {"n_resamples": 20, "allow_partial": True}
    plain = statistical_report(run, tmp_path / "png", **kwargs)
    both = statistical_report(run, tmp_path / "both", pdf=True, **kwargs)
    assert [p.suffix for p in plain.figures] == [".png"]
    assert [p.suffix for p in both.figures] == [".png", ".pdf"]
    assert both.manifest["settings"]["pdf"] is True
    pdf_entry = next(e for e in both.manifest["figures"] if e["format"] == "pdf")
    data = (both.out_dir / pdf_entry["path"]).read_bytes()
    assert data.startswith(b"%PDF") and b"CreationDate" not in data
    assert hashlib.sha256(data).hexdigest() == pdf_entry["sha256"]
    assert both.figures[0].read_bytes() == plain.figures[0].read_bytes()
    for name in ("run_summary.csv", "reliability.csv"):
        assert (both.out_dir / name).read_bytes() == (plain.out_dir / name).read_bytes()


def test_partial_title_and_reliability_bins(corpus, tmp_path) -> None:
    result = statistical_report(
        [corpus / "partial/missing_split_seed1"],
        tmp_path / "out",
        n_resamples=20,
        allow_partial=True,
    )
    assert result.manifest["inputs"][0]["run_id"] == "missing_split_seed1"
    with Image.open(result.figures[0]) as image:
        assert "PARTIAL" in image.text["Title"]
    bins = result.reliability.query("curve == 'top_label'")
    assert bins["bin_lower"].tolist() == [b / 10 for b in range(10)]
    assert bins["bin_upper"].tolist() == [(b + 1) / 10 for b in range(10)]
    assert bins["count"].sum() == 12


def test_manifest_hashes_match_the_files(report, corpus: Path) -> None:
    manifest = json.loads((report.out_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest == report.manifest
    assert list(manifest) == [
        "schema_version", "command", "roots", "settings", "inputs", "included_runs", "outputs",
        "figures", "plotting_source_sha256", "versions", "caveats", "interval_statement",
    ]  # fmt: skip
    assert manifest["roots"] == [corpus.resolve().as_posix()]
    assert [o["path"] for o in manifest["outputs"]] == list(CSV_COLUMNS)
    for entry in manifest["outputs"] + manifest["figures"]:
        data = (report.out_dir / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    # PNG only unless pdf=True (see test_pdf_figures_are_opt_in)
    assert [e["format"] for e in manifest["figures"]] == ["png"] * len(manifest["included_runs"])
    assert manifest["settings"]["pdf"] is False
    for entry in manifest["inputs"]:
        for name, digest in entry["files"].items():
            assert hashlib.sha256((Path(entry["path"]) / name).read_bytes()).hexdigest() == digest
    lstm = next(e for e in manifest["inputs"] if "lstm" in e["run_id"])
    assert list(lstm["files"]) == [
        "classification_metrics.csv", "run_metadata.json", "split_info.json", "predictions.txt",
    ]  # fmt: skip
    assert manifest["settings"]["reference"] == "resnet" and manifest["settings"]["bins"] == BINS
    assert manifest["versions"]["matplotlib"] is not None
    assert len(manifest["plotting_source_sha256"]) == 64
    caveats = {c["code"]: c for c in manifest["caveats"]}
    assert caveats["mcnemar_sample_level_anti_conservative"]["text"] == MCNEMAR_CAVEAT
    too_few = ["duplicates/newer_seed1", "pairs/class_mismatch_seed1", "tiny/few_groups_seed1"]
    assert caveats["too_few_groups"]["run_ids"] == too_few
    assert caveats["too_few_groups"]["reasons"]["tiny/few_groups_seed1"] == (
        f"too_few_groups: 4 test groups; an interval needs at least {MIN_BOOTSTRAP_GROUPS}"
    )
    assert manifest["settings"]["interval"] == "auto"
    assert manifest["settings"]["min_bootstrap_groups"] == MIN_BOOTSTRAP_GROUPS
    assert manifest["settings"]["min_bootstrap_groups_per_class"] == MIN_BOOTSTRAP_GROUPS_PER_CLASS
    assert manifest["settings"]["min_informative_groups"] == MIN_INFORMATIVE_GROUPS
    assert "seeds" in manifest["interval_statement"]


def test_too_few_groups_get_point_estimates_only(report) -> None:
    rows = report.run_summary.query("run_id == 'tiny/few_groups_seed1'")
    intervals = rows[~rows["metric"].str.contains("collapse")]
    assert intervals["estimate"].notna().all()
    assert intervals[["ci_low", "ci_high"]].isna().all().all()
    assert (intervals["n_valid_resamples"] == 0).all()
    assert set(intervals["no_interval_reason"]) == {
        f"too_few_groups: 4 test groups; an interval needs at least {MIN_BOOTSTRAP_GROUPS}"
    }
    good = report.run_summary.query("run_id == 'good/inception_af_seed1'")
    assert good.loc[~good["metric"].str.contains("collapse"), "no_interval_reason"].isna().all()
    methods = good.set_index("metric")["interval_method"].dropna()
    assert methods.pop("auroc") == "expanded-bca" and set(methods) == {"expanded-percentile"}
    assert "no intervals: too_few_groups: 4 test groups" in _titles(report)["tiny/few_groups_seed1"]
    # A run with enough groups overall but too few in a class (12 groups, 3 per class).
    written = pd.read_csv(report.out_dir / "run_summary.csv")
    mismatch = written.query("run_id == 'pairs/class_mismatch_seed1'")["no_interval_reason"]
    assert set(mismatch) >= {
        f"too_few_groups: 12 test groups; an interval needs at least {MIN_BOOTSTRAP_GROUPS}"
    }


def test_paired_rows_equal_the_public_bootstrap(report, corpus: Path) -> None:
    reference = read_predictions(corpus / "good/resnet_af_seed2")
    candidate = read_predictions(corpus / "good/inception_af_seed2")
    columns = ["prob_0", "prob_1", "prob_2"]
    rows = report.paired_comparisons.query("seed == 2").set_index("metric")
    assert rows.index.tolist() == list(REPORT_PAIRED_METRICS)
    for name in REPORT_PAIRED_METRICS:
        expected = cluster_bootstrap_difference(
            reference["y_true"],
            candidate[columns].to_numpy(),
            reference[columns].to_numpy(),
            reference["group_id"],
            metric=batch_metric(name, bins=BINS),
            n_resamples=N_RESAMPLES,
            seed=4,
        )
        row = rows.loc[name]
        assert row["delta"] == expected.difference
        assert row["candidate_value"] == expected.estimate_a
        assert (row["ci_low"], row["ci_high"], row["p_value"]) == (
            expected.ci_low,
            expected.ci_high,
            expected.p_value,
        )
        lower_is_better = name in {"brier", "nll", "ece", "classwise_ece"}
        assert row["higher_is_better"] is not lower_is_better
        better = expected.prob_a_smaller if lower_is_better else expected.prob_a_larger
        assert row["probability_candidate_better"] == better


def test_probability_candidate_better_reverses_for_loss_metrics(report) -> None:
    paired = report.paired_comparisons
    losses = paired[paired["metric"].isin(["brier", "nll", "ece", "classwise_ece"])]
    assert len(losses) > 0
    for _, row in losses.iterrows():
        if row["delta"] < 0 and row["ci_high"] < 0:  # candidate clearly smaller: better
            assert row["probability_candidate_better"] > 0.5
    # A candidate with a larger loss in every resample is never "better".
    assert not ((losses["ci_low"] > 0) & (losses["probability_candidate_better"] > 0)).any()


def test_holm_per_dataset_and_metric(report) -> None:
    paired = report.paired_comparisons
    assert len(paired) == 3 * len(REPORT_PAIRED_METRICS)  # inception x2, lstm x1
    for _, family in paired.groupby(["dataset", "metric"]):
        expected = holm_adjust(family["p_value"].tolist())
        np.testing.assert_allclose(family["p_holm"], expected)
    assert (
        paired[["dataset", "seed", "candidate_model"]].apply(tuple, axis=1).is_monotonic_increasing
    )


def test_mcnemar_rows(report, corpus: Path) -> None:
    table = report.mcnemar
    assert table["level"].tolist() == ["sample", "group"] * 3
    reference = read_predictions(corpus / "good/resnet_af_seed1")
    candidate = read_predictions(corpus / "good/inception_af_seed1")
    columns = ["prob_0", "prob_1", "prob_2"]
    y = reference["y_true"].to_numpy()
    expected = mcnemar(
        reference[columns].to_numpy().argmax(axis=1) == y,
        candidate[columns].to_numpy().argmax(axis=1) == y,
    )
    row = table[(table["seed"] == 1) & (table["candidate_model"] == "inception")].iloc[0]
    assert (
        row["only_reference_correct"],
        row["only_candidate_correct"],
        row["p_value"],
    ) == expected
    assert row["p_mid"] == mcnemar_mid_p(
        reference[columns].to_numpy().argmax(axis=1) == y,
        candidate[columns].to_numpy().argmax(axis=1) == y,
    )
    assert (table["p_mid"] <= table["p_value"]).all()
    assert table.loc[table["level"] == "sample", "anti_conservative"].all()
    assert not table.loc[table["level"] == "group", "anti_conservative"].any()
    assert set(table.loc[table["level"] == "group", "n_units"]) == {60}


def test_refuses_to_overwrite_and_changes_nothing(report, corpus: Path) -> None:
    before = _hashes(report.out_dir)
    with pytest.raises(FileExistsError, match="refusing to overwrite existing report at"):
        statistical_report([corpus], report.out_dir, n_resamples=10)
    assert _hashes(report.out_dir) == before


def test_overwrite_reproduces_identical_files(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    roots = [corpus / "good", corpus / "tiny"]
    statistical_report(roots, out, n_resamples=30, reference="resnet")
    first = {k: v[0] for k, v in _hashes(out).items()}
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    statistical_report(roots, out, n_resamples=30, reference="resnet", overwrite=True)
    second = {k: v[0] for k, v in _hashes(out).items()}
    assert second.pop("keep.txt")
    assert first == second


def test_report_never_modifies_run_directories(corpus: Path, tmp_path: Path) -> None:
    before = _hashes(corpus)
    statistical_report([corpus], tmp_path / "out", n_resamples=5, plots=False)
    assert _hashes(corpus) == before


def test_without_reference_paired_files_are_header_only(corpus: Path, tmp_path: Path) -> None:
    result = statistical_report([corpus / "good"], tmp_path / "out", n_resamples=10, plots=False)
    assert result.paired_comparisons.empty and result.mcnemar.empty
    assert (tmp_path / "out/paired_comparisons.csv").read_text().count("\n") == 1
    assert not (tmp_path / "out/figures").exists()
    assert result.manifest["figures"] == [] and result.manifest["plotting_source_sha256"] is None


def test_overlapping_roots_and_run_ids(corpus: Path, tmp_path: Path) -> None:
    result = statistical_report(
        [corpus / "good", corpus / "good/resnet_af_seed1"], tmp_path / "out", n_resamples=5,
        plots=False,
    )  # fmt: skip
    # The roots' common path is good/, so run_ids are relative to it; the run
    # reached through both roots is taken once.
    ids = [entry["run_id"] for entry in result.manifest["inputs"]]
    assert ids == sorted(p.name for p in (corpus / "good").iterdir())


def test_none_passing_still_writes_the_report(corpus: Path, tmp_path: Path) -> None:
    result = statistical_report([corpus / "bad"], tmp_path / "out", n_resamples=5)
    assert result.run_summary.empty and len(result.exclusions) == 13
    assert (tmp_path / "out/manifest.json").is_file()
    assert (tmp_path / "out/run_summary.csv").read_text().count("\n") == 1


def test_library_errors(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        statistical_report([tmp_path / "absent"], tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ComparisonError, match="no run directory"):
        statistical_report([tmp_path / "empty"], tmp_path / "out")
    with pytest.raises(ComparisonError, match="reference model 'resnt'"):
        statistical_report([corpus / "good"], tmp_path / "out", reference="resnt")
    assert not (tmp_path / "out").exists()
    for settings in ({"bins": 0}, {"n_resamples": 0}, {"confidence_level": 1.5}, {"seed": -1}):
        with pytest.raises(ComparisonError):
            statistical_report([corpus / "good"], tmp_path / "out", **settings)
    assert not (tmp_path / "out").exists()


def test_no_plots_never_imports_matplotlib(corpus: Path, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from deepecgkit.analysis.compare import statistical_report\n"
        f"statistical_report([{str(corpus / 'good')!r}], {str(tmp_path / 'out')!r},"
        " n_resamples=5, plots=False)\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'\n"
        "assert 'torch' not in sys.modules and 'dagster' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert math.isfinite(pd.read_csv(tmp_path / "out/run_summary.csv")["estimate"].iloc[0])


def test_a_perfect_run_gets_no_accuracy_or_auroc_interval(report) -> None:
    # The resnet runs classify and rank all 60 test groups correctly: nothing on the test
    # set shows their error, so those two intervals are withheld with the reason (CSV,
    # manifest caveat, figure title), while the run's other metrics keep theirs.
    rows = report.run_summary.query("run_id == 'good/resnet_af_seed1'").set_index("metric")
    reasons = rows["no_interval_reason"]
    assert reasons["accuracy"] == (
        "too_few_informative_groups: 0 misclassified groups; an accuracy interval needs at "
        f"least {MIN_INFORMATIVE_GROUPS}"
    )
    assert reasons["auroc"].startswith(
        "too_few_informative_groups: 0 groups in a misordered or tied positive-negative pair"
    )
    assert rows.loc[["accuracy", "auroc"], ["ci_low", "ci_high"]].isna().all().all()
    assert rows.loc[["accuracy", "auroc"], "estimate"].tolist() == [1.0, 1.0]
    others = rows.drop(index=["accuracy", "auroc", "exact_class_collapse", "near_class_collapse"])
    assert others["no_interval_reason"].isna().all() and others["ci_low"].notna().all()
    caveat = next(c for c in report.manifest["caveats"] if c["code"] == "intervals_withheld")
    listed = {(e["run_id"], e["metric"]): e["reason"] for e in caveat["intervals"]}
    assert listed[("good/resnet_af_seed1", "auroc")] == reasons["auroc"]
    assert set(listed) == {
        (run, metric)
        for run in ("good/resnet_af_seed1", "good/resnet_af_seed2")
        for metric in ("accuracy", "auroc")
    }
    title = _titles(report)["good/resnet_af_seed1"]
    assert "no accuracy interval: too_few_informative_groups: 0 misclassified" in title
    assert "no auroc interval: too_few_informative_groups" in title
    assert "no intervals" not in title
