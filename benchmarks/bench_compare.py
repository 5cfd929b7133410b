"""Benchmark of the vectorised group bootstrap (``cluster_bootstrap_difference``).

Every figure is a ratio against a baseline timed in the same run, on the same
data and the same resamples:

* **loop**: a Python loop over the resamples that gathers each resample's
  group rows by fancy indexing and calls the same built-in metric on them
  with a single row of unit weights (the draw order of
  ``deepecgkit.analysis.compare.resampling``). Validation, group
  aggregation and the draws are the library's own, so only the evaluation
  differs; the script checks that both give the same differences.
* **scipy**: ``scipy.stats.bootstrap(..., paired=True, vectorized=True,
  method="percentile")`` on the group-level arrays with the same statistic
  (difference of mean group correctness = accuracy difference). scipy cannot
  stratify, so our side runs with ``stratify=False``; scipy receives the
  group arrays ready-made while our timing includes aggregating 100,000
  samples to groups.

Cases: (1) the issue's case, accuracy, 1,000 resamples, 100,000 samples in
2,000 groups; (2) the spec's cases, all eight ``REPORT_PAIRED_METRICS``,
K = 5, 10 samples per group, 1,000 resamples, 500 and 5,000 groups.

Run: ``.venv/bin/python benchmarks/bench_compare.py`` (about two minutes on
two cores). Targets: at least 3x over the loop, faster than scipy.
"""

from __future__ import annotations

import os

# One BLAS thread (set before numpy loads): on a busy two-core machine a
# multi-threaded BLAS spin-waits and makes the matrix products erratic;
# scipy's bootstrap does not use BLAS, so this only ever slows our side.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import time
from collections.abc import Callable

import numpy as np
from scipy import stats

from deepecgkit.analysis.compare import batch_metric, cluster_bootstrap_difference
from deepecgkit.analysis.compare.bootstrap import difference_statistics
from deepecgkit.analysis.compare.groups import aggregate_groups, validate_predictions
from deepecgkit.analysis.compare.resampling import draw_counts
from deepecgkit.analysis.constants import CONFIDENCE_LEVEL, REPORT_PAIRED_METRICS

N_RESAMPLES = 1000
SEED = 0
#: The information rule switched off, so that the timed work is the bootstrap itself: with
#: 50 segments per group both models classify every group correctly, and the rule would
#: withhold the accuracy interval without drawing a resample.
ALL_INTERVALS = {"min_informative_groups": 0}


def _data(n_groups: int, per_group: int, n_classes: int, seed: int) -> tuple[np.ndarray, ...]:
    """Grouped predictions of two models of different skill."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(rng.integers(0, n_classes, size=n_groups), per_group)
    groups = np.repeat(np.arange(n_groups), per_group)
    probs = []
    for skill in (1.5, 1.0):
        logits = rng.normal(size=(labels.size, n_classes))
        logits[np.arange(labels.size), labels] += skill
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs.append(exp / exp.sum(axis=1, keepdims=True))
    return labels, probs[0], probs[1], groups


def _best_of(repeats: int, function: Callable[[], object]) -> tuple[float, object]:
    """Fastest wall time of ``repeats`` calls, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def _loop_difference(
    y: np.ndarray,
    prob_a: np.ndarray,
    prob_b: np.ndarray,
    groups: np.ndarray,
    metric_name: str,
    stratify: bool,
) -> np.ndarray:
    """The baseline: same validation, aggregation and draws, one metric call per resample."""
    labels, matrices, group_ids = validate_predictions(y, {"a": prob_a, "b": prob_b}, groups)
    grouped = aggregate_groups(labels, matrices, group_ids)
    counts = draw_counts(
        grouped.labels, n_resamples=N_RESAMPLES, seed=SEED, stratify=stratify
    ).astype(np.int64)
    metric = batch_metric(metric_name)
    units = np.arange(grouped.n_groups)
    unit_row = np.ones((1, grouped.n_groups))
    differences = np.empty(N_RESAMPLES)
    for r in range(N_RESAMPLES):
        rows = np.repeat(units, counts[r])
        value_a = metric(grouped.labels[rows], grouped.probs[0][rows], unit_row)[0]
        value_b = metric(grouped.labels[rows], grouped.probs[1][rows], unit_row)[0]
        differences[r] = value_a - value_b
    differences = differences[np.isfinite(differences)]
    difference_statistics(differences, CONFIDENCE_LEVEL)
    return differences


def _scipy_accuracy_difference(
    y: np.ndarray, prob_a: np.ndarray, prob_b: np.ndarray, groups: np.ndarray
) -> Callable[[], object]:
    """scipy's paired vectorised bootstrap on group-level correctness (arrays built once)."""
    labels, matrices, group_ids = validate_predictions(y, {"a": prob_a, "b": prob_b}, groups)
    grouped = aggregate_groups(labels, matrices, group_ids)
    correct_a = (grouped.probs[0].argmax(axis=1) == grouped.labels).astype(np.float64)
    correct_b = (grouped.probs[1].argmax(axis=1) == grouped.labels).astype(np.float64)

    def statistic(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
        return a.mean(axis=axis) - b.mean(axis=axis)

    def run() -> object:
        return stats.bootstrap(
            (correct_a, correct_b),
            statistic,
            n_resamples=N_RESAMPLES,
            paired=True,
            vectorized=True,
            method="percentile",
            confidence_level=CONFIDENCE_LEVEL,
            rng=np.random.default_rng(SEED),
        )

    return run


def issue_case() -> list[str]:
    """Accuracy difference, 100,000 samples in 2,000 groups, 1,000 resamples."""
    y, prob_a, prob_b, groups = _data(n_groups=2000, per_group=50, n_classes=5, seed=1)
    lines = []
    ours, result = _best_of(
        3,
        lambda: cluster_bootstrap_difference(
            y, prob_a, prob_b, groups, metric="accuracy", **ALL_INTERVALS
        ),
    )
    loop, differences = _best_of(
        1, lambda: _loop_difference(y, prob_a, prob_b, groups, "accuracy", True)
    )
    np.testing.assert_allclose(result.differences, differences, atol=1e-12)
    lines.append(
        f"issue case, accuracy, stratified: ours {ours:.3f} s, loop {loop:.3f} s, "
        f"loop/ours = {loop / ours:.1f}x"
    )
    ours_flat, _ = _best_of(
        5,
        lambda: cluster_bootstrap_difference(
            y, prob_a, prob_b, groups, metric="accuracy", stratify=False, **ALL_INTERVALS
        ),
    )
    scipy_time, _ = _best_of(5, _scipy_accuracy_difference(y, prob_a, prob_b, groups))
    # The same group-level arrays scipy receives: one row per group.
    labels, matrices, group_ids = validate_predictions(y, {"a": prob_a, "b": prob_b}, groups)
    grouped = aggregate_groups(labels, matrices, group_ids)
    ours_groups, _ = _best_of(
        5,
        lambda: cluster_bootstrap_difference(
            grouped.labels,
            grouped.probs[0],
            grouped.probs[1],
            grouped.group_ids,
            metric="accuracy",
            stratify=False,
            **ALL_INTERVALS,
        ),
    )
    lines.append(
        f"issue case, accuracy, unstratified, group-level arrays: ours {ours_groups:.4f} s, "
        f"scipy.stats.bootstrap {scipy_time:.4f} s, scipy/ours = {scipy_time / ours_groups:.2f}x"
    )
    lines.append(
        f"issue case, accuracy, unstratified, ours from the 100,000 samples (aggregation "
        f"included) {ours_flat:.4f} s: scipy/ours = {scipy_time / ours_flat:.2f}x"
    )
    return lines


def spec_case(n_groups: int) -> list[str]:
    """All eight report metrics, K = 5, 10 samples per group, 1,000 resamples."""
    y, prob_a, prob_b, groups = _data(n_groups=n_groups, per_group=10, n_classes=5, seed=2)
    lines = []
    total_ours = total_loop = 0.0
    for name in REPORT_PAIRED_METRICS:
        ours, result = _best_of(
            3,
            lambda name=name: cluster_bootstrap_difference(
                y, prob_a, prob_b, groups, metric=name, **ALL_INTERVALS
            ),
        )
        loop, differences = _best_of(
            1, lambda name=name: _loop_difference(y, prob_a, prob_b, groups, name, True)
        )
        np.testing.assert_allclose(result.differences, differences, atol=1e-12)
        total_ours += ours
        total_loop += loop
        lines.append(
            f"  {name:<18} ours {ours * 1e3:8.1f} ms  loop {loop * 1e3:9.1f} ms  "
            f"{loop / ours:6.1f}x"
        )
    lines.insert(
        0,
        f"{n_groups} groups x 10 samples, K = 5, 8 metrics: ours {total_ours:.2f} s, "
        f"loop {total_loop:.2f} s, loop/ours = {total_loop / total_ours:.1f}x",
    )
    return lines


def main() -> None:
    for line in issue_case():
        print(line, flush=True)
    for n_groups in (500, 5000):
        for line in spec_case(n_groups):
            print(line, flush=True)


if __name__ == "__main__":
    main()
