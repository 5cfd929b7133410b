"""Tests for ``deepecgkit.analysis.line_forms``: which long-table lines compile alike.

Hand-checked forms (typeset digits become one ``0``, digits TeX may read as
a number stay), a property over emitted flip-table rows (rows that differ
only in their numbers and the digits of their names share a form), and a
property of the representative lines (every form and every adjacent pair of
forms is kept, in order).
"""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from deepecgkit.analysis import latex as L
from deepecgkit.analysis.line_forms import (
    line_form,
    line_forms,
    representative_body,
    representative_forms,
)


@pytest.mark.parametrize(
    ("line", "form"),
    [
        (
            r"model07 / model12 & $-0.070$ {\scriptsize $[-0.084, -0.056]$} & 0/100 & "
            r"$1.000$ & Contradicted \\",
            r"model0 / model0 & $-0.0$ {\scriptsize $[-0.0, -0.0]$} & 0/0 & "
            r"$0.0$ & Contradicted \\",
        ),
        # Arguments keep their digits: a column count, a cmidrule's columns, a bold number.
        (r"\multicolumn{7}{l}{\textit{data00 $\rightarrow$ data01}} \\", None),
        (r"\cmidrule(lr){2-3} 5", r"\cmidrule(lr){2-3} 0"),
        (r"x \textbf {12} 3", r"x \textbf {12} 0"),
        # A number right after a control word or \\ (spaces, "=" and a sign between).
        (r"\kern2pt x 3", r"\kern2pt x 0"),
        (r"\kern -2pt", None),
        (r"\\[2pt] 4", r"\\[2pt] 0"),
        (r"\\ [2pt]", None),
        (r"\count0 = 5 x 6", r"\count0 = 5 x 0"),
        # An escaped character is not a control word; a plain group is not an argument.
        (r"\% 5 \_7", r"\% 0 \_0"),
        # A digit that names a control symbol is part of its name.
        (r"\5 x 3", r"\5 x 0"),
        (r"\12 x", None),
        (r"{5} (3) [4]", r"{0} (0) [0]"),
        # A comment keeps its digits; unbalanced braces keep the whole line.
        (r"1 % 2", r"0 % 2"),
        (r"a } 5", None),
        (r"{ 5", None),
        ("", ""),
    ],
)
def test_hand_checked_forms(line, form):
    assert line_form(line) == (line if form is None else form)


def flip_rows(values: list[float], wins: list[int], names: list[int]) -> list[str]:
    """The body rows of an emitted flip table, one per value."""
    flips = pd.DataFrame(
        {
            "model_a": [f"m{i:02d}" for i in names],
            "model_b": "resnet",
            "dataset_1": "afib",
            "dataset_2": "ltafdb",
            "mean_1": values,
            "lower_1": [v - 0.5 for v in values],
            "upper_1": [v + 0.5 for v in values],
            "mean_2": [-v for v in values],
            "lower_2": [-v - 0.5 for v in values],
            "upper_2": [-v + 0.5 for v in values],
            "wins_1": wins,
            "n_1": 100,
            "wins_2": [100 - w for w in wins],
            "n_2": 100,
            "verdict": "supported",
        }
    )
    lines = L.flip_survival_table(flips).split("\n")
    start = lines.index(L.LONG_TABLE_BODY_START) + 1 if L.LONG_TABLE_BODY_START in lines else 0
    return [line for line in lines[start:] if line.startswith("m")]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.6, max_value=0.9),
            st.integers(min_value=10, max_value=99),
            st.integers(min_value=0, max_value=99),
        ),
        min_size=2,
        max_size=6,
    )
)
def test_rows_that_differ_only_in_numbers_and_name_digits_share_a_form(rows):
    values, wins, names = map(list, zip(*rows, strict=True))
    forms = set(line_forms(flip_rows(values, wins, names)))
    assert len(forms) == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a 1 \\\\", "a 22 \\\\", "b 3 \\\\", r"\midrule", "[c] 4"])))
def test_representative_lines_keep_every_form_and_adjacent_pair_in_order(body):
    kept = representative_body(body)
    assert kept == sorted(set(kept)) and all(0 <= i < len(body) for i in kept)
    forms = line_forms(body)
    held = [forms[i] for i in kept]
    assert set(held) == set(forms)
    pairs = set(itertools.pairwise(held))
    assert set(itertools.pairwise(forms)) <= pairs
    # The first line follows the header in the original and in the kept lines alike.
    assert (not body) or kept[0] == 0


def test_a_body_of_one_form_keeps_two_lines():
    body = [rf"m{i} & {i}.5 \\" for i in range(1000)]
    assert representative_body(body) == [0, 1]
    assert representative_body([]) == []


#: Lines of every kind a form can take: shared by a group, keeping digits, verbatim.
_MIXED_LINES = [
    "a 1 \\\\",
    "a 22 \\\\",
    "b 3 \\\\",
    r"\midrule",
    "[c] 4",
    r"\multicolumn{7}{l}{x 5} \\",
    r"\multicolumn{8}{l}{x 5} \\",
    "1 % 2",
    "1 % 3",
    "a } 5",
    "a } 6",
    "",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_MIXED_LINES)))
def test_forms_of_a_body_are_the_forms_of_its_lines_one_by_one(body):
    assert line_forms(body) == [line_form(line) for line in body]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_MIXED_LINES)))
def test_representative_body_keeps_the_first_line_of_each_adjacent_pair_and_its_predecessor(body):
    # The rule as a plain loop over the lines' forms, one by one.
    kept: set[int] = set()
    seen: set[tuple[str | None, str]] = set()
    previous: str | None = None
    for index, form in enumerate(line_form(line) for line in body):
        if (previous, form) not in seen:
            seen.add((previous, form))
            kept |= {index, index - 1} - {-1}
        previous = form
    assert representative_body(body) == sorted(kept)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_MIXED_LINES)))
def test_representative_forms_are_the_kept_lines_forms(body):
    kept, forms = representative_forms(body)
    assert kept == representative_body(body)
    assert forms == [line_form(body[index]) for index in kept]
