"""Temperature scaling: planted temperatures, NLL, argmax invariance, logit round trips."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays
from scipy.special import expit, softmax
from sklearn.metrics import log_loss

from deepecgkit.evaluation import (
    CALIBRATION_ROW_ORDER,
    TASK_MULTILABEL,
    TemperatureScaler,
    apply_temperature,
    calculate_calibration_metrics,
    calibration_report,
    fit_temperature,
    probabilities_to_logits,
    temperature_nll,
)

PLANTED = 2.5
N_PLANTED = 100_000


# --- planted temperature -----------------------------------------------------------------


@pytest.mark.parametrize("shape", ["multiclass", "binary", "multilabel"])
def test_fit_recovers_planted_temperature(draw, rng, shape):
    if shape == "multiclass":
        split = draw.multiclass(rng, N_PLANTED, 5, scale=PLANTED)
    elif shape == "binary":
        split = draw.binary(rng, N_PLANTED, scale=PLANTED)
    else:
        split = draw.multilabel(rng, N_PLANTED // 4, 4, scale=PLANTED)
    fitted = fit_temperature(split.logits, split.y)
    assert fitted == pytest.approx(PLANTED, rel=0.02)


def test_fitted_temperature_lowers_held_out_nll(draw, rng):
    val = draw.multiclass(rng, 3000, 4, scale=PLANTED)
    test = draw.multiclass(rng, 3000, 4, scale=PLANTED)
    scaler = TemperatureScaler().fit(val.logits, val.y)
    assert scaler.fitted and scaler.temperature > 1.0
    assert scaler.nll(test.logits, test.y) < temperature_nll(test.logits, test.y)
    before = calculate_calibration_metrics(test.y, test.prob)["ece"]
    after = calculate_calibration_metrics(test.y, scaler.transform(test.logits))["ece"]
    assert after < before


@settings(max_examples=50, deadline=None)
@given(
    logits=arrays(np.float64, (12, 4), elements=st.floats(-30, 30)),
    temperature=st.floats(0.05, 20.0),
)
def test_property_temperature_never_changes_argmax(logits, temperature):
    scaled = apply_temperature(logits, temperature)
    original = apply_temperature(logits, 1.0)
    # Rows with tied maxima are excluded: there argmax is a matter of rounding.
    top2 = np.sort(logits, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-9
    np.testing.assert_array_equal(scaled.argmax(1)[clear], original.argmax(1)[clear])
    single = logits[:, 0]
    resolvable = np.abs(single) > 1e-6  # σ(z) rounds to exactly 0.5 for tinier logits
    positive = apply_temperature(single, temperature)[:, 1] > 0.5
    np.testing.assert_array_equal(positive[resolvable], (single > 0)[resolvable])


# --- apply_temperature / temperature_nll -------------------------------------------------


def test_apply_temperature_layouts():
    z = np.array([[2.0, -1.0, 0.5], [0.0, 0.0, 3.0]])
    np.testing.assert_allclose(apply_temperature(z, 2.0), softmax(z / 2.0, axis=1))
    single = np.array([1.0, -3.0])
    expected = np.column_stack([1 - expit(single / 0.5), expit(single / 0.5)])
    np.testing.assert_allclose(apply_temperature(single, 0.5), expected)
    np.testing.assert_allclose(apply_temperature(single[:, None], 0.5), expected)
    np.testing.assert_allclose(apply_temperature(z, 1.0, task=TASK_MULTILABEL), expit(z))


@pytest.mark.parametrize("temperature", [0.0, -1.0, math.nan, math.inf, True, "2"])
def test_apply_temperature_rejects_bad_temperature(temperature):
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        apply_temperature(np.zeros((2, 3)), temperature)


def test_apply_temperature_rejects_non_finite_logits():
    with pytest.raises(ValueError, match="non-finite"):
        apply_temperature(np.array([[0.0, np.inf]]), 1.0)


def test_temperature_nll_equals_log_loss(multiclass, binary, multilabel):
    assert temperature_nll(multiclass.logits, multiclass.y, 1.7) == pytest.approx(
        log_loss(multiclass.y, softmax(multiclass.logits / 1.7, axis=1)), abs=1e-10
    )
    assert temperature_nll(binary.logits, binary.y, 0.8) == pytest.approx(
        log_loss(binary.y, expit(binary.logits / 0.8)), abs=1e-10
    )
    per_label = [log_loss(multilabel.y[:, k], expit(multilabel.logits[:, k])) for k in range(3)]
    assert temperature_nll(multilabel.logits, multilabel.y) == pytest.approx(
        np.mean(per_label), abs=1e-10
    )


def test_temperature_nll_stays_finite_when_saturated():
    value = temperature_nll(np.array([[1000.0, -1000.0]]), np.array([1]))
    assert value == pytest.approx(2000.0)
    assert temperature_nll(np.array([-800.0]), np.array([1])) == pytest.approx(800.0)


def test_temperature_nll_checks_labels_against_layout():
    with pytest.raises(ValueError, match="outside \\[0, 3\\)"):
        temperature_nll(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(ValueError, match="outside \\[0, 2\\)"):
        temperature_nll(np.zeros(2), np.array([0, 2]))
    with pytest.raises(ValueError, match="has 3 samples"):
        temperature_nll(np.zeros((2, 3)), np.array([0, 1, 2]))


# --- fit_temperature edge cases ----------------------------------------------------------


def test_fit_on_empty_split_warns_and_returns_one():
    with pytest.warns(RuntimeWarning, match="empty split"):
        assert fit_temperature(np.zeros((0, 3)), np.zeros(0, dtype=int)) == 1.0


def test_fit_on_single_class_warns_about_the_bound():
    logits = np.column_stack([np.linspace(1, 3, 50), np.zeros(50)])
    with pytest.warns(RuntimeWarning, match="edge of the bounds"):
        fitted = fit_temperature(logits, np.zeros(50, dtype=int))
    assert fitted == pytest.approx(0.05, abs=1e-3)


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (2.0, 1.0), (1.0, math.inf), (1.0,), "ab"])
def test_fit_rejects_bad_bounds(bounds):
    with pytest.raises(ValueError, match="bounds"):
        fit_temperature(np.zeros((4, 2)), np.array([0, 1, 0, 1]), bounds=bounds)


def test_fit_multilabel_inferred_from_targets(multilabel):
    explicit = fit_temperature(multilabel.logits, multilabel.y, task=TASK_MULTILABEL)
    np.testing.assert_array_equal(fit_temperature(multilabel.logits, multilabel.y), explicit)
    scaler = TemperatureScaler().fit(multilabel.logits, multilabel.y)
    assert scaler.task == TASK_MULTILABEL
    assert scaler.transform(multilabel.logits).shape == (300, 3)
    assert "temperature=[" in repr(scaler)


def test_multilabel_fits_one_temperature_per_label(draw, rng):
    # Label k's model reports planted[k] * z: one shared T could fit only one of them.
    planted = np.array([0.5, 1.0, 2.5])
    split = draw.multilabel(rng, 40_000, 3)
    logits = split.logits * planted
    fitted = fit_temperature(logits, split.y, task=TASK_MULTILABEL)
    assert fitted.shape == (3,)
    np.testing.assert_allclose(fitted, planted, rtol=0.05)
    # Each label's T is that label's own one-dimensional NLL optimum (scipy, independently).
    for k in range(3):
        alone = fit_temperature(logits[:, k], split.y[:, k], task=TASK_MULTILABEL)
        assert fitted[k] == pytest.approx(alone, rel=1e-9)
    probs = apply_temperature(logits, fitted, task=TASK_MULTILABEL)
    np.testing.assert_allclose(probs, expit(logits / fitted), atol=1e-15)
    assert temperature_nll(logits, split.y, fitted, task=TASK_MULTILABEL) < temperature_nll(
        logits, split.y, float(np.exp(np.mean(np.log(fitted)))), task=TASK_MULTILABEL
    )
    row = calibration_report(
        split.y, expit(logits), fit_targets=split.y, fit_logits=logits, eval_logits=logits
    )
    assert [row[f"temperature_{k}"] for k in range(3)] == pytest.approx(fitted.tolist())
    assert row["temperature"] == pytest.approx(float(np.exp(np.mean(np.log(fitted)))))
    assert row["classwise_ece_temp"] < row["classwise_ece"]


def test_per_label_temperatures_need_multilabel_logits(multiclass, multilabel):
    with pytest.raises(ValueError, match="per-label temperatures"):
        apply_temperature(multiclass.logits, np.ones(4))
    with pytest.raises(ValueError, match="per-label temperatures"):
        apply_temperature(multilabel.logits, np.ones(2), task=TASK_MULTILABEL)
    with pytest.raises(ValueError, match="temperature"):
        apply_temperature(multilabel.logits, np.array([1.0, 0.0, 1.0]), task=TASK_MULTILABEL)


def test_scaler_transform_before_fit_raises_and_nll_works_unfitted(multiclass):
    scaler = TemperatureScaler()
    with pytest.raises(RuntimeError, match="before fit"):
        scaler.transform(multiclass.logits)
    assert scaler.nll(multiclass.logits, multiclass.y) == temperature_nll(
        multiclass.logits, multiclass.y
    )


# --- probabilities_to_logits round trips -------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(z=arrays(np.float64, 20, elements=st.floats(-15, 15)))
def test_property_sigmoid_round_trip(z):
    np.testing.assert_allclose(probabilities_to_logits(expit(z)), z, atol=1e-6)
    two_columns = np.column_stack([1 - expit(z), expit(z)])
    np.testing.assert_allclose(probabilities_to_logits(two_columns), z, atol=1e-6)
    multi = probabilities_to_logits(expit(z.reshape(4, 5)), TASK_MULTILABEL)
    np.testing.assert_allclose(multi, z.reshape(4, 5), atol=1e-6)


@settings(max_examples=50, deadline=None)
@given(z=arrays(np.float64, (6, 4), elements=st.floats(-7, 7)))
def test_property_softmax_round_trip_up_to_row_constant(z):
    prob = softmax(z, axis=1)
    assert prob.min() >= 1e-7
    recovered = probabilities_to_logits(prob)
    shift = recovered - z
    np.testing.assert_allclose(shift - shift[:, :1], 0.0, atol=1e-6)


def test_probabilities_to_logits_validates():
    with pytest.raises(ValueError, match="outside \\[0, 1\\]"):
        probabilities_to_logits(np.array([0.5, 1.5]))
    with pytest.raises(ValueError, match="non-finite"):
        probabilities_to_logits(np.array([0.5, np.nan]))
    with pytest.raises(ValueError, match="no samples"):
        probabilities_to_logits(np.array([]))
    clipped = probabilities_to_logits(np.array([0.0, 1.0]))
    np.testing.assert_allclose(np.abs(clipped), math.log((1 - 1e-7) / 1e-7))


# --- calibration_report ------------------------------------------------------------------


def test_report_without_fit_pair_has_nan_scaled_entries(multiclass):
    row = calibration_report(multiclass.y, multiclass.prob, n_bins=10)
    assert list(row) == list(CALIBRATION_ROW_ORDER)
    assert row["calibration_bins"] == 10 and type(row["calibration_bins"]) is int
    scaled = [name for name in CALIBRATION_ROW_ORDER if name.endswith("_temp")]
    scaled.append("temperature")
    assert all(math.isnan(row[name]) for name in scaled)
    base = calculate_calibration_metrics(multiclass.y, multiclass.prob, n_bins=10)
    assert row["ece"] == base["ece"] and row["brier"] == base["brier"]
    assert row["nll"] == pytest.approx(base["nll"], abs=1e-12)


def test_report_with_fit_pair(draw, rng):
    val = draw.multiclass(rng, 2000, 4, scale=PLANTED)
    test = draw.multiclass(rng, 2000, 4, scale=PLANTED)
    row = calibration_report(
        test.y, test.prob, fit_targets=val.y, fit_logits=val.logits, eval_logits=test.logits
    )
    expected_t = fit_temperature(val.logits, val.y)
    assert row["temperature"] == expected_t
    assert row["nll_temp"] == pytest.approx(temperature_nll(test.logits, test.y, expected_t))
    assert row["nll"] == pytest.approx(temperature_nll(test.logits, test.y))
    assert row["ece_temp"] < row["ece"] and row["nll_temp"] < row["nll"]
    scaled = calculate_calibration_metrics(test.y, apply_temperature(test.logits, expected_t))
    assert row["brier_temp"] == scaled["brier"]


def test_two_class_softmax_fit_applies_to_single_logit(draw, rng):
    val = draw.binary(rng, 1000, scale=2.0)
    test = draw.binary(rng, 500, scale=2.0)
    two_column_val = np.column_stack([np.zeros(1000), val.logits])
    row_matrix = calibration_report(
        test.y, test.prob, fit_targets=val.y, fit_logits=two_column_val, eval_logits=test.logits
    )
    row_single = calibration_report(
        test.y, test.prob, fit_targets=val.y, fit_logits=val.logits, eval_logits=test.logits
    )
    assert row_matrix["temperature"] == pytest.approx(row_single["temperature"], rel=1e-6)
    t = row_single["temperature"]
    two_column_test = np.column_stack([np.zeros(500), test.logits])
    np.testing.assert_allclose(
        apply_temperature(two_column_test, t), apply_temperature(test.logits, t), atol=1e-12
    )


def test_report_input_errors(multiclass, multilabel):
    with pytest.raises(ValueError, match="both fit_targets and fit_logits"):
        calibration_report(multiclass.y, multiclass.prob, fit_targets=multiclass.y)
    with pytest.raises(ValueError, match="does not fit a multiclass task"):
        calibration_report(
            multiclass.y, multiclass.prob, fit_targets=multiclass.y, fit_logits=np.zeros((300, 3))
        )
    with pytest.raises(ValueError, match="does not fit a multilabel task"):
        calibration_report(multilabel.y, multilabel.prob, eval_logits=np.zeros(300))
    with pytest.raises(ValueError, match="eval_logits has 2 samples"):
        calibration_report(multiclass.y, multiclass.prob, eval_logits=np.zeros((2, 4)))
    with pytest.raises(ValueError, match="fit_targets"):
        calibration_report(
            multiclass.y, multiclass.prob, fit_targets=np.full(5, 7), fit_logits=np.zeros((5, 4))
        )


def test_report_on_degenerate_validation_split_still_returns_a_row(multiclass):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        row = calibration_report(
            multiclass.y,
            multiclass.prob,
            fit_targets=np.zeros(10, dtype=int),
            fit_logits=np.tile([3.0, 0.0, 0.0, 0.0], (10, 1)),
        )
    assert 0.05 <= row["temperature"] < 0.1  # pushed to the lower bound: sharpen a one-class split
    assert math.isfinite(row["ece_temp"])
