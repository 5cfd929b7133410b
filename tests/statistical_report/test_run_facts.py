"""The facts the report takes from the platform's records frame, and its cheap file writes."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest

from deepecgkit.rundir.read import discover_runs
from deepecgkit.rundir.records import RunRecord, frame_to_records, records_to_frame
from deepecgkit.statistical_report import statistical_report
from deepecgkit.statistical_report.identity import RunFacts, run_facts
from deepecgkit.statistical_report.manifest import matplotlib_version
from deepecgkit.statistical_report.reuse import write_changed
from tests.deepecg_assets.output_trees import tree_bytes
from tests.statistical_report.prediction_runs import write_prediction_run


def _record(name: str, seed: int | None, returncode: int | None, mtime: float) -> RunRecord:
    return RunRecord(
        run_dir=Path("/runs") / name,
        model="007",
        dataset="afib",
        seed=seed,
        multi_label=False,
        averaging="macro",
        metrics={"accuracy": 0.5},
        n_train=None,
        n_val=10,
        n_test=None,
        n_test_groups=3,
        mtime=mtime,
        returncode=returncode,
    )


@pytest.mark.parametrize(
    "seeds",
    [[0, 1, 2], [0, None, 2], [2**63 + 5, -1, None]],
    ids=["int64", "a seed unknown", "beyond int64"],
)
def test_run_facts_are_the_fields_of_frame_to_records(seeds: list[int | None]) -> None:
    records = [
        _record(f"r{i}", seed, returncode, 1.7e9 + i / 3)
        for i, (seed, returncode) in enumerate(zip(seeds, [None, 0, 1], strict=True))
    ]
    frame = records_to_frame(records)
    facts = run_facts(frame)
    expected = [
        RunFacts(str(r.run_dir), r.model, r.dataset, r.seed, r.returncode, r.mtime)
        for r in frame_to_records(frame)
    ]
    assert facts == expected
    assert [type(fact.seed) for fact in facts] == [type(record.seed) for record in records]
    assert facts[0].model == "007"


def test_run_facts_of_no_runs() -> None:
    assert run_facts(records_to_frame([])) == []


def test_an_unchanged_file_is_left_in_place(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    write_changed(path, b"a,b\n")
    inode = os.stat(path).st_ino
    write_changed(path, b"a,b\n")
    assert os.stat(path).st_ino == inode
    write_changed(path, b"a,c\n")
    assert path.read_bytes() == b"a,c\n"
    assert os.stat(path).st_ino != inode


def test_a_link_to_the_same_bytes_is_replaced_by_a_file(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.csv").write_bytes(b"a,b\n")
    path = tmp_path / "table.csv"
    path.symlink_to(tmp_path / "elsewhere.csv")
    write_changed(path, b"a,b\n")
    assert not path.is_symlink()
    assert path.read_bytes() == b"a,b\n"


def test_the_manifest_names_the_matplotlib_that_draws() -> None:
    assert matplotlib_version() == matplotlib.__version__


def test_a_report_from_run_facts_is_the_report_from_records(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    write_prediction_run(root, "resnet", "afib", 0)
    write_prediction_run(root, "cnn", "afib", 0)
    bare = write_prediction_run(root, "cnn", "afib", 1)
    (bare / "predictions.csv").unlink()
    records, _ = discover_runs([root], recursive=True)
    frame = records_to_frame(records)
    settings = {"n_resamples": 20, "reference": "resnet", "plots": False}
    statistical_report(None, tmp_path / "records", records=frame_to_records(frame), **settings)
    statistical_report(None, tmp_path / "facts", records=run_facts(frame), **settings)
    assert tree_bytes(tmp_path / "facts") == tree_bytes(tmp_path / "records")
