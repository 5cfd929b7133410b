"""Benchmark the README's first command's build against the code it replaced.

``python -m deepecg_assets.build`` (what ``scripts/run-demo`` runs after
setting up the environment) materialises the whole asset graph on the
bundled corpus. This script times it twice in one run, each in a fresh
interpreter with fresh ``DEEPECG_OUTPUT`` and ``DAGSTER_HOME`` folders:

* the **baseline**: the tree of ``--baseline`` (a git commit, by default the
  one before the cheaper reliability figures, shared probe data modules and
  single-threaded embedding), exported with ``git archive``;
* the **current** working tree.

Both read the same run folders (``DEEPECG_RUNS`` set to this tree's bundled
corpus), so their outputs can be compared byte for byte: every frame, table
and report file must be identical; the figures (PNG, PDF) may differ in
rendering, the current build writes PDFs only on request, and
``report/manifest.json`` records the figures' hashes and the plotting
source's, so it is compared with those fields and the PDF entries removed.

Printed: wall and CPU seconds of each build (CPU of the child process, all
threads), their ratios, the per-step times the build prints for steps of
five seconds or more, and the comparison of the outputs.

Usage::

    python benchmarks/bench_demo_build.py [--baseline COMMIT] [--no-baseline]
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CORPUS = REPO / "deepecg_assets" / "example_corpus"
#: The last commit before the build was made cheaper (issue 14's Must hold).
BASELINE_COMMIT = "cdb67211e8e8561d89980bfe9809a397b947ad32"
#: Files whose bytes may change with rendering (figures) and are not compared.
FIGURE_SUFFIXES = (".png", ".pdf")
MANIFEST = Path("report") / "manifest.json"
#: The report's reuse cache: compared less its figure entries and the plotting source's hash.
REPORT_CACHE = Path("report") / "report_cache.json.gz"
#: The build's line for a step of five seconds or more: ``  <step>: done in <s> s``.
STEP_LINE = re.compile(r"^\s+(?P<step>\S+): done in (?P<seconds>[0-9.]+) s$")


@dataclass
class Build:
    """One timed build: wall and CPU seconds, per-step seconds, its output folder."""

    label: str
    wall_s: float
    cpu_s: float
    output: Path
    steps: dict[str, float] = field(default_factory=dict)


def _export(commit: str, into: Path) -> Path:
    """The tree of ``commit`` under ``into`` (``git archive``), with this tree's venv."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _build(label: str, tree: Path, scratch: Path) -> Build:
    """Run the build of ``tree`` on the bundled corpus in a fresh interpreter."""
    output, home = scratch / "output", scratch / "dagster_home"
    env = os.environ | {
        "PYTHONPATH": str(tree),
        "DEEPECG_RUNS": str(CORPUS),
        "DEEPECG_OUTPUT": str(output),
        "DAGSTER_HOME": str(home),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [PYTHON, "-m", "deepecg_assets.build"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{label} build failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    steps = {
        match["step"]: float(match["seconds"])
        for match in map(STEP_LINE.match, done.stdout.splitlines())
        if match
    }
    return Build(label, wall, cpu, output, steps)


def _manifest_without_figures(path: Path) -> dict:
    """The manifest less what records figures: their hashes, the PDFs, the PDF setting.

    The current build writes PDFs only on request (``pdf``, a setting the
    baseline did not have), so the baseline's manifest lists a PDF per run
    and the current one none; everything else must be equal.
    """
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.pop("plotting_source_sha256", None)
    manifest.get("settings", {}).pop("pdf", None)
    manifest["figures"] = [
        {k: v for k, v in entry.items() if k != "sha256"}
        for entry in manifest.get("figures", [])
        if entry.get("format") != "pdf"
    ]
    return manifest


def _report_cache_without_figures(path: Path) -> dict:
    """The report's reuse cache less what records figures: their entries, the plotting source.

    A change to the reliability figures changes the figures' hashes and the
    plotting source's hash it records; the runs, pairs and contents it holds
    must be equal.
    """
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        cache = json.load(stream)
    cache.pop("figures", None)
    cache.get("environment", {}).pop("source_sha256", None)
    return cache


def compare_outputs(baseline: Path, current: Path) -> tuple[int, list[str], int]:
    """Files compared byte for byte, the differing or missing ones, figures skipped."""
    compared, different, figures = 0, [], 0
    names = {p.relative_to(baseline) for p in baseline.rglob("*") if p.is_file()}
    names |= {p.relative_to(current) for p in current.rglob("*") if p.is_file()}
    for name in sorted(names):
        if name.suffix in FIGURE_SUFFIXES:
            figures += 1
            # PDFs are opt-in now; every PNG must still be drawn by both.
            if name.suffix == ".png" and not (
                (baseline / name).is_file() and (current / name).is_file()
            ):
                different.append(f"{name} (figure present in only one build)")
            continue
        compared += 1
        old, new = baseline / name, current / name
        if not (old.is_file() and new.is_file()):
            different.append(f"{name} (present in only one build)")
        elif name == MANIFEST:
            if _manifest_without_figures(old) != _manifest_without_figures(new):
                different.append(f"{name} (beyond figure hashes)")
        elif name == REPORT_CACHE:
            if _report_cache_without_figures(old) != _report_cache_without_figures(new):
                different.append(f"{name} (beyond figure entries)")
        elif not filecmp.cmp(old, new, shallow=False):
            different.append(str(name))
    return compared, different, figures


def _report(builds: list[Build]) -> None:
    print(f"{'build':<10} {'wall s':>8} {'CPU s':>8}")
    for build in builds:
        print(f"{build.label:<10} {build.wall_s:8.1f} {build.cpu_s:8.1f}")
    if len(builds) == 2:
        old, new = builds
        print(
            f"ratio baseline/current: wall {old.wall_s / new.wall_s:.2f}x, "
            f"CPU {old.cpu_s / new.cpu_s:.2f}x"
        )
    steps = sorted({step for build in builds for step in build.steps})
    if steps:
        print("steps of 5 s or more (wall s; '-' = under 5 s):")
        for step in steps:
            cells = [f"{b.steps[step]:8.1f}" if step in b.steps else f"{'-':>8}" for b in builds]
            print(f"  {step:<24}" + " ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE_COMMIT, help="git commit of the baseline")
    parser.add_argument("--no-baseline", action="store_true", help="time the current tree only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_demo_build_") as tmp:
        scratch = Path(tmp)
        builds = []
        if not args.no_baseline:
            tree = _export(args.baseline, Path(tempfile.mkdtemp(dir=scratch)))
            builds.append(_build("baseline", tree, Path(tempfile.mkdtemp(dir=scratch))))
        builds.append(_build("current", REPO, Path(tempfile.mkdtemp(dir=scratch))))
        _report(builds)
        if len(builds) == 2:
            compared, different, figures = compare_outputs(builds[0].output, builds[1].output)
            print(
                f"outputs: {compared} files compared byte for byte, {len(different)} differ; "
                f"{figures} figure files not compared"
            )
            for name in different:
                print(f"  DIFFERS: {name}")
            if different:
                sys.exit(1)


if __name__ == "__main__":
    main()
