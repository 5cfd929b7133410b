"""The file memos kept as columns (report_memos.parquet) come back as the memos they were."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from deepecgkit.statistical_report.memo_table import memos_from_table, memos_table
from deepecgkit.statistical_report.reuse import _MEMO_NAMES, MEMOS_FILENAME
from tests.statistical_report.prediction_runs import write_prediction_run
from tests.statistical_report.test_reuse import REFERENCE, _assert_equals_clean, _build

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_UINT64 = st.integers(min_value=0, max_value=2**64 - 1)
_SIGNATURE = st.tuples(_UINT64, _INT64, _UINT64, _INT64, _UINT64).map(list)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
_FILES = st.dictionaries(
    st.sampled_from(_MEMO_NAMES),
    st.tuples(st.text(min_size=1, max_size=8), _SIGNATURE).map(lambda t: [t[0], *t[1]]),
)
_MEMO = st.fixed_dictionaries(
    {
        "files": _FILES,
        "directory": st.none() | _SIGNATURE,
        "model": st.text(max_size=6),
        "dataset": st.text(max_size=6),
        "seed": st.none() | st.integers(min_value=-(2**80), max_value=2**80),
        "returncode": st.none() | st.integers(-300, 300),
        "metadata": st.none() | st.dictionaries(st.text(max_size=4), _JSON, max_size=3),
        "split_info": st.none() | st.dictionaries(st.text(max_size=4), _JSON, max_size=3),
        "predictions": st.none() | st.sampled_from(_MEMO_NAMES[3:]),
    }
)


@settings(max_examples=50, deadline=None)
@given(memos=st.dictionaries(st.text(min_size=1, max_size=10), _MEMO, max_size=6))
def test_memos_round_trip_through_the_table(memos: dict) -> None:
    table, left_out = memos_table(memos, names=_MEMO_NAMES)
    assert left_out == 0 and table.column("run_dir").to_pylist() == sorted(memos)
    back = memos_from_table(table, names=_MEMO_NAMES)
    assert back == memos
    order = ["files", "directory", "model", "dataset", "seed", "returncode", "metadata"]
    for memo in back.values():  # the key order memo_entry makes
        assert list(memo) == [*order, "split_info", "predictions"]


def test_memos_a_column_cannot_hold_are_left_out() -> None:
    memo = {
        "files": {"classification_metrics.csv": ["h", 1, 2, 3, 4, 5]},
        "directory": None,
        "model": "m",
        "dataset": "d",
        "seed": 1,
        "returncode": 0,
        "metadata": None,
        "split_info": None,
        "predictions": None,
    }
    odd_name = {**memo, "files": {"notes.txt": ["h", 1, 2, 3, 4, 5]}}
    table, left_out = memos_table({"/a": memo, "/b": odd_name}, names=_MEMO_NAMES)
    assert (table.num_rows, left_out) == (1, 1)
    beyond_64_bits = {**memo, "files": {"classification_metrics.csv": ["h", 1, 2, 2**70, 4, 5]}}
    table, left_out = memos_table({"/a": memo, "/c": beyond_64_bits}, names=_MEMO_NAMES)
    assert (table.num_rows, left_out) == (0, 2)  # none kept: every run is read again


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_prediction_run(root, REFERENCE, "afib", 0)
    write_prediction_run(root, "cnn", "afib", 0)
    return root


@pytest.mark.parametrize("damage", ["garbage", "foreign", "missing"])
def test_a_damaged_foreign_or_missing_memo_table_means_the_runs_are_read_again(
    runs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    out = tmp_path / "out"
    _build(runs, out)
    path = out / MEMOS_FILENAME
    assert pq.read_table(path).num_rows == 2
    if damage == "garbage":
        path.write_bytes(b"not parquet")
    elif damage == "foreign":
        table = pq.read_table(path)
        pq.write_table(table.replace_schema_metadata({b"deepecg_report_environment": b"{}"}), path)
    else:
        path.unlink()
    with caplog.at_level(logging.INFO, logger="deepecgkit.statistical_report.reuse"):
        result = _build(runs, out)
    expected = {"garbage": "damaged", "foreign": "another program", "missing": ""}[damage]
    assert expected in caplog.text
    assert result.reused_runs == 2  # rows stay keyed by content: only the files are read again
    _assert_equals_clean(runs, out, tmp_path / "clean")
