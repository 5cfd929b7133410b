"""Frames round-trip exactly through Parquet and the UPath IO manager."""

import io
import math

import dagster as dg
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st
from upath import UPath

from deepecg_assets.parquet_frames import (
    COLUMNS_METADATA,
    COMPRESSION,
    OBJECT_COLUMNS_KEY,
    ParquetFrameIOManager,
    frame_from_parquet,
    frame_to_parquet,
    read_stored_frame,
)


def _round_trip(frame: pd.DataFrame) -> pd.DataFrame:
    return frame_from_parquet(frame_to_parquet(frame))


def test_every_dtype_the_frames_use_round_trips_exactly() -> None:
    frame = pd.DataFrame(
        {
            "model": pd.Series(["007", "a"], dtype=object),
            "dataset": ["007", "b"],
            "survives_fdr": [True, False],
            "flag_or_missing": pd.array([True, None], dtype="boolean"),
            "n": np.array([1, 2], dtype=np.int64),
            "n_or_missing": pd.array([1, None], dtype="Int64"),
            "mean": [0.1, np.nan],
            "seed": pd.Series([2**64 - 1, None], dtype=object),
            "u64": np.array([2**64 - 1, 3], dtype=np.uint64),
            "category": pd.Categorical(["a", "b"]),
        }
    )
    back = _round_trip(frame)
    pd.testing.assert_frame_equal(back, frame)
    assert back["model"].tolist() == ["007", "a"]
    assert back["seed"].tolist() == [2**64 - 1, None]
    assert type(back["seed"].iloc[0]) is int


def test_an_integer_beyond_the_decimal_type_is_kept_as_exact_text() -> None:
    frame = pd.DataFrame({"seed": pd.Series([10**40, -3], dtype=object)})
    back = _round_trip(frame)
    assert back["seed"].tolist() == [10**40, -3]


def test_each_object_column_keeps_its_own_missing_value() -> None:
    frame = pd.DataFrame(
        {
            "none": pd.Series(["x", None], dtype=object),
            "nan": pd.Series(["x", np.nan], dtype=object),
        }
    )
    back = _round_trip(frame)
    assert back["none"].iloc[1] is None
    assert isinstance(back["nan"].iloc[1], float) and math.isnan(back["nan"].iloc[1])


def test_empty_frames_index_and_row_order_are_kept() -> None:
    empty = pd.DataFrame({"a": pd.Series([], dtype=object), "b": pd.Series([], dtype=float)})
    pd.testing.assert_frame_equal(_round_trip(empty), empty)
    shuffled = pd.DataFrame({"x": [1, 2, 3], "y": ["c", "b", "a"]}).iloc[[2, 0, 1]]
    pd.testing.assert_frame_equal(_round_trip(shuffled), shuffled)
    indexed = shuffled.set_index("y")
    pd.testing.assert_frame_equal(_round_trip(indexed), indexed)


def test_object_columns_are_recorded_in_the_schema_not_in_a_column_list() -> None:
    import io

    import pyarrow.parquet as pq

    data = frame_to_parquet(pd.DataFrame({"seed": pd.Series([2**63], dtype=object)}))
    metadata = pq.read_schema(io.BytesIO(data)).metadata
    assert b'"seed"' in metadata[OBJECT_COLUMNS_KEY]


def test_only_columns_of_few_distinct_values_get_a_dictionary() -> None:
    """Distinct texts (run directories, metrics) are stored plain; names get a dictionary."""
    rows = 200
    frame = pd.DataFrame(
        {
            "run_dir": pd.array([f"/runs/r{i}" for i in range(rows)], dtype="str"),
            "model": pd.array([f"m{i % 3}" for i in range(rows)], dtype="str"),
            "mtime": np.arange(rows, dtype=np.float64) / 7,
            "seed": np.arange(rows, dtype=np.int64) % 5,
            "checkpoint": pd.Series([None] * rows, dtype=object),
        }
    )
    data = frame_to_parquet(frame)
    pd.testing.assert_frame_equal(frame_from_parquet(data), frame, check_exact=True)
    stored = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    columns = {stored.column(i).path_in_schema: stored.column(i) for i in range(5)}
    dictionary = {name for name, column in columns.items() if "RLE_DICTIONARY" in column.encodings}
    assert dictionary == {"model", "seed", "checkpoint"}
    assert {column.compression for column in columns.values()} == {COMPRESSION.upper()}


def test_a_column_parquet_cannot_hold_says_so() -> None:
    frame = pd.DataFrame({"mixed": pd.Series(["x", 1.5], dtype=object)})
    with pytest.raises(TypeError, match="one type per column"):
        frame_to_parquet(frame)


_SEEDS = st.one_of(st.none(), st.integers(min_value=-(2**70), max_value=2**70))


@settings(max_examples=60, deadline=None)
@given(
    seeds=st.lists(_SEEDS, min_size=1, max_size=8),
    names=st.lists(st.text(max_size=6), min_size=1, max_size=8),
    values=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=8),
)
def test_property_seeds_names_and_floats_round_trip(
    seeds: list[int | None], names: list[str], values: list[float]
) -> None:
    n = min(len(seeds), len(names), len(values))
    frame = pd.DataFrame(
        {
            "seed": pd.Series(seeds[:n], dtype=object),
            "model": pd.Series(names[:n], dtype=object),
            "value": np.array(values[:n], dtype=float),
        }
    )
    back = _round_trip(frame)
    pd.testing.assert_frame_equal(back, frame)
    assert back["seed"].tolist() == seeds[:n]


def test_columns_reads_those_columns_in_stored_order_with_their_types() -> None:
    frame = pd.DataFrame(
        {
            "run_dir": ["a", "b"],
            "seed": pd.Series([2**64 - 1, None], dtype=object),
            "metrics": ["{}", "{}"],
            "flag": pd.array([True, None], dtype="boolean"),
        }
    )
    data = frame_to_parquet(frame)
    back = frame_from_parquet(data, columns=["flag", "seed"])
    pd.testing.assert_frame_equal(back, frame[["seed", "flag"]])
    with pytest.raises(KeyError, match="no_such"):
        frame_from_parquet(data, columns=["run_dir", "no_such"])


DATASETS = dg.StaticPartitionsDefinition(["d1", "d2", "d3"])


def _dataset_frame(key: str) -> pd.DataFrame:
    return pd.DataFrame({"dataset": [key], "seed": pd.Series([2**64 - 1], dtype=object)})


@dg.asset(partitions_def=DATASETS, backfill_policy=dg.BackfillPolicy.single_run())
def per_dataset(context: dg.AssetExecutionContext) -> dict[str, pd.DataFrame]:
    """One frame per partition of the step, as the platform's per-dataset assets return them."""
    return {key: _dataset_frame(key) for key in context.partition_keys}


@dg.asset(partitions_def=DATASETS, backfill_policy=dg.BackfillPolicy.single_run())
def per_dataset_rows(
    context: dg.AssetExecutionContext, per_dataset: dict[str, pd.DataFrame]
) -> dict[str, pd.DataFrame]:
    """A partitioned input arrives as the mapping of the step's own partitions."""
    assert sorted(per_dataset) == sorted(context.partition_keys)
    return {key: frame.assign(rows=len(frame)) for key, frame in per_dataset.items()}


@dg.asset
def combined(per_dataset: dict[str, pd.DataFrame]) -> pd.DataFrame:
    return pd.concat([per_dataset[key] for key in sorted(per_dataset)], ignore_index=True)


def _range(first: str, last: str) -> dict[str, str]:
    from dagster._core.storage.tags import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )

    return {ASSET_PARTITION_RANGE_START_TAG: first, ASSET_PARTITION_RANGE_END_TAG: last}


def _failure(result: dg.ExecuteInProcessResult) -> str:
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    data = failure.step_failure_data
    if data.user_failure_data is not None:
        return data.user_failure_data.description
    return "".join(str(part.message) for part in (data.error, data.error.cause) if part)


def test_the_io_manager_stores_one_file_per_partition_under_a_file_url(tmp_path) -> None:
    manager = ParquetFrameIOManager(base_path=UPath(tmp_path.as_uri()))
    resources = {"io_manager": manager}
    for key in DATASETS.get_partition_keys():
        assert dg.materialize([per_dataset], partition_key=key, resources=resources).success
    result = dg.materialize([per_dataset, combined], selection=[combined], resources=resources)
    assert result.success
    assert sorted(p.name for p in (tmp_path / "per_dataset").iterdir()) == [
        "d1.parquet",
        "d2.parquet",
        "d3.parquet",
    ]
    stored = frame_from_parquet((tmp_path / "combined.parquet").read_bytes())
    assert stored["dataset"].tolist() == ["d1", "d2", "d3"]
    assert stored["seed"].tolist() == [2**64 - 1] * 3
    assert read_stored_frame(tmp_path, "per_dataset")["dataset"].tolist() == ["d1", "d2", "d3"]
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


def test_one_step_over_a_partition_range_gets_and_returns_a_mapping(tmp_path) -> None:
    resources = {"io_manager": ParquetFrameIOManager(base_path=UPath(str(tmp_path)))}
    result = dg.materialize(
        [per_dataset, per_dataset_rows], resources=resources, tags=_range("d2", "d3")
    )
    assert result.success
    steps = [event.step_key for event in result.all_events if event.is_step_start]
    assert sorted(steps) == ["per_dataset", "per_dataset_rows"], "one step for both partitions"
    assert sorted(p.name for p in (tmp_path / "per_dataset_rows").iterdir()) == [
        "d2.parquet",
        "d3.parquet",
    ]
    stored = read_stored_frame(tmp_path, "per_dataset_rows")
    assert stored["dataset"].tolist() == ["d2", "d3"] and stored["rows"].tolist() == [1, 1]
    events = result.get_asset_materialization_events()
    assert sorted((e.asset_key.path[0], e.partition) for e in events) == [
        ("per_dataset", "d2"),
        ("per_dataset", "d3"),
        ("per_dataset_rows", "d2"),
        ("per_dataset_rows", "d3"),
    ]


def test_a_missing_stored_partition_fails_naming_asset_and_partition(tmp_path) -> None:
    resources = {"io_manager": ParquetFrameIOManager(base_path=UPath(str(tmp_path)))}
    assert dg.materialize([per_dataset], resources=resources, tags=_range("d1", "d3")).success
    (tmp_path / "per_dataset" / "d2.parquet").unlink()
    result = dg.materialize(
        [per_dataset, combined], selection=[combined], resources=resources, raise_on_error=False
    )
    assert not result.success
    message = _failure(result)
    assert message == (
        f"stored frame {tmp_path / 'per_dataset' / 'd2.parquet'} is missing; "
        "materialise per_dataset partition 'd2' first"
    )


@pytest.mark.parametrize(
    "returned",
    [
        pytest.param(lambda keys: _dataset_frame(keys[0]), id="a bare frame"),
        pytest.param(lambda keys: {key: _dataset_frame(key) for key in keys[1:]}, id="a key short"),
        pytest.param(
            lambda keys: {key: _dataset_frame(key) for key in [*keys, "d9"]}, id="a key extra"
        ),
    ],
)
def test_a_partitioned_output_whose_keys_do_not_match_raises_type_error(tmp_path, returned) -> None:
    @dg.asset(partitions_def=DATASETS, backfill_policy=dg.BackfillPolicy.single_run())
    def wrong(context: dg.AssetExecutionContext):
        return returned(list(context.partition_keys))

    resources = {"io_manager": ParquetFrameIOManager(base_path=UPath(str(tmp_path)))}
    with pytest.raises(Exception) as raised:
        dg.materialize([wrong], resources=resources, tags=_range("d1", "d2"))
    chain = []
    error: BaseException | None = raised.value
    while error is not None:
        chain.append(error)
        error = error.__cause__
    (type_error,) = [e for e in chain if isinstance(e, TypeError)]
    assert str(type_error) == (
        "partitioned asset wrong must return {partition key: frame} for its partitions ['d1', 'd2']"
    )
    assert not (tmp_path / "wrong").exists() or not list((tmp_path / "wrong").iterdir())


def test_stored_per_dataset_paired_differences_combine_into_the_clean_flip_grid() -> None:
    from deepecgkit.analysis.ranking import (
        all_flip_tests,
        flip_tests_from_differences,
        paired_differences,
    )
    from tests.analysis.test_paired_differences import corpus

    runs = corpus(11)
    stored = [
        frame_from_parquet(frame_to_parquet(paired_differences(runs[runs["dataset"] == name])))
        for name in sorted(runs["dataset"].unique())
    ]
    combined = flip_tests_from_differences(pd.concat(stored, ignore_index=True))
    pd.testing.assert_frame_equal(combined, all_flip_tests(runs), check_exact=True)


@dg.asset
def wide() -> pd.DataFrame:
    return pd.DataFrame({"dataset": ["d1", "d2"], "metrics": ["{}", "{}"], "seed": [1, 2]})


@dg.asset(ins={"wide": dg.AssetIn(metadata={COLUMNS_METADATA: ["dataset"]})})
def narrow_reader(wide: pd.DataFrame) -> pd.DataFrame:
    """An input whose ``AssetIn`` names its columns gets only those."""
    assert wide.columns.tolist() == ["dataset"]
    return wide


def test_an_input_that_names_its_columns_reads_only_those(tmp_path) -> None:
    resources = {"io_manager": ParquetFrameIOManager(base_path=UPath(tmp_path))}
    assert dg.materialize([wide, narrow_reader], resources=resources).success
    stored = read_stored_frame(tmp_path, "narrow_reader")
    assert stored["dataset"].tolist() == ["d1", "d2"]
    assert read_stored_frame(tmp_path, "wide", columns=["seed"])["seed"].tolist() == [1, 2]


def test_distinct_reads_each_partitions_distinct_rows_in_order(tmp_path) -> None:
    """What the build's summary reads of the long runs frames: names, once per file."""
    for key, runs in {"d1": ["r2", "r1", "r2"], "d2": ["r3", "r3"]}.items():
        frame = pd.DataFrame({"run_dir": runs, "dataset": key, "value": [0.1] * len(runs)})
        (tmp_path / "long").mkdir(exist_ok=True)
        (tmp_path / "long" / f"{key}.parquet").write_bytes(frame_to_parquet(frame))
    distinct = read_stored_frame(tmp_path, "long", columns=["run_dir", "dataset"], distinct=True)
    assert distinct.to_dict("list") == {
        "run_dir": ["r2", "r1", "r3"],
        "dataset": ["d1", "d1", "d2"],
    }
    whole = read_stored_frame(tmp_path, "long", columns=["run_dir", "dataset"])
    pd.testing.assert_frame_equal(distinct, whole.drop_duplicates(ignore_index=True))
