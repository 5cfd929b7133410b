"""Calibration metrics against independent implementations and torchmetrics."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, log_loss

from deepecgkit.evaluation import (
    TASK_BINARY,
    TASK_MULTICLASS,
    TASK_MULTILABEL,
    adaptive_calibration_error,
    brier_score,
    calculate_calibration_metrics,
    classwise_calibration_error,
    debiased_calibration_error,
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


def loop_ece_mce(confidence, correct, n_bins, min_bin_count=1):
    n = len(confidence)
    ece, mce = 0.0, math.nan
    for members in loop_bins(confidence, correct, n_bins):
        if members:
            gap = abs(
                sum(a for _, a in members) / len(members)
                - sum(c for c, _ in members) / len(members)
            )
            ece += len(members) / n * gap
            if len(members) >= min_bin_count:
                mce = gap if math.isnan(mce) else max(mce, gap)
    return ece, mce


def loop_classwise_ece(y, prob, n_bins, multilabel=False):
    """Kull et al. (2019) class-wise ECE by loops: binary scores class 1, others every class."""
    prob = np.asarray(prob)
    if prob.ndim == 1:
        prob = np.column_stack([1 - prob, prob])
    if multilabel:
        classes = range(prob.shape[1])
    else:
        classes = [1] if prob.shape[1] == 2 else range(prob.shape[1])
    values = []
    for k in classes:
        p_k = prob[:, k].tolist()
        hit = (y[:, k] if multilabel else (np.asarray(y) == k)).astype(float).tolist()
        values.append(loop_ece_mce(p_k, hit, n_bins)[0])
    return sum(values) / len(values)


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
        assert expected_calibration_error(split.y, split.prob, n_bins=n_bins) == pytest.approx(
            ece, abs=1e-12
        )
        assert maximum_calibration_error(
            split.y, split.prob, n_bins=n_bins, min_bin_count=1
        ) == pytest.approx(mce, abs=1e-12)
        supported = loop_ece_mce(conf, correct, n_bins, min_bin_count=25)[1]
        assert maximum_calibration_error(split.y, split.prob, n_bins=n_bins) == pytest.approx(
            supported, abs=1e-12, nan_ok=True
        )
        adaptive = loop_adaptive_ece(conf, correct, n_bins)
        assert adaptive_calibration_error(split.y, split.prob, n_bins=n_bins) == pytest.approx(
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
        for norm, ours in (
            ("l1", expected_calibration_error),
            (
                "max",
                lambda y, p, n_bins: maximum_calibration_error(
                    y, p, n_bins=n_bins, min_bin_count=1
                ),
            ),
        ):
            reference = float(
                multiclass_calibration_error(preds, target, n_classes, n_bins=15, norm=norm)
            )
            assert ours(split.y, split.prob, n_bins=15) == pytest.approx(reference, abs=1e-6)


def test_confidence_of_exactly_one_lands_in_top_bin():
    y = np.array([1, 1, 0, 0])
    prob = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.45, 0.55]])
    table = reliability_bins(y, prob, n_bins=10)
    assert len(table) == 10
    assert table.loc[9, "count"] == 3
    assert table.loc[5, "count"] == 1
    assert table["count"].sum() == 4
    # The 0.55 sample is wrong (label 0): |0 - 0.55| weighted 1/4; the top bin is perfect.
    assert expected_calibration_error(y, prob, n_bins=10) == pytest.approx(0.55 / 4)


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
    ece = expected_calibration_error(y, prob, n_bins=n_bins)
    mce = maximum_calibration_error(y, prob, n_bins=n_bins, min_bin_count=1)
    assert 0.0 <= ece <= mce + 1e-15 <= 1.0 + 1e-15
    conf, correct = top_label(y, prob)
    assert ece == pytest.approx(loop_ece_mce(conf, correct, n_bins)[0], abs=1e-12)
    table = reliability_bins(y, prob, n_bins=n_bins)
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
        binary = expected_calibration_error(multilabel.y[:, k], multilabel.prob[:, k], n_bins=5)
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
    names = [
        "ece", "adaptive_ece", "mce", "brier", "nll", "classwise_ece", "ece_debiased",
        "classwise_ece_debiased",
    ]  # fmt: skip
    assert list(result) == ["n_bins", "task", *names, "per_class_classwise_ece"]
    assert result["n_bins"] == 7 and result["task"] == TASK_MULTICLASS
    assert result["ece"] == expected_calibration_error(multiclass.y, multiclass.prob, n_bins=7)
    assert result["classwise_ece"] == classwise_calibration_error(
        multiclass.y, multiclass.prob, n_bins=7
    )
    assert result["ece_debiased"] == debiased_calibration_error(
        multiclass.y, multiclass.prob, n_bins=7
    )
    assert result["classwise_ece_debiased"] == debiased_calibration_error(
        multiclass.y, multiclass.prob, n_bins=7, classwise=True
    )
    assert all(type(result[k]) is float for k in names)
    assert result["per_class_classwise_ece"].shape == (4,)
    assert np.mean(result["per_class_classwise_ece"]) == pytest.approx(result["classwise_ece"])


# --- class-wise ECE, debiased ECE, MCE support ----------------------------------------------


@pytest.mark.parametrize("n_bins", [1, 4, 15])
def test_classwise_ece_equals_loop_reference(multiclass, binary, multilabel, n_bins):
    for split, flag in ((multiclass, False), (binary, False), (multilabel, True)):
        expected = loop_classwise_ece(split.y, split.prob, n_bins, multilabel=flag)
        assert classwise_calibration_error(split.y, split.prob, n_bins=n_bins) == pytest.approx(
            expected, abs=1e-12
        )
    # The 1-D binary layout scores the same positive class.
    assert classwise_calibration_error(binary.y, binary.prob[:, 1], n_bins=n_bins) == pytest.approx(
        loop_classwise_ece(binary.y, binary.prob, n_bins), abs=1e-12
    )


def test_classwise_ece_equals_scikit_learn_calibration_curve(multiclass):
    # sklearn's calibration_curve gives each non-empty bin's fraction of positives and mean
    # probability (its bins are closed on the right, ours on the left: the same for
    # continuous probabilities); np.histogram gives the bin counts.
    n_bins, values = 10, []
    for k in range(4):
        hit = (multiclass.y == k).astype(int)
        prob_true, prob_pred = calibration_curve(hit, multiclass.prob[:, k], n_bins=n_bins)
        counts, _ = np.histogram(multiclass.prob[:, k], bins=np.linspace(0, 1, n_bins + 1))
        counts = counts[counts > 0]
        values.append(np.sum(counts / counts.sum() * np.abs(prob_true - prob_pred)))
    assert classwise_calibration_error(
        multiclass.y, multiclass.prob, n_bins=n_bins
    ) == pytest.approx(np.mean(values), abs=1e-12)


def test_classwise_ece_sees_the_shift_that_the_top_label_folds_away():
    # P(y = 1 | p) = p + 0.1 everywhere: every probability is 0.1 too low.
    rng = np.random.default_rng(7)
    p = rng.uniform(0.0, 0.9, 50_000)
    y = (rng.random(p.size) < p + 0.1).astype(int)
    result = calculate_calibration_metrics(y, p)
    assert result["ece"] < 0.03 and result["adaptive_ece"] < 0.03
    assert result["classwise_ece"] == pytest.approx(0.1, abs=0.01)
    # Multi-label, two of three labels shifted: the folded mean hides it, class-wise does not.
    probs = rng.uniform(0.0, 0.9, (50_000, 3))
    shift = np.array([0.1, 0.1, 0.0])
    labels = (rng.random(probs.shape) < probs + shift).astype(int)
    result = calculate_calibration_metrics(labels, probs, task=TASK_MULTILABEL)
    assert result["ece"] < 0.03
    assert result["classwise_ece"] == pytest.approx(0.2 / 3, abs=0.01)
    np.testing.assert_allclose(result["per_class_classwise_ece"], [0.1, 0.1, 0.0], atol=0.01)


def test_classwise_reliability_rows_give_the_classwise_ece(binary, multiclass):
    table = reliability_bins(binary.y, binary.prob, n_bins=10, classwise=True)
    assert (table["class"] == 1).all() and len(table) == 10
    assert table["lower"].tolist()[0] == 0.0 and table["count"].sum() == 300
    populated = table[table["count"] > 0]
    value = (populated["count"] / 300 * populated["gap"].abs()).sum()
    assert value == pytest.approx(classwise_calibration_error(binary.y, binary.prob, n_bins=10))
    table = reliability_bins(multiclass.y, multiclass.prob, n_bins=5, classwise=True)
    assert table["class"].tolist() == [0] * 5 + [1] * 5 + [2] * 5 + [3] * 5


def test_debiased_ece_removes_much_of_the_small_sample_bias():
    # 300 calibrated test sets of 100 samples: y ~ Bernoulli(p). The population ECE is 0;
    # the plug-in ECE reads about 0.09. With SD about 0.03 over 300 sets the Monte Carlo
    # error of each mean is about 0.002.
    rng = np.random.default_rng(11)
    plug_in, debiased = [], []
    for _ in range(300):
        p = rng.uniform(0.0, 1.0, 100)
        y = (rng.random(100) < p).astype(int)
        plug_in.append(expected_calibration_error(y, p))
        debiased.append(debiased_calibration_error(y, p))
    assert np.mean(plug_in) == pytest.approx(0.088, abs=0.01)
    assert np.mean(debiased) < 0.7 * np.mean(plug_in)
    # Miscalibrated by 0.1 with many samples per bin: the correction fades and both read
    # the population ECE of 0.1 (at gaps of one to two bin standard errors the correction
    # overshoots slightly, by about 0.005 at n = 1,000; docs/statistics.md).
    p = rng.uniform(0.0, 0.9, 50_000)
    y = (rng.random(p.size) < p + 0.1).astype(int)
    plug_in = classwise_calibration_error(y, p)
    debiased = debiased_calibration_error(y, p, classwise=True)
    assert plug_in == pytest.approx(0.1, abs=0.005)
    assert debiased == pytest.approx(plug_in, abs=0.002)


def test_debiased_ece_is_deterministic_and_has_no_correction_without_spread():
    y = np.array([1, 1, 0, 0])
    p = np.array([0.95, 0.95, 0.05, 0.05])  # every bin's frequency is 0 or 1
    assert debiased_calibration_error(y, p, n_bins=10) == pytest.approx(
        expected_calibration_error(y, p, n_bins=10), abs=1e-15
    )
    rng = np.random.default_rng(2)
    q = rng.uniform(size=50)
    z = (rng.random(50) < q).astype(int)
    assert debiased_calibration_error(z, q) == debiased_calibration_error(z, q)


def test_mce_needs_support_per_bin():
    # 40 perfectly calibrated samples at 0.85 and one wrong sample at 0.05: the lone sample's
    # gap of 0.95 is MCE without a minimum, ignored with one.
    y = np.r_[np.ones(34), np.zeros(6), [1]].astype(int)
    p = np.r_[np.full(40, 0.85), [0.05]]
    assert maximum_calibration_error(y, p, n_bins=10, min_bin_count=1) == pytest.approx(0.95)
    assert maximum_calibration_error(y, p, n_bins=10) == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(maximum_calibration_error(y, p, n_bins=10, min_bin_count=41))
    with pytest.raises(ValueError, match="min_bin_count"):
        maximum_calibration_error(y, p, n_bins=10, min_bin_count=0)


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
    assert resolve_task_shape(y, prob, task=task) == expected


def test_resolve_task_shape_rejects_unknown_task():
    with pytest.raises(ValueError, match="task must be one of"):
        resolve_task_shape(np.zeros(3), np.zeros(3), task="ordinal")


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
    assert expected_calibration_error(y, prob, n_bins=10) == pytest.approx(0.0)


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
