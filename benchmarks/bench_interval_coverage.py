"""Coverage of the bootstrap intervals, by seeded simulation.

Not a timing benchmark: every figure is a coverage rate (the share of
simulated test sets whose interval contains the population value), printed
with its Monte Carlo standard error ``sqrt(c (1 - c) / replicates)``, and
every "after" figure has its "before" baseline measured in the same run on
the same draws. Results are recorded in ``docs/benchmarks.md``.

Section ``group`` (the statistical report's group bootstrap,
:func:`cluster_bootstrap_difference` and :func:`cluster_bootstrap_metric`):
patients with a label drawn at a fixed class mix (stratified design,
prevalence 0.3), 4 segments each; two models whose segment logits share a
patient effect and part of their noise; the metrics are scored on patients
(mean segment probability). Population values come from 10^6 patients. Per
replicate one call with the library's default interval (the expanded
percentile interval) is made with the minima switched off, and on the same
resamples the script also computes the percentile interval (the method
before this change) and BCa (Efron 1987; acceleration from the
leave-one-group-out jackknife), the alternative considered. Scenarios:
``main`` (AUROC 0.88 vs 0.82), ``null`` (two equally good models),
``rare`` (prevalence 0.15) and ``ceiling`` (AUROC 0.99 vs 0.97).

Section ``evaluator`` (:meth:`ECGEvaluator.bootstrap_evaluate`): segments
of one patient share a strong patient effect; the interval of segment-level
accuracy and AUC is computed resampling segments (``groups=None``, the old
behaviour) and resampling patients (``groups=``), on 100 patients with 10
and with 50 segments each.

Run: ``.venv/bin/python benchmarks/bench_interval_coverage.py`` (about 35
minutes on two shared cores: 30 for the group section at 2,000 replicates, 10
for the evaluator at 1,000; ``--replicates``, ``--evaluator-replicates`` and
``--section`` shorten it).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from deepecgkit.analysis.compare import (
    batch_metric,
    cluster_bootstrap_difference,
    cluster_bootstrap_metric,
)
from deepecgkit.analysis.compare.resampling import percentile_interval
from deepecgkit.analysis.constants import (
    CONFIDENCE_LEVEL,
    MIN_BOOTSTRAP_GROUPS,
    MIN_BOOTSTRAP_GROUPS_PER_CLASS,
)

SEGMENTS = 4
N_RESAMPLES = 1000
POPULATION = 1_000_000
METRICS = ("auroc", "accuracy")
METHODS = ("percentile", "bca", "expanded-percentile")
GROUP_COUNTS = (10, 20, 30, 40, 50, 60, 80, 100)
#: Logit offset: with it the models predict the positive class about as often as it occurs.
OFFSET = -0.9
#: Patient effect and segment noise SDs, and the share of segment noise both models see.
PATIENT_SD, NOISE_SD, SHARED_NOISE = 0.8, 1.0, 0.5


@dataclass(frozen=True)
class Scenario:
    """A simulated test population: class mix and the two models' separations."""

    name: str
    prevalence: float
    skill_a: float
    skill_b: float


SCENARIOS = {
    "main": Scenario("main", 0.3, 1.6, 1.2),
    "null": Scenario("null", 0.3, 1.4, 1.4),
    "rare": Scenario("rare", 0.15, 1.6, 1.2),
    "ceiling": Scenario("ceiling", 0.3, 3.0, 2.6),
}


def simulate(
    rng: np.random.Generator, scenario: Scenario, n_pos: int, n_neg: int
) -> tuple[np.ndarray, ...]:
    """Segment-level labels, groups and both models' P(class 1); positives first."""
    y = np.r_[np.ones(n_pos, np.int64), np.zeros(n_neg, np.int64)]
    n = y.size
    patient = rng.normal(size=(n, 1)) * PATIENT_SD
    shared = rng.normal(size=(n, SEGMENTS))
    probs = []
    for skill in (scenario.skill_a, scenario.skill_b):
        own = rng.normal(size=(n, SEGMENTS))
        noise = math.sqrt(SHARED_NOISE) * shared + math.sqrt(1 - SHARED_NOISE) * own
        probs.append(special.expit(OFFSET + skill * y[:, None] + patient + NOISE_SD * noise))
    groups = np.repeat(np.arange(n), SEGMENTS)
    return np.repeat(y, SEGMENTS), groups, probs[0].ravel(), probs[1].ravel()


def population_values(scenario: Scenario, seed: int) -> dict[str, tuple[float, float]]:
    """Patient-level AUROC and accuracy (at the scenario's class mix) of both models."""
    rng = np.random.default_rng(seed)
    n_pos = round(scenario.prevalence * POPULATION)
    y, _, prob_a, prob_b = simulate(rng, scenario, n_pos, POPULATION - n_pos)
    labels = y[::SEGMENTS]
    out: dict[str, list[float]] = {"auroc": [], "accuracy": []}
    for prob in (prob_a, prob_b):
        patient = prob.reshape(-1, SEGMENTS).mean(axis=1)
        positive, negative = patient[labels == 1], patient[labels == 0]
        u = stats.mannwhitneyu(positive, negative).statistic
        out["auroc"].append(float(u / (positive.size * negative.size)))
        sensitivity = np.mean(positive > 0.5)
        specificity = np.mean(negative <= 0.5)
        prevalence = scenario.prevalence
        out["accuracy"].append(float(prevalence * sensitivity + (1 - prevalence) * specificity))
    return {name: (values[0], values[1]) for name, values in out.items()}


def bca_interval(
    values: np.ndarray, estimate: float, jackknife: np.ndarray, level: float
) -> tuple[float, float]:
    """BCa interval (Efron 1987; Efron & Tibshirani 1993, ch. 14) of bootstrap ``values``."""
    alpha = 1.0 - level
    below = np.count_nonzero(values < estimate) + 0.5 * np.count_nonzero(values == estimate)
    z0 = stats.norm.ppf(below / values.size)
    spread = jackknife.mean() - jackknife
    denominator = 6.0 * np.sum(spread**2) ** 1.5
    acceleration = np.sum(spread**3) / denominator if denominator > 0 else 0.0
    z = stats.norm.ppf([alpha / 2.0, 1.0 - alpha / 2.0])
    levels = stats.norm.cdf(z0 + (z0 + z) / (1.0 - acceleration * (z0 + z)))
    if not np.all(np.isfinite(levels)):
        return math.nan, math.nan
    low, high = np.quantile(values, levels)
    return float(low), float(high)


def _two_columns(p: np.ndarray) -> np.ndarray:
    return np.column_stack([1.0 - p, p])


def group_coverage(
    scenario: Scenario, n_groups: int, replicates: int, truth: dict[str, tuple[float, float]]
) -> dict[tuple[str, str, str], float]:
    """Coverage per (target, metric, method); target ``difference`` or ``single``."""
    rng = np.random.default_rng(1000 + n_groups)
    n_pos = round(scenario.prevalence * n_groups)
    leave_one_out = np.ones((n_groups, n_groups)) - np.eye(n_groups)
    hits: dict[tuple[str, str, str], int] = {}
    for replicate in range(replicates):
        y, groups, prob_a, prob_b = simulate(rng, scenario, n_pos, n_groups - n_pos)
        patient_y = y[::SEGMENTS]
        patient_a = _two_columns(prob_a.reshape(-1, SEGMENTS).mean(axis=1))
        patient_b = _two_columns(prob_b.reshape(-1, SEGMENTS).mean(axis=1))
        for name in METRICS:
            metric = batch_metric(name)
            options = {"seed": replicate, "min_groups": 1, "min_groups_per_class": 1}
            diff = cluster_bootstrap_difference(y, prob_a, prob_b, groups, name, **options)
            single = cluster_bootstrap_metric(y, prob_a, groups, name, **options)
            jack_a = metric(patient_y, patient_a, leave_one_out)
            jack_b = metric(patient_y, patient_b, leave_one_out)
            cases = {
                "difference": (
                    diff.difference,
                    diff.differences,
                    (diff.ci_low, diff.ci_high),
                    jack_a - jack_b,
                    truth[name][0] - truth[name][1],
                ),
                "single": (
                    single.estimate,
                    single.values,
                    (single.ci_low, single.ci_high),
                    jack_a,
                    truth[name][0],
                ),
            }
            for target, (estimate, values, expanded, jackknife, true_value) in cases.items():
                intervals = {
                    "percentile": percentile_interval(values, CONFIDENCE_LEVEL),
                    "bca": bca_interval(
                        values, estimate, jackknife[np.isfinite(jackknife)], CONFIDENCE_LEVEL
                    ),
                    "expanded-percentile": expanded,
                }
                for method, (low, high) in intervals.items():
                    key = (target, name, method)
                    hits[key] = hits.get(key, 0) + int(low <= true_value <= high)
    return {key: count / replicates for key, count in hits.items()}


def _cell(coverage: float) -> str:
    return f"{coverage:.3f}"


def _se(coverage: float, replicates: int) -> float:
    return math.sqrt(max(coverage * (1 - coverage), 1e-12) / replicates)


def run_group_section(replicates: int) -> None:
    truths = {name: population_values(s, seed=12345) for name, s in SCENARIOS.items()}
    for name, truth in truths.items():
        shown = ", ".join(f"{m} a={v[0]:.4f} b={v[1]:.4f}" for m, v in truth.items())
        print(f"population ({name}): {shown}")
    main = SCENARIOS["main"]
    print(
        f"\n## group bootstrap, scenario main (prevalence {main.prevalence}, {SEGMENTS} "
        f"segments/patient, stratified, {N_RESAMPLES} resamples, {replicates} replicates; "
        f"Monte Carlo SE about {_se(0.95, replicates):.4f} at 0.95, {_se(0.9, replicates):.4f} "
        "at 0.90)\n"
    )
    columns = [(t, m, k) for t in ("difference", "single") for m in METRICS for k in METHODS]
    print("| groups (positives) | " + " | ".join(f"{t} {m} {k}" for t, m, k in columns) + " |")
    print("| --- " * (len(columns) + 1) + "|")
    for n_groups in GROUP_COUNTS:
        start = time.perf_counter()
        coverage = group_coverage(main, n_groups, replicates, truths["main"])
        n_pos = round(main.prevalence * n_groups)
        cells = " | ".join(_cell(coverage[key]) for key in columns)
        print(f"| {n_groups} ({n_pos}) | {cells} |  ({time.perf_counter() - start:.0f} s)")
    print(
        f"\n## robustness at and above the minima ({MIN_BOOTSTRAP_GROUPS} groups, "
        f"{MIN_BOOTSTRAP_GROUPS_PER_CLASS} per class), expanded percentile vs percentile\n"
    )
    chosen = [(t, m, k) for t in ("difference", "single") for m in METRICS for k in METHODS[::2]]
    print("| scenario | groups (positives) | " + " | ".join(" ".join(c) for c in chosen) + " |")
    print("| --- " * (len(chosen) + 2) + "|")
    rare_groups = math.ceil(MIN_BOOTSTRAP_GROUPS_PER_CLASS / SCENARIOS["rare"].prevalence)
    for name, n_groups in (
        ("null", MIN_BOOTSTRAP_GROUPS),
        ("rare", rare_groups),
        ("ceiling", MIN_BOOTSTRAP_GROUPS),
        ("ceiling", 200),
    ):
        scenario = SCENARIOS[name]
        coverage = group_coverage(scenario, n_groups, replicates, truths[name])
        n_pos = round(scenario.prevalence * n_groups)
        cells = " | ".join(_cell(coverage[key]) for key in chosen)
        print(f"| {name} | {n_groups} ({n_pos}) | {cells} |")


# --- the evaluator ---------------------------------------------------------------------------

EVAL_PATIENTS = 100
EVAL_PREVALENCE = 0.3
EVAL_SKILL, EVAL_PATIENT_SD, EVAL_NOISE_SD = 1.5, 1.5, 0.7
EVAL_RESAMPLES = 500


def _evaluator_data(
    rng: np.random.Generator, n_patients: int, segments: int
) -> tuple[np.ndarray, ...]:
    y_patient = (rng.random(n_patients) < EVAL_PREVALENCE).astype(np.int64)
    patient = rng.normal(size=(n_patients, 1)) * EVAL_PATIENT_SD
    noise = rng.normal(size=(n_patients, segments)) * EVAL_NOISE_SD
    p = special.expit(OFFSET + EVAL_SKILL * y_patient[:, None] + patient + noise).ravel()
    y = np.repeat(y_patient, segments)
    groups = np.repeat(np.arange(n_patients), segments)
    return y, groups, _two_columns(p)


def _evaluator_truth(segments: int) -> dict[str, float]:
    rng = np.random.default_rng(777)
    y, _, prob = _evaluator_data(rng, POPULATION // segments, segments)
    positive, negative = prob[y == 1, 1], prob[y == 0, 1]
    auc = stats.mannwhitneyu(positive, negative).statistic / (positive.size * negative.size)
    return {"accuracy": float(np.mean((prob[:, 1] > 0.5) == y)), "auc": float(auc)}


def run_evaluator_section(replicates: int) -> None:
    from deepecgkit.evaluation import ECGEvaluator

    evaluator = ECGEvaluator(metrics=["accuracy", "auc"])
    print(
        f"\n## evaluator bootstrap_evaluate, {EVAL_PATIENTS} patients, {EVAL_RESAMPLES} "
        f"resamples, {replicates} replicates (Monte Carlo SE about "
        f"{_se(0.93, replicates):.3f} at 0.93)\n"
    )
    print("| segments/patient | metric | resampling segments (before) | resampling patients |")
    print("| --- | --- | --- | --- |")
    for segments in (10, 50):
        truth = _evaluator_truth(segments)
        rng = np.random.default_rng(segments)
        hits = {(m, g): 0 for m in truth for g in (False, True)}
        for replicate in range(replicates):
            y, groups, prob = _evaluator_data(rng, EVAL_PATIENTS, segments)
            labels = prob.argmax(axis=1)
            for use_groups in (False, True):
                np.random.seed(replicate)  # noqa: NPY002 - the evaluator's documented generator
                result = evaluator.bootstrap_evaluate(
                    labels,
                    y,
                    n_bootstrap=EVAL_RESAMPLES,
                    y_scores=prob,
                    groups=groups if use_groups else None,
                )
                for metric, value in truth.items():
                    row = result[metric]
                    hits[(metric, use_groups)] += int(row["lower_ci"] <= value <= row["upper_ci"])
        for metric in truth:
            before = hits[(metric, False)] / replicates
            after = hits[(metric, True)] / replicates
            print(f"| {segments} | {metric} | {before:.3f} | {after:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=("group", "evaluator", "all"), default="all")
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--evaluator-replicates", type=int, default=1000)
    args = parser.parse_args()
    if args.section in ("group", "all"):
        run_group_section(args.replicates)
    if args.section in ("evaluator", "all"):
        run_evaluator_section(args.evaluator_replicates)


if __name__ == "__main__":
    main()
