"""Per-dataset paired differences combine into exactly the flip grid of the whole corpus.

This is the property the partitioned platform rests on: a dataset's paired
differences depend on that dataset's runs only, and the flip grid is a
combine of them, so recomputing one dataset and combining equals a clean
computation value for value.
"""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from deepecgkit.analysis.ranking import (
    PAIRED_DIFFERENCE_COLUMNS,
    all_flip_tests,
    flip_tests_from_differences,
    paired_difference,
    paired_differences,
)
from deepecgkit.rundir.records import RUN_FRAME_COLUMNS


def corpus(
    seed: int,
    *,
    n_datasets: int = 4,
    n_models: int = 4,
    n_seeds: int = 6,
    missing: float = 0.1,
) -> pd.DataFrame:
    """A long runs frame with model effects that differ by dataset, and some unusable rows."""
    rng = np.random.default_rng(seed)
    effects = rng.normal(0.0, 0.03, size=(n_datasets, n_models))
    rows = []
    for d in range(n_datasets):
        for m in range(n_models):
            for s in range(n_seeds):
                if rng.random() < missing:
                    continue
                value = 0.7 + effects[d, m] + rng.normal(0.0, 0.01)
                rows.append(
                    {
                        "run_dir": f"/runs/m{m}_d{d}_seed{s}",
                        "model": f"m{m}",
                        "dataset": f"d{d}",
                        "seed": s if rng.random() > 0.03 else math.nan,
                        "averaging": "macro" if rng.random() > 0.1 else "weighted",
                        "multi_label": False,
                        "n_train": 800.0,
                        "n_val": 100.0,
                        "n_test": 200.0 if rng.random() > 0.05 else math.nan,
                        "n_test_groups": 120.0,
                        "metric": "f1",
                        "value": value if rng.random() > 0.03 else math.nan,
                    }
                )
    return pd.DataFrame(rows, columns=list(RUN_FRAME_COLUMNS))


def per_dataset(runs: pd.DataFrame, **options) -> pd.DataFrame:
    parts = [
        paired_differences(runs[runs["dataset"] == name], **options)
        for name in sorted(runs["dataset"].unique())
    ]
    return pd.concat(parts, ignore_index=True)


def test_the_columns_are_the_contract() -> None:
    frame = paired_differences(corpus(0))
    assert tuple(frame.columns) == PAIRED_DIFFERENCE_COLUMNS
    # 4 datasets x C(4, 2) model pairs
    assert len(frame) == 4 * 6


def test_a_corpus_differences_are_its_datasets_differences_concatenated() -> None:
    runs = corpus(1)
    pd.testing.assert_frame_equal(
        per_dataset(runs), paired_differences(runs), check_exact=True, check_dtype=True
    )


@pytest.mark.parametrize("options", [{}, {"correction": "none"}, {"strict_correction": True}])
def test_the_combine_of_per_dataset_differences_is_the_clean_flip_grid(options) -> None:
    runs = corpus(2, n_datasets=5)
    clean = all_flip_tests(runs, **options)
    combined = flip_tests_from_differences(per_dataset(runs, **options))
    assert len(clean) == 10 * 6
    pd.testing.assert_frame_equal(combined, clean, check_exact=True)


def test_a_component_agrees_with_the_one_at_a_time_paired_difference() -> None:
    runs = corpus(3)
    frame = paired_differences(runs)
    row = frame[(frame["dataset"] == "d1") & (frame["model_a"] == "m0")].iloc[0]
    single = paired_difference(runs, row["model_a"], row["model_b"], "d1")
    for column in ("mean", "lower_ci", "upper_ci", "p_value"):
        assert row[column] == pytest.approx(single[column], rel=1e-12, abs=1e-15)
    assert row["n"] == single["n"]
    assert row["correction_applied"] == single["correction_applied"]


def test_dropping_a_dataset_from_the_differences_equals_a_corpus_without_it() -> None:
    runs = corpus(4)
    differences = paired_differences(runs)
    kept = differences[differences["dataset"] != "d2"].reset_index(drop=True)
    pd.testing.assert_frame_equal(
        flip_tests_from_differences(kept),
        all_flip_tests(runs[runs["dataset"] != "d2"]),
        check_exact=True,
    )


def test_a_dataset_with_one_model_has_no_differences() -> None:
    runs = corpus(5)
    alone = runs[(runs["dataset"] == "d0") & (runs["model"] == "m0")]
    frame = paired_differences(alone)
    assert frame.empty and tuple(frame.columns) == PAIRED_DIFFERENCE_COLUMNS
    assert flip_tests_from_differences(frame).empty


def test_differences_of_two_metrics_cannot_be_combined() -> None:
    runs = corpus(6)
    other = runs.assign(metric="auroc")
    mixed = pd.concat([paired_differences(runs), paired_differences(other, "auroc")])
    with pytest.raises(ValueError, match="one metric"):
        flip_tests_from_differences(mixed)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=10_000),
    n_datasets=st.integers(min_value=2, max_value=4),
    n_models=st.integers(min_value=2, max_value=4),
    n_seeds=st.integers(min_value=1, max_value=7),
    missing=st.sampled_from([0.0, 0.2, 0.5]),
)
def test_property_incremental_combine_equals_clean(
    seed: int, n_datasets: int, n_models: int, n_seeds: int, missing: float
) -> None:
    runs = corpus(seed, n_datasets=n_datasets, n_models=n_models, n_seeds=n_seeds, missing=missing)
    clean = all_flip_tests(runs)
    combined = flip_tests_from_differences(per_dataset(runs)) if not runs.empty else clean
    pd.testing.assert_frame_equal(combined, clean, check_exact=True)


def test_an_empty_dataset_frame_concatenates_without_changing_types() -> None:
    """Regression (found by the property test): a one-model dataset's empty frame
    concatenated with the others must keep the numeric columns numeric."""
    runs = corpus(7, n_datasets=3)
    runs = runs[~((runs["dataset"] == "d1") & (runs["model"] != "m0"))]
    combined = flip_tests_from_differences(per_dataset(runs))
    pd.testing.assert_frame_equal(combined, all_flip_tests(runs), check_exact=True)
