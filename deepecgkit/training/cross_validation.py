"""K-fold cross-validation: fit a fresh model per fold and score it with an evaluator.

Cross-validation fits models, so it lives with training: a torch module is
trained with :class:`~deepecgkit.training.trainer.ECGTrainer` on each training
fold, anything else through its own ``fit``; every fold is scored by the
:class:`~deepecgkit.evaluation.ECGEvaluator` given, so the numbers are exactly
those of :meth:`~deepecgkit.evaluation.ECGEvaluator.evaluate`. Folds are
group-aware: a patient or recording never straddles a fold boundary
(segments of one recording are strongly correlated, and letting them do so
inflates the estimate).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from sklearn.model_selection import GroupKFold, KFold
from torch.utils.data import DataLoader, TensorDataset

from deepecgkit.defaults import DEFAULT_RANDOM_STATE
from deepecgkit.evaluation._validation import check_same_length, is_multilabel_target, to_numpy
from deepecgkit.evaluation.constants import (
    INNER_VALIDATION_FOLDS,
    TASK_TYPE_CLASSIFICATION,
    TASK_TYPE_REGRESSION,
)
from deepecgkit.evaluation.evaluator import ECGEvaluator
from deepecgkit.training.trainer import ECGTrainer

__all__ = ["cross_validate"]

#: ``data`` is an ``(X, y)`` pair.
_PAIR = 2
#: An inner split needs at least two parts: one to fit, one to tune.
_MIN_INNER_FOLDS = 2


class _FoldLoaders:
    """The two loaders ``ECGTrainer.fit`` asks for, built from one training fold."""

    def __init__(self, train: Any, val: Any, batch_size: int, seed: int) -> None:
        self._train, self._val = train, val
        self._batch_size, self._seed = batch_size, seed

    def train_dataloader(self) -> Any:
        generator = torch.Generator().manual_seed(self._seed)
        return DataLoader(self._train, self._batch_size, shuffle=True, generator=generator)

    def val_dataloader(self) -> Any:
        return DataLoader(self._val, self._batch_size, shuffle=False)


def _splitter(n_splits: int, groups: np.ndarray | None, seed: int) -> Any:
    if groups is None:
        return KFold(n_splits=n_splits, shuffle=True, random_state=seed)
    return GroupKFold(n_splits=n_splits)


def _target_tensor(evaluator: ECGEvaluator, y: np.ndarray) -> torch.Tensor:
    """int64 for integer class labels, float32 for multi-hot or real targets."""
    integer_labels = (
        y.ndim == 1
        and evaluator.detect_task(y) == TASK_TYPE_CLASSIFICATION
        and bool(np.all(y == np.round(y)))
    )
    if integer_labels:
        return torch.as_tensor(y.astype(np.int64))
    return torch.as_tensor(y.astype(np.float32))


def _dataset(evaluator: ECGEvaluator, x: np.ndarray, y: np.ndarray) -> TensorDataset:
    return TensorDataset(torch.as_tensor(x, dtype=torch.float32), _target_tensor(evaluator, y))


def _fit_torch(
    evaluator: ECGEvaluator,
    model: torch.nn.Module,
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray | None,
    *,
    epochs: int,
    batch_size: int,
    train_config: dict[str, Any] | None,
    seed: int,
) -> None:
    """Train on one training fold with an inner (fit, tune) split for early stopping."""
    config = dict(train_config or {})
    if is_multilabel_target(y):
        config.setdefault("multi_label", True)
    if evaluator.task_type == TASK_TYPE_REGRESSION:
        config.setdefault("task_type", TASK_TYPE_REGRESSION)
    units = len(np.unique(groups)) if groups is not None else x.shape[0]
    n_inner = min(INNER_VALIDATION_FOLDS, units)
    if n_inner < _MIN_INNER_FOLDS:
        raise ValueError(
            f"a training fold of {units} sample(s)/group(s) is too small to set a "
            "validation part aside; use fewer folds or more data"
        )
    inner = _splitter(n_inner, groups, seed)
    fit_idx, tune_idx = next(inner.split(x, y, groups))
    loaders = _FoldLoaders(
        _dataset(evaluator, x[fit_idx], y[fit_idx]),
        _dataset(evaluator, x[tune_idx], y[tune_idx]),
        batch_size,
        seed,
    )
    ECGTrainer(model, train_config=config, device=evaluator.device).fit(
        loaders, epochs=epochs, progress_bar=False
    )


def _score_estimator(
    evaluator: ECGEvaluator, model: Any, x: np.ndarray, y: np.ndarray
) -> dict[str, float]:
    if callable(model):
        return evaluator.evaluate(model, (x, y))
    if hasattr(model, "predict_proba"):
        return evaluator.evaluate(model.predict_proba(x), y)
    if hasattr(model, "predict"):
        return evaluator.evaluate(model.predict(x), y)
    raise TypeError(
        f"{type(model).__name__} is neither callable nor has predict_proba/predict; cannot score it"
    )


def cross_validate(
    evaluator: ECGEvaluator,
    model_class: type,
    data: Any,
    *,
    k_folds: int = 5,
    groups: np.ndarray | None = None,
    epochs: int = 10,
    batch_size: int = 32,
    train_config: dict[str, Any] | None = None,
    seed: int = DEFAULT_RANDOM_STATE,
    **model_kwargs: Any,
) -> dict[str, list[float]]:
    """K-fold cross-validation with a fresh ``model_class(**model_kwargs)`` per fold.

    Without ``groups``: ``KFold(k_folds, shuffle=True, random_state=seed)``.
    With ``groups`` (patient or recording per sample): ``GroupKFold(k_folds)``
    with scikit-learn's defaults, so a group never straddles folds and the
    folds do not depend on ``seed``.

    A torch module is trained with :class:`ECGTrainer` on the training fold
    only (a tenth of it, by the same fold rule, set aside for the
    learning-rate schedule and early stopping) and scored on the held-out
    fold. Other models are ``fit`` and scored through ``__call__``,
    ``predict_proba`` or ``predict``, the first available.

    Args:
        evaluator: scores every held-out fold (its metrics, task type and device).
        model_class: called with ``model_kwargs`` once per fold.
        data: ``(X, y)`` arrays or tensors.
        k_folds: number of folds.
        groups: patient or recording id per sample.
        epochs, batch_size, train_config: training of a torch module.
        seed: seed of the folds (without groups) and of the training batches.

    Returns:
        ``{metric: [value per fold]}``; NaNs kept, one entry per fold.

    Raises:
        ValueError: ``data`` not an ``(X, y)`` tuple, ``groups`` of the wrong
            length, too few samples or groups for ``k_folds`` (scikit-learn's).
        TypeError: a model that can be neither called nor asked to predict.
    """
    if not (isinstance(data, tuple) and len(data) == _PAIR):
        raise ValueError("data must be an (X, y) tuple of arrays or tensors")
    x, y = to_numpy(data[0]), to_numpy(data[1])
    check_same_length(y, "y", reference=x, ref_name="X")
    group_array = None
    if groups is not None:
        group_array = to_numpy(groups)
        check_same_length(group_array, "groups", reference=x, ref_name="X")
    results: dict[str, list[float]] = {name: [] for name in evaluator.metrics}
    splitter = _splitter(k_folds, group_array, seed)
    for train_idx, test_idx in splitter.split(x, y, group_array):
        model = model_class(**model_kwargs)
        if isinstance(model, torch.nn.Module):
            train_groups = group_array[train_idx] if group_array is not None else None
            _fit_torch(
                evaluator,
                model,
                x[train_idx],
                y[train_idx],
                train_groups,
                epochs=epochs,
                batch_size=batch_size,
                train_config=train_config,
                seed=seed,
            )
            held_out = DataLoader(
                _dataset(evaluator, x[test_idx], y[test_idx]), batch_size, shuffle=False
            )
            fold = evaluator.evaluate(model, held_out)
        else:
            if hasattr(model, "fit"):
                model.fit(x[train_idx], y[train_idx])
            fold = _score_estimator(evaluator, model, x[test_idx], y[test_idx])
        for name in evaluator.metrics:
            results[name].append(float(fold.get(name, math.nan)))
    return results
