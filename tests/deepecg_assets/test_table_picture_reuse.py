"""A table's picture records the LaTeX it shows, and is kept while that LaTeX is unchanged."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import given, settings, strategies as st
from PIL import Image

from deepecg_assets import metadata_images
from deepecg_assets.metadata_images import shows_source, table_picture_metadata, with_source


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
    real = metadata_images.render_table_png

    def counted(table: str) -> bytes:  # the real renderer (pdflatex), counted
        drawn.append(table)
        return real(table)

    monkeypatch.setattr(metadata_images, "render_table_png", counted)
    titles = {"flip": "flip table"}
    table_picture_metadata({"flip": _table("A")}, directory=tmp_path, titles=titles)
    first = (tmp_path / "flip.png").read_bytes()
    table_picture_metadata({"flip": _table("A")}, directory=tmp_path, titles=titles)
    assert drawn == [_table("A")] and (tmp_path / "flip.png").read_bytes() == first
    table_picture_metadata({"flip": _table("B")}, directory=tmp_path, titles=titles)
    assert len(drawn) == 2 and shows_source((tmp_path / "flip.png").read_bytes(), _table("B"))


def test_a_table_too_long_to_read_as_a_picture_gets_none_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "flip.png").write_bytes(_png())  # an earlier build's picture
    long_table = _table("\\\\\n".join(["a"] * (metadata_images.MAX_PICTURE_CHARACTERS // 2)))
    metadata = table_picture_metadata(
        {"flip": long_table}, directory=tmp_path, titles={"flip": "t"}
    )
    assert not (tmp_path / "flip.png").exists(), "an old picture cannot pass for this table"
    assert "too long to show as a picture" in metadata["image_flip"].value
