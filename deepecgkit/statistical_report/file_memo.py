"""What the report read of each run directory, keyed by the stat of every file it read.

A refresh of the report after one new run would otherwise open, read and
SHA-256 every file of every run again (20,000 runs: 60,000 files and more)
only to learn what the previous build already knew. The reuse cache
(:mod:`~deepecgkit.statistical_report.reuse`) therefore keeps, per run
directory, a **file memo**: for each file the identity contract read, its
SHA-256 and its stat signature (size, mtime in nanoseconds, inode, ctime in
nanoseconds, device), and the facts the contract took from the files
(model, dataset, seed, returncode, and the fields of the metadata and split
files it checks).

A memo is recalled only when every recorded file still has its signature,
every file recorded as absent is still absent (no entry of that name, of
any type), and the predictions file is still the one recorded with a known
verdict. The memo also records the stat signature of the run directory
itself, taken before its entries were listed: while the directory keeps it,
no entry was created, removed or renamed in it (each changes the
directory's mtime and ctime), so the names it holds are the ones the memo
saw and need not be listed again (a listing is most of what the check of an
unchanged run costs); when it changed, the directory is listed and the memo
checked name by name as before. Any difference, or any ``stat`` that fails, makes the run a miss:
it is read in full, exactly as on a clean build, so every exclusion reason
and its detail come from the files themselves. A rewrite of the same size
changes the mtime and ctime; a write through ``rename`` changes the inode;
``chmod`` changes the ctime. The one write a signature cannot see is one
that lands in the same timestamp tick as the file's recorded mtime, keeps
its size and inode, and happens after the report read the file (the
"racy" case of git's index); the run writers of this project write a new
file and rename it, which changes the inode.

Rows stay keyed by content hashes (the run keys of ``reuse.py``); a memo
only saves re-reading and re-hashing, so a recalled run has the very
``files`` hashes a clean build records. Every value of a memo is plain
JSON, and the memo kept is a function of the files' state, so the cache of
an incremental build equals a clean build's byte for byte.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterable, Mapping
from typing import Any

__all__ = [
    "MemoFacts",
    "directory_signature",
    "file_signature",
    "memo_entry",
    "recalled_facts",
    "stat_signature",
    "unchanged_memo",
]

#: What a memo records of each file: ``[sha256, *stat signature]``.
MemoFile = list[Any]
#: The facts of a memo: model, dataset, seed, returncode, metadata, split_info, predictions.
MemoFacts = dict[str, Any]
#: Keys of a memo entry's facts, and the JSON types each may hold.
_FACT_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "dataset": (str,),
    "seed": (int, type(None)),
    "returncode": (int, type(None)),
    "metadata": (dict, type(None)),
    "split_info": (dict, type(None)),
    "predictions": (str, type(None)),
}
_SIGNATURE_LENGTH = 5
#: The types each fact may have, as a set of exact types (bool only where listed).
_FACT_EXACT_ITEMS = tuple((key, frozenset(kinds)) for key, kinds in _FACT_TYPES.items())
#: The types a memo's directory signature may have (None: ``stat`` failed).
_DIRECTORY_TYPES = frozenset({list, type(None)})
#: Stands for a missing key (None is a fact's value).
_ABSENT = object()


def stat_signature(info: os.stat_result) -> list[int]:
    """``[size, mtime_ns, inode, ctime_ns, device]`` of a stat result."""
    return [info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns, info.st_dev]


def directory_signature(path: str) -> list[int] | None:
    """The stat signature of a directory (following links); None when ``stat`` fails or not one."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return stat_signature(info) if stat.S_ISDIR(info.st_mode) else None


def file_signature(path: str) -> tuple[list[int], float] | None:
    """The stat signature and float mtime of a regular file; None when ``stat`` fails or not one."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return stat_signature(info), info.st_mtime


def memo_entry(
    files: Mapping[str, tuple[str, list[int]]],
    facts: MemoFacts,
    *,
    directory: list[int] | None,
) -> dict[str, Any]:
    """A run's memo: ``files`` maps each file read to ``(sha256, stat signature)``.

    ``directory`` is the run directory's stat signature taken before its
    entries were listed (None when ``stat`` failed). ``facts`` holds model,
    dataset, seed, returncode, the checked ``metadata`` and ``split_info``
    fields (None for an absent file) and ``predictions`` (the predictions
    file's name, or None).
    """
    return {
        "files": {name: [digest, *signature] for name, (digest, signature) in files.items()},
        "directory": directory,
        **{key: facts[key] for key in _FACT_TYPES},
    }


def unchanged_memo(entry: dict[str, Any], facts: MemoFacts, *, directory: list[int] | None) -> bool:
    """Whether a recalled memo is already the one :func:`memo_entry` would make of ``facts``.

    ``entry`` must have passed :func:`recalled_facts`, so its files are the
    ones a new memo would record; it is kept as it is (not rebuilt for each
    of 20,000 runs) when it holds no other key, records the directory
    signature ``directory`` and every fact is equal. The
    fact types are checked, so equal values are also equal JSON (a seed
    ``True`` never stands for ``1``).
    """
    if len(entry) != 2 + len(_FACT_TYPES) or entry["directory"] != directory:
        return False
    for key in _FACT_TYPES:  # noqa: SIM110 (a loop, not all(generator): 100,000 calls)
        if entry[key] != facts[key]:
            return False
    return True


def recalled_facts(
    entry: Any,
    directory: str,
    *,
    names: Iterable[str],
    present: Collection[str] | None = None,
) -> tuple[dict[str, str], MemoFacts, dict[str, float]] | None:
    """The hashes, facts and file mtimes of an unchanged run; None when anything changed.

    Args:
        entry: the run's memo from the cache (any value: a malformed one is a miss).
        directory: the run directory.
        names: the file names whose presence the contract depends on, in the
            order their hashes are recorded (the predictions file's name is
            taken from the memo and must still be the one
            :func:`~deepecgkit.rundir.read.predictions_path` finds; the caller checks that).
        present: the names of the directory's entries, when the caller listed
            it (or an empty set when the directory still has the memo's
            signature, so every name recorded absent still is): a file
            recorded as absent must not be among them (None: each is checked
            with ``lstat``).

    The memo's layout (what :func:`memo_entry` writes) is checked as it is
    read: a signature's numbers are not checked one by one (one that is not
    the file's stat, of whatever type, differs from it), and types are
    compared exactly (a memo is decoded JSON or the memo table's values, of
    exact types), so a bool never passes for an int.

    Returns:
        ``(files, facts, mtimes)``: ``files`` maps each present file to its
        SHA-256 in the order a full read records them (the given names, then
        the predictions file), ``mtimes`` each present file to its ``st_mtime``.
    """
    # The layout is checked as the memo is read, in the same pass (see above).
    if type(entry) is not dict:
        return None
    recorded = entry.get("files")
    if type(recorded) is not dict or type(entry.get("directory", _ABSENT)) not in _DIRECTORY_TYPES:
        return None
    get = entry.get
    facts: MemoFacts = {}
    for key, kinds in _FACT_EXACT_ITEMS:
        value = get(key, _ABSENT)
        if type(value) not in kinds:
            return None
        facts[key] = value
    predictions = facts["predictions"]
    if predictions is None:
        ordered = tuple(names)
    elif predictions in names or predictions not in recorded:
        return None
    else:
        ordered = (*names, predictions)
    # Paths by concatenation: os.path.join is a Python function, called
    # three times per run of 20,000 (a run directory never ends in a separator
    # but the root's "/", which keeps it).
    prefix = directory if directory.endswith(os.sep) else directory + os.sep
    files: dict[str, str] = {}
    mtimes: dict[str, float] = {}
    for name in ordered:
        path = prefix + name
        kept = recorded.get(name)
        if kept is None:
            if present is not None:
                if name in present:
                    return None
                continue
            try:
                os.lstat(path)
            except (OSError, ValueError):  # absent, as recorded (os.path.lexists's test)
                continue
            return None
        if type(kept) is not list or len(kept) != 1 + _SIGNATURE_LENGTH or type(kept[0]) is not str:
            return None
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            return None
        if not (
            stat.S_ISREG(info.st_mode)
            and kept[1] == info.st_size
            and kept[2] == info.st_mtime_ns
            and kept[3] == info.st_ino
            and kept[4] == info.st_ctime_ns
            and kept[5] == info.st_dev
        ):
            return None
        files[name] = kept[0]
        mtimes[name] = info.st_mtime
    if len(files) != len(recorded):  # a recorded name the contract does not read
        return None
    return files, facts, mtimes
