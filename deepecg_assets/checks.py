"""Asset checks: what a person should look at before trusting a table.

Severities: data-quality findings (dropped averaging minorities, bimodal
cells, untestable flips, transfer cells without a score) are WARN, because
the analysis handles them honestly and reports them; a ``.tex`` file that
does not compile, and a selection that leaves nothing to rank, are ERROR,
because they would break the paper's build or empty every table.

Three kinds of check live with the asset they check, evaluated by the step
that computes it on the frame it has just made, instead of a check step
reading it back: the check for unreadable or failed runs with
``discovered_runs``, which holds the diagnostics; the per-dataset checks
(dropped averaging minorities, bimodal cells) with ``dataset_analysis``
(:mod:`deepecg_assets.assets.datasets`), partitioned by dataset like their
assets, so a run of one dataset's partition (the run sensor's refresh) checks
that dataset's frames only and does not fail on a dataset not built yet; and
the flip grid's checks with ``flip_grid``
(:mod:`deepecg_assets.assets.analysis`; its 232,750 rows at 100,000 runs).
The checks here read stored tables and frames.
"""

from pathlib import Path

import dagster as dg
import pandas as pd

from deepecg_assets.assets.analysis import WARN_SEVERITY
from deepecg_assets.assets.tables import compile_cache, results_table_stem, table_paths
from deepecg_assets.assets.transfer import LISTED_CELLS, failed_cells
from deepecg_assets.parquet_frames import STORED_METADATA, StoredFrame
from deepecg_assets.partitions import DATASETS
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
        severity=WARN_SEVERITY,
        description=f"{len(failed)} of {len(transfer_matrix)} transfer cell(s) have no score",
        metadata={
            "failed_cells": len(failed),
            "notes": dg.MetadataValue.json(failed[:LISTED_CELLS]),
        },
    )


ALL_CHECKS = [
    selection_leaves_runs_to_rank,
    results_tables_compile,
    rank_table_compiles,
    tau_table_compiles,
    flip_table_compiles,
    transfer_table_compiles,
    every_transfer_cell_scored,
]
