"""The one module of file helpers: atomic writes, the safe read, JSON values and file stems.

Everything in deepecgkit that writes a file, and every reader of a
run-directory file, goes through this module, so there is one answer to
"how is a file written here" and one to "how is a run file opened". It
imports only the standard library: the run-directory package
(:mod:`deepecgkit.rundir`), which may import nothing else of ours, builds on it.

Writing
-------

A reader (a person, the Dagster sensor watching a run folder, LaTeX including
a table) must see either the old complete file or the new complete file, never
a prefix of one. Each writer therefore writes to a temporary file in the
destination folder, flushes and ``fsync``s it, and moves it into place with
``os.replace``, which is atomic within one file system. The temporary name,
``.<final name>.<random>.tmp``, starts with a dot and ends in ``.tmp`` so that
run discovery never mistakes it for a real file. On any exception the
temporary file is removed and the exception re-raised. ``durable=False``
skips the ``fsync`` calls (the rename still makes the write atomic): for
files that are regenerated at will, such as a synthetic benchmark corpus of
300,000 small files.

Reading
-------
Run directories are written by other programs and may hold anything: a FIFO
where a JSON file should be (opening it would block forever), a dangling
symbolic link, a directory, a file the current user may not read, a file
that vanishes between listing and opening. Every reader of run-directory
files (metrics, ``run_metadata.json``, ``split_info.json``, predictions,
checkpoints, the report's hashing) goes through :func:`read_regular_file`:
it opens the path once with ``O_NONBLOCK`` (a FIFO is then rejected instead
of blocking), checks the type with ``fstat`` on the open descriptor (the
check applies to the very file read), reads a bounded number of bytes, and on
failure raises :class:`UnreadableFileError` carrying one short reason
(``permission denied``, ``not a regular file (FIFO)``, ``dangling symbolic
link`` ...) that the caller reports next to the run.

Values and names
----------------
:func:`json_ready` is the one conversion of values to strict JSON (NaN and
infinities to ``null``, numpy scalars and arrays to Python values), and
:func:`bounded_stem` the one way a file name is made from a user's name (a
readable prefix plus a short hash when the name is long).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import numbers
import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

__all__ = [
    "READ_SLACK_BYTES",
    "REASON_DANGLING_LINK",
    "REASON_MISSING",
    "REASON_PERMISSION",
    "SAFE_READ_FLAGS",
    "UnreadableFileError",
    "atomic_write_bytes",
    "atomic_write_frame",
    "atomic_write_json",
    "atomic_write_text",
    "bounded_stem",
    "display_path",
    "frame_csv_text",
    "json_ready",
    "json_text",
    "read_regular_file",
    "remove_file",
    "replace_durably",
    "safe_name",
    "short_hash",
]

#: Random hex digits in a temporary name; 16 make a collision between
#: concurrent writers of the same file negligible.
_TOKEN_BYTES = 8
#: Permission bits requested for a new file; the process umask narrows them,
#: exactly as it would for a file opened with ``open(path, "w")``.
_FILE_MODE = 0o666
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def _fsync_directory(directory: Path) -> None:
    """Persist a rename on POSIX; a no-op where folders cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically and return the final path.

    Args:
        path: Destination file. Its parent folders are created if missing.
        data: The complete new content.
        durable: ``fsync`` the file and its folder (False: the rename alone,
            for files regenerated at will).

    Returns:
        ``Path(path)``.

    Raises:
        OSError: The folder cannot be created or written; nothing is left
            behind under a temporary name.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.with_name(f".{final.name}.{secrets.token_hex(_TOKEN_BYTES)}.tmp")
    # os.open with an explicit mode (rather than tempfile.mkstemp, which forces
    # 0o600) so the finished file gets the same permissions as any other.
    fd = os.open(temporary, _CREATE_FLAGS, _FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    if durable:
        _fsync_directory(final.parent)
    return final


def replace_durably(source: str | os.PathLike[str], final: str | os.PathLike[str]) -> Path:
    """Move a finished file written by someone else (a library) into place, durably.

    The counterpart of :func:`atomic_write_bytes` for a file another writer
    produced under a temporary name (``wfdb`` writes its own files): it is
    ``fsync``ed, renamed over ``final`` and the folder synced.
    """
    target = Path(final)
    with open(source, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(source, target)
    _fsync_directory(target.parent)
    return target


def remove_file(path: str | os.PathLike[str]) -> bool:
    """Remove ``path`` durably (the folder's entry is synced); False when it was not there.

    The counterpart of the atomic writers for a file that must stop existing
    before the next one appears, such as a manifest about to be rewritten.
    """
    final = Path(path)
    try:
        final.unlink()
    except FileNotFoundError:
        return False
    _fsync_directory(final.parent)
    return True


def atomic_write_text(
    path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", durable: bool = True
) -> Path:
    """Write ``text`` to ``path`` atomically and return the final path.

    The text is encoded as it is: line endings are not translated, so a file
    written on any platform holds exactly ``text``.

    Args:
        path: Destination file. Its parent folders are created if missing.
        text: The complete new content.
        encoding: Codec for ``text``; an unencodable character raises
            ``UnicodeEncodeError`` before anything is written.
        durable: see :func:`atomic_write_bytes`.

    Returns:
        ``Path(path)``.
    """
    return atomic_write_bytes(path, text.encode(encoding), durable=durable)


# --- JSON ------------------------------------------------------------------------------------


def _json_key(key: Any) -> str:
    """JSON object keys are strings; integer keys are written as their decimal text."""
    if isinstance(key, str):
        return key
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return str(int(key))
    raise TypeError(f"JSON object keys must be strings, got {type(key).__name__} {key!r}")


def _plain(value: Any) -> Any:
    """A numpy scalar or array as the Python value or list it holds; anything else unchanged.

    Recognised by their ``item``/``tolist`` methods, so this module needs no numpy.
    """
    if hasattr(value, "dtype"):
        if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
            return value.item()
        if hasattr(value, "tolist"):
            return value.tolist()
    return value


def json_ready(value: Any, *, nan_to_null: bool = True) -> Any:
    """``value`` as plain JSON values: the one conversion of every JSON writer here.

    numpy scalars and arrays become Python values and lists (so an
    ``np.float32`` NaN is a NaN like any other), Paths become strings, tuples
    lists, integer keys their decimal text; NaN and infinities become None
    (``null``) unless ``nan_to_null`` is False, where they are kept (and a
    strict ``json.dumps`` then refuses them, as a fingerprint must).

    Raises:
        TypeError: a value or key JSON cannot represent.
    """
    kind = type(value)  # exact built-in types first: a manifest holds 100,000s of them
    if kind is str or kind is bool or kind is int or value is None:
        return value
    if kind is float:
        return None if nan_to_null and not math.isfinite(value) else value
    value = _plain(value)
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return None if nan_to_null and not math.isfinite(number) else number
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Mapping):
        return {
            _json_key(_plain(key)): json_ready(item, nan_to_null=nan_to_null)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [json_ready(item, nan_to_null=nan_to_null) for item in value]
    raise TypeError(f"{type(value).__name__} value {value!r} is not JSON serialisable")


def json_text(payload: Any, *, ensure_ascii: bool = True) -> str:
    """Strict JSON of :func:`json_ready` ``(payload)``: indent 2, keys in order, final newline."""
    return (
        json.dumps(json_ready(payload), indent=2, ensure_ascii=ensure_ascii, allow_nan=False) + "\n"
    )


def atomic_write_json(
    path: str | os.PathLike[str],
    payload: Any,
    *,
    ensure_ascii: bool = True,
    durable: bool = True,
) -> Path:
    """Write :func:`json_text` ``(payload)`` to ``path`` atomically (UTF-8)."""
    return atomic_write_text(path, json_text(payload, ensure_ascii=ensure_ascii), durable=durable)


# --- frames ------------------------------------------------------------------------------------


def frame_csv_text(frame: Any) -> str:
    """CSV text of a pandas frame: header, no index, ``\\n`` line ends, NaN as an empty field.

    pandas writes floats at full round-trip precision. Duck-typed on
    ``to_csv`` so that this module needs no pandas.
    """
    return frame.to_csv(index=False, lineterminator="\n")


def atomic_write_frame(path: str | os.PathLike[str], frame: Any, *, durable: bool = True) -> Path:
    """Write :func:`frame_csv_text` ``(frame)`` to ``path`` atomically (UTF-8)."""
    return atomic_write_text(path, frame_csv_text(frame), durable=durable)


# --- file names made from names ------------------------------------------------------------------

#: Characters kept in a file name made from a user's name; others become ``_``.
_SAFE_NAME_CHARACTERS = "A-Za-z0-9_"
#: Longest stem made from a name. File systems allow 255 bytes per name, and a
#: stem gets a prefix (``results_``, ``transfer_matrix_``) and a suffix.
MAX_STEM_CHARACTERS = 96
#: Readable characters kept of a longer name, before ``_`` and its hash.
STEM_PREFIX_CHARACTERS = 80
STEM_HASH_DIGITS = 12


def safe_name(text: str, *, also_allowed: str = "") -> str:
    """``text`` with every character outside ``[A-Za-z0-9_-]`` (and ``also_allowed``) as ``_``."""
    allowed = _SAFE_NAME_CHARACTERS + re.escape(also_allowed) + "-"
    return re.sub(f"[^{allowed}]", "_", text)


def short_hash(text: str, *, digits: int) -> str:
    """The first ``digits`` hex digits of the SHA-256 of ``text`` (UTF-8, surrogates kept)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:digits]


def bounded_stem(name: str) -> str:
    """A file stem for ``name``: :func:`safe_name`; a long one cut to a prefix plus a hash.

    A stem longer than :data:`MAX_STEM_CHARACTERS` becomes its first
    :data:`STEM_PREFIX_CHARACTERS` characters, ``_`` and a
    :data:`STEM_HASH_DIGITS`-digit hash of the full name, which keeps two long
    names that share their first characters apart; an empty name is ``_``.
    """
    stem = safe_name(name) or "_"
    if len(stem) <= MAX_STEM_CHARACTERS:
        return stem
    return f"{stem[:STEM_PREFIX_CHARACTERS]}_{short_hash(name, digits=STEM_HASH_DIGITS)}"


# --- reading run-directory files ---------------------------------------------------------------

#: Read-only, never blocking on a FIFO, not inherited by child processes (the flags of
#: :func:`read_regular_file`, and of the report's columnar reads of run files).
SAFE_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
#: Bytes asked for beyond the file's size, so that one read normally reaches end-of-file.
READ_SLACK_BYTES = 1024

#: No entry at all under that name.
REASON_MISSING = "missing"
#: The process may not open the file (or search a folder on its path).
REASON_PERMISSION = "permission denied"
#: A symbolic link whose target does not exist.
REASON_DANGLING_LINK = "not a regular file (dangling symbolic link)"
_REASONS_BY_ERRNO = {
    errno.EACCES: REASON_PERMISSION,
    errno.EPERM: REASON_PERMISSION,
    errno.ELOOP: "not a regular file (symbolic link loop)",
    errno.ENXIO: "not a regular file (socket or device without a reader)",
    errno.ENOTDIR: "missing (a folder on its path is a file)",
    errno.ENAMETOOLONG: "name too long",
}
_FILE_KINDS = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


class UnreadableFileError(OSError):
    """A file that cannot be read as a regular file; ``reason`` says why in a few words.

    Attributes:
        path: the path that was opened.
        reason: one of the short reasons of this module, for example
            ``"permission denied"`` or ``"not a regular file (FIFO)"``.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{display_path(path)}: {reason}")
        self.path = os.fspath(path)
        self.reason = reason


def display_path(path: str | os.PathLike[str] | bytes) -> str:
    """``path`` as text that any UTF-8 output can hold.

    A name that is not valid UTF-8 reaches Python with surrogate escapes,
    which no UTF-8 file, JSON document or terminal accepts; its undecodable
    bytes are shown as ``\\xNN`` instead. Valid names are returned unchanged.
    """
    text = os.fsdecode(path) if isinstance(path, bytes) else os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    return text


def _kind(mode: int) -> str:
    for test, name in _FILE_KINDS:
        if test(mode):
            return name
    return "special file"


def _open_reason(path: str | os.PathLike[str], error: OSError) -> str:
    """The short reason an ``os.open`` of ``path`` failed with ``error``."""
    if error.errno == errno.ENOENT:
        try:
            is_link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            is_link = False
        return REASON_DANGLING_LINK if is_link else REASON_MISSING
    reason = _REASONS_BY_ERRNO.get(error.errno or 0)
    return reason or (error.strerror or type(error).__name__).lower()


def read_regular_file(
    path: str | os.PathLike[str], *, max_bytes: int | None = None
) -> tuple[bytes, os.stat_result]:
    """The bytes and ``fstat`` of ``path`` when it is a readable regular file.

    The path is opened once, without blocking, and its type checked on the
    open descriptor, so the check and the read concern the same file: a FIFO,
    a directory or a device is rejected at once instead of hanging or being
    parsed. The read is bounded: at most ``max_bytes`` (when given) or the
    size ``fstat`` reported, plus a little slack for a file still growing.

    Args:
        path: the file.
        max_bytes: refuse a larger file (its size is the reason); None for no limit.

    Returns:
        ``(content, stat result)``.

    Raises:
        UnreadableFileError: with a short ``reason``: ``missing``,
            ``permission denied``, ``not a regular file (FIFO)`` (or directory,
            dangling symbolic link, ...), ``larger than N bytes``, or the
            system's own words for any other ``OSError``.
    """
    try:
        descriptor = os.open(path, SAFE_READ_FLAGS)
    except OSError as exc:
        raise UnreadableFileError(path, _open_reason(path, exc)) from None
    except ValueError:  # an embedded NUL byte
        raise UnreadableFileError(path, "invalid path (NUL byte)") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFileError(path, f"not a regular file ({_kind(info.st_mode)})")
        if max_bytes is not None and info.st_size > max_bytes:
            raise UnreadableFileError(path, f"larger than {max_bytes} bytes")
        # Never ask for more than the file holds (plus slack): os.read allocates
        # the whole request up front, so asking for max_bytes would cost 64 MiB a file.
        budget = info.st_size + READ_SLACK_BYTES
        if max_bytes is not None:
            budget = min(budget, max_bytes + 1)
        data = os.read(descriptor, budget)
        if len(data) < info.st_size:
            # A short read before the size fstat reported: read on to the end. (One
            # read that reaches the stat size is the whole file, and saves a second
            # system call per file, a sixth of discovery's calls.)
            chunks, budget = [data], budget - len(data)
            while budget > 0 and (chunk := os.read(descriptor, budget)):
                chunks.append(chunk)
                budget -= len(chunk)
            data = b"".join(chunks)
        if max_bytes is not None and len(data) > max_bytes:
            raise UnreadableFileError(path, f"larger than {max_bytes} bytes")
        return data, info
    except UnreadableFileError:
        raise
    except OSError as exc:
        reason = _REASONS_BY_ERRNO.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()
        raise UnreadableFileError(path, reason) from None
    finally:
        os.close(descriptor)
