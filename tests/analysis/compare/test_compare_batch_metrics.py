"""Batch metrics: each weight row equals the ordinary metric on ``np.repeat``-expanded data.

References are scikit-learn where it has the metric and short hand
computations otherwise, always on the expanded (unweighted) data.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats
from sklearn import metrics as skm

from deepecgkit.analysis.compare import ComparisonError, batch_metric
from deepecgkit.analysis.constants import PROBABILITY_FLOOR

BINS = 10


def _expand(y: np.ndarray, prob: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    counts = row.astype(int)
    return np.repeat(y, counts), np.repeat(prob, counts, axis=0)


def _mean_over_classes(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _auroc(y: np.ndarray, prob: np.ndarray) -> float:
    per_class = [
        skm.roc_auc_score(y == c, prob[:, c])
        for c in range(prob.shape[1])
        if 0 < np.sum(y == c) < y.size
    ]
    return _mean_over_classes(per_class)


def _auprc(y: np.ndarray, prob: np.ndarray) -> float:
    per_class = [
        skm.average_precision_score(y == c, prob[:, c])
        for c in range(prob.shape[1])
        if np.any(y == c)
    ]
    return _mean_over_classes(per_class)


def _ece(y: np.ndarray, prob: np.ndarray, bins: int) -> float:
    pred = prob.argmax(axis=1)
    conf = prob.max(axis=1)
    index = np.minimum(np.floor(conf * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        members = index == b
        if members.any():
            gap = abs(np.mean(pred[members] == y[members]) - np.mean(conf[members]))
            total += members.sum() / y.size * gap
    return total


def _classwise_ece(y: np.ndarray, prob: np.ndarray, bins: int) -> float:
    """Kull et al. (2019) by loops: class 1 of two classes, else every class."""
    classes = [1] if prob.shape[1] == 2 else range(prob.shape[1])
    values = []
    for k in classes:
        index = np.minimum(np.floor(prob[:, k] * bins).astype(int), bins - 1)
        total = 0.0
        for b in range(bins):
            members = index == b
            if members.any():
                gap = abs(np.mean(y[members] == k) - np.mean(prob[members, k]))
                total += members.sum() / y.size * gap
        values.append(total)
    return float(np.mean(values))


def _reference(name: str, y: np.ndarray, prob: np.ndarray) -> float:
    """The unweighted metric, computed independently."""
    n_classes = prob.shape[1]
    pred = prob.argmax(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "accuracy":
            return skm.accuracy_score(y, pred)
        if name == "balanced_accuracy":
            return skm.balanced_accuracy_score(y, pred)
        if name == "macro_f1":
            return skm.f1_score(y, pred, average="macro")
    if name == "auroc":
        return _auroc(y, prob)
    if name == "macro_auprc":
        return _auprc(y, prob)
    if name == "brier":
        return float(np.mean(np.sum((prob - np.eye(n_classes)[y]) ** 2, axis=1)))
    if name == "nll":
        return float(-np.mean(np.log(np.maximum(prob[np.arange(y.size), y], PROBABILITY_FLOOR))))
    if name == "ece":
        return _ece(y, prob, BINS)
    if name == "classwise_ece":
        return _classwise_ece(y, prob, BINS)
    if name.startswith("recall_"):
        k = int(name.split("_")[1])
        return float(np.mean(pred[y == k] == k)) if np.any(y == k) else float("nan")
    if name == "mean_normalized_entropy":
        return float(np.mean(stats.entropy(prob, axis=1) / np.log(n_classes)))
    if name == "class_coverage":
        return np.unique(pred).size / n_classes
    if name == "max_predicted_class_fraction":
        return float(np.bincount(pred, minlength=n_classes).max() / y.size)
    raise AssertionError(name)


NAMES = (
    "accuracy",
    "balanced_accuracy",
    "macro_f1",
    "auroc",
    "macro_auprc",
    "brier",
    "nll",
    "ece",
    "classwise_ece",
    "recall_0",
    "recall_2",
    "mean_normalized_entropy",
    "class_coverage",
    "max_predicted_class_fraction",
)


def _data(seed: int, n: int = 40, n_classes: int = 3, tied: bool = False) -> tuple:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    if tied:
        # A few distinct rows repeated: many tied scores in every class, and
        # argmax ties resolved to the lowest index.
        palette = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [0.2, 0.6, 0.2]])
        prob = palette[rng.integers(0, len(palette), size=n)]
    else:
        prob = rng.dirichlet(np.ones(n_classes), size=n)
    weights = rng.integers(0, 4, size=(25, n))
    return y, prob, weights


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_weight_rows_equal_metric_on_repeated_data(name: str, tied: bool) -> None:
    y, prob, weights = _data(7, tied=tied)
    values = batch_metric(name, bins=BINS)(y, prob, weights)
    assert values.shape == (weights.shape[0],)
    for row, value in zip(weights, values, strict=True):
        expected = _reference(name, *_expand(y, prob, row))
        np.testing.assert_allclose(value, expected, rtol=0, atol=1e-12, equal_nan=True)


def test_binary_auroc_is_the_usual_binary_auroc() -> None:
    rng = np.random.default_rng(3)
    p1 = np.round(rng.random(60), 1)  # rounded: ties included
    y = (rng.random(60) < p1).astype(int)
    prob = np.column_stack([1 - p1, p1])
    value = batch_metric("auroc")(y, prob, np.ones((1, 60)))[0]
    assert value == pytest.approx(skm.roc_auc_score(y, p1), abs=1e-12)


def test_ece_bins_are_closed_at_one_and_use_bins() -> None:
    y = np.array([0, 1, 0])
    prob = np.array([[1.0, 0.0], [0.0, 1.0], [0.35, 0.65]])
    ones = np.ones((1, 3))
    # Two units at confidence 1.0 (both right) in the top bin, one at 0.65 (wrong).
    assert batch_metric("ece", bins=10)(y, prob, ones)[0] == pytest.approx(0.65 / 3)
    assert batch_metric("ece", bins=1)(y, prob, ones)[0] == pytest.approx(abs(2 / 3 - 2.65 / 3))
    assert batch_metric("ece").__name__ == "ece"


def test_undefined_values_are_nan() -> None:
    y = np.array([0, 0, 1, 1])
    prob = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.8, 0.2]])
    weights = np.array([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    auroc = batch_metric("auroc")(y, prob, weights)
    assert np.isnan(auroc[0]) and np.isnan(auroc[1]) and auroc[2] == pytest.approx(0.75)
    recall = batch_metric("recall_1")(y, prob, weights)
    assert np.isnan(recall[0]) and recall[2] == 0.5
    assert np.isnan(batch_metric("accuracy")(y, prob, weights)[1])


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=2, max_value=4),
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=0, max_value=2**32 - 1),
)
def test_weights_equal_repetition_for_every_metric(n_classes: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    prob = np.round(rng.dirichlet(np.ones(n_classes), size=n), 1)
    weights = rng.integers(0, 3, size=(4, n))
    names = [name for name in NAMES if not name.startswith("recall_")] + [
        f"recall_{k}" for k in range(n_classes)
    ]
    for name in names:
        metric = batch_metric(name, bins=7)
        values = metric(y, prob, weights)
        for row, value in zip(weights, values, strict=True):
            expanded_y, expanded_prob = _expand(y, prob, row)
            expected = metric(expanded_y, expanded_prob, np.ones((1, expanded_y.size)))[0]
            np.testing.assert_allclose(value, expected, rtol=0, atol=1e-12, equal_nan=True)


def test_names_and_errors() -> None:
    assert batch_metric("recall_3").__name__ == "recall_3"
    with pytest.raises(ComparisonError, match="unknown metric 'f1'"):
        batch_metric("f1")
    for bins in (0, -1, 1.5, True):
        with pytest.raises(ComparisonError, match="bins"):
            batch_metric("ece", bins=bins)
    y, prob, weights = _data(1)
    with pytest.raises(ComparisonError, match="recall_3"):
        batch_metric("recall_3")(y, prob, weights)
    with pytest.raises(ComparisonError, match="weights"):
        batch_metric("accuracy")(y, prob, weights[:, :-1])


def test_classwise_ece_agrees_with_the_evaluation_package() -> None:
    from deepecgkit.evaluation.calibration import classwise_calibration_error

    for n_classes in (2, 3):
        y, prob = _data(5, n=200, n_classes=n_classes)[:2]
        ones = np.ones((1, y.size))
        value = batch_metric("classwise_ece", bins=BINS)(y, prob, ones)[0]
        assert value == pytest.approx(classwise_calibration_error(y, prob, n_bins=BINS), abs=1e-12)
