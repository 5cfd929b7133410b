"""Per-dataset state digests: the sensor's scan and the discovery asset's read agree on them."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from deepecgkit.rundir.cache import (
    CACHE_FORMAT_VERSION,
    DIGEST_LENGTH,
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
from deepecgkit.rundir.records import RunRecord
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


def test_saved_lines_carry_the_dataset_and_the_header_the_body_checksum(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make(root, "a_seed0", 'quote"d', 0)
    half_written(root, "b_seed0")
    data = saved(root, tmp_path / "cache.jsonl").read_bytes()
    head, _, body = data.partition(b"\n")
    assert CACHE_FORMAT_VERSION == 5
    assert json.loads(head) == {"format": 5, "sha256": hashlib.sha256(body).hexdigest()}
    fields = [line.split("\t") for line in body.decode("utf-8").splitlines()]
    assert [json.loads(f[3]) for f in fields] == ['quote"d', None]
    assert [len(f) for f in fields] == [6, 5], "a record's metrics are a field of their own"


def test_a_version_3_cache_is_ignored_and_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = make(root, "a_seed0", "afib", 0)
    state = metrics_file_state(run)
    assert state is not None
    old = tmp_path / "old.jsonl"
    record = json.dumps({"run_dir": str(run)})
    old.write_text(f'{{"format": 3}}\n"{run}"\t{state.mtime_ns}\t{state.size}\t{record}\n')
    cache = RunCache.load(old)
    assert len(cache) == 0
    assert sensor_digests(root, old) == reference_digests(root)


def test_a_dataset_field_that_disagrees_with_its_record_is_damage(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make(root, "a_seed0", "afib", 0)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    text = cache_file.read_text(encoding="utf-8")
    cache_file.write_text(text.replace('\t"afib"\t', '\t"rhythm"\t', 1), encoding="utf-8")
    cache = RunCache.load(cache_file)
    records, _ = discover_runs(root, reader=cache.read)
    assert [r.dataset for r in records] == ["afib"] and cache.damaged == 1 and cache.misses == 1
    assert cache.dataset_digests() == reference_digests(root)


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


# --- a warm refresh decodes and writes back what it must, and no more ---------------------------


def reference_line(record: RunRecord) -> str:
    """A saved line encoded from scratch as the format defines it (not by the cache's code)."""
    info = os.stat(record.run_dir / METRICS_FILENAME)
    data = {**record._asdict(), "suspect": list(record.suspect)}
    del data["run_dir"], data["metrics"]
    fields = [json.dumps(str(record.run_dir)), str(info.st_mtime_ns), str(info.st_size)]
    return "\t".join(
        [*fields, json.dumps(record.dataset), json.dumps(data), json.dumps(record.metrics)]
    )


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


def test_a_warm_save_writes_the_same_bytes_and_re_encodes_a_changed_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    runs = odd_runs(root)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    before = cache_file.read_bytes()
    lines = before.decode("utf-8").splitlines()
    expected = sorted(reference_line(read_run(run)) for run in runs)  # type: ignore[arg-type]
    assert [line for line in lines if not line.endswith('"')] == [lines[0], *expected]

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
    after = cache_file.read_text(encoding="utf-8").splitlines()
    changed = reference_line(read_run(root / "b_seed1"))  # type: ignore[arg-type]
    assert [line for line in after[1:] if line not in lines] == [changed]
    assert [line for line in lines[1:] if line not in after] == [
        line for line in lines if line.startswith(json.dumps(str(root / "b_seed1")))
    ]


def rewritten_by_another_tool(cache_file: Path, edit) -> str:
    """Apply ``edit`` to the fields of the cache's one record line; the header is kept as it was."""
    header, line = cache_file.read_text(encoding="utf-8").splitlines()
    fields = line.split("\t")
    edit(fields)
    text = f"{header}\n{chr(9).join(fields)}\n"
    cache_file.write_text(text, encoding="utf-8")
    return text


def test_a_line_another_tool_rewrote_is_checked_and_encoded_again(tmp_path: Path) -> None:
    """The checksum fails: the texts are decoded, and saved as the cache encodes them."""
    root = tmp_path / "runs"
    run = make(root, "a_seed0", "afib", 0)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    before = cache_file.read_text(encoding="utf-8")

    def compact(fields: list[str]) -> None:
        fields[4:] = [json.dumps(json.loads(f), separators=(",", ":")) for f in fields[4:]]

    edited = rewritten_by_another_tool(cache_file, compact)
    assert RunCache.load(cache_file).read_encoded([str(run)])[0].metrics == '{"f1": 0.5}'
    cache, records = warm_refresh(root, cache_file)
    assert cache.hits == 1 and same_record(records[0], read_run(run))  # type: ignore[arg-type]
    assert edited != before and cache_file.read_text(encoding="utf-8") == before


def test_a_hit_holds_the_looked_up_path_and_converts_foreign_values(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = make(root, "a_seed0", "afib", 0)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    cache = RunCache.load(cache_file)
    record = cache.read(run)
    assert record.run_dir is run, "no second Path is parsed for a hit"
    assert isinstance(record, RunRecord) and same_record(record, read_run(run))  # type: ignore[arg-type]

    # A line another tool wrote: a null (NaN) and an integer metric, a note set aside.
    def foreign_values(fields: list[str]) -> None:
        data = json.loads(fields[4])
        data.update(suspect=["x"])
        fields[4], fields[5] = json.dumps(data), json.dumps({"f1": None, "auroc": 1})

    rewritten_by_another_tool(cache_file, foreign_values)
    foreign = RunCache.load(cache_file).read(run)
    assert isinstance(foreign, RunRecord) and foreign.run_dir == run
    assert foreign.suspect == ("x",)
    assert math.isnan(foreign.metrics["f1"]) and foreign.metrics["auroc"] == 1.0
    assert type(foreign.metrics["auroc"]) is float
    encoded = RunCache.load(cache_file).read_encoded([str(run)])[0]
    assert encoded.metrics == '{"f1": NaN, "auroc": 1.0}', "encoded again, not the foreign text"


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
    cache_file.write_text(good.decode("utf-8") + "damaged line\n", encoding="utf-8")
    cache.save()
    assert cache_file.read_bytes() == good
    cache_file.unlink()
    cache.save()
    assert cache_file.read_bytes() == good


def test_a_cache_with_damaged_lines_is_written_without_them(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make(root, "a_seed0", "afib", 0)
    cache_file = saved(root, tmp_path / "cache.jsonl")
    good = cache_file.read_bytes()
    cache_file.write_bytes(good + b"cut short\tline\n")
    cache = RunCache.load(cache_file)
    assert cache.damaged == 1
    discover_runs(root, recursive=True, reader=cache)
    cache.save()
    assert cache_file.read_bytes() == good
