"""Figures of the evaluation package: confusion matrices, ROC, calibration, transfer.

Every figure is saved through :func:`finalize_figure`: atomically, at
``FIGURE_DPI`` and without ``bbox_inches="tight"``, so a PNG is exactly
``figsize × FIGURE_DPI`` pixels, and without timestamps in its metadata, so
identical inputs and library versions give identical bytes. A saving call
closes what it opened (the set of open figures is unchanged afterwards);
without a path the figure is shown on an interactive backend and otherwise
left open for the caller.

Backend: at import, when ``MPLBACKEND`` is unset and a Linux session has no
display (neither ``DISPLAY`` nor ``WAYLAND_DISPLAY``), the non-interactive
Agg backend is selected, so nothing ever tries to open a window on a server.

The reliability diagram is drawn from
:func:`~deepecgkit.evaluation.calibration.reliability_bins`, which it
returns, so a figure and its ECE can never disagree.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import matplotlib


def _select_backend() -> None:
    """Use Agg on a display-less Linux session unless the user chose a backend."""
    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if "MPLBACKEND" not in os.environ and sys.platform.startswith("linux") and headless:
        matplotlib.use("Agg")


_select_backend()

import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.backends import BackendFilter, backend_registry  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from sklearn.calibration import calibration_curve  # noqa: E402
from sklearn.metrics import auc, confusion_matrix, roc_curve  # noqa: E402

from deepecgkit.evaluation._validation import (  # noqa: E402
    MATRIX_NDIM,
    as_label_vector,
    check_task,
    expand_binary,
    is_multilabel_target,
)
from deepecgkit.evaluation.calibration import (  # noqa: E402
    TOP_LABEL_CLASS,
    ece_from_reliability,
    reliability_bins,
    resolve_task_shape,
)
from deepecgkit.evaluation.constants import (  # noqa: E402
    BINNING_QUANTILE,
    BINNING_UNIFORM,
    DEFAULT_PROBE_METRIC,
    FIGURE_DPI,
    TASK_BINARY,
)
from deepecgkit.io import atomic_write_bytes  # noqa: E402
from deepecgkit.rundir.format import DEFAULT_CALIBRATION_BINS  # noqa: E402

__all__ = [
    "finalize_figure",
    "plot_calibration_curve",
    "plot_confusion_matrix",
    "plot_ecg_signals",
    "plot_embedding",
    "plot_predictions",
    "plot_reliability_diagram",
    "plot_roc_curve",
    "plot_training_curves",
    "plot_transfer_matrix",
]

#: Metadata entries that would otherwise stamp the file with the current time.
_NO_TIMESTAMP = {
    "pdf": {"CreationDate": None},
    "svg": {"Date": None},
    "ps": {"CreationDate": None},
    "eps": {"CreationDate": None},
}
_GRID_ALPHA = 0.3
_LOSS_FILENAME = "loss.png"
_ACCURACY_FILENAME = "accuracy.png"
_CALIBRATION_FILENAME = "calibration_curve.png"
_DISTRIBUTION_FILENAME = "prediction_distribution.png"
_SMALL_PALETTE_SIZE = 10
_TWO_CLASS_COLUMNS = 2
_EMBEDDING_DIMENSIONS = 2


# --- saving ------------------------------------------------------------------------------


def _interactive_backend() -> bool:
    non_interactive = backend_registry.list_builtin(BackendFilter.NON_INTERACTIVE)
    return matplotlib.get_backend().lower() not in non_interactive


def _tight_layout(fig: Figure) -> None:
    with warnings.catch_warnings():
        # Layout is best effort; matplotlib warns for axes it cannot fit exactly.
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()


def _save(fig: Figure, path: Path) -> None:
    """Render ``fig`` in the format of the path's suffix and write it atomically."""
    fmt = path.suffix.lstrip(".").lower()
    if not fmt:
        raise ValueError(f"save path {path} needs a file suffix such as .png or .pdf")
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=FIGURE_DPI, metadata=_NO_TIMESTAMP.get(fmt))
    atomic_write_bytes(path, buffer.getvalue())


def finalize_figure(save_path: str | None, fig: Figure | None = None) -> None:
    """Lay out ``fig`` (default: the current figure), then save and close it, or show it.

    With a path the figure is written atomically at ``FIGURE_DPI`` in the
    format of the path's suffix and closed. Without one it is shown on an
    interactive backend and otherwise stays open for the caller.
    """
    figure = fig if fig is not None else plt.gcf()
    _tight_layout(figure)
    if save_path is None:
        if _interactive_backend():
            plt.show()
        return
    try:
        _save(figure, Path(save_path))
    finally:
        plt.close(figure)


@contextlib.contextmanager
def _figure(**subplot_kwargs: Any) -> Iterator[tuple[Figure, Any]]:
    """``plt.subplots(**subplot_kwargs)``, closing the figure if drawing fails (no leaks)."""
    fig, axes = plt.subplots(**subplot_kwargs)
    try:
        yield fig, axes
    except BaseException:
        plt.close(fig)
        raise


def _output_directory(save_dir: str | None, save_path: str | None) -> Path | None:
    """``save_dir``, else the parent of ``save_path`` (kept for compatibility), else None."""
    if save_dir is not None:
        return Path(save_dir)
    if save_path is not None:
        return Path(save_path).parent
    return None


def _finish(fig: Figure, directory: Path | None, filename: str) -> None:
    finalize_figure(str(directory / filename) if directory is not None else None, fig)


# --- classification figures --------------------------------------------------------------


def plot_confusion_matrix(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    *,
    class_names: list[str] | None = None,
    title: str = "Confusion Matrix",
    save_path: str | None = None,
) -> None:
    """Annotated confusion-matrix heatmap (rows true, columns predicted).

    Labels are the sorted union of ``y_true`` and ``y_pred`` (a 2-D ``y_pred``
    is argmaxed); ``class_names`` is used only when it has one name per label.
    """
    import seaborn as sns

    truth = as_label_vector(np.asarray(y_true))
    predicted = np.asarray(y_pred)
    if predicted.ndim == MATRIX_NDIM and predicted.shape[1] > 1:
        predicted = np.argmax(predicted, axis=1)
    predicted = as_label_vector(predicted)
    labels = np.union1d(truth, predicted)
    cm = confusion_matrix(truth, predicted, labels=labels)
    names = (
        list(class_names)
        if class_names is not None and len(class_names) == len(labels)
        else [str(label) for label in labels]
    )
    with _figure(figsize=(8, 6)) as (fig, ax):
        sns.heatmap(
            cm,
            annot=True,
            fmt="d",
            cmap="Blues",
            xticklabels=names,
            yticklabels=names,
            cbar_kws={"label": "Count"},
            ax=ax,
        )
        ax.set_ylabel("True Label")
        ax.set_xlabel("Predicted Label")
        ax.set_title(title)
        finalize_figure(save_path, fig)


def plot_roc_curve(
    y_true: np.ndarray,
    y_scores: np.ndarray,
    *,
    title: str = "ROC Curve",
    save_path: str | None = None,
) -> None:
    """Two-class ROC curve with its AUC.

    ``y_scores`` is the positive-class score, or a one- or two-column matrix
    whose last column is used (the trainer's binary layout).

    Raises:
        ValueError: more than two score columns (pass ``y_true == k`` and
            ``y_scores[:, k]`` for class k against the rest), or fewer than two
            classes in ``y_true`` (the curve is undefined).
    """
    truth = as_label_vector(np.asarray(y_true))
    scores = np.asarray(y_scores)
    if scores.ndim == MATRIX_NDIM:
        if scores.shape[1] > _TWO_CLASS_COLUMNS:
            raise ValueError(
                f"plot_roc_curve draws a two-class curve but y_scores has {scores.shape[1]} "
                "columns; for class k against the rest pass y_true == k and y_scores[:, k]"
            )
        scores = scores[:, -1]
    if len(np.unique(truth)) < _TWO_CLASS_COLUMNS:
        raise ValueError("y_true holds a single class; a ROC curve needs both classes")
    fpr, tpr, _ = roc_curve(truth, scores)
    area = auc(fpr, tpr)
    with _figure(figsize=(8, 6)) as (fig, ax):
        ax.plot(fpr, tpr, color="darkorange", lw=2, label=f"ROC curve (area = {area:.2f})")
        ax.plot([0, 1], [0, 1], color="navy", lw=2, linestyle="--")
        ax.set_xlim(0.0, 1.0)
        ax.set_ylim(0.0, 1.05)
        ax.set_xlabel("False Positive Rate")
        ax.set_ylabel("True Positive Rate")
        ax.set_title(title)
        ax.legend(loc="lower right")
        finalize_figure(save_path, fig)


def _probability_matrix(y_prob: np.ndarray) -> np.ndarray:
    prob = np.asarray(y_prob, dtype=np.float64)
    if prob.ndim == 1 or prob.shape[1] == 1:
        return expand_binary(prob)
    return prob


def plot_calibration_curve(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    class_names: list[str] | None = None,
    n_bins: int = 10,
    title: str = "Calibration Plot",
    save_dir: str | None = None,
    save_path: str | None = None,
) -> None:
    """One-vs-rest calibration curves per class, and the predicted-probability histograms.

    Writes ``calibration_curve.png`` and ``prediction_distribution.png`` into
    ``save_dir`` (else the parent of ``save_path``), or shows them. A 1-D
    ``y_prob`` is expanded to ``[1 − p, p]``; multi-hot ``y_true`` uses column
    k as the target of class k. Classes without positives are skipped.
    """
    truth = np.asarray(y_true)
    prob = _probability_matrix(y_prob)
    names = [
        class_names[k] if class_names is not None and k < len(class_names) else f"Class {k}"
        for k in range(prob.shape[1])
    ]
    multilabel = is_multilabel_target(truth)
    truth = truth if multilabel else as_label_vector(truth)
    directory = _output_directory(save_dir, save_path)

    with _figure(figsize=(8, 6)) as (fig, ax):
        for k, name in enumerate(names):
            positive = truth[:, k] == 1 if multilabel else truth == k
            if not positive.any():
                continue
            fraction, mean_predicted = calibration_curve(
                positive, prob[:, k], n_bins=n_bins, strategy="uniform"
            )
            ax.plot(mean_predicted, fraction, "s-", label=name)
        ax.plot([0, 1], [0, 1], "k--", label="Perfectly calibrated")
        ax.set_xlabel("Mean Predicted Probability")
        ax.set_ylabel("Fraction of Positives")
        ax.set_title(title)
        ax.legend(loc="lower right")
        ax.grid(True, alpha=_GRID_ALPHA)
        _finish(fig, directory, _CALIBRATION_FILENAME)

    with _figure(figsize=(8, 6)) as (fig, ax):
        for k, name in enumerate(names):
            ax.hist(prob[:, k], bins=n_bins, alpha=0.5, label=name)
        ax.set_xlabel("Predicted Probability")
        ax.set_ylabel("Count")
        ax.set_title("Prediction Distribution")
        ax.legend()
        _finish(fig, directory, _DISTRIBUTION_FILENAME)


def _draw_reliability_panels(
    table: pd.DataFrame,
    strategy: str,
    n_bins: int,
    class_names: list[str] | None,
    upper: Any,
    lower: Any,
) -> None:
    upper.plot([0, 1], [0, 1], linestyle="--", color="grey", label="Perfect calibration")
    multilabel = bool((table["class"] != TOP_LABEL_CLASS).any())
    for k, rows in table.groupby("class", sort=True):
        # Empty bins keep NaN statistics, so the line breaks there instead of dropping to 0.
        label = (
            (class_names[k] if class_names is not None and k < len(class_names) else f"Class {k}")
            if multilabel
            else "Model"
        )
        upper.plot(rows["confidence"], rows["accuracy"], marker="o", label=label)
        shares = rows["count"] / rows["count"].sum()
        if strategy == BINNING_QUANTILE:
            centres, widths = (rows["lower"] + rows["upper"]) / 2.0, rows["upper"] - rows["lower"]
        else:
            centres, widths = (rows["lower"] + rows["upper"]) / 2.0, 1.0 / n_bins
        lower.bar(
            centres,
            shares,
            width=widths,
            alpha=0.5 if multilabel else 0.8,
            edgecolor="black",
            linewidth=0.5,
        )
        if not multilabel:
            populated = rows[rows["count"] > 0]
            upper.vlines(
                populated["confidence"],
                populated["accuracy"],
                populated["confidence"],
                colors="red",
                alpha=0.6,
                label="Gap",
            )
    upper.set_xlim(0.0, 1.0)
    upper.set_ylim(0.0, 1.0)
    upper.set_ylabel("Observed frequency" if multilabel else "Accuracy")
    upper.legend(loc="upper left")
    upper.grid(True, alpha=_GRID_ALPHA)
    lower.set_xlabel("Confidence")
    lower.set_ylabel("Fraction")
    lower.grid(True, alpha=_GRID_ALPHA)


def plot_reliability_diagram(
    y_true: np.ndarray,
    y_prob: np.ndarray,
    *,
    n_bins: int = DEFAULT_CALIBRATION_BINS,
    task: str | None = None,
    strategy: str = BINNING_UNIFORM,
    class_names: list[str] | None = None,
    title: str = "Reliability Diagram",
    save_path: str | None = None,
    formats: tuple[str, ...] = ("png", "pdf"),
    classwise: bool | None = None,
) -> pd.DataFrame:
    """Reliability diagram (accuracy against confidence) above the bin-share histogram.

    Args:
        y_true, y_prob, n_bins, task, strategy: as for
            :func:`~deepecgkit.evaluation.calibration.reliability_bins`.
        class_names: label names of a multi-label or class-wise diagram (one
            line per label or class).
        title: figure title; ``ECE = x.xxxx (<n_bins> bins)`` (or
            ``class-wise ECE = ...``) is appended, computed from the returned table.
        save_path: base path; one file per format at ``Path(save_path).with_suffix("." + fmt)``.
        formats: file formats written when saving (default PNG and PDF).
        classwise: draw ``p_k`` against the fraction of class k per class
            (Kull et al. 2019). None (default): class-wise for binary tasks,
            which gives the positive-class diagram (the top-label diagram
            folds a binary task at 0.5 and can hide a shift of every
            probability), top label otherwise.

    Returns:
        The :func:`reliability_bins` table the figure was drawn from.
    """
    check_task(task)
    if classwise is None:
        classwise = resolve_task_shape(y_true, y_prob, task=task) == TASK_BINARY
    table = reliability_bins(
        y_true, y_prob, n_bins=n_bins, strategy=strategy, task=task, classwise=classwise
    )
    name = "class-wise ECE" if classwise else "ECE"
    with _figure(
        nrows=2, ncols=1, sharex=True, figsize=(6, 7), gridspec_kw={"height_ratios": (3, 1)}
    ) as (fig, (upper, lower)):
        _draw_reliability_panels(table, strategy, n_bins, class_names, upper, lower)
        fig.suptitle(f"{title}: {name} = {ece_from_reliability(table):.4f} ({n_bins} bins)")
        if save_path is None:
            finalize_figure(None, fig)
            return table
        _tight_layout(fig)
        try:
            for fmt in formats:
                _save(fig, Path(save_path).with_suffix("." + fmt))
        finally:
            plt.close(fig)
    return table


# --- training and signals ----------------------------------------------------------------


def plot_training_curves(
    metrics_path: str, *, save_dir: str | None = None, save_path: str | None = None
) -> None:
    """Loss (and, when logged, accuracy) per epoch from the trainer's CSV log.

    Writes ``loss.png`` and, when a ``train_acc`` column exists,
    ``accuracy.png`` into ``save_dir`` (else the parent of ``save_path``;
    ``save_path`` itself is not written), or shows them.

    Raises:
        ValueError: the log lacks ``train_loss`` or ``val_loss``.
    """
    log = pd.read_csv(metrics_path)
    missing = [column for column in ("epoch", "train_loss", "val_loss") if column not in log]
    if missing:
        raise ValueError(f"{metrics_path} lacks the column(s) {missing} of a training log")
    directory = _output_directory(save_dir, save_path)
    panels = [("loss", "Loss", "Training & Validation Loss", _LOSS_FILENAME)]
    if "train_acc" in log:
        panels.append(("acc", "Accuracy", "Training & Validation Accuracy", _ACCURACY_FILENAME))
    for key, ylabel, title, filename in panels:
        columns = [c for c in (f"train_{key}", f"val_{key}") if c in log]
        per_epoch = log.groupby("epoch")[columns].mean()
        with _figure(figsize=(10, 5)) as (fig, ax):
            for column in columns:
                split = "Training" if column.startswith("train") else "Validation"
                ax.plot(per_epoch.index, per_epoch[column], label=split)
            ax.set_xlabel("Epoch")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.legend()
            ax.grid(True, alpha=_GRID_ALPHA)
            _finish(fig, directory, filename)


def plot_ecg_signals(
    data: np.ndarray,
    *,
    sampling_rate: float = 500.0,
    leads: list[str] | None = None,
    title: str = "ECG Signals",
    save_path: str | None = None,
    unit: str | None = None,
) -> None:
    """One recording, one row per lead, against time in seconds.

    A 2-D array may be ``(time, leads)`` or ``(leads, time)``: the longer
    axis is time (a square array is read as ``(time, leads)``). The y labels
    carry ``(unit)`` only when ``unit`` is given, since the datasets return
    normalised, unitless signals.

    Raises:
        ValueError: more than two dimensions (pass one recording such as
            ``batch[0]``), or ``leads`` of the wrong length.
    """
    signal = np.asarray(data, dtype=np.float64)
    if signal.ndim > MATRIX_NDIM:
        raise ValueError(
            f"plot_ecg_signals draws one recording but got shape {signal.shape}; pass one "
            "recording such as batch[0]"
        )
    if signal.ndim == 1:
        signal = signal[:, None]
    elif signal.shape[1] > signal.shape[0]:
        signal = signal.T
    n_samples, n_leads = signal.shape
    if leads is not None and len(leads) != n_leads:
        raise ValueError(f"leads has {len(leads)} names but the recording has {n_leads} leads")
    names = list(leads) if leads is not None else [f"Lead {k + 1}" for k in range(n_leads)]
    time = np.arange(n_samples) / sampling_rate
    with _figure(nrows=n_leads, ncols=1, figsize=(12, 2 * n_leads), sharex=True, squeeze=False) as (
        fig,
        axes,
    ):
        for k, ax in enumerate(axes[:, 0]):
            ax.plot(time, signal[:, k], linewidth=0.8)
            ax.set_ylabel(f"{names[k]} ({unit})" if unit else names[k])
            ax.grid(True, alpha=_GRID_ALPHA)
        axes[-1, 0].set_xlabel("Time (s)")
        fig.suptitle(title)
        finalize_figure(save_path, fig)


def plot_predictions(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    *,
    title: str = "Predictions vs True Values",
    save_path: str | None = None,
) -> None:
    """Regression scatter of predictions against truth with the identity line."""
    truth = np.asarray(y_true, dtype=np.float64).reshape(-1)
    predicted = np.asarray(y_pred, dtype=np.float64).reshape(-1)
    with _figure(figsize=(8, 6)) as (fig, ax):
        ax.scatter(truth, predicted, alpha=0.6)
        low, high = float(truth.min()), float(truth.max())
        ax.plot([low, high], [low, high], "r--", lw=2)
        ax.set_xlabel("True Values")
        ax.set_ylabel("Predictions")
        ax.set_title(title)
        finalize_figure(save_path, fig)


# --- representation figures --------------------------------------------------------------


def plot_transfer_matrix(
    values: np.ndarray,
    sources: list[str],
    targets: list[str],
    *,
    metric: str = DEFAULT_PROBE_METRIC,
    baseline_rows: int = 0,
    title: str = "Cross-Dataset Transfer",
    save_path: str | None = None,
) -> None:
    """Heatmap of probe scores, encoder sources as rows and probe targets as columns.

    NaN cells (probes that could not be scored) are masked: no colour and no
    annotation. With ``baseline_rows > 0`` a white rule separates the baseline
    rows (the random-init floor) from trained encoders.

    Raises:
        ValueError: ``values`` not of shape ``(len(sources), len(targets))``.
    """
    import seaborn as sns

    matrix = np.asarray(values, dtype=np.float64)
    expected = (len(sources), len(targets))
    if matrix.shape != expected:
        raise ValueError(
            f"values has shape {matrix.shape} but sources x targets is {expected}; "
            "rows are encoder sources, columns probe targets"
        )
    missing = np.isnan(matrix)
    limits: dict[str, float] = {}
    if missing.all():
        limits = {"vmin": 0.0, "vmax": 1.0}
    with _figure(figsize=(1.6 * len(targets) + 4, 0.9 * len(sources) + 3)) as (fig, ax):
        sns.heatmap(
            matrix,
            mask=missing,
            annot=True,
            fmt=".3f",
            cmap="viridis",
            xticklabels=list(targets),
            yticklabels=list(sources),
            cbar_kws={"label": metric},
            ax=ax,
            **limits,
        )
        if baseline_rows > 0:
            ax.axhline(baseline_rows, color="white", linewidth=3)
        ax.set_xlabel("Probe target")
        ax.set_ylabel("Encoder source")
        ax.set_title(title)
        finalize_figure(save_path, fig)


def _embedding_classes(labels: Any, n_samples: int) -> np.ndarray:
    classes = np.asarray(labels)
    if classes.shape[0] != n_samples:
        raise ValueError(
            f"labels has {classes.shape[0]} entries but the embedding has {n_samples} rows"
        )
    if classes.ndim == MATRIX_NDIM and classes.shape[1] > 1:
        # Multi-hot rows are coloured by their first positive label (none -> class 0).
        return np.argmax(classes, axis=1)
    return as_label_vector(classes).astype(np.int64)


def plot_embedding(
    embedding: np.ndarray,
    labels: np.ndarray | None = None,
    *,
    class_names: Sequence[str] | None = None,
    title: str = "Embedding",
    save_path: str | None = None,
) -> None:
    """Scatter of a 2-D embedding, one colour per class present.

    Raises:
        ValueError: ``embedding`` not ``(n, 2)`` (reduce it with ``embed_2d``
            first) or ``labels`` of the wrong length.
    """
    points = np.asarray(embedding, dtype=np.float64)
    if points.ndim != MATRIX_NDIM or points.shape[1] != _EMBEDDING_DIMENSIONS:
        raise ValueError(
            f"embedding must have shape (n, 2), got {points.shape}; reduce features with "
            "deepecgkit.evaluation.embed_2d first"
        )
    classes = _embedding_classes(labels, points.shape[0]) if labels is not None else None
    with _figure(figsize=(8, 6)) as (fig, ax):
        if classes is None:
            ax.scatter(points[:, 0], points[:, 1], s=12, alpha=0.7, color="tab:blue")
        else:
            present = np.unique(classes)
            n_classes = int(present.max()) + 1
            palette = plt.get_cmap("tab10" if n_classes <= _SMALL_PALETTE_SIZE else "tab20")
            for k in present:
                chosen = classes == k
                name = (
                    class_names[k]
                    if class_names is not None and 0 <= k < len(class_names)
                    else None
                )
                ax.scatter(
                    points[chosen, 0],
                    points[chosen, 1],
                    s=12,
                    alpha=0.7,
                    color=palette(int(k) % palette.N),
                    label=name if name is not None else f"Class {k}",
                )
            ax.legend()
        ax.set_xlabel("Component 1")
        ax.set_ylabel("Component 2")
        ax.set_title(title)
        ax.grid(True, alpha=_GRID_ALPHA)
        finalize_figure(save_path, fig)
