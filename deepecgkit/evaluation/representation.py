"""Linear probes and cross-dataset transfer matrices of frozen ECG encoders.

Encoders are compared by how well a *linear* head fitted on their frozen
embeddings does on each dataset: the encoder is never updated, so the score
measures the representation, not a re-trained network. A fresh
standardised logistic regression is fitted for every (encoder, target)
cell, because the targets' label sets differ; only the frozen
representation carries over between datasets, and that is what the matrix
measures. The untrained-encoder row (``RANDOM_INIT``) is the floor: a
trained encoder that does not beat it has learned nothing useful for that
target.

Conventions: every score is higher-is-better and lies in [0, 1]; NaN means
the metric is undefined for that held-out split (one class only, or a probe
that could not be fitted) and the result's ``note`` says why. The probe's
scaler is part of its pipeline, so its means and variances come from the
training embeddings only; scaling with statistics that include the held-out
embeddings would leak test information into the probe.

Importing this module does not import torch: only the functions that embed
data (``probe_encoder``, ``protocol_data_module``, ``cross_dataset_transfer``)
do, on call.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.manifold import TSNE
from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score, roc_auc_score
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from deepecgkit.evaluation.calibration import resolve_task_shape
from deepecgkit.evaluation.constants import (
    BINARY_THRESHOLD,
    DEFAULT_PCA_COMPONENTS,
    DEFAULT_PERPLEXITY,
    DEFAULT_PROBE_METRIC,
    EMBEDDING_METHODS,
    KEEP_ALL,
    KEEP_DIAGONAL,
    KEEP_EMBEDDINGS_MODES,
    KEEP_NONE,
    MIN_EMBEDDING_SAMPLES,
    PERPLEXITY_SAMPLE_DIVISOR,
    PROBE_DATASETS,
    PROBE_INPUT_CHANNELS,
    PROBE_METRICS,
    PROBE_SAMPLING_RATE,
    PROTOCOL_DATASET_KWARGS,
    RANDOM_INIT,
    TASK_BINARY,
    TASK_MULTILABEL,
    TRANSFER_KEY_SEPARATOR,
)
from deepecgkit.evaluation.report import atomic_write_text

if TYPE_CHECKING:
    from deepecgkit.datasets import ECGDataModule
    from deepecgkit.models import FeatureExtractor, FeatureSet

__all__ = [
    "ProbeResult",
    "TransferMatrix",
    "build_probe",
    "cross_dataset_transfer",
    "embed_2d",
    "linear_probe",
    "probe_encoder",
    "protocol_data_module",
]

logger = logging.getLogger(__name__)

_NAN = float("nan")
#: Default iteration cap of the probe's logistic regression.
DEFAULT_PROBE_MAX_ITER = 1000
#: Default inverse regularisation strength of the probe.
DEFAULT_PROBE_C = 1.0
DEFAULT_PROBE_RANDOM_STATE = 42
_NOTE_SEPARATOR = "; "
_SUPPORTED_SUFFIXES = (".json", ".csv")


# --- results ------------------------------------------------------------------------------


@dataclass
class ProbeResult:
    """One linear probe: every probe metric on the held-out split, and why any is missing.

    Attributes:
        metrics: every name of ``PROBE_METRICS`` → value (NaN where undefined).
        metric: the headline metric (``score``).
        task: ``"binary"``, ``"multiclass"`` or ``"multilabel"``.
        n_train, n_test: samples the probe was fitted and scored on.
        feature_dim: embedding width.
        model_name: the encoder's registry name.
        source: the encoder's training dataset, or ``RANDOM_INIT``.
        target: the dataset probed.
        note: why a value is missing or suspect (None when nothing to say).
    """

    metrics: dict[str, float]
    metric: str = DEFAULT_PROBE_METRIC
    task: str | None = None
    n_train: int = 0
    n_test: int = 0
    feature_dim: int = 0
    model_name: str | None = None
    source: str | None = None
    target: str | None = None
    note: str | None = None

    @property
    def score(self) -> float:
        """The headline metric as a float (NaN when absent)."""
        return float(self.metrics.get(self.metric, _NAN))

    def to_dict(self) -> dict[str, Any]:
        """Plain-value dictionary (NaN stays NaN, which ``json.dumps`` writes as ``NaN``)."""
        return {
            "source": self.source,
            "target": self.target,
            "model_name": self.model_name,
            "metric": self.metric,
            "score": self.score,
            "task": self.task,
            "n_train": int(self.n_train),
            "n_test": int(self.n_test),
            "feature_dim": int(self.feature_dim),
            "metrics": {name: float(value) for name, value in self.metrics.items()},
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> ProbeResult:
        """Inverse of :meth:`to_dict` (``score`` is derived, not read)."""
        return cls(
            metrics={k: float(v) for k, v in payload.get("metrics", {}).items()},
            metric=payload.get("metric", DEFAULT_PROBE_METRIC),
            task=payload.get("task"),
            n_train=int(payload.get("n_train", 0)),
            n_test=int(payload.get("n_test", 0)),
            feature_dim=int(payload.get("feature_dim", 0)),
            model_name=payload.get("model_name"),
            source=payload.get("source"),
            target=payload.get("target"),
            note=payload.get("note"),
        )


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


# --- the probe -------------------------------------------------------------------------------


def build_probe(
    c: float = DEFAULT_PROBE_C,
    max_iter: int = DEFAULT_PROBE_MAX_ITER,
    random_state: int = DEFAULT_PROBE_RANDOM_STATE,
    multilabel: bool = False,
) -> Pipeline:
    """``StandardScaler`` → ``LogisticRegression`` (one per label when ``multilabel``).

    The scaler sits inside the pipeline so that fitting the probe fits the
    scaler on the training embeddings only.

    Args:
        c: inverse regularisation strength ``C``.
        max_iter: iteration cap of the solver.
        random_state: seed of the solver.
        multilabel: wrap the regression in ``OneVsRestClassifier``.
    """
    estimator: Any = LogisticRegression(C=c, max_iter=max_iter, random_state=random_state)
    if multilabel:
        estimator = OneVsRestClassifier(estimator)
    return Pipeline([("scaler", StandardScaler()), ("probe", estimator)])


def _split_arrays(split: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(features, labels)`` of a FeatureSet or a 2-tuple, validated."""
    if isinstance(split, tuple):
        if len(split) != 2:
            raise ValueError(f"{name} must be a FeatureSet or a (features, labels) pair")
        features, labels = split
    elif hasattr(split, "features") and hasattr(split, "labels"):
        features, labels = split.features, split.labels
    else:
        raise ValueError(f"{name} must be a FeatureSet or a (features, labels) pair")
    if labels is None:
        raise ValueError(f"{name} has no labels; a probe needs the labels of both splits")
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels)
    if x.ndim != 2:
        raise ValueError(f"{name} features must be 2-D (n, d), got shape {x.shape}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} has no samples")
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"{name} has {x.shape[0]} feature rows but {y.shape[0]} labels")
    bad = int((~np.isfinite(x)).sum())
    if bad:
        raise ValueError(f"{name} features hold {bad} non-finite values")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    return x, y


def _max_iter_reached(pipeline: Pipeline, max_iter: int) -> bool:
    estimator = pipeline.named_steps["probe"]
    fitted = getattr(estimator, "estimators_", [estimator])
    return any(np.any(np.asarray(getattr(model, "n_iter_", 0)) >= max_iter) for model in fitted)


def _ovr_auroc(y: np.ndarray, prob: np.ndarray) -> tuple[float, int]:
    """Mean one-vs-rest AUROC over the columns whose test labels hold both values."""
    scores = [
        roc_auc_score(y[:, k], prob[:, k])
        for k in range(prob.shape[1])
        if 0 < y[:, k].sum() < y.shape[0]
    ]
    return (float(np.mean(scores)) if scores else _NAN), len(scores)


def _probe_metrics(y: np.ndarray, prob: np.ndarray, task: str, n_classes: int) -> dict[str, float]:
    """Every probe metric (evaluation.md 7, step 6) on held-out labels and probabilities."""
    with warnings.catch_warnings():
        # sklearn warns about classes absent from y_true; the probe's note records that
        warnings.simplefilter("ignore", UserWarning)
        if task == TASK_MULTILABEL:
            predicted = (prob > BINARY_THRESHOLD).astype(np.int64)
            return {
                "auroc_macro": _ovr_auroc(y, prob)[0],
                "f1_macro": float(f1_score(y, predicted, average="macro", zero_division=0)),
                "accuracy": float(np.mean(predicted == y)),
                "balanced_accuracy": _NAN,
            }
        predicted = prob.argmax(axis=1)
        if task == TASK_BINARY:
            both = np.unique(y).size == 2 and prob.shape[1] == 2
            auroc = float(roc_auc_score(y, prob[:, 1])) if both else _NAN
        else:
            auroc = _ovr_auroc(np.eye(n_classes, dtype=np.int64)[y], prob)[0]
        return {
            "auroc_macro": auroc,
            "f1_macro": float(f1_score(y, predicted, average="macro", zero_division=0)),
            "accuracy": float(accuracy_score(y, predicted)),
            "balanced_accuracy": float(balanced_accuracy_score(y, predicted)),
        }


def linear_probe(
    train: FeatureSet | tuple[Any, Any],
    test: FeatureSet | tuple[Any, Any],
    metric: str = DEFAULT_PROBE_METRIC,
    model_name: str | None = None,
    source: str | None = None,
    target: str | None = None,
    **probe_kwargs: Any,
) -> ProbeResult:
    """Fit a standardised logistic head on ``train`` embeddings and score it on ``test``.

    Args:
        train, test: FeatureSets or ``(features (n, d), labels)`` pairs; labels
            are class indices ``(n,)`` or multi-hot ``(n, K)``.
        metric: headline metric, one of ``PROBE_METRICS``.
        model_name: encoder name (default: the training FeatureSet's).
        source, target: row and column labels of a transfer matrix.
        **probe_kwargs: ``c``, ``max_iter``, ``random_state`` for :func:`build_probe`.

    Returns:
        A :class:`ProbeResult`. A probe that cannot be fitted (one class in
        the training labels, for example) gives NaN metrics and a note, not
        an exception, so one bad cell leaves a transfer matrix intact.

    Raises:
        ValueError: unknown metric, missing labels, non-2-D or non-finite
            features, empty splits, mismatched lengths or embedding widths.
    """
    if metric not in PROBE_METRICS:
        raise ValueError(f"metric must be one of {', '.join(PROBE_METRICS)}, got {metric!r}")
    x_train, y_train = _split_arrays(train, "train")
    x_test, y_test = _split_arrays(test, "test")
    if x_train.shape[1] != x_test.shape[1]:
        raise ValueError(
            f"train embeddings are {x_train.shape[1]}-wide but test embeddings "
            f"{x_test.shape[1]}-wide; both splits must come from one encoder"
        )
    multilabel = y_train.ndim == 2 and y_train.shape[1] > 1
    if multilabel and (y_test.ndim != 2 or y_test.shape[1] != y_train.shape[1]):
        raise ValueError(
            f"multi-label train labels have {y_train.shape[1]} columns but test labels have "
            f"shape {y_test.shape}"
        )
    if not multilabel:
        y_train, y_test = y_train.astype(np.int64), y_test.astype(np.int64)
    result = ProbeResult(
        metrics=dict.fromkeys(PROBE_METRICS, _NAN),
        metric=metric,
        task=TASK_MULTILABEL if multilabel else None,
        n_train=x_train.shape[0],
        n_test=x_test.shape[0],
        feature_dim=x_train.shape[1],
        model_name=model_name if model_name is not None else getattr(train, "model_name", None),
        source=source,
        target=target,
    )
    max_iter = int(probe_kwargs.get("max_iter", DEFAULT_PROBE_MAX_ITER))
    pipeline = build_probe(multilabel=multilabel, **probe_kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # the note below replaces it
            pipeline.fit(x_train, y_train)
    except ValueError as exc:
        result.note = f"probe could not be fitted: {exc}"
        logger.warning("%s -> %s: %s", source, target, result.note)
        return result
    notes: list[str] = []
    if multilabel:
        prob = pipeline.predict_proba(x_test)
        n_classes = prob.shape[1]
    else:
        n_classes = int(max(y_train.max(), y_test.max())) + 1
        prob = np.zeros((x_test.shape[0], n_classes))
        prob[:, np.asarray(pipeline.classes_, dtype=np.int64)] = pipeline.predict_proba(x_test)
    result.task = resolve_task_shape(y_test, prob)
    result.metrics = _probe_metrics(y_test, prob, result.task, n_classes)
    if not math.isfinite(result.score):
        notes.append(f"{metric} is undefined for this held-out split")
    if _max_iter_reached(pipeline, max_iter):
        notes.append(f"probe did not converge within {max_iter} iterations")
    if not multilabel:
        present = np.unique(y_test).size
        if present < n_classes:
            notes.append(f"held-out split holds {present} of {n_classes} classes")
    result.note = _NOTE_SEPARATOR.join(notes) or None
    return result


def probe_encoder(
    extractor: FeatureExtractor,
    data_module: ECGDataModule,
    train_split: str = "train",
    test_split: str = "test",
    metric: str = DEFAULT_PROBE_METRIC,
    source: str | None = None,
    target: str | None = None,
    **probe_kwargs: Any,
) -> ProbeResult:
    """Embed two splits with a frozen encoder and probe them (see :func:`linear_probe`)."""
    train = extractor.extract(data_module, split=train_split)
    test = extractor.extract(data_module, split=test_split)
    return linear_probe(
        train,
        test,
        metric=metric,
        model_name=extractor.model_name,
        source=source,
        target=target,
        **probe_kwargs,
    )


# --- the transfer matrix ------------------------------------------------------------------------


def protocol_data_module(
    dataset_name: str,
    data_dir: str | None = None,
    sampling_rate: int = PROBE_SAMPLING_RATE,
    batch_size: int = 32,
    num_workers: int = 0,
    val_split: float = 0.2,
    test_split: float = 0.1,
    seed: int = 42,
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
    seed: int = 42,
    progress: bool = False,
    verbose: bool = False,
    keep_embeddings: str = KEEP_NONE,
    skip_unreadable_checkpoints: bool = False,
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
        **probe_kwargs: passed to :func:`build_probe`.

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
    from deepecgkit.models import FeatureExtractor

    rows: list[tuple[str, FeatureExtractor | str]] = []
    if include_random_init:
        rows.append(
            (
                RANDOM_INIT,
                _random_init_extractor(model_name, input_channels, seed, extractor_kwargs),
            )
        )
    for source in sorted(checkpoints):
        try:
            extractor: FeatureExtractor | str = FeatureExtractor.from_checkpoint(
                checkpoints[source], model_name, input_channels=input_channels, **extractor_kwargs
            )
        except (OSError, ValueError, TypeError, KeyError, RuntimeError) as exc:
            # A checkpoint torch can load may still hold garbage model arguments
            # (TypeError, KeyError) or weights of the wrong shape (RuntimeError).
            if not skip_unreadable_checkpoints:
                raise
            # torch's own messages run over several lines; the first says what failed.
            extractor = f"encoder checkpoint unusable: {str(exc).splitlines()[0]}"
            logger.warning("%s: %s", source, extractor)
        rows.append((source, extractor))
    sources = [name for name, _ in rows]
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
    for col, target in enumerate(columns):
        module = modules[target]
        class_names = getattr(module.dataset, "class_names", None)
        if class_names is not None:
            matrix.class_names[target] = list(class_names)
        for row, (source, extractor) in enumerate(rows):
            if isinstance(extractor, str):
                result, test = _nan_cell(metric, model_name, source, target, extractor), None
            else:
                result, test = _probe_cell(
                    extractor, module, metric, model_name, source, target, probe_kwargs
                )
            values[row, col] = result.score
            matrix.results[_cell_key(source, target)] = result
            if test is not None and _keep(keep_embeddings, source, target):
                matrix.embeddings[_cell_key(source, target)] = test
    return matrix


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


# --- 2-D embeddings -----------------------------------------------------------------------------


def embed_2d(
    features: Any,
    method: str = "tsne",
    perplexity: float = DEFAULT_PERPLEXITY,
    pca_components: int | None = DEFAULT_PCA_COMPONENTS,
    random_state: int = 42,
) -> np.ndarray:
    """Reduce embeddings to two dimensions for a scatter plot.

    Features are standardised first, so that no dimension with a large range
    dominates the distances. ``"pca"`` projects on the first two principal
    components; ``"tsne"`` first reduces to ``pca_components`` dimensions
    with PCA when that helps (standard practice, and faster), then runs
    t-SNE (van der Maaten & Hinton 2008) with PCA initialisation and the
    perplexity clamped to ``(n - 1) / 3`` so small samples are accepted.

    Args:
        features: ``(n, d)`` array or a FeatureSet.
        method: ``"tsne"`` or ``"pca"``.
        perplexity: t-SNE perplexity before clamping.
        pca_components: PCA width before t-SNE (None or 0: none).
        random_state: seed of PCA and t-SNE.

    Returns:
        float ``(n, 2)``.

    Raises:
        ValueError: unknown method, input that is not 2-D, or fewer than
            ``MIN_EMBEDDING_SAMPLES`` rows.
    """
    if method not in EMBEDDING_METHODS:
        raise ValueError(f"method must be one of {', '.join(EMBEDDING_METHODS)}, got {method!r}")
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D (n, d), got shape {x.shape}")
    n, d = x.shape
    if n < MIN_EMBEDDING_SAMPLES:
        raise ValueError(f"embed_2d needs at least {MIN_EMBEDDING_SAMPLES} samples, got {n}")
    if not np.isfinite(x).all():
        raise ValueError(f"features hold {int((~np.isfinite(x)).sum())} non-finite values")
    scaled = StandardScaler().fit_transform(x)
    if method == "pca":
        return PCA(n_components=2, random_state=random_state).fit_transform(scaled)
    width = min(pca_components or 0, n, d)
    if pca_components and d > width > 2:
        scaled = PCA(n_components=width, random_state=random_state).fit_transform(scaled)
    clamped = min(perplexity, max(1.0, (n - 1) / PERPLEXITY_SAMPLE_DIVISOR))
    tsne = TSNE(n_components=2, perplexity=clamped, random_state=random_state, init="pca")
    return tsne.fit_transform(scaled)
