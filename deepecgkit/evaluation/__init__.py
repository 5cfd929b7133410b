"""Evaluation: metrics, calibration, temperature scaling, probes, run scoring and figures.

The producer side of the project: it turns a model's outputs into numbers,
figures and the run directories (written through :mod:`deepecgkit.rundir.write`)
that :mod:`deepecgkit.analysis` consumes. Every public name of the submodules
is re-exported here; names that moved out of them still resolve for one
release, with a ``DeprecationWarning``.

Importing this package imports neither torch nor matplotlib (nor
scikit-learn): each submodule is imported on first access to one of its
names, and torch only on the paths that run a torch model.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from deepecgkit._compat import moved_modules

#: Submodules whose public names are re-exported, in lookup order. They are
#: imported on first access to one of their names (PEP 562), so importing
#: ``deepecgkit.evaluation.constants`` costs no scikit-learn import and the
#: Dagster code location stays fast to load.
_SUBMODULES = (
    "constants",
    "metrics",
    "calibration",
    "recalibration",
    "run_scoring",
    "evaluator",
    "probe",
    "transfer",
    "embedding",
    "visualization",
)
#: Old submodules whose names moved (``report``: the run-directory writer, now
#: :mod:`deepecgkit.rundir.write` and :mod:`~deepecgkit.evaluation.run_scoring`;
#: ``representation``: now ``probe``, ``transfer`` and ``embedding``).
_MOVED_SUBMODULES = ("report", "representation")
_WRITE = "deepecgkit.rundir.write"
_PROBE = "deepecgkit.evaluation.probe"
_TRANSFER = "deepecgkit.evaluation.transfer"
#: Where each name of the moved submodules lives now (old import paths, one release).
__moved_modules__ = {
    "report": {
        "atomic_write_bytes": "deepecgkit.io",
        "atomic_write_text": "deepecgkit.io",
        "params_fingerprint": _WRITE,
        "write_failed_run_report": _WRITE,
        "write_run_report": "deepecgkit.evaluation.run_scoring",
    },
    "representation": {
        "ProbeResult": _PROBE,
        "TransferMatrix": _TRANSFER,
        "build_probe": _PROBE,
        "cross_dataset_transfer": _TRANSFER,
        "embed_2d": "deepecgkit.evaluation.embedding",
        "linear_probe": _PROBE,
        "probe_encoder": _PROBE,
        "protocol_data_module": _TRANSFER,
    },
}
moved_modules(__name__, __moved_modules__)


def _submodule(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES or name in _MOVED_SUBMODULES:
        return _submodule(name)
    if name == "__all__":
        return sorted({n for sub in _SUBMODULES for n in _submodule(sub).__all__})
    for sub in _SUBMODULES:
        module = _submodule(sub)
        if name in module.__all__:
            value = getattr(module, name)
            globals()[name] = value
            return value
    for sub in (*_SUBMODULES, *_MOVED_SUBMODULES):
        module = _submodule(sub)
        if name in getattr(module, "__moved__", {}):
            return getattr(module, name)  # warns: an old import path
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")) | set(_SUBMODULES))
