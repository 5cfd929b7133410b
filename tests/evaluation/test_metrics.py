"""Classification and regression metrics against scikit-learn, edge cases and bad input."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays
from sklearn import metrics as skm

from deepecgkit.evaluation import (
    calculate_classification_metrics,
    calculate_regression_metrics,
    confusion_matrix_analysis,
    resolve_average,
)

ALL_SINGLE = ["accuracy", "balanced_accuracy", "precision", "recall", "f1", "auc", "mcc"]


# --- resolve_average ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("y", "average", "n_classes", "expected"),
    [
        (np.array([0, 1, 1]), "auto", None, "binary"),
        (np.array([0, 1, 2]), "auto", None, "macro"),
        (np.array([0, 1, 1]), "auto", 3, "macro"),
        (np.array([0, 0, 0]), "auto", None, "binary"),
        (np.array([[0, 1], [1, 0]]), "auto", None, "macro"),
        (np.array([0, 1, 2]), "weighted", None, "weighted"),
        (np.array([0, 1]), "micro", 5, "micro"),
    ],
)
def test_resolve_average(y, average, n_classes, expected):
    assert resolve_average(y, average=average, n_classes=n_classes) == expected


def test_resolve_average_rejects_unknown_mode():
    with pytest.raises(ValueError, match="average must be one of"):
        resolve_average(np.array([0, 1]), average="samples")


# --- classification metrics equal scikit-learn -------------------------------------------


def _sklearn_single(y, labels, scores, average, n_classes):
    p, r, f, _ = skm.precision_recall_fscore_support(y, labels, average=average, zero_division=0)
    if scores.ndim == 2 and scores.shape[1] > 2:
        auc = skm.roc_auc_score(
            y, scores, multi_class="ovr", average="macro", labels=np.arange(n_classes)
        )
    else:
        auc = skm.roc_auc_score(y, scores[:, -1] if scores.ndim == 2 else scores)
    return {
        "accuracy": skm.accuracy_score(y, labels),
        "balanced_accuracy": skm.balanced_accuracy_score(y, labels),
        "precision": p,
        "recall": r,
        "f1": f,
        "auc": auc,
        "mcc": skm.matthews_corrcoef(y, labels),
    }


@pytest.mark.parametrize("average", ["auto", "macro", "micro", "weighted"])
def test_multiclass_matrix_equals_sklearn(multiclass, average):
    got = calculate_classification_metrics(
        multiclass.y, multiclass.prob, metrics=ALL_SINGLE, average=average
    )
    mode = "macro" if average == "auto" else average
    labels = multiclass.prob.argmax(axis=1)
    expected = _sklearn_single(multiclass.y, labels, multiclass.prob, mode, 4)
    assert got == pytest.approx(expected, abs=1e-12)
    assert list(got) == ALL_SINGLE
    assert all(type(value) is float for value in got.values())


def test_binary_two_column_matrix_equals_sklearn(binary):
    got = calculate_classification_metrics(binary.y, binary.prob, metrics=ALL_SINGLE)
    labels = binary.prob.argmax(axis=1)
    expected = _sklearn_single(binary.y, labels, binary.prob, "binary", 2)
    assert got == pytest.approx(expected, abs=1e-12)


def test_binary_probability_vector_is_thresholded_strictly(binary):
    p = binary.prob[:, 1].copy()
    p[:3] = 0.5  # exactly 0.5 is negative: the threshold is strict
    got = calculate_classification_metrics(binary.y, p, metrics=ALL_SINGLE)
    labels = (p > 0.5).astype(int)
    assert got == pytest.approx(_sklearn_single(binary.y, labels, p, "binary", 2), abs=1e-12)


def test_hard_label_vector_equals_sklearn(rng):
    y = rng.integers(0, 3, 200)
    pred = rng.integers(0, 3, 200).astype(float)  # integer-valued floats are labels
    names = ["accuracy", "balanced_accuracy", "precision", "recall", "f1", "mcc"]
    got = calculate_classification_metrics(y, pred, metrics=names)
    p, r, f, _ = skm.precision_recall_fscore_support(y, pred, average="macro", zero_division=0)
    assert got["precision"] == pytest.approx(p, abs=1e-12)
    assert got["recall"] == pytest.approx(r, abs=1e-12)
    assert got["f1"] == pytest.approx(f, abs=1e-12)
    assert got["mcc"] == pytest.approx(skm.matthews_corrcoef(y, pred), abs=1e-12)


@pytest.mark.parametrize("as_int", [False, True])
def test_multilabel_equals_sklearn(multilabel, as_int):
    pred = (multilabel.prob > 0.5).astype(int) if as_int else multilabel.prob
    names = ["accuracy", "label_accuracy", "exact_match_accuracy", "precision", "recall", "f1"]
    got = calculate_classification_metrics(multilabel.y, pred, metrics=[*names, "auroc"])
    labels = (multilabel.prob > 0.5).astype(int)
    p, r, f, _ = skm.precision_recall_fscore_support(
        multilabel.y, labels, average="macro", zero_division=0
    )
    assert got["accuracy"] == pytest.approx(np.mean(labels == multilabel.y), abs=1e-12)
    assert got["label_accuracy"] == got["accuracy"]
    assert got["exact_match_accuracy"] == pytest.approx(
        skm.accuracy_score(multilabel.y, labels), abs=1e-12
    )
    assert (got["precision"], got["recall"], got["f1"]) == pytest.approx((p, r, f), abs=1e-12)
    scores = labels if as_int else multilabel.prob
    assert got["auroc"] == pytest.approx(
        skm.roc_auc_score(multilabel.y, scores, average="macro"), abs=1e-12
    )


def test_default_metric_lists(multiclass, multilabel):
    single = calculate_classification_metrics(multiclass.y, multiclass.prob)
    assert list(single) == ["accuracy", "precision", "recall", "f1", "auc", "mcc"]
    multi = calculate_classification_metrics(multilabel.y, multilabel.prob)
    assert list(multi) == ["accuracy", "precision", "recall", "f1", "auc", "exact_match_accuracy"]


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
@pytest.mark.filterwarnings("ignore:A single label was found")
@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    n=st.integers(2, 40),
    n_classes=st.integers(2, 5),
    average=st.sampled_from(["macro", "micro", "weighted"]),
)
def test_property_hard_labels_equal_sklearn(data, n, n_classes, average):
    y = data.draw(arrays(np.int64, n, elements=st.integers(0, n_classes - 1)))
    pred = data.draw(arrays(np.int64, n, elements=st.integers(0, n_classes - 1)))
    names = ["accuracy", "balanced_accuracy", "precision", "recall", "f1", "mcc"]
    got = calculate_classification_metrics(y, pred, metrics=names, average=average)
    p, r, f, _ = skm.precision_recall_fscore_support(y, pred, average=average, zero_division=0)
    balanced = skm.balanced_accuracy_score(y, pred)
    assert got["accuracy"] == pytest.approx(skm.accuracy_score(y, pred), abs=1e-12)
    assert got["balanced_accuracy"] == pytest.approx(balanced, abs=1e-12)
    assert (got["precision"], got["recall"], got["f1"]) == pytest.approx((p, r, f), abs=1e-12)
    assert got["mcc"] == pytest.approx(skm.matthews_corrcoef(y, pred), abs=1e-12)


# --- undefined metrics are NaN with a warning --------------------------------------------


def test_auc_with_one_class_is_nan_with_warning(caplog):
    y = np.zeros(5, dtype=int)
    prob = np.tile([0.7, 0.3], (5, 1))
    with caplog.at_level(logging.WARNING):
        got = calculate_classification_metrics(y, prob, metrics=["accuracy", "auc", "mcc"])
    assert math.isnan(got["auc"])
    assert got["accuracy"] == 1.0
    assert got["mcc"] == 0.0  # scikit-learn's value for a single class
    assert "auc" in caplog.text


def test_auc_follows_score_width_not_labels_present():
    # A three-class model whose test split lacks class 2: the AUC is undefined
    # (no positives for class 2), not silently a two-class AUC.
    y = np.array([0, 1, 0, 1, 0, 1])
    prob = np.array([[0.6, 0.3, 0.1]] * 3 + [[0.2, 0.7, 0.1]] * 3)
    assert math.isnan(calculate_classification_metrics(y, prob, metrics=["auc"])["auc"])


def test_multilabel_mcc_and_balanced_accuracy_are_nan(multilabel, caplog):
    with caplog.at_level(logging.WARNING):
        got = calculate_classification_metrics(
            multilabel.y, multilabel.prob, metrics=["mcc", "balanced_accuracy"]
        )
    assert math.isnan(got["mcc"]) and math.isnan(got["balanced_accuracy"])
    assert "multi-label" in caplog.text


def test_binary_average_on_multiclass_is_nan_not_error(multiclass):
    got = calculate_classification_metrics(
        multiclass.y, multiclass.prob, metrics=["f1", "accuracy"], average="binary"
    )
    assert math.isnan(got["f1"])
    assert got["accuracy"] == pytest.approx(
        skm.accuracy_score(multiclass.y, multiclass.prob.argmax(1))
    )


def test_one_dimensional_scores_with_three_classes_give_nan_auc():
    y = np.array([0, 1, 2, 1])
    assert math.isnan(
        calculate_classification_metrics(y, np.array([0, 1, 2, 2]), metrics=["auc"])["auc"]
    )


def test_rows_within_tolerance_are_renormalised_for_auc(multiclass):
    prob = multiclass.prob * (1 + 5e-4)  # V5 accepts this, scikit-learn's AUC would not
    got = calculate_classification_metrics(multiclass.y, prob, metrics=["auc"])["auc"]
    normalised = prob / prob.sum(axis=1, keepdims=True)
    expected = skm.roc_auc_score(
        multiclass.y, normalised, multi_class="ovr", average="macro", labels=np.arange(4)
    )
    assert got == pytest.approx(expected, abs=1e-12)


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("y", "pred", "message"),
    [
        (np.array([0, 1, 1]), np.array([0.2, 0.8]), "has 2 samples but y_true has 3"),
        (np.array([], dtype=int), np.array([]), "no samples"),
        (np.array([0, 1]), np.array([[0.5, 0.7], [0.1, 0.9]]), "do not sum to 1"),
        (np.array([0, 1]), np.array([[1.5, -0.5], [0.1, 0.9]]), "outside \\[0, 1\\]"),
        (np.array([0, 1]), np.array([np.nan, 0.3]), "1 non-finite"),
        (np.array([0.0, np.inf]), np.array([0, 1]), "non-finite"),
        (np.array([0.5, 1.0]), np.array([0, 1]), "non-integer"),
        (np.array([0, 3]), np.array([[0.5, 0.5], [0.1, 0.9]]), "outside \\[0, 2\\)"),
        (np.array([0, 1, 2]), np.array([0.5, 1.5, 2.5]), "non-integer value"),
        (np.zeros((2, 2, 2)), np.zeros(2), "at most 2 dimensions"),
        (np.array([[0, 2], [1, 0]]), np.array([[0.1, 0.2], [0.3, 0.4]]), "not 0 or 1"),
        (np.array([[0, 1], [1, 0]]), np.array([[0.1, 0.2, 0.3], [0.3, 0.4, 0.5]]), "2 labels"),
        (np.array([[0, 1], [1, 0]]), np.array([[0, 2], [1, 0]]), "not 0 or 1"),
        (np.array(["a", "b"]), np.array([0, 1]), "must be numeric"),
    ],
)
def test_bad_input_raises_naming_the_problem(y, pred, message):
    with pytest.raises(ValueError, match=message):
        calculate_classification_metrics(y, pred, metrics=["accuracy"])


def test_unknown_metric_name_is_rejected(multiclass):
    with pytest.raises(ValueError, match="unknown classification metric"):
        calculate_classification_metrics(
            multiclass.y, multiclass.prob, metrics=["accuracy", "kappa"]
        )


def test_single_class_in_y_true_is_valid_input():
    got = calculate_classification_metrics(
        np.ones(4, int), np.ones(4, int), metrics=["accuracy", "f1"]
    )
    assert got == {"accuracy": 1.0, "f1": 1.0}


# --- regression --------------------------------------------------------------------------


def test_regression_equals_sklearn_and_keeps_spelling(rng):
    y = rng.normal(size=50)
    pred = y + rng.normal(scale=0.3, size=50)
    names = ["mse", "mean_absolute_error", "r2_score", "rmse", "mae", "r2", "mean_squared_error"]
    got = calculate_regression_metrics(y, pred[:, None], metrics=names)
    mse = skm.mean_squared_error(y, pred)
    assert list(got) == names
    assert got["mse"] == pytest.approx(mse) and got["mean_squared_error"] == got["mse"]
    assert got["rmse"] == pytest.approx(math.sqrt(mse))
    assert got["mae"] == pytest.approx(skm.mean_absolute_error(y, pred))
    assert got["r2"] == pytest.approx(skm.r2_score(y, pred)) and got["r2_score"] == got["r2"]


def test_regression_defaults_and_single_sample_r2():
    got = calculate_regression_metrics(np.array([1.0]), np.array([2.0]))
    assert list(got) == ["mse", "mae", "r2"]
    assert got["mse"] == 1.0 and math.isnan(got["r2"])


@pytest.mark.parametrize(
    ("y", "pred", "names", "message"),
    [
        (np.array([1.0, 2.0]), np.array([1.0]), None, "samples"),
        (np.array([1.0, np.nan]), np.array([1.0, 2.0]), None, "non-finite"),
        (np.array([]), np.array([]), None, "no samples"),
        (np.array([1.0, 2.0]), np.array([1.0, 2.0]), ["mape"], "unknown regression metric"),
    ],
)
def test_regression_bad_input(y, pred, names, message):
    with pytest.raises(ValueError, match=message):
        calculate_regression_metrics(y, pred, metrics=names)


# --- confusion matrix analysis -----------------------------------------------------------


def test_confusion_matrix_analysis_matches_sklearn():
    y = np.array([0, 0, 1, 1, 2, 2, 2])
    pred = np.array([0, 1, 1, 1, 0, 2, 2])
    got = confusion_matrix_analysis(y, pred)
    p, r, f, _ = skm.precision_recall_fscore_support(y, pred, average=None, zero_division=0)
    np.testing.assert_array_equal(got["confusion_matrix"], skm.confusion_matrix(y, pred))
    np.testing.assert_allclose(got["per_class_precision"], p)
    np.testing.assert_allclose(got["per_class_recall"], r)
    np.testing.assert_allclose(got["per_class_f1"], f)
    assert got["macro_f1"] == pytest.approx(np.mean(f))
    assert type(got["macro_precision"]) is float


def test_confusion_matrix_analysis_zero_denominators_and_matrix_input():
    y = np.array([0, 0, 2])
    scores = np.array(
        [[0.9, 0.1, 0.0], [0.8, 0.2, 0.0], [0.7, 0.1, 0.2]]
    )  # class 2 never predicted
    got = confusion_matrix_analysis(y, scores)
    assert got["confusion_matrix"].tolist() == [[2, 0], [1, 0]]
    assert got["per_class_precision"].tolist() == [2 / 3, 0.0]
    assert got["per_class_recall"].tolist() == [1.0, 0.0]
    assert got["per_class_f1"][1] == 0.0
