"""Helpers that write small datasets in the local on-disk layout."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

WriteLayout = Callable[..., Path]


@pytest.fixture
def write_layout(tmp_path: Path) -> WriteLayout:
    """Write ``dataset.json``, ``labels.csv`` and NPZ records under ``tmp_path/name``.

    Keyword arguments: ``records`` (record id → ``(leads, samples)`` array),
    ``labels`` (CSV text), ``meta`` (overrides of the default description),
    ``name`` (folder name).
    """

    def write(
        *,
        records: dict[str, np.ndarray],
        labels: str,
        meta: dict[str, Any] | None = None,
        name: str = "local",
    ) -> Path:
        root = tmp_path / name
        (root / "records").mkdir(parents=True)
        description = {
            "name": name,
            "sampling_rate": 100,
            "leads": ["I", "II"],
            "task": "binary",
            "classes": ["non-AF", "AF"],
        }
        description.update(meta or {})
        (root / "dataset.json").write_text(json.dumps(description))
        (root / "labels.csv").write_text(labels)
        for record_id, signal in records.items():
            np.savez(root / "records" / f"{record_id}.npz", signal=signal)
        return root

    return write
