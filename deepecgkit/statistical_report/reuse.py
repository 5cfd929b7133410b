"""Reuse of the report's per-run and per-pair rows and figures across rebuilds.

A refresh of the statistical report after one new run would otherwise
bootstrap, calibrate and draw every run and pair again. The report keeps,
beside its outputs, ``report_cache.json.gz``: entries addressed by the
content of what shaped them, so an entry can never describe other inputs.

* A **run key** is the SHA-256 of the run's predictions file (name and the
  very bytes the identity contract parsed), the run's identity as its rows
  carry it (model, dataset, seed, params fingerprint, partial) and every
  setting that shapes its rows (bins, n_resamples, confidence_level, seed,
  allow_partial). Its entry holds the run's rows of ``run_summary.csv``,
  ``level_metrics.csv`` and ``reliability.csv`` and what the figure title and
  the manifest need (ECE, refusals).
* A **pair key** is the two run keys in order (reference, candidate): it
  changes when either run, a setting or the reference changes. Its entry
  holds the pair's paired and McNemar rows, or the reason it was rejected.
* A **content key** is a predictions file's hash and name; its entry is the
  file's :class:`~deepecgkit.statistical_report.identity.ContentVerdict`
  (parse and checks 4-8), so an unchanged file is hashed, not parsed.
* A **file memo**, by run directory, records the SHA-256 and stat signature
  of each file the identity contract read and the facts it took from them
  (:mod:`~deepecgkit.statistical_report.file_memo`), so an unchanged run is
  neither read nor hashed again; rows stay keyed by the content hashes. The
  memos are kept beside the cache, as the columns of ``report_memos.parquet``
  (:mod:`~deepecgkit.statistical_report.memo_table`): at 100,000 runs they
  were 75 MB of JSON that each refresh decoded, encoded and compressed again.
  They stay columns when loaded: the unchanged runs are compared with them
  as arrays (:mod:`~deepecgkit.statistical_report.frame_recall`) and their
  rows written again as they are; a memo object is built only for a run
  the per-run road reads.
* A **figure key** adds ``pdf``, the plotting module's source and the
  matplotlib version to the run key; its entry records the files (path,
  format, SHA-256) of the figure; a file is reused only when its bytes on
  disk still have that hash.

``run_id`` is in no key: rows are stored without the identity columns and
stamped with the current run's identity when reused, so renaming or moving
a run directory keeps its rows.

Both files are bound to an **environment**: the cache format, the
versions of Python, numpy, scipy and pandas, and a digest of the source of
the packages that compute the rows (:mod:`deepecgkit.analysis`,
:mod:`deepecgkit.rundir`, this package). A file from another environment,
another program, or one that is damaged (gzip checks its CRC) is ignored
and logged, and everything is computed again; a malformed entry is a miss.

Every value goes through the same encoding whether it was computed now or
read from the file (JSON keeps floats exactly, NaN and infinities included),
so the tables built from reused rows equal those of a clean build byte for
byte. The new file holds exactly the entries the report used, in key order,
so it is itself a function of the inputs.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import stat
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deepecgkit.io import UnreadableFileError, atomic_write_bytes, json_ready, read_regular_file
from deepecgkit.memory import release_free_memory
from deepecgkit.parquet import dictionary_columns
from deepecgkit.rundir.format import PREDICTIONS_FILENAME, PREDICTIONS_TXT_FILENAME
from deepecgkit.statistical_report.identity import (
    HASHED_FILES,
    UNREADABLE,
    ContentVerdict,
    RunInput,
    content_key,
)
from deepecgkit.statistical_report.memo_table import MemoRows, memos_table
from deepecgkit.statistical_report.tables import (
    LEVEL_METRICS_COLUMNS,
    MCNEMAR_COLUMNS,
    PAIRED_COLUMNS,
    RELIABILITY_COLUMNS,
    RUN_ROW_IDENTITY,
    RUN_SUMMARY_COLUMNS,
    PairOutcome,
    ReportSettings,
    RunScores,
    compare_pair,
    pair_identity,
    run_identity,
    score_run,
)

__all__ = [
    "CACHE_FILENAME",
    "MEMOS_FILENAME",
    "DamagedEntry",
    "ReportCache",
    "RowReuse",
    "decode_pair",
    "decode_run",
    "decode_verdicts",
    "encode_pair",
    "encode_run",
    "encode_verdict",
    "environment",
    "figure_files",
    "figure_key",
    "pair_key",
    "run_key",
    "write_changed",
]

logger = logging.getLogger(__name__)

CACHE_FILENAME = "report_cache.json.gz"
#: The file memos, beside the cache (see memo_table).
MEMOS_FILENAME = "report_memos.parquet"
#: The names a file memo may record, in the memo table's column order.
_MEMO_NAMES = (*HASHED_FILES, PREDICTIONS_FILENAME, PREDICTIONS_TXT_FILENAME)
#: The memo table's schema metadata key holding the environment it is bound to.
_MEMOS_ENVIRONMENT_KEY = b"deepecg_report_environment"
CACHE_FORMAT = "deepecg-report-cache"
#: Bumped whenever an entry's layout or meaning changes (2: the file memos; 3: the
#: run directory's signature in each memo, the memos in their own table).
CACHE_VERSION = 3
#: Packages whose source shapes the rows (a change invalidates every entry).
_ROW_SOURCES = ("analysis", "rundir", "statistical_report")
#: The sections of the JSON file, in :class:`ReportCache` field order (the memos,
#: ``files``, are the memo table's).
_PARTS = ("runs", "pairs", "figures", "contents")
#: Fixed gzip header time, so the same entries give the same file.
_GZIP_MTIME = 0
#: gzip's fastest level: at 20,000 runs (file memos included) it compresses four times
#: faster than the default level 9, for a file about a tenth larger.
_GZIP_LEVEL = 1

#: Identity columns of each run table: taken from the run, not stored.
_SUMMARY_IDENTITY = (*RUN_ROW_IDENTITY, "params_fingerprint", "partial")
_RUN_IDENTITY = RUN_ROW_IDENTITY
#: Identity columns of each pair table: taken from the two runs, not stored.
_MCNEMAR_IDENTITY = (
    "dataset",
    "seed",
    "reference_model",
    "candidate_model",
    "reference_run_id",
    "candidate_run_id",
)
_PAIRED_IDENTITY = (*_MCNEMAR_IDENTITY, "partial")
#: (RunScores field, columns, identity columns) of each run table.
_RUN_TABLES = (
    ("summary", RUN_SUMMARY_COLUMNS, _SUMMARY_IDENTITY),
    ("levels", LEVEL_METRICS_COLUMNS, _RUN_IDENTITY),
    ("reliability", RELIABILITY_COLUMNS, _RUN_IDENTITY),
)
_PAIR_TABLES = (
    ("paired", PAIRED_COLUMNS, _PAIRED_IDENTITY),
    ("mcnemar", MCNEMAR_COLUMNS, _MCNEMAR_IDENTITY),
)
#: Scalar fields of :class:`RunScores` beside its rows, with the types they must have.
_SCORE_FIELDS: dict[str, tuple[type, ...]] = {
    "ece": (float, int),
    "classwise_ece": (float, int),
    "figure_curve": (str,),
    "n_groups": (int,),
    "too_few_groups": (bool,),
    "no_interval_reason": (str, type(None)),
    "withheld": (dict,),
}


class DamagedEntry(ValueError):
    """A cache entry that does not have the layout this version writes."""


# --- keys ----------------------------------------------------------------------------------------


def _digest(material: Any) -> str:
    text = json.dumps(json_ready(material, nan_to_null=False), sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@cache
def _source_digest() -> str:
    """SHA-256 over the source files of the packages that compute the report's rows."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for name in _ROW_SOURCES:
        for path in sorted((package / name).rglob("*.py")):
            digest.update(path.relative_to(package).as_posix().encode("utf-8") + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def environment(versions: Mapping[str, str | None]) -> dict[str, Any]:
    """What the whole cache file is bound to: format, library versions and row source digest.

    Args:
        versions: the manifest's library versions (``python``, ``deepecgkit``,
            ``numpy``, ``scipy``, ``pandas``; matplotlib is part of the figure key).
    """
    return {
        "format": CACHE_FORMAT,
        "version": CACHE_VERSION,
        "versions": {name: value for name, value in versions.items() if name != "matplotlib"},
        "source_sha256": _source_digest(),
    }


def run_key(run: RunInput, settings: ReportSettings, *, allow_partial: bool) -> str:
    """The content key of one included run's rows (see the module docstring)."""
    if run.predictions_file is None:
        raise ValueError(f"run {run.run_id} has no predictions file; only included runs have keys")
    name = run.predictions_file.name
    return _digest(
        {
            "predictions": [name, run.files[name]],
            "model": run.model,
            "dataset": run.dataset,
            "seed": run.seed,
            "params_fingerprint": run.fingerprint,
            "partial": bool(run.partial_reasons),
            "bins": settings.bins,
            "n_resamples": settings.n_resamples,
            "confidence_level": repr(settings.confidence_level),
            "bootstrap_seed": settings.seed,
            "allow_partial": allow_partial,
        }
    )


def pair_key(reference_key: str, candidate_key: str) -> str:
    """The content key of one comparison: its two run keys, reference first."""
    return _digest({"reference": reference_key, "candidate": candidate_key})


def figure_key(key: str, *, pdf: bool, plotting_source_sha256: str, matplotlib: str) -> str:
    """The content key of one run's figure files: its run key plus what shapes the drawing."""
    return _digest(
        {
            "run": key,
            "pdf": pdf,
            "plotting_source_sha256": plotting_source_sha256,
            "matplotlib": matplotlib,
        }
    )


# --- entries -------------------------------------------------------------------------------------


def _value_columns(columns: Mapping[str, str], identity: Sequence[str]) -> list[str]:
    return [name for name in columns if name not in identity]


def _encode_rows(
    rows: list[dict[str, Any]], columns: Mapping[str, str], identity: Sequence[str]
) -> list[list[Any]]:
    """Rows as lists over the non-identity columns (an absent value is None, as pandas reads it)."""
    names = _value_columns(columns, identity)
    return [[json_ready(row.get(name), nan_to_null=False) for name in names] for row in rows]


def _decode_rows(
    encoded: Any, columns: Mapping[str, str], identity: Mapping[str, Any]
) -> list[dict[str, Any]]:
    names = _value_columns(columns, tuple(identity))
    if not isinstance(encoded, list):
        raise DamagedEntry("rows are not a list")
    rows = []
    for values in encoded:
        if not isinstance(values, list) or len(values) != len(names):
            raise DamagedEntry(f"a row does not hold the {len(names)} values of its table")
        rows.append({**identity, **dict(zip(names, values, strict=True))})
    return rows


def encode_run(scores: RunScores) -> dict[str, Any]:
    """A run's scores as a cache entry (plain JSON values)."""
    entry: dict[str, Any] = {
        name: _encode_rows(getattr(scores, name), columns, identity)
        for name, columns, identity in _RUN_TABLES
    }
    entry.update(
        {name: json_ready(getattr(scores, name), nan_to_null=False) for name in _SCORE_FIELDS}
    )
    return entry


def decode_run(entry: Any, run: RunInput) -> RunScores:
    """The scores of ``run`` from its entry, stamped with its identity; :class:`DamagedEntry`."""
    if not isinstance(entry, dict):
        raise DamagedEntry("a run entry is not an object")
    identity = run_identity(run)
    tables = {
        name: _decode_rows(
            entry.get(name), columns, {key: identity[key] for key in identity_columns}
        )
        for name, columns, identity_columns in _RUN_TABLES
    }
    scalars = {}
    for name, kinds in _SCORE_FIELDS.items():
        value = entry.get(name)
        if not isinstance(value, kinds) or (bool in kinds) != isinstance(value, bool):
            raise DamagedEntry(f"run entry field {name} is {value!r}")
        scalars[name] = float(value) if float in kinds else value
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in scalars["withheld"].items()):
        raise DamagedEntry("run entry field withheld is not text to text")
    return RunScores(**tables, **scalars)


def encode_pair(outcome: PairOutcome) -> dict[str, Any]:
    """A comparison's outcome as a cache entry (plain JSON values)."""
    entry: dict[str, Any] = {
        name: _encode_rows(getattr(outcome, name), columns, identity)
        for name, columns, identity in _PAIR_TABLES
    }
    entry.update({"reason": outcome.reason, "detail": outcome.detail})
    return entry


def decode_pair(entry: Any, *, reference: RunInput, candidate: RunInput) -> PairOutcome:
    """The outcome of a comparison from its entry, stamped with the two runs' identities."""
    if not isinstance(entry, dict):
        raise DamagedEntry("a pair entry is not an object")
    identity = pair_identity(reference, candidate)
    reason, detail = entry.get("reason"), entry.get("detail")
    if not isinstance(reason, (str, type(None))) or not isinstance(detail, str):
        raise DamagedEntry("a pair entry's reason or detail is not text")
    tables = {
        name: _decode_rows(
            entry.get(name), columns, {key: identity[key] for key in identity_columns}
        )
        for name, columns, identity_columns in _PAIR_TABLES
    }
    return PairOutcome(**tables, reason=reason, detail=detail)


def figure_files(entry: Any) -> list[dict[str, str]]:
    """The ``{"path", "format", "sha256"}`` files of a figure entry; :class:`DamagedEntry`."""
    if not isinstance(entry, list) or not entry:
        raise DamagedEntry("a figure entry is not a list of files")
    for item in entry:
        if not isinstance(item, dict) or set(item) != {"path", "format", "sha256"}:
            raise DamagedEntry("a figure file is not {path, format, sha256}")
        if not all(isinstance(value, str) for value in item.values()):
            raise DamagedEntry("a figure file's path, format or hash is not text")
    return entry


def encode_verdict(verdict: ContentVerdict) -> list[Any]:
    """A predictions file's verdict as a cache entry: ``[reason, detail, n_rows, n_groups]``."""
    return [verdict.reason, verdict.detail, verdict.n_rows, verdict.n_groups]


def decode_verdicts(entries: Mapping[str, Any]) -> dict[str, ContentVerdict]:
    """The well-formed verdict entries (a malformed one is left out and logged: a parse)."""
    verdicts = {}
    for key, entry in entries.items():
        if (
            isinstance(entry, list)
            and len(entry) == 4
            and isinstance(entry[0], (str, type(None)))
            and isinstance(entry[1], str)
            and all(isinstance(n, int) and not isinstance(n, bool) for n in entry[2:])
        ):
            verdicts[key] = ContentVerdict(*entry)
        else:
            logger.warning("report cache verdict %s ignored: malformed", key)
    return verdicts


# --- the file ------------------------------------------------------------------------------------


def write_changed(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, unless ``path`` is a regular file of these bytes.

    A refresh rewrites many files with the bytes they already hold (the
    header-only tables of a report without a reference, an unchanged cache);
    leaving such a file in place saves the write and its two ``fsync``
    calls, and the folder is the same either way. A symbolic link, or any
    other entry that is not a regular file, is replaced as before.
    """
    try:
        info = os.lstat(path)
    except OSError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_size == len(data):
        try:
            current, _ = read_regular_file(path)
        except UnreadableFileError:
            current = None
        if current == data:
            return path
    return atomic_write_bytes(path, data)


@dataclass
class ReportCache:
    """The entries of one report's cache: run, pair, figure and content keys to entries.

    ``files`` holds the file memo of each run directory, by its resolved path
    (kept in ``report_memos.parquet`` beside the cache file): a loaded
    cache's are a :class:`~deepecgkit.statistical_report.memo_table.MemoRows`
    (built per run only when asked for), a new cache's are the memos made
    now, and ``carried`` memo tables and the rows of each kept as they are
    (an earlier table's rows of the runs recalled as columns, the rows of the
    runs read as columns now), written beside them.
    """

    runs: dict[str, Any] = field(default_factory=dict)
    pairs: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    contents: dict[str, Any] = field(default_factory=dict)
    files: Mapping[str, Any] = field(default_factory=dict)
    carried: list[tuple[pa.Table, np.ndarray]] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path, bound_to: Mapping[str, Any]) -> ReportCache:
        """The cache at ``path``, or an empty one when it is absent, damaged or foreign (logged).

        The memos come from ``report_memos.parquet`` beside it, on their own:
        either file may be missing or ignored without the other.
        """
        cache = cls._load_entries(path, bound_to)
        cache.files = _load_memos(path.with_name(MEMOS_FILENAME), bound_to)
        return cache

    @classmethod
    def _load_entries(cls, path: Path, bound_to: Mapping[str, Any]) -> ReportCache:
        try:
            data, _ = read_regular_file(path)
        except UnreadableFileError as exc:
            if path.exists() or path.is_symlink():
                logger.warning("report cache %s ignored: %s", path, exc.reason)
            return cls()
        try:
            payload = json.loads(gzip.decompress(data).decode("utf-8"))
        except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError, RecursionError):
            logger.warning("report cache %s is damaged; every run is computed again", path)
            return cls()
        if not isinstance(payload, dict) or payload.get("environment") != dict(bound_to):
            logger.info(
                "report cache %s was written by another program, version or setting of the "
                "library; every run is computed again",
                path,
            )
            return cls()
        parts = [payload.get(name) for name in _PARTS]
        if not all(isinstance(part, dict) for part in parts):
            logger.warning("report cache %s is damaged; every run is computed again", path)
            return cls()
        return cls(*parts)

    def release_memos(self) -> None:
        """Drop the file memos and carried memo tables (once saved or used: memory).

        Arrow's allocator keeps the memory of freed buffers for reuse; what
        no buffer holds any more is handed back to the system, so the step's
        peak (the manifest, written next) does not stand on the tables' too.
        """
        self.files, self.carried = {}, []
        release_free_memory()

    def save(self, path: Path, bound_to: Mapping[str, Any]) -> Path:
        """Write the entries atomically (gzip-compressed JSON, keys sorted, no timestamp).

        The memos go to ``report_memos.parquet`` beside it, rows sorted by run
        directory. A file that already holds its bytes is left in place
        (:func:`write_changed`).
        """
        payload = {
            "environment": dict(bound_to),
            "runs": self.runs,
            "pairs": self.pairs,
            "figures": self.figures,
            "contents": self.contents,
        }
        text = json.dumps(payload, sort_keys=True, allow_nan=True, separators=(",", ":"))
        _save_memos(path.with_name(MEMOS_FILENAME), self.files, bound_to, carried=self.carried)
        return write_changed(
            path, gzip.compress(text.encode("ascii"), compresslevel=_GZIP_LEVEL, mtime=_GZIP_MTIME)
        )


def _environment_text(bound_to: Mapping[str, Any]) -> bytes:
    return json.dumps(dict(bound_to), sort_keys=True).encode("utf-8")


def _load_memos(path: Path, bound_to: Mapping[str, Any]) -> MemoRows:
    """The memos of the memo table at ``path``; none when it is absent, damaged or foreign."""
    none = MemoRows.empty(names=_MEMO_NAMES)
    try:
        data, _ = read_regular_file(path)
    except UnreadableFileError as exc:
        if path.exists() or path.is_symlink():
            logger.warning("report memos %s ignored: %s", path, exc.reason)
        return none
    try:
        reader = pq.ParquetFile(pa.BufferReader(data))
        bound = (reader.schema_arrow.metadata or {}).get(_MEMOS_ENVIRONMENT_KEY)
        # Only a table of this environment is read (its 100,000 rows are most of the file).
        table = reader.read() if bound == _environment_text(bound_to) else None
    except (pa.ArrowException, OSError, ValueError):
        logger.warning("report memos %s are damaged; every run is read again", path)
        return none
    if table is None:
        logger.info(
            "report memos %s were written by another program or version of the library; "
            "every run is read again",
            path,
        )
        return none
    try:
        return MemoRows(table, names=_MEMO_NAMES)
    except (ValueError, TypeError, pa.ArrowException):
        logger.warning("report memos %s are damaged; every run is read again", path)
        return none


def _with_carried(table: pa.Table, sources: Sequence[tuple[pa.Table, np.ndarray]]) -> pa.Table:
    """``table``'s rows and each source table's ``rows`` in one table sorted by run directory.

    One ``take`` from the tables side by side, so an earlier table's rows
    are copied once (at 100,000 runs each copy of the table is about 60 MB);
    a source row whose run directory ``table`` holds is left out (the
    sources' run directories are disjoint). Arrow orders text by its UTF-8
    bytes, which is Python's order of the code points (a clean build's ``sorted``).
    """
    table = table.replace_schema_metadata(None)
    tables, indices, offset = [], [], 0
    for source, rows in sources:
        source = source.replace_schema_metadata(None)
        if table.num_rows:
            taken = source["run_dir"].take(pa.array(rows, pa.int64()))
            rows = rows[~np.asarray(pc.is_in(taken, table["run_dir"]), dtype=bool)]
        tables.append(source)
        indices.append(offset + rows)
        offset += source.num_rows
    tables.append(table)
    indices.append(offset + np.arange(table.num_rows, dtype=np.int64))
    combined = pa.concat_tables(tables)
    chosen = np.concatenate(indices).astype(np.int64)
    if (
        len(tables) == 2
        and table.num_rows == 0
        and np.array_equal(chosen, np.arange(tables[0].num_rows))
    ):
        return tables[0].combine_chunks()  # every earlier row, in its order: nothing to take
    keys = combined["run_dir"].take(pa.array(chosen, pa.int64()))
    order = chosen[np.asarray(pc.sort_indices(keys))]
    return combined.take(pa.array(order, pa.int64())).combine_chunks()


def _save_memos(
    path: Path,
    memos: Mapping[str, Any],
    bound_to: Mapping[str, Any],
    *,
    carried: Sequence[tuple[pa.Table, np.ndarray]] = (),
) -> Path:
    """Write the memo table atomically (Parquet, the environment in its schema metadata).

    ``carried`` rows (of other tables, as they are) join the rows of
    ``memos``, sorted by run directory with them, so the file is the one a
    build that made every memo now writes. They are dropped when a memo of
    ``memos`` did not fit a column (then, as on a clean build, none is kept).
    """
    table, left_out = memos_table(memos, names=_MEMO_NAMES)
    if left_out:
        logger.info("%d file memos not kept (they do not fit the memo table)", left_out)
    overflowed = table.num_rows == 0 and left_out and left_out == len(memos)
    carried = [(source, rows) for source, rows in carried if len(rows)]
    if carried and not overflowed:
        table = _with_carried(table, carried)
    table = table.replace_schema_metadata({_MEMOS_ENVIRONMENT_KEY: _environment_text(bound_to)})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, use_dictionary=dictionary_columns(table))
    return write_changed(path, sink.getvalue().to_pybytes())


# --- reuse while building ------------------------------------------------------------------------


class RowReuse:
    """Scores and comparisons of one build: reused from ``previous`` where the key matches.

    Everything used (reused or computed) is put into :attr:`kept`, the cache
    the build writes; every result passes through the entry encoding, so a
    computed result is exactly what a later build will read back.
    """

    def __init__(
        self, previous: ReportCache, settings: ReportSettings, *, allow_partial: bool
    ) -> None:
        self.previous = previous
        self.kept = ReportCache()
        self.settings = settings
        self.allow_partial = allow_partial
        self.run_keys: dict[str, str] = {}
        self.reused_runs = self.computed_runs = 0
        self.reused_pairs = self.computed_pairs = 0

    def carry_memos(self, memos: pa.Table, rows: np.ndarray) -> None:
        """Keep ``rows`` of a memo table as they are (runs recalled or read as columns)."""
        self.kept.carried.append((memos, rows))

    def keep_verdicts(self, runs: Sequence[RunInput]) -> None:
        """Keep the predictions verdict and the file memo of every run that has one.

        Both are for the next build: a run whose files keep their stat
        signatures is then recalled, not read (see ``file_memo``).
        """
        for run in runs:
            if run.memo is not None:
                self.kept.files[run.path] = run.memo
            # A parse failure's detail names the file's path: not content alone.
            if run.verdict is not None and run.predictions_file is not None:
                if run.verdict.reason == UNREADABLE:
                    continue
                name = run.predictions_file.name
                key = content_key(name, run.files[name])
                self.kept.contents[key] = encode_verdict(run.verdict)

    def scores(self, run: RunInput) -> RunScores:
        """The scores of one included run."""
        key = run_key(run, self.settings, allow_partial=self.allow_partial)
        self.run_keys[run.run_id] = key
        entry = self.kept.runs.get(key, self.previous.runs.get(key))
        if entry is not None:
            try:
                scores = decode_run(entry, run)
            except DamagedEntry as exc:
                logger.warning("report cache entry of %s ignored: %s", run.run_id, exc)
            else:
                self.kept.runs[key] = entry
                self.reused_runs += 1
                return scores
        entry = encode_run(score_run(run, self.settings))
        self.kept.runs[key] = entry
        self.computed_runs += 1
        return decode_run(entry, run)

    def compare(self, reference: RunInput, candidate: RunInput) -> PairOutcome:
        """The outcome of one comparison (both runs must have been scored first)."""
        key = pair_key(self.run_keys[reference.run_id], self.run_keys[candidate.run_id])
        entry = self.kept.pairs.get(key, self.previous.pairs.get(key))
        if entry is not None:
            try:
                outcome = decode_pair(entry, reference=reference, candidate=candidate)
            except DamagedEntry as exc:
                logger.warning(
                    "report cache entry of %s against %s ignored: %s",
                    candidate.run_id,
                    reference.run_id,
                    exc,
                )
            else:
                self.kept.pairs[key] = entry
                self.reused_pairs += 1
                return outcome
        entry = encode_pair(compare_pair(reference, candidate, settings=self.settings))
        self.kept.pairs[key] = entry
        self.computed_pairs += 1
        return decode_pair(entry, reference=reference, candidate=candidate)
