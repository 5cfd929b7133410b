"""The build's resident memory, step by step, against a baseline checkout built in the same run.

The platform's memory target (peak <= 1 GB at 100,000 runs) is about one
process: ``python -m deepecg_assets.build`` runs every step in it, so its
peak is set by the step whose own peak, plus whatever earlier steps left
resident, is highest. ``bench_platform.py`` prints that peak; this script
says where it comes from. It runs the README's command in a fresh process on
a fresh instance, reads the process's resident size from ``/proc`` every
:data:`SAMPLE_SECONDS`, and lays the samples against each step's start and
end as the instance recorded them: per step, its duration, the resident size
when it started and its peak. With ``--baseline REPO`` the same build of
another checkout (say main before a change, a ``git worktree``) runs first,
and each step's peak is printed next to the baseline's, with their ratio.

Usage::

    python benchmarks/bench_build_memory.py --runs /work/bench/c100k/runs --scratch DIR \\
        [--baseline /path/to/other/checkout]

``DIR`` must be empty or absent; each build gets a folder in it. Linux only
(``/proc``). Processes write byte code under ``.pycache/`` of their checkout,
as ``bench_platform.py``'s do.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
#: Seconds between two samples of the build's resident size.
SAMPLE_SECONDS = 0.2
#: Bytes per page of ``/proc/PID/statm``.
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
GIB = 2**30


class Step(NamedTuple):
    """One step of the build: when it ran (seconds from the build's start) and its memory."""

    key: str
    start: float
    seconds: float
    resident_at_start: float
    peak: float


def _resident_gib(pid: int) -> float | None:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES / GIB
    except (OSError, IndexError, ValueError):
        return None


def _build(repo: Path, runs: Path, scratch: Path) -> tuple[float, list[tuple[float, float]]]:
    """Run ``repo``'s build on ``runs``; (start time, [(time, resident GiB)])."""
    home = scratch / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DEEPECG_OUTPUT": str(scratch / "out"),
        "DEEPECG_RUNS": str(runs),
        "PYTHONPATH": str(repo),
        "PYTHONPYCACHEPREFIX": str(repo / ".pycache"),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, "-m", "deepecg_assets.build"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    samples = []
    while process.poll() is None:
        resident = _resident_gib(process.pid)
        if resident is not None:
            samples.append((time.time(), resident))
        time.sleep(SAMPLE_SECONDS)
    if process.returncode != 0:
        raise RuntimeError(f"the build of {repo} failed:\n{process.stderr.read()[-3000:]}")
    return started, samples


def _steps(home: Path, started: float, samples: list[tuple[float, float]]) -> list[Step]:
    """The build's steps in the order they ran, each with its samples' figures."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        timed = [
            (stats.start_time, stats.end_time, stats.step_key)
            for record in instance.get_run_records()
            for stats in instance.get_run_step_stats(record.dagster_run.run_id)
            if stats.start_time is not None and stats.end_time is not None
        ]
    steps = []
    for begin, end, key in sorted(timed):
        before = [resident for at, resident in samples if at <= begin]
        inside = [resident for at, resident in samples if begin <= at <= end]
        at_start = before[-1] if before else 0.0
        steps.append(
            Step(key, begin - started, end - begin, at_start, max(inside, default=at_start))
        )
    return steps


def measure(repo: Path, runs: Path, scratch: Path) -> tuple[float, float, list[Step]]:
    """(wall seconds, peak GiB, steps) of one build of ``repo``."""
    started, samples = _build(repo, runs, scratch)
    wall = samples[-1][0] - started if samples else 0.0
    peak = max((resident for _, resident in samples), default=0.0)
    return wall, peak, _steps(scratch / "home", started, samples)


def _print(label: str, wall: float, peak: float, steps: list[Step], base: list[Step]) -> None:
    print(f"{label}: wall {wall:.1f} s, peak {peak:.2f} GiB")
    baseline = {}
    for step in base:  # the n-th occurrence of a key pairs with the baseline's n-th
        baseline.setdefault(step.key, []).append(step)
    seen: dict[str, int] = {}
    for step in steps:
        index = seen[step.key] = seen.get(step.key, -1) + 1
        line = (
            f"  {step.start:7.2f} +{step.seconds:6.2f} s  start {step.resident_at_start:.2f}"
            f"  peak {step.peak:.2f} GiB  {step.key}"
        )
        matches = baseline.get(step.key, [])
        if index < len(matches) and matches[index].peak > 0:
            other = matches[index].peak
            line += f"  (baseline {other:.2f} GiB, {step.peak / other:.2f}x)"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, required=True, help="an empty or absent folder")
    parser.add_argument("--baseline", type=Path, help="another checkout, built first")
    args = parser.parse_args()
    if args.scratch.exists() and any(args.scratch.iterdir()):
        parser.error(f"--scratch {args.scratch} is not empty")
    base: list[Step] = []
    if args.baseline is not None:
        wall, peak, base = measure(args.baseline.resolve(), args.runs, args.scratch / "baseline")
        _print(f"baseline {args.baseline}", wall, peak, base, [])
    wall, peak, steps = measure(REPO, args.runs, args.scratch / "this")
    _print(f"this checkout {REPO}", wall, peak, steps, base)


if __name__ == "__main__":
    main()
