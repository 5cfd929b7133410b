"""McNemar test, exact and mid-p: worked example, references, symmetry, size and input errors."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar as statsmodels_mcnemar

from deepecgkit.analysis.compare import ComparisonError, mcnemar, mcnemar_mid_p

FIRST = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
SECOND = [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0]


def _arrays(both: int, only_first: int, only_second: int, neither: int) -> tuple:
    first = np.repeat([1, 1, 0, 0], [both, only_first, only_second, neither]).astype(bool)
    second = np.repeat([1, 0, 1, 0], [both, only_first, only_second, neither]).astype(bool)
    return first, second


def test_worked_example() -> None:
    assert mcnemar(FIRST, SECOND) == (7, 1, 0.0703125)
    assert mcnemar(SECOND, FIRST) == (1, 7, 0.0703125)
    assert mcnemar(FIRST, FIRST) == (0, 0, 1.0)


def test_empty_inputs_give_no_evidence() -> None:
    assert mcnemar([], []) == (0, 0, 1.0)
    assert mcnemar(np.array([], dtype=bool), np.array([], dtype=bool)) == (0, 0, 1.0)


def test_returns_python_types() -> None:
    only_first, only_second, p = mcnemar(np.array(FIRST), np.array(SECOND, dtype=float))
    assert type(only_first) is int and type(only_second) is int and type(p) is float


@pytest.mark.parametrize("n", range(1, 60))
def test_matches_scipy_binomtest_for_every_split(n: int) -> None:
    for k in range(n + 1):
        first, second = _arrays(3, k, n - k, 2)
        expected = stats.binomtest(min(k, n - k), n, 0.5, alternative="two-sided").pvalue
        assert mcnemar(first, second)[2] == pytest.approx(expected, rel=0, abs=1e-14)


def test_matches_statsmodels_exact_on_random_tables() -> None:
    rng = np.random.default_rng(20260301)
    for _ in range(300):
        both, only_first, only_second, neither = rng.integers(0, 60, size=4)
        first, second = _arrays(both, only_first, only_second, neither)
        table = [[both, only_first], [only_second, neither]]
        expected = statsmodels_mcnemar(table, exact=True).pvalue
        result = mcnemar(first, second)
        assert result[:2] == (only_first, only_second)
        assert result[2] == pytest.approx(expected, rel=1e-12, abs=1e-15)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=80))
def test_symmetric(pairs: list[tuple[bool, bool]]) -> None:
    first = np.array([a for a, _ in pairs], dtype=bool)
    second = np.array([b for _, b in pairs], dtype=bool)
    a_first, a_second, p = mcnemar(first, second)
    b_first, b_second, q = mcnemar(second, first)
    assert (a_first, a_second) == (b_second, b_first)
    assert p == q
    assert 0.0 < p <= 1.0


def test_shape_mismatch_names_both_shapes() -> None:
    with pytest.raises(ComparisonError, match=r"\(12,\).*\(11,\)"):
        mcnemar(FIRST, SECOND[:11])


@pytest.mark.parametrize(
    "bad",
    [[0, 1, 2], [0.0, 0.5, 1.0], [0.0, np.nan, 1.0], ["a", "b", "c"], [[0, 1, 1]]],
)
def test_rejects_values_other_than_zero_and_one(bad: list) -> None:
    with pytest.raises(ComparisonError):
        mcnemar(bad, [0, 1, 1])
    with pytest.raises(ComparisonError):
        mcnemar([0, 1, 1], bad)


# --- mid-p ---------------------------------------------------------------------------------


def test_mid_p_worked_example() -> None:
    """b = 1 of n = 8: exact 2 (1 + 8)/256 = 0.0703; mid-p 2 (1 + 8/2)/256 = 0.0391."""
    assert mcnemar_mid_p(FIRST, SECOND) == pytest.approx(10 / 256, abs=1e-15)
    assert mcnemar_mid_p(SECOND, FIRST) == mcnemar_mid_p(FIRST, SECOND)
    assert mcnemar_mid_p(FIRST, FIRST) == 1.0
    assert mcnemar_mid_p([], []) == 1.0
    with pytest.raises(ComparisonError, match=r"\(12,\).*\(11,\)"):
        mcnemar_mid_p(FIRST, SECOND[:11])
    with pytest.raises(ComparisonError):
        mcnemar_mid_p([0, 2, 1], [0, 1, 1])


@pytest.mark.parametrize("n", range(1, 40))
def test_mid_p_is_the_exact_p_less_the_observed_split(n: int) -> None:
    """Reference: the two binomial tails summed by hand from scipy's pmf, the middle halved."""
    pmf = stats.binom.pmf(np.arange(n + 1), n, 0.5)
    for k in range(n + 1):
        first, second = _arrays(2, k, n - k, 1)
        b = min(k, n - k)
        expected = min(1.0, 2 * (pmf[:b].sum() + pmf[b] / 2))
        assert mcnemar_mid_p(first, second) == pytest.approx(expected, abs=1e-14)
        exact = mcnemar(first, second)[2]
        assert mcnemar_mid_p(first, second) <= exact
        if exact < 1.0:
            assert exact - mcnemar_mid_p(first, second) == pytest.approx(pmf[b], abs=1e-14)


#: Matched-pairs designs: pairs, and the probability that a pair is discordant.
DESIGNS = [(n, psi) for n in (20, 50, 100) for psi in (0.1, 0.2, 0.4)]
ALPHA = 0.05


@functools.cache
def conditional_sizes(n: int) -> tuple[float, float]:
    """Null rejection probability at level 0.05 of (mid-p, exact) given n discordant pairs."""
    pmf = stats.binom.pmf(np.arange(n + 1), n, 0.5)
    mid = exact = 0.0
    for k in range(n + 1):
        b = min(k, n - k)
        first, second = _arrays(0, b, n - b, 0)  # p depends on the split only through b
        mid += pmf[k] * (mcnemar_mid_p(first, second) <= ALPHA)
        exact += pmf[k] * (mcnemar(first, second)[2] <= ALPHA)
    return mid, exact


@pytest.mark.parametrize(("pairs", "psi"), DESIGNS)
def test_mid_p_size_is_nearer_nominal_than_the_exact_test(pairs: int, psi: float) -> None:
    """Exact Type-I error under the null, over the binomial number of discordant pairs.

    Conditionally on a fixed discordant count the mid-p size oscillates (it
    reaches 0.077 at 16), so the size is computed over the design, as in
    Fagerland et al. (2013): never above 0.05, and above the exact test's.
    """
    weights = stats.binom.pmf(np.arange(1, pairs + 1), pairs, psi)
    sizes = np.array([conditional_sizes(n) for n in range(1, pairs + 1)])
    mid, exact = weights @ sizes
    assert exact <= mid <= ALPHA
