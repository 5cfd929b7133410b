"""Read a run's stored test predictions in either on-disk format (see ``rundir.read``).

Two formats exist (docs/run-directory.md):

* ``predictions.csv`` (this project): ``sample_id``, ``group_id``,
  ``y_true`` (or ``y_true_<k>`` per label), ``prob_<k>``, optional
  ``logit_<k>``.
* ``predictions.txt`` (the upstream trainer): tab-separated, single-label
  header ``index, true_label, predicted_label, prob_<class name>…`` and,
  when records are named, a last column ``record`` (the group id);
  multi-label header ``index`` then ``true_<name>, pred_<name>,
  prob_<name>`` per label, and ``record`` likewise.

Where both exist ``predictions.csv`` wins. Either way the reader returns the
canonical ``predictions.csv`` layout, so every consumer (the statistical
report, recalibration from stored probabilities) handles one shape.

The reader parses; it does not judge. ``sample_id`` and ``group_id`` are
kept as the exact strings written (``007`` stays ``007``; an empty field
stays ``""``); numeric columns become numbers, except that a column holding
a non-numeric entry is returned as strings so the caller can report the
offending value. Checks of content (required columns, ranges, row sums) are
the caller's: the report turns each into its own exclusion reason.
"""

from __future__ import annotations

import io
import logging
import os
import re
from pathlib import Path

import pandas as pd

from deepecgkit.io import read_regular_file
from deepecgkit.rundir.format import PREDICTIONS_FILENAME, PREDICTIONS_TXT_FILENAME

__all__ = [
    "parse_predictions",
    "predictions_path",
    "read_predictions",
    "read_predictions_file",
]

logger = logging.getLogger(__name__)

_NUMERIC_PREFIXES = ("y_true", "prob_", "logit_")
_TXT_SAMPLE = "index"
_TXT_GROUP = "record"
_TXT_TRUE = "true_label"
_TXT_PRED = "predicted_label"


def predictions_path(run_dir: str | os.PathLike[str]) -> Path | None:
    """The predictions file of ``run_dir``: ``predictions.csv`` if that name exists,
    else ``predictions.txt`` if that name exists, else None.

    Existence is enough (a FIFO, a directory or a dangling link counts): a
    ``predictions.csv`` that cannot be read is then reported by the reader
    with its reason, instead of being passed over silently for the
    ``predictions.txt`` beside it or for "no predictions".
    """
    directory = os.fspath(run_dir)  # strings: a Path per candidate cost more than the lstat
    for name in (PREDICTIONS_FILENAME, PREDICTIONS_TXT_FILENAME):
        candidate = os.path.join(directory, name)
        if os.path.lexists(candidate):
            return Path(candidate)
    return None


def _read_table(data: bytes, path: Path, separator: str) -> pd.DataFrame:
    """Every cell as its exact string; header names stripped of surrounding blanks.

    The header is read as a data row so that repeated column names are
    detected instead of being renamed by pandas (``a``, ``a.1``).
    """
    try:
        raw = pd.read_csv(
            io.BytesIO(data),
            sep=separator,
            header=None,
            dtype=str,
            keep_default_na=False,
            encoding="utf-8",
        )
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"cannot parse {path}: {exc}") from exc
    names = [str(name).strip() for name in raw.iloc[0]]
    if len(set(names)) != len(names):
        raise ValueError(f"cannot parse {path}: repeated column names in {names}")
    frame = raw.iloc[1:].reset_index(drop=True)
    frame.columns = names
    return frame


def _numeric(column: pd.Series) -> pd.Series:
    """Numbers where every non-empty cell parses (empty -> NaN); else the strings unchanged."""
    stripped = column.str.strip()
    try:
        return pd.to_numeric(stripped.mask(stripped == ""), errors="raise")
    except (TypeError, ValueError):
        return column


def _canonical_from_txt(frame: pd.DataFrame) -> pd.DataFrame:
    """Convert the upstream trainer's layout to the ``predictions.csv`` layout."""
    out: dict[str, pd.Series] = {}
    if _TXT_SAMPLE in frame:
        out["sample_id"] = frame[_TXT_SAMPLE]
        out["group_id"] = frame[_TXT_GROUP] if _TXT_GROUP in frame else frame[_TXT_SAMPLE]
    single_label = _TXT_TRUE in frame or _TXT_PRED in frame
    prob_names = [c[len("prob_") :] for c in frame.columns if c.startswith("prob_")]
    if single_label:
        if _TXT_TRUE in frame:
            out["y_true"] = _class_indices(frame[_TXT_TRUE], prob_names)
        for k, name in enumerate(prob_names):
            out[f"prob_{k}"] = frame[f"prob_{name}"]
    else:
        labels = [c[len("true_") :] for c in frame.columns if c.startswith("true_")]
        for k, name in enumerate(labels):
            out[f"y_true_{k}"] = frame[f"true_{name}"]
            if f"prob_{name}" in frame:
                out[f"prob_{k}"] = frame[f"prob_{name}"]
    return pd.DataFrame(out, index=frame.index)


def _class_indices(labels: pd.Series, class_names: list[str]) -> pd.Series:
    """``true_label`` as class indices: kept when numeric, else mapped by class name.

    A label that is neither numeric nor a known class name is left as written,
    so the caller can report it.
    """
    stripped = labels.str.strip()
    if stripped.str.fullmatch(r"[+-]?\d+(\.0*)?").all():
        return labels
    positions = {name: str(k) for k, name in enumerate(class_names)}
    return stripped.map(lambda value: positions.get(value, value))


_CANONICAL_ORDER = re.compile(r"(sample_id|group_id|y_true(?:_\d+)?|prob_\d+|logit_\d+)")


def read_predictions_file(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read one predictions file (``.csv`` or the upstream ``.txt``) into the canonical layout.

    The file is read through the one safe open of run-directory files (a
    FIFO is rejected instead of blocking) and parsed by
    :func:`parse_predictions`.

    Raises:
        ValueError: the file cannot be parsed (encoding, CSV structure,
            repeated column names, no header).
        OSError: the file cannot be read (an
            :class:`~deepecgkit.io.UnreadableFileError` with its reason).
    """
    data, _ = read_regular_file(path)
    return parse_predictions(data, path)


def parse_predictions(data: bytes, path: str | os.PathLike[str]) -> pd.DataFrame:
    """Parse the bytes of one predictions file into the canonical layout.

    Args:
        data: the file's content.
        path: where it came from: the format is chosen by the suffix
            (``.txt`` means tab-separated upstream layout), and error
            messages name it.

    Returns:
        One row per sample with, where present, ``sample_id`` and ``group_id``
        (strings), ``y_true`` or ``y_true_<k>``, ``prob_<k>`` and ``logit_<k>``
        (numeric; a column with a non-numeric entry stays strings). Other
        columns are dropped. A ``.txt`` file without ``record`` column gets
        ``group_id = sample_id`` (each sample its own group).

    Raises:
        ValueError: the data cannot be parsed (encoding, CSV structure,
            repeated column names, no header).
    """
    file_path = Path(path)
    if file_path.suffix == ".txt":
        frame = _canonical_from_txt(_read_table(data, file_path, "\t"))
    else:
        frame = _read_table(data, file_path, ",")
    kept = [c for c in frame.columns if _CANONICAL_ORDER.fullmatch(c)]
    frame = frame.loc[:, kept]
    for column in kept:
        if column.startswith(_NUMERIC_PREFIXES):
            frame[column] = _numeric(frame[column])
    logger.debug("read %d prediction rows from %s", len(frame), file_path)
    return frame.reset_index(drop=True)


def read_predictions(run_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """Read the test predictions of ``run_dir`` in the canonical layout.

    ``predictions.csv`` wins over ``predictions.txt`` when both exist.

    Raises:
        FileNotFoundError: the directory holds neither file.
        ValueError: the file cannot be parsed.
        OSError: the file cannot be read (permission denied, not a regular file).
    """
    path = predictions_path(run_dir)
    if path is None:
        raise FileNotFoundError(
            f"{run_dir} holds neither {PREDICTIONS_FILENAME} nor {PREDICTIONS_TXT_FILENAME}"
        )
    return read_predictions_file(path)
