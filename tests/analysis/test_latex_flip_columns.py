r"""The column-wise flip table against a deliberately simple row-by-row reference.

``flip_survival_table`` builds its rows column by column (each column hashed
once, each distinct cell formatted once, rows joined by vectorised string
concatenation). The reference here walks ``to_dict("records")`` one row at a
time and spells every cell rule out from the specification (analysis.md 5.6
and the function's docstring) with plain ``format`` calls. Frames mix the
dtypes a flip grid arrives in: numpy floats with NaN, infinities and ``-0.0``,
integers, bools, pandas strings with missing cells, nullable ``Int64``,
``Float64`` and ``boolean`` columns with ``pd.NA``, and object columns mixing
strings, numbers, numpy scalars and None; optional columns are sometimes absent.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings, strategies as st

from deepecgkit.analysis import latex as L

KEYS = ("model_a", "model_b", "dataset_1", "dataset_2")
NUMBERS = ("mean_1", "lower_1", "upper_1", "mean_2", "lower_2", "upper_2")
COUNTS = ("wins_1", "n_1", "wins_2", "n_2")
OPTIONAL = (
    "comparable_magnitudes",
    "correction_applied_1",
    "correction_applied_2",
    "q_reversal",
    "survives_fdr",
)
UNAVAILABLE = "unavailable"
#: Longest frame drawn: long enough to cross into a longtable (LONG_TABLE_ROWS).
MAX_ROWS = 60

# --- the reference: one row at a time -------------------------------------------------------


def missing(value: Any) -> bool:
    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def number(value: Any) -> float | None:
    """A finite float, or None (strings and unconvertible values are not numbers)."""
    if value is None or isinstance(value, str):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def truth(value: Any) -> bool | None:
    """True, False, or None when the cell states neither."""
    if isinstance(value, str):
        text = value.strip().lower()
        return True if text in ("true", "1") else False if text in ("false", "0") else None
    if missing(value):
        return None
    return bool(value)


def interval(mean: Any, lower: Any, upper: Any, mark: str) -> str:
    point, low, high = number(mean), number(lower), number(upper)
    if point is None:
        return "--"
    cell = "$" + format(point, "+.3f") + mark + "$"
    if low is not None and high is not None:
        cell += r" {\scriptsize $[" + format(low, "+.3f") + ", " + format(high, "+.3f") + "]$}"
    return cell


def wins(won: Any, total: Any) -> str:
    k, n = number(won), number(total)
    if k is None or n is None or n == 0:
        return "--"
    return f"{round(k)}/{round(n)}"


def q_cell(value: Any) -> str:
    q = number(value)
    if q is None:
        return "--"
    return "$<0.001$" if q < 0.001 else "$" + format(q, ".3f") + "$"


def verdict_cell(verdict: Any, survives: Any) -> str:
    if missing(verdict):
        text = "--"
    else:
        text = L.VERDICT_DISPLAY_NAMES.get(str(verdict)) or L.escape_latex(verdict)
    return text + (r"$^{\ast}$" if truth(survives) is True else "")


def reference(frame: pd.DataFrame) -> tuple[list[str], set[str]]:
    """The body lines (group headings and rows) and the superscripts used, row by row."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in frame.to_dict("records") if len(frame) else []:
        if not any(missing(row[key]) for key in KEYS):
            groups.setdefault((str(row["dataset_1"]), str(row["dataset_2"])), []).append(row)
    lines, used = [], set()
    for first, second in sorted(groups):
        lines.append(r"\midrule")
        lines.append(
            r"\multicolumn{7}{l}{\textit{"
            + L.display_dataset(first)
            + r" $\rightarrow$ "
            + L.display_dataset(second)
            + r"}} \\"
        )
        for row in groups[(first, second)]:
            pair = L.display_model(row["model_a"]) + " / " + L.display_model(row["model_b"])
            if pair.lstrip()[:1] in ("[", "*"):
                pair = "{}" + pair
            cells = [pair]
            for i in (1, 2):
                symbols = []
                if truth(row.get("comparable_magnitudes")) is False:
                    symbols.append(r"\dagger")
                if str(row.get(f"correction_applied_{i}")) == UNAVAILABLE:
                    symbols.append(r"\ddagger")
                used.update(symbols)
                mark = "^{" + "".join(symbols) + "}" if symbols else ""
                cells.append(interval(row[f"mean_{i}"], row[f"lower_{i}"], row[f"upper_{i}"], mark))
                cells.append(wins(row[f"wins_{i}"], row[f"n_{i}"]))
            cells.append(q_cell(row.get("q_reversal")))
            cells.append(verdict_cell(row["verdict"], row.get("survives_fdr")))
            lines.append(" & ".join(cells) + r" \\")
    return lines, used


def reference_corrections(frame: pd.DataFrame, requested: str) -> set[str]:
    columns = [c for c in ("correction_applied_1", "correction_applied_2") if c in frame.columns]
    if len(frame) == 0 or not columns:
        return {requested}
    found = {str(value) for c in columns for value in frame[c] if not missing(value)}
    return found or {requested}


def emitted_rows(table: str) -> list[str]:
    """The emitted body lines without the header and the notes.

    A longtable moves the first group's rule into its repeated header, so it is put back.
    """
    lines = table.splitlines()
    if L.is_long_table(table):
        body = [
            r"\midrule",
            *lines[lines.index(r"\endlastfoot") + 1 : lines.index(r"\end{longtable}")],
        ]
    else:
        body = lines[lines.index(r"\toprule") + 2 : lines.index(r"\bottomrule")]
    last_rule = len(body) - 1 - body[::-1].index(r"\midrule")
    rows = body[:last_rule]
    return rows


# --- frames of mixed dtypes ---------------------------------------------------------------------

#: Candidate cells per kind of column; rows draw from them (with random floats added).
NAMES = [
    "cnn",
    "resnet",
    "lstm",
    "a_b",
    "[x]",
    "*star",
    " [pad",
    "",
    "  ",
    "café",
    "7",
    "ptbxl",
    "%",
]
FLOATS = [0.0, -0.0, 0.0005, -0.0005, 0.0004999, 0.00049, 0.001, 1e300, -1e-300]
FLOATS += [math.nan, math.inf, -math.inf]
COUNT_VALUES = [0, 1, 2, 5, 6, 0.5, 1.5, 2.5, -0.0, 4.0, math.nan, 1e300]
ODD_CELLS = [None, "0.5", "text", True, False, np.float32(0.1), np.int64(3)]
TRUTHS = [True, False, "False", "false", " TRUE ", "0", "1", "yes", 0, 1, 2.0, math.nan, None]
TRUTHS.append(np.False_)
CORRECTIONS = [UNAVAILABLE, "nadeau-bengio", "none", "unavailable ", None]
VERDICTS = ["supported", "unresolved", "not-reproduced", "odd_verdict", None]


@st.composite
def column(draw, rng: np.random.Generator, n: int, pool: list, kind: str) -> pd.Series:
    """``n`` cells drawn from ``pool`` in one of the dtypes a column of ``kind`` can arrive in.

    Hypothesis draws the structure (dtype, style); ``rng`` picks the cells, which
    keeps a 60-row frame of 18 columns cheap to generate.
    """
    if kind == "float":
        pool = [*pool, *np.round(rng.normal(0, 0.5, size=8), int(rng.integers(1, 6))).tolist()]
    cells = [pool[i] for i in rng.integers(len(pool), size=n)]
    style = draw(st.sampled_from(["native", "object", "mixed"]))
    if style == "mixed":
        odd = rng.random(n) < 0.3
        picks = rng.integers(len(ODD_CELLS), size=n)
        cells = [
            ODD_CELLS[j] if flag else cell for cell, flag, j in zip(cells, odd, picks, strict=True)
        ]
        return pd.Series(cells, dtype=object)
    if style == "object":
        return pd.Series(cells, dtype=object)
    if kind == "text":
        return pd.Series(cells, dtype=draw(st.sampled_from(["str", "string"])))
    if kind == "float":
        clean = [math.nan if cell is None else cell for cell in cells]
        if draw(st.booleans()):
            return pd.Series(clean, dtype="float64")
        return pd.Series([pd.NA if math.isnan(c) else c for c in clean], dtype="Float64")
    if kind == "count":
        if all(isinstance(cell, int) for cell in cells):
            return pd.Series(cells, dtype=draw(st.sampled_from(["int64", "Int64", "float32"])))
        return pd.Series(cells, dtype="float64")
    if kind == "truth" and all(isinstance(cell, bool) for cell in cells):
        return pd.Series(cells, dtype=draw(st.sampled_from(["bool", "boolean"])))
    return pd.Series(cells, dtype=object)


@st.composite
def flip_frames(draw) -> pd.DataFrame:
    n = draw(st.integers(0, MAX_ROWS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    names = [*NAMES, None] if draw(st.booleans()) else NAMES
    data: dict[str, pd.Series] = {}
    for key in KEYS:
        # Few names per frame, so groups hold several rows.
        chosen = [names[i] for i in rng.choice(len(names), size=3, replace=False)]
        data[key] = draw(column(rng, n, chosen, "text"))
    for name in NUMBERS:
        data[name] = draw(column(rng, n, FLOATS, "float"))
    for name in COUNTS:
        data[name] = draw(column(rng, n, COUNT_VALUES, "count"))
    data["verdict"] = draw(column(rng, n, VERDICTS, "text"))
    optional = {
        "comparable_magnitudes": (TRUTHS, "truth"),
        "correction_applied_1": (CORRECTIONS, "text"),
        "correction_applied_2": (CORRECTIONS, "text"),
        "q_reversal": (FLOATS, "float"),
        "survives_fdr": (TRUTHS, "truth"),
    }
    for name, (values, kind) in optional.items():
        if draw(st.booleans()):
            data[name] = draw(column(rng, n, values, kind))
    return pd.DataFrame(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flips=flip_frames(), correction=st.sampled_from([L.NADEAU_BENGIO, "none"]))
def test_flip_table_rows_equal_the_row_by_row_reference(flips, correction):
    table = L.flip_survival_table(flips, correction=correction)
    rows, used = reference(flips)
    assert emitted_rows(table) == rows
    notes = "\n".join(table.splitlines()[-40:])
    assert (r"$^{\dagger}$ Differences of differently averaged" in notes) == (r"\dagger" in used)
    assert (r"$^{\ddagger}$ Split sizes unknown" in notes) == (r"\ddagger" in used)
    phrase = L._standard_error_phrase(reference_corrections(flips, correction))
    assert phrase in table


def test_flip_table_signs_rounding_and_dropped_rows(caplog):
    """Hand-checked cells: -0.0 keeps its sign, counts round half to even, a missing key drops
    its row with a log line, and an object column of mixed cells reads each cell as it is."""
    flips = pd.DataFrame(
        {
            "model_a": ["cnn", None, "[x]"],
            "model_b": ["resnet", "cnn", "lstm"],
            "dataset_1": ["afib", "afib", "afib"],
            "dataset_2": ["ptbxl", "ptbxl", "ptbxl"],
            "mean_1": [-0.0, 0.1, 0.0],
            "lower_1": [-0.0004, 0.0, "0.1"],
            "upper_1": [0.0, 0.2, 0.1],
            "mean_2": pd.Series([0.5, pd.NA, -1.0], dtype="Float64"),
            "lower_2": [0.25, 0.0, -2.0],
            "upper_2": [0.75, 0.0, math.inf],
            "wins_1": [2.5, 1, 3.5],
            "n_1": [5, 5, -0.0],
            "wins_2": pd.Series([1, 2, pd.NA], dtype="Int64"),
            "n_2": [4, 4, 4],
            "verdict": ["supported", "supported", None],
            "comparable_magnitudes": pd.Series([True, True, "false"], dtype=object),
            "survives_fdr": [True, False, True],
        }
    )
    with caplog.at_level(logging.WARNING, logger=L.__name__):
        table = L.flip_survival_table(flips)
    assert "left out 1 row(s) with a missing model_a or model_b" in caplog.text
    assert emitted_rows(table)[2:] == [
        r"cnn / ResNet & $-0.000$ {\scriptsize $[-0.000, +0.000]$} & 2/5 & "
        r"$+0.500$ {\scriptsize $[+0.250, +0.750]$} & 1/4 & -- & Supported$^{\ast}$ \\",
        r"{}[x] / lstm & $+0.000^{\dagger}$ & -- & $-1.000^{\dagger}$ & -- & -- & --$^{\ast}$ \\",
    ]
    assert emitted_rows(table) == reference(flips)[0]
