"""Errors raised while locating and reading ECG datasets.

Both name the file (and, where it applies, the row or key) and say what was
expected, so a user can fix the data without reading the reader's code.
"""

from __future__ import annotations

__all__ = ["DatasetFormatError", "DatasetNotFoundError"]


class DatasetNotFoundError(FileNotFoundError):
    """A dataset folder, ``dataset.json``, ``labels.csv`` or record file is missing."""


class DatasetFormatError(ValueError):
    """A dataset file exists but does not hold what the layout requires."""
