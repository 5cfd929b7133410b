"""RunCache memoises run reading by file state; scan_tree_state digests a tree of runs."""

from __future__ import annotations

import math
import os
from pathlib import Path

from deepecgkit.analysis.aggregation import discover_runs, read_run_metrics
from deepecgkit.analysis.constants import METRICS_FILENAME
from deepecgkit.analysis.run_cache import RunCache, metrics_file_state, scan_tree_state
from deepecgkit.analysis.synthetic import write_run_directory


def make(root: Path, name: str, seed: int, f1: float = 0.5) -> Path:
    metrics = {"f1": f1, "accuracy": math.nan, "auroc": math.inf}
    return write_run_directory(root / name, model="cnn", dataset="afib", metrics=metrics, seed=seed)


def test_cache_reads_once_and_survives_a_save(tmp_path: Path) -> None:
    runs = [make(tmp_path / "runs", f"cnn_afib_seed{i}", i) for i in range(3)]
    broken = tmp_path / "runs" / "broken_seed9"
    broken.mkdir()
    (broken / METRICS_FILENAME).write_text("model,dataset\n")
    cache = RunCache()
    first, diagnostics = discover_runs(tmp_path / "runs", reader=cache.read)
    assert (cache.misses, cache.hits) == (4, 0)
    assert diagnostics["unreadable"] == [str(broken)]

    cache.save(tmp_path / "cache.jsonl")
    reloaded = RunCache.load(tmp_path / "cache.jsonl")
    second, diagnostics = discover_runs(tmp_path / "runs", reader=reloaded.read)
    assert (reloaded.misses, reloaded.hits) == (0, 4), "nothing is parsed again"
    assert diagnostics["unreadable"] == [str(broken)]
    for cached, fresh in zip(second, first, strict=True):
        assert cached._replace(metrics={}) == fresh._replace(metrics={})
        assert math.isnan(cached.metrics["accuracy"]) and cached.metrics["auroc"] == math.inf
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
    assert cache.read(run) is None and len(cache) == 0


def test_corrupt_or_foreign_cache_files_give_an_empty_cache(tmp_path: Path) -> None:
    assert len(RunCache.load(tmp_path / "missing.jsonl")) == 0
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"format": 999}\n"x"\t1\t2\t\n')
    assert len(RunCache.load(foreign)) == 0
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text('{"format": 2}\nnot a line\n')
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
