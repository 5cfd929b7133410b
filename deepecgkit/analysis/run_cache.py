"""Memoised run reading and the state of a tree of run directories.

Re-discovering a grid of 100,000 runs should not parse 100,000 metrics files
again when only one run was added. :class:`RunCache` memoises
:func:`~deepecgkit.analysis.aggregation.read_run_metrics` by the path,
modification time (nanoseconds) and size of each run's metrics file, and is
persisted as JSON lines between processes. Keying on the metrics file is
sound because writers put ``classification_metrics.csv`` in place last (see
``write_run_report``): a rewritten run always changes it.

:func:`scan_tree_state` summarises a tree as the sorted (path, mtime, size)
triples of its *readable* runs plus a short digest of them. A sensor stores
only the digest as its cursor (Dagster stores the cursor on every tick, so
the listing itself would be too large) and compares digests to decide
whether anything was added, changed or removed. A run whose metrics file
cannot be read yet (still being written in place by a non-atomic writer) is
listed as pending and left out of the digest, so it changes the digest, and
is picked up, on the tick where it becomes readable.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from deepecgkit.analysis._io import atomic_write_text
from deepecgkit.analysis.aggregation import RunRecord, find_run_directories, read_run_metrics
from deepecgkit.analysis.constants import METRICS_FILENAME

__all__ = ["FileState", "RunCache", "TreeState", "metrics_file_state", "scan_tree_state"]

logger = logging.getLogger(__name__)

#: Hex characters of SHA-256 kept in a tree digest (64 bits: collisions are not a concern).
DIGEST_LENGTH = 16
#: Version of the cache file format; a file of another version is ignored.
CACHE_FORMAT_VERSION = 2


class FileState(NamedTuple):
    """Identity of a run's metrics file: path of the run directory, mtime (ns) and size (bytes)."""

    path: str
    mtime_ns: int
    size: int


def metrics_file_state(run_dir: Path | str) -> FileState | None:
    """The :class:`FileState` of a run's metrics file, or None when it is not a regular file."""
    directory = os.fspath(run_dir)
    try:
        info = os.stat(os.path.join(directory, METRICS_FILENAME))
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return FileState(directory, info.st_mtime_ns, info.st_size)


def _float_or_nan(value: Any) -> float:
    return math.nan if value is None else float(value)


def _record_to_json(record: RunRecord) -> str:
    data = record._asdict()
    data["run_dir"] = str(record.run_dir)
    return json.dumps(data)


def _record_from_json(text: str) -> RunRecord:
    data = json.loads(text)
    data["run_dir"] = Path(data["run_dir"])
    data["metrics"] = {name: _float_or_nan(value) for name, value in data["metrics"].items()}
    return RunRecord(**data)


class _Entry:
    """One cached run: the file state it was read at and its record, parsed on first use.

    A saved cache holds each record as JSON text; decoding 100,000 of them
    costs seconds, and a sensor tick only needs to know *whether* a run was
    readable, so the text is decoded only when the record is asked for.
    """

    __slots__ = ("_record", "_text", "mtime_ns", "readable", "size")

    def __init__(
        self, mtime_ns: int, size: int, record: RunRecord | None, text: str | None = None
    ) -> None:
        self.mtime_ns, self.size = mtime_ns, size
        self._record, self._text = record, text
        self.readable = record is not None or bool(text)

    def record(self) -> RunRecord | None:
        if self._record is None and self._text:
            self._record = _record_from_json(self._text)
        return self._record

    def line(self, path: str) -> str:
        text = self._text if self._record is None else _record_to_json(self._record)
        return f"{json.dumps(path)}\t{self.mtime_ns}\t{self.size}\t{text or ''}"


class RunCache:
    """``read_run_metrics`` memoised by the state of each run's metrics file.

    Use :meth:`read` as the ``reader`` of
    :func:`~deepecgkit.analysis.aggregation.discover_runs`. Unreadable runs
    are cached too, so a corrupt directory is not parsed on every refresh;
    it is parsed again as soon as its metrics file changes.
    """

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def _current(self, state: FileState) -> _Entry | None:
        entry = self._entries.get(state.path)
        if entry is None or entry.mtime_ns != state.mtime_ns or entry.size != state.size:
            return None
        return entry

    def known_readable(self, state: FileState) -> bool | None:
        """Whether the run at ``state`` was readable; None when it must be parsed."""
        entry = self._current(state)
        return None if entry is None else entry.readable

    def read(self, run_dir: Path) -> RunRecord | None:
        """The run's record, parsed only when its metrics file changed since it was cached."""
        state = metrics_file_state(run_dir)
        if state is None:
            self._entries.pop(os.fspath(run_dir), None)
            return None
        entry = self._current(state)
        if entry is not None:
            self.hits += 1
            return entry.record()
        self.misses += 1
        record = read_run_metrics(run_dir)
        # Stored under the state seen *before* parsing: if the file changed in
        # between, the next lookup misses and parses again.
        self._entries[state.path] = _Entry(state.mtime_ns, state.size, record)
        return record

    def prune(self, keep: Iterable[str]) -> None:
        """Forget runs whose directories are no longer in ``keep``."""
        wanted = set(keep)
        for path in [p for p in self._entries if p not in wanted]:
            del self._entries[path]

    def save(self, path: Path | str) -> Path:
        """Write the cache (atomically): a header line, then one tab-separated line per run."""
        lines = [json.dumps({"format": CACHE_FORMAT_VERSION})]
        lines += [entry.line(run_dir) for run_dir, entry in sorted(self._entries.items())]
        return atomic_write_text(path, "\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: Path | str) -> RunCache:
        """Read a saved cache; a missing, foreign or corrupt file gives an empty cache."""
        cache = cls()
        try:
            with open(path, encoding="utf-8") as handle:
                header = json.loads(handle.readline() or "{}")
                if header.get("format") != CACHE_FORMAT_VERSION:
                    return cache
                for line in handle:
                    run_dir, mtime_ns, size, text = line.rstrip("\n").split("\t", 3)
                    cache._entries[json.loads(run_dir)] = _Entry(
                        int(mtime_ns), int(size), None, text or None
                    )
        except FileNotFoundError:
            return cache
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable run cache %s: %s", path, exc)
            return cls()
        return cache


@dataclass(frozen=True)
class TreeState:
    """What a tree of runs looks like now.

    Attributes:
        entries: (path, mtime, size) of every readable run, sorted by path.
        pending: run directories whose metrics file cannot be read (yet).
        digest: short SHA-256 over ``entries``; equal digests mean nothing
            readable was added, changed or removed.
    """

    entries: tuple[FileState, ...]
    pending: tuple[str, ...]
    digest: str


def _digest(entries: Sequence[FileState]) -> str:
    hasher = hashlib.sha256()
    for entry in entries:
        hasher.update(f"{entry.path}\t{entry.mtime_ns}\t{entry.size}\n".encode())
    return hasher.hexdigest()[:DIGEST_LENGTH]


def scan_tree_state(
    roots: Sequence[Path | str] | Path | str,
    *,
    recursive: bool = True,
    cache: RunCache | None = None,
) -> TreeState:
    """Scan ``roots`` and summarise the readable runs as a :class:`TreeState`.

    Only runs whose metrics file is new or changed since ``cache`` saw it are
    parsed, so an unchanged tree costs one ``stat`` per run.
    """
    cache = RunCache() if cache is None else cache
    readable: list[FileState] = []
    pending: list[str] = []
    for run_dir in find_run_directories(roots, recursive=recursive):
        state = metrics_file_state(run_dir)
        known = None if state is None else cache.known_readable(state)
        if known is None and state is not None:
            known = cache.read(run_dir) is not None
        if known:
            readable.append(state)
        else:
            pending.append(str(run_dir))
    readable.sort()
    return TreeState(entries=tuple(readable), pending=tuple(pending), digest=_digest(readable))
