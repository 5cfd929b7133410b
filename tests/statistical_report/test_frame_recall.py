"""Unchanged runs without predictions are recalled as columns, with the per-run road's outcome."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from deepecgkit.rundir.format import METADATA_FILENAME, PREDICTIONS_FILENAME
from deepecgkit.rundir.read import discover_runs
from deepecgkit.rundir.records import records_to_frame
from deepecgkit.statistical_report import report, statistical_report
from deepecgkit.statistical_report.frame_recall import Recalled, run_columns
from tests.statistical_report.prediction_runs import write_prediction_run
from tests.statistical_report.test_file_memo import Reads, rewrite_in_place
from tests.statistical_report.test_reuse import REFERENCE, SETTINGS, _assert_equals_clean, _build


def _bare(root: Path, model: str, seed: int, **metadata: object) -> Path:
    """A run of ``model`` on afib that kept no predictions, with ``metadata`` fields added."""
    run_dir = write_prediction_run(root, model, "afib", seed)
    (run_dir / PREDICTIONS_FILENAME).unlink()
    if metadata:
        _set_metadata(run_dir, **metadata)
    return run_dir


def _set_metadata(run_dir: Path, **fields: object) -> None:
    path = run_dir / METADATA_FILENAME
    found = json.loads(path.read_text())
    path.write_text(json.dumps({**found, **fields}))


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A reference pair, three runs without predictions and one failed run."""
    root = tmp_path / "runs"
    write_prediction_run(root, REFERENCE, "afib", 0)
    write_prediction_run(root, "cnn", "afib", 0)
    for seed in (1, 2, 3):
        _bare(root, "cnn", seed)
    _bare(root, "cnn", 4, returncode=3, error="out of memory")
    return root


class Recalls:
    """The run ids each build recalled as columns."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.recalled: list[list[str]] = []
        recall = report.recall_unchanged

        def counting(run_dirs, directories, **options) -> Recalled:
            found = recall(run_dirs, directories, **options)
            self.recalled.append(sorted(Path(run_dirs[p]).name for p in found.positions))
            return found

        monkeypatch.setattr(report, "recall_unchanged", counting)


def test_unchanged_runs_without_predictions_are_recalled_and_not_read(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    first = _build(runs, out)
    recalls, reads = Recalls(monkeypatch), Reads(monkeypatch)
    again = _build(runs, out)
    bare = [f"cnn_afib_seed{seed}" for seed in (1, 2, 3, 4)]
    assert recalls.recalled == [bare]
    assert not reads.runs_read() & set(bare)
    assert again.manifest == first.manifest
    runs_excluded = again.exclusions[again.exclusions["scope"] == "run"]
    reasons = dict(zip(runs_excluded["run_id"], runs_excluded["reason"], strict=True))
    assert reasons == {
        "cnn_afib_seed1": "no_predictions",
        "cnn_afib_seed2": "no_predictions",
        "cnn_afib_seed3": "no_predictions",
        "cnn_afib_seed4": "failed_run",
    }
    failed = again.exclusions.set_index("run_id").loc["cnn_afib_seed4", "detail"]
    assert failed == "returncode 3: out of memory"
    monkeypatch.undo()
    _assert_equals_clean(runs, out, tmp_path / "clean")


def test_an_edit_in_place_and_a_new_predictions_file_are_seen(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    _build(runs, out)
    edited = runs / "cnn_afib_seed1"
    directory = os.stat(edited)
    metadata = json.loads((edited / METADATA_FILENAME).read_text())
    rewrite_in_place(edited / METADATA_FILENAME, json.dumps({**metadata, "returncode": 2}).encode())
    assert os.stat(edited).st_mtime_ns == directory.st_mtime_ns  # only the file's stat shows it
    added = runs / "cnn_afib_seed2"
    (added / PREDICTIONS_FILENAME).write_bytes(
        (runs / "cnn_afib_seed0" / PREDICTIONS_FILENAME).read_bytes()
    )
    recalls = Recalls(monkeypatch)
    again = _build(runs, out)
    assert recalls.recalled == [["cnn_afib_seed3", "cnn_afib_seed4"]]
    runs_excluded = again.exclusions[again.exclusions["scope"] == "run"]
    reasons = dict(zip(runs_excluded["run_id"], runs_excluded["reason"], strict=True))
    assert reasons["cnn_afib_seed1"] == "failed_run" and "cnn_afib_seed2" not in reasons
    assert "cnn_afib_seed2" in {run["run_id"] for run in again.manifest["included_runs"]}
    monkeypatch.undo()
    _assert_equals_clean(runs, out, tmp_path / "clean")


@pytest.mark.parametrize(("bare_runs", "reason"), [(3, "stale_fingerprint"), (1, None)])
def test_recalled_fingerprints_count_towards_the_cells_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bare_runs: int, reason: str | None
) -> None:
    """Three recalled runs outvote an included run's fingerprint; one ties with it."""
    root = tmp_path / "runs"
    write_prediction_run(root, REFERENCE, "afib", 0)
    _set_metadata(write_prediction_run(root, "cnn", "afib", 0), params_fingerprint="f-own")
    for seed in range(1, 1 + bare_runs):
        _bare(root, "cnn", seed, params_fingerprint="f-most")
    out = tmp_path / "out"
    first = _build(root, out)
    recalls = Recalls(monkeypatch)
    again = _build(root, out)
    assert len(recalls.recalled[0]) == bare_runs
    row = again.exclusions.set_index("run_id").loc["cnn_afib_seed0"]
    if reason is not None:
        assert row["reason"] == reason
        assert "differs from the cell's reference f-most" in row["detail"]
    else:
        assert row["reason"] == "ambiguous_fingerprint"
        assert row["detail"].endswith("f-most x1, f-own x1")
    assert again.manifest == first.manifest
    monkeypatch.undo()
    _assert_equals_clean(root, out, tmp_path / "clean")


def test_records_as_columns_are_the_records_facts(runs: Path, tmp_path: Path) -> None:
    """A frame's columns give the records' facts; a record that differs from the memo
    (its metrics mtime held) takes the per-run road, as the record would."""
    records, _ = discover_runs([runs], recursive=True)
    frame = records_to_frame(records).sort_values("run_dir", ignore_index=True)
    out, clean = tmp_path / "out", tmp_path / "clean"
    by_records = statistical_report(None, tmp_path / "records", records=records, **SETTINGS)
    first = statistical_report(None, out, records=run_columns(frame), **SETTINGS)
    assert first.manifest == by_records.manifest
    renamed = frame.assign(
        model=frame["model"].where(frame["run_dir"] != str(runs / "cnn_afib_seed3"), "gru")
    )
    again = statistical_report(None, out, records=run_columns(renamed), overwrite=True, **SETTINGS)
    expected = statistical_report(None, clean, records=run_columns(renamed), **SETTINGS)
    assert again.manifest == expected.manifest
    assert again.exclusions.equals(expected.exclusions)
    assert "gru" in set(again.exclusions["model"])
    for name in ("exclusions.csv", "manifest.json", "report_memos.parquet"):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="/a.\0", max_size=6), min_size=1, max_size=3))
def test_plain_paths_are_recognised_at_once_as_one_by_one(texts: list[str]) -> None:
    """Equal for texts without NUL (which no path holds); never True where one is not plain."""
    expected = all(report._plain_absolute(text) for text in texts)
    found = report._all_plain_absolute(texts)
    assert found == expected if not any("\0" in text for text in texts) else expected or not found
