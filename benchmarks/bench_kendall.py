"""Coverage of the jackknife interval for the mean Kendall tau, and the size of Kendall's W test.

Seeded simulation of per-seed rankings: ``n`` models with fixed true
qualities ``q_j = j * spacing`` (``spacing`` in units of the seed-to-seed SD),
and each seed scores the models ``q + N(0, 1)``. The estimand of the mean
pairwise tau is ``tau* = E[tau_b(seed, seed')]`` for two independent seeds,
measured once per configuration from 200,000 independent seed pairs.

For each configuration (models x seeds x spacing) ``--replicates`` seeded
studies are drawn and the script reports:

* the coverage of the 95% leave-one-seed-out jackknife interval
  (``tau_lower``, ``tau_upper`` of ``tau_summary``) for ``tau*``;
* the baseline measured in the same run: how often the [min, max] range over
  seed pairs (``tau_min``, ``tau_max``) contains ``tau*``. It is not an
  interval: its "coverage" climbs towards 1 as seeds are added, because the
  range widens.

Then the size of the W permutation test (:func:`kendall_w_permutation_p`,
199 permutations) under unrelated rankings (``spacing = 0``).

Run: ``.venv/bin/python benchmarks/bench_kendall.py [--replicates N]``.
Prints tables only; nothing here is a pass/fail target of issue 10.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from deepecgkit.analysis.ranking import _tau_b_matrix
from deepecgkit.analysis.statistics import jackknife_mean_tau, kendall_w_permutation_p

MODELS = (4, 8)
SEEDS = (3, 5, 10, 20)
SPACINGS = (0.25, 1.0)
TRUTH_PAIRS = 200_000
ALPHA = 0.05


def true_tau(rng: np.random.Generator, n_models: int, spacing: float) -> float:
    quality = spacing * np.arange(n_models)
    first = quality + rng.standard_normal((TRUTH_PAIRS, n_models))
    second = quality + rng.standard_normal((TRUTH_PAIRS, n_models))
    upper = np.triu_indices(n_models, k=1)
    s1 = np.sign(first[:, upper[0]] - first[:, upper[1]])
    s2 = np.sign(second[:, upper[0]] - second[:, upper[1]])
    return float((s1 * s2).mean())  # continuous scores: no ties, tau_b = tau_a


def coverage(rng: np.random.Generator, n_models: int, n_seeds: int, spacing: float, reps: int):
    truth = true_tau(rng, n_models, spacing)
    quality = spacing * np.arange(n_models)
    jackknife = spread = 0
    for _ in range(reps):
        scores = quality + rng.standard_normal((n_seeds, n_models))
        matrix = _tau_b_matrix(scores)
        result = jackknife_mean_tau(matrix)
        jackknife += result["lower"] <= truth <= result["upper"]
        taus = matrix[np.triu_indices(n_seeds, k=1)]
        spread += taus.min() <= truth <= taus.max()
    return truth, jackknife / reps, spread / reps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    se = math.sqrt(0.95 * 0.05 / args.replicates)
    print(
        f"coverage of tau* at nominal 0.95, {args.replicates:,} studies per cell (MC SE {se:.3f})"
    )
    print("| models | spacing | tau* | seeds | jackknife 95% CI | [min, max] range (baseline) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n_models in MODELS:
        for spacing in SPACINGS:
            for n_seeds in SEEDS:
                truth, jack, spread = coverage(rng, n_models, n_seeds, spacing, args.replicates)
                print(
                    f"| {n_models} | {spacing} | {truth:.3f} | {n_seeds} | {jack:.3f} "
                    f"| {spread:.3f} |"
                )
    print("\nsize of the W permutation test (199 permutations), unrelated rankings")
    print("| models | seeds | P(p_W <= 0.05) |")
    print("| --- | --- | --- |")
    reps = max(1, args.replicates // 4)
    for n_models in MODELS:
        for n_seeds in (3, 10):
            rejected = sum(
                kendall_w_permutation_p(
                    rng.standard_normal((n_seeds, n_models)), n_permutations=199, seed=k
                )
                <= ALPHA
                for k in range(reps)
            )
            print(f"| {n_models} | {n_seeds} | {rejected / reps:.3f} (of {reps}) |")
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
