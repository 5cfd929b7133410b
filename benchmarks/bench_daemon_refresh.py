"""Repeat the daemon's one-run refresh on built instances, two checkouts alternating.

``bench_platform.py`` measures the refresh once, after a full build. On this
project's shared machine one refresh of 100,000 runs moves by 20-30% from
one minute to the next, so a single figure cannot tell a 0.5 s change from
noise. Here each checkout gets its own instance and output folder, built
once by that checkout (``python -m deepecg_assets.build``, as a user's), and
then, round after round and checkout after checkout, ``dagster-daemon``
runs the sensors while one run is written into a dataset; the work of the
runs the daemon launched (start to end, summed: the issue's figure), the
longest steps and the latencies (the request after the write, the run
worker's launch, the flip table current) are recorded. Printed: each
checkout's median and best of each, and this tree against the other.

Usage (the scratch folder is kept, so a second call skips the builds)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_daemon_refresh.py \\
        --runs /work/bench/c100k/runs --scratch DIR --compare OTHER_CHECKOUT --rounds 3

The child that drives one refresh is this file run with the checkout's code
on ``PYTHONPATH`` (it needs only Dagster and ``deepecgkit.rundir.write``),
so the other checkout need not hold this script.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: Seconds between sensor ticks (as in ``bench_platform.py``).
SENSOR_INTERVAL = 5
#: Longest wait for one refresh.
REFRESH_TIMEOUT = 300
#: The steps reported one by one (the rest are summed by the work).
LONG_STEPS = (
    "discovered_runs",
    "statistical_report",
    "flip_table",
    "flip_grid",
    "dataset_analysis",
)
#: The step whose end makes the tables current (the issue's latency figure, as in
#: ``bench_platform.py``): ``current`` is its end, in seconds after the run was written.
CURRENT_STEP = "flip_table"
#: Rows of the summary besides the long steps: ``launch`` is the seconds from the first
#: run's request to its start (the run worker's launch and code load).
LATENCIES = ("requested", "launch", "current")
#: Dataset the added runs go into (every scale corpus has it).
DATASET = "data00"


def _environment(checkout: Path, scratch: Path, runs: Path) -> dict[str, str]:
    """The environment of a user's deployment of ``checkout`` on ``scratch``'s instance."""
    env = {
        **os.environ,
        "DAGSTER_HOME": str(scratch / "home"),
        "DEEPECG_OUTPUT": str(scratch / "out"),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(checkout / ".pycache")
    env["DEEPECG_RUNS"] = os.pathsep.join([str(runs), str(scratch / "extra_root")])
    env["DEEPECG_SENSOR_INTERVAL"] = str(SENSOR_INTERVAL)
    env["PYTHONPATH"] = str(checkout)
    return env


def _build(checkout: Path, scratch: Path, runs: Path) -> None:
    """Build ``scratch``'s instance with ``checkout`` unless an earlier call did."""
    if (scratch / "built").exists():
        return
    (scratch / "extra_root").mkdir(parents=True, exist_ok=True)
    print(f"building {scratch} with {checkout}", flush=True)
    subprocess.run(
        [sys.executable, "-m", "deepecg_assets.build"],
        cwd=checkout,
        env=_environment(checkout, scratch, runs),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (scratch / "built").write_text("built\n")


def one_refresh(scratch: Path, seed: int) -> dict[str, float]:
    """(Child) Start the daemon, add one run, wait for its refresh; the work and long steps."""
    import dagster as dg

    from deepecgkit.rundir.write import write_run_directory

    daemon = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "dagster-daemon"),
            "run",
            "-m",
            "deepecg_assets.definitions",
        ],
        env=os.environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        with dg.DagsterInstance.get() as instance:
            time.sleep(3 * SENSOR_INTERVAL)  # the first ticks; a refresh left over finishes
            while any(not r.dagster_run.is_finished for r in instance.get_run_records()):
                time.sleep(1)
            before = {r.dagster_run.run_id for r in instance.get_run_records()}
            added = time.time()
            write_run_directory(
                scratch / "extra_root" / f"added_{seed}",
                model="zz_added",
                dataset=DATASET,
                metrics={"f1": 0.5, "auroc": 0.6},
                seed=seed,
            )
            deadline = time.monotonic() + REFRESH_TIMEOUT
            while time.monotonic() < deadline:
                time.sleep(1)
                new = [r for r in instance.get_run_records() if r.dagster_run.run_id not in before]
                if new and all(r.dagster_run.is_finished for r in new):
                    break
            else:
                raise RuntimeError("the daemon did not finish the refresh in time")
            if not all(r.dagster_run.is_success for r in new):
                raise RuntimeError("a launched run failed")
            first = min(new, key=lambda r: r.create_timestamp)
            result = {
                "work": sum((r.end_time or 0) - (r.start_time or 0) for r in new),
                "runs": len(new),
                "requested": first.create_timestamp.timestamp() - added,
                "launch": (first.start_time or 0) - first.create_timestamp.timestamp(),
            }
            for record in new:
                for stats in instance.get_run_step_stats(record.dagster_run.run_id):
                    if not (stats.end_time and stats.start_time):
                        continue
                    if stats.step_key in LONG_STEPS:
                        result[stats.step_key] = stats.end_time - stats.start_time
                    if stats.step_key == CURRENT_STEP:
                        result["current"] = stats.end_time - added
            return result
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("/work/bench/c100k/runs"))
    parser.add_argument("--scratch", type=Path, required=True, help="instances and outputs (kept)")
    parser.add_argument("--compare", type=Path, help="a second checkout measured alternately")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="untimed rounds first (a kept instance built by older code recomputes its "
        "report memos on the first refresh, since they are bound to the source)",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # one refresh, this seed
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(one_refresh(args.scratch, args.child)))
        return 0
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    checkouts = {"this tree": Path(__file__).resolve().parent.parent}
    if args.compare:
        checkouts["other"] = args.compare.resolve()
    scratches = {name: args.scratch / name.replace(" ", "_") for name in checkouts}
    for name, checkout in checkouts.items():
        _build(checkout, scratches[name], args.runs)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    seed = int(time.time())
    for number in range(-args.warmup, args.rounds):
        for name, checkout in checkouts.items():
            seed += 1
            child = ["--scratch", str(scratches[name]), "--runs", str(args.runs)]
            done = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), *child, "--child", str(seed)],
                cwd=checkout,
                env=_environment(checkout, scratches[name], args.runs),
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                print(done.stdout[-2000:] + done.stderr[-4000:], file=sys.stderr)
                return 1
            result = json.loads(done.stdout.strip().splitlines()[-1])
            if number >= 0:
                results[name].append(result)
            steps = ", ".join(f"{k} {result[k]:.2f}" for k in LONG_STEPS if k in result)
            label = f"round {number + 1}" if number >= 0 else "warm-up"
            print(
                f"{label} {name}: work {result['work']:.2f} s in {result['runs']} run(s)"
                f" (requested {result['requested']:.1f} s after the write, started"
                f" {result['launch']:.1f} s later, flip table current at"
                f" {result.get('current', 0.0):.1f} s); {steps}",
                flush=True,
            )
    print(f"\n{args.rounds} round(s) on {args.runs}; medians (best)")
    names = list(checkouts)
    print("| figure | " + " | ".join(names) + (" | this / other |" if args.compare else " |"))
    print("| --- " * (len(names) + 1 + bool(args.compare)) + "|")
    for row in ("work", *LONG_STEPS, *LATENCIES):
        medians = {n: statistics.median(r.get(row, 0.0) for r in results[n]) for n in names}
        best = {n: min(r.get(row, 0.0) for r in results[n]) for n in names}
        cells = [f"{medians[n]:.2f} s ({best[n]:.2f})" for n in names]
        ratio = f" | {medians['this tree'] / medians['other']:.2f}x" if args.compare else ""
        print(f"| {row} | " + " | ".join(cells) + ratio + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
