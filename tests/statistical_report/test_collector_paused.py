"""The report pauses the cyclic garbage collector only where it creates no reference cycles.

The pause itself (nesting, threads, a failing block) is tested with
:func:`deepecgkit.memory.collector_paused` in ``tests/test_memory.py``.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepecgkit.statistical_report import report
from tests.statistical_report.test_reuse import _build, write_run


def test_the_paused_blocks_leave_no_cyclic_garbage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each paused block, in a build and in a refresh after a new run, frees all it drops."""
    root = tmp_path / "runs"
    write_run(root, "resnet", 0)
    write_run(root, "cnn", 0)
    bare = write_run(root, "cnn", 1)
    (bare / "predictions.csv").unlink()
    found: list[int] = []

    @contextlib.contextmanager
    def counting() -> Iterator[None]:
        gc.collect()
        with paused():
            yield
        found.append(gc.collect())

    paused = report.collector_paused
    monkeypatch.setattr(report, "collector_paused", counting)
    out = tmp_path / "out"
    _build(root, out)
    write_run(root, "resnet", 1)
    write_run(root, "cnn", 1)
    _build(root, out)
    assert found == [0] * 6
