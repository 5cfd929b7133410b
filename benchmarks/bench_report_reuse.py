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

**At scale** (``--corpus DIR``, e.g. the 20,000-run scale corpus, which has
no predictions): the report as the platform's asset calls it, on the runs of
an existing corpus, which is only read. One child process per revision of
the code (this tree, and with ``--before REV`` that git revision's
``deepecgkit``, exported to a temporary folder) discovers the runs with
:func:`~deepecgkit.rundir.read.discover_runs` (timed: reading the corpus
once, the baseline), then times:

1. a full build into a fresh folder of every run but the last one;
2. the refresh after that run is added (the same folder, every run);
3. a full build of every run into another fresh folder,

and compares the folders of 2 and 3 byte for byte (exits 1 when a file
differs). Runs are passed as ``records`` where the revision accepts them,
else as ``run_dirs`` (what the asset passed before). Ratios printed: each
step against the discovery of the same child, and each step of this tree
against the same step of ``--before``.

Run: ``PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/bench_report_reuse.py
--corpus /work/bench/c20k/runs --before main``

**The asset's one-run refresh** (``--corpus DIR --asset``): what the daemon's
refresh costs in the ``statistical_report`` step. The runs are discovered
once (through a copy of ``--discovery-cache FILE``, a warm
``run_records.cache``, when given) and stored as the Parquet frame
``discovered_runs`` is. Each step then runs in a fresh interpreter, as a
launched run's step does (``deepecg_assets.definitions`` imported first, not
timed), and times the asset's body on that frame: a build of every run but
the last into a fresh folder, then ``--repeat`` times the refresh with every
run into a copy of that folder, and a clean build of every run. With
``--before REV`` the same steps run for that revision's ``deepecgkit`` and
``deepecg_assets``, each refresh of one revision right after the other's, so
both see the same machine state. Printed: each refresh's seconds, their
median (wall and CPU seconds of the child), the ratios of the medians (this
tree / before), the peak resident memory of each step's child during the
asset's body and how far it rose above what the child held before it (its
imports and frame; on Linux the peak is reset, ``/proc/self/clear_refs``,
after the frame is read, whose own transient peak would hide the body's), and the
files that differ between a refresh and the clean build (exit 1 when any does).

Run: ``PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/bench_report_reuse.py
--corpus /work/bench/c20k/runs --asset --discovery-cache <output>/cache/run_records.cache
--before main``; for 100,000 runs, ``--corpus /work/bench/c100k/runs`` (any corpus
path works; with ``--repeat 2`` the two revisions take ten to fifteen minutes there on a
busy two-core machine).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import resource
import shutil
import statistics
import subprocess
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


#: Steps of the scale mode, in order, with their labels.
SCALE_STEPS = {
    "discovery": "discover_runs (the corpus read once)",
    "full": "full build, every run but one, fresh folder",
    "refresh": "refresh after one run added, same folder",
    "clean": "full build, every run, fresh folder",
}


def _scale_child(corpus: Path, work: Path) -> dict[str, object]:
    """Time the scale steps with the ``deepecgkit`` on ``sys.path`` (run in a child process)."""
    import matplotlib  # noqa: F401  (imported once per process by any report; not timed)

    from deepecgkit.rundir.read import discover_runs

    start = time.perf_counter()
    records, _ = discover_runs([corpus], recursive=True)
    times: dict[str, float] = {"discovery": time.perf_counter() - start}
    records.sort(key=lambda record: str(record.run_dir))
    takes_records = "records" in inspect.signature(statistical_report).parameters

    def report(out: Path, chosen: list) -> float:
        given = {"records": chosen} if takes_records else {"run_dirs": [r.run_dir for r in chosen]}
        start = time.perf_counter()
        statistical_report(None, out, overwrite=True, plots=True, **given)
        return time.perf_counter() - start

    times["full"] = report(work / "out", records[:-1])
    times["refresh"] = report(work / "out", records)
    times["clean"] = report(work / "clean", records)
    built, clean = _tree(work / "out"), _tree(work / "clean")
    differing = sorted(n for n in built.keys() | clean.keys() if built.get(n) != clean.get(n))
    return {"runs": len(records), "records": takes_records, "times": times, "differ": differing}


def _exported(revision: str, into: Path) -> Path:
    """``deepecgkit`` (and the test helpers this script imports) of a git revision."""
    archive = subprocess.run(
        ["git", "archive", revision, "deepecgkit", "deepecg_assets", "tests"],
        check=True,
        capture_output=True,
    ).stdout
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _run_scale_child(code: Path, corpus: Path, work: Path) -> dict[str, object]:
    work.mkdir()
    environ = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(corpus), str(work)],
        env=environ,
        check=True,
        capture_output=True,
        text=True,
        cwd=code,
    )
    return json.loads(done.stdout.splitlines()[-1])


def scale(corpus: Path, before: str | None) -> int:
    """The scale mode (see the module docstring)."""
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    here = Path(__file__).resolve().parents[1]
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-report-scale-") as tmp:
        if before is not None:
            code = _exported(before, Path(tmp) / "before-code")
            results[f"before ({before})"] = _run_scale_child(code, corpus, Path(tmp) / "before")
        results["this tree"] = _run_scale_child(here, corpus, Path(tmp) / "after")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    failed = 0
    for name, result in results.items():
        times = result["times"]
        passed = "records" if result["records"] else "run_dirs"
        print(f"\n{name}: {result['runs']} runs, passed as {passed}")
        for step, label in SCALE_STEPS.items():
            ratio = times[step] / times["discovery"]
            print(f"  {label}: {times[step]:.2f} s ({ratio:.2f} x discovery)")
        print(f"  files differing between refresh and clean build: {len(result['differ'])}")
        failed += bool(result["differ"])
    if len(results) == 2:
        old, new = (result["times"] for result in results.values())
        print()
        for step in ("full", "refresh", "clean"):
            print(f"ratio this tree / before, {SCALE_STEPS[step]}: {new[step] / old[step]:.3f}")
    return 1 if failed else 0


def _asset_child(frame_path: Path, out: Path, n_runs: int) -> dict[str, float]:
    """Time the asset's body on the first ``n_runs`` rows of the stored frame (child process)."""
    import pandas as pd

    import deepecg_assets.definitions  # noqa: F401  (what a launched run has loaded; not timed)
    from deepecg_assets.assets.report import ReportConfig, statistical_report as report_asset
    from deepecg_assets.resources import AnalysisSettings, OutputFolderResource

    runs = pd.read_parquet(frame_path).iloc[:n_runs]
    gc.collect()
    # The peak so far is the frame's reading (Arrow, then pandas); where Linux lets the
    # peak be reset (clear_refs 5), the body's peak is measured from the memory held now.
    before = _reset_peak()
    # The asset's own function: a direct invocation of the asset would add an
    # ephemeral Dagster instance, which a launched run does not build per step.
    body = report_asset.op.compute_fn.decorated_fn
    start, cpu = time.perf_counter(), time.process_time()
    body(
        config=ReportConfig(),
        discovered_runs=runs,
        output_folder=OutputFolderResource(path=str(out)),
        analysis=AnalysisSettings(),
    )
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = _peak_kib()
    # In KiB: the child's peak during the body, and how far it rose above what was held.
    return {
        "seconds": seconds,
        "cpu": cpu,
        "peak_mb": peak / 1024,
        "rise_mb": (peak - before) / 1024,
    }


def _status_kib(key: str) -> int | None:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``); None where there is none."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> float:
    """The resident memory held now (KiB), with the peak reset to it where Linux allows."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return _status_kib("VmRSS") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _peak_kib() -> float:
    """The peak resident memory since the last reset (KiB; ``ru_maxrss`` where none)."""
    return _status_kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _asset_step(code: Path, frame_path: Path, out: Path, n_runs: int) -> tuple[float, float]:
    """Wall and CPU seconds of the asset's body in a fresh interpreter running ``code``.

    The child's peak resident memory is recorded in :data:`PEAKS` (by output folder).
    """
    environ = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(
        [sys.executable, __file__, "--asset-child", str(frame_path), str(out), str(n_runs)],
        env=environ,
        check=True,
        capture_output=True,
        text=True,
        cwd=code,
    )
    timed = json.loads(done.stdout.splitlines()[-1])
    PEAKS[out.name] = (float(timed["peak_mb"]), float(timed["rise_mb"]))
    return float(timed["seconds"]), float(timed["cpu"])


#: Peak resident memory of each asset step's child and the body's rise above what the
#: child held before it (MB), by the step's output folder name.
PEAKS: dict[str, tuple[float, float]] = {}


def _peak(name: str) -> str:
    peak, rise = PEAKS[name]
    return f"peak RSS {peak:.0f} MB, {rise:.0f} MB above what the loaded child held"


def _stored_frame(corpus: Path, discovery_cache: Path | None, into: Path) -> tuple[Path, int]:
    """The discovered runs of ``corpus`` as a Parquet frame sorted by run directory."""
    from deepecgkit.rundir.cache import RunCache
    from deepecgkit.rundir.read import discover_runs
    from deepecgkit.rundir.records import records_to_frame

    reader = None
    if discovery_cache is not None:
        copy = into / "run_records.cache"
        shutil.copyfile(discovery_cache, copy)  # the cache may be rewritten: never the original
        reader = RunCache.load(copy).read
    records, _ = discover_runs([corpus], recursive=True, reader=reader)
    frame = records_to_frame(records).sort_values("run_dir", ignore_index=True)
    path = into / "discovered_runs.parquet"
    frame.to_parquet(path)
    return path, len(frame)


def asset_scale(
    corpus: Path, *, before: str | None, discovery_cache: Path | None, repeat: int
) -> int:
    """The asset mode (see the module docstring)."""
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    here = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="bench-report-asset-") as tmp:
        work = Path(tmp)
        frame_path, n_runs = _stored_frame(corpus, discovery_cache, work)
        codes = {"this tree": here}
        if before is not None:
            codes = {f"before ({before})": _exported(before, work / "before-code"), **codes}
        refreshes: dict[str, list[tuple[float, float]]] = {name: [] for name in codes}
        failed = 0
        for index, (name, code) in enumerate(codes.items()):
            folder = work / f"code{index}"
            full, _ = _asset_step(code, frame_path, folder / "built", n_runs - 1)
            clean, _ = _asset_step(code, frame_path, folder / "clean", n_runs)
            print(
                f"{name}: build of {n_runs - 1} runs {full:.2f} s ({_peak('built')}), clean "
                f"build of {n_runs} runs {clean:.2f} s ({_peak('clean')})"
            )
        for attempt in range(repeat):
            for index, name in enumerate(codes):
                folder = work / f"code{index}"
                out = folder / f"refresh{attempt}"
                shutil.copytree(folder / "built", out, symlinks=True)
                refreshes[name].append(_asset_step(codes[name], frame_path, out, n_runs))
                if attempt == 0:
                    print(f"{name}: first refresh {_peak(out.name)}")
        for index, name in enumerate(codes):
            folder = work / f"code{index}"
            built, clean = _tree(folder / "refresh0"), _tree(folder / "clean")
            differing = sorted(
                n for n in built.keys() | clean.keys() if built.get(n) != clean.get(n)
            )
            walls, cpus = zip(*refreshes[name], strict=True)
            print(
                f"{name}: one-run refresh "
                + ", ".join(f"{t:.2f}" for t in walls)
                + f" s (median {statistics.median(walls):.2f} s; CPU median "
                f"{statistics.median(cpus):.2f} s); files differing from the clean build: "
                f"{len(differing)} {differing[:5]}"
            )
            failed += bool(differing)
        if before is not None:
            for what, column in (("wall", 0), ("CPU", 1)):
                old, new = (
                    statistics.median(timed[column] for timed in times)
                    for times in refreshes.values()
                )
                print(f"ratio of the {what} medians, this tree / before: {new / old:.3f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=4, help=f"at most {len(MODELS)}")
    parser.add_argument("--datasets", type=int, default=2, help=f"at most {len(DATASETS)}")
    parser.add_argument("--seeds", type=int, default=25)
    parser.add_argument("--corpus", type=Path, help="an existing corpus of runs (scale mode)")
    parser.add_argument("--before", help="scale mode: also time this git revision's code")
    parser.add_argument("--asset", action="store_true", help="scale mode: the asset's refresh")
    parser.add_argument("--discovery-cache", type=Path, help="asset mode: a warm run_records.cache")
    parser.add_argument("--repeat", type=int, default=3, help="asset mode: refreshes timed")
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--asset-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_scale_child(*args.child)))
        return 0
    if args.asset_child is not None:
        frame_path, out, n_runs = args.asset_child
        print(json.dumps(_asset_child(Path(frame_path), Path(out), int(n_runs))))
        return 0
    if args.corpus is not None and args.asset:
        return asset_scale(
            args.corpus,
            before=args.before,
            discovery_cache=args.discovery_cache,
            repeat=args.repeat,
        )
    if args.corpus is not None:
        return scale(args.corpus, args.before)
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
