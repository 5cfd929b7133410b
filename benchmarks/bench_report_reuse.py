"""Benchmark: rebuilding the statistical report after one run was added, against a full build.

Writes a corpus of runs with stored predictions (``--models`` x
``--datasets`` x ``--seeds``, default 4 x 2 x 25 = 200 runs, the first model
the reference, so every other run is one paired comparison) with
``tests/statistical_report/prediction_runs.py`` (the reuse tests' writer), less one
candidate run. It then times, in one process and one run:

1. a full build into an empty folder (the baseline);
2. a rebuild into the same folder with nothing changed;
3. after the missing run is written, the rebuild into that folder (one run
   and one pair computed, the rest reused);
4. a full build of the grown corpus into a fresh folder,

and compares the folders of 3 and 4 byte for byte (every CSV, the manifest,
every figure and the reuse cache); it exits 1 when a file differs. The
ratio printed is (3) / (4): the share of a full build's time an incremental
refresh after one new run costs. Settings are the report's defaults
(1000 resamples, 10 bins, PNG figures).

Run: ``PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/bench_report_reuse.py``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from deepecgkit.statistical_report import ReportResult, statistical_report
from deepecgkit.statistical_report.reuse import CACHE_FILENAME
from tests.statistical_report.prediction_runs import write_prediction_run

MODELS = ("resnet", "cnn", "lstm", "inception", "transformer", "mlp")
DATASETS = ("afib", "ptbxl", "chapman", "georgia")
N_GROUPS, PER_GROUP = 100, 3


def write_run(root: Path, model: str, dataset: str, seed: int) -> None:
    """One run of 300 predictions in 100 groups; a model's skill grows with its place."""
    skill = 1.0 + 0.2 * MODELS.index(model)
    write_prediction_run(
        root, model, dataset, seed, n_groups=N_GROUPS, per_group=PER_GROUP, skill=skill
    )


def _timed(runs: Path, out: Path, reference: str) -> tuple[float, ReportResult]:
    start = time.perf_counter()
    result = statistical_report([runs], out, reference=reference, overwrite=True)
    return time.perf_counter() - start, result


def _tree(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _counts(result: ReportResult) -> str:
    return (
        f"runs {result.reused_runs} reused / {result.computed_runs} computed, "
        f"pairs {result.reused_pairs} reused / {result.computed_pairs} computed"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=4, help=f"at most {len(MODELS)}")
    parser.add_argument("--datasets", type=int, default=2, help=f"at most {len(DATASETS)}")
    parser.add_argument("--seeds", type=int, default=25)
    args = parser.parse_args()
    models, datasets = MODELS[: args.models], DATASETS[: args.datasets]
    reference, added = models[0], (models[-1], datasets[-1], args.seeds - 1)
    with tempfile.TemporaryDirectory(prefix="bench-report-reuse-") as tmp:
        runs = Path(tmp) / "runs"
        start = time.perf_counter()
        cells = [(m, d, s) for m in models for d in datasets for s in range(args.seeds)]
        for cell in cells:
            if cell != added:
                write_run(runs, *cell)
        print(f"corpus: {len(cells) - 1} runs written in {time.perf_counter() - start:.1f} s")
        print(f"load average before: {os.getloadavg()[0]:.1f}")

        out = Path(tmp) / "out"
        full, result = _timed(runs, out, reference)
        print(f"full build, {len(cells) - 1} runs: {full:.1f} s ({_counts(result)})")
        same, result = _timed(runs, out, reference)
        print(f"rebuild, nothing changed: {same:.1f} s ({_counts(result)})")
        write_run(runs, *added)
        incremental, result = _timed(runs, out, reference)
        print(f"rebuild after one run added: {incremental:.1f} s ({_counts(result)})")
        clean_full, _ = _timed(runs, Path(tmp) / "clean", reference)
        print(f"full build of the grown corpus, {len(cells)} runs: {clean_full:.1f} s")
        size = (out / CACHE_FILENAME).stat().st_size
        print(f"reuse cache: {size / 1e6:.2f} MB ({size / len(cells) / 1e3:.1f} kB per run)")
        print(f"load average after: {os.getloadavg()[0]:.1f}")

        built, clean = _tree(out), _tree(Path(tmp) / "clean")
        differing = sorted(
            name for name in built.keys() | clean.keys() if built.get(name) != clean.get(name)
        )
        print(f"files compared with the clean build: {len(clean)}, differing: {len(differing)}")
        print(f"ratio one-run-added rebuild / full build: {incremental / clean_full:.3f}")
        print(f"ratio no-change rebuild / full build: {same / full:.3f}")
        if differing:
            print("differ: " + ", ".join(differing[:10]), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
