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

Every file is written atomically, CSVs first, then figures, and
``manifest.json`` last, so the manifest's presence marks a complete report.
With ``overwrite``, the old manifest is removed before the first new file is
written, so a rewrite interrupted half-way (a crash, kill -9) leaves no
manifest that vouches for files it no longer describes. Nothing else in the
output folder is deleted: the files this call produces replace their
namesakes and others are left alone (and are not listed in the new manifest).
"""

from __future__ import annotations

import json
import logging
import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    atomic_write_bytes,
    display_path,
    frame_csv_text,
    remove_file,
    safe_name,
    short_hash,
)
from deepecgkit.progress import logged_progress
from deepecgkit.rundir.format import METRICS_FILENAME, PROBABILITY_SUM_TOLERANCE
from deepecgkit.rundir.read import UnreadableRun, find_run_candidates, is_run_directory
from deepecgkit.statistical_report.identity import UNREADABLE, RunInput, assess_runs, seed_of
from deepecgkit.statistical_report.manifest import (
    MANIFEST_FILENAME,
    build_manifest,
    manifest_bytes,
    sha256_bytes,
)
from deepecgkit.statistical_report.tables import (
    EXCLUSION_COLUMNS,
    LEVEL_METRICS_COLUMNS,
    MCNEMAR_COLUMNS,
    PAIRED_COLUMNS,
    RELIABILITY_COLUMNS,
    RUN_SUMMARY_COLUMNS,
    ReportSettings,
    RunScores,
    compare_pair,
    score_run,
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


@dataclass(frozen=True)
class ReportResult:
    """What :func:`statistical_report` wrote, as frames and paths.

    Attributes:
        out_dir: the report folder.
        run_summary, level_metrics, reliability, paired_comparisons, mcnemar,
            exclusions: the six tables exactly as written to CSV.
        manifest: the manifest as written to ``manifest.json`` (NaN as None).
        figures: absolute paths of the figures written by this call.
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


def _run_ids(roots: list[Path], run_dirs: list[Path]) -> list[tuple[str, Path]]:
    """``(run_id, resolved path)``: paths relative to the roots' common base, POSIX form.

    The base is the common path of the resolved roots, or its parent when it
    is itself a run directory, so a root passed as a run directory still has
    a non-empty ``run_id``. A run directory reached through a symbolic link
    keeps the path it was found under (relative to the unresolved roots), so
    its id names it inside the roots rather than wherever the link points.
    A name that is not valid UTF-8 is shown with escapes (see
    :func:`~deepecgkit.io.display_path`).
    """
    resolved_roots = [root.resolve() for root in roots]
    base = Path(os.path.commonpath([str(root) for root in resolved_roots]))
    given_base = Path(os.path.commonpath([os.path.abspath(root) for root in roots]))
    if is_run_directory(base):
        base, given_base = base.parent, given_base.parent
    identified = []
    for directory in run_dirs:
        resolved = directory.resolve()
        if resolved.is_relative_to(base):
            relative = os.path.relpath(resolved, base)
        else:
            relative = os.path.relpath(os.path.abspath(directory), given_base)
        identified.append((display_path(Path(relative).as_posix()), resolved))
    return identified


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


# --- computing -----------------------------------------------------------------------------------


def _exclusion_row(run: RunInput) -> dict[str, Any]:
    return {
        "scope": SCOPE_RUN,
        "run_id": run.run_id,
        "model": run.model,
        "dataset": run.dataset,
        "seed": run.seed,
        "reference_run_id": None,
        "reason": run.reason,
        "detail": run.detail,
    }


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
    included: list[RunInput], reference_model: str, settings: ReportSettings
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Paired rows, McNemar rows and comparison-scope exclusions against the reference model."""
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
        outcome = compare_pair(reference, candidate, settings=settings)
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


def _write_figures(
    out_dir: Path,
    included: list[RunInput],
    scores: dict[str, RunScores],
    reliability: pd.DataFrame,
    bins: int,
    *,
    pdf: bool,
) -> tuple[list[dict[str, str]], list[Path], str]:
    """Draw and write each included run's PNG (and PDF); return entries, paths, source hash."""
    from deepecgkit.statistical_report import reliability_plot

    entries: list[dict[str, str]] = []
    paths: list[Path] = []
    for run in logged_progress(
        included, total=len(included), what="reliability diagrams drawn", logger=logger
    ):
        score = scores[run.run_id]
        rows = reliability[
            (reliability["run_id"] == run.run_id) & (reliability["curve"] == score.figure_curve)
        ]
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
        stem = _figure_stem(run)
        for extension, data in rendered.items():
            relative = f"{FIGURES_FOLDER}/{stem}.{extension}"
            paths.append(atomic_write_bytes(out_dir / relative, data))
            entries.append(
                {
                    "run_id": run.run_id,
                    "path": relative,
                    "format": extension,
                    "sha256": sha256_bytes(data),
                }
            )
    source = Path(reliability_plot.__file__).read_bytes()
    return entries, paths, sha256_bytes(source)


def statistical_report(
    roots: Sequence[str | os.PathLike[str]],
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
) -> ReportResult:
    """Build the statistical report of every run directory under ``roots``.

    Args:
        roots: folders searched at any depth for run directories (a folder
            holding ``classification_metrics.csv``); a root may itself be one.
            With ``run_dirs`` they are not searched, only used to name the runs.
        out_dir: report folder; created if missing.
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
        seed: seed of every bootstrap (each run and pair reseeds with it).
        run_dirs: the run directories to report, found by the caller (the
            platform passes its ``discovered_runs``); None searches ``roots``.

    Returns:
        :class:`ReportResult`. When runs were found but none passed the
        contract, the report (exclusions and manifest) is still written and
        returned; its ``run_summary`` is empty.

    Raises:
        FileNotFoundError: a ROOT does not exist.
        FileExistsError: ``out_dir`` is not empty and ``overwrite`` is False
            (checked before any run is read), or is a file.
        ComparisonError: an invalid setting, no run directory found, or a
            ``reference`` that no discovered run names (nothing is written).
    """
    settings = _check_settings(
        bins,
        n_resamples,
        confidence_level,
        seed,
        reference,
        {"allow_partial": allow_partial, "plots": plots, "pdf": pdf, "overwrite": overwrite},
    )
    root_paths = _check_roots(roots)
    out_path = Path(out_dir)
    _check_out_dir(out_path, overwrite)

    if run_dirs is None:
        found, unlisted = find_run_candidates(root_paths, recursive=True)
    else:
        found, unlisted = [Path(run_dir) for run_dir in run_dirs], []
    if not found and not unlisted:
        raise ComparisonError(
            f"no run directory (a folder holding {METRICS_FILENAME}) found under "
            + ", ".join(display_path(p) for p in root_paths)
        )
    runs = assess_runs(_run_ids(root_paths, found), allow_partial=allow_partial)
    runs += _unlisted_runs(root_paths, unlisted)
    runs.sort(key=lambda run: run.run_id)
    if reference is not None and reference not in {run.model for run in runs}:
        known = sorted({run.model for run in runs if run.model is not None})
        raise ComparisonError(
            f"reference model {reference!r} is not the model of any discovered run "
            f"(models found: {', '.join(known) or 'none'})"
        )
    included = [run for run in runs if not run.excluded]
    scores = {
        run.run_id: score_run(run, settings)
        for run in logged_progress(
            included, total=len(included), what="runs bootstrapped", logger=logger
        )
    }
    if reference is not None:
        paired_rows, mcnemar_rows, rejected = _comparisons(included, reference, settings)
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
        "exclusions.csv": table(
            [_exclusion_row(run) for run in runs if run.excluded]
            + sorted(rejected, key=lambda row: row["run_id"]),
            EXCLUSION_COLUMNS,
        ),
    }

    # The old manifest goes before the first new file lands: an interrupted
    # rewrite then has no manifest, so nobody mistakes it for a finished report.
    remove_file(out_path / MANIFEST_FILENAME)
    outputs = []
    for name in OUTPUT_FILES:
        data = _csv_bytes(frames[name])
        atomic_write_bytes(out_path / name, data)
        outputs.append({"path": name, "sha256": sha256_bytes(data)})
    figure_entries: list[dict[str, str]] = []
    figure_paths: list[Path] = []
    plotting_source = None
    if plots:
        figure_entries, figure_paths, plotting_source = _write_figures(
            out_path, included, scores, frames["reliability.csv"], settings.bins, pdf=pdf
        )
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
        outputs=outputs,
        figures=figure_entries,
        plotting_source_sha256=plotting_source,
        too_few_groups={
            run_id: s.no_interval_reason for run_id, s in scores.items() if s.too_few_groups
        },
        sample_level_anti_conservative=bool(frames["mcnemar.csv"]["anti_conservative"].any()),
        withheld_intervals=withheld_intervals(
            frames["run_summary.csv"], frames["paired_comparisons.csv"]
        ),
    )
    data = manifest_bytes(manifest)
    atomic_write_bytes(out_path / MANIFEST_FILENAME, data)
    logger.info(
        "report written to %s: %d runs included, %d excluded, %d comparison rows",
        out_path,
        len(included),
        len(runs) - len(included),
        len(frames["paired_comparisons.csv"]),
    )
    return ReportResult(
        out_dir=out_path,
        run_summary=frames["run_summary.csv"],
        level_metrics=frames["level_metrics.csv"],
        reliability=frames["reliability.csv"],
        paired_comparisons=frames["paired_comparisons.csv"],
        mcnemar=frames["mcnemar.csv"],
        exclusions=frames["exclusions.csv"],
        manifest=json.loads(data.decode("utf-8")),
        figures=tuple(path.resolve() for path in figure_paths),
    )
