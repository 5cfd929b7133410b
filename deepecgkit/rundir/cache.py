"""Memoised run reading and the state of a tree of run directories.

Re-discovering a grid of 100,000 runs should not parse 100,000 metrics files
again when only one run was added. :class:`RunCache` memoises
:func:`~deepecgkit.rundir.read.read_run` by the path,
modification time (nanoseconds) and size of each run's metrics file, and is
persisted as JSON lines between processes. Keying on the metrics file is
sound because writers put ``classification_metrics.csv`` in place last (see
:mod:`deepecgkit.rundir.write`): a rewritten run always changes it.

:func:`scan_tree_state` summarises a tree as the sorted (path, mtime, size)
triples of its *readable* runs plus a short digest of them. A sensor stores
only the digest as its cursor (Dagster stores the cursor on every tick, so
the listing itself would be too large) and compares digests to decide
whether anything was added, changed or removed. A run whose metrics file
cannot be read yet (still being written in place by a non-atomic writer) is
listed as pending and left out of the digest, so it changes the digest, and
is picked up, on the tick where it becomes readable. A metrics file without
its final line break, or whose row is shorter than its header, is such a
file (see :func:`~deepecgkit.rundir.read.read_run`).

The platform recomputes per dataset, so the sensor and the discovery asset
also need the state of each dataset's runs: :meth:`RunCache.dataset_digests`
gives the same short digest per dataset over the runs the cache visited.
Each saved line carries its run's dataset in a field of its own, so a
sensor tick learns every run's dataset without decoding its record.

A warm refresh of the platform wants the records *frame*, whose metrics
column is each record's metrics as JSON text. Each saved line therefore
keeps a record's metrics as a field of its own, exactly the text
``json.dumps`` gave for the parsed metrics, and the header holds the
SHA-256 of the body: when it matches, every line is as :meth:`RunCache.save`
wrote it, and :meth:`RunCache.read_encoded` hands an unchanged run's saved
texts on without decoding its numbers (and :meth:`RunCache.save` writes its
line back as it was). When it does not (a file another tool edited, or
damaged), every record is decoded, checked and encoded again as it is used,
and a damaged line is dropped, its run parsed again: never a wrong record.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from deepecgkit.io import (
    REASON_MISSING,
    UnreadableFileError,
    atomic_write_bytes,
    display_path,
    read_regular_file,
)
from deepecgkit.rundir.format import METRICS_FILENAME
from deepecgkit.rundir.listing import ListingRecord
from deepecgkit.rundir.read import find_run_candidate_paths, read_runs
from deepecgkit.rundir.records import EncodedRecord, RunRecord, UnreadableRun, encoded_record

__all__ = [
    "FileState",
    "RunCache",
    "ScannedRun",
    "TreeState",
    "metrics_file_state",
    "scan_tree_runs",
    "scan_tree_state",
    "tree_state_of",
]

logger = logging.getLogger(__name__)

#: Hex characters of SHA-256 kept in a tree digest (64 bits: collisions are not a concern).
DIGEST_LENGTH = 16
#: Version of the cache file format; a file of another version is ignored. Version 3
#: added unreadable runs' reasons and the records' ``suspect`` notes; version 4 the
#: dataset of each readable run as a field of its own (null for an unreadable run);
#: version 5 the records' ``checkpoint``, each record's metrics text as a field of its
#: own, and the SHA-256 of the body in the header (see :class:`RunCache`).
CACHE_FORMAT_VERSION = 5


#: A run directory's path plus this is its metrics file's path.
_METRICS_SUFFIX = os.sep + METRICS_FILENAME


class FileState(NamedTuple):
    """Identity of a run's metrics file: path of the run directory, mtime (ns) and size (bytes)."""

    path: str
    mtime_ns: int
    size: int


def metrics_file_state(run_dir: Path | str) -> FileState | None:
    """The :class:`FileState` of a run's metrics file, or None when it is not a regular file."""
    directory = os.fspath(run_dir)
    # What os.path.join gives, without its call (one per run of every rescan).
    joined = directory + _METRICS_SUFFIX if directory[-1:] not in ("", os.sep) else None
    try:
        info = os.stat(joined or os.path.join(directory, METRICS_FILENAME))
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return FileState(directory, info.st_mtime_ns, info.st_size)


def _float_or_nan(value: Any) -> float:
    return math.nan if value is None else float(value)


#: Fields of a record saved in its line's record text: all but the directory (the line's
#: key) and the metrics (a field of their own).
_SAVED_FIELDS = tuple(f for f in RunRecord._fields if f not in ("run_dir", "metrics"))
#: The keys of a saved record text, as a set to compare a decoded object's keys with.
_RECORD_KEYS = frozenset(_SAVED_FIELDS)


def _record_texts(record: RunRecord) -> tuple[str, str]:
    """A record's saved record text and metrics text (``json.dumps(record.metrics)``)."""
    data = dict(zip(RunRecord._fields, record, strict=True))
    return json.dumps({field: data[field] for field in _SAVED_FIELDS}), json.dumps(record.metrics)


def _saved_fields(text: str | Any) -> dict[str, Any]:
    """A line's record text decoded (or given decoded); ``ValueError`` and friends if damaged."""
    data = json.loads(text) if isinstance(text, str) else text
    if not isinstance(data, dict) or data.keys() != _RECORD_KEYS:
        raise ValueError(f"a record needs exactly the keys {', '.join(_SAVED_FIELDS)}")
    if not isinstance(data["model"], str) or not isinstance(data["dataset"], str):
        raise ValueError("model and dataset must be strings")
    data["suspect"] = tuple(map(str, data["suspect"]))
    return data


def _record_from_json(text: str, metrics_text: str, run_dir: Path) -> RunRecord:
    """Decode one saved record of the run directory ``run_dir``; ``ValueError`` when damaged.

    Metrics that JSON already decoded as floats are kept as decoded; only a
    null (NaN) or an integer goes through a conversion.
    """
    data = _saved_fields(text)
    metrics = json.loads(metrics_text)
    if not isinstance(metrics, dict):
        raise ValueError("the metrics must be a JSON object")
    if not set(map(type, metrics.values())) <= {float}:
        metrics = {name: _float_or_nan(value) for name, value in metrics.items()}
    return RunRecord(run_dir=run_dir, metrics=metrics, **data)


def _json_string(field: str) -> str | None:
    """A field holding one JSON string, decoded; None when it holds anything else.

    ``json.dumps`` escapes every quote, backslash, control and non-ASCII
    character with a backslash, so between the quotes of a field of
    printable ASCII without a backslash or another quote is the string
    itself; only other fields go through the JSON decoder (100,000 decoder
    calls are a tenth of a second a cache load need not pay).
    """
    inner = field[1:-1]
    if (
        len(field) >= 2
        and field[0] == field[-1] == '"'
        and inner.isascii()
        and inner.isprintable()
        and "\\" not in inner
        and '"' not in inner
    ):
        return inner
    try:
        value = json.loads(field)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _plausible_text(text: str) -> bool:
    """Whether a cached record's text can be whole: a JSON object or a JSON string, no NUL.

    A line cut short (a crash while a foreign tool rewrote the file, a disk
    filling up) loses its closing brace or quote, which this cheap check
    catches without decoding every record at load time.
    """
    if "\0" in text:
        return False
    if text.startswith("{"):
        return text.endswith("}")
    return len(text) >= 2 and text.startswith('"') and text.endswith('"')


class _Entry:
    """One cached run: the file state it was read at and its result, decoded on first use.

    The result is a :class:`RunRecord` or, for a run that could not be read,
    an :class:`UnreadableRun`. A saved cache holds each result as JSON text
    (a record as an object of its fields and its metrics as a second
    object, an unreadable run's reason as a string); decoding 100,000
    records costs seconds, and a sensor tick only needs to know *whether* a
    run was readable and its dataset, so an entry loaded from a file keeps
    its saved ``line`` and decodes it only when the result is asked for.
    ``dataset`` is the record's dataset (None for an unreadable run).
    ``trusted`` says that the line is exactly what :meth:`RunCache.save`
    wrote (the file's checksum matched): only then is its metrics text used
    as it is (:meth:`encoded`) and the line written back as it was
    (:meth:`line`).
    """

    __slots__ = ("_line", "_result", "dataset", "mtime_ns", "readable", "size", "trusted")

    def __init__(
        self,
        mtime_ns: int,
        size: int,
        result: RunRecord | UnreadableRun | None,
        *,
        line: str | None = None,
        dataset: str | None = None,
        readable: bool = False,
        trusted: bool = False,
    ) -> None:
        self.mtime_ns, self.size = mtime_ns, size
        self._result, self._line, self.trusted = result, line, trusted
        if result is not None:
            self.readable = isinstance(result, RunRecord)
            self.dataset = result.dataset if isinstance(result, RunRecord) else None
        else:
            self.readable, self.dataset = readable, dataset

    def saved_texts(self) -> tuple[str, str | None]:
        """The saved result text and metrics text (None for an unreadable run) of a loaded entry."""
        fields = (self._line or "").split("\t")
        return fields[4], (fields[5] if len(fields) == 6 else None)

    def pending(self) -> bool:
        """Whether this is a trusted saved record not decoded yet (see :meth:`encoded`)."""
        return self._result is None and self.trusted and self.readable

    def result(self, run_dir: Path) -> RunRecord | UnreadableRun:
        """The cached result; ``ValueError`` and friends when the saved text is damaged."""
        if self._result is None:
            text, metrics = self.saved_texts()
            if metrics is not None:
                record = _record_from_json(text, metrics, run_dir)
                if record.dataset != self.dataset:
                    raise ValueError("the saved dataset field disagrees with the record")
                self._result = record
            else:
                reason = json.loads(text)
                if not isinstance(reason, str):
                    raise ValueError("an unreadable run's reason must be a string")
                self._result = UnreadableRun(run_dir, reason)
        return self._result

    def encoded(self, run_dir: str) -> EncodedRecord | UnreadableRun:
        """The decoded result with its metrics encoded again (see :class:`EncodedRecord`).

        For every entry but a :meth:`pending` one, whose record text
        :meth:`RunCache.read_encoded` decodes with all the others and whose
        metrics text it uses as saved (``json.dumps`` of the very metrics
        parsed): both give what ``encoded_record(result)`` gives.
        ``ValueError`` and friends when the saved text is damaged.
        """
        return _encoded(self.result(Path(run_dir)))

    def line(self, path: str) -> str:
        """The saved line of this entry for the run directory ``path``.

        A trusted entry loaded from a saved line writes that line back as it
        was, decoded or not: that is what encoding the decoded result would
        give again, and re-encoding 20,000 unchanged records cost a warm
        refresh more than a second. Any other result is encoded (an
        untrusted one decoded first, which raises ``ValueError`` and friends
        when it is damaged).
        """
        if self.trusted and self._line is not None:
            return self._line
        result = self.result(Path(path))
        if isinstance(result, RunRecord):
            text, metrics = _record_texts(result)
        else:
            text, metrics = json.dumps(result.reason), None
        dataset = json.dumps(self.dataset)
        head = f"{json.dumps(path)}\t{self.mtime_ns}\t{self.size}\t{dataset}\t{text}"
        return head if metrics is None else f"{head}\t{metrics}"


def _parse_line(line: str, *, trusted: bool) -> tuple[str, _Entry] | None:
    """One saved line as ``(run directory, entry)``; None when the line is damaged.

    A line is ``path, mtime (ns), size, dataset, result`` separated by tabs,
    each of path, dataset and result as JSON (which escapes tabs and line
    breaks), and for a readable run a sixth field, its metrics as a JSON
    object; the dataset is a string for a readable run and null otherwise.
    ``trusted``: the line is as :meth:`RunCache.save` wrote it, so the
    cheap checks for a line cut short are skipped.
    """
    fields = line.split("\t")
    if len(fields) not in (5, 6) or not (trusted or all(map(_plausible_text, fields[4:]))):
        return None
    path = fields[0]
    if trusted and "\\" not in path and path.isascii():
        # json.dumps wrote it: without an escape, the text between the quotes is the path.
        run_dir: str | None = path[1:-1]
    else:
        run_dir = _json_string(path)
    try:
        mtime_ns, size = int(fields[1]), int(fields[2])
    except ValueError:
        return None
    if run_dir is None:
        return None
    readable = len(fields) == 6
    if readable:
        dataset = _json_string(fields[3])
        if dataset is None or not (fields[4].startswith("{") and fields[5].startswith("{")):
            return None
    elif fields[3] == "null" and fields[4].startswith('"'):
        dataset = None
    else:
        return None
    entry = _Entry(
        mtime_ns, size, None, line=line, dataset=dataset, readable=readable, trusted=trusted
    )
    return run_dir, entry


def _encoded(result: RunRecord | UnreadableRun) -> EncodedRecord | UnreadableRun:
    """A parsed result as :meth:`RunCache.read_encoded` gives it."""
    return encoded_record(result) if isinstance(result, RunRecord) else result


class RunCache:
    """:func:`~deepecgkit.rundir.read.read_run` memoised by the state of each metrics file.

    Use :meth:`read` as the ``reader`` of
    :func:`~deepecgkit.rundir.read.discover_runs`. Unreadable runs
    are cached too, with their reason, so a corrupt directory is not parsed
    on every refresh; it is parsed again as soon as its metrics file changes.

    A cache is never a source of truth: a damaged line of a saved cache is
    dropped (that run is parsed again), a damaged file is ignored and
    rebuilt, and each event is logged with the cache's path. Runs that the
    last scan did not visit are dropped by :meth:`prune_unvisited`.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self._entries: dict[str, _Entry] = {}
        self._visited: set[str] = set()
        self.path = None if path is None else Path(path)
        self.hits = 0
        self.misses = 0
        self.damaged = 0
        #: ``(path, mtime_ns, size)`` of a saved file that holds exactly these entries
        #: (None once an entry is added, replaced or dropped): :meth:`save` need not
        #: write it again.
        self._saved_file: tuple[Path, int, int] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def _current(self, state: FileState) -> _Entry | None:
        self._visited.add(state.path)
        entry = self._entries.get(state.path)
        if entry is None or entry.mtime_ns != state.mtime_ns or entry.size != state.size:
            return None
        return entry

    def _where(self) -> str:
        return "in memory" if self.path is None else display_path(self.path)

    def known_readable(self, state: FileState) -> bool | None:
        """Whether the run at ``state`` was readable; None when it must be parsed."""
        entry = self._current(state)
        return None if entry is None else entry.readable

    def read(self, run_dir: Path) -> RunRecord | UnreadableRun:
        """The run's record (or why it is unreadable), parsed only when its metrics file changed."""
        return self.read_many([run_dir], workers=1)[0]

    def read_many(
        self, run_dirs: Sequence[Path], *, workers: int | None = None
    ) -> list[RunRecord | UnreadableRun]:
        """:meth:`read` of every directory, in order, the misses parsed in parallel when many.

        The misses go to :func:`~deepecgkit.rundir.read.read_runs`, which
        parses them in ``workers`` processes (None: one per available CPU)
        when there are at least
        :data:`~deepecgkit.rundir.read.PARALLEL_MIN_RUNS`; results, counts
        and cache contents are those of calling :meth:`read` on each.
        :func:`~deepecgkit.rundir.read.discover_runs` calls this for a
        ``reader`` that is a cache or its ``read`` method.
        """
        paths = [run_dir if isinstance(run_dir, Path) else Path(run_dir) for run_dir in run_dirs]
        return self._read_all(paths, paths, lambda entry, path: entry.result(path), workers)

    def read_encoded(
        self, run_dirs: Sequence[str], *, workers: int | None = None
    ) -> list[EncodedRecord | UnreadableRun]:
        """:meth:`read_many` of directories given as text, records as :class:`EncodedRecord`.

        What :func:`~deepecgkit.rundir.read.discover_run_frame` asks for:
        each result is ``encoded_record`` of what :meth:`read_many` gives
        (an unreadable run as it is), with the same counts and cache
        contents, but an unchanged run of a trusted saved cache is not
        decoded into numbers (see :meth:`_Entry.encoded`), the record texts
        of all of them are decoded in one call, and no
        :class:`~pathlib.Path` is built for them.
        """
        results = self._read_all(
            run_dirs,
            None,
            lambda entry, key: entry if entry.pending() else entry.encoded(key),
            workers,
            convert=_encoded,
        )
        pending = [number for number, result in enumerate(results) if isinstance(result, _Entry)]
        texts = [results[number].saved_texts() for number in pending]
        try:
            decoded = json.loads("[" + ",".join([text for text, _ in texts]) + "]")
        except ValueError:
            decoded = None
        if not isinstance(decoded, list) or len(decoded) != len(pending):
            decoded = [None] * len(pending)  # each text decoded on its own, damage and all
        again: list[int] = []
        for number, fields, (text, metrics) in zip(pending, decoded, texts, strict=True):
            entry = results[number]
            try:
                data = _saved_fields(text if fields is None else fields)
                if data["dataset"] != entry.dataset or metrics is None:
                    raise ValueError("the saved dataset field disagrees with the record")
                results[number] = EncodedRecord(run_dirs[number], metrics=metrics, **data)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                self.hits -= 1
                self._damage(run_dirs[number], exc)
                again.append(number)
        parsed = read_runs([Path(run_dirs[number]) for number in again], workers=workers)
        for number, outcome in zip(again, parsed, strict=True):
            entry = results[number]
            results[number] = _encoded(outcome)
            self.misses += 1
            self._entries[os.fspath(run_dirs[number])] = _Entry(entry.mtime_ns, entry.size, outcome)
            self._saved_file = None
        return results

    def _read_all(
        self,
        keys: Sequence[str] | Sequence[Path],
        paths: Sequence[Path] | None,
        cached: Callable[[_Entry, Any], Any],
        workers: int | None,
        *,
        convert: Callable[[RunRecord | UnreadableRun], Any] | None = None,
    ) -> list[Any]:
        """Each directory's result: ``cached(entry, key)`` of a hit, parsed (then ``convert``-ed).

        ``keys`` are the directories as the caller gave them, ``paths``
        their :class:`~pathlib.Path` objects (None: built for the misses
        only). A hit whose saved text is damaged is counted, logged and
        parsed again.
        """
        results: list[Any] = []
        misses: list[tuple[int, Path, FileState | None]] = []
        for number, key in enumerate(keys):
            text = os.fspath(key)
            state = metrics_file_state(text)
            result = None
            if state is None:  # not a regular file: never cached, read_run says why
                if self._entries.pop(text, None) is not None:
                    self._saved_file = None
                self._visited.add(text)
            else:
                entry = self._current(state)
                if entry is not None:
                    result = self._decoded(entry, key, cached)
            if result is None:
                path = Path(text) if paths is None else paths[number]
                misses.append((len(results), path, state))
            results.append(result)
        parsed = read_runs([path for _, path, _ in misses], workers=workers)
        for (index, _, state), outcome in zip(misses, parsed, strict=True):
            results[index] = outcome if convert is None else convert(outcome)
            if state is not None:
                # Stored under the state seen *before* parsing: if the file changed in
                # between, the next lookup misses and parses again.
                self.misses += 1
                self._entries[state.path] = _Entry(state.mtime_ns, state.size, outcome)
                self._saved_file = None
        return results

    def _decoded(self, entry: _Entry, key: Any, cached: Callable[[_Entry, Any], Any]) -> Any:
        """``cached(entry, key)`` counted as a hit; None (counted as damage) when it fails."""
        try:
            result = cached(entry, key)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self._damage(key, exc)
            return None
        self.hits += 1
        return result

    def _damage(self, run_dir: Any, exc: Exception) -> None:
        """Count and log a damaged saved record; its run is parsed again."""
        self.damaged += 1
        logger.warning(
            "run cache %s: damaged record of %s dropped (%s); parsing the run again",
            self._where(),
            display_path(run_dir),
            exc,
        )

    def scanned_runs(self, run_dirs: Sequence[str]) -> list[ScannedRun]:
        """What :func:`scan_tree_runs` would have seen of each directory, after a read of them all.

        For directories just looked up by :meth:`read_encoded` (or
        :meth:`read_many`): a directory without a regular metrics file has
        no entry (its state is None), every other one has the state it was
        read at and, when readable, its dataset.
        """
        runs: list[ScannedRun] = []
        entries = self._entries
        for run_dir in run_dirs:
            entry = entries.get(run_dir)
            if entry is None:
                runs.append((run_dir, None, None))
                continue
            state = FileState(run_dir, entry.mtime_ns, entry.size)
            runs.append((run_dir, state, entry.dataset if entry.readable else None))
        return runs

    def prune(self, keep: Iterable[str]) -> None:
        """Forget runs whose directories are no longer in ``keep``."""
        wanted = set(keep)
        for path in [p for p in self._entries if p not in wanted]:
            del self._entries[path]
            self._saved_file = None

    def prune_unvisited(self) -> int:
        """Forget every run not looked up since the cache was created or loaded.

        Call it after a complete scan, before :meth:`save`, so that run
        directories deleted since the last save leave the cache.

        Returns:
            The number of entries dropped.
        """
        before = len(self._entries)
        self.prune(self._visited)
        return before - len(self._entries)

    def _dataset_paths(self) -> dict[str, list[str]]:
        """The visited readable runs' directories by dataset, both sorted (see dataset_states)."""
        groups: dict[str, list[str]] = {}
        entries = self._entries
        for path in self._visited:  # 100,000 runs at every sensor tick: no call per run
            entry = entries.get(path)
            if entry is None or entry.dataset is None or not entry.readable:
                continue
            group = groups.get(entry.dataset)
            if group is None:
                groups[entry.dataset] = group = []
            group.append(path)
        return {dataset: sorted(groups[dataset]) for dataset in sorted(groups)}

    def dataset_states(self) -> dict[str, tuple[FileState, ...]]:
        """The :class:`FileState` of every readable run visited, by dataset.

        Visited are the runs looked up since the cache was created or
        loaded (by :func:`scan_tree_state` or by :meth:`read` as the reader
        of :func:`~deepecgkit.rundir.read.discover_runs`; both look up every
        candidate). Unreadable runs are left out, as from
        :attr:`TreeState.entries`, whose readable runs these are, grouped by
        the dataset named in their metrics file.

        Call it on a cache created or loaded for one complete scan: a cache
        kept across scans still counts a run that vanished after it was
        visited. No record is decoded (a loaded entry knows its dataset from
        its own field of the saved line), so this costs a dictionary lookup
        per run. The price: a scan trusts a saved line whose record is
        damaged but whose dataset field is whole, where discovery, which
        decodes it, parses the run again; the two maps can then differ until
        the cache is saved again (one refresh too many, never a run lost).

        Returns:
            ``{dataset: states}``, datasets sorted by name and each
            dataset's states sorted by path.
        """
        entries = self._entries
        return {
            dataset: tuple(FileState(p, entries[p].mtime_ns, entries[p].size) for p in paths)
            for dataset, paths in self._dataset_paths().items()
        }

    def dataset_digests(self) -> dict[str, str]:
        """The state digest of each dataset's readable runs visited (see :meth:`dataset_states`).

        Each value is what :attr:`TreeState.digest` would be for a tree of
        that dataset's runs alone, so a dataset's digest changes exactly
        when one of its readable runs is added, changed or removed, and a
        dataset without readable runs has no key. The sensor (after
        :func:`scan_tree_state`) and the discovery asset (after
        ``discover_runs(..., reader=cache.read)``) compute the same map for
        the same tree. Keys are sorted.
        """
        entries = self._entries
        return {
            dataset: _digest([(p, entries[p].mtime_ns, entries[p].size) for p in paths])
            for dataset, paths in self._dataset_paths().items()
        }

    def save(self, path: Path | str | None = None) -> Path:
        """Write the cache (atomically): a header line, then one tab-separated line per run.

        Nothing is written when ``path`` already holds exactly these entries:
        the file this cache was loaded from (trusted, no line dropped) or
        last saved to, still at the modification time and size it had then,
        and no entry added, replaced or dropped since. The platform's one-run
        refresh loads a cache its sensor has just saved with that run in it,
        and rewriting 120 MB of it at 100,000 runs cost a second.
        """
        target = self.path if path is None else Path(path)
        if target is None:
            raise ValueError("save() needs a path for a cache that was not loaded from one")
        if self._saved_file is not None and self._saved_file[0] == target:
            try:
                now = os.stat(target)
            except OSError:
                now = None
            if now is not None and (now.st_mtime_ns, now.st_size) == self._saved_file[1:]:
                return target
        lines = []
        for run_dir, entry in sorted(self._entries.items()):
            try:
                lines.append(entry.line(run_dir))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                # An untrusted line that cannot be decoded: left out, its run parsed again.
                logger.warning(
                    "run cache %s: damaged record of %s not saved (%s)",
                    self._where(),
                    display_path(run_dir),
                    exc,
                )
        # One text, one encoding, one joined buffer: at 100,000 runs each copy is 120 MB.
        encoded = "".join([f"{line}\n" for line in lines]).encode()
        del lines
        header = json.dumps({"format": CACHE_FORMAT_VERSION, "sha256": _checksum(encoded)})
        data = b"".join((header.encode(), b"\n", encoded))
        del encoded
        final = atomic_write_bytes(target, data)
        info = os.stat(final)
        self._saved_file = (target, info.st_mtime_ns, info.st_size)
        return final

    @classmethod
    def load(cls, path: Path | str) -> RunCache:
        """Read a saved cache, dropping damaged lines; an unusable file gives an empty cache.

        A missing file is the normal first start (nothing is logged). A file
        of another format version is ignored (logged at info level). A file
        that cannot be read or decoded, whose header is damaged, and each
        damaged line are logged as warnings that name the cache.
        """
        cache = cls(path)
        try:
            data, info = read_regular_file(path)
        except UnreadableFileError as exc:
            if exc.reason != REASON_MISSING:
                logger.warning(
                    "run cache %s cannot be read (%s); rebuilding it", cache._where(), exc.reason
                )
            return cache
        # Header and body decoded from views of the bytes read (no copy of 120 MB).
        end = data.find(b"\n")
        end = len(data) if end < 0 else end
        view = memoryview(data)
        try:
            header, body = str(view[:end], "utf-8"), str(view[end + 1 :], "utf-8")
        except UnicodeDecodeError:
            logger.warning("run cache %s is not UTF-8; rebuilding it", cache._where())
            return cache
        try:
            fields = json.loads(header)
            version = fields.get("format")
        except (ValueError, AttributeError):
            logger.warning("run cache %s has a damaged header; rebuilding it", cache._where())
            return cache
        if version != CACHE_FORMAT_VERSION:
            logger.info(
                "run cache %s has format %r, not %d; rebuilding it",
                cache._where(),
                version,
                CACHE_FORMAT_VERSION,
            )
            return cache
        trusted = fields.get("sha256") == _checksum(view[end + 1 :])
        view.release()
        del data
        if not trusted:
            logger.warning(
                "run cache %s does not match its checksum; every record is checked as it is used",
                cache._where(),
            )
        lines = body.split("\n")
        del body
        for line in lines:
            if not line:
                continue
            parsed = _parse_line(line, trusted=trusted)
            if parsed is None:
                cache.damaged += 1
                continue
            cache._entries[parsed[0]] = parsed[1]
        if cache.damaged:
            logger.warning(
                "run cache %s: %d damaged line(s) dropped; those runs are parsed again",
                cache._where(),
                cache.damaged,
            )
        elif trusted:
            cache._saved_file = (Path(path), info.st_mtime_ns, info.st_size)
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


def _checksum(body: bytes | memoryview) -> str:
    """The SHA-256 (hex) of a saved cache's body, recorded in its header."""
    return hashlib.sha256(body).hexdigest()


def _digest(entries: Iterable[tuple[str, int, int]]) -> str:
    """SHA-256 of one ``path<TAB>mtime<TAB>size<LF>`` line per :class:`FileState`, shortened.

    Hashed as one text: 100,000 ``update`` calls cost more than the hashing.
    """
    text = "".join([f"{path}\t{mtime_ns}\t{size}\n" for path, mtime_ns, size in entries])
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]


#: What a scan saw of one candidate: its directory, its metrics file's state (None when
#: that is no regular file) and its dataset (None when the run is not readable).
ScannedRun = tuple[str, FileState | None, str | None]


def tree_state_of(runs: Sequence[ScannedRun], unlistable: Sequence[str]) -> TreeState:
    """The :class:`TreeState` of a scan's runs and its unlistable directories (display paths).

    Pending are the unlistable directories, then every run that is not
    readable, in the scan's order, as :func:`scan_tree_runs` lists them.
    """
    readable = sorted(state for _, state, dataset in runs if dataset is not None)
    pending = [*unlistable]
    pending += [display_path(d) for d, state, dataset in runs if state is None or dataset is None]
    return TreeState(entries=tuple(readable), pending=tuple(pending), digest=_digest(readable))


def scan_tree_state(
    roots: Sequence[Path | str] | Path | str,
    *,
    recursive: bool = True,
    cache: RunCache | None = None,
) -> TreeState:
    """Scan ``roots`` and summarise the readable runs as a :class:`TreeState`.

    Only runs whose metrics file is new or changed since ``cache`` saw it are
    parsed, so an unchanged tree costs one ``stat`` per run. Pending are the
    runs that cannot be read now (a half-written metrics file among them)
    and the directories that cannot be listed.
    """
    return scan_tree_runs(roots, recursive=recursive, cache=cache)[0]


def scan_tree_runs(
    roots: Sequence[Path | str] | Path | str,
    *,
    recursive: bool = True,
    cache: RunCache | None = None,
    listing: ListingRecord | None = None,
    known: Mapping[str, tuple[int, bool]] | None = None,
) -> tuple[TreeState, list[ScannedRun]]:
    """:func:`scan_tree_state`, and what it saw of every candidate (:data:`ScannedRun`).

    ``listing`` and ``known`` are passed to
    :func:`~deepecgkit.rundir.read.find_run_candidate_paths`; with the
    candidates the listing is what :class:`~deepecgkit.rundir.tree_index.TreeIndex`
    is built from, and ``known`` spares the listings an earlier index proves.
    """
    cache = RunCache() if cache is None else cache
    candidates, problems = find_run_candidate_paths(
        roots, recursive=recursive, listing=listing, known=known
    )
    looked_up: list[tuple[str, FileState | None, bool | None]] = []
    for run_dir in candidates:
        state = metrics_file_state(run_dir)
        looked_up.append((run_dir, state, None if state is None else cache.known_readable(state)))
    misses = [d for d, state, known in looked_up if known is None and state is not None]
    parsed = cache.read_many([Path(run_dir) for run_dir in misses])  # in parallel when many
    now_readable = {
        d for d, result in zip(misses, parsed, strict=True) if isinstance(result, RunRecord)
    }
    runs: list[ScannedRun] = []
    entries = cache._entries
    for run_dir, state, known in looked_up:
        if state is not None and (known or (known is None and run_dir in now_readable)):
            runs.append((run_dir, state, entries[state.path].dataset))
        else:
            runs.append((run_dir, state, None))
    unlistable = [display_path(problem.run_dir) for problem in problems]
    return tree_state_of(runs, unlistable), runs
