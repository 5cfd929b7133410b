"""Per-dataset state digests: the sensor's scan and the discovery asset's read agree on them."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from deepecgkit.rundir.cache import (
    CACHE_FORMAT_VERSION,
    CACHE_SCHEMA,
    DIGEST_LENGTH,
    FileState,
    FileStates,
    RunCache,
    metrics_file_state,
    scan_tree_state,
)
from deepecgkit.rundir.format import METRICS_FILENAME
from deepecgkit.rundir.read import (
    discover_runs,
    find_run_candidate_paths,
    find_run_candidates,
    read_run,
)
from deepecgkit.rundir.records import RunRecord, encoded_record
from deepecgkit.rundir.write import write_run_directory

#: Dataset names a JSON field or a tab-separated line could trip over.
ODD_DATASETS = ("afib", "b\tc", 'quote"d', "back\\slash", "é-ü", "007", "line\nbreak")


def make(root: Path, name: str, dataset: str, seed: int, f1: float = 0.5) -> Path:
    return write_run_directory(
        root / name, model="cnn", dataset=dataset, metrics={"f1": f1}, seed=seed
    )


def half_written(root: Path, name: str) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / METRICS_FILENAME).write_text("model,dataset,f1\ncnn,afib,0.5")  # no final newline
    return run


def sensor_digests(root: Path, cache_file: Path | None = None) -> dict[str, str]:
    """What the sensor computes: a loaded (or new) cache, scan_tree_state, dataset_digests."""
    cache = RunCache() if cache_file is None else RunCache.load(cache_file)
    scan_tree_state(root, cache=cache)
    return cache.dataset_digests()


def discovery_digests(root: Path, cache_file: Path | None = None) -> dict[str, str]:
    """What the discovery asset computes: discover_runs(reader=cache.read), dataset_digests."""
    cache = RunCache() if cache_file is None else RunCache.load(cache_file)
    discover_runs(root, recursive=True, reader=cache.read)
    return cache.dataset_digests()


def saved(root: Path, cache_file: Path) -> Path:
    """Save a cache that has read every run under ``root``."""
    cache = RunCache()
    discover_runs(root, recursive=True, reader=cache.read)
    return cache.save(cache_file)


def reference_digests(root: Path) -> dict[str, str]:
    """Independent of the cache: read_run per candidate, SHA-256 per dataset by hand."""
    lines: dict[str, list[str]] = {}
    for run_dir in find_run_candidates(root, recursive=True)[0]:
        record = read_run(run_dir)
        if isinstance(record, RunRecord):
            info = os.stat(run_dir / METRICS_FILENAME)
            line = f"{run_dir}\t{info.st_mtime_ns}\t{info.st_size}\n"
            lines.setdefault(record.dataset, []).append(line)
    return {
        dataset: hashlib.sha256("".join(sorted(lines[dataset])).encode()).hexdigest()[
            :DIGEST_LENGTH
        ]
        for dataset in sorted(lines)
    }


def all_ways(root: Path, cache_file: Path) -> list[dict[str, str]]:
    """The map computed by the sensor and by discovery, each on a new and on a saved cache."""
    saved(root, cache_file)
    return [
        sensor_digests(root),
        discovery_digests(root),
        sensor_digests(root, cache_file),
        discovery_digests(root, cache_file),
    ]


def test_sensor_and_discovery_compute_the_same_map(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    for seed in range(3):
        make(root, f"a_seed{seed}", "afib", seed)
        make(root / "nested", f"b_seed{seed}", "rhythm", seed)
    half_written(root, "c_seed0")
    maps = all_ways(root, tmp_path / "cache.jsonl")
    assert maps[0] == reference_digests(root)
    assert all(other == maps[0] for other in maps[1:])
    assert list(maps[0]) == ["afib", "rhythm"]


def test_a_change_in_one_dataset_changes_only_its_digest(tmp_path: Path) -> None:
    root, cache_file = tmp_path / "runs", tmp_path / "cache.jsonl"
    for seed in range(2):
        make(root, f"a_seed{seed}", "afib", seed)
        make(root, f"b_seed{seed}", "rhythm", seed)
    before = sensor_digests(root)

    def step() -> dict[str, str]:
        maps = all_ways(root, cache_file)
        assert all(other == maps[0] for other in maps[1:])
        return maps[0]

    added = (make(root, "b_seed2", "rhythm", 2), step())[1]
    assert added["afib"] == before["afib"] and added["rhythm"] != before["rhythm"]

    make(root, "b_seed0", "rhythm", 0, f1=0.75)
    os.utime(root / "b_seed0" / METRICS_FILENAME, ns=(10**9, 10**9))
    changed = step()
    assert changed["afib"] == before["afib"]
    assert changed["rhythm"] not in (before["rhythm"], added["rhythm"])

    shutil.rmtree(root / "b_seed2")
    removed = step()
    assert removed["afib"] == before["afib"]
    assert removed["rhythm"] not in (before["rhythm"], added["rhythm"], changed["rhythm"])

    half_written(root, "b_seed9")
    (root / "b_seed8").mkdir()
    (root / "b_seed8" / METRICS_FILENAME).write_text("model,dataset\n")  # no data row
    assert step() == removed, "an unreadable run changes no digest"

    shutil.rmtree(root / "a_seed0")
    shutil.rmtree(root / "a_seed1")
    gone = step()
    assert list(gone) == ["rhythm"] and gone["rhythm"] == removed["rhythm"]


def test_moving_a_run_to_another_dataset_changes_both(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make(root, "a_seed0", "afib", 0)
    make(root, "a_seed1", "afib", 1)
    make(root, "b_seed0", "rhythm", 0)
    before = sensor_digests(root)
    make(root, "a_seed1", "rhythm", 1)
    os.utime(root / "a_seed1" / METRICS_FILENAME, ns=(10**9, 10**9))
    after = sensor_digests(root)
    assert after["afib"] != before["afib"] and after["rhythm"] != before["rhythm"]
    assert after == discovery_digests(root) == reference_digests(root)


def test_union_of_datasets_is_the_readable_runs_datasets(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    for index, dataset in enumerate(ODD_DATASETS):
        make(root, f"run{index}_seed0", dataset, 0)
    write_run_directory(  # failed and seedless runs are readable: discovery visits them too
        root / "failed", model="cnn", dataset="crashed", metrics={"f1": 0.1}, returncode=1
    )
    half_written(root, "pending_seed0")
    cache_file = saved(root, tmp_path / "cache.jsonl")
    cache = RunCache.load(cache_file)
    state = scan_tree_state(root, cache=cache)
    readable = [read_run(run) for run in find_run_candidates(root, recursive=True)[0]]
    datasets = {record.dataset for record in readable if isinstance(record, RunRecord)}
    assert set(cache.dataset_digests()) == datasets == {*ODD_DATASETS, "crashed"}
    per_dataset = cache.dataset_states()
    assert sorted(s for states in per_dataset.values() for s in states) == list(state.entries)
    assert cache.dataset_digests() == discovery_digests(root, cache_file)
    assert cache.damaged == 0 and cache.misses == 0, "odd names round-trip through the file"


def saved_table(cache_file: Path) -> pa.Table:
    """The rows of a saved cache, read by pyarrow from the bytes after the header line."""
    body = cache_file.read_bytes().partition(b"\n")[2]
    return pq.read_table(pa.BufferReader(body))


def write_with_checksum(cache_file: Path, table: pa.Table, *, version: int = 6) -> None:
    """A cache file another tool wrote: ``table`` as Parquet, under a header that matches it."""
    sink = io.BytesIO()
    pq.write_table(table, sink)
    body = sink.getvalue()
    header = json.dumps({"format": version, "sha256": hashlib.sha256(body).hexdigest()})
    cache_file.write_bytes(header.encode() + b"\n" + body)


def test_the_file_is_a_header_and_one_parquet_row_per_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = make(root, "a_seed0", 'quote"d', 0)
    half_written(root, "b_seed0")
    data = saved(root, tmp_path / "cache.jsonl").read_bytes()
    head, _, body = data.partition(b"\n")
    assert CACHE_FORMAT_VERSION == 6
    assert json.loads(head) == {"format": 6, "sha256": hashlib.sha256(body).hexdigest()}
    table = saved_table(tmp_path / "cache.jsonl")
    assert table.schema.equals(CACHE_SCHEMA)
    rows = table.to_pylist()
    assert [row["path"] for row in rows] == [os.fsencode(run), os.fsencode(root / "b_seed0")]
    state = metrics_file_state(run)
    assert state is not None and (rows[0]["mtime_ns"], rows[0]["size"]) == state[1:]
    record = read_run(run)
    assert isinstance(record, RunRecord)
    assert rows[0]["dataset"] == 'quote"d' and rows[0]["reason"] is None
    assert rows[0]["metrics"] == json.dumps(record.metrics) and rows[0]["seed"] == "0"
    assert rows[0]["suspect"] == "[]" and rows[0]["checkpoint"] is None
    assert rows[1]["dataset"] is None and rows[1]["model"] is None
    assert rows[1]["reason"] == read_run(root / "b_seed0").reason  # type: ignore[union-attr]


def test_a_version_5_cache_is_ignored_and_rebuilt(tmp_path: Path) -> None:
    """The JSON-lines cache of the version before: one cold discovery after the upgrade."""
    root = tmp_path / "runs"
    run = make(root, "a_seed0", "afib", 0)
    state = metrics_file_state(run)
    assert state is not None
    old = tmp_path / "old.jsonl"
    body = f'"{run}"\t{state.mtime_ns}\t{state.size}\t"afib"\t{{}}\t{{"f1": 0.5}}\n'
    header = json.dumps({"format": 5, "sha256": hashlib.sha256(body.encode()).hexdigest()})
    old.write_text(f"{header}\n{body}")
    cache = RunCache.load(old)
    assert len(cache) == 0 and cache.damaged == 0, "another version is not damage"
    assert sensor_digests(root, old) == reference_digests(root)


def rows_with(table: pa.Table, field: str, values: list) -> pa.Table:
    return table.set_column(table.schema.get_field_index(field), field, pa.array(values))


@pytest.mark.parametrize("problem", ["columns", "no_model", "record_of_unreadable", "twice"])
def test_a_whole_file_whose_rows_cannot_be_whole_is_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, problem: str
) -> None:
    """A foreign file with a matching checksum is still checked: its columns, then its rows."""
    root = tmp_path / "runs"
    make(root, "a_seed0", "afib", 0)
    half_written(root, "b_seed0")
    cache_file = saved(root, tmp_path / "cache.jsonl")
    table = saved_table(cache_file)
    if problem == "columns":
        table = table.drop_columns(["checkpoint"])
    elif problem == "no_model":
        table = rows_with(table, "model", [None, None])
    elif problem == "record_of_unreadable":
        table = rows_with(table, "model", ["cnn", "cnn"])
    else:
        table = pa.concat_tables([table, table.slice(0, 1)])
    write_with_checksum(cache_file, table)
    with caplog.at_level(logging.WARNING, logger="deepecgkit.rundir.cache"):
        cache = RunCache.load(cache_file)
    assert len(cache) == 0 and cache.damaged == 1
    assert str(cache_file) in caplog.text, "the log names the cache"
    records, diagnostics = discover_runs(root, reader=cache)
    assert [r.run_dir.name for r in records] == ["a_seed0"] and cache.misses == 2
    assert len(diagnostics["unreadable"]) == 1


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from(ODD_DATASETS[:4]), st.booleans(), st.booleans()),
        max_size=8,
    ),
    changes=st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["rewrite", "remove"]))),
)
def test_property_digests_agree_and_follow_each_change(
    runs: list[tuple[str, bool, bool]], changes: list[tuple[int, str]]
) -> None:
    """Any corpus: every way of computing the map agrees with the reference, before and after
    changes; a dataset's digest changes iff one of its readable runs was touched."""
    with tempfile.TemporaryDirectory() as folder:
        root, cache_file = Path(folder) / "runs", Path(folder) / "cache.jsonl"
        root.mkdir()
        for index, (dataset, readable, nested) in enumerate(runs):
            parent = root / "deep" if nested else root
            if readable:
                make(parent, f"run{index}_seed{index}", dataset, index)
            else:
                half_written(parent, f"run{index}_seed{index}")
        before = all_ways(root, cache_file)
        assert all(other == before[0] for other in before) and before[0] == reference_digests(root)

        touched: set[str] = set()
        for index, change in changes:
            if index >= len(runs):
                continue
            dataset, readable, nested = runs[index]
            run = (root / "deep" if nested else root) / f"run{index}_seed{index}"
            if not run.exists():
                continue
            if change == "remove":
                shutil.rmtree(run)
            elif readable:
                make(run.parent, run.name, dataset, index, f1=0.25)
                os.utime(run / METRICS_FILENAME, ns=(index + 1, index + 1))
            if readable:
                touched.add(dataset)
        after = all_ways(root, cache_file)
        assert all(other == after[0] for other in after) and after[0] == reference_digests(root)
        for dataset in set(before[0]) | set(after[0]):
            assert (before[0].get(dataset) != after[0].get(dataset)) == (dataset in touched)


def test_candidate_paths_are_the_keys_discovery_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sensor lists strings, discovery Paths: a root spelt ``./runs/`` gives one key."""
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "runs", "a_seed0", "afib", 0)
    make(tmp_path / "runs" / "deep", "b_seed0", "rhythm", 0)
    for root in ("./runs/", "runs//", "runs/."):
        for recursive in (False, True):
            strings, _ = find_run_candidate_paths(root, recursive=recursive)
            paths, _ = find_run_candidates(root, recursive=recursive)
            assert strings == [os.fspath(path) for path in paths]
        cache = RunCache()
        discover_runs(root, recursive=True, reader=cache.read)
        state = scan_tree_state(root, cache=cache)
        assert cache.misses == 2 and cache.hits == 0, "the scan found discovery's entries"
        assert [entry.path for entry in state.entries] == ["runs/a_seed0", "runs/deep/b_seed0"]


# --- a warm refresh writes back what it must, and no more; damage means: parse again ---------


def reference_row(record: RunRecord) -> dict:
    """A saved row built from scratch as the format defines it (not by the cache's code)."""
    info = os.stat(record.run_dir / METRICS_FILENAME)
    ints = ("seed", "n_train", "n_val", "n_test", "n_test_groups", "returncode")
    row = {
        **record._asdict(),
        **{f: None if getattr(record, f) is None else str(getattr(record, f)) for f in ints},
    }
    row.update(
        path=os.fsencode(record.run_dir),
        mtime_ns=info.st_mtime_ns,
        size=info.st_size,
        reason=None,
        metrics=json.dumps(record.metrics),
        suspect=json.dumps(list(record.suspect)) if record.suspect else "[]",
    )
    del row["run_dir"]
    return row


def same_record(left: RunRecord, right: RunRecord) -> bool:
    """Equal field by field and type by type, NaN metrics equal to NaN."""
    metrics = [(k, repr(v), type(v)) for k, v in left.metrics.items()]
    return (
        left._replace(metrics={}) == right._replace(metrics={})
        and metrics == [(k, repr(v), type(v)) for k, v in right.metrics.items()]
        and [type(value) for value in left] == [type(value) for value in right]
    )


def odd_runs(root: Path) -> list[Path]:
    """Runs with a set-aside value (a suspect note and a NaN metric), an odd dataset, and none."""
    runs = [
        write_run_directory(
            root / "a_seed0",
            model="cnn",
            dataset="afib",
            metrics={"accuracy": 0.5, "f1": 1.5, "auroc": math.nan},
            seed=0,
        ),
        make(root, "b_seed1", 'quote"d', 1, f1=0.25),
        make(root / "deep", "c_seed2", "é-ü", 2),
    ]
    half_written(root, "d_seed3")
    return runs


def warm_refresh(root: Path, cache_file: Path) -> tuple[RunCache, list[RunRecord]]:
    """What the discovery asset does: load, discover through the cache, prune, save."""
    cache = RunCache.load(cache_file)
    records, _ = discover_runs(root, recursive=True, reader=cache.read)
    cache.prune_unvisited()
    cache.save()
    return cache, records


def readable_rows(cache_file: Path) -> list[dict]:
    return [row for row in saved_table(cache_file).to_pylist() if row["reason"] is None]


def test_a_warm_save_writes_the_same_bytes_and_a_changed_run_anew(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    runs = odd_runs(root)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    before = cache_file.read_bytes()
    expected = sorted((reference_row(read_run(run)) for run in runs), key=lambda r: r["path"])  # type: ignore[arg-type]
    assert readable_rows(cache_file) == expected

    cache, records = warm_refresh(root, cache_file)
    assert cache.hits == 4 and cache.misses == 0 and cache.damaged == 0
    assert cache_file.read_bytes() == before, "an unchanged refresh rewrites the same bytes"
    fresh = sorted((read_run(run) for run in runs), key=lambda r: str(r.run_dir))
    ordered = sorted(records, key=lambda r: str(r.run_dir))
    assert all(same_record(a, b) for a, b in zip(ordered, fresh, strict=True))  # type: ignore[arg-type]

    make(root, "b_seed1", 'quote"d', 1, f1=0.75)
    os.utime(root / "b_seed1" / METRICS_FILENAME, ns=(10**9, 10**9))
    cache, _ = warm_refresh(root, cache_file)
    assert cache.hits == 3 and cache.misses == 1
    changed = reference_row(read_run(root / "b_seed1"))  # type: ignore[arg-type]
    after = readable_rows(cache_file)
    assert [row for row in after if row not in expected] == [changed]
    assert [row["path"] for row in after] == [row["path"] for row in expected]


def test_a_cache_saved_step_by_step_is_the_cache_saved_at_once(tmp_path: Path) -> None:
    """Incremental equals clean: the same runs give the same bytes, whatever the history."""
    root = tmp_path / "runs"
    runs = odd_runs(root)
    step_file = tmp_path / "steps.jsonl"
    shutil.rmtree(root / "deep")
    saved(root, step_file)
    make(root / "deep", "c_seed2", "é-ü", 2)
    warm_refresh(root, step_file)
    make(root, "e_seed4", "afib", 4)
    warm_refresh(root, step_file)
    shutil.rmtree(root / "e_seed4")
    cache, _ = warm_refresh(root, step_file)
    assert cache.hits == 4 and len(cache) == 4
    assert step_file.read_bytes() == saved(root, tmp_path / "once.jsonl").read_bytes()
    assert len(runs) == 3


def test_a_hit_holds_the_looked_up_path_and_the_values_read_run_gives(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    runs = odd_runs(root)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    cache = RunCache.load(cache_file)
    for run in runs:
        record = cache.read(run)
        assert record.run_dir is run, "no second Path is parsed for a hit"
        assert isinstance(record, RunRecord) and same_record(record, read_run(run))  # type: ignore[arg-type]
        encoded = RunCache.load(cache_file).read_encoded([str(run)])[0]
        assert encoded == encoded_record(read_run(run))  # type: ignore[arg-type]
    assert cache.hits == 3 and cache.misses == 0


@pytest.mark.parametrize("damage", ["cut_short", "flipped", "header", "not_parquet", "empty"])
def test_a_damaged_file_is_ignored_every_run_parsed_and_the_file_rewritten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    root = tmp_path / "runs"
    runs = odd_runs(root)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    good = cache_file.read_bytes()
    if damage == "cut_short":
        cache_file.write_bytes(good[:-40])
    elif damage == "flipped":
        cache_file.write_bytes(good[:-60] + bytes([good[-60] ^ 1]) + good[-59:])
    elif damage == "header":
        cache_file.write_bytes(b"{format: 6" + good[good.index(b"\n") :])
    elif damage == "not_parquet":
        body = b"PAR1 not really"
        header = json.dumps({"format": 6, "sha256": hashlib.sha256(body).hexdigest()})
        cache_file.write_bytes(header.encode() + b"\n" + body)
    else:
        cache_file.write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="deepecgkit.rundir.cache"):
        cache = RunCache.load(cache_file)
        records, diagnostics = discover_runs(root, recursive=True, reader=cache)
    assert len(cache) == 4 and cache.damaged == 1 and cache.misses == 4 and cache.hits == 0
    fresh = sorted((read_run(run) for run in runs), key=lambda r: str(r.run_dir))
    ordered = sorted(records, key=lambda r: str(r.run_dir))
    assert all(same_record(a, b) for a, b in zip(ordered, fresh, strict=True))  # type: ignore[arg-type]
    assert len(diagnostics["unreadable"]) == 1
    assert str(cache_file) in caplog.text, "the log names the cache"
    cache.prune_unvisited()
    cache.save()
    assert cache_file.read_bytes() == good, "the rewritten cache is whole again"


def file_identity(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return info.st_ino, info.st_mtime_ns, info.st_size


def test_a_save_of_what_the_file_holds_writes_nothing(tmp_path: Path) -> None:
    """Loaded (or last saved) and unchanged: the file stays as it is, inode and all."""
    root = tmp_path / "runs"
    make(root, "a_seed0", "afib", 0)
    make(root, "b_seed1", "afib", 1)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    before = file_identity(cache_file)
    cache = RunCache.load(cache_file)
    discover_runs(root, recursive=True, reader=cache)
    assert cache.prune_unvisited() == 0 and cache.hits == 2
    cache.save()
    assert file_identity(cache_file) == before, "nothing changed: nothing written"
    cache.save(tmp_path / "elsewhere.jsonl")  # another file: written
    assert (tmp_path / "elsewhere.jsonl").read_bytes() == cache_file.read_bytes()

    make(root, "c_seed2", "afib", 2)
    discover_runs(root, recursive=True, reader=cache)
    cache.save()
    assert file_identity(cache_file) != before and len(RunCache.load(cache_file)) == 3
    written = file_identity(cache_file)
    cache.save()
    assert file_identity(cache_file) == written, "saved just now: not written again"

    shutil.rmtree(root / "a_seed0")
    cache = RunCache.load(cache_file)
    discover_runs(root, recursive=True, reader=cache)
    assert cache.prune_unvisited() == 1
    cache.save()
    assert len(RunCache.load(cache_file)) == 2, "a pruned entry is a change"


def test_a_file_replaced_since_the_load_is_written_again(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make(root, "a_seed0", "afib", 0)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    cache = RunCache.load(cache_file)
    discover_runs(root, recursive=True, reader=cache)
    good = cache_file.read_bytes()
    cache_file.write_bytes(good + b"damaged line\n")
    cache.save()
    assert cache_file.read_bytes() == good
    cache_file.unlink()
    cache.save()
    assert cache_file.read_bytes() == good


def test_a_cache_is_worth_saving_once_its_changes_reach_the_share(tmp_path: Path) -> None:
    """No file or a damaged one: always; else once the changed entries reach the share."""
    root = tmp_path / "runs"
    for seed in range(10):
        make(root, f"a_seed{seed}", "afib", seed)
    cache_file = tmp_path / "cache.jsonl"
    cache = RunCache.load(cache_file)
    discover_runs(root, recursive=True, reader=cache)
    assert cache.unsaved_changes() == 10 and cache.worth_saving(share=1.0), "no file yet"
    cache.save()
    assert cache.unsaved_changes() == 0 and not cache.worth_saving(share=0.0), "just saved"

    make(root, "a_seed10", "afib", 10)
    cache = RunCache.load(cache_file)
    discover_runs(root, recursive=True, reader=cache)
    assert cache.unsaved_changes() == 1  # one entry added (11 in all)
    assert cache.worth_saving(share=0.09) and not cache.worth_saving(share=0.1)
    shutil.rmtree(root / "a_seed0")
    cache = RunCache.load(cache_file)
    discover_runs(root, recursive=True, reader=cache)
    assert cache.prune_unvisited() == 1
    assert cache.unsaved_changes() == 2, "one added, one dropped"

    cache_file.write_bytes(cache_file.read_bytes()[:-3])  # damaged
    cache = RunCache.load(cache_file)
    discover_runs(root, recursive=True, reader=cache)
    assert cache.damaged and cache.worth_saving(share=1.0)


def test_given_states_look_runs_up_as_their_own_stats_do(tmp_path: Path) -> None:
    """candidate_columns with the states of the metrics files equals it without them."""
    root = tmp_path / "runs"
    for seed in range(4):
        make(root, f"a_seed{seed}", "afib", seed)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    make(root, "a_seed9", "afib", 9)
    candidates, _ = find_run_candidate_paths(root, recursive=True)
    states = [metrics_file_state(candidate) for candidate in candidates]
    given_states, own = RunCache.load(cache_file), RunCache.load(cache_file)
    with_states = given_states.candidate_columns(candidates, states=states)
    without = own.candidate_columns(candidates)
    assert (given_states.hits, given_states.misses) == (own.hits, own.misses) == (4, 1)
    assert list(with_states["reason"]) == list(without["reason"])
    for field in CACHE_SCHEMA.names[4:]:
        assert with_states[field].equals(without[field]), field
        # Some candidates' rows straight from the cache equal those rows of the whole column.
        some = [4, 0, 2]
        assert with_states.gathered(field, some).equals(without[field].take(some)), field
    with pytest.raises(ValueError, match="states for"):
        own.candidate_columns(candidates, states=states[:-1])
    # The same states as columns (what a proven tree index gives) look the runs up alike.
    columns = FileStates(*(list(values) for values in zip(*states, strict=True)))
    from_columns = RunCache.load(cache_file).candidate_columns(candidates, states=columns)
    assert list(from_columns["reason"]) == list(without["reason"])
    for field in CACHE_SCHEMA.names[4:]:
        assert from_columns[field].equals(without[field]), field
    with pytest.raises(ValueError, match="states for"):
        own.candidate_columns(candidates, states=columns[:-1])


def test_file_states_are_the_states_of_their_columns() -> None:
    states = FileStates(["/r/a", "/r/b", "/r/c"], [5, 6, 7], [10, 20, 30])
    assert len(states) == 3
    assert states[1] == FileState("/r/b", 6, 20) and states[-1].size == 30
    assert list(states[1:]) == [FileState("/r/b", 6, 20), FileState("/r/c", 7, 30)]
    assert states == [FileState("/r/a", 5, 10), *states[1:]]
    assert states != [FileState("/r/a", 5, 10)]
    with pytest.raises(ValueError, match="differ in length"):
        FileStates(["/r/a"], [5, 6], [10])


_NAMES = st.sampled_from(["a", "B", "é", "\U0001f600", "a\tb", "x y", ""])


@settings(max_examples=200, deadline=None)
@given(
    runs=st.dictionaries(
        st.tuples(_NAMES, st.integers(0, 50)).map(lambda pair: f"/r/{pair[0]}{pair[1]}"),
        st.tuples(
            st.integers(-(2**63), 2**63 - 1),
            st.integers(0, 2**63 - 1),
            st.one_of(st.none(), _NAMES),
        ),
        max_size=30,
    )
)
def test_property_the_columnar_digests_are_the_grouped_ones(runs) -> None:
    """Each dataset's digest by Arrow is its sorted lines hashed in Python; no dataset, no key."""
    from deepecgkit.rundir.cache import _columnar_digests, _digest

    paths = list(runs)
    mtimes, sizes, datasets = ([runs[p][i] for p in paths] for i in range(3))
    groups: dict[str, list[tuple[str, int, int]]] = {}
    for path, mtime, size, dataset in zip(paths, mtimes, sizes, datasets, strict=True):
        if dataset is not None:
            groups.setdefault(dataset, []).append((path, mtime, size))
    expected = {dataset: _digest(sorted(groups[dataset])) for dataset in sorted(groups)}
    got = _columnar_digests(paths, mtimes, sizes, datasets)
    assert got == expected and list(got) == list(expected)


def test_a_path_that_is_not_utf8_takes_the_python_road() -> None:
    from deepecgkit.rundir.cache import _columnar_digests

    undecodable = os.fsdecode(b"/r/caf\xe9")
    assert _columnar_digests([undecodable], [1], [2], ["afib"]) is None
    assert _columnar_digests(["/r/a"], [2**64], [2], ["afib"]) is None
