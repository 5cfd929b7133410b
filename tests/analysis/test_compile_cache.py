"""Tests for ``deepecgkit.analysis.compile_cache``: one real LaTeX compile per distinct text.

Compiles are counted by wrapping the real ``compile_table_run`` (pdflatex
runs behind it); a verdict the picture's engine run settles must equal the
one ``compile_table`` gives the same table.
"""

from __future__ import annotations

import shutil
import threading

import pandas as pd
import pytest

from deepecgkit.analysis import compile_cache as C, latex as L, table_images as T

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
