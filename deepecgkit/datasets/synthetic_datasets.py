"""Registered synthetic datasets: generated in memory, no files needed.

They stand in for the real corpora in demos and tests: three that mimic
real corpora (``synthetic-af``, ``synthetic-rhythm``, ``synthetic-ptbxl``)
and three contrast datasets whose labels live in different places (the
rhythm over many beats, one beat's morphology, the heart rate), on which
the bundled example corpus is trained. The data are fixed
by ``data_seed`` (the split seed never changes them) and cached per process
by their arguments, so the many data modules of a seed grid generate them
once. Preprocessing is the same as for every other dataset (see
:mod:`deepecgkit.datasets.preprocessing`); ``data_dir`` is ignored.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from deepecgkit.datasets.base import BaseECGDataset, LoadedWindows
from deepecgkit.datasets.errors import DatasetFormatError
from deepecgkit.datasets.preprocessing import window_signals
from deepecgkit.datasets.synthetic import (
    STANDARD_LEADS,
    SYNTHETIC_SPECS,
    SyntheticData,
    make_synthetic,
)
from deepecgkit.registry import register_dataset

__all__ = [
    "SYNTHETIC_DURATION_S",
    "SYNTHETIC_SAMPLING_RATE",
    "SyntheticAFDataset",
    "SyntheticBradycardiaDataset",
    "SyntheticECGDataset",
    "SyntheticIrregularRRDataset",
    "SyntheticLongPRDataset",
    "SyntheticPTBXLDataset",
    "SyntheticRhythmDataset",
]

#: Native rate and record length of every synthetic dataset.
SYNTHETIC_SAMPLING_RATE = 100
SYNTHETIC_DURATION_S = 10.0
#: Distinct argument sets kept in the per-process cache.
_CACHE_SIZE = 8


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _generate(
    name: str,
    n_patients: int | None,
    records_per_patient: int | None,
    seed: int,
    leads: tuple[str, ...],
) -> SyntheticData:
    data = make_synthetic(
        name,
        n_patients=n_patients,
        records_per_patient=records_per_patient,
        seed=seed,
        sampling_rate=SYNTHETIC_SAMPLING_RATE,
        duration_s=SYNTHETIC_DURATION_S,
        leads=leads,
    )
    data.signals.flags.writeable = False  # shared by every dataset built from the cache
    data.labels.flags.writeable = False
    return data


class SyntheticECGDataset(BaseECGDataset):
    """Base of the synthetic datasets; subclasses set ``name``.

    Args:
        data_dir: ignored (the data are generated).
        sampling_rate, leads, segment_seconds, download, force_download,
            verbose, transform, target_transform: as for every dataset.
        n_patients: patients (the dataset's default size when None).
        records_per_patient: records per patient (default when None).
        data_seed: the seed that fixes the data.

    Raises:
        DatasetFormatError: an unknown lead (the message lists the 12 standard leads).
        ValueError: non-positive sizes or a negative seed.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *base_args: Any,
        n_patients: int | None = None,
        records_per_patient: int | None = None,
        data_seed: int = 0,
        **base_options: Any,
    ) -> None:
        # data_dir and the base options (sampling_rate, leads, ...) are
        # BaseECGDataset's, passed through unchanged.
        self.n_patients = n_patients
        self.records_per_patient = records_per_patient
        self.data_seed = int(data_seed)
        super().__init__(data_dir, *base_args, **base_options)

    def _load(self) -> LoadedWindows:
        spec = SYNTHETIC_SPECS[self.name]
        leads = tuple(self.requested_leads or spec.default_leads)
        missing = [lead for lead in leads if lead not in STANDARD_LEADS]
        if missing:
            raise DatasetFormatError(
                f"{self.name}: lead(s) {', '.join(missing)} not found; "
                f"available leads: {', '.join(STANDARD_LEADS)}"
            )
        data = _generate(
            self.name,
            None if self.n_patients is None else int(self.n_patients),
            None if self.records_per_patient is None else int(self.records_per_patient),
            self.data_seed,
            leads,
        )
        rate = float(self.requested_sampling_rate or SYNTHETIC_SAMPLING_RATE)
        windows = window_signals(
            data.signals,
            native_rate=SYNTHETIC_SAMPLING_RATE,
            target_rate=rate,
            window_s=float(self.segment_seconds or SYNTHETIC_DURATION_S),
        )
        index = windows.record_index
        return LoadedWindows(
            name=self.name,
            signals=windows.signals,
            labels=np.array(data.labels[index]),
            groups=np.asarray(data.groups)[index],
            record_ids=np.asarray(data.record_ids)[index],
            class_names=list(data.class_names),
            task=data.task,
            sampling_rate=rate,
            leads=list(leads),
        )


def _register(name: str) -> Any:
    spec = SYNTHETIC_SPECS[name]
    return register_dataset(
        name,
        input_channels=len(spec.default_leads),
        task=spec.task,
        num_classes=len(spec.class_names),
        description=spec.description,
    )


@_register("synthetic-af")
class SyntheticAFDataset(SyntheticECGDataset):
    """Sinus rhythm vs AF (binary), lead II, 150 patients × 3 records, AF in 35 %."""

    name = "synthetic-af"


@_register("synthetic-rhythm")
class SyntheticRhythmDataset(SyntheticECGDataset):
    """N / A / O / ~ (multiclass), lead II, 200 patients × 2 records."""

    name = "synthetic-rhythm"


@_register("synthetic-ptbxl")
class SyntheticPTBXLDataset(SyntheticECGDataset):
    """NORM / MI / STTC / CD / HYP (multi-label), 12 leads, 150 patients × 2 records."""

    name = "synthetic-ptbxl"


@_register("synthetic-irregular-rr")
class SyntheticIrregularRRDataset(SyntheticECGDataset):
    """Regular vs irregular RR intervals of identical sinus beats (binary), lead II, 600 × 1."""

    name = "synthetic-irregular-rr"


@_register("synthetic-long-pr")
class SyntheticLongPRDataset(SyntheticECGDataset):
    """Normal vs long PR interval, regular sinus rhythm (binary), lead II, 600 × 1."""

    name = "synthetic-long-pr"


@_register("synthetic-bradycardia")
class SyntheticBradycardiaDataset(SyntheticECGDataset):
    """Sinus rhythm above vs below 60 bpm (binary), lead II, 600 × 1."""

    name = "synthetic-bradycardia"
