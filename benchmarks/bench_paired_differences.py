"""What one changed dataset costs the flip grid: recompute its paired differences, then combine.

The flip grid is a combine of per-dataset paired differences
(:func:`deepecgkit.analysis.ranking.paired_differences` and
:func:`~deepecgkit.analysis.ranking.flip_tests_from_differences`), so when
one run lands only its dataset's differences are recomputed. This script
measures, on an in-memory long runs frame of the scale corpus's shape
(models x datasets x seeds, one F1 row per run):

* baseline: ``all_flip_tests`` on the whole frame (a clean computation);
* one dataset's ``paired_differences``;
* the combine of the stored differences of every dataset;

and prints each as a ratio of the baseline, plus a check that the combine
equals the clean grid exactly. The Dagster fixed cost of a refresh is not
included (``benchmarks/bench_platform.py`` measures the platform).

Run: ``.venv/bin/python benchmarks/bench_paired_differences.py [--models 50 --datasets 20
--seeds 100]`` (about half a minute at the 100,000-run shape).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from deepecgkit.analysis.ranking import (
    all_flip_tests,
    flip_tests_from_differences,
    paired_differences,
)
from deepecgkit.rundir.records import RUN_FRAME_COLUMNS

#: Best of this many repetitions is reported (the machine may be shared).
REPEATS = 3
#: Per-seed F1 spread around each model's level (F1 units).
SEED_SD = 0.02


def scale_frame(n_models: int, n_datasets: int, n_seeds: int, *, seed: int = 0) -> pd.DataFrame:
    """A long runs frame: every model on every dataset with every seed."""
    rng = np.random.default_rng(seed)
    d, m, s = np.meshgrid(
        np.arange(n_datasets), np.arange(n_models), np.arange(n_seeds), indexing="ij"
    )
    n = d.size
    levels = rng.normal(0.7, 0.03, size=(n_datasets, n_models))
    frame = pd.DataFrame(
        {
            "run_dir": [f"/runs/{i}" for i in range(n)],
            "model": np.char.add("model-", m.ravel().astype(str)).astype(object),
            "dataset": np.char.add("dataset-", d.ravel().astype(str)).astype(object),
            "seed": s.ravel().astype(np.int64),
            "averaging": "macro",
            "multi_label": False,
            "n_train": 800.0,
            "n_val": 100.0,
            "n_test": 200.0,
            "n_test_groups": 150.0,
            "metric": "f1",
            "value": levels[d.ravel(), m.ravel()] + rng.normal(0.0, SEED_SD, n),
        }
    )
    return frame.loc[:, list(RUN_FRAME_COLUMNS)]


def best_of(function: Callable[[], object]) -> tuple[float, object]:
    times, result = [], None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--datasets", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args(argv)
    runs = scale_frame(args.models, args.datasets, args.seeds)
    clean_time, clean = best_of(lambda: all_flip_tests(runs))
    one = runs[runs["dataset"] == "dataset-0"]
    one_time, _ = best_of(lambda: paired_differences(one))
    differences = pd.concat(
        [paired_differences(rows) for _, rows in runs.groupby("dataset", sort=True)],
        ignore_index=True,
    )
    combine_time, combined = best_of(lambda: flip_tests_from_differences(differences))
    exact = combined.equals(clean)
    print(
        f"{len(runs):,} runs ({args.models} models x {args.datasets} datasets x "
        f"{args.seeds} seeds), {len(clean):,} flip tests"
    )
    print(f"{'step':<40} {'seconds':>8} {'x baseline':>11}")
    for name, seconds in (
        ("all_flip_tests (baseline, clean)", clean_time),
        ("paired_differences of one dataset", one_time),
        ("combine (flip_tests_from_differences)", combine_time),
        ("one dataset changed: the two above", one_time + combine_time),
    ):
        print(f"{name:<40} {seconds:>8.2f} {seconds / clean_time:>11.2f}")
    print(f"combine equals the clean grid exactly: {exact}")
    return 0 if exact else 1


if __name__ == "__main__":
    raise SystemExit(main())
