"""Group-aware splitting and the data module."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from deepecgkit.datasets import (
    ECGDataModule,
    SyntheticAFDataset,
    SyntheticPTBXLDataset,
    split_groups,
)


def _expected_count(n_groups: int, fraction: float) -> int:
    count = math.floor(n_groups * fraction + 0.5)
    return max(count, 1) if fraction > 0 else 0


@settings(max_examples=60, deadline=None)
@given(
    group_of=st.lists(st.integers(0, 30), min_size=12, max_size=80),
    label_seed=st.integers(0, 10_000),
    val=st.sampled_from([0.0, 0.1, 0.2, 0.3]),
    test=st.sampled_from([0.05, 0.1, 0.25]),
    seed=st.integers(0, 2**31),
    multilabel=st.booleans(),
)
def test_split_is_a_partition_that_never_splits_a_group(
    group_of: list[int], label_seed: int, val: float, test: float, seed: int, multilabel: bool
) -> None:
    groups = np.array([f"g{g}" for g in group_of])
    rng = np.random.default_rng(label_seed)
    labels = (
        rng.integers(0, 2, size=(len(groups), 3))
        if multilabel
        else rng.integers(0, 3, size=len(groups))
    )
    n_groups = len(set(group_of))
    if _expected_count(n_groups, val) + _expected_count(n_groups, test) >= n_groups:
        with pytest.raises(ValueError, match="no training group"):
            split_groups(groups, labels, val_split=val, test_split=test, seed=seed)
        return
    parts = split_groups(groups, labels, val_split=val, test_split=test, seed=seed)
    joined = np.concatenate(parts)
    assert sorted(joined.tolist()) == list(range(len(groups)))
    assert all(np.all(np.diff(part) > 0) for part in parts)
    owners = [set(groups[part]) for part in parts]
    assert not (owners[0] & owners[1] or owners[0] & owners[2] or owners[1] & owners[2])
    assert len(owners[2]) == _expected_count(n_groups, test)
    assert len(owners[1]) == _expected_count(n_groups, val)
    again = split_groups(groups, labels, val_split=val, test_split=test, seed=seed)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


def test_stratification_spreads_every_class() -> None:
    groups = np.repeat(np.arange(200), 2).astype(str)
    labels = np.repeat(np.r_[np.zeros(160), np.ones(40)].astype(int), 2)
    for seed in range(5):
        _, val, test = split_groups(groups, labels, val_split=0.2, test_split=0.25, seed=seed)
        assert labels[test].mean() == pytest.approx(0.2, abs=0.03)
        assert labels[val].mean() == pytest.approx(0.2, abs=0.03)


def test_a_new_seed_redraws_the_split() -> None:
    groups = np.arange(50).astype(str)
    labels = np.arange(50) % 2
    first = split_groups(groups, labels, val_split=0.2, test_split=0.2, seed=0)[2]
    second = split_groups(groups, labels, val_split=0.2, test_split=0.2, seed=1)[2]
    assert not np.array_equal(first, second)
    unstratified = split_groups(
        groups, labels, val_split=0.2, test_split=0.2, seed=0, stratify=False
    )[2]
    assert len(unstratified) == 10


@pytest.mark.parametrize(
    ("val", "test", "pattern"),
    [(-0.1, 0.1, "val_split"), (0.5, 0.5, "below 1"), (0.1, float("nan"), "test_split")],
)
def test_bad_fractions(val: float, test: float, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        split_groups(["a", "b", "c"], [0, 1, 0], val_split=val, test_split=test, seed=0)
    with pytest.raises(ValueError, match=pattern):
        ECGDataModule(dataset_class=SyntheticAFDataset, val_split=val, test_split=test)


def test_too_few_groups_and_length_mismatch() -> None:
    with pytest.raises(ValueError, match=r"3 group\(s\) cannot be split"):
        split_groups(["a", "b", "c"], [0, 1, 0], val_split=0.5, test_split=0.4, seed=0)
    with pytest.raises(ValueError, match="one entry per label row"):
        split_groups(["a", "b"], [0, 1, 0], val_split=0.3, test_split=0.3, seed=0)


def test_module_requires_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ECGDataModule()
    with pytest.raises(ValueError, match="exactly one"):
        ECGDataModule(dataset=SyntheticAFDataset(n_patients=5), dataset_class=SyntheticAFDataset)


def test_module_splits_loads_and_reports() -> None:
    module = ECGDataModule(
        dataset_class=SyntheticPTBXLDataset,
        leads=["II", "V1"],
        batch_size=8,
        seed=5,
        dataset_kwargs={"n_patients": 20, "leads": ["V5"]},  # dataset_kwargs win
    )
    assert module.input_channels == 1 and module.dataset.leads == ["V5"]
    module.setup()
    dataset = module.dataset
    module.setup()  # idempotent: same dataset, same split
    assert module.dataset is dataset
    info = module.split_info()
    assert set(info) == {
        "n_train",
        "n_val",
        "n_test",
        "n_test_groups",
        "n_train_groups",
        "n_val_groups",
    }
    assert info["n_test_groups"] == 2 and info["n_val_groups"] == 4
    assert info["n_train"] + info["n_val"] + info["n_test"] == len(dataset)
    x, y = next(iter(module.train_dataloader()))
    assert x.shape == (8, 1, 1000) and x.dtype == torch.float32
    assert y.shape == (8, 5) and y.dtype == torch.float32
    assert (module.task, module.num_classes, module.sampling_rate) == ("multilabel", 5, 100)
    assert module.dataset_name == "synthetic-ptbxl"
    np.testing.assert_array_equal(
        module.split_groups_of("val"), dataset.groups[module.split_indices("val")]
    )
    with pytest.raises(ValueError, match="unknown split 'holdout'"):
        module.split_indices("holdout")


def test_training_order_is_seeded_and_evaluation_order_fixed() -> None:
    def batches(seed: int, loader: str) -> list[torch.Tensor]:
        module = ECGDataModule(
            dataset_class=SyntheticAFDataset, seed=seed, dataset_kwargs={"n_patients": 20}
        )
        return [y for _, y in getattr(module, f"{loader}_dataloader")()]

    assert all(
        torch.equal(a, b) for a, b in zip(batches(1, "train"), batches(1, "train"), strict=True)
    )
    labels = np.concatenate([y.numpy() for y in batches(1, "test")])
    module = ECGDataModule(
        dataset_class=SyntheticAFDataset, seed=1, dataset_kwargs={"n_patients": 20}
    )
    np.testing.assert_array_equal(labels, module.dataset.labels[module.split_indices("test")])
