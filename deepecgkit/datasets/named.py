"""The public ECG corpora the toolkit knows by name.

Each class fixes a corpus's expected classes, task and default leads; its
data are read with the generic local reader from ``data_dir`` (default
``$DEEPECG_DATA/<name>`` or ``~/.cache/deepecg/datasets/<name>``), which
must hold the corpus converted to the local layout (see
:mod:`deepecgkit.datasets.local`). Nothing is downloaded. The three AF
corpora are single-lead at their defaults, as the probe protocol requires;
PTB-XL keeps its twelve leads unless the caller picks some.
"""

from __future__ import annotations

from deepecgkit.datasets.base import TASK_BINARY, TASK_MULTICLASS, TASK_MULTILABEL
from deepecgkit.datasets.local import LocalECGDataset
from deepecgkit.registry import register_dataset

__all__ = ["AFClassificationDataset", "LTAFDBDataset", "MITBIHAFDBDataset", "PTBXLDataset"]

AF_RHYTHM_CLASSES = ("non-AF", "AF")
PTBXL_CLASSES = ("NORM", "MI", "STTC", "CD", "HYP")


@register_dataset(
    "af-classification",
    input_channels=1,
    task=TASK_MULTICLASS,
    num_classes=4,
    description="PhysioNet/CinC Challenge 2017: normal, AF, other rhythm, noisy (300 Hz, 1 lead)",
)
class AFClassificationDataset(LocalECGDataset):
    """PhysioNet/CinC Challenge 2017 single-lead recordings (classes N, A, O, ~)."""

    name = "af-classification"
    expected_classes = ("N", "A", "O", "~")
    expected_task = TASK_MULTICLASS
    default_lead_count = 1


@register_dataset(
    "mitbih-afdb",
    input_channels=1,
    task=TASK_BINARY,
    num_classes=2,
    description="MIT-BIH Atrial Fibrillation Database, rhythm spans (250 Hz, first lead)",
)
class MITBIHAFDBDataset(LocalECGDataset):
    """MIT-BIH AF Database: two leads at 250 Hz, labelled by rhythm spans."""

    name = "mitbih-afdb"
    expected_classes = AF_RHYTHM_CLASSES
    expected_task = TASK_BINARY
    default_lead_count = 1


@register_dataset(
    "ltafdb",
    input_channels=1,
    task=TASK_BINARY,
    num_classes=2,
    description="Long-Term AF Database, rhythm spans (128 Hz, first lead)",
)
class LTAFDBDataset(LocalECGDataset):
    """Long-Term AF Database: two leads at 128 Hz, labelled by rhythm spans."""

    name = "ltafdb"
    expected_classes = AF_RHYTHM_CLASSES
    expected_task = TASK_BINARY
    default_lead_count = 1


@register_dataset(
    "ptb-xl",
    input_channels=12,
    task=TASK_MULTILABEL,
    num_classes=5,
    description="PTB-XL diagnostic superclasses (100 or 500 Hz, 12 leads)",
)
class PTBXLDataset(LocalECGDataset):
    """PTB-XL 12-lead records with the five diagnostic superclasses as labels."""

    name = "ptb-xl"
    expected_classes = PTBXL_CLASSES
    expected_task = TASK_MULTILABEL
    default_lead_count = None
