"""Benchmark the LaTeX work of the tables group: one compile per text against the landed way.

The tables of a scale corpus (results tables per dataset, rank, tau and flip
tables, the emitters' output for the whole sweep) go through what the table
assets and their compile checks do, twice: a full build (no picture, no
compile cache yet) and a refresh in which no text changed. Each is measured
against a baseline in the same run, the landed main's way, rebuilt here from
the library's parts:

* **baseline**: per table, the picture's document (the table measured and
  set, no check copy) compiled, rasterised by ``pdftoppm -png`` (RGB),
  converted to grey and optimised, its metadata copy shrunk step by step
  with an optimised encode per step; then every compile check compiles the
  table again in the check's document, one after another. A refresh keeps
  the pictures (their recorded source is unchanged), shrinks their metadata
  copies again and compiles every check again.
* **now**: :func:`deepecg_assets.metadata_images.table_picture_metadata`
  with the compile cache (one engine run per table settles picture and
  check, pictures drawn concurrently) and the checks'
  :func:`deepecgkit.analysis.compile_cache.compile_tables` against it.

With ``--long-table FILE`` it measures instead the compile check of one long
table (the flip table of a 100,000-run sweep) against session 20's check, in
the same run:

* **every line in pieces (s20)**: every body line, in the pieces of
  :func:`~deepecgkit.analysis.compile_cache.long_table_chunks`
  (``--chunk-lines``), compiled concurrently on the machine's cores;
* **one line of each form**: :func:`~deepecgkit.analysis.compile_cache.compile_tables`
  with an empty cache, which compiles
  :func:`~deepecgkit.analysis.compile_cache.check_pieces` (session 21);
* **the same, cached**: the check again with the cache the first run filled;
* **whole, one run** (``--whole``): the table in one pdflatex run, as before session 20.

Usage::

    python benchmarks/bench_table_compiles.py --runs /work/bench/c20k/runs
    python benchmarks/bench_table_compiles.py --tables <output>/tables   # .tex files already built
    python benchmarks/bench_table_compiles.py --long-table <output>/tables/flip_survival.tex

Prints seconds (wall clock) per table group and ratios; nothing is asserted.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from deepecg_assets import metadata_images as M  # noqa: E402
from deepecgkit.analysis import (  # noqa: E402
    compile_cache as C,
    latex as L,
    table_images as T,
)
from deepecgkit.analysis.compile_cache import CompileCache, compile_tables  # noqa: E402

#: The asset each table belongs to, by the start of its stem.
GROUPS = {
    "results_tables": L.RESULTS_TABLE_PREFIX,
    "rank_table": L.RANK_TABLE_STEM,
    "tau_table": L.TAU_TABLE_STEM,
    "flip_table": L.FLIP_TABLE_STEM,
}


def corpus_tables(runs: Path) -> dict[str, str]:
    """The emitters' tables of the corpus at ``runs``, by stem (the library pipeline)."""
    from deepecgkit.analysis.aggregation import aggregate_runs, reconcile_averaging
    from deepecgkit.analysis.ranking import (
        flip_tests_from_differences,
        paired_differences,
        rank_distribution,
        tau_summary,
    )
    from deepecgkit.rundir.read import discover_runs
    from deepecgkit.rundir.records import runs_to_frame

    records, _ = discover_runs([runs], recursive=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reconciled, _ = reconcile_averaging(runs_to_frame(records))
    aggregated = aggregate_runs(reconciled)
    taus = tau_summary(reconciled)
    by_dataset = reconciled.groupby("dataset", sort=True)
    differences = pd.concat([paired_differences(rows) for _, rows in by_dataset])
    tables = {
        f"{L.RESULTS_TABLE_PREFIX}{stem}": L.results_table(aggregated, name)
        for name, stem in L.file_stems(aggregated["dataset"].unique()).items()
    }
    tables[L.RANK_TABLE_STEM] = L.rank_distribution_table(rank_distribution(reconciled), taus)
    tables[L.TAU_TABLE_STEM] = L.tau_table(taus)
    tables[L.FLIP_TABLE_STEM] = L.flip_survival_table(flip_tests_from_differences(differences))
    return tables


def _landed_picture_document(table: str) -> str:
    """The picture's document as the landed main wrote it: no check copy before the picture."""
    definitions = T._DEFINITIONS.replace("MIN_WIDTH", f"{T.MIN_CAPTION_WIDTH_PT}pt").replace(
        "BORDER", f"{T.BORDER_PT}pt"
    )
    body = [r"\DeepecgMeasure", table, r"\DeepecgMeasured", r"\DeepecgSet", table]
    head = [r"\documentclass{article}", r"\usepackage{booktabs}", definitions]
    return "\n".join([*head, r"\begin{document}", *body, r"\DeepecgShip", r"\end{document}", ""])


def _landed_embeddable(png: bytes) -> bytes:
    """The landed metadata copy: shrunk by 0.8 per step, each step resized and optimised."""
    if len(png) <= M.MAX_EMBEDDED_BYTES:
        return png
    with Image.open(io.BytesIO(png)) as original:
        picture = original.copy()
    smaller, (width, height) = png, picture.size
    while len(smaller) > M.MAX_EMBEDDED_BYTES and width * 0.8 >= M._MIN_EMBEDDED_WIDTH_PX:
        width, height = round(width * 0.8), max(1, round(height * 0.8))
        buffer = io.BytesIO()
        resized = picture.resize((width, height), Image.Resampling.LANCZOS)
        resized.save(buffer, format="PNG", optimize=True)
        smaller = buffer.getvalue()
    return smaller


def _landed_picture(table: str) -> bytes | None:
    pdflatex, pdftoppm = shutil.which("pdflatex"), shutil.which(T.PDFTOPPM)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        run = L._run_engine(pdflatex, _landed_picture_document(table), work, timeout=600)
        if not run.ok:
            return None
        page = ["-png", "-r", str(T.DEFAULT_DPI), "-f", "1", "-l", "1", "-singlefile"]
        subprocess.run([pdftoppm, *page, "table.pdf", "table"], cwd=work, check=True)
        buffer = io.BytesIO()
        with Image.open(work / "table.png") as picture:
            picture.convert("L").save(buffer, format="PNG", optimize=True)
        _landed_embeddable(buffer.getvalue())
        return buffer.getvalue()


def baseline(tables: dict[str, str], pictures: dict[str, bytes]) -> None:
    """The landed way; ``pictures`` empty: draw them (full build), else keep them (refresh)."""
    if pictures:
        for png in pictures.values():  # a kept picture's metadata copy was shrunk again
            _landed_embeddable(png)
    else:
        for stem, text in tables.items():
            drawn = _landed_picture(text) if len(text) <= M.MAX_PICTURE_CHARACTERS else None
            if drawn is not None:
                pictures[stem] = drawn
    for text in tables.values():
        L.compile_table(text, timeout=600)


def now(tables: dict[str, str], *, folder: Path, cache: CompileCache) -> None:
    titles = dict.fromkeys(tables, "table")
    M.table_picture_metadata(tables, directory=folder, titles=titles, cache=cache)
    engines = {stem: L.latex_engine(text) for stem, text in tables.items()}
    compile_tables(tables, engines, cache=cache, timeout=600)


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the engines, the rasteriser)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _seconds(work: Callable[[], None], *, cpu: bool) -> float:
    clock = _cpu if cpu else time.perf_counter
    start = clock()
    work()
    return clock() - start


def _whole(table: str, *switches: str) -> tuple[bool, str]:
    """The landed check: one engine run over the whole table's check document."""
    with tempfile.TemporaryDirectory(prefix="bench-long-table-") as folder:
        source = Path(folder) / "table.tex"
        source.write_text(L.standalone_document(table), encoding="utf-8")
        command = [L.latex_engine(table), "-interaction=nonstopmode", "-halt-on-error"]
        done = subprocess.run(
            [*command, "-no-shell-escape", *switches, source.name],
            cwd=folder,
            capture_output=True,
            check=False,
        )
        return done.returncode == 0, done.stdout.decode(errors="replace")[-300:]


def long_table(path: Path, *, with_whole: bool, chunk_lines: int) -> None:
    """The compile check of one long table (one line of each form) against every line in pieces.

    Prints wall-clock and CPU seconds (this process and its engines): on a
    machine shared with other work the CPU seconds are the steadier figure, and
    the pieces' wall clock on ``k`` free cores is about their CPU seconds / ``k``.
    """
    table = path.read_text(encoding="utf-8")
    engine = {"t": L.latex_engine(table)}
    every_line = C.long_table_chunks(table, lines=chunk_lines)
    checked = C.check_pieces(table, lines=chunk_lines)
    held = sum(piece.count("\n") for piece, _ in checked)
    print(
        f"{path}: {len(table) / 1e6:.1f} MB, {table.count(chr(10)):,} lines, "
        f"{len(every_line)} pieces of {chunk_lines:,} body lines; the check: "
        f"{len(checked)} piece(s), {held:,} lines with the header; {os.cpu_count()} cores"
    )
    runs: dict[str, Callable[[], object]] = {}
    if with_whole:
        runs["whole, one run"] = lambda: _whole(table)
    runs["every line in pieces (s20)"] = lambda: min(
        C.map_concurrently(lambda piece: L.compile_table_run(piece[0], timeout=600)[:2], every_line)
    )
    folder = Path(tempfile.mkdtemp(prefix="bench-long-table-cache-"))
    cache = CompileCache(folder)

    def forms_check() -> tuple[bool, str]:
        return compile_tables(
            {"t": table}, engine, cache=cache, timeout=600, chunk_lines=chunk_lines
        )["t"]

    runs["one line of each form"] = forms_check
    runs["the same, cached"] = forms_check
    times: dict[str, tuple[float, float]] = {}
    for name, run in runs.items():
        wall, cpu = time.perf_counter(), _cpu()
        result = run()
        times[name] = (time.perf_counter() - wall, _cpu() - cpu)
        if name != "the same, cached":
            print(f"  {name}: compiles {result[0]} {result[1][:200]}")
    shutil.rmtree(folder, ignore_errors=True)
    wall_base, cpu_base = times["every line in pieces (s20)"]
    print(f"  {'':28} {'wall s':>8} {'ratio':>7} {'CPU s':>8} {'ratio':>7}")
    for name, (wall, cpu) in times.items():
        print(
            f"  {name:28} {wall:8.2f} {_ratio(wall_base, wall):>7} "
            f"{cpu:8.2f} {_ratio(cpu_base, cpu):>7}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--runs", type=Path, default=Path("/work/bench/c20k/runs"))
    source.add_argument("--tables", type=Path, help="a folder of .tex files built already")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="CPU seconds (this process and its engines) instead of wall clock: steadier "
        "on a loaded machine, blind to the concurrency",
    )
    parser.add_argument("--assets", nargs="+", choices=sorted(GROUPS), default=list(GROUPS))
    parser.add_argument("--long-table", type=Path, help="measure the check of this long table")
    parser.add_argument(
        "--whole", action="store_true", help="also compile the whole table in one run (slow)"
    )
    parser.add_argument("--chunk-lines", type=int, default=C.CHUNK_LINES, help="body lines a piece")
    args = parser.parse_args()
    if args.long_table is not None:
        long_table(args.long_table, with_whole=args.whole, chunk_lines=args.chunk_lines)
        return
    if args.tables is not None:
        tables = {p.stem: p.read_text(encoding="utf-8") for p in sorted(args.tables.glob("*.tex"))}
        print(f"tables of {args.tables}")
    else:
        tables = corpus_tables(args.runs)
        print(f"tables of the corpus {args.runs}")
    groups = {
        name: {stem: text for stem, text in tables.items() if stem.startswith(prefix)}
        for name, prefix in GROUPS.items()
        if name in args.assets
    }
    print("CPU seconds" if args.cpu else "wall-clock seconds")
    totals = dict.fromkeys(("base full", "now full", "base refresh", "now refresh"), 0.0)
    header = f"{'asset':16} {'tables':>6} {'KB':>6}  {'full: base':>10} {'now':>6} {'ratio':>6}"
    print(header + f"  {'refresh: base':>13} {'now':>6} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="bench-table-compiles-") as scratch:
        for name, group in groups.items():
            folder = Path(scratch) / name
            folder.mkdir()
            cache = CompileCache(Path(scratch) / "cache" / name)
            pictures: dict[str, bytes] = {}
            times = {
                "base full": _seconds(lambda g=group, p=pictures: baseline(g, p), cpu=args.cpu),
                "now full": _seconds(
                    lambda g=group, f=folder, c=cache: now(g, folder=f, cache=c), cpu=args.cpu
                ),
                "base refresh": _seconds(lambda g=group, p=pictures: baseline(g, p), cpu=args.cpu),
                "now refresh": _seconds(
                    lambda g=group, f=folder, c=cache: now(g, folder=f, cache=c), cpu=args.cpu
                ),
            }
            for key, value in times.items():
                totals[key] += value
            size = sum(len(text) for text in group.values()) / 1000
            print(_row(name, len(group), size, times))
    count, size = (
        sum(map(len, groups.values())),
        sum(sum(map(len, g.values())) for g in groups.values()),
    )
    print(_row("all", count, size / 1000, totals))


#: Below this many seconds a time is shown as the clocks' resolution (os.times: 10 ms).
_RESOLUTION = 0.01


def _ratio(base: float, current: float) -> str:
    if current < _RESOLUTION:
        return f">{base / _RESOLUTION:.0f}x"
    return f"{base / current:.1f}x"


def _row(name: str, count: int, size: float, times: dict[str, float]) -> str:
    full = _ratio(times["base full"], times["now full"])
    refresh = _ratio(times["base refresh"], times["now refresh"])
    return (
        f"{name:16} {count:6d} {size:6.0f}  {times['base full']:10.2f} {times['now full']:6.2f}"
        f" {full:>6}  {times['base refresh']:13.2f} {times['now refresh']:6.2f} {refresh:>6}"
    )


if __name__ == "__main__":
    main()
