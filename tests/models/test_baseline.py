"""logreg-features: summary features and the scikit-learn baseline."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, softmax

from deepecgkit.datasets import ECGDataModule
from deepecgkit.datasets.synthetic import draw_patient_traits, synthesize_record
from deepecgkit.models import FeatureBaseline, ecg_summary_features
from deepecgkit.models.baseline import SUMMARY_FEATURE_NAMES

RATE = 100
RR_MEAN, RR_CV, PEAKS = 0, 2, 5


def _record(rhythm: str, seed: int, leads: tuple[str, ...] = ("II",)) -> tuple[np.ndarray, float]:
    traits = draw_patient_traits(np.random.default_rng([seed]), rhythm)
    signal = synthesize_record(
        np.random.default_rng([seed, 1]), rhythm=rhythm, patient=traits, leads=leads, noise="none"
    )
    return signal, traits.heart_rate_bpm


def test_rr_features_recover_the_heart_rate_and_irregularity() -> None:
    sinus = [_record("sinus", seed) for seed in range(8)]
    af = [_record("af", seed) for seed in range(8)]
    sinus_features = ecg_summary_features(np.stack([s for s, _ in sinus]), RATE)
    af_features = ecg_summary_features(np.stack([s for s, _ in af]), RATE)
    assert sinus_features.shape == (8, len(SUMMARY_FEATURE_NAMES))
    expected_rr = np.array([60.0 / hr for _, hr in sinus])
    # record-level heart rate varies by ~5 % around the patient's
    np.testing.assert_allclose(sinus_features[:, RR_MEAN], expected_rr, rtol=0.15)
    assert sinus_features[:, RR_CV].max() < 0.08 < af_features[:, RR_CV].min()


def test_flat_signal_has_zero_rr_features_and_lead_major_layout() -> None:
    flat = np.zeros((2, 3, 1000))
    flat[:, 1] = np.stack([_record("sinus", 0)[0][0]] * 2)
    features = ecg_summary_features(flat, RATE)
    width = len(SUMMARY_FEATURE_NAMES)
    assert features.shape == (2, 3 * width)
    assert np.all(features[:, : PEAKS + 1] == 0)  # lead 0 is flat: no peaks, RR features 0
    assert np.all(features[:, width + PEAKS] > 5)  # lead 1 is an ECG


def test_feature_input_errors() -> None:
    with pytest.raises(ValueError, match="shape"):
        ecg_summary_features(np.zeros(10), RATE)
    with pytest.raises(ValueError, match="non-finite"):
        ecg_summary_features(np.full((1, 1, 100), np.nan), RATE)


def _arrays(module: ECGDataModule, split: str) -> tuple[np.ndarray, np.ndarray]:
    idx = module.split_indices(split)
    return module.dataset.signals[idx], module.dataset.labels[idx]


def test_binary_baseline_learns_af_and_its_logits_match_its_probabilities(
    af_module: ECGDataModule,
) -> None:
    X, y = _arrays(af_module, "train")
    Xt, yt = _arrays(af_module, "test")
    model = FeatureBaseline(output_size=1).fit(X, y)
    proba = model.predict_proba(Xt)
    logits = model.decision_function(Xt)
    assert proba.shape == (len(yt), 2) and logits.shape == (len(yt),)
    np.testing.assert_allclose(expit(logits), proba[:, 1], atol=1e-12)
    assert np.mean(proba.argmax(axis=1) == yt) > 0.85


def test_multiclass_with_an_absent_class_keeps_every_column() -> None:
    rhythms = ["sinus", "af", "ectopic"]
    X = np.stack([_record(rhythms[k % 3], k)[0] for k in range(30)])
    y = np.arange(30) % 3  # class 3 ("~") never appears in training
    model = FeatureBaseline(output_size=4).fit(X, y)
    proba = model.predict_proba(X[:6])
    logits = model.decision_function(X[:6])
    assert proba.shape == logits.shape == (6, 4)
    assert np.all(proba[:, 3] == 0) and np.all(np.isfinite(logits))
    np.testing.assert_allclose(softmax(logits, axis=1), proba, atol=1e-9)


def test_multilabel_logits_are_per_label_sigmoids() -> None:
    X = np.stack([_record(("sinus", "af")[k % 2], k)[0] for k in range(20)])
    Y = np.stack([np.arange(20) % 2, (np.arange(20) // 2) % 2], axis=1)
    model = FeatureBaseline(output_size=2, multilabel=True).fit(X, Y)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(expit(model.decision_function(X)), proba, atol=1e-12)
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        model.fit(X, Y[:, 0])


def test_baseline_errors() -> None:
    with pytest.raises(ValueError, match="not fitted"):
        FeatureBaseline().predict_proba(np.zeros((1, 1, 100)))
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        FeatureBaseline().fit(np.zeros((2, 1, 100)), np.array([0, 2]))
