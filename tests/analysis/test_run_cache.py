"""RunCache memoises run reading by file state; scan_tree_state digests a tree of runs."""

from __future__ import annotations

import logging
import math
import os
import shutil
from pathlib import Path

import pytest

from deepecgkit.rundir.cache import RunCache, metrics_file_state, scan_tree_state
from deepecgkit.rundir.format import METRICS_FILENAME
from deepecgkit.rundir.read import discover_runs, read_run_metrics
from deepecgkit.rundir.records import UnreadableRun
from deepecgkit.rundir.write import write_run_directory


def make(root: Path, name: str, seed: int, f1: float = 0.5) -> Path:
    metrics = {"f1": f1, "accuracy": math.nan, "nll": math.inf}
    return write_run_directory(root / name, model="cnn", dataset="afib", metrics=metrics, seed=seed)


def test_cache_reads_once_and_survives_a_save(tmp_path: Path) -> None:
    runs = [make(tmp_path / "runs", f"cnn_afib_seed{i}", i) for i in range(3)]
    broken = tmp_path / "runs" / "broken_seed9"
    broken.mkdir()
    (broken / METRICS_FILENAME).write_text("model,dataset\n")
    cache = RunCache()
    first, diagnostics = discover_runs(tmp_path / "runs", reader=cache.read)
    assert (cache.misses, cache.hits) == (4, 0)
    unreadable = [f"{broken} (classification_metrics.csv has no data row)"]
    assert diagnostics["unreadable"] == unreadable

    cache.save(tmp_path / "cache.jsonl")
    reloaded = RunCache.load(tmp_path / "cache.jsonl")
    second, diagnostics = discover_runs(tmp_path / "runs", reader=reloaded.read)
    assert (reloaded.misses, reloaded.hits) == (0, 4), "nothing is parsed again"
    assert diagnostics["unreadable"] == unreadable, "the reason is cached too"
    for cached, fresh in zip(second, first, strict=True):
        assert cached._replace(metrics={}) == fresh._replace(metrics={})
        assert math.isnan(cached.metrics["accuracy"]) and cached.metrics["nll"] == math.inf
    assert [r.run_dir for r in second] == runs


def test_changed_metrics_file_is_parsed_again(tmp_path: Path) -> None:
    run = make(tmp_path, "cnn_afib_seed0", 0, f1=0.5)
    cache = RunCache()
    assert cache.read(run).metrics["f1"] == 0.5
    make(tmp_path, "cnn_afib_seed0", 0, f1=0.75)
    os.utime(run / METRICS_FILENAME, ns=(1, 1))
    assert cache.read(run).metrics["f1"] == 0.75
    assert cache.misses == 2
    (run / METRICS_FILENAME).unlink()
    gone = cache.read(run)
    assert isinstance(gone, UnreadableRun) and len(cache) == 0
    assert gone.reason == "classification_metrics.csv: vanished"


def test_corrupt_or_foreign_cache_files_give_an_empty_cache(tmp_path: Path) -> None:
    assert len(RunCache.load(tmp_path / "missing.jsonl")) == 0
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"format": 999}\n"x"\t1\t2\t\n')
    assert len(RunCache.load(foreign)) == 0
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text('{"format": 3}\nnot a line\n')
    assert len(RunCache.load(corrupt)) == 0


def test_paths_with_tabs_and_newlines_round_trip(tmp_path: Path) -> None:
    run = make(tmp_path, "odd\tname\nseed0", 0)
    cache = RunCache()
    assert cache.read(run) is not None
    cache.save(tmp_path / "cache.jsonl")
    reloaded = RunCache.load(tmp_path / "cache.jsonl")
    cached, fresh = reloaded.read(run), read_run_metrics(run)
    assert cached._replace(metrics={}) == fresh._replace(metrics={}) and reloaded.hits == 1
    assert list(cached.metrics) == list(fresh.metrics)


def test_tree_state_digest_tracks_readable_runs(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make(root, "cnn_afib_seed0", 0)
    cache = RunCache()
    empty = scan_tree_state(tmp_path / "nothing", cache=cache)
    assert empty.entries == () and len(empty.digest) == 16
    before = scan_tree_state(root, cache=cache)
    assert [e.path for e in before.entries] == [str(root / "cnn_afib_seed0")]
    assert scan_tree_state(root, cache=cache).digest == before.digest

    half = root / "cnn_afib_seed1"
    half.mkdir()
    (half / METRICS_FILENAME).write_text("model,dataset,f1\n")
    waiting = scan_tree_state(root, cache=cache)
    assert waiting.digest == before.digest and waiting.pending == (str(half),)
    make(root, "cnn_afib_seed1", 1)
    after = scan_tree_state(root, cache=cache)
    assert after.digest != before.digest and after.pending == ()
    state = metrics_file_state(half)
    assert state is not None and state in after.entries


# --- a damaged cache is never a source of truth -------------------------------------------------


def _saved_cache(tmp_path: Path, n: int = 3) -> tuple[Path, Path, bytes]:
    runs = tmp_path / "runs"
    for seed in range(n):
        make(runs, f"cnn_afib_seed{seed}", seed)
    cache = RunCache()
    discover_runs(runs, reader=cache.read)
    path = tmp_path / "cache" / "run_records.cache"
    cache.save(path)
    return runs, path, path.read_bytes()


@pytest.mark.parametrize("damage", ["truncated", "flipped_byte", "header", "empty"])
def test_a_damaged_discovery_cache_is_ignored_and_every_run_parsed_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    runs, path, data = _saved_cache(tmp_path)
    fresh, _ = discover_runs(runs)
    header_end = data.index(b"\n") + 1
    if damage == "truncated":
        data = data[:-40]  # cut short, as a crash mid-write of another tool would
    elif damage == "flipped_byte":
        middle = header_end + (len(data) - header_end) // 2
        data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
    elif damage == "header":
        data = b"{format: 3\n" + data[header_end:]
    else:
        data = b""
    path.write_bytes(data)

    with caplog.at_level(logging.WARNING, logger="deepecgkit.rundir.cache"):
        cache = RunCache.load(path)
        records, diagnostics = discover_runs(runs, reader=cache.read)
    assert [r._replace(metrics={}) for r in records] == [r._replace(metrics={}) for r in fresh]
    assert not diagnostics["unreadable"], "the runs are read, not lost"
    assert cache.misses == 3 and cache.hits == 0, "nothing of a damaged file is trusted"
    if damage != "empty":
        assert str(path) in caplog.text, "the log names the cache"
    cache.prune_unvisited()
    cache.save()
    again = RunCache.load(path)
    assert again.damaged == 0 and len(again) == 3, "the rewritten cache is whole again"


def test_cache_is_pruned_of_runs_that_no_longer_exist(tmp_path: Path) -> None:
    runs, path, _ = _saved_cache(tmp_path)
    shutil.rmtree(runs / "cnn_afib_seed1")
    cache = RunCache.load(path)
    discover_runs(runs, reader=cache.read)
    assert cache.prune_unvisited() == 1
    cache.save()
    pruned = RunCache.load(path)
    assert len(pruned) == 2
    records, _ = discover_runs(runs, reader=pruned.read)
    assert [record.run_dir.name for record in records] == ["cnn_afib_seed0", "cnn_afib_seed2"]
    assert (pruned.hits, pruned.misses) == (2, 0), "both runs left come from the cache"
