"""From-scratch builds that a test compares another build with, byte for byte (its oracle).

An oracle build is the build command's two runs
(:func:`deepecg_assets.build.materialize_everything`) in the test's process,
into a new output folder. Its instance is thrown away afterwards, so by
default it is Dagster's in-memory one (``DagsterInstance.ephemeral``): the
frames and tables do not depend on where the run history is kept, and on
this 2-core machine an SQLite instance (a schema to create, a commit and an
fsync per event) made a small build take twice the CPU and about twice the
wall time (9.3 s against 4.2 s for 12 bundled runs, ``docs/benchmarks.md``,
"Session 19"). A test whose claim names the SQLite instance (issue 13: the
PostgreSQL instance's outputs equal the SQLite instance's) passes ``home``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from deepecg_assets.build import BuildResult, failure_lines, materialize_everything


def build_from_scratch(runs: Path, output: Path, *, home: Path | None = None) -> Path:
    """Every asset of the runs under ``runs`` built into the new folder ``output``; ``output``.

    ``home``: build on a new SQLite instance in that (new) folder instead of an
    in-memory one. The platform's ``DEEPECG_*`` variables are set only while
    the build runs. Fails the test, naming the failed steps, if a step fails.
    """
    clean_build(runs, output, home=home)
    return output


def clean_build(
    runs: Path, output: Path, *, home: Path | None = None, **options: Any
) -> BuildResult:
    """:func:`build_from_scratch`'s build, with ``materialize_everything``'s ``options``;
    its result."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPECG_RUNS", str(runs))
        patch.setenv("DEEPECG_OUTPUT", str(output))
        patch.setenv("DEEPECG_RECURSIVE", "1")
        if home is None:
            opened = dg.DagsterInstance.ephemeral()
        else:
            home.mkdir(parents=True)
            opened = dg.instance_for_test(temp_dir=str(home))
        with opened as instance:
            result = materialize_everything(
                instance, verbose=False, stream=io.StringIO(), **options
            )
    assert result.success, "the clean build failed: " + "; ".join(failure_lines(result)[0])
    return result
