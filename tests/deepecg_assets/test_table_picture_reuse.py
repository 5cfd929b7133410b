"""A table's picture records the LaTeX it shows, and is kept while that LaTeX is unchanged."""

from __future__ import annotations

import io
import os
import shlex
import shutil
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from PIL import Image

from deepecg_assets import metadata_images
from deepecg_assets.assets.tables import compile_check
from deepecg_assets.metadata_images import shows_source, table_picture_metadata, with_source
from deepecg_assets.resources import OutputFolderResource
from deepecgkit.analysis.compile_cache import CompileCache
from deepecgkit.analysis.latex import LONG_TABLE_ROWS, _wrap_table, compile_table, latex_engine
from deepecgkit.analysis.table_images import PDFTOPPM


def _png(size: int = 12) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", (size, size), color=200).save(buffer, format="PNG")
    return buffer.getvalue()


@settings(max_examples=50, deadline=None)
@given(st.text(), st.text())
def test_the_recorded_source_is_the_one_shown(source: str, other: str) -> None:
    png = with_source(_png(), source)
    assert shows_source(png, source)
    assert shows_source(png, other) == (other == source)
    assert not shows_source(_png(), source), "a picture without the chunk shows nothing known"
    with Image.open(io.BytesIO(png)) as picture:
        picture.load()  # still a valid PNG: the chunk's length and CRC are right
        assert picture.size == (12, 12)


def _table(cell: str) -> str:
    return "\\begin{table}\n\\begin{tabular}{l}\n" + cell + "\n\\end{tabular}\n\\end{table}\n"


def test_an_unchanged_table_keeps_its_picture_and_a_changed_one_is_redrawn(
    tmp_path: Path, monkeypatch
) -> None:
    drawn: list[str] = []
    real = metadata_images.typeset_table

    def counted(table: str):  # the real renderer (pdflatex), counted
        drawn.append(table)
        return real(table)

    monkeypatch.setattr(metadata_images, "typeset_table", counted)
    titles = {"flip": "flip table"}
    table_picture_metadata({"flip": _table("A")}, directory=tmp_path, titles=titles)
    first = (tmp_path / "flip.png").read_bytes()
    table_picture_metadata({"flip": _table("A")}, directory=tmp_path, titles=titles)
    assert drawn == [_table("A")] and (tmp_path / "flip.png").read_bytes() == first
    table_picture_metadata({"flip": _table("B")}, directory=tmp_path, titles=titles)
    assert len(drawn) == 2 and shows_source((tmp_path / "flip.png").read_bytes(), _table("B"))


def test_a_drawn_picture_settles_its_check_and_a_failure_is_stored(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache")
    tables = {"good": _table("A"), "bad": _table("\\undefinedcommand")}
    metadata = table_picture_metadata(
        tables, directory=tmp_path, titles=dict.fromkeys(tables, "t"), cache=cache
    )
    engine = latex_engine()
    assert cache.get(tables["good"], engine) == (True, "")
    ok, reason = cache.get(tables["bad"], engine)
    assert not ok and "Undefined control sequence" in reason
    assert (ok, reason) == compile_table(tables["bad"])
    assert "Undefined control sequence" in metadata["image_bad"].value
    assert not (tmp_path / "bad.png").exists()


def test_a_table_too_long_to_read_as_a_picture_gets_none_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "flip.png").write_bytes(_png())  # an earlier build's picture
    long_table = _table("\\\\\n".join(["a"] * (metadata_images.MAX_PICTURE_CHARACTERS // 2)))
    metadata = table_picture_metadata(
        {"flip": long_table}, directory=tmp_path, titles={"flip": "t"}
    )
    assert not (tmp_path / "flip.png").exists(), "an old picture cannot pass for this table"
    assert "too long to show as a picture" in metadata["image_flip"].value


#: A pdflatex that records each call (its working folder) and runs the real one.
_RECORDING_ENGINE = """#!/bin/sh
echo "$PWD" >> {calls}
exec {real} "$@"
"""


@pytest.fixture
def engine_calls(tmp_path: Path, monkeypatch) -> Path:
    """A file listing every pdflatex run, through a recording ``pdflatex`` first on PATH."""
    real = shutil.which("pdflatex")
    if real is None or shutil.which(PDFTOPPM) is None:
        pytest.skip("needs pdflatex and pdftoppm")
    folder, calls = tmp_path / "shim", tmp_path / "pdflatex_calls"
    folder.mkdir()
    shim = folder / "pdflatex"
    shim.write_text(_RECORDING_ENGINE.format(calls=shlex.quote(str(calls)), real=real))
    shim.chmod(0o755)
    calls.write_text("")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return calls


def _runs(calls: Path) -> int:
    return len(calls.read_text().splitlines())


def test_each_table_is_compiled_once_and_not_again_while_its_text_is_unchanged(
    platform, engine_calls: Path
) -> None:
    tables = ["results_tables", "rank_table", "tau_table", "flip_table"]
    assert platform.build().success
    tables_dir = platform.output / "tables"
    for picture in tables_dir.glob("*.png"):
        picture.unlink()
    shutil.rmtree(platform.output / "cache" / "latex")
    engine_calls.write_text("")

    result = platform.materialize(tables)
    assert result.success
    checks = [e for e in result.get_asset_check_evaluations() if e.check_name.endswith("compile")]
    checks += [e for e in result.get_asset_check_evaluations() if "tex_compiles" in e.check_name]
    assert len(checks) == 4 and all(e.passed for e in checks)
    written = sorted(
        p.name
        for p in tables_dir.glob("*.tex")
        if p.stem.startswith(("results_", "rank_", "kendall_", "flip_"))
    )
    assert _runs(engine_calls) == len(written), "one run per table: picture and check together"
    pictures = {p.name: p.read_bytes() for p in tables_dir.glob("*.png")}

    engine_calls.write_text("")
    again = platform.materialize(tables)
    assert again.success
    assert all(e.passed for e in again.get_asset_check_evaluations() if "compile" in e.check_name)
    assert _runs(engine_calls) == 0, "unchanged text: no compile, no picture drawn"
    assert {p.name: p.read_bytes() for p in tables_dir.glob("*.png")} == pictures


def test_a_kept_pictures_metadata_copy_is_shrunk_once(tmp_path: Path, monkeypatch) -> None:
    noise = np.random.default_rng(0).integers(0, 256, size=(600, 600), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(noise).save(buffer, format="PNG")
    big = buffer.getvalue()
    assert len(big) > metadata_images.MAX_EMBEDDED_BYTES
    shrunk: list[int] = []
    real = metadata_images.embeddable_png
    monkeypatch.setattr(
        metadata_images, "embeddable_png", lambda png: shrunk.append(len(png)) or real(png)
    )
    cache = CompileCache(tmp_path / "cache")
    first = metadata_images.png_markdown(big, "t", cache=cache)
    assert metadata_images.png_markdown(big, "t", cache=cache) == first
    assert shrunk == [len(big)], "the second value came from the kept copy"
    assert first == metadata_images.png_markdown(big, "t"), "the same copy as without a cache"


def test_a_cached_failure_still_fails_thecompile_check(tmp_path: Path, engine_calls: Path) -> None:
    output = OutputFolderResource(path=str(tmp_path / "out"))
    broken = output.tables_dir() / "broken.tex"
    broken.parent.mkdir(parents=True)
    broken.write_text(_table("\\undefinedcommand"), encoding="utf-8")
    first = compile_check([broken], output)
    assert _runs(engine_calls) == 1
    again = compile_check([broken], output)
    assert _runs(engine_calls) == 1, "the stored failure answered"
    for result in (first, again):
        assert not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    failures = again.metadata["failures"].value
    assert failures == first.metadata["failures"].value
    assert "Undefined control sequence" in failures["broken.tex"]
    broken.write_text(_table("fixed"), encoding="utf-8")
    assert compile_check([broken], output).passed and _runs(engine_calls) == 2


def test_a_table_that_spans_pages_gets_no_picture_and_says_why(tmp_path: Path) -> None:
    body = ["A \\\\", r"\midrule", *(["a \\\\"] * (LONG_TABLE_ROWS + 1))]
    long_table = _wrap_table(body, "l", "caption", "tab:long")
    metadata = table_picture_metadata(
        {"long": long_table}, directory=tmp_path, titles={"long": "t"}
    )
    assert not (tmp_path / "long.png").exists()
    assert "longtable that spans pages" in metadata["image_long"].value
