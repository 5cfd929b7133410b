r"""Render one emitted LaTeX table to a PNG image, for READMEs and dashboards.

A reader often takes in a table faster from its typeset picture than from its
``.tex`` source, so this module compiles a table exactly as a paper would
show it (the emitters of :mod:`deepecgkit.analysis.latex`, with the engine the
table needs: :func:`~deepecgkit.analysis.latex.latex_engine`) and rasterises
the PDF with ``pdftoppm`` (Debian package ``poppler-utils``).

Cropping without ``pdfcrop`` or the ``standalone`` class (neither ships with
``texlive-latex-recommended``): the document typesets the table twice. The
first pass, with ``\caption`` and ``\label`` swallowed, measures the natural
width of the tabular; the second sets the whole table (caption included) in a
minipage of that width, or of :data:`MIN_CAPTION_WIDTH_PT` when the tabular is
narrower, so the caption wraps to the table instead of to a page. That box is
shipped out on a page exactly its size plus :data:`BORDER_PT` on every side.
The ``table`` float becomes a plain group (a float cannot live in a box), so
``\caption`` still numbers and formats it as a table caption.

Each call works in its own temporary folder, removed afterwards, and every
program runs under a timeout. Neither torch nor Dagster is imported.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from pathlib import Path

from PIL import Image

from deepecgkit.analysis.latex import (
    COMPILED_PDF,
    _engine_executable,
    _missing_engine,
    _run_engine,
    _run_program,
)

__all__ = [
    "BORDER_PT",
    "DEFAULT_DPI",
    "MIN_CAPTION_WIDTH_PT",
    "PDFTOPPM",
    "MissingToolError",
    "TableImageError",
    "render_table_png",
]

#: The rasteriser (poppler-utils).
PDFTOPPM = "pdftoppm"
#: Resolution of the image: 150 dots per inch keeps ``\small`` text legible
#: on a README at about 10 kB per square inch of table.
DEFAULT_DPI = 150
#: White margin around the table, in TeX points.
BORDER_PT = 4
#: Narrowest line a caption is wrapped to, in TeX points (half an article's text width).
MIN_CAPTION_WIDTH_PT = 240
#: Seconds each program (engine, rasteriser) may run.
DEFAULT_TIMEOUT = 60.0
#: Highest resolution accepted: beyond it an ordinary table becomes a very large image.
_MAX_DPI = 1200
_TABLE_BEGIN = r"\begin{table}"
_IMAGE_STEM = "table"
_PNG_SUFFIX = ".png"
_STDERR_TAIL_CHARACTERS = 500
#: Pillow's name of 8-bit greyscale.
_GREY_MODE = "L"

#: The commands around the two copies of the table; ``@`` names stay in the preamble,
#: so the table itself is read with the usual catcodes.
_PREAMBLE = r"""\documentclass{article}
\usepackage{booktabs}
\makeatletter
\newdimen\deepecg@width
\newdimen\deepecg@border
\newbox\deepecg@box
% Pass 1: the float, caption and label reduced to nothing, so the box is the tabular.
\newcommand\DeepecgMeasure{\begingroup
  \renewenvironment{table}[1][]{\ignorespaces}{\unskip}%
  \renewcommand\caption[2][]{\ignorespaces}%
  \renewcommand\label[1]{\ignorespaces}%
  \setbox0=\hbox\bgroup}
\newcommand\DeepecgMeasured{\unskip\egroup
  \global\deepecg@width=\wd0
  \endgroup
  \ifdim\deepecg@width<MIN_WIDTH \global\deepecg@width=MIN_WIDTH\fi}
% Pass 2: the whole table, a float no longer, in a minipage of the measured width.
\newcommand\DeepecgSet{\begingroup
  \renewenvironment{table}[1][]{\def\@captype{table}}{}%
  \global\setbox\deepecg@box=\hbox\bgroup\begin{minipage}{\deepecg@width}}
% The page: exactly the box plus the border (\pagewidth is LuaTeX's name).
\newcommand\DeepecgShip{\end{minipage}\egroup
  \endgroup
  \deepecg@border=BORDER
  \hoffset=-1in \voffset=-1in
  \ifdefined\pdfpagewidth
    \pdfpagewidth=\dimexpr\wd\deepecg@box+2\deepecg@border\relax
    \pdfpageheight=\dimexpr\ht\deepecg@box+\dp\deepecg@box+2\deepecg@border\relax
  \else
    \pagewidth=\dimexpr\wd\deepecg@box+2\deepecg@border\relax
    \pageheight=\dimexpr\ht\deepecg@box+\dp\deepecg@box+2\deepecg@border\relax
  \fi
  \shipout\vbox{\kern\deepecg@border
    \hbox{\kern\deepecg@border\box\deepecg@box\kern\deepecg@border}%
    \kern\deepecg@border}}
\makeatother
\begin{document}
"""


class TableImageError(RuntimeError):
    """A table could not be rendered: LaTeX or the rasteriser failed or ran out of time."""


class MissingToolError(TableImageError):
    """A program the rendering needs (the LaTeX engine or ``pdftoppm``) is not on ``PATH``."""


def _image_document(table: str) -> str:
    """The document that typesets ``table`` on a page cropped to it (see the module docstring)."""
    preamble = _PREAMBLE.replace("MIN_WIDTH", f"{MIN_CAPTION_WIDTH_PT}pt").replace(
        "BORDER", f"{BORDER_PT}pt"
    )
    # Each command on a line of its own: a table ending in a comment cannot swallow one.
    return "\n".join(
        [
            preamble,
            r"\DeepecgMeasure",
            table,
            r"\DeepecgMeasured",
            r"\DeepecgSet",
            table,
            r"\DeepecgShip",
            r"\end{document}",
            "",
        ]
    )


def _check_table(table: object) -> str:
    if not isinstance(table, str):
        raise ValueError(f"table must be LaTeX text (a str), got {type(table).__name__}")
    count = table.count(_TABLE_BEGIN)
    if count != 1:
        raise ValueError(
            f"table must hold exactly one {_TABLE_BEGIN} environment, as an emitter of "
            f"deepecgkit.analysis.latex returns it; it holds {count}"
        )
    return table


def _check_dpi(dpi: object) -> int:
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 1 <= dpi <= _MAX_DPI:
        raise ValueError(f"dpi must be an integer from 1 to {_MAX_DPI}, got {dpi!r}")
    return dpi


def _rasterise(executable: str, workdir: Path, *, dpi: int, timeout: float) -> bytes:
    """The first page of ``<workdir>/table.pdf`` as PNG bytes."""
    command = [executable, "-png", "-r", str(dpi), "-f", "1", "-l", "1", "-singlefile"]
    completed = _run_program([*command, COMPILED_PDF, _IMAGE_STEM], workdir, timeout=timeout)
    if isinstance(completed, str):
        raise TableImageError(completed)
    image = workdir / f"{_IMAGE_STEM}{_PNG_SUFFIX}"
    if completed.returncode != 0 or not image.is_file():
        detail = completed.stderr.decode("utf-8", errors="replace")[-_STDERR_TAIL_CHARACTERS:]
        raise TableImageError(
            f"{PDFTOPPM} exited with {completed.returncode}: {detail.strip() or 'no message'}"
        )
    return _grey_png(image)


def _grey_png(image: Path) -> bytes:
    """``image`` re-encoded as an optimised 8-bit greyscale PNG.

    The emitters use no colour, so the conversion loses nothing, and it keeps
    the flip table of the bundled corpus near 150 kB at 150 dpi (a third of
    pdftoppm's RGB file).
    """
    buffer = io.BytesIO()
    with Image.open(image) as picture:
        picture.convert(_GREY_MODE).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def missing_tool(table: str, *, engine: str | None = None) -> str | None:
    """Why ``table`` cannot be rendered on this machine (a program not on ``PATH``), or None."""
    if _engine_executable(table, engine) is None:
        return f"cannot render the table: {_missing_engine(table, engine)}"
    if shutil.which(PDFTOPPM) is None:
        return f"cannot render the table: {PDFTOPPM} is not on PATH; install poppler-utils"
    return None


def render_table_png(
    table: str,
    *,
    dpi: int = DEFAULT_DPI,
    engine: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> bytes:
    r"""The typeset table as PNG bytes, cropped to the table and its caption.

    Args:
        table: One ``table`` environment as an emitter of
            :mod:`deepecgkit.analysis.latex` returns it (a file holding
            several, such as ``transfer_matrix.tex``, is split by the caller).
        dpi: Resolution; the image is ``(width + 2 * BORDER_PT) / 72.27 * dpi``
            pixels wide, with the width that of the tabular or
            :data:`MIN_CAPTION_WIDTH_PT`, whichever is larger.
        engine: Command or path of the LaTeX engine; default the one the
            table needs (pdflatex, or lualatex/xelatex for characters
            pdflatex cannot set).
        timeout: Seconds each program may run.

    Returns:
        The PNG file's bytes: 8-bit greyscale on a white background.

    Raises:
        ValueError: ``table`` is not text holding exactly one ``table``
            environment, or ``dpi`` is not an integer in 1 ... 1200.
        MissingToolError: The LaTeX engine or ``pdftoppm`` is not on ``PATH``.
        TableImageError: The table does not compile (the message holds the
            LaTeX error), or a program failed or ran past ``timeout``.
    """
    text = _check_table(table)
    resolution = _check_dpi(dpi)
    missing = missing_tool(text, engine=engine)
    if missing is not None:
        raise MissingToolError(missing)
    executable = _engine_executable(text, engine)
    rasteriser = shutil.which(PDFTOPPM)
    with tempfile.TemporaryDirectory(prefix="deepecg-table-image-") as folder:
        workdir = Path(folder)
        ok, reason = _run_engine(executable, _image_document(text), workdir, timeout=timeout)
        if not ok:
            raise TableImageError(f"the table does not compile: {reason}")
        return _rasterise(rasteriser, workdir, dpi=resolution, timeout=timeout)
