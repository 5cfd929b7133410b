"""A deterministic synthetic ECG generator for demos and tests.

No real corpus can be downloaded here, yet every part of the toolkit (the
trainer, group-aware splitting, probes, the statistics downstream) needs ECG
data whose classes a small network can learn. This module produces it:
realistic-looking P-QRS-T morphology, sinus, AF, ectopic and variable
(irregular sinus) rhythms, physiological and artefactual noise, one to
twelve leads, and several records per patient whose shared traits make
group leakage measurable.

**Datasets.** Three mimic real corpora (``synthetic-af``,
``synthetic-rhythm``, ``synthetic-ptbxl``). Three *contrast* datasets
(:data:`CONTRAST_DATASETS`) each put a binary label in one place: the
rhythm over many beats (``synthetic-irregular-rr``), one beat's morphology
(``synthetic-long-pr``) or the heart rate (``synthetic-bradycardia``), so
that models with different views of a record (a short or long receptive
field, whole-record RR features) rank differently on them; the bundled
example corpus is trained on them (``scripts/make_example_corpus.py``).

**Beat model.** After McSharry et al. (2003), "A dynamical model for
generating synthetic electrocardiogram signals", IEEE TBME 50(3):289-294,
simplified to Gaussians in time: each beat is the sum of five waves
``a_w · exp(-(t - t_r - μ_w)² / (2 σ_w²))`` around its R-peak time ``t_r``.
The T offset is ``0.30 · √RR`` so the QT interval follows Bazett's rule.

**Leads.** Each wave has a 3-D direction (x: left, y: inferior, z:
anterior); a lead records its projection on the lead vector. Amplitudes are
scaled so that lead II at the default 60° axis reproduces the reference
amplitudes. A record's signal is ``gains @ traces``: one time trace per wave
variant (computed once, vectorised over beats) times a ``(leads × variants)``
gain matrix, which is where axis, morphology flags and territories act.

**Determinism.** Patient ``p`` draws everything from
``np.random.default_rng([seed, p])`` and record ``r`` of that patient from
``np.random.default_rng([seed, p, r])``, so any subset of patients or
records comes out identical, and the same arguments with the same NumPy
version give bit-identical arrays.

Units: seconds, Hz and millivolts throughout.
"""

from __future__ import annotations

import io
import logging
import math
import tempfile
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from deepecgkit.io import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    replace_durably,
)

__all__ = [
    "CONTRAST_DATASETS",
    "CONTRAST_N_PATIENTS",
    "FLAGS",
    "NOISE_MODES",
    "RHYTHMS",
    "STANDARD_LEADS",
    "SYNTHETIC_SPECS",
    "PatientTraits",
    "SyntheticData",
    "SyntheticSpec",
    "draw_patient_traits",
    "make_synthetic",
    "synthesize_record",
    "write_local_dataset",
]

logger = logging.getLogger(__name__)

# --- leads ---------------------------------------------------------------------

#: Angles (degrees) of the limb leads in the frontal plane (0° = left, 90° = inferior)
#: and of the precordial leads in the horizontal plane (0° = left, 90° = anterior).
LIMB_LEAD_ANGLES = {"I": 0.0, "II": 60.0, "III": 120.0, "aVR": -150.0, "aVL": -30.0, "aVF": 90.0}
PRECORDIAL_LEAD_ANGLES = {"V1": 115.0, "V2": 95.0, "V3": 75.0, "V4": 60.0, "V5": 30.0, "V6": 0.0}
#: The twelve standard leads in their usual order.
STANDARD_LEADS = (*LIMB_LEAD_ANGLES, *PRECORDIAL_LEAD_ANGLES)
#: Reference lead in which the wave amplitudes below are expressed.
REFERENCE_LEAD = "II"
#: Frontal axis at which lead II shows exactly the reference amplitudes.
DEFAULT_AXIS_DEG = 60.0

# --- beat model (lead II reference values) --------------------------------------

WAVES = ("P", "Q", "R", "S", "T")
#: Offset from the R peak (s), width σ (s), amplitude (mV); T's offset is 0.30·√RR.
WAVE_OFFSET_S = {"P": -0.17, "Q": -0.035, "R": 0.0, "S": 0.035}
WAVE_SIGMA_S = {"P": 0.025, "Q": 0.010, "R": 0.012, "S": 0.012, "T": 0.06}
WAVE_AMPLITUDE_MV = {"P": 0.15, "Q": -0.12, "R": 1.2, "S": -0.25, "T": 0.30}
#: T offset = QT_COEFFICIENT · √RR (Bazett's QT ∝ √RR).
QT_COEFFICIENT = 0.30
#: Anterior (z) component of the wave directions before normalisation: the
#: ventricular vector points slightly backwards, the atrial one forwards, which
#: gives the negative QRS of V1-V2 and positive V5-V6.
VENTRICULAR_Z = -0.2
ATRIAL_Z = 0.2
#: Chest electrodes sit closer to the heart than the limb electrodes, so the
#: precordial leads see larger deflections (R of 1-2 mV in V5-V6).
PRECORDIAL_GAIN = 1.5

# --- rhythms ----------------------------------------------------------------------

RHYTHM_SINUS = "sinus"
RHYTHM_AF = "af"
RHYTHM_ECTOPIC = "ectopic"
RHYTHM_VARIABLE = "variable"
RHYTHMS = (RHYTHM_SINUS, RHYTHM_AF, RHYTHM_ECTOPIC, RHYTHM_VARIABLE)
SINUS_HR_BPM = (55.0, 95.0)
AF_HR_BPM = (80.0, 130.0)
AF_RR_CV = (0.15, 0.30)
#: Respiratory sinus arrhythmia: depth and frequency (Hz) of the RR modulation.
RSA_DEPTH = 0.03
RSA_FREQUENCY_HZ = 0.25
#: Beat-to-beat RR jitter of sinus rhythm (relative SD).
SINUS_RR_JITTER = 0.015
#: Shortest RR interval generated (s): the ventricles' refractory period.
MIN_RR_S = 0.25
#: Three fibrillatory sinusoids: frequency (Hz) and amplitude (mV) ranges.
F_WAVE_COUNT = 3
F_WAVE_HZ = (4.0, 8.0)
F_WAVE_MV = (0.02, 0.05)
#: Slow amplitude modulation of the f-waves: frequency (Hz) and depth.
F_WAVE_MODULATION_HZ = (0.1, 0.5)
F_WAVE_MODULATION_DEPTH = 0.5
#: Premature ventricular beats: one every 3rd to 6th beat (inclusive).
PVC_GAP_BEATS = (3, 6)
PVC_COUPLING = 0.65
PVC_QRS_WIDENING = 2.5
#: Time from the P peak to the R peak (s) unless a patient's traits say otherwise.
#: It is close to the clinical PR interval (P onset to QRS onset), since P's onset
#: (2σ_P = 50 ms before its peak) and the QRS onset (Q offset + 2σ_Q = 55 ms before
#: R) sit about as far before their peaks.
DEFAULT_PR_INTERVAL_S = -WAVE_OFFSET_S["P"]
#: T of a PVC is inverted and a little larger (discordant repolarisation).
PVC_T_FACTOR = -1.3

# --- patient and record variability ------------------------------------------------

#: SD of the log-normal per-wave amplitude factors between patients.
PATIENT_AMPLITUDE_SD = 0.15
#: SD of the log-normal variation between records of one patient.
RECORD_VARIATION_SD = 0.05
AXIS_SD_DEG = 20.0
#: Range of the per-beat SD of wave timing (s).
TIMING_JITTER_S = (0.002, 0.006)

# --- noise ------------------------------------------------------------------------------

NOISE_NONE = "none"
NOISE_NORMAL = "normal"
NOISE_NOISY = "noisy"
NOISE_MODES = (NOISE_NONE, NOISE_NORMAL, NOISE_NOISY)
WANDER_HZ = (0.05, 0.5)
WANDER_MV = (0.05, 0.15)
WHITE_NOISE_MV = (0.01, 0.03)
MUSCLE_PROBABILITY = 0.3
MUSCLE_DURATION_S = (0.5, 2.0)
MUSCLE_MV = (0.05, 0.1)
#: "noisy" records: every noise source ×5, plus electrode motion and saturation.
NOISY_FACTOR = 5.0
ELECTRODE_STEPS = (1, 3)
ELECTRODE_STEP_MV = (0.5, 1.5)
ELECTRODE_RECOVERY_S = (0.3, 1.0)
SATURATION_BURSTS = (1, 3)
SATURATION_DURATION_S = (1.0, 3.0)
SATURATION_NOISE_MV = 1.5
SATURATION_RAIL_MV = 2.0

# --- morphology flags -----------------------------------------------------------------

FLAG_MI = "MI"
FLAG_STTC = "STTC"
FLAG_CD = "CD"
FLAG_HYP = "HYP"
FLAGS = (FLAG_MI, FLAG_STTC, FLAG_CD, FLAG_HYP)
NORM_LABEL = "NORM"
FLAG_PREVALENCE = 0.25
MI_TERRITORIES = {"inferior": ("II", "III", "aVF"), "anterior": ("V1", "V2", "V3", "V4")}
MI_Q_AMPLITUDE_FACTOR = 4.0
MI_Q_WIDTH_FACTOR = 2.0
MI_T_FACTOR = -0.8
STTC_DEPRESSION_MV = (0.1, 0.2)
#: T factor of ST-T changes: flattened (near 0) or inverted (negative).
STTC_T_FACTOR = (-0.6, 0.25)
#: Steepness (s) of the ST plateau's edges.
ST_EDGE_S = 0.01
CD_QRS_WIDENING = 2.2
CD_NOTCH_DELAY_S = 0.04
CD_NOTCH_FACTOR = 0.5
HYP_FACTOR = 1.8
HYP_R_LEADS = ("I", "aVL", "V5", "V6")
HYP_S_LEADS = ("V1", "V2")

#: Beats are generated this far (s) beyond both ends so edge waves are whole.
EDGE_MARGIN_S = 0.6
#: A Gaussian wave is negligible beyond this many σ.
GAUSS_SUPPORT_SIGMAS = 6.0


@dataclass(frozen=True)
class PatientTraits:
    """Everything drawn once per patient; a patient's records share it.

    Attributes:
        rhythm: the patient's rhythm (``"sinus"``, ``"af"``, ``"ectopic"`` or
            ``"variable"``).
        heart_rate_bpm: mean heart rate.
        amplitude_factors: log-normal factors (σ 0.15) of P, Q, R, S, T.
        timing_jitter_s: SD of the per-beat jitter of every wave's timing.
        axis_deg: frontal electrical axis (60° ± 20°).
        white_noise_mv: SD of the white measurement noise.
        af_rr_cv: coefficient of variation of AF RR intervals (AF only).
        rr_cv: coefficient of variation of the RR intervals of the
            ``"variable"`` rhythm (0 gives a perfectly regular one).
        pr_interval_s: time from the P peak to the R peak of every conducted beat.
        mi_territory: ``"inferior"`` or ``"anterior"`` (used when MI is set).
        st_depression_mv: depth of the ST depression (used when STTC is set).
        sttc_t_factor: T amplitude factor under STTC (flattened or inverted).
    """

    rhythm: str
    heart_rate_bpm: float
    amplitude_factors: tuple[float, float, float, float, float]
    timing_jitter_s: float
    axis_deg: float
    white_noise_mv: float
    af_rr_cv: float = 0.0
    mi_territory: str = "inferior"
    st_depression_mv: float = 0.15
    sttc_t_factor: float = 0.0
    rr_cv: float = 0.0
    pr_interval_s: float = DEFAULT_PR_INTERVAL_S


def draw_patient_traits(rng: np.random.Generator, rhythm: str = RHYTHM_SINUS) -> PatientTraits:
    """Draw a patient's traits for ``rhythm`` (the draw order is fixed).

    ``rr_cv`` and ``pr_interval_s`` keep their defaults: only the contrast
    datasets set them (see :data:`SYNTHETIC_SPECS`), after this draw, so the
    other datasets' random streams do not depend on them.

    Raises:
        ValueError: unknown rhythm.
    """
    _check_choice("rhythm", rhythm, RHYTHMS)
    hr_range = AF_HR_BPM if rhythm == RHYTHM_AF else SINUS_HR_BPM
    heart_rate = rng.uniform(*hr_range)
    factors = np.exp(rng.normal(0.0, PATIENT_AMPLITUDE_SD, size=len(WAVES)))
    jitter = rng.uniform(*TIMING_JITTER_S)
    axis = DEFAULT_AXIS_DEG + rng.normal(0.0, AXIS_SD_DEG)
    white = rng.uniform(*WHITE_NOISE_MV)
    cv = rng.uniform(*AF_RR_CV)
    territory = ("inferior", "anterior")[int(rng.integers(2))]
    depression = rng.uniform(*STTC_DEPRESSION_MV)
    t_factor = rng.uniform(*STTC_T_FACTOR)
    return PatientTraits(
        rhythm=rhythm,
        heart_rate_bpm=float(heart_rate),
        amplitude_factors=tuple(float(f) for f in factors),  # type: ignore[arg-type]
        timing_jitter_s=float(jitter),
        axis_deg=float(axis),
        white_noise_mv=float(white),
        af_rr_cv=float(cv) if rhythm == RHYTHM_AF else 0.0,
        mi_territory=territory,
        st_depression_mv=float(depression),
        sttc_t_factor=float(t_factor),
    )


def _check_choice(name: str, value: Any, allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; choose from {', '.join(allowed)}")


# --- geometry ---------------------------------------------------------------------------


def _lead_vectors(leads: tuple[str, ...]) -> np.ndarray:
    """Lead vectors ``(L, 3)``: unit limb leads, precordial leads scaled by their gain."""
    vectors = np.zeros((len(leads), 3))
    for i, lead in enumerate(leads):
        if lead in LIMB_LEAD_ANGLES:
            angle = math.radians(LIMB_LEAD_ANGLES[lead])
            vectors[i] = (math.cos(angle), math.sin(angle), 0.0)
        else:
            angle = math.radians(PRECORDIAL_LEAD_ANGLES[lead])
            vectors[i] = PRECORDIAL_GAIN * np.array([math.cos(angle), 0.0, math.sin(angle)])
    return vectors


def _direction(axis_deg: float, z: float) -> np.ndarray:
    angle = math.radians(axis_deg)
    vector = np.array([math.cos(angle), math.sin(angle), z])
    return vector / np.linalg.norm(vector)


def _projection_gains(axis_deg: float, leads: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Per-wave lead gains ``(L,)``: projection relative to lead II at the default axis.

    P points along the axis with an anterior tilt; R, Q, S and T share the
    ventricular direction (Q and S point against R through their negative
    reference amplitudes; T is concordant with R).
    """
    lead_vectors = _lead_vectors(leads)
    reference = _lead_vectors((REFERENCE_LEAD,))[0]
    gains = {}
    for wave in WAVES:
        z = ATRIAL_Z if wave == "P" else VENTRICULAR_Z
        scale = float(_direction(DEFAULT_AXIS_DEG, z) @ reference)
        gains[wave] = (lead_vectors @ _direction(axis_deg, z)) / scale
    return gains


def _lead_mask(leads: tuple[str, ...], selected: Iterable[str]) -> np.ndarray:
    chosen = set(selected)
    return np.array([lead in chosen for lead in leads])


# --- rhythm -------------------------------------------------------------------------------


@dataclass
class _Beats:
    """R-peak times and per-beat properties of one record."""

    times: np.ndarray  # (B,) s
    rr_before: np.ndarray  # (B,) s, the interval that precedes each beat
    has_p: np.ndarray  # (B,) bool
    pvc: np.ndarray  # (B,) bool


def _beat_count(span_s: float, mean_rr: float) -> int:
    """Beats to draw so that even short intervals cover ``span_s``."""
    return math.ceil(span_s / max(MIN_RR_S, 0.3 * mean_rr)) + 4


def _sinus_rr(rng: np.random.Generator, mean_rr: float, count: int, t0: float) -> np.ndarray:
    # The modulation phase uses each beat's nominal time t0 + i·RR̄ rather than
    # the accumulated one: the difference is a few per cent of a 4 s breathing
    # cycle and it keeps the draw vectorised.
    nominal = t0 + mean_rr * np.arange(count)
    phase = rng.uniform(0.0, 2.0 * math.pi)
    modulation = 1.0 + RSA_DEPTH * np.sin(2.0 * math.pi * RSA_FREQUENCY_HZ * nominal + phase)
    return mean_rr * modulation * (1.0 + rng.normal(0.0, SINUS_RR_JITTER, size=count))


def _draw_beats(
    rng: np.random.Generator, rhythm: str, heart_rate: float, rr_cv: float, duration_s: float
) -> _Beats:
    mean_rr = 60.0 / heart_rate
    span = duration_s + 2.0 * EDGE_MARGIN_S
    count = _beat_count(span, mean_rr)
    t0 = -EDGE_MARGIN_S + rng.uniform(0.0, mean_rr)
    pvc = np.zeros(count, dtype=bool)
    if rhythm == RHYTHM_AF or (rhythm == RHYTHM_VARIABLE and rr_cv > 0):
        shape = 1.0 / rr_cv**2
        rr = rng.gamma(shape, mean_rr / shape, size=count)
    elif rhythm == RHYTHM_VARIABLE:
        rr = np.full(count, mean_rr)
    else:
        rr = _sinus_rr(rng, mean_rr, count, t0)
        if rhythm == RHYTHM_ECTOPIC:
            gaps = rng.integers(PVC_GAP_BEATS[0], PVC_GAP_BEATS[1] + 1, size=count)
            positions = np.cumsum(gaps)
            positions = positions[positions < count - 1]
            base = rr[positions].copy()
            rr[positions] = PVC_COUPLING * base
            rr[positions + 1] = 2.0 * base - PVC_COUPLING * base  # compensatory pause
            pvc[positions] = True
    rr = np.maximum(rr, MIN_RR_S)
    times = t0 + np.concatenate([[0.0], np.cumsum(rr[1:])])
    keep = times <= duration_s + EDGE_MARGIN_S
    has_p = np.full(count, rhythm != RHYTHM_AF) & ~pvc
    return _Beats(times[keep], rr[keep], has_p[keep], pvc[keep])


# --- traces -----------------------------------------------------------------------------------


def _gaussian_trace(
    t: np.ndarray, centres: np.ndarray, sigmas: np.ndarray, amplitudes: np.ndarray
) -> np.ndarray:
    """``Σ_b a_b · exp(-(t - c_b)² / (2 σ_b²))`` over beats, vectorised ``(B, T)``.

    Beyond ``GAUSS_SUPPORT_SIGMAS`` a wave is held at its value there (the
    kernel is clipped, not cut to zero). Only the few samples inside a
    wave's support (a few percent of a record) go through ``exp``; the rest
    get the clipped value, computed by the same ``exp`` on the same number,
    so the trace is bit for bit what exponentiating every sample gives.
    """
    if centres.size == 0:
        return np.zeros_like(t)
    delta = np.abs((t[np.newaxis, :] - centres[:, np.newaxis]) / sigmas[:, np.newaxis])
    inside = delta < GAUSS_SUPPORT_SIGMAS
    edge = np.array([GAUSS_SUPPORT_SIGMAS])
    kernel = np.full(delta.shape, np.exp(-0.5 * edge * edge)[0])
    near = delta[inside]
    kernel[inside] = np.exp(-0.5 * near * near)
    return amplitudes @ kernel


def _plateau_trace(t: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sum over beats of a smooth unit plateau from ``start_b`` to ``end_b``."""
    if starts.size == 0:
        return np.zeros_like(t)
    rise = (t[np.newaxis, :] - starts[:, np.newaxis]) / ST_EDGE_S
    fall = (ends[:, np.newaxis] - t[np.newaxis, :]) / ST_EDGE_S
    rise = np.clip(rise, -50.0, 50.0)
    fall = np.clip(fall, -50.0, 50.0)
    return (1.0 / (1.0 + np.exp(-rise)) / (1.0 + np.exp(-fall))).sum(axis=0)


def _f_waves(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    """Fibrillatory baseline: three modulated sinusoids at 4-8 Hz (mV, lead II scale)."""
    freqs = rng.uniform(*F_WAVE_HZ, size=F_WAVE_COUNT)
    amps = rng.uniform(*F_WAVE_MV, size=F_WAVE_COUNT)
    phases = rng.uniform(0.0, 2.0 * math.pi, size=F_WAVE_COUNT)
    mod_freq = rng.uniform(*F_WAVE_MODULATION_HZ)
    mod_phase = rng.uniform(0.0, 2.0 * math.pi)
    envelope = 1.0 + F_WAVE_MODULATION_DEPTH * np.sin(2.0 * math.pi * mod_freq * t + mod_phase)
    waves = amps @ np.sin(2.0 * math.pi * freqs[:, np.newaxis] * t + phases[:, np.newaxis])
    return envelope * waves


# --- noise --------------------------------------------------------------------------------


def _noise(
    rng: np.random.Generator,
    t: np.ndarray,
    n_leads: int,
    white_mv: float,
    sampling_rate: float,
    noisy: bool,
) -> np.ndarray:
    """Independent per-lead noise ``(L, T)``: wander, white noise, muscle bursts."""
    factor = NOISY_FACTOR if noisy else 1.0
    n = t.size
    freqs = rng.uniform(*WANDER_HZ, size=(n_leads, 2, 1))
    amps = rng.uniform(*WANDER_MV, size=(n_leads, 2, 1))
    phases = rng.uniform(0.0, 2.0 * math.pi, size=(n_leads, 2, 1))
    noise = (amps * np.sin(2.0 * math.pi * freqs * t + phases)).sum(axis=1)
    noise += rng.normal(0.0, white_mv, size=(n_leads, n))
    # muscle artefact: differenced white noise (energy towards high
    # frequencies, as EMG), rescaled to the drawn SD, inside a burst window
    has_burst = rng.uniform(size=n_leads) < MUSCLE_PROBABILITY
    lengths = np.minimum(
        n, np.round(rng.uniform(*MUSCLE_DURATION_S, size=n_leads) * sampling_rate).astype(int)
    )
    starts = (rng.uniform(size=n_leads) * (n - lengths + 1)).astype(int)
    sds = rng.uniform(*MUSCLE_MV, size=n_leads)
    emg = np.diff(rng.normal(size=(n_leads, n + 1)), axis=1) / math.sqrt(2.0)
    index = np.arange(n)
    window = has_burst[:, np.newaxis] & (index >= starts[:, np.newaxis])
    window &= index < (starts + lengths)[:, np.newaxis]
    noise += window * emg * sds[:, np.newaxis]
    noise *= factor
    if noisy:
        noise += _electrode_motion(rng, t, n_leads)
    return noise


def _electrode_motion(rng: np.random.Generator, t: np.ndarray, n_leads: int) -> np.ndarray:
    """Baseline steps with exponential recovery, 1-3 per lead."""
    steps = ELECTRODE_STEPS[1]
    count = rng.integers(ELECTRODE_STEPS[0], steps + 1, size=(n_leads, 1))
    active = np.arange(steps)[np.newaxis, :] < count  # (L, steps)
    onsets = rng.uniform(t[0], t[-1], size=(n_leads, steps))
    heights = rng.uniform(*ELECTRODE_STEP_MV, size=(n_leads, steps))
    heights *= rng.choice([-1.0, 1.0], size=(n_leads, steps))
    taus = rng.uniform(*ELECTRODE_RECOVERY_S, size=(n_leads, steps))
    elapsed = t[np.newaxis, np.newaxis, :] - onsets[..., np.newaxis]
    decay = np.exp(-np.maximum(elapsed, 0.0) / taus[..., np.newaxis])
    shape = (elapsed >= 0) * decay * (heights * active)[..., np.newaxis]
    return shape.sum(axis=1)


def _saturate(rng: np.random.Generator, signal: np.ndarray, sampling_rate: float) -> np.ndarray:
    """1-3 bursts of 1-3 s of large noise clipped at the amplifier rail (all leads)."""
    n = signal.shape[1]
    bursts = int(rng.integers(SATURATION_BURSTS[0], SATURATION_BURSTS[1] + 1))
    out = signal.copy()
    for _ in range(bursts):  # at most three slices, not a per-sample loop
        length = min(n, round(rng.uniform(*SATURATION_DURATION_S) * sampling_rate))
        start = int(rng.integers(0, n - length + 1))
        segment = out[:, start : start + length]
        segment += rng.normal(0.0, SATURATION_NOISE_MV, size=segment.shape)
        np.clip(segment, -SATURATION_RAIL_MV, SATURATION_RAIL_MV, out=segment)
    return out


# --- record ---------------------------------------------------------------------------------


def synthesize_record(
    rng: np.random.Generator,
    *,
    rhythm: str,
    patient: PatientTraits,
    duration_s: float = 10.0,
    sampling_rate: int = 100,
    leads: Iterable[str] = (REFERENCE_LEAD,),
    flags: frozenset[str] | Iterable[str] = frozenset(),
    noise: str = NOISE_NORMAL,
) -> np.ndarray:
    """Generate one ECG record.

    Args:
        rng: the record's generator (``default_rng([seed, patient, record])``).
        rhythm: ``"sinus"``, ``"af"``, ``"ectopic"`` or ``"variable"`` (sinus
            beats at gamma-distributed RR intervals of CV ``patient.rr_cv``,
            with a T offset set by the record's mean rate).
        patient: traits shared by the patient's records.
        duration_s: record length (s).
        sampling_rate: Hz.
        leads: lead names from :data:`STANDARD_LEADS`, in output order.
        flags: morphology flags from :data:`FLAGS` (MI, STTC, CD, HYP).
        noise: ``"normal"``, ``"noisy"`` (×5, electrode motion, saturation)
            or ``"none"`` (clean signal).

    Returns:
        float32 ``(len(leads), round(duration_s · sampling_rate))`` in mV.

    Raises:
        ValueError: unknown rhythm, flag, lead or noise mode, or a
            non-positive duration or rate.
    """
    _check_choice("rhythm", rhythm, RHYTHMS)
    _check_choice("noise mode", noise, NOISE_MODES)
    leads = tuple(leads)
    if not leads:
        raise ValueError("leads must name at least one lead")
    for lead in leads:
        _check_choice("lead", lead, STANDARD_LEADS)
    flags = frozenset(flags)
    for flag in flags:
        _check_choice("flag", flag, FLAGS)
    if duration_s <= 0 or sampling_rate <= 0:
        raise ValueError(
            f"duration_s and sampling_rate must be positive, got {duration_s} and {sampling_rate}"
        )
    n_samples = round(duration_s * sampling_rate)
    t = np.arange(n_samples) / sampling_rate

    # record-to-record variation within the patient
    heart_rate = patient.heart_rate_bpm * math.exp(rng.normal(0.0, RECORD_VARIATION_SD))
    factors = np.asarray(patient.amplitude_factors) * np.exp(
        rng.normal(0.0, RECORD_VARIATION_SD, size=len(WAVES))
    )
    amp = {wave: WAVE_AMPLITUDE_MV[wave] * factors[i] for i, wave in enumerate(WAVES)}
    rr_cv = patient.af_rr_cv if rhythm == RHYTHM_AF else patient.rr_cv
    beats = _draw_beats(rng, rhythm, heart_rate, rr_cv, duration_s)
    n_beats = beats.times.size
    jitter = rng.normal(0.0, patient.timing_jitter_s, size=(len(WAVES), n_beats))

    widen = np.where(beats.pvc, PVC_QRS_WIDENING, 1.0)
    if FLAG_CD in flags:
        widen = widen * CD_QRS_WIDENING
    ones = np.ones(n_beats)
    if rhythm == RHYTHM_VARIABLE:
        # QT follows the record's mean rate, not the interval before each beat
        # (QT adapts to a change of rate over minutes), so every beat of a
        # variable rhythm looks like every other whatever its RR interval.
        t_offset = QT_COEFFICIENT * math.sqrt(60.0 / heart_rate) * np.ones(n_beats)
    else:
        t_offset = QT_COEFFICIENT * np.sqrt(beats.rr_before)
    t_amp = np.where(beats.pvc, PVC_T_FACTOR, 1.0)

    traces: dict[str, np.ndarray] = {}

    def add(name: str, offset: np.ndarray, sigma: np.ndarray, amplitude: np.ndarray) -> None:
        traces[name] = _gaussian_trace(t, beats.times + offset, sigma, amplitude)

    add("P", -patient.pr_interval_s + jitter[0], WAVE_SIGMA_S["P"] * ones, beats.has_p * 1.0)
    add("Q", WAVE_OFFSET_S["Q"] * widen + jitter[1], WAVE_SIGMA_S["Q"] * widen, ones)
    add("R", jitter[2], WAVE_SIGMA_S["R"] * widen, ones)
    add("S", WAVE_OFFSET_S["S"] * widen + jitter[3], WAVE_SIGMA_S["S"] * widen, ones)
    add("T", t_offset + jitter[4], WAVE_SIGMA_S["T"] * ones, t_amp)

    gains = _projection_gains(patient.axis_deg, leads)
    lead_gain = {wave: amp[wave] * gains[wave] for wave in WAVES}

    if FLAG_MI in flags:
        territory = _lead_mask(leads, MI_TERRITORIES[patient.mi_territory])
        add(
            "Q_path",
            WAVE_OFFSET_S["Q"] * widen + jitter[1],
            WAVE_SIGMA_S["Q"] * MI_Q_WIDTH_FACTOR * widen,
            ones,
        )
        # a necrotic territory shows a deep, wide Q and an inverted T in the leads
        # facing it whatever the projection, hence fixed amplitudes there
        lead_gain["Q"] = np.where(territory, 0.0, lead_gain["Q"])
        lead_gain["Q_path"] = territory * MI_Q_AMPLITUDE_FACTOR * amp["Q"]
        lead_gain["T"] = np.where(territory, MI_T_FACTOR * amp["T"], lead_gain["T"])
    if FLAG_STTC in flags:
        qrs_end = WAVE_OFFSET_S["S"] * widen + 2.0 * WAVE_SIGMA_S["S"] * widen
        t_start = t_offset - 2.0 * WAVE_SIGMA_S["T"]
        traces["ST"] = _plateau_trace(t, beats.times + qrs_end, beats.times + t_start)
        # depression where R is upright, reciprocal elevation where it is inverted
        lead_gain["ST"] = -patient.st_depression_mv * np.clip(gains["R"], -1.0, 1.0)
        lead_gain["T"] = lead_gain["T"] * patient.sttc_t_factor
    if FLAG_CD in flags:
        add(
            "R_notch",
            CD_NOTCH_DELAY_S * widen + jitter[2],
            WAVE_SIGMA_S["R"] * ones,
            ones,
        )
        lead_gain["R_notch"] = CD_NOTCH_FACTOR * lead_gain["R"]
    if FLAG_HYP in flags:
        lead_gain["R"] = np.where(
            _lead_mask(leads, HYP_R_LEADS), HYP_FACTOR * lead_gain["R"], lead_gain["R"]
        )
        lead_gain["S"] = np.where(
            _lead_mask(leads, HYP_S_LEADS), HYP_FACTOR * lead_gain["S"], lead_gain["S"]
        )

    names = list(traces)
    gain_matrix = np.stack([lead_gain[name] for name in names], axis=1)  # (L, V)
    signal = gain_matrix @ np.stack([traces[name] for name in names])  # (L, T)
    if rhythm == RHYTHM_AF:
        atrial = gains["P"] * factors[0]
        signal += atrial[:, np.newaxis] * _f_waves(rng, t)[np.newaxis, :]
    if noise != NOISE_NONE:
        noisy = noise == NOISE_NOISY
        signal += _noise(rng, t, len(leads), patient.white_noise_mv, sampling_rate, noisy)
        if noisy:
            signal = _saturate(rng, signal, sampling_rate)
    return signal.astype(np.float32)


# --- datasets -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SyntheticSpec:
    """Fixed description of one registered synthetic dataset."""

    task: str
    class_names: tuple[str, ...]
    default_leads: tuple[str, ...]
    n_patients: int
    records_per_patient: int
    class_mix: tuple[float, ...] = field(default=())
    description: str = ""


#: AF in 35 % of synthetic-af patients.
AF_PREVALENCE = 0.35
#: The four synthetic-rhythm classes: N (sinus), A (AF), O (ectopic), ~ (noisy).
RHYTHM_CLASS_MIX = (0.5, 0.2, 0.2, 0.1)

# --- the contrast datasets ----------------------------------------------------------------
#
# Three binary datasets, each with its label in one place, so that models with
# different views of a record rank differently on them (the bundled example
# corpus is trained on these). Each label thresholds a continuous per-patient
# value that the record shows only approximately, so even a perfect reader
# misclassifies the patients near the threshold: no model can reach a score of 1.

#: synthetic-irregular-rr: the RR coefficient of variation of a "variable"
#: rhythm is log-uniform on this range; "irregular" above the threshold (close
#: to the range's geometric midpoint, 0.0387, so about half the patients). The
#: ten to fourteen RR intervals of a record estimate it to about ±25 %.
IRREGULAR_RR_CV = (0.005, 0.3)
IRREGULAR_RR_CV_THRESHOLD = 0.039
#: Its mean heart rate (bpm) varies over a narrow band, so that a single
#: unusually short or long RR interval already hints at irregularity (which a
#: network that sees two beats can learn).
IRREGULAR_HR_BPM = (65.0, 85.0)
#: synthetic-long-pr: the patient's PR interval is uniform on this range (s),
#: "long-PR" above 0.20 s, the clinical threshold of first-degree AV block.
#: The record's own PR differs from the patient's by N(0, 12 ms), as two
#: measurements of one patient do.
LONG_PR_RANGE_S = (0.11, 0.29)
LONG_PR_THRESHOLD_S = 0.20
PR_MEASUREMENT_SD_S = 0.012
#: synthetic-bradycardia: the patient's heart rate is uniform on this range
#: (bpm), "bradycardia" below 60 bpm; each record's rate differs from it by the
#: usual record variation (log-normal, σ 0.05, about ±3 bpm).
BRADYCARDIA_HR_BPM = (40.0, 80.0)
BRADYCARDIA_THRESHOLD_BPM = 60.0
#: Patients and records per patient of each contrast dataset: one record each,
#: so every record is an independent test unit.
CONTRAST_N_PATIENTS = 500
CONTRAST_RECORDS_PER_PATIENT = 1
#: Each contrast dataset's threshold sits at its latent's median: half the patients are positive.
CONTRAST_CLASS_MIX = (0.5, 0.5)


def _contrast_spec(classes: tuple[str, str], description: str) -> SyntheticSpec:
    return SyntheticSpec(
        task="binary",
        class_names=classes,
        default_leads=(REFERENCE_LEAD,),
        n_patients=CONTRAST_N_PATIENTS,
        records_per_patient=CONTRAST_RECORDS_PER_PATIENT,
        class_mix=CONTRAST_CLASS_MIX,
        description=description,
    )


SYNTHETIC_SPECS: dict[str, SyntheticSpec] = {
    "synthetic-af": SyntheticSpec(
        task="binary",
        class_names=("normal", "AF"),
        default_leads=(REFERENCE_LEAD,),
        n_patients=150,
        records_per_patient=3,
        class_mix=(1.0 - AF_PREVALENCE, AF_PREVALENCE),
        description="synthetic sinus rhythm vs atrial fibrillation, 100 Hz, 10 s records",
    ),
    "synthetic-rhythm": SyntheticSpec(
        task="multiclass",
        class_names=("N", "A", "O", "~"),
        default_leads=(REFERENCE_LEAD,),
        n_patients=200,
        records_per_patient=2,
        class_mix=RHYTHM_CLASS_MIX,
        description="synthetic normal / AF / ectopic / noisy records (CinC 2017 classes)",
    ),
    "synthetic-ptbxl": SyntheticSpec(
        task="multilabel",
        class_names=(NORM_LABEL, *FLAGS),
        default_leads=STANDARD_LEADS,
        n_patients=150,
        records_per_patient=2,
        class_mix=(FLAG_PREVALENCE,) * len(FLAGS),
        description="synthetic 12-lead morphology flags (PTB-XL superclasses)",
    ),
    "synthetic-irregular-rr": _contrast_spec(
        ("regular", "irregular"),
        "synthetic sinus beats at regular or irregular RR intervals: the label lives in the "
        "rhythm over many beats, no single beat shows it",
    ),
    "synthetic-long-pr": _contrast_spec(
        ("normal", "long-PR"),
        "synthetic sinus rhythm with a normal or long PR interval (first-degree AV block): "
        "the label lives in every single beat's morphology",
    ),
    "synthetic-bradycardia": _contrast_spec(
        ("normal", "bradycardia"),
        "synthetic sinus rhythm below or above 60 bpm: the label lives in the heart rate, "
        "which beat spacing and beat shape both show",
    ),
}
#: The contrast datasets, in the order the bundled example corpus lists them.
CONTRAST_DATASETS = ("synthetic-irregular-rr", "synthetic-long-pr", "synthetic-bradycardia")

_RHYTHM_CLASSES = (RHYTHM_SINUS, RHYTHM_AF, RHYTHM_ECTOPIC)


@dataclass
class SyntheticData:
    """An in-memory synthetic dataset.

    Attributes:
        name: the synthetic dataset name.
        signals: float32 ``(n, L, T)`` in mV.
        labels: int64 ``(n,)`` class indices or int8 ``(n, K)`` multi-hot.
        groups: patient ids (``"p0000"``...), one per record.
        record_ids: ``"p0000_r0"``..., one per record.
        class_names: class (or label) names, position = index.
        task: ``"binary"``, ``"multiclass"`` or ``"multilabel"``.
        sampling_rate: Hz.
        leads: lead names in signal order.
    """

    name: str
    signals: np.ndarray
    labels: np.ndarray
    groups: list[str]
    record_ids: list[str]
    class_names: list[str]
    task: str
    sampling_rate: int
    leads: list[str]


@dataclass(frozen=True)
class _PatientPlan:
    label: Any
    rhythm: str
    noise: str
    flags: frozenset[str]
    #: traits that replace the drawn ones (the contrast datasets' latent values)
    traits: dict[str, float] = field(default_factory=dict)


def _contrast_plan(name: str, rng: np.random.Generator) -> _PatientPlan:
    """Label and latent trait of a contrast dataset's patient (see the constants above)."""
    if name == "synthetic-irregular-rr":
        low, high = np.log(IRREGULAR_RR_CV)
        cv = float(np.exp(rng.uniform(low, high)))
        rate = float(rng.uniform(*IRREGULAR_HR_BPM))
        label = int(cv > IRREGULAR_RR_CV_THRESHOLD)
        traits = {"rr_cv": cv, "heart_rate_bpm": rate}
        return _PatientPlan(label, RHYTHM_VARIABLE, NOISE_NORMAL, frozenset(), traits)
    if name == "synthetic-long-pr":
        pr = float(rng.uniform(*LONG_PR_RANGE_S))
        shown = pr + float(rng.normal(0.0, PR_MEASUREMENT_SD_S))
        label = int(pr > LONG_PR_THRESHOLD_S)
        return _PatientPlan(
            label, RHYTHM_SINUS, NOISE_NORMAL, frozenset(), {"pr_interval_s": shown}
        )
    rate = float(rng.uniform(*BRADYCARDIA_HR_BPM))
    label = int(rate < BRADYCARDIA_THRESHOLD_BPM)
    return _PatientPlan(label, RHYTHM_SINUS, NOISE_NORMAL, frozenset(), {"heart_rate_bpm": rate})


def _plan_patient(name: str, spec: SyntheticSpec, rng: np.random.Generator) -> _PatientPlan:
    """Draw a patient's label and what it implies for the generator."""
    if name == "synthetic-af":
        is_af = rng.uniform() < spec.class_mix[1]
        return _PatientPlan(
            int(is_af), RHYTHM_AF if is_af else RHYTHM_SINUS, NOISE_NORMAL, frozenset()
        )
    if name in CONTRAST_DATASETS:
        return _contrast_plan(name, rng)
    if name == "synthetic-rhythm":
        label = int(rng.choice(len(spec.class_names), p=np.asarray(spec.class_mix)))
        if label == len(_RHYTHM_CLASSES):  # "~": any rhythm under heavy noise
            rhythm = _RHYTHM_CLASSES[int(rng.integers(len(_RHYTHM_CLASSES)))]
            return _PatientPlan(label, rhythm, NOISE_NOISY, frozenset())
        return _PatientPlan(label, _RHYTHM_CLASSES[label], NOISE_NORMAL, frozenset())
    present = rng.uniform(size=len(FLAGS)) < np.asarray(spec.class_mix)
    flags = frozenset(flag for flag, on in zip(FLAGS, present, strict=True) if on)
    multi_hot = np.concatenate([[not present.any()], present]).astype(np.int8)
    return _PatientPlan(multi_hot, RHYTHM_SINUS, NOISE_NORMAL, flags)


def make_synthetic(
    name: str,
    *,
    n_patients: int | None = None,
    records_per_patient: int | None = None,
    seed: int = 0,
    sampling_rate: int = 100,
    duration_s: float = 10.0,
    leads: Iterable[str] | None = None,
) -> SyntheticData:
    """Generate a registered synthetic dataset in memory.

    Labels belong to the patient: all of a patient's records share them, and
    their shared traits make them alike, so a split by record instead of by
    patient leaks.

    Args:
        name: a key of :data:`SYNTHETIC_SPECS` (``"synthetic-af"``,
            ``"synthetic-rhythm"``, ``"synthetic-ptbxl"`` or one of the
            :data:`CONTRAST_DATASETS`).
        n_patients: patients; the dataset's default size when None.
        records_per_patient: records per patient; the default when None.
        seed: non-negative data seed.
        sampling_rate: Hz.
        duration_s: record length (s).
        leads: lead names; the dataset's default when None.

    Returns:
        A :class:`SyntheticData` with ``n_patients · records_per_patient`` records,
        patient-major.

    Raises:
        ValueError: unknown name or lead, or non-positive sizes, a negative
            seed, duration or rate.
    """
    _check_choice("synthetic dataset", name, SYNTHETIC_SPECS)
    spec = SYNTHETIC_SPECS[name]
    patients = spec.n_patients if n_patients is None else int(n_patients)
    per_patient = (
        spec.records_per_patient if records_per_patient is None else int(records_per_patient)
    )
    if patients < 1 or per_patient < 1:
        raise ValueError(
            "n_patients and records_per_patient must be at least 1, "
            f"got {patients} and {per_patient}"
        )
    if int(seed) < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    lead_names = spec.default_leads if leads is None else tuple(leads)
    for lead in lead_names:
        _check_choice("lead", lead, STANDARD_LEADS)
    n_samples = round(duration_s * sampling_rate)
    signals = np.empty((patients * per_patient, len(lead_names), n_samples), dtype=np.float32)
    labels: list[Any] = []
    groups: list[str] = []
    record_ids: list[str] = []
    for p in range(patients):
        patient_rng = np.random.default_rng([int(seed), p])
        plan = _plan_patient(name, spec, patient_rng)
        traits = replace(draw_patient_traits(patient_rng, plan.rhythm), **plan.traits)
        for r in range(per_patient):
            signals[p * per_patient + r] = synthesize_record(
                np.random.default_rng([int(seed), p, r]),
                rhythm=plan.rhythm,
                patient=traits,
                duration_s=duration_s,
                sampling_rate=sampling_rate,
                leads=lead_names,
                flags=plan.flags,
                noise=plan.noise,
            )
            labels.append(plan.label)
            groups.append(f"p{p:04d}")
            record_ids.append(f"p{p:04d}_r{r}")
    label_array = (
        np.stack(labels).astype(np.int8)
        if spec.task == "multilabel"
        else np.asarray(labels, dtype=np.int64)
    )
    return SyntheticData(
        name=name,
        signals=signals,
        labels=label_array,
        groups=groups,
        record_ids=record_ids,
        class_names=list(spec.class_names),
        task=spec.task,
        sampling_rate=int(sampling_rate),
        leads=list(lead_names),
    )


# --- writing the local layout ---------------------------------------------------------------

#: Formats :func:`write_local_dataset` writes.
LOCAL_FORMATS = ("npz", "wfdb")
#: WFDB storage format: 16-bit samples.
WFDB_FORMAT = "16"


def _labels_csv(data: SyntheticData) -> str:
    if data.task == "multilabel":
        header = ["record_id", "patient_id", *data.class_names]
        rows = [
            [record, group, *(str(int(v)) for v in row)]
            for record, group, row in zip(data.record_ids, data.groups, data.labels, strict=True)
        ]
    else:
        header = ["record_id", "patient_id", "label"]
        rows = [
            [record, group, data.class_names[int(label)]]
            for record, group, label in zip(data.record_ids, data.groups, data.labels, strict=True)
        ]
    return "\n".join(",".join(row) for row in [header, *rows]) + "\n"


def _write_wfdb(signal: np.ndarray, record_id: str, data: SyntheticData, records_dir: Path) -> None:
    with (
        tempfile.TemporaryDirectory(prefix=".wfdb.", dir=records_dir) as staging,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", DeprecationWarning)  # wfdb on pandas 3, not our data
        import wfdb

        wfdb.wrsamp(
            record_id,
            fs=data.sampling_rate,
            units=["mV"] * len(data.leads),
            sig_name=list(data.leads),
            p_signal=signal.T.astype(np.float64),
            fmt=[WFDB_FORMAT] * len(data.leads),
            write_dir=staging,
        )
        # the header goes last: a reader that finds it finds the samples too
        for suffix in (".dat", ".hea"):
            replace_durably(
                Path(staging) / f"{record_id}{suffix}", records_dir / f"{record_id}{suffix}"
            )


def write_local_dataset(data: SyntheticData, out_dir: str | Path, *, format: str = "npz") -> Path:
    """Write ``data`` in the local on-disk layout that ``LocalECGDataset`` reads.

    Layout: ``dataset.json``, ``labels.csv`` (``record_id``, ``patient_id``,
    then ``label`` or one 0/1 column per class) and ``records/<record_id>``
    as ``.npz`` (key ``signal``, ``(leads, samples)`` float32 mV, and ``fs``)
    or WFDB ``.hea``/``.dat`` (16-bit, gain chosen by ``wfdb`` from the
    signal range, so the round trip is within about 1e-4 mV). Every file is
    written atomically; ``dataset.json`` comes last, so a folder that has it
    is complete.

    Args:
        data: the dataset (from :func:`make_synthetic`).
        out_dir: target folder (created).
        format: ``"npz"`` or ``"wfdb"``.

    Returns:
        ``out_dir`` as a Path.

    Raises:
        ValueError: unknown format.
    """
    _check_choice("format", format, LOCAL_FORMATS)
    out = Path(out_dir)
    records_dir = out / "records"
    records_dir.mkdir(parents=True, exist_ok=True)
    for signal, record_id in zip(data.signals, data.record_ids, strict=True):
        stale = ("hea", "dat") if format == "npz" else ("npz",)
        for suffix in stale:  # a record left in the other format would be ambiguous
            (records_dir / f"{record_id}.{suffix}").unlink(missing_ok=True)
        if format == "npz":
            buffer = io.BytesIO()
            np.savez(buffer, signal=signal, fs=np.int64(data.sampling_rate))
            atomic_write_bytes(records_dir / f"{record_id}.npz", buffer.getvalue())
        else:
            _write_wfdb(signal, record_id, data, records_dir)
    atomic_write_text(out / "labels.csv", _labels_csv(data))
    meta = {
        "name": data.name,
        "sampling_rate": int(data.sampling_rate),
        "leads": list(data.leads),
        "task": data.task,
        "classes": list(data.class_names),
        "segment_seconds": data.signals.shape[-1] / data.sampling_rate,
        "description": SYNTHETIC_SPECS[data.name].description
        if data.name in SYNTHETIC_SPECS
        else "",
        "format": format,
    }
    atomic_write_json(out / "dataset.json", meta)
    logger.info("wrote %d records of %s to %s (%s)", len(data.record_ids), data.name, out, format)
    return out
