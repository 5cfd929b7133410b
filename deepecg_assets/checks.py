"""Asset checks: what a person should look at before trusting a table.

Severities: data-quality findings (dropped averaging minorities, bimodal
cells, untestable flips, transfer cells without a score) are WARN, because
the analysis handles them honestly and reports them; a ``.tex`` file that
does not compile, and a selection that leaves nothing to rank, are ERROR,
because they would break the paper's build or empty every table. The check for unreadable or failed
runs lives with ``discovered_runs``, which holds the diagnostics, and the
checks of the flip grid live with ``flip_grid``
(:mod:`deepecg_assets.assets.analysis`), which evaluates them on the grid it
has just computed instead of reading 232,750 rows back (at 100,000 runs).

The checks of per-dataset assets are partitioned by dataset like their
assets, so a run of one dataset's partition (the run sensor's refresh) checks
that dataset's frames only, and does not fail on a dataset not built yet.
"""

from pathlib import Path

import dagster as dg
import pandas as pd

from deepecg_assets.assets.analysis import LISTED_ROWS
from deepecg_assets.assets.tables import compile_cache, results_table_stem, table_paths
from deepecg_assets.assets.transfer import LISTED_CELLS, failed_cells
from deepecg_assets.parquet_frames import STORED_METADATA, StoredFrame
from deepecg_assets.partitions import DATASETS, joined
from deepecg_assets.resources import AnalysisSettings, OutputFolderResource
from deepecgkit.analysis.compile_cache import compile_tables
from deepecgkit.analysis.latex import (
    FLIP_TABLE_STEM,
    RANK_TABLE_STEM,
    TAU_TABLE_STEM,
    TRANSFER_TABLE_STEM,
    UNICODE_ENGINES,
    latex_engine,
)
from deepecgkit.analysis.ranking import rank_within_seed
from deepecgkit.analysis.statistics import collapse_gap_floor, is_bimodal

_WARN = dg.AssetCheckSeverity.WARN


@dg.asset_check(
    asset="averaging_conflicts",
    partitions_def=DATASETS,
    description=(
        "No run was dropped for its averaging mode. A failure means some runs of a "
        "(dataset, model) cell were averaged differently (macro vs weighted ...) and the "
        "minority was left out of every table: the cell rests on fewer seeds than were run."
    ),
)
def no_dropped_averaging_minorities(
    averaging_conflicts: dict[str, pd.DataFrame],
) -> dg.AssetCheckResult:
    averaging_conflicts = joined(averaging_conflicts)
    dropped = int(averaging_conflicts["dropped_runs"].sum()) if len(averaging_conflicts) else 0
    return dg.AssetCheckResult(
        passed=dropped == 0,
        severity=_WARN,
        description=f"{dropped} run(s) dropped from {len(averaging_conflicts)} cell(s)",
        metadata={
            "dropped_runs": dropped,
            "cells": dg.MetadataValue.json(
                averaging_conflicts.head(LISTED_ROWS).to_dict("records")
            ),
        },
    )


def bimodal_cells(runs: pd.DataFrame, metric: str) -> list[dict[str, str]]:
    """(dataset, model) cells whose per-seed scores of ``metric`` converge or collapse.

    Per-seed values are the ranking's: finite values of seeded runs, duplicates averaged.
    The rule is the flip grid's, with the metric's floor.
    """
    per_seed = rank_within_seed(runs, metric)
    floor = collapse_gap_floor(metric)
    cells = []
    for (dataset, model), block in per_seed.groupby(["dataset", "model"], sort=True):
        flagged, reason = is_bimodal(block["value"], min_gap=floor)
        if flagged:
            cells.append({"dataset": str(dataset), "model": str(model), "reason": reason})
    return cells


@dg.asset_check(
    asset="aggregates",
    additional_ins={"reconciled_runs": dg.AssetIn()},
    partitions_def=DATASETS,
    description=(
        "No (dataset, model) cell converges on some seeds and collapses on others. A failure "
        "means a mean and interval in the results table average two regimes; the flip table "
        "marks such rows bimodal instead of ranking them. Report the collapse rate."
    ),
)
def no_bimodal_cells(
    aggregates: dict[str, pd.DataFrame],
    reconciled_runs: dict[str, pd.DataFrame],
    analysis: AnalysisSettings,
) -> dg.AssetCheckResult:
    # One partition at a time: at 100,000 runs the joined long frame is 1.8 million rows,
    # and a cell lies in one dataset, so the cells are those of each partition, sorted.
    cells = sorted(
        (
            cell
            for frame in reconciled_runs.values()
            for cell in bimodal_cells(frame, analysis.metric)
        ),
        key=lambda cell: (cell["dataset"], cell["model"]),
    )
    return dg.AssetCheckResult(
        passed=not cells,
        severity=_WARN,
        description=f"{len(cells)} bimodal cell(s) in {analysis.metric}",
        metadata={"metric": analysis.metric, "cells": dg.MetadataValue.json(cells[:LISTED_ROWS])},
    )


@dg.asset_check(
    asset="rank_table",
    additional_ins={"rank_distribution": dg.AssetIn(metadata={STORED_METADATA: True})},
    description=(
        "The configured metric, models and datasets leave something to rank. A failure means "
        "the rank, tau and flip tables are empty: the analysis selection matches no run."
    ),
)
def selection_leaves_runs_to_rank(
    rank_distribution: dict[str, StoredFrame], analysis: AnalysisSettings
) -> dg.AssetCheckResult:
    """ERROR when the rank distribution is empty: every table built on it would be empty.

    Counts the stored rows (one per ranked cell) from each partition's file
    footer: no frame is read.
    """
    cells = sum(stored.num_rows() for stored in rank_distribution.values())
    selection = {
        "metric": analysis.metric,
        "models": analysis.models or "all",
        "datasets": analysis.datasets or "all",
    }
    return dg.AssetCheckResult(
        passed=cells > 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(
            f"{cells} (dataset, model) cell(s) ranked"
            if cells
            else "nothing to rank: no seeded run with a finite value matches the selection"
        ),
        metadata={"cells": cells, "selection": dg.MetadataValue.json(selection)},
    )


def _compile_check(
    paths: list[Path], output_folder: OutputFolderResource | None = None
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
    check with the LaTeX error lines it was stored with.
    """
    if latex_engine() is None:
        return dg.AssetCheckResult(
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
        passed=not failures and not unchecked,
        severity=dg.AssetCheckSeverity.ERROR if failures else _WARN,
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


@dg.asset_check(
    asset="results_tables",
    additional_ins={"aggregates": dg.AssetIn()},
    partitions_def=DATASETS,
    description=(
        "Every results table compiles with pdflatex in a minimal document. A failure means "
        "\\input of that table would break the paper's build."
    ),
)
def results_tables_compile(
    aggregates: dict[str, pd.DataFrame], output_folder: OutputFolderResource
) -> dg.AssetCheckResult:
    """The results tables of the datasets of this run (one, or all of them in a build)."""
    stems = [results_table_stem(key) for key, frame in sorted(aggregates.items()) if len(frame)]
    return _compile_check(table_paths(output_folder, stems), output_folder)


def _single_table_check(asset: str, stem: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=asset,
        name=f"{stem}_tex_compiles",
        description=(
            f"{stem}.tex compiles with pdflatex in a minimal document. A failure means "
            "\\input of this table would break the paper's build."
        ),
    )
    def _check(output_folder: OutputFolderResource) -> dg.AssetCheckResult:
        return _compile_check(table_paths(output_folder, [stem]), output_folder)

    return _check


rank_table_compiles = _single_table_check("rank_table", RANK_TABLE_STEM)
tau_table_compiles = _single_table_check("tau_table", TAU_TABLE_STEM)
flip_table_compiles = _single_table_check("flip_table", FLIP_TABLE_STEM)


@dg.asset_check(
    asset="transfer_table",
    name="transfer_matrix_tex_compiles",
    description=(
        "transfer_matrix.tex compiles with pdflatex (when there are checkpoints). A failure "
        "means \\input of the transfer table would break the paper's build."
    ),
)
def transfer_table_compiles(output_folder: OutputFolderResource) -> dg.AssetCheckResult:
    paths = table_paths(output_folder, [TRANSFER_TABLE_STEM])
    if not paths[0].is_file():
        return dg.AssetCheckResult(
            passed=True,
            description="no transfer table: no run kept an encoder checkpoint",
            metadata={"checked": False},
        )
    return _compile_check(paths, output_folder)


@dg.asset_check(
    asset="transfer_matrix",
    description=(
        "Every transfer cell has a score. A failure means the transfer table prints an empty "
        "cell (an unreadable checkpoint empties its row); see notes for the reason."
    ),
)
def every_transfer_cell_scored(transfer_matrix: pd.DataFrame) -> dg.AssetCheckResult:
    failed = failed_cells(transfer_matrix)
    return dg.AssetCheckResult(
        passed=not failed,
        severity=_WARN,
        description=f"{len(failed)} of {len(transfer_matrix)} transfer cell(s) have no score",
        metadata={
            "failed_cells": len(failed),
            "notes": dg.MetadataValue.json(failed[:LISTED_CELLS]),
        },
    )


ALL_CHECKS = [
    no_dropped_averaging_minorities,
    selection_leaves_runs_to_rank,
    no_bimodal_cells,
    results_tables_compile,
    rank_table_compiles,
    tau_table_compiles,
    flip_table_compiles,
    transfer_table_compiles,
    every_transfer_cell_scored,
]
