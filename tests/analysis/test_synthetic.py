"""Tests of the synthetic corpus generator: every planted effect is found by the analysis.

The generator is a test and demo tool, so its contract is that the analysis
library, reading the directories back from disk, finds what was planted: a
reversal as a supported flip, a null pair as no significant difference, a
collapse as bimodal, a tiny test partition as untestable, a multi-label
dataset under the multi-label schema, mixed averaging as a conflict.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from deepecgkit.analysis.aggregation import reconcile_averaging
from deepecgkit.analysis.constants import MIN_TEST_GROUPS
from deepecgkit.analysis.ranking import all_flip_tests, flip_test, paired_difference
from deepecgkit.analysis.statistics import is_bimodal
from deepecgkit.rundir.format import (
    AVERAGING_MACRO_LABEL,
    MULTI_LABEL_METRICS,
    SINGLE_LABEL_METRICS,
    run_directory_name,
)
from deepecgkit.rundir.read import discover_runs, read_run_metrics
from deepecgkit.rundir.records import runs_to_frame
from deepecgkit.rundir.synthetic import (
    Collapse,
    CorpusSpec,
    MixedAveraging,
    MultiLabel,
    NullPair,
    Reversal,
    TinyTestPartition,
    example_spec,
    generate_corpus,
)
from deepecgkit.rundir.write import write_run_directory

#: The example grid plus a tiny test partition on a fourth dataset.
PLANTED = example_spec(
    datasets=("afib", "ptbxl", "sleep", "holter"),
    effects=(*example_spec().effects, TinyTestPartition("holter", n_test=12, n_test_groups=6)),
)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, pd.DataFrame, Path]:
    """(reconciled runs frame, ground truth, root) of the planted corpus."""
    root = tmp_path_factory.mktemp("planted")
    truth = generate_corpus(root, PLANTED)
    records, diagnostics = discover_runs([root])
    assert all(not entries for entries in diagnostics.values()), diagnostics
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        frame, _ = reconcile_averaging(runs_to_frame(records))
    return frame, truth, root


def test_the_grid_is_written_and_read_back_exactly(
    planted: tuple[pd.DataFrame, pd.DataFrame, Path],
) -> None:
    _, truth, root = planted
    assert len(truth) == 4 * 4 * 5
    assert len([p for p in root.iterdir() if p.is_dir()]) == len(truth)
    assert not list(root.rglob("*.tmp")), "no temporary files are left behind"
    records, _ = discover_runs([root])
    read_back = {(r.model, r.dataset, r.seed): r.metrics["f1"] for r in records}
    for row in truth.itertuples(index=False):
        assert read_back[(row.model, row.dataset, row.seed)] == row.f1, "f1 round-trips exactly"
    assert {r.fingerprint for r in records} == {"synthetic-v1"}
    assert {r.returncode for r in records} == {0}


def test_reversal_is_a_supported_flip(planted: tuple[pd.DataFrame, pd.DataFrame, Path]) -> None:
    frame, truth, _ = planted
    flip = flip_test(frame, "cnn", "resnet", "afib", "ptbxl")
    assert flip["verdict"] == "supported"
    assert flip["mean_1"] > 0 > flip["mean_2"]
    true_f1 = truth.groupby(["model", "dataset"])["true_f1"].first()
    assert true_f1[("cnn", "afib")] - true_f1[("resnet", "afib")] == pytest.approx(0.05)
    assert true_f1[("cnn", "ptbxl")] - true_f1[("resnet", "ptbxl")] == pytest.approx(-0.05)
    grid = all_flip_tests(frame)
    row = grid[
        (grid["model_a"] == "cnn")
        & (grid["model_b"] == "resnet")
        & (grid["dataset_1"] == "afib")
        & (grid["dataset_2"] == "ptbxl")
    ]
    assert row["verdict"].tolist() == ["supported"]


def test_null_pair_is_not_significant(tmp_path: Path) -> None:
    """Across several generator seeds, the null pair's difference rarely excludes zero."""
    datasets = ("d1", "d2", "d3")
    excluded = 0
    for state in range(4):
        root = tmp_path / f"state{state}"
        spec = CorpusSpec(
            models=("a", "b", "c"),
            datasets=datasets,
            seeds=tuple(range(5)),
            effects=(NullPair("a", "b"),),
            random_state=state,
        )
        truth = generate_corpus(root, spec)
        base = truth.groupby(["model", "dataset"])["true_f1"].first()
        assert all(base[("a", d)] == base[("b", d)] for d in datasets)
        records, _ = discover_runs([root])
        frame = runs_to_frame(records)
        for dataset in datasets:
            result = paired_difference(frame, "a", "b", dataset)
            assert abs(result["mean"]) < 0.03
            excluded += result["excludes_zero"]
        flips = all_flip_tests(frame, models=["a", "b"])
        assert not flips["verdict"].isin(["supported", "contradicted"]).any()
    assert excluded <= 2, f"{excluded} of 12 null differences excluded zero"


def test_collapse_is_bimodal(planted: tuple[pd.DataFrame, pd.DataFrame, Path]) -> None:
    frame, truth, _ = planted
    lstm_sleep = truth[(truth["model"] == "lstm") & (truth["dataset"] == "sleep")]
    flagged, reason = is_bimodal(lstm_sleep.sort_values("seed")["f1"])
    assert flagged and reason.startswith("2 of 5 seeds sit ")
    flips = all_flip_tests(frame)
    involved = flips[
        ((flips["model_a"] == "lstm") | (flips["model_b"] == "lstm"))
        & ((flips["dataset_1"] == "sleep") | (flips["dataset_2"] == "sleep"))
        & (flips["dataset_1"] != "holter")
        & (flips["dataset_2"] != "holter")
    ]
    assert len(involved) > 0
    assert (involved["verdict"] == "bimodal").all()
    assert involved["reason"].str.contains("sleep: lstm: 2 of 5 seeds sit").all()


def test_tiny_test_partition_is_untestable(
    planted: tuple[pd.DataFrame, pd.DataFrame, Path],
) -> None:
    frame, _, root = planted
    holter = next(r for r in discover_runs([root])[0] if r.dataset == "holter")
    assert holter.n_test == 12 and holter.n_test_groups == 6 < MIN_TEST_GROUPS
    flips = all_flip_tests(frame)
    with_holter = flips[(flips["dataset_1"] == "holter") | (flips["dataset_2"] == "holter")]
    assert len(with_holter) > 0
    assert (with_holter["verdict"] == "untestable").all()
    assert with_holter["reason"].str.contains("holter: test partition holds 6 ").all()
    assert with_holter["p_adjusted"].isna().all()


def test_multi_label_dataset_uses_the_macro_label_schema(
    planted: tuple[pd.DataFrame, pd.DataFrame, Path],
) -> None:
    _, truth, root = planted
    records, _ = discover_runs([root])
    for record in records:
        if record.dataset == "ptbxl":
            assert record.multi_label is True
            assert record.averaging == AVERAGING_MACRO_LABEL
            assert list(record.metrics) == list(MULTI_LABEL_METRICS)
        else:
            assert record.multi_label is False
            assert list(record.metrics) == list(SINGLE_LABEL_METRICS)
    assert (truth.loc[truth["dataset"] == "ptbxl", "averaging"] == AVERAGING_MACRO_LABEL).all()
    header = (root / "cnn_ptbxl_seed0" / "classification_metrics.csv").read_text().splitlines()[0]
    assert "exact_match_accuracy" in header.split(",") and "average" not in header.split(",")


def test_mixed_averaging_is_an_averaging_conflict(
    planted: tuple[pd.DataFrame, pd.DataFrame, Path],
) -> None:
    _, truth, root = planted
    binary = truth[truth["averaging"] == "binary"]
    assert binary[["model", "dataset", "seed"]].values.tolist() == [["transformer", "afib", 0]]
    records, _ = discover_runs([root])
    with pytest.warns(RuntimeWarning, match="transformer"):
        frame, conflicts = reconcile_averaging(runs_to_frame(records))
    assert conflicts.values.tolist() == [["afib", "transformer", "macro", 1]]
    kept = frame[(frame["model"] == "transformer") & (frame["dataset"] == "afib")]
    assert sorted(kept["seed"].unique()) == [1, 2, 3, 4]


def _corpus_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_generation_is_deterministic_for_a_random_state(tmp_path: Path) -> None:
    spec = example_spec(seeds=(0, 1, 2))
    first = generate_corpus(tmp_path / "one", spec)
    second = generate_corpus(tmp_path / "two", spec)
    assert _corpus_bytes(tmp_path / "one") == _corpus_bytes(tmp_path / "two")
    pd.testing.assert_frame_equal(first.drop(columns="run_dir"), second.drop(columns="run_dir"))
    other = generate_corpus(tmp_path / "three", example_spec(seeds=(0, 1, 2), random_state=1))
    assert not np.allclose(first["f1"], other["f1"])


def test_upstream_style_names_read_back_with_their_seeds(tmp_path: Path) -> None:
    spec = CorpusSpec(
        models=("resnet1d", "simple-cnn"),
        datasets=("af-classification",),
        seeds=(3, 42),
        upstream_names=True,
        fingerprint=None,
    )
    generate_corpus(tmp_path, spec)
    pattern = re.compile(r"^\d{8}-\d{6}-(resnet1d|simple-cnn)-af-classification-seed(3|42)$")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 4 and all(pattern.match(name) for name in names)
    assert run_directory_name("resnet1d", "af-classification", 42, upstream=True) in names
    for path in tmp_path.iterdir():
        metadata_path = path / "run_metadata.json"
        metadata = json.loads(metadata_path.read_text(encoding="utf-8"))
        assert "params_fingerprint" not in metadata
        del metadata["seed"]
        metadata_path.write_text(json.dumps(metadata), encoding="utf-8")
    records, diagnostics = discover_runs([tmp_path])
    assert diagnostics["no_seed"] == []
    assert sorted((r.model, r.seed) for r in records) == [
        ("resnet1d", 3),
        ("resnet1d", 42),
        ("simple-cnn", 3),
        ("simple-cnn", 42),
    ]
    for record in records:
        assert record.run_dir.name.endswith(f"-seed{record.seed}")


def test_write_run_directory_optional_files(tmp_path: Path) -> None:
    run = write_run_directory(
        tmp_path / "bare_seed7",
        model='m, "quoted"',
        dataset="d",
        metrics={"f1": float("nan"), "accuracy": 0.5, "not_a_metric": 1.0},
        average=None,
        returncode=None,
    )
    assert not (run / "split_info.json").exists()
    record = read_run_metrics(run)
    assert record is not None
    assert record.model == 'm, "quoted"' and record.seed == 7
    assert record.averaging == "unknown" and record.returncode is None
    assert np.isnan(record.metrics["f1"]) and record.metrics["accuracy"] == 0.5
    assert "not_a_metric" not in record.metrics


def test_effects_apply_only_where_planted(tmp_path: Path) -> None:
    spec = CorpusSpec(
        models=("a", "b"),
        datasets=("x", "y"),
        seeds=(0, 1, 2),
        effects=(
            Collapse("a", "x", n_seeds=1, score=0.2),
            MultiLabel("y"),
            MixedAveraging("b", "x", seeds=(1, 2)),
            Reversal("a", "b", "x", "y", margin=0.1),
        ),
    )
    truth = generate_corpus(tmp_path, spec).set_index(["model", "dataset", "seed"])
    assert truth.loc[("a", "x", 0), "f1"] < 0.3 < truth.loc[("a", "x", 1), "f1"]
    assert truth.loc[("a", "y", 0), "f1"] > 0.3
    assert truth.loc[("b", "x", 1), "averaging"] == "binary"
    assert truth.loc[("b", "x", 0), "averaging"] == "macro"
    assert truth.loc[("a", "x", 1), "averaging"] == "macro"
    assert bool(truth.loc[("b", "y", 0), "multi_label"]) is True
    assert truth.loc[("a", "x", 0), "true_f1"] - truth.loc[("b", "x", 0), "true_f1"] == (
        pytest.approx(0.1)
    )
