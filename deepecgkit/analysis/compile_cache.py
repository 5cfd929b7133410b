"""One LaTeX compile per distinct table text: verdicts stored by content, shared by all callers.

A build compiles every table twice over (its picture, its compile check),
and a refresh of one dataset rewrites the cross-dataset tables with mostly
unchanged text. A compile's verdict is a function of the document and the
engine only, so it is stored under the SHA-256 of both: the engine's path and
the check's document (:func:`~deepecgkit.analysis.latex.standalone_document`)
of the table. Whoever settles a verdict first (the picture's run, which
typesets that same document first, see
:mod:`deepecgkit.analysis.table_images`, or the check itself) records it;
nobody compiles that text with that engine again.

Only settled verdicts are stored (the engine ran to its end: it produced the
document or it named a LaTeX error); a timeout or an engine that could not
start says nothing about the text and is tried again next time. A failure is
stored with its log excerpt, so a cached failure fails a check with the same
message as the compile that found it. Entries are small JSON files written
by the project's atomic writer (:func:`deepecgkit.io.atomic_write_json`); an
entry that cannot be read is a miss, never an error.

Independent compiles run concurrently (:func:`map_concurrently`): each
engine run is a single-threaded subprocess, so threads suffice.

A long table is checked on one body line of each form (:func:`check_pieces`,
:mod:`deepecgkit.analysis.line_forms`: lines that differ only in digits TeX
typesets compile alike), in pieces (:func:`long_table_chunks`). pdfTeX is
single-threaded, and the flip table of a 100,000-run sweep (232,750 rows,
35 MB, 4,969 pages) took 56 s in one run, close to the 60 s timeout, and
70 CPU seconds in pieces; its 233,139 body lines have 220 forms, and the
817 lines that hold every form after every form that precedes one compile
in a third of a second (docs/benchmarks.md, session 21). Pieces of at most
:data:`CHUNK_LINES` body lines are complete documents with the same header,
compiled concurrently on the machine's cores and cached one by one. Each
piece repeats the line before it, so every pair of adjacent lines it checks
is typeset together somewhere (a row that a ``\\`` before it would misread
is still caught). The whole compiles if every piece does because
an emitted body line is a self-contained row, rule or note: names are
escaped (:func:`~deepecgkit.analysis.latex.escape_latex`), so no row can
define a macro, change a catcode or open a group that a later row closes,
and a longtable ships each page out as it fills, so no resource but page
and PDF-object counts grows with the table (4,969 pages used 16,072 of
pdfTeX's 8,388,607 objects). That residual risk, a table far past a
million pages, is the one the pieces do not see; the forms add one
assumption, argued in :mod:`~deepecgkit.analysis.line_forms`: a digit that
TeX typesets (not one it reads as a number) never decides whether a line
compiles. One failing piece fails
the table, with the error lines of that piece and the body lines it holds.

Measured and left out: pdfTeX's ``-draftmode`` saved about 10% of the CPU of
the whole 100,000-run table (it writes no PDF), but it skips reading the font
files, so a check in draft mode would pass a table whose fonts a paper's build
cannot find. A timeout growing with the table's size is not needed either: a
piece is at most :data:`CHUNK_LINES` lines, 1-2 s of work against the 60 s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from deepecgkit.analysis.latex import (
    LONG_TABLE_BODY_START,
    LONG_TABLE_END,
    compile_table_run,
    is_long_table,
    standalone_document,
)
from deepecgkit.analysis.line_forms import representative_forms
from deepecgkit.io import atomic_write_json

__all__ = [
    "CACHE_FORMAT",
    "CHUNK_LINES",
    "CompileCache",
    "check_pieces",
    "compile_key",
    "compile_tables",
    "long_table_chunks",
    "map_concurrently",
]

logger = logging.getLogger(__name__)

#: Version of the entries' layout; an entry of another version is a miss.
CACHE_FORMAT = 1
_ENTRY_SUFFIX = ".json"
_DEFAULT_TIMEOUT = 60.0
#: Body lines of a long table per checked piece: about 107 pages and 1.5 s of
#: pdflatex, against about 0.15 s of start-up per piece. On the 100,000-run flip
#: table (docs/benchmarks.md, session 20) its 47 pieces cost 4% more CPU than the
#: whole table; on 2 cores the concurrent pieces about halve the check's wall time, and
#: on 16 they would keep every core busy for three rounds, where 10,000 lines (24
#: pieces) would leave the second of two rounds half empty.
CHUNK_LINES = 5_000
#: How a piece of representative lines says so in a failure (see :func:`check_pieces`).
_FORMS_NOTE = ", one line of each form (as its form: typeset digits as one 0)"

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def compile_key(table: str, engine: str) -> str:
    """SHA-256 (hex) of ``engine`` (the executable's path) and the check's document of ``table``."""
    digest = hashlib.sha256()
    digest.update(engine.encode("utf-8"))
    digest.update(b"\0")
    digest.update(standalone_document(table).encode("utf-8"))
    return digest.hexdigest()


class CompileCache:
    """Settled compile verdicts in ``folder``, one ``<compile_key>.json`` each.

    Any number of processes may share the folder: an entry is written whole
    (atomic rename) and two writers of one key write the same verdict.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(os.fspath(folder))

    def _path(self, table: str, engine: str) -> Path:
        return self.folder / f"{compile_key(table, engine)}{_ENTRY_SUFFIX}"

    def get(self, table: str, engine: str) -> tuple[bool, str] | None:
        """The stored ``(ok, reason)`` of ``table`` compiled with ``engine``, or None."""
        try:
            entry = json.loads(self._path(table, engine).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if (
            not isinstance(entry, dict)
            or entry.get("format") != CACHE_FORMAT
            or not isinstance(entry.get("ok"), bool)
            or not isinstance(entry.get("reason"), str)
        ):
            return None
        return entry["ok"], entry["reason"]

    def put(self, table: str, engine: str, *, ok: bool, reason: str) -> None:
        """Record a settled verdict; a folder that cannot be written is logged, not raised."""
        entry = {"format": CACHE_FORMAT, "engine": engine, "ok": ok, "reason": reason}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self._path(table, engine), entry, durable=False)
        except OSError as exc:
            logger.warning("compile cache %s not written: %s", self.folder, exc)


def map_concurrently(
    function: Callable[[_Item], _Result], items: Iterable[_Item], *, workers: int | None = None
) -> list[_Result]:
    """``[function(item) for item in items]``, run on up to ``workers`` threads (default: cores).

    For work that waits on subprocesses (an engine, a rasteriser); results
    keep the order of ``items``, and the first exception is raised.
    """
    listed = list(items)
    count = min(len(listed), workers or os.cpu_count() or 1)
    if count <= 1:
        return [function(item) for item in listed]
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(function, listed))


def _long_table_parts(table: str) -> tuple[list[str], list[str], list[str]] | None:
    """``(head, body, tail)`` lines of a long table, or None for any other text.

    The body is the lines between ``\\endlastfoot`` and ``\\end{longtable}``;
    a text without those markers (another table, a file edited by hand) is None.
    """
    if not is_long_table(table):
        return None
    text = table.split("\n")
    try:
        start = text.index(LONG_TABLE_BODY_START) + 1
        end = len(text) - 1 - text[::-1].index(LONG_TABLE_END)
    except ValueError:
        return None
    if end <= start:
        return None
    return text[:start], text[start:end], text[end:]


def _pieces(
    parts: tuple[list[str], list[str], list[str]],
    numbers: list[int],
    *,
    lines: int,
    count: int,
    note: str = "",
) -> list[tuple[str, str]]:
    """The body lines ``numbers`` (0-based, of ``count``) of ``parts`` in pieces of ``lines``."""
    head, body, tail = parts
    return [
        (
            "\n".join([*head, *body[max(0, first - 1) : first + lines], *tail]),
            f"body lines {numbers[first] + 1}-{numbers[min(first + lines, len(body)) - 1] + 1} "
            f"of {count}{note}",
        )
        for first in range(0, len(body), lines)
    ]


def long_table_chunks(table: str, *, lines: int = CHUNK_LINES) -> list[tuple[str, str]]:
    """``table`` as complete tables of at most ``lines`` body lines each, with where each lies.

    A longtable's body (the lines between ``\\endlastfoot`` and
    ``\\end{longtable}``) is cut into pieces of ``lines`` lines; each piece
    keeps everything before the body (comments, header, caption) and after it,
    and starts with the last line of the piece before it. Any other table, a
    body of at most ``lines`` lines, or a text without those markers (a file
    edited by hand) is one piece, the table itself.

    Returns:
        ``(piece, where)`` pairs: ``where`` is ``""`` for the table itself, else
        ``"body lines <first>-<last> of <count>"`` (1-based, the repeated line
        not counted).
    """
    if lines < 1:
        raise ValueError(f"lines must be a positive number of body lines, got {lines!r}")
    parts = _long_table_parts(table)
    if parts is None or len(parts[1]) <= lines:
        return [(table, "")]
    count = len(parts[1])
    return _pieces(parts, list(range(count)), lines=lines, count=count)


def check_pieces(table: str, *, lines: int = CHUNK_LINES) -> list[tuple[str, str]]:
    """What the compile check of ``table`` compiles, as ``(piece, where)`` pairs.

    A long table whose body has lines of one form
    (:func:`~deepecgkit.analysis.line_forms.line_form`) is checked on its
    representative lines (:func:`~deepecgkit.analysis.line_forms.representative_body`:
    every form, after every form that precedes it somewhere), in their order,
    in pieces of at most ``lines`` body lines (:func:`long_table_chunks`'
    layout), each written as its form: typeset digit runs as one ``0``,
    which compiles as the line does by the assumption the forms rest on
    (:mod:`~deepecgkit.analysis.line_forms`). So a table whose numbers
    changed and whose forms did not (the flip table after one more run) is
    checked on the very pieces of before, whose verdicts the cache holds: no
    engine runs. ``where`` then names the first and last original body line a
    piece stands for and says that it holds one line of each form. Any other
    table is checked as :func:`long_table_chunks` cuts it.
    """
    if lines < 1:
        raise ValueError(f"lines must be a positive number of body lines, got {lines!r}")
    parts = _long_table_parts(table)
    if parts is None:
        return [(table, "")]
    head, body, tail = parts
    kept, forms = representative_forms(body)
    if len(kept) == len(body):
        return long_table_chunks(table, lines=lines)
    reduced = (head, forms, tail)
    return _pieces(reduced, kept, lines=lines, count=len(body), note=_FORMS_NOTE)


def compile_tables(
    tables: Mapping[str, str],
    engines: Mapping[str, str],
    *,
    cache: CompileCache | None = None,
    timeout: float = _DEFAULT_TIMEOUT,
    chunk_lines: int = CHUNK_LINES,
) -> dict[str, tuple[bool, str]]:
    """``(ok, reason)`` of each named table with its engine, as ``compile_table`` gives it.

    A long table is compiled as the pieces :func:`check_pieces` gives (one
    line of each form, in pieces of ``chunk_lines``) and compiles when every
    piece does; a failing piece's reason starts with the body lines it holds.
    A verdict in ``cache`` is used as it is; each distinct (text, engine) not
    there, a table or a piece, is compiled once, concurrently with the others,
    and its settled verdict stored.

    Args:
        tables: LaTeX text by name (a file name, a stem).
        engines: Path of the engine for each name of ``tables``.
        cache: Where verdicts are kept; None compiles everything.
        timeout: Seconds each compile (of a table or a piece) may run.
        chunk_lines: Body lines of a long table per piece.
    """
    pieces = {name: check_pieces(tables[name], lines=chunk_lines) for name in tables}
    verdicts: dict[tuple[str, str], tuple[bool, str]] = {}
    missing: dict[tuple[str, str], None] = {}  # insertion-ordered set
    for name in tables:
        for piece, _ in pieces[name]:
            job = (piece, engines[name])
            if job in verdicts or job in missing:
                continue
            stored = cache.get(*job) if cache is not None else None
            if stored is None:
                missing[job] = None
            else:
                verdicts[job] = stored

    def run(job: tuple[str, str]) -> tuple[bool, str]:
        ok, reason, settled = compile_table_run(job[0], engine=job[1], timeout=timeout)
        if settled and cache is not None:
            cache.put(job[0], job[1], ok=ok, reason=reason)
        return ok, reason

    verdicts |= dict(zip(missing, map_concurrently(run, missing), strict=True))
    return {name: _table_verdict(pieces[name], engines[name], verdicts) for name in tables}


def _table_verdict(
    pieces: list[tuple[str, str]],
    engine: str,
    verdicts: Mapping[tuple[str, str], tuple[bool, str]],
) -> tuple[bool, str]:
    """A table's verdict from its pieces': the first failure, named by its body lines."""
    for piece, where in pieces:
        ok, reason = verdicts[(piece, engine)]
        if not ok:
            return False, f"{where}: {reason}" if where else reason
    return True, ""
