"""Benchmark the transfer matrix's refresh after one checkpoint lands against a full build.

``transfer_matrix`` reuses every cell whose checkpoint bytes, target data and
settings are unchanged (``deepecgkit.evaluation.transfer_cache``). This
script measures what that saves on the bundled example corpus (3
architectures x 3 contrast datasets, one encoder each: 36 cells with the
untrained rows), as a user's daemon would see it, each build in a fresh
interpreter (a launched run is a new process: no data or model is cached in
memory between builds):

1. the corpus without one encoder run (``se-resnet`` on
   ``synthetic-bradycardia``) is built into the *refreshed* output folder;
2. that run is added back and the folder is refreshed (timed: the refresh);
3. the same corpus is built into an empty folder (timed: the full build);
4. the refreshed folder is refreshed once more with nothing changed (timed:
   the floor of a refresh, every cell reused).

A new encoder's row probes every target, so a refresh after one checkpoint
still generates every target's probe data; the script also times that
generation alone (the three protocol data modules set up in a fresh
interpreter), which the cache cannot save.

Printed: per build the job's wall seconds, the child interpreter's CPU
seconds (user + system, imports included), the ``transfer_matrix`` and
``transfer_table`` step seconds, and the reused / computed cell counts; the
ratios full / refresh; the data generation seconds; and the byte comparison
of the two folders' transfer outputs (frames, tables, figures, the cell
cache), which must be identical (the script exits 1 otherwise).

Usage::

    python benchmarks/bench_transfer_reuse.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "deepecg_assets" / "example_corpus"
#: The encoder run that lands between the first build and the refresh.
ADDED_RUN = "se-resnet_synthetic-bradycardia_seed0"
ASSETS = ("discovered_runs", "transfer_matrix", "transfer_table")
STEPS = ("transfer_matrix", "transfer_table")
#: Output files that are not the transfer assets' (the discovery cache).
NOT_TRANSFER = frozenset({"cache/run_records.cache"})


def _child(output: str) -> None:
    """Build the transfer assets into ``output`` and print one JSON line of timings."""
    import time

    import dagster as dg

    from deepecg_assets.definitions import defs

    job = defs.resolve_implicit_global_asset_job_def()
    with tempfile.TemporaryDirectory() as home, dg.instance_for_test(temp_dir=home) as instance:
        started = time.perf_counter()
        result = job.execute_in_process(
            instance=instance, asset_selection=[dg.AssetKey(name) for name in ASSETS]
        )
        wall = time.perf_counter() - started
        entries = instance.all_logs(result.run_id)
    if not result.success:
        raise SystemExit("build failed")
    steps: dict[str, float] = {}
    starts: dict[str, float] = {}
    for entry in entries:
        event = entry.dagster_event
        if event is None or event.step_key not in STEPS:
            continue
        if event.event_type_value == "STEP_START":
            starts[event.step_key] = entry.timestamp
        elif event.event_type_value == "STEP_SUCCESS":
            steps[event.step_key] = entry.timestamp - starts[event.step_key]
    (metadata,) = [
        e.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey("transfer_matrix")
    ]
    print(
        json.dumps(
            {
                "wall_s": wall,
                **{f"{step}_s": seconds for step, seconds in steps.items()},
                "reused": metadata["reused_cells"].value,
                "computed": metadata["computed_cells"].value,
            }
        )
    )


def _child_data() -> None:
    """Set up the probe data module of every contrast dataset; print the seconds as JSON."""
    import time

    from deepecgkit.datasets.synthetic import CONTRAST_DATASETS
    from deepecgkit.evaluation.transfer import protocol_data_module

    started = time.perf_counter()
    for dataset in CONTRAST_DATASETS:
        protocol_data_module(dataset).setup()
    print(json.dumps({"data_s": time.perf_counter() - started}))


def _build(runs: Path | None, output: Path | None) -> dict[str, float]:
    """One child interpreter: a build of ``runs`` into ``output``, or (None) the data alone."""
    env = os.environ | {
        "PYTHONPATH": str(REPO),
        "DEEPECG_RUNS": str(runs),
        "DEEPECG_OUTPUT": str(output),
        "DEEPECG_RECURSIVE": "1",
    }
    mode = ["--child-data"] if output is None else ["--child", str(output)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, __file__, *mode],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"build into {output} failed:\n{done.stderr[-4000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return json.loads(done.stdout.strip().splitlines()[-1]) | {"process_cpu_s": cpu}


def _transfer_files(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.relative_to(root).as_posix() not in NOT_TRANSFER
    }


def _one_round(scratch: Path) -> tuple[dict[str, dict[str, float]], bool]:
    """The builds of one round by name, and whether refresh and full build agree."""
    runs = scratch / "runs"
    shutil.copytree(CORPUS, runs, ignore=shutil.ignore_patterns(ADDED_RUN))
    refreshed, full = scratch / "refreshed", scratch / "full"
    _build(runs, refreshed)
    shutil.copytree(CORPUS / ADDED_RUN, runs / ADDED_RUN)
    builds = {"refresh": _build(runs, refreshed), "full": _build(runs, full)}
    left, right = _transfer_files(refreshed), _transfer_files(full)
    differing = sorted(n for n in left.keys() | right.keys() if left.get(n) != right.get(n))
    if differing:
        print(f"differ between the refreshed and the full build: {', '.join(differing)}")
    same = not differing
    builds["unchanged"] = _build(runs, refreshed)
    builds["data"] = _build(None, None)
    return builds, same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="rounds (medians are printed)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-data", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return 0
    if args.child_data:
        _child_data()
        return 0
    rounds, identical = [], True
    for round_number in range(args.repeat):
        with tempfile.TemporaryDirectory() as scratch:
            builds, same = _one_round(Path(scratch))
        rounds.append(builds)
        identical &= same
        for name, build in builds.items():
            print(f"round {round_number + 1}: {name:<9} {build}")

    def median(name: str, measure: str) -> float:
        return statistics.median(r[name][measure] for r in rounds)

    print(f"one checkpoint added ({ADDED_RUN}), medians of {args.repeat} round(s):")
    print(f"{'measure':<20} {'refresh':>8} {'full':>8} {'unchanged':>10} {'full/refresh':>13}")
    for measure in ("wall_s", "process_cpu_s", *(f"{step}_s" for step in STEPS)):
        refresh, full = median("refresh", measure), median("full", measure)
        unchanged = median("unchanged", measure)
        print(
            f"{measure:<20} {refresh:>8.2f} {full:>8.2f} {unchanged:>10.2f} "
            f"{full / refresh:>12.2f}x"
        )
    print(f"probe data of the 3 targets generated alone: {median('data', 'data_s'):.2f} s")
    first = rounds[0]
    print(
        f"cells: refresh reused {first['refresh']['reused']}, computed "
        f"{first['refresh']['computed']}; full computed {first['full']['computed']}; "
        f"unchanged reused {first['unchanged']['reused']}"
    )
    print(f"transfer outputs identical byte for byte: {identical}")
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
