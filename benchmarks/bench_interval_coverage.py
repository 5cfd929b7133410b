"""Coverage of the bootstrap intervals, by seeded simulation.

Not a timing benchmark: every figure is a coverage rate (the share of
simulated test sets whose interval contains the population value) among the
test sets that get an interval, printed with the share withheld; its Monte
Carlo standard error is ``sqrt(c (1 - c) / reported)``. Every "after" figure
has its "before" baselines measured in the same run on the same resamples.
Results are recorded in ``docs/benchmarks.md``.

Section ``group`` (the statistical report's group bootstrap, through the
report's own path: :func:`aggregate_groups`, :func:`draw_for`,
:func:`interval_from_grouped`, :func:`difference_from_grouped`, which give
the numbers of :func:`cluster_bootstrap_metric` and
:func:`cluster_bootstrap_difference`): patients with a label drawn at a
fixed class mix (stratified design), 4 segments each; two models whose
segment logits share a patient effect and part of their noise; the metrics
are scored on patients (mean segment probability). Population values come
from 10^6 patients. Per replicate and metric, on one count matrix:

* ``percentile``: the plain percentile interval (the method before issue 10);
* ``previous``: the expanded percentile interval with ``n`` the smallest
  class's group count and no information rule (the first attempt);
* ``now``: the library's default (``interval="auto"``): expanded BCa for one
  run's AUROC, expanded percentile otherwise, ``n`` capped by the
  informative-group count, no interval below ``MIN_INFORMATIVE_GROUPS``;
* for one run's AUROC also two alternatives: plain BCa (the same influence
  values, nominal alpha) and the logit-scale Wald interval with DeLong's
  variance and a t quantile (``logit-DeLong``).

The group minima are switched off (``min_groups = min_groups_per_class =
1``) so that the tables show what happens below them; the information rule
stays on. Scenarios: ``main`` (prevalence 0.3, AUROC 0.88 vs 0.82),
``null`` (two equally good models), ``rare`` (prevalence 0.15, models as in
``main``), ``ceiling`` (AUROC 0.99 vs 0.97) and ``accuracy_ceiling``
(accuracy 0.98 vs 0.97, AUROC 0.999 vs 0.996).

Section ``evaluator`` (:meth:`ECGEvaluator.bootstrap_evaluate`): segments
of one patient share a strong patient effect; the interval of segment-level
accuracy and AUC is computed resampling segments (``groups=None``, the old
behaviour) and resampling patients (``groups=``), on 100 patients with 10
and with 50 segments each.

Run: ``nice -n 10 .venv/bin/python benchmarks/bench_interval_coverage.py``
(about 30 minutes on two shared cores: 20 for the group section at 2,000
replicates, 10 for the evaluator at 1,000; ``--replicates``,
``--evaluator-replicates``, ``--section``, ``--no-main-table`` and ``--cells``
shorten it).
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

from deepecgkit.analysis.compare import batch_metric
from deepecgkit.analysis.compare.bootstrap import (
    GroupDraws,
    difference_from_grouped,
    draw_for,
    interval_from_grouped,
)
from deepecgkit.analysis.compare.groups import aggregate_groups
from deepecgkit.analysis.compare.information import auroc_influence
from deepecgkit.analysis.compare.resampling import (
    evaluate_metric,
    expanded_bca_interval,
    expanded_tail_probability,
    percentile_interval,
)
from deepecgkit.analysis.constants import CONFIDENCE_LEVEL, MIN_INFORMATIVE_GROUPS

SEGMENTS = 4
N_RESAMPLES = 1000
POPULATION = 1_000_000
METRICS = ("auroc", "accuracy")
#: (target, metric) in table order.
QUANTITIES = (
    ("difference", "auroc"),
    ("difference", "accuracy"),
    ("single", "auroc"),
    ("single", "accuracy"),
)
METHODS = ("percentile", "previous", "now")
ALTERNATIVES = ("bca", "logit-DeLong")
GROUP_COUNTS = (10, 20, 30, 40, 50, 60, 80, 100)
#: Logit offset: with it the models predict the positive class about as often as it occurs.
OFFSET = -0.9
#: Patient effect and segment noise SDs, and the share of segment noise both models see.
PATIENT_SD, NOISE_SD, SHARED_NOISE = 0.8, 1.0, 0.5
#: Cells reported with fewer intervals than this are marked: their Monte Carlo SE is large.
FEW_REPORTED = 200


@dataclass(frozen=True)
class Scenario:
    """A simulated test population: class mix, the two models' separations and the offset."""

    name: str
    prevalence: float
    skill_a: float
    skill_b: float
    offset: float = OFFSET


SCENARIOS = {
    "main": Scenario("main", 0.3, 1.6, 1.2),
    "null": Scenario("null", 0.3, 1.4, 1.4),
    "rare": Scenario("rare", 0.15, 1.6, 1.2),
    "ceiling": Scenario("ceiling", 0.3, 3.0, 2.6),
    # The offset halves the separation, so the threshold 0.5 sits between the classes
    # and accuracy approaches 1 together with the AUROC.
    "accuracy_ceiling": Scenario("accuracy_ceiling", 0.3, 4.0, 3.6, -2.0),
}
#: (scenario, group count) of the robustness table.
ROBUSTNESS_CELLS = (
    ("null", 60),
    ("rare", 100),
    ("rare", 134),
    ("rare", 167),
    ("ceiling", 60),
    ("ceiling", 100),
    ("ceiling", 200),
    ("accuracy_ceiling", 60),
    ("accuracy_ceiling", 100),
    ("accuracy_ceiling", 200),
)


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
        probs.append(
            special.expit(scenario.offset + skill * y[:, None] + patient + NOISE_SD * noise)
        )
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


def _two_columns(p: np.ndarray) -> np.ndarray:
    return np.column_stack([1.0 - p, p])


def logit_delong_interval(
    estimate: float, influence: np.ndarray, labels: np.ndarray, n_units: int, level: float
) -> tuple[float, float]:
    """Logit-scale Wald interval of an AUROC, DeLong variance, t quantile with n - 1 df.

    The DeLong et al. (1988) variance is ``sum_k n_k / (n_k - 1) sum_{g in k} l_g**2``
    over label strata (``l`` the stratum-centred influence values), i.e.
    ``s10**2 / n1 + s01**2 / n0`` for two classes; the interval is
    ``expit(logit(A) -+ t * se / (A (1 - A)))`` (Pepe 2003, chapter 5).
    """
    variance = 0.0
    for label in np.unique(labels):
        members = influence[labels == label]
        if members.size > 1:
            variance += members.size / (members.size - 1) * float(np.sum(members**2))
    if not 0.0 < estimate < 1.0 or variance <= 0.0:
        return estimate, estimate
    spread = stats.t.isf((1 - level) / 2, max(n_units - 1, 1)) * math.sqrt(variance)
    centre = special.logit(estimate)
    scale = estimate * (1 - estimate)
    return float(special.expit(centre - spread / scale)), float(
        special.expit(centre + spread / scale)
    )


def _single_intervals(
    draws: GroupDraws, name: str, values: np.ndarray, estimate: float
) -> dict[str, tuple[float, float]]:
    """Before / now (and alternatives for the AUROC) of one run's metric."""
    level = CONFIDENCE_LEVEL
    previous_level = 1 - expanded_tail_probability(level, draws.n_units)
    now = interval_from_grouped(
        draws, batch_metric(name), name, n_resamples=N_RESAMPLES, confidence_level=level,
        seed=0, stratified=True,
    )  # fmt: skip
    out = {
        "percentile": percentile_interval(values, level),
        "previous": percentile_interval(values, previous_level),
        "now": (now.ci_low, now.ci_high) if now.no_interval_reason is None else None,
    }
    if name == "auroc":
        labels, prob = draws.grouped.labels, draws.grouped.probs[0]
        influence = auroc_influence(labels, prob)
        out["bca"] = expanded_bca_interval(
            values, estimate, influence, confidence_level=level, n_units=1
        )
        out["logit-DeLong"] = logit_delong_interval(
            estimate, influence, labels, draws.n_units, level
        )
    return out


def group_coverage(
    scenario: Scenario, n_groups: int, replicates: int, truth: dict[str, tuple[float, float]]
) -> dict[tuple[str, str, str], tuple[int, int]]:
    """``(target, metric, method) -> (hits, reported)``; ``reported`` counts given intervals."""
    rng = np.random.default_rng(1000 + n_groups)
    n_pos = round(scenario.prevalence * n_groups)
    counts: dict[tuple[str, str, str], list[int]] = {}
    for replicate in range(replicates):
        y, groups, prob_a, prob_b = simulate(rng, scenario, n_pos, n_groups - n_pos)
        grouped = aggregate_groups(y, (_two_columns(prob_a), _two_columns(prob_b)), groups)
        draws = draw_for(
            grouped,
            n_resamples=N_RESAMPLES,
            seed=replicate,
            stratify=True,
            min_groups=1,
            min_groups_per_class=1,
        )
        labels, (group_a, group_b) = draws.grouped.labels, draws.grouped.probs
        for name in METRICS:
            metric = batch_metric(name)
            values_a = evaluate_metric(metric, labels, group_a, weights=draws.weights)
            values_b = evaluate_metric(metric, labels, group_b, weights=draws.weights)
            estimate = float(
                evaluate_metric(metric, labels, group_a, weights=np.ones((1, labels.size)))[0]
            )
            differences = values_a - values_b
            now = difference_from_grouped(
                draws, metric, name, n_resamples=N_RESAMPLES, confidence_level=CONFIDENCE_LEVEL,
                seed=replicate, stratified=True,
            )  # fmt: skip
            previous_level = 1 - expanded_tail_probability(CONFIDENCE_LEVEL, draws.n_units)
            cases = {
                "difference": (
                    {
                        "percentile": percentile_interval(differences, CONFIDENCE_LEVEL),
                        "previous": percentile_interval(differences, previous_level),
                        "now": (now.ci_low, now.ci_high)
                        if now.no_interval_reason is None
                        else None,
                    },
                    truth[name][0] - truth[name][1],
                ),
                "single": (_single_intervals(draws, name, values_a, estimate), truth[name][0]),
            }
            for target, (intervals, true_value) in cases.items():
                for method, interval in intervals.items():
                    cell = counts.setdefault((target, name, method), [0, 0])
                    if interval is not None:
                        cell[0] += int(interval[0] <= true_value <= interval[1])
                        cell[1] += 1
    return {key: (hits, reported) for key, (hits, reported) in counts.items()}


def _se(coverage: float, replicates: int) -> float:
    return math.sqrt(max(coverage * (1 - coverage), 1e-12) / max(replicates, 1))


def _coverage(result: tuple[int, int], replicates: int, *, withheld: bool = False) -> str:
    hits, reported = result
    if reported == 0:
        return "none"
    text = f"{hits / reported:.3f}"
    if reported < FEW_REPORTED:
        text += f" ({reported})"
    if withheld and reported < replicates:
        text += f" [{1 - reported / replicates:.0%}]"
    return text


def _robustness_row(
    scenario: Scenario, n_groups: int, coverage: dict, replicates: int
) -> tuple[str, str]:
    n_pos = round(scenario.prevalence * n_groups)
    cells = []
    for target, name in QUANTITIES:
        previous = _coverage(coverage[(target, name, "previous")], replicates)
        now = _coverage(coverage[(target, name, "now")], replicates, withheld=True)
        cells.append(f"{previous} / {now}")
    alternatives = [
        _coverage(coverage[("single", "auroc", k)], replicates) for k in (*ALTERNATIVES, "now")
    ]
    head = f"| {scenario.name} | {n_groups} ({n_pos}) | "
    return head + " | ".join(cells) + " |", head + " | ".join(alternatives) + " |"


def parse_cells(text: str) -> tuple[tuple[str, int], ...]:
    """``"rare:100,ceiling:60"`` -> ``(("rare", 100), ("ceiling", 60))``, checked."""
    cells = []
    for item in text.split(","):
        name, _, count = item.strip().partition(":")
        if name not in SCENARIOS or not count.isdigit() or int(count) < 2:
            raise argparse.ArgumentTypeError(
                f"expected SCENARIO:GROUPS with SCENARIO one of {', '.join(SCENARIOS)} "
                f"and GROUPS an integer >= 2, got {item!r}"
            )
        cells.append((name, int(count)))
    return tuple(cells)


def _main_table(replicates: int, truth: dict[str, tuple[float, float]]) -> None:
    """Scenario ``main`` at every group count of ``GROUP_COUNTS``, all three methods."""
    main = SCENARIOS["main"]
    print(
        f"\n## group bootstrap, scenario main (prevalence {main.prevalence}, {SEGMENTS} "
        f"segments/patient, stratified, {N_RESAMPLES} resamples, {replicates} replicates; "
        f"Monte Carlo SE about {_se(0.95, replicates):.4f} at 0.95; "
        f"MIN_INFORMATIVE_GROUPS = {MIN_INFORMATIVE_GROUPS}; [x%] = share withheld)\n"
    )
    columns = [(t, m, k) for t, m in QUANTITIES for k in METHODS]
    print("| groups (positives) | " + " | ".join(f"{t} {m} {k}" for t, m, k in columns) + " |")
    print("| --- " * (len(columns) + 1) + "|")
    for n_groups in GROUP_COUNTS:
        start = time.perf_counter()
        coverage = group_coverage(main, n_groups, replicates, truth)
        n_pos = round(main.prevalence * n_groups)
        cells = " | ".join(
            _coverage(coverage[key], replicates, withheld=key[2] == "now") for key in columns
        )
        print(f"| {n_groups} ({n_pos}) | {cells} |  ({time.perf_counter() - start:.0f} s)")


def run_group_section(
    replicates: int,
    *,
    main_table: bool = True,
    cells: tuple[tuple[str, int], ...] = ROBUSTNESS_CELLS,
) -> None:
    truths = {name: population_values(s, seed=12345) for name, s in SCENARIOS.items()}
    for name, truth in truths.items():
        shown = ", ".join(f"{m} a={v[0]:.4f} b={v[1]:.4f}" for m, v in truth.items())
        print(f"population ({name}): {shown}")
    if main_table:
        _main_table(replicates, truths["main"])
    print(
        "\n## other scenarios: previous (expanded percentile, n = smallest class) / now "
        f"(library default); {replicates} replicates, MIN_INFORMATIVE_GROUPS = "
        f"{MIN_INFORMATIVE_GROUPS}; [x%] = share withheld; cells with fewer than "
        f"{FEW_REPORTED} intervals show the count\n"
    )
    head = " | ".join(f"{t} {m}" for t, m in QUANTITIES)
    rows, alternative_rows = [], []
    for name, n_groups in cells:
        start = time.perf_counter()
        scenario = SCENARIOS[name]
        coverage = group_coverage(scenario, n_groups, replicates, truths[name])
        row, alternative = _robustness_row(scenario, n_groups, coverage, replicates)
        rows.append(row)
        alternative_rows.append(alternative)
        print(f"  ({name} {n_groups}: {time.perf_counter() - start:.0f} s)", flush=True)
    print(f"| scenario | groups (positives) | {head} |")
    print("| --- " * (len(QUANTITIES) + 2) + "|")
    print("\n".join(rows))
    print("\n## one run's AUROC: alternatives on the same resamples (all test sets) and now\n")
    print("| scenario | groups (positives) | BCa | logit-DeLong | now |")
    print("| --- " * 5 + "|")
    print("\n".join(alternative_rows))


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
    parser.add_argument(
        "--no-main-table", action="store_true", help="group section: other scenarios only"
    )
    parser.add_argument(
        "--cells",
        type=parse_cells,
        default=ROBUSTNESS_CELLS,
        help="group section: the other scenarios' cells, e.g. rare:100,ceiling:60 "
        "(default: all of them)",
    )
    args = parser.parse_args()
    if args.section in ("group", "all"):
        run_group_section(args.replicates, main_table=not args.no_main_table, cells=args.cells)
    if args.section in ("evaluator", "all"):
        run_evaluator_section(args.evaluator_replicates)


if __name__ == "__main__":
    main()
