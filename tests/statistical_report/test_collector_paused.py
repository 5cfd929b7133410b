"""The report pauses the cyclic garbage collector only where it creates no reference cycles."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepecgkit.statistical_report import report
from tests.statistical_report.test_reuse import _build, write_run


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collectors_state_is_restored(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with report._collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), report._collector_paused():
            raise RuntimeError("a failing block")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


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

    paused = report._collector_paused
    monkeypatch.setattr(report, "_collector_paused", counting)
    out = tmp_path / "out"
    _build(root, out)
    write_run(root, "resnet", 1)
    write_run(root, "cnn", 1)
    _build(root, out)
    assert found == [0] * 6
