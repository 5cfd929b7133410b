"""Exact McNemar test, and its mid-p value, on paired per-sample correctness.

The test asks whether two classifiers scored on the same units disagree
asymmetrically. Units both models get right, or both get wrong, carry no
information about which is better; under the null hypothesis the discordant
units split like a fair coin, so the exact binomial tail needs no
large-sample approximation and stays correct when the discordant count is
small (rare classes, near-identical models), exactly where the chi-squared
approximation misleads.

The exact test is conservative: its p-value counts the whole probability of
the observed split, so its Type-I error sits below the nominal level, far
below it with few discordant units. The mid-p value counts half of it
(Lancaster 1961); Fagerland, Lydersen & Laake (2013) found the mid-p McNemar
test close to the nominal level at every sample size they studied, and it is
reported beside the exact p-value, never instead of it.

References: McNemar (1947), *Note on the sampling error of the difference
between correlated proportions or percentages*, Psychometrika 12(2):153-157;
Lancaster (1961), *Significance tests in discrete distributions*, JASA
56(294):223-234; Fagerland, Lydersen & Laake (2013), *The McNemar test for
binary matched-pairs data: mid-p and asymptotic are better than exact
conditional*, BMC Medical Research Methodology 13:91.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from deepecgkit.analysis.compare.errors import ComparisonError

__all__ = ["MCNEMAR_CAVEAT", "MCNEMAR_CAVEAT_CODE", "mcnemar", "mcnemar_mid_p"]

#: Text carried into the metadata of anything that reports a sample-level McNemar p-value.
MCNEMAR_CAVEAT = (
    "Sample-level McNemar p-values treat every sample as independent; samples from one "
    "recording or patient are correlated, so these p-values are too small. Use group-level "
    "results for claims."
)
#: Machine-readable code of :data:`MCNEMAR_CAVEAT`.
MCNEMAR_CAVEAT_CODE = "mcnemar_sample_level_anti_conservative"

_FAIR_COIN = 0.5


def _as_correctness(name: str, values: ArrayLike) -> np.ndarray:
    """Return ``values`` as a 1-D boolean array, or raise naming ``name``.

    Booleans are taken as they are; numeric arrays must hold only 0 and 1
    (NaN and every other value are rejected rather than thresholded, since a
    score passed by mistake would otherwise be read silently).
    """
    array = np.asarray(values)
    if array.ndim != 1:
        raise ComparisonError(f"{name} must be 1-D, got shape {array.shape}")
    if array.dtype == np.bool_:
        return array
    if array.size and array.dtype.kind not in "biuf":
        raise ComparisonError(
            f"{name} must be boolean or hold only 0 and 1, got dtype {array.dtype}"
        )
    valid = (array == 0) | (array == 1)
    if not np.all(valid):
        bad = array[~valid][:5].tolist()
        raise ComparisonError(f"{name} must be boolean or hold only 0 and 1, got values {bad}")
    return array.astype(bool)


def mcnemar(first_correct: ArrayLike, second_correct: ArrayLike) -> tuple[int, int, float]:
    """Exact two-sided McNemar test of two classifiers on the same units.

    Args:
        first_correct: shape ``(n,)``, whether the first model classified each
            unit correctly (booleans, or numbers that are all 0 or 1).
        second_correct: shape ``(n,)``, the same for the second model, aligned
            unit for unit with ``first_correct``.

    Returns:
        ``(only_first, only_second, p)``: the units only the first model got
        right, the units only the second got right, and
        ``p = min(1, 2 * BinomCDF(min(only_first, only_second); n_discordant, 1/2))``.
        With no discordant unit (identical correctness, or empty inputs) ``p``
        is 1.0: no disagreement is no evidence either way. Swapping the
        arguments swaps the counts and leaves ``p`` unchanged.

    Raises:
        ComparisonError: an input is not 1-D, holds a value other than 0/1
            (NaN included), or the shapes differ (the arrays are then not
            aligned sample for sample, and truncating would compare different
            samples).

    Samples of one recording or patient are not independent, so a p-value on
    such samples is anti-conservative; see :data:`MCNEMAR_CAVEAT`.

    Example:
        >>> mcnemar([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0])
        (7, 1, 0.0703125)
    """
    only_first, only_second = _discordant_counts(first_correct, second_correct)
    discordant = only_first + only_second
    if discordant == 0:
        return only_first, only_second, 1.0
    smaller = min(only_first, only_second)
    p_value = min(1.0, 2.0 * float(_binomial().cdf(smaller, discordant, _FAIR_COIN)))
    return only_first, only_second, p_value


def mcnemar_mid_p(first_correct: ArrayLike, second_correct: ArrayLike) -> float:
    """Two-sided mid-p value of the McNemar test, beside :func:`mcnemar`'s exact one.

    With ``b`` the smaller discordant count of ``n``:
    ``p_mid = min(1, 2 * (BinomCDF(b - 1; n, 1/2) + BinomPMF(b; n, 1/2) / 2))``,
    which is the exact p-value minus the probability of the observed split
    (Fagerland, Lydersen & Laake 2013). 1.0 with no discordant unit.
    Same inputs and errors as :func:`mcnemar`.

    Example:
        >>> first = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
        >>> round(mcnemar_mid_p(first, [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0]), 12)  # 10 / 256
        0.0390625
    """
    only_first, only_second = _discordant_counts(first_correct, second_correct)
    discordant = only_first + only_second
    if discordant == 0:
        return 1.0
    smaller = min(only_first, only_second)
    binomial = _binomial()
    below = float(binomial.cdf(smaller - 1, discordant, _FAIR_COIN))
    at = float(binomial.pmf(smaller, discordant, _FAIR_COIN))
    return min(1.0, 2.0 * below + at)


def _binomial() -> Any:
    """``scipy.stats.binom``, imported on first use.

    Only a report with paired predictions reaches a McNemar test, and
    ``scipy.stats`` costs about a second to import: every other process that
    loads the analysis (each CLI call, each run the daemon launches) is spared
    it (see :mod:`deepecgkit.analysis.distributions`). Its binomial is kept,
    rather than ``scipy.special.bdtr``, because the two differ (by up to
    6e-13 relative at ``n <= 400``) and the report's p-values stay what they were.
    """
    from scipy import stats

    return stats.binom


def _discordant_counts(first_correct: ArrayLike, second_correct: ArrayLike) -> tuple[int, int]:
    """``(only_first, only_second)`` after validating both correctness arrays."""
    first = _as_correctness("first_correct", first_correct)
    second = _as_correctness("second_correct", second_correct)
    if first.shape != second.shape:
        raise ComparisonError(
            "first_correct and second_correct must be aligned sample for sample, got shapes "
            f"{first.shape} and {second.shape}"
        )
    return int(np.count_nonzero(first & ~second)), int(np.count_nonzero(~first & second))
