"""The dictionary choice: exactly Arrow's distinct count against the share, however counted."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hypothesis import given, settings, strategies as st

from deepecgkit.parquet import DICTIONARY_SHARE, dictionary_columns, distinct_at_most


def _counted(column: pa.Array | pa.ChunkedArray) -> int:
    return pc.count_distinct(column, mode="all").as_py()


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.integers(0, 30)), max_size=80),
    limit=st.floats(-2, 90, allow_nan=False),
)
def test_distinct_at_most_is_the_full_count_against_the_limit(values, limit) -> None:
    column = pa.array(values, pa.int64())
    assert distinct_at_most(column, limit) == (_counted(column) <= limit)


@settings(max_examples=100, deadline=None)
@given(
    chunks=st.lists(st.lists(st.sampled_from(["a", "b", "c", None, "d" * 20]), max_size=20)),
    limit=st.integers(0, 10),
)
def test_a_chunked_column_is_counted_across_its_chunks(chunks, limit) -> None:
    column = pa.chunked_array([pa.array(chunk, pa.string()) for chunk in chunks], pa.string())
    assert distinct_at_most(column, limit) == (_counted(column) <= limit)


def test_a_column_of_distinct_values_is_refused_from_its_first_values() -> None:
    # 101 distinct values in the first 101 rows: more than 100 whatever the rest holds.
    column = pa.array([f"run{i}" for i in range(101)] + ["same"] * 10_000)
    assert not distinct_at_most(column, 100)
    # The same 100 values after a prefix of one: counted whole, and within the limit.
    assert distinct_at_most(pa.array(["same"] * 10_000 + [f"run{i}" for i in range(99)]), 100)


def test_only_columns_of_few_distinct_values_per_row_are_chosen() -> None:
    rows = 1000
    table = pa.table(
        {
            "run_dir": [f"/runs/r{i}" for i in range(rows)],
            "dataset": [f"d{i % 3}" for i in range(rows)],
            "edge": [i % int(DICTIONARY_SHARE * rows) for i in range(rows)],  # exactly the share
            "beyond": [i % (int(DICTIONARY_SHARE * rows) + 1) for i in range(rows)],
            "nested": [[i] for i in range(rows)],  # Arrow cannot count lists: the default
        }
    )
    assert dictionary_columns(table) == ["dataset", "edge", "nested"]
    assert dictionary_columns(table.slice(0, 0)) == table.column_names


def test_the_chosen_columns_are_the_ones_parquet_encodes_with_a_dictionary() -> None:
    table = pa.table({"run_dir": [f"r{i}" for i in range(500)], "model": ["m"] * 500})
    sink = io.BytesIO()
    pq.write_table(table, sink, use_dictionary=dictionary_columns(table))
    group = pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata.row_group(0)
    encoded = {
        group.column(i).path_in_schema
        for i in range(group.num_columns)
        if "RLE_DICTIONARY" in group.column(i).encodings
    }
    assert encoded == {"model"}
