"""Cross-dataset transfer matrices of frozen ECG encoders, probed linearly.

Encoders are compared by how well a *linear* head fitted on their frozen
embeddings does on each dataset (:mod:`deepecgkit.evaluation.probe`). A fresh
probe is fitted for every (encoder, target) cell, because the targets' label
sets differ; only the frozen representation carries over between datasets,
and that is what the matrix measures. The untrained-encoder row
(``RANDOM_INIT``) is the floor: a trained encoder that does not beat it has
learned nothing useful for that target.

A refresh need not probe every cell again: given a
:class:`~deepecgkit.evaluation.transfer_cache.TransferCellCache`,
``cross_dataset_transfer`` reuses each cell whose checkpoint bytes, target
data and settings are unchanged, and loads only the encoders that still have
a cell to compute.

Importing this module does not import torch: only the functions that embed
data (``protocol_data_module``, ``cross_dataset_transfer``) do, on call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from deepecgkit.evaluation.constants import (
    DEFAULT_PROBE_METRIC,
    DEFAULT_PROBE_RANDOM_STATE,
    KEEP_ALL,
    KEEP_DIAGONAL,
    KEEP_EMBEDDINGS_MODES,
    KEEP_NONE,
    PROBE_BLAS_THREADS,
    PROBE_DATASETS,
    PROBE_INPUT_CHANNELS,
    PROBE_METRICS,
    PROBE_SAMPLING_RATE,
    PROTOCOL_DATASET_KWARGS,
    RANDOM_INIT,
    TRANSFER_KEY_SEPARATOR,
)
from deepecgkit.evaluation.probe import ProbeResult, linear_probe, probe_spelling
from deepecgkit.evaluation.transfer_cache import (
    CachedCell,
    TransferCellCache,
    cell_key,
    checkpoint_digest,
    target_data_identity,
)
from deepecgkit.io import atomic_write_text

if TYPE_CHECKING:
    from deepecgkit.datasets import ECGDataModule
    from deepecgkit.models import FeatureExtractor, FeatureSet

__all__ = ["TransferMatrix", "cross_dataset_transfer", "protocol_data_module"]

logger = logging.getLogger(__name__)

_NAN = float("nan")
_SUPPORTED_SUFFIXES = (".json", ".csv")


def _cell_key(source: str, target: str) -> str:
    return f"{source}{TRANSFER_KEY_SEPARATOR}{target}"


@dataclass
class TransferMatrix:
    """Probe scores of frozen encoders (rows) on target datasets (columns).

    The diagonal is in-domain; ``RANDOM_INIT`` is the first row when present.
    Transpose :meth:`to_frame` for a figure with sources along the top.

    Attributes:
        sources: row labels (encoder training datasets, ``RANDOM_INIT`` first).
        targets: column labels (probed datasets).
        values: ``(len(sources), len(targets))`` headline scores.
        metric: the headline metric.
        results: every cell's :class:`ProbeResult`, keyed ``"source->target"``.
        model_name: the encoder architecture.
        protocol: the shared input protocol (leads, rate, split, seed).
        embeddings: held-out embeddings, keyed like ``results`` (empty unless
            requested: one per cell would grow with the corpus).
        class_names: class names of each target.
    """

    sources: list[str]
    targets: list[str]
    values: np.ndarray
    metric: str = DEFAULT_PROBE_METRIC
    results: dict[str, ProbeResult] = field(default_factory=dict)
    model_name: str | None = None
    protocol: dict[str, Any] = field(default_factory=dict)
    embeddings: dict[str, FeatureSet] = field(default_factory=dict)
    class_names: dict[str, list[str]] = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """``values`` with index ``sources`` and columns ``targets``."""
        return pd.DataFrame(
            np.asarray(self.values, dtype=np.float64),
            index=list(self.sources),
            columns=list(self.targets),
        )

    def result_for(self, source: str, target: str) -> ProbeResult | None:
        """The cell's probe result, None when absent."""
        return self.results.get(_cell_key(source, target))

    def embedding_for(self, source: str, target: str) -> FeatureSet | None:
        """The cell's held-out embeddings, None when not kept."""
        return self.embeddings.get(_cell_key(source, target))

    def to_dict(self) -> dict[str, Any]:
        """Plain-value form: model_name, metric, sources, targets, values, protocol, cells."""
        return {
            "model_name": self.model_name,
            "metric": self.metric,
            "sources": list(self.sources),
            "targets": list(self.targets),
            "values": [
                [float(v) for v in row] for row in np.asarray(self.values, dtype=np.float64)
            ],
            "protocol": self.protocol,
            "cells": {key: result.to_dict() for key, result in self.results.items()},
        }

    def save(self, path: str | Path) -> Path:
        """Write ``.json`` (:meth:`to_dict`, NaN as ``NaN``) or ``.csv`` (:meth:`to_frame`).

        The file is written atomically; parent folders are created.

        Raises:
            ValueError: any other suffix.
        """
        target = Path(path)
        suffix = target.suffix.lower()
        if suffix == ".json":
            text = json.dumps(self.to_dict(), indent=2) + "\n"
        elif suffix == ".csv":
            text = self.to_frame().to_csv()
        else:
            raise ValueError(
                f"cannot save a transfer matrix as {target.name!r}: use a "
                f"{' or '.join(_SUPPORTED_SUFFIXES)} file"
            )
        atomic_write_text(target, text)
        return target

    @classmethod
    def load(cls, path: str | Path) -> TransferMatrix:
        """Read the ``.json`` form back (embeddings and class names are not stored).

        Raises:
            ValueError: a suffix other than ``.json``, or a file that is not a
                saved transfer matrix.
        """
        source = Path(path)
        if source.suffix.lower() != ".json":
            raise ValueError(
                f"only the .json form of a transfer matrix can be loaded, got {source.name!r}"
            )
        try:
            payload = json.loads(source.read_text(encoding="utf-8"))
            values = np.asarray(payload["values"], dtype=np.float64)
            sources, targets = list(payload["sources"]), list(payload["targets"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{source} is not a saved transfer matrix: {exc}") from exc
        if values.size == 0:
            values = values.reshape(len(sources), len(targets))
        return cls(
            sources=sources,
            targets=targets,
            values=values,
            metric=payload.get("metric", DEFAULT_PROBE_METRIC),
            results={
                key: ProbeResult.from_dict(cell) for key, cell in payload.get("cells", {}).items()
            },
            model_name=payload.get("model_name"),
            protocol=payload.get("protocol", {}),
        )


# --- the transfer matrix ------------------------------------------------------------------------


def protocol_data_module(
    dataset_name: str,
    *,
    data_dir: str | None = None,
    sampling_rate: int = PROBE_SAMPLING_RATE,
    batch_size: int = 32,
    num_workers: int = 0,
    val_split: float = 0.2,
    test_split: float = 0.1,
    seed: int = DEFAULT_PROBE_RANDOM_STATE,
    download: bool = True,
    force_download: bool = False,
    verbose: bool = False,
) -> ECGDataModule:
    """A data module in the probe protocol: one lead, one sampling rate for every dataset.

    Encoders can only be compared across datasets when all of them receive
    inputs of one shape. The AF corpora are single-lead at their defaults;
    PTB-XL (and its synthetic stand-in) is pinned to lead II by
    ``PROTOCOL_DATASET_KWARGS``. The module is returned not yet set up.

    Raises:
        ValueError: an unknown dataset name (from the registry).
    """
    from deepecgkit.datasets import ECGDataModule
    from deepecgkit.registry import get_dataset

    dataset_class = get_dataset(dataset_name)
    canonical = getattr(dataset_class, "_registry_name", dataset_name)
    return ECGDataModule(
        dataset_class=dataset_class,
        data_dir=data_dir,
        sampling_rate=sampling_rate,
        batch_size=batch_size,
        num_workers=num_workers,
        val_split=val_split,
        test_split=test_split,
        seed=seed,
        download=download,
        verbose=verbose,
        dataset_kwargs={"force_download": force_download, "verbose": verbose}
        | PROTOCOL_DATASET_KWARGS.get(canonical, {}),
    )


def _random_init_extractor(
    model_name: str, input_channels: int, seed: int, extractor_kwargs: dict[str, Any]
) -> FeatureExtractor:
    """The untrained floor: default initialisation drawn from ``seed``, global RNG untouched."""
    import torch

    from deepecgkit.models import FeatureExtractor
    from deepecgkit.registry import get_model

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = get_model(model_name)(input_channels=input_channels, output_size=2)
    return FeatureExtractor(model, model_name=model_name, **extractor_kwargs)


def _keep(mode: str, source: str, target: str) -> bool:
    if mode == KEEP_ALL:
        return True
    return mode == KEEP_DIAGONAL and source in (target, RANDOM_INIT)


def cross_dataset_transfer(
    checkpoints: dict[str, str | Path],
    model_name: str,
    *,
    targets: Sequence[str] | None = None,
    input_channels: int = PROBE_INPUT_CHANNELS,
    metric: str = DEFAULT_PROBE_METRIC,
    include_random_init: bool = True,
    data_modules: dict[str, ECGDataModule] | None = None,
    sampling_rate: int = PROBE_SAMPLING_RATE,
    data_dir: str | None = None,
    download: bool = True,
    force_download: bool = False,
    batch_size: int = 32,
    num_workers: int = 0,
    device: str = "auto",
    val_split: float = 0.2,
    test_split: float = 0.1,
    seed: int = DEFAULT_PROBE_RANDOM_STATE,
    progress: bool = False,
    verbose: bool = False,
    keep_embeddings: str = KEEP_NONE,
    skip_unreadable_checkpoints: bool = False,
    cell_cache: TransferCellCache | None = None,
    **probe_kwargs: Any,
) -> TransferMatrix:
    """Probe every encoder (row) on every target dataset (column).

    Each cell freezes the encoder trained on the row's source, embeds the
    column's training and test splits, fits a fresh standardised logistic
    head on the training embeddings and reports ``metric`` on the test ones.

    Args:
        checkpoints: source dataset → checkpoint path of an encoder trained on it.
        model_name: the encoders' registered architecture.
        targets: probed datasets, in column order; default ``sorted(data_modules)``
            when modules are given, else ``PROBE_DATASETS``.
        input_channels: lead count every encoder must read.
        metric: headline metric (one of ``PROBE_METRICS``).
        include_random_init: add the untrained floor as the first row.
        data_modules: ready modules per target; others are built with
            :func:`protocol_data_module` and this call's settings.
        sampling_rate, data_dir, download, force_download, batch_size,
            num_workers, val_split, test_split, seed, verbose: protocol settings.
        device: where encoders run.
        progress: progress bars while embedding.
        keep_embeddings: ``"none"``, ``"all"`` or ``"diagonal"`` (diagonal and
            random-init cells) held-out embeddings to keep.
        skip_unreadable_checkpoints: a checkpoint that is missing, unreadable
            or does not fit ``model_name``/``input_channels`` gives its row
            NaN cells with a note naming it (instead of raising), so one bad
            file does not cost the rest of the matrix.
        cell_cache: cells to reuse, and where the computed ones are recorded
            (:mod:`deepecgkit.evaluation.transfer_cache`): a cell whose
            checkpoint bytes, target data and settings match a stored one is
            taken from it, bit for bit what computing it gives; the caller
            saves the cache. Cells whose embeddings are kept are computed.
        **probe_kwargs: passed to :func:`~deepecgkit.evaluation.probe.build_probe`.

    Returns:
        A :class:`TransferMatrix`. A cell whose probe cannot be fitted, or
        whose data the encoder cannot read, is NaN with a note; the rest of
        the matrix is unaffected.

    Raises:
        ValueError: unknown metric or ``keep_embeddings``, no rows, no
            targets, an unregistered target without a module, a checkpoint
            that does not fit ``model_name``/``input_channels``.
        FileNotFoundError: a missing checkpoint.

        With ``skip_unreadable_checkpoints`` a bad checkpoint raises neither.
    """
    metric = probe_spelling(metric)
    if metric not in PROBE_METRICS:
        raise ValueError(f"metric must be one of {', '.join(PROBE_METRICS)}, got {metric!r}")
    if keep_embeddings not in KEEP_EMBEDDINGS_MODES:
        raise ValueError(
            f"keep_embeddings must be one of {', '.join(KEEP_EMBEDDINGS_MODES)}, "
            f"got {keep_embeddings!r}"
        )
    if not checkpoints and not include_random_init:
        raise ValueError("no encoders: give checkpoints or include_random_init=True")
    modules = dict(data_modules or {})
    if targets is not None:
        columns = list(targets)
    elif modules:
        columns = sorted(modules)
    else:
        columns = list(PROBE_DATASETS)
    if not columns:
        raise ValueError("no probe targets: give targets or data_modules")
    for target in columns:
        if target not in modules:
            modules[target] = protocol_data_module(
                target,
                data_dir=data_dir,
                sampling_rate=sampling_rate,
                batch_size=batch_size,
                num_workers=num_workers,
                val_split=val_split,
                test_split=test_split,
                seed=seed,
                download=download,
                force_download=force_download,
                verbose=verbose,
            )
    extractor_kwargs = {
        "batch_size": batch_size,
        "device": device,
        "num_workers": num_workers,
        "progress": progress,
    }
    rows = _encoder_rows(
        checkpoints, include_random_init=include_random_init, seed=seed, use_cache=cell_cache
    )
    sources = [row.source for row in rows]
    values = np.full((len(rows), len(columns)), _NAN)
    matrix = TransferMatrix(
        sources=sources,
        targets=columns,
        values=values,
        metric=metric,
        model_name=model_name,
        protocol={
            "input_channels": input_channels,
            "sampling_rate": sampling_rate,
            "val_split": val_split,
            "test_split": test_split,
            "seed": seed,
            "random_init": include_random_init,
            "dataset_kwargs": {
                t: PROTOCOL_DATASET_KWARGS[t] for t in columns if t in PROTOCOL_DATASET_KWARGS
            },
        },
    )
    plan = _plan_cells(
        rows,
        columns,
        modules,
        cell_cache,
        keep_embeddings=keep_embeddings,
        key_settings={
            "model_name": model_name,
            "input_channels": input_channels,
            "metric": metric,
            "probe": probe_kwargs,
            "embedding": {"batch_size": batch_size, "device": _device_type(device)},
        },
    )
    # Only encoders with a cell to compute are loaded: a refresh that reuses
    # every cell of a checkpoint never reads its weights into a model.
    needed = {row for (row, _), (_, cached) in plan.items() if cached is None}
    extractors = {
        row: _load_encoder(
            rows[row],
            model_name=model_name,
            input_channels=input_channels,
            seed=seed,
            extractor_kwargs=extractor_kwargs,
            skip_unreadable=skip_unreadable_checkpoints,
        )
        for row in sorted(needed)
    }
    with threadpool_limits(limits=PROBE_BLAS_THREADS, user_api="blas"):
        for col, target in enumerate(columns):
            module = modules[target]
            for row, encoder in enumerate(rows):
                key, cached = plan[row, col]
                test = None
                if cached is not None:
                    result, class_names = cached.result, cached.class_names
                else:
                    extractor = extractors[row]
                    if isinstance(extractor, str):
                        result = _nan_cell(metric, model_name, encoder.source, target, extractor)
                        key = None  # an unusable checkpoint's note names its path: never stored
                    else:
                        result, test = _probe_cell(
                            extractor,
                            module,
                            metric,
                            model_name,
                            encoder.source,
                            target,
                            probe_kwargs,
                        )
                    class_names = _class_names(module)
                    if cell_cache is not None:
                        cell_cache.record(key, result, class_names=class_names)
                if class_names is not None:
                    matrix.class_names[target] = list(class_names)
                values[row, col] = result.score
                matrix.results[_cell_key(encoder.source, target)] = result
                if test is not None and _keep(keep_embeddings, encoder.source, target):
                    matrix.embeddings[_cell_key(encoder.source, target)] = test
    return matrix


@dataclass(frozen=True)
class _EncoderRow:
    """One row of the matrix: its label, checkpoint (None for the floor) and cache identity."""

    source: str
    checkpoint: str | Path | None
    identity: dict[str, Any] | None


def _encoder_rows(
    checkpoints: dict[str, str | Path],
    *,
    include_random_init: bool,
    seed: int,
    use_cache: TransferCellCache | None,
) -> list[_EncoderRow]:
    """The rows in order (floor first, then sources sorted), each with its encoder's identity.

    A checkpoint is identified by the hash of its bytes (only when a cache is
    given: hashing costs a read); one that cannot be read has no identity.
    """
    rows = []
    if include_random_init:
        rows.append(_EncoderRow(RANDOM_INIT, None, {"untrained_seed": int(seed)}))
    for source in sorted(checkpoints):
        digest = checkpoint_digest(checkpoints[source]) if use_cache is not None else None
        identity = None if digest is None else {"checkpoint_sha256": digest}
        rows.append(_EncoderRow(source, checkpoints[source], identity))
    return rows


def _device_type(device: str) -> str:
    """``"cpu"``, ``"cuda"``, ...: the kind of device embeddings are computed on."""
    from deepecgkit.utils import resolve_device

    return resolve_device(device).type


def _plan_cells(
    rows: list[_EncoderRow],
    columns: list[str],
    modules: dict[str, ECGDataModule],
    cell_cache: TransferCellCache | None,
    *,
    keep_embeddings: str,
    key_settings: dict[str, Any],
) -> dict[tuple[int, int], tuple[str | None, CachedCell | None]]:
    """Each cell's cache key (None: not cacheable) and its stored result (None: compute it).

    A cell whose held-out embeddings are to be kept is always computed: the
    cache stores results, not embeddings.
    """
    plan: dict[tuple[int, int], tuple[str | None, CachedCell | None]] = {}
    for col, target in enumerate(columns):
        data = target_data_identity(modules[target]) if cell_cache is not None else None
        for row, encoder in enumerate(rows):
            if cell_cache is None or data is None or encoder.identity is None:
                plan[row, col] = (None, None)
                continue
            key = cell_key(
                source=encoder.source,
                target=target,
                encoder=encoder.identity,
                data=data,
                **key_settings,
            )
            wanted = keep_embeddings != KEEP_NONE and _keep(keep_embeddings, encoder.source, target)
            plan[row, col] = (key, None if wanted else cell_cache.get(key))
    return plan


def _load_encoder(
    encoder: _EncoderRow,
    *,
    model_name: str,
    input_channels: int,
    seed: int,
    extractor_kwargs: dict[str, Any],
    skip_unreadable: bool,
) -> FeatureExtractor | str:
    """The row's frozen encoder, or (``skip_unreadable``) the note of an unusable checkpoint."""
    from deepecgkit.models import FeatureExtractor

    if encoder.checkpoint is None:
        return _random_init_extractor(model_name, input_channels, seed, extractor_kwargs)
    try:
        return FeatureExtractor.from_checkpoint(
            encoder.checkpoint,
            model_name=model_name,
            input_channels=input_channels,
            **extractor_kwargs,
        )
    except (OSError, ValueError, TypeError, KeyError, RuntimeError) as exc:
        # A checkpoint torch can load may still hold garbage model arguments
        # (TypeError, KeyError) or weights of the wrong shape (RuntimeError).
        if not skip_unreadable:
            raise
        # torch's own messages run over several lines; the first says what failed.
        note = f"encoder checkpoint unusable: {str(exc).splitlines()[0]}"
        logger.warning("%s: %s", encoder.source, note)
        return note


def _class_names(module: ECGDataModule) -> list[str] | None:
    names = getattr(module.dataset, "class_names", None)
    return None if names is None else [str(name) for name in names]


def _nan_cell(metric: str, model_name: str, source: str, target: str, note: str) -> ProbeResult:
    """A cell that could not be probed: every metric NaN, with the reason as its note."""
    return ProbeResult(
        metrics=dict.fromkeys(PROBE_METRICS, _NAN),
        metric=metric,
        model_name=model_name,
        source=source,
        target=target,
        note=note,
    )


def _probe_cell(
    extractor: FeatureExtractor,
    module: ECGDataModule,
    metric: str,
    model_name: str,
    source: str,
    target: str,
    probe_kwargs: dict[str, Any],
) -> tuple[ProbeResult, FeatureSet | None]:
    """One cell; data the encoder cannot read give a NaN cell with a note."""
    try:
        train = extractor.extract(module, split="train")
        test = extractor.extract(module, split="test")
    except ValueError as exc:
        note = f"encoder could not embed {target}: {exc}"
        logger.warning("%s -> %s: %s", source, target, note)
        return _nan_cell(metric, model_name, source, target, note), None
    result = linear_probe(
        train,
        test,
        metric=metric,
        model_name=model_name,
        source=source,
        target=target,
        **probe_kwargs,
    )
    return result, test
