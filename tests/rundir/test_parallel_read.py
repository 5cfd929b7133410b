"""Parsing in worker processes gives exactly what parsing in this process gives."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from deepecgkit.rundir import read as read_module
from deepecgkit.rundir.cache import RunCache, scan_tree_state
from deepecgkit.rundir.format import METADATA_FILENAME, METRICS_FILENAME, SPLIT_INFO_FILENAME
from deepecgkit.rundir.read import discover_runs, find_run_candidates, read_run, read_runs
from deepecgkit.rundir.write import write_run_directory

#: Workers in these tests: two, whatever the machine, so the pool is really used.
WORKERS = 2


def hostile_corpus(root: Path) -> Path:
    """Good runs of two schemas beside every kind of bad run the reader knows."""
    for seed in range(6):
        write_run_directory(
            root / f"cnn_afib_seed{seed}",
            model="cnn",
            dataset="afib",
            metrics={"f1": 0.5 + seed / 100, "accuracy": float("nan")},
            seed=seed,
            split_sizes={"n_train": 10, "n_val": 2, "n_test": 5, "n_test_groups": 5},
        )
    write_run_directory(
        root / "mlp_ptb_seed0",
        model="mlp",
        dataset="ptb",
        metrics={"f1": 1.5, "exact_match_accuracy": 0.2},  # f1 out of range: suspect
        seed=0,
        multi_label=True,
    )
    write_run_directory(
        root / "failed_seed1", model="cnn", dataset="afib", metrics={"f1": 0.1}, returncode=3
    )
    write_run_directory(root / "legacy", model="cnn", dataset="afib", metrics={"f1": 0.3})
    bad_meta = write_run_directory(
        root / "bad_meta_seed7", model="cnn", dataset="afib", metrics={"f1": 0.4}, seed=7
    )
    (bad_meta / METADATA_FILENAME).write_text("{not json")
    (bad_meta / SPLIT_INFO_FILENAME).write_text(json.dumps({"n_train": -4}))
    for name, text in {
        "half_seed0": "model,dataset,f1\ncnn,afib,0.5",
        "empty_seed0": "",
        "no_row_seed0": "model,dataset,f1\n",
        "blank_model_seed0": "model,dataset,f1\n,afib,0.5\n",
    }.items():
        (root / name).mkdir()
        (root / name / METRICS_FILENAME).write_text(text)
    (root / "directory_seed0" / METRICS_FILENAME).mkdir(parents=True)
    (root / "dangling_seed0").mkdir()
    (root / "dangling_seed0" / METRICS_FILENAME).symlink_to(root / "nowhere")
    if hasattr(os, "mkfifo"):
        (root / "fifo_seed0").mkdir()
        os.mkfifo(root / "fifo_seed0" / METRICS_FILENAME)
    odd = os.fsdecode(os.fsencode(str(root)) + b"/latin\xe9_seed0")
    os.mkdir(odd)
    Path(odd, METRICS_FILENAME).write_text("model,dataset,f1\ncnn,afib,0.5\n")
    return root


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers from the first run on, three runs per task: a tiny corpus spans many tasks."""
    monkeypatch.setattr(read_module, "PARALLEL_MIN_RUNS", 1)
    monkeypatch.setattr(read_module, "SPAWN_MIN_RUNS", 1)
    monkeypatch.setattr(read_module, "PARALLEL_CHUNK_RUNS", 3)


@pytest.fixture
def candidates(tmp_path: Path) -> list[Path]:
    return find_run_candidates(hostile_corpus(tmp_path / "runs"))[0]


def assert_read_as_serially(
    candidates: list[Path], caplog: pytest.LogCaptureFixture, *, level: int, logged: str
) -> None:
    """read_runs in workers gives what read_run here gives, and logs ``logged``."""
    with caplog.at_level(level, logger=read_module.__name__):
        results = read_runs(candidates, workers=WORKERS)
    assert repr(results) == repr([read_run(d) for d in candidates])
    assert logged in caplog.text


def saved_bytes(cache: RunCache, path: Path) -> bytes:
    return cache.save(path).read_bytes()


@pytest.mark.usefixtures("small_batches")
def test_parallel_discovery_equals_serial_discovery(tmp_path: Path) -> None:
    root = hostile_corpus(tmp_path / "runs")
    outcomes = {}
    for workers in (1, WORKERS):
        for options in ({}, {"include_legacy": True, "include_failed": True}):
            plain = discover_runs(root, workers=workers, **options)
            cache = RunCache()
            cached = discover_runs(root, workers=workers, reader=cache.read, **options)
            whole = RunCache()
            batch = discover_runs(root, workers=workers, reader=whole, **options)
            assert repr(plain) == repr(cached) == repr(batch)
            counts = (cache.misses, cache.hits, cache.damaged)
            assert counts == (whole.misses, whole.hits, whole.damaged)
            name = f"{workers}-{len(options)}"
            content = saved_bytes(cache, tmp_path / f"{name}.jsonl")
            assert content == saved_bytes(whole, tmp_path / f"{name}-whole.jsonl")
            outcomes[workers, len(options)] = (repr(plain), counts, content)
    for extra in (0, 2):
        assert outcomes[1, extra] == outcomes[WORKERS, extra]
    records, diagnostics = discover_runs(root, workers=WORKERS)
    reasons = " ".join(diagnostics["unreadable"])
    for expected in ("half-written", "has no data row", "blank model", "not valid UTF-8"):
        assert expected in reasons, "every bad run is reported with its reason"
    assert len(diagnostics["unreadable"]) == len(list(root.glob("*"))) - 10
    assert [r.run_dir.name for r in records][:2] == ["cnn_afib_seed0", "cnn_afib_seed1"]


@pytest.mark.usefixtures("small_batches")
def test_read_runs_in_spawned_workers(
    candidates: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The platform's processes run threads, so they spawn their workers: same results."""
    monkeypatch.setattr(read_module, "_start_method", lambda: "spawn")
    assert repr(read_runs(candidates, workers=WORKERS)) == repr([read_run(d) for d in candidates])


def crash_on_the_second_task(run_dirs: list[str]) -> list:
    """A worker task that kills its worker (as the OOM killer would) for one batch."""
    if any(Path(d).name == "cnn_afib_seed3" for d in run_dirs):
        os._exit(1)
    return read_module._real_read_chunk(run_dirs)  # type: ignore[attr-defined]


@pytest.mark.usefixtures("small_batches")
def test_a_dead_worker_loses_no_run(
    candidates: list[Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(read_module, "_start_method", lambda: "fork")
    monkeypatch.setattr(read_module, "_real_read_chunk", read_module._read_chunk, raising=False)
    monkeypatch.setattr(read_module, "_read_chunk", crash_on_the_second_task)
    assert_read_as_serially(candidates, caplog, level=logging.WARNING, logged="process failed")


@pytest.mark.usefixtures("small_batches")
def test_workers_that_cannot_start_mean_reading_here(
    candidates: list[Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_pool(*args: object, **kwargs: object) -> None:
        raise OSError("no processes here")

    monkeypatch.setattr(read_module, "ProcessPoolExecutor", no_pool)
    assert_read_as_serially(candidates, caplog, level=logging.INFO, logged="no processes here")


def test_sensor_scan_of_an_empty_cache_parses_in_parallel_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = hostile_corpus(tmp_path / "runs")
    monkeypatch.setattr(read_module, "available_cpus", lambda: WORKERS)
    serial, parallel = RunCache(), RunCache()
    monkeypatch.setattr(read_module, "SPAWN_MIN_RUNS", 1)
    monkeypatch.setattr(read_module, "PARALLEL_MIN_RUNS", 10**9)
    serial_state = scan_tree_state(root, cache=serial)
    monkeypatch.setattr(read_module, "PARALLEL_MIN_RUNS", 1)
    monkeypatch.setattr(read_module, "PARALLEL_CHUNK_RUNS", 3)
    assert scan_tree_state(root, cache=parallel) == serial_state
    assert parallel.dataset_digests() == serial.dataset_digests()
    assert (parallel.misses, parallel.hits) == (serial.misses, serial.hits)
    saved = saved_bytes(parallel, tmp_path / "a.jsonl")
    assert saved == saved_bytes(serial, tmp_path / "b.jsonl")


def test_few_runs_are_read_here_without_a_pool(
    candidates: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(candidates) < read_module.PARALLEL_MIN_RUNS

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("a pool was started for a handful of runs")

    monkeypatch.setattr(read_module, "ProcessPoolExecutor", no_pool)
    assert repr(read_runs(candidates)) == repr([read_run(d) for d in candidates])
