"""Name → class lookup for models and datasets.

``train-grid``, the transfer matrix and the evaluator refer to models and
datasets by the names users type on the command line (``resnet1d``,
``synthetic-af``). Classes register themselves with a decorator where they
are defined; the lookups import :mod:`deepecgkit.models` and
:mod:`deepecgkit.datasets` on first use, so importing this module alone is
enough to find every entry.

Unknown names raise ``ValueError`` (not ``KeyError``): callers such as
``cross_dataset_transfer`` document ``ValueError`` for a bad name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = [
    "DATASET_ALIASES",
    "MODEL_KINDS",
    "get_dataset",
    "get_dataset_info",
    "get_dataset_names",
    "get_model",
    "get_model_info",
    "get_model_names",
    "register_dataset",
    "register_model",
]

#: Model kinds: trained by ``ECGTrainer`` or fitted by scikit-learn.
MODEL_KINDS = ("torch", "sklearn")
#: Alternative spellings accepted by the lookups.
DATASET_ALIASES = {"ptbxl": "ptb-xl"}
#: Modules whose import fills the registries.
_POPULATING_MODULES = ("deepecgkit.models", "deepecgkit.datasets")
#: Dataset tasks a registration may declare.
_DATASET_TASKS = ("binary", "multiclass", "multilabel")

T = TypeVar("T", bound=type)


@dataclass(frozen=True)
class _ModelEntry:
    cls: type
    description: str
    kind: str
    default_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _DatasetEntry:
    cls: type
    input_channels: int
    task: str
    num_classes: int | None
    description: str


_MODELS: dict[str, _ModelEntry] = {}
_DATASETS: dict[str, _DatasetEntry] = {}
_populated = False


def _populate() -> None:
    """Import the modules that register classes (once per process)."""
    global _populated
    if _populated:
        return
    _populated = True
    for module in _POPULATING_MODULES:
        importlib.import_module(module)


def register_model(
    name: str,
    *,
    description: str = "",
    kind: str = "torch",
    default_kwargs: dict[str, Any] | None = None,
) -> Callable[[T], T]:
    """Class decorator registering a model under ``name``.

    Args:
        name: the canonical name used by the CLI and in run directories.
        description: one line for listings.
        kind: ``"torch"`` (an ``nn.Module`` trained by ``ECGTrainer``) or
            ``"sklearn"`` (``fit``/``predict_proba``/``decision_function``).
        default_kwargs: constructor keywords used when a caller gives none.

    Raises:
        ValueError: ``kind`` is not one of :data:`MODEL_KINDS`, or ``name`` is
            already taken.
    """
    if kind not in MODEL_KINDS:
        raise ValueError(f"model kind must be one of {MODEL_KINDS}, got {kind!r}")

    def decorate(cls: T) -> T:
        if name in _MODELS:
            raise ValueError(
                f"model name {name!r} is already registered to {_MODELS[name].cls.__name__}"
            )
        _MODELS[name] = _ModelEntry(cls, description, kind, dict(default_kwargs or {}))
        cls._registry_name = name  # type: ignore[attr-defined]
        return cls

    return decorate


def register_dataset(
    name: str,
    *,
    input_channels: int,
    task: str,
    num_classes: int | None = None,
    description: str = "",
) -> Callable[[T], T]:
    """Class decorator registering a dataset under ``name``.

    Args:
        name: the canonical name used by the CLI and in run directories.
        input_channels: the default lead count.
        task: ``"binary"``, ``"multiclass"`` or ``"multilabel"``.
        num_classes: class (or label) count, when fixed.
        description: one line for listings.

    Raises:
        ValueError: unknown ``task`` or a duplicate ``name``.
    """
    if task not in _DATASET_TASKS:
        raise ValueError(f"dataset task must be one of {_DATASET_TASKS}, got {task!r}")

    def decorate(cls: T) -> T:
        if name in _DATASETS:
            raise ValueError(
                f"dataset name {name!r} is already registered to {_DATASETS[name].cls.__name__}"
            )
        _DATASETS[name] = _DatasetEntry(cls, int(input_channels), task, num_classes, description)
        cls._registry_name = name  # type: ignore[attr-defined]
        return cls

    return decorate


def _canonical_dataset(name: str) -> str:
    _populate()
    if not isinstance(name, str):
        raise ValueError(f"dataset name must be a string, got {name!r}")
    canonical = DATASET_ALIASES.get(name, name)
    if canonical not in _DATASETS:
        raise ValueError(
            f"unknown dataset {name!r}; available datasets: {', '.join(get_dataset_names())}"
        )
    return canonical


def _canonical_model(name: str) -> str:
    _populate()
    if not isinstance(name, str) or name not in _MODELS:
        raise ValueError(
            f"unknown model {name!r}; available models: {', '.join(get_model_names())}"
        )
    return name


def get_model(name: str) -> type:
    """Return the model class registered as ``name`` (``ValueError`` listing the names if none)."""
    return _MODELS[_canonical_model(name)].cls


def get_dataset(name: str) -> type:
    """Return the dataset class registered as ``name`` (alias ``ptbxl`` → ``ptb-xl``)."""
    return _DATASETS[_canonical_dataset(name)].cls


def get_model_names() -> list[str]:
    """Sorted canonical model names."""
    _populate()
    return sorted(_MODELS)


def get_dataset_names() -> list[str]:
    """Sorted canonical dataset names (aliases excluded)."""
    _populate()
    return sorted(_DATASETS)


def get_model_info(name: str) -> dict[str, Any]:
    """``{"class", "description", "kind", "default_kwargs"}`` of a registered model."""
    entry = _MODELS[_canonical_model(name)]
    return {
        "class": entry.cls,
        "description": entry.description,
        "kind": entry.kind,
        "default_kwargs": dict(entry.default_kwargs),
    }


def get_dataset_info(name: str) -> dict[str, Any]:
    """``{"class", "input_channels", "task", "num_classes", "description"}`` of a dataset."""
    entry = _DATASETS[_canonical_dataset(name)]
    return {
        "class": entry.cls,
        "input_channels": entry.input_channels,
        "task": entry.task,
        "num_classes": entry.num_classes,
        "description": entry.description,
    }
