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

from deepecgkit.analysis.latex import compile_table_run, standalone_document
from deepecgkit.io import atomic_write_json

__all__ = [
    "CACHE_FORMAT",
    "CompileCache",
    "compile_key",
    "compile_tables",
    "map_concurrently",
]

logger = logging.getLogger(__name__)

#: Version of the entries' layout; an entry of another version is a miss.
CACHE_FORMAT = 1
_ENTRY_SUFFIX = ".json"
_DEFAULT_TIMEOUT = 60.0

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


def compile_tables(
    tables: Mapping[str, str],
    engines: Mapping[str, str],
    *,
    cache: CompileCache | None = None,
    timeout: float = _DEFAULT_TIMEOUT,
) -> dict[str, tuple[bool, str]]:
    """``(ok, reason)`` of each named table with its engine, as ``compile_table`` gives it.

    A verdict in ``cache`` is used as it is; each distinct (text, engine)
    not there is compiled once, concurrently with the others, and its
    settled verdict stored.

    Args:
        tables: LaTeX text by name (a file name, a stem).
        engines: Path of the engine for each name of ``tables``.
        cache: Where verdicts are kept; None compiles everything.
        timeout: Seconds each compile may run.
    """
    verdicts: dict[tuple[str, str], tuple[bool, str]] = {}
    missing: dict[tuple[str, str], None] = {}  # insertion-ordered set
    for name in tables:
        job = (tables[name], engines[name])
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
    return {name: verdicts[(tables[name], engines[name])] for name in tables}
