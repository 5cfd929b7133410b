"""The report's identity contract: which run directories may be reported.

Every discovered run directory is checked in a fixed order (docs/statistics.md,
"The statistical report"); the first failure excludes it with one reason code and a specific
detail, so a user sees exactly why a run is absent and nothing disappears
silently. The checks, in order:

1. ``unreadable`` - metrics CSV, a present metadata/split JSON, or the
   predictions cannot be read (permission denied, not a regular file,
   vanished) or parsed, or model/dataset is missing;
2. ``failed_run`` - a recorded non-zero ``returncode``;
3. ``no_predictions``; 4. ``multilabel_unsupported``;
5. ``malformed_predictions``; 6. ``non_normalised_probabilities``;
7. ``duplicate_sample``; 8. ``conflicting_group_label``;
9. ``stale_fingerprint`` / ``ambiguous_fingerprint`` against the cell's
   reference fingerprint (the unique most frequent one among its readable,
   non-failed runs: the configuration most runs were trained with is the
   best stand-in for "current");
10. partial reasons (``missing_metadata``, ``missing_fingerprint``,
    ``missing_split_info``, ``incomplete_predictions``), admitted only with
    ``allow_partial``;
11. ``duplicate_run`` - another surviving run of the same model, dataset
    and seed has newer predictions (ties: the lexicographically last
    ``run_id`` wins).

Checks 4-8, and the parse of the predictions in check 1, depend only on the
predictions file's name and bytes. Their outcome is a :class:`ContentVerdict`
that a caller may keep and hand back (keyed by :func:`content_key`): a file
whose hash has a verdict is not parsed again (except one that could not be
parsed: that message names the file's path), and its predictions are parsed
from the bytes already read only when a run or pair must be computed
(:func:`predictions_of`).

A run whose files are unchanged since an earlier build (the same stat
signature, :mod:`~deepecgkit.statistical_report.file_memo`) is not read
again: its hashes and facts are recalled from that build's memo, and its
predictions are read only if its rows must be computed. A caller that has
already read the runs (the platform's ``discovered_runs``) may pass their
records: model, dataset, seed and returncode are then taken from a run's
record while its metrics file still has the record's mtime, instead of
parsing the metrics file again.

At scale, most runs of a refresh never reach this module's per-run road:
:mod:`~deepecgkit.statistical_report.frame_recall` applies the same checks,
as arrays, to every run whose memo records no predictions and whose
directory and files all keep their memo's stat signatures (one ``stat`` per
file the memo recorded, to see an edit in place, and the directory's
``lstat``, to see a new entry such as a predictions file; its docstring says
why neither can be spared). Those runs are excluded (check 2 or 3) exactly
as here, without a :class:`RunInput`; their fingerprints are handed to
:func:`assess_runs` for check 9 (``recalled``). On a first build (or for a
run whose memo does not hold), :mod:`~deepecgkit.statistical_report.fresh_read`
reads the plain runs without predictions the same way, as columns, and hands
every other run to this road.

The module reads run directories and never modifies them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from deepecgkit.io import REASON_MISSING, UnreadableFileError
from deepecgkit.rundir.format import (
    METADATA_FILENAME,
    METRICS_FILENAME,
    PREDICTIONS_FILENAME,
    PREDICTIONS_TXT_FILENAME,
    PROBABILITY_SUM_TOLERANCE,
    SPLIT_INFO_FILENAME,
)
from deepecgkit.rundir.int_columns import exact_int_value
from deepecgkit.rundir.read import (
    UnreadableRun,
    parse_predictions,
    predictions_path,
    read_run,
    read_run_file,
)
from deepecgkit.rundir.records import RunRecord
from deepecgkit.statistical_report.file_memo import (
    MemoFacts,
    directory_signature,
    memo_entry,
    recalled_facts,
    stat_signature,
    unchanged_memo,
)

__all__ = [
    "STATUS_EXCLUDED",
    "STATUS_INCLUDED",
    "STATUS_PARTIAL",
    "ContentVerdict",
    "RunFacts",
    "RunInput",
    "ValidPredictions",
    "assess_runs",
    "content_key",
    "predictions_of",
    "run_facts",
    "seed_of",
]

logger = logging.getLogger(__name__)

STATUS_INCLUDED = "included"
STATUS_PARTIAL = "partial"
STATUS_EXCLUDED = "excluded"
#: Not yet decided (only while the contract runs).
STATUS_PENDING = "pending"

UNREADABLE = "unreadable"
FAILED_RUN = "failed_run"
NO_PREDICTIONS = "no_predictions"
MULTILABEL_UNSUPPORTED = "multilabel_unsupported"
MALFORMED_PREDICTIONS = "malformed_predictions"
NON_NORMALISED = "non_normalised_probabilities"
DUPLICATE_SAMPLE = "duplicate_sample"
CONFLICTING_GROUP_LABEL = "conflicting_group_label"
STALE_FINGERPRINT = "stale_fingerprint"
AMBIGUOUS_FINGERPRINT = "ambiguous_fingerprint"
MISSING_METADATA = "missing_metadata"
MISSING_FINGERPRINT = "missing_fingerprint"
MISSING_SPLIT_INFO = "missing_split_info"
INCOMPLETE_PREDICTIONS = "incomplete_predictions"
DUPLICATE_RUN = "duplicate_run"

#: Files whose SHA-256 the manifest records (the predictions file under its own name).
HASHED_FILES = (METRICS_FILENAME, METADATA_FILENAME, SPLIT_INFO_FILENAME)
#: The names a predictions file may have (see :func:`~deepecgkit.rundir.read.predictions_path`).
_PREDICTIONS_NAMES = frozenset({PREDICTIONS_FILENAME, PREDICTIONS_TXT_FILENAME})
#: The fields of the metadata (checks 2 and 9) and split files (check 10) the contract reads.
CHECKED_METADATA_FIELDS = ("params_fingerprint", "error")
CHECKED_SPLIT_FIELDS = ("n_test", "n_test_groups")
_MAX_SHOWN = 5
_MIN_CLASSES = 2
_MULTILABEL_COLUMN = re.compile(r"y_true_\d+")
_PROB_COLUMN = re.compile(r"prob_(\d+)")
_REQUIRED_COLUMNS = ("sample_id", "group_id", "y_true", "prob_0")


@dataclass(frozen=True)
class ValidPredictions:
    """Predictions of one run that passed checks 4-8.

    Attributes:
        sample_id: ``(n,)`` sample ids (strings).
        group_id: ``(n,)`` group ids (strings).
        y_true: ``(n,)`` int64 class indices in ``[0, K-1]``.
        prob: ``(n, K)`` float64 probabilities, rows summing to 1 within tolerance.
    """

    sample_id: np.ndarray
    group_id: np.ndarray
    y_true: np.ndarray
    prob: np.ndarray

    @property
    def n_classes(self) -> int:
        """Number of classes ``K``."""
        return int(self.prob.shape[1])


@dataclass(frozen=True)
class ContentVerdict:
    """The outcome of parsing one predictions file and of checks 4-8: a function of its bytes.

    Attributes:
        reason: the exclusion reason (``unreadable`` for a file that cannot be
            parsed, or one of checks 4-8), None for valid predictions.
        detail: the exclusion's detail ("" when valid).
        n_rows, n_groups: rows and distinct groups of valid predictions (check 10).
    """

    reason: str | None
    detail: str = ""
    n_rows: int = 0
    n_groups: int = 0


class RunFacts(NamedTuple):
    """What the contract takes from a caller's record of a run (a :class:`RunRecord` has them).

    ``run_dir`` is the run directory's path, as text or a ``Path``; ``mtime``
    the metrics file's modification time (seconds since the epoch) when the
    record was read: the other facts are used only while the file still has it.
    """

    run_dir: str | Path
    model: str
    dataset: str
    seed: int | None
    returncode: int | None
    mtime: float


def run_facts(frame: pd.DataFrame) -> list[RunFacts]:
    """The :class:`RunFacts` of each row of a records frame (``records_to_frame``'s layout).

    The same values :func:`~deepecgkit.rundir.records.frame_to_records` gives
    these fields, without decoding each row's metrics and diagnostics (the
    report needs only these six) and with ``run_dir`` as the frame's text,
    not a ``Path``.
    """
    texts = [_text_column(frame[name]) for name in ("run_dir", "model", "dataset")]
    mtimes = frame["mtime"].astype("float64").tolist()
    seeds, returncodes = (_int_column(frame[name]) for name in ("seed", "returncode"))
    return list(map(RunFacts._make, zip(*texts, seeds, returncodes, mtimes, strict=True)))


def _text_column(column: pd.Series) -> list[str]:
    """A column's values as ``str`` (a column of exact ``str`` values as it is)."""
    values = column.tolist()
    return values if set(map(type, values)) <= {str} else [str(value) for value in values]


def _int_column(column: pd.Series) -> list[int | None]:
    """A column's values as :func:`exact_int_value` gives them, a plain int64 column at once."""
    if column.dtype == np.int64:
        return column.tolist()  # Python ints, exactly
    return [exact_int_value(value) for value in column.tolist()]


def content_key(name: str, sha256: str) -> str:
    """The key of a predictions file's verdict: its name (which sets the parser) and hash."""
    return f"{sha256}:{name}"


@dataclass
class RunInput:
    """One discovered run directory and the verdict of the identity contract."""

    run_id: str
    #: The resolved run directory, as text (a ``Path`` per run of 100,000 costs seconds).
    path: str
    files: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    dataset: str | None = None
    seed: int | None = None
    fingerprint: str | None = None
    returncode: int | None = None
    #: The checked fields of run_metadata.json (CHECKED_METADATA_FIELDS); None when absent.
    metadata: dict[str, Any] | None = None
    #: The checked fields of split_info.json (CHECKED_SPLIT_FIELDS); None when absent.
    split_info: dict[str, Any] | None = None
    predictions_file: Path | None = None
    frame: pd.DataFrame | None = None
    predictions_mtime: float = 0.0
    readable: bool = False
    status: str = STATUS_PENDING
    reason: str | None = None
    detail: str = ""
    partial_reasons: list[str] = field(default_factory=list)
    data: ValidPredictions | None = None
    #: Checks 4-8 of the predictions (None before they ran or when there are none).
    verdict: ContentVerdict | None = None
    #: The predictions' bytes while a known verdict spares their parse (see predictions_of).
    predictions_bytes: bytes | None = None
    #: The file memo of a run whose files were all read or recalled (for the next build).
    memo: dict[str, Any] | None = None

    def exclude(self, reason: str, detail: str) -> None:
        """Mark the run excluded with ``reason`` (the first failure wins)."""
        self.status, self.reason, self.detail = STATUS_EXCLUDED, reason, detail
        self.data = None
        self.predictions_bytes = None

    @property
    def excluded(self) -> bool:
        """Whether the run has been excluded."""
        return self.reason is not None


def seed_of(run: RunInput) -> tuple[bool, int]:
    """A sort key for the run's seed: runs whose seed is unknown first, then by seed.

    An unknown seed is out of band (``run.seed`` is None), so a real seed -1
    is never confused with it.
    """
    return (run.seed is not None, 0 if run.seed is None else run.seed)


class _Unreadable(Exception):
    """A file of the run directory cannot be read or parsed (detail in the message)."""


def _read_file(run_dir: str, name: str) -> tuple[bytes, Any] | None:
    """The bytes and stat of a run-directory file; None when absent; ``_Unreadable`` otherwise.

    Every file goes through the one safe open: a FIFO, a directory, a file
    the user may not read or one that vanished is an exclusion with that
    reason, never a hang or an aborted report.
    """
    try:
        return read_run_file(run_dir, name)
    except UnreadableFileError as exc:
        raise _Unreadable(f"{name}: {exc.reason}") from None


def _read_object(name: str, data: bytes | None) -> dict[str, Any] | None:
    """A present JSON file's top-level object; None when absent; ``_Unreadable`` otherwise."""
    if data is None:
        return None
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _Unreadable(f"{name} cannot be parsed: {exc}") from exc
    if not isinstance(parsed, dict):
        raise _Unreadable(f"{name} holds a {type(parsed).__name__}, not a JSON object")
    return parsed


def _shown(values: Any) -> str:
    """Up to five values and, when there are more, how many were left out."""
    items = list(values)
    text = ", ".join(repr(v) for v in items[:_MAX_SHOWN])
    return text + (f" (+{len(items) - _MAX_SHOWN} more)" if len(items) > _MAX_SHOWN else "")


def _checked_fields(found: dict[str, Any] | None, fields: tuple[str, ...]) -> dict[str, Any] | None:
    """The ``fields`` a JSON object holds (None when the file is absent)."""
    return None if found is None else {key: found[key] for key in fields if key in found}


def _set_facts(run: RunInput, facts: MemoFacts) -> None:
    """Fill the run's identity and checked fields from ``facts`` (see :func:`memo_entry`).

    Fields ``facts`` does not hold yet (metadata, split information) are None.
    """
    run.model, run.dataset = facts["model"], facts["dataset"]
    run.seed, run.returncode = facts["seed"], facts["returncode"]
    run.metadata, run.split_info = facts.get("metadata"), facts.get("split_info")
    fingerprint = (run.metadata or {}).get("params_fingerprint")
    run.fingerprint = fingerprint if isinstance(fingerprint, str) and fingerprint else None


def _identity_facts(
    run: RunInput, record: RunRecord | RunFacts | None, metrics_mtime: float | None
) -> MemoFacts:
    """Model, dataset, seed and returncode: from ``record`` while its metrics mtime holds.

    Otherwise the metrics file is parsed (:func:`read_run`); ``_Unreadable`` for check 1.
    """
    if record is None or metrics_mtime is None or record.mtime != metrics_mtime:
        found = read_run(run.path)
        if isinstance(found, UnreadableRun):
            raise _Unreadable(found.reason)
        record = found
    return {
        "model": record.model,
        "dataset": record.dataset,
        "seed": record.seed,
        "returncode": record.returncode,
    }


def _entry_names(directory: str) -> frozenset[str] | None:
    """The names of the entries of a run directory; None when it cannot be listed.

    One listing answers every "is this name there" of the contract (which
    predictions file, which optional file is absent) for what two ``lstat``
    calls cost; a directory that cannot be listed is asked name by name, as before.
    """
    try:
        return frozenset(os.listdir(directory))
    except (OSError, ValueError):
        return None


def _recall(
    run: RunInput,
    memo: Any,
    known: Mapping[str, ContentVerdict],
    record: RunRecord | RunFacts | None,
    *,
    present: frozenset[str] | None = None,
    directory: list[int] | None = None,
) -> bool:
    """Fill the run from an earlier build's memo when none of its files changed.

    A run with predictions is recalled only when its file's verdict is known
    (and was not a parse failure, whose detail names the path); its bytes are
    then read only if :func:`predictions_of` needs them. ``directory`` is the
    run directory's signature taken before ``present`` was listed (the memo
    records it for the next build).
    """
    name = None if run.predictions_file is None else run.predictions_file.name
    if not isinstance(memo, dict) or memo.get("predictions") != name:
        return False
    recalled = recalled_facts(memo, run.path, names=HASHED_FILES, present=present)
    if recalled is None:
        return False
    files, facts, mtimes = recalled
    verdict = None
    if name is not None:
        verdict = known.get(content_key(name, files[name]))
        if verdict is None or verdict.reason == UNREADABLE:
            return False
        run.predictions_mtime = mtimes[name]
    if record is not None and record.mtime == mtimes.get(METRICS_FILENAME):
        # What _identity_facts gives while the record's mtime holds, without its dict.
        facts["model"], facts["dataset"] = record.model, record.dataset
        facts["seed"], facts["returncode"] = record.seed, record.returncode
    _set_facts(run, facts)
    run.files, run.verdict = files, verdict
    run.memo = (
        memo
        if unchanged_memo(memo, facts, directory=directory)
        else memo_entry(
            {key: (value[0], value[1:]) for key, value in memo["files"].items()},
            facts,
            directory=directory,
        )
    )
    return True


#: The names of a directory that kept its memo's signature, as :func:`recalled_facts`
#: takes them: none of the names the memo recorded absent is there.
_NONE_ADDED: frozenset[str] = frozenset()


def _recall_unlisted(
    run: RunInput,
    memo: Any,
    known: Mapping[str, ContentVerdict],
    record: RunRecord | RunFacts | None,
    directory: list[int] | None,
) -> bool:
    """:func:`_recall` without listing the directory, while it has the memo's signature.

    No entry of the directory was created, removed or renamed since the memo
    was made (see :mod:`~deepecgkit.statistical_report.file_memo`), so its
    predictions file is the one the memo names and every file it recorded
    absent is still absent.
    """
    if directory is None or type(memo) is not dict or memo.get("directory") != directory:
        return False
    name = memo.get("predictions")
    if name is not None and name not in _PREDICTIONS_NAMES:
        return False
    run.predictions_file = None if name is None else Path(run.path, name)
    if _recall(run, memo, known, record, present=_NONE_ADDED, directory=directory):
        return True
    run.predictions_file = None
    return False


def _load(
    run: RunInput,
    known: Mapping[str, ContentVerdict],
    *,
    record: RunRecord | RunFacts | None = None,
    memo: Any = None,
) -> None:
    """Fill the run from its files (or its unchanged memo); raise ``_Unreadable`` for check 1.

    Metadata, split information and predictions are read once each, and
    their recorded hashes are those of the very bytes that were parsed. A
    predictions file whose key is in ``known`` is not parsed: its verdict is
    taken and its bytes kept for :func:`predictions_of`.
    """
    directory = directory_signature(run.path)  # before the listing: a later change shows
    if memo is not None and _recall_unlisted(run, memo, known, record, directory):
        return
    present = _entry_names(run.path)
    if present is None or not present.isdisjoint(_PREDICTIONS_NAMES):
        run.predictions_file = predictions_path(run.path)
    if memo is not None and _recall(run, memo, known, record, present=present, directory=directory):
        return
    contents, signatures, metrics_mtime = {}, {}, None
    for name in HASHED_FILES:
        found = _read_file(run.path, name)
        contents[name] = None if found is None else found[0]
        if found is not None:
            run.files[name] = hashlib.sha256(found[0]).hexdigest()
            signatures[name] = stat_signature(found[1])
            if name == METRICS_FILENAME:
                metrics_mtime = found[1].st_mtime
    facts = _identity_facts(run, record, metrics_mtime)
    _set_facts(run, facts)  # an unparseable JSON file below is reported with the run's identity
    facts["metadata"] = _checked_fields(
        _read_object(METADATA_FILENAME, contents[METADATA_FILENAME]), CHECKED_METADATA_FIELDS
    )
    facts["split_info"] = _checked_fields(
        _read_object(SPLIT_INFO_FILENAME, contents[SPLIT_INFO_FILENAME]), CHECKED_SPLIT_FIELDS
    )
    facts["predictions"] = None
    _set_facts(run, facts)
    if run.predictions_file is not None:
        name = facts["predictions"] = run.predictions_file.name
        found = _read_file(run.path, name)
        if found is None:
            raise _Unreadable(f"{name}: {REASON_MISSING}")
        data, info = found
        digest = hashlib.sha256(data).hexdigest()
        run.files[name] = digest
        signatures[name] = stat_signature(info)
        run.predictions_mtime = info.st_mtime
        verdict = known.get(content_key(name, digest))
        # A parse failure's message names the file's path, so it is never taken as known.
        if verdict is not None and verdict.reason != UNREADABLE:
            run.verdict = verdict
            if verdict.reason is None:
                run.predictions_bytes = data
        else:
            try:
                run.frame = parse_predictions(data, run.predictions_file)
            except ValueError as exc:
                run.verdict = ContentVerdict(UNREADABLE, str(exc))
                raise _Unreadable(str(exc)) from exc
    run.memo = memo_entry(
        {key: (run.files[key], signature) for key, signature in signatures.items()},
        facts,
        directory=directory,
    )


# --- checks 5-8 on the predictions table -------------------------------------------------------


def _malformed(frame: pd.DataFrame) -> tuple[str | None, ValidPredictions | None]:
    """Check 5; the detail of the first problem found, or the parsed arrays."""
    missing = [c for c in _REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        return f"missing required columns {missing}", None
    indices = sorted(int(m.group(1)) for c in frame.columns if (m := _PROB_COLUMN.fullmatch(c)))
    if indices != list(range(len(indices))) or len(indices) < _MIN_CLASSES:
        return (
            f"probability columns must be exactly prob_0 … prob_(K-1) with K >= 2, got "
            f"{[f'prob_{k}' for k in indices]}",
            None,
        )
    if frame.empty:
        return "zero prediction rows", None
    for column in ("sample_id", "group_id"):
        empty = frame[column].astype(str).str.strip() == ""
        if empty.any():
            return f"{int(empty.sum())} rows have an empty {column}", None
    prob_columns = [f"prob_{k}" for k in indices]
    for column in prob_columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            values = pd.to_numeric(frame[column], errors="coerce")
            bad = frame[column][values.isna()]
            return f"{column} holds non-numeric values {_shown(bad.unique())}", None
    prob = frame[prob_columns].to_numpy(dtype=np.float64)
    if not np.isfinite(prob).all():
        rows = int((~np.isfinite(prob)).any(axis=1).sum())
        return f"{rows} rows hold a non-finite probability", None
    outside = (prob < 0.0) | (prob > 1.0)
    if outside.any():
        worst = prob[outside][np.argmax(np.abs(prob[outside] - 0.5))]
        return (
            f"{int(outside.any(axis=1).sum())} rows hold a probability outside [0, 1] "
            f"(worst {float(worst)!r})",
            None,
        )
    labels = pd.to_numeric(frame["y_true"], errors="coerce").to_numpy(dtype=np.float64)
    integral = np.isfinite(labels) & (labels == np.round(labels))
    if not integral.all():
        return (
            "y_true must be integer class indices; got "
            f"{_shown(frame['y_true'][~integral].unique())}",
            None,
        )
    n_classes = len(prob_columns)
    outside_labels = (labels < 0) | (labels >= n_classes)
    if outside_labels.any():
        return (
            f"y_true must lie in [0, {n_classes - 1}]; got "
            f"{_shown(np.unique(labels[outside_labels].astype(np.int64)).tolist())}",
            None,
        )
    return None, ValidPredictions(
        sample_id=frame["sample_id"].astype(str).to_numpy(dtype=object).astype(str),
        group_id=frame["group_id"].astype(str).to_numpy(dtype=object).astype(str),
        y_true=labels.astype(np.int64),
        prob=prob,
    )


def _content_verdict(frame: pd.DataFrame) -> tuple[ContentVerdict, ValidPredictions | None]:
    """Checks 4-8 on a predictions table: the verdict, and the arrays when valid."""
    multilabel = [c for c in frame.columns if _MULTILABEL_COLUMN.fullmatch(c)]
    if multilabel:
        return ContentVerdict(
            MULTILABEL_UNSUPPORTED,
            f"multi-label predictions ({len(multilabel)} y_true_<k> columns); the report "
            "handles single-label runs only",
        ), None
    problem, data = _malformed(frame)
    if data is None:
        return ContentVerdict(MALFORMED_PREDICTIONS, problem or ""), None
    deviation = np.abs(data.prob.sum(axis=1) - 1.0)
    off = deviation > PROBABILITY_SUM_TOLERANCE
    if off.any():
        return ContentVerdict(
            NON_NORMALISED,
            f"{int(off.sum())} of {off.size} rows have |sum of probabilities - 1| > "
            f"{PROBABILITY_SUM_TOLERANCE} (worst deviation {float(deviation.max()):.6g}); "
            "not renormalised",
        ), None
    ids, counts = np.unique(data.sample_id, return_counts=True)
    if (counts > 1).any():
        repeated = ids[counts > 1]
        return ContentVerdict(
            DUPLICATE_SAMPLE,
            f"{repeated.size} sample_id values occur more than once: {_shown(repeated.tolist())}",
        ), None
    pairs = pd.DataFrame({"group": data.group_id, "label": data.y_true}).drop_duplicates()
    label_counts = pairs.groupby("group", sort=True)["label"].nunique()
    conflicting = label_counts.index[label_counts > 1]
    if len(conflicting):
        return ContentVerdict(
            CONFLICTING_GROUP_LABEL,
            f"{len(conflicting)} group_id values carry more than one y_true: "
            f"{_shown(conflicting.tolist())}",
        ), None
    n_groups = int(label_counts.size)
    return ContentVerdict(None, n_rows=int(data.sample_id.size), n_groups=n_groups), data


def _apply_verdict(run: RunInput, verdict: ContentVerdict) -> None:
    run.verdict = verdict
    if verdict.reason is not None:
        run.exclude(verdict.reason, verdict.detail)


def _recalled_predictions(run: RunInput, name: str) -> bytes:
    """The bytes of a recalled run's predictions file, which must still have its recorded hash.

    Raises:
        ValueError: the file changed or cannot be read since the contract checked it.
    """
    try:
        found = _read_file(run.path, name)
    except _Unreadable as exc:
        raise ValueError(f"run {run.run_id}: {exc} since it was checked") from None
    if found is None or hashlib.sha256(found[0]).hexdigest() != run.files[name]:
        raise ValueError(
            f"run {run.run_id}: {name} changed while the report was built; build it again"
        )
    return found[0]


def predictions_of(run: RunInput) -> ValidPredictions:
    """The validated predictions of an included run, parsed from its kept bytes when needed.

    Raises:
        ValueError: the run has no valid predictions (it is not included).
    """
    valid = run.verdict is not None and run.verdict.reason is None and not run.excluded
    if run.data is None and valid and run.predictions_file:
        data = run.predictions_bytes
        if data is None:  # recalled from the memo: read now, and check it is the file checked
            data = _recalled_predictions(run, run.predictions_file.name)
        verdict, run.data = _content_verdict(parse_predictions(data, run.predictions_file))
        if verdict != run.verdict:  # the same bytes and code give the same verdict
            raise ValueError(f"run {run.run_id}: predictions verdict {verdict} != {run.verdict}")
        run.predictions_bytes = None
    if run.data is None:
        raise ValueError(f"run {run.run_id} has no validated predictions; it is not included")
    return run.data


# --- checks 9-11 across runs ------------------------------------------------------------------


def _reference_fingerprints(
    runs: list[RunInput], recalled: Mapping[tuple[str, str], Counter[str]]
) -> dict[tuple[str, str], str | None]:
    """Per cell, the unique most frequent fingerprint among readable, non-failed runs.

    ``recalled`` holds the counts of the runs recalled as columns
    (:mod:`~deepecgkit.statistical_report.frame_recall`), added to those of ``runs``.
    """
    by_cell: dict[tuple[str, str], Counter[str]] = {
        cell: Counter(counts) for cell, counts in recalled.items()
    }
    for run in runs:
        if run.readable and run.reason != FAILED_RUN and run.fingerprint:
            by_cell.setdefault((run.model or "", run.dataset or ""), Counter())[
                run.fingerprint
            ] += 1
    references: dict[tuple[str, str], str | None] = {}
    for cell, counts in by_cell.items():
        ranked = counts.most_common()
        tie = len(ranked) > 1 and ranked[0][1] == ranked[1][1]
        references[cell] = None if tie else ranked[0][0]
    return references


def _check_fingerprint(
    run: RunInput,
    references: dict[tuple[str, str], str | None],
    runs: list[RunInput],
    recalled: Mapping[tuple[str, str], Counter[str]],
) -> None:
    """Check 9 for a run that records a fingerprint (``recalled``: see _reference_fingerprints)."""
    cell = (run.model or "", run.dataset or "")
    reference = references.get(cell)
    if reference is None:
        counts = Counter(recalled.get(cell, {}))
        counts.update(
            r.fingerprint
            for r in runs
            if r.readable
            and r.reason != FAILED_RUN
            and r.fingerprint
            and (r.model, r.dataset) == (run.model, run.dataset)
        )
        run.exclude(
            AMBIGUOUS_FINGERPRINT,
            f"cell ({run.model}, {run.dataset}) has no unique most frequent fingerprint: "
            + ", ".join(f"{fp} x{n}" for fp, n in sorted(counts.items())),
        )
    elif run.fingerprint != reference:
        run.exclude(
            STALE_FINGERPRINT,
            f"params_fingerprint {run.fingerprint} differs from the cell's reference {reference}",
        )


def _partial_reasons(run: RunInput, verdict: ContentVerdict) -> list[tuple[str, str]]:
    """Check 10: every partial reason with its detail, in the specified order."""
    reasons: list[tuple[str, str]] = []
    if run.metadata is None:
        reasons.append((MISSING_METADATA, f"no {METADATA_FILENAME}"))
    if run.fingerprint is None:
        reasons.append((MISSING_FINGERPRINT, "no or empty params_fingerprint"))
    split = run.split_info
    sizes = {
        key: value
        for key in ("n_test", "n_test_groups")
        if split is not None
        and isinstance(value := split.get(key), int)
        and not isinstance(value, bool)
    }
    if split is None:
        reasons.append((MISSING_SPLIT_INFO, f"no {SPLIT_INFO_FILENAME}"))
    elif len(sizes) < len(("n_test", "n_test_groups")):
        reasons.append(
            (MISSING_SPLIT_INFO, f"{SPLIT_INFO_FILENAME} lacks an integer n_test or n_test_groups")
        )
    else:
        n_rows, n_groups = verdict.n_rows, verdict.n_groups
        if n_rows != sizes["n_test"] or n_groups != sizes["n_test_groups"]:
            reasons.append(
                (
                    INCOMPLETE_PREDICTIONS,
                    f"{n_rows} rows in {n_groups} groups, but split_info records n_test="
                    f"{sizes['n_test']}, n_test_groups={sizes['n_test_groups']}",
                )
            )
    return reasons


def _resolve_duplicates(runs: list[RunInput]) -> None:
    """Check 11: keep the newest of each surviving (model, dataset, seed), seed known."""
    survivors: dict[tuple[str, str, int], list[RunInput]] = {}
    for run in runs:
        if not run.excluded and run.seed is not None:
            key = (run.model or "", run.dataset or "", run.seed)
            survivors.setdefault(key, []).append(run)
    for group in survivors.values():
        if len(group) == 1:
            continue
        newest = max(group, key=lambda r: (r.predictions_mtime, r.run_id))
        for run in group:
            if run is not newest:
                run.exclude(
                    DUPLICATE_RUN,
                    f"same (model, dataset, seed) as {newest.run_id}, whose predictions are newer",
                )


def assess_runs(
    run_dirs: Sequence[tuple[str, str | Path]],
    *,
    allow_partial: bool,
    known: Mapping[str, ContentVerdict] | None = None,
    records: Sequence[RunRecord | RunFacts | None] | None = None,
    memos: Mapping[str, Any] | None = None,
    recalled: Mapping[tuple[str, str], Counter[str]] | None = None,
) -> list[RunInput]:
    """Apply the identity contract to every discovered run directory.

    Args:
        run_dirs: ``(run_id, resolved path)`` of each discovered run directory.
        allow_partial: admit runs whose only failures are partial reasons
            (exploratory override; never admits a run failing another check).
        known: verdicts of predictions files met before, by :func:`content_key`;
            a file found here is not parsed (its run's ``verdict`` is this one).
        records: the caller's records of the runs, in ``run_dirs`` order (None
            for a run without one): a run's model, dataset, seed and returncode
            are its record's while its metrics file has the record's mtime.
        memos: file memos of an earlier build by run directory (``str`` of the
            resolved path); a run whose files are unchanged is not read again.
        recalled: per cell ``(model, dataset)``, the fingerprint counts of
            readable, non-failed runs recalled as columns and not given here
            (:class:`~deepecgkit.statistical_report.frame_recall.Recalled`):
            they count towards each cell's reference fingerprint (check 9).

    Returns:
        One :class:`RunInput` per directory, in the given order, with
        ``status`` ``included``, ``partial`` or ``excluded`` and, when
        excluded, ``reason`` and ``detail``. Included and partial runs carry
        their validated predictions in ``data``, or, when the verdict was
        known, the bytes :func:`predictions_of` parses on demand.
    """
    known = {} if known is None else known
    memos = {} if memos is None else memos
    recalled = {} if recalled is None else recalled
    runs = [RunInput(run_id=run_id, path=os.fspath(path)) for run_id, path in run_dirs]
    given = [None] * len(runs) if records is None else list(records)
    if len(given) != len(runs):
        raise ValueError(f"{len(given)} records given for {len(runs)} run directories")
    for run, record in zip(runs, given, strict=True):
        try:
            _load(run, known, record=record, memo=memos.get(run.path))
        except _Unreadable as exc:
            run.exclude(UNREADABLE, str(exc))
            continue
        run.readable = True
        if run.returncode is not None and run.returncode != 0:
            error = (run.metadata or {}).get("error")
            run.exclude(
                FAILED_RUN,
                f"returncode {run.returncode}" + (f": {error}" if isinstance(error, str) else ""),
            )
            continue
        if run.frame is not None:
            verdict, run.data = _content_verdict(run.frame)
            _apply_verdict(run, verdict)
        elif run.verdict is not None:
            _apply_verdict(run, run.verdict)
        else:
            run.exclude(NO_PREDICTIONS, "neither predictions.csv nor predictions.txt")
    references = _reference_fingerprints(runs, recalled)
    for run in runs:
        if run.excluded or run.verdict is None or run.verdict.reason is not None:
            continue
        if run.fingerprint is not None:
            _check_fingerprint(run, references, runs, recalled)
            if run.excluded:
                continue
        reasons = _partial_reasons(run, run.verdict)
        if not reasons:
            run.status = STATUS_INCLUDED
        elif allow_partial:
            run.status = STATUS_PARTIAL
            run.partial_reasons = [code for code, _ in reasons]
        else:
            run.exclude(reasons[0][0], "; ".join(f"{code}: {text}" for code, text in reasons))
    _resolve_duplicates(runs)
    debug = logger.isEnabledFor(logging.DEBUG)
    for run in runs:
        run.frame = None
        if run.excluded and debug:
            logger.debug("excluded %s: %s (%s)", run.run_id, run.reason, run.detail)
    excluded = Counter(run.reason for run in runs if run.excluded)
    if excluded:
        # One record for all (100,000 records cost seconds, and Dagster keeps each one);
        # exclusions.csv names every run and its detail.
        logger.info(
            "%d of %d runs read one by one excluded: %s",
            sum(excluded.values()),
            len(runs),
            dict(sorted(excluded.items())),
        )
    return runs
