"""Frozen encoders: embeddings of a trained (or untrained) network.

Linear probes and transfer matrices compare *representations*, so the
network must not change while they are measured. :class:`FeatureExtractor`
puts the model in eval mode (BatchNorm uses its running statistics, dropout
is off) and switches off every gradient; it only ever calls
``model.extract_features`` under :func:`torch.inference_mode`. Embeddings
come back as a :class:`FeatureSet` that carries the labels and groups of the
split they were computed on, so a probe cannot pair features with the wrong
labels.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from tqdm.auto import tqdm

from deepecgkit.models.checkpoint import build_model_from_checkpoint, read_checkpoint
from deepecgkit.utils import AUTO_DEVICE, resolve_device

__all__ = [
    "DEFAULT_EXTRACT_BATCH_SIZE",
    "DEFAULT_EXTRACT_THREADS",
    "FeatureExtractor",
    "FeatureSet",
]

logger = logging.getLogger(__name__)

#: Windows embedded per forward pass.
DEFAULT_EXTRACT_BATCH_SIZE = 32
#: torch intra-op threads while embedding. One: the encoders are small and a
#: batch is a few dozen windows, so a second thread mostly waits for the
#: first (measured in ``benchmarks/bench_demo_build.py``: on a busy two-core
#: machine two threads cost several times the CPU time of one, and took
#: longer). The embeddings are the same either way.
DEFAULT_EXTRACT_THREADS = 1


@contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` torch intra-op threads, then restore the previous count.

    None leaves torch's setting alone.
    """
    if count is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass
class FeatureSet:
    """Embeddings of one split.

    Attributes:
        features: float32 ``(n, d)``.
        labels: ``(n,)`` int64 class indices, ``(n, K)`` multi-hot, or None.
        groups: ``(n,)`` group ids (patients or records), or None.
        model_name: registry name of the encoder.
        split: ``"train"``, ``"val"``, ``"test"`` or ``"array"``.
        dataset: dataset name, when known.
    """

    features: np.ndarray
    labels: np.ndarray | None = None
    groups: np.ndarray | None = None
    model_name: str | None = None
    split: str | None = None
    dataset: str | None = None

    def __len__(self) -> int:
        return int(self.features.shape[0])

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The features, so that ``np.asarray(feature_set)`` works."""
        array = self.features if dtype is None else self.features.astype(dtype, copy=False)
        return array.copy() if copy else array

    @property
    def feature_dim(self) -> int:
        """Embedding width ``d``."""
        return int(self.features.shape[1])


class FeatureExtractor:
    """Embed ECG windows with a frozen model's ``extract_features``.

    Args:
        model: a registered torch model (anything with ``extract_features``).
        model_name: name recorded in the FeatureSets; defaults to
            ``model._registry_name``.
        batch_size: windows per forward pass.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``...
        num_workers: DataLoader workers for :meth:`extract`.
        progress: show a progress bar while extracting.
        num_threads: torch intra-op threads while embedding (restored
            afterwards); None keeps torch's setting.

    Raises:
        ValueError: a model without ``extract_features``, or a non-positive
            batch size or thread count.
    """

    def __init__(
        self,
        model: nn.Module,
        model_name: str | None = None,
        batch_size: int = DEFAULT_EXTRACT_BATCH_SIZE,
        device: str = AUTO_DEVICE,
        num_workers: int = 0,
        progress: bool = False,
        num_threads: int | None = DEFAULT_EXTRACT_THREADS,
    ) -> None:
        if not callable(getattr(model, "extract_features", None)):
            raise ValueError(
                f"{type(model).__name__} has no extract_features method and cannot serve as an "
                "encoder (scikit-learn baselines such as logreg-features have no embedding)"
            )
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if num_threads is not None and int(num_threads) < 1:
            raise ValueError(f"num_threads must be at least 1 (or None), got {num_threads}")
        self.device = resolve_device(device)
        self.model = model.to(self.device).eval()
        for parameter in self.model.parameters():
            parameter.requires_grad_(False)
        self.model_name = model_name or getattr(model, "_registry_name", type(model).__name__)
        self.batch_size = int(batch_size)
        self.num_workers = int(num_workers)
        self.progress = bool(progress)
        self.num_threads = None if num_threads is None else int(num_threads)

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        *,
        model_name: str | None = None,
        input_channels: int | None = None,
        **kwargs: Any,
    ) -> FeatureExtractor:
        """Build an extractor from a checkpoint written by ``ECGTrainer``.

        Args:
            path: the ``checkpoint.pt`` file.
            model_name: registry name; defaults to the checkpoint's.
            input_channels: when given, must equal the checkpoint's lead count.
            **kwargs: passed to the constructor (``batch_size``, ``device``...).

        Raises:
            FileNotFoundError: no file at ``path``.
            ValueError: a lead-count mismatch, or weights that do not load
                strictly into the model.
        """
        checkpoint = read_checkpoint(path)
        model = build_model_from_checkpoint(
            checkpoint, source=path, model_name=model_name, input_channels=input_channels
        )
        return cls(model, model_name=model_name or checkpoint["model_name"], **kwargs)

    def _embed(self, loader: DataLoader, desc: str) -> np.ndarray:
        chunks: list[np.ndarray] = []
        batches = tqdm(loader, desc=desc, disable=not self.progress, leave=False)
        with torch.inference_mode(), torch_threads(self.num_threads):
            for batch in batches:
                x = batch[0] if isinstance(batch, (list, tuple)) else batch
                embedding = self.model.extract_features(x.to(self.device, dtype=torch.float32))
                chunks.append(embedding.detach().cpu().numpy().astype(np.float32, copy=False))
        if not chunks:
            width = int(getattr(self.model, "feature_dim", 0))
            return np.zeros((0, width), dtype=np.float32)
        return np.concatenate(chunks, axis=0)

    def extract(self, data_module: Any, split: str = "test") -> FeatureSet:
        """Embed one split of an ``ECGDataModule`` in split order.

        Args:
            data_module: an ``ECGDataModule`` (set up here when needed).
            split: ``"train"``, ``"val"`` or ``"test"``.

        Returns:
            A FeatureSet with the split's labels and groups. Extracting twice
            gives identical features.
        """
        loader = data_module.split_dataloader(
            split, batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers
        )
        features = self._embed(loader, desc=f"embed {split}")
        indices = data_module.split_indices(split)
        labels = np.asarray(data_module.dataset.labels)[indices]
        return FeatureSet(
            features=features,
            labels=labels,
            groups=np.asarray(data_module.split_groups_of(split)),
            model_name=self.model_name,
            split=split,
            dataset=data_module.dataset_name,
        )

    def extract_array(self, x: Any) -> np.ndarray:
        """Embed an array or tensor ``(n, L, T)``; returns float32 ``(n, feature_dim)``."""
        tensor = torch.as_tensor(np.asarray(x, dtype=np.float32) if not torch.is_tensor(x) else x)
        if tensor.ndim != 3:
            raise ValueError(f"x must have shape (n, leads, samples), got {tuple(tensor.shape)}")
        loader = DataLoader(TensorDataset(tensor.float()), batch_size=self.batch_size)
        return self._embed(loader, desc="embed array")
