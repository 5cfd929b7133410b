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

from collections.abc import Iterable
from pathlib import Path

from deepecgkit.analysis.aggregation import RunRecord, _read_json
from deepecgkit.analysis.constants import LEGACY_SEED, METADATA_FILENAME

__all__ = ["encoder_checkpoints"]

#: Metadata key holding the checkpoint path.
CHECKPOINT_KEY = "checkpoint"


def _architecture(metadata: dict, record: RunRecord) -> str:
    """Registered architecture of a run: ``params.model``, else the CSV's model name."""
    params = metadata.get("params")
    if isinstance(params, dict) and isinstance(params.get("model"), str):
        return params["model"]
    return record.model


def encoder_checkpoints(records: Iterable[RunRecord]) -> dict[str, dict[str, Path]]:
    """The checkpoint of each (architecture, dataset), from the run with the smallest seed.

    Args:
        records: discovered runs (legacy seeds are skipped: they cannot be
            ordered, and a seeded run is always available when any is).

    Returns:
        ``{architecture: {dataset: checkpoint path}}``, sorted by name; runs
        whose metadata names no checkpoint, or a checkpoint file that does not
        exist, are skipped.
    """
    chosen: dict[tuple[str, str], tuple[int, Path]] = {}
    for record in records:
        if record.seed is None or record.seed == LEGACY_SEED:
            continue
        metadata = _read_json(Path(record.run_dir) / METADATA_FILENAME) or {}
        relative = metadata.get(CHECKPOINT_KEY)
        if not isinstance(relative, str) or not relative:
            continue
        path = Path(record.run_dir) / relative
        if not path.is_file():
            continue
        key = (_architecture(metadata, record), record.dataset)
        if key not in chosen or record.seed < chosen[key][0]:
            chosen[key] = (record.seed, path)
    result: dict[str, dict[str, Path]] = {}
    for (architecture, dataset), (_, path) in sorted(chosen.items()):
        result.setdefault(architecture, {})[dataset] = path
    return result
