"""The distribution functions equal ``scipy.stats``' bit for bit, on the domains they state."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from deepecgkit.analysis import distributions as dist
from deepecgkit.analysis.statistics import _rank_rows

PROBABILITIES = st.floats(min_value=1e-300, max_value=1.0, exclude_max=True)
UPPER_TAILS = st.floats(min_value=1e-300, max_value=0.5, exclude_max=True)
FINITE_DEGREES = st.one_of(
    st.integers(min_value=1, max_value=10_000).map(float),
    st.floats(min_value=1e-3, max_value=1e7),
)
DEGREES = st.one_of(FINITE_DEGREES, st.just(np.inf))
VALUES = st.floats(allow_nan=True, allow_infinity=True)


def same_bits(ours: object, theirs: object) -> bool:
    """Equal values (NaN equal to NaN), with the same sign of every zero."""
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    equal = (a == b) & (np.signbit(a) == np.signbit(b))
    return bool(np.all(equal | (np.isnan(a) & np.isnan(b))))


@settings(max_examples=300, deadline=None)
@given(p=PROBABILITIES, dof=DEGREES)
def test_t_quantiles_are_scipy_stats(p: float, dof: float) -> None:
    assert same_bits(dist.t_ppf(p, dof), stats.t.ppf(p, dof))


@settings(max_examples=300, deadline=None)
@given(q=UPPER_TAILS, dof=DEGREES)
def test_t_upper_quantiles_are_scipy_stats(q: float, dof: float) -> None:
    assert same_bits(dist.t_isf(q, dof), stats.t.isf(q, dof))


@settings(max_examples=300, deadline=None)
@given(x=VALUES, dof=DEGREES)
def test_t_tails_are_scipy_stats(x: float, dof: float) -> None:
    assert same_bits(dist.t_sf(x, dof), stats.t.sf(x, dof))


@settings(max_examples=300, deadline=None)
@given(x=VALUES)
def test_normal_distribution_functions_are_scipy_stats(x: float) -> None:
    assert same_bits(dist.normal_cdf(x), stats.norm.cdf(x))
    assert same_bits(dist.normal_sf(x), stats.norm.sf(x))


@settings(max_examples=300, deadline=None)
@given(p=st.floats(min_value=0.0, max_value=1.0))
def test_normal_quantiles_are_scipy_stats(p: float) -> None:
    assert same_bits(dist.normal_ppf(p), stats.norm.ppf(p))
    if p != 0.5:
        assert same_bits(dist.normal_isf(p), stats.norm.isf(p))


@settings(max_examples=300, deadline=None)
@given(x=st.floats(min_value=0.0, allow_infinity=True), dof=FINITE_DEGREES)
def test_chi2_tails_are_scipy_stats(x: float, dof: float) -> None:
    assert same_bits(dist.chi2_sf(x, dof), stats.chi2.sf(x, dof))


def test_arrays_are_taken_elementwise_as_scipy_stats_does() -> None:
    rng = np.random.default_rng(7)
    p = rng.uniform(0.0, 1.0, 10_000)
    dof = rng.integers(1, 300, 10_000).astype(np.float64)
    x = rng.normal(0.0, 4.0, 10_000)
    assert same_bits(dist.t_ppf(p, dof), stats.t.ppf(p, dof))
    assert same_bits(dist.t_sf(np.abs(x), dof), stats.t.sf(np.abs(x), dof))
    assert same_bits(dist.chi2_sf(x**2, dof), stats.chi2.sf(x**2, dof))
    assert same_bits(dist.normal_ppf(p), stats.norm.ppf(p))


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (dist.t_ppf(0.975, 4.0), 2.7764451051977987),
        (dist.normal_ppf(0.975), 1.959963984540054),
        (dist.chi2_sf(3.84, 1.0), 0.05004352124870519),
    ],
)
def test_textbook_values(ours: float, theirs: float) -> None:
    assert ours == pytest.approx(theirs, rel=1e-14)


def test_the_bit_check_can_fail() -> None:
    """Guard against a check that cannot fail: one ulp and the sign of zero are seen."""
    assert not same_bits(1.0, np.nextafter(1.0, 2.0))
    assert not same_bits(0.0, -0.0)
    assert same_bits(np.nan, np.nan)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(min_value=2, max_value=6),
    columns=st.integers(min_value=3, max_value=8),
    data=st.data(),
)
def test_rank_rows_are_scipy_stats_rankdata(rows: int, columns: int, data: st.DataObject) -> None:
    """Average ranks per row, ties included (few distinct values force many)."""
    values = data.draw(
        st.lists(
            st.sampled_from([-1.5, -0.0, 0.0, 0.25, 0.25, 3.0, 1e300]),
            min_size=rows * columns,
            max_size=rows * columns,
        )
    )
    array = np.array(values, dtype=np.float64).reshape(rows, columns)
    assert same_bits(_rank_rows(array), stats.rankdata(array, axis=1, method="average"))


@pytest.mark.parametrize("dof", [0.0, -1.0, np.nan])
def test_no_degrees_of_freedom_give_nan_as_scipy_stats_does(dof: float) -> None:
    """One seed gives ``n - 1 = 0``: its interval and p-value are undefined, not a crash."""
    assert np.isnan(dist.t_ppf(0.975, dof)) and np.isnan(stats.t.ppf(0.975, dof))
    assert np.isnan(dist.t_sf(1.5, dof)) and np.isnan(stats.t.sf(1.5, dof))
    assert np.isnan(dist.chi2_sf(1.5, dof)) and np.isnan(stats.chi2.sf(1.5, dof))


@settings(max_examples=200, deadline=None)
@given(level=st.floats(min_value=0.01, max_value=0.999), dof=DEGREES)
def test_the_two_sided_critical_value_is_the_upper_quantile(level: float, dof: float) -> None:
    assert same_bits(dist.t_critical(level, dof), stats.t.ppf((1.0 + level) / 2.0, dof))
