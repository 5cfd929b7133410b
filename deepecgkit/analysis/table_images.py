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

One engine run also settles the table's compile check. Before the two
copies, the document is the one
:func:`~deepecgkit.analysis.latex.compile_table` compiles, byte for byte up
to its ``\end{document}`` (so a LaTeX error names the same line); there it
flushes the float with ``\clearpage``, writes :data:`_CHECKED_MARKER` to the
log and only then defines the picture's commands; the picture is the last
page. Hence: the run succeeded, so the table compiles; it failed with no
marker in the log, so the table fails with that error (the engine halts at
the first one, and read nothing but the check's text before it). Only a
failure after the marker (in the picture's part) leaves the check's verdict
open (:attr:`TableTypesetting.compiles` is None then). The caller may store
a settled verdict in a
:class:`~deepecgkit.analysis.compile_cache.CompileCache`, so the check does
not compile that text again.

Each call works in its own temporary folder, removed afterwards, and every
program runs under a timeout. Neither torch nor Dagster is imported.
"""

from __future__ import annotations

import io
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from deepecgkit.analysis.latex import (
    COMPILED_PDF,
    _engine_executable,
    _missing_engine,
    _run_engine,
    _run_program,
    standalone_document,
)

__all__ = [
    "BORDER_PT",
    "DEFAULT_DPI",
    "MIN_CAPTION_WIDTH_PT",
    "PDFTOPPM",
    "MissingToolError",
    "TableImageError",
    "TableTypesetting",
    "render_table_png",
    "typeset_table",
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
#: pdftoppm's name ending for a greyscale raster (``-gray``: binary PGM).
_RASTER_SUFFIX = ".pgm"
_STDERR_TAIL_CHARACTERS = 500
#: Pillow's name of 8-bit greyscale.
_GREY_MODE = "L"
#: Written to the log once the check's copy of the table is typeset and shipped.
_CHECKED_MARKER = "deepecg: the table compiled on its own"
#: The engines' last log line names the pages written (pdfTeX, LuaTeX and XeTeX alike).
_PAGES_WRITTEN = re.compile(r"Output written on \S+ \((\d+) pages?")

#: The commands around the picture's two copies of the table, defined after the
#: check's copy; ``@`` names stay inside this block, so the table itself is read
#: with the usual catcodes.
_DEFINITIONS = r"""\makeatletter
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
"""
#: How the check's document (:func:`~deepecgkit.analysis.latex.standalone_document`) ends.
_DOCUMENT_END = "\\end{document}\n"


class TableImageError(RuntimeError):
    """A table could not be rendered: LaTeX or the rasteriser failed or ran out of time."""


class MissingToolError(TableImageError):
    """A program the rendering needs (the LaTeX engine or ``pdftoppm``) is not on ``PATH``."""


def _image_document(table: str) -> str:
    """The check's copy of ``table``, then ``table`` on a page cropped to it (module docstring)."""
    definitions = _DEFINITIONS.replace("MIN_WIDTH", f"{MIN_CAPTION_WIDTH_PT}pt").replace(
        "BORDER", f"{BORDER_PT}pt"
    )
    check = standalone_document(table)
    # The check's document, byte for byte, up to its \end{document}.
    head = check.removesuffix(_DOCUMENT_END)
    assert head != check, "standalone_document ends with \\end{document}"
    # Each command on a line of its own: a table ending in a comment cannot swallow one.
    return head + "\n".join(
        [
            r"\clearpage",
            rf"\typeout{{{_CHECKED_MARKER}}}",
            definitions,
            # The picture's caption is numbered as the only table of a paper would be.
            r"\setcounter{table}{0}",
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


def _rasterise(executable: str, workdir: Path, *, page: int, dpi: int, timeout: float) -> bytes:
    """Page ``page`` (from 1) of ``<workdir>/table.pdf`` as PNG bytes (see :func:`_grey_png`)."""
    command = [executable, "-gray", "-r", str(dpi), "-f", str(page), "-l", str(page), "-singlefile"]
    completed = _run_program([*command, COMPILED_PDF, _IMAGE_STEM], workdir, timeout=timeout)
    if isinstance(completed, str):
        raise TableImageError(completed)
    image = workdir / f"{_IMAGE_STEM}{_RASTER_SUFFIX}"
    if completed.returncode != 0 or not image.is_file():
        detail = completed.stderr.decode("utf-8", errors="replace")[-_STDERR_TAIL_CHARACTERS:]
        raise TableImageError(
            f"{PDFTOPPM} exited with {completed.returncode}: {detail.strip() or 'no message'}"
        )
    return _grey_png(image)


def _grey_png(image: Path) -> bytes:
    """The 8-bit greyscale raster ``image`` (PGM) encoded as an optimised PNG.

    The emitters use no colour, so greyscale loses nothing, and it keeps the
    flip table of the bundled corpus near 150 kB at 150 dpi (a third of
    pdftoppm's RGB file). pdftoppm writes the grey raster itself
    (``-gray``): on grey content its pixels equal those of its RGB
    rendering converted to greyscale (tested), and it skips compressing a
    colour PNG that would be decoded and thrown away, which took most of the
    rasterising time of a large table (2 of 2.3 s for the 9-megapixel rank
    table of a 20,000-run sweep).
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


@dataclass(frozen=True)
class TableTypesetting:
    """What one engine run of :func:`typeset_table` gave.

    Attributes:
        png: The picture (as :func:`render_table_png` returns it), or None.
        error: Why there is no picture (a :class:`TableImageError` message); "" with one.
        compiles: The ``(ok, reason)`` that
            :func:`~deepecgkit.analysis.latex.compile_table` gives the table
            with the same engine, when this run settled it (module
            docstring), else None (a timeout, or a failure in the picture's part).
        engine: Path of the engine that ran.
    """

    png: bytes | None
    error: str
    compiles: tuple[bool, str] | None
    engine: str


def typeset_table(
    table: str,
    *,
    dpi: int = DEFAULT_DPI,
    engine: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> TableTypesetting:
    """Render ``table`` and settle its compile check in one engine run (module docstring).

    Arguments as :func:`render_table_png`. A table that does not compile,
    or a program that fails, gives a result with no picture, not an exception.

    Raises:
        ValueError: as :func:`render_table_png`.
        MissingToolError: The LaTeX engine or ``pdftoppm`` is not on ``PATH``.
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
        run = _run_engine(executable, _image_document(text), workdir, timeout=timeout)
        checked = _CHECKED_MARKER in run.log
        if not run.ok:
            if checked:
                error = f"the picture of the table could not be typeset: {run.reason}"
                return TableTypesetting(None, error, None, executable)
            compiles = (False, run.reason) if run.settled else None
            error = f"the table does not compile: {run.reason}"
            return TableTypesetting(None, error, compiles, executable)
        pages = _PAGES_WRITTEN.findall(run.log)
        if not pages:
            return TableTypesetting(
                None, "the engine's log names no pages written", (True, ""), executable
            )
        try:
            png = _rasterise(
                rasteriser, workdir, page=int(pages[-1]), dpi=resolution, timeout=timeout
            )
        except TableImageError as exc:
            return TableTypesetting(None, str(exc), (True, ""), executable)
        return TableTypesetting(png, "", (True, ""), executable)


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
    result = typeset_table(table, dpi=dpi, engine=engine, timeout=timeout)
    if result.png is None:
        raise TableImageError(result.error)
    return result.png
