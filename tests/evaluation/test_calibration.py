"""Calibration metrics against independent implementations and torchmetrics."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.metrics import brier_score_loss, log_loss

from deepecgkit.evaluation import (
    TASK_BINARY,
    TASK_MULTICLASS,
    TASK_MULTILABEL,
    adaptive_calibration_error,
    brier_score,
    calculate_calibration_metrics,
    expected_calibration_error,
    maximum_calibration_error,
    reliability_bins,
    resolve_task_shape,
)

# --- independent references (plain Python loops, written from the definitions) ------------


def loop_bins(confidence, correct, n_bins):
    """Equal-width bins by explicit comparison with the edges b/M (last bin closed at 1)."""
    members = [[] for _ in range(n_bins)]
    for c, a in zip(confidence, correct, strict=True):
        for b in range(n_bins):
            low, high = b / n_bins, (b + 1) / n_bins
            if low <= c < high or (b == n_bins - 1 and c == 1.0):
                members[b].append((c, a))
                break
    return members


def loop_ece_mce(confidence, correct, n_bins):
    n = len(confidence)
    ece, mce = 0.0, 0.0
    for members in loop_bins(confidence, correct, n_bins):
        if members:
            gap = abs(
                sum(a for _, a in members) / len(members)
                - sum(c for c, _ in members) / len(members)
            )
            ece += len(members) / n * gap
            mce = max(mce, gap)
    return ece, mce


def loop_adaptive_ece(confidence, correct, n_bins):
    order = sorted(range(len(confidence)), key=lambda i: confidence[i])  # stable
    chunks = np.array_split(np.array(order), min(n_bins, len(order)))
    n = len(confidence)
    total = 0.0
    for chunk in chunks:
        conf = np.mean([confidence[i] for i in chunk])
        acc = np.mean([correct[i] for i in chunk])
        total += len(chunk) / n * abs(acc - conf)
    return total


def top_label(y, prob):
    prob = np.asarray(prob)
    if prob.ndim == 1:
        prob = np.column_stack([1 - prob, prob])
    predicted = prob.argmax(axis=1)
    return prob.max(axis=1).tolist(), (predicted == y).astype(float).tolist()


# --- ECE / MCE / adaptive ECE ------------------------------------------------------------


@pytest.mark.parametrize("n_bins", [1, 5, 15])
def test_ece_and_mce_equal_loop_reference(multiclass, binary, n_bins):
    for split in (multiclass, binary):
        conf, correct = top_label(split.y, split.prob)
        ece, mce = loop_ece_mce(conf, correct, n_bins)
        assert expected_calibration_error(split.y, split.prob, n_bins) == pytest.approx(
            ece, abs=1e-12
        )
        assert maximum_calibration_error(split.y, split.prob, n_bins) == pytest.approx(
            mce, abs=1e-12
        )
        adaptive = loop_adaptive_ece(conf, correct, n_bins)
        assert adaptive_calibration_error(split.y, split.prob, n_bins) == pytest.approx(
            adaptive, abs=1e-12
        )


def test_binary_vector_and_matrix_layouts_agree(binary):
    p = binary.prob[:, 1]
    assert expected_calibration_error(binary.y, p) == expected_calibration_error(
        binary.y, binary.prob
    )
    assert expected_calibration_error(binary.y, p[:, None]) == expected_calibration_error(
        binary.y, binary.prob
    )


def test_ece_equals_torchmetrics(multiclass, binary):
    torch = pytest.importorskip("torch")
    from torchmetrics.functional.classification import multiclass_calibration_error

    for split, n_classes in ((multiclass, 4), (binary, 2)):
        assert split.prob.max() < 1.0  # torchmetrics gives 1.0 a bin of its own
        preds = torch.tensor(split.prob, dtype=torch.float64)
        target = torch.tensor(split.y)
        for norm, ours in (("l1", expected_calibration_error), ("max", maximum_calibration_error)):
            reference = float(
                multiclass_calibration_error(preds, target, n_classes, n_bins=15, norm=norm)
            )
            assert ours(split.y, split.prob, 15) == pytest.approx(reference, abs=1e-6)


def test_confidence_of_exactly_one_lands_in_top_bin():
    y = np.array([1, 1, 0, 0])
    prob = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.45, 0.55]])
    table = reliability_bins(y, prob, n_bins=10)
    assert len(table) == 10
    assert table.loc[9, "count"] == 3
    assert table.loc[5, "count"] == 1
    assert table["count"].sum() == 4
    # The 0.55 sample is wrong (label 0): |0 - 0.55| weighted 1/4; the top bin is perfect.
    assert expected_calibration_error(y, prob, 10) == pytest.approx(0.55 / 4)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 30),
    n_classes=st.integers(2, 4),
    n_bins=st.integers(1, 12),
)
def test_property_mce_bounds_ece_and_loop_agrees(data, n, n_classes, n_bins):
    raw = data.draw(arrays(np.float64, (n, n_classes), elements=st.floats(0.01, 1.0)))
    prob = raw / raw.sum(axis=1, keepdims=True)
    y = data.draw(arrays(np.int64, n, elements=st.integers(0, n_classes - 1)))
    ece = expected_calibration_error(y, prob, n_bins)
    mce = maximum_calibration_error(y, prob, n_bins)
    assert 0.0 <= ece <= mce + 1e-15 <= 1.0 + 1e-15
    conf, correct = top_label(y, prob)
    assert ece == pytest.approx(loop_ece_mce(conf, correct, n_bins)[0], abs=1e-12)
    table = reliability_bins(y, prob, n_bins)
    populated = table[table["count"] > 0]
    assert (populated["count"] / n * populated["gap"].abs()).sum() == pytest.approx(ece, abs=1e-12)


def test_adaptive_bins_split_ties_by_sample_index():
    y = np.array([1, 0, 1, 0, 1, 1])
    prob = np.full(6, 1.0)  # every confidence saturated: quantile edges would collapse
    table = reliability_bins(y, prob, n_bins=4, strategy="quantile")
    assert table["count"].tolist() == [2, 2, 1, 1]
    assert table["accuracy"].tolist() == [0.5, 0.5, 1.0, 1.0]
    assert table["lower"].tolist() == [1.0] * 4


# --- multi-label -------------------------------------------------------------------------


def test_multilabel_combines_per_label_binary_values(multilabel):
    y, prob = multilabel.y, multilabel.prob
    per_ece = [expected_calibration_error(y[:, k], prob[:, k]) for k in range(3)]
    per_mce = [maximum_calibration_error(y[:, k], prob[:, k]) for k in range(3)]
    per_ada = [adaptive_calibration_error(y[:, k], prob[:, k]) for k in range(3)]
    assert expected_calibration_error(y, prob) == pytest.approx(np.mean(per_ece), abs=1e-12)
    assert maximum_calibration_error(y, prob) == pytest.approx(max(per_mce), abs=1e-12)
    assert adaptive_calibration_error(y, prob) == pytest.approx(np.mean(per_ada), abs=1e-12)
    sk_brier = [brier_score_loss(y[:, k], prob[:, k]) for k in range(3)]
    assert brier_score(y, prob) == pytest.approx(np.mean(sk_brier), abs=1e-12)
    result = calculate_calibration_metrics(y, prob)
    np.testing.assert_allclose(result["per_class_ece"], per_ece, atol=1e-12)
    np.testing.assert_allclose(result["per_class_mce"], per_mce, atol=1e-12)
    np.testing.assert_allclose(result["per_class_brier"], sk_brier, atol=1e-12)
    assert result["task"] == TASK_MULTILABEL


def test_multilabel_reliability_rows_per_label(multilabel):
    table = reliability_bins(multilabel.y, multilabel.prob, n_bins=5)
    assert table["class"].tolist() == [0] * 5 + [1] * 5 + [2] * 5
    for k, rows in table.groupby("class"):
        populated = rows[rows["count"] > 0]
        value = (populated["count"] / 300 * populated["gap"].abs()).sum()
        binary = expected_calibration_error(multilabel.y[:, k], multilabel.prob[:, k], 5)
        assert value == pytest.approx(binary, abs=1e-12)


# --- Brier and NLL -----------------------------------------------------------------------


def test_brier_single_label_conventions(binary, multiclass):
    assert brier_score(binary.y, binary.prob) == pytest.approx(
        2 * brier_score_loss(binary.y, binary.prob[:, 1]), abs=1e-12
    )
    onehot = np.eye(4)[multiclass.y]
    expected = np.mean(np.sum((multiclass.prob - onehot) ** 2, axis=1))
    assert brier_score(multiclass.y, multiclass.prob) == pytest.approx(expected, abs=1e-12)


def test_nll_equals_log_loss(binary, multiclass, multilabel):
    result = calculate_calibration_metrics(multiclass.y, multiclass.prob)
    assert result["nll"] == pytest.approx(log_loss(multiclass.y, multiclass.prob), abs=1e-9)
    result = calculate_calibration_metrics(binary.y, binary.prob)
    assert result["nll"] == pytest.approx(log_loss(binary.y, binary.prob), abs=1e-9)
    result = calculate_calibration_metrics(multilabel.y, multilabel.prob)
    bce = np.mean([log_loss(multilabel.y[:, k], multilabel.prob[:, k]) for k in range(3)])
    assert result["nll"] == pytest.approx(bce, abs=1e-9)


def test_calculate_calibration_metrics_shape(multiclass):
    result = calculate_calibration_metrics(multiclass.y, multiclass.prob, n_bins=7)
    assert list(result) == ["n_bins", "task", "ece", "adaptive_ece", "mce", "brier", "nll"]
    assert result["n_bins"] == 7 and result["task"] == TASK_MULTICLASS
    assert result["ece"] == expected_calibration_error(multiclass.y, multiclass.prob, 7)
    assert all(type(result[k]) is float for k in ("ece", "adaptive_ece", "mce", "brier", "nll"))


# --- task shape --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("y", "prob", "task", "expected"),
    [
        (np.zeros(3), np.zeros(3), None, TASK_BINARY),
        (np.zeros(3), np.zeros((3, 2)), None, TASK_BINARY),
        (np.zeros(3), np.zeros((3, 3)), None, TASK_MULTICLASS),
        (np.zeros((3, 2)), np.zeros((3, 2)), None, TASK_MULTILABEL),
        (np.zeros((3, 1)), np.zeros((3, 1)), None, TASK_BINARY),
        (np.zeros(3), np.zeros((3, 2)), TASK_MULTICLASS, TASK_MULTICLASS),
    ],
)
def test_resolve_task_shape(y, prob, task, expected):
    assert resolve_task_shape(y, prob, task) == expected


def test_resolve_task_shape_rejects_unknown_task():
    with pytest.raises(ValueError, match="task must be one of"):
        resolve_task_shape(np.zeros(3), np.zeros(3), "ordinal")


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("y", "prob", "kwargs", "message"),
    [
        (np.array([0, 1]), np.array([0.2, 0.8, 0.5]), {}, "has 3 samples but y_true has 2"),
        (np.array([0, 1]), np.array([0.2, 1.2]), {}, "outside \\[0, 1\\]"),
        (np.array([0, 1]), np.array([[0.2, 0.2], [0.5, 0.5]]), {}, "do not sum to 1"),
        (np.array([0, 1]), np.array([0.2, np.nan]), {}, "non-finite"),
        (np.array([], dtype=int), np.array([]), {}, "no samples"),
        (np.array([0, 2]), np.array([0.2, 0.8]), {}, "outside \\[0, 2\\)"),
        (np.array([0, 1]), np.array([0.2, 0.8]), {"n_bins": 0}, "n_bins"),
        (np.array([0, 1]), np.array([0.2, 0.8]), {"n_bins": True}, "n_bins"),
        (np.array([0, 1]), np.array([0.2, 0.8]), {"n_bins": 2.5}, "n_bins"),
        (
            np.array([[0, 1], [1, 1]]),
            np.array([[0.2, 0.8], [0.5, 0.5]]),
            {"task": "binary"},
            "multi-hot",
        ),
        (np.array([0, 1]), np.full((2, 3), 1 / 3), {"task": "binary"}, "one or two"),
        (np.array([0, 1]), np.array([0.2, 0.8]), {"task": "other"}, "task must be one of"),
    ],
)
def test_bad_input(y, prob, kwargs, message):
    with pytest.raises(ValueError, match=message):
        calculate_calibration_metrics(y, prob, **kwargs)


def test_slightly_out_of_range_probabilities_are_clipped():
    y = np.array([0, 1])
    prob = np.array([-5e-7, 1 + 5e-7])
    assert expected_calibration_error(y, prob, 10) == pytest.approx(0.0)


def test_reliability_bins_rejects_unknown_strategy(binary):
    with pytest.raises(ValueError, match="strategy must be one of"):
        reliability_bins(binary.y, binary.prob, strategy="kmeans")


def test_reliability_uniform_table_layout(binary):
    table = reliability_bins(binary.y, binary.prob, n_bins=4)
    assert list(table.columns) == [
        "class",
        "bin",
        "lower",
        "upper",
        "count",
        "confidence",
        "accuracy",
        "gap",
    ]
    assert table["lower"].tolist() == [0.0, 0.25, 0.5, 0.75]
    assert table.loc[0, "count"] == 0 and math.isnan(
        table.loc[0, "gap"]
    )  # binary confidences >= 0.5
    assert (table["class"] == -1).all()
    assert isinstance(table, pd.DataFrame)
