"""Transfer assets: linear-probe transfer matrices of the encoders the runs kept.

The probing code imports torch, so it is imported inside the asset bodies:
loading the code location stays fast, and a location without checkpoints
never pays for torch at all.

A refresh reuses every cell whose checkpoint bytes, target data and probe
settings are unchanged (:mod:`deepecgkit.evaluation.transfer_cache`); the
cells live in ``cache/transfer_cells.json`` under the output folder, and the
materialisation reports ``reused_cells`` and ``computed_cells``.
"""

from pathlib import Path

import dagster as dg
import pandas as pd
from pydantic import Field

from deepecg_assets.assets.analysis import WARN_SEVERITY
from deepecg_assets.assets.tables import (
    PREVIEW_CHARACTERS,
    compile_check_name,
    compile_check_spec,
    remove_stale,
    table_compiles,
)
from deepecg_assets.metadata_images import figure_metadata, picture_name, table_picture_metadata
from deepecg_assets.parquet_frames import STORED_METADATA, StoredFrame
from deepecg_assets.resources import OutputFolderResource
from deepecg_assets.sensors import EAGER
from deepecgkit.analysis.latex import (
    TRANSFER_INDEX,
    TRANSFER_TABLE_STEM,
    file_stems,
    table_index_text,
    transfer_matrix_table,
    write_tables,
)
from deepecgkit.evaluation.constants import (
    DEFAULT_PROBE_METRIC,
    DEFAULT_PROBE_RANDOM_STATE,
    PROBE_METRICS,
    RANDOM_INIT,
)
from deepecgkit.io import atomic_write_text, remove_file
from deepecgkit.rundir.read import find_encoder_checkpoints
from deepecgkit.rundir.records import frame_to_records

TRANSFER_GROUP = "transfer"
#: The transfer cell cache, in the output folder's ``cache/`` folder.
TRANSFER_CELL_CACHE = "transfer_cells.json"
#: Columns of the ``transfer_matrix`` frame.
TRANSFER_COLUMNS = [
    "model_name",
    "source",
    "target",
    "metric",
    "score",
    *PROBE_METRICS,
    "task",
    "n_train",
    "n_test",
    "feature_dim",
    "note",
]
NO_CHECKPOINTS = "no discovered run kept an encoder checkpoint"
#: Check on ``transfer_matrix``: every cell has a score.
CELLS_CHECK = "every_transfer_cell_scored"
#: Failed cells listed in metadata.
LISTED_CELLS = 20


class TransferConfig(dg.Config):
    """Probe protocol settings, editable in the launchpad."""

    metric: str = Field(default=DEFAULT_PROBE_METRIC, description="headline probe metric")
    architectures: list[str] | None = Field(
        default=None, description="architectures to probe (default: every one with checkpoints)"
    )
    seed: int = Field(
        default=DEFAULT_PROBE_RANDOM_STATE, ge=0, description="seed of the probe splits"
    )
    device: str = Field(default="auto", description="where encoders run")


def _transfer_rows(matrix) -> list[dict]:
    rows = []
    for result in matrix.results.values():
        rows.append(
            {
                "model_name": matrix.model_name,
                "source": result.source,
                "target": result.target,
                "metric": matrix.metric,
                "score": result.score,
                **{name: result.metrics.get(name, float("nan")) for name in PROBE_METRICS},
                "task": result.task,
                "n_train": result.n_train,
                "n_test": result.n_test,
                "feature_dim": result.feature_dim,
                "note": result.note or "",
            }
        )
    return rows


def cells_check(cells: pd.DataFrame) -> dg.AssetCheckResult:
    """WARN when a transfer cell has no score (the transfer table would print it empty)."""
    failed = failed_cells(cells)
    return dg.AssetCheckResult(
        check_name=CELLS_CHECK,
        passed=not failed,
        severity=WARN_SEVERITY,
        description=f"{len(failed)} of {len(cells)} transfer cell(s) have no score",
        metadata={
            "failed_cells": len(failed),
            "notes": dg.MetadataValue.json(failed[:LISTED_CELLS]),
        },
    )


@dg.asset(
    group_name=TRANSFER_GROUP,
    automation_condition=EAGER,
    kinds={"pytorch", "csv"},
    ins={"discovered_runs": dg.AssetIn(metadata={STORED_METADATA: True})},
    check_specs=[
        dg.AssetCheckSpec(
            CELLS_CHECK,
            asset="transfer_matrix",
            description=(
                "Every transfer cell has a score. A failure means the transfer table prints "
                "an empty cell (an unreadable checkpoint empties its row); see notes for the "
                "reason."
            ),
        )
    ],
)
def transfer_matrix(
    context: dg.AssetExecutionContext,
    config: TransferConfig,
    discovered_runs: StoredFrame,
    output_folder: OutputFolderResource,
):
    """Probe score per (encoder source, probe target) for every architecture with checkpoints.

    A linear probe on frozen encoders: how well features learned on one
    dataset serve another (the random-init row is the floor). Cells whose
    checkpoint, target data and settings are unchanged since the last build
    are reused. Look at: failed_cells (cells without a score), skipped, and
    reused_cells / computed_cells.
    """
    if config.metric not in PROBE_METRICS:
        raise dg.Failure(
            description=f"metric must be one of {', '.join(PROBE_METRICS)}, got {config.metric!r}"
        )
    checkpoints, missing = find_encoder_checkpoints(
        frame_to_records(stored_runs_with_checkpoints(discovered_runs))
    )
    for problem in missing:
        context.log.warning("recorded encoder checkpoint not usable: %s", problem)
    if config.architectures is not None:
        checkpoints = {a: c for a, c in checkpoints.items() if a in config.architectures}
    if not checkpoints:
        context.log.info("transfer matrix skipped: %s", NO_CHECKPOINTS)
        # Cells of checkpoints that are gone: a clean build would have none.
        remove_file(transfer_cache_path(output_folder))
        empty = pd.DataFrame(columns=TRANSFER_COLUMNS)
        yield dg.Output(
            empty,
            metadata={
                "skipped": NO_CHECKPOINTS,
                "reused_cells": 0,
                "computed_cells": 0,
                "missing_checkpoints": dg.MetadataValue.json(missing),
            },
        )
        yield cells_check(empty)
        return

    from deepecgkit.evaluation.transfer import cross_dataset_transfer, protocol_data_module
    from deepecgkit.evaluation.transfer_cache import TransferCellCache
    from deepecgkit.registry import get_dataset_names

    cache_path = transfer_cache_path(output_folder)
    cache = TransferCellCache.load(cache_path)
    registered = set(get_dataset_names())
    # One probe data module per target, shared by every architecture: building
    # a target's dataset and splits is the same work for each of them.
    modules = {
        target: protocol_data_module(target, seed=config.seed)
        for target in sorted({d for by in checkpoints.values() for d in by if d in registered})
    }
    rows: list[dict] = []
    skipped: dict[str, str] = {}
    for architecture, by_dataset in checkpoints.items():
        targets = sorted(d for d in by_dataset if d in registered)
        if not targets:
            skipped[architecture] = "no checkpoint was trained on a registered dataset"
            continue
        try:
            matrix = cross_dataset_transfer(
                {d: str(by_dataset[d]) for d in targets},
                architecture,
                targets=targets,
                data_modules={d: modules[d] for d in targets},
                metric=config.metric,
                seed=config.seed,
                device=config.device,
                skip_unreadable_checkpoints=True,
                cell_cache=cache,
            )
        except ValueError as exc:  # e.g. an architecture the registry does not know
            skipped[architecture] = str(exc)
            context.log.warning("transfer matrix of %s skipped: %s", architecture, exc)
            continue
        rows += _transfer_rows(matrix)
        context.log.info("probed %s: %d x %d cells", architecture, *matrix.values.shape)
    frame = pd.DataFrame(rows, columns=TRANSFER_COLUMNS)
    cache.save(cache_path)
    context.log.info("transfer cells: %d reused, %d computed", cache.reused, cache.computed)
    failed = failed_cells(frame)
    yield dg.Output(
        frame,
        metadata={
            "architectures": ", ".join(sorted(frame["model_name"].unique())),
            "cells": len(frame),
            "reused_cells": cache.reused,
            "computed_cells": cache.computed,
            "cell_cache": dg.MetadataValue.path(str(cache_path)),
            "failed_cells": len(failed),
            "failed_cell_notes": dg.MetadataValue.json(failed[:LISTED_CELLS]),
            "checkpoints": dg.MetadataValue.json(
                {a: {d: str(p) for d, p in c.items()} for a, c in checkpoints.items()}
            ),
            "missing_checkpoints": dg.MetadataValue.json(missing),
            "skipped": dg.MetadataValue.json(skipped),
        },
    )
    yield cells_check(frame)


def runs_with_checkpoints(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of a records frame whose run recorded an encoder checkpoint, in order.

    One vectorised filter on the ``checkpoint`` column discovery fills from
    ``run_metadata.json``, so a corpus of 20,000 runs without checkpoints
    builds no record and reads no metadata file; only the runs selected
    here are looked at by
    :func:`~deepecgkit.rundir.read.find_encoder_checkpoints`. A frame
    without that column (stored before discovery recorded it) is returned
    whole, so that every run's metadata is read as it used to be.
    """
    if "checkpoint" not in runs.columns:
        return runs
    return runs.loc[runs["checkpoint"].notna()]


def stored_runs_with_checkpoints(runs: StoredFrame) -> pd.DataFrame:
    """:func:`runs_with_checkpoints` of a stored records frame, reading only those rows.

    At 100,000 runs the whole frame is 98 MB of metrics text, and a corpus
    without checkpoints has no row to read: only the ``checkpoint`` column
    is decoded then. Equal to ``runs_with_checkpoints(runs.read())`` but for
    the index (a fresh one), which no reader of records looks at.
    """
    if "checkpoint" not in runs.column_names():
        return runs.read()
    return runs.read(where=("checkpoint", _is_recorded))


def _is_recorded(checkpoint: object) -> bool:
    """Whether a ``checkpoint`` cell names a checkpoint (what ``notna`` keeps)."""
    return not pd.isna(checkpoint)


def transfer_cache_path(output_folder: OutputFolderResource) -> Path:
    """Where the transfer cell cache of ``output_folder`` lives."""
    return output_folder.root() / "cache" / TRANSFER_CELL_CACHE


def failed_cells(cells: pd.DataFrame) -> list[dict[str, str]]:
    """The cells without a score, each with its architecture, source, target and note."""
    if cells.empty:
        return []
    scores = pd.to_numeric(cells["score"], errors="coerce")
    rows = cells.loc[scores.isna(), ["model_name", "source", "target", "note"]]
    return [{key: str(value) for key, value in row.items()} for row in rows.to_dict("records")]


def matrix_frame(cells: pd.DataFrame) -> pd.DataFrame:
    """One architecture's cells as a matrix: sources (untrained first) by targets."""
    matrix = cells.pivot(index="source", columns="target", values="score")
    sources = [RANDOM_INIT, *sorted(s for s in matrix.index if s != RANDOM_INIT)]
    return matrix.reindex(index=[s for s in sources if s in matrix.index])


@dg.asset(
    group_name=TRANSFER_GROUP,
    automation_condition=EAGER,
    kinds={"latex", "png"},
    check_specs=[
        compile_check_spec("transfer_table", TRANSFER_TABLE_STEM, when="when there are checkpoints")
    ],
)
def transfer_table(
    transfer_matrix: pd.DataFrame, output_folder: OutputFolderResource
) -> dg.MaterializeResult:
    """``transfer_matrix.tex`` (one table per architecture) and a heat-map figure of each.

    Each architecture's table is also rendered on its own, to
    ``transfer_matrix.<architecture>.png`` (a stem never holds a dot, so the
    name cannot be a heat map's); the metadata shows those pictures and the
    first architecture's heat map (``figure``).

    Look at: the inline heat map (``figure``), the per-architecture pictures
    and the compile check.
    """
    tables_dir = output_folder.tables_dir()
    if transfer_matrix.empty:
        # Files of an earlier matrix describe checkpoints that are gone.
        stale = remove_stale(tables_dir, pattern=f"{TRANSFER_TABLE_STEM}*", current=set())
        return dg.MaterializeResult(
            metadata={"skipped": NO_CHECKPOINTS, "removed_stale": dg.MetadataValue.json(stale)},
            check_results=[
                dg.AssetCheckResult(
                    check_name=compile_check_name(TRANSFER_TABLE_STEM),
                    passed=True,
                    description="no transfer table: no run kept an encoder checkpoint",
                    metadata={"checked": False},
                )
            ],
        )
    from deepecgkit.evaluation.visualization import plot_transfer_matrix

    architectures = sorted(transfer_matrix["model_name"].astype(str).unique())
    stems = file_stems(architectures)
    metric = str(transfer_matrix["metric"].iloc[0])
    parts, figures = [], []
    pictures: dict[str, str] = {}
    titles: dict[str, str] = {}
    for architecture in architectures:
        matrix = matrix_frame(transfer_matrix.loc[transfer_matrix["model_name"] == architecture])
        parts.append(
            transfer_matrix_table(
                matrix,
                metric=metric,
                baseline_row=RANDOM_INIT,
                label=f"tab:transfer_matrix_{stems[architecture]}",
            )
        )
        picture_stem = f"{TRANSFER_TABLE_STEM}.{stems[architecture]}"
        pictures[picture_stem] = parts[-1]
        titles[picture_stem] = f"transfer table of {architecture}"
        figure = tables_dir / f"{TRANSFER_TABLE_STEM}_{stems[architecture]}.png"
        plot_transfer_matrix(
            matrix.to_numpy(),
            [str(s) for s in matrix.index],
            [str(t) for t in matrix.columns],
            metric=metric,
            baseline_rows=int(RANDOM_INIT in matrix.index),
            title=f"Cross-Dataset Transfer ({architecture})",
            save_path=str(figure),
        )
        figures.append(figure)
    tables = {TRANSFER_TABLE_STEM: "\n".join(parts)}
    (path,) = write_tables(tables, tables_dir)
    index = {
        figure.name: architecture
        for figure, architecture in zip(figures, architectures, strict=True)
    }
    atomic_write_text(tables_dir / TRANSFER_INDEX, table_index_text(index))
    images = table_picture_metadata(pictures, directory=tables_dir, titles=titles)
    current = {Path(path).name, TRANSFER_INDEX, *index, *map(picture_name, pictures)}
    stale = remove_stale(tables_dir, pattern=f"{TRANSFER_TABLE_STEM}*", current=current)
    metadata: dict[str, object] = {
        "path": dg.MetadataValue.path(path),
        "preview": dg.MetadataValue.md(
            f"```latex\n{tables[TRANSFER_TABLE_STEM][:PREVIEW_CHARACTERS]}\n```"
        ),
        "index": dg.MetadataValue.path(str(tables_dir / TRANSFER_INDEX)),
        "removed_stale": dg.MetadataValue.json(stale),
    }
    for figure in figures:
        metadata[f"figure_{figure.stem}"] = dg.MetadataValue.path(str(figure))
    metadata |= images
    metadata |= figure_metadata(figures[0], alt=f"transfer heat map of {architectures[0]}")
    check = table_compiles(TRANSFER_TABLE_STEM, output_folder)
    return dg.MaterializeResult(metadata=metadata, check_results=[check])
