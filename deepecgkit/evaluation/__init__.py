"""Evaluation: metrics, calibration, temperature scaling, reports and figures.

The producer side of the project: it turns a model's outputs into numbers,
figures and the run directories that :mod:`deepecgkit.analysis` consumes.
Every public name of the submodules is re-exported here.

Importing this package imports neither torch nor matplotlib: torch only on
the paths that run a torch model, and the plotting functions (and
matplotlib with them) on first access to one of them.
"""

from __future__ import annotations

from typing import Any

from deepecgkit.evaluation import (
    calibration,
    constants,
    evaluator,
    metrics,
    recalibration,
    report,
    representation,
)
from deepecgkit.evaluation.calibration import *  # noqa: F403
from deepecgkit.evaluation.constants import *  # noqa: F403
from deepecgkit.evaluation.evaluator import *  # noqa: F403
from deepecgkit.evaluation.metrics import *  # noqa: F403
from deepecgkit.evaluation.recalibration import *  # noqa: F403
from deepecgkit.evaluation.report import *  # noqa: F403
from deepecgkit.evaluation.representation import *  # noqa: F403

#: Plotting names, imported from ``visualization`` on first access (PEP 562),
#: so that ``import deepecgkit.evaluation`` does not import matplotlib.
_VISUALIZATION_NAMES = (
    "finalize_figure",
    "plot_calibration_curve",
    "plot_confusion_matrix",
    "plot_ecg_signals",
    "plot_embedding",
    "plot_predictions",
    "plot_reliability_diagram",
    "plot_roc_curve",
    "plot_training_curves",
    "plot_transfer_matrix",
)


def __getattr__(name: str) -> Any:
    if name in _VISUALIZATION_NAMES or name == "visualization":
        import importlib

        module = importlib.import_module("deepecgkit.evaluation.visualization")
        return module if name == "visualization" else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_VISUALIZATION_NAMES))


__all__ = [
    *calibration.__all__,
    *constants.__all__,
    *metrics.__all__,
    *recalibration.__all__,
    *report.__all__,
    *evaluator.__all__,
    *representation.__all__,
    *_VISUALIZATION_NAMES,
]
__all__ = sorted(set(__all__))
