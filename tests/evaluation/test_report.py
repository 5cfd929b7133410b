"""Run directories: atomic files, schema, metadata, and the round trip through discovery."""

from __future__ import annotations

import hashlib
import json
import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from deepecgkit.evaluation import (
    ECGEvaluator,
    calculate_classification_metrics,
    calibration_report,
    write_run_report,
)
from deepecgkit.io import atomic_write_bytes, atomic_write_text
from deepecgkit.rundir.format import (
    AVERAGING_MACRO_LABEL,
    MULTI_LABEL_COLUMNS,
    MULTI_LABEL_METRICS,
    SINGLE_LABEL_COLUMNS,
    SINGLE_LABEL_METRICS,
)
from deepecgkit.rundir.read import discover_runs, read_run_metrics
from deepecgkit.rundir.write import params_fingerprint, write_failed_run_report

RUN_FILES = (
    "predictions.csv",
    "val_predictions.csv",
    "split_info.json",
    "run_metadata.json",
    "classification_metrics.csv",
)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# --- atomic writes -----------------------------------------------------------------------


def test_atomic_write_creates_parents_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "a" / "b" / "file.txt"
    atomic_write_text(target, "first\nline\n")
    atomic_write_text(target, "second\n")
    assert target.read_bytes() == b"second\n"
    atomic_write_bytes(tmp_path / "blob.bin", b"\x00\x01")
    assert (tmp_path / "blob.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.txt"]


def test_atomic_write_failure_removes_temporary_and_keeps_old_file(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "inside").write_text("x")
    with pytest.raises(OSError):
        atomic_write_text(blocked, "cannot replace a non-empty directory")
    assert [p.name for p in tmp_path.iterdir()] == ["blocked"]
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(tmp_path / "ascii.txt", "é", encoding="ascii")
    assert [p.name for p in tmp_path.iterdir()] == ["blocked"]


# --- params_fingerprint ------------------------------------------------------------------


def test_params_fingerprint_is_canonical():
    params = {"lr": np.float64(0.001), "layers": (64, 128), "path": Path("/data"), "n": np.int64(3)}
    reordered = {"n": 3, "path": "/data", "layers": [64, 128], "lr": 0.001}
    canonical = json.dumps(
        {"layers": [64, 128], "lr": 0.001, "n": 3, "path": "/data"},
        sort_keys=True,
        separators=(",", ":"),
    )
    expected = hashlib.sha256(canonical.encode("ascii")).hexdigest()
    assert params_fingerprint(params) == params_fingerprint(reordered) == expected
    assert params_fingerprint({"lr": 0.01}) != params_fingerprint({"lr": 0.001})


def test_params_fingerprint_rejects_nan_and_objects():
    with pytest.raises(ValueError, match="NaN"):
        params_fingerprint({"lr": float("nan")})
    with pytest.raises(TypeError, match="not JSON serialisable"):
        params_fingerprint({"model": object()})


# --- write_run_report: schema and values -------------------------------------------------


def test_single_label_run_directory(tmp_path, multiclass, draw, rng):
    val = draw.multiclass(rng, 200, 4, scale=2.0)
    groups = np.repeat(np.arange(100), 3)
    run = tmp_path / "resnet_af_seed3"
    row = write_run_report(
        run,
        multiclass.y,
        multiclass.prob,
        model="resnet",
        dataset="af",
        logits=multiclass.logits,
        val=(val.y, val.logits),
        groups=groups,
        split_info={"n_train": 1000, "grouped": True},
        metadata={"params": {"lr": 0.001}, "extra": (1, 2)},
        calibration_bins=10,
    )
    assert list(row) == list(SINGLE_LABEL_COLUMNS)
    assert sorted(p.name for p in run.iterdir()) == sorted(RUN_FILES)
    names = ["accuracy", "balanced_accuracy", "precision", "recall", "f1", "auc", "mcc"]
    expected = calculate_classification_metrics(
        multiclass.y, multiclass.prob, metrics=names, average="macro"
    )
    assert row["auroc"] == expected["auc"] and row["mcc"] == expected["mcc"]
    assert row["average"] == "macro"
    calibration = calibration_report(
        multiclass.y,
        multiclass.prob,
        n_bins=10,
        fit_targets=val.y,
        fit_logits=val.logits,
        eval_logits=multiclass.logits,
    )
    assert {key: row[key] for key in calibration} == calibration

    metrics = pd.read_csv(run / "classification_metrics.csv")
    assert list(metrics.columns) == list(SINGLE_LABEL_COLUMNS)
    assert metrics.loc[0, "f1"] == row["f1"]  # full precision survives the CSV

    split = read_json(run / "split_info.json")
    assert list(split)[:4] == ["n_train", "n_val", "n_test", "n_test_groups"]
    assert split == {
        "n_train": 1000,
        "n_val": 200,
        "n_test": 300,
        "n_test_groups": 100,
        "grouped": True,
    }

    meta = read_json(run / "run_metadata.json")
    assert list(meta)[:3] == ["seed", "returncode", "params_fingerprint"]
    assert meta["seed"] == 3 and meta["returncode"] == 0
    assert meta["params_fingerprint"] == params_fingerprint({"lr": 0.001})
    assert meta["task"] == "multiclass" and meta["n_classes"] == 4
    assert meta["calibration_bins"] == 10 and meta["average"] == "macro"
    assert meta["extra"] == [1, 2] and meta["params"] == {"lr": 0.001}
    assert {"written_at", "deepecgkit_version"} <= set(meta)


def test_predictions_file_round_trips_exactly(tmp_path, multiclass, draw, rng):
    val = draw.multiclass(rng, 50, 4)
    write_run_report(
        tmp_path / "run",
        multiclass.y,
        multiclass.prob,
        model="m",
        dataset="d",
        logits=multiclass.logits,
        val=(val.y, val.logits, np.arange(50) // 5),
        metadata={"seed": 0},
    )
    frame = pd.read_csv(tmp_path / "run" / "predictions.csv")
    expected_columns = ["sample_id", "group_id", "y_true"]
    expected_columns += [f"prob_{k}" for k in range(4)] + [f"logit_{k}" for k in range(4)]
    assert list(frame.columns) == expected_columns
    np.testing.assert_array_equal(
        frame[[f"prob_{k}" for k in range(4)]].to_numpy(), multiclass.prob
    )
    np.testing.assert_array_equal(
        frame[[f"logit_{k}" for k in range(4)]].to_numpy(), multiclass.logits
    )
    np.testing.assert_array_equal(frame["group_id"], frame["sample_id"])
    val_frame = pd.read_csv(tmp_path / "run" / "val_predictions.csv")
    np.testing.assert_allclose(
        val_frame[[f"prob_{k}" for k in range(4)]].to_numpy(),
        np.exp(val.logits) / np.exp(val.logits).sum(1, keepdims=True),
        atol=1e-15,
    )
    assert val_frame["group_id"].tolist() == (np.arange(50) // 5).tolist()


def test_binary_vector_is_expanded_and_single_logit_kept(tmp_path, binary):
    p = binary.prob[:, 1]
    row = write_run_report(
        tmp_path / "run",
        binary.y,
        p,
        model="m",
        dataset="d",
        logits=binary.logits,
        metadata={"seed": 1},
    )
    frame = pd.read_csv(tmp_path / "run" / "predictions.csv")
    assert list(frame.columns) == ["sample_id", "group_id", "y_true", "prob_0", "prob_1", "logit_0"]
    np.testing.assert_array_equal(frame["prob_0"], 1.0 - p)
    assert row["average"] == "binary"
    assert math.isnan(row["temperature"]) and math.isnan(row["ece_temp"])
    text = (tmp_path / "run" / "classification_metrics.csv").read_text()
    assert ",,,,,," in text  # the six NaN calibration fields are empty
    assert "\r" not in text


def test_multilabel_run_directory(tmp_path, multilabel):
    row = write_run_report(
        tmp_path / "run",
        multilabel.y,
        multilabel.prob,
        model="m",
        dataset="d",
        metadata={"seed": 2},
    )
    assert list(row) == list(MULTI_LABEL_COLUMNS)
    assert "average" not in row
    frame = pd.read_csv(tmp_path / "run" / "predictions.csv")
    assert [c for c in frame.columns if c.startswith("y_true")] == [
        "y_true_0",
        "y_true_1",
        "y_true_2",
    ]
    meta = read_json(tmp_path / "run" / "run_metadata.json")
    assert meta["average"] == AVERAGING_MACRO_LABEL and meta["task"] == "multilabel"


def test_calibration_columns_in_the_metrics_file(tmp_path, binary, multilabel, draw, rng):
    from deepecgkit.evaluation.calibration import calculate_calibration_metrics

    run = tmp_path / "binary"
    row = write_run_report(run, binary.y, binary.prob, model="m", dataset="d", logits=binary.logits)
    written = pd.read_csv(run / "classification_metrics.csv").iloc[0]
    expected = calculate_calibration_metrics(binary.y, binary.prob)
    for name in ("classwise_ece", "ece_debiased", "classwise_ece_debiased"):
        assert written[name] == pytest.approx(expected[name], abs=1e-15) == row[name]
    # Read back through the analysis: the new columns are part of the metric schema.
    assert read_run_metrics(run).metrics["classwise_ece"] == pytest.approx(row["classwise_ece"])
    # Multi-label with a validation split: one temperature per label, in the metadata.
    val = draw.multilabel(rng, 300, 3, scale=2.0)
    row = write_run_report(
        tmp_path / "multi",
        multilabel.y,
        multilabel.prob,
        model="m",
        dataset="d",
        val=(val.y, val.logits),
        metadata={"seed": 1},
    )
    meta = read_json(tmp_path / "multi" / "run_metadata.json")
    assert len(meta["label_temperatures"]) == 3
    geometric = float(np.exp(np.mean(np.log(meta["label_temperatures"]))))
    assert row["temperature"] == pytest.approx(geometric)
    assert math.isfinite(row["classwise_ece_temp"])


def test_stale_validation_file_is_removed(tmp_path, multiclass, draw, rng):
    val = draw.multiclass(rng, 50, 4)
    run = tmp_path / "run_seed1"
    write_run_report(
        run, multiclass.y, multiclass.prob, model="m", dataset="d", val=(val.y, val.logits)
    )
    assert (run / "val_predictions.csv").exists()
    write_run_report(run, multiclass.y, multiclass.prob, model="m", dataset="d")
    assert not (run / "val_predictions.csv").exists()


def test_metrics_file_is_written_last(tmp_path, multiclass):
    run = tmp_path / "run_seed1"
    write_run_report(run, multiclass.y, multiclass.prob, model="m", dataset="d")
    order = [
        "predictions.csv",
        "split_info.json",
        "run_metadata.json",
        "classification_metrics.csv",
    ]
    stamps = [(run / name).stat().st_mtime_ns for name in order]
    assert stamps == sorted(stamps)


def test_seed_fallbacks_and_json_safety(tmp_path, multiclass, caplog):
    with caplog.at_level(logging.WARNING):
        write_run_report(
            tmp_path / "noseed",
            multiclass.y,
            multiclass.prob,
            model="m",
            dataset="d",
            metadata={"score": np.float32(0.5), "missing": float("nan"), "where": Path("/x")},
        )
    meta = read_json(tmp_path / "noseed" / "run_metadata.json")
    assert meta["seed"] is None and "recording seed null" in caplog.text, "no seed, not -1"
    assert meta["score"] == 0.5 and meta["missing"] is None and meta["where"] == "/x"
    assert meta["params_fingerprint"] == ""
    split = read_json(tmp_path / "noseed" / "split_info.json")
    assert split["n_train"] is None and split["n_val"] is None
    with pytest.raises(TypeError, match="not JSON serialisable"):
        write_run_report(
            tmp_path / "bad",
            multiclass.y,
            multiclass.prob,
            model="m",
            dataset="d",
            metadata={"x": object()},
        )


# --- write_run_report: validation --------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": ""}, "model must be a non-empty string"),
        ({"dataset": "  "}, "dataset must be a non-empty string"),
        ({"calibration_bins": 0}, "calibration_bins"),
        ({"average": "samples"}, "average must be one of"),
        ({"logits": np.zeros((300, 3))}, "does not fit a multiclass task"),
        ({"logits": np.zeros((299, 4))}, "has 299 samples"),
        ({"groups": np.arange(10)}, "groups has 10 entries"),
        ({"groups": np.r_[np.arange(299.0), np.nan]}, "non-finite"),
        ({"val": (np.zeros(5),)}, "val must be"),
        ({"val": (np.zeros(5, dtype=int), np.zeros((5, 2)))}, "val logits"),
        ({"val": (np.full(5, 9), np.zeros((5, 4)))}, "val y_true"),
        ({"split_info": {"n_test": 299}}, "contradicts the data"),
        ({"split_info": {"n_test_groups": 5}}, "contradicts the data"),
        ({"metadata": {"seed": True}}, "must be an int"),
        ({"metadata": {"returncode": "0"}}, "must be an int"),
    ],
)
def test_invalid_arguments_write_nothing(tmp_path, multiclass, kwargs, message):
    arguments = {"model": "m", "dataset": "d", **kwargs}
    model, dataset = arguments.pop("model"), arguments.pop("dataset")
    with pytest.raises(ValueError, match=message):
        write_run_report(
            tmp_path / "run",
            multiclass.y,
            multiclass.prob,
            model=model,
            dataset=dataset,
            **arguments,
        )
    assert not (tmp_path / "run").exists()


def test_invalid_predictions_write_nothing(tmp_path, multiclass, multilabel):
    with pytest.raises(ValueError, match="do not sum to 1"):
        write_run_report(
            tmp_path / "run", multiclass.y, multiclass.prob * 0.9, model="m", dataset="d"
        )
    with pytest.raises(ValueError, match="always macro over labels"):
        write_run_report(
            tmp_path / "run", multilabel.y, multilabel.prob, model="m", dataset="d", average="micro"
        )
    assert not (tmp_path / "run").exists()


# --- failed runs -------------------------------------------------------------------------


def test_failed_run_report(tmp_path):
    run = tmp_path / "cnn_af_seed4"
    write_failed_run_report(
        run, "cnn", "af", error=RuntimeError("CUDA out of memory"), split_info={"n_test": 10}
    )
    meta = read_json(run / "run_metadata.json")
    assert meta["seed"] == 4 and meta["returncode"] == 1
    assert meta["error"] == "RuntimeError: CUDA out of memory"
    frame = pd.read_csv(run / "classification_metrics.csv")
    assert list(frame.columns) == list(SINGLE_LABEL_COLUMNS)
    assert (
        frame.loc[0, "model"] == "cnn"
        and frame.drop(columns=["model", "dataset"]).isna().all(axis=1)[0]
    )
    record = read_run_metrics(run)
    assert record.returncode == 1 and record.averaging == "unknown"
    records, diagnostics = discover_runs([tmp_path])
    assert records == [] and diagnostics["failed"] == [f"{run} (returncode 1)"]
    write_failed_run_report(tmp_path / "ml", "cnn", "ptbxl", multilabel=True, returncode=130)
    assert list(pd.read_csv(tmp_path / "ml" / "classification_metrics.csv").columns) == list(
        MULTI_LABEL_COLUMNS
    )


@pytest.mark.parametrize("returncode", [0, True, 1.0])
def test_failed_run_needs_nonzero_int_returncode(tmp_path, returncode):
    with pytest.raises(ValueError, match="non-zero int"):
        write_failed_run_report(tmp_path / "run", "m", "d", returncode=returncode)


# --- end to end: evaluator -> write_run_report -> discover_runs --------------------------


@pytest.mark.parametrize("shape", ["binary", "multiclass", "multilabel"])
def test_three_shapes_end_to_end(tmp_path, rng, shape):
    torch = pytest.importorskip("torch")
    n, features = 120, 6
    width = {"binary": 1, "multiclass": 4, "multilabel": 3}[shape]
    x = rng.normal(size=(2 * n, features)).astype(np.float32)
    torch.manual_seed(0)
    model = torch.nn.Linear(features, width)
    with torch.no_grad():
        raw = model(torch.from_numpy(x)).numpy().astype(np.float64)
    if shape == "binary":
        y = (raw[:, 0] + rng.normal(size=2 * n) > 0).astype(np.int64)
    elif shape == "multiclass":
        y = (raw + rng.gumbel(size=raw.shape)).argmax(axis=1)
    else:
        y = (raw + rng.logistic(size=raw.shape) > 0).astype(np.int64)
    test, val = slice(0, n), slice(n, 2 * n)

    evaluator = ECGEvaluator(metrics=["accuracy", "f1", "auc"])
    _, probabilities = evaluator.evaluate(model, (x[test], y[test]), return_predictions=True)
    expected_width = 2 if shape == "binary" else width
    assert probabilities.shape == (n, expected_width)
    root = tmp_path / "runs"
    for seed in (0, 1):
        row = write_run_report(
            root / f"linear_{shape}_seed{seed}",
            y[test],
            probabilities,
            model="linear",
            dataset=shape,
            logits=raw[test],
            val=(y[val], raw[val]),
            metadata={"params": {"width": width}},
        )
    records, diagnostics = discover_runs([root])
    assert diagnostics == {
        "unreadable": [],
        "no_seed": [],
        "duplicate": [],
        "failed": [],
        "suspect": [],
    }
    assert [r.seed for r in records] == [0, 1]
    record = records[0]
    assert record.model == "linear" and record.dataset == shape
    assert record.n_test == n and record.n_val == n and record.n_test_groups == n
    assert record.returncode == 0 and record.fingerprint == params_fingerprint({"width": width})
    if shape == "multilabel":
        assert record.multi_label and record.averaging == AVERAGING_MACRO_LABEL
        assert list(record.metrics) == [m for m in MULTI_LABEL_METRICS if m in row]
    else:
        assert not record.multi_label
        assert record.averaging == ("binary" if shape == "binary" else "macro")
        assert list(record.metrics) == [m for m in SINGLE_LABEL_METRICS if m in row]
    for name, value in record.metrics.items():
        assert value == pytest.approx(row[name], nan_ok=True, abs=0)
    assert math.isfinite(record.metrics["temperature"])
