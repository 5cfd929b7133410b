"""The sample contract every ECG dataset of the toolkit follows.

Item ``i`` is ``(signal, label)``: a float32 tensor ``(n_leads, n_samples)``
and either an int64 scalar tensor (single-label) or a float32 ``(K,)``
multi-hot tensor (multi-label). Alongside the items a dataset exposes, per
item, its ``groups`` (the patient, else the record) and ``record_ids``, so
that splits can keep every patient on one side. All windows are held in
memory as one float32 array: the corpora this toolkit targets fit, and it
makes loading a batch an indexing operation.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

__all__ = [
    "DATA_ENV_VAR",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_SEGMENT_SECONDS",
    "TASKS",
    "BaseECGDataset",
    "LoadedWindows",
]

logger = logging.getLogger(__name__)

#: Environment variable naming the root folder of local datasets.
DATA_ENV_VAR = "DEEPECG_DATA"
#: Root folder used when :data:`DATA_ENV_VAR` is unset.
DEFAULT_CACHE_DIR = Path("~/.cache/deepecg/datasets")
#: Window length (s) when neither the caller nor ``dataset.json`` gives one.
DEFAULT_SEGMENT_SECONDS = 10.0
TASK_BINARY = "binary"
TASK_MULTICLASS = "multiclass"
TASK_MULTILABEL = "multilabel"
TASKS = (TASK_BINARY, TASK_MULTICLASS, TASK_MULTILABEL)


@dataclass
class LoadedWindows:
    """What a dataset's loader hands to :class:`BaseECGDataset`.

    Attributes:
        name: dataset name.
        signals: float32 ``(n, L, T)`` preprocessed windows.
        labels: int64 ``(n,)`` or int8 ``(n, K)``.
        groups: ``(n,)`` str group ids.
        record_ids: ``(n,)`` str record ids.
        class_names: names, position = class index.
        task: one of :data:`TASKS`.
        sampling_rate: Hz after resampling.
        leads: lead names in channel order.
    """

    name: str
    signals: np.ndarray
    labels: np.ndarray
    groups: np.ndarray
    record_ids: np.ndarray
    class_names: list[str]
    task: str
    sampling_rate: float
    leads: list[str]


class BaseECGDataset(Dataset):
    """In-memory windows with labels, groups and record ids.

    Subclasses implement :meth:`_load`, returning :class:`LoadedWindows`; the
    constructor stores the common keywords first so ``_load`` can read them.

    Args:
        data_dir: dataset folder; :meth:`get_default_data_dir` when None.
        sampling_rate: target rate (Hz); the native rate when None.
        leads: lead names to keep; the dataset's default when None.
        segment_seconds: window length (s); the dataset's own, else 10 s,
            when None.
        download: fetch missing data. Nothing can be fetched here (no
            network), so a missing dataset is an error either way; the
            message then says how to prepare it.
        force_download: accepted for compatibility and ignored (logged).
        verbose: log a summary at INFO level instead of DEBUG.
        transform: applied to each signal tensor.
        target_transform: applied to each label tensor.
    """

    name: str = ""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        sampling_rate: float | None = None,
        leads: list[str] | tuple[str, ...] | None = None,
        segment_seconds: float | None = None,
        download: bool = False,
        force_download: bool = False,
        verbose: bool = False,
        transform: Callable[[torch.Tensor], Any] | None = None,
        target_transform: Callable[[torch.Tensor], Any] | None = None,
    ) -> None:
        super().__init__()
        if sampling_rate is not None and not float(sampling_rate) > 0:
            raise ValueError(f"sampling_rate must be positive, got {sampling_rate}")
        if segment_seconds is not None and not float(segment_seconds) > 0:
            raise ValueError(f"segment_seconds must be positive, got {segment_seconds}")
        if isinstance(leads, str):
            leads = [leads]
        self.data_dir = Path(data_dir).expanduser() if data_dir is not None else None
        self.requested_sampling_rate = sampling_rate
        self.requested_leads = list(leads) if leads is not None else None
        self.segment_seconds = segment_seconds
        self.download = bool(download)
        self.verbose = bool(verbose)
        self.transform = transform
        self.target_transform = target_transform
        if force_download:
            logger.info("force_download is ignored: deepecgkit never downloads data")
        loaded = self._load()
        self._adopt(loaded)
        logger.log(
            logging.INFO if self.verbose else logging.DEBUG,
            "%s: %d windows of %d lead(s) x %d samples at %g Hz from %d groups",
            self.name,
            len(self),
            len(self.leads),
            self.signals.shape[-1],
            self.sampling_rate,
            len(np.unique(self.groups)),
        )

    def _load(self) -> LoadedWindows:
        raise NotImplementedError(f"{type(self).__name__} must implement _load()")

    def _adopt(self, loaded: LoadedWindows) -> None:
        n = loaded.signals.shape[0]
        for field_name in ("labels", "groups", "record_ids"):
            length = len(getattr(loaded, field_name))
            if length != n:
                raise ValueError(f"{loaded.name}: {n} windows but {length} {field_name}")
        self.name = loaded.name
        self.signals = np.ascontiguousarray(loaded.signals, dtype=np.float32)
        self.labels = loaded.labels
        self.groups = np.asarray(loaded.groups, dtype=str)
        self.record_ids = np.asarray(loaded.record_ids, dtype=str)
        self.class_names = list(loaded.class_names)
        self.task = loaded.task
        self.sampling_rate = (
            int(loaded.sampling_rate)
            if float(loaded.sampling_rate).is_integer()
            else float(loaded.sampling_rate)
        )
        self.leads = list(loaded.leads)

    @classmethod
    def get_default_data_dir(cls) -> Path:
        """The dataset's default folder: ``$DEEPECG_DATA/<name>``, else the user cache.

        The cache is ``~/.cache/deepecg/datasets/<name>``.

        Raises:
            ValueError: the class has no registered name.
        """
        name = getattr(cls, "_registry_name", None) or cls.name
        if not name:
            raise ValueError(f"{cls.__name__} has no registered name; pass data_dir explicitly")
        root = os.environ.get(DATA_ENV_VAR)
        base = Path(root) if root else DEFAULT_CACHE_DIR
        return (base / name).expanduser()

    def get_labels(self) -> np.ndarray:
        """Labels of every item: int64 ``(n,)`` or int8 ``(n, K)``."""
        return self.labels

    @property
    def num_classes(self) -> int:
        """Number of classes (single-label) or labels (multi-label)."""
        return len(self.class_names)

    def __len__(self) -> int:
        return int(self.signals.shape[0])

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        signal = torch.from_numpy(self.signals[index])
        if self.task == TASK_MULTILABEL:
            label = torch.as_tensor(self.labels[index], dtype=torch.float32)
        else:
            label = torch.as_tensor(int(self.labels[index]), dtype=torch.int64)
        if self.transform is not None:
            signal = self.transform(signal)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return signal, label
