"""``ECGEvaluator``: metrics, bootstrap intervals, cross-validation and reports.

One object turns a model (or stored predictions) and a test split into the
numbers of :mod:`deepecgkit.evaluation.metrics`, with three additions:

* a percentile bootstrap whose every resample is computed by the vectorised
  engine of :mod:`deepecgkit.evaluation._bootstrap`, so an interval describes
  exactly the number :meth:`ECGEvaluator.evaluate` reports; given ``groups``
  (patient or recording of each segment) it resamples groups, and without
  them its output says that the samples were assumed independent;
* (through :func:`deepecgkit.training.cross_validate`, which fits the models)
  group-aware cross-validation, where a patient or recording never straddles
  a fold boundary;
* a tabular report with calibration before and after temperature scaling.

torch is imported only on the paths that run a torch model or build a
DataLoader; a model counts as a torch module only when torch is already in
``sys.modules`` and ``isinstance(model, torch.nn.Module)``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import numbers
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from deepecgkit._compat import REMOVED_IN
from deepecgkit.defaults import CONFIDENCE_LEVEL
from deepecgkit.evaluation._bootstrap import (
    bootstrap_metric_values,
    chunk_rows,
    draw_group_weight_chunks,
    draw_index_chunks,
    group_positions,
)
from deepecgkit.evaluation._links import logits_to_probabilities
from deepecgkit.evaluation._validation import (
    MATRIX_NDIM,
    check_n_bins,
    is_multilabel_target,
    to_numpy,
)
from deepecgkit.evaluation.constants import (
    AUC_METRIC,
    AVERAGE_MODES,
    DEFAULT_BOOTSTRAP_RESAMPLES,
    DEFAULT_EVALUATOR_METRICS,
    MAX_CLASSIFICATION_CLASSES,
    PREDICTION_BATCH_SIZE,
    REGRESSION_METRICS,
    SUPPORTED_METRICS,
    TASK_TYPE_AUTO,
    TASK_TYPE_CLASSIFICATION,
    TASK_TYPE_REGRESSION,
    TASK_TYPES,
)
from deepecgkit.evaluation.metrics import (
    calculate_classification_metrics,
    calculate_regression_metrics,
    resolve_average,
)
from deepecgkit.evaluation.recalibration import calibration_report
from deepecgkit.io import atomic_write_text
from deepecgkit.rundir.format import DEFAULT_CALIBRATION_BINS, PROBABILITY_SUM_TOLERANCE
from deepecgkit.rundir.metrics import resolve_spelling

__all__ = ["ECGEvaluator"]

logger = logging.getLogger(__name__)

_NAN = float("nan")
#: Report columns (fixed names).
METRIC_COLUMN = "Metric"
VALUE_COLUMN = "Value"
STD_COLUMN = "Std"
LOWER_COLUMN = "95% CI Lower"
UPPER_COLUMN = "95% CI Upper"
RESAMPLING_COLUMN = "Resampling"
UNITS_COLUMN = "Resampled units"
#: What a bootstrap resampled: whole groups, or samples taken as independent.
RESAMPLED_GROUPS = "groups"
RESAMPLED_SAMPLES = "samples (assumed independent)"
#: Tuple lengths ``evaluate`` understands for ``test_data``.
_PAIR = 2
_TRIPLE = 3
#: An inner split needs at least two parts: one to fit, one to tune.
_MIN_INNER_FOLDS = 2


def _evaluator_spelling(name: Any) -> Any:
    """The evaluator's spelling of a metric name given in any registry spelling.

    ``auroc`` and ``roc_auc`` become ``auc`` (aliases are accepted on input; results
    are keyed by the evaluator's spelling); an unknown name is returned as given,
    for the caller's error message.
    """
    try:
        return resolve_spelling(name, SUPPORTED_METRICS)
    except (ValueError, TypeError):
        return name


def _torch_module(model: Any) -> bool:
    """A torch module only if torch is already imported (an object can't be one otherwise)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def _is_data_loader(data: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(data, torch.utils.data.DataLoader)


def _outputs_to_probabilities(outputs: np.ndarray, multilabel: bool) -> np.ndarray:
    """Rule 2.2 for a torch classifier's outputs (evaluator variant, with rule 4).

    Non-float or higher-dimensional outputs stay as they are; a single logit
    becomes ``[1 − σ(z), σ(z)]``; multi-label outputs get sigmoids; rows that
    are already probabilities are kept; anything else gets a row softmax.
    """
    if outputs.dtype.kind != "f" or outputs.ndim > MATRIX_NDIM:
        return outputs
    z = outputs.astype(np.float64)
    if z.ndim == 1 or z.shape[1] == 1:
        return logits_to_probabilities(z.reshape(-1), multilabel=False)
    if multilabel:
        return logits_to_probabilities(z, multilabel=True)
    if np.all(z >= 0) and np.all(np.abs(z.sum(axis=1) - 1.0) <= PROBABILITY_SUM_TOLERANCE):
        return z
    return logits_to_probabilities(z, multilabel=False)


def _percentile_summary(values: np.ndarray, confidence_level: float) -> dict[str, float] | None:
    """Mean, SD (ddof 0) and percentile interval over the defined resamples."""
    defined = values[~np.isnan(values)]
    if defined.size == 0:
        return None
    alpha = 1.0 - confidence_level
    return {
        "mean": float(np.mean(defined)),
        "std": float(np.std(defined)),
        "lower_ci": float(np.percentile(defined, 100.0 * alpha / 2.0)),
        "upper_ci": float(np.percentile(defined, 100.0 * (1.0 - alpha / 2.0))),
    }


#: The old positional order of :meth:`ECGEvaluator.cross_validate`.
_CROSS_VALIDATE_POSITIONAL = (
    "model_class",
    "data",
    "k_folds",
    "groups",
    "epochs",
    "batch_size",
    "train_config",
    "seed",
)


class ECGEvaluator:
    """Evaluate ECG models (or stored predictions) with intervals and calibration.

    Args:
        metrics: names from ``SUPPORTED_METRICS``; default
            ``("accuracy", "precision", "recall", "f1", "auc")``.
        task_type: ``"auto"``, ``"classification"`` or ``"regression"``.
        device: torch device for running torch models, resolved lazily with
            :func:`deepecgkit.utils.resolve_device` (constructing an evaluator
            never imports torch).
        calibration_bins: bins of the report's calibration rows (ECE depends on it).
        average: averaging of precision, recall and F1 (``AVERAGE_MODES``).

    Attributes:
        y_true: targets of the last call (None before any).
        y_scores: scores of the last call (None when none were given).

    Example:
        >>> ev = ECGEvaluator(metrics=["accuracy", "f1"])
        >>> ev.evaluate(np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0]))
        {'accuracy': 0.75, 'f1': 0.6666666666666666}
    """

    def __init__(
        self,
        metrics: list[str] | None = None,
        task_type: str = "auto",
        device: str = "auto",
        calibration_bins: int = DEFAULT_CALIBRATION_BINS,
        average: str = "auto",
    ) -> None:
        names = [
            _evaluator_spelling(name)
            for name in (list(metrics) if metrics is not None else DEFAULT_EVALUATOR_METRICS)
        ]
        unknown = [name for name in names if name not in SUPPORTED_METRICS]
        if unknown:
            raise ValueError(f"unknown metric(s) {unknown}; supported: {sorted(SUPPORTED_METRICS)}")
        if task_type not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {list(TASK_TYPES)}, got {task_type!r}")
        if average not in AVERAGE_MODES:
            raise ValueError(f"average must be one of {list(AVERAGE_MODES)}, got {average!r}")
        self.metrics = names
        self.task_type = task_type
        self.device = device
        self.calibration_bins = check_n_bins(calibration_bins)
        self.average = average
        self.y_true: np.ndarray | None = None
        self.y_scores: np.ndarray | None = None
        self._torch_device: Any = None
        self._task: str | None = None
        self._mode: str | None = None

    def __repr__(self) -> str:
        return (
            f"ECGEvaluator(metrics={self.metrics!r}, task_type={self.task_type!r}, "
            f"device={self.device!r}, calibration_bins={self.calibration_bins}, "
            f"average={self.average!r})"
        )

    # --- running models -------------------------------------------------------------------

    def _resolved_device(self) -> Any:
        if self._torch_device is None:
            from deepecgkit.utils import resolve_device

            self._torch_device = resolve_device(self.device)
        return self._torch_device

    @contextlib.contextmanager
    def _eval_mode(self, model: Any) -> Iterator[Any]:
        """Move a torch module to the evaluation device in eval mode, then restore it.

        Evaluating in training mode would keep dropout active and let test
        batches update batch-norm running statistics.
        """
        import torch

        device = self._resolved_device()
        was_training = model.training
        first = next(model.parameters(), None)
        previous_device = first.device if first is not None else None
        model.to(device)
        model.eval()
        try:
            with torch.no_grad():
                yield device
        finally:
            model.train(was_training)
            if previous_device is not None:
                model.to(previous_device)

    @staticmethod
    def _as_float_tensor(x: Any) -> Any:
        import torch

        if isinstance(x, torch.Tensor):
            return x
        return torch.as_tensor(np.asarray(x), dtype=torch.float32)

    def _run_torch(self, model: Any, x: Any) -> np.ndarray:
        """Outputs of a torch module on ``x``, in chunks of ``PREDICTION_BATCH_SIZE``."""
        tensor = self._as_float_tensor(x)
        with self._eval_mode(model) as device:
            outputs = [
                model(tensor[start : start + PREDICTION_BATCH_SIZE].to(device)).cpu().numpy()
                for start in range(0, tensor.shape[0], PREDICTION_BATCH_SIZE)
            ]
        return np.concatenate(outputs) if outputs else np.empty((0,))

    def _run(self, model: Any, x: Any) -> np.ndarray:
        if _torch_module(model):
            return self._run_torch(model, x)
        return to_numpy(model(x))

    def _run_loader(self, model: Any, loader: Any) -> tuple[np.ndarray, np.ndarray]:
        """Outputs and targets over a DataLoader whose batches are ``(x, y)``."""
        outputs: list[np.ndarray] = []
        targets: list[np.ndarray] = []
        torch_model = _torch_module(model)
        context = self._eval_mode(model) if torch_model else contextlib.nullcontext(None)
        with context as device:
            for batch in loader:
                if not (isinstance(batch, (list, tuple)) and len(batch) == _PAIR):
                    raise ValueError(
                        "targets are needed: the DataLoader's batches must be (x, y) pairs"
                    )
                x, y = batch
                if torch_model:
                    out = model(self._as_float_tensor(x).to(device)).cpu().numpy()
                else:
                    out = to_numpy(model(x))
                outputs.append(out)
                targets.append(to_numpy(y))
        if not outputs:
            raise ValueError("the DataLoader yielded no batches; no samples to evaluate")
        return np.concatenate(outputs), np.concatenate(targets)

    # --- input resolution -----------------------------------------------------------------

    @staticmethod
    def _from_tuple(test_data: tuple, *, model_is_none: bool) -> tuple[Any, Any, Any]:
        """(predictions, targets, scores-or-None) from a ``test_data`` tuple."""
        if len(test_data) == _PAIR:
            first, second = test_data
            return (first, second, None) if model_is_none else (None, second, None)
        if len(test_data) == _TRIPLE:
            first, second, third = test_data
            return (second, first, third) if model_is_none else (None, second, third)
        raise ValueError(
            f"test_data tuple must have 2 or 3 entries, got {len(test_data)}: use "
            "(predictions, targets) or (targets, predictions, scores) with model=None, or "
            "(x, targets) / (ignored, targets, scores) with a model"
        )

    def _resolve_inputs(
        self, model: Any, test_data: Any, y_scores: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, bool]:
        """Predictions, targets, scores and whether a torch module produced the predictions."""
        scores = y_scores
        if isinstance(model, np.ndarray):
            if test_data is None:
                raise ValueError("targets are needed: pass test_data=y (or a tuple ending in y)")
            predictions = model
            if isinstance(test_data, tuple):
                _, targets, tuple_scores = self._from_tuple(test_data, model_is_none=False)
                scores = tuple_scores if tuple_scores is not None else scores
            else:
                targets = test_data
            ran_torch = False
        elif model is None:
            if not isinstance(test_data, tuple):
                raise ValueError(
                    "with model=None, test_data must be a tuple (predictions, targets) or "
                    f"(targets, predictions, scores), got {type(test_data).__name__}"
                )
            predictions, targets, tuple_scores = self._from_tuple(test_data, model_is_none=True)
            scores = tuple_scores if tuple_scores is not None else scores
            ran_torch = False
        elif callable(model):
            ran_torch = _torch_module(model)
            if _is_data_loader(test_data):
                predictions, targets = self._run_loader(model, test_data)
            elif isinstance(test_data, tuple):
                if len(test_data) != _PAIR:
                    raise ValueError(
                        f"with a model, test_data must be a DataLoader or an (x, y) tuple; got a "
                        f"tuple of {len(test_data)} entries"
                    )
                x, targets = test_data
                predictions = self._run(model, x)
            else:
                raise ValueError(
                    "targets are needed: pass test_data=(x, y) or a DataLoader of (x, y) batches"
                )
        else:
            raise TypeError(
                "model must be an ndarray of predictions, None (with a test_data tuple), or a "
                f"callable model, got {type(model).__name__}"
            )
        targets_array = to_numpy(targets)
        predictions_array = to_numpy(predictions)
        scores_array = to_numpy(scores) if scores is not None else None
        return predictions_array, targets_array, scores_array, ran_torch

    def detect_task(self, targets: np.ndarray | None) -> str:
        """Classification or regression (``task_type`` wins unless it is ``"auto"``)."""
        if self.task_type != TASK_TYPE_AUTO:
            return self.task_type
        if all(name in REGRESSION_METRICS for name in self.metrics) or targets is None:
            return TASK_TYPE_REGRESSION
        if targets.dtype.kind not in "biuf":
            return TASK_TYPE_REGRESSION
        values = np.unique(targets)
        finite = np.isfinite(values) if values.dtype.kind == "f" else np.ones(values.shape, bool)
        whole = bool(np.all(finite) and np.all(values == np.round(values)))
        if whole and values.shape[0] <= MAX_CLASSIFICATION_CLASSES:
            return TASK_TYPE_CLASSIFICATION
        return TASK_TYPE_REGRESSION

    def _resolve_mode(self, predictions: np.ndarray, targets: np.ndarray) -> str:
        """The concrete averaging mode, resolved once per call from the full targets."""
        single_label_matrix = (
            predictions.ndim == MATRIX_NDIM
            and predictions.shape[1] > 1
            and not is_multilabel_target(targets)
        )
        n_classes = predictions.shape[1] if single_label_matrix else None
        return resolve_average(targets, average=self.average, n_classes=n_classes)

    def _auc_source(self, predictions: np.ndarray, scores: np.ndarray | None) -> np.ndarray:
        """Scores for AUC: given scores, else 2-D predictions (a matrix is its own score)."""
        if scores is not None:
            return scores
        if predictions.ndim == MATRIX_NDIM:
            return predictions
        raise ValueError("y_scores required for AUC")

    def _metric_values(
        self, predictions: np.ndarray, targets: np.ndarray, scores: np.ndarray | None, mode: str
    ) -> dict[str, float]:
        results: dict[str, float] = {}
        for name in self.metrics:
            if name in REGRESSION_METRICS:
                results[name] = calculate_regression_metrics(targets, predictions, metrics=[name])[
                    name
                ]
            elif name == AUC_METRIC:
                source = self._auc_source(predictions, scores)
                results[name] = calculate_classification_metrics(
                    targets, source, metrics=[name], average=mode
                )[name]
            else:
                results[name] = calculate_classification_metrics(
                    targets, predictions, metrics=[name], average=mode
                )[name]
        return results

    # --- public API -----------------------------------------------------------------------

    def evaluate(
        self,
        model: Any = None,
        test_data: Any = None,
        *,
        return_predictions: bool = False,
        y_scores: np.ndarray | None = None,
    ) -> dict[str, float] | tuple[dict[str, float], np.ndarray]:
        """Compute every configured metric on one split.

        Inputs (section 6 of the specification): ``model`` an ndarray of
        predictions with ``test_data`` the targets (or ``(ignored, y)`` /
        ``(ignored, y, scores)``); ``model=None`` with ``(predictions, y)`` or
        ``(y, predictions, scores)`` (note the order); or a callable model
        with a DataLoader of ``(x, y)`` batches or an ``(x, y)`` tuple. Only a
        torch module on a classification task has its outputs (logits)
        converted to probabilities; predictions passed in are never converted.

        Returns:
            ``{metric: float}``, or ``(dict, predictions)`` when ``return_predictions``.

        Raises:
            ValueError: no targets, a bad tuple, invalid inputs, or AUC requested
                with 1-D predictions and no ``y_scores``.
            TypeError: ``model`` is none of ndarray, None or callable.
        """
        self.y_scores = None if y_scores is None else to_numpy(y_scores)
        predictions, targets, scores, ran_torch = self._resolve_inputs(model, test_data, y_scores)
        task = self.detect_task(targets)
        if ran_torch and task == TASK_TYPE_CLASSIFICATION:
            predictions = _outputs_to_probabilities(predictions, is_multilabel_target(targets))
        mode = self._resolve_mode(predictions, targets)
        results = self._metric_values(predictions, targets, scores, mode)
        self.y_true, self.y_scores = targets, scores
        self._task, self._mode = task, mode
        return (results, predictions) if return_predictions else results

    def _bootstrap(
        self,
        predictions: np.ndarray,
        point: dict[str, float],
        n_bootstrap: int,
        confidence_level: float,
        groups: np.ndarray | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Percentile intervals around ``point`` for the last evaluated split."""
        names = [name for name, value in point.items() if not math.isnan(value)]
        if not names:
            return {}
        targets = self.y_true
        n_samples = targets.shape[0]
        auc_scores = self._auc_source(predictions, self.y_scores) if AUC_METRIC in names else None
        rows = chunk_rows(n_samples)
        if groups is None:
            logger.info(
                "bootstrap resamples the %d samples as independent; pass groups= (patient or "
                "recording of each sample) when several samples come from one source",
                n_samples,
            )
            chunks = draw_index_chunks(n_samples, n_bootstrap=n_bootstrap, rows=rows)
            values = bootstrap_metric_values(
                targets, predictions, auc_scores, names=names, mode=self._mode, index_chunks=chunks
            )
            resampling, n_units = RESAMPLED_SAMPLES, n_samples
        else:
            positions, n_units = group_positions(groups)
            weights = draw_group_weight_chunks(
                positions, n_groups=n_units, n_bootstrap=n_bootstrap, rows=rows
            )
            values = bootstrap_metric_values(
                targets,
                predictions,
                auc_scores,
                names=names,
                mode=self._mode,
                weight_chunks=weights,
            )
            resampling = RESAMPLED_GROUPS
        summary: dict[str, dict[str, Any]] = {}
        for name in names:
            stats = _percentile_summary(values[name], confidence_level)
            if stats is not None:
                summary[name] = {**stats, "resampling": resampling, "n_units": float(n_units)}
        return summary

    @staticmethod
    def _checked_groups(groups: Any, n_samples: int) -> np.ndarray | None:
        """Group ids as an ``(n,)`` array, or None; a ``ValueError`` for the wrong shape or gaps."""
        if groups is None:
            return None
        array = to_numpy(groups)
        if array.ndim != 1 or array.shape[0] != n_samples:
            raise ValueError(
                f"groups must hold one group id per sample ({n_samples}), got shape {array.shape}"
            )
        if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
            raise ValueError("groups contains non-finite ids; every sample needs a group")
        if array.dtype.kind == "O" and any(g is None for g in array):
            raise ValueError("groups contains missing ids (None); every sample needs a group")
        return array

    def bootstrap_evaluate(
        self,
        model: Any,
        test_data: Any,
        *,
        n_bootstrap: int = DEFAULT_BOOTSTRAP_RESAMPLES,
        confidence_level: float = CONFIDENCE_LEVEL,
        y_scores: np.ndarray | None = None,
        groups: np.ndarray | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Percentile bootstrap of every metric that is defined on the full split.

        Resamples come from numpy's global legacy generator, so
        ``np.random.seed`` makes intervals repeat exactly. Without ``groups``
        the index matrix ``np.random.choice(n, size=(n_bootstrap, n))`` is
        drawn in row blocks (the same stream) and the samples are treated as
        independent. With ``groups`` (one patient or recording id per sample,
        compared as strings) whole groups are resampled:
        ``np.random.choice(G, size=(n_bootstrap, G))`` over the sorted group
        ids, each drawn group contributing all its samples, which is what a
        fresh draw of patients would change. Metrics are computed for all
        resamples of a block at once.

        Returns:
            ``{metric: {"mean", "std", "lower_ci", "upper_ci", "resampling",
            "n_units"}}`` over the resamples where the metric is defined (a
            resample can lack a class); the first four are floats,
            ``resampling`` is ``"groups"`` or ``"samples (assumed
            independent)"`` and ``n_units`` the number of groups or samples
            resampled. A metric NaN on the full split, or on every resample,
            is omitted.

        Raises:
            ValueError: ``n_bootstrap < 1``, ``confidence_level`` outside (0, 1),
                ``groups`` not one id per sample, or any error of :meth:`evaluate`.
        """
        if (
            isinstance(n_bootstrap, (bool, np.bool_))
            or not isinstance(n_bootstrap, numbers.Integral)
            or n_bootstrap < 1
        ):
            raise ValueError(f"n_bootstrap must be an integer >= 1, got {n_bootstrap!r}")
        if not (
            isinstance(confidence_level, numbers.Real)
            and not isinstance(confidence_level, (bool, np.bool_))
            and 0.0 < float(confidence_level) < 1.0
        ):
            raise ValueError(
                f"confidence_level must be strictly between 0 and 1, got {confidence_level!r}"
            )
        point, predictions = self.evaluate(
            model, test_data, return_predictions=True, y_scores=y_scores
        )
        group_ids = self._checked_groups(groups, self.y_true.shape[0])
        return self._bootstrap(
            predictions, point, int(n_bootstrap), float(confidence_level), group_ids
        )

    def _calibration_rows(
        self, predictions: np.ndarray, calibration_fit: tuple | None
    ) -> list[dict[str, Any]]:
        scores = self.y_scores if self.y_scores is not None else predictions
        if self.y_true is None or self._task != TASK_TYPE_CLASSIFICATION:
            return []
        if scores.dtype.kind != "f":
            return []
        fit_targets, fit_logits = calibration_fit if calibration_fit is not None else (None, None)
        try:
            row = calibration_report(
                self.y_true,
                scores,
                n_bins=self.calibration_bins,
                fit_targets=fit_targets,
                fit_logits=fit_logits,
            )
        except Exception as exc:  # the metric rows are still worth reporting
            logger.warning("calibration rows left out (%s: %s)", type(exc).__name__, exc)
            return []
        return [
            {METRIC_COLUMN: name, VALUE_COLUMN: value}
            for name, value in row.items()
            if value is not None and not (isinstance(value, float) and math.isnan(value))
        ]

    def generate_report(
        self,
        model: Any,
        test_data: Any,
        *,
        save_path: str | None = None,
        y_scores: np.ndarray | None = None,
        calibration_fit: tuple | None = None,
        groups: np.ndarray | None = None,
    ) -> pd.DataFrame:
        """A table of every metric with bootstrap intervals, plus calibration rows.

        Args:
            model, test_data, y_scores: as for :meth:`evaluate`.
            save_path: write the table there as CSV (atomically, no index).
            calibration_fit: ``(fit_targets, fit_logits)`` of the validation
                split for temperature scaling (never the reported split);
                holders of probabilities convert them with
                :func:`~deepecgkit.evaluation.probabilities_to_logits`.
            groups: one patient or recording id per sample; the bootstrap then
                resamples groups (see :meth:`bootstrap_evaluate`).

        Returns:
            Columns ``Metric``, ``Value`` and, where the bootstrap ran, ``Std``,
            ``95% CI Lower``, ``95% CI Upper``, ``Resampling`` (``"groups"`` or
            ``"samples (assumed independent)"``) and ``Resampled units``;
            calibration rows in ``CALIBRATION_ROW_ORDER`` (undefined entries
            left out, per-label ``temperature_<k>`` after them for a
            multi-label fit) for classification with floating-point scores.
        """
        if calibration_fit is not None and not (
            isinstance(calibration_fit, tuple) and len(calibration_fit) == _PAIR
        ):
            raise ValueError(
                "calibration_fit must be a (fit_targets, fit_logits) tuple of the validation "
                f"split, got {type(calibration_fit).__name__}"
            )
        point, predictions = self.evaluate(
            model, test_data, return_predictions=True, y_scores=y_scores
        )
        group_ids = self._checked_groups(groups, self.y_true.shape[0])
        intervals: dict[str, dict[str, Any]] | None
        try:
            intervals = self._bootstrap(
                predictions, point, DEFAULT_BOOTSTRAP_RESAMPLES, CONFIDENCE_LEVEL, group_ids
            )
        except Exception as exc:  # intervals are optional; the point estimates stand
            logger.warning("bootstrap failed (%s: %s); no intervals", type(exc).__name__, exc)
            intervals = None
        rows: list[dict[str, Any]] = []
        for name, value in point.items():
            row: dict[str, Any] = {METRIC_COLUMN: name, VALUE_COLUMN: value}
            if intervals is not None:
                stats = intervals.get(name, {})
                row[STD_COLUMN] = stats.get("std", _NAN)
                row[LOWER_COLUMN] = stats.get("lower_ci", _NAN)
                row[UPPER_COLUMN] = stats.get("upper_ci", _NAN)
                row[RESAMPLING_COLUMN] = stats.get("resampling")
                row[UNITS_COLUMN] = stats.get("n_units", _NAN)
            rows.append(row)
        rows.extend(self._calibration_rows(predictions, calibration_fit))
        columns = [METRIC_COLUMN, VALUE_COLUMN]
        if intervals is not None:
            columns += [STD_COLUMN, LOWER_COLUMN, UPPER_COLUMN, RESAMPLING_COLUMN, UNITS_COLUMN]
        frame = pd.DataFrame(rows, columns=columns)
        if save_path is not None:
            atomic_write_text(save_path, frame.to_csv(index=False, lineterminator="\n"))
        return frame

    # --- cross-validation (moved to deepecgkit.training) ----------------------------------

    def cross_validate(self, *args: Any, **kwargs: Any) -> dict[str, list[float]]:
        """Deprecated: :func:`deepecgkit.training.cross_validate` with this evaluator.

        Cross-validation fits models, so it lives with training; this method
        delegates to it, with the same arguments and results, for one release.
        Positional arguments keep the method's old order
        (:data:`_CROSS_VALIDATE_POSITIONAL`).
        """
        warnings.warn(
            "ECGEvaluator.cross_validate is deprecated: call "
            "deepecgkit.training.cross_validate(evaluator, model_class, data, ...) "
            f"(the method is removed in deepecgkit {REMOVED_IN})",
            DeprecationWarning,
            stacklevel=2,
        )
        from deepecgkit.training.cross_validation import cross_validate

        if len(args) > len(_CROSS_VALIDATE_POSITIONAL):
            raise TypeError(
                f"cross_validate takes at most {len(_CROSS_VALIDATE_POSITIONAL)} positional "
                f"arguments ({', '.join(_CROSS_VALIDATE_POSITIONAL)}); got {len(args)}"
            )
        named = dict(zip(_CROSS_VALIDATE_POSITIONAL, args, strict=False))
        clash = sorted(set(named) & set(kwargs))
        if clash:
            raise TypeError(f"cross_validate got multiple values for {', '.join(clash)}")
        return cross_validate(self, **named, **kwargs)
