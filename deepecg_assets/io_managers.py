"""Frames stored as CSV files a person can open, under ``<output>/frames/``.

Stored frames live in the output folder rather than in Dagster's instance
storage, so ``dagster asset materialize --select flip_table`` reuses the
``flip_grid`` of an earlier build whatever instance (or none) the command
runs on. Each asset gets one CSV file, written under a temporary name and
renamed into place, so a crash never leaves half a frame.

CSV does not carry types, so loading restores them from the column names
every frame of this project uses: name-like columns stay strings (a model
called ``007`` stays ``007``), flags become booleans, everything else is
numeric. A numeric column whose every cell is an integer literal is read as
exact integers (int64, nullable Int64 when a cell is empty, Python ints
beyond int64), never through float, so a 64-bit seed reads back exactly;
pandas writes every float with a decimal point or an exponent, so a float
column is never mistaken for one. Floats are written at full round-trip
precision, so a stored frame reads back equal to what the library produced.
"""

import io
import re

import dagster as dg
import numpy as np
import pandas as pd

from deepecg_assets.resources import OutputFolderResource
from deepecgkit.io import atomic_write_text
from deepecgkit.rundir.int_columns import exact_int_array

#: Columns that always hold text.
STRING_COLUMNS = frozenset(
    {
        "run_dir",
        "model",
        "dataset",
        "averaging",
        "metric",
        "metrics",
        "fingerprint",
        "seeds",
        "kept_averaging",
        "model_a",
        "model_b",
        "dataset_1",
        "dataset_2",
        "averaging_1",
        "averaging_2",
        "verdict",
        "reason",
        "fdr_family",
        "fdr_method",
        "correction_applied_1",
        "correction_applied_2",
        "correction_note_1",
        "correction_note_2",
        "dataset_best",
        "dataset_worst",
        "components",
        "source",
        "target",
        "note",
        "task",
        "model_name",
        "path",
        "reason_code",
        "detail",
        "suspect",
    }
)
#: Columns that always hold booleans.
BOOL_COLUMNS = frozenset(
    {"multi_label", "comparable_magnitudes", "claimed_direction", "survives_fdr"}
)
#: Rows shown in the Markdown preview attached to every materialisation.
PREVIEW_ROWS = 10
_TRUE_TEXT = {"True": True, "False": False}
_INTEGER_CELL = re.compile(r"[+-]?\d+")


def frame_to_csv(frame: pd.DataFrame) -> str:
    """CSV text of ``frame``: no index, NaN as an empty field, floats at full precision."""
    return frame.to_csv(index=False, lineterminator="\n")


def _is_integer_column(values: pd.Series) -> bool:
    """Every cell an integer literal or empty, and at least one not empty."""
    filled = values[values != ""]
    return len(filled) > 0 and bool(filled.str.fullmatch(_INTEGER_CELL).all())


def frame_from_csv(text: str) -> pd.DataFrame:
    """Parse :func:`frame_to_csv` output back into typed columns."""
    raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    frame = pd.DataFrame(index=raw.index)
    for column in raw.columns:
        values = raw[column]
        if column in STRING_COLUMNS:
            frame[column] = values.astype(object)
        elif column in BOOL_COLUMNS:
            frame[column] = values.map(_TRUE_TEXT).astype(bool)
        elif _is_integer_column(values):
            frame[column] = exact_int_array([int(v) if v else None for v in values.tolist()])
        else:
            numeric = pd.to_numeric(values.replace("", np.nan), errors="coerce")
            if numeric.isna().sum() > (values == "").sum():
                frame[column] = values.astype(object)  # not numeric after all: keep the text
            else:
                frame[column] = numeric
    return frame


def markdown_preview(frame: pd.DataFrame, rows: int = PREVIEW_ROWS) -> str:
    """The first ``rows`` rows as a Markdown table (the column list when empty)."""
    if frame.empty:
        return "*(no rows)* columns: " + ", ".join(f"`{c}`" for c in frame.columns)
    return frame.head(rows).to_markdown(index=False)


class FrameIOManager(dg.ConfigurableIOManager):
    """Stores each DataFrame asset as ``<output>/frames/<asset>.csv``."""

    output: dg.ResourceDependency[OutputFolderResource]

    def _path(self, context: dg.OutputContext | dg.InputContext):
        return self.output.frames_dir() / ("__".join(context.asset_key.path) + ".csv")

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame) -> None:
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(
                f"asset {context.asset_key.to_user_string()} returned "
                f"{type(obj).__name__}; FrameIOManager stores pandas DataFrames only"
            )
        path = atomic_write_text(self._path(context), frame_to_csv(obj))
        context.add_output_metadata(
            {
                "dagster/row_count": len(obj),
                "path": dg.MetadataValue.path(str(path)),
                "columns": ", ".join(map(str, obj.columns)),
                "preview": dg.MetadataValue.md(markdown_preview(obj)),
            }
        )

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        path = self._path(context)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise dg.Failure(
                description=(
                    f"stored frame {path} is missing; materialise "
                    f"{context.asset_key.to_user_string()} first"
                )
            ) from None
        return frame_from_csv(text)
