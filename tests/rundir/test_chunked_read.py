"""Runs parsed as tables in the readers give what parsing into records gives, and lose nothing."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deepecgkit.rundir import cache as cache_module, read as read_module
from deepecgkit.rundir.cache import RunCache, scan_tree_state
from deepecgkit.rundir.format import METADATA_FILENAME, METRICS_FILENAME
from deepecgkit.rundir.read import discover_run_frame, read_chunks
from deepecgkit.rundir.write import write_run_directory
from tests.rundir.test_parallel_read import WORKERS, hostile_corpus

#: The repository root, put on the path of a script run in a subprocess.
REPOSITORY = Path(__file__).resolve().parents[2]


class EncodedOnly:
    """A run cache seen only through ``read_encoded``: discovery's record path, not its columns."""

    def __init__(self, cache: RunCache) -> None:
        self.cache = cache

    def read_encoded(self, run_dirs: list[str], *, workers: int | None = None) -> list:
        return self.cache.read_encoded(run_dirs, workers=workers)


def discovered(root: Path, cache: object, **options: object) -> tuple[str, dict]:
    frame, diagnostics = discover_run_frame(root, cache=cache, workers=WORKERS, **options)  # type: ignore[arg-type]
    return frame.to_json(orient="split", double_precision=15), diagnostics


def counts(cache: RunCache) -> tuple[int, int, int, int]:
    return cache.misses, cache.hits, cache.damaged, len(cache)


def rewrite(run: Path, f1: float) -> None:
    """Replace a run's metrics file by one of another size (a changed run)."""
    text = f"model,dataset,f1\ncnn,afib,{f1}\n"
    (run / METRICS_FILENAME).write_text(text)


@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.usefixtures("small_batches")
def test_columns_from_reader_tables_equal_the_record_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """Cold, after a few runs read one by one (entries beside the table), and after changes."""
    monkeypatch.setattr(read_module, "_start_method", lambda: method)
    root = hostile_corpus(tmp_path / "runs")
    columns, records = RunCache(), RunCache()
    for cache in (columns, records):
        cache.read(root / "cnn_afib_seed2")  # an entry kept beside the table
    steps = [
        lambda: None,
        lambda: rewrite(root / "cnn_afib_seed1", 0.25),
        lambda: (rewrite(root / "cnn_afib_seed2", 0.125), rewrite(root / "legacy", 0.75)),
    ]
    for number, step in enumerate(steps):
        step()
        seen = []
        for options in ({}, {"include_legacy": True, "include_failed": True}):
            seen.append(discovered(root, columns, **options))
            assert seen[-1] == discovered(root, EncodedOnly(records), **options)
        assert counts(columns) == counts(records)
        assert columns.dataset_digests() == records.dataset_digests()
        saved = columns.save(tmp_path / f"columns{number}.cache").read_bytes()
        assert saved == records.save(tmp_path / f"records{number}.cache").read_bytes()
        reloaded = RunCache.load(tmp_path / f"columns{number}.cache")
        assert discovered(root, reloaded) == seen[0]


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers from the first run on, three runs per task: a tiny corpus spans many tasks."""
    monkeypatch.setattr(read_module, "PARALLEL_MIN_RUNS", 1)
    monkeypatch.setattr(read_module, "SPAWN_MIN_RUNS", 1)
    monkeypatch.setattr(read_module, "PARALLEL_CHUNK_RUNS", 3)


def unstorable_run(root: Path) -> Path:
    """A readable run whose fingerprint is a lone surrogate: no Arrow text can hold it."""
    run = write_run_directory(
        root / "odd_seed5", model="cnn", dataset="afib", metrics={"f1": 0.5}, seed=5
    )
    (run / METADATA_FILENAME).write_text('{"seed": 5, "params_fingerprint": "\\ud800"}')
    return run


def test_a_chunk_that_cannot_be_a_table_comes_back_as_its_results(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    plain = write_run_directory(
        root / "cnn_seed1", model="cnn", dataset="afib", metrics={"f1": 0.5}, seed=1
    )
    odd = unstorable_run(root)
    table = cache_module._read_rows([str(plain)])
    assert isinstance(table, pa.Table) and table.num_rows == 1
    results = cache_module._read_rows([str(plain), str(odd)])
    assert [type(result).__name__ for result in results] == ["RunRecord", "RunRecord"]
    assert results[1].fingerprint == "\ud800"


@pytest.mark.usefixtures("small_batches")
def test_a_run_that_cannot_be_stored_is_kept_in_memory_and_left_out_of_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The sensor's scan keeps it as a parsed result (as before), the saved file leaves it out."""
    root = hostile_corpus(tmp_path / "runs")
    odd = unstorable_run(root)
    cache = RunCache()
    state = scan_tree_state(root, cache=cache)
    assert str(odd) in {entry.path for entry in state.entries}
    plain = RunCache()
    plain_state = scan_tree_state(root, cache=plain)
    assert plain_state == state
    with caplog.at_level(logging.INFO, logger=cache_module.__name__):
        cache.save(tmp_path / "runs.cache")
    assert "not saved" in caplog.text
    reloaded = RunCache.load(tmp_path / "runs.cache")
    assert len(reloaded) == len(cache) - 1
    with pytest.raises(ValueError, match="fingerprint cannot be stored"):
        discover_run_frame(root, cache=RunCache(), workers=WORKERS)


def test_read_chunks_here_gives_each_chunk_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_module, "PARALLEL_CHUNK_RUNS", 2)
    dirs = [str(tmp_path / f"run{number}") for number in range(5)]
    assert read_chunks(dirs, list, workers=1) == [dirs[0:2], dirs[2:4], dirs[4:5]]
    assert read_chunks([], list, workers=1) == []


def test_the_runs_frame_of_a_cold_parallel_scan_round_trips_through_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows appended from reader tables are saved, loaded and reused (every run a hit)."""
    monkeypatch.setattr(read_module, "PARALLEL_MIN_RUNS", 1)
    monkeypatch.setattr(read_module, "PARALLEL_CHUNK_RUNS", 4)
    root = hostile_corpus(tmp_path / "runs")
    cold = RunCache()
    first = discovered(root, cold)
    cold.save(tmp_path / "c.cache")
    warm = RunCache.load(tmp_path / "c.cache")
    assert discovered(root, warm) == first
    assert (warm.misses, warm.hits) == (0, cold.misses)


def saved_rows(path: Path) -> pa.Table:
    """The rows of a saved cache file (its Parquet body)."""
    data = path.read_bytes()
    return pq.read_table(pa.BufferReader(data[data.index(b"\n") + 1 :]))


def test_a_save_in_row_groups_holds_the_rows_of_a_save_in_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sorted a row group at a time: the same rows, sorted by path, and every run a hit."""
    root = hostile_corpus(tmp_path / "runs")
    cache = RunCache()
    discovered(root, cache)
    whole = saved_rows(cache.save(tmp_path / "whole.cache"))
    monkeypatch.setattr(cache_module, "PARQUET_ROW_GROUP_ROWS", 2)
    grouped_file = cache.save(tmp_path / "grouped.cache")
    assert pq.ParquetFile(
        pa.BufferReader(grouped_file.read_bytes().split(b"\n", 1)[1])
    ).num_row_groups == -(-len(cache) // 2)
    grouped = saved_rows(grouped_file)
    assert grouped.equals(whole)
    assert grouped.column("path").to_pylist() == sorted(grouped.column("path").to_pylist())
    reloaded = RunCache.load(grouped_file)
    assert discovered(root, reloaded) == discovered(root, cache)
    assert reloaded.misses == 0
