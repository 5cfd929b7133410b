"""Per-dataset paired differences combine into exactly the flip grid and the rank claims.

This is the property the partitioned platform rests on: a dataset's paired
differences depend on that dataset's runs only, and the flip grid and every
rank claim are combines of them, so recomputing one dataset and combining
equals a clean computation value for value, whatever order the per-dataset
frames are concatenated in.
"""

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from deepecgkit.analysis.ranking import (
    PAIRED_DIFFERENCE_COLUMNS,
    all_flip_tests,
    evaluate_rank_claim,
    flip_test,
    flip_tests_from_differences,
    paired_difference,
    paired_differences,
    rank_claim_from_differences,
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


def test_an_empty_dataset_frame_concatenates_without_changing_types() -> None:
    """Regression (found by the property test): a one-model dataset's empty frame
    concatenated with the others must keep the numeric columns numeric."""
    runs = corpus(7, n_datasets=3)
    runs = runs[~((runs["dataset"] == "d1") & (runs["model"] != "m0"))]
    combined = flip_tests_from_differences(per_dataset(runs))
    pd.testing.assert_frame_equal(combined, all_flip_tests(runs), check_exact=True)


# --- concatenation in any order ---------------------------------------------------------------

#: Per-seed ``a - b`` of the hand-checkable grid: mean 0.042, SD about 0.0084.
POSITIVE = (0.04, 0.05, 0.03, 0.04, 0.05)
NEGATIVE = tuple(-d for d in POSITIVE)
#: ``c - b`` on the datasets where ``c`` has runs: mean 0.104.
C_OVER_B = (0.10, 0.12, 0.09, 0.11, 0.10)
B_LEVELS = (0.70, 0.71, 0.69, 0.72, 0.70)


def scores_frame(scores: dict[tuple[str, str], tuple[float, ...]]) -> pd.DataFrame:
    """A long runs frame from {(dataset, model): per-seed values}, seeds 0..n-1, known sizes."""
    rows = [
        {
            "run_dir": f"/runs/{model}_{dataset}_seed{seed}",
            "model": model,
            "dataset": dataset,
            "seed": seed,
            "averaging": "macro",
            "multi_label": False,
            "n_train": 800,
            "n_val": 100,
            "n_test": 200,
            "n_test_groups": 150,
            "metric": "f1",
            "value": value,
        }
        for (dataset, model), values in scores.items()
        for seed, value in enumerate(values)
    ]
    return pd.DataFrame(rows, columns=list(RUN_FRAME_COLUMNS))


def hand_checkable_runs() -> pd.DataFrame:
    """a beats b on x and z and trails it on y; c (runs on x and y only) beats both there."""
    scores: dict[tuple[str, str], tuple[float, ...]] = {}
    for dataset, a_minus_b in (("x", POSITIVE), ("y", NEGATIVE), ("z", POSITIVE)):
        scores[(dataset, "b")] = B_LEVELS
        scores[(dataset, "a")] = tuple(b + d for b, d in zip(B_LEVELS, a_minus_b, strict=True))
        if dataset != "z":
            scores[(dataset, "c")] = tuple(b + d for b, d in zip(B_LEVELS, C_OVER_B, strict=True))
    return scores_frame(scores)


def test_hand_checkable_grid_is_the_same_in_every_concatenation_order() -> None:
    runs = hand_checkable_runs()
    parts = {name: paired_differences(runs[runs["dataset"] == name]) for name in "xyz"}
    assert [len(parts[name]) for name in "xyz"] == [3, 3, 1]  # z holds a and b only
    clean = all_flip_tests(runs)
    for order in itertools.permutations("xyz"):
        combined = flip_tests_from_differences(pd.concat([parts[name] for name in order]))
        pd.testing.assert_frame_equal(combined, clean, check_exact=True)
    rows = {
        (r.dataset_1, r.dataset_2, r.model_a, r.model_b): r for r in clean.itertuples(index=False)
    }
    # (x, y) holds three model pairs, (x, z) and (y, z) only (a, b): c has no runs on z.
    assert sorted(rows) == [
        ("x", "y", "a", "b"),
        ("x", "y", "a", "c"),
        ("x", "y", "b", "c"),
        ("x", "z", "a", "b"),
        ("y", "z", "a", "b"),
    ]
    expected = {
        # (mean_1, mean_2, verdict): a - c is POSITIVE - C_OVER_B on x, NEGATIVE - C_OVER_B on y.
        ("x", "y", "a", "b"): (0.042, -0.042, "supported"),
        ("x", "y", "a", "c"): (-0.062, -0.146, "contradicted"),
        ("x", "y", "b", "c"): (-0.104, -0.104, "contradicted"),
        ("x", "z", "a", "b"): (0.042, 0.042, "contradicted"),
        ("y", "z", "a", "b"): (-0.042, 0.042, "supported"),
    }
    for key, (mean_1, mean_2, verdict) in expected.items():
        row = rows[key]
        assert (row.mean_1, row.mean_2) == pytest.approx((mean_1, mean_2), abs=1e-12)
        assert row.verdict == verdict and row.n_seeds == 5
        assert (row.wins_1, row.wins_2) == (5 * (mean_1 > 0), 5 * (mean_2 > 0)), key
    # Within (x, y) the supported row sorts first (smallest p_reversal).
    assert clean.loc[0, ["model_a", "model_b"]].tolist() == ["a", "b"]


def per_dataset_shuffled(runs: pd.DataFrame, order_seed: int, **options: Any) -> pd.DataFrame:
    """Each dataset's differences, concatenated in a random dataset order with rows shuffled.

    The index is kept as concatenated (labels repeat): the combine must not rely on it.
    """
    rng = np.random.default_rng(order_seed)
    names = list(runs["dataset"].unique())
    parts = [
        paired_differences(runs[runs["dataset"] == names[i]], **options)
        for i in rng.permutation(len(names))
    ]
    combined = pd.concat(parts) if parts else paired_differences(runs, **options)
    return combined.iloc[rng.permutation(len(combined))]


@st.composite
def corpora(draw: st.DrawFn, *, max_datasets: int = 5, max_models: int = 5) -> pd.DataFrame:
    """:func:`corpus` of a drawn shape: one dataset or model up, seeds 1 to 7, rows missing."""
    return corpus(
        draw(st.integers(min_value=0, max_value=10_000)),
        n_datasets=draw(st.integers(min_value=1, max_value=max_datasets)),
        n_models=draw(st.integers(min_value=1, max_value=max_models)),
        n_seeds=draw(st.integers(min_value=1, max_value=7)),
        missing=draw(st.sampled_from([0.0, 0.2, 0.5])),
    )


MODEL_CHOICES = ("m0", "m1", "m2", "m3", "m4", "ghost")
DATASET_CHOICES = ("d0", "d1", "d2", "d3", "d4", "nowhere")
PER_DATASET_OPTIONS = st.fixed_dictionaries(
    {
        "correction": st.sampled_from(["nadeau-bengio", "none"]),
        "strict_correction": st.booleans(),
        "min_test_groups": st.sampled_from([0, 10, 200]),  # the corpus holds 120 test groups
        "confidence_level": st.sampled_from([0.9, 0.95]),
    }
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=corpora(),
    order_seed=st.integers(min_value=0, max_value=2**32 - 1),
    options=PER_DATASET_OPTIONS,
    models=st.one_of(st.none(), st.lists(st.sampled_from(MODEL_CHOICES), max_size=4)),
    datasets=st.one_of(st.none(), st.lists(st.sampled_from(DATASET_CHOICES), max_size=4)),
    restrict_in_combine=st.booleans(),
    fdr_family=st.sampled_from(["testable", "significant"]),
    fdr_method=st.sampled_from(["by", "bh"]),
)
def test_property_combine_in_any_dataset_order_equals_all_flip_tests(
    runs: pd.DataFrame,
    order_seed: int,
    options: dict[str, Any],
    models: list[str] | None,
    datasets: list[str] | None,
    restrict_in_combine: bool,
    fdr_family: str,
    fdr_method: str,
) -> None:
    """Every option of all_flip_tests, with the model and dataset selection applied either
    to each dataset's runs or to the combined differences."""
    selection = {"models": models, "datasets": datasets}
    fdr = {"fdr_family": fdr_family, "fdr_method": fdr_method}
    clean = all_flip_tests(runs, **options, **selection, **fdr)
    per_dataset_selection = {} if restrict_in_combine else selection
    differences = per_dataset_shuffled(runs, order_seed, **options, **per_dataset_selection)
    combined = flip_tests_from_differences(
        differences,
        confidence_level=options["confidence_level"],
        **(selection if restrict_in_combine else {}),
        **fdr,
    )
    pd.testing.assert_frame_equal(combined, clean, check_exact=True)


def test_a_dataset_concatenated_twice_is_refused() -> None:
    differences = per_dataset(corpus(8))
    twice = pd.concat([differences, differences[differences["dataset"] == "d1"]])
    with pytest.raises(ValueError, match="twice"):
        flip_tests_from_differences(twice)


def test_a_truncated_dataset_frame_is_refused() -> None:
    differences = per_dataset(corpus(9, missing=0.0))
    with pytest.raises(ValueError, match="missing a model pair"):
        flip_tests_from_differences(differences.drop(index=differences.index[3]))


def test_pairs_must_be_named_in_order() -> None:
    differences = per_dataset(corpus(10, missing=0.0))
    swapped = differences.rename(columns={"model_a": "model_b", "model_b": "model_a"})
    with pytest.raises(ValueError, match="model_a before model_b"):
        flip_tests_from_differences(swapped)


def test_losses_count_the_seeds_where_b_beats_a() -> None:
    """Wins, losses and ties (equal per-seed values) add up to the shared seeds."""
    runs = scores_frame(
        {("d", "a"): (0.7, 0.8, 0.6, 0.5, 0.9), ("d", "b"): (0.7, 0.7, 0.7, 0.7, 0.7)}
    )
    (row,) = paired_differences(runs).itertuples(index=False)
    assert (row.n, row.wins, row.losses) == (5, 2, 2)  # seed 0 is a tie


# --- rank claims from the differences -------------------------------------------------------


def assert_same(actual: Any, expected: Any, where: str = "claim") -> None:
    """Exactly equal, recursively, with NaN equal to NaN and the same Python types."""
    assert type(actual) is type(expected), (where, type(actual), type(expected))
    if isinstance(expected, dict):
        assert list(actual) == list(expected), where
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert len(actual) == len(expected), where
        for i, (got, want) in enumerate(zip(actual, expected, strict=True)):
            assert_same(got, want, f"{where}[{i}]")
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual), where
    else:
        assert actual == expected, (where, actual, expected)


def models_by_dataset(runs: pd.DataFrame) -> dict[str, set[str]]:
    """What each dataset partition knows of itself: the models with rows on it."""
    rows = runs[runs["metric"] == "f1"]
    return {name: set(group["model"]) for name, group in rows.groupby("dataset")}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=corpora(max_datasets=4, max_models=4),
    order_seed=st.integers(min_value=0, max_value=2**32 - 1),
    options=PER_DATASET_OPTIONS,
    model=st.sampled_from(MODEL_CHOICES),
    claim_datasets=st.permutations((*DATASET_CHOICES[:4], "nowhere")).map(lambda d: d[:2]),
    opponents=st.one_of(
        st.none(), st.lists(st.sampled_from(MODEL_CHOICES), max_size=3, unique=True)
    ),
)
def test_property_rank_claim_from_differences_equals_evaluate_rank_claim(
    runs: pd.DataFrame,
    order_seed: int,
    options: dict[str, Any],
    model: str,
    claim_datasets: tuple[str, str],
    opponents: list[str] | None,
) -> None:
    """Untestable components, opponent subsets, models and datasets without runs included."""
    expected = evaluate_rank_claim(runs, model, *claim_datasets, opponents=opponents, **options)
    differences = per_dataset_shuffled(runs, order_seed, **options)
    claim = rank_claim_from_differences(
        differences,
        model,
        dataset_best=claim_datasets[0],
        dataset_worst=claim_datasets[1],
        opponents=opponents,
        correction=options["correction"],
        strict_correction=options["strict_correction"],
        dataset_models=models_by_dataset(runs),
    )
    assert_same(claim, expected)


def test_claim_components_are_the_flip_grid_rows_read_in_the_claimed_order() -> None:
    """m2 against m0 and m1 reads their stored pairs reversed; m3 against m2 directly."""
    runs = corpus(12, missing=0.0)
    differences = per_dataset(runs)
    grid = flip_tests_from_differences(differences).set_index(
        ["model_a", "model_b", "dataset_1", "dataset_2"]
    )
    claim = rank_claim_from_differences(differences, "m2", dataset_best="d0", dataset_worst="d3")
    assert_same(claim, evaluate_rank_claim(runs, "m2", "d0", "d3"))
    assert [c["model_b"] for c in claim["components"]] == ["m0", "m1", "m3"]
    for component in claim["components"]:
        opponent = component["model_b"]
        row = grid.loc[(*sorted(["m2", opponent]), "d0", "d3")]
        sign = 1.0 if opponent > "m2" else -1.0
        assert component["mean_1"] == sign * row["mean_1"]
        assert (component["lower_1"], component["upper_1"]) == (
            (row["lower_1"], row["upper_1"]) if sign > 0 else (-row["upper_1"], -row["lower_1"])
        )
        assert component["p_reversal"] == row["p_reversal"]
        assert component["wins_1"] + (row["wins_1"] if sign < 0 else 0) <= component["n_1"]


def test_a_pair_read_reversed_names_its_bimodal_models_in_the_claimed_order() -> None:
    """Both models collapse on d1: the reason names the claim's model first, as flip_test does."""
    runs = scores_frame(
        {
            ("d1", "a"): (0.30, 0.31, 0.80, 0.81, 0.82),
            ("d1", "b"): (0.80, 0.81, 0.79, 0.30, 0.31),
            ("d2", "a"): (0.70, 0.71, 0.69, 0.72, 0.70),
            ("d2", "b"): (0.75, 0.77, 0.74, 0.78, 0.75),
        }
    )
    (row,) = paired_differences(runs[runs["dataset"] == "d1"]).itertuples(index=False)
    assert row.bimodal and row.reason.startswith("a: ") and row.reason_reversed.startswith("b: ")
    claim = rank_claim_from_differences(
        paired_differences(runs), "b", dataset_best="d1", dataset_worst="d2"
    )
    (component,) = claim["components"]
    assert component["verdict"] == "bimodal"
    assert component["reason"] == flip_test(runs, "b", "a", "d1", "d2")["reason"]
    assert component["reason"].startswith("d1: b: ")
    assert_same(claim, evaluate_rank_claim(runs, "b", "d1", "d2"))


def test_a_single_model_dataset_needs_dataset_models_for_the_default_opponents() -> None:
    """m1 is alone on d1: no paired difference records it there, so only dataset_models can."""
    runs = corpus(13, n_datasets=2, n_models=2, missing=0.0)
    runs = runs[~((runs["dataset"] == "d1") & (runs["model"] == "m0"))]
    expected = evaluate_rank_claim(runs, "m0", "d1", "d0")
    assert [c["model_b"] for c in expected["components"]] == ["m1"]
    assert expected["components"][0]["verdict"] == "untestable"  # m0 has no runs on d1
    differences = per_dataset(runs)
    assert set(differences["dataset"]) == {"d0"}
    unaware = rank_claim_from_differences(differences, "m0", dataset_best="d1", dataset_worst="d0")
    assert unaware["n_components"] == 0 and unaware["verdict"] == expected["verdict"]
    informed = rank_claim_from_differences(
        differences,
        "m0",
        dataset_best="d1",
        dataset_worst="d0",
        dataset_models=models_by_dataset(runs),
    )
    assert_same(informed, expected)
    named = rank_claim_from_differences(
        differences, "m0", dataset_best="d1", dataset_worst="d0", opponents=["m1"]
    )
    assert_same(named, expected)


def test_claim_options_must_match_the_differences() -> None:
    runs = corpus(14, missing=0.0)
    runs.loc[runs["dataset"] == "d1", "n_test"] = math.nan  # no Nadeau-Bengio on d1
    lenient = per_dataset(runs)
    with pytest.raises(ValueError, match="correction='none'"):
        rank_claim_from_differences(
            lenient, "m0", dataset_best="d0", dataset_worst="d1", correction="none"
        )
    with pytest.raises(ValueError, match="strict_correction=True"):
        rank_claim_from_differences(
            lenient, "m0", dataset_best="d0", dataset_worst="d1", strict_correction=True
        )
    strict = per_dataset(runs, strict_correction=True)
    with pytest.raises(ValueError, match="strict_correction=False"):
        rank_claim_from_differences(strict, "m0", dataset_best="d0", dataset_worst="d1")
    with pytest.raises(ValueError, match="metric 'auroc'"):
        rank_claim_from_differences(
            lenient, "m0", dataset_best="d0", dataset_worst="d1", metric="auroc"
        )
    with pytest.raises(ValueError, match="two different datasets"):
        rank_claim_from_differences(lenient, "m0", dataset_best="d0", dataset_worst="d0")
    claim = rank_claim_from_differences(
        strict, "m0", dataset_best="d0", dataset_worst="d1", strict_correction=True
    )
    assert_same(claim, evaluate_rank_claim(runs, "m0", "d0", "d1", strict_correction=True))
    assert claim["verdict"] == "untestable" and claim["n_untestable"] == 3


def test_a_claim_from_no_differences_is_untestable() -> None:
    empty = paired_differences(corpus(15).iloc[:0])
    claim = rank_claim_from_differences(
        empty, "m0", dataset_best="d0", dataset_worst="d1", opponents=["m1"]
    )
    assert_same(claim, evaluate_rank_claim(corpus(15).iloc[:0], "m0", "d0", "d1", opponents="m1"))
    assert claim["verdict"] == "untestable" and claim["n_components"] == 1
