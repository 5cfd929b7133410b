"""Calibration metrics: ECE, class-wise ECE, debiased ECE, adaptive ECE, MCE, Brier, NLL.

Calibration compares stated confidence with observed frequency. ``ece``,
``adaptive_ece`` and ``mce`` score binary and multiclass predictions on
their *top label* (confidence = the largest probability, correctness =
whether its class is the true one); multi-label predictions label by label,
each as a binary problem ``[1 - p_k, p_k]``, and the per-label values are
combined (mean for ECE, adaptive ECE and Brier; maximum for MCE, so the
least reliable label sets it). Labels are never pooled: a frequent, easy
label would mask a miscalibrated rare one.

The top label of a two-column problem folds the reliability diagram at 0.5:
a probability of 0.2 becomes a confidence of 0.8 in the other class, so a
model whose every probability is 0.1 too low (P(y = 1 | p) = p + 0.1) has
gaps of opposite sign above and below 0.5 that cancel within each folded
bin, and its top-label ECE is near 0. ``classwise_ece`` (Kull et al. 2019,
"Beyond temperature scaling: Obtaining well-calibrated multi-class
probabilities with Dirichlet calibration", NeurIPS) does not fold: for each
class k, equal-width bins of ``p_k`` on [0, 1] compare the fraction of
samples with ``y = k`` with the mean ``p_k``, and the per-class ECEs are
averaged. Binary: class 1 only (the positive-class ECE); multiclass: every
class; multi-label: every label on its own ``p_k``.

Plug-in ECE is biased upward at small n: within a bin the observed
frequency scatters around its expectation, and the absolute gap turns that
scatter into a positive error even for a perfectly calibrated model (about
0.09 at n = 100 and 15 bins). ``ece_debiased`` and
``classwise_ece_debiased`` apply the normal-approximation bias correction of
Kumar, Liang & Ma 2019 ("Verified Uncertainty Calibration", NeurIPS,
section 5): with ``E`` the plug-in ECE and ``E*`` its mean over draws in
which each populated bin's frequency is replaced by ``N(a_b, a_b (1 - a_b) /
n_b)``, the estimate is ``2 E - E*``. It removes most of the bias when the
model is miscalibrated and part of it (about 40 %) when it is calibrated,
and can be slightly negative; it is reported beside ECE, never instead of
it. The draws use a fixed seed, so the value is a deterministic function of
the inputs.

MCE takes the largest gap over bins holding at least ``MIN_MCE_BIN_COUNT``
samples: a bin of a few samples has a gap of up to 1 by chance alone.

Conventions:

* Lower is better for every metric here. ECE, adaptive ECE and MCE lie in
  [0, 1]; the single-label Brier score is the sum-over-classes form in [0, 2]
  (twice scikit-learn's binary ``brier_score_loss``), the multi-label one the
  mean over labels in [0, 1]; NLL is in nats.
* Equal-width bins span ``[b/M, (b+1)/M)`` with the last bin closed at 1, so
  a confidence of exactly 1.0 lands in the top bin (docs/statistics.md,
  "Calibration metrics"). This is
  ``numpy.histogram``'s rule and the rule of the report's reliability bins.
* ECE is only comparable at the same bin count, so ``n_bins`` and the task
  travel with every value.
* Lower is better for the debiased ECEs too; they estimate the population
  ECE at the same bins.

References: Guo et al. 2017, "On Calibration of Modern Neural Networks"
(ICML) for ECE and MCE; Naeini et al. 2015 (AAAI) for MCE; Nixon et al. 2019,
"Measuring Calibration in Deep Learning" (CVPR workshops) for equal-mass
(adaptive) ECE; Brier 1950, Monthly Weather Review 78:1–3.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from deepecgkit.evaluation._links import nll_from_logits, probabilities_to_logits_unchecked
from deepecgkit.evaluation._validation import (
    ProbabilityInputs,
    as_numeric,
    check_n_bins,
    task_from_shapes,
    validate_probability_inputs,
)
from deepecgkit.evaluation.constants import (
    BINNING_QUANTILE,
    BINNING_STRATEGIES,
    BINNING_UNIFORM,
    CALIBRATION_METRIC_NAMES,
    DEBIAS_DRAWS,
    DEBIAS_SEED,
    MIN_MCE_BIN_COUNT,
    TASK_BINARY,
    TASK_MULTICLASS,  # noqa: F401 - still importable from here
    TASK_MULTILABEL,
)
from deepecgkit.rundir.format import DEFAULT_CALIBRATION_BINS

#: The task names (``TASK_*``) are listed by the constants module, their home.
__all__ = [
    "adaptive_calibration_error",
    "brier_score",
    "calculate_calibration_metrics",
    "classwise_calibration_error",
    "debiased_calibration_error",
    "expected_calibration_error",
    "maximum_calibration_error",
    "reliability_bins",
    "resolve_task_shape",
]

logger = logging.getLogger(__name__)

_NAN = float("nan")
#: ``class`` value of the rows of a top-label (binary or multiclass) reliability table.
TOP_LABEL_CLASS = -1
RELIABILITY_COLUMNS = (
    "class",
    "bin",
    "lower",
    "upper",
    "count",
    "confidence",
    "accuracy",
    "gap",
)


class BinTable(NamedTuple):
    """Per-bin statistics of one binary or top-label problem (arrays of equal length)."""

    lower: np.ndarray
    upper: np.ndarray
    count: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray

    @property
    def gap(self) -> np.ndarray:
        """Accuracy minus confidence; negative means overconfident, NaN for empty bins."""
        return self.accuracy - self.confidence


def resolve_task_shape(y_true: np.ndarray, y_prob: np.ndarray, *, task: str | None = None) -> str:
    """Return the prediction shape (``TASK_*``) that every calibration step uses.

    An explicit ``task`` must be one of the three ``TASK_*`` values and is
    returned. Otherwise: ``y_true`` 2-D with more than one column is
    multi-label; ``y_prob`` 1-D or with at most two columns is binary; else
    multiclass.
    """
    return task_from_shapes(as_numeric(y_true, "y_true"), as_numeric(y_prob, "y_prob"), task=task)


# --- confidence, correctness and bins ----------------------------------------------------


def _top_label(y: np.ndarray, prob: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Confidence and correctness of the top label (first maximum on ties)."""
    predicted = np.argmax(prob, axis=1)
    confidence = np.take_along_axis(prob, predicted[:, None], axis=1)[:, 0]
    return confidence, (predicted == y).astype(np.float64)


def _problems(inputs: ProbabilityInputs) -> list[tuple[np.ndarray, np.ndarray]]:
    """(confidence, correctness) per scored problem: one top-label, or one per label."""
    if inputs.task != TASK_MULTILABEL:
        return [_top_label(inputs.y_true, inputs.y_prob)]
    problems = []
    for k in range(inputs.y_prob.shape[1]):
        positive = inputs.y_prob[:, k]
        matrix = np.column_stack([1.0 - positive, positive])
        problems.append(_top_label(inputs.y_true[:, k], matrix))
    return problems


def _classwise_problems(inputs: ProbabilityInputs) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(p_k, 1[y = k])`` per scored class (Kull et al. 2019), never folded at 0.5.

    Binary: class 1 only; multiclass: every class; multi-label: every label.
    The pair fills the (confidence, correctness) slots of a bin table, so a
    bin's ``confidence`` is the mean ``p_k`` and its ``accuracy`` the fraction
    with ``y = k``.
    """
    prob = inputs.y_prob
    if inputs.task == TASK_MULTILABEL:
        return [(prob[:, k], inputs.y_true[:, k].astype(np.float64)) for k in range(prob.shape[1])]
    classes = [prob.shape[1] - 1] if inputs.task == TASK_BINARY else range(prob.shape[1])
    return [(prob[:, k], (inputs.y_true == k).astype(np.float64)) for k in classes]


def _scored_classes(inputs: ProbabilityInputs) -> list[int]:
    """The class (or label) index of each class-wise problem, in order."""
    n_columns = inputs.y_prob.shape[1]
    if inputs.task == TASK_BINARY:
        return [n_columns - 1]
    return list(range(n_columns))


def _uniform_bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> BinTable:
    """Equal-width bins; bin = min(floor(c * M), M - 1), so 1.0 is in the top bin."""
    index = np.minimum(np.floor(confidence * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(index, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(index, weights=confidence, minlength=n_bins) / count
        mean_acc = np.bincount(index, weights=correct, minlength=n_bins) / count
    edges = np.arange(n_bins + 1) / n_bins
    return BinTable(edges[:-1], edges[1:], count, mean_conf, mean_acc)


def _quantile_bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> BinTable:
    """Equal-mass bins: the stably sorted confidences cut like ``np.array_split``.

    Counts, not quantile edges, define the bins, because many saturated
    confidences of exactly 1.0 would collapse quantile edges into empty or
    duplicated bins.
    """
    n = confidence.shape[0]
    chunks = min(n_bins, n)
    order = np.argsort(confidence, kind="stable")
    sorted_conf, sorted_correct = confidence[order], correct[order]
    base, extra = divmod(n, chunks)
    sizes = np.full(chunks, base, dtype=np.int64)
    sizes[:extra] += 1
    index = np.repeat(np.arange(chunks), sizes)
    count = np.bincount(index, minlength=chunks)
    mean_conf = np.bincount(index, weights=sorted_conf, minlength=chunks) / count
    mean_acc = np.bincount(index, weights=sorted_correct, minlength=chunks) / count
    ends = np.cumsum(sizes)
    return BinTable(sorted_conf[ends - sizes], sorted_conf[ends - 1], count, mean_conf, mean_acc)


def _bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int, strategy: str) -> BinTable:
    if strategy == BINNING_QUANTILE:
        return _quantile_bins(confidence, correct, n_bins)
    return _uniform_bins(confidence, correct, n_bins)


def _ece(table: BinTable) -> float:
    """Σ_b (n_b / n) |gap_b| over populated bins."""
    populated = table.count > 0
    weights = table.count[populated] / table.count.sum()
    return float(np.sum(weights * np.abs(table.gap[populated])))


def _mce_statistic(min_bin_count: int) -> Callable[[BinTable], float]:
    """max_b |gap_b| over bins with at least ``min_bin_count`` samples; NaN if there is none."""

    def mce(table: BinTable) -> float:
        supported = table.count >= max(min_bin_count, 1)
        if not supported.any():
            return _NAN
        return float(np.max(np.abs(table.gap[supported])))

    return mce


def _debiased_ece(table: BinTable) -> float:
    """Kumar et al. (2019) normal-approximation debiased ECE of one bin table: ``2 E - E*``.

    ``E*`` is the mean, over ``DEBIAS_DRAWS`` draws from a generator seeded
    with ``DEBIAS_SEED``, of the ECE with each populated bin's frequency
    replaced by a normal draw around it with the binomial variance
    ``a_b (1 - a_b) / n_b`` (one ``(draws, bins)`` array, no loop). A bin
    whose frequency is 0 or 1 has no variance and no correction.
    """
    populated = table.count > 0
    count = table.count[populated].astype(np.float64)
    weights = count / count.sum()
    accuracy, confidence = table.accuracy[populated], table.confidence[populated]
    plug_in = float(np.sum(weights * np.abs(accuracy - confidence)))
    spread = np.sqrt(accuracy * (1.0 - accuracy) / count)
    rng = np.random.default_rng(DEBIAS_SEED)
    draws = accuracy + spread * rng.standard_normal((DEBIAS_DRAWS, accuracy.size))
    resampled = np.abs(draws - confidence) @ weights
    return 2.0 * plug_in - float(resampled.mean())


def _per_problem(
    inputs: ProbabilityInputs,
    statistic: Callable[[BinTable], float],
    n_bins: int,
    strategy: str,
    problems: Callable[[ProbabilityInputs], list[tuple[np.ndarray, np.ndarray]]] = _problems,
) -> np.ndarray:
    return np.array(
        [statistic(_bins(conf, correct, n_bins, strategy)) for conf, correct in problems(inputs)]
    )


def _combined_mce(per_problem: np.ndarray) -> float:
    """The largest per-problem MCE that is defined; NaN when none is."""
    finite = per_problem[np.isfinite(per_problem)]
    return float(np.max(finite)) if finite.size else _NAN


def _brier_per_problem(inputs: ProbabilityInputs) -> np.ndarray:
    """Single-label: one sum-over-classes Brier score; multi-label: one per label."""
    if inputs.task == TASK_MULTILABEL:
        return np.mean((inputs.y_prob - inputs.y_true) ** 2, axis=0)
    onehot = np.zeros_like(inputs.y_prob)
    onehot[np.arange(onehot.shape[0]), inputs.y_true] = 1.0
    return np.array([np.mean(np.sum((inputs.y_prob - onehot) ** 2, axis=1))])


def _nll(inputs: ProbabilityInputs) -> float:
    logits = probabilities_to_logits_unchecked(inputs.y_prob, inputs.task)
    return nll_from_logits(logits, inputs.y_true, multilabel=inputs.task == TASK_MULTILABEL)


# --- public metrics ----------------------------------------------------------------------


def expected_calibration_error(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    n_bins: int = DEFAULT_CALIBRATION_BINS,
    task: str | None = None,
) -> float:
    """Expected calibration error over equal-width bins (Guo et al. 2017).

    Args:
        y_true: ``(n,)`` class indices or ``(n, K)`` multi-hot targets.
        y_prob: ``(n,)``/``(n, 1)`` positive-class probabilities, ``(n, C)``
            class probabilities (rows summing to 1) or ``(n, K)`` label probabilities.
        n_bins: number of equal-width bins, an int >= 1.
        task: one of ``TASK_*`` or None to infer it (:func:`resolve_task_shape`).

    Returns:
        A float in [0, 1]; multi-label: the mean of the per-label binary ECEs.

    Raises:
        ValueError: input failing V1–V7, or a bad ``n_bins``/``task``.
    """
    bins = check_n_bins(n_bins)
    inputs = validate_probability_inputs(y_true, y_prob, task=task)
    return float(np.mean(_per_problem(inputs, _ece, bins, BINNING_UNIFORM)))


def adaptive_calibration_error(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    n_bins: int = DEFAULT_CALIBRATION_BINS,
    task: str | None = None,
) -> float:
    """ECE over equal-mass bins (Nixon et al. 2019); same arguments as ECE.

    With equal widths most samples pile into the top bins while the
    low-confidence bins hold a few each, whose gaps are mostly noise;
    equal-mass bins give every bin the same support. The two ECEs are not
    ordered, and when they differ a lot the binning explains the number.
    """
    bins = check_n_bins(n_bins)
    inputs = validate_probability_inputs(y_true, y_prob, task=task)
    return float(np.mean(_per_problem(inputs, _ece, bins, BINNING_QUANTILE)))


def maximum_calibration_error(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    n_bins: int = DEFAULT_CALIBRATION_BINS,
    task: str | None = None,
    min_bin_count: int = MIN_MCE_BIN_COUNT,
) -> float:
    """Largest |accuracy − confidence| over supported equal-width bins (Naeini et al. 2015).

    A bin counts when it holds at least ``min_bin_count`` samples (default
    ``MIN_MCE_BIN_COUNT``; 1 gives the plain maximum over populated bins,
    which is always at least the ECE on the same bins). NaN when no bin has
    that support. Multi-label: the maximum over labels whose MCE is defined.
    """
    bins = check_n_bins(n_bins)
    minimum = _check_min_bin_count(min_bin_count)
    inputs = validate_probability_inputs(y_true, y_prob, task=task)
    return _combined_mce(_per_problem(inputs, _mce_statistic(minimum), bins, BINNING_UNIFORM))


def classwise_calibration_error(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    n_bins: int = DEFAULT_CALIBRATION_BINS,
    task: str | None = None,
) -> float:
    """Class-wise ECE (Kull et al. 2019): the mean over classes of the ECE of ``p_k``.

    For each scored class k (binary: class 1; multiclass: every class;
    multi-label: every label), ``Σ_b (n_b / n) |frac(y = k)_b − mean(p_k)_b|``
    over equal-width bins of ``p_k`` on [0, 1] (last bin closed at 1); the
    result is the mean over the scored classes, a float in [0, 1].

    Example:
        >>> y = np.array([0, 0, 1, 1])
        >>> round(classwise_calibration_error(y, np.array([0.1, 0.1, 0.1, 0.1]), n_bins=10), 4)
        0.4
    """
    bins = check_n_bins(n_bins)
    inputs = validate_probability_inputs(y_true, y_prob, task=task)
    return float(np.mean(_per_problem(inputs, _ece, bins, BINNING_UNIFORM, _classwise_problems)))


def debiased_calibration_error(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    n_bins: int = DEFAULT_CALIBRATION_BINS,
    task: str | None = None,
    classwise: bool = False,
) -> float:
    """ECE (or class-wise ECE) with the Kumar et al. (2019) small-sample bias correction.

    Same bins and problems as :func:`expected_calibration_error` (or, with
    ``classwise``, :func:`classwise_calibration_error`); per problem ``2 E −
    E*`` (see the module docstring), averaged like the plug-in value. May be
    slightly below 0 for a well-calibrated model at small n.
    """
    bins = check_n_bins(n_bins)
    inputs = validate_probability_inputs(y_true, y_prob, task=task)
    problems = _classwise_problems if classwise else _problems
    return float(np.mean(_per_problem(inputs, _debiased_ece, bins, BINNING_UNIFORM, problems)))


def brier_score(y_true: np.ndarray, y_prob: np.ndarray, *, task: str | None = None) -> float:
    """Brier score (Brier 1950), a proper scoring rule that also pays for sharpness.

    Single-label: ``mean_i Σ_k (P_ik − 1[y_i = k])²`` in [0, 2] (binary: twice
    ``sklearn.metrics.brier_score_loss``). Multi-label: ``mean_k mean_i (P_ik −
    Y_ik)²`` in [0, 1]. Values of the two shapes must not be compared.
    """
    inputs = validate_probability_inputs(y_true, y_prob, task=task)
    return float(np.mean(_brier_per_problem(inputs)))


def _guarded(name: str, compute: Callable[[], Any]) -> Any:
    try:
        return compute()
    except Exception as exc:  # one failing metric must not cost the others
        logger.warning(
            "%s could not be computed (%s: %s); returning NaN", name, type(exc).__name__, exc
        )
        return _NAN


def _check_min_bin_count(min_bin_count: Any) -> int:
    if isinstance(min_bin_count, (bool, np.bool_)) or not isinstance(
        min_bin_count, (int, np.integer)
    ):
        raise ValueError(f"min_bin_count must be an integer >= 1, got {min_bin_count!r}")
    if min_bin_count < 1:
        raise ValueError(f"min_bin_count must be an integer >= 1, got {min_bin_count!r}")
    return int(min_bin_count)


def calculate_calibration_metrics(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    n_bins: int = DEFAULT_CALIBRATION_BINS,
    task: str | None = None,
    min_bin_count: int = MIN_MCE_BIN_COUNT,
) -> dict[str, Any]:
    """Every calibration metric in one pass over validated input.

    Args:
        y_true, y_prob, n_bins, task: as for :func:`expected_calibration_error`.
        min_bin_count: support a bin needs to enter MCE.

    Returns:
        ``{"n_bins", "task"}`` (an ECE read without its bin count and task
        cannot be interpreted), then ``CALIBRATION_METRIC_NAMES`` in order:
        ``ece``, ``adaptive_ece``, ``mce``, ``brier``, ``nll``,
        ``classwise_ece``, ``ece_debiased``, ``classwise_ece_debiased``;
        ``per_class_classwise_ece`` (float array, one entry per scored class:
        length 1 for binary, C for multiclass, K for multi-label) and, for
        multi-label, ``per_class_ece``, ``per_class_mce``, ``per_class_brier``
        (float arrays of length K).

    Raises:
        ValueError: invalid input, ``n_bins``, ``task`` or ``min_bin_count``
            (validation errors are never turned into NaN; only a failing
            computation is).
    """
    bins = check_n_bins(n_bins)
    minimum = _check_min_bin_count(min_bin_count)
    inputs = validate_probability_inputs(y_true, y_prob, task=task)
    uniform = BINNING_UNIFORM
    per_ece = _guarded("ece", lambda: _per_problem(inputs, _ece, bins, uniform))
    per_mce = _guarded("mce", lambda: _per_problem(inputs, _mce_statistic(minimum), bins, uniform))
    per_brier = _guarded("brier", lambda: _brier_per_problem(inputs))
    per_classwise = _guarded(
        "classwise_ece", lambda: _per_problem(inputs, _ece, bins, uniform, _classwise_problems)
    )
    values = {
        "ece": _guarded("ece", lambda: float(np.mean(per_ece))),
        "adaptive_ece": _guarded(
            "adaptive_ece",
            lambda: float(np.mean(_per_problem(inputs, _ece, bins, BINNING_QUANTILE))),
        ),
        "mce": _guarded("mce", lambda: _combined_mce(per_mce)),
        "brier": _guarded("brier", lambda: float(np.mean(per_brier))),
        "nll": _guarded("nll", lambda: _nll(inputs)),
        "classwise_ece": _guarded("classwise_ece", lambda: float(np.mean(per_classwise))),
        "ece_debiased": _guarded(
            "ece_debiased",
            lambda: float(np.mean(_per_problem(inputs, _debiased_ece, bins, uniform))),
        ),
        "classwise_ece_debiased": _guarded(
            "classwise_ece_debiased",
            lambda: float(
                np.mean(_per_problem(inputs, _debiased_ece, bins, uniform, _classwise_problems))
            ),
        ),
    }
    result: dict[str, Any] = {"n_bins": bins, "task": inputs.task}
    result.update({name: values[name] for name in CALIBRATION_METRIC_NAMES})
    n_scored = len(_scored_classes(inputs))
    result["per_class_classwise_ece"] = (
        per_classwise if isinstance(per_classwise, np.ndarray) else np.full(n_scored, _NAN)
    )
    if inputs.task == TASK_MULTILABEL:
        n_labels = inputs.y_prob.shape[1]
        for key, per_label in (
            ("per_class_ece", per_ece),
            ("per_class_mce", per_mce),
            ("per_class_brier", per_brier),
        ):
            result[key] = (
                per_label if isinstance(per_label, np.ndarray) else np.full(n_labels, _NAN)
            )
    return result


def reliability_bins(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    n_bins: int = DEFAULT_CALIBRATION_BINS,
    strategy: str = BINNING_UNIFORM,
    task: str | None = None,
    classwise: bool = False,
) -> pd.DataFrame:
    """The per-bin table behind ECE, from which reliability diagrams are drawn.

    Args:
        y_true, y_prob, n_bins, task: as for :func:`expected_calibration_error`.
        strategy: ``"uniform"`` (one row per bin, empty bins included with
            ``count`` 0 and NaN statistics; ``lower``/``upper`` are the edges) or
            ``"quantile"`` (one row per equal-mass chunk; ``lower``/``upper`` are
            the chunk's smallest and largest confidence).
        classwise: bin ``p_k`` per scored class (Kull et al. 2019) instead of
            the top label: a binary task then gives the positive-class
            diagram, which is not folded at 0.5.

    Returns:
        Columns ``class`` (top label: −1 for single-label tasks, else the
        label index; class-wise: the class or label index), ``bin``,
        ``lower``, ``upper``, ``count``, ``confidence`` (mean confidence, or
        mean ``p_k``), ``accuracy`` (fraction correct, or fraction with ``y =
        k``), ``gap`` (accuracy − confidence; negative means overconfident).
        For each class, ``Σ count/n · |gap|`` over its rows equals its ECE.
    """
    if strategy not in BINNING_STRATEGIES:
        raise ValueError(f"strategy must be one of {list(BINNING_STRATEGIES)}, got {strategy!r}")
    bins = check_n_bins(n_bins)
    inputs = validate_probability_inputs(y_true, y_prob, task=task)
    if classwise:
        labelled = list(zip(_scored_classes(inputs), _classwise_problems(inputs), strict=True))
    else:
        top = inputs.task != TASK_MULTILABEL
        labelled = [
            (TOP_LABEL_CLASS if top else k, problem) for k, problem in enumerate(_problems(inputs))
        ]
    frames = []
    for k, (confidence, correct) in labelled:
        table = _bins(confidence, correct, bins, strategy)
        frames.append(
            pd.DataFrame(
                {
                    "class": k,
                    "bin": np.arange(table.count.shape[0]),
                    "lower": table.lower,
                    "upper": table.upper,
                    "count": table.count.astype(np.int64),
                    "confidence": table.confidence,
                    "accuracy": table.accuracy,
                    "gap": table.gap,
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    return frame.loc[:, list(RELIABILITY_COLUMNS)]


def ece_from_reliability(table: pd.DataFrame) -> float:
    """ECE recomputed from a :func:`reliability_bins` table.

    Each class's rows hold all n samples, so ``Σ count/n · |gap|`` per class
    is that class's ECE; multi-label tables average the per-label values.
    """
    populated = table[table["count"] > 0]
    totals = populated.groupby("class")["count"].transform("sum")
    per_class = (
        (populated["count"] / totals * populated["gap"].abs()).groupby(populated["class"]).sum()
    )
    return float(per_class.mean())
