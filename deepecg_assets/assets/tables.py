"""Table assets: the booktabs ``.tex`` files of a paper, written under ``<output>/tables/``."""

from pathlib import Path

import dagster as dg
import pandas as pd

from deepecg_assets.resources import AnalysisSettings, OutputFolderResource
from deepecg_assets.sensors import EAGER
from deepecgkit.analysis.latex import (
    FLIP_TABLE_STEM,
    RANK_TABLE_STEM,
    RESULTS_INDEX,
    RESULTS_TABLE_PREFIX,
    TAU_TABLE_STEM,
    flip_survival_table,
    rank_distribution_table,
    results_table,
    results_table_stems,
    table_index_text,
    tau_table as kendall_tau_table,
    write_tables,
)
from deepecgkit.io import atomic_write_text, remove_file

TABLES_GROUP = "tables"
_KINDS = {"latex"}
#: Characters of a table shown in the UI preview.
PREVIEW_CHARACTERS = 3000

#: Prefix of the results tables (the stems are those of :mod:`deepecgkit.analysis.latex`).
RESULTS_PREFIX = RESULTS_TABLE_PREFIX


def _written(
    paths: list[str], tables: dict[str, str], extra: dict[str, object] | None = None
) -> dg.MaterializeResult:
    """Metadata of a table materialisation: the paths, a preview, and ``extra``."""
    metadata: dict[str, object] = {"files": len(paths), **(extra or {})}
    for path, stem in zip(paths, sorted(tables), strict=True):
        metadata[f"path_{stem}"] = dg.MetadataValue.path(path)
    first = sorted(tables)[0] if tables else None
    if first is not None:
        metadata["preview"] = dg.MetadataValue.md(
            f"```latex\n{tables[first][:PREVIEW_CHARACTERS]}\n```"
        )
    return dg.MaterializeResult(metadata=metadata)


def table_paths(output_folder: OutputFolderResource, stems: list[str]) -> list[Path]:
    return [output_folder.tables_dir() / f"{stem}.tex" for stem in stems]


@dg.asset(group_name=TABLES_GROUP, automation_condition=EAGER, kinds=_KINDS)
def results_tables(
    aggregates: pd.DataFrame, analysis: AnalysisSettings, output_folder: OutputFolderResource
) -> dg.MaterializeResult:
    """One results table (means and Student-t intervals) per dataset."""
    datasets = sorted(aggregates["dataset"].astype(str).unique()) if len(aggregates) else []
    stems = results_table_stems(datasets)
    tables = {
        stems[dataset]: results_table(
            aggregates, dataset, confidence_level=analysis.confidence_level
        )
        for dataset in datasets
    }
    directory = output_folder.tables_dir()
    paths = write_tables(tables, directory)
    index = {f"{stems[dataset]}.tex": dataset for dataset in datasets}
    atomic_write_text(directory / RESULTS_INDEX, table_index_text(index))
    stale = remove_stale(directory, f"{RESULTS_PREFIX}*.tex", set(index))
    extra = {
        "index": dg.MetadataValue.path(str(directory / RESULTS_INDEX)),
        "removed_stale": dg.MetadataValue.json(stale),
    }
    return _written(paths, tables, extra)


def remove_stale(directory: Path, pattern: str, current: set[str]) -> list[str]:
    """Remove the files matching ``pattern`` in ``directory`` that are not in ``current``.

    The tables folder belongs to the platform; a table of a dataset (or an
    architecture) that is gone would otherwise stay next to the current ones
    and end up in a paper. Returns the removed file names, sorted.
    """
    removed = []
    for path in sorted(directory.glob(pattern)):
        if path.name not in current and remove_file(path):
            removed.append(path.name)
    return removed


@dg.asset(group_name=TABLES_GROUP, automation_condition=EAGER, kinds=_KINDS)
def rank_table(
    rank_distribution: pd.DataFrame,
    tau_summary: pd.DataFrame,
    analysis: AnalysisSettings,
    output_folder: OutputFolderResource,
) -> dg.MaterializeResult:
    """``rank_distribution.tex``: rank counts over seeds, with Kendall tau notes."""
    analysis.checked()
    tables = {
        RANK_TABLE_STEM: rank_distribution_table(
            rank_distribution,
            tau_summary,
            metric=analysis.metric,
            confidence_level=analysis.confidence_level,
        )
    }
    return _written(write_tables(tables, output_folder.tables_dir()), tables)


@dg.asset(group_name=TABLES_GROUP, automation_condition=EAGER, kinds=_KINDS)
def tau_table(
    tau_summary: pd.DataFrame, analysis: AnalysisSettings, output_folder: OutputFolderResource
) -> dg.MaterializeResult:
    """``kendall_tau.tex``: the supplementary Kendall tau table."""
    tables = {
        TAU_TABLE_STEM: kendall_tau_table(tau_summary, confidence_level=analysis.confidence_level)
    }
    return _written(write_tables(tables, output_folder.tables_dir()), tables)


@dg.asset(group_name=TABLES_GROUP, automation_condition=EAGER, kinds=_KINDS)
def flip_table(
    flip_grid: pd.DataFrame, analysis: AnalysisSettings, output_folder: OutputFolderResource
) -> dg.MaterializeResult:
    """``flip_survival.tex``: which cross-dataset reversals survive seed variance."""
    analysis.checked()
    tables = {
        FLIP_TABLE_STEM: flip_survival_table(
            flip_grid,
            metric=analysis.metric,
            exclusions=analysis.exclusions() or None,
            confidence_level=analysis.confidence_level,
            correction=analysis.correction,
        )
    }
    return _written(write_tables(tables, output_folder.tables_dir()), tables)
