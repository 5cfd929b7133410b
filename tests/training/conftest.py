"""Small synthetic data modules for the training tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from deepecgkit.datasets import (
    ECGDataModule,
    SyntheticAFDataset,
    SyntheticPTBXLDataset,
    SyntheticRhythmDataset,
)

_DATASETS = {
    "binary": SyntheticAFDataset,
    "multiclass": SyntheticRhythmDataset,
    "multilabel": SyntheticPTBXLDataset,
}


def small_module(
    task: str, *, n_patients: int = 30, seed: int = 0, **kwargs: object
) -> ECGDataModule:
    """A set-up data module of one synthetic dataset (lead II only)."""
    module = ECGDataModule(
        dataset_class=_DATASETS[task],
        leads=["II"],
        batch_size=16,
        val_split=0.2,
        test_split=0.25,
        seed=seed,
        dataset_kwargs={"n_patients": n_patients, **kwargs},
    )
    module.setup()
    return module


@pytest.fixture
def make_module() -> Callable[..., ECGDataModule]:
    """The :func:`small_module` factory, for tests that need their own sizes or seeds."""
    return small_module


@pytest.fixture(scope="module")
def binary_module() -> ECGDataModule:
    return small_module("binary")


@pytest.fixture(scope="module")
def multiclass_module() -> ECGDataModule:
    return small_module("multiclass", n_patients=40)


@pytest.fixture(scope="module")
def multilabel_module() -> ECGDataModule:
    return small_module("multilabel")
