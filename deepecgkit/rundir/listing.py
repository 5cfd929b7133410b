"""Listing one directory the way discovery does, and recording what each listing saw.

:func:`~deepecgkit.rundir.read.find_run_candidate_paths` decides which
directories are runs from the listings of the directories it searches. To
let a later scan prove that none of those listings changed without listing
the tree again (:mod:`deepecgkit.rundir.tree_index`, the sensor's quick
tick), the scan can fill a :class:`ListingRecord`: per directory whose
listing it used, the directory's change time read *before* the listing and a
:func:`listing_signature` of what the listing held. The functions here are
the single definition of a listing, used by the scan and by the re-check
alike, so the two cannot drift apart.

Why the change time (``st_ctime_ns``) and not the modification time: every
change of a directory's entries (an entry created, removed or renamed,
``classification_metrics.csv`` put in place by rename among them) moves
both, but only the change time also moves when the directory's permissions
or owner change, which decide whether it can be listed at all; and unlike
the modification time it cannot be set back by ``utime``.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence

from deepecgkit.rundir.format import METRICS_FILENAME

__all__ = [
    "CHILD_LISTING",
    "PROBLEM_LIST",
    "PROBLEM_SEARCH",
    "ROOT_LISTING",
    "UNKNOWN_STAMP",
    "WALKED_LISTING",
    "ListingRecord",
    "child_directories",
    "directory_entries",
    "directory_signature",
    "directory_stamp",
    "directory_target",
    "listing_signature",
    "metrics_entry_error",
    "problem_persists",
]

#: Kinds of listing, the first character of a signature. A directory walked by a
#: recursive scan (its metrics entry, subdirectories and links matter) ...
WALKED_LISTING = "w"
#: ... a run root of a flat scan (its child directories and links matter) ...
ROOT_LISTING = "r"
#: ... and a child of a flat scan's root that holds no metrics entry (only that matters).
CHILD_LISTING = "c"
#: A directory that could not be listed, and one that could not be searched (``lstat``
#: of its metrics entry refused): both are reported as problems and tried again.
PROBLEM_LIST = "list"
PROBLEM_SEARCH = "search"
#: The stamp of a directory whose change time could not be read before its listing:
#: it never equals a real one, so the next re-check lists the directory again.
UNKNOWN_STAMP = -1
#: Bytes of BLAKE2b kept in a signature (128 bits: a collision is not a concern).
SIGNATURE_BYTES = 16


def directory_stamp(path: str) -> int:
    """The directory's change time (``st_ctime_ns``, links followed), or :data:`UNKNOWN_STAMP`."""
    try:
        return os.stat(path).st_ctime_ns
    except OSError:
        return UNKNOWN_STAMP


def directory_target(path: str) -> str | None:
    """The real path of ``path`` when it is (or links to) a directory, else None.

    What a scan resolves for a run root and for a symbolic link it meets.
    """
    return os.path.realpath(path) if os.path.isdir(path) else None


def _is_symlink(entry: os.DirEntry) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False


def _is_directory(entry: os.DirEntry, *, follow: bool) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow)
    except OSError:
        return False


def directory_entries(
    directory: str,
) -> tuple[bool, list[tuple[str, str]], list[tuple[str, str]]]:
    """What a recursive scan uses of one directory's listing.

    Returns:
        ``(holds_metrics, subdirectories, symbolic_links)``: whether an entry
        named ``classification_metrics.csv`` (of any type) is there, and
        ``(name, path)`` of every subdirectory (links not followed) and of
        every symbolic link that is not itself a directory entry. Other
        entries do not matter to discovery.

    Raises:
        OSError: the directory cannot be listed (``FileNotFoundError`` when it vanished).
    """
    holds_metrics = False
    subdirectories: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    # One scandir per directory of a 100,000-run tree: the loop is kept free of
    # function calls and path joins where it can be (a tenth of the walk each).
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if name == METRICS_FILENAME:
                holds_metrics = True
                continue
            try:
                is_directory = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_directory = False
            if is_directory:
                subdirectories.append((name, entry.path))
            elif _is_symlink(entry):
                links.append((name, entry.path))
    return holds_metrics, subdirectories, links


def child_directories(root: str) -> tuple[list[os.DirEntry], list[str]]:
    """What a flat scan uses of a run root's listing.

    Returns:
        ``(children, link_names)``: the entries that are directories (links
        followed) and the names of every symbolic link (a dangling one may
        later point at a directory without the root changing).

    Raises:
        OSError: the root cannot be listed.
    """
    with os.scandir(root) as entries:
        listed = list(entries)
    children = [entry for entry in listed if _is_directory(entry, follow=True)]
    return children, [entry.name for entry in listed if _is_symlink(entry)]


def metrics_entry_error(directory: str) -> OSError | None:
    """None when ``directory`` holds an entry named like the metrics file, else the lstat error."""
    try:
        os.lstat(os.path.join(directory, METRICS_FILENAME))
    except OSError as exc:
        return exc
    return None


def listing_signature(
    kind: str, holds_metrics: bool, subdirectories: Sequence[str], links: Sequence[str]
) -> str:
    """A short text that changes exactly when the listing matters differently to discovery.

    The kind, ``m`` or ``-`` for the metrics entry, then (only when there are
    any) a BLAKE2b digest of the sorted subdirectory names and the sorted
    link names; a run directory without subdirectories is just ``"wm"``, so
    an index of 100,000 runs stays small.
    """
    head = kind + ("m" if holds_metrics else "-")
    if not subdirectories and not links:
        return head
    text = "\0".join(sorted(subdirectories)) + "/" + "\0".join(sorted(links))
    digest = hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=SIGNATURE_BYTES)
    return f"{head}:{digest.hexdigest()}"


def directory_signature(path: str, recorded: str) -> str | None:
    """The signature ``path``'s listing has now, of the kind of ``recorded``; None if unlistable.

    For :data:`CHILD_LISTING` the "listing" is the ``lstat`` of the metrics
    entry: still absent gives the same signature, anything else (present, or
    refused, which makes the directory a problem) gives None.
    """
    kind = recorded[:1]
    if kind == CHILD_LISTING:
        error = metrics_entry_error(path)
        absent = error is not None and not isinstance(error, PermissionError)
        return listing_signature(CHILD_LISTING, False, (), ()) if absent else None
    try:
        if kind == WALKED_LISTING:
            holds_metrics, subdirectories, links = directory_entries(path)
            return listing_signature(
                kind, holds_metrics, [name for name, _ in subdirectories], [n for n, _ in links]
            )
        if kind == ROOT_LISTING:
            children, link_names = child_directories(path)
            return listing_signature(kind, False, [entry.name for entry in children], link_names)
    except OSError:
        return None
    return None


def problem_persists(kind: str, path: str) -> bool:
    """Whether a directory reported as a problem of ``kind`` would be reported again now."""
    if kind == PROBLEM_SEARCH:
        return isinstance(metrics_entry_error(path), PermissionError)
    try:
        with os.scandir(path) as entries:
            for _ in entries:
                pass
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return False


class ListingRecord:
    """What one scan saw of every directory whose listing decided its candidates.

    Filled by :func:`~deepecgkit.rundir.read.find_run_candidate_paths`
    when passed as ``listing``; read by
    :class:`~deepecgkit.rundir.tree_index.TreeIndex`.

    Attributes:
        started_ns: the wall clock (``time.time_ns``) before the first
            directory's stamp was read; a directory whose stamp is less than
            a safety window older than this cannot be trusted to move on
            the next change (timestamp granularity), so it is listed again.
        roots: each run root scanned, as the scan normalised it, and
            ``root_targets`` its :func:`directory_target`.
        directories, stamps, signatures: per listed directory (parallel
            lists): its path, its change time read before the listing (or
            :data:`UNKNOWN_STAMP`) and its :func:`listing_signature`.
        links: ``{path: directory_target}`` of every symbolic link met in a
            listed directory.
        problems: ``(kind, path)`` of every directory that could not be
            listed (:data:`PROBLEM_LIST`) or searched (:data:`PROBLEM_SEARCH`).
        candidates: the scan's candidate run directories, in its order.
        unlistable: the display path of each directory the scan reported as
            a problem, in its order (what a tree state counts as pending).
    """

    def __init__(self) -> None:
        self.started_ns = time.time_ns()
        self.roots: list[str] = []
        self.root_targets: list[str | None] = []
        self.directories: list[str] = []
        self.stamps: list[int] = []
        self.signatures: list[str] = []
        self.links: dict[str, str | None] = {}
        self.problems: list[tuple[str, str]] = []
        self.candidates: list[str] = []
        self.unlistable: list[str] = []

    def add_root(self, root: str) -> None:
        self.roots.append(root)
        self.root_targets.append(directory_target(root))

    def add(self, directory: str, stamp: int, signature: str) -> None:
        self.directories.append(directory)
        self.stamps.append(stamp)
        self.signatures.append(signature)

    def add_links(self, paths: Sequence[str]) -> None:
        for path in paths:
            self.links[path] = directory_target(path)
