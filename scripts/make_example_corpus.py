"""Regenerate the example corpus bundled in ``deepecg_assets/example_corpus``.

The corpus is real ``train-grid`` output on the three contrast datasets of
``deepecgkit.datasets.synthetic`` (binary, lead II, 500 one-record patients
each), whose labels live in different places:

* ``synthetic-irregular-rr``: in the rhythm over many beats (no single beat
  shows it). The feature baseline reads RR statistics of the whole record;
  the networks see one beat (``simple-cnn``, about 0.6 s of receptive
  field) or two to three (``resnet1d``, ``se-resnet``, about 1.9 s).
* ``synthetic-long-pr``: in every single beat's morphology (the PR
  interval), which the networks see and the baseline's RR and
  amplitude-distribution features do not.
* ``synthetic-bradycardia``: in the heart rate, which every model reads, so
  the models nearly tie.

Four models (three small 1-D CNNs and the feature-based logistic baseline)
x three datasets x seven seeds; checkpoints are kept for the first seed only,
one encoder per (model, dataset), which is what the transfer matrix needs
and keeps the package under 5 MB. Every run is trained in a worker process
with one torch thread and depends only on its own seed, so the files come
out byte for byte the same whatever the number of workers (``--jobs``) or
cores (``benchmarks/bench_example_corpus.py`` checks it against the
committed corpus; another CPU or torch build may round differently).

The script then checks what the demo must show (:func:`demo_properties`):
a reversal that is ``supported`` and survives the FDR adjustment, a
``not-reproduced`` row, and no saturated cell. Run from the repository
root: ``python scripts/make_example_corpus.py`` (the time it takes is in
``docs/benchmarks.md``; ``benchmarks/bench_example_corpus.py`` measures it).
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from deepecgkit.rundir.format import CALIBRATION_METRICS, SINGLE_LABEL_METRICS
from deepecgkit.rundir.metrics import PRIMARY_METRIC

TARGET = Path(__file__).resolve().parent.parent / "deepecg_assets" / "example_corpus"
MODELS = ("simple-cnn", "resnet1d", "se-resnet", "logreg-features")
#: The contrast datasets (``deepecgkit.datasets.synthetic.CONTRAST_DATASETS``).
DATASETS = ("synthetic-irregular-rr", "synthetic-long-pr", "synthetic-bradycardia")
SEEDS = tuple(range(7))
#: Training settings of every run (``run_grid`` keywords, the ``train-grid`` options).
GRID_OPTIONS: dict[str, Any] = {"epochs": 10, "patience": 4, "leads": ["II"]}
#: Worker processes; each trains one run at a time on one torch thread.
DEFAULT_JOBS = 2
#: Torch threads per worker: one, so that results do not depend on the machine.
THREADS_PER_WORKER = 1
#: The demo's metric, FDR level and the metrics whose cells must not saturate.
FLIP_METRIC = PRIMARY_METRIC
FDR_LEVEL = 0.05
SATURATION_METRICS = tuple(name for name in SINGLE_LABEL_METRICS if name not in CALIBRATION_METRICS)
#: Digits the results tables print: a cell "saturates" when its mean and both
#: interval bounds print as 1.000.
PRINTED_DIGITS = 3
BYTES_PER_MIB = 2**20


@dataclass(frozen=True)
class Cell:
    """One run of the grid."""

    model: str
    dataset: str
    seed: int
    keep_checkpoint: bool


def _init_worker() -> None:
    import torch

    torch.set_num_threads(THREADS_PER_WORKER)


def _train_cell(
    cell: Cell, out: str, options: dict[str, Any] | None = None
) -> tuple[Cell, str, float, float]:
    """Train one cell with ``run_grid``; returns (cell, status, f1, seconds)."""
    import warnings

    from deepecgkit.training import run_grid

    with warnings.catch_warnings():
        # temperature fits at the edge of their bounds on near-separable
        # validation splits; the run records the fitted value either way
        warnings.simplefilter("ignore", RuntimeWarning)
        (status,) = run_grid(
            [cell.model],
            [cell.dataset],
            [cell.seed],
            out,
            checkpoints="all" if cell.keep_checkpoint else "none",
            progress=False,
            **(GRID_OPTIONS if options is None else options),
        )
    return cell, status.status, status.value, status.seconds


def grid_cells(seeds: tuple[int, ...] = SEEDS) -> list[Cell]:
    """Every (model, dataset, seed), the slow torch runs first (better load balance)."""
    first = min(seeds)
    cells = [
        Cell(model, dataset, seed, keep_checkpoint=seed == first and model != "logreg-features")
        for model in MODELS
        for dataset in DATASETS
        for seed in seeds
    ]
    return sorted(cells, key=lambda c: c.model == "logreg-features")


def train_corpus(
    out: Path,
    *,
    seeds: tuple[int, ...] = SEEDS,
    jobs: int = DEFAULT_JOBS,
    options: dict[str, Any] | None = None,
    cells: list[Cell] | None = None,
) -> float:
    """Train the grid (or ``cells``) into ``out`` (emptied first); returns the wall time in s.

    ``options`` replaces :data:`GRID_OPTIONS` (for trying other settings).

    Raises:
        SystemExit: a run did not finish.
    """
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cells = grid_cells(seeds) if cells is None else cells
    start = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    failed = []
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker) as pool:
        futures = [pool.submit(_train_cell, cell, str(out), options) for cell in cells]
        for done, future in enumerate(futures, start=1):
            cell, status, value, seconds = future.result()
            print(
                f"[{done:3d}/{len(cells)}] {cell.model:<16} {cell.dataset:<23} "
                f"seed {cell.seed}: {status} {FLIP_METRIC}={value:.3f} ({seconds:.1f} s)",
                flush=True,
            )
            if status != "done":
                failed.append(cell)
    if failed:
        raise SystemExit(f"{len(failed)} run(s) did not finish: {failed}")
    return time.perf_counter() - start


# --- what the demo must show -------------------------------------------------------------


def corpus_frames(root: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The reconciled runs, their aggregates and the flip grid, as the platform computes them."""
    from deepecgkit.analysis.aggregation import aggregate_runs, reconcile_averaging
    from deepecgkit.analysis.ranking import all_flip_tests
    from deepecgkit.rundir.read import discover_runs
    from deepecgkit.rundir.records import runs_to_frame

    records, _ = discover_runs([root], recursive=True)
    reconciled, _ = reconcile_averaging(runs_to_frame(records))
    return reconciled, aggregate_runs(reconciled), all_flip_tests(reconciled, metric=FLIP_METRIC)


def reversal_q_values(flips: pd.DataFrame) -> pd.DataFrame:
    """``flips`` with ``p_reversal``, ``q_reversal`` and ``survives_fdr`` added.

    ``p_reversal`` is the one-sided p-value of the claim "the ordering
    reverses": half of ``p_flip`` where the two mean differences have
    opposite signs (or one is zero), else one minus that half; NaN where
    ``p_flip`` is NaN. ``q_reversal`` is its Benjamini-Yekutieli adjustment
    (``statsmodels`` ``fdr_by``) over the testable family, the rows with a
    finite ``p_flip``. A row survives when its verdict is ``supported`` and
    ``q_reversal <= FDR_LEVEL``. (A stand-in until the library reports the
    same column.)
    """
    from statsmodels.stats.multitest import multipletests

    out = flips.copy()
    p_flip = out["p_flip"].to_numpy(dtype=np.float64)
    opposite = out["mean_1"].to_numpy(dtype=np.float64) * out["mean_2"].to_numpy() <= 0
    p_reversal = np.where(opposite, p_flip / 2.0, 1.0 - p_flip / 2.0)
    family = np.isfinite(p_flip)
    q_reversal = np.full(len(out), np.nan)
    if family.any():
        q_reversal[family] = multipletests(p_reversal[family], method="fdr_by")[1]
    out["p_reversal"] = np.where(family, p_reversal, np.nan)
    out["q_reversal"] = q_reversal
    out["survives_fdr"] = (out["verdict"] == "supported").to_numpy() & (q_reversal <= FDR_LEVEL)
    return out


def saturated_cells(aggregates: pd.DataFrame) -> pd.DataFrame:
    """Aggregate rows whose mean and interval all print as 1.000 (a model at the ceiling).

    A missing bound (one seed, or zero spread) counts as printing the mean.
    """
    rows = aggregates.loc[aggregates["metric"].isin(SATURATION_METRICS)]
    ceiling = round(1.0, PRINTED_DIGITS)

    def prints_ceiling(column: str) -> np.ndarray:
        values = rows[column].to_numpy(dtype=np.float64)
        values = np.where(np.isfinite(values), values, rows["mean"].to_numpy(dtype=np.float64))
        return np.round(values, PRINTED_DIGITS) >= ceiling

    mask = prints_ceiling("mean") & prints_ceiling("lower_ci") & prints_ceiling("upper_ci")
    return rows.loc[mask]


@dataclass
class DemoProperties:
    """What the bundled corpus shows (see :func:`demo_properties`)."""

    census: dict[str, int]
    survivors: pd.DataFrame
    saturated: pd.DataFrame
    flips: pd.DataFrame

    @property
    def holds(self) -> bool:
        """A surviving reversal, a not-reproduced row, and no saturated cell."""
        return (
            len(self.survivors) > 0
            and self.census.get("not-reproduced", 0) > 0
            and self.saturated.empty
        )


def demo_properties(root: Path) -> DemoProperties:
    """The flip verdict census, the reversals that survive FDR, and the saturated cells."""
    _, aggregates, flips = corpus_frames(root)
    flips = reversal_q_values(flips)
    census = {str(k): int(v) for k, v in flips["verdict"].value_counts().sort_index().items()}
    survivors = flips.loc[flips["survives_fdr"]]
    return DemoProperties(census, survivors, saturated_cells(aggregates), flips)


def _report(root: Path) -> bool:
    properties = demo_properties(root)
    print(f"flip rows: {len(properties.flips)}; verdicts: {properties.census}")
    columns = ["model_a", "model_b", "dataset_1", "dataset_2", "mean_1", "mean_2", "verdict"]
    for row in properties.survivors.itertuples():
        print(
            "survives FDR: "
            + ", ".join(f"{c}={getattr(row, c)}" for c in columns)
            + f", p_reversal={row.p_reversal:.2e}, q_reversal={row.q_reversal:.2e}"
        )
    if not properties.saturated.empty:
        print("saturated cells:\n" + properties.saturated.to_string())
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    print(f"corpus size: {size / BYTES_PER_MIB:.2f} MiB")
    return properties.holds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=TARGET, help="corpus folder (replaced)")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="worker processes")
    parser.add_argument(
        "--seeds", type=int, default=len(SEEDS), help="train seeds 0..N-1 (default: all ten)"
    )
    parser.add_argument(
        "--check-only", action="store_true", help="only check an existing corpus, train nothing"
    )
    args = parser.parse_args(argv)
    if not args.check_only:
        seeds = tuple(range(args.seeds))
        seconds = train_corpus(args.out, seeds=seeds, jobs=args.jobs)
        print(f"trained {len(grid_cells(seeds))} runs into {args.out} in {seconds:.0f} s")
    holds = _report(args.out)
    print("the demo properties hold" if holds else "the demo properties do NOT hold")
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
