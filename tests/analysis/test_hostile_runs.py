"""A hostile but realistic corpus: each bad run is reported with its reason, never fatal.

Each test is named after an item of issue 9 and builds its corpus here, from
the bundled example runs (real train-grid output) or the synthetic writer.
The readers checked are discovery (``discover_runs``), the long frame, and
the ``aggregate`` and ``rank`` commands.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from deepecgkit.analysis import cli as analysis_cli
from deepecgkit.analysis.aggregation import reconcile_averaging
from deepecgkit.analysis.latex import compile_table, latex_engine, needs_unicode_engine
from deepecgkit.analysis.ranking import paired_difference, rank_within_seed
from deepecgkit.rundir.cache import scan_tree_state
from deepecgkit.rundir.format import METADATA_FILENAME, METRICS_FILENAME, SPLIT_INFO_FILENAME
from deepecgkit.rundir.read import discover_runs, read_run
from deepecgkit.rundir.records import runs_to_frame
from deepecgkit.rundir.write import write_run_directory

LOGREG_PR = "logreg-features_synthetic-long-pr"
CNN_PR = "simple-cnn_synthetic-long-pr"
LOGREG_RR = "logreg-features_synthetic-irregular-rr"
CNN_RR = "simple-cnn_synthetic-irregular-rr"
#: A 64-bit seed as secrets.randbits(64) gives them, and one just past int64.
SEED_2_64 = 2**64 + 12345
SEED_2_63 = 2**63


def run_cli(capsys: pytest.CaptureFixture[str], argv: list) -> tuple[int, str, str]:
    code = analysis_cli.main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def edit_json(path: Path, **changes: object) -> None:
    payload = json.loads(path.read_text(encoding="utf-8"))
    payload.update(changes)
    path.write_text(json.dumps(payload), encoding="utf-8")


def edit_metrics(run: Path, **cells: str) -> None:
    """Set cells of the one-row metrics CSV of ``run`` (columns by name)."""
    header, row = (run / METRICS_FILENAME).read_text(encoding="utf-8").splitlines()
    names, values = header.split(","), row.split(",")
    for name, value in cells.items():
        values[names.index(name)] = value
    (run / METRICS_FILENAME).write_text(f"{header}\n{','.join(values)}\n", encoding="utf-8")


def diagnostics_csv(out_dir: Path) -> pd.DataFrame:
    return pd.read_csv(out_dir / "diagnostics.csv", dtype=str, keep_default_na=False)


# --- 1. one bad input takes everything down -----------------------------------------------------


def test_seeds_and_split_sizes_of_2_63_or_more_are_read_exactly(
    example_runs, capsys, tmp_path: Path
) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR, CNN_PR, LOGREG_RR, CNN_RR)
    seeds = {0: SEED_2_64, 1: SEED_2_63, 2: SEED_2_64 + 1}
    for run in runs.iterdir():
        edit_json(run / METADATA_FILENAME, seed=seeds[int(run.name[-1])])
    odd = runs / f"{LOGREG_PR}_seed2"
    edit_json(odd / SPLIT_INFO_FILENAME, n_train=2**63, n_test=2**64)

    records, diagnostics = discover_runs([runs])
    assert sorted({r.seed for r in records}) == sorted(seeds.values()), "read as exact ints"
    assert diagnostics["suspect"] == [
        f"{odd} (split_info.json n_train {2**63} is not a usable count; unknown; "
        f"split_info.json n_test {2**64} is not a usable count; unknown)"
    ]
    frame = runs_to_frame(records)
    assert frame["seed"].dtype == object and set(frame["seed"]) == set(seeds.values())
    assert frame["n_train"].dtype == "Int64", "sizes stay integers, never float"

    out = tmp_path / "aggregate"
    code, stdout, err = run_cli(capsys, ["aggregate", runs, "--out", out])
    assert (code, err) == (0, "")
    assert "suspect 1" in stdout.splitlines()[1]
    aggregated = pd.read_csv(out / "aggregate.csv", dtype={"seeds": str})
    expected = ",".join(map(str, sorted(seeds.values())))
    assert set(aggregated["seeds"]) == {expected}, "seeds printed digit for digit"

    out = tmp_path / "rank"
    code, stdout, err = run_cli(capsys, ["rank", runs, "--out", out])
    assert (code, err) == (0, "")
    assert "note: split sizes unknown for 1 run(s)" in stdout
    ranks = pd.read_csv(out / "ranks.csv", dtype={"seed": str})
    assert set(ranks["seed"]) == {str(seed) for seed in seeds.values()}
    flips = pd.read_csv(out / "flip_tests.csv")
    assert flips["n_seeds"].tolist() == [3], "the big seeds pair across models and datasets"


def test_negative_seed_minus_one_does_not_collide_with_the_no_seed_marker(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    values = {"a": (0.70, 0.72, 0.71, 0.73), "b": (0.60, 0.61, 0.63, 0.62)}
    for model, scores in values.items():
        for seed, score in zip((-1, 0, 1, 2), scores, strict=True):
            write_run_directory(
                root / f"{model}_d_s{seed}", model=model, dataset="d", metrics={"f1": score}
            )
            edit_json(root / f"{model}_d_s{seed}" / METADATA_FILENAME, seed=seed)
    write_run_directory(root / "b_d_legacy", model="b", dataset="d", metrics={"f1": 0.99})

    records, diagnostics = discover_runs([root], include_legacy=True)
    assert diagnostics["no_seed"] == [str(root / "b_d_legacy")]
    legacy = [r for r in records if r.run_dir.name == "b_d_legacy"]
    assert legacy[0].seed is None, "no seed is out of band, not -1"
    assert diagnostics["duplicate"] == [], "the legacy run does not collide with seed -1"
    frame, _ = reconcile_averaging(runs_to_frame(records))
    difference = paired_difference(frame, "a", "b", "d")
    assert difference["seeds"] == [-1, 0, 1, 2], "-1 is an ordinary seed"
    assert difference["mean"] == pytest.approx(0.10, abs=1e-12), "the legacy 0.99 never pairs"
    assert set(rank_within_seed(frame)["seed"]) == {-1, 0, 1, 2}


def test_directory_name_not_valid_utf8_is_listed_with_its_reason(
    example_runs, capsys, tmp_path: Path
) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR, CNN_PR)
    odd = os.path.join(os.fsencode(runs), b"caf\xe9_seed7")
    shutil.copytree(os.fsencode(runs / f"{LOGREG_PR}_seed0"), odd)
    shown = f"{runs}/caf\\xe9_seed7"
    reason = "directory name is not valid UTF-8; rename it to use it"

    records, diagnostics = discover_runs([runs])
    assert len(records) == 6
    assert diagnostics["unreadable"] == [f"{shown} ({reason})"]
    for command in ("aggregate", "rank"):
        out = tmp_path / command
        code, _, err = run_cli(capsys, [command, runs, "--out", out])
        assert (code, err) == (0, ""), command
        entries = diagnostics_csv(out)
        assert entries.loc[entries["reason"] == "unreadable", "entry"].tolist() == [
            f"{shown} ({reason})"
        ]


def _discover_as_user(root: str) -> dict[str, list[str]]:
    flat = discover_runs([root])[1]["unreadable"]
    deep = discover_runs([root], recursive=True)[1]["unreadable"]
    return {"flat": flat, "recursive": deep, "sensor": list(scan_tree_state(root).pending)}


def test_run_directory_that_cannot_be_listed_is_reported_not_lost(as_unprivileged) -> None:
    # Not under tmp_path: that folder is private to root, and nobody must reach the runs.
    base = Path(tempfile.mkdtemp(prefix="deepecg-unlistable-"))
    try:
        os.chmod(base, 0o755)
        for seed in (0, 1):
            write_run_directory(
                base / f"m_d_seed{seed}", model="m", dataset="d", metrics={"f1": 0.5}, seed=seed
            )
        # Once as root first: the child must import nothing new (the interpreter's own
        # library, lazily loaded codecs included, may be out of nobody's reach).
        _discover_as_user(str(base))
        os.chmod(base / "m_d_seed1", 0)
        found = as_unprivileged(_discover_as_user, str(base))
    finally:
        os.chmod(base / "m_d_seed1", 0o755)
        shutil.rmtree(base)
    entry = f"{base / 'm_d_seed1'} (cannot be listed: permission denied)"
    assert found == {"flat": [entry], "recursive": [entry], "sensor": [str(base / "m_d_seed1")]}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_metrics_file_that_is_a_dangling_link_fifo_or_directory_is_reported(
    example_runs, tmp_path: Path
) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR)
    for kind, seed in (("link", 0), ("fifo", 1), ("folder", 2)):
        metrics = runs / f"{LOGREG_PR}_seed{seed}" / METRICS_FILENAME
        metrics.unlink()
        if kind == "link":
            metrics.symlink_to(tmp_path / "nowhere.csv")
        elif kind == "fifo":
            os.mkfifo(metrics)
        else:
            metrics.mkdir()
    expected = [
        f"{runs / f'{LOGREG_PR}_seed0'} ({METRICS_FILENAME}: not a regular file "
        "(dangling symbolic link))",
        f"{runs / f'{LOGREG_PR}_seed1'} ({METRICS_FILENAME}: not a regular file (FIFO))",
        f"{runs / f'{LOGREG_PR}_seed2'} ({METRICS_FILENAME}: not a regular file (directory))",
    ]
    for recursive in (False, True):
        records, diagnostics = discover_runs([runs], recursive=recursive)
        assert records == [] and diagnostics["unreadable"] == expected, recursive


def test_symlinked_run_directories_are_followed_under_recursive(
    example_runs, capsys, tmp_path: Path
) -> None:
    outside = example_runs(tmp_path / "elsewhere", CNN_PR)
    root = example_runs(tmp_path / "runs" / "nested", LOGREG_PR).parent
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "nested" / "back_to_root").symlink_to(root, target_is_directory=True)
    (root / "again").symlink_to(outside, target_is_directory=True)

    records, diagnostics = discover_runs([root], recursive=True)
    assert len(records) == 6 and diagnostics["duplicate"] == []
    assert {r.run_dir.parent.name for r in records} == {"nested", "again"}, (
        "the runs inside the tree under their own path; two links to one target: the first"
    )
    code, stdout, _ = run_cli(capsys, ["aggregate", root, "--recursive", "--out", tmp_path / "o"])
    assert code == 0 and stdout.startswith("runs: 6 usable (2 models"), stdout


def test_half_written_metrics_file_is_unreadable_never_a_run(example_runs, tmp_path: Path) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR)
    cut = runs / f"{LOGREG_PR}_seed0" / METRICS_FILENAME
    text = cut.read_text(encoding="utf-8")
    header, row = text.splitlines()
    f1_start = row.index(row.split(",")[header.split(",").index("f1")])
    cut.write_text(f"{header}\n{row[: f1_start + 4]}", encoding="utf-8")  # mid-number
    short = runs / f"{LOGREG_PR}_seed1" / METRICS_FILENAME
    short.write_text(f"{header}\n{','.join(row.split(',')[:6])}\n", encoding="utf-8")

    records, diagnostics = discover_runs([runs])
    assert [r.run_dir.name for r in records] == [f"{LOGREG_PR}_seed2"]
    assert diagnostics["unreadable"] == [
        f"{cut.parent} ({METRICS_FILENAME} does not end with a line break (half-written?))",
        f"{short.parent} ({METRICS_FILENAME} first row has 6 of the header's 22 cells "
        "(half-written?))",
    ]


def test_out_of_range_metric_values_and_duplicated_columns_are_flagged_not_ranked_first(
    example_runs, capsys, tmp_path: Path
) -> None:
    runs = example_runs(tmp_path / "runs", LOGREG_PR, CNN_PR)
    edit_metrics(runs / f"{CNN_PR}_seed0", f1="7.5")
    edit_metrics(runs / f"{CNN_PR}_seed1", f1="-0.5", brier="-0.25")
    doubled = runs / f"{CNN_PR}_seed2" / METRICS_FILENAME
    header, row = doubled.read_text(encoding="utf-8").splitlines()
    doubled.write_text(f"{header},f1\n{row},0.99\n", encoding="utf-8")

    records, diagnostics = discover_runs([runs])
    assert len(records) == 6, "the runs stay; only the bad values are set aside"
    assert diagnostics["suspect"] == [
        f"{runs / f'{CNN_PR}_seed0'} (f1 7.5 outside [0, 1]; dropped)",
        f"{runs / f'{CNN_PR}_seed1'} (f1 -0.5 outside [0, 1]; dropped; "
        "brier -0.25 outside [0, 2]; dropped)",
        f"{runs / f'{CNN_PR}_seed2'} (column f1 appears 2 times; dropped)",
    ]
    frame, _ = reconcile_averaging(runs_to_frame(records))
    ranks = rank_within_seed(frame)
    assert set(ranks["model"]) == {"logreg-features"}, "a dropped value is never ranked"

    code, stdout, err = run_cli(capsys, ["rank", runs, "--out", tmp_path / "rank"])
    assert (code, err) == (0, "")
    assert stdout.splitlines()[1].endswith(", suspect 3")
    entries = diagnostics_csv(tmp_path / "rank")
    assert (entries["reason"] == "suspect").sum() == 3


def test_non_positive_n_train_is_an_unknown_split_size_with_the_same_note(
    capsys, tmp_path: Path, worked_example_root: Path
) -> None:
    root = tmp_path / "runs"
    shutil.copytree(worked_example_root, root)
    for split_info in root.glob(f"*/{SPLIT_INFO_FILENAME}"):
        edit_json(split_info, n_train=0)
    records, diagnostics = discover_runs([root])
    assert {r.n_train for r in records} == {None}
    assert len(diagnostics["suspect"]) == 30
    assert diagnostics["suspect"][0].endswith(
        "(split_info.json n_train 0 is not a usable count; unknown)"
    )
    code, stdout, _ = run_cli(capsys, ["rank", root, "--out", tmp_path / "rank"])
    assert code == 0
    assert (
        "note: split sizes unknown for 30 run(s); their comparisons use the uncorrected "
        "standard error"
    ) in stdout


# --- 3. long names, Unicode names ---------------------------------------------------------------


def test_long_dataset_name_gives_a_bounded_table_file_and_an_index(capsys, tmp_path: Path) -> None:
    long_name = "d" * 300
    root = tmp_path / "runs"
    for seed in range(3):
        write_run_directory(
            root / f"m_seed{seed}", model="m", dataset=long_name, metrics={"f1": 0.5}, seed=seed
        )
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, ["aggregate", root, "--latex", "--out", out])
    assert (code, err) == (0, "")
    (table,) = out.glob("results_*.tex")
    assert len(table.name) <= 120 and table.name.startswith("results_" + "d" * 80 + "_")
    index = json.loads((out / "results_tables.json").read_text(encoding="utf-8"))
    assert index == {table.name: long_name}


def test_stale_results_table_of_a_gone_dataset_is_removed(capsys, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    for dataset in ("keep", "gone"):
        for seed in range(2):
            write_run_directory(
                root / f"m_{dataset}_seed{seed}",
                model="m",
                dataset=dataset,
                metrics={"f1": 0.5},
                seed=seed,
            )
    out = tmp_path / "out"
    assert run_cli(capsys, ["aggregate", root, "--latex", "--out", out])[0] == 0
    (out / "notes.tex").write_text("mine", encoding="utf-8")
    for seed in range(2):
        shutil.rmtree(root / f"m_gone_seed{seed}")
    code, stdout, _ = run_cli(capsys, ["aggregate", root, "--latex", "--out", out])
    assert code == 0 and "removed 1 stale table(s): results_gone.tex" in stdout
    assert sorted(p.name for p in out.glob("*.tex")) == ["notes.tex", "results_keep.tex"]


UNICODE_MODELS = ("α-net", "café-ß", "中文模型", "rtl\u200fmark")


def _unicode_corpus(root: Path) -> Path:
    for index, model in enumerate(UNICODE_MODELS):
        for dataset, offset in (("δ-set", 0.0), ("ptb", 0.05)):
            for seed in range(3):
                write_run_directory(
                    root / f"{index}_{dataset}_seed{seed}",
                    model=model,
                    dataset=dataset,
                    metrics={"f1": 0.5 + 0.1 * index + offset + 0.01 * seed},
                    seed=seed,
                )
    return root


@pytest.mark.skipif(latex_engine() is None, reason="needs pdflatex")
def test_unicode_names_give_tables_that_compile_with_the_engine_they_name(
    capsys, tmp_path: Path
) -> None:
    root = _unicode_corpus(tmp_path / "runs")
    for command in ("aggregate", "rank"):
        out = tmp_path / command
        code, _, err = run_cli(capsys, [command, root, "--latex", "--out", out])
        assert code == 0, err
        for table in out.glob("*.tex"):
            text = table.read_text(encoding="utf-8")
            assert "\u200f" not in text, "an invisible mark is dropped"
            if "中文" in text:
                assert needs_unicode_engine(text) and text.startswith("% This table holds")
                assert f"{table.name} holds characters pdflatex cannot typeset" in err
            else:
                assert text.isascii(), "Greek and accents become LaTeX commands"
            engine = latex_engine(text)
            if engine is not None:
                ok, reason = compile_table(text, engine=engine)
                assert ok, (table.name, reason)


def test_a_unicode_table_that_fails_its_check_fails_the_command(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _unicode_corpus(tmp_path / "runs")
    failing = shutil.which("false")
    assert failing is not None
    # An engine that always fails stands in for a table lualatex rejects.
    monkeypatch.setattr(analysis_cli, "latex_engine", lambda table=None: failing)
    code, stdout, err = run_cli(capsys, ["aggregate", root, "--latex", "--out", tmp_path / "o"])
    assert code == 1 and stdout == ""
    (line,) = err.splitlines()
    assert line.startswith("deepecg aggregate: error: results_") and "does not compile" in line


def _one_run(root: Path, **metrics: float) -> Callable[[], object]:
    run = write_run_directory(root / "m_d_seed0", model="m", dataset="d", metrics=metrics, seed=0)
    return lambda: read_run(run)


def test_nan_and_in_range_values_are_not_suspect(tmp_path: Path) -> None:
    record = _one_run(tmp_path, f1=1.0, mcc=-1.0, nll=math.inf, brier=2.0, accuracy=math.nan)()
    assert record.suspect == ()
    assert record.metrics["nll"] == math.inf and math.isnan(record.metrics["accuracy"])


def test_every_metric_of_both_schemas_has_a_range() -> None:
    from deepecgkit.rundir.format import METRIC_RANGES, MULTI_LABEL_METRICS, SINGLE_LABEL_METRICS

    assert set(METRIC_RANGES) == {*SINGLE_LABEL_METRICS, *MULTI_LABEL_METRICS}
    assert all(low < high for low, high in METRIC_RANGES.values())
