"""Seeded, group-aware train/validation/test splits and their loaders.

Records of one patient on both sides of a split leak: the model recognises
the patient, not the disease, and test scores inflate. :func:`split_groups`
therefore assigns whole groups (patients, else records) to splits, and
stratifies them so each split still gets about its share of every class.
A new seed redraws the split and nothing else: the data are fixed by the
dataset, the split by the seed, so seed-to-seed variation measures what a
multi-seed analysis needs to measure.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Subset

from deepecgkit.defaults import DEFAULT_RANDOM_STATE

__all__ = ["SPLITS", "ECGDataModule", "split_groups"]

logger = logging.getLogger(__name__)

SPLIT_TRAIN = "train"
SPLIT_VAL = "val"
SPLIT_TEST = "test"
SPLITS = (SPLIT_TRAIN, SPLIT_VAL, SPLIT_TEST)
#: Stratum of a multi-label group with no positive label.
_NO_LABEL_STRATUM = -1


def _split_count(n_groups: int, fraction: float) -> int:
    """``floor(G · fraction + 0.5)``, at least 1 when the fraction is positive."""
    count = math.floor(n_groups * fraction + 0.5)
    return max(count, 1) if fraction > 0 else 0


def _group_strata(
    inverse: np.ndarray, n_groups: int, labels: np.ndarray, stratify: bool
) -> np.ndarray:
    """One stratum per group (see :func:`split_groups`, step 3)."""
    if not stratify:
        return np.zeros(n_groups, dtype=np.int64)
    if labels.ndim == 1:
        codes = labels.astype(np.int64)
        n_codes = int(codes.max()) + 1 if codes.size else 1
        counts = np.zeros((n_groups, n_codes), dtype=np.int64)
        np.add.at(counts, (inverse, codes), 1)
        return counts.argmax(axis=1)  # argmax takes the smaller label on ties
    positives = labels.astype(bool)
    group_has = np.zeros((n_groups, positives.shape[1]), dtype=bool)
    np.logical_or.at(group_has, inverse, positives)
    prevalence = positives.sum(axis=0)
    # order labels by global prevalence (rarest first, smaller index on ties)
    order = np.lexsort((np.arange(prevalence.size), prevalence))
    ranked = group_has[:, order]
    first = ranked.argmax(axis=1)
    return np.where(ranked.any(axis=1), order[first], _NO_LABEL_STRATUM)


def split_groups(
    groups: Sequence[Any] | np.ndarray,
    labels: Sequence[Any] | np.ndarray,
    *,
    val_split: float,
    test_split: float,
    seed: int,
    stratify: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split item indices into train/val/test so that no group is split.

    Algorithm:

    1. The G distinct groups, sorted.
    2. ``n_test = floor(G · test_split + 0.5)``, at least 1 when
       ``test_split > 0``; ``n_val`` likewise. ``n_test + n_val >= G`` is an
       error: the training split would be empty.
    3. A group's stratum: single-label, its most frequent label (ties → the
       smaller); multi-label, the positive label among its items that is
       rarest in the whole dataset (ties → smaller index), or "none";
       ``stratify=False`` puts every group in one stratum.
    4. ``rng = np.random.default_rng(seed)``; for each stratum in sorted
       order, permute its groups and give the group at position j of a
       stratum of size m the key ``(j + u) / m`` with ``u ~ U(0, 1)`` drawn
       per group in that order.
    5. Sort all groups by key (stable): the first ``n_test`` go to test, the
       next ``n_val`` to validation, the rest to training.

    Spreading each stratum evenly along ``[0, 1)`` gives every split about
    its share of each class while whole groups move together.

    Args:
        groups: ``(n,)`` group id per item.
        labels: ``(n,)`` class indices or ``(n, K)`` multi-hot.
        val_split: fraction of groups for validation, ``>= 0``.
        test_split: fraction of groups for test, ``>= 0``.
        seed: seed of the split.
        stratify: balance classes across splits.

    Returns:
        Sorted int64 index arrays ``(train, val, test)``.

    Raises:
        ValueError: mismatched lengths, bad fractions, or too few groups.
    """
    group_array = np.asarray(groups)
    label_array = np.asarray(labels)
    if group_array.ndim != 1 or label_array.shape[:1] != group_array.shape:
        raise ValueError(
            f"groups must be 1-D with one entry per label row; got {group_array.shape} groups "
            f"and {label_array.shape} labels"
        )
    _check_fractions(val_split, test_split)
    unique, inverse = np.unique(group_array, return_inverse=True)
    n_groups = unique.size
    n_test = _split_count(n_groups, test_split)
    n_val = _split_count(n_groups, val_split)
    if n_test + n_val >= n_groups:
        raise ValueError(
            f"{n_groups} group(s) cannot be split with val_split={val_split} and "
            f"test_split={test_split}: {n_val} validation + {n_test} test groups leave no "
            "training group; use more groups or smaller fractions"
        )
    strata = _group_strata(inverse, n_groups, label_array, stratify)
    rng = np.random.default_rng(seed)
    keys = np.empty(n_groups)
    for stratum in np.unique(strata):  # a handful of strata, not one pass per group
        members = np.flatnonzero(strata == stratum)
        permuted = rng.permutation(members)
        offsets = rng.uniform(size=members.size)
        keys[permuted] = (np.arange(members.size) + offsets) / members.size
    order = np.argsort(keys, kind="stable")
    assignment = np.empty(n_groups, dtype=np.int64)
    assignment[order[:n_test]] = 2
    assignment[order[n_test : n_test + n_val]] = 1
    assignment[order[n_test + n_val :]] = 0
    item_split = assignment[inverse]
    return tuple(np.flatnonzero(item_split == code) for code in (0, 1, 2))  # type: ignore[return-value]


def _check_fractions(val_split: float, test_split: float) -> None:
    for name, value in (("val_split", val_split), ("test_split", test_split)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a fraction >= 0, got {value!r}")
    if val_split + test_split >= 1:
        raise ValueError(
            f"val_split + test_split must be below 1 to leave training data, "
            f"got {val_split} + {test_split}"
        )


def _check_keywords(dataset_class: type, kwargs: dict[str, Any]) -> None:
    """Name an option the dataset does not take instead of a bare ``TypeError``."""
    try:
        parameters = inspect.signature(dataset_class).parameters
    except (TypeError, ValueError):  # no introspectable signature: let the call decide
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    unknown = sorted(set(kwargs) - set(parameters))
    if unknown:
        name = getattr(dataset_class, "_registry_name", dataset_class.__name__)
        raise ValueError(
            f"dataset {name!r} does not accept the option(s) {', '.join(unknown)}; "
            f"it accepts {', '.join(sorted(parameters))}"
        )


class ECGDataModule:
    """Builds a dataset, splits it by group, and hands out DataLoaders.

    Args:
        dataset: an already-built dataset (exclusive with ``dataset_class``).
        dataset_class: a dataset class to build in :meth:`setup`.
        data_dir, sampling_rate, leads: passed to ``dataset_class`` when not None.
        download: passed to ``dataset_class``.
        batch_size: batch size of every loader.
        val_split, test_split: fractions of groups (see :func:`split_groups`).
        num_workers: DataLoader workers.
        seed: split seed; also seeds the training loader's shuffling.
        stratify: balance classes across splits.
        verbose: log the split sizes at INFO level.
        dataset_kwargs: further constructor keywords; they win over the above.

    Raises:
        ValueError: both or neither of ``dataset``/``dataset_class``, or bad
            split fractions.
    """

    def __init__(
        self,
        dataset: Dataset | None = None,
        dataset_class: type | None = None,
        data_dir: str | Path | None = None,
        sampling_rate: float | None = None,
        leads: list[str] | None = None,
        download: bool = False,
        batch_size: int = 32,
        val_split: float = 0.2,
        test_split: float = 0.1,
        num_workers: int = 0,
        seed: int = DEFAULT_RANDOM_STATE,
        stratify: bool = True,
        verbose: bool = False,
        dataset_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if (dataset is None) == (dataset_class is None):
            raise ValueError("pass exactly one of dataset and dataset_class")
        _check_fractions(val_split, test_split)
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self._dataset = dataset
        self.dataset_class = dataset_class
        self.data_dir = data_dir
        self.sampling_rate_arg = sampling_rate
        self.leads = leads
        self.download = download
        self.batch_size = int(batch_size)
        self.val_split = float(val_split)
        self.test_split = float(test_split)
        self.num_workers = int(num_workers)
        self.seed = int(seed)
        self.stratify = bool(stratify)
        self.verbose = bool(verbose)
        self.dataset_kwargs = dict(dataset_kwargs or {})
        self._indices: dict[str, np.ndarray] | None = None

    # --- setup -----------------------------------------------------------------------------

    def _build_dataset(self) -> Dataset:
        kwargs: dict[str, Any] = {}
        if self.data_dir is not None:
            kwargs["data_dir"] = self.data_dir
        if self.sampling_rate_arg is not None:
            kwargs["sampling_rate"] = self.sampling_rate_arg
        if self.leads is not None:
            kwargs["leads"] = self.leads
        kwargs["download"] = self.download
        kwargs.update(self.dataset_kwargs)
        assert self.dataset_class is not None
        _check_keywords(self.dataset_class, kwargs)
        return self.dataset_class(**kwargs)

    def setup(self, stage: str | None = None) -> None:
        """Build the dataset and split it, once (later calls do nothing)."""
        if self._indices is not None:
            return
        if self._dataset is None:
            self._dataset = self._build_dataset()
        dataset = self._dataset
        groups = getattr(dataset, "groups", None)
        if groups is None:
            groups = np.arange(len(dataset)).astype(str)
        labels = np.asarray(
            dataset.get_labels() if hasattr(dataset, "get_labels") else dataset.labels
        )
        train, val, test = split_groups(
            groups,
            labels,
            val_split=self.val_split,
            test_split=self.test_split,
            seed=self.seed,
            stratify=self.stratify,
        )
        self._indices = {SPLIT_TRAIN: train, SPLIT_VAL: val, SPLIT_TEST: test}
        info = self.split_info()
        logger.log(
            logging.INFO if self.verbose else logging.DEBUG,
            "%s seed %d: %d/%d/%d windows in %d/%d/%d groups (train/val/test)",
            self.dataset_name,
            self.seed,
            info["n_train"],
            info["n_val"],
            info["n_test"],
            info["n_train_groups"],
            info["n_val_groups"],
            info["n_test_groups"],
        )

    # --- accessors ---------------------------------------------------------------------------

    @property
    def dataset(self) -> Any:
        """The dataset (built on first access)."""
        self.setup()
        return self._dataset

    def _split(self, split: str) -> np.ndarray:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
        self.setup()
        assert self._indices is not None
        return self._indices[split]

    def split_indices(self, split: str) -> np.ndarray:
        """Sorted dataset indices of ``split`` (``"train"``, ``"val"`` or ``"test"``)."""
        return self._split(split).copy()

    def split_groups_of(self, split: str) -> np.ndarray:
        """Group ids of the split's items, in split order."""
        indices = self._split(split)
        groups = getattr(self.dataset, "groups", None)
        if groups is None:
            return indices.astype(str)
        return np.asarray(groups)[indices]

    def split_info(self) -> dict[str, int]:
        """Window and group counts of every split."""
        info: dict[str, int] = {}
        for split in SPLITS:
            info[f"n_{split}"] = int(self._split(split).size)
        for split in (SPLIT_TEST, SPLIT_TRAIN, SPLIT_VAL):
            info[f"n_{split}_groups"] = int(np.unique(self.split_groups_of(split)).size)
        return info

    @property
    def dataset_name(self) -> str:
        """Registered name of the dataset (else its ``name`` attribute or class name)."""
        source = self._dataset if self._dataset is not None else self.dataset_class
        name = getattr(source, "name", None) or getattr(source, "_registry_name", None)
        return str(name or type(source).__name__)

    @property
    def class_names(self) -> list[str]:
        """Class or label names, position = index."""
        return list(self.dataset.class_names)

    @property
    def task(self) -> str:
        """``"binary"``, ``"multiclass"`` or ``"multilabel"``."""
        return str(self.dataset.task)

    @property
    def num_classes(self) -> int:
        """Number of classes (or labels)."""
        return len(self.dataset.class_names)

    @property
    def input_channels(self) -> int:
        """Lead count of every window."""
        return int(self.dataset.signals.shape[1])

    @property
    def sampling_rate(self) -> float:
        """Hz of the windows."""
        return self.dataset.sampling_rate

    # --- loaders ------------------------------------------------------------------------------

    def split_dataloader(
        self,
        split: str,
        *,
        batch_size: int | None = None,
        shuffle: bool = False,
        num_workers: int | None = None,
    ) -> DataLoader:
        """A DataLoader over one split (shuffled only on request, seeded by ``seed``)."""
        subset = Subset(self.dataset, self._split(split).tolist())
        generator = torch.Generator().manual_seed(self.seed) if shuffle else None
        return DataLoader(
            subset,
            batch_size=batch_size or self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers if num_workers is None else num_workers,
            generator=generator,
            drop_last=False,
        )

    def train_dataloader(self) -> DataLoader:
        """Shuffled training batches ``(x (B, L, T), y)``."""
        return self.split_dataloader(SPLIT_TRAIN, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        """Validation batches in split order."""
        return self.split_dataloader(SPLIT_VAL)

    def test_dataloader(self) -> DataLoader:
        """Test batches in split order."""
        return self.split_dataloader(SPLIT_TEST)
