"""The report's reusable reliability figures save the bytes a fresh figure saves."""

from __future__ import annotations

import io
import threading

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from deepecgkit.statistical_report.reliability_plot import (
    PNG_COMPRESS_LEVEL,
    PNG_DPI,
    reliability_figure,
    render_reliability,
)


def _rows(bins: int, seed: int, *, empty_share: float) -> pd.DataFrame:
    """Reliability rows of ``bins`` bins, some empty (NaN confidence and accuracy)."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 30, size=bins) * (rng.uniform(size=bins) >= empty_share)
    counts[rng.integers(bins)] += 1  # never all empty
    centres = (np.arange(bins) + 0.5) / bins
    filled = counts > 0
    return pd.DataFrame(
        {
            "fraction": counts / counts.sum(),
            "mean_confidence": np.where(filled, centres + rng.uniform(-0.04, 0.04, bins), np.nan),
            "accuracy": np.where(filled, rng.uniform(0.0, 1.0, bins), np.nan),
        }
    )


def _fresh_png(rows: pd.DataFrame, bins: int, title: str) -> bytes:
    """What the report saved before figures were reused: a new figure per run."""
    figure = reliability_figure(rows, bins, title=title)
    png = io.BytesIO()
    figure.savefig(
        png,
        format="png",
        dpi=PNG_DPI,
        metadata={"Title": title},
        pil_kwargs={"compress_level": PNG_COMPRESS_LEVEL},
    )
    return png.getvalue()


#: Bin count, seed, share of empty bins, title: two layouts interleaved, the
#: second use of a layout with other data (a taller fraction axis, other gaps)
#: and a title of another length.
CASES = [
    (10, 1, 0.3, "m | d | seed 0 | 40 groups\nECE = 0.0500 (10 bins, group level)"),
    (10, 2, 0.0, "m | d | seed 1 | 41 groups\nECE = 0.1234 (10 bins, group level)"),
    (8, 3, 0.5, "a | b | seed 2 | 12 groups | PARTIAL\nECE = 0.2\nno intervals: too few"),
    (10, 4, 0.8, "m | d | seed 3 | 9 groups\nECE = 0.3000 (10 bins, group level)"),
    (8, 5, 0.1, "a | b | seed 4 | 30 groups\nECE = 0.0100\nno intervals: reason"),
]


def test_every_png_equals_a_fresh_figures_png() -> None:
    for bins, seed, empty_share, title in CASES:
        rows = _rows(bins, seed, empty_share=empty_share)
        png = render_reliability(rows, bins, title=title)["png"]
        assert png == _fresh_png(rows, bins, title), (bins, seed)
        with Image.open(io.BytesIO(png)) as image:
            assert image.text["Title"] == title


def test_another_thread_draws_on_its_own_figure() -> None:
    bins, seed, empty_share, title = CASES[0]
    rows = _rows(bins, seed, empty_share=empty_share)
    expected = _fresh_png(rows, bins, title)
    other_rows = _rows(bins, 9, empty_share=0.0)
    rendered: list[bytes] = []

    def draw() -> None:
        render_reliability(other_rows, bins, title=title)
        rendered.append(render_reliability(rows, bins, title=title)["png"])

    worker = threading.Thread(target=draw)
    worker.start()
    render_reliability(other_rows, bins, title=title)
    worker.join()
    assert rendered == [expected]
    assert render_reliability(rows, bins, title=title)["png"] == expected


@pytest.mark.parametrize("pdf", [False, True])
def test_pdf_only_on_request(pdf: bool) -> None:
    bins, seed, empty_share, title = CASES[2]
    rendered = render_reliability(
        _rows(bins, seed, empty_share=empty_share), bins, title=title, pdf=pdf
    )
    assert list(rendered) == (["png", "pdf"] if pdf else ["png"])
    if pdf:
        assert rendered["pdf"].startswith(b"%PDF")


def test_legend_sits_above_the_panels_where_no_data_passes() -> None:
    """The legend is drawn once per layout, so it must lie outside every panel."""
    bins, seed, empty_share, title = CASES[0]
    figure = reliability_figure(_rows(bins, seed, empty_share=empty_share), bins, title=title)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    upper = figure.axes[0]
    legend = upper.get_legend().get_window_extent(renderer)
    assert legend.y0 >= upper.get_window_extent(renderer).y1
    assert legend.y1 <= figure.texts[0].get_window_extent(renderer).y0  # below the title


def test_png_is_500_by_600_pixels() -> None:
    """5 x 6 inches at 100 dpi: legible, and a third of the pixels of 150 dpi to encode."""
    bins, seed, empty_share, title = CASES[1]
    png = render_reliability(_rows(bins, seed, empty_share=empty_share), bins, title=title)["png"]
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (500, 600)
