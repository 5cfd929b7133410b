"""The synthetic ECG generator: determinism, labels, morphology, rhythm."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from deepecgkit.datasets.synthetic import (
    STANDARD_LEADS,
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
