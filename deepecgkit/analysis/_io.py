"""Atomic file writes shared by every package that leaves files behind.

A reader (a person, the Dagster sensor watching a run folder, LaTeX including
a table) must see either the old complete file or the new complete file, never
a prefix of one. Each helper therefore writes to a temporary file in the
destination folder, flushes and ``fsync``s it, and moves it into place with
``os.replace``, which is atomic within one file system. The temporary name,
``.<final name>.<random>.tmp``, starts with a dot and ends in ``.tmp`` so that
run discovery never mistakes it for a real file. On any exception the
temporary file is removed and the exception re-raised.

The module imports only the standard library, so both ``deepecgkit.analysis``
and ``deepecgkit.evaluation`` can use it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text"]

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


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and return the final path.

    Args:
        path: Destination file. Its parent folders are created if missing.
        data: The complete new content.

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
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    _fsync_directory(final.parent)
    return final


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically and return the final path.

    The text is encoded as it is: line endings are not translated, so a file
    written on any platform holds exactly ``text``.

    Args:
        path: Destination file. Its parent folders are created if missing.
        text: The complete new content.
        encoding: Codec for ``text``; an unencodable character raises
            ``UnicodeEncodeError`` before anything is written.

    Returns:
        ``Path(path)``.
    """
    return atomic_write_bytes(path, text.encode(encoding))
