"""Reading stored predictions in this project's CSV and the upstream trainer's TXT layout."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from deepecgkit.rundir.read import predictions_path, read_predictions


def test_csv_keeps_ids_as_written_and_drops_unknown_columns(tmp_path) -> None:
    (tmp_path / "predictions.csv").write_text(
        "sample_id,group_id,y_true,prob_0,prob_1,logit_0,logit_1,note\n"
        "007,0042,1,0.25,0.75,-1.0,1.0,x\n"
        "008,,0,0.5,0.5,,,y\n",
        encoding="utf-8",
    )
    frame = read_predictions(tmp_path)
    assert list(frame.columns) == [
        "sample_id", "group_id", "y_true", "prob_0", "prob_1", "logit_0", "logit_1",
    ]  # fmt: skip
    assert frame["sample_id"].tolist() == ["007", "008"]
    assert frame["group_id"].tolist() == ["0042", ""]
    assert frame["y_true"].tolist() == [1, 0]
    assert frame["prob_1"].tolist() == [0.75, 0.5]
    assert np.isnan(frame["logit_0"].iloc[1])


def test_a_non_numeric_probability_column_stays_strings(tmp_path) -> None:
    (tmp_path / "predictions.csv").write_text(
        "sample_id,group_id,y_true,prob_0,prob_1\n1,1,0,high,0.5\n", encoding="utf-8"
    )
    frame = read_predictions(tmp_path)
    assert frame["prob_0"].tolist() == ["high"]
    assert frame["prob_1"].dtype.kind == "f"


def test_upstream_single_label_txt(tmp_path, to_frame, to_upstream, predictions) -> None:
    canonical = to_frame(predictions(0, n_groups=4, per_group=2))
    upstream = to_upstream(canonical, class_names=("normal", "af", "other"))
    upstream.to_csv(tmp_path / "predictions.txt", sep="\t", index=False)
    frame = read_predictions(tmp_path)
    assert list(frame.columns) == ["sample_id", "group_id", "y_true", "prob_0", "prob_1", "prob_2"]
    assert frame["sample_id"].tolist() == canonical["sample_id"].tolist()
    assert frame["group_id"].tolist() == canonical["group_id"].tolist()
    assert frame["y_true"].tolist() == canonical["y_true"].tolist()
    np.testing.assert_allclose(
        frame[["prob_0", "prob_1", "prob_2"]], canonical.iloc[:, 3:], atol=5e-7
    )


def test_upstream_txt_with_class_names_and_no_record(tmp_path) -> None:
    (tmp_path / "predictions.txt").write_text(
        "index\ttrue_label\tpredicted_label\tprob_normal\tprob_af\n"
        "0\taf\taf\t0.100000\t0.900000\n"
        "1\tnormal\taf\t0.400000\t0.600000\n",
        encoding="utf-8",
    )
    frame = read_predictions(tmp_path)
    assert frame["y_true"].tolist() == [1, 0]
    assert frame["group_id"].tolist() == frame["sample_id"].tolist() == ["0", "1"]


def test_upstream_multilabel_txt(tmp_path) -> None:
    (tmp_path / "predictions.txt").write_text(
        "index\ttrue_af\tpred_af\tprob_af\ttrue_pvc\tpred_pvc\tprob_pvc\trecord\n"
        "0\t1\t1\t0.800000\t0\t0\t0.100000\tA01\n",
        encoding="utf-8",
    )
    frame = read_predictions(tmp_path)
    assert list(frame.columns) == [
        "sample_id", "group_id", "y_true_0", "prob_0", "y_true_1", "prob_1",
    ]  # fmt: skip
    assert frame.iloc[0].tolist() == ["0", "A01", 1, 0.8, 0, 0.1]


def test_csv_wins_over_txt(tmp_path, to_frame, to_upstream, predictions) -> None:
    canonical = to_frame(predictions(0, n_groups=3, per_group=1))
    canonical.to_csv(tmp_path / "predictions.csv", index=False)
    shifted = canonical.assign(sample_id=canonical["sample_id"] + "x")
    to_upstream(shifted).to_csv(tmp_path / "predictions.txt", sep="\t", index=False)
    assert predictions_path(tmp_path).name == "predictions.csv"
    assert read_predictions(tmp_path)["sample_id"].tolist() == canonical["sample_id"].tolist()


def test_missing_and_unparseable_files(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        read_predictions(tmp_path)
    (tmp_path / "predictions.csv").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match="cannot parse"):
        read_predictions(tmp_path)
    (tmp_path / "predictions.csv").write_text("a,a\n1,2\n", encoding="utf-8")
    assert isinstance(pd.read_csv(tmp_path / "predictions.csv"), pd.DataFrame)
    with pytest.raises(ValueError, match="repeated column"):
        read_predictions(tmp_path)
