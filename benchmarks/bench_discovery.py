"""First discovery against the single-threaded I/O floor, and the warm paths that follow it.

Issue 12 asks that the first discovery of 100,000 runs cost at most 1.5x the
single-threaded I/O floor, with parsing spread over the machine's cores, and
that a sensor tick with nothing changed cost at most 1.5 s. This script
measures, on an existing corpus (``--runs``; the scale corpora of
``deepecgkit.analysis.synthetic``), all in one process and one run:

* **I/O floor**: reading every byte of every file discovery reads (each
  run's metrics CSV, ``run_metadata.json`` and ``split_info.json``), one
  ``open``/``read``/``close`` each, single-threaded, from a warm page cache
  (a first untimed pass warms it). The listing of the tree is not part of
  the floor; it is printed on its own line;
* **cold discovery**, empty cache: ``discover_runs(reader=RunCache(),
  workers=1)`` (serial) and with one worker process per CPU (parallel);
  saving the cache afterwards is not timed (the asset does it, but it is not
  discovery);
* the reading alone (``read_runs``) serial, in worker processes, and in
  threads over the same batches (to show whether threads would do: the
  parsers hold the GIL);
* **warm discovery**: a saved cache loaded, then ``discover_runs`` through it;
* **sensor tick, nothing changed**: the saved cache loaded, ``scan_tree_state``,
  ``RunCache.dataset_digests`` (what ``new_runs_sensor`` did before the tree
  index, and still does when something changed; the tick through the index
  is ``benchmarks/bench_sensor_tick.py``).

Every figure is the best of ``--repeats`` (the machine may be shared); the
load average is printed before and after. The script checks that parallel
discovery gives exactly the serial records, diagnostics and cache file, and
exits non-zero otherwise.

Run: ``.venv/bin/python benchmarks/bench_discovery.py --runs /work/bench/c100k/runs``
(about 3 minutes at 100,000 runs on two busy cores).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from deepecgkit.rundir import read as read_module
from deepecgkit.rundir.cache import RunCache, scan_tree_state
from deepecgkit.rundir.format import (
    MAX_RUN_FILE_BYTES,
    METADATA_FILENAME,
    METRICS_FILENAME,
    SPLIT_INFO_FILENAME,
)
from deepecgkit.rundir.read import (
    PARALLEL_CHUNK_RUNS,
    available_cpus,
    discover_runs,
    find_run_candidate_paths,
    find_run_candidates,
    read_runs,
)

#: The corpus used when ``--runs`` is not given (20,000 runs).
DEFAULT_RUNS = "/work/bench/c20k/runs"
#: The files :func:`deepecgkit.rundir.read.read_run` opens in every run directory.
RUN_FILES_READ = (METRICS_FILENAME, METADATA_FILENAME, SPLIT_INFO_FILENAME)
#: The issue's targets: cold discovery / I/O floor, and the no-change tick (s) at 100,000 runs.
TARGET_FLOOR_RATIO = 1.5
TARGET_TICK_SECONDS = 1.5


def io_floor(run_dirs: list[str]) -> int:
    """Read every byte of every file discovery reads, single-threaded; the bytes read."""
    total = 0
    for run_dir in run_dirs:
        for name in RUN_FILES_READ:
            try:
                descriptor = os.open(os.path.join(run_dir, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                while chunk := os.read(descriptor, MAX_RUN_FILE_BYTES):
                    total += len(chunk)
            finally:
                os.close(descriptor)
    return total


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and of its finished worker processes."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def best(repeats: int, work: Callable[[], Any]) -> tuple[float, float, Any]:
    """Best wall time (s) of ``repeats`` calls, that call's CPU time with workers', a result."""
    timings, result = [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), cpu_seconds()
        result = work()
        timings.append((time.perf_counter() - wall, cpu_seconds() - cpu))
    wall, cpu = min(timings)
    return wall, cpu, result


def read_in_threads(run_dirs: list[Path], workers: int) -> list:
    """``read_runs``' batches in a thread pool instead of processes (a comparison only)."""
    texts = [os.fspath(d) for d in run_dirs]
    chunks = [texts[i : i + PARALLEL_CHUNK_RUNS] for i in range(0, len(texts), PARALLEL_CHUNK_RUNS)]
    with ThreadPoolExecutor(workers) as pool:
        return [item for chunk in pool.map(read_module._read_chunk, chunks) for item in chunk]


class TableRows(list):
    """Rows of the printed table, each printed (and flushed) as soon as it is measured."""

    def append(self, row: tuple[str, float, float]) -> None:
        super().append(row)
        what, wall, cpu = row
        print(f"| {what} | {wall:.2f} | {cpu:.2f} | {wall / self[0][1]:.2f}x |", flush=True)


def cold_discovery(root: str, workers: int) -> tuple[tuple, RunCache]:
    """Discovery through an empty cache; the cache is saved by the caller, untimed."""
    cache = RunCache()
    return discover_runs(root, recursive=True, reader=cache, workers=workers), cache


def warm_discovery(root: str, cache_file: Path) -> tuple:
    cache = RunCache.load(cache_file)
    result = discover_runs(root, recursive=True, reader=cache)
    assert cache.misses == 0, "the saved cache covers the tree"
    return result


def sensor_tick(root: str, cache_file: Path) -> dict[str, str]:
    cache = RunCache.load(cache_file)
    scan_tree_state(root, recursive=True, cache=cache)
    assert cache.misses == 0, "the saved cache covers the tree"
    return cache.dataset_digests()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", default=DEFAULT_RUNS, help="a corpus of run directories")
    parser.add_argument("--repeats", type=int, default=2, help="best of this many (default 2)")
    parser.add_argument("--workers", type=int, default=available_cpus(), help="worker processes")
    args = parser.parse_args(argv)
    root, workers = args.runs, args.workers
    if not os.path.isdir(root):
        print(f"error: {root} is not a folder of run directories", file=sys.stderr)
        return 2
    print(f"corpus {root}; {workers} worker(s); load average before {os.getloadavg()}", flush=True)

    texts = find_run_candidate_paths(root, recursive=True)[0]
    paths = find_run_candidates(root, recursive=True)[0]
    io_floor(texts)  # warm the page cache
    print("| what | wall (s) | CPU, workers included (s) | wall / I/O floor |")
    print("| --- | --- | --- | --- |")
    rows = TableRows()
    wall, cpu, size = best(args.repeats, lambda: io_floor(texts))
    rows.append(
        (f"I/O floor: read {size / 2**20:.0f} MiB in {len(texts)} runs x 3 files", wall, cpu)
    )
    wall, cpu, _ = best(args.repeats, lambda: find_run_candidate_paths(root, recursive=True))
    rows.append(("listing the tree (recursive walk), not in the floor", wall, cpu))

    with tempfile.TemporaryDirectory() as folder:
        cache_file = Path(folder) / "run_records.cache"
        serial_file = Path(folder) / "serial.jsonl"
        wall, cpu, (serial, serial_cache) = best(args.repeats, lambda: cold_discovery(root, 1))
        rows.append(("cold discovery, serial (workers=1)", wall, cpu))
        wall, cpu, (parallel, cache) = best(args.repeats, lambda: cold_discovery(root, workers))
        rows.append((f"cold discovery, parallel ({workers} processes)", wall, cpu))
        same = repr(serial) == repr(parallel)
        serial_bytes = serial_cache.save(serial_file).read_bytes()
        same = same and serial_bytes == cache.save(cache_file).read_bytes()

        wall, cpu, _ = best(args.repeats, lambda: read_runs(paths, workers=1))
        rows.append(("read_runs alone, serial", wall, cpu))
        wall, cpu, _ = best(args.repeats, lambda: read_runs(paths, workers=workers))
        rows.append((f"read_runs alone, {workers} processes", wall, cpu))
        wall, cpu, _ = best(args.repeats, lambda: read_in_threads(paths, workers))
        rows.append((f"read_runs' batches in {workers} threads (comparison)", wall, cpu))

        wall, cpu, _ = best(args.repeats, lambda: warm_discovery(root, cache_file))
        rows.append(("warm discovery (saved cache loaded, nothing parsed)", wall, cpu))
        wall, cpu, _ = best(args.repeats, lambda: RunCache.load(cache_file))
        rows.append(("  of which: loading the saved cache", wall, cpu))
        wall, cpu, digests = best(args.repeats, lambda: sensor_tick(root, cache_file))
        tick = wall
        rows.append(("sensor tick, nothing changed: load + scan + dataset digests", wall, cpu))

    floor = rows[0][1]
    cold = min(wall for what, wall, _ in rows if what.startswith("cold discovery, parallel"))
    print(f"datasets {len(digests)}; parallel results identical to serial: {same}")
    print(
        f"cold parallel discovery / floor {cold / floor:.2f}x (target <= {TARGET_FLOOR_RATIO}x); "
        f"no-change tick {tick:.2f} s (target <= {TARGET_TICK_SECONDS} s at 100,000 runs)"
    )
    print(f"load average after {os.getloadavg()}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
