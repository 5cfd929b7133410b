r"""Tests for ``deepecgkit.analysis.table_images``: tables typeset with the real
pdflatex (or lualatex) and rasterised with the real pdftoppm.

Image sizes are checked by hand: a page is the table's box plus
``BORDER_PT`` on each side, so at ``dpi`` it is ``points / 72.27 * dpi``
pixels across (TeX points; pdftoppm rounds up to whole pixels).
"""

from __future__ import annotations

import io
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from deepecgkit.analysis import latex as L, table_images as T

PDFLATEX = shutil.which("pdflatex")
PDFTOPPM = shutil.which(T.PDFTOPPM)
pytestmark = pytest.mark.skipif(
    PDFLATEX is None or PDFTOPPM is None, reason="needs pdflatex and pdftoppm (poppler-utils)"
)

#: TeX points per inch.
POINTS_PER_INCH = 72.27
#: article's \tabcolsep: the space either side of each column.
TABCOLSEP_PT = 6
#: Pixels of rounding slack (pdftoppm rounds the page up; TeX rounds dimensions).
SLACK_PX = 2
WHITE = 255
#: Darker than this is ink, not anti-aliasing at the edge of the page.
INK = 64


def tiny_table(column: str = "l", cell: str = "cnn", caption: str = "Tiny.") -> str:
    """One booktabs table in the emitters' layout."""
    return "\n".join(
        [
            r"\begin{table}[t]",
            r"\centering",
            r"\small",
            rf"\caption{{{caption}}}",
            r"\label{tab:tiny}",
            rf"\begin{{tabular}}{{{column}}}",
            r"\toprule",
            r"Model \\",
            r"\midrule",
            rf"{cell} \\",
            r"\bottomrule",
            r"\end{tabular}",
            r"\end{table}",
            "",
        ]
    )


def pixels(points: float, dpi: int) -> float:
    return points / POINTS_PER_INCH * dpi


def grey(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        assert image.format == "PNG"
        assert image.mode == "L"
        return np.asarray(image)


def path_with(tmp_path: Path, *programs: str) -> str:
    """A PATH holding links to only ``programs``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for program in programs:
        (folder / program).symlink_to(shutil.which(program))
    return str(folder)


def test_a_narrow_table_is_cropped_to_the_caption_width() -> None:
    values = grey(T.render_table_png(tiny_table()))
    height, width = values.shape
    expected = pixels(T.MIN_CAPTION_WIDTH_PT + 2 * T.BORDER_PT, T.DEFAULT_DPI)
    assert abs(width - expected) <= SLACK_PX
    # Caption line, rules and two rows: a few lines of \small text, not a page.
    assert pixels(40, T.DEFAULT_DPI) < height < pixels(120, T.DEFAULT_DPI)


def test_a_wide_table_sets_the_width_and_keeps_white_borders() -> None:
    # A fixed-width column of 400 pt: the tabular is 400 + 2 * \tabcolsep wide.
    values = grey(T.render_table_png(tiny_table(column="p{400pt}")))
    expected = pixels(400 + 2 * TABCOLSEP_PT + 2 * T.BORDER_PT, T.DEFAULT_DPI)
    assert abs(values.shape[1] - expected) <= SLACK_PX
    border = math.floor(pixels(T.BORDER_PT, T.DEFAULT_DPI)) - 1
    edges = [values[:border], values[-border:], values[:, :border], values[:, -border:]]
    assert all((edge == WHITE).all() for edge in edges), "the border is blank"
    assert values.min() < INK, "the table itself is drawn"


def test_the_resolution_scales_the_image() -> None:
    table = tiny_table()
    low = grey(T.render_table_png(table, dpi=72))
    high = grey(T.render_table_png(table, dpi=144))
    assert abs(high.shape[1] - 2 * low.shape[1]) <= SLACK_PX
    assert abs(high.shape[0] - 2 * low.shape[0]) <= SLACK_PX


def test_an_emitted_results_table_renders_the_same_bytes_twice() -> None:
    frame = pd.DataFrame(
        [
            {"dataset": "afib", "model": model, "metric": "f1", "mean": mean, "n": 5}
            for model, mean in (("cnn", 0.81), ("resnet", 0.77))
        ]
    ).assign(lower_ci=lambda f: f["mean"] - 0.02, upper_ci=lambda f: f["mean"] + 0.02)
    table = L.results_table(frame, "afib")
    first = T.render_table_png(table)
    assert first == T.render_table_png(table)
    assert grey(first).shape[1] > pixels(T.MIN_CAPTION_WIDTH_PT, T.DEFAULT_DPI)


def test_the_grey_raster_equals_pdftoppms_colour_rendering_made_grey(tmp_path) -> None:
    """pdftoppm's ``-gray`` raster (what the renderer reads) is its RGB PNG converted to L."""
    table = tiny_table(cell=r"$\mathcal{N}(0, 1)$ \\ \textit{italic} \\ 0.81")
    (tmp_path / "table.tex").write_text(T._image_document(table), encoding="utf-8")
    subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "table.tex"],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    )
    page = ["-f", "2", "-l", "2", "-singlefile", "-r", str(T.DEFAULT_DPI), "table.pdf"]
    subprocess.run([PDFTOPPM, "-png", *page, "rgb"], cwd=tmp_path, check=True)
    with Image.open(tmp_path / "rgb.png") as colour:
        assert colour.mode == "RGB"
        reference = np.asarray(colour.convert("L"))
    assert np.array_equal(grey(T.render_table_png(table)), reference)


def test_the_picture_is_the_last_page_after_the_checks_copy() -> None:
    # A table taller than a page: the check's copy takes a page of its own (or
    # more) before the picture, which must still be the cropped table.
    rows = "\n".join(f"row {i} \\\\" for i in range(80))
    values = grey(T.render_table_png(tiny_table(cell=rows)))
    assert values.shape[0] > pixels(80 * 8, T.DEFAULT_DPI), "all rows, on one cropped page"
    expected = pixels(T.MIN_CAPTION_WIDTH_PT + 2 * T.BORDER_PT, T.DEFAULT_DPI)
    assert abs(values.shape[1] - expected) <= SLACK_PX


def test_a_table_ending_in_a_comment_still_renders() -> None:
    values = grey(T.render_table_png(tiny_table().rstrip("\n") + "% no line break after me"))
    assert values.min() < INK


@pytest.mark.skipif(L.latex_engine("\u03b1\u6a21") is None, reason="needs lualatex or xelatex")
def test_a_table_pdflatex_cannot_set_renders_with_a_unicode_engine() -> None:
    row = {"dataset": "d", "model": "\u6a21\u578b", "metric": "f1", "mean": 0.5, "n": 5}
    frame = pd.DataFrame([row | {"lower_ci": 0.4, "upper_ci": 0.6}])
    table = L.results_table(frame, "d")
    assert L.needs_unicode_engine(table)
    assert grey(T.render_table_png(table)).min() < INK


def test_nothing_is_left_behind(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    T.render_table_png(tiny_table())
    with pytest.raises(T.TableImageError):
        T.render_table_png(tiny_table(cell=r"\undefinedcommand"))
    assert list(tmp_path.iterdir()) == []


def test_a_table_that_does_not_compile_names_the_latex_error() -> None:
    latex_error = r"(?s)the table does not compile: pdflatex exited with 1:.*Undefined control"
    with pytest.raises(T.TableImageError, match=latex_error):
        T.render_table_png(tiny_table(cell=r"\undefinedcommand"))


def test_time_is_bounded() -> None:
    with pytest.raises(T.TableImageError, match="did not finish within"):
        T.render_table_png(tiny_table(), timeout=1e-3)


def test_without_pdflatex_the_error_is_one_sentence_naming_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", path_with(tmp_path, T.PDFTOPPM))
    with pytest.raises(T.MissingToolError) as caught:
        T.render_table_png(tiny_table())
    message = str(caught.value)
    assert "pdflatex is not on PATH" in message and "\n" not in message
    assert isinstance(caught.value, RuntimeError)


def test_without_pdftoppm_the_error_names_poppler_utils(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", path_with(tmp_path, "pdflatex"))
    with pytest.raises(T.MissingToolError, match="pdftoppm is not on PATH; install poppler-utils"):
        T.render_table_png(tiny_table())


def test_an_engine_that_is_not_there_is_named(tmp_path) -> None:
    with pytest.raises(T.MissingToolError, match="no-such-tex is not on PATH"):
        T.render_table_png(tiny_table(), engine=os.fspath(tmp_path / "no-such-tex"))


@pytest.mark.parametrize(
    ("table", "kwargs", "message"),
    [
        (b"\\begin{table}", {}, "must be LaTeX text"),
        (r"\begin{tabular}{l}x\end{tabular}", {}, "exactly one .* it holds 0"),
        (tiny_table() + tiny_table(), {}, "it holds 2"),
        (tiny_table(), {"dpi": 0}, "dpi must be an integer from 1 to 1200"),
        (tiny_table(), {"dpi": 150.0}, "dpi must be an integer"),
        (tiny_table(), {"dpi": True}, "dpi must be an integer"),
    ],
)
def test_bad_arguments_are_value_errors(table, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        T.render_table_png(table, **kwargs)
