"""Pictures in asset metadata: tables typeset by the real pdflatex, shown as embedded PNGs.

The table assets run for real (in-process Dagster on the generated corpus);
the pictures are decoded back out of the markdown the UI renders and
compared with the files written next to the ``.tex``.
"""

from __future__ import annotations

import base64
import io
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from deepecg_assets.metadata_images import (
    FIGURE_KEY,
    MAX_EMBEDDED_BYTES,
    embeddable_png,
    figure_metadata,
    png_markdown,
    table_picture_metadata,
)
from tests.deepecg_assets.run_events import materializations

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EMBEDDED = re.compile(r"^!\[(?P<alt>[^\]]*)\]\(data:image/png;base64,(?P<data>[A-Za-z0-9+/=]+)\)$")
#: The flip table's metadata key and alt text, which the UI test looks for.
FLIP_KEY = "image_flip_survival"
FLIP_ALT = "flip table (flip_survival.tex)"
#: The assets that write the flip and results tables, with what they read.
TABLE_BUILD = [
    "discovered_runs",
    "run_metrics",
    "reconciled_runs",
    "averaging_conflicts",
    "aggregates",
    "results_tables",
    "flip_grid",
    "flip_table",
]

needs_tools = pytest.mark.skipif(
    shutil.which("pdflatex") is None or shutil.which("pdftoppm") is None,
    reason="needs pdflatex and pdftoppm (poppler-utils)",
)


def embedded(value) -> tuple[str, bytes]:
    """The alt text and PNG bytes of a markdown image value."""
    match = EMBEDDED.match(value.value)
    assert match, value.value[:200]
    return match["alt"], base64.b64decode(match["data"])


def png_of(width: int, height: int, *, noise: bool) -> bytes:
    rng = np.random.default_rng(3)
    values = rng.integers(0, 256, (height, width), dtype=np.uint8) if noise else None
    image = Image.fromarray(values) if noise else Image.new("L", (width, height), 255)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def path_without_latex(tmp_path: Path) -> str:
    """A PATH holding only pdftoppm: no LaTeX engine at all."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "pdftoppm").symlink_to(shutil.which("pdftoppm"))
    return str(folder)


def test_a_small_picture_is_embedded_unchanged() -> None:
    png = png_of(400, 300, noise=False)
    alt, data = embedded(png_markdown(png, "a [blank]\npicture"))
    assert data == png
    assert alt == "a (blank) picture", "brackets and line breaks cannot break the markdown"


def test_a_large_picture_is_shrunk_below_the_cap_and_stays_a_png() -> None:
    png = png_of(1000, 400, noise=True)
    assert len(png) > MAX_EMBEDDED_BYTES
    small = embeddable_png(png)
    assert len(small) <= MAX_EMBEDDED_BYTES and small[:8] == PNG_SIGNATURE
    with Image.open(io.BytesIO(small)) as image:
        width, height = image.size
    assert width < 1000 and abs(width / height - 1000 / 400) < 0.05, "the aspect is kept"


def test_a_missing_figure_says_why() -> None:
    value = figure_metadata(None, alt="reliability diagram", reason="plots are off")[FIGURE_KEY]
    assert value.value == "No picture of the reliability diagram: plots are off"


@needs_tools
def test_a_table_latex_rejects_has_no_picture_and_says_why(tmp_path) -> None:
    stale = tmp_path / "broken.png"
    stale.write_bytes(b"a picture of an earlier table")
    table = "\\begin{table}\n\\begin{tabular}{l}\n\\undefinedcommand\n\\end{tabular}\n\\end{table}"
    metadata = table_picture_metadata(
        {"broken": table}, directory=tmp_path, titles={"broken": "test table"}
    )
    text = metadata["image_broken"].value
    assert text.startswith("No picture of the test table (broken.tex): the table does not compile")
    assert "Undefined control sequence" in text
    assert not stale.exists(), "the earlier picture cannot pass for this table"


@needs_tools
def test_table_assets_show_their_pictures_and_say_why_when_latex_is_gone(
    platform, tmp_path, monkeypatch
) -> None:
    result = platform.build(TABLE_BUILD)
    assert result.success
    events = materializations(result)
    tables = platform.output / "tables"
    alt, data = embedded(events["flip_table"][FLIP_KEY])
    assert alt == FLIP_ALT
    written = (tables / "flip_survival.png").read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) <= MAX_EMBEDDED_BYTES
    assert data == embeddable_png(written)
    results = {k: v for k, v in events["results_tables"].items() if k.startswith("image_")}
    assert sorted(results) == ["image_results_afib", "image_results_ptbxl", "image_results_sleep"]
    for key, value in results.items():
        alt, data = embedded(value)
        stem = key.removeprefix("image_")
        assert alt == f"results table of {stem.removeprefix('results_')} ({stem}.tex)"
        assert data == embeddable_png((tables / f"{stem}.png").read_bytes())

    monkeypatch.setenv("PATH", path_without_latex(tmp_path))
    again = platform.materialize(["flip_table"])
    assert again.success, "a missing engine never fails the table asset"
    (event,) = again.get_asset_materialization_events()
    assert event.materialization.metadata[FLIP_KEY].value == (
        "No picture of the flip table (flip_survival.tex): cannot render the table: "
        "no LaTeX engine found (pdflatex is not on PATH); install TeX Live's pdflatex "
        "or pass engine= the path of one"
    )
    assert (tables / "flip_survival.tex").is_file()
    assert not (tables / "flip_survival.png").exists(), "no picture of an older flip table"
