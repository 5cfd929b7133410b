"""Benchmark: vectorised bootstrap against a per-resample scikit-learn loop.

Workload: 100,000 test samples x 5 classes (softmax probabilities), the
evaluator's full single-label metric set (accuracy, balanced accuracy,
macro precision/recall/F1, MCC, one-vs-rest macro AUC) and 1,000 resamples.

* ``bootstrap_evaluate`` draws the resample index matrix once (in row
  blocks of the same legacy-generator stream) and computes every metric for
  a whole block at once.
* The baseline is the per-resample loop the specification names as the slow
  reference: for each row of the same index matrix, scikit-learn's
  ``accuracy_score``, ``balanced_accuracy_score``,
  ``precision_recall_fscore_support``, ``matthews_corrcoef`` and
  ``roc_auc_score``. It takes minutes at 1,000 resamples, so it is timed on
  the first ``--baseline-resamples`` rows and extrapolated linearly (it is
  exactly linear in the number of resamples); the values of those rows are
  compared with the vectorised ones (must agree to 1e-12).
* ``generate_report`` (point estimates, the same bootstrap and calibration
  rows) is timed as well.

Run: ``.venv/bin/python benchmarks/bench_evaluation.py`` (about a minute on
two cores). Prints times and ratios; exits non-zero if values disagree.
"""

# The specification fixes numpy's global legacy generator for resampling.
# ruff: noqa: NPY002

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings

import numpy as np
from scipy.special import softmax
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    matthews_corrcoef,
    precision_recall_fscore_support,
    roc_auc_score,
)

from deepecgkit.evaluation import ECGEvaluator
from deepecgkit.evaluation._bootstrap import bootstrap_metric_values

N_SAMPLES = 100_000
N_CLASSES = 5
N_RESAMPLES = 1_000
BASELINE_RESAMPLES = 20
SEED = 0
TOLERANCE = 1e-12
METRICS = ["accuracy", "balanced_accuracy", "precision", "recall", "f1", "mcc", "auc"]


def make_data(n_samples: int, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels and moderately informative softmax probabilities."""
    rng = np.random.default_rng(SEED)
    y = rng.integers(0, n_classes, n_samples)
    logits = rng.normal(size=(n_samples, n_classes))
    logits[np.arange(n_samples), y] += 1.0
    return y, softmax(logits, axis=1)


def sklearn_resample(y: np.ndarray, prob: np.ndarray) -> dict[str, float]:
    """The slow reference: scikit-learn on one resample."""
    labels = prob.argmax(axis=1)
    precision, recall, f1, _ = precision_recall_fscore_support(
        y, labels, average="macro", zero_division=0
    )
    return {
        "accuracy": accuracy_score(y, labels),
        "balanced_accuracy": balanced_accuracy_score(y, labels),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "mcc": matthews_corrcoef(y, labels),
        "auc": roc_auc_score(
            y, prob, multi_class="ovr", average="macro", labels=np.arange(prob.shape[1])
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=N_SAMPLES)
    parser.add_argument("--resamples", type=int, default=N_RESAMPLES)
    parser.add_argument("--baseline-resamples", type=int, default=BASELINE_RESAMPLES)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")

    y, prob = make_data(args.samples, N_CLASSES)
    evaluator = ECGEvaluator(metrics=METRICS)
    print(
        f"workload: {args.samples:,} samples x {N_CLASSES} classes, {args.resamples:,} "
        f"resamples, metrics {', '.join(METRICS)}"
    )

    np.random.seed(SEED)
    start = time.perf_counter()
    intervals = evaluator.bootstrap_evaluate(prob, y, n_bootstrap=args.resamples)
    fast = time.perf_counter() - start
    print(f"bootstrap_evaluate (vectorised):      {fast:8.2f} s")

    np.random.seed(SEED)
    start = time.perf_counter()
    report = evaluator.generate_report(prob, y)
    report_time = time.perf_counter() - start
    print(f"generate_report (1,000 resamples):    {report_time:8.2f} s ({len(report)} rows)")

    k = min(args.baseline_resamples, args.resamples)
    np.random.seed(SEED)
    index = np.random.choice(args.samples, size=(k, args.samples), replace=True)
    start = time.perf_counter()
    reference = [sklearn_resample(y[row], prob[row]) for row in index]
    slow_k = time.perf_counter() - start
    slow = slow_k / k * args.resamples
    print(
        f"per-resample scikit-learn loop:       {slow:8.2f} s (timed on {k} resamples: "
        f"{slow_k:.2f} s, extrapolated linearly to {args.resamples:,})"
    )
    print(f"speed-up bootstrap_evaluate:          {slow / fast:8.1f} x")
    print(f"speed-up generate_report:             {slow / report_time:8.1f} x")

    evaluator.evaluate(prob, y)
    vectorised = bootstrap_metric_values(
        y, prob, prob, names=METRICS, mode=evaluator._mode, index_chunks=[index]
    )
    worst = max(abs(vectorised[name][b] - reference[b][name]) for name in METRICS for b in range(k))
    print(
        f"largest |vectorised - scikit-learn| over {k} resamples x {len(METRICS)} metrics: "
        f"{worst:.2e}"
    )
    summary = ", ".join(
        f"{name} {stats['lower_ci']:.4f}-{stats['upper_ci']:.4f}"
        for name, stats in intervals.items()
    )
    print(f"intervals: {summary}")
    if worst > TOLERANCE:
        print(f"FAIL: values differ by more than {TOLERANCE}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
