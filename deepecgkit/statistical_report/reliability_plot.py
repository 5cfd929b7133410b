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

A report draws one PNG per run, and most of a figure is the same in every
one of them: the tick labels of the fixed probability axes, the axis
labels and the legend (one row above the upper panel, where no data passes
under it), whose glyphs and layout cost most of a draw.
:func:`render_reliability` therefore keeps one figure per layout (bin count
and title line count) on each thread, with those unchanging parts drawn
once into a background image, and per run only updates the data, the title
and the fraction axis (whose ticks follow the data; its limit is set from
the tallest bar, not by recomputing data limits) and draws them over that
background. The unchanging parts touch no pixel that anything else touches, so the PNG is
byte for byte the one a freshly built figure saves
(``tests/analysis/compare/test_reliability_plot.py`` checks it); the PDF
is always drawn from a fresh figure.
"""

from __future__ import annotations

import io
import textwrap
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.text import Text

__all__ = [
    "PNG_COMPRESS_LEVEL",
    "PNG_DPI",
    "reliability_figure",
    "reliability_title",
    "render_reliability",
]

#: Resolution of the PNG figures: 500 x 600 pixels, the 9-point title about
#: 12 pixels high, still easily read; 150 dpi cost twice the encoding time for
#: pixels that no viewer of the UI or the README needed.
PNG_DPI = 100
#: zlib level of the PNG encoder. Level 1 encodes a figure in about a third of
#: the time of Pillow's default (6), for files about 5 % larger (44 KiB).
PNG_COMPRESS_LEVEL = 1
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
#: Room for the legend, one row between the title and the upper panel, in
#: inches. Outside the panels no data ever passes under it, so it is one of
#: the unchanging parts drawn once per layout (see the module docstring).
_LEGEND_INCHES = 0.25
#: Headroom of the fraction axis above the tallest bar (matplotlib's default
#: autoscale margin, set explicitly so no redraw has to recompute data limits).
_FRACTION_HEADROOM = 1.05
#: Distance of the axis labels from their panels' edges, in inches: fixed
#: positions, so neither label is placed by measuring the tick labels.
_YLABEL_OFFSET_INCHES = 0.62
_XLABEL_OFFSET_INCHES = 0.3
#: Ticks of the probability axes (x of both panels, y of the upper one).
_PROBABILITY_TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
#: Characters per title line before a long no-interval reason wraps.
_TITLE_WIDTH = 70
#: Reusable figures kept per thread (one per bin count and title line count;
#: a report has one bin count and titles of two to four lines).
_MAX_CACHED_LAYOUTS = 8


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
    upper.legend(
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncols=3,
        frameon=False,
        fontsize="small",
        borderaxespad=0.1,
    )
    centres = (np.arange(bins) + 0.5) / bins
    fractions = rows["fraction"].to_numpy(dtype=np.float64)
    lower.bar(centres, fractions, width=1.0 / bins)
    lower.set_xlim(0.0, 1.0)
    lower.set_ylim(0.0, _fraction_top(fractions))
    lower.set_xticks(_PROBABILITY_TICKS)
    lower.set_xlabel("mean predicted probability (group level)")
    lower.set_ylabel("fraction")
    _fixed_layout(figure, title)
    return figure


def _fraction_top(fractions: np.ndarray) -> float:
    """Upper limit of the fraction axis: the tallest bar plus headroom (1.0 when all are 0)."""
    tallest = float(np.nanmax(fractions)) if fractions.size else 0.0
    return tallest * _FRACTION_HEADROOM if tallest > 0.0 else 1.0


def _fixed_layout(figure: Figure, title: str) -> None:
    """Place the title, panels and axis labels at fixed positions.

    The panels get fixed margins and the room ``title``'s lines need; the
    title is the figure's (``suptitle``), and the axis labels sit at fixed
    distances from their panels. Nothing is placed by measuring text, which
    would draw the figure's text once more per figure.
    """
    width, height = _FIGSIZE_INCHES
    title_inches = (title.count("\n") + 1) * _TITLE_LINE_INCHES + _TITLE_PAD_INCHES + _LEGEND_INCHES
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
        their metadata. The PNG is drawn on this thread's reusable figure of
        the layout (see the module docstring) and equals, byte for byte, the
        PNG of :func:`reliability_figure` saved at :data:`PNG_DPI`.
    """
    rendered = {"png": _reusable_figure(rows, bins, title).png(rows, title)}
    if pdf:
        figure = reliability_figure(rows, bins, title=title)
        vector = io.BytesIO()
        figure.savefig(
            vector, format="pdf", metadata={"Title": title, "CreationDate": None, "ModDate": None}
        )
        rendered["pdf"] = vector.getvalue()
    return rendered


@dataclass
class _ReusableFigure:
    """One layout's figure, its data artists and the background of its unchanging texts.

    ``background`` is the RGBA image of the figure's face with only the
    parts that are the same for every run of the layout: the upper panel's
    y tick labels, the lower panel's x tick labels, the three axis labels
    and the legend. :meth:`png` draws everything else over a copy of it.
    """

    figure: Figure
    upper: Axes
    lower: Axes
    curve: Line2D
    gaps: LineCollection
    bars: list[Any]
    heading: Text
    background: Any = None

    def _show_changing_parts(self, shown: bool) -> None:
        """Show only the parts that change (True) or only the unchanging texts (False)."""
        self.figure.patch.set_visible(not shown)
        self.heading.set_visible(shown)
        for axes in (self.upper, self.lower):
            axes.patch.set_visible(shown)
            for spine in axes.spines.values():
                spine.set_visible(shown)
            for artist in (*axes.lines, *axes.collections, *axes.patches):
                artist.set_visible(shown)
            axes.tick_params(left=shown, bottom=shown)
            axes.yaxis.label.set_visible(not shown)
            axes.xaxis.label.set_visible(not shown)
        # The legend sits above the upper panel, outside every changing part.
        legend = self.upper.get_legend()
        if legend is not None:
            legend.set_visible(not shown)
        # The upper panel's x tick labels are hidden by the shared x axis.
        self.upper.tick_params(labelleft=not shown)
        self.lower.tick_params(labelbottom=not shown, labelleft=shown)

    def _update(self, rows: pd.DataFrame, title: str) -> None:
        """Give the artists this run's data and title, as :func:`reliability_figure` would."""
        confidence = rows["mean_confidence"].to_numpy(dtype=np.float64)
        accuracy = rows["accuracy"].to_numpy(dtype=np.float64)
        filled = np.isfinite(confidence) & np.isfinite(accuracy)
        self.curve.set_data(confidence, accuracy)
        x, y = confidence[filled], accuracy[filled]
        self.gaps.set_segments([[(a, b), (a, a)] for a, b in zip(x, y, strict=True)])
        fractions = rows["fraction"].to_numpy(dtype=np.float64)
        for bar, height in zip(self.bars, fractions, strict=True):
            bar.set_height(height)
        self.lower.set_ylim(0.0, _fraction_top(fractions))
        self.heading.set_text(title)

    def png(self, rows: pd.DataFrame, title: str) -> bytes:
        """This run's PNG: the background, then the run's parts drawn over it."""
        from matplotlib.image import imsave

        canvas = self.figure.canvas
        if self.background is None:
            self._show_changing_parts(False)
            canvas.draw()
            self.background = canvas.copy_from_bbox(self.figure.bbox)
            self._show_changing_parts(True)
        self._update(rows, title)
        renderer = canvas.get_renderer()
        canvas.restore_region(self.background)
        self.figure.draw(renderer)
        png = io.BytesIO()
        # What FigureCanvasAgg.print_png does after its own draw.
        imsave(
            png,
            canvas.buffer_rgba(),
            format="png",
            origin="upper",
            dpi=self.figure.dpi,
            metadata={"Title": title},
            pil_kwargs={"compress_level": PNG_COMPRESS_LEVEL},
        )
        return png.getvalue()


_reusable = threading.local()


def _reusable_figure(rows: pd.DataFrame, bins: int, title: str) -> _ReusableFigure:
    """This thread's figure for ``bins`` bins and ``title``'s line count, built on first use."""
    cache: dict[tuple[int, int], _ReusableFigure] = getattr(_reusable, "figures", None) or {}
    _reusable.figures = cache
    key = (bins, title.count("\n") + 1)
    if key not in cache:
        if len(cache) >= _MAX_CACHED_LAYOUTS:
            cache.pop(next(iter(cache)))
        figure = reliability_figure(rows, bins, title=title)
        figure.set_dpi(PNG_DPI)
        upper, lower = figure.axes
        curve = next(line for line in upper.lines if line.get_marker() == "o")
        cache[key] = _ReusableFigure(
            figure=figure,
            upper=upper,
            lower=lower,
            curve=curve,
            gaps=upper.collections[0],
            bars=list(lower.patches),
            heading=next(text for text in figure.texts if text.get_text() == title),
        )
    return cache[key]
