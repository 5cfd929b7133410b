"""Temperature scaling (Guo et al. 2017) and the before/after calibration row.

Temperature scaling divides the logits by one scalar T > 0 fitted on held-out
data: T > 1 softens an overconfident model, T < 1 sharpens an underconfident
one. It never changes the argmax (nor, for a single logit, the sign), so
accuracy, F1 and AUC are untouched and only the calibration columns move.

Multi-label outputs get one temperature per label: each label is its own
sigmoid, and labels differ in how over- or underconfident they are, so one
shared T would trade one label's calibration against another's. The
multi-label NLL is a sum of per-label terms, so fitting each label's T on
its own column minimises it jointly. The ``temperature`` entry of a
multi-label row is the geometric mean of the per-label temperatures (a
summary), and ``temperature_<k>`` entries follow with each label's value.

The temperature is always fitted on a split other than the one reported
(validation, then report on test): reporting on the fitting split would
flatter it.

Layouts (section 2.1): a single logit ``(n,)``/``(n, 1)`` gives
``[1 − σ(z), σ(z)]``; ``(n, C)`` gives a row softmax; multi-label ``(n, K)``
gives element-wise sigmoids. NLL is in nats.

Reference: Guo, Pleiss, Sun & Weinberger 2017, "On Calibration of Modern
Neural Networks", ICML.
"""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

from deepecgkit.evaluation._links import (
    logits_to_probabilities,
    nll_from_logits,
    probabilities_to_logits_unchecked,
)
from deepecgkit.evaluation._validation import (
    MATRIX_NDIM,
    as_numeric,
    check_bounds,
    check_finite,
    check_n_bins,
    check_not_empty,
    check_probability_range,
    check_task,
    check_temperature,
    is_multilabel_target,
    validate_logit_targets,
    validate_logits,
    validate_probability_inputs,
)
from deepecgkit.evaluation.calibration import calculate_calibration_metrics
from deepecgkit.evaluation.constants import (
    BOUND_TOLERANCE,
    CALIBRATION_METRIC_NAMES,
    CALIBRATION_ROW_ORDER,
    DEFAULT_TEMPERATURE_BOUNDS,
    NEUTRAL_TEMPERATURE,
    TASK_MULTILABEL,
)
from deepecgkit.rundir.format import DEFAULT_CALIBRATION_BINS

__all__ = [
    "TemperatureScaler",
    "apply_temperature",
    "calibration_report",
    "fit_temperature",
    "probabilities_to_logits",
    "temperature_nll",
]

logger = logging.getLogger(__name__)

_NAN = float("nan")
#: Suffix of the calibration entries measured after temperature scaling.
SCALED_SUFFIX = "_temp"


def _is_multilabel(task: str | None, y_true: np.ndarray | None = None) -> bool:
    """Multi-label when the task says so, or (task None) the targets are multi-hot."""
    if task == TASK_MULTILABEL:
        return True
    return task is None and y_true is not None and is_multilabel_target(y_true)


def _checked_logits(logits: Any, name: str = "logits") -> np.ndarray:
    array = as_numeric(logits, name).astype(np.float64)
    check_not_empty(array, name)
    check_finite(array, name)
    return array


Temperature = float | np.ndarray


def _scale(temperature: Any, z: np.ndarray, multilabel: bool) -> float | np.ndarray:
    """A scalar temperature, or (multi-label only) one finite T > 0 per logit column."""
    if np.ndim(temperature) == 0:
        return check_temperature(temperature)
    values = np.asarray(temperature)
    if not multilabel or values.ndim != 1 or z.ndim != MATRIX_NDIM or values.shape[0] != z.shape[1]:
        raise ValueError(
            "per-label temperatures need multi-label logits (n, K) and one temperature per "
            f"label; got {values.shape} temperatures for logits of shape {z.shape}"
        )
    return np.array([check_temperature(float(t)) for t in values])


def apply_temperature(
    logits: np.ndarray, temperature: Temperature, *, task: str | None = None
) -> np.ndarray:
    """Probabilities of ``logits / temperature`` in the trainer's layout.

    Args:
        logits: ``(n,)``/``(n, 1)`` single logits, ``(n, C)`` softmax logits or
            ``(n, K)`` multi-label logits.
        temperature: finite T > 0, or for multi-label a ``(K,)`` array of them
            (label k's logits divided by ``temperature[k]``).
        task: ``TASK_MULTILABEL`` for element-wise sigmoids; anything else (or
            None) follows the logit layout.

    Returns:
        ``(n, 2)`` ``[1 − σ(z), σ(z)]`` for a single logit, ``(n, K)`` sigmoids
        for multi-label, else a ``(n, C)`` row softmax (float64).
    """
    check_task(task)
    multilabel = task == TASK_MULTILABEL
    z = _checked_logits(logits)
    return logits_to_probabilities(z / _scale(temperature, z, multilabel), multilabel)


def temperature_nll(
    logits: np.ndarray,
    y_true: np.ndarray,
    temperature: Temperature = NEUTRAL_TEMPERATURE,
    *,
    task: str | None = None,
) -> float:
    """Mean negative log-likelihood (nats) of ``y_true`` under ``logits / temperature``.

    Multi-label or single-logit inputs use ``mean(logaddexp(0, −s·z))`` with
    ``s = 2y − 1`` over all entries; softmax logits use ``mean(logsumexp(z) −
    z[i, y_i])``. Log space keeps a saturated logit finite. Multi-label
    inputs accept one temperature per label.
    """
    check_task(task)
    z = _checked_logits(logits)
    multilabel = _is_multilabel(task, as_numeric(y_true, "y_true"))
    scale = _scale(temperature, z, multilabel)
    y = validate_logit_targets(y_true, z, "y_true", multilabel=multilabel)
    return nll_from_logits(z / scale, y, multilabel=multilabel)


def _search(z: np.ndarray, y: np.ndarray, multilabel: bool, low: float, high: float) -> float:
    """One bounded scalar search of the NLL; warns (stack level of the public caller)."""
    result = minimize_scalar(
        lambda t: nll_from_logits(z / t, y, multilabel=multilabel),
        bounds=(low, high),
        method="bounded",
    )
    fitted = float(result.x)
    if not result.success or not math.isfinite(fitted):
        warnings.warn(
            f"temperature search failed ({result.message}); returning 1.0 (probabilities "
            "left as they are)",
            RuntimeWarning,
            stacklevel=3,
        )
        return NEUTRAL_TEMPERATURE
    if fitted - low < BOUND_TOLERANCE or high - fitted < BOUND_TOLERANCE:
        warnings.warn(
            f"fitted temperature {fitted:.4g} lies at the edge of the bounds ({low}, {high}); "
            "the true optimum is probably outside them (a degenerate split such as a single "
            "class?)",
            RuntimeWarning,
            stacklevel=3,
        )
    return fitted


def fit_temperature(
    logits: np.ndarray,
    y_true: np.ndarray,
    *,
    task: str | None = None,
    bounds: tuple[float, float] = DEFAULT_TEMPERATURE_BOUNDS,
) -> Temperature:
    """Temperature minimising the NLL of ``y_true`` (fit on validation data).

    A bounded scalar search (``scipy.optimize.minimize_scalar``, method
    ``"bounded"``, scipy's defaults) rather than gradient descent: the
    objective is smooth and one-dimensional, and the search is deterministic
    with nothing to tune. Multi-label logits ``(n, K)`` get one search per
    label on that label's column (the NLL is a sum of per-label terms, so
    this is the joint optimum over K temperatures).

    Returns:
        The fitted T (float); for multi-label a float64 ``(K,)`` array of
        per-label temperatures. ``NEUTRAL_TEMPERATURE`` (per label) with a
        ``RuntimeWarning`` for an empty split or a failed search. A T within
        ``BOUND_TOLERANCE`` of a bound is returned with a ``RuntimeWarning``
        (the optimum is probably outside the interval, typically a
        degenerate split such as one class or a label that never occurs).

    Raises:
        ValueError: bad bounds or task, mismatched lengths, non-finite values,
            labels that do not fit the logits.
    """
    low, high = check_bounds(bounds)
    check_task(task)
    z = as_numeric(logits, "logits").astype(np.float64)
    multilabel = _is_multilabel(task, as_numeric(y_true, "y_true"))
    per_label = multilabel and z.ndim == MATRIX_NDIM
    if z.shape[0] == 0:
        warnings.warn(
            "fit_temperature got an empty split; returning the neutral temperature 1.0",
            RuntimeWarning,
            stacklevel=2,
        )
        return np.full(z.shape[1], NEUTRAL_TEMPERATURE) if per_label else NEUTRAL_TEMPERATURE
    check_finite(z, "logits")
    y = validate_logit_targets(y_true, z, "y_true", multilabel=multilabel)
    if not per_label:
        return _search(z, y, multilabel, low, high)
    labels = y.reshape(z.shape)
    fitted = np.empty(z.shape[1])
    for k in range(z.shape[1]):  # one search per label (K is small); no loop over samples
        fitted[k] = _search(z[:, k], labels[:, k], True, low, high)
    return fitted


def probabilities_to_logits(y_prob: np.ndarray, task: str | None = None) -> np.ndarray:
    """Logits that reproduce ``y_prob`` under :func:`apply_temperature` at T = 1.

    For callers that kept only probabilities. Probabilities are clipped to
    ``[LOGIT_CLIP_EPS, 1 − LOGIT_CLIP_EPS]``, then multi-label and 1-D inputs
    get ``log p − log1p(−p)`` element-wise, one or two columns the logit of the
    last column ``(n,)``, three or more ``log p`` ``(n, C)``.

    The inversion is exact in principle; storage loses information: float32
    rounds a probability to 1.0 once |z| ≈ 16.6, the clip caps recovered
    magnitudes at ≈ 16.1 and six-decimal text at ≈ 13.8. Real logits are
    preferred; this is a fallback.
    """
    check_task(task)
    prob = as_numeric(y_prob, "y_prob")
    check_not_empty(prob, "y_prob")
    check_finite(prob, "y_prob")
    return probabilities_to_logits_unchecked(check_probability_range(prob, "y_prob"), task)


class TemperatureScaler:
    """Fit-then-transform wrapper around :func:`fit_temperature`.

    Attributes:
        task: ``TASK_MULTILABEL``, another ``TASK_*`` value, or None (only
            "multi-label or not" matters to the scaling).
        bounds: search interval of the temperature.
        temperature: ``NEUTRAL_TEMPERATURE`` until fitted; after fitting a
            float, or for multi-label a ``(K,)`` array (one T per label).
        fitted: whether :meth:`fit` has run.
    """

    def __init__(
        self,
        task: str | None = None,
        bounds: tuple[float, float] = DEFAULT_TEMPERATURE_BOUNDS,
    ) -> None:
        self.task = check_task(task)
        self.bounds = check_bounds(bounds)
        self.temperature: Temperature = NEUTRAL_TEMPERATURE
        self.fitted = False

    def fit(self, logits: np.ndarray, y_true: np.ndarray) -> TemperatureScaler:
        """Fit T on validation logits and targets; returns self."""
        if self.task is None and is_multilabel_target(as_numeric(y_true, "y_true")):
            self.task = TASK_MULTILABEL
        self.temperature = fit_temperature(logits, y_true, task=self.task, bounds=self.bounds)
        self.fitted = True
        return self

    def transform(self, logits: np.ndarray) -> np.ndarray:
        """Scaled probabilities; ``RuntimeError`` before :meth:`fit`."""
        if not self.fitted:
            raise RuntimeError("TemperatureScaler.transform called before fit")
        return apply_temperature(logits, self.temperature, task=self.task)

    def nll(self, logits: np.ndarray, y_true: np.ndarray) -> float:
        """NLL at the current temperature (1.0 when unfitted)."""
        return temperature_nll(logits, y_true, self.temperature, task=self.task)

    def __repr__(self) -> str:
        shown = ", ".join(f"{t:.6g}" for t in np.atleast_1d(self.temperature))
        if np.ndim(self.temperature):
            shown = f"[{shown}]"
        return (
            f"TemperatureScaler(task={self.task!r}, bounds={self.bounds}, "
            f"temperature={shown}, fitted={self.fitted})"
        )


def calibration_report(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    n_bins: int = DEFAULT_CALIBRATION_BINS,
    fit_targets: np.ndarray | None = None,
    fit_logits: np.ndarray | None = None,
    eval_logits: np.ndarray | None = None,
) -> dict[str, Any]:
    """One flat row of calibration before and after temperature scaling.

    Args:
        y_true: targets of the reported split (test).
        y_prob: probabilities of the reported split.
        n_bins: equal-width bins of ECE/MCE and equal-mass bins of adaptive ECE.
        fit_targets: targets of the fitting split (validation).
        fit_logits: logits of the fitting split; give both or neither.
        eval_logits: logits of the reported split; default
            :func:`probabilities_to_logits` of ``y_prob``. The same logits serve
            the NLL before and after scaling, so the two NLLs are comparable.

    Returns:
        Keys in ``CALIBRATION_ROW_ORDER``: the calibration metrics
        (``CALIBRATION_METRIC_NAMES``), ``temperature``, their ``*_temp``
        forms (floats) and ``calibration_bins`` (int). Without a fit pair the
        temperature and scaled entries are NaN, so a run without validation
        data still yields a full row. A multi-label row with a fit pair then
        has ``temperature_<k>`` for each label k, and ``temperature`` is their
        geometric mean.

    Raises:
        ValueError: invalid input, exactly one of the fit pair, or logits whose
            class dimension does not fit the task.
    """
    bins = check_n_bins(n_bins)
    inputs = validate_probability_inputs(y_true, y_prob)
    task, n_columns = inputs.task, inputs.y_prob.shape[1]
    multilabel = task == TASK_MULTILABEL
    if (fit_targets is None) != (fit_logits is None):
        raise ValueError(
            "give both fit_targets and fit_logits (the validation split) or neither; "
            f"got fit_targets={'set' if fit_targets is not None else 'None'}, "
            f"fit_logits={'set' if fit_logits is not None else 'None'}"
        )
    logits = (
        validate_logits(
            eval_logits,
            "eval_logits",
            task=task,
            n_columns=n_columns,
            n_samples=inputs.y_true.shape[0],
        )
        if eval_logits is not None
        else probabilities_to_logits_unchecked(inputs.y_prob, task)
    )
    fit_pair = None
    if fit_logits is not None:
        fit_z = validate_logits(fit_logits, "fit_logits", task=task, n_columns=n_columns)
        fit_y = validate_logit_targets(fit_targets, fit_z, "fit_targets", multilabel=multilabel)
        fit_pair = (fit_z, fit_y)

    base = calculate_calibration_metrics(inputs.y_true, inputs.y_prob, n_bins=bins, task=task)
    row: dict[str, Any] = dict.fromkeys(CALIBRATION_ROW_ORDER, _NAN)
    row.update({name: base[name] for name in CALIBRATION_METRIC_NAMES})
    row["nll"] = nll_from_logits(logits, inputs.y_true, multilabel=multilabel)
    row["calibration_bins"] = bins
    if fit_pair is None:
        return row
    try:
        scaler = TemperatureScaler(task).fit(*fit_pair)
        scaled = calculate_calibration_metrics(
            inputs.y_true, scaler.transform(logits), n_bins=bins, task=task
        )
        temperatures = np.atleast_1d(scaler.temperature).astype(np.float64)
        row["temperature"] = float(np.exp(np.mean(np.log(temperatures))))
        for name in CALIBRATION_METRIC_NAMES:
            row[name + SCALED_SUFFIX] = scaled[name]
        row["nll" + SCALED_SUFFIX] = nll_from_logits(
            logits / scaler.temperature, inputs.y_true, multilabel=multilabel
        )
        if np.ndim(scaler.temperature):
            row.update({f"temperature_{k}": float(t) for k, t in enumerate(temperatures)})
    except Exception as exc:  # the unscaled row is still worth reporting
        logger.warning(
            "temperature scaling failed (%s: %s); reporting unscaled calibration only",
            type(exc).__name__,
            exc,
        )
        for name in CALIBRATION_ROW_ORDER:
            if name == "temperature" or name.endswith(SCALED_SUFFIX):
                row[name] = _NAN
    return row
