"""Benchmark: the demo train-grid (3 models x 2 datasets x 5 seeds, --jobs 1).

Prints the wall time of the demo grid of substrate.md section 8 against its
10-minute ceiling, the mean time per run, the cost of a resume pass (every
run skipped) against the full grid measured in the same process, the time to
generate each default synthetic dataset against its 2-second target, and the
size of what the grid writes (checkpoints, prediction files, everything), so
the bundled example corpus can be sized.

Run: ``.venv/bin/python benchmarks/bench_train_grid.py``
"""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

from deepecgkit import cli
from deepecgkit.datasets.synthetic import SYNTHETIC_SPECS, make_synthetic

DEMO = [
    "--models", "simple-cnn", "resnet1d", "se-resnet",
    "--datasets", "synthetic-af", "synthetic-ptbxl",
    "--seeds", "0-4",
    "--leads", "II",
    "--jobs", "1",
    "--no-progress",
]  # fmt: skip
CEILING_S = 600.0
GENERATION_TARGET_S = 2.0
MIB = 1024 * 1024


def _grid(out: Path) -> tuple[float, str]:
    buffer = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(buffer):
        code = cli.main(["train-grid", *DEMO, "--out", str(out)])
    elapsed = time.perf_counter() - start
    if code != 0:
        sys.exit(f"train-grid exited with {code}:\n{buffer.getvalue()}")
    return elapsed, buffer.getvalue()


def _run_seconds(stdout: str) -> list[float]:
    return [float(line.split()[-1].rstrip("s")) for line in stdout.splitlines()[:-1]]


def _size(paths: list[Path]) -> float:
    return sum(p.stat().st_size for p in paths) / MIB


def main() -> None:
    for name in SYNTHETIC_SPECS:
        start = time.perf_counter()
        make_synthetic(name)
        elapsed = time.perf_counter() - start
        print(
            f"generate {name:<17} {elapsed:6.2f} s  "
            f"({elapsed / GENERATION_TARGET_S:.2f} x the {GENERATION_TARGET_S:.0f} s target)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        full, stdout = _grid(out)
        runs = _run_seconds(stdout)
        resume, _ = _grid(out)
        checkpoints = sorted(out.glob("*/checkpoint.pt"))
        first_seed = [p for p in checkpoints if p.parent.name.endswith("_seed0")]
        predictions = sorted(out.glob("*/*predictions.csv"))
        everything = [p for p in out.rglob("*") if p.is_file()]
        print(
            f"demo grid: {len(runs)} runs in {full:.1f} s "
            f"({full / CEILING_S:.3f} x the {CEILING_S / 60:.0f}-minute ceiling)"
        )
        print(
            f"per run: mean {statistics.mean(runs):.2f} s, "
            f"median {statistics.median(runs):.2f} s, max {max(runs):.2f} s"
        )
        print(
            f"resume pass (all skipped): {resume * 1000:.0f} ms "
            f"({resume / full:.1e} x the full grid)"
        )
        print(
            f"output: {_size(everything):.2f} MiB in {len(everything)} files; "
            f"checkpoints {_size(checkpoints):.2f} MiB ({len(checkpoints)}), "
            f"first-seed checkpoints only {_size(first_seed):.2f} MiB ({len(first_seed)}), "
            f"prediction files {_size(predictions):.2f} MiB ({len(predictions)})"
        )


if __name__ == "__main__":
    main()
