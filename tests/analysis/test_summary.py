"""The build summary: hand-checkable frames in, counts and names out, text that shows them."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from deepecgkit.analysis.constants import VERDICTS
from deepecgkit.analysis.summary import (
    LISTED_REVERSALS,
    SUMMARY_FLIP_COLUMNS,
    build_summary,
    calibration_headline,
    format_summary,
    set_aside_counts,
    surviving_reversals,
    verdict_census,
)

DIAGNOSTICS = {
    "unreadable": ["/r/a (bad csv)", "/r/b (empty)"],
    "no_seed": ["/r/c"],
    "duplicate": ["/r/d (dropped; kept /r/e)"],
    "failed": ["/r/f (returncode 1)"],
    "suspect": ["/r/g (auroc out of range)"],
}


def _flip_row(a, b, d1, d2, mean_1, verdict, q, survives, p=0.001):
    return {
        "model_a": a,
        "model_b": b,
        "dataset_1": d1,
        "dataset_2": d2,
        "metric": "f1",
        "mean_1": mean_1,
        "mean_2": -mean_1,
        "verdict": verdict,
        "p_reversal": p,
        "q_reversal": q,
        "fdr_method": "by",
        "survives_fdr": survives,
    }


FLIPS = pd.DataFrame(
    [
        _flip_row("cnn", "lr", "rr", "pr", -0.2, "supported", 0.004, True),
        _flip_row("cnn", "res", "rr", "pr", 0.1, "supported", 0.002, True),
        _flip_row("lr", "res", "rr", "pr", 0.1, "supported", 0.2, False),
        _flip_row("cnn", "lr", "brady", "pr", 0.0, "not-reproduced", 1.0, False),
        _flip_row("cnn", "res", "brady", "pr", 0.0, "bimodal", math.nan, False),
    ]
)


def test_set_aside_counts_follow_the_policy() -> None:
    assert set_aside_counts(DIAGNOSTICS, averaging_dropped=3) == {
        "unreadable": 2,
        "no_seed": 1,
        "duplicate": 1,
        "failed": 1,
        "averaging_minority": 3,
    }
    kept = set_aside_counts(DIAGNOSTICS, include_legacy=True, include_failed=True)
    assert kept["no_seed"] == 0 and kept["failed"] == 0 and kept["unreadable"] == 2


def test_verdict_census_lists_every_verdict_in_order() -> None:
    census = verdict_census(FLIPS)
    assert list(census) == list(VERDICTS)
    assert census["supported"] == 3 and census["not-reproduced"] == 1 and census["bimodal"] == 1
    assert sum(census.values()) == len(FLIPS)
    assert verdict_census(FLIPS.iloc[:0]) == dict.fromkeys(VERDICTS, 0)


def test_surviving_reversals_name_the_leader_on_each_dataset() -> None:
    first, second = surviving_reversals(FLIPS)
    # Smallest q first; mean_1 = mean(a - b) on dataset_1 decides who leads there.
    assert (first.model_a, first.model_b, first.q_reversal) == ("cnn", "res", 0.002)
    assert (first.leader_1, first.leader_2) == ("cnn", "res")
    assert (second.leader_1, second.leader_2) == ("lr", "cnn")
    assert surviving_reversals(FLIPS.iloc[:0]) == ()


def test_calibration_headline_means_per_model_and_the_worst_run() -> None:
    rows = [
        ("a0", "a", "d", "ece", 0.10, 0.05, 0.15),
        ("a1", "a", "d", "ece", 0.30, 0.20, 0.40),
        ("b0", "b", "d", "ece", 0.05, 0.01, 0.09),
        ("b1", "b", "d", "ece", math.nan, math.nan, math.nan),
        ("b0", "b", "d", "auroc", 0.99, 0.98, 1.0),
    ]
    frame = pd.DataFrame(
        rows, columns=["run_id", "model", "dataset", "metric", "estimate", "ci_low", "ci_high"]
    )
    headline = calibration_headline(frame)
    assert headline is not None
    assert headline.mean_by_model == pytest.approx({"a": 0.20, "b": 0.05})
    assert headline.runs_by_model == {"a": 2, "b": 1}
    assert (headline.worst_run, headline.worst_value) == ("a1", 0.30)
    assert (headline.worst_low, headline.worst_high) == (0.20, 0.40)
    assert calibration_headline(frame.loc[frame["metric"] == "auroc"]) is None
    assert calibration_headline(frame.iloc[:0]) is None


def _summary(**overrides):
    runs = pd.DataFrame(
        {
            "run_dir": ["/r/1", "/r/1", "/r/2", "/r/3"],
            "model": ["lr", "lr", "cnn", "res"],
            "dataset": ["rr", "rr", "pr", "brady"],
        }
    )
    arguments = dict(
        discovered_runs=pd.DataFrame({"run_dir": ["/r/1", "/r/2", "/r/3", "/r/4"]}),
        diagnostics=DIAGNOSTICS,
        reconciled_runs=runs,
        averaging_conflicts=pd.DataFrame({"dropped_runs": [1]}),
        flip_grid=FLIPS,
        metric="f1",
        fdr_method="by",
        locations={"tables": Path("out/tables")},
    )
    arguments.update(overrides)
    return build_summary(**arguments)


def test_build_summary_counts_runs_names_and_verdicts() -> None:
    summary = _summary()
    assert (summary.runs_discovered, summary.runs_used) == (4, 3)
    assert summary.runs_set_aside == 2 + 1 + 1 + 1 + 1
    assert summary.runs_suspect == 1
    assert summary.datasets == ("brady", "pr", "rr") and summary.models == ("cnn", "lr", "res")
    assert summary.flip_tests == len(FLIPS)
    assert summary.report_included is None and summary.calibration is None


def test_the_summary_reads_only_its_flip_grid_columns() -> None:
    """What the build reads of the stored grid is enough: the summary is the same."""
    assert _summary(flip_grid=FLIPS[list(SUMMARY_FLIP_COLUMNS)]) == _summary()


def test_format_summary_shows_each_number_once_in_few_lines() -> None:
    text = format_summary(_summary())
    lines = text.splitlines()
    assert len(lines) <= 25
    assert lines[0] == (
        "Runs: 3 used, 6 set aside (2 unreadable, 1 without a seed, 1 duplicate, "
        "1 failed (non-zero returncode), 1 minority averaging mode)"
    )
    assert "Flip grid (f1, 5 test(s)): 3 supported, 1 not-reproduced, 1 bimodal" in lines
    assert "Reversals that survive BY (2):" in lines
    assert "  cnn > res on rr, res > cnn on pr  (p_reversal = 0.001, q_reversal = 0.002)" in lines
    assert "Statistical report: not built" in lines
    assert lines[-1] == "  tables  out/tables"


def test_values_that_would_read_zero_are_printed_in_scientific_notation() -> None:
    tiny = FLIPS.assign(p_reversal=0.00021)
    text = format_summary(_summary(flip_grid=tiny))
    assert "(p_reversal = 2.1e-04, q_reversal = 0.002)" in text
    assert "0.000" not in text


def test_format_summary_counts_reversals_beyond_the_listed_ones() -> None:
    many = pd.DataFrame(
        [
            _flip_row(f"m{i}", "z", "d1", "d2", 0.1, "supported", 0.001 * (i + 1), True)
            for i in range(LISTED_REVERSALS + 2)
        ]
    )
    text = format_summary(_summary(flip_grid=many))
    assert "  ... and 2 more (flip_grid, survives_fdr)" in text.splitlines()


def test_format_summary_of_an_empty_build() -> None:
    empty = pd.DataFrame(columns=["run_dir", "model", "dataset"])
    text = format_summary(
        _summary(
            discovered_runs=empty,
            diagnostics={},
            reconciled_runs=empty,
            averaging_conflicts=pd.DataFrame(columns=["dropped_runs"]),
            flip_grid=FLIPS.iloc[:0],
        )
    )
    assert text.startswith("Runs: 0 used, 0 set aside\n")
    assert "Datasets (0): none" in text and "Reversals that survive BY: none" in text
