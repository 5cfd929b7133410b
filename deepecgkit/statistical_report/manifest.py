"""The report's ``manifest.json``: what was read, with which settings, and what was written.

The manifest is written last, so its presence marks a complete report. It
holds no timestamps, so a rerun on the same inputs gives the same manifest;
NaN is written as ``null`` (strict JSON). Its ``caveats`` and
``interval_statement`` carry the limits of the numbers with the numbers.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy

import deepecgkit
from deepecgkit.analysis.compare.mcnemar import MCNEMAR_CAVEAT, MCNEMAR_CAVEAT_CODE
from deepecgkit.io import display_path, json_ready
from deepecgkit.statistical_report.identity import RunInput
from deepecgkit.statistical_report.indented_json import ColumnRecords, indented_json
from deepecgkit.statistical_report.tables import run_identity

__all__ = [
    "INTERVAL_STATEMENT",
    "MANIFEST_FILENAME",
    "build_manifest",
    "manifest_bytes",
    "matplotlib_version",
    "sha256_bytes",
    "versions",
]

MANIFEST_FILENAME = "manifest.json"
SCHEMA_VERSION = 1
COMMAND = "deepecg report"

INTERVAL_STATEMENT = (
    "Every bootstrap interval and p-value in this report measures sampling uncertainty over "
    "the test patients/recordings for one fixed trained run: how much a metric (or a "
    "candidate - reference difference) would move if the test groups were drawn again, with "
    "the weights fixed. They do not measure variation across training seeds, folds, "
    "checkpoints or configurations; two seeds of one model can differ by more than either "
    "run's interval. Claims about models need the per-seed aggregates and flip tests."
)
TOO_FEW_GROUPS_CODE = "too_few_groups"
TOO_FEW_GROUPS_TEXT = (
    "These runs have fewer test groups than min_bootstrap_groups, or a class with fewer than "
    "min_bootstrap_groups_per_class groups; they carry point estimates only (no interval, no "
    "bootstrap p-value). Below these counts the group bootstrap's intervals cover the true "
    "value less often than they claim (docs/benchmarks.md); 'reasons' gives each run's counts."
)
INTERVALS_WITHHELD_CODE = "intervals_withheld"
INTERVALS_WITHHELD_TEXT = (
    "These metrics carry a point estimate only, although their run or pair has enough test "
    "groups: too few informative groups (misclassified or correctly classified groups, "
    "whichever fewer, for accuracy; discordant groups for an accuracy difference; groups in a "
    "misordered positive-negative pair, or whose placement differs, for AUROC), below "
    "min_informative_groups, or no valid interval. Near a metric's ceiling the bootstrap "
    "interval then covers the true value far less often than it claims (docs/benchmarks.md); "
    "'intervals' gives each row's reason."
)
PARTIAL_RUNS_CODE = "partial_runs_included"
PARTIAL_RUNS_TEXT = (
    "Partial runs were admitted with --allow-partial (missing metadata, fingerprint, split "
    "information, or incomplete predictions); their numbers are exploratory."
)


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


@cache
def matplotlib_version() -> str:
    """The installed matplotlib's version, from its distribution's metadata (read once).

    Reading the metadata spares a report that draws nothing (every run
    excluded, or every figure kept) the import of matplotlib, a large share
    of a one-run refresh in a fresh process. Without the metadata (a source
    tree on the path), matplotlib is imported for its ``__version__``.
    """
    try:
        return importlib.metadata.version("matplotlib")
    except importlib.metadata.PackageNotFoundError:
        import matplotlib

        return matplotlib.__version__


def versions(plots: bool) -> dict[str, str | None]:
    """Versions of the libraries that shaped the numbers (matplotlib only when it drew)."""
    return {
        "python": platform.python_version(),
        "deepecgkit": deepecgkit.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "pandas": pd.__version__,
        "matplotlib": matplotlib_version() if plots else None,
    }


def _input_entry(run: RunInput) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "path": display_path(run.path),
        "status": run.status,
        "reason": run.reason,
        "files": dict(run.files),
    }


def _included_entry(run: RunInput) -> dict[str, Any]:
    return {**run_identity(run), "partial_reasons": list(run.partial_reasons)}


def _caveats(
    runs: list[RunInput],
    too_few_groups: dict[str, str | None],
    sample_level_anti_conservative: bool,
    withheld_intervals: list[dict[str, str]],
) -> list[dict[str, Any]]:
    caveats: list[dict[str, Any]] = []
    if sample_level_anti_conservative:
        caveats.append({"code": MCNEMAR_CAVEAT_CODE, "text": MCNEMAR_CAVEAT})
    if too_few_groups:
        caveats.append(
            {
                "code": TOO_FEW_GROUPS_CODE,
                "text": TOO_FEW_GROUPS_TEXT,
                "run_ids": list(too_few_groups),
                "reasons": dict(too_few_groups),
            }
        )
    if withheld_intervals:
        caveats.append(
            {
                "code": INTERVALS_WITHHELD_CODE,
                "text": INTERVALS_WITHHELD_TEXT,
                "intervals": list(withheld_intervals),
            }
        )
    partial = [r.run_id for r in runs if r.partial_reasons and not r.excluded]
    if partial:
        caveats.append({"code": PARTIAL_RUNS_CODE, "text": PARTIAL_RUNS_TEXT, "run_ids": partial})
    return caveats


def build_manifest(
    *,
    roots: list[Path],
    settings: dict[str, Any],
    runs: list[RunInput],
    outputs: list[dict[str, str]],
    figures: list[dict[str, str]],
    plotting_source_sha256: str | None,
    too_few_groups: dict[str, str | None],
    sample_level_anti_conservative: bool,
    withheld_intervals: list[dict[str, str]] | None = None,
    inputs: ColumnRecords | None = None,
) -> dict[str, Any]:
    """Assemble the manifest in the specified key order.

    Args:
        roots: resolved roots, in the given order.
        settings: the report settings, in manifest order.
        runs: every discovered run (excluded too), sorted by ``run_id``; with
            ``inputs``, the runs of the per-run road only (the included runs
            and the caveats come from them).
        inputs: the ``inputs`` entries of every run as columns (the report's,
            whose runs recalled as columns have no object); None: from ``runs``.
        outputs: ``{"path", "sha256"}`` of each CSV, paths relative to the report folder.
        figures: ``{"run_id", "path", "format", "sha256"}`` of every figure written now.
        plotting_source_sha256: SHA-256 of the plotting module's source, None without plots.
        too_few_groups: ``run_id -> no_interval_reason`` of included runs below the
            bootstrap minima (``min_bootstrap_groups`` overall or per class).
        sample_level_anti_conservative: whether a McNemar sample row is anti-conservative.
        withheld_intervals: the metric-level refusals of ``run_summary.csv`` and
            ``paired_comparisons.csv`` (see
            :func:`~deepecgkit.statistical_report.tables.withheld_intervals`);
            listed under the caveat ``intervals_withheld`` when any.
    """
    return {
        "schema_version": SCHEMA_VERSION,
        "command": COMMAND,
        "roots": [display_path(root.as_posix()) for root in roots],
        "settings": settings,
        "inputs": [_input_entry(run) for run in runs] if inputs is None else inputs,
        "included_runs": [_included_entry(run) for run in runs if not run.excluded],
        "outputs": outputs,
        "figures": figures,
        "plotting_source_sha256": plotting_source_sha256,
        "versions": versions(plots=bool(settings.get("plots"))),
        "caveats": _caveats(
            runs, too_few_groups, sample_level_anti_conservative, withheld_intervals or []
        ),
        "interval_statement": INTERVAL_STATEMENT,
    }


#: The manifest's per-run lists: built by :func:`build_manifest` of text, ints, bools,
#: None and lists and objects of those only, so JSON reads them back as they are.
_PER_RUN_KEYS = ("inputs", "included_runs")
#: How the top-level ``figures`` key starts its line in a manifest this module writes
#: (a string's newline is escaped, so no value holds it).
_FIGURES_LINE = b'\n  "figures": '


def read_back(manifest: dict[str, Any]) -> dict[str, Any]:
    """What ``json.loads`` gives for :func:`manifest_bytes` of ``manifest`` (a built manifest).

    The per-run lists (``inputs``, ``included_runs``) are taken as they are:
    :func:`build_manifest` makes them of plain JSON values only, which JSON
    reads back equal; only the rest is encoded and decoded again, so the
    100,000 entries of a large report are not parsed from the 50 MB just written.
    """
    rest = {key: value for key, value in manifest.items() if key not in _PER_RUN_KEYS}
    decoded = json.loads(manifest_bytes(rest).decode("utf-8"))
    return {key: manifest[key] if key in _PER_RUN_KEYS else decoded[key] for key in manifest}


def listed_figures(data: bytes) -> list[Any]:
    """The ``figures`` list of a manifest's bytes (any value: the caller checks its entries).

    A manifest in this module's layout is not parsed whole (its per-run
    lists are most of its bytes): the top-level ``figures`` value starts
    after the last line that begins ``  "figures": `` (the last, as
    ``json.loads`` keeps the last of repeated keys), and only it is decoded.
    Any other text is parsed whole. Raises ``ValueError`` (or
    ``UnicodeDecodeError``) when neither gives a value.
    """
    start = data.rfind(_FIGURES_LINE)
    if start >= 0:
        text = data[start + len(_FIGURES_LINE) :].decode("utf-8")
        try:
            figures, _ = json.JSONDecoder().raw_decode(text)
        except ValueError:
            pass
        else:
            return figures if isinstance(figures, list) else []
    manifest = json.loads(data.decode("utf-8"))
    figures = manifest.get("figures", []) if isinstance(manifest, dict) else []
    return figures if isinstance(figures, list) else []


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """UTF-8 JSON, indent 2, keys in insertion order, NaN as ``null``, trailing newline.

    The bytes of :func:`~deepecgkit.io.json_text` (``ensure_ascii=False``),
    written by :func:`~deepecgkit.statistical_report.indented_json.indented_json`,
    which leaves most of the encoding to the C encoder. A manifest of plain
    values (text, Python numbers, lists and dicts: what :func:`build_manifest`
    builds, and what :func:`~deepecgkit.io.json_ready` would return unchanged)
    is written as it is; only one that JSON refuses as it stands (a NaN, a
    numpy value, a path) goes through ``json_ready`` first, so 20,000 input
    entries are not copied to learn that nothing needed converting.
    """
    try:
        text = indented_json(manifest, ensure_ascii=False, end="\n")
    except (TypeError, ValueError):
        text = indented_json(json_ready(manifest), ensure_ascii=False, end="\n")
    # (100,000 runs: 50 MB; the text and its bytes, not a third copy for the newline)
    return text.encode("utf-8")
