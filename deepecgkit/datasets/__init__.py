"""ECG datasets: local files, named corpora, synthetic data, and the data module.

Importing this package registers every dataset (``af-classification``,
``mitbih-afdb``, ``ltafdb``, ``ptb-xl``, ``synthetic-af``,
``synthetic-rhythm``, ``synthetic-ptbxl``, and the contrast datasets
``synthetic-irregular-rr``, ``synthetic-long-pr``, ``synthetic-bradycardia``).
It imports torch; the analysis package must never import it.
"""

from deepecgkit.datasets.base import BaseECGDataset
from deepecgkit.datasets.datamodule import ECGDataModule, split_groups
from deepecgkit.datasets.errors import DatasetFormatError, DatasetNotFoundError
from deepecgkit.datasets.local import LocalECGDataset
from deepecgkit.datasets.named import (
    AFClassificationDataset,
    LTAFDBDataset,
    MITBIHAFDBDataset,
    PTBXLDataset,
)
from deepecgkit.datasets.synthetic_datasets import (
    SyntheticAFDataset,
    SyntheticBradycardiaDataset,
    SyntheticECGDataset,
    SyntheticIrregularRRDataset,
    SyntheticLongPRDataset,
    SyntheticPTBXLDataset,
    SyntheticRhythmDataset,
)

__all__ = [
    "AFClassificationDataset",
    "BaseECGDataset",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "ECGDataModule",
    "LTAFDBDataset",
    "LocalECGDataset",
    "MITBIHAFDBDataset",
    "PTBXLDataset",
    "SyntheticAFDataset",
    "SyntheticBradycardiaDataset",
    "SyntheticECGDataset",
    "SyntheticIrregularRRDataset",
    "SyntheticLongPRDataset",
    "SyntheticPTBXLDataset",
    "SyntheticRhythmDataset",
    "split_groups",
]
