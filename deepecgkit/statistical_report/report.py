"""The statistical report: group-bootstrap tables, figures and a manifest from run folders.

:func:`statistical_report` is the logic of ``deepecg report`` and of the
Dagster asset ``statistical_report``. It is a post-processing step: it reads
run directories, never modifies them, never loads a model, fits nothing and
never alters a prediction. Each discovered run passes the identity contract
(:mod:`~deepecgkit.statistical_report.identity`) or is listed in
``exclusions.csv`` with its reason; included runs get group-level intervals,
both levels' point values and a reliability table and figure; with a
reference model, every other model's run on the same dataset and seed is
compared with the reference run (paired group bootstrap and McNemar).

A rebuild into the folder of an earlier report reuses the rows and
figures of every run whose predictions, identity and settings are unchanged
and of every comparison whose two runs are unchanged
(:mod:`~deepecgkit.statistical_report.reuse`, ``report_cache.json.gz``);
only new or changed runs and pairs are computed, and the files written are
byte for byte those of a clean build of the same inputs.

Every file is written atomically, CSVs first, then figures, the reuse cache,
and ``manifest.json`` last, so the manifest's presence marks a complete
report. With ``overwrite``, the old manifest is removed before the first new
file is written, so a rewrite interrupted half-way (a crash, kill -9) leaves
no manifest that vouches for files it no longer describes. The only files
removed are figures an earlier report wrote (listed in its manifest or
cache) that this one does not write, such as those of a deleted run, so the
folder equals a clean build's; the files this call produces replace their
namesakes and others are left alone (and are not listed in the new manifest).
"""

from __future__ import annotations

import logging
import numbers
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.analysis.compare.resampling import check_bootstrap_settings
from deepecgkit.analysis.constants import (
    CONFIDENCE_LEVEL,
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_N_RESAMPLES,
    INTERVAL_AUTO,
    MIN_BOOTSTRAP_GROUPS,
    MIN_BOOTSTRAP_GROUPS_PER_CLASS,
    MIN_INFORMATIVE_GROUPS,
    NEAR_COLLAPSE_THRESHOLD,
    REPORT_BINS,
)
from deepecgkit.analysis.statistics import holm_adjust
from deepecgkit.io import (
    UnreadableFileError,
    atomic_write_bytes,
    display_path,
    frame_csv_text,
    read_regular_file,
    remove_file,
    safe_name,
    short_hash,
)
from deepecgkit.memory import collector_paused, release_free_memory
from deepecgkit.progress import logged_progress
from deepecgkit.rundir.format import (
    METRICS_FILENAME,
    PREDICTIONS_FILENAME,
    PREDICTIONS_TXT_FILENAME,
    PROBABILITY_SUM_TOLERANCE,
)
from deepecgkit.rundir.read import UnreadableRun, find_run_candidates, is_run_directory
from deepecgkit.rundir.records import RunRecord
from deepecgkit.statistical_report.frame_recall import (
    Recalled,
    RunColumns,
    recall_unchanged,
    record_columns,
)
from deepecgkit.statistical_report.fresh_read import merge_recalled, read_fresh
from deepecgkit.statistical_report.identity import (
    HASHED_FILES,
    STATUS_EXCLUDED,
    UNREADABLE,
    RunFacts,
    RunInput,
    assess_runs,
    seed_of,
)
from deepecgkit.statistical_report.indented_json import ColumnRecords
from deepecgkit.statistical_report.manifest import (
    MANIFEST_FILENAME,
    build_manifest,
    listed_figures,
    manifest_bytes,
    matplotlib_version,
    read_back,
    sha256_bytes,
    versions,
)
from deepecgkit.statistical_report.memo_table import MemoRows
from deepecgkit.statistical_report.reuse import (
    CACHE_FILENAME,
    DamagedEntry,
    ReportCache,
    RowReuse,
    decode_verdicts,
    environment,
    figure_files,
    figure_key,
    write_changed,
)
from deepecgkit.statistical_report.tables import (
    EXCLUSION_COLUMNS,
    LEVEL_METRICS_COLUMNS,
    MCNEMAR_COLUMNS,
    PAIRED_COLUMNS,
    RELIABILITY_COLUMNS,
    RUN_SUMMARY_COLUMNS,
    PairOutcome,
    ReportSettings,
    RunScores,
    column_table,
    table,
    withheld_intervals,
)

__all__ = ["OUTPUT_FILES", "ReportResult", "statistical_report"]

logger = logging.getLogger(__name__)

#: The six CSV files of a report, in manifest order.
OUTPUT_FILES = (
    "run_summary.csv",
    "level_metrics.csv",
    "reliability.csv",
    "paired_comparisons.csv",
    "mcnemar.csv",
    "exclusions.csv",
)
FIGURES_FOLDER = "figures"
FIGURE_PREFIX = "reliability_"
FIGURE_FORMATS = ("png", "pdf")
SCOPE_RUN = "run"
SCOPE_COMPARISON = "comparison"
NO_REFERENCE_RUN = "no_reference_run"
UNKNOWN_SEED = "unknown_seed"
#: Characters a figure name keeps besides those of any file name made from a name.
_FIGURE_NAME_EXTRA = "."
_RUN_ID_HASH_DIGITS = 8
#: Characters of each name (model, dataset) kept in a figure's file name; the
#: run-id hash keeps names unique, and the whole name stays far below the 255
#: bytes a file system allows, whatever the names' lengths.
_FIGURE_NAME_CHARACTERS = 60
#: Largest ``bins``: far beyond any reliability diagram, small enough that
#: per-bin arrays cannot exhaust memory.
MAX_REPORT_BINS = 10_000
#: The files whose hashes a manifest input lists, in the order a run records them.
_MANIFEST_FILES = (*HASHED_FILES, PREDICTIONS_FILENAME, PREDICTIONS_TXT_FILENAME)


@dataclass(frozen=True)
class ReportResult:
    """What :func:`statistical_report` wrote, as frames and paths.

    Attributes:
        out_dir: the report folder.
        run_summary, level_metrics, reliability, paired_comparisons, mcnemar,
            exclusions: the six tables exactly as written to CSV.
        manifest: the manifest as written to ``manifest.json`` (NaN as None);
            its ``inputs`` is a sequence of the entries, built from columns
            when one is asked for
            (:class:`~deepecgkit.statistical_report.indented_json.ColumnRecords`,
            equal to the list ``json.load`` gives).
        figures: absolute paths of the report's figures (written or kept by this call).
        reused_runs, computed_runs: included runs whose rows came from the
            reuse cache, and those bootstrapped now.
        reused_pairs, computed_pairs: the same for the comparisons that were run
            (a candidate with a reference run), rejected comparisons included.
    """

    out_dir: Path
    run_summary: pd.DataFrame
    level_metrics: pd.DataFrame
    reliability: pd.DataFrame
    paired_comparisons: pd.DataFrame
    mcnemar: pd.DataFrame
    exclusions: pd.DataFrame
    manifest: dict[str, Any]
    figures: tuple[Path, ...]
    reused_runs: int = 0
    computed_runs: int = 0
    reused_pairs: int = 0
    computed_pairs: int = 0


# --- settings, roots and the output folder -----------------------------------------------------


def _check_settings(
    bins: object,
    n_resamples: object,
    confidence_level: object,
    seed: object,
    reference: object,
    flags: dict[str, object],
) -> ReportSettings:
    """Validate the report settings; raise :class:`ComparisonError` naming the bad one."""
    if (
        isinstance(bins, bool)
        or not isinstance(bins, numbers.Integral)
        or not 1 <= bins <= MAX_REPORT_BINS
    ):
        raise ComparisonError(
            f"bins must be an integer >= 1 and <= {MAX_REPORT_BINS}, got {bins!r}"
        )
    check_bootstrap_settings(
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        seed=seed,
        min_groups=MIN_BOOTSTRAP_GROUPS,
    )
    if reference is not None and (not isinstance(reference, str) or not reference.strip()):
        raise ComparisonError(f"reference must be a model name or None, got {reference!r}")
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise ComparisonError(f"{name} must be True or False, got {flag!r}")
    return ReportSettings(
        bins=int(bins),
        n_resamples=int(n_resamples),  # type: ignore[call-overload]
        confidence_level=float(confidence_level),  # type: ignore[arg-type]
        seed=int(seed),  # type: ignore[call-overload]
    )


def _check_roots(roots: Sequence[str | os.PathLike[str]] | str | os.PathLike[str]) -> list[Path]:
    """Roots as given (a single path counts as one root); each must be an existing folder."""
    given = [roots] if isinstance(roots, (str, os.PathLike)) else list(roots)
    if not given:
        raise ComparisonError("no ROOT given; pass at least one folder holding run directories")
    paths = [Path(root) for root in given]
    for path in paths:
        if not path.is_dir():
            raise FileNotFoundError(f"ROOT {path} does not exist or is not a directory")
    return paths


def _check_out_dir(out_dir: Path, overwrite: bool) -> None:
    """Refuse a non-empty output folder unless ``overwrite`` (before any run is read)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"output path {out_dir} exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise FileExistsError(
            f"refusing to overwrite existing report at {out_dir} (use --overwrite)"
        )


def _plain_absolute(text: str) -> bool:
    """Whether ``text`` is an absolute path ``os.path.normpath`` leaves as it is, with a name.

    True only when ``isabs(text) and normpath(text) == text`` and the last
    component is not ``""``, ``"."`` or ``".."``, from substring tests
    (``normpath`` is a Python loop over the components, called once per run
    of 100,000): no empty, ``.`` or ``..`` component and no trailing
    separator. A path that starts with ``//``, which ``normpath`` keeps, is
    False: the callers then take the general road.
    """
    return (
        text.startswith("/")
        and "//" not in text
        and "/./" not in text
        and "/../" not in text
        and not text.endswith(("/", "/.", "/.."))
    )


def _all_plain_absolute(texts: Sequence[Any]) -> bool:
    """Whether every item is text for which :func:`_plain_absolute` holds, tested at once.

    The texts are joined with NUL, which no path holds (the operating system
    refuses it; a text that holds one makes this False), so each of
    :func:`_plain_absolute`'s substring tests is one
    search of the joined text: a path that does not start with a separator
    shows as a NUL not followed by one, a path's end as a text before a NUL.
    """
    if not texts or set(map(type, texts)) != {str}:
        return False
    joined = "\0".join(texts) + "\0"
    return (
        joined.count("\0") == len(texts)  # (a text holding NUL: one by one)
        and "\0" not in joined[:-1].replace("\0/", "/")
        and joined.startswith("/")
        and "//" not in joined
        and "/./" not in joined
        and "/../" not in joined
        and "/\0" not in joined
        and "/.\0" not in joined
        and "/..\0" not in joined
    )


def _resolved_paths(
    paths: Sequence[str | Path], *, infos: list[os.stat_result | None] | None = None
) -> list[str]:
    """``os.path.realpath`` of each path, resolving each distinct parent folder once.

    A normalised absolute path whose last component is not a symbolic link
    resolves to its parent's real path joined with that name, so a run
    directory costs one ``lstat`` instead of one per component of its path
    (20,000 run directories: 20,000 calls rather than 100,000 and more).
    Any other path (bytes included) is resolved in full. ``infos``, when
    given, receives each path's ``lstat`` where it was taken and the path is
    not a link, else None: the run directory's own stat signature, which the
    columnar memo check (:mod:`~deepecgkit.statistical_report.frame_recall`)
    compares, so that no run costs a second call for it.
    """
    parents: dict[str, str] = {}
    resolved = []
    lstat, is_link = os.lstat, stat.S_ISLNK
    keep = (lambda info: None) if infos is None else infos.append
    plain = _all_plain_absolute(paths)
    for path in paths:
        text = path if type(path) is str else os.fspath(path)
        if not plain and (type(text) is not str or not _plain_absolute(text)):
            resolved.append(os.path.realpath(text))
            keep(None)
            continue
        try:
            info: os.stat_result | None = lstat(text)
        except (OSError, ValueError):
            info = None  # missing: realpath keeps the name, as below
        linked = info is not None and is_link(info.st_mode)
        keep(None if linked else info)
        if linked:
            resolved.append(os.path.realpath(text))
            continue
        parent, _, name = text.rpartition("/")
        real = parents.get(parent)
        if real is None:
            real = parents[parent] = os.path.realpath(parent or "/")
        resolved.append(real + name if real.endswith("/") else real + "/" + name)
    return resolved


def _common_path(paths: Sequence[str]) -> str:
    """``os.path.commonpath(paths)``, without splitting each path into components.

    ``commonpath`` splits every path (100,000 run directories: most of a
    second of a one-run refresh). For plain normalised absolute paths (see
    :func:`_plain_absolute`) the characters the smallest and the largest path
    share are those every path shares; cut back to the last separator unless
    each path ends there or goes on with one, they are the common path. Other
    paths go to ``commonpath``.
    """
    if not _all_plain_absolute(paths) and not all(
        type(text) is str and _plain_absolute(text) for text in paths
    ):
        return os.path.commonpath(paths)
    shared = os.path.commonprefix([min(paths), max(paths)])  # noqa: RUF071 (characters, then cut)
    end = len(shared)
    if all(len(text) == end or text[end] == "/" for text in paths):
        return shared
    return shared[: shared.rfind("/")] or "/"


def _run_ids(roots: Sequence[str | Path], run_dirs: Sequence[str | Path]) -> list[tuple[str, str]]:
    """``(run_id, resolved path)`` of each run directory (see :func:`_identified`)."""
    ids, resolved = _identified(roots, run_dirs)
    return list(zip(ids, resolved, strict=True))


def _identified(
    roots: Sequence[str | Path],
    run_dirs: Sequence[str | Path],
    *,
    infos: list[os.stat_result | None] | None = None,
) -> tuple[list[str], list[str]]:
    """``(run ids, resolved paths)``: paths relative to the roots' common base, POSIX form.

    The base is the common path of the resolved roots, or its parent when it
    is itself a run directory, so a root passed as a run directory still has
    a non-empty ``run_id``. A run directory reached through a symbolic link
    keeps the path it was found under (relative to the unresolved roots), so
    its id names it inside the roots rather than wherever the link points.
    A name that is not valid UTF-8 is shown with escapes (see
    :func:`~deepecgkit.io.display_path`). The resolved path is text (100,000
    ``Path`` objects cost seconds and nothing here needs one). ``infos``
    receives each run directory's ``lstat`` (see :func:`_resolved_paths`).
    """
    if not run_dirs:
        return [], []
    resolved_dirs = _resolved_paths(run_dirs, infos=infos)
    resolved_roots = resolved_dirs if roots is run_dirs else _resolved_paths(roots)
    base = Path(_common_path(resolved_roots))
    inside = is_run_directory(base)
    if inside:
        base = base.parent
    # Below the base, a resolved path's id is the rest of its text: both are
    # normalised real paths, so the rest is already a POSIX relative path.
    prefix = os.path.join(os.fspath(base), "")
    cut = len(prefix)
    if all(resolved.startswith(prefix) for resolved in resolved_dirs):
        # (The usual case: no path needs the given roots' base, which would cost two
        # passes over 100,000 texts.)
        return _display_paths([resolved[cut:] for resolved in resolved_dirs]), resolved_dirs
    given = [os.fspath(root) for root in roots]
    if not _all_plain_absolute(given):
        given = [
            text if type(text) is str and _plain_absolute(text) else os.path.abspath(text)
            for text in given
        ]
    given_base = Path(_common_path(given))
    if inside:
        given_base = given_base.parent
    ids = []
    for directory, resolved in zip(run_dirs, resolved_dirs, strict=True):
        if resolved.startswith(prefix):
            relative = resolved[cut:]
        else:
            relative = Path(
                os.path.relpath(resolved, base)
                if resolved == os.fspath(base)
                else os.path.relpath(os.path.abspath(directory), given_base)
            ).as_posix()
        ids.append(relative)
    return _display_paths(ids), resolved_dirs


def _display_paths(texts: list[str]) -> list[str]:
    """:func:`~deepecgkit.io.display_path` of each text, checked at once when all are valid."""
    try:
        "".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        return [display_path(text) for text in texts]
    return texts


def _unlisted_runs(roots: list[Path], unlisted: Sequence[UnreadableRun]) -> list[RunInput]:
    """Directories the scan could not list, as excluded runs (they may hold runs)."""
    runs = []
    for (run_id, path), problem in zip(
        _run_ids(roots, [p.run_dir for p in unlisted]), unlisted, strict=True
    ):
        run = RunInput(run_id=run_id, path=path)
        run.exclude(UNREADABLE, f"directory {problem.reason}")
        runs.append(run)
    return runs


class _OrderedRuns:
    """Every run of the report in ``run_id`` order, objects and recalled columns.

    The objects are the per-run road's runs; the others were recalled as
    columns (:class:`~deepecgkit.statistical_report.frame_recall.Recalled`).

    Positions number the found run directories in the order given, then the
    unlisted ones; ``order`` sorts them by ``run_id``, ties in that order
    (what sorting the runs by ``run_id`` did, stably, when every run was an
    object). A column of all runs is one numpy object array filled at the
    recalled positions at once and at the objects' positions one by one.
    """

    def __init__(
        self,
        run_ids: list[str],
        paths: list[str],
        objects: dict[int, RunInput],
        recalled: Recalled,
    ) -> None:
        self.size = len(run_ids)
        self.objects = objects
        self.recalled = recalled
        self.order = np.array(sorted(range(self.size), key=run_ids.__getitem__), dtype=np.int64)
        self.run_ids, self.paths = run_ids, paths
        #: The objects in ``run_id`` order.
        self.runs = [objects[p] for p in self.order.tolist() if p in objects]

    def column(self, recalled: Any, of_run: Callable[[RunInput], Any]) -> np.ndarray:
        """``(size,)`` object array in ``run_id`` order of one value of every run.

        ``recalled``: the recalled runs' values (a list in their order, or one
        value for all of them); ``of_run(run)``: an object's.
        """
        values = np.empty(self.size, dtype=object)
        if len(self.recalled.positions):
            values[self.recalled.positions] = recalled
        for position, run in self.objects.items():
            values[position] = of_run(run)
        return values[self.order]

    def excluded(self) -> np.ndarray:
        """``(size,)`` mask in ``run_id`` order of the excluded runs."""
        return self.column(True, lambda run: run.excluded).astype(bool)

    def models(self) -> set[str | None]:
        """The model of every run."""
        return {run.model for run in self.objects.values()} | set(self.recalled.model)

    def inputs(self) -> ColumnRecords:
        """The manifest's ``inputs``: each run's id, path, status, reason and file hashes."""
        files: dict[str, list[str | None]] = {}
        canonical = all(
            list(run.files) == [name for name in _MANIFEST_FILES if name in run.files]
            and set(run.files) <= set(_MANIFEST_FILES)
            for run in self.objects.values()
        )
        for name in _MANIFEST_FILES:
            recalled = self.recalled.hashes.get(name, None)
            files[name] = self.column(recalled, lambda run, name=name: run.files.get(name)).tolist()
        columns: dict[str, list[Any] | None] = {
            "run_id": np.array(self.run_ids, dtype=object)[self.order].tolist(),
            "path": self.column(
                _display_paths([self.paths[p] for p in self.recalled.positions.tolist()]),
                lambda run: display_path(run.path),
            ).tolist(),
            "status": self.column(STATUS_EXCLUDED, lambda run: run.status).tolist(),
            "reason": self.column(self.recalled.reason, lambda run: run.reason).tolist(),
            "files": None,
        }
        size = self.size
        if canonical:
            return ColumnRecords(columns, objects={"files": files}, length=size)
        # A run whose files are in another order: each entry's object as it is (never so far).
        columns["files"] = self.column(
            [dict(_recalled_files(files, i)) for i in range(len(self.recalled.positions))],
            lambda run: dict(run.files),
        ).tolist()
        return ColumnRecords(columns, length=size)


def _recalled_files(files: dict[str, list[str | None]], index: int) -> Iterator[tuple[str, str]]:
    for name, values in files.items():
        if values[index] is not None:
            yield name, values[index]


# --- computing -----------------------------------------------------------------------------------


def _exclusions(runs: _OrderedRuns, rejected: list[dict[str, Any]]) -> pd.DataFrame:
    """``exclusions.csv``: the excluded runs (scope ``run``), then the rejected comparisons.

    Built a column at a time (see :func:`~deepecgkit.statistical_report.tables.column_table`).
    """
    excluded = runs.excluded()
    recalled = runs.recalled
    count = int(excluded.sum())
    values = {
        "scope": [SCOPE_RUN] * count,
        "run_id": np.array(runs.run_ids, dtype=object)[runs.order][excluded].tolist(),
        "model": runs.column(recalled.model, lambda run: run.model)[excluded].tolist(),
        "dataset": runs.column(recalled.dataset, lambda run: run.dataset)[excluded].tolist(),
        "seed": runs.column(recalled.seed, lambda run: run.seed)[excluded].tolist(),
        "reference_run_id": [None] * count,
        "reason": runs.column(recalled.reason, lambda run: run.reason)[excluded].tolist(),
        "detail": runs.column(recalled.detail, lambda run: run.detail)[excluded].tolist(),
    }
    for name in EXCLUSION_COLUMNS:
        values[name] += [row[name] for row in rejected]
    return column_table(values, EXCLUSION_COLUMNS)


def _comparison_row(
    candidate: RunInput, reference: RunInput | None, reason: str, detail: str
) -> dict[str, Any]:
    return {
        "scope": SCOPE_COMPARISON,
        "run_id": candidate.run_id,
        "model": candidate.model,
        "dataset": candidate.dataset,
        "seed": candidate.seed,
        "reference_run_id": None if reference is None else reference.run_id,
        "reason": reason,
        "detail": detail,
    }


def _comparisons(
    included: list[RunInput],
    reference_model: str,
    compare: Callable[[RunInput, RunInput], PairOutcome],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Paired rows, McNemar rows and comparison-scope exclusions against the reference model.

    ``compare(reference, candidate)`` gives one pair's outcome (computed or reused).
    """
    references = {
        (run.dataset, run.seed): run
        for run in included
        if run.model == reference_model and run.seed is not None
    }
    candidates = sorted(
        (run for run in included if run.model != reference_model),
        key=lambda run: (str(run.dataset), seed_of(run), str(run.model), run.run_id),
    )
    paired: list[dict[str, Any]] = []
    mcnemar_rows: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for candidate in candidates:
        if candidate.seed is None:
            rejected.append(
                _comparison_row(
                    candidate,
                    None,
                    UNKNOWN_SEED,
                    "the run's seed is unknown, so it cannot be paired",
                )
            )
            continue
        reference = references.get((candidate.dataset, candidate.seed))
        if reference is None:
            rejected.append(
                _comparison_row(
                    candidate,
                    None,
                    NO_REFERENCE_RUN,
                    f"no included {reference_model} run on dataset {candidate.dataset} "
                    f"with seed {candidate.seed}",
                )
            )
            continue
        outcome = compare(reference, candidate)
        if outcome.reason is not None:
            rejected.append(_comparison_row(candidate, reference, outcome.reason, outcome.detail))
            continue
        paired.extend(outcome.paired)
        mcnemar_rows.extend(outcome.mcnemar)
    return paired, mcnemar_rows, rejected


def _with_holm(paired: pd.DataFrame) -> pd.DataFrame:
    """Fill ``p_holm``: Holm over the rows sharing ``(dataset, metric)``."""
    if paired.empty:
        return paired
    adjusted = paired.groupby(["dataset", "metric"], sort=False)["p_value"].transform(holm_adjust)
    return paired.assign(p_holm=adjusted.astype("float64"))


# --- writing -------------------------------------------------------------------------------------


def _csv_bytes(frame: pd.DataFrame) -> bytes:
    """UTF-8 CSV: header, no index, NaN as an empty field, full float precision."""
    return frame_csv_text(frame).encode("utf-8")


def _safe(text: str) -> str:
    return safe_name(text, also_allowed=_FIGURE_NAME_EXTRA)


def _figure_stem(run: RunInput) -> str:
    """``reliability_<model>_<dataset>_seed<seed>_<hash of run_id>``, bounded in length.

    Model and dataset are cut to a readable prefix and the seed to its first
    digits (a 64-bit seed has 20): the run-id hash already makes the name
    unique, and the manifest's ``figures`` entries map every file to its run.
    """
    digest = short_hash(run.run_id, digits=_RUN_ID_HASH_DIGITS)
    model = _safe(str(run.model))[:_FIGURE_NAME_CHARACTERS]
    dataset = _safe(str(run.dataset))[:_FIGURE_NAME_CHARACTERS]
    seed = "unknown" if run.seed is None else str(run.seed)[:_FIGURE_NAME_CHARACTERS]
    return f"reliability_{model}_{dataset}_seed{seed}_{digest}"


def _kept_figure(
    out_dir: Path, files: list[dict[str, str]], stem: str
) -> list[tuple[str, str, bytes | None]] | None:
    """``(relative path, format, bytes or None when already in place)`` of a stored figure.

    None when a stored file is missing or its bytes no longer have the
    recorded hash (it is drawn again). Bytes are returned only for a file
    whose name changed (the run was renamed), to be written under the new name.
    """
    kept = []
    for item in files:
        if item["format"] not in FIGURE_FORMATS:
            return None
        try:
            data, _ = read_regular_file(out_dir / item["path"])
        except UnreadableFileError:
            return None
        if sha256_bytes(data) != item["sha256"]:
            return None
        relative = f"{FIGURES_FOLDER}/{stem}.{item['format']}"
        kept.append((relative, item["format"], None if relative == item["path"] else data))
    return kept


def _write_figures(
    out_dir: Path,
    included: list[RunInput],
    scores: dict[str, RunScores],
    reliability: pd.DataFrame,
    bins: int,
    *,
    pdf: bool,
    reuse: RowReuse,
) -> tuple[list[dict[str, str]], list[Path], str]:
    """Draw (or keep) each included run's PNG (and PDF); return entries, paths, source hash.

    A figure whose key (run key, ``pdf``, plotting source, matplotlib
    version) is in the previous cache and whose files still have their
    recorded hashes is kept instead of drawn.
    """
    from deepecgkit.statistical_report import reliability_plot

    source = sha256_bytes(Path(reliability_plot.__file__).read_bytes())
    drawn_with = matplotlib_version()
    entries: list[dict[str, str]] = []
    paths: list[Path] = []
    curves = (
        reliability.groupby(["run_id", "curve"], sort=False).indices if len(reliability) else {}
    )
    for run in logged_progress(
        included, total=len(included), what="reliability diagrams drawn", logger=logger
    ):
        score = scores[run.run_id]
        stem = _figure_stem(run)
        key = figure_key(
            reuse.run_keys[run.run_id],
            pdf=pdf,
            plotting_source_sha256=source,
            matplotlib=drawn_with,
        )
        files = reuse.kept.figures.get(key, reuse.previous.figures.get(key))
        kept = None
        if files is not None:
            try:
                kept = _kept_figure(out_dir, figure_files(files), stem)
            except DamagedEntry as exc:
                logger.warning("report cache figure of %s ignored: %s", run.run_id, exc)
        written: list[dict[str, str]] = []
        if kept is not None:
            for relative, extension, data in kept:
                if data is not None:
                    atomic_write_bytes(out_dir / relative, data)
                paths.append(out_dir / relative)
                digest = next(f["sha256"] for f in files if f["format"] == extension)
                written.append({"path": relative, "format": extension, "sha256": digest})
        else:
            rows = reliability.iloc[curves.get((run.run_id, score.figure_curve), [])]
            title = reliability_plot.reliability_title(
                str(run.model),
                str(run.dataset),
                run.seed,
                n_groups=score.n_groups,
                ece=score.ece,
                bins=bins,
                partial=bool(run.partial_reasons),
                no_interval_reason=score.no_interval_reason,
                withheld=score.withheld,
                classwise_ece=score.classwise_ece,
                curve=score.figure_curve,
            )
            rendered = reliability_plot.render_reliability(rows, bins, title=title, pdf=pdf)
            for extension, data in rendered.items():
                relative = f"{FIGURES_FOLDER}/{stem}.{extension}"
                paths.append(atomic_write_bytes(out_dir / relative, data))
                written.append(
                    {"path": relative, "format": extension, "sha256": sha256_bytes(data)}
                )
        reuse.kept.figures.setdefault(key, written)
        entries.extend({"run_id": run.run_id, **item} for item in written)
    return entries, paths, source


def _earlier_figures(out_dir: Path, previous: ReportCache) -> set[str]:
    """Figures an earlier report in ``out_dir`` wrote: its manifest's and its cache's.

    Only names of the report's own figures count (``figures/reliability_*.png``
    or ``.pdf``, one level deep), whatever a damaged file lists.
    """
    listed: list[Any] = []
    try:
        data, _ = read_regular_file(out_dir / MANIFEST_FILENAME)
        listed.extend(entry.get("path") for entry in listed_figures(data))
    except (UnreadableFileError, UnicodeDecodeError, ValueError, AttributeError, TypeError):
        pass
    for files in previous.figures.values():
        if isinstance(files, list):
            listed.extend(item.get("path") for item in files if isinstance(item, dict))
    earlier = set()
    for path in listed:
        if not isinstance(path, str):
            continue
        parts = PurePosixPath(path).parts
        if (
            len(parts) == 2
            and parts[0] == FIGURES_FOLDER
            and parts[1].startswith(FIGURE_PREFIX)
            and PurePosixPath(parts[1]).suffix[1:] in FIGURE_FORMATS
        ):
            earlier.add(path)
    return earlier


def _remove_stale_figures(out_dir: Path, earlier: set[str], current: list[dict[str, str]]) -> None:
    """Remove the earlier report's figures this report did not write; drop an emptied folder."""
    stale = earlier - {entry["path"] for entry in current}
    for relative in sorted(stale):
        if remove_file(out_dir / relative):
            logger.info("removed %s: no run of this report draws it", relative)
    folder = out_dir / FIGURES_FOLDER
    if stale and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def _check_sources(
    roots: Sequence[str | os.PathLike[str]] | str | os.PathLike[str] | None,
    run_dirs: Sequence[str | os.PathLike[str]] | None,
) -> tuple[list[Path], list[str | Path], list[UnreadableRun]]:
    """``(roots, found run directories, unlisted directories)`` from what the caller gave.

    Given run directories stay the text or paths they were (only their text
    is used, see :func:`_run_ids`): 20,000 ``Path`` objects cost a tenth of a
    one-run refresh.
    """
    if roots is None and run_dirs is None:
        raise ComparisonError("give the folders to search (roots) or the run directories")
    root_paths = [] if roots is None else _check_roots(roots)
    if run_dirs is not None:
        given = [d if isinstance(d, (str, Path)) else Path(d) for d in run_dirs]
        return root_paths, given, []
    found, unlisted = find_run_candidates(root_paths, recursive=True)
    return root_paths, found, unlisted


def _assessed(
    naming: Sequence[str | Path],
    found: Sequence[str | Path],
    unlisted: Sequence[UnreadableRun],
    previous: ReportCache,
    reuse: RowReuse,
    columns: RunColumns | None,
    allow_partial: bool,
) -> _OrderedRuns:
    """Every run through the identity contract, recalled as columns where it may be.

    The others go run by run (:func:`assess_runs`); the memos and verdicts
    for the next build are kept in ``reuse``.
    """
    directories: list[os.stat_result | None] = []
    run_ids, paths = _identified(naming, found, infos=directories)
    memos = previous.files
    recalled = Recalled.none()
    if isinstance(memos, MemoRows) and len(memos):
        recalled = recall_unchanged(paths, directories, memos=memos, records=columns)
        reuse.carry_memos(memos.table, np.unique(recalled.rows))
    others = np.ones(len(paths), dtype=bool)
    others[recalled.positions] = False
    slow = np.flatnonzero(others)
    if len(recalled.positions):
        logger.info(
            "%d unchanged runs excluded as before without reading them: %s",
            len(recalled.positions),
            dict(sorted(Counter(recalled.reason).items())),
        )
    if columns is not None and len(slow):
        fresh = read_fresh(paths, directories, slow.tolist(), records=columns)
        if fresh.table is not None and fresh.table.num_rows:
            reuse.carry_memos(fresh.table, np.arange(fresh.table.num_rows, dtype=np.int64))
        if len(fresh.recalled.positions):
            logger.info(
                "%d runs without predictions read and excluded as columns: %s",
                len(fresh.recalled.positions),
                dict(sorted(Counter(fresh.recalled.reason).items())),
            )
        recalled = merge_recalled(recalled, fresh.recalled)
        slow = fresh.others
    del directories
    slow = slow.tolist()
    runs = assess_runs(
        [(run_ids[p], paths[p]) for p in slow],
        allow_partial=allow_partial,
        known=decode_verdicts(previous.contents),
        records=None if columns is None else columns.facts(slow),
        memos=memos,
        recalled=recalled.fingerprints,
    )
    reuse.keep_verdicts(runs)
    objects = dict(zip(slow, runs, strict=True))
    for index, run in enumerate(_unlisted_runs(naming, unlisted)):
        objects[len(paths) + index] = run
        run_ids.append(run.run_id)
        paths.append(run.path)
    return _OrderedRuns(run_ids, paths, objects, recalled)


def statistical_report(
    roots: Sequence[str | os.PathLike[str]] | None,
    out_dir: str | os.PathLike[str],
    *,
    bins: int = REPORT_BINS,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    confidence_level: float = CONFIDENCE_LEVEL,
    reference: str | None = None,
    allow_partial: bool = False,
    plots: bool = True,
    pdf: bool = False,
    overwrite: bool = False,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
    run_dirs: Sequence[str | os.PathLike[str]] | None = None,
    records: Sequence[RunRecord | RunFacts] | RunColumns | None = None,
) -> ReportResult:
    """Build the statistical report of every run directory under ``roots``.

    Args:
        roots: folders searched at any depth for run directories (a folder
            holding ``classification_metrics.csv``); a root may itself be one.
            With ``run_dirs`` they are not searched, only used to name the
            runs, and may be None: runs are then named relative to the common
            folder of the run directories (its parent when that is itself a
            run directory), and the manifest lists no roots.
        out_dir: report folder; created if missing. An earlier report there
            lends the rows and figures of its unchanged runs and pairs.
        bins: equal-width bins of the report's group-level ECE and diagrams (>= 1).
        n_resamples: bootstrap resamples per run and per pair (>= 1).
        confidence_level: two-sided coverage, strictly between 0 and 1.
        reference: model every other model is compared with, per dataset and
            seed; None writes header-only paired files.
        allow_partial: admit runs whose only failures are partial reasons
            (missing metadata/fingerprint/split information, incomplete
            predictions), marked ``partial``.
        plots: draw reliability figures (False never imports matplotlib).
        pdf: with ``plots``, write each figure as a vector PDF too (the PNG
            is always written).
        overwrite: allow writing into a non-empty ``out_dir``.
        seed: seed of every bootstrap (each run and pair reseeds with it, so
            a run's intervals do not depend on the other runs or their order).
        run_dirs: the run directories to report, found by the caller; None
            searches ``roots``.
        records: instead of ``run_dirs``, the caller's records of the runs to
            report (the platform passes the
            :func:`~deepecgkit.statistical_report.identity.run_facts` of its
            ``discovered_runs``): their ``run_dir`` are reported, and a
            run's model, dataset, seed and returncode are taken from its
            record while its metrics file has the record's ``mtime``, instead
            of reading that file again. The platform passes them as
            :class:`~deepecgkit.statistical_report.frame_recall.RunColumns`
            (its ``discovered_runs`` frame's columns, no object per run).

    Returns:
        :class:`ReportResult`. When runs were found but none passed the
        contract, the report (exclusions and manifest) is still written and
        returned; its ``run_summary`` is empty.

    Raises:
        FileNotFoundError: a ROOT does not exist.
        FileExistsError: ``out_dir`` is not empty and ``overwrite`` is False
            (checked before any run is read), or is a file.
        ComparisonError: an invalid setting, neither roots nor run directories
            (or both ``run_dirs`` and ``records``), no run directory found, or
            a ``reference`` that no discovered run names (nothing is written).
    """
    settings = _check_settings(
        bins,
        n_resamples,
        confidence_level,
        seed,
        reference,
        {"allow_partial": allow_partial, "plots": plots, "pdf": pdf, "overwrite": overwrite},
    )
    columns = None
    if records is not None:
        if run_dirs is not None:
            raise ComparisonError("give the run directories (run_dirs) or their records, not both")
        columns = records if isinstance(records, RunColumns) else record_columns(records)
        run_dirs = columns.run_dir
    root_paths, found, unlisted = _check_sources(roots, run_dirs)
    out_path = Path(out_dir)
    _check_out_dir(out_path, overwrite)

    if not found and not unlisted:
        if not root_paths:
            raise ComparisonError("no run directory given")
        raise ComparisonError(
            f"no run directory (a folder holding {METRICS_FILENAME}) found under "
            + ", ".join(display_path(p) for p in root_paths)
        )
    library_versions = versions(plots=plots)
    bound_to = environment(library_versions)
    naming = root_paths or found
    # Loading the memos and assessing the runs build trees of small dicts and lists, no
    # cycles (checked with gc.collect() after them): the collector is paused meanwhile.
    with collector_paused():
        previous = ReportCache.load(out_path / CACHE_FILENAME, bound_to)
        reuse = RowReuse(previous, settings, allow_partial=allow_partial)
        ordered = _assessed(naming, found, unlisted, previous, reuse, columns, allow_partial)
        runs = ordered.runs
    release_free_memory()  # (the recall's column temporaries)
    if reference is not None and reference not in ordered.models():
        known = sorted({model for model in ordered.models() if model is not None})
        raise ComparisonError(
            f"reference model {reference!r} is not the model of any discovered run "
            f"(models found: {', '.join(known) or 'none'})"
        )
    included = [run for run in runs if not run.excluded]
    scores = {
        run.run_id: reuse.scores(run)
        for run in logged_progress(
            included, total=len(included), what="runs bootstrapped", logger=logger
        )
    }
    if reference is not None:
        paired_rows, mcnemar_rows, rejected = _comparisons(included, reference, reuse.compare)
    else:
        paired_rows, mcnemar_rows, rejected = [], [], []

    frames = {
        "run_summary.csv": table(
            [row for s in scores.values() for row in s.summary], RUN_SUMMARY_COLUMNS
        ),
        "level_metrics.csv": table(
            [row for s in scores.values() for row in s.levels], LEVEL_METRICS_COLUMNS
        ),
        "reliability.csv": table(
            [row for s in scores.values() for row in s.reliability], RELIABILITY_COLUMNS
        ),
        "paired_comparisons.csv": _with_holm(table(paired_rows, PAIRED_COLUMNS)),
        "mcnemar.csv": table(mcnemar_rows, MCNEMAR_COLUMNS),
        "exclusions.csv": _exclusions(ordered, sorted(rejected, key=lambda row: row["run_id"])),
    }

    with collector_paused():
        earlier_figures = _earlier_figures(out_path, previous) if out_path.is_dir() else set()
    # The old manifest goes before the first new file lands: an interrupted
    # rewrite then has no manifest, so nobody mistakes it for a finished report.
    remove_file(out_path / MANIFEST_FILENAME)
    outputs = []
    for name in OUTPUT_FILES:
        data = _csv_bytes(frames[name])
        write_changed(out_path / name, data)
        outputs.append({"path": name, "sha256": sha256_bytes(data)})
    figure_entries: list[dict[str, str]] = []
    figure_paths: list[Path] = []
    plotting_source = None
    if plots:
        figure_entries, figure_paths, plotting_source = _write_figures(
            out_path,
            included,
            scores,
            frames["reliability.csv"],
            settings.bins,
            pdf=pdf,
            reuse=reuse,
        )
    _remove_stale_figures(out_path, earlier_figures, figure_entries)
    withheld = withheld_intervals(frames["run_summary.csv"], frames["paired_comparisons.csv"])
    anti_conservative = bool(frames["mcnemar.csv"]["anti_conservative"].any())
    with collector_paused():  # (pandas work, which leaves cycles, is done above)
        reuse.kept.save(out_path / CACHE_FILENAME, bound_to)
        # The memo tables, old and new (about 50 MB each at 100,000 runs), are saved and
        # no longer needed: let them go before the manifest's text and bytes are made.
        reuse.kept.release_memos()
        previous.release_memos()
        manifest = build_manifest(
            roots=[root.resolve() for root in root_paths],
            settings={
                "bins": settings.bins,
                "n_resamples": settings.n_resamples,
                "confidence_level": settings.confidence_level,
                "seed": settings.seed,
                "reference": reference,
                "allow_partial": allow_partial,
                "plots": plots,
                "pdf": pdf,
                "stratified": True,
                "group_aggregation": "mean_probability",
                "interval": INTERVAL_AUTO,
                "probability_sum_tolerance": PROBABILITY_SUM_TOLERANCE,
                "near_collapse_threshold": NEAR_COLLAPSE_THRESHOLD,
                "min_bootstrap_groups": MIN_BOOTSTRAP_GROUPS,
                "min_bootstrap_groups_per_class": MIN_BOOTSTRAP_GROUPS_PER_CLASS,
                "min_informative_groups": MIN_INFORMATIVE_GROUPS,
            },
            runs=runs,
            inputs=ordered.inputs(),
            outputs=outputs,
            figures=figure_entries,
            plotting_source_sha256=plotting_source,
            too_few_groups={
                run_id: s.no_interval_reason for run_id, s in scores.items() if s.too_few_groups
            },
            sample_level_anti_conservative=anti_conservative,
            withheld_intervals=withheld,
        )
        atomic_write_bytes(out_path / MANIFEST_FILENAME, manifest_bytes(manifest))
        written = read_back(manifest)
    logger.info(
        "report written to %s: %d runs included (%d reused, %d computed), %d excluded, "
        "%d comparison rows (%d pairs reused, %d computed)",
        out_path,
        len(included),
        reuse.reused_runs,
        reuse.computed_runs,
        ordered.size - len(included),
        len(frames["paired_comparisons.csv"]),
        reuse.reused_pairs,
        reuse.computed_pairs,
    )
    return ReportResult(
        out_dir=out_path,
        run_summary=frames["run_summary.csv"],
        level_metrics=frames["level_metrics.csv"],
        reliability=frames["reliability.csv"],
        paired_comparisons=frames["paired_comparisons.csv"],
        mcnemar=frames["mcnemar.csv"],
        exclusions=frames["exclusions.csv"],
        manifest=written,
        figures=tuple(path.resolve() for path in figure_paths),
        reused_runs=reuse.reused_runs,
        computed_runs=reuse.computed_runs,
        reused_pairs=reuse.reused_pairs,
        computed_pairs=reuse.computed_pairs,
    )
