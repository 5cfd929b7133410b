"""Tests of ranking, Kendall's tau, paired differences, flip tests and rank claims.

Expected values come from the specification (the worked example of
``tests/conftest.py``; the verdict order of docs/statistics.md) and from independent
references (``scipy.stats.kendalltau``, ``scipy.stats.t``, statsmodels' Benjamini-Yekutieli
adjustment). Small frames are built in memory with the long-frame columns of
``runs_to_frame``; the worked example is read from disk through the shared
fixtures in ``tests/conftest.py``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from hypothesis import HealthCheck, given, settings, strategies as st
from statsmodels.stats.multitest import multipletests

from deepecgkit.analysis import ranking
from deepecgkit.analysis.constants import MIN_TEST_GROUPS
from deepecgkit.analysis.ranking import (
    all_flip_tests,
    evaluate_rank_claim,
    flip_test,
    paired_difference,
    rank_distribution,
    rank_within_seed,
    tau_summary,
)
from deepecgkit.analysis.statistics import is_bimodal, kendall_tau, one_sided_p_value
from deepecgkit.rundir.format import LEGACY_SEED

#: Tolerances of the worked example: printed values, and between implementations.
PRINTED = 1e-9
EXACT = 1e-12

#: Long-frame columns of ``runs_to_frame`` (analysis.md section 3.5).
RUN_COLUMNS = [
    "run_dir",
    "model",
    "dataset",
    "seed",
    "averaging",
    "multi_label",
    "n_train",
    "n_val",
    "n_test",
    "n_test_groups",
    "metric",
    "value",
]
RANK_COLUMNS = ["dataset", "seed", "model", "value", "rank", "rank_average"]
TAU_COLUMNS = [
    "dataset",
    "n_models",
    "n_seeds",
    "n_pairs",
    "tau_mean",
    "tau_min",
    "tau_max",
    "min_attainable_p",
    "tau_se",
    "tau_lower",
    "tau_upper",
    "kendall_w",
    "p_kendall_w",
    "n_permutations",
]
SUMMARY_KEYS = [
    "mean",
    "std",
    "sem",
    "lower_ci",
    "upper_ci",
    "t_stat",
    "p_value",
    "n",
    "n_wins",
    "excludes_zero",
    "correction_applied",
    "correction_note",
]
DIFFERENCE_KEYS = [
    *SUMMARY_KEYS,
    "model_a",
    "model_b",
    "dataset",
    "metric",
    "seeds",
    "averaging",
    "n_train",
    "n_test",
    "n_test_groups",
    "bimodal",
    "testable",
    "reason",
]
FLIP_KEYS = [
    "model_a",
    "model_b",
    "dataset_1",
    "dataset_2",
    "metric",
    "difference_1",
    "difference_2",
    "mean_1",
    "mean_2",
    "lower_1",
    "upper_1",
    "lower_2",
    "upper_2",
    "wins_1",
    "wins_2",
    "n_1",
    "n_2",
    "n_seeds",
    "averaging_1",
    "averaging_2",
    "comparable_magnitudes",
    "verdict",
    "p_flip",
    "reason",
    "p_reversal",
    "correction_applied_1",
    "correction_applied_2",
    "correction_note_1",
    "correction_note_2",
]
FLIP_COLUMNS = [
    *FLIP_KEYS[: FLIP_KEYS.index("p_reversal")],
    "p_adjusted",
    "fdr_family",
    "fdr_family_size",
    "p_reversal",
    "q_reversal",
    "fdr_method",
    "survives_fdr",
    *FLIP_KEYS[FLIP_KEYS.index("correction_applied_1") :],
]
FLIP_COLUMNS.remove("difference_1")
FLIP_COLUMNS.remove("difference_2")
CLAIM_KEYS = [
    "model",
    "dataset_best",
    "dataset_worst",
    "metric",
    "components",
    "n_components",
    "n_supported",
    "n_supported_in_direction",
    "n_untestable",
    "verdict",
    "p_claim",
    "p_claim_directional",
]
FLOAT_FLIP_COLUMNS = [
    "mean_1",
    "mean_2",
    "lower_1",
    "upper_1",
    "lower_2",
    "upper_2",
    "p_flip",
    "p_adjusted",
    "p_reversal",
    "q_reversal",
]

SIZES = {"n_train": 800, "n_val": 100, "n_test": 200}
DEFAULT_GROUPS = 180
#: Seed-to-seed level of model B in the verdict frames: a small, unimodal spread.
B_LEVELS = (0.70, 0.71, 0.69, 0.72, 0.70, 0.71)
#: A base that collapses on two of five seeds (gap 0.49 >= MIN_COLLAPSE_GAP).
COLLAPSING_LEVELS = (0.30, 0.31, 0.80, 0.81, 0.82)


# --- frame builders ---------------------------------------------------------------------------


def run_row(
    model: str,
    dataset: str,
    seed: float | None,
    value: float,
    *,
    metric: str = "f1",
    averaging: str = "macro",
    n_test_groups: float | None = DEFAULT_GROUPS,
    run_dir: str | None = None,
    sizes: Mapping[str, float | None] = SIZES,
) -> dict[str, Any]:
    """One long-frame row; ``None`` sizes become NaN like unknown sizes in ``runs_to_frame``."""
    seed_text = "legacy" if seed is None else str(seed)
    return {
        "run_dir": run_dir or f"/runs/{model}_{dataset}_seed{seed_text}",
        "model": model,
        "dataset": dataset,
        "seed": math.nan if seed is None else seed,
        "averaging": averaging,
        "multi_label": False,
        "n_train": math.nan if sizes["n_train"] is None else sizes["n_train"],
        "n_val": math.nan if sizes["n_val"] is None else sizes["n_val"],
        "n_test": math.nan if sizes["n_test"] is None else sizes["n_test"],
        "n_test_groups": math.nan if n_test_groups is None else n_test_groups,
        "metric": metric,
        "value": value,
    }


def frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=RUN_COLUMNS)


def scores_frame(
    scores: Mapping[tuple[str, str], Sequence[float]],
    *,
    metric: str = "f1",
    seeds: Sequence[int] | None = None,
    groups: Mapping[str, float | None] | None = None,
) -> pd.DataFrame:
    """A frame from {(dataset, model): per-seed values}; seeds default to 0..n-1."""
    rows = []
    for (dataset, model), values in scores.items():
        for seed, value in zip(seeds or range(len(values)), values, strict=True):
            group = (groups or {}).get(dataset, DEFAULT_GROUPS)
            rows.append(run_row(model, dataset, seed, value, metric=metric, n_test_groups=group))
    return frame(rows)


def pair_frame(
    differences_1: Sequence[float],
    differences_2: Sequence[float],
    *,
    base_1: Sequence[float] = B_LEVELS,
    base_2: Sequence[float] = B_LEVELS,
    groups: Mapping[str, float | None] | None = None,
) -> pd.DataFrame:
    """Models ``a`` and ``b`` on ``d1``/``d2`` with ``a - b`` equal to the given differences."""
    scores: dict[tuple[str, str], list[float]] = {}
    for dataset, differences, base in (
        ("d1", differences_1, base_1),
        ("d2", differences_2, base_2),
    ):
        levels = list(base[: len(differences)])
        scores[(dataset, "b")] = levels
        scores[(dataset, "a")] = [b + d for b, d in zip(levels, differences, strict=True)]
    return scores_frame(scores, groups=groups)


POSITIVE = (0.04, 0.05, 0.03, 0.04, 0.05)
NEGATIVE = tuple(-d for d in POSITIVE)


# --- the worked example: ranks ------------------------------------------------------------------


def test_column_constants_are_the_contract() -> None:
    """The library's lists, which the CLI and LaTeX tests build their frames from."""
    assert list(ranking.FLIP_COLUMNS) == FLIP_COLUMNS
    assert list(ranking.TAU_COLUMNS) == TAU_COLUMNS


def test_worked_example_rank_within_seed(worked_example_frame: pd.DataFrame) -> None:
    ranks = rank_within_seed(worked_example_frame)
    assert list(ranks.columns) == RANK_COLUMNS
    assert list(ranks.index) == list(range(len(ranks))) and len(ranks) == 30
    assert pd.api.types.is_integer_dtype(ranks["seed"]) and pd.api.types.is_integer_dtype(
        ranks["rank"]
    )
    for (dataset, seed), block in ranks.groupby(["dataset", "seed"], sort=True):
        order = block["model"].tolist()
        if dataset == "afib":
            expected = ["cnn", "resnet", "lstm"]
        elif seed == 2:
            expected = ["lstm", "resnet", "cnn"]
        else:
            expected = ["resnet", "lstm", "cnn"]
        assert order == expected, (dataset, seed)
        assert block["rank"].tolist() == [1, 2, 3]
        assert block["rank_average"].tolist() == [1.0, 2.0, 3.0]
    assert ranks[["dataset", "seed"]].apply(tuple, axis=1).is_monotonic_increasing
    row = ranks[(ranks["dataset"] == "ptbxl") & (ranks["seed"] == 2) & (ranks["model"] == "lstm")]
    assert row["value"].item() == pytest.approx(0.66, abs=EXACT)


def test_worked_example_rank_distribution(worked_example_frame: pd.DataFrame) -> None:
    distribution = rank_distribution(worked_example_frame)
    assert list(distribution.columns) == [
        "dataset",
        "model",
        "n_seeds",
        "n_models",
        "rank_1",
        "rank_2",
        "rank_3",
        "mode_rank",
        "mode_fraction",
        "top1_fraction",
        "mean_value",
        "std_value",
    ]
    assert distribution[["dataset", "model"]].values.tolist() == [
        ["afib", "cnn"],
        ["afib", "lstm"],
        ["afib", "resnet"],
        ["ptbxl", "cnn"],
        ["ptbxl", "lstm"],
        ["ptbxl", "resnet"],
    ]
    assert (distribution["n_seeds"] == 5).all() and (distribution["n_models"] == 3).all()
    ptbxl = distribution[distribution["dataset"] == "ptbxl"].set_index("model")
    expected = {
        "cnn": ([0, 0, 5], 3, 1.0, 0.0, 0.61),
        "lstm": ([1, 4, 0], 2, 0.8, 0.2, 0.64),
        "resnet": ([4, 1, 0], 1, 0.8, 0.8, 0.664),
    }
    for model, (counts, mode, mode_fraction, top1, mean) in expected.items():
        row = ptbxl.loc[model]
        assert [row["rank_1"], row["rank_2"], row["rank_3"]] == counts
        assert row["mode_rank"] == mode
        assert row["mode_fraction"] == pytest.approx(mode_fraction, abs=EXACT)
        assert row["top1_fraction"] == pytest.approx(top1, abs=EXACT)
        assert row["mean_value"] == pytest.approx(mean, abs=EXACT)
    assert ptbxl.loc["resnet", "std_value"] == pytest.approx(0.0114017543, abs=PRINTED)
    afib = distribution[distribution["dataset"] == "afib"].set_index("model")
    assert afib.loc["cnn", ["rank_1", "rank_2", "rank_3"]].tolist() == [5, 0, 0]
    assert afib.loc["resnet", "mode_rank"] == 2 and afib.loc["lstm", "top1_fraction"] == 0.0


def test_worked_example_tau_summary(worked_example_frame: pd.DataFrame) -> None:
    taus = tau_summary(worked_example_frame)
    assert list(taus.columns) == TAU_COLUMNS
    assert taus["dataset"].tolist() == ["afib", "ptbxl"]
    assert taus["n_models"].tolist() == [3, 3] and taus["n_seeds"].tolist() == [5, 5]
    assert taus["n_pairs"].tolist() == [10, 10]
    afib, ptbxl = taus.iloc[0], taus.iloc[1]
    assert afib["tau_mean"] == afib["tau_min"] == afib["tau_max"] == pytest.approx(1.0, abs=EXACT)
    assert ptbxl["tau_mean"] == pytest.approx(0.7333333333, abs=PRINTED)
    assert ptbxl["tau_min"] == pytest.approx(0.3333333333, abs=PRINTED)
    assert ptbxl["tau_max"] == pytest.approx(1.0, abs=EXACT)
    assert taus["min_attainable_p"].tolist() == pytest.approx([1 / 3, 1 / 3], abs=PRINTED)


def test_ranks_computed_once_give_the_distribution_and_the_tau_summary(
    worked_example_frame: pd.DataFrame,
) -> None:
    """What the platform's dataset step does: rank the seeds once, for both frames."""
    ranks = rank_within_seed(worked_example_frame)
    pd.testing.assert_frame_equal(
        ranking.distribution_of_ranks(ranks), rank_distribution(worked_example_frame)
    )
    options = {"confidence_level": 0.9, "n_permutations": 50, "seed": 7}
    pd.testing.assert_frame_equal(
        ranking.tau_of_ranks(ranks, **options), tau_summary(worked_example_frame, **options)
    )
    with pytest.raises(ValueError, match="n_permutations must be at least 1"):
        ranking.tau_of_ranks(ranks, n_permutations=0)
    assert ranking.tau_of_ranks(ranks.iloc[:0]).columns.tolist() == TAU_COLUMNS


def _scipy_taus(per_seed: pd.DataFrame) -> list[float]:
    """tau-b of every unordered seed pair; ``per_seed`` is models x seeds (higher is better)."""
    columns = sorted(per_seed.columns)
    return [
        float(scipy.stats.kendalltau(per_seed[s], per_seed[t], variant="b").statistic)
        for s, t in itertools.combinations(columns, 2)
    ]


def _per_seed_table(runs: pd.DataFrame, dataset: str) -> pd.DataFrame:
    rows = runs[(runs["dataset"] == dataset) & (runs["metric"] == "f1")]
    return rows.pivot_table(index="model", columns="seed", values="value", aggfunc="mean")


def test_worked_example_tau_matches_scipy_kendalltau_b(worked_example_frame: pd.DataFrame) -> None:
    """Recomputed by scipy from the raw F1 values, the per-pair taus give the same summary."""
    taus = tau_summary(worked_example_frame).set_index("dataset")
    for dataset in ("afib", "ptbxl"):
        reference = _scipy_taus(_per_seed_table(worked_example_frame, dataset))
        assert len(reference) == taus.loc[dataset, "n_pairs"]
        assert taus.loc[dataset, "tau_mean"] == pytest.approx(np.mean(reference), abs=PRINTED)
        assert taus.loc[dataset, "tau_min"] == pytest.approx(min(reference), abs=PRINTED)
        assert taus.loc[dataset, "tau_max"] == pytest.approx(max(reference), abs=PRINTED)
    ptbxl = _scipy_taus(_per_seed_table(worked_example_frame, "ptbxl"))
    assert sorted(ptbxl) == pytest.approx([1 / 3] * 4 + [1.0] * 6, abs=PRINTED)


# --- the worked example: paired differences, flips, claims --------------------------------------


def test_worked_example_paired_difference_with_nadeau_bengio(
    worked_example_frame: pd.DataFrame,
) -> None:
    afib = paired_difference(worked_example_frame, "cnn", "resnet", "afib")
    assert list(afib) == DIFFERENCE_KEYS
    expected_afib = {
        "mean": 0.04,
        "std": 0.0070710678,
        "sem": 0.0047434165,
        "lower_ci": 0.0268301645,
        "upper_ci": 0.0531698355,
        "t_stat": 8.4327404271,
        "p_value": 0.0010829785,
    }
    for key, value in expected_afib.items():
        assert afib[key] == pytest.approx(value, abs=PRINTED), key
    assert afib["n"] == 5 and afib["n_wins"] == 5 and afib["excludes_zero"] is True
    assert afib["seeds"] == [0, 1, 2, 3, 4]
    assert (afib["model_a"], afib["model_b"], afib["dataset"], afib["metric"]) == (
        "cnn",
        "resnet",
        "afib",
        "f1",
    )
    assert afib["averaging"] == "macro"
    assert (afib["n_train"], afib["n_test"], afib["n_test_groups"]) == (800.0, 200.0, 180.0)
    assert afib["bimodal"] is False and afib["testable"] is True and afib["reason"] == ""

    ptbxl = paired_difference(worked_example_frame, "cnn", "resnet", "ptbxl")
    expected_ptbxl = {
        "mean": -0.054,
        "std": 0.0114017543,
        "sem": 0.0076485293,
        "lower_ci": -0.0752357217,
        "upper_ci": -0.0327642783,
        "t_stat": -7.0601808650,
        "p_value": 0.0021228831,
    }
    for key, value in expected_ptbxl.items():
        assert ptbxl[key] == pytest.approx(value, abs=PRINTED), key
    assert ptbxl["n_wins"] == 0

    factor = math.sqrt(1 / 5 + 200 / 800)
    assert factor == pytest.approx(0.6708203932, abs=PRINTED)
    assert afib["sem"] == pytest.approx(afib["std"] * factor, abs=EXACT)
    reference_p = 2 * scipy.stats.t.sf(abs(afib["mean"] / afib["sem"]), 4)
    assert afib["p_value"] == pytest.approx(reference_p, abs=EXACT)


def test_worked_example_paired_difference_uncorrected(worked_example_frame: pd.DataFrame) -> None:
    plain = paired_difference(worked_example_frame, "cnn", "resnet", "afib", correction="none")
    corrected = paired_difference(worked_example_frame, "cnn", "resnet", "afib")
    assert plain["sem"] == pytest.approx(0.0031622777, abs=PRINTED)
    assert plain["lower_ci"] == pytest.approx(0.0312201097, abs=PRINTED)
    assert plain["upper_ci"] == pytest.approx(0.0487798903, abs=PRINTED)
    assert plain["p_value"] == pytest.approx(0.0002249205, abs=PRINTED)
    widening = (corrected["upper_ci"] - corrected["lower_ci"]) / (
        plain["upper_ci"] - plain["lower_ci"]
    )
    assert widening == pytest.approx(1.5, abs=EXACT)
    reference = scipy.stats.ttest_1samp([0.04, 0.04, 0.03, 0.04, 0.05], 0.0)
    assert plain["p_value"] == pytest.approx(reference.pvalue, abs=EXACT)


def test_worked_example_flip_test(worked_example_frame: pd.DataFrame) -> None:
    flip = flip_test(worked_example_frame, "cnn", "resnet", "afib", "ptbxl")
    assert list(flip) == FLIP_KEYS
    assert flip["verdict"] == "supported"
    assert flip["reason"] == "both intervals exclude zero with opposite signs"
    assert flip["p_flip"] == pytest.approx(0.0021228831, abs=PRINTED)
    assert flip["p_flip"] == max(flip["difference_1"]["p_value"], flip["difference_2"]["p_value"])
    assert flip["difference_1"] == paired_difference(worked_example_frame, "cnn", "resnet", "afib")
    assert flip["mean_1"] == pytest.approx(0.04, abs=PRINTED)
    assert flip["mean_2"] == pytest.approx(-0.054, abs=PRINTED)
    assert flip["lower_2"] == pytest.approx(-0.0752357217, abs=PRINTED)
    assert (flip["wins_1"], flip["wins_2"], flip["n_1"], flip["n_2"], flip["n_seeds"]) == (
        5,
        0,
        5,
        5,
        5,
    )
    assert flip["averaging_1"] == flip["averaging_2"] == "macro"
    assert flip["comparable_magnitudes"] is True


def test_worked_example_all_flip_tests(worked_example_frame: pd.DataFrame) -> None:
    flips = all_flip_tests(worked_example_frame)
    assert list(flips.columns) == FLIP_COLUMNS
    assert list(flips.index) == [0, 1, 2]
    assert flips[["model_a", "model_b"]].values.tolist() == [
        ["cnn", "resnet"],
        ["cnn", "lstm"],
        ["lstm", "resnet"],
    ]
    assert (flips["dataset_1"] == "afib").all() and (flips["dataset_2"] == "ptbxl").all()
    assert flips["verdict"].tolist() == ["supported", "supported", "not-reproduced"]
    assert flips["mean_1"].tolist() == pytest.approx([0.04, 0.09, -0.05], abs=PRINTED)
    assert flips["mean_2"].tolist() == pytest.approx([-0.054, -0.03, -0.024], abs=PRINTED)
    assert flips["p_flip"].tolist() == pytest.approx(
        [0.0021228831, 0.0474206556, 0.1595528527], abs=PRINTED
    )
    assert flips["p_adjusted"].tolist() == pytest.approx(
        [0.0116758568, 0.1304068029, 0.2925135633], abs=PRINTED
    )
    assert (flips["fdr_family"] == "testable").all() and (flips["fdr_family_size"] == 3).all()
    by = multipletests(flips["p_flip"], method="fdr_by")[1]
    assert flips["p_adjusted"].tolist() == pytest.approx(list(by), abs=EXACT)

    cnn_lstm, lstm_resnet = flips.iloc[1], flips.iloc[2]
    assert [cnn_lstm["lower_2"], cnn_lstm["upper_2"]] == pytest.approx(
        [-0.0594486474, -0.0005513526], abs=PRINTED
    )
    assert [lstm_resnet["lower_1"], lstm_resnet["upper_1"]] == pytest.approx(
        [-0.0686249600, -0.0313750400], abs=PRINTED
    )
    assert [lstm_resnet["lower_2"], lstm_resnet["upper_2"]] == pytest.approx(
        [-0.0626215390, 0.0146215390], abs=PRINTED
    )
    for row in flips.to_dict("records"):
        single = flip_test(worked_example_frame, row["model_a"], row["model_b"], "afib", "ptbxl")
        assert row["verdict"] == single["verdict"] and row["p_flip"] == pytest.approx(
            single["p_flip"], abs=EXACT
        )
        assert row["p_reversal"] == pytest.approx(single["p_reversal"], abs=EXACT)


def test_worked_example_reversal_p_values(worked_example_frame: pd.DataFrame) -> None:
    """Opposite signs halve the larger component p; the same sign gives 1 - p/2 (>= 0.5)."""
    flips = all_flip_tests(worked_example_frame)
    p_flip = [0.0021228831, 0.0474206556, 0.1595528527]
    expected = [p_flip[0] / 2, p_flip[1] / 2, 1 - p_flip[2] / 2]
    assert flips["p_reversal"].tolist() == pytest.approx(expected, abs=PRINTED)
    by = multipletests(flips["p_reversal"], method="fdr_by")[1]
    assert flips["q_reversal"].tolist() == pytest.approx(list(by), abs=EXACT)
    assert flips["q_reversal"].tolist() == pytest.approx(
        [0.0058379285, 0.0652034014, 1.0], abs=PRINTED
    )
    assert (flips["fdr_method"] == "by").all()
    # Both reversals are nominally supported; only the first survives the FDR adjustment.
    assert flips["survives_fdr"].tolist() == [True, False, False]
    bh = all_flip_tests(worked_example_frame, fdr_method="bh")
    reference = multipletests(bh["p_reversal"], method="fdr_bh")[1]
    assert bh["q_reversal"].tolist() == pytest.approx(list(reference), abs=EXACT)
    assert (bh["fdr_method"] == "bh").all() and bh["survives_fdr"].tolist() == [True, True, False]
    assert bh["p_adjusted"].tolist() == pytest.approx(flips["p_adjusted"].tolist(), abs=EXACT)
    assert (flips["correction_applied_1"] == "nadeau-bengio").all()
    assert (flips["correction_note_1"] == "").all() and (flips["correction_note_2"] == "").all()


def test_worked_example_all_flip_tests_significant_family(
    worked_example_frame: pd.DataFrame,
) -> None:
    flips = all_flip_tests(worked_example_frame, fdr_family="significant")
    assert flips["p_adjusted"].iloc[:2].tolist() == pytest.approx(
        [0.0063686492, 0.0711309834], abs=PRINTED
    )
    assert math.isnan(flips["p_adjusted"].iloc[2])
    assert (flips["fdr_family"] == "significant").all() and (flips["fdr_family_size"] == 2).all()
    assert flips["verdict"].tolist() == ["supported", "supported", "not-reproduced"]


def test_worked_example_claim_supported(worked_example_frame: pd.DataFrame) -> None:
    claim = evaluate_rank_claim(worked_example_frame, "cnn", "afib", "ptbxl")
    assert list(claim) == CLAIM_KEYS
    assert claim["verdict"] == "supported"
    assert claim["n_components"] == 2
    assert claim["n_supported"] == claim["n_supported_in_direction"] == 2
    assert claim["n_untestable"] == 0
    assert claim["p_claim"] == pytest.approx(0.0474206556, abs=PRINTED)
    components = claim["components"]
    assert [c["model_b"] for c in components] == ["lstm", "resnet"]
    assert all(c["model_a"] == "cnn" and c["claimed_direction"] is True for c in components)
    assert list(components[0]) == [
        *FLIP_KEYS[:5],
        *FLIP_KEYS[7:],
        "claimed_direction",
        "p_directional",
    ]
    assert [c["p_directional"] for c in components] == pytest.approx(
        [0.0474206556 / 2, 0.0021228831 / 2], abs=PRINTED
    )
    assert claim["p_claim_directional"] == pytest.approx(0.0474206556 / 2, abs=PRINTED)


def test_worked_example_reverse_claim_not_reproduced(worked_example_frame: pd.DataFrame) -> None:
    claim = evaluate_rank_claim(worked_example_frame, "resnet", "ptbxl", "afib")
    assert claim["verdict"] == "not-reproduced"
    by_opponent = {c["model_b"]: c for c in claim["components"]}
    assert by_opponent["cnn"]["verdict"] == "supported"
    assert by_opponent["cnn"]["claimed_direction"] is True
    assert by_opponent["lstm"]["verdict"] == "not-reproduced"
    assert [by_opponent["lstm"]["mean_1"], by_opponent["lstm"]["mean_2"]] == pytest.approx(
        [0.024, 0.05], abs=PRINTED
    )
    assert claim["n_supported"] == 1 and claim["n_components"] == 2
    assert claim["p_claim"] == pytest.approx(0.1595528527, abs=PRINTED)
    # lstm is better than resnet on afib, not worse: the claimed direction fails there.
    afib = paired_difference(worked_example_frame, "resnet", "lstm", "afib")
    assert afib["mean"] > 0
    assert by_opponent["lstm"]["p_directional"] == pytest.approx(1 - afib["p_value"] / 2, abs=EXACT)
    assert claim["p_claim_directional"] == by_opponent["lstm"]["p_directional"] >= 0.5


def test_opposite_direction_claim_has_a_large_directional_p(
    worked_example_frame: pd.DataFrame,
) -> None:
    """cnn beats resnet on afib and loses on ptbxl; claiming the reverse must not look strong."""
    claim = evaluate_rank_claim(worked_example_frame, "cnn", "ptbxl", "afib", opponents="resnet")
    assert claim["verdict"] == "contradicted"
    assert claim["p_claim"] == pytest.approx(0.0021228831, abs=PRINTED)
    smaller = min(
        paired_difference(worked_example_frame, "cnn", "resnet", dataset)["p_value"]
        for dataset in ("afib", "ptbxl")
    )
    assert claim["p_claim_directional"] == pytest.approx(1 - smaller / 2, abs=EXACT)
    assert claim["p_claim_directional"] >= 0.5


# --- each verdict planted, and the decision order ------------------------------------------------


def verdict_of(runs: pd.DataFrame, **options: Any) -> dict[str, Any]:
    return flip_test(runs, "a", "b", "d1", "d2", **options)


def test_planted_supported() -> None:
    flip = verdict_of(pair_frame(POSITIVE, NEGATIVE))
    assert flip["verdict"] == "supported" and flip["n_seeds"] == 5
    assert flip["reason"] == "both intervals exclude zero with opposite signs"
    assert flip["p_flip"] == max(flip["difference_1"]["p_value"], flip["difference_2"]["p_value"])


def test_planted_suggestive_with_four_shared_seeds() -> None:
    flip = verdict_of(pair_frame(POSITIVE[:4], NEGATIVE[:4]))
    assert flip["verdict"] == "suggestive" and flip["n_seeds"] == 4
    assert flip["reason"] == (
        "both intervals exclude zero with opposite signs, but only 4 shared seed(s)"
    )
    assert math.isfinite(flip["p_flip"])
    relaxed = verdict_of(pair_frame(POSITIVE[:4], NEGATIVE[:4]), min_seeds_for_claim=4)
    assert relaxed["verdict"] == "supported"


def test_planted_unresolved() -> None:
    flip = verdict_of(pair_frame(POSITIVE, (-0.05, 0.03, -0.04, 0.02, -0.01)))
    assert flip["mean_1"] * flip["mean_2"] < 0
    assert flip["difference_2"]["excludes_zero"] is False
    assert flip["verdict"] == "unresolved"
    assert flip["reason"] == "the mean ordering reverses but an interval covers zero"
    assert flip["p_flip"] == flip["difference_2"]["p_value"]


def test_planted_not_reproduced() -> None:
    flip = verdict_of(pair_frame(POSITIVE, (0.05, -0.03, 0.04, -0.02, 0.01)))
    assert flip["mean_1"] > 0 and flip["mean_2"] > 0
    assert flip["verdict"] == "not-reproduced"
    assert flip["reason"] == "the mean ordering does not reverse"
    assert math.isfinite(flip["p_flip"])


def test_planted_contradicted() -> None:
    flip = verdict_of(pair_frame(POSITIVE, (0.03, 0.04, 0.02, 0.03, 0.04)))
    assert flip["verdict"] == "contradicted"
    assert flip["reason"] == "both intervals exclude zero with the same sign"
    assert flip["p_flip"] == max(flip["difference_1"]["p_value"], flip["difference_2"]["p_value"])
    # A small p_flip here is no evidence of a reversal: the directional p-value says so.
    assert flip["p_flip"] < 0.01
    assert flip["p_reversal"] == pytest.approx(1 - flip["p_flip"] / 2, abs=EXACT)


def test_contradicted_rows_never_survive_fdr() -> None:
    """Large same-sign differences everywhere: BY of p_flip is tiny, q_reversal is not."""
    scores = {
        (dataset, model): [level + offset + 0.01 * k for k in range(5)]
        for dataset, offset in (("d1", 0.0), ("d2", 0.03))
        for model, level in (("a", 0.80), ("b", 0.70), ("c", 0.60))
    }
    for (_, model), values in scores.items():
        values[0] += {"a": 0.004, "b": -0.003, "c": 0.002}[model]
    flips = all_flip_tests(scores_frame(scores))
    assert (flips["verdict"] == "contradicted").all()
    assert (flips["p_adjusted"] < 0.05).all()
    assert (flips["p_reversal"] >= 0.5).all() and (flips["q_reversal"] >= 0.5).all()
    assert not flips["survives_fdr"].any()


def test_zero_mean_counts_as_same_sign() -> None:
    flip = verdict_of(pair_frame(POSITIVE, (0.02, -0.02, 0.01, -0.01, 0.0)))
    assert flip["mean_2"] == pytest.approx(0.0, abs=EXACT)
    assert flip["verdict"] == "not-reproduced"


def test_planted_untestable_tiny_test_partition() -> None:
    runs = pair_frame(POSITIVE, NEGATIVE, groups={"d2": MIN_TEST_GROUPS - 1})
    flip = verdict_of(runs)
    assert flip["verdict"] == "untestable" and math.isnan(flip["p_flip"])
    assert flip["difference_2"]["testable"] is False
    assert flip["reason"] == (
        "d2: test partition holds 9 independent unit(s), which cannot support an interval"
    )
    at_threshold = verdict_of(pair_frame(POSITIVE, NEGATIVE, groups={"d2": MIN_TEST_GROUPS}))
    assert at_threshold["verdict"] == "supported"
    unknown = verdict_of(pair_frame(POSITIVE, NEGATIVE, groups={"d2": None}))
    assert unknown["verdict"] == "supported", "unknown group counts do not block the test"
    assert verdict_of(runs, min_test_groups=9)["verdict"] == "supported"


def test_planted_untestable_too_few_shared_seeds() -> None:
    flip = verdict_of(pair_frame(POSITIVE[:2], NEGATIVE[:2]))
    assert flip["verdict"] == "untestable" and math.isnan(flip["p_flip"])
    assert flip["reason"] == "only 2 shared seed(s); at least 3 needed"
    assert flip["difference_1"]["n"] == 2 and math.isfinite(flip["difference_1"]["lower_ci"])


def test_planted_untestable_zero_variance() -> None:
    flip = verdict_of(pair_frame(POSITIVE, (-0.05,) * 5))
    assert flip["verdict"] == "untestable" and math.isnan(flip["p_flip"])
    assert math.isnan(flip["lower_2"]) and math.isnan(flip["upper_2"])
    assert flip["reason"] == (
        "d2: zero variance across seeds; the interval is undefined, not infinitely precise"
    )


def test_planted_untestable_single_seed() -> None:
    flip = verdict_of(pair_frame(POSITIVE[:1], NEGATIVE[:1]), min_seeds=1)
    assert flip["verdict"] == "untestable" and math.isnan(flip["p_flip"])
    assert flip["reason"] == "d1: a single shared seed carries no dispersion"


def test_untestable_reasons_are_checked_in_order() -> None:
    tiny_and_few = pair_frame(POSITIVE[:2], NEGATIVE[:2], groups={"d1": 4, "d2": 3})
    assert verdict_of(tiny_and_few)["reason"].startswith("d1: test partition holds 4 ")
    few_and_flat = pair_frame((0.05, 0.05), NEGATIVE[:2])
    assert verdict_of(few_and_flat)["reason"] == "only 2 shared seed(s); at least 3 needed"
    both_flat = pair_frame((0.05,) * 5, (-0.05,) * 5)
    assert verdict_of(both_flat)["reason"].startswith("d1: zero variance")


def _bimodal_reason(values: Sequence[float]) -> str:
    flagged, reason = is_bimodal(values)
    assert flagged
    return reason


def test_planted_bimodal_beats_supported() -> None:
    """The same paired differences are supported on a unimodal base, bimodal on a collapsing one."""
    collapsing = pair_frame(POSITIVE, NEGATIVE, base_1=COLLAPSING_LEVELS)
    flip = verdict_of(collapsing)
    assert flip["difference_1"]["excludes_zero"] and flip["difference_2"]["excludes_zero"]
    assert flip["verdict"] == "bimodal" and math.isnan(flip["p_flip"])
    a_values = [b + d for b, d in zip(COLLAPSING_LEVELS, POSITIVE, strict=True)]
    assert flip["difference_1"]["bimodal"] is True
    assert flip["reason"] == f"d1: a: {_bimodal_reason(a_values)}"
    unimodal = verdict_of(pair_frame(POSITIVE, NEGATIVE))
    assert unimodal["verdict"] == "supported"
    assert flip["mean_1"] == pytest.approx(unimodal["mean_1"], abs=EXACT)


def test_bimodal_reason_names_the_first_flagged_component() -> None:
    flip = verdict_of(pair_frame(POSITIVE, NEGATIVE, base_2=COLLAPSING_LEVELS))
    assert flip["verdict"] == "bimodal"
    assert flip["reason"].startswith("d2: a: ")


def test_untestable_beats_bimodal() -> None:
    runs = pair_frame(POSITIVE, NEGATIVE, base_1=COLLAPSING_LEVELS, groups={"d2": 5})
    flip = verdict_of(runs)
    assert flip["difference_1"]["bimodal"] is True
    assert flip["verdict"] == "untestable" and math.isnan(flip["p_flip"])
    few = pair_frame(POSITIVE[:2], NEGATIVE[:2], base_1=(0.2, 0.9))
    assert verdict_of(few)["verdict"] == "untestable"


def test_bimodal_beats_every_sign_verdict() -> None:
    for second in (NEGATIVE, (0.03, 0.04, 0.02, 0.03, 0.04), (0.05, -0.03, 0.04, -0.02, 0.01)):
        flip = verdict_of(pair_frame(POSITIVE, second, base_1=COLLAPSING_LEVELS))
        assert flip["verdict"] == "bimodal", second


def test_paired_difference_reasons_for_zero_and_one_shared_seed() -> None:
    disjoint = frame(
        [run_row("a", "d1", 0, 0.8), run_row("a", "d1", 1, 0.7), run_row("b", "d1", 2, 0.6)]
    )
    none_shared = paired_difference(disjoint, "a", "b", "d1")
    assert none_shared["n"] == 0 and none_shared["seeds"] == []
    assert none_shared["reason"] == "no shared seeds"
    assert math.isnan(none_shared["mean"]) and none_shared["averaging"] == "unknown"
    assert none_shared["n_train"] is None and none_shared["n_test_groups"] is None
    one = frame([*disjoint.to_dict("records"), run_row("b", "d1", 1, 0.65)])
    single = paired_difference(one, "a", "b", "d1")
    assert single["n"] == 1 and single["seeds"] == [1]
    assert single["mean"] == pytest.approx(0.05, abs=EXACT)
    assert single["reason"] == "a single shared seed carries no dispersion"


def test_paired_difference_fractional_group_mean_and_reason() -> None:
    rows = [
        run_row(m, "d1", s, v + (0.05 if m == "a" else 0.0), n_test_groups=g)
        for s, (v, g) in enumerate(zip(B_LEVELS[:4], (6, 9, 6, 9), strict=True))
        for m in ("a", "b")
    ]
    result = paired_difference(frame(rows), "a", "b", "d1")
    assert result["n_test_groups"] == pytest.approx(7.5, abs=EXACT)
    assert result["testable"] is False
    assert result["reason"] == (
        "test partition holds 7.5 independent unit(s), which cannot support an interval"
    )


def test_unknown_split_sizes_fall_back_to_uncorrected(worked_example_frame: pd.DataFrame) -> None:
    runs = worked_example_frame.assign(n_train=math.nan)
    unknown = paired_difference(runs, "cnn", "resnet", "afib")
    assert unknown["n_train"] is None
    assert unknown["sem"] == pytest.approx(0.0031622777, abs=PRINTED)
    assert unknown["correction_applied"] == "unavailable"
    assert unknown["correction_note"] == "split sizes unknown: no contributing run records n_train"
    known = paired_difference(worked_example_frame, "cnn", "resnet", "afib")
    assert known["correction_applied"] == "nadeau-bengio" and known["correction_note"] == ""
    plain = paired_difference(runs, "cnn", "resnet", "afib", correction="none")
    assert plain["correction_applied"] == "none" and plain["correction_note"] == ""


def test_every_flip_row_records_the_correction_it_got(worked_example_frame: pd.DataFrame) -> None:
    """Sizes unknown on ptbxl only: afib is corrected, ptbxl falls back and says so."""
    runs = worked_example_frame.copy()
    runs.loc[runs["dataset"] == "ptbxl", "n_test"] = math.nan
    flips = all_flip_tests(runs)
    assert (flips["correction_applied_1"] == "nadeau-bengio").all()
    assert (flips["correction_applied_2"] == "unavailable").all()
    assert (flips["correction_note_1"] == "").all()
    assert (
        flips["correction_note_2"] == "split sizes unknown: no contributing run records n_test"
    ).all()
    assert (all_flip_tests(runs, correction="none")["correction_applied_2"] == "none").all()


def test_strict_correction_makes_uncorrectable_rows_untestable(
    worked_example_frame: pd.DataFrame,
) -> None:
    runs = worked_example_frame.copy()
    runs.loc[runs["dataset"] == "ptbxl", "n_train"] = math.nan
    lenient = flip_test(runs, "cnn", "resnet", "afib", "ptbxl")
    assert lenient["verdict"] == "supported"
    strict = flip_test(runs, "cnn", "resnet", "afib", "ptbxl", strict_correction=True)
    assert strict["verdict"] == "untestable"
    assert math.isnan(strict["p_flip"]) and math.isnan(strict["p_reversal"])
    assert strict["reason"] == (
        "ptbxl: split sizes unknown: no contributing run records n_train; "
        "strict_correction makes the comparison untestable"
    )
    assert strict["difference_2"]["testable"] is False
    grid = all_flip_tests(runs, strict_correction=True)
    assert (grid["verdict"] == "untestable").all() and (grid["fdr_family_size"] == 0).all()
    assert not grid["survives_fdr"].any()
    # Too few test groups is reported first; a requested plain error is never blocked.
    tiny = runs.assign(n_test_groups=5)
    assert flip_test(tiny, "cnn", "resnet", "afib", "ptbxl", strict_correction=True)[
        "reason"
    ].startswith("afib: test partition holds 5 ")
    plain = flip_test(
        runs, "cnn", "resnet", "afib", "ptbxl", correction="none", strict_correction=True
    )
    assert plain["verdict"] == "supported"
    claim = evaluate_rank_claim(runs, "cnn", "afib", "ptbxl", strict_correction=True)
    assert claim["verdict"] == "untestable" and math.isnan(claim["p_claim_directional"])


# --- legacy seeds, duplicates, direction ---------------------------------------------------------


def _with_noise_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """The worked example plus rows that ranking and pairing must ignore or collapse."""
    extra = [
        run_row("cnn", "afib", None, 0.10, run_dir="/legacy/cnn_afib"),
        run_row("resnet", "ptbxl", None, 0.99, run_dir="/legacy/resnet_ptbxl"),
        run_row("lstm", "afib", None, 0.99, run_dir="/noseed/lstm_afib"),
        run_row("cnn", "afib", 3, math.nan, run_dir="/nan/cnn_afib_seed3"),
        run_row("cnn", "afib", 7, math.nan, run_dir="/nan/cnn_afib_seed7"),
        run_row("resnet", "afib", 7, 0.5, run_dir="/nan/resnet_afib_seed7"),
        run_row("lstm", "ptbxl", 1, math.inf, run_dir="/inf/lstm_ptbxl_seed1"),
        run_row("cnn", "afib", 5, 0.2, metric="accuracy"),
    ]
    return pd.concat([runs, frame(extra)], ignore_index=True)


def _duplicated(runs: pd.DataFrame) -> pd.DataFrame:
    """cnn/afib/seed 0 (0.80) replaced by two runs of 0.78 and 0.82: same per-seed value."""
    key = (runs["model"] == "cnn") & (runs["dataset"] == "afib") & (runs["seed"] == 0)
    original = runs[key].iloc[0]
    low = original.copy()
    low["value"], low["run_dir"] = 0.78, "/dup/low"
    high = original.copy()
    high["value"], high["run_dir"] = 0.82, "/dup/high"
    return pd.concat([runs[~key], pd.DataFrame([low, high])], ignore_index=True)


def assert_frames_close(left: pd.DataFrame, right: pd.DataFrame, tol: float = EXACT) -> None:
    assert list(left.columns) == list(right.columns)
    assert len(left) == len(right)
    for column in left.columns:
        a, b = left[column].tolist(), right[column].tolist()
        if pd.api.types.is_float_dtype(left[column]) or pd.api.types.is_float_dtype(right[column]):
            np.testing.assert_allclose(
                np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=0, atol=tol
            )
        else:
            assert a == b, column


def test_legacy_and_missing_seeds_are_never_ranked_or_paired(
    worked_example_frame: pd.DataFrame,
) -> None:
    noisy = _with_noise_rows(worked_example_frame)
    ranks = rank_within_seed(noisy)
    assert ranks["seed"].notna().all()
    assert len(ranks) == 31, "only resnet is ranked at seed 7; NaN and inf rows add nothing"
    assert_frames_close(
        rank_distribution(noisy).iloc[3:], rank_distribution(worked_example_frame).iloc[3:]
    )
    difference = paired_difference(noisy, "cnn", "resnet", "ptbxl")
    reference = paired_difference(worked_example_frame, "cnn", "resnet", "ptbxl")
    assert difference["seeds"] == [0, 1, 2, 3, 4]
    assert difference["mean"] == pytest.approx(reference["mean"], abs=EXACT)
    afib = paired_difference(noisy, "cnn", "resnet", "afib")
    assert afib["seeds"] == [0, 1, 2, 3, 4], "a NaN value leaves seed 7 unpaired"
    assert afib["mean"] == pytest.approx(0.04, abs=EXACT), "the NaN duplicate of seed 3 is ignored"


def test_duplicate_rows_collapse_to_their_mean(worked_example_frame: pd.DataFrame) -> None:
    duplicated = _duplicated(worked_example_frame)
    assert len(duplicated) == len(worked_example_frame) + 1
    ranks = rank_within_seed(duplicated)
    assert len(ranks) == 30
    row = ranks[(ranks["dataset"] == "afib") & (ranks["seed"] == 0) & (ranks["model"] == "cnn")]
    assert row["value"].item() == pytest.approx(0.80, abs=EXACT)
    assert_frames_close(rank_distribution(duplicated), rank_distribution(worked_example_frame))
    assert_frames_close(tau_summary(duplicated), tau_summary(worked_example_frame))
    assert_frames_close(all_flip_tests(duplicated), all_flip_tests(worked_example_frame))
    difference = paired_difference(duplicated, "cnn", "resnet", "afib")
    assert difference["mean"] == pytest.approx(0.04, abs=EXACT)
    assert difference["std"] == pytest.approx(0.0070710678, abs=PRINTED)


def test_ties_share_the_best_min_rank_and_average_rank() -> None:
    runs = scores_frame(
        {("d", "a"): [0.9], ("d", "b"): [0.8], ("d", "c"): [0.8], ("d", "e"): [0.7]}
    )
    ranks = rank_within_seed(runs)
    assert ranks["model"].tolist() == ["a", "b", "c", "e"]
    assert ranks["rank"].tolist() == [1, 2, 2, 4]
    assert ranks["rank_average"].tolist() == [1.0, 2.5, 2.5, 4.0]
    distribution = rank_distribution(runs).set_index("model")
    assert distribution.loc["b", ["rank_1", "rank_2", "rank_3", "rank_4"]].tolist() == [0, 1, 0, 0]
    assert math.isnan(distribution.loc["a", "std_value"]), "one seed has no SD"


def test_rank_distribution_tied_mode_resolves_to_best_rank_and_pads_with_nan() -> None:
    runs = scores_frame(
        {
            ("big", "a"): [0.9, 0.5, 0.9, 0.5],
            ("big", "b"): [0.5, 0.9, 0.5, 0.9],
            ("big", "c"): [0.1, 0.1, 0.1, 0.1],
            ("big", "d"): [0.0, 0.0, 0.0, 0.0],
            ("small", "a"): [0.9, 0.8, 0.7, 0.6],
            ("small", "b"): [0.1, 0.2, 0.3, 0.4],
        }
    )
    distribution = rank_distribution(runs).set_index(["dataset", "model"])
    assert [c for c in distribution.columns if c.startswith("rank_")] == [
        "rank_1",
        "rank_2",
        "rank_3",
        "rank_4",
    ]
    big_a = distribution.loc[("big", "a")]
    assert big_a["mode_rank"] == 1 and big_a["mode_fraction"] == 0.5
    small_a = distribution.loc[("small", "a")]
    assert small_a["n_models"] == 2 and small_a["rank_1"] == 4
    assert math.isnan(small_a["rank_3"]) and math.isnan(small_a["rank_4"])
    counts = distribution.loc[("big", "c"), ["rank_1", "rank_2", "rank_3", "rank_4"]]
    assert counts.sum() == distribution.loc[("big", "c"), "n_seeds"]


def test_lower_is_better_metrics_rank_smallest_first() -> None:
    runs = scores_frame(
        {
            ("d", "calibrated"): [0.02, 0.03],
            ("d", "middle"): [0.05, 0.06],
            ("d", "poor"): [0.2, 0.1],
        },
        metric="ece",
    )
    ranks = rank_within_seed(runs, "ece")
    assert ranks[ranks["seed"] == 0]["model"].tolist() == ["calibrated", "middle", "poor"]
    assert ranks[ranks["seed"] == 0]["rank"].tolist() == [1, 2, 3]
    as_f1 = rank_within_seed(runs.assign(metric="f1"), "f1")
    assert as_f1[as_f1["seed"] == 0]["model"].tolist() == ["poor", "middle", "calibrated"]
    distribution = rank_distribution(runs, "ece").set_index("model")
    assert distribution.loc["calibrated", "top1_fraction"] == 1.0


def _error_claim_frame(metric: str) -> pd.DataFrame:
    """``m`` has a clearly lower value than ``o`` on d1 and a clearly higher one on d2."""
    return (
        pair_frame(NEGATIVE, POSITIVE)
        .replace({"model": {"a": "m", "b": "o"}})
        .assign(metric=metric)
    )


def test_claim_direction_honours_lower_is_better() -> None:
    runs = _error_claim_frame("ece")
    claim = evaluate_rank_claim(runs, "m", "d1", "d2", metric="ece")
    assert claim["verdict"] == "supported"
    assert claim["components"][0]["claimed_direction"] is True
    assert claim["n_supported_in_direction"] == 1

    reverse = evaluate_rank_claim(runs, "m", "d2", "d1", metric="ece")
    component = reverse["components"][0]
    assert component["claimed_direction"] is False
    assert component["verdict"] == "contradicted"
    assert component["reason"] == "the ordering reverses, but opposite to the claimed direction"
    assert reverse["verdict"] == "contradicted" and reverse["n_supported"] == 0
    assert math.isfinite(reverse["p_claim"])

    as_f1 = _error_claim_frame("f1")
    assert evaluate_rank_claim(as_f1, "m", "d1", "d2")["verdict"] == "contradicted"
    assert evaluate_rank_claim(as_f1, "m", "d2", "d1")["verdict"] == "supported"


def test_suggestive_in_wrong_direction_is_relabelled_contradicted() -> None:
    runs = pair_frame(POSITIVE[:4], NEGATIVE[:4])
    right = evaluate_rank_claim(runs, "a", "d1", "d2")
    assert right["components"][0]["verdict"] == "suggestive"
    assert right["verdict"] == "unresolved", "only unanimous support supports a claim"
    wrong = evaluate_rank_claim(runs, "a", "d2", "d1")
    assert wrong["components"][0]["verdict"] == "contradicted"


def test_claim_overall_verdict_order() -> None:
    """Untestable components make the claim untestable unless one contradicts it."""
    scores = {
        ("d1", "m"): [0.80, 0.81, 0.79, 0.82, 0.80],
        ("d2", "m"): [0.60, 0.61, 0.59, 0.62, 0.60],
        ("d1", "weak"): [0.75, 0.77, 0.74, 0.78, 0.75],
        ("d2", "weak"): [0.65, 0.66, 0.63, 0.67, 0.66],
        ("d1", "flat"): [0.70, 0.71, 0.69, 0.72, 0.70],
        ("d2", "flat"): [0.55, 0.56, 0.54, 0.57, 0.55],
    }
    runs = scores_frame(scores)
    claim = evaluate_rank_claim(runs, "m", "d1", "d2")
    verdicts = {c["model_b"]: c["verdict"] for c in claim["components"]}
    assert verdicts == {"flat": "untestable", "weak": "supported"}
    assert claim["verdict"] == "untestable" and claim["n_untestable"] == 1
    assert claim["p_claim"] == pytest.approx(claim["components"][1]["p_flip"], abs=EXACT)
    ghost = evaluate_rank_claim(runs, "m", "d1", "d2", opponents="ghost")
    assert [c["model_b"] for c in ghost["components"]] == ["ghost"]
    assert ghost["components"][0]["verdict"] == "untestable" and ghost["verdict"] == "untestable"
    assert math.isnan(ghost["p_claim"])
    alone = evaluate_rank_claim(runs, "m", "d1", "d2", opponents=[])
    assert alone["n_components"] == 0 and alone["verdict"] == "untestable"


# --- empty inputs, missing columns, parameter validation -----------------------------------------


def test_empty_inputs_give_full_column_lists() -> None:
    empty = pd.DataFrame()
    assert list(rank_within_seed(empty).columns) == RANK_COLUMNS
    assert list(rank_distribution(empty).columns) == [
        "dataset",
        "model",
        "n_seeds",
        "n_models",
        "mode_rank",
        "mode_fraction",
        "top1_fraction",
        "mean_value",
        "std_value",
    ]
    assert list(tau_summary(empty).columns) == TAU_COLUMNS
    assert list(all_flip_tests(empty).columns) == FLIP_COLUMNS
    for result in (rank_within_seed(empty), tau_summary(empty), all_flip_tests(empty)):
        assert len(result) == 0


def test_absent_metric_gives_empty_results(worked_example_frame: pd.DataFrame) -> None:
    assert len(rank_within_seed(worked_example_frame, "auroc")) == 0
    flips = all_flip_tests(worked_example_frame, metric="auroc")
    assert list(flips.columns) == FLIP_COLUMNS and len(flips) == 0
    assert list(tau_summary(worked_example_frame, "auroc").columns) == TAU_COLUMNS


@pytest.mark.parametrize("missing", ["dataset", "model", "seed", "metric", "value"])
def test_missing_columns_raise_value_error_naming_them(
    worked_example_frame: pd.DataFrame, missing: str
) -> None:
    runs = worked_example_frame.drop(columns=[missing])
    calls = [
        lambda: rank_within_seed(runs),
        lambda: rank_distribution(runs),
        lambda: tau_summary(runs),
        lambda: paired_difference(runs, "cnn", "resnet", "afib"),
        lambda: flip_test(runs, "cnn", "resnet", "afib", "ptbxl"),
        lambda: all_flip_tests(runs),
        lambda: evaluate_rank_claim(runs, "cnn", "afib", "ptbxl"),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=missing):
            call()


def test_same_model_or_dataset_raises(worked_example_frame: pd.DataFrame) -> None:
    with pytest.raises(ValueError):
        paired_difference(worked_example_frame, "cnn", "cnn", "afib")
    with pytest.raises(ValueError):
        flip_test(worked_example_frame, "cnn", "resnet", "afib", "afib")
    with pytest.raises(ValueError):
        evaluate_rank_claim(worked_example_frame, "cnn", "afib", "afib")


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1, math.nan, math.inf, True])
def test_confidence_level_checked_even_on_empty_input(level: float) -> None:
    empty = pd.DataFrame()
    with pytest.raises(ValueError):
        all_flip_tests(empty, confidence_level=level)
    with pytest.raises(ValueError):
        paired_difference(empty, "a", "b", "d", confidence_level=level)
    with pytest.raises(ValueError):
        flip_test(empty, "a", "b", "d1", "d2", confidence_level=level)
    with pytest.raises(ValueError):
        evaluate_rank_claim(empty, "a", "d1", "d2", confidence_level=level)


def test_correction_and_fdr_family_checked_up_front() -> None:
    empty = pd.DataFrame()
    with pytest.raises(ValueError, match="bonferroni"):
        all_flip_tests(empty, correction="bonferroni")
    with pytest.raises(ValueError, match="everything"):
        all_flip_tests(empty, fdr_family="everything")
    with pytest.raises(ValueError):
        paired_difference(pair_frame(POSITIVE, NEGATIVE), "a", "b", "d1", correction="bh")
    with pytest.raises(ValueError, match="fdr_method must be one of 'by', 'bh', got 'holm'"):
        all_flip_tests(empty, fdr_method="holm")
    with pytest.raises(ValueError, match="n_permutations"):
        tau_summary(empty, n_permutations=0)
    with pytest.raises(ValueError, match="confidence_level"):
        tau_summary(empty, confidence_level=1.5)


COUNT_CALLS = {
    "paired_difference.min_test_groups": lambda runs, v: paired_difference(
        runs, "a", "b", "d1", min_test_groups=v
    ),
    "flip_test.min_test_groups": lambda runs, v: verdict_of(runs, min_test_groups=v),
    "flip_test.min_seeds": lambda runs, v: verdict_of(runs, min_seeds=v),
    "flip_test.min_seeds_for_claim": lambda runs, v: verdict_of(runs, min_seeds_for_claim=v),
    "all_flip_tests.min_test_groups": lambda runs, v: all_flip_tests(runs, min_test_groups=v),
    "evaluate_rank_claim.min_test_groups": lambda runs, v: evaluate_rank_claim(
        runs, "a", "d1", "d2", min_test_groups=v
    ),
}


@pytest.mark.parametrize("call", COUNT_CALLS.values(), ids=COUNT_CALLS.keys())
def test_integer_count_parameters_are_validated(call: Any) -> None:
    runs = pair_frame(POSITIVE, NEGATIVE)
    for bad_type in (True, False, 2.5, "3"):
        with pytest.raises(TypeError):
            call(runs, bad_type)
    with pytest.raises(ValueError):
        call(runs, -1)
    reference = call(runs, 3)
    same = call(runs, np.int64(3))
    if isinstance(reference, pd.DataFrame):
        assert_frames_close(reference, same)
    else:
        key = "testable" if "testable" in reference else "verdict"
        assert reference[key] == same[key]


# --- filters and grid shape ------------------------------------------------------------------


def test_all_flip_tests_filters_accept_a_bare_string(worked_example_frame: pd.DataFrame) -> None:
    two = all_flip_tests(worked_example_frame, models=["cnn", "resnet"])
    assert two[["model_a", "model_b"]].values.tolist() == [["cnn", "resnet"]]
    assert two["fdr_family_size"].tolist() == [1]
    one_dataset = all_flip_tests(worked_example_frame, datasets="afib")
    assert len(one_dataset) == 0 and list(one_dataset.columns) == FLIP_COLUMNS
    assert len(all_flip_tests(worked_example_frame, models="cnn")) == 0


def test_models_with_rows_on_both_datasets_are_compared_whatever_the_value() -> None:
    rows = pair_frame(POSITIVE, NEGATIVE).to_dict("records")
    rows += [run_row("c", "d1", s, 0.6) for s in range(5)]
    rows += [run_row("c", "d2", 0, math.nan)]
    rows += [run_row("only_d1", "d1", s, 0.5) for s in range(5)]
    flips = all_flip_tests(frame(rows))
    pairs = {(r["model_a"], r["model_b"]): r for r in flips.to_dict("records")}
    assert set(pairs) == {("a", "b"), ("a", "c"), ("b", "c")}
    assert pairs[("a", "c")]["verdict"] == "untestable"
    assert pairs[("a", "c")]["reason"] == "only 0 shared seed(s); at least 3 needed"
    assert flips["fdr_family_size"].tolist() == [1, 1, 1]
    assert flips["model_a"].tolist()[0] == "a" and math.isnan(flips["p_flip"].iloc[-1])


def test_three_datasets_sorted_by_pair_then_p_reversal() -> None:
    rng = np.random.default_rng(7)
    scores = {
        (d, m): list(0.7 + rng.normal(0, 0.03, 5))
        for d in ("z", "y", "x")
        for m in ("m3", "m1", "m2")
    }
    flips = all_flip_tests(scores_frame(scores))
    assert flips[["dataset_1", "dataset_2"]].drop_duplicates().values.tolist() == [
        ["x", "y"],
        ["x", "z"],
        ["y", "z"],
    ]
    assert (flips["model_a"] < flips["model_b"]).all()
    for _, block in flips.groupby(["dataset_1", "dataset_2"]):
        p = block["p_reversal"].to_numpy()
        finite = p[np.isfinite(p)]
        assert (np.diff(finite) >= 0).all()
        assert np.isfinite(p[: len(finite)]).all(), "NaN p_reversal sorts last"


# --- properties: the vectorised grid equals a loop over flip_test ------------------------------

MODEL_POOL = ("m0", "m1", "m2", "m3")
DATASET_POOL = ("d0", "d1", "d2")
GROUP_CHOICES = (180.0, 40.0, 6.0, math.nan)
GROUP_WEIGHTS = (0.6, 0.15, 0.1, 0.15)


@st.composite
def random_corpora(draw: st.DrawFn) -> pd.DataFrame:
    """Small long frames with every kind of irregularity the grid has to survive.

    Structure (which models, datasets and seeds, how often rows go missing,
    are duplicated or NaN) is drawn by hypothesis; the values themselves come
    from a numpy generator seeded by hypothesis, so every example is
    reproducible from its drawn seed.
    """
    n_models = draw(st.integers(2, len(MODEL_POOL)))
    n_datasets = draw(st.integers(2, len(DATASET_POOL)))
    n_seeds = draw(st.integers(3, 8))
    p_missing = draw(st.sampled_from((0.0, 0.1, 0.3)))
    p_duplicate = draw(st.sampled_from((0.0, 0.2)))
    p_nan = draw(st.sampled_from((0.0, 0.1)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    models, datasets = MODEL_POOL[:n_models], DATASET_POOL[:n_datasets]
    base = rng.uniform(0.7, 0.8, size=(n_models, n_datasets))
    spread = rng.choice([0.0, 0.005, 0.02], size=(n_models, n_datasets), p=[0.05, 0.35, 0.6])
    collapsed = rng.random((n_models, n_datasets)) < 0.1
    groups = {d: float(rng.choice(GROUP_CHOICES, p=GROUP_WEIGHTS)) for d in datasets}
    rows: list[dict[str, Any]] = []
    for i, model in enumerate(models):
        for j, dataset in enumerate(datasets):
            averaging = str(rng.choice(["macro", "macro", "binary"]))
            for seed in range(n_seeds):
                if rng.random() < p_missing:
                    continue
                value = base[i, j] + spread[i, j] * rng.standard_normal()
                if collapsed[i, j] and seed < 2:
                    value -= 0.4
                if rng.random() < p_nan:
                    value = float(rng.choice([math.nan, math.inf]))
                sizes = SIZES if rng.random() > 0.1 else {**SIZES, "n_train": None}
                copies = 2 if rng.random() < p_duplicate else 1
                for copy in range(copies):
                    rows.append(
                        run_row(
                            model,
                            dataset,
                            seed,
                            value + 0.01 * copy,
                            averaging=averaging if rng.random() > 0.1 else "binary",
                            n_test_groups=groups[dataset],
                            run_dir=f"/r/{model}_{dataset}_seed{seed}_{copy}",
                            sizes=sizes,
                        )
                    )
            if rng.random() < 0.3:
                rows.append(run_row(model, dataset, LEGACY_SEED, 0.1, run_dir=f"/l/{model}"))
            if rng.random() < 0.1:
                rows.append(run_row(model, dataset, None, 0.95, run_dir=f"/n/{model}"))
    rows += [run_row(models[0], datasets[0], 0, 0.5, metric="ece")]
    return frame(rows)


def loop_flip_tests(runs: pd.DataFrame, **options: Any) -> pd.DataFrame:
    """The straightforward grid: one ``flip_test`` call per (dataset pair, model pair).

    The FDR columns come from statsmodels' ``multipletests``, an independent reference.
    """
    fdr_family = options.pop("fdr_family", "testable")
    fdr_method = options.pop("fdr_method", "by")
    metric_rows = runs[runs["metric"] == "f1"]
    datasets = sorted(metric_rows["dataset"].dropna().unique())
    rows = []
    for d1, d2 in itertools.combinations(datasets, 2):
        on_1 = set(metric_rows.loc[metric_rows["dataset"] == d1, "model"])
        on_2 = set(metric_rows.loc[metric_rows["dataset"] == d2, "model"])
        for a, b in itertools.combinations(sorted(on_1 & on_2), 2):
            flip = flip_test(runs, a, b, d1, d2, **options)
            del flip["difference_1"], flip["difference_2"]
            rows.append(flip)
    if not rows:
        return pd.DataFrame(columns=FLIP_COLUMNS)
    flips = pd.DataFrame(rows)
    in_family = np.isfinite(flips["p_flip"].to_numpy(dtype=float))
    if fdr_family == "significant":
        in_family &= flips["verdict"].isin(["supported", "suggestive", "contradicted"]).to_numpy()
    adjusted = np.full(len(flips), math.nan)
    q_reversal = np.full(len(flips), math.nan)
    if in_family.any():
        adjusted[in_family] = multipletests(flips["p_flip"][in_family], method="fdr_by")[1]
        method = {"by": "fdr_by", "bh": "fdr_bh"}[fdr_method]
        q_reversal[in_family] = multipletests(flips["p_reversal"][in_family], method=method)[1]
    flips["p_adjusted"] = adjusted
    flips["fdr_family"] = fdr_family
    flips["fdr_family_size"] = int(in_family.sum())
    flips["q_reversal"] = q_reversal
    flips["fdr_method"] = fdr_method
    level = options.get("confidence_level", 0.95)
    flips["survives_fdr"] = [
        verdict == "supported" and q <= 1 - level
        for verdict, q in zip(flips["verdict"], q_reversal, strict=True)
    ]
    flips["_p"] = flips["p_reversal"].fillna(math.inf)
    flips = flips.sort_values(["dataset_1", "dataset_2", "_p", "model_a", "model_b"], kind="stable")
    return flips.drop(columns="_p").reset_index(drop=True).loc[:, FLIP_COLUMNS]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=random_corpora(),
    correction=st.sampled_from(["nadeau-bengio", "none"]),
    fdr_family=st.sampled_from(["testable", "significant"]),
    fdr_method=st.sampled_from(["by", "bh"]),
    strict_correction=st.booleans(),
    confidence_level=st.sampled_from([0.9, 0.95]),
)
def test_all_flip_tests_equals_a_loop_over_flip_test(
    runs: pd.DataFrame,
    correction: str,
    fdr_family: str,
    fdr_method: str,
    strict_correction: bool,
    confidence_level: float,
) -> None:
    options = {
        "correction": correction,
        "confidence_level": confidence_level,
        "strict_correction": strict_correction,
    }
    fdr = {"fdr_family": fdr_family, "fdr_method": fdr_method}
    grid = all_flip_tests(runs, **fdr, **options)
    reference = loop_flip_tests(runs, **fdr, **options)
    assert list(grid.columns) == FLIP_COLUMNS
    assert_frames_close(grid, reference)
    same_sign = (grid["mean_1"] * grid["mean_2"] > 0) & grid["p_reversal"].notna()
    assert (grid.loc[same_sign, "p_reversal"] >= 0.5).all()
    assert (grid["p_reversal"].isna() == grid["p_flip"].isna()).all()


@settings(max_examples=25, deadline=None)
@given(runs=random_corpora(), order_seed=st.integers(0, 2**16))
def test_all_flip_tests_is_invariant_to_row_order(runs: pd.DataFrame, order_seed: int) -> None:
    shuffled = runs.sample(frac=1.0, random_state=order_seed).reset_index(drop=True)
    assert_frames_close(all_flip_tests(shuffled), all_flip_tests(runs))
    assert_frames_close(rank_within_seed(shuffled), rank_within_seed(runs))
    assert_frames_close(tau_summary(shuffled), tau_summary(runs))


def reference_claim(
    runs: pd.DataFrame,
    model: str,
    dataset_best: str,
    dataset_worst: str,
    *,
    opponents: Sequence[str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The claim as a loop over ``flip_test`` of ``model - opponent`` (the one-at-a-time path)."""
    rows = runs[(runs["metric"] == "f1") & runs["model"].notna()]
    on_best = set(rows.loc[rows["dataset"] == dataset_best, "model"])
    on_worst = set(rows.loc[rows["dataset"] == dataset_worst, "model"])
    candidates = set(opponents) if opponents is not None else on_best & on_worst
    components = []
    for opponent in sorted(candidates - {model}):
        flip = flip_test(runs, model, opponent, dataset_best, dataset_worst, **options)
        best, worst = flip.pop("difference_1"), flip.pop("difference_2")
        claimed = flip["mean_1"] > 0 and flip["mean_2"] < 0
        if flip["verdict"] in ("supported", "suggestive") and not claimed:
            flip["verdict"] = "contradicted"
            flip["reason"] = "the ordering reverses, but opposite to the claimed direction"
        flip["claimed_direction"] = claimed
        flip["p_directional"] = (
            math.nan
            if math.isnan(flip["p_flip"])
            else max(
                one_sided_p_value(best["p_value"], best["mean"], direction=1.0),
                one_sided_p_value(worst["p_value"], worst["mean"], direction=-1.0),
            )
        )
        components.append(flip)
    verdicts = [c["verdict"] for c in components]
    finite = [c["p_flip"] for c in components if math.isfinite(c["p_flip"])]
    directional = [c["p_directional"] for c in components if math.isfinite(c["p_directional"])]
    if not verdicts:
        overall = "untestable"
    elif all(v == "supported" for v in verdicts):
        overall = "supported"
    elif "contradicted" in verdicts:
        overall = "contradicted"
    elif any(v in ("untestable", "bimodal") for v in verdicts):
        overall = "untestable"
    elif "not-reproduced" in verdicts:
        overall = "not-reproduced"
    else:
        overall = "unresolved"
    return {
        "model": model,
        "dataset_best": dataset_best,
        "dataset_worst": dataset_worst,
        "metric": "f1",
        "components": components,
        "n_components": len(components),
        "n_supported": verdicts.count("supported"),
        "n_supported_in_direction": sum(
            c["verdict"] == "supported" and c["claimed_direction"] for c in components
        ),
        "n_untestable": sum(v in ("untestable", "bimodal") for v in verdicts),
        "verdict": overall,
        "p_claim": max(finite) if finite else math.nan,
        "p_claim_directional": max(directional) if directional else math.nan,
    }


def assert_claims_close(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    """Same keys in the same order, texts and counts equal, floats within ``EXACT``."""
    assert list(actual) == list(expected)
    for key, value in expected.items():
        if key == "components":
            assert len(actual[key]) == len(value)
            for got, want in zip(actual[key], value, strict=True):
                assert_claims_close(got, want)
        elif isinstance(value, float):
            assert actual[key] == pytest.approx(value, abs=EXACT, nan_ok=True), key
        else:
            assert actual[key] == value, key


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=random_corpora(),
    model=st.sampled_from((*MODEL_POOL, "ghost")),
    datasets=st.permutations(DATASET_POOL).map(lambda order: order[:2]),
    opponents=st.one_of(
        st.none(), st.lists(st.sampled_from((*MODEL_POOL, "ghost")), max_size=3, unique=True)
    ),
    correction=st.sampled_from(["nadeau-bengio", "none"]),
    strict_correction=st.booleans(),
)
def test_evaluate_rank_claim_equals_a_loop_over_flip_test(
    runs: pd.DataFrame,
    model: str,
    datasets: tuple[str, str],
    opponents: list[str] | None,
    correction: str,
    strict_correction: bool,
) -> None:
    """The claim read from paired differences agrees with the one-at-a-time path.

    Datasets may be absent from the corpus, the model or an opponent may have
    no runs, and components may be untestable or bimodal.
    """
    options = {"correction": correction, "strict_correction": strict_correction}
    claim = evaluate_rank_claim(runs, model, *datasets, opponents=opponents, **options)
    assert_claims_close(
        claim, reference_claim(runs, model, *datasets, opponents=opponents, **options)
    )


def brute_force_kendall_floor(first: Sequence[float], second: Sequence[float]) -> float:
    """Smallest two-sided exact-permutation p of tau-b: enumerate every pairing (scipy's tau)."""
    x = np.asarray(first, dtype=float)
    taus = np.array(
        [
            scipy.stats.kendalltau(x, np.asarray(second, dtype=float)[list(order)]).statistic
            for order in itertools.permutations(range(len(x)))
        ]
    )
    extreme = np.abs(taus).max()
    return float(np.mean(np.abs(taus) >= extreme - 1e-12))


def reference_tau_summary(runs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per dataset: tau of every seed pair over the models ranked at every seed, plain loops.

    Also the leave-one-seed-out means of those taus, the rank table (seeds x
    models) and the brute-force Kendall floor of every pair with a defined tau.
    """
    ranks = rank_within_seed(runs)
    result: dict[str, dict[str, Any]] = {}
    for dataset, block in ranks.groupby("dataset", sort=True):
        by_seed = {
            int(seed): dict(zip(rows["model"], rows["rank_average"], strict=True))
            for seed, rows in block.groupby("seed", sort=True)
        }
        common = sorted(set.intersection(*(set(mapping) for mapping in by_seed.values())))
        pairs: dict[tuple[int, int], float] = {}
        floors = []
        if len(common) >= 3:
            for s, t in itertools.combinations(sorted(by_seed), 2):
                first = [by_seed[s][m] for m in common]
                second = [by_seed[t][m] for m in common]
                tau = kendall_tau(
                    dict(zip(common, first, strict=True)), dict(zip(common, second, strict=True))
                )
                if not math.isnan(tau):
                    pairs[(s, t)] = tau
                    floors.append(brute_force_kendall_floor(first, second))
        seeds = sorted({seed for pair in pairs for seed in pair})
        without = [[tau for pair, tau in pairs.items() if seed not in pair] for seed in seeds]
        left_out = [float(np.mean(taus)) if taus else math.nan for taus in without]
        result[str(dataset)] = {
            "taus": list(pairs.values()),
            "left_out": left_out,
            "floors": floors,
            "table": [[by_seed[seed][m] for m in common] for seed in sorted(by_seed)],
        }
    return result


@settings(max_examples=30, deadline=None)
@given(runs=random_corpora(), decimals=st.sampled_from([1, 2, 6]))
def test_tau_summary_equals_kendall_tau_per_seed_pair(runs: pd.DataFrame, decimals: int) -> None:
    """Rounding creates ties (and all-tied seeds whose NaN taus must be ignored)."""
    runs = runs.assign(value=runs["value"].round(decimals))
    summary = tau_summary(runs, n_permutations=99).set_index("dataset")
    reference = reference_tau_summary(runs)
    assert sorted(summary.index) == sorted(reference)
    for dataset, expected in reference.items():
        row, taus = summary.loc[dataset], expected["taus"]
        assert row["n_pairs"] == len(taus)
        if taus:
            assert row["tau_mean"] == pytest.approx(np.mean(taus), abs=EXACT)
            assert row["tau_min"] == pytest.approx(min(taus), abs=EXACT)
            assert row["tau_max"] == pytest.approx(max(taus), abs=EXACT)
        else:
            assert math.isnan(row["tau_mean"]) and math.isnan(row["tau_max"])
        left_out = expected["left_out"]
        if len(left_out) >= 3 and all(np.isfinite(left_out)):
            n = len(left_out)
            se = math.sqrt((n - 1) / n * sum((v - np.mean(left_out)) ** 2 for v in left_out))
            half = scipy.stats.t.ppf(0.975, n - 1) * se
            assert row["tau_se"] == pytest.approx(se, abs=EXACT)
            assert [row["tau_lower"], row["tau_upper"]] == pytest.approx(
                [row["tau_mean"] - half, row["tau_mean"] + half], abs=EXACT
            )
        else:
            assert math.isnan(row["tau_lower"]) and math.isnan(row["tau_upper"])
        if row["n_models"] < 3:
            assert math.isnan(row["min_attainable_p"]) and math.isnan(row["kendall_w"])
            continue
        floors = expected["floors"] or [2 / math.factorial(int(row["n_models"]))]
        assert row["min_attainable_p"] == pytest.approx(min(floors), abs=EXACT)
        table = np.asarray(expected["table"])
        if len(table) >= 2 and (np.ptp(table, axis=1) > 0).any():
            friedman = scipy.stats.friedmanchisquare(*table.T).statistic
            assert row["kendall_w"] == pytest.approx(
                friedman / (len(table) * (table.shape[1] - 1)), abs=1e-9
            )
            assert 1 / 100 <= row["p_kendall_w"] <= 1.0


def test_tau_common_models_drop_a_model_missing_at_one_seed() -> None:
    scores = {("d", m): [0.9 - 0.1 * k, 0.9 - 0.1 * k, 0.9 - 0.1 * k] for k, m in enumerate("abcd")}
    runs = scores_frame(scores)
    runs = runs[~((runs["model"] == "d") & (runs["seed"] == 1))]
    row = tau_summary(runs).iloc[0]
    assert row["n_models"] == 3 and row["n_seeds"] == 3 and row["n_pairs"] == 3
    assert row["min_attainable_p"] == pytest.approx(1 / 3, abs=EXACT)
    two = tau_summary(runs[runs["model"].isin(["a", "b"])]).iloc[0]
    assert two["n_models"] == 2 and two["n_pairs"] == 0
    assert math.isnan(two["tau_mean"]) and math.isnan(two["min_attainable_p"])


def test_mixed_averaging_is_joined_and_marks_incomparable_magnitudes() -> None:
    rows = pair_frame(POSITIVE, NEGATIVE).to_dict("records")
    for row in rows:
        if row["dataset"] == "d2" and row["seed"] == 0:
            row["averaging"] = "binary"
    flip = verdict_of(frame(rows))
    assert flip["averaging_1"] == "macro"
    assert flip["averaging_2"] == "binary+macro"
    assert flip["comparable_magnitudes"] is False
    assert flip["verdict"] == "supported", "averaging does not change the verdict"


def _assert_plain_python(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _assert_plain_python(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _assert_plain_python(item, f"{where}[{index}]")
    else:
        assert type(value) in (float, int, bool, str, type(None)), (where, type(value))


def test_returned_scalars_are_python_types(worked_example_frame: pd.DataFrame) -> None:
    _assert_plain_python(paired_difference(worked_example_frame, "cnn", "lstm", "ptbxl"), "diff")
    _assert_plain_python(flip_test(worked_example_frame, "cnn", "lstm", "afib", "ptbxl"), "flip")
    _assert_plain_python(evaluate_rank_claim(worked_example_frame, "cnn", "afib", "ptbxl"), "claim")


def test_n_models_counts_models_ranked_at_any_seed() -> None:
    runs = scores_frame({("d", "a"): [0.9, 0.8], ("d", "b"): [0.7, 0.9]})
    runs = pd.concat([runs, frame([run_row("c", "d", 0, 0.1)])], ignore_index=True)
    distribution = rank_distribution(runs).set_index("model")
    assert distribution["n_models"].tolist() == [3, 3, 3]
    assert distribution.loc["c", "n_seeds"] == 1 and distribution.loc["c", "rank_3"] == 1
    assert distribution.loc["a", "rank_3"] == 0
    taus = tau_summary(runs).iloc[0]
    assert taus["n_seeds"] == 2 and taus["n_models"] == 2 and taus["n_pairs"] == 0


def test_unusable_rows_are_ignored_and_values_coerced(worked_example_frame: pd.DataFrame) -> None:
    runs = worked_example_frame.assign(value=worked_example_frame["value"].map(repr))
    runs = runs.astype({"value": object})
    extra = [
        run_row("cnn", "afib", 9, 0.5) | {"value": "not a number"},
        run_row("resnet", "afib", 9, 0.5) | {"model": None},
        run_row("lstm", "afib", 9, 0.5) | {"dataset": None},
        run_row("lstm", "ptbxl", 9, 0.5) | {"metric": None},
    ]
    runs = pd.concat([runs, frame(extra)], ignore_index=True)
    assert_frames_close(rank_within_seed(runs), rank_within_seed(worked_example_frame))
    assert_frames_close(all_flip_tests(runs), all_flip_tests(worked_example_frame))


def test_temperature_scaled_errors_are_lower_is_better() -> None:
    runs = scores_frame(
        {("d", "good"): [0.01], ("d", "bad"): [0.3], ("d", "mid"): [0.1]}, metric="brier_temp"
    )
    assert rank_within_seed(runs, "brier_temp")["model"].tolist() == ["good", "mid", "bad"]


def test_claim_component_with_a_nan_mean_is_not_in_the_claimed_direction(
    worked_example_frame: pd.DataFrame,
) -> None:
    claim = evaluate_rank_claim(worked_example_frame, "cnn", "afib", "ptbxl", opponents=["ghost"])
    (component,) = claim["components"]
    assert math.isnan(component["mean_1"]) and component["claimed_direction"] is False
