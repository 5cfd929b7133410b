"""Discovery's low-level reading: one open per file, FIFOs never block, links resolved once.

``discover_runs`` opens each file once and checks its type on the open
descriptor, and resolves only symlinked run directories with ``realpath``
(see the ``analysis`` section of ``docs/benchmarks.md``). These tests pin the
behaviour those shortcuts must keep: a FIFO where a file should be is
rejected without hanging, and a directory reached through overlapping roots
or a symbolic link is read once.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from deepecgkit.rundir.format import METADATA_FILENAME, METRICS_FILENAME
from deepecgkit.rundir.read import discover_runs, read_run_metrics
from deepecgkit.rundir.write import write_run_directory

#: Seconds a read may take before it counts as blocked on a FIFO.
BLOCK_TIMEOUT = 10.0

requires_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")


def read_without_blocking(run_dir: Path) -> object:
    """``read_run_metrics`` in a daemon thread; fails instead of hanging the suite."""
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(read_run_metrics(run_dir)), daemon=True)
    worker.start()
    worker.join(BLOCK_TIMEOUT)
    assert not worker.is_alive(), "reading a FIFO blocked"
    return result[0]


@requires_fifo
def test_fifo_metrics_file_is_unusable_without_blocking(tmp_path: Path) -> None:
    run = tmp_path / "fifo_seed0"
    run.mkdir()
    os.mkfifo(run / METRICS_FILENAME)
    assert read_without_blocking(run) is None
    records, diagnostics = discover_runs([tmp_path])
    assert records == [], "a FIFO is never a run"
    assert diagnostics["unreadable"] == [
        f"{run} (classification_metrics.csv: not a regular file (FIFO))"
    ], "and never vanishes without a word"


@requires_fifo
def test_fifo_metadata_counts_as_missing(tmp_path: Path) -> None:
    run = write_run_directory(tmp_path / "m_d_seed4", model="m", dataset="d", metrics={"f1": 0.5})
    (run / METADATA_FILENAME).unlink()
    os.mkfifo(run / METADATA_FILENAME)
    record = read_without_blocking(run)
    assert record is not None
    assert record.seed == 4 and record.returncode is None


def test_read_run_metrics_accepts_str_and_path(tmp_path: Path) -> None:
    run = write_run_directory(tmp_path / "m_d_seed1", model="m", dataset="d", metrics={"f1": 0.5})
    from_str, from_path = read_run_metrics(str(run)), read_run_metrics(run)
    assert from_str == from_path and isinstance(from_str.run_dir, Path)


def test_a_run_reached_through_overlapping_roots_is_read_once(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    write_run_directory(root / "m_d_seed0", model="m", dataset="d", metrics={"f1": 0.5}, seed=0)
    aliases = tmp_path / "aliases"
    aliases.mkdir()
    (aliases / "alias_seed0").symlink_to(root / "m_d_seed0", target_is_directory=True)
    linked_root = tmp_path / "linked_root"
    linked_root.symlink_to(root, target_is_directory=True)
    dotted = tmp_path / "aliases" / ".." / "runs"

    for roots, kept in [
        ([root, aliases], root / "m_d_seed0"),
        ([aliases, root], aliases / "alias_seed0"),
        ([root, root], root / "m_d_seed0"),
        ([linked_root, root], linked_root / "m_d_seed0"),
        ([dotted, linked_root, aliases], dotted / "m_d_seed0"),
    ]:
        records, diagnostics = discover_runs(roots)
        assert [r.run_dir for r in records] == [kept], roots
        assert diagnostics["duplicate"] == []


def test_symlinked_children_are_followed_one_level_only(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_run_directory(outside / "x_seed2", model="m", dataset="d", metrics={"f1": 0.5}, seed=2)
    root = tmp_path / "root"
    root.mkdir()
    (root / "link_seed2").symlink_to(outside / "x_seed2", target_is_directory=True)
    (root / "dangling_seed3").symlink_to(tmp_path / "nowhere", target_is_directory=True)
    records, diagnostics = discover_runs([root])
    assert [r.run_dir for r in records] == [root / "link_seed2"]
    assert all(not entries for entries in diagnostics.values())
