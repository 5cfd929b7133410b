"""Group bootstrap: draw contract, stratification, invariances, p-value, coverage, errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from deepecgkit.analysis.compare import (
    BootstrapDifference,
    BootstrapInterval,
    ComparisonError,
    batch_metric,
    cluster_bootstrap_difference,
    cluster_bootstrap_metric,
    resampling,
)
from deepecgkit.analysis.compare.bootstrap import (
    _interval,
    difference_statistics,
    expansion_units,
    interval_refusal,
)
from deepecgkit.analysis.compare.resampling import (
    bootstrap_interval,
    draw_counts,
    expanded_p_value,
    expanded_tail_probability,
)
from deepecgkit.analysis.constants import MIN_BOOTSTRAP_GROUPS, MIN_BOOTSTRAP_GROUPS_PER_CLASS

N_RESAMPLES = 300
#: Minima (groups and informative groups) switched off, for tests about the mechanics.
OPEN = {"min_groups": 1, "min_groups_per_class": 1, "min_informative_groups": 1}


def _pair(predictions, seed: int = 0, **kwargs) -> tuple:
    a = predictions(seed, **kwargs)
    b = predictions(seed + 50, **kwargs)
    return a["y_true"], a["prob"], b["prob"], a["group_id"]


def _fields(result) -> dict:
    return {k: v for k, v in vars(result).items() if not isinstance(v, np.ndarray)}


def test_draws_follow_the_documented_generator_calls() -> None:
    labels = np.array([2, 0, 1, 0, 2, 2, 1, 0, 0])
    weights = draw_counts(labels, n_resamples=50, seed=11, stratify=True)
    rng = np.random.default_rng(11)
    expected = np.zeros((50, labels.size))
    for c in (0, 1, 2):
        members = np.flatnonzero(labels == c)
        draws = rng.integers(0, members.size, size=(50, members.size))
        for r in range(50):
            np.add.at(expected[r], members[draws[r]], 1)
    np.testing.assert_array_equal(weights, expected)

    unstratified = draw_counts(labels, n_resamples=50, seed=11, stratify=False)
    draws = np.random.default_rng(11).integers(0, labels.size, size=(50, labels.size))
    expected = np.stack([np.bincount(row, minlength=labels.size) for row in draws])
    np.testing.assert_array_equal(unstratified, expected)


def test_stratified_resamples_keep_every_class_group_count() -> None:
    labels = np.repeat([0, 1, 2, 3], [40, 7, 1, 12])
    weights = draw_counts(labels, n_resamples=1000, seed=0, stratify=True)
    for c in range(4):
        np.testing.assert_array_equal(weights[:, labels == c].sum(axis=1), np.sum(labels == c))
    unstratified = draw_counts(labels, n_resamples=1000, seed=0, stratify=False)
    assert np.all(unstratified.sum(axis=1) == labels.size)
    assert np.unique(unstratified[:, labels == 2].sum(axis=1)).size > 1


def test_same_seed_reproduces_bit_for_bit(predictions) -> None:
    y, prob_a, prob_b, groups = _pair(predictions, n_groups=30)
    first = cluster_bootstrap_difference(
        y, prob_a, prob_b, groups, metric="auroc", n_resamples=N_RESAMPLES, seed=5, **OPEN
    )
    second = cluster_bootstrap_difference(
        y, prob_a, prob_b, groups, metric="auroc", n_resamples=N_RESAMPLES, seed=5, **OPEN
    )
    assert _fields(first) == _fields(second)
    np.testing.assert_array_equal(first.differences, second.differences)
    other = cluster_bootstrap_difference(
        y, prob_a, prob_b, groups, metric="auroc", n_resamples=N_RESAMPLES, seed=6, **OPEN
    )
    assert not np.array_equal(first.differences, other.differences)


@pytest.mark.parametrize("metric", ["auroc", "ece", "macro_f1", "nll"])
def test_row_order_does_not_matter(predictions, metric: str) -> None:
    y, prob_a, prob_b, groups = _pair(predictions, n_groups=25, per_group=4)
    order = np.random.default_rng(1).permutation(y.size)
    base = cluster_bootstrap_difference(
        y, prob_a, prob_b, groups, metric=metric, n_resamples=N_RESAMPLES, **OPEN
    )
    shuffled = cluster_bootstrap_difference(
        y[order],
        prob_a[order],
        prob_b[order],
        groups[order],
        metric=metric,
        n_resamples=N_RESAMPLES,
        **OPEN,
    )
    for name in ("estimate_a", "estimate_b", "difference", "ci_low", "ci_high", "p_value"):
        assert getattr(shuffled, name) == pytest.approx(getattr(base, name), abs=1e-12)
    np.testing.assert_allclose(shuffled.differences, base.differences, rtol=0, atol=1e-12)


@pytest.mark.parametrize("metric", ["auroc", "macro_auprc", "balanced_accuracy", "ece"])
def test_chunk_size_does_not_change_results(predictions, monkeypatch, metric: str) -> None:
    y, prob_a, prob_b, groups = _pair(predictions, n_groups=24)
    whole = cluster_bootstrap_difference(
        y, prob_a, prob_b, groups, metric=metric, n_resamples=N_RESAMPLES, **OPEN
    )
    monkeypatch.setattr(resampling, "MAX_BLOCK_ELEMENTS", 24 * 7)  # chunks of 7 resamples
    chunked = cluster_bootstrap_difference(
        y, prob_a, prob_b, groups, metric=metric, n_resamples=N_RESAMPLES, **OPEN
    )
    np.testing.assert_allclose(chunked.differences, whole.differences, rtol=0, atol=1e-12)
    assert (chunked.ci_low, chunked.ci_high) == pytest.approx((whole.ci_low, whole.ci_high))
    assert chunked.p_value == whole.p_value


def test_identical_predictions_give_zero_difference_and_p_one(predictions) -> None:
    y, prob, _, groups = _pair(predictions, n_groups=20)
    for metric in ("brier", "ece"):
        result = cluster_bootstrap_difference(
            y, prob, prob, groups, metric=metric, n_resamples=N_RESAMPLES, **OPEN
        )
        assert result.difference == 0.0
        assert result.p_value == 1.0
        assert result.prob_a_larger == 0.0 and result.prob_a_smaller == 0.0
        assert result.ci_low == 0.0 and result.ci_high == 0.0
    # Accuracy and AUROC count the groups the two runs disagree on: none here, so the
    # test set says nothing about the difference and the interval is withheld.
    for metric in ("accuracy", "auroc"):
        result = cluster_bootstrap_difference(
            y, prob, prob, groups, metric=metric, n_resamples=N_RESAMPLES, **OPEN
        )
        assert result.difference == 0.0 and math.isnan(result.p_value)
        assert result.no_interval_reason.startswith("too_few_informative_groups: 0 ")


def test_too_few_groups_keeps_the_point_estimate_only(predictions) -> None:
    y, prob_a, prob_b, groups = _pair(predictions, n_groups=9)
    result = cluster_bootstrap_difference(y, prob_a, prob_b, groups, metric="accuracy")
    assert math.isfinite(result.difference) and result.n_groups == 9
    for name in ("ci_low", "ci_high", "p_value", "prob_a_larger", "prob_a_smaller"):
        assert math.isnan(getattr(result, name))
    assert result.n_valid_resamples == 0 and result.differences.size == 0
    assert result.no_interval_reason == (
        f"too_few_groups: 9 test groups; an interval needs at least {MIN_BOOTSTRAP_GROUPS}"
    )
    interval = cluster_bootstrap_metric(y, prob_a, groups, metric="accuracy")
    assert math.isnan(interval.ci_low) and interval.values.size == 0
    assert interval.no_interval_reason == result.no_interval_reason
    # Enough groups overall but three per class: refused for the class.
    per_class = cluster_bootstrap_metric(y, prob_a, groups, metric="accuracy", min_groups=9)
    assert per_class.values.size == 0
    assert per_class.no_interval_reason == (
        "too_few_groups_in_class: class 0 has 3 test groups; an interval needs at least "
        f"{MIN_BOOTSTRAP_GROUPS_PER_CLASS} per class"
    )
    opened = cluster_bootstrap_metric(y, prob_a, groups, metric="accuracy", min_groups=9,
                                      min_groups_per_class=3, min_informative_groups=1)  # fmt: skip
    assert opened.values.size and opened.no_interval_reason is None


def test_the_minima_hold_at_their_thresholds(predictions) -> None:
    # Two classes of exactly MIN_BOOTSTRAP_GROUPS / 2 groups each pass both minima.
    half = MIN_BOOTSTRAP_GROUPS // 2
    y, prob_a, prob_b, groups = _pair(predictions, n_groups=2 * half, n_classes=2)
    assert half >= MIN_BOOTSTRAP_GROUPS_PER_CLASS
    result = cluster_bootstrap_difference(
        y, prob_a, prob_b, groups, metric="auroc", n_resamples=100
    )
    assert result.no_interval_reason is None and result.n_valid_resamples == 100
    keep = groups != groups[-1]  # one group fewer
    fewer = cluster_bootstrap_difference(y[keep], prob_a[keep], prob_b[keep], groups[keep],
                                         metric="auroc", n_resamples=100)  # fmt: skip
    assert fewer.no_interval_reason.startswith("too_few_groups:")
    labels = np.repeat([0, 1, 2], [40, 30, MIN_BOOTSTRAP_GROUPS_PER_CLASS - 1])
    reason = interval_refusal(
        labels, min_groups=MIN_BOOTSTRAP_GROUPS, min_groups_per_class=MIN_BOOTSTRAP_GROUPS_PER_CLASS
    )
    assert reason.startswith(f"too_few_groups_in_class: class 2 has {labels.size - 70} test")
    labels[-1] = 0  # still too few in class 2
    assert interval_refusal(
        labels, min_groups=60, min_groups_per_class=MIN_BOOTSTRAP_GROUPS_PER_CLASS
    ).startswith("too_few")
    assert interval_refusal(np.repeat([0, 1], 30), min_groups=60, min_groups_per_class=15) is None


def test_worked_p_value_check() -> None:
    d = np.array([0.02, 0.01, -0.01, 0.03, 0.00, 0.04, 0.02, 0.05, 0.01])
    ci_low, ci_high, p_value, larger, smaller = difference_statistics(d, 0.95)
    assert p_value == pytest.approx(0.6)
    assert larger == pytest.approx(7 / 9) and smaller == pytest.approx(1 / 9)
    assert ci_low == pytest.approx(-0.008) and ci_high == pytest.approx(0.048)
    assert all(math.isnan(v) for v in difference_statistics(np.empty(0), 0.95))
    assert difference_statistics(np.full(999, 0.1), 0.95)[2] == pytest.approx(2 / 1000)


def test_result_fields_and_interval_definition(predictions) -> None:
    y, prob_a, prob_b, groups = _pair(predictions, n_groups=30, per_group=2)
    settings = {"metric": "brier", "n_resamples": 200, "confidence_level": 0.9, "seed": 3, **OPEN}
    result = cluster_bootstrap_difference(
        y, prob_a, prob_b, groups, interval="percentile", **settings
    )
    assert isinstance(result, BootstrapDifference)
    assert list(vars(result)) == [
        "metric", "estimate_a", "estimate_b", "difference", "ci_low", "ci_high", "p_value",
        "prob_a_larger", "prob_a_smaller", "n_samples", "n_groups", "n_resamples",
        "n_valid_resamples", "confidence_level", "seed", "stratified", "interval_method",
        "no_interval_reason", "differences",
    ]  # fmt: skip
    assert (result.metric, result.n_samples, result.n_groups) == ("brier", 60, 30)
    assert (result.n_resamples, result.n_valid_resamples, result.seed) == (200, 200, 3)
    assert (result.interval_method, result.no_interval_reason) == ("percentile", None)
    alpha = 1 - 0.9  # as specified: alpha/2 is then 0.04999999999999999, not 0.05
    low, high = np.quantile(result.differences, [alpha / 2, 1 - alpha / 2])
    assert (result.ci_low, result.ci_high) == (low, high)

    # The default, expanded percentile interval: the same draws, quantiles at alpha'/2
    # with n the smallest class's group count (30 groups over 3 classes: 10).
    expanded = cluster_bootstrap_difference(y, prob_a, prob_b, groups, **settings)
    np.testing.assert_array_equal(expanded.differences, result.differences)
    tail = expanded_tail_probability(0.9, 10)
    low, high = np.quantile(result.differences, [tail / 2, 1 - tail / 2])
    assert (expanded.ci_low, expanded.ci_high) == (low, high)
    assert expanded.interval_method == "expanded-percentile"
    assert expanded.p_value == expanded_p_value(result.p_value, 10) >= result.p_value

    interval = cluster_bootstrap_metric(
        y, prob_a, groups, metric="brier", n_resamples=200, confidence_level=0.9, seed=3, **OPEN
    )
    assert isinstance(interval, BootstrapInterval)
    # Paired: the same draws score both models, so a's values are the same as alone.
    other = cluster_bootstrap_metric(
        y, prob_b, groups, metric="brier", n_resamples=200, confidence_level=0.9, seed=3, **OPEN
    )
    np.testing.assert_allclose(interval.values - other.values, result.differences, atol=1e-15)
    assert interval.estimate == result.estimate_a


def test_groups_are_scored_on_mean_probabilities() -> None:
    y = np.array([0, 0, 1, 1, 1])
    prob = np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7], [0.8, 0.2]])
    groups = np.array([7, 7, "8", 8, 9], dtype=object)  # 7 and "7" would be one group too
    result = cluster_bootstrap_metric(y, prob, groups, metric="brier", min_groups=1)
    group_prob = np.array([[0.55, 0.45], [0.35, 0.65], [0.8, 0.2]])
    group_y = np.array([0, 1, 1])
    expected = np.mean(np.sum((group_prob - np.eye(2)[group_y]) ** 2, axis=1))
    assert result.estimate == pytest.approx(expected) and result.n_groups == 3
    binary = cluster_bootstrap_metric(y, prob[:, 1], groups, metric="brier", min_groups=1)
    assert binary.estimate == pytest.approx(expected)
    same = cluster_bootstrap_metric(
        y, prob, np.array(["7", "7", "8", "8", "9"]), metric="brier", n_resamples=50, **OPEN
    )
    assert same.n_groups == 3


def test_invalid_resamples_are_dropped_and_counted(predictions) -> None:
    y, prob_a, prob_b, groups = _pair(predictions, n_groups=20)

    def sometimes_undefined(labels, prob, weights):
        values = batch_metric("accuracy")(labels, prob, weights)
        return np.where(weights[:, 0] > 1, np.nan, values)

    result = cluster_bootstrap_difference(
        y,
        prob_a,
        prob_b,
        groups,
        metric=sometimes_undefined,
        n_resamples=N_RESAMPLES,
        stratify=False,
        **OPEN,
    )
    assert result.metric == "sometimes_undefined"
    assert 0 < result.n_valid_resamples < N_RESAMPLES

    def never_defined(labels, prob, weights):
        return np.full(weights.shape[0], np.nan)

    empty = cluster_bootstrap_difference(
        y, prob_a, prob_b, groups, metric=never_defined, n_resamples=50, **OPEN
    )
    assert empty.n_valid_resamples == 0 and math.isnan(empty.p_value)
    assert empty.no_interval_reason.startswith("no_valid_resample:")


def test_interval_covers_the_true_difference_at_about_the_nominal_rate() -> None:
    # 300 simulated test sets of 120 patients (two segments each, two classes).
    # Model a is right on a patient with probability 0.8, model b with 0.7, so
    # the true accuracy difference is 0.1 for either class mix.
    rng = np.random.default_rng(2026)
    n_groups, per_group, n_datasets = 120, 2, 300
    labels = np.repeat(np.arange(n_groups) % 2, per_group)
    groups = np.repeat(np.arange(n_groups), per_group)
    covered = 0
    for _ in range(n_datasets):
        correct_a = np.repeat(rng.random(n_groups) < 0.8, per_group)
        correct_b = np.repeat(rng.random(n_groups) < 0.7, per_group)
        p_true_a = np.where(correct_a, 0.9, 0.1)
        p_true_b = np.where(correct_b, 0.8, 0.2)
        prob_a = np.where(labels == 1, p_true_a, 1 - p_true_a)
        prob_b = np.where(labels == 1, p_true_b, 1 - p_true_b)
        result = cluster_bootstrap_difference(
            labels, prob_a, prob_b, groups, metric="accuracy", n_resamples=400
        )
        covered += result.ci_low <= 0.1 <= result.ci_high
    assert 0.90 <= covered / n_datasets <= 0.98


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"y": [0.5, 1, 0, 1]}, "integer"),
        ({"y": [0, 1, 2, 1]}, r"\[0, 1\]"),
        ({"y": [-1, 1, 0, 1]}, r"\[0, 1\]"),
        ({"y": [[0, 1, 0, 1]]}, "1-D"),
        ({"prob_a": [[1.0], [1.0], [1.0], [1.0]]}, "K >= 2"),
        ({"prob_a": [[0.5, 0.5]] * 3}, "rows"),
        ({"prob_b": [[0.3, 0.3, 0.4]] * 4}, "same shape"),
        ({"prob_a": [[np.nan, 1.0], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]}, "finite"),
        ({"prob_a": [[1.2, -0.2], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]}, r"\[0, 1\]"),
        ({"prob_a": [[0.7, 0.5], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]}, "sum to 1"),
        ({"prob_a": [["a", "b"]] * 4}, "numeric"),
        ({"groups": ["g", "g", "h", "h"]}, "one label"),
        ({"groups": ["g", "h", "i"]}, "groups"),
        ({"y": [], "prob_a": np.empty((0, 2)), "prob_b": np.empty((0, 2)), "groups": []}, "empty"),
        ({"n_resamples": 0}, "n_resamples"),
        ({"n_resamples": 1.5}, "n_resamples"),
        ({"confidence_level": 1.0}, "confidence_level"),
        ({"confidence_level": 0}, "confidence_level"),
        ({"seed": -1}, "seed"),
        ({"seed": 0.5}, "seed"),
        ({"stratify": "yes"}, "stratify"),
        ({"metric": "f1"}, "unknown metric"),
        ({"metric": 3}, "metric"),
        ({"min_groups_per_class": 0}, "min_groups_per_class"),
        ({"min_groups_per_class": True}, "min_groups_per_class"),
        ({"interval": "bca"}, "interval must be one of"),
    ],
)
def test_invalid_inputs_raise_comparison_error(change: dict, message: str) -> None:
    arguments = {
        "y": [0, 1, 0, 1],
        "prob_a": [[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.1, 0.9]],
        "prob_b": [[0.6, 0.4], [0.5, 0.5], [0.4, 0.6], [0.2, 0.8]],
        "groups": ["g", "h", "i", "j"],
        "metric": "accuracy",
        "n_resamples": 10,
        "confidence_level": 0.95,
        "seed": 0,
        "stratify": True,
        "min_groups_per_class": 1,
        "interval": "expanded-percentile",
    }
    arguments.update(change)
    with pytest.raises(ComparisonError, match=message):
        cluster_bootstrap_difference(
            arguments["y"],
            arguments["prob_a"],
            arguments["prob_b"],
            arguments["groups"],
            metric=arguments["metric"],
            n_resamples=arguments["n_resamples"],
            confidence_level=arguments["confidence_level"],
            seed=arguments["seed"],
            stratify=arguments["stratify"],
            min_groups=1,
            min_groups_per_class=arguments["min_groups_per_class"],
            interval=arguments["interval"],
        )


def test_expanded_tail_probability_worked_value_and_limits() -> None:
    # By hand: t_{14, 0.975} = 2.144787; times sqrt(15/14) = 2.220065; 2 (1 - Phi) = 0.02641.
    assert expanded_tail_probability(0.95, 15) == pytest.approx(0.02641, abs=2e-5)
    tails = [expanded_tail_probability(0.95, n) for n in (2, 5, 15, 60, 10_000)]
    assert all(a < b for a, b in itertools.pairwise(tails))
    assert tails[-1] == pytest.approx(0.05, abs=1e-4) and tails[-1] < 0.05
    assert expanded_tail_probability(0.95, 1) == pytest.approx(0.05)


@given(
    p=st.floats(min_value=1e-6, max_value=1.0),
    n_units=st.integers(min_value=2, max_value=500),
)
def test_expanded_p_value_inverts_the_tail_probability(p: float, n_units: int) -> None:
    adjusted = expanded_p_value(p, n_units)
    assert p <= adjusted <= 1.0
    if adjusted < 1.0:
        assert expanded_tail_probability(1.0 - adjusted, n_units) == pytest.approx(p, rel=1e-6)


def test_expanded_interval_and_p_value_agree_on_excluding_zero() -> None:
    rng = np.random.default_rng(3)
    disagreements = 0
    for _ in range(400):
        d = rng.normal(rng.uniform(-0.05, 0.05), 0.02, size=999)
        low, high, p, _, _ = difference_statistics(
            d, 0.95, method="expanded-percentile", n_units=20
        )
        if abs(p - 0.05) > 0.005:  # away from the quantile-interpolation edge
            disagreements += (low > 0 or high < 0) != (p <= 0.05)
    assert disagreements == 0


def test_expansion_units() -> None:
    assert expansion_units(np.repeat([0, 1, 2], [40, 9, 1]), stratified=True) == 9
    assert expansion_units(np.repeat([0, 1, 2], [40, 9, 1]), stratified=False) == 50
    assert expansion_units(np.array([0, 1]), stratified=True) == 0


@pytest.mark.parametrize("method", ["percentile", "expanded-percentile"])
def test_the_cached_expanded_tail_gives_bootstrap_intervals_numbers(method: str) -> None:
    """Bit for bit, asked twice (the second answer from the cache), for n of 0 to 40."""
    values = np.random.default_rng(2).normal(size=257)
    for n_units, level in itertools.product((0, 1, 2, 3, 7, 40), (0.9, 0.95)):
        expected = bootstrap_interval(values, level, method=method, n_units=n_units)
        for _ in range(2):
            assert _interval(values, level, method=method, n_units=n_units) == expected
    assert all(math.isnan(v) for v in _interval(np.empty(0), 0.95, method=method, n_units=9))
