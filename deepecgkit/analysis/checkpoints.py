"""Which discovered runs kept an encoder checkpoint, for linear-probe transfer matrices.

``deepecg train-grid`` records the checkpoint of a torch run in
``run_metadata.json`` as ``"checkpoint": "checkpoint.pt"`` (relative to the
run directory; null when none was kept, as for scikit-learn baselines or
``--checkpoints first-seed`` beyond the first seed) and the registered
architecture as ``params.model``. A transfer matrix needs one frozen encoder
per (architecture, source dataset); this module picks it without importing
torch, so the platform can decide cheaply whether there is anything to probe.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from deepecgkit.analysis._io import REASON_PERMISSION, display_path
from deepecgkit.analysis.aggregation import RunRecord, _read_json
from deepecgkit.analysis.constants import METADATA_FILENAME

__all__ = ["encoder_checkpoints", "find_encoder_checkpoints"]

#: Metadata key holding the checkpoint path.
CHECKPOINT_KEY = "checkpoint"


def _architecture(metadata: dict, record: RunRecord) -> str:
    """Registered architecture of a run: ``params.model``, else the CSV's model name."""
    params = metadata.get("params")
    if isinstance(params, dict) and isinstance(params.get("model"), str):
        return params["model"]
    return record.model


def _checkpoint_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a checkpoint file (None when it is a regular file).

    Only the file's type is checked here, without reading it: whether its
    content loads is learnt when the probe loads it (see
    :func:`deepecgkit.evaluation.representation.cross_dataset_transfer`).
    """
    try:
        info = os.stat(path)
    except PermissionError:
        return REASON_PERMISSION
    except OSError:
        return "missing" if not os.path.islink(path) else "dangling symbolic link"
    return None if stat.S_ISREG(info.st_mode) else "not a regular file"


def find_encoder_checkpoints(
    records: Iterable[RunRecord],
) -> tuple[dict[str, dict[str, Path]], list[str]]:
    """The checkpoint of each (architecture, dataset), and the recorded ones that are not there.

    Args:
        records: discovered runs (runs without a seed are skipped: they
            cannot be ordered, and a seeded run is always available when any is).

    Returns:
        ``(checkpoints, problems)``. ``checkpoints`` is
        ``{architecture: {dataset: checkpoint path}}``, sorted by name, from
        the run with the smallest seed among those whose recorded checkpoint
        is a regular file; runs whose metadata names no checkpoint are
        skipped. ``problems`` has one ``"<path> (<reason>)"`` entry for each
        recorded checkpoint that is missing or not a regular file, so a cell
        that could have been probed never vanishes without a word.
    """
    chosen: dict[tuple[str, str], tuple[int, Path]] = {}
    problems: list[str] = []
    for record in records:
        if record.seed is None:
            continue
        metadata = _read_json(Path(record.run_dir) / METADATA_FILENAME) or {}
        relative = metadata.get(CHECKPOINT_KEY)
        if not isinstance(relative, str) or not relative:
            continue
        path = Path(record.run_dir) / relative
        problem = _checkpoint_problem(path)
        if problem is not None:
            problems.append(f"{display_path(path)} ({problem})")
            continue
        key = (_architecture(metadata, record), record.dataset)
        if key not in chosen or record.seed < chosen[key][0]:
            chosen[key] = (record.seed, path)
    result: dict[str, dict[str, Path]] = {}
    for (architecture, dataset), (_, path) in sorted(chosen.items()):
        result.setdefault(architecture, {})[dataset] = path
    return result, problems


def encoder_checkpoints(records: Iterable[RunRecord]) -> dict[str, dict[str, Path]]:
    """The checkpoint of each (architecture, dataset) (see :func:`find_encoder_checkpoints`)."""
    return find_encoder_checkpoints(records)[0]
