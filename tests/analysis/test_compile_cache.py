"""Tests for ``deepecgkit.analysis.compile_cache``: one real LaTeX compile per distinct text.

Compiles are counted by wrapping the real ``compile_table_run`` (pdflatex
runs behind it); a verdict the picture's engine run settles must equal the
one ``compile_table`` gives the same table. A long table is checked on one
line of each form (``check_pieces``), in pieces (``long_table_chunks``' layout);
the check must still fail for a table that does not compile, wherever the bad
line sits, including a line that breaks only after the ``\\`` of the line
before it and a digit TeX reads as a number.
"""

from __future__ import annotations

import itertools
import re
import shutil
import threading

import pandas as pd
import pytest

from deepecgkit.analysis import compile_cache as C, latex as L, table_images as T
from deepecgkit.analysis.line_forms import line_form

PDFLATEX = shutil.which("pdflatex")
pytestmark = pytest.mark.skipif(PDFLATEX is None, reason="needs pdflatex")


def table(cell: str) -> str:
    return "\n".join(
        [
            r"\begin{table}[t]",
            r"\centering",
            r"\caption{Cache.}",
            r"\begin{tabular}{l}",
            r"\toprule",
            rf"{cell} \\",
            r"\bottomrule",
            r"\end{tabular}",
            r"\end{table}",
            "",
        ]
    )


@pytest.fixture
def compiles(monkeypatch) -> list[str]:
    """The table texts the real engine compiled through the cache's module."""
    calls: list[str] = []
    real = C.compile_table_run

    def counted(text: str, **kwargs):
        calls.append(text)
        return real(text, **kwargs)

    monkeypatch.setattr(C, "compile_table_run", counted)
    return calls


def test_an_unchanged_text_is_compiled_once_and_a_changed_one_again(tmp_path, compiles):
    cache = C.CompileCache(tmp_path / "latex")
    first = C.compile_tables({"a.tex": table("A")}, {"a.tex": PDFLATEX}, cache=cache)
    again = C.compile_tables({"a.tex": table("A")}, {"a.tex": PDFLATEX}, cache=cache)
    assert first == again == {"a.tex": (True, "")}
    assert compiles == [table("A")]
    C.compile_tables({"a.tex": table("B")}, {"a.tex": PDFLATEX}, cache=cache)
    assert compiles == [table("A"), table("B")]


def test_two_names_with_one_text_compile_once(tmp_path, compiles):
    texts = {"a.tex": table("A"), "b.tex": table("A"), "c.tex": table("C")}
    engines = dict.fromkeys(texts, PDFLATEX)
    verdicts = C.compile_tables(texts, engines, cache=C.CompileCache(tmp_path))
    assert verdicts == dict.fromkeys(texts, (True, ""))
    assert sorted(compiles) == [table("A"), table("C")]


def test_a_cached_failure_fails_with_its_latex_error_and_runs_nothing(tmp_path, compiles):
    cache = C.CompileCache(tmp_path)
    broken = {"x.tex": table(r"\undefinedcommand")}
    ((ok, reason),) = C.compile_tables(broken, {"x.tex": PDFLATEX}, cache=cache).values()
    assert not ok and "Undefined control sequence" in reason
    assert C.compile_tables(broken, {"x.tex": PDFLATEX}, cache=cache) == {"x.tex": (ok, reason)}
    assert len(compiles) == 1
    assert (ok, reason) == L.compile_table(broken["x.tex"]), "the same message as a fresh compile"


def test_a_timeout_is_not_stored(tmp_path, compiles):
    cache = C.CompileCache(tmp_path)
    texts, engines = {"a.tex": table("A")}, {"a.tex": PDFLATEX}
    ((ok, reason),) = C.compile_tables(texts, engines, cache=cache, timeout=1e-3).values()
    assert not ok and "did not finish within" in reason
    assert C.compile_tables(texts, engines, cache=cache) == {"a.tex": (True, "")}
    assert len(compiles) == 2


def test_the_engine_is_part_of_the_key(tmp_path):
    cache = C.CompileCache(tmp_path)
    cache.put(table("A"), PDFLATEX, ok=False, reason="stored")
    assert cache.get(table("A"), PDFLATEX) == (False, "stored")
    assert cache.get(table("A"), "/elsewhere/pdflatex") is None
    assert C.compile_key(table("A"), PDFLATEX) != C.compile_key(table("B"), PDFLATEX)


@pytest.mark.parametrize("content", ["", "{not json", '{"format": 1, "ok": "yes"}', "[1]"])
def test_an_unreadable_entry_is_a_miss(tmp_path, compiles, content):
    cache = C.CompileCache(tmp_path)
    cache.put(table("A"), PDFLATEX, ok=True, reason="")
    (entry,) = tmp_path.glob("*.json")
    entry.write_text(content)
    assert cache.get(table("A"), PDFLATEX) is None
    assert C.compile_tables({"a": table("A")}, {"a": PDFLATEX}, cache=cache) == {"a": (True, "")}
    assert len(compiles) == 1


def test_an_unwritable_cache_folder_only_loses_the_entry(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = C.CompileCache(blocker / "latex")
    assert C.compile_tables({"a": table("A")}, {"a": PDFLATEX}, cache=cache) == {"a": (True, "")}
    assert cache.get(table("A"), PDFLATEX) is None


def test_independent_compiles_run_concurrently():
    barrier = threading.Barrier(2, timeout=30)
    # Both calls must be inside the function at once, or the barrier times out.
    assert C.map_concurrently(lambda x: (barrier.wait(), x)[1], [1, 2], workers=2) == [1, 2]
    assert C.map_concurrently(lambda x: x * 2, [], workers=2) == []


@pytest.mark.skipif(shutil.which(T.PDFTOPPM) is None, reason="needs pdftoppm")
@pytest.mark.parametrize(
    "text",
    [
        table("A"),
        table(r"\undefinedcommand"),
        table(r"a & b"),  # one column too many
        table(r"\begin{center}"),  # an environment left open
        L.tau_table(pd.DataFrame()),
    ],
)
def test_the_pictures_run_settles_the_verdict_compile_table_gives(text):
    settled = T.typeset_table(text)
    assert settled.compiles == L.compile_table(text)
    assert settled.engine == PDFLATEX
    assert (settled.png is not None) == settled.compiles[0]


@pytest.mark.skipif(shutil.which(T.PDFTOPPM) is None, reason="needs pdftoppm")
def test_a_failure_in_the_pictures_part_leaves_the_verdict_open():
    # Compiles on its own, but the picture's copy defines the (global) counter again.
    text = table(r"\newcounter{once}x")
    assert L.compile_table(text) == (True, "")
    settled = T.typeset_table(text)
    assert settled.png is None and settled.compiles is None
    assert settled.error.startswith("the picture of the table could not be typeset")


# --- a long table in pieces ---------------------------------------------------------------

#: Body lines per piece in these tests: small, so a 60-row table has several pieces.
LINES = 20


def long_flip_table(rows: int = 60, *, mean_1: float = 0.05, wins_1: int = 5) -> str:
    """An emitted flip table of ``rows`` rows over two dataset pairs (a longtable)."""
    flips = pd.DataFrame(
        {
            "model_a": [f"m{i}" for i in range(rows)],
            "model_b": "resnet",
            "dataset_1": ["afib" if i < rows // 2 else "ptbxl" for i in range(rows)],
            "dataset_2": "ltafdb",
            "mean_1": mean_1,
            "lower_1": 0.01,
            "upper_1": 0.09,
            "mean_2": -0.04,
            "lower_2": -0.08,
            "upper_2": -0.01,
            "wins_1": wins_1,
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


def test_a_long_table_compiles_piece_by_piece_and_each_piece_is_cached(tmp_path, compiles):
    table = long_flip_table()
    cache = C.CompileCache(tmp_path)
    texts, engines = {"flip.tex": table}, {"flip.tex": PDFLATEX}
    assert C.compile_tables(texts, engines, cache=cache, chunk_lines=LINES) == {
        "flip.tex": (True, "")
    }
    pieces = [piece for piece, _ in C.check_pieces(table, lines=LINES)]
    assert sorted(compiles) == sorted(pieces)
    assert C.compile_tables(texts, engines, cache=cache, chunk_lines=LINES)["flip.tex"][0]
    assert len(compiles) == len(pieces), "every piece came from the cache"


@pytest.mark.parametrize(
    ("line", "bad", "error"),
    [
        (30, r"\undefinedcommand & x \\", "Undefined control sequence"),
        # Unshielded: LaTeX reads "[" after the "\\" ending the line before as a length.
        (LINES, r"[x] / y & -- & -- & -- & -- & -- & -- \\", "Missing number"),
        # A digit TeX reads as a number: the same line with a 7 instead of the 9 compiles.
        (45, r"\multicolumn{9}{l}{x} \\", "Extra alignment tab"),
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
    first, last = map(int, re.match(r"body lines (\d+)-(\d+) of ", reason).groups())
    assert first <= line + 1 <= last


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


def test_a_long_table_is_checked_on_one_line_of_each_form(tmp_path, compiles):
    """The 60 rows differ only in digits: the check compiles a few lines, in one piece."""
    table = long_flip_table()
    lines = body(table)
    ((piece, where),) = C.check_pieces(table, lines=LINES)
    held = body(piece)
    assert len(held) < len(lines) // 4
    assert {line_form(line) for line in held} == {line_form(line) for line in lines}
    assert set(held) == {line_form(line) for line in lines}, "each line as its form"
    assert where == (
        f"body lines 1-{len(lines)} of {len(lines)}, one line of each form "
        "(as its form: typeset digits as one 0)"
    )
    assert C.compile_tables({"f": table}, {"f": PDFLATEX}, chunk_lines=LINES) == {"f": (True, "")}
    assert compiles == [piece]
    # A table whose body lines all differ in form is cut as long_table_chunks cuts it.
    distinct = table.replace("\n".join(lines), "\n".join(rf"\textbf{{{i}}} \\" for i in range(45)))
    assert C.check_pieces(distinct, lines=LINES) == C.long_table_chunks(distinct, lines=LINES)
    assert len(C.check_pieces(distinct, lines=LINES)) == 3


def test_a_long_table_whose_numbers_changed_is_checked_on_the_same_pieces(tmp_path, compiles):
    """One more run changes the flip table's numbers, not its forms: the cache has the verdict."""
    cache = C.CompileCache(tmp_path)
    before, after = long_flip_table(), long_flip_table(mean_1=0.072, wins_1=4)
    assert before != after
    assert C.check_pieces(before, lines=LINES) == C.check_pieces(after, lines=LINES)
    for table in (before, after):
        verdicts = C.compile_tables({"f": table}, {"f": PDFLATEX}, cache=cache, chunk_lines=LINES)
        assert verdicts == {"f": (True, "")}
    assert len(compiles) == 1, "the second table's piece came from the cache"
