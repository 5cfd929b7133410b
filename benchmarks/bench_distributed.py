"""Benchmark the Dask executor against the in-process one: a full build and a one-run refresh.

Issue 13 asks the distributed build to cost at most 1.5x the in-process one
on a 2-core machine. Both builds run in this script, one after the other,
over the same corpus, each on a persistent SQLite instance and an output
folder of its own, and through the same entry point (``execute_job`` on the
code location's asset job, reconstructed from its module as the daemon and
``dagster asset materialize`` do):

* the baseline loads ``deepecg_assets.definitions``: every step in this
  process (the in-process executor);
* the measured one loads ``deepecg_assets.distributed``: every step on a Dask
  cluster of ``--workers`` single-threaded worker processes that this script
  starts on 127.0.0.1 (a ``LocalCluster``, with the code location preloaded
  in each worker, as ``deploy/README.md`` starts them) and stops.

Each build is what the platform runs:

* full build: the two runs of ``deepecg-build``
  (:func:`deepecg_assets.build.materialize_everything`): discovery, then every
  dataset partition (one single-run range) and the cross-dataset assets in
  one run;
* one run added: a run directory, written once beside the builds, is moved
  into a second run root with one rename (the corpus folder itself is never
  touched; both builds see the same files) and refreshed with the run
  ``new_runs_sensor`` requests for one changed dataset while nothing else is
  in flight: discovery, that dataset's partition and the cross-dataset
  assets (:func:`deepecg_assets.sensors.refresh_requests`).

At the end the two output folders are compared byte for byte; the script
exits 1 if they differ.

Usage::

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/bench_distributed.py \\
        [--runs /work/bench/c20k/runs] [--workers 2]

Without ``--runs`` it builds the bundled example corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from dagster._core.definitions.assets.job.asset_job import IMPLICIT_ASSET_JOB_NAME
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)

from deepecg_assets.build import NEW_INSTANCE_YAML, sync_dataset_partitions
from deepecg_assets.definitions import defs
from deepecg_assets.distributed import DASK_SCHEDULER_ENV
from deepecg_assets.partitions import PARTITIONS_METADATA, dataset_key
from deepecg_assets.resources import BUNDLED_CORPUS, OUTPUT_ENV, RUNS_ENV
from deepecg_assets.sensors import (
    COMBINE_SELECTION,
    DATASET_REFRESH,
    DISCOVERY_ASSET,
    refresh_requests,
)
from tests.deepecg_assets.output_trees import tree_bytes

REPO = Path(__file__).resolve().parent.parent
#: Worker processes of the Dask cluster, one thread each (one core per step).
DEFAULT_WORKERS = 2
#: Issue 13's bound on the distributed build against the in-process one.
TARGET_RATIO = 1.5
LOOPBACK = "127.0.0.1"
#: The code locations compared: the baseline first.
IN_PROCESS, DISTRIBUTED = "deepecg_assets.definitions", "deepecg_assets.distributed"
#: Added to the template run's seed, so the added run is a new seed of its cell.
ADDED_SEED_OFFSET = 100_000
#: Run config: Dagster's console log at warnings only (both builds alike; the instance
#: keeps every event).
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
#: The file of a run directory that records its seed (docs/run-directory.md).
RUN_METADATA = "run_metadata.json"


@dataclass(frozen=True)
class Timings:
    """Wall seconds of one code location's full build and one-run refresh; its output folder."""

    full: float
    refresh: float
    output: Path


def asset_job(module: str) -> dg.ReconstructableJob:
    """The code location's asset job, reconstructable from its module (as a launched run's)."""
    repository = ReconstructableRepository.for_module(module, "defs", working_directory=str(REPO))
    return repository.get_reconstructable_job(IMPLICIT_ASSET_JOB_NAME)


def _run(job, instance, selection: dg.AssetSelection, tags: dict[str, str]) -> None:
    """One run of ``selection``; raises if it failed."""
    keys = sorted(selection.resolve(defs.resolve_asset_graph()))
    with dg.execute_job(job, instance, run_config=QUIET, asset_selection=keys, tags=tags) as result:
        if not result.success:
            failed = [e.step_key for e in result.all_events if e.is_step_failure]
            raise RuntimeError(f"run {result.run_id} failed at {failed}")


def full_build(job, instance, frames_dir: Path) -> None:
    """``deepecg-build``'s two runs: discovery, then every partition (one range) and the rest."""
    discovery = dg.AssetSelection.assets(DISCOVERY_ASSET)
    _run(job, instance, discovery, {})
    event = instance.get_latest_materialization_event(dg.AssetKey(DISCOVERY_ASSET))
    keys = list(event.asset_materialization.metadata[PARTITIONS_METADATA].value)
    order = sync_dataset_partitions(instance, keys, frames_dir=frames_dir)
    tags = {ASSET_PARTITION_RANGE_START_TAG: order[0], ASSET_PARTITION_RANGE_END_TAG: order[-1]}
    _run(job, instance, dg.AssetSelection.all() - discovery, tags)


def one_dataset_refresh(job, instance, key: str) -> None:
    """The run ``new_runs_sensor`` requests when only dataset ``key`` changed and nothing else
    is in flight (its partition and the cross-dataset assets together)."""
    graph = defs.resolve_asset_graph()
    (request,), _, _ = refresh_requests(
        {key: "changed"},
        {key: "built"},
        {key},
        dataset_refresh=sorted(DATASET_REFRESH.resolve(graph)),
        combines=sorted(COMBINE_SELECTION.resolve(graph)),
    )
    tags = {**request.tags, "dagster/partition": key}
    _run(job, instance, dg.AssetSelection.assets(*request.asset_selection), tags)


def template_run(runs: Path) -> Path:
    """The first run directory of the corpus (by name) that records a seed."""
    for metadata in sorted(runs.rglob(RUN_METADATA)):
        if "seed" in json.loads(metadata.read_text()):
            return metadata.parent
    raise SystemExit(f"no run directory under {runs} has a {RUN_METADATA} with a seed")


def stage_added_run(template: Path, stash: Path) -> tuple[Path, str]:
    """A copy of ``template`` as a new seed of its cell, written once into ``stash``.

    Both builds refresh the very same directory (:func:`landed`), moved into
    the run root and back by renames: its files keep their inodes and times,
    which the report's file memo records, so the two output folders can be
    compared byte for byte. Returns the staged directory and its dataset.
    """
    metadata = json.loads((template / RUN_METADATA).read_text())
    metadata["seed"] = int(metadata["seed"]) + ADDED_SEED_OFFSET
    stash.mkdir(parents=True, exist_ok=True)
    staged = stash / f"{template.name}_added"
    shutil.copytree(template, staged)
    (staged / RUN_METADATA).write_text(json.dumps(metadata, indent=2) + "\n")
    return staged, str(metadata["dataset"])


@contextmanager
def landed(staged: Path, into: Path) -> Iterator[Path]:
    """``staged`` moved into the run root ``into`` with one rename, and back afterwards."""
    added = into / staged.name
    staged.rename(added)
    try:
        yield added
    finally:
        added.rename(staged)


def build_and_refresh(module: str, runs: Path, scratch: Path, added: tuple[Path, str]) -> Timings:
    """Full build and one-run refresh of ``module``'s asset job on a fresh instance and output.

    The environment (run roots, output folder) is set in ``os.environ``, where
    the steps read it: in this process, and in the Dask workers, which the
    caller starts after this environment is in place.
    """
    name = module.rsplit(".", 1)[-1]
    home, output = scratch / f"{name}_home", scratch / f"{name}_output"
    home.mkdir()
    (home / "dagster.yaml").write_text(NEW_INSTANCE_YAML)
    added_root = scratch / "added_runs"
    job = asset_job(module)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        started = time.perf_counter()
        full_build(job, instance, frames_dir=output / "frames")
        full = time.perf_counter() - started
        print(f"{name}: full build {full:.1f} s", file=sys.stderr, flush=True)
        staged, dataset = added
        with landed(staged, added_root):
            started = time.perf_counter()
            one_dataset_refresh(job, instance, dataset_key(dataset))
            refresh = time.perf_counter() - started
            print(f"{name}: one run added {refresh:.1f} s", file=sys.stderr, flush=True)
    return Timings(full, refresh, output)


def set_environment(runs: Path, scratch: Path, module: str) -> None:
    """What every step reads: the run roots (the corpus and the added-runs root) and output."""
    added_root = scratch / "added_runs"
    added_root.mkdir(exist_ok=True)
    os.environ[RUNS_ENV] = os.pathsep.join([str(runs), str(added_root)])
    os.environ[OUTPUT_ENV] = (scratch / f"{module.rsplit('.', 1)[-1]}_output").as_uri()
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    )


def distributed_build(runs: Path, scratch: Path, workers: int, added: tuple[Path, str]) -> Timings:
    """:func:`build_and_refresh` of the Dask code location on a cluster started for it."""
    from distributed import LocalCluster

    set_environment(runs, scratch, DISTRIBUTED)
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port = probe.getsockname()[1]
    # Before the workers start: they resolve the run's executor config, address included.
    os.environ[DASK_SCHEDULER_ENV] = f"tcp://{LOOPBACK}:{port}"
    with LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host=LOOPBACK,
        scheduler_port=port,
        # Every HTTP server (health, metrics) on loopback as well.
        dashboard_address=f"{LOOPBACK}:0",
        worker_dashboard_address=f"{LOOPBACK}:0",
        preload=[DISTRIBUTED],
    ):
        return build_and_refresh(DISTRIBUTED, runs, scratch, added)


def differing_files(left: Path, right: Path) -> list[str]:
    """Relative paths that exist in only one folder or hold different bytes."""
    a, b = tree_bytes(left), tree_bytes(right)
    return sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))


def count_runs(runs: Path) -> int:
    return sum(1 for _ in runs.rglob(RUN_METADATA))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=BUNDLED_CORPUS, help="the corpus folder")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--scratch", type=Path, help="folder for instances and outputs (kept)")
    args = parser.parse_args()
    runs = args.runs.resolve()
    scratch_root = args.scratch or Path(tempfile.mkdtemp(prefix="bench_distributed_"))
    scratch_root.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    try:
        added = stage_added_run(template_run(runs), scratch_root / "added_stash")
        set_environment(runs, scratch_root, IN_PROCESS)
        baseline = build_and_refresh(IN_PROCESS, runs, scratch_root, added)
        measured = distributed_build(runs, scratch_root, args.workers, added)
        differing = differing_files(baseline.output, measured.output)
    finally:
        if args.scratch is None:
            shutil.rmtree(scratch_root, ignore_errors=True)
    print(
        f"{count_runs(runs):,} runs under {runs}; {args.workers} Dask workers; "
        f"load average before {load[0]:.1f}, after {os.getloadavg()[0]:.1f}"
    )
    for label, base, dask in (
        ("full build", baseline.full, measured.full),
        ("one run added", baseline.refresh, measured.refresh),
    ):
        print(
            f"  {label:<14}: in-process {base:7.1f} s, Dask {dask:7.1f} s, "
            f"ratio {dask / base:5.2f}x (target <= {TARGET_RATIO}x)"
        )
    print(f"  outputs identical: {'yes' if not differing else 'NO: ' + ', '.join(differing)}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
