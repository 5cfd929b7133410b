"""Table assets: the booktabs ``.tex`` files of a paper, written under ``<output>/tables/``.

Each table is also rendered to a PNG next to its ``.tex`` and shown in the
asset's metadata (``image_<stem>``, see :mod:`deepecg_assets.metadata_images`).
The compile verdict that drawing settles is kept in the output folder's
compile cache (``<output>/cache/latex/``, :func:`compile_cache`, outside
``tables/``), where the tables' compile checks find it.

The rank, tau and flip tables (and the transfer table,
:mod:`deepecg_assets.assets.transfer`) check that they compile in the step
that writes them (:func:`table_compiles`, right after the pictures settled
the verdicts), and the rank table that the selection left something to
rank: a check step of its own would cost a one-run refresh its Dagster
events and an input load per check for a verdict the writing step has at
hand.
"""

from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import pandas as pd

from deepecg_assets.assets.analysis import WARN_SEVERITY
from deepecg_assets.metadata_images import picture_name, table_picture_metadata
from deepecg_assets.parquet_frames import STORED_METADATA, StoredFrame
from deepecg_assets.partitions import DATASETS, SINGLE_RUN, dataset_keys, joined
from deepecg_assets.resources import AnalysisSettings, OutputFolderResource
from deepecg_assets.sensors import EAGER
from deepecgkit.analysis.compile_cache import CompileCache, compile_tables
from deepecgkit.analysis.latex import (
    FLIP_TABLE_STEM,
    RANK_TABLE_STEM,
    RESULTS_INDEX,
    RESULTS_TABLE_PREFIX,
    TAU_TABLE_STEM,
    UNICODE_ENGINES,
    flip_survival_table,
    latex_engine,
    rank_distribution_table,
    results_table,
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
#: What each single-file table is, in words: the start of its picture's alt text.
RANK_TABLE_TITLE = "rank table"
TAU_TABLE_TITLE = "Kendall tau table"
FLIP_TABLE_TITLE = "flip table"
RESULTS_TABLE_TITLE = "results table of {dataset}"
#: Folder of the compile cache, next to the run cache under ``<output>/cache``.
COMPILE_CACHE_FOLDER = "latex"
#: Check on ``rank_table``: the analysis selection leaves something to rank.
SELECTION_CHECK = "selection_leaves_runs_to_rank"


def compile_check_name(stem: str) -> str:
    """The name of the compile check of the table ``<stem>.tex``."""
    return f"{stem}_tex_compiles"


def compile_check_spec(asset: str, stem: str, *, when: str | None = None) -> dg.AssetCheckSpec:
    """The compile check of ``<stem>.tex``, evaluated by the step of ``asset`` that writes it.

    ``when`` says when there is a table to compile, for an asset that writes
    none in some builds (the transfer table, without checkpoints).
    """
    condition = f" ({when})" if when else ""
    return dg.AssetCheckSpec(
        compile_check_name(stem),
        asset=asset,
        description=(
            f"{stem}.tex compiles with pdflatex in a minimal document{condition}. A failure "
            "means \\input of this table would break the paper's build."
        ),
    )


def compile_cache(output_folder: OutputFolderResource) -> CompileCache:
    """The output folder's compile cache, shared by the tables' pictures and compile checks."""
    return CompileCache(output_folder.cache_file().parent / COMPILE_CACHE_FOLDER)


def _written(
    paths: list[str],
    tables: dict[str, str],
    titles: Mapping[str, str],
    output_folder: OutputFolderResource,
    extra: dict[str, object] | None = None,
) -> dg.MaterializeResult:
    """Metadata of a table materialisation: the paths, a preview, the pictures, and ``extra``.

    ``titles`` says what each stem's table is (the pictures' alt text); the
    pictures are written next to the ``.tex`` files, which lie in one folder.
    """
    metadata: dict[str, object] = {"files": len(paths), **(extra or {})}
    if paths:
        metadata |= table_picture_metadata(
            tables,
            directory=Path(paths[0]).parent,
            titles=titles,
            cache=compile_cache(output_folder),
        )
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


def compile_check(
    paths: list[Path],
    output_folder: OutputFolderResource | None = None,
    *,
    check_name: str | None = None,
) -> dg.AssetCheckResult:
    """Compile every table in ``paths`` with the engine it needs; ERROR when one fails.

    A table of plain names compiles with pdflatex; one holding characters
    pdflatex cannot typeset (CJK, Hebrew ...) with lualatex or xelatex. When
    that engine is not installed the table is not checked, which fails the
    check with WARN: it will not compile with the engines this machine has.

    Verdicts come from the output folder's compile cache
    (:func:`~deepecg_assets.assets.tables.compile_cache`) when a picture's
    drawing or an earlier check settled them for the same text and engine;
    the rest are compiled concurrently and stored. A long table (the flip
    table of a large sweep) is compiled as one body line of each form, in
    pieces, concurrently, each cached by its own text, and fails when one
    piece fails, naming the body lines it spans
    (:func:`~deepecgkit.analysis.compile_cache.check_pieces`; the module says
    why the whole compiles when every piece does). Without ``output_folder``
    nothing is looked up or stored. A stored failure fails the
    check with the LaTeX error lines it was stored with. ``check_name``
    names the check when the asset holds more than one.
    """
    if latex_engine() is None:
        return dg.AssetCheckResult(
            check_name=check_name,
            passed=True,
            description="no LaTeX engine (pdflatex) is installed here; compilation not checked",
            metadata={"checked": False},
        )
    failures: dict[str, str] = {}
    unchecked: dict[str, str] = {}
    engine_paths: dict[str, str] = {}
    texts: dict[str, str] = {}
    for path in paths:
        try:
            table = path.read_text(encoding="utf-8")
        except OSError as exc:
            failures[path.name] = f"cannot read: {exc}"
            continue
        engine = latex_engine(table)
        if engine is None:
            unchecked[path.name] = (
                f"needs {' or '.join(UNICODE_ENGINES)} (characters pdflatex cannot typeset); "
                "none is installed here"
            )
            continue
        engine_paths[path.name], texts[path.name] = engine, table
    cache = compile_cache(output_folder) if output_folder is not None else None
    verdicts = compile_tables(texts, engine_paths, cache=cache)
    failures |= {name: reason for name, (ok, reason) in verdicts.items() if not ok}
    engines = {name: Path(engine).name for name, engine in engine_paths.items()}
    compiled = len(paths) - len(failures) - len(unchecked)
    return dg.AssetCheckResult(
        check_name=check_name,
        passed=not failures and not unchecked,
        severity=dg.AssetCheckSeverity.ERROR if failures else WARN_SEVERITY,
        description=(
            f"{compiled} of {len(paths)} table(s) compile"
            + (f"; {len(unchecked)} need an engine that is not installed" if unchecked else "")
        ),
        metadata={
            "checked": True,
            "engine": dg.MetadataValue.json(engines),
            "failures": dg.MetadataValue.json(failures),
            "unchecked": dg.MetadataValue.json(unchecked),
        },
    )


def table_compiles(stem: str, output_folder: OutputFolderResource) -> dg.AssetCheckResult:
    """The compile check of ``<stem>.tex``, once it is written and its picture drawn.

    Drawing the picture settled the verdict for the table's text in the
    compile cache, so the check usually compiles nothing itself.
    """
    return compile_check(
        table_paths(output_folder, [stem]), output_folder, check_name=compile_check_name(stem)
    )


def _published(
    stem: str,
    text: str,
    title: str,
    output_folder: OutputFolderResource,
    *checks: dg.AssetCheckResult,
) -> dg.MaterializeResult:
    """``<stem>.tex`` written with ``text``, its picture drawn, and the step's check results.

    ``title`` says what the table is (the picture's alt text, see
    :func:`_written`). The step's other ``checks``, already evaluated, come
    first, then the table's compile check (:func:`table_compiles`), which
    finds the verdict that drawing the picture settled.
    """
    tables = {stem: text}
    written = _written(
        write_tables(tables, output_folder.tables_dir()), tables, {stem: title}, output_folder
    )
    return dg.MaterializeResult(
        metadata=written.metadata, check_results=[*checks, table_compiles(stem, output_folder)]
    )


def selection_check(cells: int, analysis: AnalysisSettings) -> dg.AssetCheckResult:
    """ERROR when nothing was ranked (``cells`` ranked cells): every table on it would be empty."""
    selection = {
        "metric": analysis.metric,
        "models": analysis.models or "all",
        "datasets": analysis.datasets or "all",
    }
    return dg.AssetCheckResult(
        check_name=SELECTION_CHECK,
        passed=cells > 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(
            f"{cells} (dataset, model) cell(s) ranked"
            if cells
            else "nothing to rank: no seeded run with a finite value matches the selection"
        ),
        metadata={"cells": cells, "selection": dg.MetadataValue.json(selection)},
    )


def results_table_stem(key: str) -> str:
    """Stem of a dataset's results table: the prefix and its partition key (file-safe, unique)."""
    return f"{RESULTS_PREFIX}{key}"


@dg.asset(
    group_name=TABLES_GROUP,
    kinds=_KINDS,
    partitions_def=DATASETS,
    backfill_policy=SINGLE_RUN,
)
def results_tables(
    context: dg.AssetExecutionContext,
    aggregates: dict[str, pd.DataFrame],
    analysis: AnalysisSettings,
    output_folder: OutputFolderResource,
) -> dg.MaterializeResult:
    """One booktabs results table per dataset: means and Student-t intervals over seeds.

    File ``results_<partition key>.tex`` under ``<output>/tables`` (the
    partition key is the dataset's name unless the name is not file-safe;
    ``results_tables.json`` records which dataset each file holds). Look at:
    the preview, and the check ``results_tables_compile`` (green: ready for a paper).
    """
    tables, titles = {}, {}
    for key, frame in aggregates.items():
        if frame.empty:
            continue
        dataset = str(frame["dataset"].iloc[0])
        stem = results_table_stem(key)
        tables[stem] = results_table(frame, dataset, confidence_level=analysis.confidence_level)
        titles[stem] = RESULTS_TABLE_TITLE.format(dataset=dataset)
    paths = write_tables(tables, output_folder.tables_dir())
    return _written(paths, tables, titles, output_folder)


@dg.asset(
    group_name=TABLES_GROUP,
    automation_condition=EAGER,
    kinds={"json"},
    deps=[results_tables],
    ins={"discovered_runs": dg.AssetIn(metadata={STORED_METADATA: True})},
)
def results_index(
    discovered_runs: StoredFrame, output_folder: OutputFolderResource
) -> dg.MaterializeResult:
    """``results_tables.json``: which dataset each results table holds; stale tables removed.

    Written once after the per-dataset tables, from the datasets discovery
    found: the table (and picture) of a dataset that is gone is removed, so it
    cannot end up in a paper. Look at: removed_stale.
    """
    datasets = {str(name) for name in discovered_runs.distinct("dataset")}
    keys = dataset_keys(datasets)
    directory = output_folder.tables_dir()
    index = {f"{results_table_stem(key)}.tex": dataset for key, dataset in keys.items()}
    present = {name: dataset for name, dataset in index.items() if (directory / name).is_file()}
    path = atomic_write_text(directory / RESULTS_INDEX, table_index_text(present))
    stale = remove_stale(directory, pattern=f"{RESULTS_PREFIX}*.tex", current=set(index))
    stale += remove_stale(
        directory,
        pattern=picture_name(f"{RESULTS_PREFIX}*"),
        current={picture_name(Path(name).stem) for name in index},
    )
    return dg.MaterializeResult(
        metadata={
            "index": dg.MetadataValue.path(str(path)),
            "tables": len(present),
            "removed_stale": dg.MetadataValue.json(sorted(stale)),
        }
    )


def remove_stale(directory: Path, *, pattern: str, current: set[str]) -> list[str]:
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


@dg.asset(
    group_name=TABLES_GROUP,
    automation_condition=EAGER,
    kinds=_KINDS,
    check_specs=[
        dg.AssetCheckSpec(
            SELECTION_CHECK,
            asset="rank_table",
            description=(
                "The configured metric, models and datasets leave something to rank. A "
                "failure means the rank, tau and flip tables are empty: the analysis "
                "selection matches no run."
            ),
        ),
        compile_check_spec("rank_table", RANK_TABLE_STEM),
    ],
)
def rank_table(
    rank_distribution: dict[str, pd.DataFrame],
    tau_summary: dict[str, pd.DataFrame],
    analysis: AnalysisSettings,
    output_folder: OutputFolderResource,
) -> dg.MaterializeResult:
    """``rank_distribution.tex``: how often each model attained each rank over seeds.

    With Kendall tau notes under the table. Look at: the preview, its compile
    check, and ``selection_leaves_runs_to_rank`` (red: the selection ranks nothing).
    """
    analysis.checked()
    cells = sum(len(frame) for frame in rank_distribution.values())  # one row per ranked cell
    text = rank_distribution_table(
        joined(rank_distribution),
        joined(tau_summary),
        metric=analysis.metric,
        confidence_level=analysis.confidence_level,
    )
    return _published(
        RANK_TABLE_STEM, text, RANK_TABLE_TITLE, output_folder, selection_check(cells, analysis)
    )


@dg.asset(
    group_name=TABLES_GROUP,
    automation_condition=EAGER,
    kinds=_KINDS,
    check_specs=[compile_check_spec("tau_table", TAU_TABLE_STEM)],
)
def tau_table(
    tau_summary: dict[str, pd.DataFrame],
    analysis: AnalysisSettings,
    output_folder: OutputFolderResource,
) -> dg.MaterializeResult:
    """``kendall_tau.tex``: the supplementary table of ranking stability across seeds.

    Look at: the preview and its compile check.
    """
    text = kendall_tau_table(joined(tau_summary), confidence_level=analysis.confidence_level)
    return _published(TAU_TABLE_STEM, text, TAU_TABLE_TITLE, output_folder)


@dg.asset(
    group_name=TABLES_GROUP,
    automation_condition=EAGER,
    kinds=_KINDS,
    check_specs=[compile_check_spec("flip_table", FLIP_TABLE_STEM)],
)
def flip_table(
    flip_grid: pd.DataFrame, analysis: AnalysisSettings, output_folder: OutputFolderResource
) -> dg.MaterializeResult:
    """``flip_survival.tex``: which cross-dataset reversals survive seed variance and FDR.

    The table a paper cites for "A beats B here, B beats A there". Look at:
    the preview (verdict and q_reversal per row) and its compile check.
    """
    analysis.checked()
    text = flip_survival_table(
        flip_grid,
        metric=analysis.metric,
        exclusions=analysis.exclusions() or None,
        confidence_level=analysis.confidence_level,
        correction=analysis.correction,
    )
    return _published(FLIP_TABLE_STEM, text, FLIP_TABLE_TITLE, output_folder)
