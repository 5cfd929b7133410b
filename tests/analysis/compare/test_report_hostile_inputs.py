"""``deepecg report`` on a hostile corpus: every bad run is an exclusion with its reason.

Each test is named after an item of issue 9 and builds its corpus from the
bundled example runs (real train-grid output with stored predictions).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from deepecgkit.rundir.format import (
    METADATA_FILENAME,
    METRICS_FILENAME,
    PREDICTIONS_FILENAME,
    SPLIT_INFO_FILENAME,
)
from deepecgkit.statistical_report import (
    cli as report_cli,
    report as report_module,
    statistical_report,
)

LOGREG_PR = "logreg-features_synthetic-long-pr"
CNN_PR = "simple-cnn_synthetic-long-pr"
REFERENCE = "logreg-features"
FAST = {"n_resamples": 20, "plots": False}
#: Seconds a report may take before it counts as hanging.
HANG_TIMEOUT = 60.0
PROJECT_ROOT = Path(__file__).resolve().parents[3]


def run_report_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = report_cli.main(["report", *(str(a) for a in args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def exclusion_reasons(out_dir: Path) -> dict[str, tuple[str, str]]:
    frame = pd.read_csv(out_dir / "exclusions.csv", dtype=str, keep_default_na=False)
    return {row.run_id: (row.reason, row.detail) for row in frame.itertuples()}


def edit_json(path: Path, **changes: object) -> None:
    payload = json.loads(path.read_text(encoding="utf-8"))
    payload.update(changes)
    path.write_text(json.dumps(payload), encoding="utf-8")


# --- 1. one bad input takes everything down -----------------------------------------------------


def _report_as_user(root: str, out: str) -> dict[str, object]:
    code = report_cli.main(["report", root, "--out", out, "--no-plots", "--n-resamples", "20"])
    return {"code": code, "exclusions": exclusion_reasons(Path(out)), "files": os.listdir(out)}


def test_unreadable_predictions_file_is_an_exclusion_not_an_abort(
    example_runs, as_unprivileged
) -> None:
    # Not under tmp_path: that folder is private to root, and nobody must reach the runs.
    base = Path(tempfile.mkdtemp(prefix="deepecg-report-perm-"))
    try:
        os.chmod(base, 0o755)
        runs = example_runs(base / "runs", LOGREG_PR, CNN_PR)
        for path in [runs, *runs.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        os.chmod(runs / f"{CNN_PR}_seed0" / PREDICTIONS_FILENAME, 0)
        os.chmod(runs / f"{CNN_PR}_seed1" / METRICS_FILENAME, 0)
        out = base / "out"
        out.mkdir(mode=0o777)
        os.chmod(out, 0o777)
        # The child imports nothing new: nobody may not read the interpreter's own
        # library (lazily loaded codecs included), so one run as root loads it all.
        _report_as_user(str(runs), str(base / "warm-up"))
        result = as_unprivileged(_report_as_user, str(runs), str(out))
    finally:
        shutil.rmtree(base)
    assert result["code"] == 0, "the other runs are reported"
    assert result["exclusions"] == {
        f"{CNN_PR}_seed0": ("unreadable", "predictions.csv: permission denied"),
        f"{CNN_PR}_seed1": ("unreadable", "classification_metrics.csv: permission denied"),
    }
    assert "manifest.json" in result["files"]


def test_seed_of_2_64_is_reported_exactly(example_runs, capsys, tmp_path: Path) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR, CNN_PR, seeds=(0, 1))
    seeds = {0: 2**64 + 7, 1: -1}
    for run in runs.iterdir():
        edit_json(run / METADATA_FILENAME, seed=seeds[int(run.name[-1])])
    out = tmp_path / "out"
    code, stdout, err = run_report_cli(
        capsys, runs, "--out", out, "--reference", REFERENCE, "--no-plots", "--n-resamples", "20"
    )
    assert (code, err) == (0, ""), err
    assert "4 runs (0 partial), 0 excluded" in stdout
    summary = pd.read_csv(out / "run_summary.csv", dtype={"seed": str})
    assert set(summary["seed"]) == {str(2**64 + 7), "-1"}
    paired = pd.read_csv(out / "paired_comparisons.csv", dtype={"seed": str})
    assert set(paired["seed"]) == {str(2**64 + 7), "-1"}, "both seeds pair, -1 included"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert {run["seed"] for run in manifest["included_runs"]} == {2**64 + 7, -1}


def test_run_of_unknown_seed_is_reported_but_never_paired(example_runs, tmp_path: Path) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR, CNN_PR, seeds=(0,))
    legacy = runs / "cnn_without_seed"
    (runs / f"{CNN_PR}_seed0").rename(legacy)
    edit_json(legacy / METADATA_FILENAME, seed=None)
    edit_json(runs / f"{LOGREG_PR}_seed0" / METADATA_FILENAME, seed=-1)
    result = statistical_report([runs], tmp_path / "out", reference=REFERENCE, **FAST)
    rows = result.exclusions.set_index("run_id")
    assert rows.loc["cnn_without_seed", "reason"] == "unknown_seed"
    assert pd.isna(rows.loc["cnn_without_seed", "seed"]), "no seed, not -1"
    assert result.paired_comparisons.empty


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_fifo_split_info_or_metadata_does_not_hang_the_report(example_runs, tmp_path: Path) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR, CNN_PR, seeds=(0, 1))
    fifos = ((f"{CNN_PR}_seed0", SPLIT_INFO_FILENAME), (f"{CNN_PR}_seed1", METADATA_FILENAME))
    for run, name in fifos:
        (runs / run / name).unlink()
        os.mkfifo(runs / run / name)
    result: list[object] = []
    worker = threading.Thread(
        target=lambda: result.append(statistical_report([runs], tmp_path / "out", **FAST)),
        daemon=True,
    )
    worker.start()
    worker.join(HANG_TIMEOUT)
    assert not worker.is_alive(), "the report blocked on a FIFO"
    assert exclusion_reasons(tmp_path / "out") == {
        f"{CNN_PR}_seed0": ("unreadable", "split_info.json: not a regular file (FIFO)"),
        f"{CNN_PR}_seed1": ("unreadable", "run_metadata.json: not a regular file (FIFO)"),
    }


def test_long_model_name_still_gives_a_complete_report(example_runs, tmp_path: Path) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR, seeds=(0, 1))
    long_name = "m" * 250
    for run in runs.iterdir():
        metrics = run / METRICS_FILENAME
        metrics.write_text(
            metrics.read_text(encoding="utf-8").replace("logreg-features,", f"{long_name},", 1),
            encoding="utf-8",
        )
    result = statistical_report([runs], tmp_path / "out", n_resamples=20, plots=True, pdf=True)
    assert len(result.run_summary["run_id"].unique()) == 2
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    figures = {entry["path"]: entry["run_id"] for entry in manifest["figures"]}
    assert len(figures) == 4, "the manifest maps every bounded figure name to its run"
    for path in figures:
        assert len(Path(path).name) < 200 and (tmp_path / "out" / path).is_file()


def test_non_utf8_symlinked_and_unlistable_directories_in_the_report(
    example_runs, tmp_path: Path
) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR, seeds=(0, 1))
    outside = example_runs(tmp_path / "outside", CNN_PR, seeds=(0,))
    (runs / "linked_run").symlink_to(outside / f"{CNN_PR}_seed0", target_is_directory=True)
    odd = os.path.join(os.fsencode(runs), b"caf\xe9_seed3")
    shutil.copytree(os.fsencode(runs / f"{LOGREG_PR}_seed0"), odd)
    result = statistical_report([runs], tmp_path / "out", **FAST)
    assert "linked_run" in set(result.run_summary["run_id"]), "a symlinked run is followed"
    assert exclusion_reasons(tmp_path / "out") == {
        "caf\\xe9_seed3": ("unreadable", "directory name is not valid UTF-8; rename it to use it")
    }
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert len(manifest["inputs"]) == 4


# --- 3. half-finished reports, bounded options, one-line errors ---------------------------------


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _manifest_vouches_for_the_files(out: Path) -> bool:
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    digests = _digests(out)
    return all(digests.get(entry["path"]) == entry["sha256"] for entry in manifest["outputs"])


def test_interrupted_overwrite_leaves_no_manifest_that_vouches_for_changed_files(
    example_runs, tmp_path: Path
) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR, CNN_PR, seeds=(0, 1))
    out = tmp_path / "out"
    statistical_report([runs], out, reference=REFERENCE, n_resamples=50, plots=True)
    shutil.rmtree(runs / f"{CNN_PR}_seed1")  # the corpus changes
    command = [
        sys.executable, "-m", "deepecgkit.cli", "report", str(runs), "--out", str(out),
        "--overwrite", "--reference", REFERENCE, "--n-resamples", "50",
    ]  # fmt: skip
    first_csv = out / "run_summary.csv"
    before = first_csv.stat().st_mtime_ns
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env)
    deadline = time.monotonic() + HANG_TIMEOUT
    while first_csv.stat().st_mtime_ns == before and process.poll() is None:
        assert time.monotonic() < deadline, "the report never wrote its first file"
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)  # kill -9 while the figures are being drawn
    process.wait()
    manifest = out / "manifest.json"
    assert not manifest.exists() or _manifest_vouches_for_the_files(out), (
        "a manifest that is left must describe the files beside it"
    )
    if process.returncode == -signal.SIGKILL:
        assert not manifest.exists(), "killed mid-rewrite: no manifest, so not a finished report"

    assert subprocess.run(command, cwd=PROJECT_ROOT, env=env, check=False).returncode == 0
    clean = tmp_path / "clean"
    statistical_report([runs], clean, reference=REFERENCE, n_resamples=50, plots=True)
    rerun_digests = _digests(out)  # also holds the figures of the removed run
    for name, digest in _digests(clean).items():
        assert rerun_digests[name] == digest, f"{name} differs from a clean report"
    assert _manifest_vouches_for_the_files(out)


def test_huge_bins_is_refused_with_one_clear_line(capsys, example_runs, tmp_path: Path) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR, seeds=(0,))
    out = tmp_path / "o"
    code, stdout, err = run_report_cli(capsys, runs, "--out", out, "--bins", "1000000000")
    assert code == 1 and stdout == ""
    assert err == (
        "deepecg report: error: bins must be an integer >= 1 and <= 10000, got 1000000000\n"
    )
    assert not out.exists(), "nothing is written"


def test_error_message_whose_path_holds_a_newline_is_one_line(capsys, tmp_path: Path) -> None:
    missing = tmp_path / "two\nlines"
    code, _, err = run_report_cli(capsys, missing, "--out", tmp_path / "o")
    assert code == 1
    (line,) = err.splitlines()
    assert line == (
        f"deepecg report: error: ROOT {tmp_path}/two\\nlines does not exist or is not a directory"
    )


def test_report_module_bounds_bins_before_reading_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="<= 10000"):
        report_module.statistical_report([tmp_path], tmp_path / "o", bins=10_001)
