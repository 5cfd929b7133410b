"""The synthetic ECG generator: determinism, labels, morphology, rhythm, contrast datasets."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.signal import find_peaks
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from deepecgkit.datasets.synthetic import (
    CONTRAST_N_PATIENTS,
    GAUSS_SUPPORT_SIGMAS,
    STANDARD_LEADS,
    _gaussian_trace,
    draw_patient_traits,
    make_synthetic,
    synthesize_record,
)
from deepecgkit.models.baseline import ecg_summary_features

RR_CV = 2


def test_same_arguments_give_bit_identical_data() -> None:
    first = make_synthetic("synthetic-rhythm", n_patients=12, seed=4)
    second = make_synthetic("synthetic-rhythm", n_patients=12, seed=4)
    other = make_synthetic("synthetic-rhythm", n_patients=12, seed=5)
    np.testing.assert_array_equal(first.signals, second.signals)
    np.testing.assert_array_equal(first.labels, second.labels)
    assert not np.array_equal(first.signals, other.signals)


def test_wave_traces_equal_the_clipped_kernel_on_every_sample() -> None:
    """Exponentiating only inside each wave's support changes no bit of a trace.

    The reference exponentiates every sample of the ``(beats, samples)``
    kernel after clipping at the support, as the generator did before; the
    bundled corpus was trained on data made that way.
    """
    rng = np.random.default_rng(3)
    t = np.arange(1000) / 100.0
    for beats in (0, 1, 14):
        centres = rng.uniform(-1.0, 11.0, beats)
        sigmas = rng.uniform(0.005, 0.1, beats)
        amplitudes = rng.normal(size=beats)
        delta = np.minimum(np.abs((t - centres[:, None]) / sigmas[:, None]), GAUSS_SUPPORT_SIGMAS)
        expected = amplitudes @ np.exp(-0.5 * delta * delta) if beats else np.zeros_like(t)
        assert np.array_equal(_gaussian_trace(t, centres, sigmas, amplitudes), expected)


def test_a_subset_of_patients_and_records_comes_out_identical() -> None:
    full = make_synthetic("synthetic-af", n_patients=10, records_per_patient=3)
    part = make_synthetic("synthetic-af", n_patients=4, records_per_patient=2)
    keep = [p * 3 + r for p in range(4) for r in range(2)]
    np.testing.assert_array_equal(full.signals[keep], part.signals)
    assert [full.record_ids[i] for i in keep] == part.record_ids


@pytest.mark.parametrize(
    ("name", "shape", "task", "classes"),
    [
        ("synthetic-af", (450, 1, 1000), "binary", ["normal", "AF"]),
        ("synthetic-rhythm", (400, 1, 1000), "multiclass", ["N", "A", "O", "~"]),
        ("synthetic-ptbxl", (300, 12, 1000), "multilabel", ["NORM", "MI", "STTC", "CD", "HYP"]),
    ],
)
def test_default_sizes_and_label_layout(
    name: str, shape: tuple[int, int, int], task: str, classes: list[str]
) -> None:
    data = make_synthetic(name)
    assert data.signals.shape == shape and data.signals.dtype == np.float32
    assert (data.task, data.class_names, data.sampling_rate) == (task, classes, 100)
    assert data.groups[0] == "p0000" and data.record_ids[1] == "p0000_r1"
    # labels belong to the patient
    per_patient: dict[str, set[bytes]] = {}
    for group, label in zip(data.groups, data.labels, strict=True):
        per_patient.setdefault(group, set()).add(np.asarray(label).tobytes())
    assert all(len(labels) == 1 for labels in per_patient.values())
    if task == "multilabel":
        assert data.labels.dtype == np.int8 and data.leads == list(STANDARD_LEADS)
        np.testing.assert_array_equal(data.labels[:, 0], data.labels[:, 1:].sum(axis=1) == 0)
        assert np.all(np.abs(data.labels[:, 1:].mean(axis=0) - 0.25) < 0.1)
    else:
        assert data.labels.dtype == np.int64 and data.leads == ["II"]


def test_class_mix_of_the_af_set() -> None:
    data = make_synthetic("synthetic-af", n_patients=400, records_per_patient=1)
    assert data.labels.mean() == pytest.approx(0.35, abs=0.06)


def test_af_is_irregular_and_sinus_regular() -> None:
    data = make_synthetic("synthetic-af", n_patients=40, records_per_patient=1)
    cv = ecg_summary_features(data.signals, 100)[:, RR_CV]
    af, sinus = cv[data.labels == 1], cv[data.labels == 0]
    assert np.median(af) > 3 * np.median(sinus)


def _pair(flags: frozenset[str], leads: tuple[str, ...]) -> np.ndarray:
    """One clean record of a patient at the default axis, with and without flags."""
    traits = replace(draw_patient_traits(np.random.default_rng([0]), "sinus"), axis_deg=60.0)
    return synthesize_record(
        np.random.default_rng([9]),
        rhythm="sinus",
        patient=traits,
        leads=leads,
        flags=flags,
        noise="none",
    )


def test_hypertrophy_raises_r_in_the_lateral_leads_only() -> None:
    leads = ("II", "V5")
    normal = _pair(frozenset(), leads)
    hyp = _pair(frozenset({"HYP"}), leads)
    np.testing.assert_allclose(hyp[0], normal[0])
    assert hyp[1].max() == pytest.approx(1.8 * normal[1].max(), rel=0.1)


def test_conduction_delay_widens_the_qrs() -> None:
    normal = _pair(frozenset(), ("II",))[0]
    wide = _pair(frozenset({"CD"}), ("II",))[0]
    # samples above half the R height: a wider QRS stays there longer
    assert (wide > 0.5 * wide.max()).sum() > 1.6 * (normal > 0.5 * normal.max()).sum()


def test_bad_arguments_name_the_problem() -> None:
    traits = draw_patient_traits(np.random.default_rng(0))
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="unknown rhythm 'flutter'"):
        synthesize_record(rng, rhythm="flutter", patient=traits)
    with pytest.raises(ValueError, match="unknown lead 'V7'"):
        synthesize_record(rng, rhythm="sinus", patient=traits, leads=("V7",))
    with pytest.raises(ValueError, match="unknown flag 'LBBB'"):
        synthesize_record(rng, rhythm="sinus", patient=traits, flags={"LBBB"})
    with pytest.raises(ValueError, match="unknown synthetic dataset"):
        make_synthetic("synthetic-eeg")
    with pytest.raises(ValueError, match="non-negative"):
        make_synthetic("synthetic-af", seed=-1)


def test_record_shape_follows_duration_and_rate() -> None:
    traits = draw_patient_traits(np.random.default_rng(0), "af")
    out = synthesize_record(
        np.random.default_rng(1),
        rhythm="af",
        patient=traits,
        duration_s=2.5,
        sampling_rate=250,
        leads=STANDARD_LEADS,
        noise="noisy",
    )
    assert out.shape == (12, 625) and out.dtype == np.float32 and np.isfinite(out).all()


# --- the contrast datasets: each label lives in one place ------------------------------------

#: Half-widths (s) of a beat around its R peak: the P wave of the longest PR
#: (0.29 s plus 2σ_P) to the end of T.
BEAT_BEFORE_S, BEAT_AFTER_S = 0.36, 0.45
#: Patients per contrast-dataset check and the folds of the cross-validation.
CONTRAST_CHECK_PATIENTS, CONTRAST_CHECK_FOLDS = 240, 4
#: A view of a record "shows" the label at this cross-validated AUROC, and
#: "does not" below the other bound (0.5 is chance; the median beat of a very
#: irregular record still carries a trace of the neighbours' waves that reach
#: into the window at short intervals, which the beat itself does not hold).
SHOWS_AUROC, HIDES_AUROC = 0.85, 0.7


def _beat_and_rhythm_views(data) -> tuple[np.ndarray, np.ndarray]:
    """Per record: the median beat around its R peaks, and RR statistics.

    The median beat is what any single beat shows (the median over beats
    removes what a neighbour's waves add to the odd short interval); the RR
    statistics are what the sequence of beats shows.
    """
    rate = data.sampling_rate
    before, after = round(BEAT_BEFORE_S * rate), round(BEAT_AFTER_S * rate)
    beats, rhythms = [], []
    for signal in data.signals[:, 0].astype(np.float64):
        z = (signal - signal.mean()) / signal.std()
        peaks, found = find_peaks(z, distance=round(0.25 * rate), prominence=1.0)
        # R peaks are the tall ones (T waves and noise clear the bare threshold too)
        peaks = peaks[found["prominences"] >= 0.5 * np.quantile(found["prominences"], 0.9)]
        inside = peaks[(peaks >= before) & (peaks < z.size - after)]
        beats.append(np.median([z[p - before : p + after] for p in inside], axis=0))
        rr = np.diff(peaks) / rate
        median = np.median(rr)
        spread = np.subtract(*np.quantile(rr, [0.9, 0.1])) / median
        rhythms.append([median, spread, np.median(np.abs(np.diff(rr))) / median])
    return np.asarray(beats), np.asarray(rhythms)


def _cross_validated_auroc(features: np.ndarray, labels: np.ndarray) -> float:
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=1000))
    folds = StratifiedKFold(CONTRAST_CHECK_FOLDS, shuffle=True, random_state=0)
    scores = cross_val_predict(model, features, labels, cv=folds, method="predict_proba")
    return float(roc_auc_score(labels, scores[:, 1]))


@pytest.mark.parametrize(
    ("name", "beat_shows", "rhythm_shows"),
    [
        ("synthetic-irregular-rr", False, True),
        ("synthetic-long-pr", True, False),
        ("synthetic-bradycardia", True, True),
    ],
)
def test_each_contrast_label_lives_where_its_dataset_says(
    name: str, beat_shows: bool, rhythm_shows: bool
) -> None:
    data = make_synthetic(name, n_patients=CONTRAST_CHECK_PATIENTS)
    beats, rhythms = _beat_and_rhythm_views(data)
    beat_auroc = _cross_validated_auroc(beats, data.labels)
    rhythm_auroc = _cross_validated_auroc(rhythms, data.labels)
    for shows, auroc in ((beat_shows, beat_auroc), (rhythm_shows, rhythm_auroc)):
        assert auroc > SHOWS_AUROC if shows else auroc < HIDES_AUROC, (beat_auroc, rhythm_auroc)


def _aligned_beats(signal: np.ndarray, rate: int, before: int, after: int) -> np.ndarray:
    """Isolated beats, resampled around each R peak's sub-sample position.

    R peaks fall between samples, so raw sample windows of identical beats
    differ by the sub-sample phase; a parabola through the three top samples
    locates the peak, and linear interpolation at 1 kHz then reproduces the
    waveform to about 1 µV. A beat counts as isolated when the neighbour's T
    (0.3·√RR + 4σ_T after its R) and P (0.17 s + 4σ_P before it) stay out.
    """
    t_reach, p_reach = round(0.65 * rate), round(0.3 * rate)
    peaks, _ = find_peaks(signal, height=0.5 * signal.max())
    index = np.arange(signal.size, dtype=np.float64)
    offsets = np.arange(-before, after, dtype=np.float64)
    beats = []
    for previous, peak, following in zip(peaks, peaks[1:], peaks[2:], strict=False):
        if peak - previous > before + t_reach and following - peak > after + p_reach:
            left, top, right = signal[peak - 1 : peak + 2]
            shift = 0.5 * (left - right) / (left - 2.0 * top + right)
            beats.append(np.interp(peak + shift + offsets, index, signal))
    return np.asarray(beats)


def test_the_beats_of_a_variable_rhythm_do_not_depend_on_its_irregularity() -> None:
    """One patient, regular or irregular: every clean beat is the same waveform."""
    base = replace(draw_patient_traits(np.random.default_rng([3]), "variable"), timing_jitter_s=0.0)
    rate = 1000
    before, after = round(0.3 * rate), round(0.6 * rate)  # P onset to T end
    records = [
        synthesize_record(
            np.random.default_rng([5]),
            rhythm="variable",
            patient=replace(base, rr_cv=cv, heart_rate_bpm=40.0),
            sampling_rate=rate,
            noise="none",
        )[0].astype(np.float64)
        for cv in (0.0, 0.2)
    ]
    intervals = [np.diff(find_peaks(r, height=0.5 * r.max())[0]) for r in records]
    assert np.std(intervals[0]) <= 1 and np.std(intervals[1]) > 0.1 * np.mean(intervals[1])
    regular, irregular = (_aligned_beats(r, rate, before, after) for r in records)
    assert len(regular) >= 3 and len(irregular) >= 3
    for beats in (regular, irregular):
        np.testing.assert_allclose(beats, np.broadcast_to(regular[0], beats.shape), atol=5e-3)


@pytest.mark.parametrize(
    ("name", "classes"),
    [
        ("synthetic-irregular-rr", ["regular", "irregular"]),
        ("synthetic-long-pr", ["normal", "long-PR"]),
        ("synthetic-bradycardia", ["normal", "bradycardia"]),
    ],
)
def test_contrast_datasets_are_balanced_binary_one_record_per_patient(
    name: str, classes: list[str]
) -> None:
    data = make_synthetic(name)
    patients = CONTRAST_N_PATIENTS
    assert data.signals.shape == (patients, 1, 1000) and data.task == "binary"
    assert data.class_names == classes and len(set(data.groups)) == patients
    assert data.labels.mean() == pytest.approx(0.5, abs=0.06)
