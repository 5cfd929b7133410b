"""``deepecg report``: exit codes, one-line errors and the success line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from deepecgkit import cli
from deepecgkit.statistical_report import cli as report_cli


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = report_cli.main(["report", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("deepecg report: error: ")
    assert "Traceback" not in err
    return lines[0]


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def test_success_line_and_refusal_to_overwrite(capsys, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    code, stdout, err = _run(
        capsys, str(corpus), "--out", str(out), "--n-resamples", "20", "--no-plots",
        "--reference", "resnet", "--allow-partial", "--bins", "5", "--seed", "3",
        "--confidence-level", "0.9",
    )  # fmt: skip
    assert code == 0 and err == ""
    assert stdout == (
        f"report written to {out}: 16 runs (4 partial), 19 excluded, 27 comparison rows\n"
    )
    before = _digests(out)
    code, stdout, err = _run(capsys, str(corpus), "--out", str(out), "--no-plots")
    assert code == 1 and stdout == ""
    assert _one_error_line(err) == (
        f"deepecg report: error: refusing to overwrite existing report at {out} (use --overwrite)"
    )
    assert _digests(out) == before
    code, _, _ = _run(
        capsys, str(corpus / "good"), "--out", str(out), "--no-plots", "--overwrite",
        "--n-resamples", "5",
    )  # fmt: skip
    assert code == 0


def test_dispatcher_routes_to_report(capsys, corpus: Path, tmp_path: Path) -> None:
    code = cli.main(["report", str(corpus / "good"), "--out", str(tmp_path / "r"), "--no-plots"])
    assert code == 0
    assert capsys.readouterr().out.startswith("report written to")


def test_pdf_flag_adds_a_vector_figure_per_png(capsys, corpus: Path, tmp_path: Path) -> None:
    run = str(corpus / "partial/missing_split_seed1")
    for flags, suffixes in (([], [".png"]), (["--pdf"], [".pdf", ".png"])):
        out = tmp_path / f"report{len(flags)}"
        code, _, err = _run(
            capsys, run, "--out", str(out), "--n-resamples", "5", "--allow-partial", *flags
        )
        assert code == 0 and err == ""
        assert sorted(p.suffix for p in (out / "figures").iterdir()) == suffixes


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--bins", "0"], "bins must be an integer >= 1"),
        (["--bins", "ten"], "--bins must be an integer"),
        (["--n-resamples", "0"], "n_resamples"),
        (["--confidence-level", "1"], "confidence_level"),
        (["--confidence-level", "high"], "--confidence-level must be a number"),
        (["--seed", "-2"], "seed"),
        (["--reference", "resnt"], "reference model 'resnt'"),
    ],
)
def test_invalid_settings_exit_one_and_write_nothing(
    capsys, corpus: Path, tmp_path: Path, extra: list[str], fragment: str
) -> None:
    out = tmp_path / "report"
    code, _, err = _run(capsys, str(corpus / "good"), "--out", str(out), "--no-plots", *extra)
    assert code == 1
    assert fragment in _one_error_line(err)
    assert not out.exists()


def test_missing_root_and_no_runs(capsys, tmp_path: Path) -> None:
    code, _, err = _run(capsys, str(tmp_path / "absent"), "--out", str(tmp_path / "r"))
    assert code == 1 and "does not exist" in _one_error_line(err)
    (tmp_path / "empty").mkdir()
    code, _, err = _run(capsys, str(tmp_path / "empty"), "--out", str(tmp_path / "r"))
    assert code == 1 and "no run directory" in _one_error_line(err)


def test_no_run_passing_exits_one_after_writing(capsys, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    code, _, err = _run(capsys, str(corpus / "bad"), "--out", str(out), "--no-plots")
    assert code == 1
    assert _one_error_line(err) == (
        f"deepecg report: error: no run passed the identity contract; see {out / 'exclusions.csv'}"
    )
    assert (out / "manifest.json").is_file() and (out / "exclusions.csv").is_file()


def test_usage_errors_are_one_line(capsys, corpus: Path) -> None:
    code, _, err = _run(capsys, str(corpus))
    assert code == 2 and "--out" in _one_error_line(err)
    code, _, err = _run(capsys, str(corpus), "--out", "x", "--frobnicate")
    assert code == 2 and "--frobnicate" in _one_error_line(err)


def test_help(capsys) -> None:
    code, stdout, _ = _run(capsys, "--help")
    assert code == 0 and "--allow-partial" in stdout and "ROOT" in stdout
