r"""Booktabs LaTeX tables for the multi-seed results, rankings and flip tests.

Each emitter returns one complete ``table`` environment as a string that needs
only the ``booktabs`` package. Conventions, stated once:

* **Escaping.** Model, dataset and metric names come from user files, so every
  name without an entry in a display map goes through :func:`escape_latex`.
  Mapped display names, notes and the fixed caption text are LaTeX already and
  are never escaped again.
* **Backslashes.** Every string literal that holds a backslash is a raw string.
  ``"\toprule"`` would be a TAB followed by ``oprule``: a valid Python escape
  that no linter flags and that silently breaks compilation.
* **Missing values.** ``None``, NaN and both infinities render as
  :data:`MISSING_CELL` (``--``, an en dash in LaTeX).
* **Nothing is bolded.** Bolding the best mean and whatever overlaps it would
  be a set of pairwise comparisons that per-model intervals cannot support;
  the flip table is the instrument for that.
* **Direction.** Rows ranked by a metric in ``LOWER_IS_BETTER`` are sorted
  ascending, so a calibration table leads with the best-calibrated model.
* **Ranges.** Interval bounds are *displayed* clipped to the range the
  quantity can take (``METRIC_RANGES``; [-1, 1] for Kendall's tau), with a
  note saying so; the frames keep the raw Student-t bounds.
* **Frames.** A non-empty frame must hold the columns its emitter names
  (``ValueError`` naming the missing ones); an empty frame is accepted without
  columns and gives the header and notes only. Rows whose key (dataset, model)
  is missing are left out and logged.

:func:`latex_engine` and :func:`compile_table` are a chosen extra: the Dagster
asset check and the tests compile every emitted table with a real engine.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np
import pandas as pd

from deepecgkit.analysis.constants import (
    CONFIDENCE_LEVEL,
    CORRECTION_UNAVAILABLE,
    DEFAULT_FDR_METHOD,
    FDR_FAMILY_SIGNIFICANT,
    FDR_FAMILY_TESTABLE,
    FDR_METHOD_BH,
    MIN_SEEDS_FOR_CLAIM,
    NADEAU_BENGIO,
    VERDICTS,
)
from deepecgkit.analysis.schemas import DISTRIBUTION_HEAD, DISTRIBUTION_TAIL, TAU_COLUMNS
from deepecgkit.analysis.statistics import (
    _check_confidence_level,
    _check_correction,
    _check_non_negative_count,
)
from deepecgkit.io import MAX_STEM_CHARACTERS, atomic_write_text, bounded_stem
from deepecgkit.rundir.format import (
    CALIBRATION_ERRORS,
    LOWER_IS_BETTER,
    METRIC_RANGES,
    MULTI_LABEL_METRICS,
    SINGLE_LABEL_METRICS,
)
from deepecgkit.rundir.metrics import (
    PRIMARY_PROBE_METRIC,
    display_name as metric_display_name,
    probe_name,
    temperature_scaled,
)

__all__ = [
    "BASELINE_DISPLAY_NAMES",
    "DATASET_DISPLAY_NAMES",
    "DEFAULT_PRECISION",
    "FLIP_TABLE_STEM",
    "LONG_TABLE_ROWS",
    "MAX_STEM_CHARACTERS",
    "METRIC_DISPLAY_NAMES",
    "MISSING_CELL",
    "MODEL_DISPLAY_NAMES",
    "RANK_TABLE_STEM",
    "RESULTS_INDEX",
    "RESULTS_TABLE_PREFIX",
    "SPLIT_DESCRIPTION",
    "TAU_TABLE_STEM",
    "TRANSFER_INDEX",
    "TRANSFER_TABLE_STEM",
    "UNICODE_ENGINES",
    "VERDICT_DISPLAY_NAMES",
    "compile_table",
    "compile_table_run",
    "display_dataset",
    "display_metric",
    "display_model",
    "escape_latex",
    "file_stems",
    "flip_survival_table",
    "format_cell",
    "is_long_table",
    "latex_engine",
    "needs_unicode_engine",
    "rank_distribution_table",
    "results_table",
    "results_table_stems",
    "standalone_document",
    "table_index_text",
    "tau_table",
    "transfer_matrix_table",
    "write_tables",
]

logger = logging.getLogger(__name__)

_Row = TypeVar("_Row")

# --- display constants -----------------------------------------------------------

#: Cell text for a missing value: ``--`` typesets as an en dash.
MISSING_CELL = "--"
#: Decimals of means and interval bounds.
DEFAULT_PRECISION = 3
#: What one seed redraws, as the captions say it.
SPLIT_DESCRIPTION = "train/validation/test partition"

MODEL_DISPLAY_NAMES: dict[str, str] = {
    "resnet": "ResNet",
    "se-resnet": "SE-ResNet",
    "inception-time": "InceptionTime",
    "convnext-v2": "ConvNeXt-V2",
    "crnn": "CRNN",
    "medformer": "Medformer",
    "mamba": "Mamba",
}
DATASET_DISPLAY_NAMES: dict[str, str] = {
    "af-classification": "PhysioNet 2017",
    "ptbxl": "PTB-XL",
    "mitbih-afdb": "MIT-BIH AFDB",
    "ltafdb": "LTAFDB",
    "unified-af": "Unified AF",
}
#: Display names of the metrics a table shows: the run directory's metric columns
#: and the probes' headline metric, from the registry (:mod:`deepecgkit.rundir.metrics`).
METRIC_DISPLAY_NAMES: dict[str, str] = {
    name: metric_display_name(name)
    for name in dict.fromkeys(
        (
            *SINGLE_LABEL_METRICS[: SINGLE_LABEL_METRICS.index("mcc")],
            probe_name("auroc"),
            "mcc",
            *MULTI_LABEL_METRICS[:2],
            *CALIBRATION_ERRORS,
            *(temperature_scaled(name) for name in CALIBRATION_ERRORS),
            "temperature",
        )
    )
}
#: A verdict as a table prints it: ``not-reproduced`` -> ``Not reproduced``.
VERDICT_DISPLAY_NAMES: dict[str, str] = {
    verdict: verdict.replace("-", " ").capitalize() for verdict in VERDICTS
}
BASELINE_DISPLAY_NAMES: dict[str, str] = {
    "untrained": "Untrained encoder",
    "random": "Random encoder",
}

# --- private constants --------------------------------------------------------------

_ESCAPES: dict[str, str] = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "^": r"\textasciicircum{}",
    "_": r"\_",
    "%": r"\%",
    "~": r"\textasciitilde{}",
}
#: Code points below this, and DEL, are control characters.
_FIRST_PRINTABLE = 32
_DELETE = 127
# One translation table, so each input character is looked up exactly once and
# a replacement is never escaped again. Control characters (CR, LF, TAB ...)
# become a space: a blank line inside a tabular cell breaks compilation.
_TRANSLATION = str.maketrans(
    {
        **{chr(code): " " for code in (*range(_FIRST_PRINTABLE), _DELETE)},
        **_ESCAPES,
    }
)

#: Greek letters: the lower-case ones and the capitals LaTeX draws differently
#: from Latin ones get their math command; the other capitals are Latin letters.
#: Names of U+03B1 ... U+03C9 and of U+0391 ... U+03A9 in code point order ("-": unassigned).
_GREEK_LOWER = (
    "alpha beta gamma delta varepsilon zeta eta theta iota kappa lambda mu nu xi o pi rho",
    "varsigma sigma tau upsilon varphi chi psi omega",
)
_GREEK_UPPER = (
    "A B Gamma Delta E Z H Theta I K Lambda M N Xi O Pi P",
    "- Sigma T Upsilon Phi X Psi Omega",
)
_GREEK_COMMANDS = {
    **{
        chr(0x391 + offset): (rf"\ensuremath{{\{name}}}" if len(name) > 1 else name)
        for offset, name in enumerate(" ".join(_GREEK_UPPER).split())
        if name != "-"
    },
    **{
        chr(0x3B1 + offset): (rf"\ensuremath{{\{name}}}" if len(name) > 1 else name)
        for offset, name in enumerate(" ".join(_GREEK_LOWER).split())
    },
    "\u03d1": r"\ensuremath{\vartheta}",
    "\u03d5": r"\ensuremath{\phi}",
    "\u03f5": r"\ensuremath{\epsilon}",
    "\u00b5": r"\ensuremath{\mu}",
}
#: Letters and symbols outside ASCII that base LaTeX typesets with a command.
_UNICODE_COMMANDS = {
    **_GREEK_COMMANDS,
    "\u00df": r"\ss{}",
    "\u00e6": r"\ae{}",
    "\u00c6": r"\AE{}",
    "\u0153": r"\oe{}",
    "\u0152": r"\OE{}",
    "\u00f8": r"\o{}",
    "\u00d8": r"\O{}",
    "\u0142": r"\l{}",
    "\u0141": r"\L{}",
    "\u0131": r"\i{}",
    "\u00a0": "~",
    "\u2013": "--",
    "\u2014": "---",
    "\u2018": "`",
    "\u2019": "'",
    "\u201c": "``",
    "\u201d": "''",
    "\u2026": r"\ldots{}",
    "\u00b0": r"\ensuremath{^\circ}",
    "\u00d7": r"\ensuremath{\times}",
    "\u00b1": r"\ensuremath{\pm}",
    "\u00b7": r"\ensuremath{\cdot}",
}
#: Combining marks and the LaTeX accent command that puts each on a letter.
_ACCENT_COMMANDS = {
    "\u0300": "\\`",
    "\u0301": "\\'",
    "\u0302": "\\^",
    "\u0303": "\\~",
    "\u0304": "\\=",
    "\u0306": "\\u",
    "\u0307": "\\.",
    "\u0308": '\\"',
    "\u030a": "\\r",
    "\u030b": "\\H",
    "\u030c": "\\v",
    "\u0323": "\\d",
    "\u0327": "\\c",
    "\u0328": "\\k",
    "\u0331": "\\b",
}
#: The engines that typeset any Unicode character (given a font that has it).
UNICODE_ENGINES = ("lualatex", "xelatex")
#: Most rows (header and notes included) a table keeps in a float; a longer
#: one is a ``longtable``.
#: About one page of ``\small`` booktabs rows: a float cannot break across
#: pages, so a longer one would run off its page even where it compiles.
LONG_TABLE_ROWS = 50
LONG_TABLE_BEGIN = r"\begin{longtable}"
#: The line a long table's body starts after, and the line it ends before (the body is
#: one row, rule or note per line; :mod:`deepecgkit.analysis.compile_cache` cuts it there).
LONG_TABLE_BODY_START = r"\endlastfoot"
LONG_TABLE_END = r"\end{longtable}"
#: The comment a long table starts with: a paper's preamble must load the package.
LONG_TABLE_COMMENT = r"This table spans pages: load \usepackage{longtable} (and booktabs)."


def _unicode_replacement(char: str) -> str:
    """What a character outside ASCII becomes in a table.

    A command where base LaTeX has one (Greek letters, ``ß``, typographic
    quotes and dashes), an accent command on an ASCII letter for an accented
    Latin letter (``é`` becomes ``\\'{e}``), nothing for an invisible
    format character (right-to-left and zero-width marks, which carry no
    glyph and which pdflatex rejects), a space for any other space, and the
    character itself otherwise: CJK, Hebrew, Arabic and the like need a
    Unicode engine (see :func:`needs_unicode_engine`).
    """
    if char in _UNICODE_COMMANDS:
        return _UNICODE_COMMANDS[char]
    category = unicodedata.category(char)
    if category == "Cf":
        return ""
    if category.startswith("Z"):
        return " "
    base, *marks = unicodedata.normalize("NFD", char)
    if base.isascii() and base.isalpha() and marks and all(m in _ACCENT_COMMANDS for m in marks):
        for mark in marks:
            base = f"{_ACCENT_COMMANDS[mark]}{{{base}}}"
        return base
    return char


class _UnicodeTranslation(dict):
    """The escape table for text outside ASCII: ASCII as :data:`_TRANSLATION`, the rest by
    :func:`_unicode_replacement`, each code point computed once and then remembered."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        value = char if code < _DELETE else _unicode_replacement(char)
        self[code] = value
        return value


_UNICODE_TRANSLATION = _UnicodeTranslation(_TRANSLATION)

#: Characters that may not open a body line: after ``\\`` or a booktabs rule,
#: LaTeX reads a leading ``[`` as an optional length and a leading ``*`` as the
#: star form, so a model called ``[x]`` would break compilation.
_LOOKAHEAD_CHARACTERS = ("[", "*")
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9]")
_RESULTS_LABEL_PREFIX = "tab:seed_"
_DEFAULT_RESULTS_METRICS = ("f1", "precision", "recall")
_TAU_DIGITS = 2
_FRACTION_DIGITS = 2
_VALUE_DIGITS = 3
_P_DIGITS = 3
#: p-values below this print as ``<0.001`` instead of a row of zeros.
_SMALLEST_SHOWN_P = 10.0**-_P_DIGITS
#: Decimals kept by ``_percent`` before formatting; absorbs float noise (0.95 * 100).
_PERCENT_ROUNDING = 6
_FLIP_N_COLUMNS = 7
#: Superscript symbols: differently averaged scores, and no Nadeau-Bengio correction.
_DAGGER_SYMBOL = r"\dagger"
_DDAGGER_SYMBOL = r"\ddagger"
#: Marks a verdict that survives the FDR adjustment.
_SURVIVES = r"$^{\ast}$"
#: Range of Kendall's tau, to which displayed interval bounds are clipped.
_TAU_RANGE = (-1.0, 1.0)
_FALSE_STRINGS = frozenset({"false", "0"})
_TRUE_STRINGS = frozenset({"true", "1"})
_COMPILE_JOBNAME = "table"
#: The PDF :func:`_run_engine` leaves in its folder.
COMPILED_PDF = f"{_COMPILE_JOBNAME}.pdf"
#: Characters outside ASCII listed by code point in a table's engine comment.
_SHOWN_CHARACTERS = 8
_LOG_TAIL_LINES = 20
_ERROR_CONTEXT_LINES = 3

_RESULTS_COLUMNS = ("dataset", "model", "metric", "mean", "lower_ci", "upper_ci", "n")
_DISTRIBUTION_COLUMNS = (*DISTRIBUTION_HEAD, *DISTRIBUTION_TAIL)
#: The tau columns the tables read: all of ``tau_summary``'s but the jackknife standard
#: error, which no table prints.
_TAU_COLUMNS = tuple(column for column in TAU_COLUMNS if column != "tau_se")
_FLIP_REQUIRED = (
    "model_a",
    "model_b",
    "dataset_1",
    "dataset_2",
    "mean_1",
    "lower_1",
    "upper_1",
    "mean_2",
    "lower_2",
    "upper_2",
    "wins_1",
    "n_1",
    "wins_2",
    "n_2",
    "verdict",
)
#: File stems of the tables (``<stem>.tex``) every writer of them uses.
RESULTS_TABLE_PREFIX = "results_"
RANK_TABLE_STEM = "rank_distribution"
TAU_TABLE_STEM = "kendall_tau"
FLIP_TABLE_STEM = "flip_survival"
TRANSFER_TABLE_STEM = "transfer_matrix"
#: Which dataset each results table holds, and which architecture each transfer
#: heat map shows (file names of long names are hashed).
RESULTS_INDEX = "results_tables.json"
TRANSFER_INDEX = "transfer_matrix_figures.json"
_INVALID_STEM_CHARACTERS = ("/", "\\", "\0")
_RESERVED_STEMS = ("", ".", "..")
_TABLE_SUFFIX = ".tex"


# --- private helpers ------------------------------------------------------------------


def _finite_float(value: Any) -> float | None:
    """``value`` as a finite Python float, or None when missing or not a number."""
    if value is None or isinstance(value, str):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _is_missing(value: Any) -> bool:
    """True for None, NaN and ``pandas.NA``: a key that cannot name anything."""
    if value is None or isinstance(value, str):
        return value is None
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _int_cell(value: Any) -> str:
    """A count as an integer, or :data:`MISSING_CELL`."""
    number = _finite_float(value)
    return MISSING_CELL if number is None else str(round(number))


def _percent(level: float) -> str:
    """``level`` as a LaTeX percentage: 0.95 -> ``95\\%``, 0.975 -> ``97.5\\%``."""
    return format(round(100 * level, _PERCENT_ROUNDING), "g") + r"\%"


def _number(value: Any, digits: int) -> str:
    """``$<value with digits decimals>$`` (math mode sets minus signs), or a dash."""
    number = _finite_float(value)
    if number is None:
        return MISSING_CELL
    return f"${number:.{digits}f}$"


def _p_cell(value: Any) -> str:
    """A p-value with three decimals, ``$<0.001$`` below that, or a dash."""
    number = _finite_float(value)
    if number is not None and number < _SMALLEST_SHOWN_P:
        return f"$<{_SMALLEST_SHOWN_P:g}$"
    return _number(value, _P_DIGITS)


def _point_and_bounds(
    mean: Any, lower: Any, upper: Any, *, spec: str, marker: str = "", small: bool
) -> str:
    """``$point$ $[low, high]$`` in the format ``spec``; the bounds only when both are finite.

    ``small`` sets the bounds in ``\\scriptsize``; a missing point is :data:`MISSING_CELL`.
    """
    point = _finite_float(mean)
    if point is None:
        return MISSING_CELL
    cell = f"${point:{spec}}{marker}$"
    low, high = _finite_float(lower), _finite_float(upper)
    if low is not None and high is not None:
        bounds = f"$[{low:{spec}}, {high:{spec}}]$"
        cell += rf" {{\scriptsize {bounds}}}" if small else f" {bounds}"
    return cell


def _clip_bounds(
    lower: Any, upper: Any, bounds: tuple[float | None, float | None] | None
) -> tuple[Any, Any, bool]:
    """Interval bounds clipped, for display, to ``bounds`` (``None`` ends are open).

    Returns ``(lower, upper, clipped)``; ``clipped`` is True when a finite
    bound moved. Missing bounds and an unknown range pass through unchanged.
    """
    low, high = _finite_float(lower), _finite_float(upper)
    if bounds is None or low is None or high is None:
        return lower, upper, False
    floor, ceiling = bounds
    clipped = False
    if floor is not None and low < floor:
        low, clipped = floor, True
    if ceiling is not None and high > ceiling:
        high, clipped = ceiling, True
    return low, high, clipped


def _range_text(bounds: tuple[float, float]) -> str:
    r"""``$[0, 1]$`` or ``$[0, \infty)$`` for a range with an open (infinite) end."""
    floor, ceiling = bounds
    left = r"(-\infty" if math.isinf(floor) else f"[{floor:g}"
    right = r"\infty)" if math.isinf(ceiling) else f"{ceiling:g}]"
    return f"${left}, {right}$"


def _superscript(symbols: Sequence[str]) -> str:
    r"""``^{\dagger\ddagger}`` for the given symbols, or ``""`` when there are none."""
    return "^{" + "".join(symbols) + "}" if symbols else ""


def _note_rows(notes: Iterable[str], n_columns: int) -> list[str]:
    """One full-width body line per note; notes are LaTeX already and not escaped.

    An ``l`` cell does not wrap, so long sentences arrive as several notes.
    """
    return [rf"\multicolumn{{{n_columns}}}{{l}}{{{note}}} \\" for note in notes]


def _tau_floor_notes(
    taus: pd.DataFrame | None, *, confidence_level: float = CONFIDENCE_LEVEL
) -> list[str]:
    """One note per distinct model count on the smallest attainable Kendall p.

    The p-value is compared with the significance level of the table's
    intervals, ``1 - confidence_level`` (0.05 at the default 95%).

    With three models there are only 3! = 6 orderings, so no coefficient can be
    significant however stable the ranking; the note says so instead of letting
    a reader look for a p-value that cannot exist. Ties raise the floor, so
    datasets with the same model count can differ; the note gives the smallest.
    """
    if taus is None or len(taus) == 0:
        return []
    _require_columns(taus, ("n_models", "min_attainable_p"), "taus")
    floors: dict[int, float] = {}
    for n_models, p_value in zip(taus["n_models"], taus["min_attainable_p"], strict=True):
        models, p = _finite_float(n_models), _finite_float(p_value)
        if models is not None and p is not None:
            floors[round(models)] = min(p, floors.get(round(models), p))
    alpha = round(1.0 - confidence_level, _PERCENT_ROUNDING)
    notes = []
    for models in sorted(floors):
        p = floors[models]
        note = (
            rf"With $|M|={models}$ models the smallest attainable two-sided $p$ is "
            f"{p:.{_P_DIGITS}f}"
        )
        if p >= alpha:
            note += rf", so no coefficient can reach $p<{alpha:g}$."
        else:
            note += "."
        notes.append(note)
    return notes


def _wrap_table(
    body: Sequence[str],
    column_spec: str,
    caption: str,
    label: str,
    size: str | None = r"\small",
) -> str:
    """The full ``table`` environment, caption above the tabular as booktabs expects.

    A table of more than :data:`LONG_TABLE_ROWS` rows is a ``longtable``
    instead (:func:`_long_table_lines`): a float cannot break across pages,
    and TeX builds a float's whole box in memory, so the flip table of a large
    sweep (8,550 rows at 20,000 runs) exceeded pdflatex's main memory and did
    not compile at all.

    A table holding characters pdflatex cannot typeset starts with a comment
    that says so and which engines can (see :func:`needs_unicode_engine`).
    """
    if _more_rows_than(body, LONG_TABLE_ROWS):
        lines = _long_table_lines(body, column_spec, caption, label, size)
    else:
        lines = [r"\begin{table}[t]", r"\centering"]
        if size is not None:
            lines.append(size)
        lines += [
            rf"\caption{{{caption}}}",
            rf"\label{{{label}}}",
            rf"\begin{{tabular}}{{{column_spec}}}",
            r"\toprule",
            *body,
            r"\bottomrule",
            r"\end{tabular}",
            r"\end{table}",
        ]
    text = "\n".join(lines) + "\n"
    return text if text.isascii() else _unicode_engine_comment(text) + text


def _more_rows_than(body: Sequence[str], limit: int) -> bool:
    """Whether ``body`` has more than ``limit`` rows, header and notes included.

    A row is a line that ends with ``\\\\``. Counting stops past ``limit``, so a
    200,000-row body costs no more than a short one.
    """
    rows = (line for line in body if line.rstrip().endswith("\\\\"))
    return next(itertools.islice(rows, limit, None), None) is not None


def _long_table_lines(
    body: Sequence[str], column_spec: str, caption: str, label: str, size: str | None
) -> list[str]:
    """A ``longtable`` of ``body``: the header (the rows before the first ``\\midrule``)
    repeats on every page, under a "continued" line after the first.

    The first line is a comment naming the package, since a paper's preamble
    must load it.
    """
    split = body.index(r"\midrule") if r"\midrule" in body else 0
    header = list(body[:split])
    rows = body[split + 1 :] if split else body
    columns = _column_count(column_spec)
    continued = rf"\multicolumn{{{columns}}}{{l}}{{\textit{{(continued)}}}} \\"
    lines = [f"% {LONG_TABLE_COMMENT}", r"\begingroup"]
    if size is not None:
        lines.append(size)
    lines += [
        rf"\begin{{longtable}}{{{column_spec}}}",
        rf"\caption{{{caption}}}\label{{{label}}} \\",
        r"\toprule",
        *header,
        r"\midrule",
        r"\endfirsthead",
        continued,
        r"\toprule",
        *header,
        r"\midrule",
        r"\endhead",
        r"\bottomrule",
        LONG_TABLE_BODY_START,
        *rows,
        LONG_TABLE_END,
        r"\endgroup",
    ]
    return lines


def _column_count(column_spec: str) -> int:
    """Columns of a plain ``tabular`` column specification such as ``lcccl``."""
    return sum(1 for char in column_spec if char in "lcrpmbX")


def is_long_table(table: str) -> bool:
    """Whether an emitted table is a ``longtable`` (it spans pages, so it is not pictured)."""
    return LONG_TABLE_BEGIN in table


def _non_ascii(text: str) -> list[str]:
    """The distinct characters of ``text`` outside ASCII, in order of first appearance."""
    return list(dict.fromkeys(char for char in text if not char.isascii()))


def _unicode_engine_comment(table: str) -> str:
    """A LaTeX comment naming the characters pdflatex cannot typeset and the engines that can."""
    characters = _non_ascii(table)
    shown = ", ".join(f"U+{ord(char):04X}" for char in characters[:_SHOWN_CHARACTERS])
    more = len(characters) - _SHOWN_CHARACTERS
    more_text = f" and {more} more" if more > 0 else ""
    return (
        f"% This table holds characters pdflatex cannot typeset ({shown}{more_text}).\n"
        f"% Compile it with {' or '.join(UNICODE_ENGINES)} and a font that has them.\n"
    )


def needs_unicode_engine(table: str) -> bool:
    """Whether ``table`` holds a character that pdflatex cannot typeset.

    Every emitter escapes what base LaTeX can typeset (see
    :func:`escape_latex`), so any character left outside ASCII (outside the
    comment that announces it) needs one of :data:`UNICODE_ENGINES`.
    """
    return not table.isascii()


def _row(cells: Sequence[str]) -> str:
    r"""Join cells into one body line ending in ``\\``.

    A first cell opening with ``[`` or ``*`` (after any spaces, which LaTeX's
    look-ahead skips) is shielded by ``{}`` so that the preceding ``\\`` or
    rule does not swallow it as an argument.
    """
    return " & ".join([_shielded(cells[0]), *cells[1:]]) + r" \\"


def _shielded(cell: str) -> str:
    """``cell``, after ``{}`` when it opens with ``[`` or ``*`` after any spaces (:func:`_row`)."""
    return "{}" + cell if cell.lstrip().startswith(_LOOKAHEAD_CHARACTERS) else cell


def _require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise ``ValueError`` naming the columns a non-empty ``frame`` lacks."""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{what} must be a pandas DataFrame, got {type(frame).__name__}")
    if len(frame) == 0:
        return
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(
            f"{what} lacks column(s) {', '.join(missing)}; "
            f"it has {', '.join(map(str, frame.columns))}"
        )


def _records(frame: pd.DataFrame, keys: Sequence[str], what: str) -> list[dict[str, Any]]:
    """The frame's rows as dicts, without rows whose key columns are missing."""
    if len(frame) == 0:
        return []
    records = frame.to_dict("records")
    kept = [row for row in records if not any(_is_missing(row[key]) for key in keys)]
    dropped = len(records) - len(kept)
    if dropped:
        logger.warning("%s: left out %d row(s) with a missing %s", what, dropped, " or ".join(keys))
    return kept


def _sort_by_value(
    rows: Iterable[_Row],
    value: Callable[[_Row], Any],
    name: Callable[[_Row], str],
    metric: str,
) -> list[_Row]:
    """Best first by ``value(row)`` (ascending for LOWER_IS_BETTER), NaN last, then name."""
    sign = 1.0 if str(metric) in LOWER_IS_BETTER else -1.0

    def key(row: _Row) -> tuple[bool, float, str]:
        number = _finite_float(value(row))
        return (number is None, 0.0 if number is None else sign * number, name(row))

    return sorted(rows, key=key)


def _display_verdict(verdict: Any) -> str:
    if _is_missing(verdict):
        return MISSING_CELL
    return VERDICT_DISPLAY_NAMES.get(str(verdict)) or escape_latex(verdict)


def _explicit_bool(value: Any) -> bool | None:
    """The truth a cell states (bool, numpy bool, number, or a CSV spelling), else None.

    None for a missing cell, a string that spells neither ``_TRUE_STRINGS``
    nor ``_FALSE_STRINGS``, or a value without a truth value (an array).
    """
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE_STRINGS:
            return True
        if text in _FALSE_STRINGS:
            return False
        return None
    if _is_missing(value):
        return None
    try:
        return bool(value)
    except (TypeError, ValueError):
        return None


def _is_false(value: Any) -> bool:
    """True only for an explicit False (bool, numpy bool, or its CSV spelling)."""
    return _explicit_bool(value) is False


def _names(names: str | Sequence[str] | None) -> list[str]:
    """A bare string counts as one name."""
    if names is None:
        return []
    if isinstance(names, str):
        return [names]
    return [str(name) for name in names]


# --- escaping and display names ---------------------------------------------------------


def escape_latex(text: str) -> str:
    r"""Make any text safe to place in a tabular cell.

    Applies ``str()`` and then one translation pass over the ten LaTeX special
    characters (``\ { } $ & # ^ _ % ~``); control characters (code point below
    32, or 127) become a space. Each character is looked up once, so a
    replacement is never escaped again. Text outside ASCII is first put in
    NFC form, then every character that base LaTeX can typeset becomes its
    command (Greek letters, accented Latin letters, ``ß``, dashes and
    quotes), invisible format characters are dropped, and what is left (CJK,
    Hebrew, Arabic ...) passes through unchanged: a table holding such a
    character needs a Unicode engine (:func:`needs_unicode_engine`).

    Example:
        >>> escape_latex(r"C:\a_{1} 50%")
        'C:\\textbackslash{}a\\_\\{1\\} 50\\%'
        >>> escape_latex("α-café")
        "\\ensuremath{\\alpha}-caf\\'{e}"
    """
    text = str(text)
    if text.isascii():
        return text.translate(_TRANSLATION)
    return unicodedata.normalize("NFC", text).translate(_UNICODE_TRANSLATION)


def display_model(name: str) -> str:
    """The manuscript name of a model, or the escaped name when it has none."""
    key = str(name)
    return MODEL_DISPLAY_NAMES.get(key) or escape_latex(key)


def display_dataset(name: str) -> str:
    """The manuscript name of a dataset, or the escaped name when it has none."""
    key = str(name)
    return DATASET_DISPLAY_NAMES.get(key) or escape_latex(key)


def display_metric(name: str) -> str:
    """The manuscript name of a metric, or the escaped name when it has none."""
    key = str(name)
    return METRIC_DISPLAY_NAMES.get(key) or escape_latex(key)


# --- cells -------------------------------------------------------------------------------


def format_cell(
    mean: float,
    lower: float,
    upper: float,
    *,
    n: int = 0,
    precision: int = DEFAULT_PRECISION,
) -> str:
    r"""A mean with its interval: ``$0.810$ {\scriptsize [0.790, 0.830]}``.

    Args:
        mean: The point estimate; None or non-finite gives :data:`MISSING_CELL`.
        lower: Lower interval bound.
        upper: Upper interval bound.
        n: Number of values behind the mean. ``1`` shows the mean alone (one
            run carries no dispersion); ``0`` means unknown and keeps the
            interval.
        precision: Decimals, fixed point as Python formats them.

    Returns:
        The cell text. The interval is left out when either bound is None or
        non-finite.

    Raises:
        TypeError: ``precision`` is a bool or not an integer.
        ValueError: ``precision`` is negative.
    """
    digits = _check_non_negative_count("precision", precision)
    point = _finite_float(mean)
    if point is None:
        return MISSING_CELL
    cell = f"${point:.{digits}f}$"
    low, high = _finite_float(lower), _finite_float(upper)
    if _finite_float(n) == 1 or low is None or high is None:
        return cell
    return cell + rf" {{\scriptsize [{low:.{digits}f}, {high:.{digits}f}]}}"


# --- results table -----------------------------------------------------------------------


def _default_results_label(dataset: str) -> str:
    return _RESULTS_LABEL_PREFIX + _LABEL_UNSAFE.sub("_", str(dataset))


def _results_caption(dataset: str, confidence_level: float, split_description: str) -> str:
    return (
        rf"{display_dataset(dataset)}: means over $n$ random seeds. "
        rf"Each seed redraws the {escape_latex(split_description)} and reinitialises "
        rf"the weights; brackets are two-sided {_percent(confidence_level)} Student-$t$ "
        r"intervals over that combined variation. Each interval is a within-corpus "
        r"statement, not a generalisation interval."
    )


def results_table(
    aggregated: pd.DataFrame,
    dataset: str,
    *,
    metrics: Sequence[str] = _DEFAULT_RESULTS_METRICS,
    label: str | None = None,
    precision: int = DEFAULT_PRECISION,
    confidence_level: float = CONFIDENCE_LEVEL,
    split_description: str = SPLIT_DESCRIPTION,
) -> str:
    r"""Per-dataset table of multi-seed means and Student-t intervals.

    Args:
        aggregated: Output of ``aggregate_runs``: needs ``dataset``, ``model``,
            ``metric``, ``mean``, ``lower_ci``, ``upper_ci`` and ``n``;
            ``averaging`` is optional and feeds the averaging note.
        dataset: The dataset whose rows are shown.
        metrics: Columns of the table, in order (a bare string is one metric).
            Rows are ranked by ``metrics[0]``.
        label: ``\label``; default ``tab:seed_`` + the dataset with every
            character outside ``[A-Za-z0-9]`` replaced by ``_``. A caller's
            label is used verbatim.
        precision: Decimals of means and bounds.
        confidence_level: Coverage stated in the caption (the intervals were
            computed upstream at this level).
        split_description: What one seed redraws, as plain text (escaped).

    Returns:
        The table. Models with a ``metrics[0]`` row come first, best mean first
        (ascending for a LOWER_IS_BETTER metric), NaN means last, ties by name;
        models with only other displayed metrics follow by name. A model's
        ``n`` is that of ``metrics[0]``, or failing that of the first metric
        it has. Displayed bounds are clipped to ``METRIC_RANGES`` (an F1
        interval ``[0.982, 1.004]`` shows ``1.000``) with a note naming the
        clipped metrics. A dataset without rows gives the header and notes
        only.

    Raises:
        ValueError: Invalid ``confidence_level``, empty ``metrics``, negative
            ``precision`` or a missing column.
    """
    _check_confidence_level(confidence_level)
    metric_names = _names(metrics)
    if not metric_names:
        raise ValueError("metrics must name at least one metric, got an empty sequence")
    digits = _check_non_negative_count("precision", precision)
    _require_columns(aggregated, _RESULTS_COLUMNS, "aggregated")

    records = _records(aggregated, ("dataset", "model", "metric"), "results_table")
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    duplicates = 0
    for row in records:
        if str(row["dataset"]) != str(dataset) or str(row["metric"]) not in metric_names:
            continue
        by_metric = cells.setdefault(str(row["model"]), {})
        duplicates += str(row["metric"]) in by_metric
        by_metric.setdefault(str(row["metric"]), row)
    if duplicates:
        logger.warning(
            "results_table: %d repeated (model, metric) row(s) on %s; the first of each is shown",
            duplicates,
            dataset,
        )

    lead = metric_names[0]
    ranked = _sort_by_value(
        (model for model in cells if lead in cells[model]),
        lambda model: cells[model][lead]["mean"],
        lambda model: model,
        lead,
    )
    ordered = ranked + sorted(model for model in cells if lead not in cells[model])

    n_columns = len(metric_names) + 2
    body = [_row(["Model", *(display_metric(m) for m in metric_names), "$n$"]), r"\midrule"]
    averaging: set[str] = set()
    clipped_metrics: set[str] = set()
    for model in ordered:
        row_cells = [display_model(model)]
        for metric in metric_names:
            entry = cells[model].get(metric)
            if entry is None:
                row_cells.append(MISSING_CELL)
                continue
            lower, upper, clipped = _clip_bounds(
                entry["lower_ci"], entry["upper_ci"], METRIC_RANGES.get(metric)
            )
            if clipped and _finite_float(entry["n"]) != 1:
                clipped_metrics.add(metric)
            row_cells.append(
                format_cell(entry["mean"], lower, upper, n=entry["n"], precision=digits)
            )
            mode = entry.get("averaging")
            if not _is_missing(mode):
                averaging.add(str(mode))
        shown = next(cells[model][m] for m in metric_names if m in cells[model])
        row_cells.append(_int_cell(shown["n"]))
        body.append(_row(row_cells))

    notes = [
        "Intervals describe how much each model moves when the split and the",
        "initialisation are redrawn; they are not a pairwise test between models.",
    ]
    if clipped_metrics:
        ranges = ", ".join(
            f"{display_metric(m)} {_range_text(METRIC_RANGES[m])}"
            for m in metric_names
            if m in clipped_metrics
        )
        notes += [
            f"Interval bounds beyond a metric's range are shown at its limit ({ranges});",
            "the Student-$t$ interval itself extends past it.",
        ]
    if averaging:
        notes.append(f"Averaging: {', '.join(escape_latex(m) for m in sorted(averaging))}.")
    body += [r"\midrule", *_note_rows(notes, n_columns)]
    return _wrap_table(
        body,
        "l" + "c" * (len(metric_names) + 1),
        _results_caption(dataset, confidence_level, split_description),
        _default_results_label(dataset) if label is None else label,
    )


# --- rank distribution table ----------------------------------------------------------------


def _max_count(values: Iterable[Any]) -> int:
    finite = [number for number in map(_finite_float, values) if number is not None]
    return round(max(finite)) if finite else 0


def _mode_cell(row: Mapping[str, Any]) -> str:
    mode, fraction, seeds = (
        _finite_float(row["mode_rank"]),
        _finite_float(row["mode_fraction"]),
        _finite_float(row["n_seeds"]),
    )
    if mode is None or fraction is None or seeds is None:
        return MISSING_CELL
    return f"{round(mode)} ({round(fraction * seeds)}/{round(seeds)})"


def _mean_sd_cell(mean: Any, std: Any) -> str:
    point = _finite_float(mean)
    if point is None:
        return MISSING_CELL
    cell = f"${point:.{_VALUE_DIGITS}f}$"
    spread = _finite_float(std)
    if spread is not None:
        cell += rf" $\pm$ {spread:.{_VALUE_DIGITS}f}"
    return cell


def _tau_cell(mean: Any, low: Any, high: Any) -> str:
    return _point_and_bounds(mean, low, high, spec=f".{_TAU_DIGITS}f", small=False)


def _tau_interval_cell(row: Mapping[str, Any]) -> tuple[str, bool]:
    """The mean tau with its jackknife interval, bounds clipped to [-1, 1] for display."""
    lower, upper, clipped = _clip_bounds(row["tau_lower"], row["tau_upper"], _TAU_RANGE)
    return _tau_cell(row["tau_mean"], lower, upper), clipped


def _tau_summary_note(taus: pd.DataFrame | None, confidence_level: float) -> list[str]:
    """The one-line Kendall summary under the rank table, or nothing."""
    if taus is None or len(taus) == 0:
        return []
    _require_columns(taus, _TAU_COLUMNS, "taus")
    parts = [
        f"{display_dataset(row['dataset'])} " + _tau_interval_cell(row)[0]
        for row in _records(taus, ("dataset",), "rank_distribution_table")
        if _finite_float(row["tau_mean"]) is not None
    ]
    if not parts:
        return []
    return [
        r"Kendall $\bar\tau_b$ over all seed-pair rankings, with "
        rf"{_percent(confidence_level)} leave-one-seed-out jackknife intervals: "
        + "; ".join(parts)
        + "."
    ]


def rank_distribution_table(
    distribution: pd.DataFrame,
    taus: pd.DataFrame | None = None,
    *,
    label: str = "tab:rank_distribution",
    metric: str = "f1",
    confidence_level: float = CONFIDENCE_LEVEL,
) -> str:
    r"""How often each model attained each rank within its dataset, over seeds.

    Args:
        distribution: Output of ``rank_distribution``: needs ``dataset``,
            ``model``, ``n_seeds``, ``n_models``, ``mode_rank``,
            ``mode_fraction``, ``top1_fraction``, ``mean_value`` and
            ``std_value``; ``rank_1`` ... ``rank_K`` where present (an absent
            or NaN count shows a dash).
        taus: Optional output of ``tau_summary`` for the Kendall notes.
        label: ``\label`` of the table.
        metric: The ranked metric, for the header, caption and row direction.
        confidence_level: Coverage of the jackknife intervals in the Kendall
            note (they were computed upstream at this level).

    Returns:
        The table, in ``\scriptsize``: one block per dataset (sorted), models by
        ``mean_value`` best first (ascending for LOWER_IS_BETTER), NaN last,
        ties by name. Empty input gives the header and notes only.

    Raises:
        ValueError: A required column is missing.
    """
    _check_confidence_level(confidence_level)
    _require_columns(distribution, _DISTRIBUTION_COLUMNS, "distribution")
    if taus is not None:
        _require_columns(taus, _TAU_COLUMNS, "taus")
    records = _records(distribution, ("dataset", "model"), "rank_distribution_table")
    n_ranks = _max_count(row["n_models"] for row in records)
    n_columns = n_ranks + 4
    rank_columns = [f"rank_{k}" for k in range(1, n_ranks + 1)]
    header = [
        "Model",
        *(f"R{k}" for k in range(1, n_ranks + 1)),
        "Mode",
        "Top-1",
        rf"{display_metric(metric)} (mean $\pm$ sd)",
    ]
    body = [_row(header)]

    blocks: dict[str, list[dict[str, Any]]] = {}
    for row in records:
        blocks.setdefault(str(row["dataset"]), []).append(row)
    for dataset in sorted(blocks):
        block = blocks[dataset]
        models = _max_count(row["n_models"] for row in block)
        seeds = _max_count(row["n_seeds"] for row in block)
        body += [
            r"\midrule",
            rf"\multicolumn{{{n_columns}}}{{l}}{{\textit{{{display_dataset(dataset)}}} "
            rf"({models} models, {seeds} seeds)}} \\",
        ]
        ordered = _sort_by_value(
            block, lambda row: row["mean_value"], lambda row: str(row["model"]), metric
        )
        for row in ordered:
            top1 = _finite_float(row["top1_fraction"])
            body.append(
                _row(
                    [
                        display_model(row["model"]),
                        *(_int_cell(row.get(column)) for column in rank_columns),
                        _mode_cell(row),
                        MISSING_CELL if top1 is None else f"{top1:.{_FRACTION_DIGITS}f}",
                        _mean_sd_cell(row["mean_value"], row["std_value"]),
                    ]
                )
            )

    notes = [
        "Ties share the better rank, so a rank column may over-fill.",
        *_tau_summary_note(taus, confidence_level),
        *_tau_floor_notes(taus, confidence_level=confidence_level),
    ]
    body += [r"\midrule", *_note_rows(notes, n_columns)]
    return _wrap_table(
        body,
        "l" + "c" * (n_columns - 1),
        _rank_distribution_caption(metric),
        label,
        size=r"\scriptsize",
    )


def _rank_distribution_caption(metric: str) -> str:
    return (
        rf"Distribution of {display_metric(metric)} ranks over random seeds. Each cell "
        r"counts the seeds in which the model attained that rank within its dataset "
        r"(rank 1 = best); rows sum to the seed count. Dashes mark ranks that cannot "
        r"occur because fewer models were trained on that dataset."
    )


# --- flip survival table ---------------------------------------------------------------------

_VERDICT_NOTES = (
    rf"Supported: both intervals exclude zero with opposite signs, over at least "
    rf"{MIN_SEEDS_FOR_CLAIM} shared seeds.",
    rf"Suggestive: both intervals exclude zero with opposite signs, but fewer than "
    rf"{MIN_SEEDS_FOR_CLAIM} shared seeds.",
    "Unresolved: the means have opposite signs, but an interval includes zero.",
    "Not reproduced: the means have the same sign, and an interval includes zero.",
    "Contradicted: both intervals exclude zero with the same sign.",
    "Bimodal: a model's per-seed scores split into separated clusters; not tested.",
    "Untestable: too few test units or shared seeds, an undefined interval, or a required",
    "Nadeau--Bengio correction whose split sizes are unknown.",
)
_DAGGER_NOTES = (
    r"$^{\dagger}$ Differences of differently averaged scores: their magnitudes",
    r"cannot be compared, and only their signs enter the test.",
)


def _flip_family(flips: pd.DataFrame) -> str:
    """The FDR family named by the first row, testable when absent."""
    if len(flips) == 0 or "fdr_family" not in flips.columns:
        return FDR_FAMILY_TESTABLE
    family = flips["fdr_family"].iloc[0]
    if _is_missing(family) or str(family) not in (FDR_FAMILY_TESTABLE, FDR_FAMILY_SIGNIFICANT):
        logger.warning(
            "flip_survival_table: unknown fdr_family %r; the caption describes the testable family",
            family,
        )
        return FDR_FAMILY_TESTABLE
    return str(family)


_DDAGGER_NOTES = (
    r"$^{\ddagger}$ Split sizes unknown: the uncorrected standard error of the mean,",
    r"not the Nadeau--Bengio one, which understates the seed-to-seed spread.",
)
_FDR_METHOD_NAMES = {FDR_METHOD_BH: "Benjamini--Hochberg"}
_DEFAULT_FDR_NAME = "Benjamini--Yekutieli"


def _flip_fdr_method(flips: pd.DataFrame) -> str:
    """The FDR method named by the first row, the default when absent."""
    if len(flips) == 0 or "fdr_method" not in flips.columns:
        return DEFAULT_FDR_METHOD
    method = flips["fdr_method"].iloc[0]
    return DEFAULT_FDR_METHOD if _is_missing(method) else str(method)


def _applied_corrections(flips: pd.DataFrame, correction: str) -> set[str]:
    """Every standard-error correction the rows record, or the requested one when none do."""
    columns = [c for c in ("correction_applied_1", "correction_applied_2") if c in flips.columns]
    if len(flips) == 0 or not columns:
        return {correction}
    applied = {
        str(value)
        for c in columns
        for value in _distinct_cells(_column(flips, c)).values
        if not _is_missing(value)
    }
    return applied or {correction}


def _standard_error_phrase(applied: set[str]) -> str:
    """What the caption says of the standard errors: only what the rows actually got."""
    corrected = NADEAU_BENGIO in applied
    if corrected and CORRECTION_UNAVAILABLE in applied:
        return (
            "its standard error carries the Nadeau--Bengio correction for training-set "
            r"overlap between seeds, except in the differences marked $^{\ddagger}$, whose "
            "split sizes are unknown and which use the uncorrected standard error"
        )
    if corrected:
        return (
            "its standard error carries the Nadeau--Bengio correction for training-set "
            "overlap between seeds"
        )
    if CORRECTION_UNAVAILABLE in applied:
        return (
            "the Nadeau--Bengio correction was requested, but no comparison's split sizes "
            r"are known, so every standard error (marked $^{\ddagger}$) is the uncorrected "
            "standard error of the mean"
        )
    return "its standard error is the uncorrected standard error of the mean"


def _flip_caption(
    metric: str,
    confidence_level: float,
    applied: set[str],
    family: str,
    fdr_method: str,
    split_description: str,
) -> str:
    metric_name = display_metric(metric)
    if family == FDR_FAMILY_SIGNIFICANT:
        scope = "over the comparisons whose verdict is supported, suggestive or contradicted"
    else:
        scope = "over every testable comparison"
    method = _FDR_METHOD_NAMES.get(fdr_method, _DEFAULT_FDR_NAME)
    alpha = format(round(1.0 - confidence_level, _PERCENT_ROUNDING), "g")
    return (
        rf"Cross-dataset ranking reversals in {metric_name} that survive seed variance. "
        rf"Each row compares two architectures $A$ and $B$ on two datasets "
        rf"$D_1 \rightarrow D_2$ over $n$ shared random seeds; every seed redraws the "
        rf"{escape_latex(split_description)} and reinitialises the weights. "
        rf"$\Delta_i$ is the mean paired per-seed difference ($A-B$) in {metric_name} on "
        rf"$D_i$, with a two-sided {_percent(confidence_level)} Student-$t$ interval; "
        rf"{_standard_error_phrase(applied)}. $k_i/n$ counts the seeds in which $A$'s "
        r"score exceeded $B$'s on $D_i$. "
        r"A reversal is supported only when both intervals exclude zero with opposite "
        r"signs (an intersection--union test). Its $p$-value $p_{\mathrm{rev}}$ is built "
        r"from one-sided component $t$ tests: $\max(p_1, p_2)/2$ when the two means have "
        r"opposite signs and $1-\max(p_1, p_2)/2 \ge 0.5$ when they share one, so a "
        r"same-sign pair is never evidence of a reversal; its size is the nominal level "
        r"under the least-favourable null. "
        rf"$q_{{\mathrm{{rev}}}}$ is the {method} adjustment of $p_{{\mathrm{{rev}}}}$ "
        rf"{scope}; a supported row marked $^{{\ast}}$ also has "
        rf"$q_{{\mathrm{{rev}}}} \le {alpha}$ and survives that adjustment, while an "
        r"unmarked supported row is a nominal finding only. "
        rf"Supported needs at least {MIN_SEEDS_FOR_CLAIM} shared "
        r"seeds (suggestive: the same pattern over fewer); unresolved, not reproduced "
        r"and contradicted fail the test; bimodal is a verdict of its own, for per-seed "
        r"scores that split into clusters; untestable rows lack test units, seeds or a "
        r"defined interval. All comparisons in the grid are exploratory."
    )


class _Cells(NamedTuple):
    """One column's cells as its distinct cells and, per row, the index of its cell among them.

    ``values`` hold each distinct cell as the Python scalar a ``to_dict("records")``
    conversion of the frame would give (numpy scalars unboxed, ``pd.NA`` as None), so a
    scalar rule applied to them sees what a row-by-row formatter would see.
    """

    codes: np.ndarray
    values: list[Any]

    def map(self, rule: Callable[[Any], Any]) -> np.ndarray:
        """``rule(cell)`` of every row (an object array), evaluated once per distinct cell."""
        return self.map_all(lambda values: map(rule, values))

    def map_all(self, rules: Callable[[list[Any]], Iterable[Any]]) -> np.ndarray:
        """``rules(values)``, one result per distinct cell in order, spread over every row."""
        results = np.fromiter(rules(self.values), dtype=object, count=len(self.values))
        return results[self.codes]

    def flags(self, rule: Callable[[Any], bool]) -> np.ndarray:
        """``rule(cell)`` of every row as a boolean array."""
        return self.map(rule).astype(bool)

    def take(self, rows: np.ndarray) -> _Cells:
        """The cells of ``rows`` (positions), in that order."""
        return _Cells(self.codes[rows], self.values)


_MASKED_ARRAYS = (pd.arrays.IntegerArray, pd.arrays.FloatingArray, pd.arrays.BooleanArray)


def _distinct_numbers(values: np.ndarray) -> _Cells:
    """The distinct numbers of a numpy array; floats told apart by their bits.

    Bits, not values: ``-0.0 == 0.0`` but they print with different signs, and a
    hash table would merge them. Floats are widened to float64 first, exactly as
    a records conversion makes a Python float of a float32.
    """
    if values.dtype.kind == "f":
        codes, bits = pd.factorize(values.astype(np.float64).view(np.int64))
        return _Cells(codes, bits.view(np.float64).tolist())
    codes, uniques = pd.factorize(values)
    return _Cells(codes, uniques.tolist())


def _with_missing(cells: _Cells, missing: np.ndarray, value: Any) -> _Cells:
    """``cells`` with the rows of ``missing`` pointing at one more distinct cell, ``value``."""
    if not missing.any():
        return cells
    codes = np.where(missing, len(cells.values), cells.codes)
    return _Cells(codes, [*cells.values, value])


def _distinct_cells(column: pd.Series) -> _Cells:
    """The cells of ``column`` as :class:`_Cells`, by one hashing pass over the column.

    numpy numbers and bools, pandas' nullable numbers and bools (a missing cell
    is None) and strings (a missing cell is the dtype's missing value, None for
    ``pd.NA``) are told apart by hashing; any other column (object, categorical,
    dates ...) keeps every cell as its own, since values of different types can
    compare equal (``1 == 1.0 == True``) and still print differently.
    """
    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biuf":
        return _distinct_numbers(column.to_numpy())
    if isinstance(column.array, _MASKED_ARRAYS):
        numbers = column.to_numpy(dtype=dtype.numpy_dtype, na_value=dtype.numpy_dtype.type(0))
        return _with_missing(_distinct_numbers(numbers), column.isna().to_numpy(), None)
    if isinstance(dtype, pd.StringDtype):
        codes, uniques = pd.factorize(column)
        missing_value = None if dtype.na_value is pd.NA else dtype.na_value
        return _with_missing(_Cells(codes, list(uniques)), codes < 0, missing_value)
    values = next(iter(column.to_frame().to_dict("list").values()))
    return _Cells(np.arange(len(values)), values)


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    """The column ``name``; of duplicate labels the last, as a records conversion keeps it."""
    located = frame.columns.get_loc(name)
    if isinstance(located, (int, np.integer)):
        return frame.iloc[:, int(located)]
    return frame.iloc[:, np.arange(frame.shape[1])[located][-1]]


def _signed_text(value: Any) -> str | None:
    """A difference with its explicit sign (the sign is the finding), or None when missing."""
    number = _finite_float(value)
    return None if number is None else _SIGNED_FORMAT(number)


#: :func:`_signed_text`'s format of a finite float.
_SIGNED_FORMAT = f"{{:+.{DEFAULT_PRECISION}f}}".format


def _signed_texts(values: list[Any]) -> list[str | None]:
    """:func:`_signed_text` of each value; Python floats without its conversions.

    The distinct cells of a float column are Python floats, which need none
    of :func:`_finite_float`'s checks: a 100,000-run flip grid's 140,000
    distinct differences and bounds then cost one format call each.
    """
    if not all(type(value) is float for value in values):
        return list(map(_signed_text, values))
    return [_SIGNED_FORMAT(value) if math.isfinite(value) else None for value in values]


def _count_text(value: Any) -> str | None:
    """A count rounded to an integer (half to even), or None when missing."""
    number = _finite_float(value)
    return None if number is None else str(round(number))


def _concat(*parts: str | np.ndarray) -> np.ndarray:
    """Row-wise concatenation of object arrays of strings (one per row) and plain strings.

    One ``str.join`` per row: adding the arrays pairwise would copy each row's
    growing prefix once per part.
    """
    length = next(len(part) for part in parts if not isinstance(part, str))
    columns = [itertools.repeat(part, length) if isinstance(part, str) else part for part in parts]
    joined = np.empty(length, dtype=object)
    joined[:] = list(map("".join, zip(*columns, strict=True)))
    return joined


def _per_combination(build: Callable[..., np.ndarray], *columns: _Cells) -> np.ndarray:
    """``build(*columns)`` for every row, computed on one row per distinct combination of cells.

    Rows whose cells agree in every column get the same text, so a grid that
    repeats a difference over many dataset pairs formats it once.
    """
    joint = columns[0].codes
    for column in columns[1:]:
        joint, _ = pd.factorize(joint.astype(np.int64) * len(column.values) + column.codes)
    _, first, inverse = np.unique(joint, return_index=True, return_inverse=True)
    return build(*(column.take(first) for column in columns))[inverse.ravel()]


def _interval_cells(mean: _Cells, lower: _Cells, upper: _Cells, marker: _Cells) -> np.ndarray:
    r"""Each row's signed difference and interval: ``$+0.040$ {\scriptsize $[+0.027, +0.053]$}``.

    :data:`MISSING_CELL` without a finite mean; the interval only when both bounds
    are finite. ``marker`` (a superscript) follows the mean inside its math.
    """
    point, low, high = (cells.map_all(_signed_texts) for cells in (mean, lower, upper))
    bounded = (low != None) & (high != None)  # noqa: E711 (elementwise on object arrays)
    bounds = np.where(
        bounded,
        _concat(
            r" {\scriptsize $[",
            np.where(bounded, low, ""),
            ", ",
            np.where(bounded, high, ""),
            "]$}",
        ),
        "",
    )
    present = point != None  # noqa: E711
    return np.where(
        present,
        _concat("$", np.where(present, point, ""), marker.map(str), "$", bounds),
        MISSING_CELL,
    )


def _wins_cells(wins: _Cells, n: _Cells) -> np.ndarray:
    """``k/n`` per row, or :data:`MISSING_CELL` when either is missing or ``n`` is 0."""
    won, total = wins.map(_count_text), n.map(_count_text)
    shown = (won != None) & (total != None) & ~n.flags(lambda v: _finite_float(v) == 0)  # noqa: E711
    return np.where(
        shown, _concat(np.where(shown, won, ""), "/", np.where(shown, total, "")), MISSING_CELL
    )


def _is_true(value: Any) -> bool:
    """True only for an explicit True (bool, numpy bool, or its CSV spelling)."""
    return _explicit_bool(value) is True


def _is_unavailable(value: Any) -> bool:
    """Whether a ``correction_applied_*`` cell says the Nadeau-Bengio correction was unavailable."""
    return str(value) == CORRECTION_UNAVAILABLE


#: Superscript of each (differently averaged, uncorrected) pair of flags, indexed 2 * a + b.
_DIFFERENCE_MARKS = [
    _superscript([symbol for symbol, flag in ((_DAGGER_SYMBOL, a), (_DDAGGER_SYMBOL, b)) if flag])
    for a in (False, True)
    for b in (False, True)
]
_FLIP_KEYS = ("model_a", "model_b", "dataset_1", "dataset_2")
_FLIP_OPTIONAL = (
    "comparable_magnitudes",
    "correction_applied_1",
    "correction_applied_2",
    "q_reversal",
    "survives_fdr",
)


def _group_order(
    first: np.ndarray, second: np.ndarray
) -> tuple[np.ndarray, list[tuple[str, str]], np.ndarray]:
    """Rows grouped by (``first``, ``second``), groups sorted as strings, rows in frame order.

    Returns the row order, the sorted groups, and where each group starts in that order.
    """
    codes_1, names_1 = pd.factorize(first)
    codes_2, names_2 = pd.factorize(second)
    pairs, inverse = np.unique(
        codes_1.astype(np.int64) * len(names_2) + codes_2, return_inverse=True
    )
    groups = [(str(names_1[p // len(names_2)]), str(names_2[p % len(names_2)])) for p in pairs]
    ranking = sorted(range(len(groups)), key=groups.__getitem__)
    rank = np.empty(len(groups), dtype=np.int64)
    rank[ranking] = np.arange(len(groups))
    row_rank = rank[inverse.ravel()]
    order = np.argsort(row_rank, kind="stable")
    starts = np.searchsorted(row_rank[order], np.arange(len(groups)))
    return order, [groups[index] for index in ranking], starts


def _flip_body(flips: pd.DataFrame) -> tuple[list[str], set[str]]:
    """The flip table's body lines (group headings and rows) and the superscripts it used.

    Built column by column: each column's cells are hashed once
    (:func:`_distinct_cells`), every distinct cell is formatted once by the scalar
    rule of its cell, and rows are joined with vectorised string concatenation.
    Rows with a missing model or dataset are left out and logged.
    """
    if len(flips) == 0:
        return [], set()
    present = [name for name in (*_FLIP_REQUIRED, *_FLIP_OPTIONAL) if name in flips.columns]
    cells = {name: _distinct_cells(_column(flips, name)) for name in present}
    missing = np.zeros(len(flips), dtype=bool)
    for key in _FLIP_KEYS:
        missing |= cells[key].flags(_is_missing)
    if missing.any():
        logger.warning(
            "%s: left out %d row(s) with a missing %s",
            "flip_survival_table",
            int(missing.sum()),
            " or ".join(_FLIP_KEYS),
        )
    kept = np.flatnonzero(~missing)
    if len(kept) == 0:
        return [], set()
    order, groups, starts = _group_order(
        cells["dataset_1"].take(kept).map(str), cells["dataset_2"].take(kept).map(str)
    )
    rows = kept[order]
    cells = {name: column.take(rows) for name, column in cells.items()}
    none = np.zeros(len(rows), dtype=bool)

    def flags(name: str, rule: Callable[[Any], bool]) -> np.ndarray:
        return cells[name].flags(rule) if name in cells else none

    dagger = flags("comparable_magnitudes", _is_false)
    unavailable = [flags(f"correction_applied_{i}", _is_unavailable) for i in (1, 2)]
    markers = [_Cells(2 * dagger + flag, _DIFFERENCE_MARKS) for flag in unavailable]
    marks = {_DAGGER_SYMBOL} if dagger.any() else set()
    if any(flag.any() for flag in unavailable):
        marks.add(_DDAGGER_SYMBOL)
    q = cells["q_reversal"].map(_p_cell) if "q_reversal" in cells else MISSING_CELL
    survives = np.where(flags("survives_fdr", _is_true), _SURVIVES, "")
    lines = _concat(
        cells["model_a"].map(lambda name: _shielded(f"{display_model(name)} / ")),
        cells["model_b"].map(display_model),
        " & ",
        _per_combination(
            _interval_cells, cells["mean_1"], cells["lower_1"], cells["upper_1"], markers[0]
        ),
        " & ",
        _per_combination(_wins_cells, cells["wins_1"], cells["n_1"]),
        " & ",
        _per_combination(
            _interval_cells, cells["mean_2"], cells["lower_2"], cells["upper_2"], markers[1]
        ),
        " & ",
        _per_combination(_wins_cells, cells["wins_2"], cells["n_2"]),
        " & ",
        q,
        " & ",
        cells["verdict"].map(_display_verdict),
        survives,
        r" \\",
    ).tolist()
    body: list[str] = []
    ends = [*starts[1:], len(rows)]
    for (first, second), start, end in zip(groups, starts, ends, strict=True):
        body += [
            r"\midrule",
            rf"\multicolumn{{{_FLIP_N_COLUMNS}}}{{l}}{{\textit{{{display_dataset(first)} "
            rf"$\rightarrow$ {display_dataset(second)}}}}} \\",
            *lines[start:end],
        ]
    return body, marks


def flip_survival_table(
    flips: pd.DataFrame,
    *,
    label: str = "tab:flip_survival",
    metric: str = "f1",
    exclusions: Sequence[str] | None = None,
    confidence_level: float = CONFIDENCE_LEVEL,
    correction: str = NADEAU_BENGIO,
    split_description: str = SPLIT_DESCRIPTION,
) -> str:
    r"""The headline table: which cross-dataset ranking reversals survive seeds and multiplicity.

    Args:
        flips: Output of ``all_flip_tests``: needs ``model_a``, ``model_b``,
            ``dataset_1``, ``dataset_2``, ``mean_1``, ``lower_1``, ``upper_1``,
            ``mean_2``, ``lower_2``, ``upper_2``, ``wins_1``, ``n_1``,
            ``wins_2``, ``n_2`` and ``verdict``. Optional: ``q_reversal``
            (dash when absent), ``survives_fdr`` (no marks when absent),
            ``fdr_family`` and ``fdr_method`` (testable and BY when absent),
            ``comparable_magnitudes`` (comparable when absent) and
            ``correction_applied_1``/``_2`` (the requested ``correction``
            when absent).
        label: ``\label`` of the table.
        metric: The compared metric, for the caption.
        exclusions: Filters applied upstream (a bare string is one); listed in
            a ``Restricted to:`` note.
        confidence_level: Coverage of the intervals, shown in the header; the
            FDR threshold of the survival mark is ``1 - confidence_level``.
        correction: ``"nadeau-bengio"`` or ``"none"``: what was requested.
            The caption describes what the rows record they got, and a
            difference without the requested correction carries a double dagger.
        split_description: What one seed redraws, as plain text (escaped).

    Returns:
        The table: one block per (``dataset_1``, ``dataset_2``), sorted, rows in
        frame order. Columns: the pair, each difference with its interval and
        its seed wins ``k_i/n``, ``q_rev`` and the verdict, marked with an
        asterisk when it survives the FDR adjustment. A difference of
        differently averaged scores carries a dagger. Empty input gives the
        header and notes only.

    Raises:
        ValueError: Invalid ``confidence_level`` or ``correction``, or a
            missing column.
    """
    _check_confidence_level(confidence_level)
    _check_correction(correction)
    _require_columns(flips, _FLIP_REQUIRED, "flips")
    percent = _percent(confidence_level)
    header = [
        r"$A$ vs.\ $B$",
        rf"$\Delta_1$ [{percent} CI]",
        "$k_1/n$",
        rf"$\Delta_2$ [{percent} CI]",
        "$k_2/n$",
        r"$q_{\mathrm{rev}}$",
        "Verdict",
    ]
    body = [_row(header)]

    rows, marks = _flip_body(flips)
    body += rows

    alpha = format(round(1.0 - confidence_level, _PERCENT_ROUNDING), "g")
    notes = [
        *_VERDICT_NOTES,
        rf"$^{{\ast}}$ Survives the false-discovery-rate adjustment: supported and "
        rf"$q_{{\mathrm{{rev}}}} \le {alpha}$.",
    ]
    if _DAGGER_SYMBOL in marks:
        notes += _DAGGER_NOTES
    if _DDAGGER_SYMBOL in marks:
        notes += _DDAGGER_NOTES
    restricted = _names(exclusions)
    if restricted:
        notes.append(f"Restricted to: {', '.join(escape_latex(item) for item in restricted)}.")
    body += [r"\midrule", *_note_rows(notes, _FLIP_N_COLUMNS)]
    caption = _flip_caption(
        metric,
        confidence_level,
        _applied_corrections(flips, correction),
        _flip_family(flips),
        _flip_fdr_method(flips),
        split_description,
    )
    return _wrap_table(body, "lcccccl", caption, label)


# --- Kendall tau table -------------------------------------------------------------------------


def _permutation_note(taus: pd.DataFrame) -> str:
    """How the W p-values were computed, from the rows' ``n_permutations``."""
    counts = {
        round(c)
        for c in map(_finite_float, taus["n_permutations"] if len(taus) else [])
        if c is not None
    }
    if not counts:
        return ""
    if counts == {0}:
        return " (Friedman's chi-squared approximation)"
    largest = max(counts)
    if len(counts) == 1:
        return f" ({largest:,} permutations)"
    return f" (up to {largest:,} permutations; fewer, or chi-squared, for the largest datasets)"


def tau_table(
    taus: pd.DataFrame,
    *,
    label: str = "tab:kendall_tau",
    confidence_level: float = CONFIDENCE_LEVEL,
) -> str:
    r"""Supplementary table of the agreement between per-seed rankings.

    Args:
        taus: Output of ``tau_summary``: needs ``dataset``, ``n_models``,
            ``n_seeds``, ``n_pairs``, ``tau_mean``, ``tau_min``, ``tau_max``,
            ``min_attainable_p``, ``tau_lower``, ``tau_upper``,
            ``kendall_w``, ``p_kendall_w`` and ``n_permutations``. Rows are
            shown in frame order.
        label: ``\label`` of the table.
        confidence_level: Coverage of the jackknife intervals (computed
            upstream at this level), shown in the header.

    Returns:
        The table: the mean pairwise tau with its leave-one-seed-out
        jackknife interval (bounds clipped to [-1, 1] for display, with a
        note), the range over pairs, Kendall's W with its permutation
        p-value, and the tie-aware floor ``p_min``. Empty input gives the
        header and notes only.

    Raises:
        ValueError: A required column is missing, or an invalid
            ``confidence_level``.
    """
    _check_confidence_level(confidence_level)
    _require_columns(taus, _TAU_COLUMNS, "taus")
    header = [
        "Dataset",
        "$|M|$",
        "Seeds",
        "Pairs",
        rf"$\bar\tau_b$ [{_percent(confidence_level)} CI]",
        "Range",
        "$W$",
        "$p_W$",
        r"$p_{\min}$",
    ]
    body = [_row(header), r"\midrule"]
    any_clipped = False
    for row in _records(taus, ("dataset",), "tau_table"):
        interval, clipped = _tau_interval_cell(row)
        any_clipped = any_clipped or clipped
        low, high = _finite_float(row["tau_min"]), _finite_float(row["tau_max"])
        spread = (
            MISSING_CELL
            if low is None or high is None
            else f"$[{low:.{_TAU_DIGITS}f}, {high:.{_TAU_DIGITS}f}]$"
        )
        body.append(
            _row(
                [
                    display_dataset(row["dataset"]),
                    _int_cell(row["n_models"]),
                    _int_cell(row["n_seeds"]),
                    _int_cell(row["n_pairs"]),
                    interval,
                    spread,
                    _number(row["kendall_w"], _TAU_DIGITS),
                    _p_cell(row["p_kendall_w"]),
                    _p_cell(row["min_attainable_p"]),
                ]
            )
        )
    counted = _permutation_note(taus)
    notes = [
        r"$\bar\tau_b$: mean over every pair of seeds, with a leave-one-seed-out jackknife",
        r"Student-$t$ interval; Range: the smallest and largest pairwise $\tau_b$, which",
        "widens as seeds are added and is not an interval.",
        r"$W$: Kendall's coefficient of concordance over all seeds; $p_W$: its permutation",
        rf"$p$-value{counted} against unrelated rankings.",
        r"$p_{\min}$: the smallest two-sided $p$ one pair's exact permutation test can",
        r"attain given the ties ($2/|M|!$ without ties).",
        *_tau_floor_notes(taus, confidence_level=confidence_level),
    ]
    if any_clipped:
        notes.append(r"Interval bounds beyond $[-1, 1]$ are shown at its limit.")
    body += [r"\midrule", *_note_rows(notes, len(header))]
    caption = (
        r"Agreement of the per-seed rankings within each dataset. $\bar\tau_b$ is the "
        r"mean Kendall $\tau_b$ over every pair of seeds; the pairs share seeds and are "
        r"mutually dependent, so its interval comes from the leave-one-seed-out "
        r"jackknife, not from the spread of the pairs. Kendall's $W$ measures the "
        r"concordance of all seeds at once and is tested by permuting each seed's "
        r"ranking."
    )
    return _wrap_table(body, "l" + "c" * (len(header) - 1), caption, label)


# --- transfer matrix table -----------------------------------------------------------------------


def _source_name(source: Any) -> str:
    key = str(source)
    return BASELINE_DISPLAY_NAMES.get(key) or display_dataset(key)


def transfer_matrix_table(
    matrix: pd.DataFrame,
    *,
    metric: str = PRIMARY_PROBE_METRIC,
    baseline_row: str | None = None,
    label: str = "tab:transfer_matrix",
    precision: int = DEFAULT_PRECISION,
) -> str:
    r"""Cross-dataset linear-probe transfer matrix; one probe score per cell.

    A single probe score has no interval, so no cell is marked as best.

    Args:
        matrix: ``TransferMatrix.to_frame()``: index = encoder sources (rows),
            columns = probe targets.
        metric: The probe metric, for the caption.
        baseline_row: Index entry of the baseline encoder (e.g.
            ``"untrained"``); when present it moves to the top, is followed by
            a rule and gets a note saying it is the floor for every column.
        label: ``\label`` of the table.
        precision: Decimals of each score.

    Returns:
        The table, rows in index order apart from the baseline.

    Raises:
        TypeError: ``precision`` is a bool or not an integer.
        ValueError: ``matrix`` is not a DataFrame, or ``precision`` is negative.
    """
    if not isinstance(matrix, pd.DataFrame):
        raise ValueError(
            "matrix must be a pandas DataFrame such as TransferMatrix.to_frame(), "
            f"got {type(matrix).__name__}"
        )
    digits = _check_non_negative_count("precision", precision)
    targets = list(matrix.columns)
    n_columns = len(targets) + 1
    body = [_row(["Encoder source", *(display_dataset(t) for t in targets)]), r"\midrule"]

    positions = list(range(len(matrix.index)))
    baseline = [
        i
        for i in positions
        if baseline_row is not None and str(matrix.index[i]) == str(baseline_row)
    ]
    values = matrix.to_numpy(dtype=object)
    baseline_set = set(baseline)
    others = [i for i in positions if i not in baseline_set]
    for i in baseline + others:
        cells = [_number(value, digits) for value in values[i]]
        body.append(_row([_source_name(matrix.index[i]), *cells]))
        if baseline and i == baseline[-1]:
            body.append(r"\midrule")

    notes = [
        "Each cell freezes the encoder trained on its row's corpus, embeds the column corpus,",
        "and fits a standardised logistic probe on that corpus's training split alone.",
    ]
    if baseline:
        notes.append(
            "The first row probes an untrained (randomly initialised) encoder and is the floor"
            " for every column."
        )
    body += [r"\midrule", *_note_rows(notes, n_columns)]
    return _wrap_table(body, "l" + "c" * len(targets), _transfer_caption(metric), label)


def _transfer_caption(metric: str) -> str:
    return (
        rf"Cross-dataset transfer: {display_metric(metric)} of a linear probe on a held-out "
        r"split. Rows are the corpus each frozen encoder was trained on, columns the "
        r"corpus it was probed on; the diagonal is the in-domain probe. Every corpus is "
        r"run single-lead at a common sampling rate so that each encoder sees identical "
        r"input, and the probe head is refitted per column because the label spaces differ."
    )


# --- files and compilation -----------------------------------------------------------------------


def _check_stem(stem: Any) -> None:
    if not isinstance(stem, str):
        raise ValueError(f"table names must be strings, got {stem!r}")
    if stem in _RESERVED_STEMS or any(c in stem for c in _INVALID_STEM_CHARACTERS):
        raise ValueError(
            f"invalid table name {stem!r}: use a plain file stem without '/', '\\' or NUL, "
            "other than '', '.' and '..'"
        )


def write_tables(tables: dict[str, str], output_dir: Any) -> list[str]:
    """Write each table to ``<output_dir>/<stem>.tex``, atomically, as UTF-8.

    Args:
        tables: Table text by file stem; the text is written unchanged.
        output_dir: Folder (str or path-like), created with its parents.

    Returns:
        The written paths as strings, in sorted stem order.

    Raises:
        ValueError: A stem is empty, ``.`` or ``..``, holds ``/``, ``\\`` or NUL,
            or a table is not a string; checked before anything is written.
        OSError: The folder or a file cannot be written.
    """
    for stem, text in tables.items():
        _check_stem(stem)
        if not isinstance(text, str):
            raise ValueError(f"table {stem!r} must be a string, got {type(text).__name__}")
    directory = Path(os.fspath(output_dir))
    directory.mkdir(parents=True, exist_ok=True)
    return [
        str(atomic_write_text(directory / f"{stem}{_TABLE_SUFFIX}", tables[stem]))
        for stem in sorted(tables)
    ]


def file_stems(names: Iterable[str]) -> dict[str, str]:
    """A file-name stem per name: characters outside ``[A-Za-z0-9_-]`` become ``_``.

    Names are taken in sorted order; two names that map to the same stem
    (``a b`` and ``a_b``) get ``_2``, ``_3`` ... appended, so no table
    silently overwrites another. A stem longer than
    :data:`MAX_STEM_CHARACTERS` becomes its first 80 characters, ``_`` and a
    12-digit hash of the name, so a 300-character dataset name still gives a
    valid file name; :func:`table_index_text` records which name each file
    holds.
    """
    stems: dict[str, str] = {}
    taken: set[str] = set()
    for name in sorted({str(n) for n in names}):
        stem = bounded_stem(name)
        candidate, counter = stem, 2
        while candidate in taken:
            candidate, counter = f"{stem}_{counter}", counter + 1
        taken.add(candidate)
        stems[name] = candidate
    return stems


def results_table_stems(datasets: Iterable[str]) -> dict[str, str]:
    """Table stem of each dataset's results table: ``results_<file stem of the dataset>``."""
    return {name: RESULTS_TABLE_PREFIX + stem for name, stem in file_stems(datasets).items()}


def table_index_text(files: Mapping[str, str]) -> str:
    """JSON text recording which name each table file holds: ``{file name: name}``.

    File names made by :func:`file_stems` can be cut short and hashed, so
    whoever writes them also writes this index beside them (sorted, UTF-8,
    one trailing newline: the same mapping always gives the same bytes).
    """
    ordered = {str(key): str(files[key]) for key in sorted(files)}
    return json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"


def latex_engine(table: str | None = None) -> str | None:
    """Path of the engine that can compile ``table``, or None when none is installed.

    Without a table, or for a table pdflatex can typeset: ``pdflatex``. For a
    table that needs a Unicode engine (:func:`needs_unicode_engine`): the
    first of :data:`UNICODE_ENGINES` on ``PATH``.
    """
    if table is not None and needs_unicode_engine(table):
        for engine in UNICODE_ENGINES:
            if (path := shutil.which(engine)) is not None:
                return path
        return None
    return shutil.which("pdflatex")


def standalone_document(table: str) -> str:
    """``table`` inside the smallest document that loads what the emitters use.

    The document :func:`compile_table` compiles, and the one whose verdict a
    compile cache records (:mod:`deepecgkit.analysis.compile_cache`).

    No font encoding is loaded: T1 without the cm-super fonts makes pdflatex
    generate bitmap fonts on first use, which is slow and writes a font cache.
    """
    packages = [r"\usepackage{booktabs}"]
    if is_long_table(table):
        packages.append(r"\usepackage{longtable}")
    return "\n".join(
        [
            r"\documentclass{article}",
            *packages,
            r"\begin{document}",
            table,
            r"\end{document}",
            "",
        ]
    )


def _failure_summary(log: str) -> str:
    """The LaTeX error lines (``!`` and their context), else the log's last lines."""
    lines = log.splitlines()
    errors: list[str] = []
    for index, line in enumerate(lines):
        if line.startswith("!"):
            errors += lines[index : index + _ERROR_CONTEXT_LINES]
    chosen = errors or lines[-_LOG_TAIL_LINES:]
    return "\n".join(chosen[:_LOG_TAIL_LINES])


def _engine_executable(table: str, engine: str | None) -> str | None:
    """Path of ``engine`` (default: the engine ``table`` needs), or None when it is not on PATH."""
    command = engine if engine is not None else latex_engine(table)
    return shutil.which(command) if command is not None else None


def _missing_engine(table: str, engine: str | None) -> str:
    """The sentence saying which engine is missing and how to get one."""
    wanted = " or ".join(UNICODE_ENGINES) if needs_unicode_engine(table) else "pdflatex"
    return (
        f"no LaTeX engine found ({engine or wanted} is not on PATH); "
        f"install TeX Live's {wanted} or pass engine= the path of one"
    )


def _run_program(
    command: Sequence[str], workdir: Path, *, timeout: float
) -> subprocess.CompletedProcess[bytes] | str:
    """Run ``command`` in ``workdir``, without input and with its output captured.

    Returns:
        The finished process (whatever its exit status), or the reason it did
        not finish: ``"<program> did not finish within <timeout> s"`` or
        ``"<program> could not run: <error>"``.
    """
    name = Path(command[0]).name
    try:
        return subprocess.run(
            list(command),
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{name} did not finish within {timeout:g} s"
    except OSError as exc:
        return f"{name} could not run: {exc}"


class EngineRun(NamedTuple):
    """What one engine run of :func:`_run_engine` found.

    ``settled`` is True when the engine ran to its end (whatever its exit
    status), so ``ok`` is the document's verdict; False when it timed out or
    could not start, a circumstance of this machine that says nothing about
    the document (never cached).
    """

    ok: bool
    reason: str
    settled: bool
    log: str


def _run_engine(executable: str, document: str, workdir: Path, *, timeout: float) -> EngineRun:
    """Typeset ``document`` as ``<workdir>/table.tex``; the PDF, if any, is ``table.pdf`` there.

    The engine runs with ``-interaction=nonstopmode -halt-on-error
    -no-shell-escape``, so a broken document fails fast and a hostile name
    cannot run commands. Shared by :func:`compile_table` and
    :mod:`deepecgkit.analysis.table_images`.

    pdfTeX's ``-draftmode`` (no PDF written) was measured and left out: it
    saves about 5% of a compile of the rank table of a 20,000-run sweep, and
    it skips reading the font files a paper's build embeds.

    Returns:
        ``ok`` when the engine exited with 0 and left a PDF; else the reason:
        the LaTeX error lines or the log's tail (or the timeout).
    """
    source = workdir / f"{_COMPILE_JOBNAME}.tex"
    source.write_text(document, encoding="utf-8")
    switches = ["-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape"]
    completed = _run_program([executable, *switches, source.name], workdir, timeout=timeout)
    if isinstance(completed, str):
        return EngineRun(False, completed, settled=False, log="")
    log_file = workdir / f"{_COMPILE_JOBNAME}.log"
    if log_file.exists():
        log = log_file.read_text(encoding="utf-8", errors="replace")
    else:
        log = completed.stdout.decode("utf-8", errors="replace")
    if completed.returncode == 0 and (workdir / COMPILED_PDF).exists():
        return EngineRun(True, "", settled=True, log=log)
    reason = _failure_summary(log)
    message = f"{Path(executable).name} exited with {completed.returncode}:\n{reason}"
    return EngineRun(False, message, settled=True, log=log)


def compile_table(
    table: str,
    *,
    engine: str | None = None,
    timeout: float = 60.0,
) -> tuple[bool, str]:
    """Compile one emitted table inside a minimal document, in a temporary folder.

    The engine runs with ``-interaction=nonstopmode -halt-on-error
    -no-shell-escape``, so a broken table fails fast and a hostile name cannot
    run commands.

    Args:
        table: One table as returned by an emitter.
        engine: Command or path of the engine (``pdflatex``, ``lualatex`` ...);
            default ``latex_engine(table)``, the engine the table needs.
        timeout: Seconds before the run is abandoned (reported as a failure).

    Returns:
        ``(True, "")`` when a PDF was produced, else ``(False, reason)`` with
        the LaTeX error lines or the log's tail.

    Raises:
        RuntimeError: No engine is installed, or ``engine`` cannot be found.
    """
    ok, reason, _ = compile_table_run(table, engine=engine, timeout=timeout)
    return ok, reason


def compile_table_run(
    table: str,
    *,
    engine: str | None = None,
    timeout: float = 60.0,
) -> tuple[bool, str, bool]:
    """:func:`compile_table`'s verdict and whether it is settled (see :class:`EngineRun`).

    A content-keyed cache (:mod:`deepecgkit.analysis.compile_cache`) keeps
    only settled verdicts: a timeout on a busy machine is no property of the text.
    """
    executable = _engine_executable(table, engine)
    if executable is None:
        raise RuntimeError(_missing_engine(table, engine))
    with tempfile.TemporaryDirectory(prefix="deepecg-latex-") as folder:
        run = _run_engine(executable, standalone_document(table), Path(folder), timeout=timeout)
    return run.ok, run.reason, run.settled
