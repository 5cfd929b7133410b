"""Frames stored as Parquet through Dagster's ``UPathIOManager``.

Every edge of the asset graph carries a pandas frame, and at 100,000 runs the
long runs frame has 1.8 million rows: a CSV round trip of it at each edge cost
more than the analysis itself, and CSV forgets types, so the CSV store needed
a hand-kept list of which column is text and which a flag. Parquet keeps the
types, reads and writes at memory speed, and ``UPathIOManager`` lets the base
path be a local folder or object storage (any ``fsspec`` URL, e.g.
``s3://bucket/frames``), with one file per asset and one per partition of a
partitioned asset.

Types round-trip exactly, driven by each frame's own dtypes, never by a list
of column names:

* columns pyarrow maps natively (``int64``, ``uint64``, ``float64``, ``bool``,
  the nullable ``Int64``/``boolean``, pandas' ``str`` strings, categoricals,
  datetimes) use pyarrow's pandas metadata;
* ``object`` columns are recorded in the schema metadata under
  :data:`OBJECT_COLUMNS_KEY` and read back as ``object`` holding the same
  Python values: strings stay strings (a model named ``007`` stays ``"007"``),
  and Python ints beyond int64 (64-bit seeds, see
  :mod:`deepecgkit.rundir.int_columns`) are stored as
  ``decimal128(38, 0)`` and read back as exact ints. A missing cell reads back
  as the missing value the column held (``None``, ``NaN`` or ``pd.NA``) when
  every missing cell of the column held the same one, else as ``None``.
"""

import contextlib
import io
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from upath import UPath

from deepecg_assets.partitions import FRAME_SUFFIX, joined
from deepecg_assets.resources import OutputFolderResource
from deepecgkit.io import atomic_write_bytes
from deepecgkit.memory import release_free_memory
from deepecgkit.parquet import dictionary_columns

__all__ = [
    "COLUMNS_METADATA",
    "OBJECT_COLUMNS_KEY",
    "STORED_METADATA",
    "ParquetFrameIOManager",
    "ParquetFrames",
    "StoredFrame",
    "frame_from_parquet",
    "frame_metadata",
    "frame_of_table",
    "frame_to_parquet",
    "input_columns",
    "read_stored_frame",
    "row_group_rows",
]

#: Key of an ``AssetIn``'s metadata naming the columns the input reads (all when absent):
#: ``dg.AssetIn(metadata={COLUMNS_METADATA: ["dataset"]})``.
COLUMNS_METADATA = "deepecg/columns"
#: Key of an ``AssetIn``'s metadata asking for the stored frame unread, as a :class:`StoredFrame`
#: the step reads rows and columns of itself: ``dg.AssetIn(metadata={STORED_METADATA: True})``.
STORED_METADATA = "deepecg/stored"
#: Schema-metadata key listing how each ``object`` column was encoded.
OBJECT_COLUMNS_KEY = b"deepecg.object_columns"
#: Widest exact integer Parquet's decimal type holds (digits).
DECIMAL_DIGITS = 38
_DECIMAL_LIMIT = 10**DECIMAL_DIGITS
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: Encodings of an ``object`` column.
_PYTHON_INT, _INT_TEXT, _VALUES = "python_int", "int_text", "values"
#: Rows shown in the Markdown preview attached to every materialisation.
PREVIEW_ROWS = 10
#: Page compression: LZ4 writes and reads that frame twice as fast as Snappy (Parquet's
#: default) for 8% more bytes (docs/benchmarks.md, "Session 20: discovery at 100,000 runs").
COMPRESSION = "lz4"
_MISSING_TOKENS = {"none": None, "nan": math.nan, "na": pd.NA}
#: Uncompressed bytes (Arrow's count) of one row group. A frame of at most this many bytes
#: is one row group, as Parquet writes it by default; a bigger one is cut into row groups
#: of about this size, so a reader of some of its rows (:meth:`StoredFrame.read`, a
#: dataset's rows of ``discovered_runs``) decodes only the row groups that hold them:
#: at 100,000 runs one dataset's rows are 5% of that frame's 98 MB.
ROW_GROUP_BYTES = 1 << 20


def _is_missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _missing_token(values: list[Any]) -> str:
    """Which missing value a column's missing cells held (``none`` when mixed or absent)."""
    kinds = {
        "none" if v is None else "na" if v is pd.NA else "nan" for v in values if _is_missing(v)
    }
    return kinds.pop() if len(kinds) == 1 else "none"


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _encode_object_column(values: list[Any]) -> tuple[pa.Array, dict[str, str]]:
    """A pyarrow array for one ``object`` column, and how to decode it."""
    missing = _missing_token(values)
    present = [v for v in values if not _is_missing(v)]
    if present and all(_is_int(v) for v in present):
        ints = [None if _is_missing(v) else int(v) for v in values]
        if all(i is None or _INT64_MIN <= i <= _INT64_MAX for i in ints):
            encoding, array = _VALUES, pa.array(ints, type=pa.int64())
        elif all(i is None or abs(i) < _DECIMAL_LIMIT for i in ints):
            decimals = [None if i is None else Decimal(i) for i in ints]
            encoding = _PYTHON_INT
            array = pa.array(decimals, type=pa.decimal128(DECIMAL_DIGITS, 0))
        else:
            encoding = _INT_TEXT
            array = pa.array([None if i is None else str(i) for i in ints], type=pa.string())
    else:
        cells = [None if _is_missing(v) else v for v in values]
        try:
            array = pa.array(cells)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
            raise TypeError(
                f"an object column mixes types Parquet cannot hold in one column ({error}); "
                "store one type per column"
            ) from error
        encoding = _VALUES
    return array, {"encoding": encoding, "missing": missing}


def frame_to_parquet(frame: pd.DataFrame) -> bytes:
    """Parquet bytes of ``frame``, its dtypes recorded so :func:`frame_from_parquet` restores them.

    Raises ``TypeError`` for an ``object`` column whose values Parquet cannot
    hold in one column (say strings mixed with floats).
    """
    objects = [c for c in frame.columns if frame[c].dtype == object]
    plain = frame.drop(columns=objects)
    table = pa.Table.from_pandas(plain, preserve_index=None)
    decoding: dict[str, dict[str, str]] = {}
    for column in objects:
        array, decoding[str(column)] = _encode_object_column(frame[column].tolist())
        table = table.append_column(str(column), array)
    order = [str(c) for c in frame.columns]
    index_columns = [name for name in table.column_names if name not in order]
    table = table.select(order + index_columns)
    metadata = dict(table.schema.metadata or {})
    metadata[OBJECT_COLUMNS_KEY] = json.dumps(decoding, sort_keys=True).encode()
    buffer = io.BytesIO()
    pq.write_table(
        table.replace_schema_metadata(metadata),
        buffer,
        use_dictionary=dictionary_columns(table),
        compression=COMPRESSION,
        row_group_size=row_group_rows(table),
    )
    return buffer.getvalue()


def row_group_rows(table: pa.Table) -> int | None:
    """Rows per row group: None (Parquet's default, one group) up to :data:`ROW_GROUP_BYTES`.

    A bigger table gets ``ROW_GROUP_BYTES`` divided by its mean row size
    (at least one row), decided by the table's own size, never by its name.
    """
    if table.nbytes <= ROW_GROUP_BYTES or table.num_rows == 0:
        return None
    return max(1, ROW_GROUP_BYTES * table.num_rows // table.nbytes)


def _decode_object_column(array: pa.ChunkedArray, how: dict[str, str]) -> np.ndarray:
    missing = _MISSING_TOKENS[how["missing"]]
    values = array.to_pylist()
    if how["encoding"] in (_PYTHON_INT, _INT_TEXT):
        values = [None if v is None else int(v) for v in values]
    out = np.empty(len(values), dtype=object)
    out[:] = [missing if v is None else v for v in values]
    return out


def frame_from_parquet(data: bytes, *, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The frame :func:`frame_to_parquet` stored, with its dtypes and values.

    ``columns`` reads only those (in the stored order); a name the frame lacks
    raises ``KeyError``. Parquet stores each column apart, so the others are
    not decoded at all: at 100,000 runs ``discovered_runs``' metrics text is
    80 of its 98 MB, and most readers never look at it.
    """
    if columns is not None:
        columns = _stored_columns(pq.read_schema(io.BytesIO(data)).names, columns)
    return frame_of_table(pq.read_table(io.BytesIO(data), columns=columns))


def frame_of_table(table: pa.Table) -> pd.DataFrame:
    """The frame a table read from a stored file holds (columns or rows of it, or all).

    The schema's metadata (pyarrow's pandas metadata and :data:`OBJECT_COLUMNS_KEY`)
    restores the dtypes and values. A table of fewer rows than were stored gets a
    fresh ``RangeIndex`` where the frame had one.
    """
    decoding = json.loads((table.schema.metadata or {}).get(OBJECT_COLUMNS_KEY, b"{}"))
    decoding = {name: how for name, how in decoding.items() if name in table.column_names}
    objects = {name: table.column(name) for name in decoding}
    frame = table.drop_columns(list(objects)).to_pandas()
    for name, array in objects.items():
        values = _decode_object_column(array, decoding[name])
        frame[name] = pd.Series(values, index=frame.index, dtype=object)
    order = [c for c in table.column_names if c in frame.columns]
    return frame[order]


class ParquetFrameIOManager(dg.UPathIOManager):
    """Stores a frame asset as ``<base>/<asset>.parquet``, a partition as ``<asset>/<key>.parquet``.

    A partitioned frame travels as a mapping ``{partition key: frame}`` in
    both directions, whether the step handles one partition or many (see
    :mod:`deepecg_assets.partitions`): Dagster's own ``UPathIOManager`` hands
    a single partition over bare and refuses to store several from one step,
    which a single-run backfill needs. A stored partition that is missing
    fails the step with the asset and partition to materialise first.

    A local base path is written through the project's atomic writer (a
    temporary name renamed into place, so a crash never leaves half a frame);
    on object storage a single PUT is already atomic.

    Memory freed by a step goes back to the system when an input is loaded and
    after each output is stored (:func:`~deepecgkit.memory.release_free_memory`):
    the build runs every step in one process, whose peak would otherwise be
    the leftovers of earlier steps plus the current one (at 100,000 runs the
    report step started at 0.79 GiB instead of 0.69).
    """

    extension = FRAME_SUFFIX

    def dump_to_path(self, context: dg.OutputContext, obj: pd.DataFrame, path: UPath) -> None:
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(
                f"asset {context.asset_key.to_user_string()} returned {type(obj).__name__}; "
                "ParquetFrameIOManager stores pandas DataFrames only"
            )
        data = frame_to_parquet(obj)
        if path.protocol in ("", "file", "local"):
            atomic_write_bytes(path.path, data)
        else:
            path.write_bytes(data)

    def load_from_path(self, context: dg.InputContext, path: UPath) -> "pd.DataFrame | StoredFrame":
        """The stored frame, or a :class:`StoredFrame` when the input asks for one."""
        if (context.definition_metadata or {}).get(STORED_METADATA):
            if not path.exists():
                raise _missing_frame(context, path)
            return StoredFrame(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise _missing_frame(context, path) from None
        return frame_from_parquet(data, columns=input_columns(context))

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        # The encoded file is freed once written: it goes back before the step goes on.
        try:
            self._store(context, obj)
        finally:
            release_free_memory()

    def _store(self, context: dg.OutputContext, obj: Any) -> None:
        if not context.has_asset_partitions:
            super().handle_output(context, obj)
            context.add_output_metadata(frame_metadata(obj))
            return
        paths = self._get_paths_for_partitions(context)
        if not isinstance(obj, Mapping) or set(obj) != set(paths):
            raise TypeError(
                f"partitioned asset {context.asset_key.to_user_string()} must return "
                f"{{partition key: frame}} for its partitions {sorted(paths)}"
            )
        for key, path in paths.items():
            self.make_directory(path.parent)
            self.dump_to_path(context=context, obj=obj[key], path=path)
        frames = [obj[key] for key in sorted(obj)]
        metadata = frame_metadata(frames[0]) if len(frames) == 1 else {}
        metadata["dagster/row_count"] = sum(len(frame) for frame in frames)
        context.add_output_metadata(metadata)

    def load_input(self, context: dg.InputContext) -> Any:
        # The step before has ended: what it freed goes back before this one reads.
        release_free_memory()
        if not context.has_asset_key or not context.has_asset_partitions:
            return super().load_input(context)
        return {
            key: self.load_from_path(context=context, path=path)
            for key, path in sorted(self._get_paths_for_partitions(context).items())
        }


def _missing_frame(context: dg.InputContext, path: UPath) -> dg.Failure:
    """The failure of a step whose input's stored frame is missing: what to materialise first."""
    partition = f" partition {path.stem!r}" if context.has_asset_partitions else ""
    return dg.Failure(
        description=(
            f"stored frame {path} is missing; materialise "
            f"{context.asset_key.to_user_string()}{partition} first"
        )
    )


class StoredFrame:
    """A stored frame not read yet: the step reads the rows and columns it needs.

    What an input marked :data:`STORED_METADATA` receives (one per partition
    of a partitioned asset, in a ``{partition key: StoredFrame}`` mapping).
    At 100,000 runs a dataset's step needs 5% of ``discovered_runs``' rows
    and 11 of its 16 columns; reading the whole frame first cost more than
    the step's statistics. The file is read where it lies (a local path or
    any ``fsspec`` URL), never copied into memory whole.
    """

    def __init__(self, path: UPath) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"StoredFrame({str(self.path)!r})"

    @contextlib.contextmanager
    def _file(self) -> Iterator[pq.ParquetFile]:
        """The stored file, open while the block runs (Parquet reads its pieces lazily)."""
        local = self.path.protocol in ("", "file", "local")
        with open(self.path.path, "rb") if local else self.path.open("rb") as handle:
            yield pq.ParquetFile(handle)

    def num_rows(self) -> int:
        """Rows of the stored frame, from the file's footer (no column is read)."""
        with self._file() as file:
            return file.metadata.num_rows

    def column_names(self) -> list[str]:
        """The stored frame's columns, in order, from the file's footer (no column is read)."""
        with self._file() as file:
            schema = file.schema_arrow
        index = {
            c for c in (schema.pandas_metadata or {}).get("index_columns", []) if isinstance(c, str)
        }
        return [name for name in schema.names if name not in index]

    def distinct(self, column: str) -> list[Any]:
        """The distinct values of ``column`` as the frame holds them, in order of first row.

        One column is read, and only its distinct values become Python objects
        (the 100,000-row ``dataset`` column of ``discovered_runs`` holds 20
        names). A column the frame lacks raises ``KeyError``.
        """
        with self._file() as file:
            schema = file.schema_arrow
            names = _stored_columns(schema.names, [column])
            values = pc.unique(file.read(columns=names).column(column))
        field = schema.field(column)
        table = pa.Table.from_arrays([values], schema=pa.schema([field], metadata=schema.metadata))
        return frame_of_table(table)[column].tolist()

    def read(
        self,
        *,
        columns: Sequence[str] | None = None,
        where: tuple[str, Callable[[Any], bool]] | None = None,
    ) -> pd.DataFrame:
        """The stored frame, or ``columns`` of it (stored order), or the rows ``where`` keeps.

        ``where=(column, keep)`` keeps the rows whose ``column`` value ``v``
        has ``keep(v)`` true (``keep`` is called once per distinct value; a
        missing value is ``None``), in their stored order; only the row
        groups holding such rows are decoded. Dtypes and values are those of
        :func:`frame_from_parquet`; a frame with a ``RangeIndex`` gets a
        fresh one of the rows kept. A column the frame lacks raises ``KeyError``.
        """
        with self._file() as file:
            names = _stored_columns(file.schema_arrow.names, columns)
            if where is None:
                return frame_of_table(file.read(columns=names))
            column, keep = where
            if column not in file.schema_arrow.names:
                raise KeyError(f"the stored frame has no column {column!r}")
            mask = _kept_rows(file.read(columns=[column]).column(column), keep)
            sizes = [file.metadata.row_group(i).num_rows for i in range(file.num_row_groups)]
            bounds = np.cumsum([0, *sizes])
            groups = [i for i in range(len(sizes)) if mask[bounds[i] : bounds[i + 1]].any()]
            if not groups:
                return frame_of_table(file.schema_arrow.empty_table().select(names))
            table = file.read_row_groups(groups, columns=names)
        kept = np.concatenate([mask[bounds[i] : bounds[i + 1]] for i in groups])
        return frame_of_table(table.filter(kept))


def _stored_columns(stored: Sequence[str], columns: Sequence[str] | None) -> list[str]:
    """``columns`` in the stored order (all when None); a name not stored raises ``KeyError``."""
    if columns is None:
        return list(stored)
    missing = sorted(set(columns) - set(stored))
    if missing:
        raise KeyError(f"the stored frame has no column(s) {missing}")
    return [name for name in stored if name in set(columns)]


def _kept_rows(values: pa.ChunkedArray, keep: Callable[[Any], bool]) -> np.ndarray:
    """Boolean mask of the rows whose value ``keep`` keeps, ``keep`` called per distinct value."""
    distinct = pc.unique(values)
    kept = pa.array([v for v in distinct.to_pylist() if keep(v)], type=values.type)
    return pc.is_in(values, value_set=kept, skip_nulls=False).to_numpy(zero_copy_only=False)


def input_columns(context: dg.InputContext) -> list[str] | None:
    """The columns an input asks for (:data:`COLUMNS_METADATA` of its ``AssetIn``), else None."""
    metadata = context.definition_metadata or {}
    columns = metadata.get(COLUMNS_METADATA)
    return None if columns is None else list(columns)


def frame_metadata(frame: pd.DataFrame) -> dict[str, Any]:
    """What a person sees of a stored frame: its rows, columns and the first rows."""
    return {
        "dagster/row_count": len(frame),
        "columns": ", ".join(map(str, frame.columns)),
        "preview": dg.MetadataValue.md(markdown_preview(frame)),
    }


def markdown_preview(frame: pd.DataFrame, rows: int = PREVIEW_ROWS) -> str:
    """The first ``rows`` rows as a Markdown table (the column list when empty)."""
    if frame.empty:
        return "*(no rows)* columns: " + ", ".join(f"`{c}`" for c in frame.columns)
    return frame.head(rows).to_markdown(index=False)


class ParquetFrames(dg.ConfigurableIOManagerFactory):
    """The frame store of the code location: Parquet files under ``<output>/frames``.

    ``base_path`` (any ``fsspec`` URL, e.g. ``s3://bucket/frames``) moves the
    frames elsewhere; by default they follow the output-folder resource, so a
    path set for ``output_folder`` in the launchpad applies to stored frames too.
    """

    output: dg.ResourceDependency[OutputFolderResource]
    base_path: str | None = None

    def create_io_manager(self, context: dg.InitResourceContext) -> ParquetFrameIOManager:
        base = UPath(self.base_path) if self.base_path else UPath(self.output.frames_dir())
        return ParquetFrameIOManager(base_path=base)


def read_stored_frame(
    frames_dir: Path,
    asset: str,
    *,
    columns: Sequence[str] | None = None,
    distinct: bool = False,
) -> pd.DataFrame:
    """The frame of ``asset`` as a local store holds it: one file, or its partitions joined.

    Partitions are joined in key order (:func:`deepecg_assets.partitions.joined`),
    as the cross-dataset assets read them. ``columns``: as :func:`frame_from_parquet`.
    ``distinct``: each file's distinct rows only (first occurrences, in order), dropped
    before the partitions are joined, for a reader that counts names: the long runs
    frames of 100,000 runs hold 1.8 million rows, 18 per run.
    """

    def read(path: Path) -> pd.DataFrame:
        frame = frame_from_parquet(path.read_bytes(), columns=columns)
        return frame.drop_duplicates(ignore_index=True) if distinct else frame

    single = frames_dir / f"{asset}{FRAME_SUFFIX}"
    if single.is_file():
        return read(single)
    parts = {
        path.name[: -len(FRAME_SUFFIX)]: read(path)
        for path in sorted((frames_dir / asset).glob(f"*{FRAME_SUFFIX}"))
    }
    return joined(parts, columns=columns or ())
