r"""Tests for the compile check of a long table in pieces (``compile_cache.long_table_chunks``).

A long table is compiled as complete documents of a few body lines each; the
check must still fail for a table that does not compile, wherever the bad line
sits, including a line that breaks only after the ``\\`` of the line before it.
The engine is the real pdflatex.
"""

from __future__ import annotations

import itertools
import shutil

import pandas as pd
import pytest

from deepecgkit.analysis import compile_cache as C, latex as L

PDFLATEX = shutil.which("pdflatex")
#: Body lines per piece in these tests: small, so a 60-row table has several pieces.
LINES = 20


def long_flip_table(rows: int = 60) -> str:
    """An emitted flip table of ``rows`` rows over two dataset pairs (a longtable)."""
    flips = pd.DataFrame(
        {
            "model_a": [f"m{i}" for i in range(rows)],
            "model_b": "resnet",
            "dataset_1": ["afib" if i < rows // 2 else "ptbxl" for i in range(rows)],
            "dataset_2": "ltafdb",
            "mean_1": 0.05,
            "lower_1": 0.01,
            "upper_1": 0.09,
            "mean_2": -0.04,
            "lower_2": -0.08,
            "upper_2": -0.01,
            "wins_1": 5,
            "n_1": 5,
            "wins_2": 0,
            "n_2": 5,
            "verdict": "supported",
        }
    )
    table = L.flip_survival_table(flips)
    assert L.is_long_table(table)
    return table


def body(table: str) -> list[str]:
    lines = table.split("\n")
    return lines[lines.index(r"\endlastfoot") + 1 : lines.index(r"\end{longtable}")]


def test_pieces_are_complete_tables_that_cover_every_adjacent_pair_of_lines():
    table = long_flip_table()
    lines = body(table)
    pieces = C.long_table_chunks(table, lines=LINES)
    assert len(pieces) == -(-len(lines) // LINES) > 1
    head = table[: table.index(r"\endlastfoot")]
    pairs = set()
    for number, (piece, where) in enumerate(pieces):
        assert piece.startswith(head) and piece.endswith("\\end{longtable}\n\\endgroup\n")
        first = number * LINES
        assert where == f"body lines {first + 1}-{min(first + LINES, len(lines))} of {len(lines)}"
        held = body(piece)
        assert held == lines[max(0, first - 1) : first + LINES]
        pairs |= set(itertools.pairwise(held))
    assert set(itertools.pairwise(lines)) <= pairs
    assert C.long_table_chunks(table, lines=len(lines)) == [(table, "")]


def test_a_short_table_or_an_edited_one_is_one_piece():
    short = L.flip_survival_table(pd.DataFrame())
    assert C.long_table_chunks(short, lines=1) == [(short, "")]
    edited = long_flip_table().replace(r"\endlastfoot", "")
    assert C.long_table_chunks(edited, lines=LINES) == [(edited, "")]
    with pytest.raises(ValueError, match="positive number of body lines"):
        C.long_table_chunks(short, lines=0)


@pytest.fixture
def compiles(monkeypatch) -> list[str]:
    """The texts the real engine compiled through the cache's module."""
    calls: list[str] = []
    real = C.compile_table_run

    def counted(text: str, **kwargs):
        calls.append(text)
        return real(text, **kwargs)

    monkeypatch.setattr(C, "compile_table_run", counted)
    return calls


@pytest.mark.skipif(PDFLATEX is None, reason="needs pdflatex")
def test_a_long_table_compiles_piece_by_piece_and_each_piece_is_cached(tmp_path, compiles):
    table = long_flip_table()
    cache = C.CompileCache(tmp_path)
    texts, engines = {"flip.tex": table}, {"flip.tex": PDFLATEX}
    assert C.compile_tables(texts, engines, cache=cache, chunk_lines=LINES) == {
        "flip.tex": (True, "")
    }
    pieces = [piece for piece, _ in C.long_table_chunks(table, lines=LINES)]
    assert sorted(compiles) == sorted(pieces)
    assert C.compile_tables(texts, engines, cache=cache, chunk_lines=LINES)["flip.tex"][0]
    assert len(compiles) == len(pieces), "every piece came from the cache"


@pytest.mark.skipif(PDFLATEX is None, reason="needs pdflatex")
@pytest.mark.parametrize(
    ("line", "bad", "error"),
    [
        (30, r"\undefinedcommand & x \\", "Undefined control sequence"),
        # Unshielded: LaTeX reads "[" after the "\\" ending the line before as a length.
        (LINES, r"[x] / y & -- & -- & -- & -- & -- & -- \\", "Missing number"),
    ],
)
def test_a_bad_line_fails_the_table_as_the_whole_compile_does(tmp_path, line, bad, error):
    table = long_flip_table()
    lines = body(table)
    broken = table.replace("\n" + lines[line] + "\n", "\n" + bad + "\n", 1)
    assert broken != table
    whole_ok, whole_reason = L.compile_table(broken)
    assert not whole_ok and error in whole_reason
    ((ok, reason),) = C.compile_tables(
        {"flip.tex": broken}, {"flip.tex": PDFLATEX}, chunk_lines=LINES
    ).values()
    assert not ok and error in reason
    first = line // LINES * LINES
    assert reason.startswith(f"body lines {first + 1}-")


@pytest.mark.skipif(PDFLATEX is None, reason="needs pdflatex")
def test_a_line_that_breaks_only_after_the_line_before_needs_the_repeated_line():
    """Why each piece repeats the line before it: after ``\\endlastfoot`` the same line compiles."""
    table = long_flip_table()
    lines = body(table)
    bad = r"[x] / y & -- & -- & -- & -- & -- & -- \\"
    start = table.index(r"\endlastfoot") + len(r"\endlastfoot")
    alone = table[:start] + "\n" + bad + "\n" + table[table.index(r"\end{longtable}") :]
    assert L.compile_table(alone) == (True, "")
    after_a_row = alone.replace("\n" + bad, "\n" + lines[1] + "\n" + bad, 1)
    assert not L.compile_table(after_a_row)[0]
