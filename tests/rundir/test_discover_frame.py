"""``discover_run_frame``: the records frame of ``discover_runs`` through a cache, without records.

The platform's discovery asset takes this path on every refresh. Whatever
the cache holds (nothing, a saved file whose checksum matches, a file
another tool edited, which is ignored), the frame and every diagnostic must be those of
``records_to_frame(discover_runs(..., reader=cache))``, under every option.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from deepecgkit.rundir.cache import RunCache
from deepecgkit.rundir.format import CHECKPOINT_KEY, METRICS_FILENAME
from deepecgkit.rundir.read import discover_run_frame, discover_runs, read_run
from deepecgkit.rundir.records import records_to_frame
from deepecgkit.rundir.write import write_run_directory

#: (include_legacy, include_failed, on_duplicate) combinations compared.
OPTIONS = [
    (False, False, "newest"),
    (True, True, "newest"),
    (False, True, "all"),
    (True, False, "all"),
]


def odd_tree(root: Path) -> None:
    """Runs of every kind discovery tells apart: kept, suspect, failed, seedless, duplicate, bad."""
    write_run_directory(
        root / "a_seed0", model="cnn", dataset="afib", metrics={"f1": 0.5, "auroc": 0.75}, seed=0
    )
    write_run_directory(
        root / "deep" / "b_seed1",
        model="cnn",
        dataset='quote"d é',
        metrics={"f1": 1.5, "auroc": math.nan},  # out of range: a suspect note
        seed=1,
        metadata={CHECKPOINT_KEY: "checkpoint.pt"},
    )
    write_run_directory(
        root / "c_seed2", model="rf", dataset="afib", metrics={"f1": 0.25}, seed=2, returncode=3
    )
    write_run_directory(root / "legacy", model="rf", dataset="afib", metrics={"f1": 0.125})
    for name, when in (("dup_one_seed5", 10**9), ("dup_two_seed5", 2 * 10**9)):
        write_run_directory(root / name, model="rf", dataset="afib", metrics={"f1": 0.5}, seed=5)
        os.utime(root / name / METRICS_FILENAME, ns=(when, when))
    bad = root / "half_seed9"
    bad.mkdir()
    (bad / METRICS_FILENAME).write_text("model,dataset,f1\ncnn,afib,0.5")  # no final newline


def assert_same_as_records(root: Path, cache_file: Path | None) -> tuple[RunCache, RunCache]:
    """Both ways, each through its own copy of the saved cache, under every option."""
    caches: tuple[RunCache, RunCache] = (RunCache(), RunCache())
    for include_legacy, include_failed, on_duplicate in OPTIONS:
        options = dict(
            recursive=True,
            include_legacy=include_legacy,
            include_failed=include_failed,
            on_duplicate=on_duplicate,
        )
        by_records, by_frame = (
            RunCache() if cache_file is None else RunCache.load(cache_file) for _ in range(2)
        )
        records, expected = discover_runs(root, reader=by_records, **options)  # type: ignore[arg-type]
        frame, diagnostics = discover_run_frame(root, cache=by_frame, **options)  # type: ignore[arg-type]
        pd.testing.assert_frame_equal(frame, records_to_frame(records), check_exact=True)
        assert diagnostics == expected
        counts = [(c.hits, c.misses, c.damaged) for c in (by_records, by_frame)]
        assert counts[0] == counts[1]
        assert by_records.dataset_digests() == by_frame.dataset_digests()
        caches = (by_records, by_frame)
    return caches


def test_cold_warm_and_edited_caches_give_the_records_frame(tmp_path: Path) -> None:
    root, cache_file = tmp_path / "runs", tmp_path / "cache.jsonl"
    odd_tree(root)
    assert_same_as_records(root, None)
    first = RunCache()
    discover_run_frame(root, cache=first, recursive=True)
    first.save(cache_file)
    warm, _ = assert_same_as_records(root, cache_file)
    assert warm.misses == 0 and warm.hits == 7, "the unreadable run is remembered, too"
    # Another tool rewrote a byte of the body: the checksum fails, and every run is parsed again.
    data = bytearray(cache_file.read_bytes())
    data[-100] ^= 0xFF
    cache_file.write_bytes(bytes(data))
    edited, _ = assert_same_as_records(root, cache_file)
    assert edited.hits == 0 and edited.misses == 7 and edited.damaged == 1


def test_the_record_and_the_frame_say_which_checkpoint_a_run_recorded(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    odd_tree(root)
    record = read_run(root / "deep" / "b_seed1")
    assert record.checkpoint == "checkpoint.pt"  # type: ignore[union-attr]
    frame, _ = discover_run_frame(root, cache=RunCache(), recursive=True)
    assert frame.set_index("run_dir")["checkpoint"].dropna().to_dict() == {
        str(root / "deep" / "b_seed1"): "checkpoint.pt"
    }


def test_a_duplicate_under_the_error_policy_raises_the_same_error(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    odd_tree(root)
    with pytest.raises(ValueError) as by_records:
        discover_runs(root, recursive=True, on_duplicate="error", reader=RunCache())
    with pytest.raises(ValueError, match="duplicate run") as by_frame:
        discover_run_frame(root, cache=RunCache(), recursive=True, on_duplicate="error")
    assert str(by_frame.value) == str(by_records.value)
    with pytest.raises(ValueError, match="Unknown on_duplicate"):
        discover_run_frame(root, cache=RunCache(), on_duplicate="oldest")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(
        st.tuples(
            st.sampled_from(["cnn", "rf"]),
            st.sampled_from(["afib", "007"]),
            st.one_of(st.none(), st.integers(0, 2)),
            st.sampled_from([0, 1]),
            st.floats(min_value=-0.5, max_value=1.5),
        ),
        max_size=7,
    ),
    rewrite=st.integers(0, 6),
)
def test_property_the_frame_path_equals_the_records_path(
    tmp_path_factory: pytest.TempPathFactory,
    runs: list[tuple[str, str, int | None, int, float]],
    rewrite: int,
) -> None:
    folder = tmp_path_factory.mktemp("tree")
    root, cache_file = folder / "runs", folder / "cache.jsonl"
    root.mkdir()
    for number, (model, dataset, seed, returncode, f1) in enumerate(runs):
        write_run_directory(
            root / f"run{number}",
            model=model,
            dataset=dataset,
            metrics={"f1": f1},
            seed=seed,
            returncode=returncode,
        )
    first = RunCache()
    discover_run_frame(root, cache=first, recursive=True)
    first.save(cache_file)
    if rewrite < len(runs):  # one run changed since the save: a miss among hits
        write_run_directory(
            root / f"run{rewrite}", model="cnn", dataset="afib", metrics={"f1": 0.5}, seed=1
        )
    assert_same_as_records(root, cache_file)


def test_odd_values_round_trip_through_the_columns(tmp_path: Path) -> None:
    """Seeds beyond int64, negative ones, names with tabs and line breaks, one not UTF-8."""
    root, cache_file = tmp_path / "runs", tmp_path / "cache.jsonl"
    for name, seed in (("big_seed", 2**70), ("neg_seed", -(2**63)), ("odd\tname\nx", 7)):
        write_run_directory(
            root / name, model="cnn", dataset="afib", metrics={"f1": math.inf}, seed=seed
        )
    shutil.copytree(os.fsencode(root / "neg_seed"), os.path.join(os.fsencode(root), b"caf\xe9"))
    first = RunCache()
    frame, diagnostics = discover_run_frame(root, cache=first, recursive=True)
    assert frame["seed"].tolist() == [-(2**63), 7, 2**70] and frame["seed"].dtype == object
    assert len(diagnostics["unreadable"]) == 1
    first.save(cache_file)
    warm = RunCache.load(cache_file)
    assert len(warm) == 4 and warm.damaged == 0, "a name that is not UTF-8 is kept as bytes"
    again, same = discover_run_frame(root, cache=warm, recursive=True)
    pd.testing.assert_frame_equal(again, frame, check_exact=True)
    assert same == diagnostics and warm.hits == 4 and warm.misses == 0
    assert_same_as_records(root, cache_file)


#: Text whose code-point order differs from a naive one: capitals, accents, beyond the BMP.
_ODD_TEXT = st.sampled_from(["a", "B", "é", "z", "\U0001f600", "a b", ""])


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            _ODD_TEXT,
            _ODD_TEXT,
            st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**65)),
            st.one_of(st.none(), _ODD_TEXT),
            st.floats(0, 10),
        ),
        max_size=12,
    ),
    on_duplicate=st.sampled_from(["newest", "all"]),
)
def test_property_the_arrow_order_is_the_python_order(
    rows: list[tuple[str, str, int | None, str | None, float]], on_duplicate: str
) -> None:
    """Where the one Arrow sort answers, it gives the rules' own order; it declines duplicates."""
    import numpy as np
    import pyarrow as pa

    from deepecgkit.rundir.read import CandidateColumns, _columnar_order, _python_order

    candidates = [f"/runs/{text}{number}" for number, (text, *_) in enumerate(rows)]
    source = pa.table(
        {
            "dataset": pa.array([row[0] for row in rows], pa.string()),
            "model": pa.array([row[1] for row in rows], pa.string()),
            "seed": pa.array([None if r[2] is None else str(r[2]) for r in rows], pa.string()),
            "fingerprint": pa.array([row[3] for row in rows], pa.string()),
            "mtime": pa.array([row[4] for row in rows], pa.float64()),
        }
    )
    # The cache's rows in reverse: each candidate's row is found through ``place``.
    place = np.arange(len(rows))[::-1].copy()
    columns = CandidateColumns(source.take(place), place, np.full(len(rows), None))
    numbers = np.arange(len(rows))
    diagnostics: dict[str, list[str]] = {"duplicate": []}
    expected = _python_order(candidates, columns, numbers, on_duplicate, diagnostics)
    got = _columnar_order(candidates, columns, numbers, on_duplicate)
    if got is not None:
        assert got == expected
        assert not diagnostics["duplicate"], "the Arrow sort answered where runs were dropped"
    keys = [(d, m, s, f) for d, m, s, f, _ in rows]
    plain = all(s is None or abs(s) < 2**63 - 1 for _, _, s, _ in keys)
    if plain and (on_duplicate == "all" or len(set(keys)) == len(keys)):
        assert got is not None, "a plain grid without duplicates is sorted by Arrow"
