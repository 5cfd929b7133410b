"""Tests for the booktabs table emitters in ``deepecgkit.analysis.latex``.

Input frames are built by hand with the exact column lists of
``aggregate_runs``, ``rank_distribution``, ``tau_summary`` and
``all_flip_tests`` (taken from :mod:`deepecgkit.analysis.schemas`; the tests of
those functions spell the lists out), filled with the worked example of the specification
(analysis.md section 8), so each expected string can be checked by hand.
Compilation tests run the real ``pdflatex``.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from deepecgkit.analysis import constants, latex as L, ranking, schemas

NAN = float("nan")
FORBIDDEN_CONTROLS = "\t\b\f\r\a\v"
SPECIALS = "\\{}$&#^_%~"
ESCAPED_SPECIALS = r"\textbackslash{}\{\}\$\&\#\textasciicircum{}\_\%\textasciitilde{}"
HOSTILE_NAMES = (
    "a_b&c%",
    "back\\slash",
    "x^y~z#{}$",
    "[x]*",
    "*star",
    "tab\there\nnew\r\x00\x7f",
    "café ü",
    "\\end{table}",
    "%",
    "\t[tabbed]",
)

# --- input frames with the exact output columns of the analysis functions ----------------

#: The frames' columns; tests/analysis/test_aggregation.py (aggregate) and
#: tests/analysis/test_ranking.py (rank distribution, tau, flips) spell the contracts out.
AGGREGATE_COLUMNS = list(schemas.AGGREGATE_COLUMNS)
FLIP_COLUMNS = list(ranking.FLIP_COLUMNS)
TAU_COLUMNS = list(ranking.TAU_COLUMNS)


def aggregate_row(dataset, model, metric, mean, lower, upper, n=5, averaging="macro"):
    return {
        "dataset": dataset,
        "model": model,
        "metric": metric,
        "averaging": averaging,
        "n_runs": n,
        "n": n,
        "mean": mean,
        "std": NAN,
        "sem": NAN,
        "lower_ci": lower,
        "upper_ci": upper,
        "seeds": ",".join(str(s) for s in range(n)),
    }


def example_aggregate() -> pd.DataFrame:
    """The f1 rows of the worked example (section 8), plus two precision rows."""
    rows = [
        aggregate_row("afib", "cnn", "f1", 0.81, 0.7903675684, 0.8296324316),
        aggregate_row("afib", "cnn", "precision", 0.80, 0.78, 0.82),
        aggregate_row("afib", "lstm", "f1", 0.72, 0.7003675684, 0.7396324316),
        aggregate_row("afib", "resnet", "f1", 0.77, 0.7575833600, 0.7824166400),
        aggregate_row("ptbxl", "cnn", "f1", 0.61, 0.5903675684, 0.6296324316),
        aggregate_row("ptbxl", "lstm", "f1", 0.64, 0.6203675684, 0.6596324316),
        aggregate_row("ptbxl", "resnet", "f1", 0.664, 0.6498428522, 0.6781571478),
    ]
    return pd.DataFrame(rows, columns=AGGREGATE_COLUMNS)


def distribution_row(dataset, model, n_models, ranks, mode, mode_fraction, top1, mean, std):
    row = {"dataset": dataset, "model": model, "n_seeds": sum(ranks), "n_models": n_models}
    for k in range(1, 4):
        row[f"rank_{k}"] = ranks[k - 1] if k <= n_models else NAN
    row |= {
        "mode_rank": mode,
        "mode_fraction": mode_fraction,
        "top1_fraction": top1,
        "mean_value": mean,
        "std_value": std,
    }
    return row


def example_distribution() -> pd.DataFrame:
    """rank_distribution of the worked example, plus a two-model dataset."""
    rows = [
        distribution_row("afib", "cnn", 3, [5, 0, 0], 1, 1.0, 1.0, 0.81, 0.0158113883),
        distribution_row("afib", "lstm", 3, [0, 0, 5], 3, 1.0, 0.0, 0.72, 0.0158113883),
        distribution_row("afib", "resnet", 3, [0, 5, 0], 2, 1.0, 0.0, 0.77, 0.01),
        distribution_row("ptbxl", "cnn", 3, [0, 0, 5], 3, 1.0, 0.0, 0.61, 0.0158113883),
        distribution_row("ptbxl", "lstm", 3, [1, 4, 0], 2, 0.8, 0.2, 0.64, 0.0158113883),
        distribution_row("ptbxl", "resnet", 3, [4, 1, 0], 1, 0.8, 0.8, 0.664, 0.0114017543),
        distribution_row("zeta", "solo", 2, [1, 0], 1, 1.0, 1.0, 0.5, NAN),
        distribution_row("zeta", "duo", 2, [0, 1], 2, 1.0, 0.0, 0.4, NAN),
    ]
    columns = [
        *schemas.DISTRIBUTION_HEAD,
        "rank_1",
        "rank_2",
        "rank_3",
        *schemas.DISTRIBUTION_TAIL,
    ]
    return pd.DataFrame(rows, columns=columns)


def example_taus() -> pd.DataFrame:
    """tau_summary of the worked example (afib: identical rankings), plus a two-model dataset."""
    rows = [
        ["afib", 3, 5, 10, 1.0, 1.0, 1.0, 1 / 3, 0.0, 1.0, 1.0, 1.0, 0.0001, 9999],
        [
            "ptbxl",
            3,
            5,
            10,
            0.7333333333,
            0.3333333333,
            1.0,
            1 / 3,
            0.1333333333,
            0.3631,
            1.1035,
            0.64,
            0.0365,
            9999,
        ],
        ["zeta", 2, 1, 0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 9999],
    ]
    return pd.DataFrame(rows, columns=TAU_COLUMNS)


def flip_row(model_a, model_b, mean_1, mean_2, bounds_1, bounds_2, verdict, p_flip, p_adj, **kw):
    row = {
        "model_a": model_a,
        "model_b": model_b,
        "dataset_1": "afib",
        "dataset_2": "ptbxl",
        "metric": "f1",
        "mean_1": mean_1,
        "mean_2": mean_2,
        "lower_1": bounds_1[0],
        "upper_1": bounds_1[1],
        "lower_2": bounds_2[0],
        "upper_2": bounds_2[1],
        "wins_1": 5,
        "wins_2": 0,
        "n_1": 5,
        "n_2": 5,
        "n_seeds": 5,
        "averaging_1": "macro",
        "averaging_2": "macro",
        "comparable_magnitudes": True,
        "verdict": verdict,
        "p_flip": p_flip,
        "reason": "",
        "p_adjusted": p_adj,
        "fdr_family": "testable",
        "fdr_family_size": 3,
        "p_reversal": NAN,
        "q_reversal": NAN,
        "fdr_method": "by",
        "survives_fdr": False,
        "correction_applied_1": "nadeau-bengio",
        "correction_applied_2": "nadeau-bengio",
        "correction_note_1": "",
        "correction_note_2": "",
    }
    row.update(kw)
    return row


def example_flips() -> pd.DataFrame:
    """all_flip_tests of the worked example (family testable, size 3)."""
    rows = [
        flip_row(
            "cnn",
            "resnet",
            0.04,
            -0.054,
            (0.0268301645, 0.0531698355),
            (-0.0752357217, -0.0327642783),
            "supported",
            0.0021228831,
            0.0116758568,
            p_reversal=0.0010614416,
            q_reversal=0.0058379285,
            survives_fdr=True,
        ),
        flip_row(
            "cnn",
            "lstm",
            0.09,
            -0.03,
            (0.07, 0.11),
            (-0.0594486474, -0.0005513526),
            "supported",
            0.0474206556,
            0.1304068029,
            p_reversal=0.0237103278,
            q_reversal=0.0652034014,
        ),
        flip_row(
            "lstm",
            "resnet",
            -0.05,
            -0.024,
            (-0.0686249600, -0.0313750400),
            (-0.0626215390, 0.0146215390),
            "not-reproduced",
            0.1595528527,
            0.2925135633,
            wins_1=0,
            p_reversal=0.9202235737,
            q_reversal=1.0,
        ),
    ]
    return pd.DataFrame(rows, columns=FLIP_COLUMNS)


def example_matrix() -> pd.DataFrame:
    return pd.DataFrame(
        [[0.91, 0.62], [0.55, 0.51], [0.70, NAN]],
        index=["ptbxl", "untrained", "af-classification"],
        columns=["ptbxl", "af-classification"],
    )


def body_lines(table: str) -> list[str]:
    """Lines between ``\\toprule`` and ``\\bottomrule``."""
    lines = table.splitlines()
    return lines[lines.index(r"\toprule") + 1 : lines.index(r"\bottomrule")]


def note_texts(table: str) -> list[str]:
    """The notes: full-width rows after the last rule of the body."""
    lines = body_lines(table)
    last_rule = len(lines) - 1 - lines[::-1].index(r"\midrule")
    notes = [re.fullmatch(r"\\multicolumn\{\d+\}\{l\}\{(.*)\} \\\\", line) for line in lines]
    assert all(match is not None for match in notes[last_rule + 1 :])
    return [match.group(1) for match in notes[last_rule + 1 :]]


def caption(table: str) -> str:
    match = re.search(r"^\\caption\{(.*)\}$", table, flags=re.M)
    assert match is not None
    return match.group(1)


def assert_well_formed(table: str) -> None:
    """Structural invariants every emitted table must satisfy."""
    assert not any(c in table for c in FORBIDDEN_CONTROLS)
    assert table.startswith("\\begin{table}[t]\n\\centering\n")
    assert table.endswith("\\bottomrule\n\\end{tabular}\n\\end{table}\n")
    assert table.count(r"\toprule") == 1
    assert r"\textbf" not in table


# --- display constants -------------------------------------------------------------------


def test_public_names_are_exported():
    for name in (
        "escape_latex",
        "display_model",
        "display_dataset",
        "display_metric",
        "format_cell",
        "results_table",
        "rank_distribution_table",
        "flip_survival_table",
        "tau_table",
        "transfer_matrix_table",
        "write_tables",
        "MISSING_CELL",
        "DEFAULT_PRECISION",
        "SPLIT_DESCRIPTION",
        "MODEL_DISPLAY_NAMES",
        "DATASET_DISPLAY_NAMES",
        "METRIC_DISPLAY_NAMES",
        "VERDICT_DISPLAY_NAMES",
        "BASELINE_DISPLAY_NAMES",
        "latex_engine",
        "compile_table",
    ):
        assert name in L.__all__
        assert hasattr(L, name)


def test_display_constants():
    assert L.MISSING_CELL == "--"
    assert L.DEFAULT_PRECISION == 3
    assert L.SPLIT_DESCRIPTION == "train/validation/test partition"
    assert L.MODEL_DISPLAY_NAMES["convnext-v2"] == "ConvNeXt-V2"
    assert L.DATASET_DISPLAY_NAMES["af-classification"] == "PhysioNet 2017"
    assert L.BASELINE_DISPLAY_NAMES == {
        "untrained": "Untrained encoder",
        "random": "Random encoder",
    }
    assert set(L.VERDICT_DISPLAY_NAMES) == set(constants.VERDICTS)
    assert L.VERDICT_DISPLAY_NAMES["not-reproduced"] == "Not reproduced"


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("ece_temp", "ECE (TS)"),
        ("adaptive_ece_temp", "Adaptive ECE (TS)"),
        ("mce_temp", "MCE (TS)"),
        ("brier_temp", "Brier (TS)"),
        ("nll_temp", "NLL (TS)"),
        ("temperature", "Temperature"),
        ("auroc_macro", "Macro AUROC"),
        ("balanced_accuracy", "Balanced acc."),
    ],
)
def test_metric_display_names(name, shown):
    assert L.display_metric(name) == shown


# --- escaping ----------------------------------------------------------------------------


def test_escape_spec_example():
    assert L.escape_latex("C:\\a_{1} 50%") == r"C:\textbackslash{}a\_\{1\} 50\%"


def test_escape_all_specials_in_one_pass():
    # A second pass would escape the braces of \textbackslash{} again.
    assert L.escape_latex(SPECIALS) == ESCAPED_SPECIALS


def test_escape_every_control_character_becomes_one_space():
    controls = "".join(chr(c) for c in [*range(32), 127])
    assert L.escape_latex(f"a{controls}b") == "a" + " " * len(controls) + "b"
    assert L.escape_latex("line\r\nnext\tcell") == "line  next cell"


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("a_b&c%", r"a\_b\&c\%"),
        ("back\\slash", r"back\textbackslash{}slash"),
        ("x^y~z#{}$", r"x\textasciicircum{}y\textasciitilde{}z\#\{\}\$"),
        ("", ""),
        ("plain-name 1.0", "plain-name 1.0"),
        ("café", r"caf\'{e}"),
        ("α", r"\ensuremath{\alpha}"),
        ("中文", "中文"),
        ("a\u200fb", "ab"),
    ],
)
def test_escape_names(raw, escaped):
    assert L.escape_latex(raw) == escaped


def test_escape_applies_str():
    assert L.escape_latex(3) == "3"
    assert L.escape_latex(None) == "None"


_UNESCAPE = {
    r"\textbackslash{}": "\\",
    r"\textasciicircum{}": "^",
    r"\textasciitilde{}": "~",
    **{"\\" + c: c for c in "{}$&#_%"},
}
_TOKEN = re.compile(
    "|".join(re.escape(k) for k in sorted(_UNESCAPE, key=len, reverse=True)) + "|.",
    flags=re.S,
)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F)))
def test_escape_round_trips_and_leaves_no_bare_special(text):
    escaped = L.escape_latex(text)
    tokens = _TOKEN.findall(escaped)
    assert "".join(tokens) == escaped
    assert not set(tokens) & set(SPECIALS)
    assert not any(ord(c) < 32 or ord(c) == 127 for c in escaped)
    expected = "".join(" " if (ord(c) < 32 or ord(c) == 127) else c for c in text)
    assert "".join(_UNESCAPE.get(token, token) for token in tokens) == expected


def test_display_names_map_or_escape():
    assert L.display_model("se-resnet") == "SE-ResNet"
    assert L.display_model("my_net") == r"my\_net"
    assert L.display_dataset("ptbxl") == "PTB-XL"
    assert L.display_dataset("a&b") == r"a\&b"
    assert L.display_metric("f1") == "F1"
    assert L.display_metric("my_metric%") == r"my\_metric\%"
    assert L.display_model(np.str_("resnet")) == "ResNet"


# --- cells -------------------------------------------------------------------------------


def test_format_cell_spec_example():
    assert L.format_cell(0.81, 0.790368, 0.829632, n=5) == r"$0.810$ {\scriptsize [0.790, 0.830]}"


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((0.81, 0.79, 0.83), {"n": 1}, "$0.810$"),
        ((0.81, NAN, 0.83), {"n": 5}, "$0.810$"),
        ((0.81, 0.79, None), {"n": 5}, "$0.810$"),
        ((0.81, 0.79, math.inf), {"n": 5}, "$0.810$"),
        ((0.81, 0.79, 0.83), {}, r"$0.810$ {\scriptsize [0.790, 0.830]}"),
        ((None, 0.79, 0.83), {"n": 5}, "--"),
        ((NAN, 0.79, 0.83), {"n": 5}, "--"),
        ((-math.inf, 0.79, 0.83), {"n": 5}, "--"),
        ((0.8125, 0.75, 0.875), {"n": 5, "precision": 1}, r"$0.8$ {\scriptsize [0.8, 0.9]}"),
        ((0.81, 0.79, 0.83), {"n": 5, "precision": np.int64(0)}, r"$1$ {\scriptsize [1, 1]}"),
        (
            (np.float64(0.5), 0.25, 0.75),
            {"n": np.int64(3)},
            r"$0.500$ {\scriptsize [0.250, 0.750]}",
        ),
    ],
)
def test_format_cell_cases(args, kwargs, expected):
    assert L.format_cell(*args, **kwargs) == expected


def test_format_cell_rejects_bad_precision():
    with pytest.raises(ValueError, match="precision"):
        L.format_cell(0.5, 0.4, 0.6, n=5, precision=-1)
    with pytest.raises(TypeError, match="precision"):
        L.format_cell(0.5, 0.4, 0.6, n=5, precision=True)
    with pytest.raises(TypeError, match="precision"):
        L.format_cell(0.5, 0.4, 0.6, n=5, precision=2.5)


@pytest.mark.parametrize(
    ("level", "text"), [(0.95, r"95\%"), (0.9, r"90\%"), (0.975, r"97.5\%"), (0.999, r"99.9\%")]
)
def test_percent(level, text):
    assert L._percent(level) == text


def test_number_and_interval_cell():
    assert L._number(None, 3) == "--"
    assert L._number(NAN, 3) == "--"
    assert L._number("text", 3) == "--"
    assert L._number(-0.5, 3) == "$-0.500$"
    assert L._number(np.float32(0.25), 2) == "$0.25$"
    assert interval_cell(0.04, 0.027, 0.053) == r"$+0.040$ {\scriptsize $[+0.027, +0.053]$}"
    assert interval_cell(-0.05, -0.07, NAN, r"^{\dagger}") == r"$-0.050^{\dagger}$"
    assert interval_cell(NAN, 0.0, 1.0) == "--"
    assert interval_cell(-0.0, "0.1", 0.0) == "$-0.000$"
    assert interval_cell(True, -0.0004, 0.0) == r"$+1.000$ {\scriptsize $[-0.000, +0.000]$}"


def interval_cell(mean, lower, upper, marker=""):
    """The flip table's interval cell of one row (its column-wise builder on one-row columns)."""

    def cells(value):
        return L._distinct_cells(pd.Series([value], dtype=object))

    marks = L._Cells(np.zeros(1, dtype=np.intp), [marker])
    return L._interval_cells(cells(mean), cells(lower), cells(upper), marks)[0]


def test_note_rows_and_wrap_table():
    assert L._note_rows(["a $x$", "b"], 4) == [
        r"\multicolumn{4}{l}{a $x$} \\",
        r"\multicolumn{4}{l}{b} \\",
    ]
    wrapped = L._wrap_table(["x \\\\"], "lc", "Cap", "tab:x")
    assert wrapped.split("\n") == [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        r"\caption{Cap}",
        r"\label{tab:x}",
        r"\begin{tabular}{lc}",
        r"\toprule",
        "x \\\\",
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{table}",
        "",
    ]
    assert r"\small" not in L._wrap_table([], "l", "C", "t", size=None)


def test_tau_floor_notes():
    assert L._tau_floor_notes(None) == []
    assert L._tau_floor_notes(pd.DataFrame()) == []
    taus = pd.DataFrame(
        [
            ["b", 6, 5, 10, 0.5, 0.1, 0.9, 2 / 720],
            ["a", 3, 5, 10, 1.0, 1.0, 1.0, 1 / 3],
            ["c", 3, 5, 10, 1.0, 1.0, 1.0, 1 / 3],
            ["d", 2, 5, 0, NAN, NAN, NAN, NAN],
            ["e", 6, 5, 10, 0.5, 0.1, 0.9, 0.02],
        ],
        columns=TAU_COLUMNS[:8],
    )
    # Ties raise a dataset's floor (e: 0.02); the note gives the smallest per model count.
    assert L._tau_floor_notes(taus) == [
        r"With $|M|=3$ models the smallest attainable two-sided $p$ is 0.333, "
        r"so no coefficient can reach $p<0.05$.",
        r"With $|M|=6$ models the smallest attainable two-sided $p$ is 0.003.",
    ]


def test_leading_bracket_or_star_is_shielded():
    assert L._row(["[x]", "1"]) == r"{}[x] & 1 \\"
    assert L._row(["*x", "1"]) == r"{}*x & 1 \\"
    assert L._row(["x[", "1"]) == r"x[ & 1 \\"
    assert L._row([" [x]", "1"]) == r"{} [x] & 1 \\"


# --- results_table -----------------------------------------------------------------------


def test_results_table_example_rows_and_layout():
    table = L.results_table(example_aggregate(), "afib")
    assert_well_formed(table)
    assert r"\begin{tabular}{lcccc}" in table
    assert r"\label{tab:seed_afib}" in table
    assert body_lines(table)[:5] == [
        r"Model & F1 & Precision & Recall & $n$ \\",
        r"\midrule",
        r"cnn & $0.810$ {\scriptsize [0.790, 0.830]} & $0.800$ {\scriptsize [0.780, 0.820]}"
        r" & -- & 5 \\",
        r"ResNet & $0.770$ {\scriptsize [0.758, 0.782]} & -- & -- & 5 \\",
        r"lstm & $0.720$ {\scriptsize [0.700, 0.740]} & -- & -- & 5 \\",
    ]
    assert body_lines(table)[5] == r"\midrule"


def test_results_table_caption_and_notes():
    frame = example_aggregate()
    frame.loc[frame["model"] == "lstm", "averaging"] = "binary"
    frame.loc[frame["dataset"] == "ptbxl", "averaging"] = "weighted"
    table = L.results_table(frame, "afib", confidence_level=0.9)
    text = caption(table)
    for phrase in (
        "afib",
        "means over $n$ random seeds",
        "redraws the train/validation/test partition",
        "reinitialises the weights",
        r"two-sided 90\% Student-$t$ intervals over that combined variation",
        "within-corpus statement, not a generalisation interval",
    ):
        assert phrase in text
    notes = " ".join(note_texts(table))
    assert "how much each model moves when the split and the initialisation" in notes
    assert "not a pairwise test" in notes
    # ptbxl's averaging is not rendered, so it is not listed.
    assert note_texts(table)[-1] == "Averaging: binary, macro."
    assert "PhysioNet 2017" in caption(L.results_table(example_aggregate(), "af-classification"))


def test_results_table_clips_displayed_bounds_to_the_metric_range():
    frame = pd.DataFrame(
        [
            aggregate_row("d", "near_perfect", "f1", 0.993, 0.982, 1.004),
            aggregate_row("d", "near_perfect", "ece", 0.004, -0.002, 0.010),
            aggregate_row("d", "fine", "f1", 0.80, 0.78, 0.82),
            aggregate_row("d", "fine", "mcc", 0.5, -1.2, 1.1, n=1),
        ],
        columns=AGGREGATE_COLUMNS,
    )
    original = frame.copy()
    table = L.results_table(frame, "d", metrics=["f1", "ece", "mcc"])
    assert r"$0.993$ {\scriptsize [0.982, 1.000]}" in table
    assert r"$0.004$ {\scriptsize [0.000, 0.010]}" in table
    assert r"$0.800$ {\scriptsize [0.780, 0.820]}" in table
    notes = note_texts(table)
    # mcc's single run shows no interval, so it is not listed.
    assert notes[2:4] == [
        r"Interval bounds beyond a metric's range are shown at its limit (F1 $[0, 1]$, "
        r"ECE $[0, 1]$);",
        "the Student-$t$ interval itself extends past it.",
    ]
    pd.testing.assert_frame_equal(frame, original)
    assert "shown at its limit" not in L.results_table(example_aggregate(), "afib")


def test_results_table_lower_is_better_nan_last_ties_by_name_and_missing_first_metric():
    frame = pd.DataFrame(
        [
            aggregate_row("d", "zed", "ece", 0.05, 0.04, 0.06),
            aggregate_row("d", "alpha", "ece", 0.05, 0.04, 0.06),
            aggregate_row("d", "worst", "ece", 0.20, 0.1, 0.3),
            aggregate_row("d", "nan_mean", "ece", NAN, NAN, NAN),
            aggregate_row("d", "best", "ece", 0.01, 0.0, 0.02),
            aggregate_row("d", "no_ece_b", "brier", 0.1, 0.05, 0.15, n=4),
            aggregate_row("d", "no_ece_a", "brier", 0.2, 0.1, 0.3, n=3),
            aggregate_row("d", "other_metric_only", "f1", 0.9, 0.8, 1.0),
        ],
        columns=AGGREGATE_COLUMNS,
    )
    table = L.results_table(frame, "d", metrics=("ece", "brier"))
    models = [line.split(" & ")[0] for line in body_lines(table)[2:] if " & " in line]
    assert models == [
        "best",
        "alpha",
        "zed",
        "worst",
        r"nan\_mean",
        r"no\_ece\_a",
        r"no\_ece\_b",
    ]
    assert r"nan\_mean & -- & -- & 5 \\" in table
    assert r"no\_ece\_a & -- & $0.200$ {\scriptsize [0.100, 0.300]} & 3 \\" in table
    assert "ECE & Brier & $n$" in table
    descending = L.results_table(frame.assign(metric="f1"), "d", metrics=["f1"])
    first = [line.split(" & ")[0] for line in body_lines(descending)[2:4]]
    assert first == [r"other\_metric\_only", r"no\_ece\_a"]  # 0.2 tie: by name


def test_results_table_single_run_and_bare_metric_string():
    frame = pd.DataFrame(
        [aggregate_row("d", "m", "f1", 0.7, NAN, NAN, n=1)], columns=AGGREGATE_COLUMNS
    )
    table = L.results_table(frame, "d", metrics="f1", precision=2)
    assert r"m & $0.70$ & 1 \\" in table
    assert r"\begin{tabular}{lcc}" in table


def test_results_table_labels():
    frame = example_aggregate()
    assert r"\label{tab:seed_af_classification}" in L.results_table(frame, "af-classification")
    assert r"\label{tab:seed_a_b_c_d__}" in L.results_table(frame, "a b/c.dé%")
    assert r"\label{my:label-1}" in L.results_table(frame, "afib", label="my:label-1")


def test_results_table_empty_dataset_gives_header_and_notes():
    for frame in (example_aggregate(), pd.DataFrame()):
        table = L.results_table(frame, "nowhere")
        assert_well_formed(table)
        lines = body_lines(table)
        assert lines[0] == r"Model & F1 & Precision & Recall & $n$ \\"
        assert all(line.startswith(("\\midrule", "\\multicolumn")) for line in lines[1:])
        assert len(note_texts(table)) == 2


def test_results_table_ignores_rows_without_a_model_and_logs(caplog):
    frame = pd.concat(
        [
            example_aggregate(),
            pd.DataFrame(
                [aggregate_row("afib", None, "f1", 0.99, 0.98, 1.0)], columns=AGGREGATE_COLUMNS
            ),
        ],
        ignore_index=True,
    )
    with caplog.at_level(logging.WARNING, logger="deepecgkit.analysis.latex"):
        table = L.results_table(frame, "afib")
    assert "0.990" not in table
    assert "left out 1 row" in caplog.text


def test_results_table_does_not_modify_its_input():
    frame = example_aggregate()
    before = frame.copy()
    L.results_table(frame, "afib")
    pd.testing.assert_frame_equal(frame, before)


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, NAN, True, "0.95", None])
def test_results_table_rejects_confidence_level_even_when_empty(level):
    with pytest.raises(ValueError, match="confidence_level"):
        L.results_table(pd.DataFrame(), "d", confidence_level=level)


def test_results_table_errors():
    with pytest.raises(ValueError, match="metrics"):
        L.results_table(example_aggregate(), "afib", metrics=())
    with pytest.raises(ValueError, match="precision"):
        L.results_table(example_aggregate(), "afib", precision=-1)
    with pytest.raises(ValueError, match="lower_ci"):
        L.results_table(example_aggregate().drop(columns="lower_ci"), "afib")
    with pytest.raises(ValueError, match="DataFrame"):
        L.results_table([], "afib")


# --- rank_distribution_table -------------------------------------------------------------


def test_rank_distribution_table_example():
    table = L.rank_distribution_table(example_distribution())
    assert_well_formed(table)
    assert "\\centering\n\\scriptsize\n" in table
    assert r"\begin{tabular}{lcccccc}" in table
    assert r"\label{tab:rank_distribution}" in table
    lines = body_lines(table)
    assert lines[0] == r"Model & R1 & R2 & R3 & Mode & Top-1 & F1 (mean $\pm$ sd) \\"
    assert lines[1:3] == [r"\midrule", r"\multicolumn{7}{l}{\textit{afib} (3 models, 5 seeds)} \\"]
    ptbxl = lines.index(r"\multicolumn{7}{l}{\textit{PTB-XL} (3 models, 5 seeds)} \\")
    assert lines[ptbxl + 1 : ptbxl + 4] == [
        r"ResNet & 4 & 1 & 0 & 1 (4/5) & 0.80 & $0.664$ $\pm$ 0.011 \\",
        r"lstm & 1 & 4 & 0 & 2 (4/5) & 0.20 & $0.640$ $\pm$ 0.016 \\",
        r"cnn & 0 & 0 & 5 & 3 (5/5) & 0.00 & $0.610$ $\pm$ 0.016 \\",
    ]
    # Fewer models: the impossible rank shows a dash; no SD with one seed.
    assert r"\multicolumn{7}{l}{\textit{zeta} (2 models, 1 seeds)} \\" in lines
    assert r"solo & 1 & 0 & -- & 1 (1/1) & 1.00 & $0.500$ \\" in lines
    assert lines.index(r"solo & 1 & 0 & -- & 1 (1/1) & 1.00 & $0.500$ \\") < lines.index(
        r"duo & 0 & 1 & -- & 2 (1/1) & 0.00 & $0.400$ \\"
    )
    assert lines[-1] == (
        r"\multicolumn{7}{l}{Ties share the better rank, so a rank column may over-fill.} \\"
    )
    text = caption(table)
    for phrase in (
        "Distribution of F1 ranks over random seeds",
        "counts the seeds in which the model attained that rank within its dataset",
        "rank 1 = best",
        "rows sum to the seed count",
        "Dashes mark ranks that cannot occur because fewer models were trained",
    ):
        assert phrase in text


def test_rank_distribution_table_with_taus():
    table = L.rank_distribution_table(example_distribution(), taus=example_taus())
    assert note_texts(table)[1:] == [
        r"Kendall $\bar\tau_b$ over all seed-pair rankings, with 95\% leave-one-seed-out "
        r"jackknife intervals: afib $1.00$ $[1.00, 1.00]$; PTB-XL $0.73$ $[0.36, 1.00]$.",
        r"With $|M|=3$ models the smallest attainable two-sided $p$ is 0.333, "
        r"so no coefficient can reach $p<0.05$.",
    ]
    all_nan = example_taus().assign(tau_mean=NAN)
    table = L.rank_distribution_table(example_distribution(), taus=all_nan)
    assert "Kendall" not in table
    no_interval = example_taus().assign(tau_lower=NAN)
    table = L.rank_distribution_table(
        example_distribution(), taus=no_interval, confidence_level=0.9
    )
    assert note_texts(table)[1].startswith(
        r"Kendall $\bar\tau_b$ over all seed-pair rankings, with 90\%"
    )
    assert "afib $1.00$;" in note_texts(table)[1]


def test_rank_distribution_table_lower_is_better_and_missing_rank_column():
    frame = example_distribution().drop(columns="rank_3")
    table = L.rank_distribution_table(frame, metric="ece", label="tab:r")
    lines = body_lines(table)
    assert lines[0].endswith(r"& ECE (mean $\pm$ sd) \\")
    afib = lines.index(r"\multicolumn{7}{l}{\textit{afib} (3 models, 5 seeds)} \\")
    assert [line.split(" & ")[0] for line in lines[afib + 1 : afib + 4]] == [
        "lstm",
        "ResNet",
        "cnn",
    ]
    assert r"lstm & 0 & 0 & -- & 3 (5/5)" in table
    assert "Distribution of ECE ranks" in caption(table)
    assert r"\label{tab:r}" in table


def test_rank_distribution_table_empty():
    table = L.rank_distribution_table(pd.DataFrame(), taus=pd.DataFrame())
    assert_well_formed(table)
    assert r"\begin{tabular}{lccc}" in table
    assert body_lines(table) == [
        r"Model & Mode & Top-1 & F1 (mean $\pm$ sd) \\",
        r"\midrule",
        r"\multicolumn{4}{l}{Ties share the better rank, so a rank column may over-fill.} \\",
    ]


def test_rank_distribution_table_missing_column():
    with pytest.raises(ValueError, match="mode_fraction"):
        L.rank_distribution_table(example_distribution().drop(columns="mode_fraction"))
    with pytest.raises(ValueError, match="min_attainable_p"):
        L.rank_distribution_table(
            example_distribution(), taus=example_taus().drop(columns="min_attainable_p")
        )


# --- flip_survival_table -----------------------------------------------------------------


def test_flip_survival_table_example():
    table = L.flip_survival_table(example_flips())
    assert_well_formed(table)
    assert r"\begin{tabular}{lcccccl}" in table
    assert r"\label{tab:flip_survival}" in table
    lines = body_lines(table)
    assert lines[:5] == [
        r"$A$ vs.\ $B$ & $\Delta_1$ [95\% CI] & $k_1/n$ & $\Delta_2$ [95\% CI] & $k_2/n$ & "
        r"$q_{\mathrm{rev}}$ & Verdict \\",
        r"\midrule",
        r"\multicolumn{7}{l}{\textit{afib $\rightarrow$ PTB-XL}} \\",
        r"cnn / ResNet & $+0.040$ {\scriptsize $[+0.027, +0.053]$} & 5/5 & "
        r"$-0.054$ {\scriptsize $[-0.075, -0.033]$} & 0/5 & $0.006$ & Supported$^{\ast}$ \\",
        r"cnn / lstm & $+0.090$ {\scriptsize $[+0.070, +0.110]$} & 5/5 & "
        r"$-0.030$ {\scriptsize $[-0.059, -0.001]$} & 0/5 & $0.065$ & Supported \\",
    ]
    assert lines[5].endswith(
        r"& 0/5 & $-0.024$ {\scriptsize $[-0.063, +0.015]$} & 0/5 & $1.000$ & Not reproduced \\"
    )
    notes = note_texts(table)
    assert [note.split(":")[0] for note in notes] == [
        "Supported",
        "Suggestive",
        "Unresolved",
        "Not reproduced",
        "Contradicted",
        "Bimodal",
        "Untestable",
        "Nadeau--Bengio correction whose split sizes are unknown.",
        r"$^{\ast}$ Survives the false-discovery-rate adjustment",
    ]
    assert "at least 5 shared seeds" in notes[0]
    assert notes[-1].endswith(r"supported and $q_{\mathrm{rev}} \le 0.05$.")
    assert r"\dagger" not in table and r"\ddagger" not in table
    assert "Restricted to" not in table


def test_flip_survival_table_shows_wins_on_both_datasets():
    flips = example_flips()
    flips.loc[2, ["wins_2", "n_2"]] = [4, 5]
    line = body_lines(L.flip_survival_table(flips))[5]
    assert line.split(" & ")[2:5] == ["0/5", r"$-0.024$ {\scriptsize $[-0.063, +0.015]$}", "4/5"]
    tiny = example_flips().assign(q_reversal=0.0004)
    assert "& $<0.001$ &" in body_lines(L.flip_survival_table(tiny))[3]


def test_flip_survival_table_caption():
    text = caption(L.flip_survival_table(example_flips()))
    for phrase in (
        "two architectures",
        "over $n$ shared random seeds",
        "every seed redraws the train/validation/test partition and reinitialises the weights",
        r"mean paired per-seed difference ($A-B$) in F1 on $D_i$",
        r"two-sided 95\% Student-$t$ interval",
        "its standard error carries the Nadeau--Bengio correction for training-set overlap "
        "between seeds.",
        r"$k_i/n$ counts the seeds in which $A$'s score exceeded $B$'s on $D_i$",
        "both intervals exclude zero with opposite signs",
        "intersection--union test",
        r"one-sided component $t$ tests: $\max(p_1, p_2)/2$ when the two means have opposite",
        r"$1-\max(p_1, p_2)/2 \ge 0.5$ when they share one",
        "least-favourable null",
        r"$q_{\mathrm{rev}}$ is the Benjamini--Yekutieli adjustment of $p_{\mathrm{rev}}$ "
        "over every testable comparison",
        r"marked $^{\ast}$ also has $q_{\mathrm{rev}} \le 0.05$",
        "unmarked supported row is a nominal finding only",
        "at least 5 shared seeds",
        "bimodal is a verdict of its own",
        "exploratory",
    ):
        assert phrase in text
    assert "uncorrected" not in text
    assert "upper bound" not in text and r"p_{\mathrm{BY}}" not in text
    bh = caption(L.flip_survival_table(example_flips().assign(fdr_method="bh")))
    assert "Benjamini--Hochberg adjustment of" in bh


def test_flip_survival_table_marks_differences_without_nadeau_bengio():
    flips = example_flips()
    flips.loc[0, "correction_applied_2"] = "unavailable"
    table = L.flip_survival_table(flips)
    assert r"$-0.054^{\ddagger}$ {\scriptsize" in table
    assert table.count(r"^{\ddagger}$ {") == 1
    text = caption(table)
    assert (
        r"Nadeau--Bengio correction for training-set overlap between seeds, except in the "
        r"differences marked $^{\ddagger}$, whose split sizes are unknown" in text
    )
    notes = " ".join(note_texts(table))
    assert r"$^{\ddagger}$ Split sizes unknown: the uncorrected standard error" in notes
    flips.loc[1, "comparable_magnitudes"] = False
    flips.loc[1, "correction_applied_1"] = "unavailable"
    assert r"$+0.090^{\dagger\ddagger}$" in L.flip_survival_table(flips)
    nowhere = example_flips().assign(
        correction_applied_1="unavailable", correction_applied_2="unavailable"
    )
    text = caption(L.flip_survival_table(nowhere))
    assert "Nadeau--Bengio correction was requested, but no comparison's split sizes" in text
    assert "carries the Nadeau--Bengio correction" not in text
    plain = example_flips().assign(correction_applied_1="none", correction_applied_2="none")
    text = caption(L.flip_survival_table(plain))
    assert "uncorrected standard error of the mean" in text and "Nadeau" not in text


def test_flip_survival_table_options():
    flips = example_flips().assign(fdr_family="significant")
    table = L.flip_survival_table(
        flips.drop(columns=["correction_applied_1", "correction_applied_2"]),
        label="tab:f",
        metric="ece",
        confidence_level=0.9,
        correction="none",
        exclusions=["models: a_b, resnet", "datasets: x%"],
        split_description="random 70/10/20% split",
    )
    text = caption(table)
    assert "uncorrected standard error of the mean" in text
    assert "Nadeau" not in text
    assert "whose verdict is supported, suggestive or contradicted" in text
    assert r"difference ($A-B$) in ECE on" in text
    assert r"redraws the random 70/10/20\% split" in text
    assert r"$\Delta_1$ [90\% CI]" in table
    assert r"two-sided 90\% Student-$t$" in text
    assert r"$q_{\mathrm{rev}} \le 0.1$" in text
    assert note_texts(table)[-1] == r"Restricted to: models: a\_b, resnet, datasets: x\%."
    assert r"\label{tab:f}" in table
    bare = L.flip_survival_table(example_flips(), exclusions="models: cnn")
    assert note_texts(bare)[-1] == "Restricted to: models: cnn."


@pytest.mark.parametrize("flag", [False, np.False_, "False", "false"])
def test_flip_survival_table_dagger(flag):
    flips = example_flips()
    flips["comparable_magnitudes"] = flips["comparable_magnitudes"].astype(object)
    flips.loc[1, "comparable_magnitudes"] = flag
    table = L.flip_survival_table(flips)
    assert r"cnn / lstm & $+0.090^{\dagger}$ {\scriptsize" in table
    assert r"$-0.030^{\dagger}$" in table
    assert table.count(r"^{\dagger}$ {") == 2
    notes = " ".join(note_texts(table))
    assert r"$^{\dagger}$ Differences of differently averaged scores" in notes
    assert "only their signs enter the test" in notes


def test_flip_survival_table_missing_optional_columns_and_cells():
    optional = [
        "comparable_magnitudes",
        "q_reversal",
        "survives_fdr",
        "fdr_family",
        "fdr_method",
        "correction_applied_1",
        "correction_applied_2",
    ]
    flips = example_flips().drop(columns=optional)
    flips.loc[0, "n_1"] = 0
    flips.loc[1, "n_1"] = NAN
    flips.loc[2, "verdict"] = "odd_verdict"
    flips.loc[2, "mean_1"] = NAN
    table = L.flip_survival_table(flips)
    lines = body_lines(table)
    assert lines[3].split(" & ")[2] == "--"
    assert lines[3].split(" & ")[5] == "--"
    assert lines[3].endswith("& Supported \\\\"), "no survival mark without survives_fdr"
    assert lines[4].split(" & ")[2] == "--"
    assert lines[5] == (
        r"lstm / ResNet & -- & 0/5 & $-0.024$ {\scriptsize $[-0.063, +0.015]$} & 0/5 & -- & "
        r"odd\_verdict \\"
    )
    assert r"\dagger" not in table
    text = caption(table)
    assert "over every testable comparison" in text and "Benjamini--Yekutieli" in text
    assert "carries the Nadeau--Bengio correction" in text


def test_flip_survival_table_groups_sorted_rows_in_frame_order():
    flips = example_flips()
    other = flips.iloc[[1, 0]].assign(dataset_1="aaa", dataset_2="zzz")
    flips = pd.concat([flips, other], ignore_index=True)
    lines = body_lines(L.flip_survival_table(flips))
    sections = [line for line in lines if r"\rightarrow" in line]
    assert sections == [
        r"\multicolumn{7}{l}{\textit{aaa $\rightarrow$ zzz}} \\",
        r"\multicolumn{7}{l}{\textit{afib $\rightarrow$ PTB-XL}} \\",
    ]
    assert lines[3].startswith("cnn / lstm")
    assert lines[4].startswith("cnn / ResNet")


def test_flip_survival_table_empty_and_errors():
    table = L.flip_survival_table(pd.DataFrame(columns=FLIP_COLUMNS))
    assert_well_formed(table)
    assert len(body_lines(table)) == 1 + 1 + 9
    assert "over every testable comparison" in caption(table)
    assert "over every testable comparison" in caption(L.flip_survival_table(pd.DataFrame()))
    with pytest.raises(ValueError, match="correction"):
        L.flip_survival_table(example_flips(), correction="bonferroni")
    with pytest.raises(ValueError, match="confidence_level"):
        L.flip_survival_table(pd.DataFrame(), confidence_level=1.0)
    with pytest.raises(ValueError, match="wins_1"):
        L.flip_survival_table(example_flips().drop(columns="wins_1"))
    with pytest.raises(ValueError, match="wins_2"):
        L.flip_survival_table(example_flips().drop(columns="wins_2"))


# --- tau_table ---------------------------------------------------------------------------


def test_tau_table_example():
    taus = example_taus().iloc[[1, 0, 2]]
    table = L.tau_table(taus)
    assert_well_formed(table)
    assert r"\begin{tabular}{lcccccccc}" in table
    assert r"\label{tab:kendall_tau}" in table
    assert body_lines(table)[:5] == [
        r"Dataset & $|M|$ & Seeds & Pairs & $\bar\tau_b$ [95\% CI] & Range & $W$ & $p_W$ & "
        r"$p_{\min}$ \\",
        r"\midrule",
        r"PTB-XL & 3 & 5 & 10 & $0.73$ $[0.36, 1.00]$ & $[0.33, 1.00]$ & $0.64$ & $0.036$ & "
        r"$0.333$ \\",
        r"afib & 3 & 5 & 10 & $1.00$ $[1.00, 1.00]$ & $[1.00, 1.00]$ & $1.00$ & $<0.001$ & "
        r"$0.333$ \\",
        r"zeta & 2 & 1 & 0 & -- & -- & -- & -- & -- \\",
    ]
    notes = note_texts(table)
    assert notes[0].startswith(r"$\bar\tau_b$: mean over every pair of seeds, with a leave-one")
    assert "is not an interval" in notes[2]
    assert notes[4] == r"$p$-value (9,999 permutations) against unrelated rankings."
    assert notes[5].startswith(r"$p_{\min}$: the smallest two-sided $p$")
    assert "$2/|M|!$ without ties" in notes[6]
    assert notes[7].startswith(r"With $|M|=3$ models")
    # PTB-XL's upper bound 1.1035 is shown at 1.00.
    assert notes[8] == r"Interval bounds beyond $[-1, 1]$ are shown at its limit."
    text = caption(table)
    assert r"Kendall $\tau_b$ over every pair of seeds" in text
    assert "leave-one-seed-out jackknife, not from the spread of the pairs" in text
    assert "permuting each seed's ranking" in text
    assert r"\label{x}" in L.tau_table(taus, label="x")
    assert r"[90\% CI]" in L.tau_table(taus, confidence_level=0.9)
    unclipped = L.tau_table(taus.iloc[[1]])
    assert "shown at its limit" not in unclipped
    mixed = taus.assign(n_permutations=[9999, 0, 9999])
    assert note_texts(L.tau_table(mixed))[4] == (
        r"$p$-value (up to 9,999 permutations; fewer, or chi-squared, for the largest datasets) "
        "against unrelated rankings."
    )
    chi2 = note_texts(L.tau_table(taus.assign(n_permutations=0)))[4]
    assert chi2.startswith(r"$p$-value (Friedman's chi-squared approximation)")


def test_tau_table_empty_and_missing_column():
    table = L.tau_table(pd.DataFrame(columns=TAU_COLUMNS))
    assert_well_formed(table)
    assert len(note_texts(table)) == 7
    with pytest.raises(ValueError, match="n_pairs"):
        L.tau_table(example_taus().drop(columns="n_pairs"))
    with pytest.raises(ValueError, match="kendall_w"):
        L.tau_table(example_taus().drop(columns="kendall_w"))


# --- transfer_matrix_table ---------------------------------------------------------------


def test_transfer_matrix_table_with_baseline():
    table = L.transfer_matrix_table(example_matrix(), baseline_row="untrained")
    assert_well_formed(table)
    assert r"\begin{tabular}{lcc}" in table
    assert r"\label{tab:transfer_matrix}" in table
    assert body_lines(table)[:6] == [
        r"Encoder source & PTB-XL & PhysioNet 2017 \\",
        r"\midrule",
        r"Untrained encoder & $0.550$ & $0.510$ \\",
        r"\midrule",
        r"PTB-XL & $0.910$ & $0.620$ \\",
        r"PhysioNet 2017 & $0.700$ & -- \\",
    ]
    notes = " ".join(note_texts(table))
    assert "freezes the encoder trained on its row's corpus, embeds the column corpus" in notes
    assert "standardised logistic probe on that corpus's training split alone" in notes
    assert "The first row probes an untrained" in notes
    assert "floor for every column" in notes
    text = caption(table)
    for phrase in (
        "Cross-dataset transfer",
        "Macro AUROC of a linear probe on a held-out split",
        "Rows are the corpus each frozen encoder was trained on",
        "columns the corpus it was probed on",
        "diagonal is the in-domain probe",
        "single-lead at a common sampling rate",
        "identical input",
        "refitted per column because the label spaces differ",
    ):
        assert phrase in text


def test_transfer_matrix_table_without_baseline():
    table = L.transfer_matrix_table(
        example_matrix(), metric="f1", baseline_row="absent", precision=1
    )
    lines = body_lines(table)
    assert lines[2:5] == [
        r"PTB-XL & $0.9$ & $0.6$ \\",
        r"Untrained encoder & $0.6$ & $0.5$ \\",
        r"PhysioNet 2017 & $0.7$ & -- \\",
    ]
    assert lines[5] == r"\midrule"
    assert "floor" not in table
    assert "F1 of a linear probe" in caption(table)


def test_transfer_matrix_table_random_baseline_and_errors():
    matrix = example_matrix().rename(index={"untrained": "random"})
    lines = body_lines(L.transfer_matrix_table(matrix, baseline_row="random"))
    assert lines[2:4] == [r"Random encoder & $0.550$ & $0.510$ \\", r"\midrule"]
    with pytest.raises(ValueError, match="DataFrame"):
        L.transfer_matrix_table(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="precision"):
        L.transfer_matrix_table(example_matrix(), precision=-2)


# --- write_tables ------------------------------------------------------------------------


def test_write_tables_writes_sorted_utf8_unchanged(tmp_path):
    tables = {"b_table": "second é\r\n", "a_table": L.tau_table(example_taus())}
    out = tmp_path / "nested" / "dir"
    paths = L.write_tables(tables, out)
    assert paths == [str(out / "a_table.tex"), str(out / "b_table.tex")]
    assert all(isinstance(p, str) for p in paths)
    assert (out / "b_table.tex").read_bytes() == "second é\r\n".encode()
    assert Path(paths[0]).read_text(encoding="utf-8") == tables["a_table"]
    assert sorted(p.name for p in out.iterdir()) == ["a_table.tex", "b_table.tex"]
    L.write_tables({"a_table": "new"}, str(out))
    assert (out / "a_table.tex").read_text(encoding="utf-8") == "new"


@pytest.mark.parametrize("stem", ["", ".", "..", "a/b", "a\\b", "a\0b", 3])
def test_write_tables_rejects_bad_stems_before_writing(tmp_path, stem):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="table name"):
        L.write_tables({"fine": "x", stem: "y"}, out)
    assert not out.exists()


def test_write_tables_rejects_non_text_and_propagates_oserror(tmp_path):
    with pytest.raises(ValueError, match="must be a string"):
        L.write_tables({"a": b"bytes"}, tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        L.write_tables({"a": "x"}, blocker)


# --- compilation with the real engine ----------------------------------------------------


def hostile_tables() -> dict[str, str]:
    """Every kind of table, with hostile names in every name-bearing position."""
    names = list(HOSTILE_NAMES)
    aggregate = pd.DataFrame(
        [
            aggregate_row(names[0], name, metric, 0.5 + i / 100, 0.4, 0.6, averaging=names[i])
            for i, name in enumerate(names)
            for metric in ("f1", "precision", "m_etric&")
        ],
        columns=AGGREGATE_COLUMNS,
    )
    distribution = pd.DataFrame(
        [
            distribution_row(dataset, name, 3, [2, 1, 0], 1, 2 / 3, 2 / 3, -0.5 + i / 10, 0.1)
            for dataset in (names[1], names[3])
            for i, name in enumerate(names)
        ]
    )
    taus = pd.DataFrame(
        [
            [names[1], 3, 3, 3, 0.5, -1 / 3, 1.0, 1 / 3, 0.4, -1.2, 2.2, 0.3, 0.4, 99],
            [names[3], 9, 3, 3, -0.25, -1.0, 0.5, 2 / math.factorial(9), *[NAN] * 5, 99],
        ],
        columns=TAU_COLUMNS,
    )
    flips = pd.DataFrame(
        [
            flip_row(
                a,
                b,
                0.04,
                -0.054,
                (0.02, 0.06),
                (-0.07, -0.03),
                "bimodal" if i % 2 else "<weird_verdict>",
                0.002,
                0.01 if i % 3 else NAN,
                dataset_1=names[i % 3],
                dataset_2=names[(i + 4) % len(names)],
                comparable_magnitudes=bool(i % 2),
            )
            for i, (a, b) in enumerate(itertools.pairwise(names))
        ],
        columns=FLIP_COLUMNS,
    )
    matrix = pd.DataFrame(
        [[0.5 + i / 20, NAN, -0.1] for i in range(len(names) + 1)],
        index=["untrained", *names],
        columns=names[:3],
    )
    return {
        "results": L.results_table(aggregate, names[0], metrics=("f1", "m_etric&", "precision")),
        "ranks": L.rank_distribution_table(distribution, taus=taus, metric=names[2]),
        "flips": L.flip_survival_table(
            flips, metric=names[5], exclusions=names, split_description=names[4]
        ),
        "taus": L.tau_table(taus),
        "transfer": L.transfer_matrix_table(matrix, metric=names[6], baseline_row="untrained"),
    }


def test_every_kind_of_table_with_hostile_names_compiles():
    tables = hostile_tables()
    assert r"\dagger" in tables["flips"]
    assert "Restricted to" in tables["flips"]
    assert "Kendall" in tables["ranks"]
    assert "Untrained encoder" in tables["transfer"]
    for name, table in tables.items():
        assert_well_formed(table)
        ok, reason = L.compile_table(table)
        assert ok, f"{name} did not compile:\n{reason}"


def test_example_tables_compile_together():
    tables = [
        L.results_table(example_aggregate(), "afib"),
        L.results_table(pd.DataFrame(), "nothing"),
        L.rank_distribution_table(example_distribution(), taus=example_taus()),
        L.rank_distribution_table(pd.DataFrame()),
        L.flip_survival_table(example_flips()),
        L.flip_survival_table(pd.DataFrame()),
        L.tau_table(example_taus()),
        L.transfer_matrix_table(example_matrix(), baseline_row="untrained"),
    ]
    ok, reason = L.compile_table("\n".join(tables))
    assert ok, reason


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    st.text(
        alphabet=st.characters(max_codepoint=127) | st.sampled_from("éüßñÅ"),
        min_size=1,
        max_size=40,
    )
)
def test_escaped_arbitrary_text_compiles_in_a_cell(text):
    cell = L.escape_latex(text)
    table = L._wrap_table(
        [L._row([cell, cell]), L._row(["x", cell])], "ll", cell, "tab:prop", size=None
    )
    ok, reason = L.compile_table(table)
    assert ok, reason


def test_compile_table_reports_latex_errors_without_raising():
    broken = L._wrap_table([r"\undefinedmacro & x \\"], "ll", "C", "t")
    ok, reason = L.compile_table(broken)
    assert not ok
    assert "Undefined control sequence" in reason
    # The unescaped name would have broken compilation: the guard is real.
    ok, reason = L.compile_table(L._wrap_table([r"\midrule", r"[x] & y \\"], "ll", "C", "t"))
    assert not ok
    assert reason


def test_compile_table_times_out():
    ok, reason = L.compile_table(r"\def\loop{\loop}\loop", timeout=1)
    assert not ok
    assert "did not finish within 1 s" in reason


def test_compile_table_engines():
    engine = L.latex_engine()
    assert engine is not None and Path(engine).exists()
    ok, _ = L.compile_table(L.tau_table(example_taus()), engine=engine)
    assert ok
    with pytest.raises(RuntimeError, match="no LaTeX engine"):
        L.compile_table("x", engine="no-such-latex-engine-here")


def test_import_pulls_in_neither_torch_dagster_nor_matplotlib():
    code = (
        "import sys, deepecgkit.analysis.latex\n"
        "bad = {'torch', 'dagster', 'matplotlib'} & set(sys.modules)\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x3FF)))
def test_escape_of_any_text_keeps_no_invisible_or_control_character(text):
    escaped = L.escape_latex(text)
    assert not any(ord(c) < 32 or ord(c) == 127 for c in escaped)
    assert not any(unicodedata.category(c) == "Cf" for c in escaped), "marks carry no glyph"
    assert L.escape_latex(unicodedata.normalize("NFD", text)) == escaped, "NFC first"


@pytest.mark.parametrize(
    ("name", "escaped"),
    [
        ("Ωmega-ß", r"\ensuremath{\Omega}mega-\ss{}"),
        ("Ångström", r"\r{A}ngstr\"{o}m"),
        ("naïve “net” – v2", r"na\"{i}ve ``net'' -- v2"),
        ("Łódź", r"\L{}\'{o}d\'{z}"),
    ],
)
def test_escape_maps_latin_and_greek_letters_to_latex_commands(name, escaped):
    assert L.escape_latex(name) == escaped
    assert not L.needs_unicode_engine(L.escape_latex(name))


def test_a_table_with_cjk_names_announces_the_engine_it_needs():
    frame = pd.DataFrame(
        [("数据", "模型", "f1", 0.5, 0.4, 0.6, 3)], columns=list(L._RESULTS_COLUMNS)
    )
    table = L.results_table(frame, "数据")
    assert L.needs_unicode_engine(table)
    assert table.startswith("% This table holds characters pdflatex cannot typeset (U+6570")
    assert "lualatex or xelatex" in table.splitlines()[1]


def test_long_names_give_bounded_distinct_file_stems():
    long_a, long_b = "a" * 300, "a" * 299 + "b"
    stems = L.file_stems([long_a, long_b, "short"])
    assert stems["short"] == "short"
    assert len({stems[long_a], stems[long_b]}) == 2
    assert all(len(stem) <= L.MAX_STEM_CHARACTERS for stem in stems.values())
    assert stems[long_a].startswith("a" * 80 + "_")


# --- tables longer than a page ------------------------------------------------------------


def _rows_body(n_rows: int) -> list[str]:
    """A header row and ``n_rows - 1`` rows: ``n_rows`` rows in all."""
    rows = [f"m{i} & ${i}$ \\\\" for i in range(n_rows - 1)]
    return ["Model & Value \\\\", r"\midrule", *rows]


def test_a_table_of_one_page_of_rows_stays_a_float():
    table = L._wrap_table(_rows_body(L.LONG_TABLE_ROWS), "lc", "C", "tab:x")
    assert_well_formed(table)
    assert not L.is_long_table(table)


def test_a_longer_table_is_a_longtable_with_its_header_on_every_page():
    table = L._wrap_table(_rows_body(L.LONG_TABLE_ROWS + 1), "lc", "C", "tab:x", size=r"\small")
    assert L.is_long_table(table)
    assert table.startswith("% This table spans pages: load \\usepackage{longtable}")
    assert r"\begin{table}" not in table
    lines = table.splitlines()
    assert lines.count("Model & Value \\\\") == 2  # the first head and the continued head
    assert lines.index(r"\endfirsthead") < lines.index(r"\endhead") < lines.index("m0 & $0$ \\\\")
    assert r"\multicolumn{2}{l}{\textit{(continued)}} \\" in lines
    assert r"\caption{C}\label{tab:x} \\" in lines
    assert r"\usepackage{longtable}" in L.standalone_document(table)
    assert r"\usepackage{longtable}" not in L.standalone_document(
        L._wrap_table(_rows_body(1), "lc", "C", "tab:y")
    )


def test_a_flip_table_of_a_large_sweep_compiles():
    # 8,550 rows in one float exceeded pdflatex's main memory (the flip table of
    # 20,000 runs did not compile); as a longtable it compiles page by page.
    flips = example_flips()
    copies = 8_550 // len(flips) + 1
    sweep = pd.concat(
        [flips.assign(dataset_1=f"set{k:04d}") for k in range(copies)], ignore_index=True
    )
    table = L.flip_survival_table(sweep)
    assert L.is_long_table(table)
    ok, reason = L.compile_table(table)
    assert ok, reason
