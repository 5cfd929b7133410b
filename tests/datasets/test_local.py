"""The local on-disk layout: round trips, spans, preprocessing, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import resample_poly

from deepecgkit.datasets import (
    DatasetFormatError,
    DatasetNotFoundError,
    LocalECGDataset,
    MITBIHAFDBDataset,
    PTBXLDataset,
    SyntheticAFDataset,
    SyntheticPTBXLDataset,
)
from deepecgkit.datasets.local import read_dataset_json, read_record
from deepecgkit.datasets.synthetic import make_synthetic, write_local_dataset

RNG = np.random.default_rng(0)


def _noise(leads: int, samples: int) -> np.ndarray:
    return RNG.normal(size=(leads, samples))


@pytest.mark.parametrize("name", ["synthetic-af", "synthetic-ptbxl"])
def test_npz_round_trip_gives_the_in_memory_windows_exactly(tmp_path: Path, name: str) -> None:
    data = make_synthetic(name, n_patients=6)
    write_local_dataset(data, tmp_path, format="npz")
    local = LocalECGDataset(tmp_path)
    memory = {"synthetic-af": SyntheticAFDataset, "synthetic-ptbxl": SyntheticPTBXLDataset}[name](
        n_patients=6
    )
    np.testing.assert_array_equal(local.signals, memory.signals)
    np.testing.assert_array_equal(local.labels, memory.labels)
    np.testing.assert_array_equal(local.groups, memory.groups)
    np.testing.assert_array_equal(local.record_ids, memory.record_ids)
    assert (local.task, local.class_names, local.leads) == (
        memory.task,
        memory.class_names,
        memory.leads,
    )


def test_wfdb_round_trip_is_within_a_microvolt(tmp_path: Path) -> None:
    data = make_synthetic("synthetic-ptbxl", n_patients=3, records_per_patient=1)
    write_local_dataset(data, tmp_path, format="wfdb")
    description = read_dataset_json(tmp_path / "dataset.json")
    for record_id, original in zip(data.record_ids, data.signals, strict=True):
        signal, leads, path = read_record(tmp_path / "records", record_id, description=description)
        assert path.suffix == ".hea" and leads == data.leads
        assert np.abs(signal - original).max() < 1e-3
    local = LocalECGDataset(tmp_path, leads=["V2", "I"])
    assert local.leads == ["V2", "I"] and local.signals.shape == (3, 2, 1000)


def test_spans_label_whole_windows_and_drop_boundary_crossers(write_layout) -> None:
    root = write_layout(
        records={"r1": _noise(2, 3000), "r2": _noise(2, 1500)},
        labels=(
            "record_id,patient_id,start_s,end_s,label\nr1,pA,0,10,non-AF\nr1,pA,10,25,AF\nr2,,,,1\n"
        ),
    )
    data = LocalECGDataset(root)
    # r1: [0,10) non-AF, [10,20) AF, [20,30) crosses 25 s -> dropped; r2: one window,
    # remainder dropped
    assert data.labels.tolist() == [0, 1, 1]
    assert data.record_ids.tolist() == ["r1", "r1", "r2"]
    assert data.groups.tolist() == ["pA", "pA", "r2"]  # empty patient: its own group
    assert data.signals.shape == (3, 2, 1000)


def test_resampling_windowing_and_normalisation(write_layout) -> None:
    raw = _noise(2, 250 * 7)
    root = write_layout(
        records={"r": raw}, labels="record_id,label\nr,AF\n", meta={"sampling_rate": 250}
    )
    data = LocalECGDataset(root, sampling_rate=100, leads=["II"], segment_seconds=3.0)
    expected = resample_poly(raw[1], 2, 5)[:600].reshape(2, 300)
    expected = (expected - expected.mean(axis=1, keepdims=True)) / expected.std(
        axis=1, keepdims=True
    )
    assert data.sampling_rate == 100 and data.leads == ["II"]
    np.testing.assert_allclose(data.signals[:, 0], expected, rtol=1e-5, atol=1e-5)


def test_short_records_are_zscored_then_zero_padded(write_layout) -> None:
    root = write_layout(records={"r": _noise(2, 400)}, labels="record_id,label\nr,0\n")
    window = LocalECGDataset(root).signals[0]
    assert window.shape == (2, 1000) and np.all(window[:, 400:] == 0)
    np.testing.assert_allclose(window[:, :400].mean(axis=1), 0, atol=1e-6)
    np.testing.assert_allclose(window[:, :400].std(axis=1), 1, atol=1e-5)


def test_multilabel_columns(write_layout) -> None:
    root = write_layout(
        records={"a": _noise(2, 1000), "b": _noise(2, 1000)},
        labels="record_id,x,y\na,1,0\nb,1,1\n",
        meta={"task": "multilabel", "classes": ["x", "y"]},
    )
    data = LocalECGDataset(root)
    assert data.labels.dtype == np.int8 and data.labels.tolist() == [[1, 0], [1, 1]]
    _, label = data[1]
    assert label.dtype.is_floating_point and label.tolist() == [1.0, 1.0]


def test_named_datasets_check_classes_and_default_leads(write_layout, monkeypatch) -> None:
    root = write_layout(records={"r": _noise(2, 1000)}, labels="record_id,label\nr,AF\n")
    data = MITBIHAFDBDataset(root)
    assert data.leads == ["I"] and data.name == "mitbih-afdb"
    with pytest.raises(DatasetFormatError, match=r"dataset.json: classes .* do not match"):
        PTBXLDataset(root)
    monkeypatch.setenv("DEEPECG_DATA", str(root.parent))
    assert MITBIHAFDBDataset.get_default_data_dir() == root.parent / "mitbih-afdb"
    monkeypatch.delenv("DEEPECG_DATA")
    assert MITBIHAFDBDataset.get_default_data_dir() == (
        Path("~/.cache/deepecg/datasets/mitbih-afdb").expanduser()
    )


# --- errors: each names the file and what was expected -------------------------------------


def test_missing_folder_says_how_to_prepare_it(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"nowhere: dataset folder not found.*synth"):
        LocalECGDataset(tmp_path / "nowhere", download=True)


@pytest.mark.parametrize(
    ("mutate", "error", "pattern"),
    [
        (
            lambda r: (r / "dataset.json").unlink(),
            DatasetNotFoundError,
            r"dataset.json: .*not found",
        ),
        (lambda r: (r / "labels.csv").unlink(), DatasetNotFoundError, r"labels.csv: .*not found"),
        (lambda r: (r / "dataset.json").write_text("{oops"), DatasetFormatError, "not valid JSON"),
        (
            lambda r: (r / "dataset.json").write_text(json.dumps({"name": "x"})),
            DatasetFormatError,
            r"dataset.json: missing key 'sampling_rate'",
        ),
        (
            lambda r: (r / "labels.csv").write_text("record,label\nr,AF\n"),
            DatasetFormatError,
            r"labels.csv: missing column\(s\) record_id",
        ),
        (
            lambda r: (r / "labels.csv").write_text("record_id,label\nr,flutter\n"),
            DatasetFormatError,
            r"labels.csv: line 2: label 'flutter' is neither a class name",
        ),
        (
            lambda r: (r / "labels.csv").write_text("record_id,label\nr,AF\nr,AF\n"),
            DatasetFormatError,
            r"lines 2 and 3: spans of record 'r' overlap",
        ),
        (
            lambda r: (r / "records" / "r.npz").unlink(),
            DatasetNotFoundError,
            r"r.npz \(or WFDB r.hea\) not found",
        ),
        (
            lambda r: np.savez(r / "records" / "r.npz", signal=np.zeros((3, 10))),
            DatasetFormatError,
            r"r.npz: 'signal' has shape \(3, 10\), expected \(n_leads=2",
        ),
        (
            lambda r: np.savez(r / "records" / "r.npz", data=np.zeros((2, 10))),
            DatasetFormatError,
            r"r.npz: no 'signal' array",
        ),
        (
            lambda r: np.savez(r / "records" / "r.npz", signal=np.zeros((2, 10)), fs=250),
            DatasetFormatError,
            r"r.npz: 'fs' is 250, but dataset.json declares 100 Hz",
        ),
        (
            lambda r: (r / "records" / "r.npz").write_bytes(b"garbage"),
            DatasetFormatError,
            r"r.npz: not a readable .npz archive",
        ),
        (
            lambda r: (r / "records" / "r.hea").write_text("r 2 100 1000\n"),
            DatasetFormatError,
            r"record 'r' exists both as r.npz and as WFDB r.hea",
        ),
    ],
)
def test_malformed_datasets_name_the_file(write_layout, mutate, error, pattern) -> None:
    root = write_layout(records={"r": _noise(2, 1000)}, labels="record_id,label\nr,AF\n")
    mutate(root)
    with pytest.raises(error, match=pattern):
        LocalECGDataset(root)


def test_multilabel_cells_must_be_binary(write_layout) -> None:
    root = write_layout(
        records={"a": _noise(2, 1000)},
        labels="record_id,x,y\na,1,2\n",
        meta={"task": "multilabel", "classes": ["x", "y"]},
    )
    with pytest.raises(DatasetFormatError, match=r"line 2: column 'y' must be 0 or 1"):
        LocalECGDataset(root)


def test_missing_lead_lists_the_available_ones(write_layout) -> None:
    root = write_layout(records={"r": _noise(2, 1000)}, labels="record_id,label\nr,AF\n")
    with pytest.raises(DatasetFormatError, match=r"lead\(s\) V1 not found; available leads: I, II"):
        LocalECGDataset(root, leads=["V1"])
    with pytest.raises(DatasetFormatError, match=r"lead\(s\) V9 not found; available leads: I, II"):
        SyntheticAFDataset(leads=["V9"], n_patients=2)
