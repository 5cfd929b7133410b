"""deepecg synth: synthetic data written in the local layout and read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deepecgkit import cli
from deepecgkit.datasets import LocalECGDataset, SyntheticRhythmDataset


@pytest.mark.parametrize("fmt", ["npz", "wfdb"])
def test_synth_round_trip_through_the_local_reader(tmp_path: Path, capsys, fmt: str) -> None:
    code = cli.main(
        ["synth", "synthetic-rhythm", "--out", str(tmp_path), "--format", fmt, "--patients", "6"]
    )
    assert code == 0
    assert "wrote 12 records (6 patients) of synthetic-rhythm" in capsys.readouterr().out
    suffix = ".npz" if fmt == "npz" else ".hea"
    assert len(list((tmp_path / "records").glob(f"*{suffix}"))) == 12
    local = LocalECGDataset(tmp_path)
    memory = SyntheticRhythmDataset(n_patients=6)
    np.testing.assert_array_equal(local.labels, memory.labels)
    np.testing.assert_array_equal(local.groups, memory.groups)
    if fmt == "npz":
        np.testing.assert_array_equal(local.signals, memory.signals)
    else:  # 16-bit storage: equal to well within the z-scored signal's resolution
        np.testing.assert_allclose(local.signals, memory.signals, atol=5e-3)


def test_rewriting_in_the_other_format_leaves_no_ambiguous_record(tmp_path: Path) -> None:
    base = ["synth", "synthetic-af", "--out", str(tmp_path), "--patients", "2"]
    assert cli.main([*base, "--format", "wfdb"]) == 0
    assert cli.main([*base, "--format", "npz"]) == 0
    assert len(LocalECGDataset(tmp_path)) == 6
    assert not list((tmp_path / "records").glob("*.hea"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["synthetic-eeg", "--out", "x"], "invalid choice: 'synthetic-eeg'"),
        (["synthetic-af", "--out", "x", "--patients", "0"], "n_patients"),
        (["synthetic-af"], "--out"),
    ],
)
def test_synth_usage_errors(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    argv = [str(tmp_path / a) if a == "x" else a for a in argv]
    assert cli.main(["synth", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\\n") == 0 and err.count("\n") == 1 and message in err
    assert "Traceback" not in err
