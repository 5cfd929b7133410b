"""kill -9 during a materialisation, and two at once on one output folder, change nothing.

Every output is written under a temporary name and renamed into place, so a
build killed at any point leaves either the old file or the new one, and the
next build gives exactly what a clean build gives. Two builds writing the
same folder at once each rename whole files, so the folder ends up as one
of them wrote it, which is what a clean build writes. These tests run the
README's build command (``python -m deepecg_assets.build``: a discovery run,
then one run over every dataset partition) in child processes and compare the
output folders byte for byte with a clean build: the same two runs, made once
in this process on an in-memory instance (:mod:`tests.deepecg_assets.clean_builds`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deepecgkit.rundir.synthetic import example_spec, generate_corpus
from tests.deepecg_assets.clean_builds import build_from_scratch
from tests.deepecg_assets.output_trees import tree_bytes

pytestmark = pytest.mark.slow

#: Output folders whose files are the build's results (the discovery cache is not one).
RESULT_FOLDERS = ("frames", "tables")
#: Seconds a build may take on a loaded two-core machine before the test gives up.
BUILD_TIMEOUT = 600


def _start(runs: Path, output: Path, home: Path) -> subprocess.Popen:
    home.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "DEEPECG_RUNS": str(runs),
        "DEEPECG_OUTPUT": str(output),
        "DEEPECG_RECURSIVE": "1",
        "DAGSTER_HOME": str(home),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "deepecg_assets.build"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # so kill -9 reaches the whole process group
    )


def _finish(process: subprocess.Popen) -> None:
    _, stderr = process.communicate(timeout=BUILD_TIMEOUT)
    assert process.returncode == 0, stderr.decode(errors="replace")[-3000:]


def _kill_when(process: subprocess.Popen, marker: Path) -> bool:
    """kill -9 the build as soon as ``marker`` exists; False if it finished first."""
    deadline = time.monotonic() + BUILD_TIMEOUT
    while not marker.exists():
        if process.poll() is not None:
            return False
        assert time.monotonic() < deadline, "the build neither wrote its marker nor finished"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    return True


def _is_temporary(path: Path) -> bool:
    """A write that kill -9 interrupted: ``.<name>.<token>.tmp``, never read by anything."""
    return path.name.startswith(".") and path.name.endswith(".tmp")


def _results(output: Path) -> dict[str, bytes]:
    return {
        f"{folder}/{name}": data
        for folder in RESULT_FOLDERS
        for name, data in tree_bytes(output / folder).items()
        if not _is_temporary(Path(name))
    }


@pytest.fixture(scope="module")
def corpus_and_clean_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("crash")
    runs = root / "runs"
    generate_corpus(runs, example_spec())
    results = _results(build_from_scratch(runs, root / "clean"))
    assert any(name.startswith("tables/") for name in results)
    return runs, results


def test_kill_9_at_three_points_then_a_rerun_gives_the_clean_build(
    corpus_and_clean_build: tuple[Path, dict], tmp_path: Path
) -> None:
    runs, clean = corpus_and_clean_build
    output = tmp_path / "output"
    # Kill 1: as soon as the discovery run stores its frame; 2: as soon as the
    # partitioned run stores a dataset's frames; 3: as soon as a table lands.
    for number, marker in enumerate(
        (
            output / "frames" / "discovered_runs.parquet",
            output / "frames" / "paired_differences",
            output / "tables" / "flip_survival.tex",
        )
    ):
        process = _start(runs, output, tmp_path / f"home-{number}")
        killed = _kill_when(process, marker)
        if not killed:  # the build outran the poll: it must have finished cleanly
            _finish(process)
    _finish(_start(runs, output, tmp_path / "home-rerun"))
    assert _results(output) == clean


def test_two_concurrent_builds_on_one_output_folder_agree_with_a_clean_build(
    corpus_and_clean_build: tuple[Path, dict], tmp_path: Path
) -> None:
    runs, clean = corpus_and_clean_build
    output = tmp_path / "output"
    first = _start(runs, output, tmp_path / "home-a")
    second = _start(runs, output, tmp_path / "home-b")
    _finish(first)
    _finish(second)
    assert _results(output) == clean
    shutil.rmtree(tmp_path / "home-a")
