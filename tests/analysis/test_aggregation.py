"""Tests of run discovery, the long frame, averaging reconciliation and aggregation."""

from __future__ import annotations

import json
import math
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from deepecgkit.analysis.aggregation import aggregate_runs, reconcile_averaging
from deepecgkit.analysis.schemas import AGGREGATE_COLUMNS
from deepecgkit.analysis.statistics import summarize_scores
from deepecgkit.rundir import read as aggregation
from deepecgkit.rundir.format import (
    AVERAGING_MACRO_LABEL,
    AVERAGING_UNKNOWN,
    METADATA_FILENAME,
    METRICS_FILENAME,
    SINGLE_LABEL_METRICS,
    SPLIT_INFO_FILENAME,
)
from deepecgkit.rundir.read import discover_runs, find_run_directories, read_run_metrics
from deepecgkit.rundir.records import RUN_FRAME_COLUMNS, RunRecord, runs_to_frame
from deepecgkit.rundir.synthetic import SplitSizes
from deepecgkit.rundir.write import write_run_directory


def make_run(root: Path, name: str, **kwargs: object) -> Path:
    defaults: dict[str, object] = {
        "model": "cnn",
        "dataset": "afib",
        "metrics": {"f1": 0.8, "accuracy": 0.85},
        "seed": 0,
        "split_sizes": SplitSizes(),
    }
    defaults.update(kwargs)
    return write_run_directory(root / name, **defaults)


def write_metrics(run_dir: Path, content: bytes | str) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    (run_dir / METRICS_FILENAME).write_bytes(data)
    return run_dir


# --- read_run_metrics -------------------------------------------------------------------------


def test_read_run_metrics_single_label(tmp_path: Path) -> None:
    run = make_run(tmp_path, "cnn_afib_seed0", seed=3, fingerprint="abc", returncode=0)
    record = read_run_metrics(str(run))
    assert isinstance(record, RunRecord)
    assert record.run_dir == run and record.model == "cnn" and record.dataset == "afib"
    assert record.seed == 3 and record.multi_label is False and record.averaging == "macro"
    assert list(record.metrics) == ["accuracy", "f1"], "metrics follow the schema order"
    assert (record.n_train, record.n_val, record.n_test, record.n_test_groups) == (
        800,
        100,
        200,
        180,
    )
    assert record.returncode == 0 and record.fingerprint == "abc"
    assert record.mtime == pytest.approx((run / METRICS_FILENAME).stat().st_mtime)


def test_read_run_metrics_multi_label_and_schema(tmp_path: Path) -> None:
    run = write_metrics(
        tmp_path / "ml_seed1",
        "model,dataset,label_accuracy,exact_match_accuracy,f1,accuracy,calibration_bins,average\n"
        "m,ptbxl,0.9,0.5,0.7,0.99,15,binary\n",
    )
    record = read_run_metrics(run)
    assert record.multi_label is True and record.averaging == AVERAGING_MACRO_LABEL
    assert record.metrics == {"label_accuracy": 0.9, "exact_match_accuracy": 0.5, "f1": 0.7}
    assert record.seed == 1, "seed falls back to the directory suffix"
    assert record.n_train is None and record.returncode is None and record.fingerprint is None


def test_read_run_metrics_upstream_format(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "20260301-101500-resnet1d-af-classification-seed42"
    write_metrics(
        run,
        "model,dataset,accuracy,precision,recall,f1,auroc,mcc,average,n_test_classes,"
        "n_predicted_classes,ece,adaptive_ece,mce,brier,ece_temp,adaptive_ece_temp,mce_temp,"
        "brier_temp,temperature,calibration_bins\n"
        "resnet1d,af-classification,0.9,0.8,0.7,0.75,0.93,0.6,macro,4,4,0.05,0.06,0.2,0.15,"
        "0.03,0.04,0.1,0.12,1.4,15\n",
    )
    (run / METADATA_FILENAME).write_text(
        json.dumps({"schema_version": 1, "model": "resnet1d", "returncode": 0, "lr": 1e-3})
    )
    (run / SPLIT_INFO_FILENAME).write_text(
        json.dumps(
            {
                "seed": 42,
                "n_train": 5000,
                "n_val": 1000,
                "n_test": 1500,
                "n_test_groups": 1500,
                "grouped": False,
                "test_groups": ["a", "b"],
            }
        )
    )
    record = read_run_metrics(run)
    assert record.seed == 42 and record.model == "resnet1d"
    assert "n_test_classes" not in record.metrics and "calibration_bins" not in record.metrics
    assert record.metrics["temperature"] == 1.4 and "balanced_accuracy" not in record.metrics
    assert record.n_test == 1500 and record.returncode == 0


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"model,dataset,f1\n",
        b"dataset,f1\nafib,0.8\n",
        b"model,f1\ncnn,0.8\n",
        b"model,dataset,f1\n,afib,0.8\n",
        b"model,dataset,f1\n  ,afib,0.8\n",
        b"model,dataset,f1\nNaN,afib,0.8\n",
        b"model,dataset,f1\ncnn,afib,0.8,extra\n",
        "model,dataset,f1\ncnn,afib\xe9,0.8\n".encode("latin-1"),
        b"\xff\xfe\x00m\x00o",
    ],
    ids=[
        "empty",
        "header-only",
        "no-model-column",
        "no-dataset-column",
        "blank-model",
        "whitespace-model",
        "nan-model",
        "too-many-fields",
        "latin-1",
        "utf-16",
    ],
)
def test_unusable_metrics_files(tmp_path: Path, content: bytes) -> None:
    run = write_metrics(tmp_path / "run_seed0", content)
    assert read_run_metrics(run) is None


def test_missing_or_irregular_metrics_file(tmp_path: Path) -> None:
    assert read_run_metrics(tmp_path / "nothing") is None
    (tmp_path / "dir_seed0" / METRICS_FILENAME).mkdir(parents=True)
    assert read_run_metrics(tmp_path / "dir_seed0") is None


def test_cell_values_nan_inf_and_garbage(tmp_path: Path) -> None:
    run = write_metrics(
        tmp_path / "r_seed0",
        "\ufeffmodel,dataset,f1,accuracy,auroc,mcc,precision,average\n"
        "007,af,nan,inf,,abc,-inf,\n"
        "ignored,row,1,1,1,1,1,macro\n",
    )
    record = read_run_metrics(run)
    assert record.model == "007", "model names stay strings"
    assert math.isnan(record.metrics["f1"]) and math.isnan(record.metrics["accuracy"])
    assert math.isnan(record.metrics["auroc"]) and math.isnan(record.metrics["mcc"])
    assert math.isnan(record.metrics["precision"]), "an infinite precision is out of range"
    assert record.suspect == (
        "accuracy inf outside [0, 1]; dropped",
        "precision -inf outside [0, 1]; dropped",
    )
    assert record.averaging == AVERAGING_UNKNOWN


@pytest.mark.parametrize(
    ("metadata", "expected_seed", "expected_rc", "expected_fp"),
    [
        ({"seed": 7, "returncode": 0, "params_fingerprint": "x"}, 7, 0, "x"),
        ({"seed": True, "returncode": False}, 4, None, None),
        ({"seed": 3.0, "returncode": "0"}, 4, None, None),
        ({"seed": "3", "params_fingerprint": 12}, 4, None, None),
        ({}, 4, None, None),
    ],
)
def test_metadata_fields(
    tmp_path: Path, metadata: dict, expected_seed: int, expected_rc: int, expected_fp: str
) -> None:
    run = make_run(tmp_path, "cnn_afib_seed4", seed=None, returncode=None)
    (run / METADATA_FILENAME).write_text(json.dumps(metadata))
    record = read_run_metrics(run)
    assert (record.seed, record.returncode, record.fingerprint) == (
        expected_seed,
        expected_rc,
        expected_fp,
    )


@pytest.mark.parametrize(
    "metadata_bytes",
    [b"{not json", b"[1, 2]", b"3", b'"text"', b"null", b"\xff\xfe{}"],
    ids=["malformed", "list", "number", "string", "null", "non-utf8"],
)
def test_malformed_metadata_falls_back_to_directory(tmp_path: Path, metadata_bytes: bytes) -> None:
    run = make_run(tmp_path, "m_d_seed9", seed=1)
    (run / METADATA_FILENAME).write_bytes(metadata_bytes)
    record = read_run_metrics(run)
    assert record is not None and record.seed == 9 and record.returncode is None


def test_no_seed_anywhere_gives_none(tmp_path: Path) -> None:
    run = make_run(tmp_path, "legacy_run", seed=None)
    assert read_run_metrics(run).seed is None


def test_split_info_keeps_only_ints(tmp_path: Path) -> None:
    run = make_run(
        tmp_path,
        "r_seed0",
        split_sizes={"n_train": 10.0, "n_val": True, "n_test": "5", "n_test_groups": 4},
    )
    record = read_run_metrics(run)
    assert (record.n_train, record.n_val, record.n_test, record.n_test_groups) == (
        None,
        None,
        None,
        4,
    )
    (run / SPLIT_INFO_FILENAME).write_bytes(b"{broken")
    assert read_run_metrics(run).n_test_groups is None


# --- discovery ---------------------------------------------------------------------------------


def test_discover_runs_reports_every_bad_input(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    good = make_run(root, "cnn_afib_seed0")
    make_run(root, "cnn_afib_seed1", seed=1)
    write_metrics(root / "empty_seed0", b"")
    write_metrics(root / "nomodel_seed0", "dataset,f1\nafib,0.8\n")
    make_run(root, "legacy", seed=None, model="lstm")
    make_run(root, "crashed_seed2", seed=2, returncode=1)
    make_run(root, "interrupted_seed3", seed=3, returncode=130, model="lstm")
    (root / "not_a_run").mkdir()
    (root / "stray.txt").write_text("x")
    records, diagnostics = discover_runs(root)
    assert list(diagnostics) == ["unreadable", "no_seed", "duplicate", "failed", "suspect"]
    assert [r.run_dir.name for r in records] == ["cnn_afib_seed0", "cnn_afib_seed1"]
    assert diagnostics["unreadable"] == [
        f"{root / 'empty_seed0'} (classification_metrics.csv does not end with a line break "
        "(half-written?))",
        f"{root / 'nomodel_seed0'} (classification_metrics.csv has no model column)",
    ]
    assert diagnostics["no_seed"] == [str(root / "legacy")]
    assert diagnostics["failed"] == [
        f"{root / 'crashed_seed2'} (returncode 1)",
        f"{root / 'interrupted_seed3'} (returncode 130)",
    ]
    assert good in {r.run_dir for r in records}

    with_legacy, _ = discover_runs([root], include_legacy=True, include_failed=True)
    by_name = {r.run_dir.name: r for r in with_legacy}
    assert by_name["legacy"].seed is None, "an unknown seed stays out of band"
    assert by_name["crashed_seed2"].returncode == 1


def test_failed_run_without_seed_is_reported_in_both_lists_when_included(tmp_path: Path) -> None:
    make_run(tmp_path, "weird", seed=None, returncode=1)
    _, diagnostics = discover_runs([tmp_path], include_failed=True)
    assert len(diagnostics["failed"]) == 1 and len(diagnostics["no_seed"]) == 1
    _, diagnostics = discover_runs([tmp_path])
    assert len(diagnostics["failed"]) == 1 and diagnostics["no_seed"] == []


def set_mtime(run: Path, when: float) -> None:
    os.utime(run / METRICS_FILENAME, (when, when))


def test_duplicates_newest_kept_unless_fingerprints_differ(tmp_path: Path) -> None:
    old = make_run(tmp_path / "a", "cnn_afib_seed0", metrics={"f1": 0.1}, fingerprint="p")
    new = make_run(tmp_path / "b", "cnn_afib_seed0", metrics={"f1": 0.9}, fingerprint="p")
    other = make_run(tmp_path / "c", "cnn_afib_seed0", metrics={"f1": 0.5}, fingerprint="q")
    bare = make_run(tmp_path / "d", "cnn_afib_seed0", metrics={"f1": 0.4})
    set_mtime(old, 1_000)
    set_mtime(new, 2_000)
    roots = [tmp_path / "a", tmp_path / "b", tmp_path / "c", tmp_path / "d"]
    records, diagnostics = discover_runs(roots)
    assert {r.run_dir for r in records} == {new, other, bare}
    assert diagnostics["duplicate"] == [f"{old} (dropped; kept {new})"]
    every, diagnostics = discover_runs(roots, on_duplicate="all")
    assert len(every) == 4 and diagnostics["duplicate"] == []
    with pytest.raises(ValueError, match=r"cnn.*afib.*seed 0.*a/cnn_afib_seed0.*b/cnn_afib_seed0"):
        discover_runs(roots, on_duplicate="error")


def test_duplicates_equal_mtime_keep_first_discovered_and_chains(tmp_path: Path) -> None:
    runs = [make_run(tmp_path / f"r{i}", "cnn_afib_seed0") for i in range(3)]
    for run in runs:
        set_mtime(run, 5_000)
    records, diagnostics = discover_runs([tmp_path / "r0", tmp_path / "r1", tmp_path / "r2"])
    assert [r.run_dir for r in records] == [runs[0]]
    assert diagnostics["duplicate"] == [
        f"{runs[1]} (dropped; kept {runs[0]})",
        f"{runs[2]} (dropped; kept {runs[0]})",
    ]
    for when, run in zip((1, 2, 3), runs, strict=True):
        set_mtime(run, when)
    _, diagnostics = discover_runs([tmp_path / "r0", tmp_path / "r1", tmp_path / "r2"])
    assert diagnostics["duplicate"] == [
        f"{runs[0]} (dropped; kept {runs[2]})",
        f"{runs[1]} (dropped; kept {runs[2]})",
    ], "every loser names the final winner"


def test_unknown_on_duplicate_raises_before_scanning(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Unknown on_duplicate"):
        discover_runs(tmp_path / "does-not-exist", on_duplicate="oldest")


def test_discovery_sorts_under_every_policy(tmp_path: Path) -> None:
    for model in ("zeta", "alpha"):
        for dataset in ("b", "a"):
            for seed in (2, 0, 1):
                make_run(
                    tmp_path,
                    f"{model}_{dataset}_seed{seed}",
                    model=model,
                    dataset=dataset,
                    seed=seed,
                )
    for policy in ("newest", "all", "error"):
        records, _ = discover_runs(tmp_path, on_duplicate=policy)
        keys = [(r.dataset, r.model, r.seed) for r in records]
        assert keys == sorted(keys)


def test_recursive_discovery_and_overlapping_roots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_run(root / "group" / "deeper", "cnn_afib_seed0")
    make_run(root, "cnn_afib_seed1", seed=1)
    write_run_directory(root, model="top", dataset="afib", metrics={"f1": 0.5}, seed=5)
    flat, _ = discover_runs([root])
    assert [r.seed for r in flat] == [1]
    deep, _ = discover_runs([root, root / "group"], recursive=True)
    assert sorted(r.seed for r in deep) == [0, 1, 5], "the root itself and each run read once"
    twice, _ = discover_runs([root / "group", root], recursive=True, on_duplicate="all")
    assert len(twice) == 3


def test_symlink_loop_does_not_hang_and_links_are_followed_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_run(root / "a", "cnn_afib_seed0")
    (root / "a" / "loop").symlink_to(root, target_is_directory=True)
    outside = tmp_path / "outside"
    make_run(outside, "lstm_afib_seed0", model="lstm")
    (root / "link_out").symlink_to(outside, target_is_directory=True)
    (root / "second_link").symlink_to(outside, target_is_directory=True)
    records, diagnostics = discover_runs([root], recursive=True)
    assert [r.run_dir for r in records] == [
        root / "a" / "cnn_afib_seed0",
        root / "link_out" / "lstm_afib_seed0",
    ], "a link into the tree is skipped; a link out of it is followed once"
    assert diagnostics["duplicate"] == []


def test_directory_vanishing_mid_scan_is_skipped(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "root"
    for i in range(4):
        make_run(root / f"branch{i}", f"cnn_afib_seed{i}", seed=i)
    doomed = root / "branch2"
    real_scandir = os.scandir
    removed: list[Path] = []

    def flaky_scandir(path):  # the folder disappears between listing its parent and itself
        if isinstance(path, (str, os.PathLike)) and Path(path) == doomed and not removed:
            removed.append(doomed)
            shutil.rmtree(doomed)
        return real_scandir(path)

    monkeypatch.setattr(aggregation.os, "scandir", flaky_scandir)
    records, diagnostics = discover_runs([root], recursive=True)
    assert sorted(r.seed for r in records) == [0, 1, 3]
    assert diagnostics["unreadable"] == []


def test_nonexistent_roots_are_skipped(tmp_path: Path) -> None:
    make_run(tmp_path, "cnn_afib_seed0")
    file_root = tmp_path / "file"
    file_root.write_text("x")
    records, _ = discover_runs([tmp_path / "nope", file_root, tmp_path])
    assert len(records) == 1
    assert find_run_directories(str(tmp_path)) == [tmp_path / "cnn_afib_seed0"]


def test_custom_reader_is_used(tmp_path: Path) -> None:
    make_run(tmp_path, "cnn_afib_seed0")
    seen: list[Path] = []

    def reader(run_dir: Path) -> RunRecord | None:
        seen.append(run_dir)
        return read_run_metrics(run_dir)

    records, _ = discover_runs([tmp_path], reader=reader)
    assert seen == [tmp_path / "cnn_afib_seed0"] and len(records) == 1


# --- runs_to_frame -----------------------------------------------------------------------------


def test_runs_to_frame_columns_and_types(tmp_path: Path) -> None:
    make_run(tmp_path, "a_seed0", metrics={"f1": 0.5, "mcc": math.nan})
    make_run(tmp_path, "b_seed1", seed=1, split_sizes=None, model="lstm")
    records, _ = discover_runs(tmp_path)
    frame = runs_to_frame(records)
    assert list(frame.columns) == list(RUN_FRAME_COLUMNS)
    assert len(frame) == 4, "NaN metric values are kept as rows"
    assert frame["seed"].dtype == np.int64
    assert frame["n_train"].dtype == "Int64" and frame["n_train"].isna().sum() == 2
    assert frame.index.tolist() == [0, 1, 2, 3]
    empty = runs_to_frame([])
    assert list(empty.columns) == list(RUN_FRAME_COLUMNS) and empty.empty
    known = runs_to_frame(records[:1])
    assert known["n_train"].dtype == np.int64


# --- reconcile_averaging -----------------------------------------------------------------------


def frame_from(rows: list[tuple[str, str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"dataset": d, "model": m, "run_dir": r, "averaging": a, "metric": "f1", "value": 0.5}
            for d, m, r, a in rows
        ]
    )


def test_reconcile_drops_minority_and_warns() -> None:
    runs = frame_from(
        [
            ("afib", "cnn", "r0", "macro"),
            ("afib", "cnn", "r1", "macro"),
            ("afib", "cnn", "r2", "binary"),
            ("afib", "lstm", "r3", "macro"),
        ]
    )
    with pytest.warns(RuntimeWarning, match=r"cnn.*afib.*\['binary', 'macro'\].*macro.*1 run"):
        kept, conflicts = reconcile_averaging(runs)
    assert kept["run_dir"].tolist() == ["r0", "r1", "r3"] and kept.index.tolist() == [0, 1, 2]
    assert conflicts.to_dict("records") == [
        {"dataset": "afib", "model": "cnn", "kept_averaging": "macro", "dropped_runs": 1}
    ]


def test_reconcile_tie_breaks() -> None:
    runs = frame_from(
        [
            ("d", "m", "r0", "unknown"),
            ("d", "m", "r1", "weighted"),
            ("d", "n", "r2", "micro"),
            ("d", "n", "r3", "binary"),
        ]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept, conflicts = reconcile_averaging(runs)
    assert len(caught) == 2
    assert conflicts["kept_averaging"].tolist() == ["weighted", "binary"]
    assert kept["run_dir"].tolist() == ["r1", "r3"]


def test_reconcile_counts_runs_not_rows_and_unknown_can_win() -> None:
    runs = frame_from(
        [
            ("d", "m", "r0", "unknown"),
            ("d", "m", "r0", "unknown"),
            ("d", "m", "r1", "unknown"),
            ("d", "m", "r2", "macro"),
            ("d", "m", "r2", "macro"),
        ]
    )
    with pytest.warns(RuntimeWarning):
        kept, conflicts = reconcile_averaging(runs)
    assert conflicts["kept_averaging"].tolist() == ["unknown"]
    assert conflicts["dropped_runs"].tolist() == [1]
    assert set(kept["run_dir"]) == {"r0", "r1"}


def test_reconcile_empty_and_validation() -> None:
    empty = pd.DataFrame()
    kept, conflicts = reconcile_averaging(empty)
    assert kept is empty and list(conflicts.columns) == [
        "dataset",
        "model",
        "kept_averaging",
        "dropped_runs",
    ]
    with pytest.raises(ValueError, match="'averaging'"):
        reconcile_averaging(pd.DataFrame({"dataset": ["d"], "model": ["m"], "run_dir": ["r"]}))


# --- aggregate_runs ----------------------------------------------------------------------------


EXPECTED_WORKED_AGGREGATE = {
    ("afib", "cnn"): (0.81, 0.0158113883, 0.0070710678, 0.7903675684, 0.8296324316),
    ("afib", "lstm"): (0.72, 0.0158113883, 0.0070710678, 0.7003675684, 0.7396324316),
    ("afib", "resnet"): (0.77, 0.0100000000, 0.0044721360, 0.7575833600, 0.7824166400),
    ("ptbxl", "cnn"): (0.61, 0.0158113883, 0.0070710678, 0.5903675684, 0.6296324316),
    ("ptbxl", "lstm"): (0.64, 0.0158113883, 0.0070710678, 0.6203675684, 0.6596324316),
    ("ptbxl", "resnet"): (0.664, 0.0114017543, 0.0050990195, 0.6498428522, 0.6781571478),
}


def test_aggregate_runs_worked_example(worked_example_frame: pd.DataFrame) -> None:
    table = aggregate_runs(worked_example_frame)
    # test_cli.py and test_latex.py take the columns from schemas.AGGREGATE_COLUMNS;
    # here the contract is spelled out on purpose.
    assert list(table.columns) == list(AGGREGATE_COLUMNS)
    assert list(AGGREGATE_COLUMNS) == [
        "dataset",
        "model",
        "metric",
        "averaging",
        "n_runs",
        "n",
        "mean",
        "std",
        "sem",
        "lower_ci",
        "upper_ci",
        "seeds",
    ]
    assert len(table) == 6
    for row in table.itertuples(index=False):
        expected = EXPECTED_WORKED_AGGREGATE[(row.dataset, row.model)]
        got = (row.mean, row.std, row.sem, row.lower_ci, row.upper_ci)
        assert got == pytest.approx(expected, abs=1e-9)
        assert (row.n_runs, row.n, row.seeds, row.averaging) == (5, 5, "0,1,2,3,4", "macro")


def test_aggregate_runs_agrees_with_summarize_scores() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for model in ("a", "b", "c"):
        for seed in range(6):
            value = rng.normal(0.7, 0.05)
            if model == "b" and seed == 2:
                value = math.inf
            rows.append(("d", model, seed, "f1", value, "macro"))
    rows.append(("d", "c", -1, "f1", 0.1, "macro"))
    rows.append(("d", "c", 3, "f1", 0.2, "macro"))
    rows.append(("d", "e", 1, "f1", 0.2, "macro"))
    runs = pd.DataFrame(rows, columns=["dataset", "model", "seed", "metric", "value", "averaging"])
    table = aggregate_runs(runs, confidence_level=0.9).set_index("model")
    for model, block in runs.groupby("model"):
        expected = summarize_scores(block["value"], 0.9)
        for key, value in expected.items():
            got = table.loc[model, key]
            if math.isnan(value):
                assert math.isnan(got)
            else:
                assert got == pytest.approx(value, abs=1e-12)
    assert table.loc["b", "n_runs"] == 6 and table.loc["b", "n"] == 5
    assert table.loc["b", "seeds"] == "0,1,3,4,5"
    assert table.loc["c", "seeds"] == "-1,0,1,2,3,3,4,5", "legacy and duplicate seeds shown"
    assert table.loc["e", "n"] == 1 and math.isnan(table.loc["e", "lower_ci"])


def test_aggregate_runs_mixed_modes_and_empty_input() -> None:
    runs = pd.DataFrame(
        {
            "dataset": ["d", "d"],
            "model": ["m", "m"],
            "metric": ["f1", "f1"],
            "value": [0.5, 0.6],
            "seed": [0, 1],
            "averaging": ["macro", "binary"],
        }
    )
    assert aggregate_runs(runs)["averaging"].tolist() == ["binary+macro"]
    empty = aggregate_runs(pd.DataFrame())
    assert empty.empty and "seeds" in empty.columns
    with pytest.raises(ValueError, match="confidence_level"):
        aggregate_runs(pd.DataFrame(), confidence_level=2)
    with pytest.raises(ValueError, match="'averaging'"):
        aggregate_runs(runs.drop(columns="averaging"))


def test_aggregate_runs_ignores_rows_without_keys() -> None:
    runs = pd.DataFrame(
        {
            "dataset": ["d", None, "d"],
            "model": ["m", "m", "m"],
            "metric": ["f1", "f1", None],
            "value": [0.5, 0.6, 0.7],
            "seed": [0, 1, 2],
            "averaging": ["macro"] * 3,
        }
    )
    table = aggregate_runs(runs)
    assert len(table) == 1 and table.loc[0, "n_runs"] == 1


def test_discovery_round_trips_all_single_label_metrics(tmp_path: Path) -> None:
    metrics = {name: 0.1 + i / 100 for i, name in enumerate(SINGLE_LABEL_METRICS)}
    make_run(tmp_path, "r_seed0", metrics=metrics)
    (record,), _ = discover_runs(tmp_path)
    assert record.metrics == metrics
