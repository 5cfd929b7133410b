"""Regenerate the README's pictures from the bundled example corpus.

Four images, each built the way a user would build it, with the public
command line and library:

* ``flip_table.png``: ``deepecg rank CORPUS --latex``'s ``flip_survival.tex``,
  compiled and rendered by :func:`deepecgkit.analysis.table_images.render_table_png`;
* ``results_<dataset>.png``: ``deepecg aggregate CORPUS --latex``'s results
  table of one dataset, rendered the same way;
* ``reliability.png``: the reliability diagram ``deepecg report`` draws for
  one run;
* ``transfer_heatmap.png``: the linear-probe transfer heat map of one
  architecture, from the library code the ``transfer_table`` asset runs
  (``cross_dataset_transfer`` and ``plot_transfer_matrix``, same settings),
  or, with ``--transfer-from OUTPUT``, the heat map that asset already drew
  in the platform output folder ``OUTPUT`` (the tests pass the bundled
  build they make anyway, so CI does not probe the encoders twice).

Run it from anywhere; it prints each image with the command that makes it::

    .venv/bin/python scripts/render_readme_figures.py [--out DIR] [--transfer-from OUTPUT]

It needs pdflatex (``texlive-latex-recommended``) and pdftoppm
(``poppler-utils``); everything but the images is written to a temporary
folder and removed. The transfer probes take most of its time (about 20 s on
two cores); nothing is trained.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from deepecgkit.analysis.table_images import TableImageError, render_table_png
from deepecgkit.cli import main as deepecg
from deepecgkit.evaluation.constants import RANDOM_INIT
from deepecgkit.io import atomic_write_bytes
from deepecgkit.rundir.read import discover_runs, find_encoder_checkpoints

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The corpus the README describes (``deepecg_assets.resources.BUNDLED_CORPUS``,
#: spelled out here so that the script does not import Dagster).
CORPUS = REPO_ROOT / "deepecg_assets" / "example_corpus"
DEFAULT_OUT = REPO_ROOT / "docs" / "images"
#: The dataset of the results picture: where the feature baseline leads the networks.
RESULTS_DATASET = "synthetic-irregular-rr"
#: The run whose reliability diagram is shown: resnet1d's seed 0 on the irregular
#: rhythm, a visibly miscalibrated model (ECE about 0.09).
RELIABILITY_RUN = "resnet1d_synthetic-irregular-rr_seed0"
#: The architecture of the transfer heat map.
TRANSFER_ARCHITECTURE = "resnet1d"
#: The ``transfer_table`` asset's title and the ``transfer_matrix`` asset's defaults.
TRANSFER_TITLE = "Cross-Dataset Transfer ({architecture})"
TRANSFER_SEED = 42
FLIP_TABLE = "flip_table.png"
RELIABILITY = "reliability.png"
TRANSFER_HEATMAP = "transfer_heatmap.png"
#: The index ``deepecg aggregate --latex`` writes: results file name -> dataset.
RESULTS_INDEX = "results_tables.json"
FLIP_SOURCE = "flip_survival.tex"
MANIFEST = "manifest.json"
#: The format of the report's figures the README shows (it also writes PDF).
FIGURE_FORMAT = "png"
BYTES_PER_KB = 1000


class FigureError(RuntimeError):
    """A step of the script failed; the message is the one line it prints."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"folder of the images (default: {DEFAULT_OUT.relative_to(REPO_ROOT)})",
    )
    parser.add_argument(
        "--transfer-from",
        type=Path,
        default=None,
        metavar="OUTPUT",
        help="platform output folder of a transfer_table build on the bundled corpus: "
        "copy its heat map instead of probing the encoders again",
    )
    return parser.parse_args(argv)


def shown(path: Path) -> str:
    """``path`` relative to the working folder when it lies below it, for pasteable commands."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def run_cli(arguments: list[str]) -> str:
    """Run one ``deepecg`` command in this process; return it as a shell line.

    Its own summary is kept out of this script's output and shown only when
    the command fails.
    """
    line = shlex.join(["deepecg", *arguments])
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        code = deepecg(arguments)
    if code != 0:
        raise FigureError(f"{line} exited with {code}: {captured.getvalue().strip()}")
    return line


def flip_table(work: Path) -> tuple[bytes, list[str]]:
    out = work / "rank"
    line = run_cli(["rank", shown(CORPUS), "--latex", "--out", shown(out)])
    table = (out / FLIP_SOURCE).read_text(encoding="utf-8")
    return render_table_png(table), [line, f"render_table_png({FLIP_SOURCE})"]


def results_table(work: Path) -> tuple[bytes, list[str]]:
    out = work / "aggregate"
    line = run_cli(["aggregate", shown(CORPUS), "--latex", "--out", shown(out)])
    index = json.loads((out / RESULTS_INDEX).read_text(encoding="utf-8"))
    files = [name for name, dataset in index.items() if dataset == RESULTS_DATASET]
    if len(files) != 1:
        raise FigureError(f"{RESULTS_INDEX} lists no results table of {RESULTS_DATASET}")
    table = (out / files[0]).read_text(encoding="utf-8")
    return render_table_png(table), [line, f"render_table_png({files[0]})"]


def reliability(work: Path) -> tuple[bytes, list[str]]:
    out = work / "report"
    line = run_cli(["report", shown(CORPUS / RELIABILITY_RUN), "--out", shown(out)])
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    figures = [
        entry["path"]
        for entry in manifest["figures"]
        if entry["run_id"] == RELIABILITY_RUN and entry["format"] == FIGURE_FORMAT
    ]
    if len(figures) != 1:
        raise FigureError(f"the report of {RELIABILITY_RUN} holds {len(figures)} reliability PNGs")
    return (out / figures[0]).read_bytes(), [line, f"figure {figures[0]}"]


TRANSFER_COMMAND = (
    "dagster asset materialize -m deepecg_assets.definitions "
    "--select discovered_runs,transfer_matrix,transfer_table"
)


def built_transfer_heatmap(output: Path) -> tuple[bytes, list[str]]:
    """The heat map the ``transfer_table`` asset drew under ``output``, found by its index."""
    # Imported here: only this path needs the platform (and Dagster) at all.
    from deepecg_assets.assets.transfer import TRANSFER_INDEX

    tables = output / "tables"
    try:
        index = json.loads((tables / TRANSFER_INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FigureError(f"no transfer_table build in {shown(output)}: {exc}") from None
    names = [name for name, architecture in index.items() if architecture == TRANSFER_ARCHITECTURE]
    if len(names) != 1:
        raise FigureError(f"{TRANSFER_INDEX} in {shown(tables)} lists no {TRANSFER_ARCHITECTURE}")
    return (tables / names[0]).read_bytes(), [
        TRANSFER_COMMAND,
        f"figure {shown(tables / names[0])}",
    ]


def transfer_heatmap(work: Path) -> tuple[bytes, list[str]]:
    """One architecture's transfer matrix, computed and drawn as the transfer assets do."""
    # Imported here: the probing code imports torch, which the other pictures never need.
    from deepecgkit.evaluation.transfer import cross_dataset_transfer
    from deepecgkit.evaluation.visualization import plot_transfer_matrix

    records, _ = discover_runs([CORPUS], recursive=True)
    checkpoints, problems = find_encoder_checkpoints(records)
    by_dataset = checkpoints.get(TRANSFER_ARCHITECTURE)
    if not by_dataset:
        raise FigureError(
            f"no {TRANSFER_ARCHITECTURE} checkpoint in {shown(CORPUS)}: {'; '.join(problems)}"
        )
    targets = sorted(by_dataset)
    matrix = cross_dataset_transfer(
        {dataset: str(by_dataset[dataset]) for dataset in targets},
        TRANSFER_ARCHITECTURE,
        targets=targets,
        seed=TRANSFER_SEED,
        skip_unreadable_checkpoints=True,
    )
    frame = matrix.to_frame()
    figure = work / TRANSFER_HEATMAP
    plot_transfer_matrix(
        frame.to_numpy(),
        [str(source) for source in frame.index],
        [str(target) for target in frame.columns],
        metric=matrix.metric,
        baseline_rows=int(RANDOM_INIT in frame.index),
        title=TRANSFER_TITLE.format(architecture=TRANSFER_ARCHITECTURE),
        save_path=str(figure),
    )
    return figure.read_bytes(), [
        TRANSFER_COMMAND,
        f"figure deepecg_output/tables/transfer_matrix_{TRANSFER_ARCHITECTURE}.png",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Write the four images; print each with its command, or one line on failure."""
    args = parse_args(argv)
    out: Path = args.out
    steps = {
        FLIP_TABLE: flip_table,
        f"results_{RESULTS_DATASET}.png": results_table,
        RELIABILITY: reliability,
        TRANSFER_HEATMAP: transfer_heatmap,
    }
    if args.transfer_from is not None:
        # First: a wrong folder is reported before anything is drawn.
        steps = {TRANSFER_HEATMAP: lambda _work: built_transfer_heatmap(args.transfer_from)} | {
            name: step for name, step in steps.items() if name != TRANSFER_HEATMAP
        }
    with tempfile.TemporaryDirectory(prefix="deepecg-readme-figures-") as scratch:
        for name, step in steps.items():
            try:
                image, how = step(Path(scratch))
                path = atomic_write_bytes(out / name, image)
            except (FigureError, TableImageError, OSError, ValueError) as exc:
                print(f"render_readme_figures: {name}: {exc}", file=sys.stderr)
                return 1
            print(f"{shown(path)} ({len(image) / BYTES_PER_KB:.0f} kB)")
            for line in how:
                print(f"    {line}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
