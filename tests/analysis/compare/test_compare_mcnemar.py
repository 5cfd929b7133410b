"""Exact McNemar test: worked example, references, symmetry and input errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar as statsmodels_mcnemar

from deepecgkit.analysis.compare import ComparisonError, mcnemar

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
