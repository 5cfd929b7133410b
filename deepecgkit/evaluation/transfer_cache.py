"""Reuse of transfer-matrix cells whose encoder, target data and settings are unchanged.

A transfer matrix costs one embedding of two splits and one probe fit per
(encoder, target) cell, and a refresh after one new checkpoint used to pay
for every cell again. A cell's result is a function of

* the encoder: the SHA-256 of the checkpoint file's bytes (the path does not
  matter: a moved run reuses its cells), or, for the untrained floor, the
  seed it is drawn from;
* the target data: see :func:`target_data_identity`;
* every setting that reaches the cell: architecture, lead count, row and
  column labels (they are part of the stored result), headline metric (it
  decides the ``score`` and the notes), the probe's options (``c``,
  ``max_iter``, ``random_state`` with their defaults filled in), the
  embedding batch size and device type (floating-point sums may differ
  between them), the versions of deepecgkit, numpy, scikit-learn and torch,
  and :data:`CELL_CACHE_FORMAT_VERSION`;

so :func:`cell_key` hashes exactly these into the cell's key. No cell draws
from a random state that depends on its position in the loop: the untrained
encoder is drawn from ``seed`` under a forked RNG, embedding is a frozen
forward pass in eval mode, and the probe's solver is seeded by
``random_state``; a reused cell therefore equals a recomputed one bit for bit.

:class:`TransferCellCache` holds the cells of one build. It is read from and
written to one JSON file (atomically, through :mod:`deepecgkit.io`); a file
that cannot be read, is not valid JSON, or is of another kind or version is
ignored with a warning and the cells are recomputed. :meth:`TransferCellCache.save`
keeps only the cells the build used, so the file never grows with checkpoints
that are gone, and a refreshed file equals the one a clean build writes.

Cells of a checkpoint that cannot be read are never stored: they are cheap
to recompute, and their note names the file's path.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from deepecgkit.evaluation.constants import DEFAULT_PROBE_RANDOM_STATE
from deepecgkit.evaluation.probe import DEFAULT_PROBE_C, DEFAULT_PROBE_MAX_ITER, ProbeResult
from deepecgkit.io import UnreadableFileError, atomic_write_text, json_ready, read_regular_file

__all__ = [
    "CELL_CACHE_FORMAT_VERSION",
    "CELL_CACHE_KIND",
    "CachedCell",
    "TransferCellCache",
    "cell_key",
    "checkpoint_digest",
    "probe_settings",
    "target_data_identity",
]

logger = logging.getLogger(__name__)

#: Version of the cell cache's file and key; a file of another version is ignored.
CELL_CACHE_FORMAT_VERSION = 1
#: ``kind`` field of the cache file, so that a foreign JSON file is never taken for one.
CELL_CACHE_KIND = "deepecgkit transfer cells"
#: Packages whose code computes a cell; a new version of any of them recomputes every cell.
_CELL_PACKAGES = ("deepecgkit", "numpy", "scikit-learn", "torch")
#: Dataset options that never change the data (logging and download switches).
_NON_DATA_KWARGS = frozenset({"verbose", "force_download", "download"})
#: Per-item functions of a dataset; their effect is not in the arrays, so it cannot be hashed.
_TRANSFORMS = ("transform", "target_transform")


@functools.lru_cache(maxsize=1)
def _package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in _CELL_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _digest(payload: Any) -> str:
    """SHA-256 of the canonical JSON of ``payload`` (sorted keys, NaN kept as NaN)."""
    text = json.dumps(json_ready(payload, nan_to_null=False), sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def checkpoint_digest(path: str | Path) -> str | None:
    """SHA-256 of the checkpoint file's bytes; None when it is not a readable regular file."""
    try:
        data, _ = read_regular_file(path)
    except UnreadableFileError:
        return None
    return hashlib.sha256(data).hexdigest()


def _array_digest(hasher: Any, array: Any) -> None:
    values = np.ascontiguousarray(np.asarray(array))
    hasher.update(f"{values.dtype.str}{values.shape}".encode())
    hasher.update(values.tobytes() if values.dtype != object else repr(values.tolist()).encode())


def target_data_identity(module: Any) -> dict[str, Any] | None:
    """What fixes the data a cell embeds and probes, without building it where possible.

    A module building a registered synthetic dataset (the data are generated
    from the dataset's name, size and ``data_seed``) is identified by the
    dataset class, its constructor options and the split settings (fractions,
    seed, stratification): nothing is generated. Any other module (a dataset
    read from files, or one given ready-made) is set up and identified by the
    content hash of what the probe reads: windows, labels, the train and test
    indices, class names, task and sampling rate, so a changed file changes
    the identity.

    Returns:
        A JSON-ready dictionary, or None when the data cannot be identified
        (a dataset without ``signals`` and ``labels`` arrays, or with a
        ``transform``, or options that are not plain values): such a cell is
        always computed.
    """
    from deepecgkit.datasets.synthetic_datasets import SyntheticECGDataset

    splits = {
        "val_split": getattr(module, "val_split", None),
        "test_split": getattr(module, "test_split", None),
        "seed": getattr(module, "seed", None),
        "stratify": getattr(module, "stratify", None),
    }
    dataset_class = getattr(module, "dataset_class", None)
    if isinstance(dataset_class, type) and issubclass(dataset_class, SyntheticECGDataset):
        options = {
            key: value
            for key, value in getattr(module, "dataset_kwargs", {}).items()
            if key not in _NON_DATA_KWARGS
        }
        try:
            options = json_ready(options, nan_to_null=False)
        except TypeError:  # a transform or another object: what it does cannot be hashed
            return None
        return {
            "generated": f"{dataset_class.__module__}.{dataset_class.__qualname__}",
            "name": dataset_class.name,
            "sampling_rate": getattr(module, "sampling_rate_arg", None),
            "leads": getattr(module, "leads", None),
            "options": options,
            **splits,
        }
    try:
        dataset = module.dataset
        signals, labels = dataset.signals, dataset.labels
        train, test = module.split_indices("train"), module.split_indices("test")
    except (AttributeError, TypeError, ValueError, OSError):
        return None  # the cell's own attempt reports why the data cannot be read
    if any(getattr(dataset, name, None) is not None for name in _TRANSFORMS):
        return None  # applied per item, after the arrays hashed here
    hasher = hashlib.sha256()
    for array in (signals, labels, train, test):
        _array_digest(hasher, array)
    return {
        "content_sha256": hasher.hexdigest(),
        "class_names": [str(name) for name in getattr(dataset, "class_names", [])],
        "task": getattr(dataset, "task", None),
        "sampling_rate": getattr(dataset, "sampling_rate", None),
    }


def probe_settings(probe_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The probe's options with :func:`~deepecgkit.evaluation.probe.build_probe`'s defaults."""
    return {
        "c": DEFAULT_PROBE_C,
        "max_iter": DEFAULT_PROBE_MAX_ITER,
        "random_state": DEFAULT_PROBE_RANDOM_STATE,
    } | dict(probe_kwargs)


def cell_key(
    *,
    model_name: str,
    input_channels: int,
    source: str,
    target: str,
    encoder: dict[str, Any],
    data: dict[str, Any],
    metric: str,
    probe: dict[str, Any],
    embedding: dict[str, Any],
) -> str:
    """The hex SHA-256 identifying one cell (see the module docstring for what goes in)."""
    return _digest(
        {
            "format": CELL_CACHE_FORMAT_VERSION,
            "versions": _package_versions(),
            "model_name": model_name,
            "input_channels": int(input_channels),
            "source": source,
            "target": target,
            "encoder": encoder,
            "data": data,
            "metric": metric,
            "probe": probe_settings(probe),
            "embedding": embedding,
        }
    )


@dataclass(frozen=True)
class CachedCell:
    """A stored cell: its probe result and the class names of its target (None if unknown)."""

    result: ProbeResult
    class_names: list[str] | None

    def to_dict(self) -> dict[str, Any]:
        return {"result": self.result.to_dict(), "class_names": self.class_names}

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> CachedCell:
        """Inverse of :meth:`to_dict` (a ``null`` metric is read as NaN).

        Raises:
            ValueError: a payload that is not a stored cell.
        """
        try:
            stored = dict(payload["result"])
            stored["metrics"] = {
                str(name): math.nan if value is None else float(value)
                for name, value in stored["metrics"].items()
            }
            names = payload["class_names"]
            class_names = None if names is None else [str(name) for name in names]
            return cls(result=ProbeResult.from_dict(stored), class_names=class_names)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a stored transfer cell: {exc}") from exc


class TransferCellCache:
    """The cells of transfer matrices by :func:`cell_key`, and what one build did with them.

    Attributes:
        reused: cells this build took from the cache.
        computed: cells this build computed (stored or not).
    """

    def __init__(self, cells: dict[str, CachedCell] | None = None) -> None:
        self._stored: dict[str, CachedCell] = dict(cells or {})
        self._used: dict[str, CachedCell] = {}
        self.reused = 0
        self.computed = 0

    def __len__(self) -> int:
        return len(self._stored)

    @classmethod
    def load(cls, path: str | Path) -> TransferCellCache:
        """The cache stored at ``path``; an empty one when there is none or it is unusable.

        A missing file is the first build (logged at INFO). A file that cannot
        be read, is not JSON, is of another kind or version, or holds one
        malformed cell is ignored as a whole (logged as a warning): every cell
        is then recomputed and the file rewritten by :meth:`save`.
        """
        try:
            data, _ = read_regular_file(path)
        except UnreadableFileError as exc:
            log = logger.info if exc.reason == "missing" else logger.warning
            log("transfer cell cache %s not used: %s", path, exc.reason)
            return cls()
        try:
            payload = json.loads(data.decode("utf-8"))
            if payload.get("kind") != CELL_CACHE_KIND:
                raise ValueError(f"kind {payload.get('kind')!r} is not {CELL_CACHE_KIND!r}")
            if payload.get("version") != CELL_CACHE_FORMAT_VERSION:
                raise ValueError(
                    f"version {payload.get('version')!r} is not {CELL_CACHE_FORMAT_VERSION}"
                )
            cells = {str(k): CachedCell.from_dict(v) for k, v in payload["cells"].items()}
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            logger.warning("transfer cell cache %s ignored and rebuilt: %s", path, exc)
            return cls()
        return cls(cells)

    def get(self, key: str) -> CachedCell | None:
        """The stored cell under ``key`` (counted as reused), or None."""
        cell = self._stored.get(key)
        if cell is not None:
            self._used[key] = cell
            self.reused += 1
        return cell

    def record(
        self, key: str | None, result: ProbeResult, *, class_names: list[str] | None
    ) -> None:
        """A computed cell: counted, and stored under ``key`` unless ``key`` is None."""
        self.computed += 1
        if key is not None:
            cell = CachedCell(result=result, class_names=class_names)
            self._stored[key] = cell
            self._used[key] = cell

    def save(self, path: str | Path) -> Path:
        """Write the cells this build used (sorted by key) to ``path`` atomically.

        Non-finite metrics are written as JSON's ``NaN``/``Infinity``
        extensions (which Python reads back), not as ``null``, so that every
        value, infinities included, returns exactly.
        """
        payload = {
            "kind": CELL_CACHE_KIND,
            "version": CELL_CACHE_FORMAT_VERSION,
            "cells": {key: self._used[key].to_dict() for key in sorted(self._used)},
        }
        text = json.dumps(json_ready(payload, nan_to_null=False), indent=1, allow_nan=True)
        return atomic_write_text(path, text + "\n")
