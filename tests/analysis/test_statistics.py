"""Tests of deepecgkit.analysis.statistics against scipy, statsmodels and hand values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats
from statsmodels.stats.multitest import multipletests

from deepecgkit.analysis.constants import ZERO_VARIANCE_TOL
from deepecgkit.analysis.statistics import (
    benjamini_hochberg_adjust,
    benjamini_yekutieli_adjust,
    bonferroni_adjust,
    holm_adjust,
    is_bimodal,
    kendall_tau,
    min_attainable_kendall_p,
    nadeau_bengio_factor,
    paired_summary,
    summarize_scores,
)

ADJUSTERS = {
    "holm": holm_adjust,
    "bonferroni": bonferroni_adjust,
    "fdr_bh": benjamini_hochberg_adjust,
    "fdr_by": benjamini_yekutieli_adjust,
}
T_975_4 = 2.7764451052

p_value = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
p_or_nan = st.one_of(p_value, st.just(math.nan))
scores = st.floats(min_value=-10, max_value=10, allow_nan=False, allow_infinity=False)


# --- summarize_scores ---------------------------------------------------------------------


def test_summarize_scores_worked_example() -> None:
    result = summarize_scores([0.80, 0.82, 0.79, 0.81, 0.83])
    assert list(result) == ["mean", "std", "sem", "lower_ci", "upper_ci", "n"]
    assert result["mean"] == pytest.approx(0.81, abs=1e-12)
    assert result["std"] == pytest.approx(0.0158113883, abs=1e-9)
    assert result["sem"] == pytest.approx(0.0070710678, abs=1e-9)
    assert result["lower_ci"] == pytest.approx(0.7903675684, abs=1e-9)
    assert result["upper_ci"] == pytest.approx(0.8296324316, abs=1e-9)
    assert result["n"] == 5
    assert isinstance(result["mean"], float) and isinstance(result["n"], int)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(scores, min_size=2, max_size=12),
    level=st.floats(min_value=0.5, max_value=0.999),
)
def test_summarize_scores_matches_scipy_t_interval(values: list[float], level: float) -> None:
    result = summarize_scores(values, level)
    sample = np.asarray(values)
    if sample.std(ddof=1) == 0:
        assert result["lower_ci"] == result["upper_ci"] == result["mean"]
        return
    low, high = stats.t.interval(level, len(values) - 1, loc=sample.mean(), scale=stats.sem(sample))
    assert result["lower_ci"] == pytest.approx(low, abs=1e-9)
    assert result["upper_ci"] == pytest.approx(high, abs=1e-9)
    assert result["lower_ci"] <= result["mean"] <= result["upper_ci"]


def test_summarize_scores_edge_cases() -> None:
    empty = summarize_scores([])
    assert empty["n"] == 0 and all(math.isnan(empty[k]) for k in empty if k != "n")
    one = summarize_scores([0.7, math.nan, math.inf])
    assert one["n"] == 1 and one["mean"] == 0.7
    assert math.isnan(one["std"]) and math.isnan(one["lower_ci"])
    flat = summarize_scores([0.5, 0.5, 0.5])
    assert flat["std"] == 0 and flat["sem"] == 0
    assert flat["lower_ci"] == flat["upper_ci"] == 0.5
    assert summarize_scores(0.3)["n"] == 1
    assert summarize_scores(pd.Series([0.1, None, 0.3]))["n"] == 2
    with pytest.raises(ValueError, match="numeric"):
        summarize_scores(["a", "b"])


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, math.nan, True, "0.95", None])
def test_confidence_level_checked_even_on_empty_input(level: object) -> None:
    with pytest.raises(ValueError, match="confidence_level"):
        summarize_scores([], level)
    with pytest.raises(ValueError, match="confidence_level"):
        paired_summary([], level)


# --- Nadeau-Bengio -------------------------------------------------------------------------


def test_nadeau_bengio_factor() -> None:
    assert nadeau_bengio_factor(5, 800, 200) == pytest.approx(math.sqrt(0.45), abs=1e-15)
    assert nadeau_bengio_factor(5, None, 200) == pytest.approx(1 / math.sqrt(5))
    assert nadeau_bengio_factor(5, 800.0, math.nan) == pytest.approx(1 / math.sqrt(5))
    assert nadeau_bengio_factor(5, -3, 200) == pytest.approx(1 / math.sqrt(5))
    assert nadeau_bengio_factor(np.int64(4), 100.5, 25.5) == pytest.approx(
        math.sqrt(0.25 + 25.5 / 100.5)
    )
    assert math.isnan(nadeau_bengio_factor(0, 800, 200))
    assert math.isnan(nadeau_bengio_factor(-2, 800, 200))
    with pytest.raises(TypeError):
        nadeau_bengio_factor(True, 800, 200)
    with pytest.raises(TypeError):
        nadeau_bengio_factor(2.5, 800, 200)


# --- paired_summary ------------------------------------------------------------------------


def test_paired_summary_worked_example() -> None:
    afib = paired_summary([0.04, 0.04, 0.03, 0.04, 0.05], n_train=800, n_test=200)
    assert list(afib) == [
        "mean",
        "std",
        "sem",
        "lower_ci",
        "upper_ci",
        "t_stat",
        "p_value",
        "n",
        "n_wins",
        "excludes_zero",
    ]
    assert afib["sem"] == pytest.approx(0.0047434165, abs=1e-9)
    assert afib["lower_ci"] == pytest.approx(0.0268301645, abs=1e-9)
    assert afib["upper_ci"] == pytest.approx(0.0531698355, abs=1e-9)
    assert afib["t_stat"] == pytest.approx(8.4327404271, abs=1e-9)
    assert afib["p_value"] == pytest.approx(0.0010829785, abs=1e-9)
    assert afib["n_wins"] == 5 and afib["excludes_zero"] is True
    plain = paired_summary([0.04, 0.04, 0.03, 0.04, 0.05], correction="none")
    assert plain["sem"] == pytest.approx(0.0031622777, abs=1e-9)
    assert plain["lower_ci"] == pytest.approx(0.0312201097, abs=1e-9)
    assert plain["p_value"] == pytest.approx(0.0002249205, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(scores, min_size=2, max_size=15))
def test_uncorrected_paired_summary_matches_scipy_one_sample_t_test(values: list[float]) -> None:
    result = paired_summary(values, correction="none")
    if np.std(values, ddof=1) <= ZERO_VARIANCE_TOL:
        assert math.isnan(result["p_value"])
        return
    reference = stats.ttest_1samp(values, 0.0)
    assert result["t_stat"] == pytest.approx(reference.statistic, rel=1e-9, abs=1e-9)
    assert result["p_value"] == pytest.approx(reference.pvalue, rel=1e-9, abs=1e-12)


def test_paired_summary_zero_variance_and_small_samples() -> None:
    flat = paired_summary([0.02, 0.02, 0.02, 0.02])
    assert flat["std"] == 0 and flat["n_wins"] == 4 and flat["excludes_zero"] is False
    assert all(math.isnan(flat[k]) for k in ("sem", "lower_ci", "upper_ci", "t_stat", "p_value"))
    one = paired_summary([0.1])
    assert one["n"] == 1 and one["mean"] == 0.1 and math.isnan(one["std"])
    none = paired_summary([math.nan])
    assert none["n"] == 0 and none["n_wins"] == 0 and math.isnan(none["mean"])
    ties = paired_summary([0.0, 0.1, -0.1])
    assert ties["n_wins"] == 1
    with pytest.raises(ValueError, match="correction"):
        paired_summary([0.1, 0.2], correction="bonferroni")


# --- Kendall -------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    st.integers(min_value=3, max_value=8).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(1, 4), min_size=n, max_size=n),
            st.lists(st.integers(1, 4), min_size=n, max_size=n),
        )
    )
)
def test_kendall_tau_matches_scipy_tau_b(ranks: tuple[list[int], list[int]]) -> None:
    a, b = ranks
    labels = [f"m{i}" for i in range(len(a))]
    ours = kendall_tau(dict(zip(labels, a, strict=True)), dict(zip(labels, b, strict=True)))
    reference = stats.kendalltau(a, b, variant="b").statistic
    if math.isnan(reference):
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(reference, abs=1e-12)


def test_kendall_tau_aligns_by_label_and_validates() -> None:
    a = {"x": 1, "y": 2, "z": 3}
    assert kendall_tau(a, {"z": 3, "y": 2, "x": 1}) == 1.0
    assert kendall_tau(a, {"x": 1, "y": 3, "z": 2}) == pytest.approx(1 / 3)
    assert math.isnan(kendall_tau(a, {"x": 1, "y": 1, "z": 1}))
    with pytest.raises(ValueError, match="same labels"):
        kendall_tau(a, {"x": 1, "y": 2, "w": 3})
    with pytest.raises(ValueError, match="at least 3"):
        kendall_tau({"x": 1, "y": 2}, {"x": 2, "y": 1})
    with pytest.raises(ValueError, match="finite"):
        kendall_tau(a, {"x": 1, "y": math.nan, "z": 3})


def test_min_attainable_kendall_p() -> None:
    assert min_attainable_kendall_p(3) == pytest.approx(1 / 3)
    assert min_attainable_kendall_p(4) == pytest.approx(2 / 24)
    assert min_attainable_kendall_p(np.int32(5)) == pytest.approx(2 / 120)
    assert min_attainable_kendall_p(400) == 0.0
    with pytest.raises(ValueError):
        min_attainable_kendall_p(2)
    with pytest.raises(TypeError):
        min_attainable_kendall_p(True)
    with pytest.raises(TypeError):
        min_attainable_kendall_p(3.0)


# --- multiplicity ----------------------------------------------------------------------------


def test_adjustments_spec_example_with_nan() -> None:
    raw = [0.01, math.nan, 0.04, 0.03]
    expected = {
        "holm": [0.03, None, 0.06, 0.06],
        "bonferroni": [0.03, None, 0.12, 0.09],
        "fdr_bh": [0.03, None, 0.04, 0.04],
        "fdr_by": [0.055, None, 0.0733333333, 0.0733333333],
    }
    for method, values in expected.items():
        adjusted = ADJUSTERS[method](raw)
        assert isinstance(adjusted, list)
        assert math.isnan(adjusted[1])
        for got, want in zip(adjusted, values, strict=True):
            if want is not None:
                assert got == pytest.approx(want, abs=1e-9)


def test_adjustments_mapping_example_and_kinds() -> None:
    raw = {"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005}
    expected = {
        "holm": [0.03, 0.06, 0.06, 0.02],
        "bonferroni": [0.04, 0.16, 0.12, 0.02],
        "fdr_bh": [0.02, 0.04, 0.04, 0.02],
        "fdr_by": [0.0416667, 0.0833333, 0.0833333, 0.0416667],
    }
    for method, values in expected.items():
        adjusted = ADJUSTERS[method](raw)
        assert isinstance(adjusted, dict) and list(adjusted) == list(raw)
        assert list(adjusted.values()) == pytest.approx(values, abs=1e-6)
        series = ADJUSTERS[method](pd.Series(raw, name="p"))
        assert isinstance(series, pd.Series) and series.name == "p"
        assert list(series.index) == list(raw) and series.dtype == np.float64
        array = ADJUSTERS[method](np.array(list(raw.values())))
        assert isinstance(array, np.ndarray) and array.dtype == np.float64
        assert isinstance(ADJUSTERS[method](tuple(raw.values())), list)
        assert ADJUSTERS[method]([]) == []
        assert ADJUSTERS[method]({}) == {}


@pytest.mark.parametrize("method", list(ADJUSTERS))
@settings(max_examples=40, deadline=None)
@given(raw=st.lists(p_value, min_size=1, max_size=30))
def test_adjustments_match_statsmodels(method: str, raw: list[float]) -> None:
    reference = multipletests(raw, method=method)[1]
    assert ADJUSTERS[method](raw) == pytest.approx(list(reference), abs=1e-9)


@pytest.mark.parametrize("method", ["fdr_bh", "fdr_by"])
def test_fdr_adjustments_match_scipy(method: str) -> None:
    raw = np.random.default_rng(3).uniform(size=40) ** 3
    scipy_method = {"fdr_bh": "bh", "fdr_by": "by"}[method]
    expected = stats.false_discovery_control(raw, method=scipy_method)
    assert ADJUSTERS[method](raw) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("method", list(ADJUSTERS))
@settings(max_examples=50, deadline=None)
@given(raw=st.lists(p_or_nan, min_size=0, max_size=25), data=st.randoms(use_true_random=False))
def test_adjustment_properties(method: str, raw: list[float], data: object) -> None:
    adjust = ADJUSTERS[method]
    adjusted = np.asarray(adjust(raw), dtype=float)
    values = np.asarray(raw, dtype=float)
    nan = np.isnan(values)
    assert np.array_equal(np.isnan(adjusted), nan), "NaN in must give NaN out"
    finite = values[~nan]
    result = adjusted[~nan]
    assert np.all(result >= finite - 1e-15), "never below the raw value"
    assert np.all(result <= 1.0), "never above one"
    order = np.argsort(finite, kind="stable")
    assert np.all(np.diff(result[order]) >= -1e-15), "monotone in the raw order"
    for i in range(len(finite)):
        for j in range(len(finite)):
            if finite[i] == finite[j]:
                assert result[i] == result[j], "ties get equal adjusted values"
    # NaN is not counted in the family: dropping it changes nothing.
    assert np.allclose(adjust(list(finite)), result, atol=1e-15) or len(finite) == 0
    # Order independence.
    permutation = list(range(len(raw)))
    data.shuffle(permutation)
    shuffled = adjust([raw[i] for i in permutation])
    for position, original in enumerate(permutation):
        if not nan[original]:
            assert shuffled[position] == pytest.approx(adjusted[original], abs=1e-15)


@pytest.mark.parametrize("method", list(ADJUSTERS))
def test_adjustment_input_errors(method: str) -> None:
    adjust = ADJUSTERS[method]
    with pytest.raises(ValueError, match=r"position 1.*1\.2"):
        adjust([0.1, 1.2])
    with pytest.raises(ValueError, match=r"-0\.1"):
        adjust([-0.1])
    with pytest.raises(ValueError, match="inf"):
        adjust([math.inf])
    with pytest.raises(ValueError, match="'b'"):
        adjust({"a": 0.1, "b": 2.0})
    with pytest.raises(ValueError, match="not a real number"):
        adjust([0.1, "x"])
    with pytest.raises(ValueError, match="1-D"):
        adjust(np.zeros((2, 2)))
    with pytest.raises(TypeError):
        adjust("0.1")
    with pytest.raises(TypeError):
        adjust(0.1)
    assert all(math.isnan(v) for v in adjust([math.nan, math.nan]))


# --- is_bimodal ------------------------------------------------------------------------------


def test_is_bimodal_gap_rule_and_reason() -> None:
    flagged, reason = is_bimodal([0.80, 0.81, 0.35, 0.82, 0.36])
    assert flagged and reason == "2 of 5 seeds sit 0.440 below the other 3"
    assert is_bimodal([0.80, 0.81, 0.79, 0.82, 0.83]) == (False, "")
    assert is_bimodal([0.1, 0.9]) == (False, ""), "fewer than three values never flag"
    assert is_bimodal([0.5, 0.65, 0.8]) == (True, "1 of 3 seeds sit 0.150 below the other 2")
    assert is_bimodal([0.5, 0.64, 0.78])[0] is False


def test_is_bimodal_baseline_and_ties() -> None:
    flagged, reason = is_bimodal([0.6, 0.7, 0.45, 0.65], baseline=0.5)
    assert flagged and reason == "1/4 seeds scored below the 0.500 baseline"
    assert is_bimodal([0.6, 0.7, 0.65], baseline=math.nan) == (False, "")
    # Two equal largest gaps: the first (lowest) position wins.
    assert is_bimodal([0.0, 0.2, 0.4])[1] == "1 of 3 seeds sit 0.200 below the other 2"
    with pytest.raises(ValueError, match="min_gap"):
        is_bimodal([0.1, 0.2, 0.3], min_gap=0)
    with pytest.raises(ValueError, match="min_gap"):
        is_bimodal([0.1, 0.2, 0.3], min_gap=math.inf)
