"""The build's dataset ranges: how the partitions are cut into runs, and that cutting changes
nothing the build writes."""

from __future__ import annotations

import itertools

import dagster as dg
import pytest
from hypothesis import given, strategies as st

from deepecg_assets.build import dataset_ranges
from tests.deepecg_assets.clean_builds import clean_build
from tests.deepecg_assets.output_trees import tree_bytes

MODELS = ("logreg-features", "resnet1d")
DATASETS = ("synthetic-bradycardia", "synthetic-irregular-rr", "synthetic-long-pr")
SEEDS = (1, 2, 3)
#: The one file of the output folder that says when the build ran, not what it found.
SCAN_RECORD = "cache/tree_index.json"


def test_ranges_fill_up_to_the_budget_and_never_split_a_dataset() -> None:
    runs = {"a": 3, "b": 4, "c": 9, "d": 1, "e": 1}
    assert dataset_ranges(list("abcde"), runs, runs_per_range=7) == [["a", "b"], ["c"], ["d", "e"]]
    assert dataset_ranges(list("abcde"), runs, runs_per_range=100) == [list("abcde")]
    assert dataset_ranges([], runs, runs_per_range=7) == []
    assert dataset_ranges(["x", "a"], runs, runs_per_range=3) == [["x", "a"]], "unknown: empty"


@given(
    st.lists(st.integers(min_value=0, max_value=50), max_size=30),
    st.integers(min_value=1, max_value=60),
)
def test_ranges_keep_the_order_and_each_is_within_the_budget_or_one_dataset(
    sizes: list[int], budget: int
) -> None:
    order = [f"k{i}" for i in range(len(sizes))]
    runs = dict(zip(order, sizes, strict=True))
    ranges = dataset_ranges(order, runs, runs_per_range=budget)
    assert [key for keys in ranges for key in keys] == order
    for keys in ranges:
        assert len(keys) == 1 or sum(runs[key] for key in keys) <= budget
    for first, second in itertools.pairwise(ranges):
        # Greedy: the next range's first dataset did not fit into this one.
        assert sum(runs[key] for key in first) + runs[second[0]] > budget


def test_a_build_in_one_run_per_dataset_writes_what_the_two_run_build_writes(
    tmp_path, example_runs
) -> None:
    prefixes = [f"{model}_{dataset}" for model in MODELS for dataset in DATASETS]
    runs = example_runs(tmp_path / "runs", *prefixes, seeds=SEEDS)
    whole = clean_build(runs, tmp_path / "whole")
    ranged = clean_build(runs, tmp_path / "ranged", runs_per_range=len(MODELS) * len(SEEDS))
    assert len(whole.run_ids) == 2
    assert len(ranged.run_ids) == 1 + len(DATASETS)
    ranged_files, whole_files = tree_bytes(tmp_path / "ranged"), tree_bytes(tmp_path / "whole")
    assert ranged_files.keys() == whole_files.keys()
    # The tree index records when each directory was scanned (a stamp younger than its
    # safety window is listed again next time), so it depends on the moment of the build.
    same = [name for name in whole_files if name != SCAN_RECORD]
    assert {name: ranged_files[name] for name in same} == {n: whole_files[n] for n in same}
    # The build reads its outputs back from storage; its runs keep no frame in memory.
    for run in [*whole.runs, *ranged.runs]:
        outputs = [
            e.step_output_data.step_output_handle for e in run.all_events if e.is_successful_output
        ]
        assert outputs
        for handle in outputs:
            with pytest.raises(dg.DagsterInvariantViolationError, match="No outputs found"):
                run.output_for_node(handle.step_key, handle.output_name)
