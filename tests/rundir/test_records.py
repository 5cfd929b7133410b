"""The frames of records: the stored one-row-per-record frame and the long runs frame.

``record_frame_to_runs`` is the column-wise shortcut the platform's
per-dataset step takes from the stored records frame to the long runs frame;
it must equal the long way round (``runs_to_frame(frame_to_records(...))``),
dtypes included, for every kind of record: unknown seeds and split sizes,
seeds beyond int64, NaN metrics, multi-label runs, records with no metrics.
``records_to_frame`` is compared with a row-by-row reference built here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
from hypothesis import given, settings, strategies as st

from deepecgkit.rundir.format import SPLIT_SIZE_KEYS
from deepecgkit.rundir.int_columns import exact_int_array
from deepecgkit.rundir.records import (
    RECORD_COLUMNS,
    MetricNames,
    RunRecord,
    encoded_record,
    frame_metric_names,
    frame_to_records,
    record_frame_to_runs,
    records_to_frame,
    runs_to_frame,
)

_INT_FIELDS = ("seed", *SPLIT_SIZE_KEYS, "returncode")
_names = st.text(alphabet="abc007-_ .é", min_size=1, max_size=6)
_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=False, width=64), st.just(math.nan), st.just(0.5)
)


@st.composite
def _records(draw: st.DrawFn) -> list[RunRecord]:
    seeds = st.one_of(st.none(), st.integers(0, 2**40), st.integers(2**63, 2**70))
    sizes = st.one_of(st.none(), st.integers(0, 10_000))
    metric_names = st.lists(
        st.sampled_from(["f1", "auroc", "accuracy", "loss", 'odd ": "name\\']), unique=True
    )
    records = []
    for i in range(draw(st.integers(1, 8))):
        metrics = {name: draw(_values) for name in draw(metric_names)}
        records.append(
            RunRecord(
                run_dir=Path(f"/runs/{draw(_names)}_{i}"),
                model=draw(_names),
                dataset=draw(st.sampled_from(["ptbxl", "007", "data set"])),
                seed=draw(seeds),
                multi_label=draw(st.booleans()),
                averaging=draw(st.sampled_from(["macro", "binary", "unknown"])),
                metrics=metrics,
                n_train=draw(sizes),
                n_val=draw(sizes),
                n_test=draw(sizes),
                n_test_groups=draw(sizes),
                mtime=float(i),
                returncode=draw(st.one_of(st.none(), st.just(0))),
                fingerprint=draw(st.one_of(st.none(), st.just("abc"))),
                suspect=tuple(draw(st.lists(st.just("a value set aside"), max_size=2))),
                checkpoint=draw(st.sampled_from([None, "checkpoint.pt"])),
            )
        )
    return records


def _row_by_row(records: list[RunRecord]) -> pd.DataFrame:
    """The records frame built one dict per record (the reference)."""
    rows = []
    for record in records:
        row = record._asdict()
        row["run_dir"] = str(record.run_dir)
        row["metrics"] = json.dumps(record.metrics)
        row["suspect"] = json.dumps(list(record.suspect))
        rows.append(row)
    frame = pd.DataFrame(rows, columns=RECORD_COLUMNS)
    for field in _INT_FIELDS:
        frame[field] = exact_int_array([getattr(record, field) for record in records])
    return frame


@settings(max_examples=60, deadline=None)
@given(_records())
def test_record_frame_to_runs_equals_the_long_way_round(records: list[RunRecord]) -> None:
    frame = records_to_frame(records)
    expected = runs_to_frame(frame_to_records(frame))
    pd.testing.assert_frame_equal(record_frame_to_runs(frame), expected, check_exact=True)
    # One dataset's rows, as the platform's per-dataset step gets them (an index with gaps).
    subset = frame.loc[frame["dataset"] == frame["dataset"].iloc[-1]]
    pd.testing.assert_frame_equal(
        record_frame_to_runs(subset), runs_to_frame(frame_to_records(subset)), check_exact=True
    )


@settings(max_examples=60, deadline=None)
@given(_records())
def test_records_to_frame_equals_a_row_by_row_frame(records: list[RunRecord]) -> None:
    frame = records_to_frame(records)
    pd.testing.assert_frame_equal(frame, _row_by_row(records), check_exact=True)
    assert frame_to_records(frame) == records or _nan_metrics(records)


@settings(max_examples=60, deadline=None)
@given(_records())
def test_encoded_records_give_the_same_frame_and_metric_names(records: list[RunRecord]) -> None:
    frame = records_to_frame(records)
    encoded = [encoded_record(record) for record in records]
    assert all(
        isinstance(e.metrics, str) and e.run_dir == str(r.run_dir)
        for e, r in zip(encoded, records, strict=True)
    )
    pd.testing.assert_frame_equal(records_to_frame(encoded), frame, check_exact=True)
    assert frame_metric_names(frame) == {name for r in records for name in r.metrics}
    assert frame_metric_names(frame.iloc[:0]) == set()


def _nan_metrics(records: list[RunRecord]) -> bool:
    """NaN != NaN, so records holding a NaN metric compare unequal to themselves."""
    return any(math.isnan(v) for r in records for v in r.metrics.values())


def test_an_empty_records_frame_gives_the_empty_runs_frame() -> None:
    empty = records_to_frame([])
    pd.testing.assert_frame_equal(empty, _row_by_row([]))
    pd.testing.assert_frame_equal(record_frame_to_runs(empty), runs_to_frame([]))
    pd.testing.assert_frame_equal(
        record_frame_to_runs(empty.iloc[:0]), runs_to_frame(frame_to_records(empty))
    )


def test_a_record_frame_by_hand() -> None:
    record = RunRecord(
        run_dir=Path("/runs/a"),
        model="007",
        dataset="ptbxl",
        seed=2**64 + 1,
        multi_label=False,
        averaging="macro",
        metrics={"f1": 0.25, "auroc": math.nan},
        n_train=10,
        n_val=None,
        n_test=5,
        n_test_groups=None,
        mtime=1.0,
    )
    runs = record_frame_to_runs(records_to_frame([record]))
    assert runs["metric"].tolist() == ["f1", "auroc"]
    assert runs["value"].iloc[0] == 0.25 and math.isnan(runs["value"].iloc[1])
    assert runs["seed"].tolist() == [2**64 + 1, 2**64 + 1]  # exact, beyond int64
    assert runs["model"].tolist() == ["007", "007"]
    assert str(runs["n_val"].dtype) == "Int64" and runs["n_train"].dtype == "int64"


@settings(max_examples=60, deadline=None)
@given(
    _records(),
    st.one_of(
        _names,
        st.sampled_from(
            ["f1", "auroc", "loss", "oss", "f", "odd", "a:b", 'q"t', "a\\b", "", "0.5"]
        ),
    ),
)
def test_metric_names_answer_membership_as_the_full_set(records: list[RunRecord], name) -> None:
    frame = records_to_frame(records)
    names = frame_metric_names(frame)
    assert (name in MetricNames(frame)) == (name in names)
    assert set(MetricNames(frame)) == names and len(MetricNames(frame)) == len(names)


def test_a_prefix_or_a_value_of_a_key_is_no_key() -> None:
    frame = records_to_frame(
        [
            RunRecord(
                run_dir=Path("/r/a"),
                model="m",
                dataset="d",
                seed=1,
                multi_label=False,
                averaging="macro",
                metrics={"f1": 0.5, "x": 1.0},
                n_train=None,
                n_val=None,
                n_test=None,
                n_test_groups=None,
                mtime=0.0,
            )
        ]
    )
    names = MetricNames(frame)
    assert "x" in names and "f1" in names
    assert "f" not in names and "1" not in names and "0.5" not in names and ", " not in names
