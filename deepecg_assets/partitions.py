"""The dataset partitions: the unit of recomputation of the platform.

Every per-dataset asset (the dataset's runs, reconciled rows, aggregates,
rank distribution, tau summary, paired differences and results table) is
partitioned by dataset with one :class:`~dagster.DynamicPartitionsDefinition`,
so a new seed of one dataset recomputes that dataset's partition and the cheap
cross-dataset combines, not the whole graph. Partitions per seed or per run
would be slower, not faster: Dagster pays a fixed cost per launched run and
per partition.

Partition keys. A dataset name is its own key when it is a plain name
(:data:`PLAIN_KEY`: letters, digits, ``_`` and ``-``, starting with a letter
or digit, at most :data:`MAX_PLAIN_KEY` characters): ``ptbxl`` stays
``ptbxl``. Any other name (spaces, dots, Unicode, ``...``, control characters
that Dagster refuses in a key, very long names) maps to ``_<prefix>-<hash>``:
an underscore, the name with every other character replaced by ``_`` and cut
to :data:`KEY_PREFIX_CHARACTERS`, and :data:`KEY_HASH_CHARACTERS` hex digits
of its SHA-256. A plain key never starts with ``_``, so the two kinds never
collide; two mapped names colliding would need a 48-bit hash collision, which
:func:`dataset_keys` detects and refuses. The mapping is recorded in the
``partitions`` metadata of ``discovered_runs`` and in the results-table index.
The key doubles as the file stem of the dataset's results table and of its
stored frames, so it is also safe in a file name and in LaTeX's ``\\input``.

A partitioned frame travels between steps as a mapping ``{partition key:
frame}`` (see :mod:`deepecg_assets.parquet_frames`): a step may process one
partition (a sensor's refresh of one dataset) or all of them in one go (the
build command and "Materialize all" use single-run backfills, because a run
per dataset would cost Dagster's fixed launch cost per dataset).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from deepecgkit.io import remove_file

__all__ = [
    "DATASETS",
    "DATASET_PARTITIONS",
    "DISCOVERY_ASSET",
    "PER_DATASET_ASSETS",
    "SINGLE_RUN",
    "dataset_key",
    "dataset_keys",
    "frames_by_key",
    "joined",
    "latest_discovery_metadata",
    "materialization_metadata",
]

#: Name of the dynamic partitions definition (how the instance stores its keys).
DATASET_PARTITIONS = "dataset"
#: The partitions of every per-dataset asset.
DATASETS = dg.DynamicPartitionsDefinition(name=DATASET_PARTITIONS)
#: A backfill over many datasets is one run whose steps see every partition at once.
SINGLE_RUN = dg.BackfillPolicy.single_run()
#: The assets partitioned by dataset (their stored frames, and the results tables).
PER_DATASET_FRAMES = (
    "run_metrics",
    "reconciled_runs",
    "averaging_conflicts",
    "aggregates",
    "rank_distribution",
    "tau_summary",
    "paired_differences",
)
PER_DATASET_ASSETS = (*PER_DATASET_FRAMES, "results_tables")
#: The per-dataset asset whose materialisation completes a dataset's partition.
LAST_PER_DATASET_ASSET = "results_tables"
#: The asset that reads the run roots (the one unpartitioned step every dataset depends on).
DISCOVERY_ASSET = "discovered_runs"
#: Metadata of ``discovered_runs`` read by the sensor and the build: ``{partition key:
#: dataset}`` and ``{partition key: state digest of the dataset's run files}``.
PARTITIONS_METADATA = "partitions"
DATASET_STATES_METADATA = "dataset_states"
#: File suffix of a stored frame (see :mod:`deepecg_assets.parquet_frames`).
FRAME_SUFFIX = ".parquet"
#: Longest dataset name used as its own key.
MAX_PLAIN_KEY = 64
#: A dataset name that is its own partition key.
PLAIN_KEY = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_-]{{0,{MAX_PLAIN_KEY - 1}}}")
#: Characters of a mapped name kept (sanitised) at the front of its key.
KEY_PREFIX_CHARACTERS = 40
#: Hex digits of SHA-256 in a mapped key (48 bits).
KEY_HASH_CHARACTERS = 12
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def dataset_key(dataset: str) -> str:
    """The partition key of ``dataset`` (see the module docstring for the mapping)."""
    if PLAIN_KEY.fullmatch(dataset):
        return dataset
    digest = hashlib.sha256(dataset.encode("utf-8", "surrogatepass")).hexdigest()
    prefix = _UNSAFE.sub("_", dataset)[:KEY_PREFIX_CHARACTERS]
    return f"_{prefix}-{digest[:KEY_HASH_CHARACTERS]}"


def dataset_keys(datasets: Iterable[str]) -> dict[str, str]:
    """``{partition key: dataset}`` for ``datasets``, sorted by key.

    Raises:
        ValueError: two datasets map to one key (a hash collision; rename one).
    """
    keys: dict[str, str] = {}
    for dataset in sorted({str(d) for d in datasets}):
        key = dataset_key(dataset)
        if key in keys:
            raise ValueError(
                f"datasets {keys[key]!r} and {dataset!r} map to one partition key {key!r}; "
                "rename one of them"
            )
        keys[key] = dataset
    return dict(sorted(keys.items()))


def frames_by_key(frame: pd.DataFrame, keys: Iterable[str]) -> dict[str, pd.DataFrame]:
    """The rows of each partition's dataset, ``{key: rows}`` for ``keys`` (empty when absent)."""
    wanted = list(keys)
    if frame.empty:
        return {key: frame.iloc[:0] for key in wanted}
    names = frame["dataset"].astype(str)
    row_keys = names.map({name: dataset_key(name) for name in names.unique()})
    groups = {key: rows for key, rows in frame.groupby(row_keys.to_numpy(), sort=False)}
    return {key: groups.get(key, frame.iloc[:0]) for key in wanted}


def joined(frames: Mapping[str, pd.DataFrame], *, columns: Sequence[str] = ()) -> pd.DataFrame:
    """The partitions' frames as one frame, in key order (what a combine step reads).

    ``columns`` are those of the result when there is no partition at all.
    """
    parts = [frames[key] for key in sorted(frames)]
    filled = [part for part in parts if len(part)]
    if not filled:
        return (
            parts[0].iloc[:0].reset_index(drop=True) if parts else pd.DataFrame(columns=[*columns])
        )
    return pd.concat(filled, ignore_index=True)


def materialization_metadata(
    materialization: dg.AssetMaterialization | None,
) -> dict[str, Any]:
    """A materialisation's metadata as plain values (``{}`` for None).

    What the sensor, the build and the scripts read of a ``discovered_runs``
    materialisation: :data:`PARTITIONS_METADATA`, :data:`DATASET_STATES_METADATA`,
    the diagnostics and the counts, unwrapped from Dagster's ``MetadataValue``.
    """
    if materialization is None:
        return {}
    return {name: entry.value for name, entry in materialization.metadata.items()}


def latest_discovery_metadata(instance: dg.DagsterInstance) -> dict[str, Any]:
    """The metadata of the latest ``discovered_runs`` materialisation on ``instance``.

    ``{}`` when discovery was never materialised there (see
    :func:`materialization_metadata` for the values).
    """
    event = instance.get_latest_materialization_event(dg.AssetKey(DISCOVERY_ASSET))
    return materialization_metadata(event.asset_materialization if event is not None else None)


def remove_stored_partitions(frames_dir: Path, keys: Iterable[str]) -> list[str]:
    """Delete the stored frames of the partitions ``keys`` (datasets that are gone).

    A clean build never holds them, so an incremental refresh must not either.
    Returns the removed files, relative to ``frames_dir``, sorted.
    """
    removed = []
    for key in keys:
        for asset in PER_DATASET_FRAMES:
            path = frames_dir / asset / f"{key}{FRAME_SUFFIX}"
            if remove_file(path):
                removed.append(f"{asset}/{path.name}")
    return sorted(removed)
