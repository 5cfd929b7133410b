"""``scripts/render_readme_figures.py``: the README's pictures, regenerated as CI runs it.

The script runs as a user runs it (a separate interpreter, the bundled
corpus, the real pdflatex and pdftoppm) into a temporary folder; each image
must be a PNG that Pillow reads, of a size a README can show. The heat map
comes from the session's transfer build (``--transfer-from``), so the
encoders are probed once per test session; the probing itself is the
``transfer_table`` asset's code, tested in ``tests/deepecg_assets``. The
committed pictures are checked for the same, and for staying small.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "render_readme_figures.py"
COMMITTED = REPO_ROOT / "docs" / "images"
#: Each picture and the command the script prints beside it.
PICTURES = {
    "flip_table.png": "deepecg rank ",
    "results_synthetic-irregular-rr.png": "deepecg aggregate ",
    "reliability.png": "deepecg report ",
    "transfer_heatmap.png": "dagster asset materialize ",
}
#: Pixel bounds: legible at README width, never a poster.
MIN_SIDE_PX = 300
MAX_SIDE_PX = 2500
#: The repository stays small: no picture above this.
MAX_BYTES = 200_000
#: Generous: without the probes the script takes a few seconds.
SCRIPT_TIMEOUT_S = 300

needs_tools = pytest.mark.skipif(
    shutil.which("pdflatex") is None or shutil.which("pdftoppm") is None,
    reason="needs pdflatex and pdftoppm (poppler-utils)",
)


def run_script(out: Path, *options: str, **environment: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | environment
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), *options],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )


def check_picture(path: Path) -> None:
    assert 0 < path.stat().st_size <= MAX_BYTES, (path.name, path.stat().st_size)
    with Image.open(path) as image:
        assert image.format == "PNG", path.name
        image.load()  # decodes every pixel: a truncated file fails here
        width, height = image.size
    assert MIN_SIDE_PX <= width <= MAX_SIDE_PX, (path.name, width)
    assert MIN_SIDE_PX <= height <= MAX_SIDE_PX, (path.name, height)


@pytest.mark.slow
@needs_tools
def test_the_script_writes_every_picture_and_prints_its_command(
    tmp_path, bundled_transfer_build
) -> None:
    out = tmp_path / "images"
    completed = run_script(out, "--transfer-from", str(bundled_transfer_build.output))
    assert completed.returncode == 0, completed.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(PICTURES)
    lines = completed.stdout.splitlines()
    for name, command in PICTURES.items():
        check_picture(out / name)
        (header,) = [i for i, line in enumerate(lines) if line.startswith(str(out / name))]
        assert lines[header + 1].strip().startswith(command), lines[header : header + 3]
    heat_map = bundled_transfer_build.output / "tables" / "transfer_matrix_resnet1d.png"
    assert (out / "transfer_heatmap.png").read_bytes() == heat_map.read_bytes()


def test_a_folder_without_a_transfer_build_is_one_line_and_exit_1(tmp_path) -> None:
    completed = run_script(tmp_path / "images", "--transfer-from", str(tmp_path))
    assert completed.returncode == 1
    (line,) = completed.stderr.strip().splitlines()
    assert line.startswith("render_readme_figures: transfer_heatmap.png: no transfer_table build")
    assert not (tmp_path / "images").exists(), "a wrong folder is reported before any picture"


@needs_tools
def test_a_missing_rasteriser_is_one_line_and_exit_1(tmp_path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "pdflatex").symlink_to(shutil.which("pdflatex"))
    completed = run_script(tmp_path / "images", PATH=str(tools))
    assert completed.returncode == 1
    assert completed.stderr.strip().splitlines() == [
        "render_readme_figures: flip_table.png: cannot render the table: "
        "pdftoppm is not on PATH; install poppler-utils"
    ]
    assert not (tmp_path / "images").exists(), "nothing is written before a picture is whole"


@pytest.mark.parametrize("name", sorted(PICTURES))
def test_the_committed_pictures_are_real_and_small(name) -> None:
    check_picture(COMMITTED / name)
