"""Output folders as {relative path: bytes}, for tests that compare builds byte for byte."""

from __future__ import annotations

from pathlib import Path


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by its relative path, with its bytes."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }
