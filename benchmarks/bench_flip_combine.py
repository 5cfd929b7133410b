"""The cross-dataset combine at scale: flip grid and rank claims from per-dataset differences.

The partitioned platform computes each dataset's
:func:`~deepecgkit.analysis.ranking.paired_differences` in its own partition
and the cross-dataset results from those frames alone:
:func:`~deepecgkit.analysis.ranking.flip_tests_from_differences` (the flip
grid) and :func:`~deepecgkit.analysis.ranking.rank_claim_from_differences`
(rank claims). One new run therefore costs one dataset's differences plus
the combine. This script reads a scale corpus the way the platform does
(``discover_runs``, ``runs_to_frame``, ``reconcile_averaging``: every metric
of every run in one long frame) and measures, best of three:

* baseline: ``all_flip_tests`` on the whole frame (a clean computation);
* one dataset's ``paired_differences`` (on that dataset's rows only);
* the combine: ``pd.concat`` of every dataset's differences (in reverse
  dataset order, to show the order does not matter) and
  ``flip_tests_from_differences``;
* rank claims: ``evaluate_rank_claim`` on the runs against
  ``rank_claim_from_differences`` on the combined differences, for one
  claim per model (best on the dataset where its mean F1 is highest, worst
  where it is lowest).

It prints each time as a ratio of its baseline and checks that the combine
equals the clean grid and every claim equals its run-based twin exactly;
it exits non-zero when one does not.

Run: ``.venv/bin/python benchmarks/bench_flip_combine.py --scale 100k --root DIR``.
``--scale`` is ``20k`` (20 models x 10 datasets x 100 seeds) or ``100k``
(50 x 20 x 100); ``DIR`` holds that corpus, and is filled with one
(``deepecgkit.rundir.synthetic``, minutes at 100k) when it holds fewer runs.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from deepecgkit.analysis.aggregation import reconcile_averaging
from deepecgkit.analysis.ranking import (
    all_flip_tests,
    evaluate_rank_claim,
    flip_tests_from_differences,
    paired_differences,
    rank_claim_from_differences,
)
from deepecgkit.rundir.read import discover_runs
from deepecgkit.rundir.records import runs_to_frame
from deepecgkit.rundir.synthetic import CorpusSpec, generate_corpus

#: Best of this many repetitions is reported (the machine may be shared).
REPEATS = 3
#: Grid shape (models, datasets, seeds) of each scale.
SCALES = {"20k": (20, 10, 100), "100k": (50, 20, 100)}
METRIC = "f1"


def best_of(function: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    """Smallest wall time of ``repeats`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def corpus_frame(root: Path, shape: tuple[int, int, int]) -> tuple[int, pd.DataFrame]:
    """Runs read, and the reconciled long runs frame, of the corpus under ``root``.

    The corpus is generated there first when ``root`` holds fewer runs than ``shape``.
    """
    models, datasets, seeds = shape
    present = sum(1 for _ in os.scandir(root)) if root.is_dir() else 0
    if present < models * datasets * seeds:
        print(f"writing a {models} x {datasets} x {seeds} corpus under {root} ...", flush=True)
        generate_corpus(
            root,
            CorpusSpec(
                models=tuple(f"model{i:02d}" for i in range(models)),
                datasets=tuple(f"data{j:02d}" for j in range(datasets)),
                seeds=tuple(range(seeds)),
            ),
        )
    records, _ = discover_runs(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # averaging conflicts, reported elsewhere
        runs, _ = reconcile_averaging(runs_to_frame(records))
    return len(records), runs


def same(left: Any, right: Any) -> bool:
    """Exact equality of nested claim dicts, NaN equal to NaN."""
    if isinstance(left, dict) and isinstance(right, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return math.isnan(right)
    return type(left) is type(right) and left == right


def claims_of(runs: pd.DataFrame) -> list[tuple[str, str, str]]:
    """One (model, best dataset, worst dataset) per model, by its mean F1 per dataset."""
    means = runs[runs["metric"] == METRIC].groupby(["model", "dataset"])["value"].mean()
    claims = []
    for model, by_dataset in means.groupby(level="model"):
        per_dataset = by_dataset.droplevel("model")
        claims.append((str(model), str(per_dataset.idxmax()), str(per_dataset.idxmin())))
    return claims


def print_rows(rows: list[tuple[str, float, float]]) -> None:
    print(f"{'step':<52} {'seconds':>8} {'x baseline':>11}")
    for name, seconds, baseline in rows:
        print(f"{name:<52} {seconds:>8.3f} {seconds / baseline:>11.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=sorted(SCALES), default="100k")
    parser.add_argument("--root", type=Path, help="the corpus folder (default: a temporary one)")
    args = parser.parse_args(argv)
    shape = SCALES[args.scale]
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        n_read, runs = corpus_frame(args.root or Path(scratch) / "runs", shape)
        load_time = time.perf_counter() - start
    by_dataset = {name: rows for name, rows in runs.groupby("dataset", sort=True)}
    print(
        f"{n_read:,} runs read ({' x '.join(map(str, shape))}), "
        f"{runs['run_dir'].nunique():,} kept by reconcile_averaging, "
        f"{len(runs):,} long-frame rows, in {load_time:.1f} s"
    )

    clean_time, clean = best_of(lambda: all_flip_tests(runs, metric=METRIC))
    first = next(iter(by_dataset.values()))
    one_time, _ = best_of(lambda: paired_differences(first, METRIC))
    parts = [paired_differences(rows, METRIC) for rows in by_dataset.values()]
    concat_time, differences = best_of(lambda: pd.concat(parts[::-1], ignore_index=True))
    combine_time, combined = best_of(lambda: flip_tests_from_differences(differences))
    grid_equal = combined.equals(clean)
    print(f"flip grid: {len(clean):,} flip tests from {len(differences):,} paired differences")
    print_rows(
        [
            ("all_flip_tests on the runs (baseline, clean)", clean_time, clean_time),
            ("paired_differences of one dataset", one_time, clean_time),
            ("concat of every dataset's differences", concat_time, clean_time),
            ("flip_tests_from_differences (the combine)", combine_time, clean_time),
            (
                "one dataset changed: the three above",
                one_time + concat_time + combine_time,
                clean_time,
            ),
        ]
    )
    print(f"combine equals the clean grid exactly: {grid_equal}")

    claims = claims_of(runs)
    models_on = {name: set(rows["model"]) for name, rows in by_dataset.items()}

    def from_runs() -> list[dict[str, Any]]:
        return [
            evaluate_rank_claim(runs, m, best, worst, metric=METRIC) for m, best, worst in claims
        ]

    def from_differences() -> list[dict[str, Any]]:
        return [
            rank_claim_from_differences(
                differences,
                m,
                dataset_best=best,
                dataset_worst=worst,
                metric=METRIC,
                dataset_models=models_on,
            )
            for m, best, worst in claims
        ]

    runs_time, expected = best_of(from_runs, repeats=1)
    claims_time, got = best_of(from_differences)
    claims_equal = same(got, expected)
    opponents = got[0]["n_components"] if got else 0
    print(f"rank claims: {len(claims)}, one per model, {opponents} opponents each")
    print_rows(
        [
            ("evaluate_rank_claim on the runs (baseline)", runs_time, runs_time),
            ("rank_claim_from_differences (the combine)", claims_time, runs_time),
        ]
    )
    print(f"claims equal their run-based twins exactly: {claims_equal}")
    return 0 if grid_equal and claims_equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
