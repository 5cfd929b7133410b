"""Small synthetic data modules for the model tests."""

from __future__ import annotations

import pytest

from deepecgkit.datasets import ECGDataModule, SyntheticAFDataset


@pytest.fixture(scope="module")
def af_module() -> ECGDataModule:
    """synthetic-af, 30 patients × 3 records, split by patient."""
    module = ECGDataModule(
        dataset_class=SyntheticAFDataset,
        batch_size=16,
        val_split=0.2,
        test_split=0.2,
        seed=3,
        dataset_kwargs={"n_patients": 30},
    )
    module.setup()
    return module
