"""Stored frames read in part: rows of some values, some columns, only the row groups needed."""

import dagster as dg
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st
from upath import UPath

import deepecg_assets.parquet_frames as parquet_frames
from deepecg_assets.parquet_frames import (
    STORED_METADATA,
    ParquetFrameIOManager,
    StoredFrame,
    frame_from_parquet,
    frame_to_parquet,
    read_stored_frame,
    row_group_rows,
)


def _stored(tmp_path, frame: pd.DataFrame, name: str = "frame") -> StoredFrame:
    path = tmp_path / f"{name}.parquet"
    path.write_bytes(frame_to_parquet(frame))
    return StoredFrame(UPath(str(path)))


def _frame(datasets: list[str | None]) -> pd.DataFrame:
    n = len(datasets)
    return pd.DataFrame(
        {
            "dataset": pd.Series(datasets, dtype=object),
            "seed": pd.Series([2**64 + i for i in range(n)], dtype=object),
            "metrics": pd.array([f'{{"f1": {i / 7}}}' for i in range(n)], dtype="str"),
            "n": pd.array([i if i % 3 else None for i in range(n)], dtype="Int64"),
        }
    )


def test_a_small_frame_is_one_row_group_and_a_big_one_is_cut(monkeypatch, tmp_path) -> None:
    frame = _frame([f"d{i % 4}" for i in range(400)])
    assert pq.ParquetFile(_stored(tmp_path, frame).path.path).num_row_groups == 1
    monkeypatch.setattr(parquet_frames, "ROW_GROUP_BYTES", 1000)
    stored = _stored(tmp_path, frame, "cut")
    groups = pq.ParquetFile(stored.path.path).num_row_groups
    assert groups > 10
    pd.testing.assert_frame_equal(stored.read(), frame, check_exact=True)
    assert stored.num_rows() == 400


def test_row_group_rows_follows_the_tables_size() -> None:
    import pyarrow as pa

    small = pa.table({"x": np.zeros(10, dtype=np.int64)})
    assert row_group_rows(small) is None
    big = pa.table({"x": np.zeros(1 << 18, dtype=np.int64)})  # 2 MiB of int64
    assert row_group_rows(big) == parquet_frames.ROW_GROUP_BYTES // 8


def test_rows_of_some_values_keep_their_order_types_and_a_fresh_index(tmp_path) -> None:
    frame = _frame(["b", "a", "b", None, "c", "b"])
    stored = _stored(tmp_path, frame)
    got = stored.read(columns=["seed", "dataset"], where=("dataset", lambda v: v == "b"))
    expected = frame.loc[[0, 2, 5], ["dataset", "seed"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got["seed"].tolist() == [2**64, 2**64 + 2, 2**64 + 5]
    missing = stored.read(where=("dataset", lambda v: v is None))
    pd.testing.assert_frame_equal(missing, frame.loc[[3]].reset_index(drop=True))
    none = stored.read(where=("dataset", lambda v: False))
    pd.testing.assert_frame_equal(none, frame.iloc[:0], check_index_type=False)
    assert none.dtypes.to_dict() == frame.dtypes.to_dict()


def test_an_unknown_column_raises_key_error(tmp_path) -> None:
    stored = _stored(tmp_path, _frame(["a"]))
    with pytest.raises(KeyError, match="nope"):
        stored.read(columns=["nope"])
    with pytest.raises(KeyError, match="nope"):
        stored.read(where=("nope", bool))


@settings(max_examples=60, deadline=None)
@given(
    datasets=st.lists(st.sampled_from(["a", "b", "c", "β x", None]), min_size=0, max_size=60),
    kept=st.sets(st.sampled_from(["a", "b", "c", "β x", None])),
    group_bytes=st.sampled_from([1, 50, 400, 1 << 20]),
)
def test_property_a_filtered_read_equals_filtering_the_whole_frame(
    tmp_path_factory, datasets, kept, group_bytes
) -> None:
    """Whatever the row groups, the rows kept are exactly those pandas' own filter keeps."""
    frame = _frame(datasets)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parquet_frames, "ROW_GROUP_BYTES", group_bytes)
        stored = _stored(tmp_path_factory.mktemp("stored"), frame)
    got = stored.read(columns=["dataset", "n"], where=("dataset", lambda v: v in kept))
    keep = np.array([value in kept for value in frame["dataset"]], dtype=bool)
    expected = frame.loc[keep, ["dataset", "n"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected, check_exact=True, check_index_type=False)


@dg.asset
def wide() -> pd.DataFrame:
    return _frame(["d1", "d2", "d1"])


@dg.asset(ins={"wide": dg.AssetIn(metadata={STORED_METADATA: True})})
def reads_its_rows(wide: StoredFrame) -> pd.DataFrame:
    """An input marked STORED gets the file unread, and reads what it needs."""
    assert isinstance(wide, StoredFrame)
    return wide.read(columns=["dataset"], where=("dataset", lambda v: v == "d1"))


def test_an_input_marked_stored_gets_a_stored_frame(tmp_path) -> None:
    resources = {"io_manager": ParquetFrameIOManager(base_path=UPath(tmp_path.as_uri()))}
    assert dg.materialize([wide, reads_its_rows], resources=resources).success
    assert read_stored_frame(tmp_path, "reads_its_rows")["dataset"].tolist() == ["d1", "d1"]
    (tmp_path / "wide.parquet").unlink()
    result = dg.materialize(
        [wide, reads_its_rows],
        selection=[reads_its_rows],
        resources=resources,
        raise_on_error=False,
    )
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data.user_failure_data
    assert "wide.parquet is missing; materialise wide first" in failure.description


def test_frame_from_parquet_still_reads_a_frame_of_many_row_groups(monkeypatch) -> None:
    monkeypatch.setattr(parquet_frames, "ROW_GROUP_BYTES", 100)
    frame = _frame([f"d{i}" for i in range(50)])
    pd.testing.assert_frame_equal(frame_from_parquet(frame_to_parquet(frame)), frame)


def test_distinct_values_and_column_names_come_as_the_frame_holds_them(tmp_path) -> None:
    frame = _frame(["b", "a", "b", None]).set_index("metrics")
    stored = _stored(tmp_path, frame)
    assert stored.column_names() == ["dataset", "seed", "n"]
    assert stored.distinct("dataset") == ["b", "a", None]
    assert stored.distinct("seed") == [2**64, 2**64 + 1, 2**64 + 2, 2**64 + 3]
    assert all(type(seed) is int for seed in stored.distinct("seed"))
    assert stored.distinct("n") == frame["n"].unique().tolist()
    with pytest.raises(KeyError):
        stored.distinct("nope")
