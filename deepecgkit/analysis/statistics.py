"""Small-sample statistics over per-seed scores.

Every function here works on a handful of finished-run scalars (one score per
seed), not on test predictions: that is the evaluator's bootstrap, which
measures within-run sampling noise and cannot see seed-to-seed variation.

Conventions, stated once:

* *Finite* means :func:`numpy.isfinite` on a float; NaN and both infinities
  are missing values and are dropped before anything is counted.
* Every interval is two-sided Student-t with ``n - 1`` degrees of freedom at
  quantile ``(1 + confidence_level) / 2``; every p-value is
  ``2 * t.sf(|t|, n - 1)``.
* Returned scalars are Python ``float``/``int``/``bool``, never numpy scalars,
  so results serialise to JSON as they are.
* Key names (``mean``, ``lower_ci``, ``upper_ci`` ...) match the evaluator's.

References: Nadeau & Bengio (2003), *Inference for the Generalization Error*,
Machine Learning 52(3):239-281; Holm (1979); Benjamini & Hochberg (1995);
Benjamini & Yekutieli (2001), Annals of Statistics 29(4):1165-1188.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from scipy import stats

from deepecgkit.analysis.constants import (
    CONFIDENCE_LEVEL,
    MIN_COLLAPSE_GAP,
    NADEAU_BENGIO,
    NO_CORRECTION,
    ZERO_VARIANCE_TOL,
)

__all__ = [
    "benjamini_hochberg_adjust",
    "benjamini_yekutieli_adjust",
    "bonferroni_adjust",
    "holm_adjust",
    "is_bimodal",
    "kendall_tau",
    "min_attainable_kendall_p",
    "nadeau_bengio_factor",
    "paired_summary",
    "summarize_scores",
]

_NAN = float("nan")
_MIN_TAU_LABELS = 3

PValues = TypeVar("PValues", Mapping[Any, float], pd.Series, np.ndarray, Sequence[float])


# --- private helpers ---------------------------------------------------------------


def _finite(values: Any) -> np.ndarray:
    """Return the finite entries of ``values`` as a 1-D float64 array, in order.

    A scalar counts as one value; ``None`` (and ``pandas.NA``) becomes NaN and
    is dropped. A non-numeric string raises ``ValueError``.
    """
    if isinstance(values, pd.Series):
        values = values.to_numpy()
    if isinstance(values, (str, bytes)) or np.ndim(values) == 0:
        values = [values]
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        array = values.astype(np.float64).reshape(-1)
    else:
        items = [
            _NAN if (v is None or v is pd.NA) else v
            for v in np.asarray(values, dtype=object).reshape(-1)
        ]
        try:
            array = np.asarray(items, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"values must be numeric, got {values!r}") from exc
    return array[np.isfinite(array)]


def _check_confidence_level(confidence_level: Any) -> None:
    """Raise ``ValueError`` unless ``confidence_level`` is a real number in (0, 1)."""
    valid = (
        isinstance(confidence_level, numbers.Real)
        and not isinstance(confidence_level, (bool, np.bool_))
        and math.isfinite(float(confidence_level))
        and 0.0 < float(confidence_level) < 1.0
    )
    if not valid:
        raise ValueError(
            f"confidence_level must be a number strictly between 0 and 1, got {confidence_level!r}"
        )


def _check_count(name: str, value: Any) -> int:
    """Validate an integer-count parameter: ``TypeError`` for bool/non-integral."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _check_non_negative_count(name: str, value: Any) -> int:
    """Validate a count that must also be non-negative (``ValueError`` when < 0)."""
    count = _check_count(name, value)
    if count < 0:
        raise ValueError(f"{name} must be non-negative, got {count}")
    return count


def _t_quantile(confidence_level: float, dof: Any) -> Any:
    """Two-sided Student-t critical value for ``confidence_level`` and ``dof``."""
    return stats.t.ppf((1.0 + confidence_level) / 2.0, dof)


def _check_correction(correction: Any) -> None:
    if correction not in (NADEAU_BENGIO, NO_CORRECTION):
        raise ValueError(
            f"correction must be {NADEAU_BENGIO!r} or {NO_CORRECTION!r}, got {correction!r}"
        )


def _positive_size(value: Any) -> float | None:
    """A split size usable by the Nadeau-Bengio ratio, or None when unknown."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return None
    try:
        size = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(size) or size <= 0:
        return None
    return size


# --- summaries ------------------------------------------------------------------------


def summarize_scores(
    values: Sequence[float], confidence_level: float = CONFIDENCE_LEVEL
) -> dict[str, float]:
    """Mean, sample SD, SEM and Student-t interval of one metric across seeds.

    Args:
        values: per-seed scores; non-finite entries are dropped first.
        confidence_level: two-sided coverage in (0, 1).

    Returns:
        ``{"mean", "std", "sem", "lower_ci", "upper_ci", "n"}``. ``n`` counts
        usable values. With n = 0 everything else is NaN; with n = 1 only the
        mean is defined (one run carries no dispersion). Zero variance is
        reported as observed: ``std = sem = 0`` and both bounds equal the
        mean, since this is a description, not a test (contrast
        :func:`paired_summary`).

    Student-t and not a bootstrap over seeds: with 3-10 seeds a percentile
    bootstrap can never put an endpoint outside the observed range, so its
    interval is too narrow exactly when the sample is smallest.

    Example:
        >>> summarize_scores([0.80, 0.82, 0.79, 0.81, 0.83])["lower_ci"]  # doctest: +ELLIPSIS
        0.79036756...
    """
    _check_confidence_level(confidence_level)
    finite = _finite(values)
    n = int(finite.size)
    result = {
        "mean": _NAN,
        "std": _NAN,
        "sem": _NAN,
        "lower_ci": _NAN,
        "upper_ci": _NAN,
        "n": n,
    }
    if n == 0:
        return result
    mean = float(finite.mean())
    result["mean"] = mean
    if n == 1:
        return result
    std = float(finite.std(ddof=1))
    sem = std / math.sqrt(n)
    half_width = float(_t_quantile(confidence_level, n - 1)) * sem
    result.update(std=std, sem=sem, lower_ci=mean - half_width, upper_ci=mean + half_width)
    return result


def nadeau_bengio_factor(n: int, n_train: float | None, n_test: float | None) -> float:
    """Multiplier that turns a sample SD of ``n`` per-seed values into a standard error.

    When each seed redraws the train/test partition of one corpus, the
    training sets overlap heavily, the per-seed differences are positively
    correlated, and ``std / sqrt(n)`` understates the spread. Nadeau & Bengio
    (2003) replace ``1/n`` in the variance of the mean by
    ``1/n + n_test/n_train``.

    Args:
        n: number of per-seed values; a bool or non-integral value raises
            ``TypeError``; ``n <= 0`` gives NaN.
        n_train: mean training-set size, or None when unknown.
        n_test: mean test-set size, or None when unknown.

    Returns:
        ``sqrt(1/n + n_test/n_train)``, or the uncorrected ``sqrt(1/n)`` when
        either size is missing, non-finite or not positive.
    """
    count = _check_count("n", n)
    if count <= 0:
        return _NAN
    train, test = _positive_size(n_train), _positive_size(n_test)
    if train is None or test is None:
        return math.sqrt(1.0 / count)
    return math.sqrt(1.0 / count + test / train)


def paired_summary(
    differences: Sequence[float],
    confidence_level: float = CONFIDENCE_LEVEL,
    correction: str = NADEAU_BENGIO,
    n_train: float | None = None,
    n_test: float | None = None,
) -> dict[str, Any]:
    """Summarise paired per-seed differences and test their mean against zero.

    Args:
        differences: per-seed ``a - b`` values; non-finite ones are dropped.
        confidence_level: two-sided coverage in (0, 1).
        correction: ``"nadeau-bengio"`` (default) or ``"none"``.
        n_train, n_test: mean split sizes for the Nadeau-Bengio factor.

    Returns:
        ``{"mean", "std", "sem", "lower_ci", "upper_ci", "t_stat", "p_value",
        "n", "n_wins", "excludes_zero"}``. ``n_wins`` counts differences
        strictly above zero. With zero variance (SD at or below
        ``ZERO_VARIANCE_TOL``) the SEM, bounds, t and p are NaN: seeds that
        agree exactly show no spread, which is not infinite precision, and a
        zero-width interval would make any non-zero mean "significant".
    """
    _check_correction(correction)
    _check_confidence_level(confidence_level)
    finite = _finite(differences)
    n = int(finite.size)
    result: dict[str, Any] = {
        "mean": _NAN,
        "std": _NAN,
        "sem": _NAN,
        "lower_ci": _NAN,
        "upper_ci": _NAN,
        "t_stat": _NAN,
        "p_value": _NAN,
        "n": n,
        "n_wins": 0,
        "excludes_zero": False,
    }
    if n == 0:
        return result
    mean = float(finite.mean())
    result["mean"] = mean
    result["n_wins"] = int(np.count_nonzero(finite > 0))
    if n == 1:
        return result
    std = float(finite.std(ddof=1))
    result["std"] = std
    if std <= ZERO_VARIANCE_TOL:
        return result
    if correction == NADEAU_BENGIO:
        factor = nadeau_bengio_factor(n, n_train, n_test)
    else:
        factor = 1.0 / math.sqrt(n)
    sem = std * factor
    half_width = float(_t_quantile(confidence_level, n - 1)) * sem
    lower, upper = mean - half_width, mean + half_width
    t_stat = mean / sem
    result.update(
        sem=sem,
        lower_ci=lower,
        upper_ci=upper,
        t_stat=t_stat,
        p_value=float(2.0 * stats.t.sf(abs(t_stat), n - 1)),
        excludes_zero=bool(lower > 0 or upper < 0),
    )
    return result


# --- rank agreement ----------------------------------------------------------------------


def kendall_tau(ranks_a: Mapping[str, float], ranks_b: Mapping[str, float]) -> float:
    """Kendall's tau-b between two rankings of the same labels.

    ``tau_b = (C - D) / sqrt((n0 - T_a)(n0 - T_b))`` over all unordered label
    pairs, equal to ``scipy.stats.kendalltau(..., variant="b")``. NaN when
    either ranking is entirely tied.

    No p-value is returned on purpose: with m labels the exact permutation
    null cannot go below ``2/m!`` (0.083 at m = 4), and the coefficients of
    many seed pairs share seeds, so they cannot be pooled into one test.

    Raises:
        ValueError: the label sets differ, fewer than 3 labels, or a rank is
            not finite.
    """
    labels_a, labels_b = set(ranks_a), set(ranks_b)
    if labels_a != labels_b:
        raise ValueError(
            "kendall_tau needs the same labels in both rankings; "
            f"only in a: {sorted(map(str, labels_a - labels_b))}, "
            f"only in b: {sorted(map(str, labels_b - labels_a))}"
        )
    if len(labels_a) < _MIN_TAU_LABELS:
        raise ValueError(f"kendall_tau needs at least 3 labels, got {len(labels_a)}")
    labels = sorted(labels_a, key=str)
    a = np.array([float(ranks_a[label]) for label in labels])
    b = np.array([float(ranks_b[label]) for label in labels])
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("kendall_tau needs finite ranks")
    upper = np.triu_indices(len(labels), k=1)
    sign_a = np.sign(a[:, None] - a[None, :])[upper]
    sign_b = np.sign(b[:, None] - b[None, :])[upper]
    n0 = sign_a.size
    tied_a = int(np.count_nonzero(sign_a == 0))
    tied_b = int(np.count_nonzero(sign_b == 0))
    denominator = math.sqrt((n0 - tied_a) * (n0 - tied_b))
    if denominator == 0:
        return _NAN
    return float(np.sum(sign_a * sign_b) / denominator)


def min_attainable_kendall_p(n_labels: int) -> float:
    """Smallest two-sided p-value the exact Kendall null can reach: ``min(1, 2/n!)``.

    Integer true division, so a huge ``n_labels`` gives 0.0 instead of
    overflowing. ``n_labels < 3`` raises ``ValueError``; a bool or
    non-integral value raises ``TypeError``.
    """
    count = _check_count("n_labels", n_labels)
    if count < _MIN_TAU_LABELS:
        raise ValueError(f"n_labels must be at least 3, got {count}")
    return float(min(1.0, 2 / math.factorial(count)))


# --- multiplicity ---------------------------------------------------------------------------


def _pvalue_array(p_values: Any) -> tuple[np.ndarray, list[str]]:
    """Validate p-values of any accepted kind; return them as float64 plus position names."""
    if isinstance(p_values, (str, bytes)):
        raise TypeError("p-values must be a sequence, mapping, Series or array, not a string")
    if isinstance(p_values, Mapping):
        keys = list(p_values.keys())
        raw = list(p_values.values())
        names = [repr(k) for k in keys]
    elif isinstance(p_values, pd.Series):
        raw = list(p_values.to_numpy(dtype=object))
        names = [repr(k) for k in p_values.index]
    elif isinstance(p_values, np.ndarray):
        if p_values.ndim != 1:
            raise ValueError(f"p-values must be 1-D, got an array of shape {p_values.shape}")
        raw = list(p_values.tolist())
        names = [f"position {i}" for i in range(len(raw))]
    elif isinstance(p_values, Sequence):
        raw = list(p_values)
        names = [f"position {i}" for i in range(len(raw))]
    else:
        raise TypeError(
            f"p-values must be a sequence, mapping, Series or array, got {type(p_values).__name__}"
        )
    array = np.empty(len(raw), dtype=np.float64)
    for i, (name, value) in enumerate(zip(names, raw, strict=True)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ValueError(f"p-value at {name} is not a real number: {value!r}")
        number = float(value)
        if not math.isnan(number) and not 0.0 <= number <= 1.0:
            raise ValueError(f"p-value at {name} is {number!r}, outside [0, 1]")
        array[i] = number
    return array, names


def _restore_kind(template: Any, adjusted: np.ndarray) -> Any:
    """Return ``adjusted`` in the kind of container the caller passed in."""
    if isinstance(template, Mapping):
        return dict(zip(template.keys(), adjusted.tolist(), strict=True))
    if isinstance(template, pd.Series):
        return pd.Series(adjusted, index=template.index, name=template.name, dtype=np.float64)
    if isinstance(template, np.ndarray):
        return adjusted
    return [float(v) for v in adjusted]


def _adjust(p_values: Any, scale: float = 1.0, step_up: bool = False) -> Any:
    """Shared engine of the four adjustments (NaN entries are outside the family).

    Step-down (Holm): ``a(i) = max_{j<=i} min(1, (m - j + 1) p(j))``.
    Step-up (BH/BY): ``a(i) = min_{j>=i} min(1, scale * m * p(j) / j)``.
    The family is sorted with a stable sort, so tied raw values get equal
    adjusted values and results do not depend on input order.
    """
    array, _ = _pvalue_array(p_values)
    adjusted = np.full(array.shape, np.nan)
    in_family = ~np.isnan(array)
    m = int(in_family.sum())
    if m:
        family = array[in_family]
        order = np.argsort(family, kind="stable")
        ordered = family[order]
        rank = np.arange(1, m + 1, dtype=np.float64)
        if step_up:
            raw = np.minimum(1.0, scale * m * ordered / rank)
            monotone = np.minimum.accumulate(raw[::-1])[::-1]
        else:
            raw = np.minimum(1.0, (m - rank + 1.0) * ordered)
            monotone = np.maximum.accumulate(raw)
        values = np.empty(m)
        values[order] = monotone
        adjusted[in_family] = values
    return _restore_kind(p_values, adjusted)


def holm_adjust(p_values: PValues) -> PValues:
    """Holm (1979) step-down adjustment; controls the familywise error rate.

    Use it for a small confirmatory family where each rejection becomes a
    sentence a reader takes as true. Valid under any dependence.

    Args:
        p_values: a list/tuple, mapping, Series or 1-D array of p-values.
            NaN marks an untestable comparison: it comes back NaN and does not
            count in the family size.

    Returns:
        Adjusted p-values in the kind of the input (list, dict, Series or
        float64 array), same order and keys.

    Raises:
        TypeError: a string or a non-sequence.
        ValueError: an entry outside [0, 1], an infinity, a non-number, or an
            array that is not 1-D.
    """
    return _adjust(p_values)


def bonferroni_adjust(p_values: PValues) -> PValues:
    """Bonferroni adjustment ``min(1, m * p)``; same contract as :func:`holm_adjust`."""
    array, _ = _pvalue_array(p_values)
    m = int(np.count_nonzero(~np.isnan(array)))
    return _restore_kind(p_values, np.minimum(1.0, m * array))


def benjamini_hochberg_adjust(p_values: PValues) -> PValues:
    """Benjamini & Hochberg (1995) step-up FDR adjustment.

    Valid under independence or positive regression dependence (PRDS). Same
    input contract as :func:`holm_adjust`.
    """
    return _adjust(p_values, scale=1.0, step_up=True)


def benjamini_yekutieli_adjust(p_values: PValues) -> PValues:
    """Benjamini & Yekutieli (2001) step-up FDR adjustment, valid under any dependence.

    BH with every ``m p(j) / j`` multiplied by the harmonic number
    ``c(m) = sum_{k=1..m} 1/k``. The flip grid uses it because its tests
    reuse models and datasets in ways whose dependence sign is unknown (the
    differences A-B and B-C contain B's scores with opposite signs), so PRDS
    cannot be assumed. Same input contract as :func:`holm_adjust`.
    """
    array, _ = _pvalue_array(p_values)
    m = int(np.count_nonzero(~np.isnan(array)))
    harmonic = float(np.sum(1.0 / np.arange(1, m + 1))) if m else 1.0
    return _adjust(p_values, scale=harmonic, step_up=True)


# --- converge-or-collapse detection -------------------------------------------------------------


def is_bimodal(
    values: Sequence[float],
    baseline: float | None = None,
    min_gap: float = MIN_COLLAPSE_GAP,
) -> tuple[bool, str]:
    """Flag a converge-or-collapse pattern across seeds.

    Args:
        values: per-seed scores; non-finite entries are dropped.
        baseline: optional chance level; any seed strictly below it flags the
            sample. None or a non-finite value is ignored.
        min_gap: smallest gap between consecutive sorted values that splits
            the sample (must be finite and > 0).

    Returns:
        ``(flag, reason)``; the reason is ``""`` when not flagged. Fewer than
        three finite values are never flagged.

    A largest-gap rule rather than a MAD or outlier rule: with five seeds the
    MAD is too noisy a scale estimate, so outlier rules fire on ordinary
    scatter, while a collapse separates the sample by a wide absolute margin.
    """
    try:
        gap_threshold = float(min_gap)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"min_gap must be a finite number > 0, got {min_gap!r}") from exc
    if not math.isfinite(gap_threshold) or gap_threshold <= 0:
        raise ValueError(f"min_gap must be a finite number > 0, got {min_gap!r}")
    finite = _finite(values)
    k = int(finite.size)
    if k < _MIN_TAU_LABELS:
        return False, ""
    if baseline is not None:
        base = float(baseline)
        if math.isfinite(base):
            below = int(np.count_nonzero(finite < base))
            if below >= 1:
                return True, f"{below}/{k} seeds scored below the {base:.3f} baseline"
    ordered = np.sort(finite)
    gaps = np.diff(ordered)
    position = int(np.argmax(gaps))
    largest = float(gaps[position])
    if largest >= gap_threshold:
        low = position + 1
        return True, f"{low} of {k} seeds sit {largest:.3f} below the other {k - low}"
    return False, ""
