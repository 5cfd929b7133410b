"""Informative groups, the AUROC's influence values, expanded BCa, and the information rule."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import special, stats

from deepecgkit.analysis.compare import (
    ComparisonError,
    batch_metric,
    cluster_bootstrap_difference,
    cluster_bootstrap_metric,
)
from deepecgkit.analysis.compare.information import (
    auroc_influence,
    expansion_cap,
    information_of,
    information_refusal,
)
from deepecgkit.analysis.compare.resampling import (
    draw_counts,
    expanded_bca_interval,
    expanded_tail_probability,
)
from deepecgkit.analysis.constants import MIN_INFORMATIVE_GROUPS

AUROC, ACCURACY = batch_metric("auroc"), batch_metric("accuracy")


def _binary(p1: np.ndarray) -> np.ndarray:
    return np.column_stack([1.0 - p1, p1])


def _apart_by_hand(values: np.ndarray, strata: np.ndarray) -> int:
    """Groups whose value differs from their stratum's most common value, by counting."""
    total = 0
    for stratum in set(strata.tolist()):
        members = values[strata == stratum].tolist()
        total += len(members) - max(members.count(v) for v in set(members))
    return total


def _brute_auroc_sides(labels: np.ndarray, prob: np.ndarray) -> list[tuple[int, int]]:
    """Per class, both sides' informative counts from placements computed pair by pair."""
    sides = []
    for c in range(prob.shape[1]):
        pos, neg = prob[labels == c, c], prob[labels != c, c]
        if pos.size == 0 or neg.size == 0:
            continue
        wins = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
        sides.append(
            (
                _apart_by_hand(wins.mean(axis=1), labels[labels == c]),
                _apart_by_hand(wins.mean(axis=0), labels[labels != c]),
            )
        )
    return sides


def test_hand_checked_counts() -> None:
    y = np.array([0, 0, 0, 0, 1, 1, 1])
    p1 = np.array([0.1, 0.2, 0.6, 0.7, 0.6, 0.8, 0.9])
    prob = _binary(p1)
    # 0.6 (negative) ties the positive 0.6 and 0.7 (negative) beats it: one positive
    # and two negatives take part in a misordered or tied pair.
    auroc = information_of(AUROC, y, (prob,))
    assert auroc.count == 1 and auroc.what.startswith("positive groups in a misordered")
    # Predictions: 0.6 and 0.7 (negatives) are wrong, the positive 0.6 is right.
    accuracy = information_of(ACCURACY, y, (prob,))
    assert (accuracy.count, accuracy.what) == (2, "misclassified groups")
    # A second run that fixes the negative at 0.7 only: one discordant group, and only
    # that negative's and the positive 0.6's placements change.
    other = _binary(np.array([0.1, 0.2, 0.6, 0.3, 0.6, 0.8, 0.9]))
    assert information_of(ACCURACY, y, (prob, other)).count == 1
    difference = information_of(AUROC, y, (prob, other))
    assert difference.count == 1 and "placement differs" in difference.what
    assert information_of(batch_metric("brier"), y, (prob,)) is None
    assert information_refusal(accuracy, minimum=3, metric="accuracy") == (
        "too_few_informative_groups: 2 misclassified groups; an accuracy interval needs at least 3"
    )
    assert information_refusal(accuracy, minimum=2, metric="accuracy") is None


def test_a_perfectly_separated_class_does_not_count() -> None:
    # Class 2 is ranked perfectly against the rest; classes 0 and 1 are mixed up.
    y = np.repeat([0, 1, 2], 4)
    looks_0, looks_1, looks_2 = [0.7, 0.2, 0.1], [0.25, 0.65, 0.1], [0.05, 0.05, 0.9]
    prob = np.array([looks_0, looks_0, looks_0, looks_1, looks_1, looks_1, looks_0, looks_1]
                    + [looks_2] * 4)  # fmt: skip
    sides = _brute_auroc_sides(y, prob)
    assert sides[2] == (0, 0) and min(sides[0]) > 0 and min(sides[1]) > 0
    info = information_of(AUROC, y, (prob,))
    assert info.count == min(min(sides[0]), min(sides[1]))
    assert "of class" in info.what


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=2, max_value=4),
    st.booleans(),
)
def test_counts_match_brute_force(seed: int, n_classes: int, coarse: bool) -> None:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=25)
    scores = rng.normal(size=(25, n_classes)) + 1.2 * np.eye(n_classes)[y]
    prob = special.softmax(np.round(scores, 0 if coarse else 3), axis=1)  # coarse: many ties
    sides = [min(s) for s in _brute_auroc_sides(y, prob) if any(s)]
    assert information_of(AUROC, y, (prob,)).count == (min(sides) if sides else 0)
    correct = np.argmax(prob, axis=1) == y
    assert information_of(ACCURACY, y, (prob,)).count == _apart_by_hand(correct, y)
    other = prob[::-1]
    change = correct.astype(int) - (np.argmax(other, axis=1) == y)
    assert information_of(ACCURACY, y, (prob, other)).count == _apart_by_hand(change, y)


def test_a_class_that_never_varies_adds_nothing() -> None:
    # Class 2 is always misclassified, class 0 always right, class 1 has two errors: the
    # stratified bootstrap keeps classes 0 and 2 fixed, so only class 1's two errors
    # (not all seven misclassified groups) make the accuracy vary.
    y = np.repeat([0, 1, 2], [10, 10, 5])
    pred = np.where(y == 2, 0, y)
    pred[10:12] = 0
    prob = np.eye(3)[pred] * 0.8 + 0.2 / 3
    info = information_of(ACCURACY, y, (prob,))
    assert info.count == 2 and info.what.startswith("groups apart from their class's majority")
    # A constant score ties every pair: every placement is one half, nothing varies.
    flat = np.full((25, 3), 1 / 3)
    assert information_of(AUROC, y, (flat,)).count == 0


def test_influence_is_the_derivative_of_the_macro_auroc() -> None:
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, size=40)
    prob = special.softmax(rng.normal(size=(40, 3)) + 1.5 * np.eye(3)[y], axis=1)
    base = AUROC(y, prob, np.ones((1, 40)))[0]
    step = 1e-6
    numeric = (AUROC(y, prob, 1.0 + step * np.eye(40))[:] - base) / step
    for label in range(3):
        numeric[y == label] -= numeric[y == label].mean()
    np.testing.assert_allclose(auroc_influence(y, prob), numeric, atol=1e-7)


def _mann_whitney(x: np.ndarray, z: np.ndarray, axis: int = -1) -> np.ndarray:
    x, z = np.moveaxis(x, axis, -1), np.moveaxis(z, axis, -1)
    wins = (x[..., :, None] > z[..., None, :]) + 0.5 * (x[..., :, None] == z[..., None, :])
    return wins.mean(axis=(-2, -1))


@pytest.mark.parametrize("n_units", [1, 12])
def test_expanded_bca_matches_scipy_two_sample_bca(n_units: int) -> None:
    # scipy's two-sample BCa (jackknife acceleration per sample) on our own bootstrap
    # distribution: the stratified bootstrap resamples each class independently, as
    # scipy does with two samples, and the jackknife values are our influence values.
    rng = np.random.default_rng(8)
    y = np.repeat([1, 0], [12, 30])
    p1 = special.expit(rng.normal(size=42) + 1.5 * y)
    prob = _binary(p1)
    weights = draw_counts(y, n_resamples=2000, seed=5, stratify=True)
    values = AUROC(y, prob, weights)
    estimate = float(AUROC(y, prob, np.ones((1, 42)))[0])
    ours = expanded_bca_interval(
        values, estimate, auroc_influence(y, prob), confidence_level=0.95, n_units=n_units
    )
    level = 1 - expanded_tail_probability(0.95, n_units)
    reference = stats.bootstrap(
        (p1[y == 1], p1[y == 0]),
        _mann_whitney,
        n_resamples=0,
        bootstrap_result=SimpleNamespace(bootstrap_distribution=values),
        method="BCa",
        confidence_level=level,
    ).confidence_interval
    assert ours == pytest.approx((reference.low, reference.high), rel=1e-12)


def test_bca_is_nan_when_every_resample_is_on_one_side() -> None:
    values = np.full(50, 0.9)
    assert all(
        math.isnan(v)
        for v in expanded_bca_interval(values, 1.0, np.ones(4), confidence_level=0.95, n_units=5)
    )


def _ceiling_set(rng: np.random.Generator, n_groups: int) -> tuple[np.ndarray, ...]:
    """60 patients (18 positives) of a classifier with accuracy about 0.97."""
    y = np.repeat([1, 0], [18, n_groups - 18])
    p1 = special.expit(3.8 * (y - 0.5) + rng.normal(size=y.size))
    return y, p1, np.arange(y.size)


def test_the_rule_restores_coverage_near_the_ceiling() -> None:
    # Seeded mini-simulation (150 test sets): near the ceiling the interval drawn from
    # the few test sets' errors misses the population value, because a test set with
    # one error or none cannot show how large the error is. With the rule, most test
    # sets get no interval, and those that do cover. Population: P(correct) for a
    # negative is Phi(1.9) (mean logit -1.9, SD 1), the same for a positive.
    truth = stats.norm.cdf(1.9)
    rng = np.random.default_rng(2026)
    old_hits = new_hits = new_reported = 0
    replicates = 150
    for seed in range(replicates):
        y, p1, groups = _ceiling_set(rng, 60)
        new = cluster_bootstrap_metric(y, p1, groups, metric="accuracy", n_resamples=200, seed=seed)
        old = cluster_bootstrap_metric(
            y, p1, groups, metric="accuracy", n_resamples=200, seed=seed, interval="percentile",
            min_informative_groups=1,
        )  # fmt: skip
        old_hits += int(old.ci_low <= truth <= old.ci_high)
        if new.no_interval_reason is None:
            new_reported += 1
            new_hits += int(new.ci_low <= truth <= new.ci_high)
        else:
            assert new.no_interval_reason.startswith("too_few_informative_groups: ")
            assert math.isfinite(new.estimate) and math.isnan(new.ci_low)
    assert old_hits / replicates < 0.85
    assert 30 <= new_reported <= replicates - 30
    assert new_hits / new_reported >= 0.93


def test_the_count_caps_the_expansion(predictions) -> None:
    # Exactly MIN_INFORMATIVE_GROUPS misclassified groups out of 60: the interval is
    # drawn, with the expansion's n capped at 2 * 3 + 1 instead of the smallest class's 30.
    y = np.repeat([0, 1], 30)
    p1 = np.where(y == 1, 0.9, 0.1)
    p1[:MIN_INFORMATIVE_GROUPS] = 0.8  # three negatives predicted positive
    groups = np.arange(60)
    result = cluster_bootstrap_metric(y, p1, groups, metric="accuracy", n_resamples=400, seed=1)
    plain = cluster_bootstrap_metric(
        y, p1, groups, metric="accuracy", n_resamples=400, seed=1, interval="percentile"
    )
    assert result.no_interval_reason is None
    tail = expanded_tail_probability(0.95, expansion_cap(MIN_INFORMATIVE_GROUPS))
    assert (result.ci_low, result.ci_high) == tuple(
        np.quantile(plain.values, [tail / 2, 1 - tail / 2])
    )
    fewer = p1.copy()
    fewer[0] = 0.1
    refused = cluster_bootstrap_metric(y, fewer, groups, metric="accuracy", n_resamples=400, seed=1)
    assert refused.no_interval_reason == (
        "too_few_informative_groups: 2 misclassified groups; an accuracy interval needs at "
        f"least {MIN_INFORMATIVE_GROUPS}"
    )
    assert refused.values.size == 0 and refused.n_valid_resamples == 0
    diff = cluster_bootstrap_difference(
        y, p1, fewer, groups, metric="accuracy", n_resamples=400, seed=1
    )
    assert diff.no_interval_reason.startswith("too_few_informative_groups: 1 groups classified")
    assert math.isnan(diff.p_value) and diff.difference == pytest.approx(-1 / 60)
    auroc = cluster_bootstrap_metric(y, p1, groups, metric="auroc", n_resamples=400, seed=1)
    assert auroc.interval_method == "expanded-bca"
    assert auroc.no_interval_reason.startswith("too_few_informative_groups: 0 groups in a")
    # 0 switches the rule off: a perfect ranking then gets the degenerate interval [1, 1].
    off = cluster_bootstrap_metric(
        y, p1, groups, metric="auroc", n_resamples=400, seed=1, min_informative_groups=0
    )
    assert (off.ci_low, off.ci_high, off.no_interval_reason) == (1.0, 1.0, None)
    with pytest.raises(ComparisonError, match="min_informative_groups must be an integer >= 0"):
        cluster_bootstrap_metric(y, p1, groups, metric="auroc", min_informative_groups=-1)
