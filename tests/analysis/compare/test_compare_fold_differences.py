"""Descriptive matched-fold differences: worked example, design errors, directions, flags."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from deepecgkit.analysis.compare import (
    ComparisonError,
    PairedFoldDifferences,
    paired_fold_differences,
)

WORKED = {  # fold: (inception f1, resnet f1, inception ece, resnet ece)
    0: (0.80, 0.78, 0.05, 0.07),
    1: (0.75, 0.75, 0.04, 0.03),
    2: (0.82, 0.85, np.nan, 0.08),
    3: (0.78, 0.74, 0.06, 0.06),
}


def _worked() -> pd.DataFrame:
    rows = []
    for fold, (inc_f1, res_f1, inc_ece, res_ece) in WORKED.items():
        rows += [
            ("inception", fold, "f1", inc_f1),
            ("resnet", fold, "f1", res_f1),
            ("inception", fold, "ece", inc_ece),
            ("resnet", fold, "ece", res_ece),
        ]
    return pd.DataFrame(rows, columns=["model", "fold", "metric", "value"]).assign(extra="x")


def test_worked_example_summary() -> None:
    result = paired_fold_differences(_worked())
    assert isinstance(result, PairedFoldDifferences)
    summary = result.summary
    assert list(summary.columns) == [
        "model_a", "model_b", "metric", "higher_is_better", "n_folds", "mean_delta",
        "median_delta", "std_delta", "min_delta", "max_delta", "mean_improvement_for_a",
        "wins_a", "ties", "wins_b",
    ]  # fmt: skip
    ece, f1 = summary.to_dict("records")
    assert (ece["model_a"], ece["model_b"], ece["metric"]) == ("inception", "resnet", "ece")
    expected_ece = {
        "higher_is_better": False, "n_folds": 3, "mean_delta": -0.0033333, "median_delta": 0.0,
        "std_delta": 0.0152753, "min_delta": -0.02, "max_delta": 0.01,
        "mean_improvement_for_a": 0.0033333, "wins_a": 1, "ties": 1, "wins_b": 1,
    }  # fmt: skip
    expected_f1 = {
        "higher_is_better": True, "n_folds": 4, "mean_delta": 0.0075, "median_delta": 0.01,
        "std_delta": 0.0298608, "min_delta": -0.03, "max_delta": 0.04,
        "mean_improvement_for_a": 0.0075, "wins_a": 2, "ties": 1, "wins_b": 1,
    }  # fmt: skip
    for row, expected in ((ece, expected_ece), (f1, expected_f1)):
        for key, value in expected.items():
            assert row[key] == pytest.approx(value, abs=5e-8), key
    assert summary["n_folds"].dtype.kind == "i" and summary["wins_a"].dtype.kind == "i"


def test_worked_example_fold_deltas() -> None:
    deltas = paired_fold_differences(_worked()).fold_deltas
    assert list(deltas.columns) == [
        "model_a", "model_b", "metric", "fold", "value_a", "value_b", "delta",
        "improvement_for_a", "outcome",
    ]  # fmt: skip
    ece = deltas[deltas["metric"] == "ece"]
    assert ece["fold"].tolist() == [0, 1, 2, 3]
    assert ece["outcome"].tolist() == ["win_a", "win_b", "unpaired", "tie"]
    np.testing.assert_allclose(ece["delta"], [-0.02, 0.01, np.nan, 0.0], atol=1e-15)
    np.testing.assert_allclose(ece["improvement_for_a"], [0.02, -0.01, np.nan, 0.0], atol=1e-15)
    f1 = deltas[deltas["metric"] == "f1"]
    assert f1["outcome"].tolist() == ["win_a", "tie", "win_b", "win_a"]
    assert f1["delta"].iloc[0] == 0.020000000000000018
    assert not np.signbit(ece["improvement_for_a"].iloc[3])


def test_missing_model_fold_is_a_hard_error_naming_the_pair() -> None:
    frame = _worked()
    missing = frame[~((frame["model"] == "resnet") & (frame["fold"] == 3))]
    with pytest.raises(ComparisonError, match=r'\("resnet", 3\)'):
        paired_fold_differences(missing)


def test_a_missing_value_only_unpairs_that_metric() -> None:
    frame = _worked()
    nan_f1 = (frame["model"] == "resnet") & (frame["fold"] == 3) & (frame["metric"] == "f1")
    frame.loc[nan_f1, "value"] = np.nan
    summary = paired_fold_differences(frame).summary.set_index("metric")
    assert summary.loc["f1", "n_folds"] == 3 and summary.loc["ece", "n_folds"] == 3


def test_a_metric_one_model_never_reports_gives_zero_paired_folds() -> None:
    rows = [(m, f, "f1", 0.5 + 0.1 * i + 0.01 * f) for i, m in enumerate("abc") for f in range(3)]
    rows += [(m, f, "brier", 0.2 + 0.01 * f) for m in "ab" for f in range(3)]
    result = paired_fold_differences(
        pd.DataFrame(rows, columns=["model", "fold", "metric", "value"])
    )
    summary = result.summary.set_index(["model_a", "model_b", "metric"])
    assert summary.index.tolist() == [
        ("a", "b", "brier"), ("a", "b", "f1"), ("a", "c", "brier"), ("a", "c", "f1"),
        ("b", "c", "brier"), ("b", "c", "f1"),
    ]  # fmt: skip
    lacking = summary.loc[("a", "c", "brier")]
    assert lacking["n_folds"] == 0 and lacking[["wins_a", "ties", "wins_b"]].tolist() == [0, 0, 0]
    assert all(math.isnan(lacking[c]) for c in ("mean_delta", "std_delta", "max_delta"))
    assert summary.loc[("a", "b", "brier"), "n_folds"] == 3
    unpaired = result.fold_deltas.query("model_b == 'c' and metric == 'brier'")["outcome"]
    assert set(unpaired) == {"unpaired"} and len(unpaired) == 6


def test_direction_overrides() -> None:
    every_higher = paired_fold_differences(_worked(), higher_is_better=True).summary
    assert every_higher["higher_is_better"].tolist() == [True, True]
    assert every_higher["mean_improvement_for_a"].iloc[0] == pytest.approx(-0.0033333, abs=1e-7)
    mapped = paired_fold_differences(_worked(), higher_is_better={"f1": False})
    assert mapped.summary["higher_is_better"].tolist() == [False, False]
    assert mapped.design["lower_is_better_metrics"] == ["ece", "f1"]


def test_design_flags() -> None:
    design = paired_fold_differences(_worked(), tie_tolerance=0.0).design
    assert design == {
        "design": "matched_folds",
        "delta": "model_a - model_b",
        "improvement_for_a": "delta if higher_is_better else -delta",
        "tie_tolerance": 0.0,
        "lower_is_better_metrics": ["ece"],
        "models": ["inception", "resnet"],
        "folds": [0, 1, 2, 3],
        "inferential_p_values": False,
        "confidence_intervals": False,
        "folds_treated_as_independent_replicates": False,
    }


def test_tie_tolerance() -> None:
    rows = [
        ("a", 0, "f1", 0.3),
        ("b", 0, "f1", 0.1 + 0.2),
        ("a", 1, "f1", 0.5),
        ("b", 1, "f1", 0.25),
    ]
    frame = pd.DataFrame(rows, columns=["model", "fold", "metric", "value"])
    assert paired_fold_differences(frame).fold_deltas["outcome"].tolist() == ["tie", "win_a"]
    at_tolerance = paired_fold_differences(frame, tie_tolerance=0.25)
    assert at_tolerance.fold_deltas["outcome"].tolist() == ["tie", "tie"]
    assert paired_fold_differences(frame, tie_tolerance=0.0).fold_deltas["outcome"][0] == "win_b"


def test_output_does_not_depend_on_row_order() -> None:
    frame = _worked()
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    first, second = paired_fold_differences(frame), paired_fold_differences(shuffled)
    pd.testing.assert_frame_equal(first.summary, second.summary)
    pd.testing.assert_frame_equal(first.fold_deltas, second.fold_deltas)
    assert first.design == second.design


def test_incomparable_folds_sort_by_string() -> None:
    rows = [(m, f, "f1", 0.5) for m in ("a", "b") for f in (2, "x", 10)]
    frame = pd.DataFrame(rows, columns=["model", "fold", "metric", "value"])
    assert paired_fold_differences(frame).design["folds"] == [10, 2, "x"]


@pytest.mark.parametrize(
    ("frame", "kwargs", "message"),
    [
        (_worked().drop(columns="fold"), {}, "fold"),
        (_worked().iloc[:0], {}, "empty"),
        (_worked().assign(value="high"), {}, "numeric"),
        (_worked().assign(value=np.inf), {}, "inf"),
        (pd.concat([_worked(), _worked().iloc[:1]]), {}, "once"),
        (_worked().query("model == 'resnet'"), {}, "two models"),
        (_worked(), {"tie_tolerance": -1e-3}, "tie_tolerance"),
        (_worked(), {"tie_tolerance": float("nan")}, "tie_tolerance"),
        (_worked(), {"higher_is_better": "yes"}, "higher_is_better"),
        (_worked(), {"higher_is_better": {"f1": "no"}}, "higher_is_better"),
    ],
)
def test_errors(frame: pd.DataFrame, kwargs: dict, message: str) -> None:
    with pytest.raises(ComparisonError, match=message):
        paired_fold_differences(frame, **kwargs)


def test_incomplete_design_names_at_most_ten_pairs() -> None:
    rows = [("a", f, "f1", 0.5) for f in range(15)] + [("b", 0, "f1", 0.4)]
    frame = pd.DataFrame(rows, columns=["model", "fold", "metric", "value"])
    with pytest.raises(ComparisonError, match=r'\("b", 10\) and 4 more'):
        paired_fold_differences(frame)
