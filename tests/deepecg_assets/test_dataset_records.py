"""A dataset step reads only its datasets' rows of discovered_runs: those the whole frame holds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from upath import UPath

import deepecg_assets.parquet_frames as parquet_frames
from deepecg_assets.assets.datasets import RECORD_COLUMNS_READ, dataset_frames, records_of
from deepecg_assets.parquet_frames import StoredFrame, frame_from_parquet, frame_to_parquet
from deepecg_assets.partitions import dataset_key, frames_by_key
from deepecg_assets.resources import AnalysisSettings
from deepecgkit.rundir.records import RunRecord, record_frame_to_runs, records_to_frame

#: Plain names, one that is mapped to a hashed key, and one that sorts between them.
DATASETS = ("ptbxl", "new set/β", "007", "chapman")


def _record(i: int, dataset: str, seed: int | None, model: str) -> RunRecord:
    return RunRecord(
        run_dir=Path(f"/runs/{dataset}/{model}_{i}"),
        model=model,
        dataset=dataset,
        seed=seed,
        multi_label=False,
        averaging="macro",
        metrics={"f1": 0.5 + i / 1000, "auroc": 0.7 - i / 1000},
        n_train=100,
        n_val=None if i % 3 else 20,
        n_test=30,
        n_test_groups=None,
        mtime=float(i),
        fingerprint="abc" if i % 2 else None,
        suspect=("a value set aside",) if i % 5 == 0 else (),
    )


@st.composite
def _records(draw: st.DrawFn) -> list[RunRecord]:
    seeds = st.one_of(st.integers(0, 50), st.integers(2**63, 2**64))
    drawn = draw(
        st.lists(
            st.tuples(st.sampled_from(DATASETS), seeds, st.sampled_from(["cnn", "gru"])),
            max_size=30,
        )
    )
    records = [_record(i, *row) for i, row in enumerate(drawn)]
    # Discovery's order: by dataset, then model and seed.
    return sorted(records, key=lambda r: (r.dataset, r.model, r.seed, str(r.run_dir)))


def _stored(directory: Path, frame: pd.DataFrame, group_bytes: int) -> StoredFrame:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parquet_frames, "ROW_GROUP_BYTES", group_bytes)
        data = frame_to_parquet(frame)
    path = directory / "discovered_runs.parquet"
    path.write_bytes(data)
    return StoredFrame(UPath(str(path)))


@settings(max_examples=40, deadline=None)
@given(
    records=_records(),
    wanted=st.lists(st.sampled_from([*DATASETS, "gone"]), unique=True, max_size=3),
    group_bytes=st.sampled_from([1, 300, 1 << 20]),
)
def test_property_records_of_some_keys_equal_those_of_the_whole_frame(
    tmp_path_factory, records, wanted, group_bytes
) -> None:
    frame = records_to_frame(records)
    keys = [dataset_key(name) for name in wanted]
    stored = _stored(tmp_path_factory.mktemp("runs"), frame, group_bytes)
    whole = frames_by_key(frame_from_parquet(frame_to_parquet(frame)), keys)
    got = records_of(stored, keys)
    assert list(got) == keys
    for key in keys:
        # The index is the rows' place in what was read; the step never uses it.
        expected = whole[key].loc[:, list(got[key].columns)].reset_index(drop=True)
        pd.testing.assert_frame_equal(
            got[key].reset_index(drop=True), expected, check_exact=True, check_index_type=False
        )
        # What the step computes from them: the long runs frame, equal dtypes included.
        pd.testing.assert_frame_equal(
            record_frame_to_runs(got[key]), record_frame_to_runs(whole[key]), check_exact=True
        )


def test_the_columns_read_are_those_the_long_frame_needs(tmp_path) -> None:
    records = [_record(i, "ptbxl", i, "cnn") for i in range(4)]
    frame = records_to_frame(records)
    assert set(RECORD_COLUMNS_READ) < set(frame.columns)
    pd.testing.assert_frame_equal(
        record_frame_to_runs(frame[list(RECORD_COLUMNS_READ)]), record_frame_to_runs(frame)
    )


def test_every_frame_of_a_dataset_is_stored_as_from_the_whole_frame(tmp_path) -> None:
    records = [
        _record(i, dataset, seed, model)
        for i, (dataset, model, seed) in enumerate(
            (d, m, s) for d in ("007", "ptbxl") for m in ("cnn", "gru", "mlp") for s in range(4)
        )
    ]
    frame = records_to_frame(records)
    stored = _stored(tmp_path, frame, 200)
    analysis = AnalysisSettings()
    whole = frames_by_key(frame, ["ptbxl"])["ptbxl"]
    part = records_of(stored, ["ptbxl"])["ptbxl"]
    clean, read = dataset_frames(whole, analysis), dataset_frames(part, analysis)
    assert len(clean["paired_differences"]) == 3
    for name, expected in clean.items():
        assert frame_to_parquet(read[name]) == frame_to_parquet(expected), name
