"""Benchmark the Dagster platform: code-location load, sensor ticks, a full build.

Each figure is printed next to a baseline measured in the same run:

* code-location load (fresh interpreter) against ``import dagster`` alone;
* a ``new_runs_sensor`` tick on a 100,000-run corpus with nothing changed,
  and with one run added, against a bare scan that only lists the run
  directories and stats their metrics files;
* a full materialisation of the bundled example corpus (``dagster asset
  materialize --select '*'``) against the same analysis run directly with
  the library (discovery, statistics and every table) in one process.

Usage::

    python benchmarks/bench_platform.py [--root DIR] [--models 50 --datasets 20 --seeds 100]

``--root`` reuses (or creates) a generated corpus, so the analysis benchmark
and this one can share the 100,000 run directories.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import dagster as dg

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def _fresh_import_seconds(statement: str, repeats: int = 3) -> float:
    """Best wall time of ``statement`` in a fresh interpreter (import caches warm)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    times = []
    for _ in range(repeats):
        output = subprocess.run(
            [PYTHON, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
        )
        times.append(float(output.stdout.strip().splitlines()[-1]))
    return min(times)


def bench_load() -> None:
    dagster_only = _fresh_import_seconds("import dagster")
    location = _fresh_import_seconds("import deepecg_assets.definitions")
    print("code-location load (fresh interpreter, best of 3)")
    print(f"  import dagster alone                : {dagster_only:6.2f} s")
    print(f"  import deepecg_assets.definitions   : {location:6.2f} s  (target < 2 s)")
    print(f"  ratio to dagster alone              : {location / dagster_only:6.2f}x")


def _ensure_corpus(root: Path, models: int, datasets: int, seeds: int) -> int:
    from deepecgkit.rundir.synthetic import CorpusSpec, generate_corpus

    expected = models * datasets * seeds
    existing = sum(1 for _ in os.scandir(root)) if root.is_dir() else 0
    if existing >= expected:
        return existing
    print(f"generating {expected:,} run directories under {root} ...", flush=True)
    start = time.perf_counter()
    generate_corpus(
        root,
        CorpusSpec(
            models=tuple(f"model{i:02d}" for i in range(models)),
            datasets=tuple(f"dataset{j:02d}" for j in range(datasets)),
            seeds=tuple(range(seeds)),
        ),
    )
    print(f"  generated in {time.perf_counter() - start:.0f} s")
    return expected


def _bare_scan(root: Path) -> int:
    """Baseline: list the run directories and stat each metrics file, nothing else."""
    from deepecgkit.rundir.cache import metrics_file_state
    from deepecgkit.rundir.read import find_run_directories

    return sum(metrics_file_state(d) is not None for d in find_run_directories(root, True))


def bench_sensor(root: Path, output: Path) -> None:
    from deepecg_assets.resources import OutputFolderResource, RunRootsResource
    from deepecg_assets.sensors import new_runs_sensor
    from deepecgkit.rundir.write import write_run_directory

    resources = {
        "run_roots": RunRootsResource(roots=str(root), recursive=True),
        "output_folder": OutputFolderResource(path=str(output)),
    }

    def tick(cursor: str | None) -> tuple[float, dg.SensorResult]:
        start = time.perf_counter()
        with dg.build_sensor_context(cursor=cursor, resources=resources) as context:
            result = new_runs_sensor(context)
        return time.perf_counter() - start, result

    bare_times = []
    for _ in range(2):  # the first pass also warms the page cache for everything below
        start = time.perf_counter()
        n_runs = _bare_scan(root)
        bare_times.append(time.perf_counter() - start)
    bare = min(bare_times)
    cold, first = tick(None)
    unchanged, second = tick(first.cursor)
    assert not second.run_requests, "an unchanged tree must skip"
    added_dir = root / "zz_added_model_dataset00_seed0"
    write_run_directory(
        added_dir, model="zz_added", dataset="dataset00", metrics={"f1": 0.5}, seed=0
    )
    try:
        added, third = tick(first.cursor)
        assert len(third.run_requests) == 1, "one added run must request one run"
    finally:
        for child in added_dir.iterdir():
            child.unlink()
        added_dir.rmdir()
    print(f"new_runs_sensor tick on {n_runs:,} runs")
    print(f"  baseline: list + stat every metrics file : {bare:6.2f} s (best of 2)")
    print(f"  first tick (empty cache, parses all)     : {cold:6.2f} s")
    print(
        f"  nothing changed                          : {unchanged:6.2f} s"
        f"  ({unchanged / bare:.2f}x baseline; target < 5 s)"
    )
    print(
        f"  one run added                            : {added:6.2f} s"
        f"  ({added / bare:.2f}x baseline)"
    )


def _library_build(root: Path, out: Path) -> None:
    """Baseline: everything the graph computes, called directly on the library."""
    from deepecgkit.analysis.aggregation import aggregate_runs, reconcile_averaging
    from deepecgkit.analysis.latex import (
        file_stems,
        flip_survival_table,
        rank_distribution_table,
        results_table,
        tau_table,
        write_tables,
    )
    from deepecgkit.analysis.ranking import all_flip_tests, rank_distribution, tau_summary
    from deepecgkit.rundir.read import discover_runs
    from deepecgkit.rundir.records import runs_to_frame

    records, _ = discover_runs([root], recursive=True)
    frame = runs_to_frame(records)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reconciled, _ = reconcile_averaging(frame)
    aggregated = aggregate_runs(reconciled)
    distribution, taus = rank_distribution(reconciled), tau_summary(reconciled)
    flips = all_flip_tests(reconciled)
    stems = file_stems(aggregated["dataset"].unique())
    tables = {f"results_{s}": results_table(aggregated, d) for d, s in stems.items()}
    tables["rank_distribution"] = rank_distribution_table(distribution, taus)
    tables["kendall_tau"] = tau_table(taus)
    tables["flip_survival"] = flip_survival_table(flips)
    write_tables(tables, out)
    for name, table in {"runs": frame, "aggregates": aggregated, "flips": flips}.items():
        table.to_csv(out / f"{name}.csv", index=False)


_STEP_LINE = re.compile(r'Finished execution of step "([^"]+)" in ([0-9.]+)(ms|s)\.')
#: Steps that do more than the library baseline below (torch probes, bootstrap, pdflatex).
_EXTRA_STEPS = ("transfer_matrix", "transfer_table", "statistical_report")
#: Step names of the asset checks end like this (or contain ``_no_``).
_CHECK_SUFFIXES = ("_compile", "_compiles")


def _step_seconds(log: str) -> dict[str, float]:
    """Seconds per step from ``dagster asset materialize`` output."""
    steps = {}
    for name, value, unit in _STEP_LINE.findall(log):
        steps[name] = float(value) / (1000.0 if unit == "ms" else 1.0)
    return steps


def bench_materialise() -> None:
    from deepecg_assets.resources import BUNDLED_CORPUS
    from deepecgkit.rundir.format import METRICS_FILENAME

    with tempfile.TemporaryDirectory() as scratch:
        home, output = Path(scratch) / "home", Path(scratch) / "out"
        home.mkdir()
        env = {**os.environ, "DAGSTER_HOME": str(home), "DEEPECG_OUTPUT": str(output)}
        env.pop("DEEPECG_RUNS", None)
        command = [str(Path(PYTHON).parent / "dagster"), "asset", "materialize"]
        command += ["-m", "deepecg_assets.definitions", "--select", "*"]
        start = time.perf_counter()
        completed = subprocess.run(
            command, cwd=REPO, env=env, check=True, capture_output=True, text=True
        )
        cli = time.perf_counter() - start
        steps = _step_seconds(completed.stdout + completed.stderr)
        code = (
            "import sys, time; sys.path.insert(0, 'benchmarks'); t = time.perf_counter();"
            "from pathlib import Path; import bench_platform as b;"
            f"b._library_build(Path({str(BUNDLED_CORPUS)!r}), Path({str(scratch)!r}));"
            "print(time.perf_counter() - t)"
        )
        start = time.perf_counter()
        subprocess.run([PYTHON, "-c", code], cwd=REPO, check=True, capture_output=True)
        library = time.perf_counter() - start
    checks = sum(
        v
        for k, v in steps.items()
        if k not in _EXTRA_STEPS
        and "_" in k
        and (k.endswith("compiles") or k.endswith("compile") or "_no_" in k)
    )
    extra = sum(steps.get(name, 0.0) for name in _EXTRA_STEPS)
    analysis = sum(steps.values()) - extra - checks
    runs = sum(1 for _ in BUNDLED_CORPUS.glob(f"*/{METRICS_FILENAME}"))
    print(f"full materialisation of the bundled corpus ({runs} runs, fresh processes)")
    print(f"  dagster asset materialize --select '*'         : {cli:6.2f} s wall")
    for name in _EXTRA_STEPS:
        print(f"    step {name:<40}: {steps.get(name, float('nan')):6.2f} s")
    print(f"    asset checks (6 pdflatex compiles, data checks) : {checks:6.2f} s")
    print(f"    discovery, statistics and tables (11 steps)      : {analysis:6.2f} s")
    print(
        f"  baseline: discovery, statistics, tables with the library, fresh process: "
        f"{library:6.2f} s (the 11 steps take {analysis / library:.2f}x that)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="corpus folder to reuse or create")
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--datasets", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    bench_load()
    bench_materialise()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.root or Path(scratch) / "corpus"
        _ensure_corpus(root, args.models, args.datasets, args.seeds)
        bench_sensor(root, Path(scratch) / "output")


if __name__ == "__main__":
    main()
