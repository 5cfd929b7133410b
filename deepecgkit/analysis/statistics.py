"""Small-sample statistics over per-seed scores.

Every function here works on a handful of finished-run scalars (one score per
seed), not on test predictions: that is the evaluator's bootstrap, which
measures within-run sampling noise and cannot see seed-to-seed variation.

Conventions, stated once:

* *Finite* means :func:`numpy.isfinite` on a float; NaN and both infinities
  are missing values and are dropped before anything is counted.
* Every interval is two-sided Student-t with ``n - 1`` degrees of freedom at
  quantile ``(1 + confidence_level) / 2``; every component p-value is
  ``2 * t.sf(|t|, n - 1)``. One-sided p-values are derived from it and the
  sign of the mean (:func:`one_sided_p_value`), which is exact because the t
  distribution is symmetric.
* Returned scalars are Python ``float``/``int``/``bool``, never numpy scalars,
  so results serialise to JSON as they are.
* Key names (``mean``, ``lower_ci``, ``upper_ci`` ...) match the evaluator's.

References: Nadeau & Bengio (2003), *Inference for the Generalization Error*,
Machine Learning 52(3):239-281; Berger (1982), Technometrics 24(4):295-300
(intersection-union tests); Holm (1979); Benjamini & Hochberg (1995);
Benjamini & Yekutieli (2001), Annals of Statistics 29(4):1165-1188; Kendall &
Babington Smith (1939), Annals of Mathematical Statistics 10(3):275-287
(coefficient of concordance); Efron & Stein (1981), Annals of Statistics
9(3):586-596 (the jackknife variance). ``docs/statistics.md`` states the
estimand and assumptions of every quantity the tables print.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from deepecgkit.analysis.constants import (
    CHANCE_LEVELS,
    CHANCE_ONE_OVER_K,
    COLLAPSE_FLOOR_FRACTION,
    COLLAPSE_GAP_FLOORS,
    CONFIDENCE_LEVEL,
    CORRECTION_UNAVAILABLE,
    DEFAULT_N_PERMUTATIONS,
    FDR_METHOD_BH,
    FDR_METHOD_BY,
    FDR_METHODS,
    MIN_COLLAPSE_GAP,
    NADEAU_BENGIO,
    NO_CORRECTION,
    ZERO_VARIANCE_TOL,
)
from deepecgkit.analysis.distributions import chi2_sf, t_critical, t_sf
from deepecgkit.rundir.format import METRIC_RANGES

__all__ = [
    "applied_correction",
    "benjamini_hochberg_adjust",
    "benjamini_yekutieli_adjust",
    "bimodal_flags",
    "bonferroni_adjust",
    "chance_level",
    "collapse_gap_floor",
    "correction_note",
    "fdr_adjust",
    "holm_adjust",
    "is_bimodal",
    "jackknife_mean_tau",
    "kendall_tau",
    "kendall_w",
    "kendall_w_chi2_p",
    "kendall_w_p_value",
    "kendall_w_permutation_p",
    "min_attainable_kendall_p",
    "min_attainable_kendall_p_given_ties",
    "nadeau_bengio_factor",
    "one_sided_p_value",
    "paired_summary",
    "reversal_p_value",
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


def _check_fdr_method(method: Any) -> None:
    if method not in FDR_METHODS:
        raise ValueError(
            f"fdr_method must be one of {', '.join(map(repr, FDR_METHODS))}, got {method!r}"
        )


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

#: Fewest values with a sample SD (one run carries no dispersion).
_MIN_SPREAD_N = 2


def _undefined_spread() -> dict[str, float]:
    """The location and spread fields every seed summary opens with, NaN until computed."""
    return dict.fromkeys(("mean", "std", "sem", "lower_ci", "upper_ci"), _NAN)


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
    result = {**_undefined_spread(), "n": n}
    if n:
        result["mean"] = float(finite.mean())
    if n < _MIN_SPREAD_N:
        return result
    mean = result["mean"]
    std = float(finite.std(ddof=1))
    sem = std / math.sqrt(n)
    half_width = float(t_critical(confidence_level, n - 1)) * sem
    result.update(std=std, sem=sem, lower_ci=mean - half_width, upper_ci=mean + half_width)
    return result


def nadeau_bengio_factor(n: int, *, n_train: float | None, n_test: float | None) -> float:
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


def correction_note(train_known: bool, test_known: bool) -> str:
    """Why Nadeau-Bengio could not be applied, or ``""`` when both split sizes are known.

    The text names the missing size(s), so a reader knows what to record in
    ``split_info.json`` to get the corrected standard error. A row with this
    note (``correction_applied == "unavailable"``) used the plain standard
    error.
    """
    pairs = (("n_train", train_known), ("n_test", test_known))
    missing = [name for name, known in pairs if not known]
    if not missing:
        return ""
    return f"split sizes unknown: no contributing run records {' or '.join(missing)}"


def applied_correction(
    correction: str, *, n_train: float | None, n_test: float | None
) -> tuple[str, str]:
    """The standard-error correction actually applied, and why when it differs.

    Returns:
        ``(correction_applied, correction_note)``: ``("nadeau-bengio", "")``
        when it was requested and both sizes are positive and finite,
        ``("none", "")`` when no correction was requested, else
        ``("unavailable", <reason>)``: the plain standard error was used, whose
        Type-I error with overlapping training sets is far above nominal.
    """
    if correction == NO_CORRECTION:
        return NO_CORRECTION, ""
    train_known, test_known = (
        _positive_size(n_train) is not None,
        _positive_size(n_test) is not None,
    )
    if train_known and test_known:
        return NADEAU_BENGIO, ""
    return CORRECTION_UNAVAILABLE, correction_note(train_known, test_known)


def paired_summary(
    differences: Sequence[float],
    *,
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
        "n", "n_wins", "excludes_zero", "correction_applied",
        "correction_note"}``. ``n_wins`` counts differences strictly above
        zero. With zero variance (SD at or below ``ZERO_VARIANCE_TOL``) the
        SEM, bounds, t and p are NaN: seeds that agree exactly show no spread,
        which is not infinite precision, and a zero-width interval would make
        any non-zero mean "significant". ``correction_applied`` and
        ``correction_note`` are those of :func:`applied_correction`: a
        requested Nadeau-Bengio correction whose split sizes are unknown falls
        back to the plain standard error, and the row says so.
    """
    _check_correction(correction)
    _check_confidence_level(confidence_level)
    finite = _finite(differences)
    n = int(finite.size)
    applied, note = applied_correction(correction, n_train=n_train, n_test=n_test)
    result: dict[str, Any] = {
        **_undefined_spread(),
        "t_stat": _NAN,
        "p_value": _NAN,
        "n": n,
        "n_wins": 0,
        "excludes_zero": False,
        "correction_applied": applied,
        "correction_note": note,
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
        factor = nadeau_bengio_factor(n, n_train=n_train, n_test=n_test)
    else:
        factor = 1.0 / math.sqrt(n)
    sem = std * factor
    half_width = float(t_critical(confidence_level, n - 1)) * sem
    lower, upper = mean - half_width, mean + half_width
    t_stat = mean / sem
    result.update(
        sem=sem,
        lower_ci=lower,
        upper_ci=upper,
        t_stat=t_stat,
        p_value=float(2.0 * t_sf(abs(t_stat), n - 1)),
        excludes_zero=bool(lower > 0 or upper < 0),
    )
    return result


# --- directional p-values -------------------------------------------------------------------


def one_sided_p_value(p_two_sided: Any, mean: Any, *, direction: Any) -> Any:
    """One-sided p-value for "the true mean has the sign of ``direction``".

    From a two-sided Student-t p-value ``p`` and the observed mean ``m``:
    ``p / 2`` when ``direction * m > 0``, else ``1 - p / 2`` (exact, since the
    t distribution is symmetric; a zero mean gives 0.5). Works elementwise on
    arrays; NaN in gives NaN out.

    Args:
        p_two_sided: two-sided p-value(s) in [0, 1], or NaN.
        mean: observed mean difference(s), same shape.
        direction: +1.0 for "greater than zero", -1.0 for "less than zero".

    Returns:
        A float for scalar input, else a float64 array.
    """
    p = np.asarray(p_two_sided, dtype=np.float64)
    signed = np.asarray(direction, dtype=np.float64) * np.asarray(mean, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        result = np.where(signed > 0, p / 2.0, 1.0 - p / 2.0)
    result = np.where(np.isnan(p) | np.isnan(signed), np.nan, result)
    return float(result) if result.ndim == 0 else result


def reversal_p_value(p_1: Any, p_2: Any, *, mean_1: Any, mean_2: Any) -> Any:
    """p-value of "the difference reverses sign between two datasets", in either direction.

    The intersection-union test (Berger 1982) of a reversal in a given
    direction rejects when both one-sided component tests reject, so its
    p-value is the larger one-sided p; a reversal in either direction takes
    the smaller of the two directions:

        ``min(max(P1+, P2-), max(P1-, P2+))``

    which equals ``max(p_1, p_2) / 2`` when ``mean_1 * mean_2 <= 0`` and
    ``1 - max(p_1, p_2) / 2`` otherwise. Under the least-favourable null
    (one difference large, the other zero) its size is alpha; when both means
    share a sign it is at least 0.5, so a same-sign pair can never look like
    evidence of a reversal (contrast ``p_flip = max(p_1, p_2)``, which tests
    "both differences are non-zero" and is small for a large same-sign pair).

    Args:
        p_1, p_2: two-sided component p-values (scalars or arrays), NaN allowed.
        mean_1, mean_2: the component mean differences, same shape.

    Returns:
        A float for scalar input, else a float64 array; NaN wherever an input
        is NaN.
    """
    forward = np.maximum(
        one_sided_p_value(p_1, mean_1, direction=1.0),
        one_sided_p_value(p_2, mean_2, direction=-1.0),
    )
    backward = np.maximum(
        one_sided_p_value(p_1, mean_1, direction=-1.0),
        one_sided_p_value(p_2, mean_2, direction=1.0),
    )
    result = np.asarray(np.minimum(forward, backward), dtype=np.float64)
    return float(result) if result.ndim == 0 else result


# --- rank agreement ----------------------------------------------------------------------


def kendall_tau(ranks_a: Mapping[str, float], ranks_b: Mapping[str, float]) -> float:
    """Kendall's tau-b between two rankings of the same labels.

    ``tau_b = (C - D) / sqrt((n0 - T_a)(n0 - T_b))`` over all unordered label
    pairs, equal to ``scipy.stats.kendalltau(..., variant="b")``. NaN when
    either ranking is entirely tied.

    No p-value is returned on purpose: with m labels the exact permutation
    null cannot go below ``2/m!`` (0.083 at m = 4; higher with ties, see
    :func:`min_attainable_kendall_p_given_ties`), and the coefficients of
    many seed pairs share seeds, so they cannot be pooled into one test;
    :func:`kendall_w` with :func:`kendall_w_permutation_p` is that test.

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


def _arrangement_extreme(x_sorted: np.ndarray, y: np.ndarray) -> tuple[int, float]:
    """``C - D`` of the pairing ``(x_sorted, y)`` and the probability of its contingency table.

    Under the permutation null every pairing of the two rankings is equally
    likely, and a pairing's ``C - D`` depends only on its contingency table
    ``N`` of tie groups; ``prod a_i! prod b_j! / (m! prod N_ij!)`` of all
    pairings share that table.
    """
    signs_x = np.sign(x_sorted[:, None] - x_sorted[None, :])
    signs_y = np.sign(y[:, None] - y[None, :])
    concordance = int(np.rint(np.triu(signs_x * signs_y, k=1).sum()))
    _, group_a = np.unique(x_sorted, return_counts=True)
    _, group_b = np.unique(y, return_counts=True)
    _, cells = np.unique(np.stack([x_sorted, y]), axis=1, return_counts=True)
    count = math.prod(math.factorial(int(c)) for c in (*group_a, *group_b))
    count //= math.prod(math.factorial(int(c)) for c in cells)
    return concordance, float(Fraction(count, math.factorial(len(y))))


def min_attainable_kendall_p_given_ties(
    ranks_a: Sequence[float], ranks_b: Sequence[float]
) -> float:
    """Smallest two-sided p-value Kendall's exact permutation null can reach for these ties.

    The null permutes one ranking against the other, keeping both tie
    structures. The most extreme ``C - D`` is reached by the pairing that
    sorts both rankings the same way (or opposite ways), and only by the
    pairings with that pairing's contingency table of tie groups, whose
    share of the ``m!`` pairings is ``prod a_i! prod b_j! / (m! prod N_ij!)``.
    The floor is that share (both extremes when they are equally far from
    zero). Without ties this is ``2/m!`` (:func:`min_attainable_kendall_p`);
    one tied pair at m = 4 gives 2/12 = 0.167 instead of 0.083.

    Args:
        ranks_a, ranks_b: the two rankings (scores or ranks; only their order
            and ties matter), the same length m >= 3, all finite.

    Returns:
        The floor in (0, 1]; NaN when either ranking is entirely tied (tau is
        then undefined).

    Raises:
        ValueError: different lengths, fewer than 3 values or a non-finite one.
    """
    a = np.asarray(ranks_a, dtype=np.float64)
    b = np.asarray(ranks_b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"both rankings must be 1-D of one length, got {a.shape} and {b.shape}")
    if a.size < _MIN_TAU_LABELS:
        raise ValueError(f"kendall_tau needs at least 3 labels, got {a.size}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("kendall_tau needs finite ranks")
    if np.unique(a).size < 2 or np.unique(b).size < 2:
        return _NAN
    x = np.sort(a)
    y = np.sort(b)
    largest, p_largest = _arrangement_extreme(x, y)
    smallest, p_smallest = _arrangement_extreme(x, y[::-1].copy())
    if largest > -smallest:
        floor = p_largest
    elif -smallest > largest:
        floor = p_smallest
    else:
        floor = p_largest + p_smallest
    return float(min(1.0, floor))


def _rank_rows(scores: Any) -> np.ndarray:
    """Average ranks within each row of a (raters x objects) array; finite values required."""
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] < 2 or array.shape[1] < _MIN_TAU_LABELS:
        raise ValueError(
            f"Kendall's W needs a 2-D array of at least 2 seeds x 3 models, got shape {array.shape}"
        )
    if not np.isfinite(array).all():
        raise ValueError("Kendall's W needs finite values")
    # Average ranks are exact halves, so pandas' equal scipy.stats.rankdata's bit for bit.
    return pd.DataFrame(array).rank(axis=1, method="average").to_numpy(dtype=np.float64)


def _w_parts(ranks: np.ndarray) -> tuple[float, float]:
    """``S`` (spread of the rank totals) and the tie-corrected denominator of W / 12."""
    m, n = ranks.shape
    totals = ranks.sum(axis=0)
    spread = float(((totals - totals.mean()) ** 2).sum())
    ordered = np.sort(ranks, axis=1)
    starts = np.ones(ranks.shape, dtype=bool)
    starts[:, 1:] = np.diff(ordered, axis=1) != 0
    group = np.cumsum(starts, axis=1) - 1  # tie group of each sorted value within its row
    counts = np.bincount((np.arange(m)[:, None] * n + group).ravel(), minlength=m * n)
    ties = float((counts.astype(np.float64) ** 3 - counts).sum())
    return spread, (m * m * (n**3 - n) - m * ties) / 12.0


def kendall_w(scores: Any) -> float:
    """Kendall's coefficient of concordance W of several seeds' rankings of the same models.

    ``W = 12 S / (m^2 (n^3 - n) - m sum T)`` (Kendall & Babington Smith 1939),
    with ``m`` seeds, ``n`` models, ``S`` the sum of squared deviations of the
    models' rank totals from their mean and ``T = sum (t^3 - t)`` over each
    seed's tie groups. 1 means every seed ranks the models identically, 0
    means the rank totals are all equal. It equals the Friedman statistic
    divided by ``m (n - 1)`` (``scipy.stats.friedmanchisquare``, tie
    corrected). Unlike the mean pairwise tau it is one statistic for the
    whole dataset, so it has an honest permutation test
    (:func:`kendall_w_permutation_p`).

    Args:
        scores: shape ``(seeds, models)``; each row is ranked (average ranks
            for ties), so scores or ranks both work.

    Returns:
        W in [0, 1]; NaN when every seed ties every model.
    """
    spread, denominator = _w_parts(_rank_rows(scores))
    return float(spread / denominator) if denominator > 0 else _NAN


#: Most ranks drawn for one permutation test of W (about 0.1 s at 50 ns a draw).
PERMUTATION_DRAW_BUDGET = 2_000_000
#: Fewest permutations worth running; below this W is tested by chi-squared.
MIN_PERMUTATIONS = 999
#: Largest (permutations x seeds x models) block drawn at once.
_PERMUTATION_BLOCK = 2_000_000


def kendall_w_permutation_p(
    scores: Any,
    *,
    n_permutations: int = DEFAULT_N_PERMUTATIONS,
    seed: Any = 0,
) -> float:
    """Permutation p-value of Kendall's W against "the seeds' rankings are unrelated".

    Each replicate permutes every seed's ranks independently (keeping its
    ties) and recomputes ``S``; ``p = (1 + #{S_perm >= S_obs}) / (1 +
    n_permutations)``, which is a valid p-value at any number of
    permutations (Phipson & Smyth 2010). The null is exchangeability of the
    models within each seed; it does not need the chi-squared approximation
    that fails with few models.

    Args:
        scores: shape ``(seeds, models)``, as for :func:`kendall_w`.
        n_permutations: replicates, at least 1.
        seed: anything :func:`numpy.random.default_rng` accepts.

    Returns:
        The p-value in (0, 1]; NaN when W is undefined.
    """
    count = _check_count("n_permutations", n_permutations)
    if count < 1:
        raise ValueError(f"n_permutations must be at least 1, got {count}")
    ranks = _rank_rows(scores)
    observed, denominator = _w_parts(ranks)
    if denominator <= 0:
        return _NAN
    rng = np.random.default_rng(seed)
    tolerance = 1e-9 * max(1.0, observed)
    block = max(1, _PERMUTATION_BLOCK // ranks.size)
    at_least = 0
    done = 0
    while done < count:
        size = min(block, count - done)
        permuted = rng.permuted(np.broadcast_to(ranks, (size, *ranks.shape)), axis=2)
        totals = permuted.sum(axis=1)
        spread = ((totals - totals.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        at_least += int(np.count_nonzero(spread >= observed - tolerance))
        done += size
    return float((1 + at_least) / (1 + count))


def kendall_w_chi2_p(scores: Any) -> float:
    """Large-sample p-value of Kendall's W: ``m (n - 1) W`` against chi-squared with ``n - 1`` df.

    This is Friedman's test (Friedman 1937), tie corrected, equal to
    ``scipy.stats.friedmanchisquare(...).pvalue``; accurate with many seeds,
    which is where :func:`kendall_w_p_value` uses it.
    """
    ranks = _rank_rows(scores)
    spread, denominator = _w_parts(ranks)
    if denominator <= 0:
        return _NAN
    m, n = ranks.shape
    return float(chi2_sf(m * (n - 1) * spread / denominator, n - 1))


def kendall_w_p_value(
    scores: Any,
    *,
    n_permutations: int = DEFAULT_N_PERMUTATIONS,
    seed: Any = 0,
) -> tuple[float, int]:
    """p-value of Kendall's W within a fixed cost: permutations, or chi-squared for large grids.

    A permutation replicate draws one rank per (seed, model) cell. Up to
    ``PERMUTATION_DRAW_BUDGET`` draws the requested ``n_permutations`` run in
    full; beyond it the count is reduced to fit, and when fewer than
    ``MIN_PERMUTATIONS`` would fit (more than about 2,000 cells, i.e. many
    seeds) the chi-squared approximation of :func:`kendall_w_chi2_p` is used,
    which is accurate there.

    Returns:
        ``(p_value, permutations)``; ``permutations`` is 0 when the chi-squared
        approximation was used.
    """
    count = _check_count("n_permutations", n_permutations)
    if count < 1:
        raise ValueError(f"n_permutations must be at least 1, got {count}")
    cells = _rank_rows(scores).size
    fitting = min(count, PERMUTATION_DRAW_BUDGET // cells)
    if fitting == count or fitting >= MIN_PERMUTATIONS:
        return kendall_w_permutation_p(scores, n_permutations=fitting, seed=seed), fitting
    return kendall_w_chi2_p(scores), 0


def jackknife_mean_tau(
    tau_matrix: Any, confidence_level: float = CONFIDENCE_LEVEL
) -> dict[str, float]:
    """Leave-one-seed-out jackknife interval for the mean pairwise Kendall tau.

    The mean tau over all seed pairs is a U-statistic of the seeds, so its
    pairs are dependent and their [min, max] is no interval (it widens as
    seeds are added). The jackknife deletes one seed at a time: with
    ``tau_(i)`` the mean over the pairs without seed ``i`` and ``n`` seeds,
    ``se = sqrt((n - 1)/n * sum (tau_(i) - mean tau_(.))^2)`` (Efron & Stein
    1981), and the interval is ``mean +/- t_{n-1} se``. Seeds whose taus are
    all undefined (an all-tied ranking) do not count.

    Args:
        tau_matrix: symmetric ``(seeds, seeds)`` array of pairwise taus, NaN
            where undefined; the diagonal is ignored.
        confidence_level: two-sided coverage in (0, 1).

    Returns:
        ``{"mean", "se", "lower", "upper", "n"}``; ``se`` and the bounds are
        NaN below three usable seeds. The bounds are not clipped to [-1, 1].
    """
    _check_confidence_level(confidence_level)
    matrix = np.asarray(tau_matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"tau_matrix must be square, got shape {matrix.shape}")
    usable = np.isfinite(matrix) & ~np.eye(matrix.shape[0], dtype=bool)
    keep = usable.any(axis=1)
    matrix, usable = matrix[np.ix_(keep, keep)], usable[np.ix_(keep, keep)]
    n = int(keep.sum())
    values = np.where(usable, matrix, 0.0)
    total, pairs = values.sum() / 2.0, usable.sum() / 2.0
    result = {"mean": _NAN, "se": _NAN, "lower": _NAN, "upper": _NAN, "n": n}
    if pairs == 0:
        return result
    mean = float(total / pairs)
    result["mean"] = mean
    if n < _MIN_TAU_LABELS:
        return result
    remaining = pairs - usable.sum(axis=1)
    if (remaining <= 0).any():
        return result
    left_out = (total - values.sum(axis=1)) / remaining
    se = float(math.sqrt((n - 1) / n * ((left_out - left_out.mean()) ** 2).sum()))
    half_width = float(t_critical(confidence_level, n - 1)) * se
    result.update(se=se, lower=mean - half_width, upper=mean + half_width)
    return result


# --- multiplicity ---------------------------------------------------------------------------


def _checked_numeric_array(p_values: np.ndarray) -> np.ndarray:
    """The fast path of :func:`_pvalue_array` for a 1-D numeric array (no per-value loop).

    The flip grid adjusts hundreds of thousands of p-values; validating them
    one Python object at a time cost about a second per adjustment.
    """
    array = p_values.astype(np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~(np.isnan(array) | ((array >= 0.0) & (array <= 1.0)))
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise ValueError(f"p-value at position {position} is {array[position]!r}, outside [0, 1]")
    return array


def _pvalue_array(p_values: Any) -> tuple[np.ndarray, list[str]]:
    """Validate p-values of any accepted kind; return them as float64 plus position names.

    A numeric 1-D array takes a vectorised path and comes back with no names
    (its error messages name positions directly).
    """
    if isinstance(p_values, np.ndarray) and p_values.ndim == 1 and p_values.dtype.kind in "fiu":
        return _checked_numeric_array(p_values), []
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
    ``c(m) = sum_{k=1..m} 1/k``. It is the flip grid's default because the
    grid's p-values share models, datasets and seeds, and the sign of their
    dependence is not known: the *directional* statistics of A-B and B-C
    contain B's scores with opposite signs, so one-sided p-values such as
    ``p_reversal`` can be negatively dependent, and no PRDS result covers
    the intersection-union maxima they are built from. (The two-sided
    component p-values are not the concern: absolute t statistics of
    overlapping comparisons are positively associated whatever the sign of
    their correlation.) Same input contract as :func:`holm_adjust`.
    """
    array, _ = _pvalue_array(p_values)
    m = int(np.count_nonzero(~np.isnan(array)))
    harmonic = float(np.sum(1.0 / np.arange(1, m + 1))) if m else 1.0
    return _adjust(p_values, scale=harmonic, step_up=True)


def fdr_adjust(p_values: PValues, method: str = FDR_METHOD_BY) -> PValues:
    """False-discovery-rate adjustment by name: ``"by"`` (default) or ``"bh"``.

    ``"by"`` is :func:`benjamini_yekutieli_adjust`, valid under any
    dependence; ``"bh"`` is :func:`benjamini_hochberg_adjust`, less
    conservative by the factor ``c(m)`` (about 8.2 at m = 2,025) but valid
    only under independence or positive regression dependence. Same input
    contract as :func:`holm_adjust`.

    Raises:
        ValueError: ``method`` is neither ``"by"`` nor ``"bh"``.
    """
    _check_fdr_method(method)
    if method == FDR_METHOD_BH:
        return benjamini_hochberg_adjust(p_values)
    return benjamini_yekutieli_adjust(p_values)


# --- converge-or-collapse detection -------------------------------------------------------------

#: Critical values of the bimodality ratio (largest gap / pooled within-cluster SD)
#: by seed count: the 98.5th percentile of the ratio on unimodal normal samples, so a
#: unimodal sample of any mean and SD is flagged with probability 1.5%, inside the
#: 2% that issue 10 allows with room for Monte Carlo error. Measured with 2,000,000
#: normal samples per count (``benchmarks/bench_bimodality.py --calibrate``
#: regenerates them). The percentile falls as seeds are added, so counts above the
#: table use its last value, which is conservative there.
_BIMODAL_CRITICAL_RATIO = {
    3: 154.0,
    4: 22.4,
    5: 11.5,
    6: 7.96,
    7: 6.27,
    8: 5.26,
    9: 4.6,
    10: 4.11,
    11: 3.76,
    12: 3.49,
    13: 3.27,
    14: 3.09,
    15: 2.96,
    16: 2.83,
    17: 2.73,
    18: 2.65,
    19: 2.57,
    20: 2.51,
}
_CRITICAL_RATIOS = np.array(
    [np.inf] * _MIN_TAU_LABELS
    + [_BIMODAL_CRITICAL_RATIO[k] for k in sorted(_BIMODAL_CRITICAL_RATIO)]
)


def chance_level(metric: str, n_classes: int | None = None) -> float | None:
    """The score of a model that has learned nothing, where the metric fixes it.

    0.5 for AUROC, 0.0 for MCC, ``1/K`` for accuracy and balanced accuracy when
    the class count ``K`` is given (balanced classes for accuracy); None for
    every other metric (F1, precision and recall depend on the prevalence,
    calibration errors on the predicted probabilities).
    """
    if metric in CHANCE_LEVELS:
        return CHANCE_LEVELS[metric]
    if metric in CHANCE_ONE_OVER_K and n_classes is not None:
        count = _check_count("n_classes", n_classes)
        if count < 2:
            raise ValueError(f"n_classes must be at least 2, got {count}")
        return 1.0 / count
    return None


def collapse_gap_floor(metric: str | None, n_classes: int | None = None) -> float:
    """Smallest gap between per-seed values of ``metric`` that the bimodality rule may flag.

    For a metric with a known chance level (:func:`chance_level`) the floor is
    ``COLLAPSE_FLOOR_FRACTION`` of the span from chance to the best value
    (0.1 for AUROC, 0.2 for MCC, 0.1 for binary accuracy); calibration errors
    have floors of their own (``COLLAPSE_GAP_FLOORS``: 0.02 for ECE and
    Brier, whose values sit below 0.15); everything else, F1 included, uses
    ``MIN_COLLAPSE_GAP``. The floor only keeps a statistically clear but tiny
    split (three seeds at 0.801, 0.802, 0.85) from being called a collapse;
    the scale-aware ratio of :func:`is_bimodal` does the statistical work.
    """
    if metric is None:
        return MIN_COLLAPSE_GAP
    if metric in COLLAPSE_GAP_FLOORS:
        return COLLAPSE_GAP_FLOORS[metric]
    chance = chance_level(metric, n_classes)
    if chance is not None:
        best = METRIC_RANGES.get(metric, (0.0, 1.0))[1]
        return COLLAPSE_FLOOR_FRACTION * ((1.0 if math.isinf(best) else best) - chance)
    return MIN_COLLAPSE_GAP


def _check_min_gap(min_gap: Any) -> float:
    try:
        gap_threshold = float(min_gap)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"min_gap must be a finite number > 0, got {min_gap!r}") from exc
    if not math.isfinite(gap_threshold) or gap_threshold <= 0:
        raise ValueError(f"min_gap must be a finite number > 0, got {min_gap!r}")
    return gap_threshold


def _largest_gap_split(values: np.ndarray) -> dict[str, np.ndarray]:
    """Per row of ``values`` (rows x seeds, NaN = missing): the largest-gap split.

    Returns arrays ``n`` (finite values), ``gap`` (largest gap between
    consecutive sorted values; on ties the lowest position), ``n_low``
    (values below it) and ``within_sd`` (the pooled SD of the two clusters
    about their own means, ``n - 2`` degrees of freedom; NaN below 3 values).
    """
    present = np.isfinite(values)
    n = present.sum(axis=1)
    rows, width = values.shape
    result = {
        "n": n,
        "gap": np.full(rows, np.nan),
        "n_low": np.zeros(rows, dtype=np.int64),
        "within_sd": np.full(rows, np.nan),
    }
    if width < 2 or rows == 0:
        return result
    ordered = np.sort(np.where(present, values, np.inf), axis=1)
    positions = np.arange(width)[None, :]
    with np.errstate(invalid="ignore"):
        gaps = np.diff(ordered, axis=1)
    gaps = np.where(positions[:, :-1] < (n - 1)[:, None], gaps, -np.inf)
    split = np.argmax(gaps, axis=1)
    n_low = split + 1
    low = positions < n_low[:, None]
    high = ~low & (positions < n[:, None])
    safe = np.where(low | high, ordered, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_low = np.where(low, safe, 0.0).sum(axis=1) / n_low
        mean_high = np.where(high, safe, 0.0).sum(axis=1) / (n - n_low)
        deviations = np.where(low, safe - mean_low[:, None], safe - mean_high[:, None])
        squares = np.where(low | high, deviations**2, 0.0).sum(axis=1)
        within_sd = np.where(n >= _MIN_TAU_LABELS, np.sqrt(squares / (n - 2)), np.nan)
    result["gap"] = np.where(n >= 2, gaps[np.arange(rows), split], np.nan)
    result["n_low"] = np.where(n >= 2, n_low, 0)
    result["within_sd"] = within_sd
    return result


def bimodal_flags(values: np.ndarray, min_gap: float = MIN_COLLAPSE_GAP) -> np.ndarray:
    """Vectorised scale-aware rule of :func:`is_bimodal` (without a baseline), one flag per row.

    Args:
        values: shape ``(rows, seeds)``, NaN (or an infinity) for a missing value.
        min_gap: the floor (:func:`collapse_gap_floor`), finite and > 0.

    Returns:
        Boolean array of shape ``(rows,)``.
    """
    floor = _check_min_gap(min_gap)
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"values must be 2-D (rows x seeds), got shape {array.shape}")
    split = _largest_gap_split(array)
    n = split["n"]
    critical = _CRITICAL_RATIOS[np.clip(n, 0, len(_CRITICAL_RATIOS) - 1)]
    with np.errstate(invalid="ignore"):
        return (
            (n >= _MIN_TAU_LABELS)
            & (split["gap"] >= floor)
            & (split["gap"] >= critical * split["within_sd"])
        )


def is_bimodal(
    values: Sequence[float],
    *,
    baseline: float | None = None,
    min_gap: float = MIN_COLLAPSE_GAP,
) -> tuple[bool, str]:
    """Flag a converge-or-collapse pattern across seeds.

    The sorted values are split at their largest gap ``g`` (on ties the
    lowest position) into a low and a high cluster, and ``s`` is the pooled
    SD of the two clusters about their own means (``n - 2`` degrees of
    freedom). The sample is flagged when

    * ``g >= c(n) * s``: the gap is large relative to the clusters' own
      spread, with ``c(n)`` the 98.5th percentile of ``g / s`` on unimodal
      normal samples of ``n`` values (154 at 3 seeds, 11.5 at 5, 4.11 at 10),
      so ordinary scatter of any SD is flagged 1.5% of the time; and
    * ``g >= min_gap``: the floor of the metric (:func:`collapse_gap_floor`),
      which keeps a tight but tiny split from counting as a collapse.

    With three seeds only a split whose pair agrees within about 1/154 of the
    gap is flagged: three values can hardly tell a collapse from scatter.

    Args:
        values: per-seed scores; non-finite entries are dropped.
        baseline: optional explicit floor score (an untrained model's, say);
            any seed strictly below it flags the sample. None or a non-finite
            value is ignored. This is a user's statement, not a test; the
            chance level enters through ``min_gap`` instead, because seeds of
            a weak but working model scatter below chance by accident.
        min_gap: the floor (must be finite and > 0).

    Returns:
        ``(flag, reason)``; the reason is ``""`` when not flagged. Fewer than
        three finite values are never flagged.

    Why not the old absolute rule (any gap above 0.15): unimodal scatter of
    SD 0.12 crossed it in 44% of 3-seed samples, and calibration errors,
    whose values sit below 0.15, could never cross it. Why not a MAD or
    outlier rule: with five seeds the MAD is too noisy a scale estimate,
    and the calibrated ratio already accounts for the noise in ``s``.
    """
    floor = _check_min_gap(min_gap)
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
    if not bimodal_flags(finite[None, :], floor)[0]:
        return False, ""
    split = _largest_gap_split(finite[None, :])
    gap, low, spread = float(split["gap"][0]), int(split["n_low"][0]), float(split["within_sd"][0])
    scale = (
        f"{gap / spread:.1f} times the clusters' own SD"
        if spread > 0
        else "clusters without spread of their own"
    )
    return True, f"{low} of {k} seeds sit {gap:.3f} below the other {k - low} ({scale})"
