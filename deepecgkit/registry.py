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
from dataclasses import dataclass, field, fields
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


def _registrar(
    table: dict[str, Any], noun: str, name: str, make_entry: Callable[[type], Any]
) -> Callable[[T], T]:
    """The class decorator that files ``make_entry(cls)`` under ``name`` in ``table``.

    ``noun`` (``"model"`` or ``"dataset"``) names the registry in the
    ``ValueError`` raised when ``name`` is already taken.
    """

    def decorate(cls: T) -> T:
        if name in table:
            raise ValueError(
                f"{noun} name {name!r} is already registered to {table[name].cls.__name__}"
            )
        table[name] = make_entry(cls)
        cls._registry_name = name  # type: ignore[attr-defined]
        return cls

    return decorate


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

    return _registrar(
        _MODELS,
        "model",
        name,
        lambda cls: _ModelEntry(cls, description, kind, dict(default_kwargs or {})),
    )


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

    return _registrar(
        _DATASETS,
        "dataset",
        name,
        lambda cls: _DatasetEntry(cls, int(input_channels), task, num_classes, description),
    )


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
    return _info(_MODELS[_canonical_model(name)])


def get_dataset_info(name: str) -> dict[str, Any]:
    """``{"class", "input_channels", "task", "num_classes", "description"}`` of a dataset."""
    return _info(_DATASETS[_canonical_dataset(name)])


def _info(entry: _ModelEntry | _DatasetEntry) -> dict[str, Any]:
    """``entry``'s fields in declaration order, ``cls`` under the key ``"class"``.

    Dict fields are copied, so a caller editing the answer leaves the registry as it was.
    """
    info: dict[str, Any] = {}
    for item in fields(entry):
        value = getattr(entry, item.name)
        info["class" if item.name == "cls" else item.name] = (
            dict(value) if isinstance(value, dict) else value
        )
    return info
