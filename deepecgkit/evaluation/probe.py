"""Linear probes of frozen ECG encoders: how much a representation knows about a task.

Encoders are compared by how well a *linear* head fitted on their frozen
embeddings does on each dataset: the encoder is never updated, so the score
measures the representation, not a re-trained network. A fresh
standardised logistic regression is fitted for every probe. The probe's
scaler is part of its pipeline, so its means and variances come from the
training embeddings only; scaling with statistics that include the held-out
embeddings would leak test information into the probe.

Conventions: every score is higher-is-better and lies in [0, 1]; NaN means
the metric is undefined for that held-out split (one class only, or a probe
that could not be fitted) and the result's ``note`` says why. The metrics are
:data:`~deepecgkit.evaluation.constants.PROBE_METRICS`; their macro averages
are spelled ``<name>_macro`` (see :mod:`deepecgkit.rundir.metrics`). Cross-dataset
transfer matrices of these probes are :mod:`deepecgkit.evaluation.transfer`.

Importing this module does not import torch: only :func:`probe_encoder`
embeds data, through the extractor it is given.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score, roc_auc_score
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from deepecgkit.evaluation.calibration import resolve_task_shape
from deepecgkit.evaluation.constants import (
    BINARY_THRESHOLD,
    DEFAULT_PROBE_METRIC,
    DEFAULT_PROBE_RANDOM_STATE,
    PROBE_METRICS,
    TASK_BINARY,
    TASK_MULTILABEL,
)
from deepecgkit.rundir.metrics import probe_name, resolve_spelling

if TYPE_CHECKING:
    from deepecgkit.datasets import ECGDataModule
    from deepecgkit.models import FeatureExtractor, FeatureSet

__all__ = ["ProbeResult", "build_probe", "linear_probe", "probe_encoder", "probe_spelling"]

logger = logging.getLogger(__name__)

_NAN = float("nan")
#: Default iteration cap of the probe's logistic regression.
DEFAULT_PROBE_MAX_ITER = 1000
#: Default inverse regularisation strength of the probe.
DEFAULT_PROBE_C = 1.0
_NOTE_SEPARATOR = "; "
#: The probes' spellings of macro AUROC and macro F1.
_AUROC = probe_name("auroc")
_F1 = probe_name("f1")


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


def probe_spelling(metric: str) -> str:
    """The probes' spelling of ``metric`` (``auroc`` -> ``auroc_macro``); else ``metric`` as given.

    Aliases are accepted on input; an unknown name is returned unchanged, for
    the caller's error message naming :data:`PROBE_METRICS`.
    """
    try:
        return resolve_spelling(metric, PROBE_METRICS)
    except (ValueError, TypeError):
        return metric


def build_probe(
    *,
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
    """Every probe metric (:data:`PROBE_METRICS`) on held-out labels and probabilities."""
    with warnings.catch_warnings():
        # sklearn warns about classes absent from y_true; the probe's note records that
        warnings.simplefilter("ignore", UserWarning)
        if task == TASK_MULTILABEL:
            predicted = (prob > BINARY_THRESHOLD).astype(np.int64)
            return {
                _AUROC: _ovr_auroc(y, prob)[0],
                _F1: float(f1_score(y, predicted, average="macro", zero_division=0)),
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
            _AUROC: auroc,
            _F1: float(f1_score(y, predicted, average="macro", zero_division=0)),
            "accuracy": float(accuracy_score(y, predicted)),
            "balanced_accuracy": float(balanced_accuracy_score(y, predicted)),
        }


def linear_probe(
    train: FeatureSet | tuple[Any, Any],
    test: FeatureSet | tuple[Any, Any],
    *,
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
    metric = probe_spelling(metric)
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
    *,
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
