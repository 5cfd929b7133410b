"""Every figure renders to a PNG of exactly figsize x FIGURE_DPI pixels, without leaks."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from deepecgkit.evaluation import (
    FIGURE_DPI,
    expected_calibration_error,
    finalize_figure,
    plot_calibration_curve,
    plot_confusion_matrix,
    plot_ecg_signals,
    plot_embedding,
    plot_predictions,
    plot_reliability_diagram,
    plot_roc_curve,
    plot_training_curves,
    plot_transfer_matrix,
    reliability_bins,
)


def assert_png(path: Path, figsize: tuple[float, float]) -> None:
    """A non-empty image of exactly figsize x FIGURE_DPI pixels with something drawn on it."""
    assert path.stat().st_size > 0
    image = mpimg.imread(path)
    width, height = figsize
    assert image.shape[:2] == (round(height * FIGURE_DPI), round(width * FIGURE_DPI))
    assert (image[..., :3] < 0.9).any()  # not a blank canvas


@pytest.fixture(autouse=True)
def no_figure_leaks():
    before = set(plt.get_fignums())
    yield
    leaked = set(plt.get_fignums()) - before
    plt.close("all")
    assert not leaked, f"figures left open: {leaked}"


def test_confusion_matrix_and_roc(tmp_path, binary, multiclass):
    plot_confusion_matrix(
        multiclass.y, multiclass.prob, class_names=list("NAO~"), save_path=str(tmp_path / "cm.png")
    )
    assert_png(tmp_path / "cm.png", (8, 6))
    plot_roc_curve(binary.y, binary.prob, save_path=str(tmp_path / "roc.png"))
    assert_png(tmp_path / "roc.png", (8, 6))


def test_roc_errors(binary, multiclass):
    with pytest.raises(ValueError, match="y_scores\\[:, k\\]"):
        plot_roc_curve(multiclass.y, multiclass.prob)
    with pytest.raises(ValueError, match="single class"):
        plot_roc_curve(np.zeros(5), np.linspace(0, 1, 5))


def test_training_curves(tmp_path):
    log = pd.DataFrame(
        {
            "epoch": [1, 2, 3],
            "train_loss": [1.0, 0.7, 0.5],
            "val_loss": [1.1, 0.8, np.nan],
            "train_acc": [0.5, 0.6, 0.7],
            "val_acc": [0.4, 0.55, 0.6],
            "lr": [1e-3] * 3,
        }
    )
    log.to_csv(tmp_path / "training_log.csv", index=False)
    out = tmp_path / "figures"
    plot_training_curves(str(tmp_path / "training_log.csv"), save_dir=str(out))
    assert_png(out / "loss.png", (10, 5))
    assert_png(out / "accuracy.png", (10, 5))
    log.drop(columns=["train_acc", "val_acc"]).to_csv(tmp_path / "no_acc.csv", index=False)
    plot_training_curves(str(tmp_path / "no_acc.csv"), save_path=str(tmp_path / "p" / "x.png"))
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["loss.png"]
    log.drop(columns=["val_loss"]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match=r"bad\.csv lacks"):
        plot_training_curves(str(tmp_path / "bad.csv"), save_dir=str(out))


def test_ecg_signals_layouts(tmp_path, rng):
    signal = rng.normal(size=(500, 3))
    plot_ecg_signals(signal.T, sampling_rate=250, save_path=str(tmp_path / "ecg.png"), unit="mV")
    assert_png(tmp_path / "ecg.png", (12, 6))
    plot_ecg_signals(signal[:, 0], save_path=str(tmp_path / "one.png"))
    assert_png(tmp_path / "one.png", (12, 2))
    with pytest.raises(ValueError, match="batch\\[0\\]"):
        plot_ecg_signals(np.zeros((2, 3, 100)))
    with pytest.raises(ValueError, match="leads has 2 names"):
        plot_ecg_signals(signal, leads=["I", "II"])


def test_ecg_signal_labels(rng):
    plot_ecg_signals(rng.normal(size=(100, 2)), leads=["I", "II"], sampling_rate=100)
    axes = plt.gcf().axes
    assert [ax.get_ylabel() for ax in axes] == ["I", "II"]
    assert axes[-1].get_xlabel() == "Time (s)"
    assert axes[0].lines[0].get_xdata()[-1] == pytest.approx(0.99)
    plt.close("all")


def test_predictions_and_embedding(tmp_path, rng):
    y = rng.normal(size=50)
    plot_predictions(y, y + rng.normal(size=50), save_path=str(tmp_path / "pred.png"))
    assert_png(tmp_path / "pred.png", (8, 6))
    points = rng.normal(size=(60, 2))
    plot_embedding(points, save_path=str(tmp_path / "plain.png"))
    assert_png(tmp_path / "plain.png", (8, 6))
    multi_hot = rng.integers(0, 2, (60, 3))
    plot_embedding(
        points, multi_hot, class_names=["a", "b"], save_path=str(tmp_path / "labels.png")
    )
    assert_png(tmp_path / "labels.png", (8, 6))
    plot_embedding(points, np.arange(60) % 12)
    legend = [t.get_text() for t in plt.gca().get_legend().get_texts()]
    assert legend == [f"Class {k}" for k in range(12)]
    plt.close("all")
    with pytest.raises(ValueError, match="embed_2d"):
        plot_embedding(rng.normal(size=(10, 3)))
    with pytest.raises(ValueError, match="labels has 5 entries"):
        plot_embedding(points, np.zeros(5))


def test_calibration_curve_files(tmp_path, multiclass, multilabel):
    plot_calibration_curve(multiclass.y, multiclass.prob, save_dir=str(tmp_path / "mc"))
    assert_png(tmp_path / "mc" / "calibration_curve.png", (8, 6))
    assert_png(tmp_path / "mc" / "prediction_distribution.png", (8, 6))
    plot_calibration_curve(multilabel.y, multilabel.prob, save_path=str(tmp_path / "ml" / "c.png"))
    assert (tmp_path / "ml" / "calibration_curve.png").exists()


def test_reliability_diagram_png_and_pdf(tmp_path, multiclass):
    table = plot_reliability_diagram(
        multiclass.y, multiclass.prob, n_bins=10, save_path=str(tmp_path / "rel.png")
    )
    pd.testing.assert_frame_equal(table, reliability_bins(multiclass.y, multiclass.prob, n_bins=10))
    assert_png(tmp_path / "rel.png", (6, 7))
    pdf = (tmp_path / "rel.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"CreationDate" not in pdf
    again = tmp_path / "again"
    plot_reliability_diagram(multiclass.y, multiclass.prob, n_bins=10, save_path=str(again / "rel"))
    assert (again / "rel.png").read_bytes() == (tmp_path / "rel.png").read_bytes()
    assert (again / "rel.pdf").read_bytes() == pdf


def test_binary_reliability_diagram_is_the_positive_class_diagram(binary):
    from deepecgkit.evaluation import classwise_calibration_error

    table = plot_reliability_diagram(binary.y, binary.prob, n_bins=10)
    fig = plt.gcf()
    pd.testing.assert_frame_equal(
        table, reliability_bins(binary.y, binary.prob, n_bins=10, classwise=True)
    )
    assert (table["class"] == 1).all() and table["count"].sum() == binary.y.size
    value = classwise_calibration_error(binary.y, binary.prob, n_bins=10)
    assert f"class-wise ECE = {value:.4f} (10 bins)" in fig._suptitle.get_text()
    plt.close(fig)


def test_reliability_diagram_breaks_at_empty_bins_and_titles_ece(binary):
    table = plot_reliability_diagram(binary.y, binary.prob, n_bins=10, classwise=False)
    fig = plt.gcf()
    upper = fig.axes[0]
    model_line = next(line for line in upper.lines if line.get_label() == "Model")
    accuracy = np.asarray(model_line.get_ydata(), dtype=float)
    empty = table["count"].to_numpy() == 0
    assert empty[:5].all()  # binary confidences are >= 0.5
    assert np.isnan(accuracy[empty]).all() and not np.isnan(accuracy[~empty]).any()
    ece = expected_calibration_error(binary.y, binary.prob, n_bins=10)
    assert f"ECE = {ece:.4f} (10 bins)" in fig._suptitle.get_text()
    plt.close(fig)


def test_reliability_diagram_multilabel_and_quantile(tmp_path, multilabel):
    table = plot_reliability_diagram(
        multilabel.y,
        multilabel.prob,
        n_bins=5,
        strategy="quantile",
        class_names=["AF", "RBBB", "LBBB"],
        save_path=str(tmp_path / "ml.png"),
        formats=("png",),
    )
    assert sorted(table["class"].unique()) == [0, 1, 2]
    assert_png(tmp_path / "ml.png", (6, 7))
    assert not (tmp_path / "ml.pdf").exists()


def test_transfer_matrix_nan_cells_are_blank(tmp_path):
    values = np.array([[0.51, 0.49, np.nan], [0.91, 0.62, 0.73], [0.64, 0.88, 0.70]])
    sources, targets = ["untrained", "af", "ptb-xl"], ["af", "ltafdb", "ptb-xl"]
    plot_transfer_matrix(
        values, sources, targets, baseline_rows=1, save_path=str(tmp_path / "t.png")
    )
    assert_png(tmp_path / "t.png", (1.6 * 3 + 4, 0.9 * 3 + 3))

    plot_transfer_matrix(values, sources, targets, baseline_rows=1)
    fig = plt.gcf()
    ax = fig.axes[0]
    annotations = [t.get_text() for t in ax.texts]
    assert len(annotations) == 8 and "nan" not in annotations and "0.510" in annotations
    mesh = ax.collections[0]
    assert np.ma.getmaskarray(mesh.get_array()).sum() == 1
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3]
    height = pixels.shape[0]
    x, y = ax.transData.transform((2.5, 0.5))  # centre of the NaN cell (row 0, column 2)
    assert (pixels[int(height - y), int(x)] == 255).all()  # background shows through
    x, y = ax.transData.transform((0.5, 1.5))
    assert not (pixels[int(height - y), int(x)] == 255).all()
    assert any(line.get_linewidth() == 3 for line in ax.lines)
    plt.close(fig)
    with pytest.raises(ValueError, match="sources x targets"):
        plot_transfer_matrix(values, sources, targets[:2])


def test_all_nan_transfer_matrix_still_renders(tmp_path):
    plot_transfer_matrix(
        np.full((2, 2), np.nan), ["a", "b"], ["c", "d"], save_path=str(tmp_path / "n.png")
    )
    assert (tmp_path / "n.png").stat().st_size > 0


def test_finalize_figure_without_path_keeps_figure_open():
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    finalize_figure(None, fig)
    assert fig.number in plt.get_fignums()
    plt.close(fig)
    fig = plt.figure(figsize=(2, 2))
    with pytest.raises(ValueError, match="suffix"):
        finalize_figure("no_suffix", fig)
    assert not plt.get_fignums() or fig.number not in plt.get_fignums()
    assert math.isfinite(FIGURE_DPI)
