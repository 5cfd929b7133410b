"""Tests of ``deepecg aggregate`` and ``deepecg rank`` (analysis.md section 6).

The commands are driven in-process through ``deepecgkit.cli.main`` and
``deepecgkit.analysis.cli.main`` with pytest's ``capsys``; one test runs the
installed console script in a subprocess. Every error case checks the exit
code, that stderr holds exactly one ``deepecg <cmd>: error: ...`` line, and
that no traceback is printed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import pytest
import scipy.stats

from deepecgkit.analysis import ranking, schemas
from deepecgkit.analysis.aggregation import aggregate_runs, reconcile_averaging
from deepecgkit.analysis.cli import main as analysis_main
from deepecgkit.analysis.latex import compile_table
from deepecgkit.analysis.ranking import all_flip_tests, rank_distribution
from deepecgkit.cli import main as deepecg_main
from deepecgkit.rundir.read import discover_runs
from deepecgkit.rundir.records import runs_to_frame
from deepecgkit.rundir.synthetic import CorpusSpec, Reversal, SplitSizes, generate_corpus
from deepecgkit.rundir.write import write_run_directory

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
#: The aggregate columns; tests/analysis/test_aggregation.py spells the contract out.
AGGREGATE_COLUMNS = list(schemas.AGGREGATE_COLUMNS)
CONFLICT_COLUMNS = ["dataset", "model", "kept_averaging", "dropped_runs"]
#: The flip columns; tests/analysis/test_ranking.py spells the contract out.
FLIP_COLUMNS = list(ranking.FLIP_COLUMNS)
NO_DIAGNOSTICS = "diagnostics: unreadable 0, no_seed 0, duplicate 0, failed 0"
WORKED_RUNS_LINE = "runs: 30 usable (3 models, 2 datasets, 5 distinct seeds)"
WORKED_FLIP_LINE = (
    "flip tests: 3 comparison(s), BY family 'testable' of size 3; supported 2, suggestive 0, "
    "unresolved 0, not-reproduced 1, contradicted 0, untestable 0, bimodal 0; "
    "supported and surviving FDR (q_reversal <= 0.05) 1"
)
TAU_HEADING = "kendall tau (mean [95% jackknife CI], W (permutation p)): "
#: afib's five seeds rank identically: W = 1, p = 6 (1/6)^5 = 1/1296 by permutation;
#: ptbxl's jackknife interval [-0.007, 1.474] is shown clipped to tau's range.
WORKED_TAU_LINE = (
    f"{TAU_HEADING}afib 1.00 [1.00, 1.00], W 1.00 (p 0.0008) (3 models, 5 seeds); "
    "ptbxl 0.73 [-0.01, 1.00], W 0.84 (p 0.0095) (3 models, 5 seeds)"
)
#: Control characters that betray an unescaped backslash in a Python literal (analysis.md 5).
CONTROL_CHARACTERS = "\t\b\f\r\a\v"


def cli(
    capsys: pytest.CaptureFixture[str], argv: Sequence[str], *, dispatcher: bool = True
) -> tuple[int, str, str]:
    """Run one command in-process; returns (exit code, stdout, stderr)."""
    entry = deepecg_main if dispatcher else analysis_main
    code = entry([str(arg) for arg in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.out, captured.err


def assert_error(result: tuple[int, str, str], command: str, code: int, contains: str = "") -> str:
    """The failure contract: exit code, nothing on stdout, one error line on stderr."""
    exit_code, out, err = result
    assert exit_code == code, err
    assert out == ""
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1, err
    (line,) = errors
    assert line.startswith(f"deepecg {command}: error: ")
    assert contains in line
    assert all(
        line.startswith(f"deepecg {command}: warning: ") or ": error: " in line
        for line in err.splitlines()
    ), err
    return line


def read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=True, dtype={"seeds": str})


def worked_frame(root: Path) -> pd.DataFrame:
    records, _ = discover_runs([root])
    frame, _ = reconcile_averaging(runs_to_frame(records))
    return frame


# --- aggregate -----------------------------------------------------------------------------------


def test_aggregate_worked_example(
    capsys: pytest.CaptureFixture[str], worked_example_root: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "new" / "out"
    code, out, err = cli(capsys, ["aggregate", worked_example_root, "--out", out_dir])
    assert code == 0 and err == ""
    assert out.splitlines() == [
        WORKED_RUNS_LINE,
        NO_DIAGNOSTICS,
        "averaging conflicts: 0 group(s), 0 run(s) dropped",
        "afib f1: cnn 0.810 (n=5), resnet 0.770 (n=5), lstm 0.720 (n=5)",
        "ptbxl f1: resnet 0.664 (n=5), lstm 0.640 (n=5), cnn 0.610 (n=5)",
        f"wrote 4 file(s) to {out_dir}",
    ]
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "aggregate.csv",
        "averaging_conflicts.csv",
        "diagnostics.csv",
        "runs.csv",
    ]
    runs = read_csv(out_dir / "runs.csv")
    assert list(runs.columns) == RUN_COLUMNS and len(runs) == 30
    aggregated = read_csv(out_dir / "aggregate.csv")
    assert list(aggregated.columns) == AGGREGATE_COLUMNS
    reference = aggregate_runs(worked_frame(worked_example_root))
    assert aggregated["mean"].tolist() == reference["mean"].tolist(), "full round-trip precision"
    assert aggregated["lower_ci"].tolist() == reference["lower_ci"].tolist()
    assert (aggregated["seeds"] == "0,1,2,3,4").all()
    cnn = aggregated[(aggregated["dataset"] == "afib") & (aggregated["model"] == "cnn")].iloc[0]
    assert cnn["upper_ci"] == pytest.approx(0.8296324316, abs=1e-9)
    conflicts = read_csv(out_dir / "averaging_conflicts.csv")
    assert list(conflicts.columns) == CONFLICT_COLUMNS and len(conflicts) == 0
    diagnostics = read_csv(out_dir / "diagnostics.csv")
    assert list(diagnostics.columns) == ["reason", "entry"] and len(diagnostics) == 0


def test_aggregate_through_the_analysis_module_defaults_to_current_folder(
    capsys: pytest.CaptureFixture[str],
    worked_example_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, ["aggregate", worked_example_root], dispatcher=False)
    assert code == 0
    assert out.splitlines()[-1] == "wrote 4 file(s) to ."
    assert (tmp_path / "aggregate.csv").is_file()


def _messy_corpus(root: Path) -> Path:
    """Four sound runs per cell plus one of every diagnostic and an averaging conflict."""
    runs = root / "runs"
    for seed in range(4):
        for model, f1 in (("cnn", 0.8), ("resnet", 0.7)):
            write_run_directory(
                runs / f"{model}_afib_seed{seed}",
                model=model,
                dataset="afib",
                metrics={"f1": f1 + 0.01 * seed, "accuracy": 0.9},
                seed=seed,
                average="binary" if (model, seed) == ("resnet", 0) else "macro",
                split_sizes=SplitSizes(),
            )
    (runs / "broken_seed9").mkdir()
    (runs / "broken_seed9" / "classification_metrics.csv").write_text("", encoding="utf-8")
    write_run_directory(runs / "cnn_afib_noseed", model="cnn", dataset="afib", metrics={"f1": 0.5})
    write_run_directory(
        runs / "crashed_seed5",
        model="cnn",
        dataset="afib",
        metrics={"f1": 0.1},
        seed=5,
        returncode=1,
    )
    copy = write_run_directory(
        runs / "zz_copy_cnn_afib_seed2",
        model="cnn",
        dataset="afib",
        metrics={"f1": 0.3},
        seed=2,
        split_sizes=SplitSizes(),
    )
    original = runs / "cnn_afib_seed2" / "classification_metrics.csv"
    newer = original.stat().st_mtime + 100
    os.utime(original, (newer, newer))
    assert copy.is_dir()
    return runs


def test_aggregate_reports_diagnostics_conflicts_and_warnings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs = _messy_corpus(tmp_path)
    out_dir = tmp_path / "out"
    code, out, err = cli(capsys, ["aggregate", runs, "--out", out_dir])
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "runs: 8 usable (2 models, 1 datasets, 4 distinct seeds)"
    assert lines[1] == "diagnostics: unreadable 1, no_seed 1, duplicate 1, failed 1"
    assert lines[2] == "averaging conflicts: 1 group(s), 1 run(s) dropped"
    assert lines[3] == "afib f1: cnn 0.815 (n=4), resnet 0.720 (n=3)"
    warning_lines = err.splitlines()
    assert len(warning_lines) == 1
    assert warning_lines[0].startswith("deepecg aggregate: warning: ")
    assert "resnet" in warning_lines[0] and "afib" in warning_lines[0]

    diagnostics = read_csv(out_dir / "diagnostics.csv")
    assert diagnostics["reason"].tolist() == ["unreadable", "no_seed", "duplicate", "failed"]
    assert diagnostics["entry"].iloc[0].startswith(f"{runs / 'broken_seed9'} (")
    assert "dropped; kept" in diagnostics["entry"].iloc[2]
    assert diagnostics["entry"].iloc[3] == f"{runs / 'crashed_seed5'} (returncode 1)"
    conflicts = read_csv(out_dir / "averaging_conflicts.csv")
    assert conflicts.values.tolist() == [["afib", "resnet", "macro", 1]]
    raw = read_csv(out_dir / "runs.csv")
    assert (raw["averaging"] == "binary").sum() == 2, "runs.csv is written before reconciliation"


def test_aggregate_discovery_options(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    runs = _messy_corpus(tmp_path)
    out_dir = tmp_path / "out"
    code, out, _ = cli(
        capsys,
        ["aggregate", runs, "--include-legacy", "--include-failed", "--out", out_dir],
    )
    assert code == 0
    assert out.splitlines()[0] == "runs: 10 usable (2 models, 1 datasets, 5 distinct seeds)"
    aggregated = read_csv(out_dir / "aggregate.csv")
    cnn_f1 = aggregated[(aggregated["model"] == "cnn") & (aggregated["metric"] == "f1")].iloc[0]
    assert cnn_f1["seeds"] == "0,1,2,3,5", "the legacy run has no seed, not seed -1"
    assert cnn_f1["n"] == 6, "but its value counts"
    code, out, _ = cli(capsys, ["aggregate", tmp_path, "--recursive", "--out", out_dir])
    assert code == 0 and out.startswith("runs: 8 usable")
    code, _, _ = cli(capsys, ["aggregate", runs, "--on-duplicate", "all", "--out", out_dir])
    assert code == 0
    assert len(read_csv(out_dir / "diagnostics.csv").query("reason == 'duplicate'")) == 0


def test_aggregate_confidence_level_and_nan_as_empty_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    write_run_directory(runs / "solo_seed0", model="solo", dataset="d", metrics={"f1": 0.5}, seed=0)
    for seed in range(3):
        write_run_directory(
            runs / f"trio_seed{seed}",
            model="trio",
            dataset="d",
            metrics={"f1": 0.5 + 0.1 * seed},
            seed=seed,
        )
    out_dir = tmp_path / "out"
    code, _, _ = cli(capsys, ["aggregate", runs, "--confidence-level", "0.5", "--out", out_dir])
    assert code == 0
    text = (out_dir / "aggregate.csv").read_text(encoding="utf-8").splitlines()
    solo = next(line for line in text if ",solo," in line)
    assert solo.endswith(",1,1,0.5,,,,,0"), "NaN is written as an empty field"
    aggregated = read_csv(out_dir / "aggregate.csv")
    trio = aggregated[aggregated["model"] == "trio"].iloc[0]
    half_width = scipy.stats.t.ppf(0.75, 2) * 0.1 / math.sqrt(3)
    assert trio["upper_ci"] - trio["mean"] == pytest.approx(half_width, abs=1e-12)


# --- rank ----------------------------------------------------------------------------------------


def test_rank_worked_example_with_claim(
    capsys: pytest.CaptureFixture[str], worked_example_root: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    code, out, err = cli(
        capsys,
        ["rank", worked_example_root, "--claim", "cnn", "afib", "ptbxl", "--out", out_dir],
    )
    assert code == 0 and err == ""
    assert out.splitlines() == [
        WORKED_RUNS_LINE,
        NO_DIAGNOSTICS,
        "metric: f1 (correction nadeau-bengio, 95% intervals)",
        WORKED_TAU_LINE,
        WORKED_FLIP_LINE,
        "claim: cnn best on afib, worst on ptbxl: supported "
        "(p_claim_directional 0.02371, 2 component(s), 0 untestable)",
        f"wrote 6 file(s) to {out_dir}",
    ]
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "claim.json",
        "diagnostics.csv",
        "flip_tests.csv",
        "kendall_tau.csv",
        "rank_distribution.csv",
        "ranks.csv",
    ]
    frame = worked_frame(worked_example_root)
    ranks = read_csv(out_dir / "ranks.csv")
    assert list(ranks.columns) == ["dataset", "seed", "model", "value", "rank", "rank_average"]
    assert len(ranks) == 30
    distribution = read_csv(out_dir / "rank_distribution.csv")
    pd.testing.assert_frame_equal(
        distribution, rank_distribution(frame), check_dtype=False, check_exact=True
    )
    taus = read_csv(out_dir / "kendall_tau.csv")
    assert list(taus.columns) == list(ranking.TAU_COLUMNS)
    assert taus["tau_upper"].iloc[1] == pytest.approx(1.4737186947, abs=1e-9), "raw bound kept"
    flips = read_csv(out_dir / "flip_tests.csv")
    assert list(flips.columns) == FLIP_COLUMNS
    assert flips["p_adjusted"].tolist() == all_flip_tests(frame)["p_adjusted"].tolist()
    assert flips["q_reversal"].tolist() == all_flip_tests(frame)["q_reversal"].tolist()
    assert flips["survives_fdr"].tolist() == [True, False, False]
    claim = json.loads((out_dir / "claim.json").read_text(encoding="utf-8"))
    assert claim["verdict"] == "supported" and claim["n_components"] == 2
    assert claim["p_claim"] == pytest.approx(0.0474206556, abs=1e-9)
    assert claim["p_claim_directional"] == pytest.approx(0.0474206556 / 2, abs=1e-9)
    assert [c["model_b"] for c in claim["components"]] == ["lstm", "resnet"]


def test_rank_options_change_the_summary(
    capsys: pytest.CaptureFixture[str], worked_example_root: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    code, out, _ = cli(
        capsys,
        [
            "rank",
            worked_example_root,
            "--correction",
            "none",
            "--fdr-family",
            "significant",
            "--confidence-level",
            "0.9",
            "--out",
            out_dir,
        ],
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[2] == "metric: f1 (correction none, 90% intervals)"
    assert lines[4].startswith("flip tests: 3 comparison(s), BY family 'significant' of size ")
    flips = read_csv(out_dir / "flip_tests.csv")
    assert (flips["fdr_family"] == "significant").all()
    assert lines[-1] == f"wrote 5 file(s) to {out_dir}"


def test_rank_filters_and_greedy_lists(
    capsys: pytest.CaptureFixture[str], worked_example_root: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    code, out, err = cli(
        capsys,
        ["rank", "--out", out_dir, "--models", "cnn", "resnet", "ghost", "--", worked_example_root],
    )
    assert code == 0
    assert err.splitlines() == ["deepecg rank: warning: model 'ghost' matches no run"]
    flips = read_csv(out_dir / "flip_tests.csv")
    assert flips[["model_a", "model_b"]].values.tolist() == [["cnn", "resnet"]]
    assert "flip tests: 1 comparison(s), BY family 'testable' of size 1;" in out
    assert f"{TAU_HEADING}afib n/a (2 models, 5 seeds); ptbxl n/a (2 models, 5 seeds)" in out


def test_rank_claim_with_nan_writes_null(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    for dataset in ("d1", "d2"):
        for seed in range(2):
            for model, f1 in (("m", 0.8), ("o", 0.7)):
                write_run_directory(
                    runs / f"{model}_{dataset}_seed{seed}",
                    model=model,
                    dataset=dataset,
                    metrics={"f1": f1 + 0.01 * seed},
                    seed=seed,
                )
    out_dir = tmp_path / "out"
    code, out, _ = cli(capsys, ["rank", runs, "--claim", "m", "d1", "d2", "--out", out_dir])
    assert code == 0
    assert (
        "claim: m best on d1, worst on d2: untestable "
        "(p_claim_directional nan, 1 component(s), 1 untestable)" in out
    )
    text = (out_dir / "claim.json").read_text(encoding="utf-8")

    def reject(token: str) -> None:
        raise AssertionError(f"claim.json holds the non-JSON constant {token}")

    claim = json.loads(text, parse_constant=reject)
    assert claim["p_claim"] is None and claim["p_claim_directional"] is None
    assert claim["components"][0]["p_flip"] is None
    assert claim["components"][0]["verdict"] == "untestable"


def _three_model_corpus(tmp_path: Path, sizes_known: Callable[[str, str, int], bool]) -> Path:
    """Models a < b < c on d1 and d2 over 3 seeds; split sizes recorded where ``sizes_known``."""
    runs = tmp_path / "runs"
    for dataset in ("d1", "d2"):
        for seed in range(3):
            for model in ("a", "b", "c"):
                write_run_directory(
                    runs / f"{model}_{dataset}_seed{seed}",
                    model=model,
                    dataset=dataset,
                    metrics={"f1": 0.5 + 0.1 * "abc".index(model) + 0.01 * seed},
                    seed=seed,
                    split_sizes=SplitSizes() if sizes_known(model, dataset, seed) else None,
                )
    return runs


def test_rank_notes_unknown_split_sizes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Only d2's seed-0 runs record their split sizes.
    runs = _three_model_corpus(tmp_path, lambda model, dataset, seed: (dataset, seed) == ("d2", 0))
    code, out, _ = cli(capsys, ["rank", runs, "--out", tmp_path / "out"])
    assert code == 0
    assert (
        "note: split sizes unknown for 15 run(s); their comparisons use the uncorrected "
        "standard error (3 flip test(s) with correction 'unavailable'; --strict-correction "
        "makes them untestable)"
    ) in out.splitlines()
    flips = read_csv(tmp_path / "out" / "flip_tests.csv")
    # d2's seed-0 runs know their sizes, so d2 is corrected; nothing on d1 is.
    assert (flips["correction_applied_1"] == "unavailable").all()
    assert (flips["correction_applied_2"] == "nadeau-bengio").all()
    code, out, _ = cli(capsys, ["rank", runs, "--strict-correction", "--out", tmp_path / "s"])
    assert code == 0
    assert (
        "note: split sizes unknown for 15 run(s); --strict-correction made 3 flip test(s) "
        "untestable"
    ) in out.splitlines()
    strict = read_csv(tmp_path / "s" / "flip_tests.csv")
    assert (strict["verdict"] == "untestable").all()
    assert strict["reason"].str.endswith("strict_correction makes the comparison untestable").all()


def test_rank_note_when_other_runs_supply_the_split_sizes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs = _three_model_corpus(tmp_path, lambda model, dataset, seed: (model, seed) != ("a", 0))
    code, out, _ = cli(capsys, ["rank", runs, "--out", tmp_path / "out"])
    assert code == 0
    assert (
        "note: split sizes unknown for 2 run(s); each comparison took the Nadeau-Bengio "
        "sizes from its other runs"
    ) in out.splitlines()
    flips = read_csv(tmp_path / "out" / "flip_tests.csv")
    assert (flips[["correction_applied_1", "correction_applied_2"]] == "nadeau-bengio").all().all()


def test_rank_fdr_method_option(
    capsys: pytest.CaptureFixture[str], worked_example_root: Path, tmp_path: Path
) -> None:
    code, out, _ = cli(
        capsys, ["rank", worked_example_root, "--fdr-method", "bh", "--out", tmp_path]
    )
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("flip tests:"))
    assert "BH family 'testable' of size 3" in line
    assert line.endswith("supported and surviving FDR (q_reversal <= 0.05) 2")
    flips = read_csv(tmp_path / "flip_tests.csv")
    assert (flips["fdr_method"] == "bh").all()
    assert_error(
        cli(capsys, ["rank", worked_example_root, "--fdr-method", "holm"]), "rank", 2, "fdr-method"
    )


def test_rank_reprints_averaging_warnings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs = _messy_corpus(tmp_path)
    code, _, err = cli(capsys, ["rank", runs, "--out", tmp_path / "out"])
    assert code == 0
    assert len(err.splitlines()) == 1
    assert err.startswith("deepecg rank: warning: ")


# --- exit codes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["aggregate", "{root}", "--bogus"], "aggregate"),
        (["rank", "{root}", "--bogus"], "rank"),
        (["aggregate"], "aggregate"),
        (["rank", "--out", "{tmp}"], "rank"),
        (["aggregate", "{root}", "--on-duplicate", "oldest"], "aggregate"),
        (["rank", "{root}", "--correction", "holm"], "rank"),
        (["rank", "{root}", "--fdr-family", "everything"], "rank"),
        (["aggregate", "{root}", "--confidence-level", "abc"], "aggregate"),
        (["aggregate", "{root}", "--confidence-level", "0"], "aggregate"),
        (["aggregate", "{root}", "--confidence-level", "1"], "aggregate"),
        (["rank", "{root}", "--confidence-level", "1.5"], "rank"),
        (["rank", "{root}", "--confidence-level", "nan"], "rank"),
        (["rank", "{root}", "--confidence-level", "-0.5"], "rank"),
        (["aggregate", "{tmp}/missing"], "aggregate"),
        (["rank", "{root}", "{tmp}/a_file.txt"], "rank"),
        (["rank", "{root}", "--claim", "cnn", "afib", "afib"], "rank"),
        (["rank", "{root}", "--claim", "cnn", "afib"], "rank"),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str],
    worked_example_root: Path,
    tmp_path: Path,
    argv: list[str],
    command: str,
) -> None:
    (tmp_path / "a_file.txt").write_text("not a folder", encoding="utf-8")
    filled = [a.format(root=worked_example_root, tmp=tmp_path) for a in argv]
    assert_error(
        cli(capsys, [*filled, "--out", tmp_path / "out"] if len(filled) > 1 else filled), command, 2
    )
    assert not (tmp_path / "out").exists(), "nothing is written on a usage error"


def test_error_messages_name_the_problem(
    capsys: pytest.CaptureFixture[str], worked_example_root: Path, tmp_path: Path
) -> None:
    line = assert_error(cli(capsys, ["aggregate", tmp_path / "missing"]), "aggregate", 2)
    assert str(tmp_path / "missing") in line
    line = assert_error(
        cli(capsys, ["aggregate", worked_example_root, "--confidence-level", "1.5"]), "aggregate", 2
    )
    assert "1.5" in line
    line = assert_error(
        cli(capsys, ["rank", worked_example_root, "--correction", "holm"]), "rank", 2
    )
    assert "holm" in line


def test_no_usable_runs_exit_1_with_counts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    line = assert_error(cli(capsys, ["aggregate", empty]), "aggregate", 1)
    assert line == (
        f"deepecg aggregate: error: no usable runs found under {empty} "
        "(unreadable 0, no_seed 0, duplicate 0, failed 0)"
    )
    bad = tmp_path / "bad"
    (bad / "broken_seed0").mkdir(parents=True)
    (bad / "broken_seed0" / "classification_metrics.csv").write_text("model\n", encoding="utf-8")
    write_run_directory(
        bad / "failed_seed0", model="m", dataset="d", metrics={"f1": 0.5}, returncode=1
    )
    write_run_directory(bad / "noseed", model="m", dataset="d", metrics={"f1": 0.5})
    line = assert_error(cli(capsys, ["rank", bad, "--out", tmp_path / "out"]), "rank", 1)
    assert line.endswith("(unreadable 1, no_seed 1, duplicate 0, failed 1)")


def test_duplicate_under_on_duplicate_error_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs = _messy_corpus(tmp_path)
    line = assert_error(
        cli(capsys, ["aggregate", runs, "--on-duplicate", "error", "--out", tmp_path / "o"]),
        "aggregate",
        1,
    )
    assert "cnn" in line and "afib" in line


def test_line_breaks_in_names_never_split_a_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    for name, seed, average in (("a\nb_seed0", 0, "macro"), ("c_seed0", 0, "binary")):
        write_run_directory(
            runs / name,
            model="m\nx",
            dataset="d",
            metrics={"f1": 0.5},
            seed=seed,
            average=average,
            fingerprint=None,
        )
    line = assert_error(
        cli(capsys, ["aggregate", runs, "--on-duplicate", "error", "--out", tmp_path / "o"]),
        "aggregate",
        1,
    )
    assert "a\\nb_seed0" in line
    write_run_directory(
        runs / "c_seed1", model="m\nx", dataset="d", metrics={"f1": 0.6}, seed=1, average="binary"
    )
    code, _, err = cli(
        capsys, ["aggregate", runs, "--on-duplicate", "all", "--out", tmp_path / "o"]
    )
    assert code == 0
    (warning,) = err.splitlines()
    assert warning.startswith("deepecg aggregate: warning: ") and "m\\nx" in warning


@pytest.mark.parametrize(
    ("extra", "contains"),
    [
        (["--metric", "auroc"], "no run reports metric 'auroc'"),
        (["--models", "ghost"], ""),
        (["--datasets", "nowhere"], ""),
        (["--claim", "ghost", "afib", "ptbxl"], "ghost"),
        (["--models", "cnn", "--claim", "lstm", "afib", "ptbxl"], "lstm"),
    ],
)
def test_rank_data_errors_exit_1(
    capsys: pytest.CaptureFixture[str],
    worked_example_root: Path,
    tmp_path: Path,
    extra: list[str],
    contains: str,
) -> None:
    argv = ["rank", worked_example_root, "--out", tmp_path / "out", *extra]
    result = cli(capsys, argv)
    assert_error(result, "rank", 1, contains)
    if ("--models" in extra and "--claim" not in extra) or "--datasets" in extra:
        assert "warning: " in result[2] and "matches no run" in result[2]


@pytest.mark.parametrize("command", ["aggregate", "rank"])
def test_unwritable_out_exit_1(
    capsys: pytest.CaptureFixture[str], worked_example_root: Path, tmp_path: Path, command: str
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder should be", encoding="utf-8")
    for out_dir in (blocker, blocker / "sub"):
        line = assert_error(
            cli(capsys, [command, worked_example_root, "--out", out_dir]), command, 1
        )
        assert str(blocker) in line


@pytest.mark.parametrize("command", ["aggregate", "rank"])
def test_help_exits_0(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, err = cli(capsys, [command, "--help"])
    assert code == 0 and err == ""
    assert out.startswith(f"usage: deepecg {command}")
    assert "--on-duplicate" in out and "--confidence-level" in out
    code, out, _ = cli(capsys, [command, "-h"], dispatcher=False)
    assert code == 0 and "--recursive" in out


def test_console_script_is_installed_and_prints_no_traceback(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "deepecg"
    completed = subprocess.run(
        [str(script), "aggregate", str(tmp_path), "--confidence-level", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert "Traceback" not in completed.stderr
    (line,) = completed.stderr.splitlines()
    assert line.startswith("deepecg aggregate: error: ")


# --- LaTeX output --------------------------------------------------------------------------------

HOSTILE_MODELS = ("a_b&c%", "back\\slash", "x#y{z}", "~tilde^")
HOSTILE_DATASETS = ("back\\slash", "$data set_1", "ptb#xl")


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "runs"
    spec = CorpusSpec(
        models=HOSTILE_MODELS,
        datasets=HOSTILE_DATASETS,
        seeds=(0, 1, 2, 3, 4),
        effects=(Reversal("a_b&c%", "x#y{z}", "back\\slash", "$data set_1", margin=0.08),),
        random_state=3,
    )
    generate_corpus(root, spec)
    return root


def assert_compiles(path: Path) -> None:
    table = path.read_text(encoding="utf-8")
    assert not any(char in table for char in CONTROL_CHARACTERS), path.name
    ok, reason = compile_table(table)
    assert ok, f"{path.name} did not compile:\n{reason}"


def test_latex_outputs_compile_with_hostile_names(
    capsys: pytest.CaptureFixture[str], hostile_root: Path, tmp_path: Path
) -> None:
    aggregate_dir = tmp_path / "aggregate"
    code, out, _ = cli(capsys, ["aggregate", hostile_root, "--latex", "--out", aggregate_dir])
    assert code == 0
    tex = sorted(p.name for p in aggregate_dir.glob("*.tex"))
    assert tex == ["results__data_set_1.tex", "results_back_slash.tex", "results_ptb_xl.tex"]
    assert out.splitlines()[-1] == f"wrote 8 file(s) to {aggregate_dir}", "tables + their index"

    rank_dir = tmp_path / "rank"
    code, out, _ = cli(
        capsys,
        [
            "rank",
            hostile_root,
            "--latex",
            "--models",
            *HOSTILE_MODELS[:3],
            "--claim",
            "a_b&c%",
            "back\\slash",
            "$data set_1",
            "--out",
            rank_dir,
        ],
    )
    assert code == 0
    assert sorted(p.name for p in rank_dir.glob("*.tex")) == [
        "flip_survival.tex",
        "kendall_tau.tex",
        "rank_distribution.tex",
    ]
    assert out.splitlines()[-1] == f"wrote 9 file(s) to {rank_dir}"
    flips = read_csv(rank_dir / "flip_tests.csv")
    planted = flips[
        (flips["model_a"] == "a_b&c%")
        & (flips["model_b"] == "x#y{z}")
        & (flips["dataset_1"] == "$data set_1")
        & (flips["dataset_2"] == "back\\slash")
    ]
    assert planted["verdict"].tolist()[0] == "supported"
    survival = (rank_dir / "flip_survival.tex").read_text(encoding="utf-8")
    assert r"a\_b\&c\%" in survival
    assert r"models: a\_b\&c\%, back\textbackslash{}slash, x\#y\{z\}" in survival
    for path in [*aggregate_dir.glob("*.tex"), *rank_dir.glob("*.tex")]:
        assert_compiles(path)
