"""Runs without predictions read as columns on a first build: the per-run outcome and memo."""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from deepecgkit.rundir.format import METADATA_FILENAME, PREDICTIONS_FILENAME, SPLIT_INFO_FILENAME
from deepecgkit.rundir.read import discover_runs
from deepecgkit.rundir.records import records_to_frame
from deepecgkit.statistical_report import ReportResult, frame_recall, fresh_read, statistical_report
from deepecgkit.statistical_report.frame_recall import record_columns, run_columns
from tests.deepecg_assets.output_trees import tree_bytes
from tests.statistical_report.prediction_runs import write_prediction_run
from tests.statistical_report.test_file_memo import Reads, rewrite_in_place
from tests.statistical_report.test_frame_recall import Recalls, _bare, _set_metadata
from tests.statistical_report.test_reuse import REFERENCE, SETTINGS

_FRESH_LOG = "runs without predictions read and excluded as columns"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Prediction runs and bare runs, plain and odd, whose checked values differ subtly."""
    root = tmp_path / "runs"
    write_prediction_run(root, REFERENCE, "afib", 0)
    write_prediction_run(root, "cnn", "afib", 0)
    _bare(root, "cnn", 1)
    _bare(root, "cnn", 2, params_fingerprint="f-other")
    _bare(root, "cnn", 3, params_fingerprint="")
    _bare(root, "cnn", 4, returncode=3, error="out of memory")
    _bare(root, "cnn", 5, returncode=-9, error=7)
    # Values equal in Python but not as JSON: each must keep its own memo text.
    for seed, error in ((6, 1), (7, True), (8, 1.0), (9, 0.0), (10, -0.0), (11, [1])):
        _bare(root, "gru", seed, error=error)
    (_bare(root, "gru", 12) / SPLIT_INFO_FILENAME).unlink()  # the per-run road: no split file
    (_bare(root, "gru", 13) / METADATA_FILENAME).write_text("{not json")  # unreadable
    (_bare(root, "gru", 14) / METADATA_FILENAME).write_text("[1, 2]")  # not an object
    os.symlink("nowhere", _bare(root, "gru", 15) / PREDICTIONS_FILENAME)  # a dangling link
    return root


def _frame(root: Path):
    records, _ = discover_runs([root], recursive=True, include_failed=True)
    return records_to_frame(records).sort_values("run_dir", ignore_index=True)


def _by_records(root: Path, out: Path) -> ReportResult:
    return statistical_report(
        None, out, records=run_columns(_frame(root)), overwrite=True, **SETTINGS
    )


def _by_run_dirs(root: Path, out: Path) -> ReportResult:
    """Without records: every run takes the per-run road (the columnar read needs them)."""
    run_dirs = _frame(root)["run_dir"].tolist()
    return statistical_report(None, out, run_dirs=run_dirs, overwrite=True, **SETTINGS)


def _fresh_count(caplog: pytest.LogCaptureFixture) -> int:
    counts = [r.args[0] for r in caplog.records if _FRESH_LOG in r.getMessage()]
    return sum(counts)


@pytest.mark.parametrize("chunk_runs", [2_000, 3])
def test_a_first_build_reads_plain_runs_as_columns_with_the_per_run_outcome(
    runs: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    chunk_runs: int,
) -> None:
    """Every file, the memo table included, equals that of the per-run road's build
    (in one chunk, and in chunks of three runs read by threads, whose order is kept)."""
    monkeypatch.setattr(fresh_read, "_CHUNK_RUNS", chunk_runs)
    monkeypatch.setattr(fresh_read, "available_cpus", lambda: 4)
    with caplog.at_level(logging.INFO, logger="deepecgkit.statistical_report"):
        columns = _by_records(runs, tmp_path / "columns")
    assert _fresh_count(caplog) == 11  # cnn 1-5, gru 6-11; gru 12-15 are odd
    per_run = _by_run_dirs(runs, tmp_path / "per_run")
    built, expected = tree_bytes(tmp_path / "columns"), tree_bytes(tmp_path / "per_run")
    assert sorted(built) == sorted(expected)
    for name, data in expected.items():
        assert built[name] == data, f"{name} differs from the per-run road's"
    reasons = columns.exclusions.set_index("run_id")["reason"].to_dict()
    assert reasons["cnn_afib_seed4"] == reasons["cnn_afib_seed5"] == "failed_run"
    assert reasons["gru_afib_seed13"] == reasons["gru_afib_seed14"] == "unreadable"
    details = columns.exclusions.set_index("run_id")["detail"].to_dict()
    assert details["cnn_afib_seed4"] == "returncode 3: out of memory"
    assert details["cnn_afib_seed5"] == "returncode -9"
    assert per_run.manifest == columns.manifest


def test_runs_read_as_columns_are_recalled_unread_on_a_refresh(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "out"
    first = _by_records(runs, out)
    recalls, reads = Recalls(monkeypatch), Reads(monkeypatch)
    with caplog.at_level(logging.INFO, logger="deepecgkit.statistical_report"):
        again = _by_records(runs, out)
    plain = {f"cnn_afib_seed{seed}" for seed in range(1, 6)}
    plain |= {f"gru_afib_seed{seed}" for seed in range(6, 12)}
    # gru 12 (no split file) is recalled too: the per-run road made its memo.
    assert set(recalls.recalled[0]) == plain | {"gru_afib_seed12"}
    assert not reads.runs_read() & plain
    assert _fresh_count(caplog) == 0
    assert again.manifest == first.manifest


def test_an_edit_in_place_and_a_new_predictions_file_after_a_columnar_read_are_seen(
    runs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    _by_records(runs, out)
    edited = runs / "cnn_afib_seed1"
    directory = os.stat(edited)
    metadata = json.loads((edited / METADATA_FILENAME).read_text())
    rewrite_in_place(edited / METADATA_FILENAME, json.dumps({**metadata, "returncode": 2}).encode())
    assert os.stat(edited).st_mtime_ns == directory.st_mtime_ns  # only the file's stat shows it
    (runs / "cnn_afib_seed2" / PREDICTIONS_FILENAME).write_bytes(
        (runs / "cnn_afib_seed0" / PREDICTIONS_FILENAME).read_bytes()
    )
    _set_metadata(runs / "cnn_afib_seed3", returncode=1)  # through a new file: a new inode
    again = _by_records(runs, out)
    clean = _by_run_dirs(runs, tmp_path / "clean")
    reasons = again.exclusions.set_index("run_id")["reason"].to_dict()
    assert reasons["cnn_afib_seed1"] == reasons["cnn_afib_seed3"] == "failed_run"
    assert reasons["cnn_afib_seed2"] == "ambiguous_fingerprint"  # its predictions were read
    assert again.manifest == clean.manifest
    for name in ("exclusions.csv", "manifest.json", "report_memos.parquet"):
        assert (out / name).read_bytes() == (tmp_path / "clean" / name).read_bytes(), name


def test_a_record_whose_metrics_mtime_moved_takes_the_per_run_road(
    runs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    frame = _frame(runs)
    moved = frame.assign(mtime=frame["mtime"] - 1.0)
    with caplog.at_level(logging.INFO, logger="deepecgkit.statistical_report"):
        result = statistical_report(
            None, tmp_path / "moved", records=run_columns(moved), **SETTINGS
        )
    assert _fresh_count(caplog) == 0
    expected = _by_run_dirs(runs, tmp_path / "per_run")
    assert result.manifest == expected.manifest


def test_exclusions_are_logged_once_not_per_run(
    runs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="deepecgkit.statistical_report"):
        _by_run_dirs(runs, tmp_path / "out")
    assert not [r for r in caplog.records if r.getMessage().startswith("excluded ")]
    summaries = [
        r.getMessage() for r in caplog.records if "runs read one by one excluded" in r.getMessage()
    ]
    assert len(summaries) == 1 and summaries[0].startswith("15 of 17 runs")
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="deepecgkit.statistical_report"):
        _by_run_dirs(runs, tmp_path / "debug")
    assert len([r for r in caplog.records if r.getMessage().startswith("excluded ")]) == 15


def test_checked_fields_share_objects_only_for_equal_json() -> None:
    shared: dict = {}
    fields = ("params_fingerprint", "error")
    one = fresh_read._checked({"params_fingerprint": "f", "error": 1}, fields, shared)
    same = fresh_read._checked({"error": 1, "params_fingerprint": "f", "x": 2}, fields, shared)
    true = fresh_read._checked({"params_fingerprint": "f", "error": True}, fields, shared)
    real = fresh_read._checked({"params_fingerprint": "f", "error": 1.0}, fields, shared)
    absent = fresh_read._checked({"params_fingerprint": "f"}, fields, shared)
    none = fresh_read._checked({"params_fingerprint": "f", "error": None}, fields, shared)
    assert one is same and list(same) == ["params_fingerprint", "error"]
    assert true is not one and real is not one and absent is not none
    assert absent == {"params_fingerprint": "f"} and none == {
        "params_fingerprint": "f",
        "error": None,
    }


def _threads_of_batches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the thread that stats each batch, as ``frame_recall._stats`` runs."""
    names: list[str] = []
    batch = frame_recall._stat_batch

    def named(paths: list[str]) -> object:
        names.append(threading.current_thread().name)
        return batch(paths)

    monkeypatch.setattr(frame_recall, "_stat_batch", named)
    return names


def test_stat_batches_that_do_not_wait_stay_in_the_calling_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [str(tmp_path / f"f{index}") for index in range(5)]
    monkeypatch.setattr(frame_recall, "_STAT_BATCH", 2)
    monkeypatch.setattr(frame_recall, "available_cpus", lambda: 4)
    monkeypatch.setattr(frame_recall, "_WAITING_STAT_S", float("inf"))
    threads = _threads_of_batches(monkeypatch)
    found = frame_recall._stats(paths)
    assert found is not None and not found.found.any()
    assert threads == [threading.current_thread().name] * 3


def test_stat_batches_in_threads_keep_the_order_and_the_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = []
    for index in range(11):
        path = tmp_path / f"f{index}"
        if index % 3:
            path.write_bytes(b"x" * index)
        paths.append(str(path))
    serial = frame_recall._stats(paths)
    monkeypatch.setattr(frame_recall, "_STAT_BATCH", 2)
    monkeypatch.setattr(frame_recall, "available_cpus", lambda: 4)
    monkeypatch.setattr(frame_recall, "_WAITING_STAT_S", 0.0)  # every call "waits"
    threads = _threads_of_batches(monkeypatch)
    threaded = frame_recall._stats(paths)
    assert threads[0] == threading.current_thread().name
    assert all(name.startswith("report-stat") for name in threads[1:]) and len(threads) == 6
    assert serial is not None and threaded is not None
    assert threaded.found.tolist() == [bool(index % 3) for index in range(11)]
    for one, other in zip(serial, threaded, strict=True):
        pairs = zip(one, other, strict=True) if isinstance(one, list) else [(one, other)]
        for a, b in pairs:
            assert np.array_equal(a, b)
    sizes = threaded.fields[0].tolist()
    assert sizes == [index if index % 3 else 0 for index in range(11)]
    assert threaded.mtimes[1] == os.stat(paths[1]).st_mtime


def test_a_run_directory_whose_name_is_not_utf8_takes_the_per_run_road(tmp_path: Path) -> None:
    """Such a name cannot be a memo table's text: the columns never see it."""
    root = tmp_path / "runs"
    plain = _bare(root, "cnn", 1)
    odd = os.fsdecode(os.fsencode(str(root)) + b"/cnn_afib_seed2_\xff")
    shutil.copytree(plain, odd)
    assert fresh_read._encodes(str(plain)) and not fresh_read._encodes(odd)
    # Records one by one (a frame's text column cannot hold the name); copytree kept the
    # metrics file's mtime, so the record holds for both.
    (record,) = run_columns(_frame(root)).facts([0])
    records = record_columns([record, record._replace(run_dir=odd)])
    found = fresh_read.read_fresh(
        [str(plain), odd], [os.lstat(plain), os.lstat(odd)], [0, 1], records=records
    )
    assert found.recalled.positions.tolist() == [0] and found.others.tolist() == [1]
