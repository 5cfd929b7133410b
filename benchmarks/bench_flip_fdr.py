"""Error rates of the flip grid's reversal evidence: before (p_flip, BY) and after (p_reversal).

Two seeded simulations, each measuring the historical quantity and the
directional one in the same run on the same draws:

* **Component level** (one model pair on two datasets, ``--replicates``
  draws per case through ``all_flip_tests``, 5 and 10 seeds,
  ``correction="none"`` because the simulated seeds are independent, so every
  t test is exact):

  - least-favourable null for a reversal: the difference is 5 SD on D1 and 0
    on D2. Rejection rate of ``p_reversal <= 0.05`` (target: 0.05 within 3
    Monte Carlo SE) against ``p_flip <= 0.05``;
  - the same large difference (5 SD) on both datasets, no reversal at all:
    ``p_flip <= 0.05`` nearly always, ``p_reversal`` never.

* **Grid level** (``all_flip_tests``): null grids with no reversal anywhere.
  Per-seed scores are ``skill[m] + offset[d] + split[d, s] + noise[m, d, s]``
  (each skill drawn from {0.70, 0.75, 0.80}, offset ~ U(-0.08, 0.04), split SD
  0.02, noise SD 0.01, 5 seeds; no model x dataset interaction, so every
  model pair differs by the same amount on every dataset: 0 for pairs on one
  skill level, a large same-sign 0.05 or 0.10 for the others). Grids of 10 models x 10 datasets
  (m = 2,025 flip tests) and 20 models x 12 datasets (m = 12,540). Reported:
  the share of grids with at least one nominal ``supported`` row, with a
  supported row whose BY-adjusted ``p_flip`` is <= 0.05 (the old headline),
  and with a row that ``survives_fdr`` (BY and BH of ``p_reversal``).
  Any such row is a false discovery.

Run: ``.venv/bin/python benchmarks/bench_flip_fdr.py [--replicates N] [--grids N]``
(about 2 minutes with the defaults). Exits non-zero when the size of
``p_reversal`` misses its target or a null grid's surviving share exceeds
0.05 + 3 SE.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import pandas as pd

from deepecgkit.analysis.ranking import all_flip_tests

ALPHA = 0.05
LARGE = 5.0
#: Model skills: each model takes one of these levels, so pairs on one level are
#: exact nulls and pairs on different levels differ by a large same-sign amount.
SKILL_LEVELS = (0.70, 0.75, 0.80)
OFFSET_RANGE = (-0.08, 0.04)
SPLIT_SD = 0.02
NOISE_SD = 0.01
GRID_SEEDS = 5
GRIDS = ((10, 10), (20, 12))
#: Component-level replicates per all_flip_tests call, and the SD of a difference.
BATCH = 10
DIFFERENCE_SD = 0.01


def long_frame(values: np.ndarray, models: list[str], datasets: list[str]) -> pd.DataFrame:
    """The long runs frame of ``values[model, dataset, seed]`` (metric f1)."""
    m, d, s = np.meshgrid(
        np.arange(values.shape[0]),
        np.arange(values.shape[1]),
        np.arange(values.shape[2]),
        indexing="ij",
    )
    model_names = np.asarray(models, dtype=object)[m.ravel()]
    dataset_names = np.asarray(datasets, dtype=object)[d.ravel()]
    return pd.DataFrame(
        {
            "run_dir": [
                f"{a}_{b}_{c}"
                for a, b, c in zip(model_names, dataset_names, s.ravel(), strict=True)
            ],
            "model": model_names,
            "dataset": dataset_names,
            "seed": s.ravel(),
            "averaging": "macro",
            "n_train": 800.0,
            "n_test": 200.0,
            "n_test_groups": 180.0,
            "metric": "f1",
            "value": values.ravel(),
        }
    )


def se(rate: float, n: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1e-12) / n)


def component_case(rng: np.random.Generator, n_seeds: int, second: float, replicates: int):
    """Rejection rates of p_reversal and p_flip at ALPHA over ``replicates`` flip tests.

    Replicates run through ``all_flip_tests`` in batches: replicate ``i`` owns
    the datasets ``r<i>a`` (difference ``LARGE`` SD) and ``r<i>b`` (difference
    ``second`` SD), and only the row pairing those two is read; the grid's
    other rows pair different replicates and are ignored.
    """
    reversal = flip = 0
    for batch in range(0, replicates, BATCH):
        size = min(BATCH, replicates - batch)
        datasets = [f"r{i:05d}{half}" for i in range(size) for half in "ab"]
        shift = np.tile([LARGE, second], size)[:, None] * DIFFERENCE_SD
        b = 0.7 + DIFFERENCE_SD * rng.standard_normal((len(datasets), n_seeds))
        a = b + shift + DIFFERENCE_SD * rng.standard_normal((len(datasets), n_seeds))
        flips = all_flip_tests(
            long_frame(np.stack([a, b]), ["a", "b"], datasets), correction="none"
        )
        own = flips["dataset_1"].str[:-1] == flips["dataset_2"].str[:-1]
        rows = flips.loc[own]
        assert len(rows) == size
        reversal += int((rows["p_reversal"] <= ALPHA).sum())
        flip += int((rows["p_flip"] <= ALPHA).sum())
    return reversal / replicates, flip / replicates


def grid_case(rng: np.random.Generator, n_models: int, n_datasets: int, grids: int) -> dict:
    models = [f"m{i:02d}" for i in range(n_models)]
    datasets = [f"d{j:02d}" for j in range(n_datasets)]
    counts = {"nominal": 0, "old": 0, "by": 0, "bh": 0}
    size = 0
    for _ in range(grids):
        skill = rng.choice(SKILL_LEVELS, size=n_models)
        offset = rng.uniform(*OFFSET_RANGE, size=n_datasets)
        split = rng.normal(0.0, SPLIT_SD, size=(1, n_datasets, GRID_SEEDS))
        noise = rng.normal(0.0, NOISE_SD, size=(n_models, n_datasets, GRID_SEEDS))
        values = skill[:, None, None] + offset[None, :, None] + split + noise
        runs = long_frame(values, models, datasets)
        flips = all_flip_tests(runs, correction="none")
        bh = all_flip_tests(runs, correction="none", fdr_method="bh")
        size = len(flips)
        supported = flips["verdict"] == "supported"
        counts["nominal"] += bool(supported.any())
        counts["old"] += bool((supported & (flips["p_adjusted"] <= ALPHA)).any())
        counts["by"] += bool(flips["survives_fdr"].any())
        counts["bh"] += bool(bh["survives_fdr"].any())
    return {"m": size, **{k: v / grids for k, v in counts.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=5_000)
    parser.add_argument("--grids", type=int, default=200)
    parser.add_argument("--seed", type=int, default=10)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    ok = True
    start = time.perf_counter()
    print(
        f"component level, {args.replicates:,} flip tests per case (MC SE of 5%: "
        f"{se(ALPHA, args.replicates):.4f})"
    )
    print("| case | seeds | p_reversal <= 0.05 | p_flip <= 0.05 (baseline) | replicates |")
    print("| --- | --- | --- | --- | --- |")
    for n_seeds in (5, 10):
        for label, second in (
            ("least-favourable null (5 SD, 0)", 0.0),
            ("same sign (5 SD, 5 SD)", LARGE),
        ):
            # p_reversal can never reject a same-sign pair, so fewer draws show it.
            count = args.replicates if second == 0.0 else max(1, args.replicates // 5)
            reversal, flip = component_case(rng, n_seeds, second, count)
            print(f"| {label} | {n_seeds} | {reversal:.4f} | {flip:.4f} | {count:,} |")
            if second == 0.0:
                ok &= abs(reversal - ALPHA) <= 3 * se(ALPHA, args.replicates)
            else:
                ok &= reversal == 0.0
    print(f"\ngrid level, null grids (no reversal anywhere), {args.grids} grids per size")
    print(
        "| grid | m | any nominal supported | supported and BY(p_flip) <= 0.05 (old) "
        "| survives_fdr, BY | survives_fdr, BH |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for n_models, n_datasets in GRIDS:
        grids = args.grids if n_models == GRIDS[0][0] else max(1, args.grids // 4)
        result = grid_case(rng, n_models, n_datasets, grids)
        print(
            f"| {n_models} models x {n_datasets} datasets ({grids} grids) | {result['m']:,} "
            f"| {result['nominal']:.3f} | {result['old']:.3f} | {result['by']:.3f} "
            f"| {result['bh']:.3f} |"
        )
        ok &= result["by"] <= ALPHA + 3 * se(ALPHA, grids)
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
