"""Reliability diagrams of the statistical report (matplotlib, imported lazily).

One figure per included run, at group level, from the run's rows of
``reliability.csv``: the top-label curve for three or more classes, the
positive-class curve (``class_1``: mean P(class 1) against the fraction of
class-1 groups) for two, because the top label folds a two-class diagram at
0.5 and a shift of every probability then disappears. The upper panel plots
per-bin mean confidence against accuracy, joined by a line that breaks at
empty bins (an empty bin is a gap, never a zero-accuracy point), with the
diagonal and a vertical segment from each point to it showing the gap. The
lower panel shows the fraction of groups per bin. The title carries the
run's ECE and class-wise ECE as written in ``run_summary.csv``, and, for a
run below the bootstrap minima, why it has no intervals.

Figures are drawn with the object-oriented :class:`~matplotlib.figure.Figure`
API on an Agg canvas (no ``pyplot``, no global state) and saved without
timestamps, so the same inputs and library versions give byte-identical
files. The title is also stored in each file's metadata (PNG text chunk,
PDF info dictionary), so a reader or test can check what a figure claims
without parsing pixels. matplotlib is imported only inside
:func:`render_reliability`, so ``--no-plots`` never imports it.
"""

from __future__ import annotations

import io
import textwrap
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PNG_DPI", "reliability_figure", "reliability_title", "render_reliability"]

#: Resolution of the PNG figures.
PNG_DPI = 150
_FIGSIZE_INCHES = (5.0, 6.0)
_HEIGHT_RATIOS = (3, 1)
_TITLE_FONTSIZE = 9
#: Fixed margins in inches: left (tick labels and y label), right, bottom
#: (x tick labels and x label). A fixed layout instead of ``tight_layout``,
#: which draws the whole figure once more only to measure it; the labels
#: and tick labels are the same in every figure, only the title's height
#: varies, and that is computed from its line count.
_MARGIN_INCHES = {"left": 0.85, "right": 0.3, "bottom": 0.5}
#: Gap between the panels, as a fraction of the mean panel height
#: (matplotlib's ``hspace``); the upper panel has no x tick labels.
_PANEL_GAP = 0.06
#: Height of one title line (font size times matplotlib's 1.2 line spacing)
#: and the room kept above and below the title, in inches.
_TITLE_LINE_INCHES = _TITLE_FONTSIZE * 1.2 / 72.0
_TITLE_PAD_INCHES = 0.2
#: Distance of the title's top from the figure's top, in inches.
_TITLE_TOP_INCHES = 0.06
#: Distance of the axis labels from their panels' edges, in inches: fixed
#: positions, so neither label is placed by measuring the tick labels.
_YLABEL_OFFSET_INCHES = 0.62
_XLABEL_OFFSET_INCHES = 0.3
#: Ticks of the probability axes (x of both panels, y of the upper one).
_PROBABILITY_TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
#: Characters per title line before a long no-interval reason wraps.
_TITLE_WIDTH = 70


def reliability_title(
    model: str,
    dataset: str,
    seed: int | None,
    *,
    n_groups: int,
    ece: float,
    bins: int,
    partial: bool,
    no_interval_reason: str | None = None,
    withheld: dict[str, str] | None = None,
    classwise_ece: float | None = None,
    curve: str = "top_label",
) -> str:
    """Figure title: run identity, group count and ``ECE = x.xxxx (<bins> bins, group level)``.

    With ``classwise_ece`` the second line adds ``class-wise ECE = y.yyyy``, and
    a positive-class ``curve`` says that the diagram is that class's. A run
    without bootstrap intervals gets a last line ``no intervals: <reason>``,
    so a figure shown alone still says that its numbers carry no interval;
    a metric refused on its own (``withheld``: metric -> reason) gets a line
    ``no <metric> interval: <reason>``. A seed of None (not recorded) is
    shown as ``unknown``.
    """
    shown = "unknown" if seed is None else seed
    first = f"{model} | {dataset} | seed {shown} | {n_groups} groups"
    if partial:
        first += " | PARTIAL"
    title = f"{first}\nECE = {ece:.4f} ({bins} bins, group level)"
    if classwise_ece is not None:
        title += f" | class-wise ECE = {classwise_ece:.4f}"
    if curve != "top_label":
        title += f"\ndiagram: {curve.replace('_', ' ')} (P(class) vs fraction of the class)"
    if no_interval_reason:
        title += "\n" + textwrap.fill(f"no intervals: {no_interval_reason}", _TITLE_WIDTH)
    for metric, reason in (withheld or {}).items():
        title += "\n" + textwrap.fill(f"no {metric} interval: {reason}", _TITLE_WIDTH)
    return title


def reliability_figure(rows: pd.DataFrame, bins: int, *, title: str) -> Figure:
    """Draw the two-panel reliability diagram of one run's reliability rows.

    Args:
        rows: the run's ``reliability.csv`` rows in bin order (empty bins with
            NaN ``mean_confidence`` / ``accuracy``).
        bins: number of equal-width bins.
        title: the figure title.

    Returns:
        A matplotlib ``Figure`` on an Agg canvas (imports matplotlib).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=_FIGSIZE_INCHES)
    FigureCanvasAgg(figure)
    upper, lower = figure.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": list(_HEIGHT_RATIOS)}
    )
    confidence = rows["mean_confidence"].to_numpy(dtype=np.float64)
    accuracy = rows["accuracy"].to_numpy(dtype=np.float64)
    filled = np.isfinite(confidence) & np.isfinite(accuracy)
    upper.plot([0.0, 1.0], [0.0, 1.0], linestyle="--", color="0.5", label="perfect calibration")
    upper.vlines(
        confidence[filled], accuracy[filled], confidence[filled], color="tab:red", label="gap"
    )
    # NaN entries (empty bins) break the line, so an empty bin shows as a gap.
    upper.plot(confidence, accuracy, marker="o", color="tab:blue", label="accuracy")
    upper.set_xlim(0.0, 1.0)
    upper.set_ylim(0.0, 1.0)
    upper.set_yticks(_PROBABILITY_TICKS)
    upper.set_ylabel("accuracy")
    upper.legend(loc="upper left", fontsize="small")
    centres = (np.arange(bins) + 0.5) / bins
    lower.bar(centres, rows["fraction"].to_numpy(dtype=np.float64), width=1.0 / bins)
    lower.set_xlim(0.0, 1.0)
    lower.set_xticks(_PROBABILITY_TICKS)
    lower.set_xlabel("mean predicted probability (group level)")
    lower.set_ylabel("fraction")
    _fixed_layout(figure, title)
    return figure


def _fixed_layout(figure: Figure, title: str) -> None:
    """Place the title, panels and axis labels at fixed positions.

    The panels get fixed margins and the room ``title``'s lines need; the
    title is the figure's (``suptitle``), and the axis labels sit at fixed
    distances from their panels. Nothing is placed by measuring text, which
    would draw the figure's text once more per figure.
    """
    width, height = _FIGSIZE_INCHES
    title_inches = (title.count("\n") + 1) * _TITLE_LINE_INCHES + _TITLE_PAD_INCHES
    left, right = _MARGIN_INCHES["left"], _MARGIN_INCHES["right"]
    figure.subplots_adjust(
        left=left / width,
        right=1.0 - right / width,
        bottom=_MARGIN_INCHES["bottom"] / height,
        top=1.0 - title_inches / height,
        hspace=_PANEL_GAP,
    )
    # The panels' x span is the same, so the panels' centre is the title's.
    figure.suptitle(
        title,
        fontsize=_TITLE_FONTSIZE,
        x=(left + (width - left - right) / 2.0) / width,
        y=1.0 - _TITLE_TOP_INCHES / height,
        verticalalignment="top",
    )
    panel_width = width - left - right
    upper, lower = figure.axes
    for axes in (upper, lower):
        axes.yaxis.set_label_coords(-_YLABEL_OFFSET_INCHES / panel_width, 0.5)
    lower_height = lower.get_position().height * height
    lower.xaxis.set_label_coords(0.5, -_XLABEL_OFFSET_INCHES / lower_height)


def render_reliability(
    rows: pd.DataFrame, bins: int, *, title: str, pdf: bool = False
) -> dict[str, bytes]:
    """Render one run's reliability diagram as PNG (and, on request, PDF) bytes.

    Args:
        rows: the run's ``reliability.csv`` rows, ``bins`` of them, in bin order.
        bins: number of equal-width bins.
        title: the figure title (see :func:`reliability_title`).
        pdf: also render the vector PDF. Off by default: each PDF costs about
            as much as drawing its figure again, the PNG is what the report's
            readers (the UI, the README) show, and nothing reads the PDFs.

    Returns:
        Bytes by format, ``"png"`` first (at :data:`PNG_DPI`), then ``"pdf"``
        when requested. Neither holds a timestamp; both carry ``title`` in
        their metadata.
    """
    figure = reliability_figure(rows, bins, title=title)
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=PNG_DPI, metadata={"Title": title})
    rendered = {"png": png.getvalue()}
    if pdf:
        vector = io.BytesIO()
        figure.savefig(
            vector, format="pdf", metadata={"Title": title, "CreationDate": None, "ModDate": None}
        )
        rendered["pdf"] = vector.getvalue()
    return rendered
