"""deepecg train-grid: run directories, resume, conflicts, failures, exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from deepecgkit import cli, registry
from deepecgkit.models import FeatureExtractor, SimpleCNN
from deepecgkit.rundir.read import discover_runs
from deepecgkit.training.cli import parse_seeds

# Two-epoch models on 30 patients give degenerate validation splits whose fitted
# temperature sits at a bound; the evaluation package rightly warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:fitted temperature:RuntimeWarning")

SMOKE = ["--epochs", "2", "--dataset-option", "n_patients=30", "--no-progress"]
GRID = ["--models", "simple-cnn", "logreg-features", "--datasets", "synthetic-af", "--seeds", "0-1"]
RUNS = [
    f"{model}_synthetic-af_seed{seed}"
    for model in ("simple-cnn", "logreg-features")
    for seed in (0, 1)
]


def _grid(out: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["train-grid", *GRID, "--out", str(out), *SMOKE, *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _metadata(run: Path) -> dict:
    return json.loads((run / "run_metadata.json").read_text())


@pytest.fixture(scope="module")
def grid_out(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    out = tmp_path_factory.mktemp("grid")
    code = cli.main(["train-grid", *GRID, "--out", str(out), *SMOKE])
    assert code == 0
    yield out, ""


def test_one_complete_run_directory_per_cell(grid_out: tuple[Path, str]) -> None:
    out, _ = grid_out
    assert sorted(p.name for p in out.iterdir()) == sorted(RUNS)
    for name in RUNS:
        run = out / name
        for file in (
            "classification_metrics.csv",
            "predictions.csv",
            "val_predictions.csv",
            "run_metadata.json",
            "split_info.json",
        ):
            assert (run / file).is_file(), f"{name} lacks {file}"
        meta = _metadata(run)
        assert meta["returncode"] == 0 and meta["seed"] == int(name[-1])
        assert set(meta["timings"]) == {"data_s", "train_s", "eval_s", "total_s"}
        for key in ("params", "model_kind", "leads", "class_names", "torch_version", "device"):
            assert key in meta
    torch_run, sklearn_run = out / RUNS[0], out / RUNS[2]
    assert (torch_run / "checkpoint.pt").is_file() and (torch_run / "training_log.csv").is_file()
    assert _metadata(torch_run)["checkpoint"] == "checkpoint.pt"
    assert not (sklearn_run / "checkpoint.pt").exists()
    assert _metadata(sklearn_run)["checkpoint"] is None


def test_fingerprints_ignore_the_seed_only(grid_out: tuple[Path, str]) -> None:
    out, _ = grid_out
    prints = {name: _metadata(out / name)["params_fingerprint"] for name in RUNS}
    assert prints[RUNS[0]] == prints[RUNS[1]] != prints[RUNS[2]] == prints[RUNS[3]]


def test_every_seed_redraws_the_split_and_the_initialisation(grid_out: tuple[Path, str]) -> None:
    out, _ = grid_out
    groups = [
        set(pd.read_csv(out / f"simple-cnn_synthetic-af_seed{s}" / "predictions.csv")["group_id"])
        for s in (0, 1)
    ]
    assert groups[0] != groups[1]
    states = [
        torch.load(out / f"simple-cnn_synthetic-af_seed{s}" / "checkpoint.pt", weights_only=True)
        for s in (0, 1)
    ]
    assert not torch.equal(
        states[0]["state_dict"]["head.weight"], states[1]["state_dict"]["head.weight"]
    )
    assert states[0]["class_names"] == ["normal", "AF"] and states[0]["leads"] == ["II"]


def test_a_run_repeats_exactly(grid_out: tuple[Path, str], tmp_path: Path) -> None:
    from deepecgkit.training import run_grid

    out, _ = grid_out
    run_grid(
        ["simple-cnn"],
        ["synthetic-af"],
        [1],
        tmp_path,
        epochs=2,
        dataset_options={"n_patients": 30},
        progress=False,
    )
    name = "simple-cnn_synthetic-af_seed1"
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / name / "predictions.csv"),
        pd.read_csv(out / name / "predictions.csv"),
    )


def test_checkpoints_serve_as_frozen_encoders(grid_out: tuple[Path, str]) -> None:
    out, _ = grid_out
    extractor = FeatureExtractor.from_checkpoint(
        out / RUNS[0] / "checkpoint.pt", input_channels=1, device="cpu"
    )
    assert isinstance(extractor.model, SimpleCNN)
    assert extractor.extract_array(np.zeros((2, 1, 1000), np.float32)).shape == (2, 64)


def test_the_analysis_discovers_the_runs(grid_out: tuple[Path, str]) -> None:
    out, _ = grid_out
    records, diagnostics = discover_runs(out)
    assert sorted((r.model, r.seed) for r in records) == sorted(
        (m, s) for m in ("simple-cnn", "logreg-features") for s in (0, 1)
    )
    assert all(r.n_test_groups == 8 for r in records)
    assert not any(diagnostics.values())


def test_rerunning_skips_finished_runs(grid_out: tuple[Path, str], capsys) -> None:
    out, _ = grid_out
    before = {name: (out / name / "predictions.csv").stat().st_mtime_ns for name in RUNS}
    code, stdout, _ = _grid(out, capsys=capsys)
    assert code == 0
    assert [line.split()[0] for line in stdout.splitlines()[:-1]] == ["skipped"] * 4
    assert "0 done, 4 skipped, 0 failed, 0 conflict" in stdout.splitlines()[-1]
    assert before == {name: (out / name / "predictions.csv").stat().st_mtime_ns for name in RUNS}


def test_different_parameters_conflict_unless_overwritten(tmp_path: Path, capsys) -> None:
    args = ["--models", "logreg-features", "--datasets", "synthetic-af", "--seeds", "0"]
    base = ["train-grid", *args, "--out", str(tmp_path), *SMOKE]
    assert cli.main(base) == 0
    run = tmp_path / "logreg-features_synthetic-af_seed0"
    first = _metadata(run)["params_fingerprint"]
    capsys.readouterr()
    assert cli.main([*base, "--calibration-bins", "10"]) == 1
    stdout = capsys.readouterr().out
    assert (
        stdout.startswith("conflict logreg-features_synthetic-af_seed0") and "--overwrite" in stdout
    )
    assert _metadata(run)["params_fingerprint"] == first
    assert cli.main([*base, "--calibration-bins", "10", "--overwrite"]) == 0
    assert _metadata(run)["params_fingerprint"] != first
    assert _metadata(run)["calibration_bins"] == 10


def test_a_failing_run_is_recorded_and_the_grid_goes_on(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "data"
    empty.mkdir()
    out = tmp_path / "runs"
    argv = [
        "train-grid",
        "--models",
        "logreg-features",
        "--datasets",
        "mitbih-afdb",
        "synthetic-af",
        "--seeds",
        "0",
        "--data-dir",
        str(empty),
        "--out",
        str(out),
        "--no-progress",
    ]
    assert cli.main(argv) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("failed   logreg-features_mitbih-afdb_seed0")
    assert "DatasetNotFoundError" in lines[0]
    assert lines[1].startswith("done     logreg-features_synthetic-af_seed0")
    failed = out / "logreg-features_mitbih-afdb_seed0"
    meta = _metadata(failed)
    assert meta["returncode"] == 1 and meta["seed"] == 0
    assert "DatasetNotFoundError" in meta["error"] and "mitbih-afdb" in meta["error"]
    assert "Traceback" in (failed / "error.log").read_text()
    row = pd.read_csv(failed / "classification_metrics.csv")
    assert row["model"].item() == "logreg-features" and row["f1"].isna().all()
    records, _ = discover_runs(out, include_failed=True)
    assert {r.returncode for r in records} == {0, 1}
    # a failed run is retried (not skipped) when the grid runs again
    assert cli.main(argv) == 1
    assert capsys.readouterr().out.splitlines()[0].startswith("failed")


@pytest.fixture
def interrupting_model() -> Iterator[str]:
    """A registered model whose training is stopped by Ctrl-C (removed afterwards)."""

    class Interrupting(SimpleCNN):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise KeyboardInterrupt

    name = "test-interrupting-cnn"
    registry.register_model(name)(Interrupting)
    yield name
    registry._MODELS.pop(name)


def test_an_interrupted_run_leaves_no_metrics(
    tmp_path: Path, interrupting_model: str, capsys
) -> None:
    argv = [
        "train-grid",
        "--models",
        interrupting_model,
        "--datasets",
        "synthetic-af",
        "--seeds",
        "0-1",
        "--out",
        str(tmp_path),
        *SMOKE,
    ]
    assert cli.main(argv) == 130
    assert "interrupted" in capsys.readouterr().err
    run = tmp_path / f"{interrupting_model}_synthetic-af_seed0"
    assert not (run / "classification_metrics.csv").exists()
    assert not list(run.glob(".*.tmp"))
    assert _metadata(run)["returncode"] == 130
    assert not (tmp_path / f"{interrupting_model}_synthetic-af_seed1").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--models", "vgg", "--datasets", "synthetic-af", "--seeds", "0"], "unknown model 'vgg'"),
        (
            ["--models", "simple-cnn", "--datasets", "cifar", "--seeds", "0"],
            "unknown dataset 'cifar'",
        ),
        (
            ["--models", "simple-cnn", "--datasets", "synthetic-af", "--seeds", "3-1"],
            "bad seed range",
        ),
        (["--models", "simple-cnn", "--datasets", "synthetic-af", "--seeds", "x"], "bad seed 'x'"),
        (["--datasets", "synthetic-af", "--seeds", "0"], "--models"),
        (
            [
                "--models",
                "simple-cnn",
                "--datasets",
                "synthetic-af",
                "--seeds",
                "0",
                "--dataset-option",
                "n_patients",
            ],
            "KEY=VALUE",
        ),
        (
            [
                "--models",
                "simple-cnn",
                "--datasets",
                "synthetic-af",
                "--seeds",
                "0",
                "--device",
                "quantum",
            ],
            "unknown device 'quantum'",
        ),
        (
            [
                "--models",
                "simple-cnn",
                "--datasets",
                "synthetic-af",
                "--seeds",
                "0",
                "--checkpoints",
                "some",
            ],
            "--checkpoints",
        ),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path, capsys, argv, message) -> None:
    code = cli.main(["train-grid", *argv, "--out", str(tmp_path / "out"), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.count("\n") == 1 and message in captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_an_unwritable_output_is_a_usage_error(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    argv = ["train-grid", *GRID, "--out", str(blocker), *SMOKE]
    assert cli.main(argv) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_seed_lists() -> None:
    assert parse_seeds(["0-2", "7", "1", "3,4"]) == [0, 1, 2, 7, 3, 4]


def test_checkpoint_policies(tmp_path: Path) -> None:
    from deepecgkit.training import run_grid

    statuses = run_grid(
        ["simple-cnn"],
        ["synthetic-af"],
        [3, 2],
        tmp_path,
        epochs=1,
        checkpoints="first-seed",
        dataset_options={"n_patients": 30},
        progress=False,
    )
    assert [s.status for s in statuses] == ["done", "done"]
    assert (tmp_path / "simple-cnn_synthetic-af_seed2" / "checkpoint.pt").is_file()
    assert not (tmp_path / "simple-cnn_synthetic-af_seed3" / "checkpoint.pt").exists()
    assert _metadata(tmp_path / "simple-cnn_synthetic-af_seed3")["checkpoint"] is None


def test_parallel_workers_produce_the_same_directories(tmp_path: Path) -> None:
    from deepecgkit.training import run_grid

    statuses = run_grid(
        ["logreg-features"],
        ["synthetic-af"],
        [0, 1],
        tmp_path,
        jobs=2,
        dataset_options={"n_patients": 30},
        progress=False,
    )
    assert [(s.seed, s.status) for s in statuses] == [(0, "done"), (1, "done")]
    serial = tmp_path / "serial"
    run_grid(
        ["logreg-features"],
        ["synthetic-af"],
        [1],
        serial,
        dataset_options={"n_patients": 30},
        progress=False,
    )
    name = "logreg-features_synthetic-af_seed1"
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / name / "predictions.csv"),
        pd.read_csv(serial / name / "predictions.csv"),
    )
