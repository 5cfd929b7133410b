"""Which columns of a table Parquet should dictionary-encode: one rule for every stored table.

Parquet dictionary-encodes every column by default. For a column of nearly
distinct values (run directories, metrics texts, hashes, times) the writer
builds a dictionary as large as the column, gives up on it and writes plain
pages after all: at 100,000 runs that was a third of writing the
``discovered_runs`` frame and two thirds of writing the report's memo table.
A column of few distinct values (datasets, models, file sizes of a grid)
gains from one. The frame store of the platform
(:mod:`deepecg_assets.parquet_frames`) and the report's memo table
(:mod:`deepecgkit.statistical_report.reuse`) both ask
:func:`dictionary_columns`, so the choice is decided by each column's own
values, never by its name, and made the same way wherever a table is written.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["DICTIONARY_SHARE", "dictionary_columns", "distinct_at_most"]

#: A column is dictionary-encoded when it holds at most this many distinct values per row.
DICTIONARY_SHARE = 0.1
#: What ``count_distinct`` raises for a type it cannot count.
_UNCOUNTABLE = (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError)


def distinct_at_most(column: pa.Array | pa.ChunkedArray, limit: float) -> bool:
    """Whether ``column`` holds at most ``limit`` distinct values (nulls count as one value).

    Exactly ``count_distinct(column) <= limit``, without hashing a column of
    nearly distinct values whole: prefixes of ``floor(limit) + 1`` values,
    then twice and four times as many, and so on, are counted first, and once
    a prefix holds more than ``limit`` distinct values so does the column (a
    prefix never holds more distinct values than the whole). A column of
    distinct values is answered from its first ``limit + 1`` values, one with
    a few repeats (metrics texts of a synthetic grid) from twice as many,
    and at most about three times the column is hashed in all. A type Arrow cannot
    count raises ``pyarrow.ArrowNotImplementedError`` (or another
    ``ArrowException``), as ``count_distinct`` does.
    """
    if limit < 0:
        return False
    prefix = math.floor(limit) + 1
    while prefix < len(column):
        if _distinct(column.slice(0, prefix)) > limit:
            return False
        prefix *= 2
    return _distinct(column) <= limit


def _distinct(column: pa.Array | pa.ChunkedArray) -> int:
    """Arrow's count of the distinct values of ``column``, a null counting as one value."""
    return pc.count_distinct(column, mode="all").as_py()


def dictionary_columns(table: pa.Table, *, share: float = DICTIONARY_SHARE) -> list[str]:
    """The names of ``table``'s columns worth a dictionary: at most ``share`` distinct values a row.

    For ``pyarrow.parquet.write_table(..., use_dictionary=...)``. A column
    whose distinct values Arrow cannot count keeps Parquet's default (a
    dictionary). An empty table chooses every column (zero distinct values).
    """
    limit = share * table.num_rows
    chosen = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            few = distinct_at_most(column, limit)
        except _UNCOUNTABLE:
            few = True
        if few:
            chosen.append(name)
    return chosen
