"""``logreg-features``: a hand-crafted-feature logistic regression floor.

A deep model that cannot beat twelve numbers per lead (RR-interval
statistics, signal shape, fibrillatory-band power) has not learned much.
The RR features separate AF from sinus rhythm well, which makes this a
meaningful floor for the AF tasks. It is a scikit-learn model (registry kind
``"sklearn"``): ``train-grid`` fits it directly, and it cannot serve as a
frozen encoder.

Output layouts match the trainer's three shapes (those of ``deepecgkit.evaluation.metrics``):
``predict_proba`` gives ``(n, 2)`` binary, ``(n, C)`` multiclass or
``(n, K)`` multi-label, and ``decision_function`` gives logits ``(n,)``,
``(n, C)`` or ``(n, K)``, so temperature scaling applies to it as it does to
a network.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from scipy import signal as sps, stats
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from deepecgkit.registry import register_model

__all__ = ["SUMMARY_FEATURE_NAMES", "FeatureBaseline", "ecg_summary_features"]

logger = logging.getLogger(__name__)

#: Per-lead feature names, in column order.
SUMMARY_FEATURE_NAMES = (
    "rr_mean_s",
    "rr_sd_s",
    "rr_cv",
    "rmssd_s",
    "pnn50",
    "peak_count",
    "skewness",
    "kurtosis",
    "fibrillatory_power_share",
)
#: Shortest allowed distance between two R peaks (s): 240 bpm.
MIN_PEAK_DISTANCE_S = 0.25
#: Peak prominence in z-scored units.
MIN_PEAK_PROMINENCE = 1.0
#: A peak must also reach this share of the reference (90th-percentile)
#: prominence, which separates R peaks from T waves (about a quarter of R).
RELATIVE_PEAK_PROMINENCE = 0.5
R_REFERENCE_QUANTILE = 0.9
#: Fewest peaks (two RR intervals) for the RR statistics to mean anything.
MIN_PEAKS_FOR_RR = 3
#: Successive RR differences above this count towards pNN50 (s).
PNN50_THRESHOLD_S = 0.05
#: Band of atrial fibrillatory waves (Hz).
FIBRILLATORY_BAND_HZ = (4.0, 9.0)
#: Welch segment length (s): 4 s gives 0.25 Hz resolution.
WELCH_SEGMENT_S = 4.0
#: Floor on a lead's standard deviation before z-scoring (as in the datasets).
STD_FLOOR = 1e-6
#: A class absent from the training labels gets this logit below the row's
#: lowest: its softmax probability is then ~1e-13, the zero ``predict_proba``
#: reports, while every logit stays finite.
ABSENT_CLASS_LOGIT_GAP = 30.0
#: Default LogisticRegression iteration cap.
DEFAULT_MAX_ITER = 1000


def _zscore(x: np.ndarray) -> np.ndarray:
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.maximum(centred.std(axis=-1, keepdims=True), STD_FLOOR)


def _rr_features(trace: np.ndarray, sampling_rate: float) -> np.ndarray:
    """RR statistics and peak count of one z-scored trace (the first six features).

    The trace is flipped when its largest deflection is negative, so a lead
    whose QRS points down (aVR, V1) still yields its R peaks.
    """
    if -trace.min() > trace.max():
        trace = -trace
    peaks, properties = sps.find_peaks(
        trace,
        distance=max(1, round(MIN_PEAK_DISTANCE_S * sampling_rate)),
        prominence=MIN_PEAK_PROMINENCE,
    )
    if peaks.size:
        # T waves of a clean record clear the absolute threshold too; R peaks are
        # the tallest deflections, so keep only those near the typical tall one
        prominences = properties["prominences"]
        reference = np.quantile(prominences, R_REFERENCE_QUANTILE)
        peaks = peaks[prominences >= RELATIVE_PEAK_PROMINENCE * reference]
    out = np.zeros(6)
    out[5] = peaks.size
    if peaks.size < MIN_PEAKS_FOR_RR:
        return out
    rr = np.diff(peaks) / sampling_rate
    successive = np.abs(np.diff(rr))
    out[0] = rr.mean()
    out[1] = rr.std()
    out[2] = out[1] / out[0]
    out[3] = np.sqrt(np.mean(successive**2))
    out[4] = np.mean(successive > PNN50_THRESHOLD_S)
    return out


def ecg_summary_features(X: np.ndarray, sampling_rate: int) -> np.ndarray:
    """Nine summary features per lead for a batch of ECG windows.

    Per lead (after z-scoring, which is idempotent on dataset windows): mean
    RR, SD of RR, coefficient of variation of RR, RMSSD (all in s or
    unitless), share of successive RR differences above 50 ms, R-peak count,
    skewness, excess kurtosis, and the share of Welch power in 4–9 Hz.
    R peaks come from :func:`scipy.signal.find_peaks` with distance
    ≥ 0.25 s and prominence ≥ 1.0, keeping those whose prominence is at
    least half the 90th-percentile prominence (T waves also clear the
    absolute threshold in a clean record). With fewer than three peaks the
    RR features are 0.

    Args:
        X: ``(n, leads, T)`` or ``(leads, T)`` signals.
        sampling_rate: Hz.

    Returns:
        float64 ``(n, leads · 9)``, lead-major (all features of lead 0 first).

    Raises:
        ValueError: wrong dimensions, non-finite values or a non-positive rate.
    """
    x = np.asarray(X, dtype=np.float64)
    if x.ndim == 2:
        x = x[np.newaxis]
    if x.ndim != 3 or x.shape[-1] < 2:
        raise ValueError(f"X must have shape (n, leads, samples), got {np.shape(X)}")
    if not np.isfinite(x).all():
        raise ValueError(f"X holds {int((~np.isfinite(x)).sum())} non-finite values")
    if sampling_rate <= 0:
        raise ValueError(f"sampling_rate must be positive, got {sampling_rate}")
    n, leads, length = x.shape
    z = _zscore(x)
    rr = np.array([_rr_features(trace, sampling_rate) for trace in z.reshape(n * leads, length)])
    shape_stats = np.stack(
        [
            stats.skew(z, axis=-1).reshape(-1),
            stats.kurtosis(z, axis=-1).reshape(-1),
        ],
        axis=1,
    )
    freqs, power = sps.welch(
        z, fs=sampling_rate, nperseg=min(length, round(WELCH_SEGMENT_S * sampling_rate)), axis=-1
    )
    band = (freqs >= FIBRILLATORY_BAND_HZ[0]) & (freqs <= FIBRILLATORY_BAND_HZ[1])
    total = power.sum(axis=-1)
    share = np.divide(
        power[..., band].sum(axis=-1), total, out=np.zeros_like(total), where=total > 0
    ).reshape(-1, 1)
    features = np.concatenate([rr, np.nan_to_num(shape_stats), share], axis=1)
    return features.reshape(n, leads * len(SUMMARY_FEATURE_NAMES))


@register_model(
    "logreg-features",
    description="scikit-learn logistic regression on RR, shape and fibrillatory-band features",
    kind="sklearn",
)
class FeatureBaseline:
    """Summary features → ``StandardScaler`` → ``LogisticRegression``.

    Args:
        output_size: 1 or 2 for binary, ``C`` for multiclass, ``K`` labels for
            multi-label.
        multilabel: fit one logistic regression per label
            (``OneVsRestClassifier``).
        c: inverse regularisation strength ``C`` of the logistic regression.
        sampling_rate: Hz of the windows passed to ``fit``/``predict_*``.
    """

    def __init__(
        self,
        output_size: int = 2,
        multilabel: bool = False,
        c: float = 1.0,
        sampling_rate: int = 100,
    ) -> None:
        if int(output_size) < 1:
            raise ValueError(f"output_size must be at least 1, got {output_size}")
        if c <= 0:
            raise ValueError(f"c must be positive, got {c}")
        self.output_size = int(output_size)
        self.multilabel = bool(multilabel)
        self.c = float(c)
        self.sampling_rate = int(sampling_rate)
        self.pipeline: Pipeline | None = None

    @property
    def binary(self) -> bool:
        """Single-label with at most two classes."""
        return not self.multilabel and self.output_size <= 2

    @property
    def n_outputs(self) -> int:
        """Columns of ``predict_proba``: 2 for binary, else ``output_size``."""
        return 2 if self.binary else self.output_size

    def _features(self, X: Any) -> np.ndarray:
        return ecg_summary_features(np.asarray(X), self.sampling_rate)

    def fit(self, X: Any, y: Any) -> FeatureBaseline:
        """Fit on windows ``(n, leads, T)`` and labels ``(n,)`` or multi-hot ``(n, K)``.

        Raises:
            ValueError: labels that don't fit the output layout, or a training
                set scikit-learn cannot fit (for example a single class).
        """
        labels = np.asarray(y)
        if self.multilabel:
            if labels.ndim != 2 or labels.shape[1] != self.output_size:
                raise ValueError(
                    f"multi-label targets must have shape (n, {self.output_size}), "
                    f"got {labels.shape}"
                )
        else:
            labels = labels.reshape(-1).astype(np.int64)
            if labels.size and (labels.min() < 0 or labels.max() >= self.n_outputs):
                raise ValueError(
                    f"class labels must lie in [0, {self.n_outputs}), "
                    f"got values from {labels.min()} to {labels.max()}"
                )
        estimator: Any = LogisticRegression(C=self.c, max_iter=DEFAULT_MAX_ITER)
        if self.multilabel:
            estimator = OneVsRestClassifier(estimator)
        self.pipeline = make_pipeline(StandardScaler(), estimator)
        self.pipeline.fit(self._features(X), labels)
        return self

    def _fitted(self) -> Pipeline:
        if self.pipeline is None:
            raise ValueError("FeatureBaseline is not fitted; call fit(X, y) first")
        return self.pipeline

    def _classes(self) -> np.ndarray:
        return np.asarray(self._fitted().classes_, dtype=np.int64)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Probabilities ``(n, 2)`` binary, ``(n, C)`` multiclass or ``(n, K)`` multi-label.

        Classes absent from the training labels get probability 0.
        """
        proba = self._fitted().predict_proba(self._features(X))
        if self.multilabel:
            return proba
        out = np.zeros((proba.shape[0], self.n_outputs))
        out[:, self._classes()] = proba
        return out

    def decision_function(self, X: Any) -> np.ndarray:
        """Logits in the trainer's layout: ``(n,)`` binary, ``(n, C)`` or ``(n, K)``.

        Softmax (multiclass) or sigmoid (binary, multi-label) of these logits
        equals :meth:`predict_proba`: scikit-learn's multinomial logistic
        regression scores are the softmax logits.
        """
        scores = np.asarray(self._fitted().decision_function(self._features(X)), dtype=np.float64)
        if self.multilabel:
            return scores
        classes = self._classes()
        if self.binary:
            if classes.size == 2:
                return scores
            raise ValueError("binary FeatureBaseline was fitted on a single class")
        if scores.ndim == 1:
            # two classes seen out of C: scikit-learn returns one score z; the
            # pair (-z/2, z/2) has the same softmax as (1 - σ(z), σ(z))
            scores = np.stack([-scores / 2.0, scores / 2.0], axis=1)
        floor = scores.min(axis=1, keepdims=True) - ABSENT_CLASS_LOGIT_GAP
        out = np.repeat(floor, self.n_outputs, axis=1)
        out[:, classes] = scores
        return out
