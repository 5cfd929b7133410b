"""The two discovery-side steps of the daemon's one-run refresh, timed as the refresh runs them.

When one run lands in a large sweep, the refresh the sensor launches runs
``discovered_runs`` (a warm rescan: every run but the new one is a cache
hit) and ``transfer_matrix`` (which, on a corpus that kept no checkpoints,
has nothing to probe). Issue 12 wants the whole refresh under 10 s; this
script measures these two steps on their own, at the scale of a real
corpus (``--runs``, default the 20,000-run scale corpus), in one process:

* **floor**: what any rescan must do, listing the tree
  (``find_run_candidate_paths``) and one ``stat`` of every metrics file;
* **discovered_runs**: the asset's body (invoked directly, its resources
  as the platform builds them), each repeat after one new run was written
  into a second root, so exactly one run is parsed; then the Parquet bytes
  of its frame (what the IO manager writes), timed on their own;
* **transfer_matrix**: the asset's body, its input the stored frame (those
  bytes in a file, read by the step as the IO manager hands it over).

Every figure is the best of ``--repeats`` (the machine may be shared), with
its ratio to the floor measured in the same run. The output folder starts
empty; a first, untimed materialisation fills the run cache (a cold
discovery). The script uses only the assets' and the library's public
names, so the same command measures an older checkout too.

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_discovery_refresh.py``
(about a minute at 20,000 runs, most of it the untimed cold discovery).

At 100,000 runs the cold discovery is a minute of its own, so ``--warm-from``
copies the run cache of a built output folder instead (and one untimed warm
discovery follows, as the refresh before this one would have run), and
``--compare CHECKOUT`` measures a second checkout (say ``/work/main``) in the
same run: this script runs once per checkout and round in a process of its
own (``PYTHONPATH`` set to the checkout; the rounds alternate between the
two, so both see the same machine), and prints each row's best over the
rounds with the ratio of this tree to the other. It adds two rows:

* **after the sensor's tick**: the daemon's order, where ``new_runs_sensor``
  has seen the new run first (its full path: run cache loaded, tree scanned
  and indexed, the index saved and the cache by the sensor's own rule),
  untimed, and then ``discovered_runs`` runs;
* **peak memory** of the process (``VmHWM``), over every step it ran.

Run at 100,000 runs (about 8 minutes on two busy cores)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_discovery_refresh.py \
        --runs /work/bench/c100k/runs --warm-from /work/s19/d100/definitions_output \
        --compare /work/main --repeats 1 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
from upath import UPath

from deepecg_assets.assets.discovery import discovered_runs
from deepecg_assets.assets.transfer import TransferConfig, transfer_matrix
from deepecg_assets.parquet_frames import StoredFrame, frame_to_parquet
from deepecg_assets.resources import AnalysisSettings, OutputFolderResource, RunRootsResource
from deepecg_assets.sensors import SAVED_CACHE_PARSED_SHARE
from deepecgkit.rundir.cache import RunCache
from deepecgkit.rundir.format import METRICS_FILENAME
from deepecgkit.rundir.read import find_run_candidate_paths
from deepecgkit.rundir.tree_index import indexed_tree_state
from deepecgkit.rundir.write import write_run_directory

#: The corpus used when ``--runs`` is not given (20,000 runs).
DEFAULT_RUNS = "/work/bench/c20k/runs"
#: Seeds of the runs added one per repeat (beyond the scale corpora's 100 seeds).
FIRST_NEW_SEED = 100_000
#: The issue's targets for these two steps in the one-run refresh at 20,000 runs (s).
TARGET_DISCOVERY_SECONDS = 2.0
TARGET_TRANSFER_SECONDS = 0.5
#: The row of the peak memory (MiB, not seconds).
PEAK_ROW = "peak memory of the process (MiB)"
#: Where the run cache lies in an output folder (``OutputFolderResource.cache_file``).
CACHE_FILE = Path("cache") / "run_records.cache"


def best_of(repeats: int, work: Callable[[int], Any]) -> tuple[float, Any]:
    """The shortest wall time of ``work(repeat)`` over ``repeats`` calls, and its last result."""
    best, result = float("inf"), None
    for repeat in range(repeats):
        start = time.perf_counter()
        result = work(repeat)
        best = min(best, time.perf_counter() - start)
    return best, result


def rescan_floor(roots: list[Path]) -> int:
    """List the tree and ``stat`` every metrics file; the candidates found."""
    candidates, _ = find_run_candidate_paths(roots, recursive=True)
    for run_dir in candidates:
        os.stat(os.path.join(run_dir, METRICS_FILENAME))
    return len(candidates)


def peak_memory_mib() -> float:
    """The process's peak resident memory so far (``VmHWM``, MiB)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def sensor_saves(cache: RunCache) -> bool:
    """Whether ``new_runs_sensor`` saves the cache its scan used (the checkout's own rule)."""
    worth_saving = getattr(cache, "worth_saving", None)
    if worth_saving is not None:
        return worth_saving(share=SAVED_CACHE_PARSED_SHARE)
    return bool(cache.damaged or cache.misses >= SAVED_CACHE_PARSED_SHARE * len(cache))


def measure(runs: str, repeats: int, warm_from: str | None) -> tuple[list[tuple[str, float]], str]:
    """The rows of one checkout's table (name, seconds), and a line about the corpus."""
    with tempfile.TemporaryDirectory(prefix="bench_refresh_") as folder:
        extra = Path(folder) / "new_runs"
        extra.mkdir()
        output = Path(folder) / "out"
        roots = os.pathsep.join([runs, str(extra)])
        resources = {
            "run_roots": RunRootsResource(roots=roots, recursive=True),
            "output_folder": OutputFolderResource(path=str(output)),
            "analysis": AnalysisSettings(),
        }
        if warm_from:
            (output / CACHE_FILE).parent.mkdir(parents=True)
            shutil.copyfile(Path(warm_from) / CACHE_FILE, output / CACHE_FILE)

        # Contexts are built before the clock starts (each builds an ephemeral instance).
        contexts = [dg.build_asset_context() for _ in range(4 * repeats + 1)]

        def discover(repeat: int) -> Any:
            outputs = list(discovered_runs(context=contexts.pop(), **resources))
            return outputs[0].value

        start = time.perf_counter()
        frame = discover(0)
        kind = "warm" if warm_from else "cold"
        print(f"{kind} discovery (untimed): {time.perf_counter() - start:.2f} s", flush=True)
        added = iter(range(FIRST_NEW_SEED, FIRST_NEW_SEED + 2 * repeats))

        def add_run() -> None:
            seed = next(added)
            write_run_directory(
                extra / f"new_run_seed{seed}",
                model="model00",
                dataset="data00",
                metrics={"accuracy": 0.5, "f1": 0.5},
                seed=seed,
            )

        def one_new_run(repeat: int) -> Any:
            add_run()
            return discover(repeat)

        discovery, frame = best_of(repeats, one_new_run)

        def sensor_first(repeat: int) -> float:
            """The sensor's full path (untimed), then the discovery (timed, returned)."""
            add_run()
            cache = RunCache.load(output / CACHE_FILE)
            _, index = indexed_tree_state([Path(runs), extra], recursive=True, cache=cache)
            index.save(output / CACHE_FILE.with_name("tree_index.json"))
            if sensor_saves(cache):
                cache.prune_unvisited()
                cache.save(output / CACHE_FILE)
            del cache, index
            start = time.perf_counter()
            discover(repeat)
            return time.perf_counter() - start

        after_sensor = min(sensor_first(repeat) for repeat in range(repeats))
        floor, count = best_of(repeats, lambda _: rescan_floor([Path(runs), extra]))
        parquet, data = best_of(repeats, lambda _: frame_to_parquet(frame))
        stored_file = Path(folder) / "discovered_runs.parquet"
        stored_file.write_bytes(data)
        stored = StoredFrame(UPath(stored_file))

        def transfer(repeat: int) -> Any:
            return transfer_matrix(
                context=contexts.pop(),
                config=TransferConfig(),
                discovered_runs=stored,
                output_folder=resources["output_folder"],
            )

        probe, _ = best_of(repeats, transfer)
    rows = [
        ("floor: list the tree, stat each metrics file", floor),
        ("discovered_runs (one new run parsed)", discovery),
        ("discovered_runs after the sensor's tick (the run parsed by the sensor)", after_sensor),
        ("its frame as Parquet (IO manager write)", parquet),
        ("discovered_runs, with the write", discovery + parquet),
        ("transfer_matrix: the asset, reading its stored input", probe),
        (PEAK_ROW, peak_memory_mib()),
    ]
    return rows, f"{count} candidates, {len(frame)} usable runs, best of {repeats}"


def compare(args: argparse.Namespace) -> int:
    """Run this script per checkout and round in its own process; print both, with ratios."""
    checkouts = {"this tree": os.getcwd(), "other": os.path.abspath(args.compare)}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    command = [sys.executable, os.path.abspath(__file__), "--runs", args.runs, "--json"]
    command += ["--repeats", str(args.repeats)]
    command += ["--warm-from", args.warm_from] if args.warm_from else []
    for round_number in range(args.rounds):
        for name, checkout in checkouts.items():
            print(f"round {round_number + 1}: {name} ({checkout}); load {os.getloadavg()}")
            environment = {**os.environ, "PYTHONPATH": checkout}
            done = subprocess.run(
                command, env=environment, cwd=checkout, capture_output=True, text=True
            )
            if done.returncode != 0:
                print(done.stdout + done.stderr, file=sys.stderr)
                return 1
            results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    best = {
        name: {row: min(r[row] for r in rounds) for row in rounds[0]}
        for name, rounds in results.items()
    }
    print(f"other checkout: {checkouts['other']}; best of {args.rounds} round(s)")
    print("| step | other (s) | this tree (s) | this / other |")
    print("| --- | --- | --- | --- |")
    for row, other in best["other"].items():
        mine = best["this tree"].get(row, float("nan"))
        print(f"| {row} | {other:.2f} | {mine:.2f} | {mine / other:.2f}x |")
    print(f"load average after {os.getloadavg()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=DEFAULT_RUNS, help="the corpus (a run root)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (best is shown)")
    parser.add_argument("--warm-from", help="an output folder whose run cache to start from")
    parser.add_argument("--compare", help="a second checkout measured in the same run")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per checkout (--compare)")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON line")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(args)
    rows, about = measure(args.runs, args.repeats, args.warm_from)
    if args.json:
        print(json.dumps(dict(rows)))
        return 0
    floor = rows[0][1]
    print(about)
    print("| step | wall (s) | / floor |")
    print("| --- | --- | --- |")
    for name, seconds in rows:
        ratio = "" if name == PEAK_ROW else f"{seconds / floor:.2f}x"
        print(f"| {name} | {seconds:.2f} | {ratio} |")
    print(
        f"targets at 20,000 runs: discovery <= {TARGET_DISCOVERY_SECONDS} s, "
        f"transfer <= {TARGET_TRANSFER_SECONDS} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
