"""Pictures in asset metadata: a table as typeset, a figure as drawn, shown by the Dagster UI.

A researcher checks a table faster from its picture than from its LaTeX
source, so every table asset renders each table it writes to a PNG next to
the ``.tex`` (:func:`deepecgkit.analysis.table_images.render_table_png`) and
every figure asset shows its figure. The UI renders a markdown metadata value
with its images, and a ``data:`` URI keeps the picture inside the event log:
the webserver need not see the output folder, and an old materialisation
keeps showing the table it wrote, not today's file. A picture above
:data:`MAX_EMBEDDED_BYTES` is shrunk for the metadata only (the file keeps its
resolution), so an event stays small in the instance's storage.

Rendering costs a LaTeX run and a rasterisation per table (a second or
more), and a refresh of one dataset rewrites the cross-dataset tables with
mostly unchanged text, so each picture records the SHA-256 of the LaTeX it
shows in a PNG ``tEXt`` chunk (:data:`SOURCE_KEY`); a picture whose recorded
source equals the table's text is kept as it is. A clean build writes the
same chunk, so a kept picture is byte for byte the one a clean build makes.
The engine run that draws a picture also settles the table's compile check
(:func:`~deepecgkit.analysis.table_images.typeset_table`); that verdict goes
to the output folder's compile cache
(:class:`~deepecgkit.analysis.compile_cache.CompileCache`), so the check does
not compile the table again. The pictures of one asset are drawn
concurrently (one engine and rasteriser subprocess per table).

A table that cannot be rendered (no pdflatex or pdftoppm, or LaTeX rejects
it) never fails its asset: the metadata says why there is no picture, and
the picture of an earlier build is removed so it cannot pass for this one.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path

import dagster as dg
from PIL import Image

from deepecgkit.analysis.compile_cache import CompileCache, map_concurrently
from deepecgkit.analysis.latex import LONG_TABLE_ROWS, is_long_table
from deepecgkit.analysis.table_images import (
    TableImageError,
    TableTypesetting,
    missing_tool,
    typeset_table,
)
from deepecgkit.io import atomic_write_bytes, remove_file

#: Metadata key of a table's picture: ``image_<stem>``, the stem of its ``.tex``.
IMAGE_PREFIX = "image_"
#: Metadata key of a figure asset's picture.
FIGURE_KEY = "figure"
#: Largest PNG embedded in metadata; bigger ones are shrunk (about 130 kB of base64).
MAX_EMBEDDED_BYTES = 100_000
#: Each shrinking step scales both sides by this factor.
_SHRINK_FACTOR = 0.8
#: Below this width a picture is no longer legible; it is embedded as it is then.
_MIN_EMBEDDED_WIDTH_PX = 320
_PNG_SUFFIX = ".png"
#: Name ending of a picture's shrunk metadata copy in the compile cache's folder.
_PREVIEW_SUFFIX = ".preview.png"
#: Longest table (characters of LaTeX) drawn as a picture. A flip table of a
#: large sweep runs to thousands of rows (1.3 MB of LaTeX at 20,000 runs): no
#: one reads it as a picture, and typesetting it would take minutes.
MAX_PICTURE_CHARACTERS = 100_000
#: ``tEXt`` keyword of the SHA-256 (hex) of the LaTeX a table's picture shows.
SOURCE_KEY = b"deepecg-table-sha256"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_TEXT_CHUNK = b"tEXt"
_IMAGE_DATA_CHUNK = b"IDAT"


def _chunks(png: bytes):
    """``(type, data, end offset)`` of each chunk of ``png`` up to the image data."""
    offset = len(_PNG_SIGNATURE)
    while offset + 8 <= len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        kind = png[offset + 4 : offset + 8]
        end = offset + 12 + length
        yield kind, png[offset + 8 : offset + 8 + length], end
        if kind == _IMAGE_DATA_CHUNK:
            return
        offset = end


def with_source(png: bytes, source: str) -> bytes:
    """``png`` with a ``tEXt`` chunk recording the SHA-256 of ``source``, after its header."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest().encode("ascii")
    data = SOURCE_KEY + b"\0" + digest
    chunk = struct.pack(">I", len(data)) + _TEXT_CHUNK + data
    chunk += struct.pack(">I", zlib.crc32(_TEXT_CHUNK + data))
    _, _, header_end = next(_chunks(png))
    return png[:header_end] + chunk + png[header_end:]


def shows_source(png: bytes, source: str) -> bool:
    """Whether ``png`` records (:func:`with_source`) that it shows ``source``."""
    if not png.startswith(_PNG_SIGNATURE):
        return False
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest().encode("ascii")
    wanted = SOURCE_KEY + b"\0" + digest
    return any(kind == _TEXT_CHUNK and data == wanted for kind, data, _ in _chunks(png))


def _current_picture(path: Path, source: str) -> bytes | None:
    """The picture at ``path`` when it shows ``source``, else None.

    Only where the table could be drawn again: on a machine without LaTeX a
    clean build has no picture, so a kept one would make the two differ.
    """
    if missing_tool(source) is not None:
        return None
    try:
        png = path.read_bytes()
    except OSError:
        return None
    return png if shows_source(png, source) else None


def embeddable_png(png: bytes, *, max_bytes: int = MAX_EMBEDDED_BYTES) -> bytes:
    """``png`` itself when it has at most ``max_bytes``, else a copy scaled down until it does.

    Scaling stops at :data:`_MIN_EMBEDDED_WIDTH_PX` pixels across, where text
    would be unreadable; that copy is returned even if it is still larger.
    The copy is scaled by ``_SHRINK_FACTOR ** k`` for the first ``k`` that
    fits, tried from one step before the ``k`` its pixel area predicts (a
    PNG of typeset text shrinks about with its area), so a 9-megapixel rank
    table is not resized and encoded four times to find the fifth size; the
    copies are encoded at zlib's default level, not optimised (a metadata
    preview, several times faster to encode, a few per cent larger).
    """
    if len(png) <= max_bytes:
        return png
    with Image.open(io.BytesIO(png)) as original:
        picture = original.copy()
    smaller = png
    width, height = picture.size
    predicted = math.ceil(math.log(max_bytes / len(png)) / math.log(_SHRINK_FACTOR**2))
    skipped = max(0, predicted - 2)
    while len(smaller) > max_bytes and width * _SHRINK_FACTOR >= _MIN_EMBEDDED_WIDTH_PX:
        width, height = round(width * _SHRINK_FACTOR), max(1, round(height * _SHRINK_FACTOR))
        if skipped:
            skipped -= 1
            continue
        buffer = io.BytesIO()
        picture.resize((width, height), Image.Resampling.LANCZOS).save(buffer, format="PNG")
        smaller = buffer.getvalue()
    return smaller


def png_markdown(png: bytes, alt: str, *, cache: CompileCache | None = None) -> dg.MetadataValue:
    """A markdown value showing ``png`` (shrunk by :func:`embeddable_png`) with ``alt`` text.

    With ``cache``, a shrunk copy is kept in its folder under the SHA-256 of
    ``png`` (:func:`_cached_embeddable`), so a kept picture is not shrunk again.
    """
    small = embeddable_png(png) if cache is None else _cached_embeddable(png, cache.folder)
    encoded = base64.b64encode(small).decode("ascii")
    return dg.MetadataValue.md(f"![{_plain(alt)}](data:image/png;base64,{encoded})")


def no_picture(alt: str, reason: str) -> dg.MetadataValue:
    """A markdown value saying that there is no picture of ``alt``, and why.

    The first line of ``reason`` is the sentence; any further lines (LaTeX's
    error lines) follow as a code block.
    """
    first, _, rest = reason.strip().partition("\n")
    detail = f"\n\n```\n{rest}\n```" if rest.strip() else ""
    return dg.MetadataValue.md(f"No picture of the {_plain(alt)}: {first}{detail}")


def figure_metadata(
    path: Path | None, *, alt: str, reason: str = ""
) -> dict[str, dg.MetadataValue]:
    """``{FIGURE_KEY: ...}``: the PNG at ``path``, or ``reason`` when there is none."""
    if path is None:
        return {FIGURE_KEY: no_picture(alt, reason)}
    return {FIGURE_KEY: png_markdown(path.read_bytes(), alt)}


def table_picture_metadata(
    tables: Mapping[str, str],
    *,
    directory: Path,
    titles: Mapping[str, str],
    cache: CompileCache | None = None,
) -> dict[str, dg.MetadataValue]:
    """Render each table to ``<directory>/<stem>.png``; one ``image_<stem>`` value each.

    A picture already there that shows the same LaTeX is kept (see the
    module docstring); the others are drawn concurrently.

    Args:
        tables: LaTeX of one ``table`` environment per file stem.
        directory: The folder of the tables (the PNG goes next to the ``.tex``).
        titles: What each stem's table is, in words (``"flip table"``); the
            picture's alt text is ``"<title> (<stem>.tex)"``.
        cache: Where the compile verdict each drawing settles is stored, for
            the tables' compile checks; None stores nothing.

    Returns:
        ``image_<stem>`` -> the picture, or the reason there is none (then
        any earlier ``<stem>.png`` is removed).
    """
    metadata: dict[str, dg.MetadataValue] = {}
    pictures: dict[str, bytes] = {}
    to_draw: list[str] = []
    for stem in sorted(tables):
        target = directory / picture_name(stem)
        if (reason := _not_pictured(stem, tables[stem])) is not None:
            remove_file(target)
            metadata[stem] = no_picture(_alt(stem, titles), reason)
        elif (png := _current_picture(target, tables[stem])) is not None:
            pictures[stem] = png
        else:
            to_draw.append(stem)
    drawn = map_concurrently(lambda stem: _draw(tables[stem]), to_draw)
    for stem, result in zip(to_draw, drawn, strict=True):
        target = directory / picture_name(stem)
        if isinstance(result, str):
            remove_file(target)
            metadata[stem] = no_picture(_alt(stem, titles), result)
            continue
        if cache is not None and result.compiles is not None:
            ok, reason = result.compiles
            cache.put(tables[stem], result.engine, ok=ok, reason=reason)
        if result.png is None:
            remove_file(target)
            metadata[stem] = no_picture(_alt(stem, titles), result.error)
            continue
        pictures[stem] = with_source(result.png, tables[stem])
        atomic_write_bytes(target, pictures[stem])
    for stem, png in pictures.items():
        metadata[stem] = png_markdown(png, _alt(stem, titles), cache=cache)
    return {f"{IMAGE_PREFIX}{stem}": metadata[stem] for stem in sorted(metadata)}


def _draw(table: str) -> TableTypesetting | str:
    """The typesetting of ``table``, or why it could not start (a program missing, bad text)."""
    try:
        return typeset_table(table)
    except (TableImageError, ValueError) as exc:
        return str(exc)


def _alt(stem: str, titles: Mapping[str, str]) -> str:
    """The alt text of ``<stem>.tex``'s picture: ``"<title> (<stem>.tex)"``."""
    return f"{titles[stem]} ({stem}.tex)"


def _cached_embeddable(png: bytes, folder: Path) -> bytes:
    """:func:`embeddable_png` of ``png``, kept as ``<folder>/<sha256 of png>.preview.png``.

    Shrinking the 9-megapixel rank table of a 20,000-run sweep costs about a
    second, on every materialisation, the picture kept or not; the copy is a
    function of the picture's bytes alone. A copy that cannot be read or
    written is made again, never an error.
    """
    if len(png) <= MAX_EMBEDDED_BYTES:
        return png
    path = folder / f"{hashlib.sha256(png).hexdigest()}{_PREVIEW_SUFFIX}"
    try:
        kept = path.read_bytes()
    except OSError:
        kept = b""
    if kept.startswith(_PNG_SIGNATURE):
        return kept
    small = embeddable_png(png)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, small, durable=False)
    except OSError:
        pass
    return small


def _not_pictured(stem: str, table: str) -> str | None:
    """Why a table gets no picture (too long, or spanning pages), or None when it gets one."""
    if len(table) > MAX_PICTURE_CHARACTERS:
        return (
            f"the table has {table.count(chr(10)) + 1:,} lines, too long to show as "
            f"a picture (at most {MAX_PICTURE_CHARACTERS:,} characters of LaTeX are drawn); "
            f"open {stem}.tex"
        )
    if is_long_table(table):
        return (
            f"the table has more than {LONG_TABLE_ROWS} rows, so it is a longtable that spans "
            f"pages and has no one-page picture; open {stem}.tex"
        )
    return None


def picture_name(stem: str) -> str:
    """File name of the picture of the table ``<stem>.tex``."""
    return f"{stem}{_PNG_SUFFIX}"


def _plain(text: str) -> str:
    """``text`` safe inside markdown's ``[...]`` and on one line."""
    return " ".join(text.replace("[", "(").replace("]", ")").split())
