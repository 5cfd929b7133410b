"""A compact index of a scanned tree, so that a tick with nothing changed lists nothing.

``new_runs_sensor`` asks every minute whether any run was added, changed or
removed. Answering it by a full scan (:func:`~deepecgkit.rundir.cache.scan_tree_state`
through the discovery cache) costs, at 100,000 runs, the load of the 125 MB
cache and a listing of every run directory: seconds per tick for a tree
that almost never changed. A :class:`TreeIndex`, written after a full scan,
holds only what proves the next tick's answer:

- each run's metrics file state (path, mtime in ns, size) and its dataset,
  or that it was unreadable, or that its metrics entry was no regular file;
- each directory whose listing decided the candidates, with its change
  time read *before* it was listed and a signature of what the listing
  held (:mod:`deepecgkit.rundir.listing`);
- every symbolic link met, with its target; the directories that could not
  be listed; the roots with their targets; the tree's digest and pending runs.

:meth:`TreeIndex.unchanged` then proves the tree is as the index saw it with
one ``stat`` per listed directory and one per metrics file, and no listing:

- a directory whose change time is unchanged has the same listing,
  *unless* that time was within :data:`SAFETY_WINDOW_NS` of the moment the
  index recorded it: file systems stamp times at a granularity (a clock
  tick of a few milliseconds on ext4, two seconds on FAT), so a second
  change in the same tick would leave the stamp as it was. Such a directory
  (and any whose stamp moved) is listed again, and must give the same
  signature. Writers put ``classification_metrics.csv`` in place by rename,
  which moves the run directory's change time;
- an edit of a metrics file in place does not touch its directory, so every
  known metrics file is ``stat``-ed and its (mtime, size) compared, exactly
  the state a full scan compares; a run that was unreadable is unreadable
  still while its state is the same (the cache the full scan would consult
  is keyed by the same state);
- every link is resolved again, every problem directory tried again.

Anything else (or an index that is missing, damaged, of another format, or
for other roots) is "not proven": the caller takes the full path, whose
answer is the definition, and writes a new index. The index never makes a
tick say "unchanged" where a full scan would have seen a change; it can only
make the full path run when it was not needed.

The file is one header line (format, kind, the cache format it agrees with,
SHA-256 of the body) and one JSON line of parallel lists; it is written
atomically and need not survive a crash (a damaged one is rebuilt).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from deepecgkit.io import (
    REASON_MISSING,
    UnreadableFileError,
    atomic_write_text,
    display_path,
    read_regular_file,
)
from deepecgkit.rundir.cache import (
    CACHE_FORMAT_VERSION,
    FileStates,
    RunCache,
    ScannedRun,
    TreeState,
    entry_digests,
    scan_tree_runs,
    tree_state_of,
)
from deepecgkit.rundir.format import METRICS_FILENAME
from deepecgkit.rundir.listing import (
    UNKNOWN_STAMP,
    WALKED_LISTING,
    ListingRecord,
    directory_signature,
    directory_target,
    problem_persists,
)

__all__ = [
    "SAFETY_WINDOW_NS",
    "TREE_INDEX_FORMAT",
    "TreeIndex",
    "TreeSummary",
    "indexed_tree_state",
]

logger = logging.getLogger(__name__)

#: Version of the index file; a file of another version is ignored and rebuilt.
TREE_INDEX_FORMAT = 1
#: What the header calls the file, so that a foreign JSON file is not mistaken for one.
TREE_INDEX_KIND = "deepecg tree index"
#: A directory whose change time is less than this much older than the moment the index
#: recorded it is listed again (nanoseconds): a later change within the file system's
#: timestamp granularity (up to 2 s, FAT's) could leave the time unchanged.
SAFETY_WINDOW_NS = 2_000_000_000
#: Body fields of the index file, all required.
_FIELDS = frozenset(
    {
        "roots",
        "recursive",
        "root_targets",
        "window_ns",
        "directories",
        "stamps",
        "signatures",
        "untrusted",
        "links",
        "link_targets",
        "problems",
        "runs",
        "mtimes",
        "sizes",
        "dataset_names",
        "run_datasets",
        "irregular",
        "digest",
        "readable",
        "pending",
    }
)
#: Groups of fields that are parallel lists (one element per directory, link or run).
_PARALLEL = (
    ("directories", "stamps", "signatures"),
    ("links", "link_targets"),
    ("runs", "mtimes", "sizes", "run_datasets"),
)
#: ``run_datasets`` value of a run that was not readable.
_UNREADABLE = -1


class TreeSummary(NamedTuple):
    """What a tick reports of an unchanged tree (the fields of a :class:`TreeState` it uses).

    Attributes:
        digest: :attr:`TreeState.digest`.
        readable: the number of readable runs (``len(TreeState.entries)``).
        pending: :attr:`TreeState.pending`.
    """

    digest: str
    readable: int
    pending: tuple[str, ...]


def _normalised_roots(roots: Sequence[Path | str] | Path | str) -> list[str]:
    """The roots as :func:`~deepecgkit.rundir.read.find_run_candidate_paths` names them."""
    if isinstance(roots, (str, os.PathLike)):
        roots = [roots]
    return [os.fspath(Path(root)) for root in roots]


def _metrics_paths(run_dirs: Sequence[str]) -> list[str]:
    """``os.path.join(run_dir, METRICS_FILENAME)`` of each, without a call per run."""
    suffix = os.sep + METRICS_FILENAME
    return [d + METRICS_FILENAME if d.endswith(os.sep) else d + suffix for d in run_dirs]


class TreeIndex:
    """What a full scan saw of a tree, and the proof that a later tree is the same.

    Build one with :func:`indexed_tree_state` (or :meth:`from_scan`), keep it
    with :meth:`save`, and on the next tick call :meth:`unchanged` on the
    result of :meth:`load`. The fields are those of the file (see the module
    docstring); they are plain lists so that loading 100,000 runs costs one
    JSON decode.
    """

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields
        self._metrics: list[str] | None = None
        #: Every listed directory's change time as the last proof read it (before any
        #: listing), or None: what :meth:`known_listings` says is current.
        self._read_stamps: list[int] | None = None
        #: Whether :meth:`unchanged` re-listed directories and updated their stamps:
        #: saving the index then spares the next tick the same listings.
        self.refreshed = False
        #: SHA-256 of the body this index was last saved as or loaded from (None before
        #: either): names one saved scan, so a run requested for it can ask for it.
        self.checksum: str | None = None

    @property
    def digest(self) -> str:
        return self._fields["digest"]

    @property
    def window_ns(self) -> int:
        return self._fields["window_ns"]

    def dataset_digests(self) -> dict[str, str]:
        """The state digest of each dataset's readable runs, as this index's scan saw them.

        What :meth:`~deepecgkit.rundir.cache.RunCache.dataset_digests` gave
        after that scan: the index keeps every regular run's metrics file
        state and the dataset the scan read for it (none for an unreadable
        run), and both hash through :func:`~deepecgkit.rundir.cache.entry_digests`.
        So the change tick that saved this index, and a discovery that takes
        its scan (:meth:`recorded_candidates`), get the digests of that scan
        without the run cache's pass over every visited run (a fifth of a
        second at 100,000 runs).
        """
        fields = self._fields
        names = fields["dataset_names"]
        datasets = [None if n == _UNREADABLE else names[n] for n in fields["run_datasets"]]
        return entry_digests((fields["runs"], fields["mtimes"], fields["sizes"], datasets))

    def summary(self) -> TreeSummary:
        """The scan's digest, readable count and pending runs."""
        fields = self._fields
        return TreeSummary(fields["digest"], fields["readable"], tuple(fields["pending"]))

    @classmethod
    def from_scan(
        cls,
        listing: ListingRecord,
        state: TreeState,
        runs: Sequence[ScannedRun],
        *,
        recursive: bool,
        safety_window_ns: int = SAFETY_WINDOW_NS,
    ) -> TreeIndex:
        """The index of one scan: its listing record, its state and what it saw of each run.

        Args:
            listing: filled by the scan (:func:`~deepecgkit.rundir.cache.scan_tree_runs`).
            state: the scan's :class:`TreeState`.
            runs: the scan's candidates (:data:`~deepecgkit.rundir.cache.ScannedRun`).
            recursive: the scan's mode.
            safety_window_ns: see :data:`SAFETY_WINDOW_NS` (tests shorten it).
        """
        regular = [(path, s, dataset) for path, s, dataset in runs if s is not None]
        names = sorted({dataset for _, _, dataset in regular if dataset is not None})
        position = {name: number for number, name in enumerate(names)}
        started = listing.started_ns
        fields = {
            "roots": list(listing.roots),
            "recursive": recursive,
            "root_targets": list(listing.root_targets),
            "window_ns": safety_window_ns,
            "directories": list(listing.directories),
            "stamps": list(listing.stamps),
            "signatures": list(listing.signatures),
            "untrusted": [
                number
                for number, stamp in enumerate(listing.stamps)
                if stamp == UNKNOWN_STAMP or started - stamp < safety_window_ns
            ],
            "links": list(listing.links),
            "link_targets": list(listing.links.values()),
            "problems": [list(problem) for problem in listing.problems],
            "runs": [s.path for _, s, _ in regular],
            "mtimes": [s.mtime_ns for _, s, _ in regular],
            "sizes": [s.size for _, s, _ in regular],
            "dataset_names": names,
            "run_datasets": [
                _UNREADABLE if dataset is None else position[dataset] for _, _, dataset in regular
            ],
            "irregular": [path for path, s, _ in runs if s is None],
            "digest": state.digest,
            "readable": len(state.entries),
            "pending": list(state.pending),
        }
        return cls(fields)

    @classmethod
    def from_discovery(
        cls,
        listing: ListingRecord,
        cache: RunCache,
        *,
        recursive: bool,
        safety_window_ns: int = SAFETY_WINDOW_NS,
    ) -> TreeIndex:
        """The index of a discovery's scan: the one a sensor's full scan of that tree would write.

        ``listing`` was filled by the discovery's scan
        (:func:`~deepecgkit.rundir.read.discover_run_frame`), and ``cache``
        has just read every candidate; the runs' states and datasets are the
        cache's (:meth:`~deepecgkit.rundir.cache.RunCache.scanned_runs`), so
        no metrics file is looked at again.
        """
        runs = cache.scanned_runs(listing.candidates)
        state = tree_state_of(runs, listing.unlistable)
        return cls.from_scan(
            listing, state, runs, recursive=recursive, safety_window_ns=safety_window_ns
        )

    def same_as(self, other: TreeIndex | None) -> bool:
        """Whether ``other`` records exactly what this index records (its file would be equal).

        The discovery asset builds the index of its scan and compares it with
        the one it loaded (the sensor's, of the same tree, in a refresh):
        when they are equal the saved file already says it, and is not written
        again.
        """
        return other is not None and self._fields == other._fields

    def known_listings(
        self, roots: Sequence[Path | str] | Path | str, *, recursive: bool
    ) -> dict[str, tuple[int, bool, bool]]:
        """The leaf directories a recursive scan of ``roots`` need not list again.

        ``{directory: (stamp, holds_metrics, current)}`` of every directory
        this index recorded with no subdirectory and no link (a run
        directory, nearly always) whose stamp was old enough to trust (see
        :data:`SAFETY_WINDOW_NS`): while its change time is that stamp, its
        listing is the recorded one (see the module docstring), which is what
        the ``known`` argument of
        :func:`~deepecgkit.rundir.read.find_run_candidate_paths` takes.
        ``current`` is True where the last :meth:`unchanged` of this index
        (which failed, so a scan follows) read every directory's change time
        and this one's was the stamp: the scan need not read it again. That
        time was read before any listing of the scan, as the scan's own read
        would have been, and a directory changed since has a new time that
        the next proof sees. Empty
        (list everything) for a flat scan, other roots or mode, or when a root
        or a recorded link points elsewhere now: a path then may name another
        directory, whose stamp proves nothing about the recorded one.
        """
        fields = self._fields
        try:
            roots = _normalised_roots(roots)
            if not recursive or roots != fields["roots"] or recursive != fields["recursive"]:
                return {}
            if [directory_target(root) for root in roots] != fields["root_targets"]:
                return {}
            if [directory_target(link) for link in fields["links"]] != fields["link_targets"]:
                return {}
            untrusted = set(fields["untrusted"])
            leaves = {WALKED_LISTING + "m": True, WALKED_LISTING + "-": False}
            read = self._read_stamps or [None] * len(fields["directories"])
            return {
                path: (stamp, leaves[signature], now == stamp)
                for number, (path, stamp, signature, now) in enumerate(
                    zip(
                        fields["directories"],
                        fields["stamps"],
                        fields["signatures"],
                        read,
                        strict=True,
                    )
                )
                if signature in leaves and stamp != UNKNOWN_STAMP and number not in untrusted
            }
        except (TypeError, ValueError, AttributeError, IndexError, KeyError) as exc:
            logger.warning("tree index is damaged (%s); listing every directory", exc)
            return {}

    # --- the proof ------------------------------------------------------------------------

    def unchanged(
        self, roots: Sequence[Path | str] | Path | str, *, recursive: bool
    ) -> TreeSummary | None:
        """The summary of the tree under ``roots`` if it is provably as indexed, else None.

        None means "take the full path", never "changed": a change seen
        anywhere stops the proof at once. Costs one ``stat`` per listed
        directory and per metrics file, plus a listing of each directory
        whose stamp moved or is too recent to trust (see the module
        docstring). A directory re-listed with the same signature gets its
        new stamp, and :attr:`refreshed` is set so the caller can save it.
        """
        try:
            return self._unchanged(_normalised_roots(roots), recursive)
        except (TypeError, ValueError, AttributeError, IndexError, KeyError) as exc:
            # Only a foreign or damaged file whose checksum still matched gets here.
            logger.warning("tree index is damaged (%s); scanning in full", exc)
            return None

    def unchanged_candidates(
        self, roots: Sequence[Path | str] | Path | str, *, recursive: bool
    ) -> FileStates | None:
        """Every candidate run directory's metrics file state, if the tree is provably as indexed.

        What a scan of ``roots`` would find, without the scan: the candidates
        in the scan's order (:func:`~deepecgkit.rundir.read.find_run_candidate_paths`),
        each with the state :meth:`unchanged` has just found its metrics file
        in. None (take the scan) whenever :meth:`unchanged` says so, and also
        for an index that recorded a directory that could not be listed or a
        metrics entry that is no regular file: the scan reports those with
        reasons the index does not keep, and an irregular entry has no state
        to give, so its place among the candidates is not recorded.
        """
        recorded = self.recorded_candidates()
        if recorded is None or self.unchanged(roots, recursive=recursive) is None:
            return None
        return recorded

    def recorded_candidates(self) -> FileStates | None:
        """The candidates and metrics file states the scan of this index found, unproven.

        What :meth:`unchanged_candidates` gives once the tree is proven, as of
        the scan instead of now: for a caller that wants that very scan (a
        discovery the sensor's tick requested right after it saved this index,
        see :attr:`checksum`), not the tree's present state. A change since the
        scan is the next tick's: its proof fails on it, it scans, and its digest
        differs from the one this scan gave. None where the scan met a
        directory that could not be listed or an irregular metrics entry (as
        :meth:`unchanged_candidates`).
        """
        fields = self._fields
        try:
            if fields["problems"] or fields["irregular"]:
                return None
            return FileStates(fields["runs"], fields["mtimes"], fields["sizes"])
        except (TypeError, ValueError) as exc:
            logger.warning("tree index is damaged (%s); scanning in full", exc)
            return None

    def _unchanged(self, roots: list[str], recursive: bool) -> TreeSummary | None:
        fields = self._fields
        if roots != fields["roots"] or recursive != fields["recursive"]:
            return None
        if [directory_target(root) for root in roots] != fields["root_targets"]:
            return None
        checked_ns = time.time_ns()  # before any stamp is read: see _relisted
        relisted = self._relisted(checked_ns)
        if relisted is None:
            return None
        if [directory_target(link) for link in fields["links"]] != fields["link_targets"]:
            return None
        if not all(problem_persists(kind, path) for kind, path in fields["problems"]):
            return None
        if not self._metrics_unchanged():
            return None
        self._accept(relisted, checked_ns)
        return self.summary()

    def _relisted(self, checked_ns: int) -> dict[int, int] | None:
        """``{directory number: new stamp}`` of the directories listed again; None on a change.

        ``checked_ns`` was read before the stamps, so a stamp at least the
        safety window older than it cannot be repeated by a later change.
        """
        fields = self._fields
        directories, recorded = fields["directories"], fields["stamps"]
        stat_path = os.stat
        self._read_stamps = None
        try:
            stamps = [stat_path(path).st_ctime_ns for path in directories]
        except OSError:  # a listed directory vanished (or cannot be reached any more)
            return None
        self._read_stamps = stamps
        suspects = set(fields["untrusted"])
        if stamps != recorded:
            suspects.update(
                number
                for number, (now, then) in enumerate(zip(stamps, recorded, strict=True))
                if now != then
            )
        signatures = fields["signatures"]
        for number in sorted(suspects):
            path = directories[number]
            if directory_signature(path, signatures[number]) != signatures[number]:
                return None
        return {number: stamps[number] for number in suspects}

    def _metrics_unchanged(self) -> bool:
        """Whether every metrics file has its recorded state, and the irregular ones stay so."""
        fields = self._fields
        if self._metrics is None:
            self._metrics = _metrics_paths(fields["runs"])
        try:
            infos = list(map(os.stat, self._metrics))  # one stat per run, nothing else
        except OSError:
            return False
        if [info.st_mtime_ns for info in infos] != fields["mtimes"]:
            return False
        if [info.st_size for info in infos] != fields["sizes"]:
            return False
        if not all(map(stat.S_ISREG, [info.st_mode for info in infos])):
            return False
        for metrics in _metrics_paths(fields["irregular"]):
            try:
                mode = os.stat(metrics).st_mode
            except OSError:
                mode = None
            if (mode is not None and stat.S_ISREG(mode)) or not os.path.lexists(metrics):
                return False
        return True

    def _accept(self, relisted: dict[int, int], checked_ns: int) -> None:
        """Record the new stamps of directories listed again with an unchanged signature."""
        if not relisted:
            return
        fields = self._fields
        stamps, window = fields["stamps"], fields["window_ns"]
        untrusted = set(fields["untrusted"]) - set(relisted)
        untrusted.update(
            number for number, stamp in relisted.items() if checked_ns - stamp < window
        )
        changed = any(stamps[number] != stamp for number, stamp in relisted.items())
        if changed or sorted(untrusted) != fields["untrusted"]:
            for number, stamp in relisted.items():
                stamps[number] = stamp
            fields["untrusted"] = sorted(untrusted)
            self.refreshed = True

    # --- the file -------------------------------------------------------------------------

    def save(self, path: Path | str) -> Path:
        """Write the index atomically (not synced: a lost or damaged index is rebuilt)."""
        body = json.dumps(self._fields, separators=(",", ":"))
        checksum = hashlib.sha256(body.encode("ascii")).hexdigest()
        header = json.dumps(
            {
                "format": TREE_INDEX_FORMAT,
                "kind": TREE_INDEX_KIND,
                "cache_format": CACHE_FORMAT_VERSION,
                "sha256": checksum,
            }
        )
        self.refreshed = False
        written = atomic_write_text(path, f"{header}\n{body}\n", durable=False)
        self.checksum = checksum
        return written

    @classmethod
    def load(
        cls, path: Path | str, *, safety_window_ns: int = SAFETY_WINDOW_NS
    ) -> TreeIndex | None:
        """The saved index, or None when there is none that can be used (logged, not raised).

        Missing is the normal first start. Another format, kind or cache
        format, or a safety window shorter than ``safety_window_ns``, is
        foreign (logged at info level); an unreadable file, a checksum that
        does not match and a body without the expected fields are damage
        (warnings). Either way the caller scans in full and saves a new one.
        """
        where = display_path(path)
        try:
            data, _ = read_regular_file(path)
        except UnreadableFileError as exc:
            if exc.reason != REASON_MISSING:
                logger.warning("tree index %s cannot be read (%s); rebuilding", where, exc.reason)
            return None
        head, _, body = data.partition(b"\n")
        body = body.rstrip(b"\n")
        try:
            header = json.loads(head)
            known = (
                isinstance(header, dict)
                and header.get("kind") == TREE_INDEX_KIND
                and header.get("format") == TREE_INDEX_FORMAT
                and header.get("cache_format") == CACHE_FORMAT_VERSION
            )
        except ValueError:
            known, header = False, None
        if not known:
            logger.info("tree index %s is of another format; rebuilding it", where)
            return None
        if hashlib.sha256(body).hexdigest() != header.get("sha256"):
            logger.warning("tree index %s is damaged (checksum); rebuilding it", where)
            return None
        try:
            fields = json.loads(body)
        except ValueError:
            fields = None
        problem = _field_problem(fields)
        if problem is not None:
            logger.warning("tree index %s is damaged (%s); rebuilding it", where, problem)
            return None
        if fields["window_ns"] < safety_window_ns:
            logger.info("tree index %s used a shorter safety window; rebuilding it", where)
            return None
        index = cls(fields)
        index.checksum = header["sha256"]
        return index


def _field_problem(fields: Any) -> str | None:
    """What is wrong with a decoded index body, or None when its shape is right."""
    if not isinstance(fields, dict) or set(fields) != _FIELDS:
        return "not the expected fields"
    for group in _PARALLEL:
        if not all(isinstance(fields[name], list) for name in group):
            return f"{', '.join(group)} must be lists"
        if len({len(fields[name]) for name in group}) != 1:
            return f"{', '.join(group)} differ in length"
    for name in ("roots", "root_targets", "untrusted", "problems", "dataset_names", "irregular"):
        if not isinstance(fields[name], list):
            return f"{name} must be a list"
    if not isinstance(fields["pending"], list) or not isinstance(fields["digest"], str):
        return "pending must be a list and digest a string"
    for name in ("readable", "window_ns"):
        if not isinstance(fields[name], int) or isinstance(fields[name], bool):
            return f"{name} must be an integer"
    if not isinstance(fields["recursive"], bool):
        return "recursive must be true or false"
    return None


def indexed_tree_state(
    roots: Sequence[Path | str] | Path | str,
    *,
    recursive: bool = True,
    cache: RunCache | None = None,
    safety_window_ns: int = SAFETY_WINDOW_NS,
    previous: TreeIndex | None = None,
) -> tuple[TreeState, TreeIndex]:
    """:func:`~deepecgkit.rundir.cache.scan_tree_state`, and the :class:`TreeIndex` of that scan.

    The full path of a tick: the state is exactly ``scan_tree_state``'s (so
    ``cache.dataset_digests()`` afterwards is too); recording the listing
    costs one more ``stat`` per listed directory. ``previous`` (the index
    whose proof just failed) spares the listing of every run directory it
    proves unchanged (:meth:`TreeIndex.known_listings`); the result is the same.
    """
    listing = ListingRecord()
    known = None if previous is None else previous.known_listings(roots, recursive=recursive)
    state, runs = scan_tree_runs(
        roots, recursive=recursive, cache=cache, listing=listing, known=known
    )
    index = TreeIndex.from_scan(
        listing, state, runs, recursive=recursive, safety_window_ns=safety_window_ns
    )
    return state, index
