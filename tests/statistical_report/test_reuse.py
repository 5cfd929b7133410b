"""Rebuilding a report reuses unchanged runs and pairs and writes exactly a clean build's files."""

from __future__ import annotations

import gzip
import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.statistical_report import ReportResult, identity, statistical_report
from deepecgkit.statistical_report.identity import assess_runs
from deepecgkit.statistical_report.reuse import CACHE_FILENAME, run_key
from deepecgkit.statistical_report.tables import ReportSettings
from tests.deepecg_assets.output_trees import tree_bytes
from tests.statistical_report.prediction_runs import write_prediction_run

REFERENCE = "resnet"
#: Figures are drawn only where a test is about them (drawing is most of a build's time).
SETTINGS = {"n_resamples": 40, "reference": REFERENCE, "bins": 6, "plots": False}
FIGURES = {"plots": True}


def write_run(root: Path, model: str, seed: int, *, variant: int = 0) -> Path:
    """One run on dataset ``afib``; ``variant`` changes its predictions, nothing else."""
    return write_prediction_run(root, model, "afib", seed, variant=variant)


@pytest.fixture
def few_runs(tmp_path: Path) -> Path:
    """resnet and cnn on seed 0, and a cnn seed-1 run with no reference run."""
    root = tmp_path / "few"
    write_run(root, REFERENCE, 0)
    write_run(root, "cnn", 0)
    write_run(root, "cnn", 1)
    return root


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """resnet and cnn on seeds 0 and 1, and a cnn seed-2 run with no reference run."""
    root = tmp_path / "runs"
    for seed in (0, 1):
        write_run(root, REFERENCE, seed)
        write_run(root, "cnn", seed)
    write_run(root, "cnn", 2)
    return root


def _build(runs: Path, out: Path, **overrides: object) -> ReportResult:
    return statistical_report([runs], out, overwrite=True, **{**SETTINGS, **overrides})


def _assert_equals_clean(runs: Path, out: Path, clean: Path, **overrides: object) -> None:
    """Every file of ``out`` equals that of a from-scratch build of the same inputs."""
    shutil.rmtree(clean, ignore_errors=True)
    _build(runs, clean, **overrides)
    built, expected = tree_bytes(out), tree_bytes(clean)
    assert sorted(built) == sorted(expected)
    for name, data in expected.items():
        assert built[name] == data, f"{name} differs from a clean build"


def _counts(result: ReportResult) -> tuple[int, int, int, int]:
    return (
        result.reused_runs,
        result.computed_runs,
        result.reused_pairs,
        result.computed_pairs,
    )


def test_each_change_recomputes_only_what_it_touches(runs: Path, tmp_path: Path) -> None:
    out, clean = tmp_path / "out", tmp_path / "clean"
    assert _counts(_build(runs, out)) == (0, 5, 0, 2)
    assert (out / CACHE_FILENAME).is_file()
    assert _counts(_build(runs, out)) == (5, 0, 2, 0)
    _assert_equals_clean(runs, out, clean)

    write_run(runs, "cnn", 1, variant=1)  # one run's predictions change
    assert _counts(_build(runs, out)) == (4, 1, 1, 1)
    _assert_equals_clean(runs, out, clean)

    write_run(runs, REFERENCE, 2)  # one run added: cnn seed 2 now has its reference
    assert _counts(_build(runs, out)) == (5, 1, 2, 1)
    _assert_equals_clean(runs, out, clean)

    shutil.rmtree(runs / "cnn_afib_seed0")  # one run deleted
    assert _counts(_build(runs, out)) == (5, 0, 2, 0)
    _assert_equals_clean(runs, out, clean)

    # A new reference keeps every run's rows and compares anew.
    assert _counts(_build(runs, out, reference="cnn")) == (5, 0, 0, 2)
    _assert_equals_clean(runs, out, clean, reference="cnn")
    for setting in ({"bins": 7}, {"bins": 7, "confidence_level": 0.9}):
        assert _counts(_build(runs, out, **setting)) == (0, 5, 0, 2), setting
        _assert_equals_clean(runs, out, clean, **setting)


def test_every_setting_that_shapes_a_runs_rows_is_in_its_key(runs: Path) -> None:
    (run,) = assess_runs([("cnn_afib_seed0", runs / "cnn_afib_seed0")], allow_partial=False)
    settings = ReportSettings(bins=6, n_resamples=40, confidence_level=0.95, seed=0)
    key = run_key(run, settings, allow_partial=False)
    assert run_key(run, replace(settings), allow_partial=False) == key
    changed = [
        run_key(run, replace(settings, **change), allow_partial=False)
        for change in ({"bins": 7}, {"n_resamples": 41}, {"confidence_level": 0.9}, {"seed": 1})
    ]
    changed.append(run_key(run, settings, allow_partial=True))
    run.files[run.predictions_file.name] = "0" * 64  # other prediction bytes
    changed.append(run_key(run, settings, allow_partial=False))
    assert len({key, *changed}) == len(changed) + 1


def test_figures_follow_the_runs_and_their_settings(few_runs: Path, tmp_path: Path) -> None:
    out, clean = tmp_path / "out", tmp_path / "clean"
    _build(few_runs, out, **FIGURES)
    shutil.rmtree(few_runs / "cnn_afib_seed1")  # one run deleted: its figure goes too
    result = _build(few_runs, out, **FIGURES)
    assert _counts(result) == (2, 0, 1, 0)
    assert len(result.figures) == 2 and len(list((out / "figures").iterdir())) == 2
    _assert_equals_clean(few_runs, out, clean, **FIGURES)
    # The figures' own settings redraw the figures and keep every row.
    assert _counts(_build(few_runs, out, plots=True, pdf=True)) == (2, 0, 1, 0)
    assert len(list((out / "figures").glob("*.pdf"))) == 2
    _assert_equals_clean(few_runs, out, clean, plots=True, pdf=True)
    _build(few_runs, out)
    assert not (out / "figures").exists()
    _assert_equals_clean(few_runs, out, clean)


def test_a_renamed_run_keeps_its_rows_and_figure(few_runs: Path, tmp_path: Path) -> None:
    out, clean = tmp_path / "out", tmp_path / "clean"
    _build(few_runs, out, **FIGURES)
    (few_runs / "cnn_afib_seed0").rename(few_runs / "cnn_afib_seed0_renamed")
    result = _build(few_runs, out, **FIGURES)
    assert _counts(result) == (3, 0, 1, 0)
    assert "cnn_afib_seed0_renamed" in set(result.run_summary["run_id"])
    _assert_equals_clean(few_runs, out, clean, **FIGURES)


def _rewrite_cache(out: Path, change) -> None:
    payload = json.loads(gzip.decompress((out / CACHE_FILENAME).read_bytes()))
    change(payload)
    (out / CACHE_FILENAME).write_bytes(gzip.compress(json.dumps(payload).encode("ascii")))


def _break_rows(payload: dict) -> None:
    entry = next(iter(payload["runs"].values()))
    entry["summary"][0] = entry["summary"][0][:-1]


def _foreign(payload: dict) -> None:
    payload["environment"]["version"] = -1


@pytest.mark.parametrize(
    ("damage", "message", "recomputed"),
    [
        (lambda out: (out / CACHE_FILENAME).write_bytes(b"not a cache"), "is damaged", 3),
        (
            lambda out: (out / CACHE_FILENAME).write_bytes(
                (out / CACHE_FILENAME).read_bytes()[:-20]
            ),
            "is damaged",
            3,
        ),
        (lambda out: _rewrite_cache(out, _foreign), "another program, version", 3),
        (lambda out: _rewrite_cache(out, _break_rows), "entry of", 1),
    ],
    ids=["garbage", "truncated", "foreign", "malformed_entry"],
)
def test_a_damaged_or_foreign_cache_is_ignored_and_rebuilt(
    few_runs: Path, tmp_path: Path, caplog, damage, message, recomputed
) -> None:
    out, clean = tmp_path / "out", tmp_path / "clean"
    _build(few_runs, out)
    damage(out)
    with caplog.at_level(logging.INFO, logger="deepecgkit.statistical_report.reuse"):
        result = _build(few_runs, out)
    assert message in caplog.text
    assert result.computed_runs == recomputed and result.reused_runs == 3 - recomputed
    _assert_equals_clean(few_runs, out, clean)


def test_a_figure_changed_on_disk_is_drawn_again(few_runs: Path, tmp_path: Path) -> None:
    out, clean = tmp_path / "out", tmp_path / "clean"
    _build(few_runs, out, **FIGURES)
    figure = sorted((out / "figures").glob("*.png"))[0]
    figure.write_bytes(b"edited")
    _build(few_runs, out, **FIGURES)
    _assert_equals_clean(few_runs, out, clean, **FIGURES)


def test_only_the_reports_own_figures_are_removed(few_runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _build(few_runs, out, **FIGURES)
    mine = out / "figures" / "my_notes.png"
    mine.write_bytes(b"mine")
    shutil.rmtree(few_runs / "cnn_afib_seed1")
    _build(few_runs, out, plots=False)
    assert [path.name for path in (out / "figures").iterdir()] == ["my_notes.png"]


def test_run_directories_without_roots(runs: Path, tmp_path: Path) -> None:
    run_dirs = sorted(runs.iterdir())
    given = statistical_report(None, tmp_path / "given", run_dirs=run_dirs, **SETTINGS)
    searched = statistical_report([runs], tmp_path / "searched", **SETTINGS)
    # Named relative to the run directories' common folder: here the root itself.
    assert given.manifest["inputs"] == searched.manifest["inputs"]
    assert given.manifest["roots"] == []
    for name in ("run_summary", "paired_comparisons", "exclusions"):
        assert getattr(given, name).equals(getattr(searched, name))
    single = statistical_report(None, tmp_path / "single", run_dirs=run_dirs[:1], plots=False)
    assert [entry["run_id"] for entry in single.manifest["inputs"]] == [run_dirs[0].name]
    with pytest.raises(ComparisonError, match="no run directory given"):
        statistical_report(None, tmp_path / "none", run_dirs=[])
    with pytest.raises(ComparisonError, match="roots"):
        statistical_report(None, tmp_path / "none")


def test_a_runs_rows_do_not_depend_on_the_other_runs(runs: Path, tmp_path: Path) -> None:
    # Every run and pair reseeds with the report's seed, so a reused row equals a fresh one.
    alone = statistical_report(
        None,
        tmp_path / "alone",
        run_dirs=[runs / "cnn_afib_seed1"],
        **{**SETTINGS, "reference": None},
    )
    together = _build(runs, tmp_path / "together")
    rows = together.run_summary[together.run_summary["run_id"] == "cnn_afib_seed1"]
    assert alone.run_summary.reset_index(drop=True).equals(rows.reset_index(drop=True))


def test_an_unchanged_predictions_file_is_hashed_not_parsed(
    few_runs: Path, tmp_path: Path, monkeypatch
) -> None:
    duplicated = write_run(few_runs, "lstm", 0)  # check 7 excludes it
    predictions = duplicated / "predictions.csv"
    lines = predictions.read_text(encoding="utf-8").splitlines(keepends=True)
    predictions.write_text("".join([*lines, lines[1]]), encoding="utf-8")
    unparseable = write_run(few_runs, "lstm", 1)  # check 1 excludes it
    (unparseable / "predictions.csv").write_bytes(b"\xff\xfe not text")
    out, clean = tmp_path / "out", tmp_path / "clean"
    first = _build(few_runs, out)
    assert set(first.exclusions["reason"]) >= {"duplicate_sample", "unreadable"}

    parsed: list[str] = []
    real = identity.parse_predictions

    def counting(data: bytes, path: Path):
        parsed.append(path.parent.name)
        return real(data, path)

    monkeypatch.setattr(identity, "parse_predictions", counting)
    again = _build(few_runs, out)
    # Only the file that cannot be parsed is read again: its message names its path.
    assert parsed == ["lstm_afib_seed1"] and again.exclusions.equals(first.exclusions)
    parsed.clear()
    write_run(few_runs, "cnn", 0, variant=1)
    assert _counts(_build(few_runs, out)) == (2, 1, 0, 1)
    # The changed run is parsed to be checked; its reference, from the bytes already read,
    # only because their pair is computed again.
    assert sorted(parsed) == ["cnn_afib_seed0", "lstm_afib_seed1", f"{REFERENCE}_afib_seed0"]
    monkeypatch.undo()
    _assert_equals_clean(few_runs, out, clean)
