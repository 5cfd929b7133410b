"""Benchmark the LaTeX emitters against baselines measured in the same run.

1. ``escape_latex`` (one ``str.translate`` pass) against the other single-pass
   method the specification allows, a one-character regex alternation with a
   dict lookup per match, over 200,000 hostile names.
2. ``flip_survival_table`` over a large flip grid (30 models x 8 datasets:
   435 model pairs x 28 dataset pairs = 12,180 rows) against
   ``DataFrame.to_csv`` of the same frame, the cost of merely serialising it.

3. With ``--grid FLIP_GRID.parquet`` (session 20: the stored flip grid of a
   100,000-run build, 232,750 rows): the column-wise ``flip_survival_table``
   against the landed row-by-row formatter (``to_dict("records")`` and one
   call of each scalar cell helper per row), rebuilt here as the baseline; the
   two bodies must be equal line for line, and with ``--expected TEX`` the
   table must equal that file byte for byte. Then the ``flip_table`` asset's
   body (table, ``write_tables``, pictures' metadata, preview), invoked
   directly with a scratch output folder.

Run: ``.venv/bin/python benchmarks/bench_latex.py [--grid ... [--expected ...]]``.
Prints best-of-five times (best of ``--repeats`` for the grid) and ratios;
nothing is asserted but the equality of the outputs.
"""

from __future__ import annotations

import argparse
import itertools
import re
import string
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from deepecgkit.analysis import latex  # noqa: E402

N_NAMES = 200_000
N_MODELS = 30
N_DATASETS = 8
REPEATS = 5
SEED = 0


def _names(rng: np.random.Generator) -> list[str]:
    alphabet = np.array(list(string.ascii_letters + "_&%$#{}~^\\\t\n -"))
    lengths = rng.integers(4, 24, size=N_NAMES)
    return ["".join(rng.choice(alphabet, size=length)) for length in lengths]


def _regex_escape() -> Callable[[str], str]:
    pattern = re.compile("|".join(re.escape(c) for c in latex._ESCAPES) + r"|[\x00-\x1f\x7f]")

    def escape(text: str) -> str:
        return pattern.sub(lambda m: latex._ESCAPES.get(m.group(0), " "), text)

    return escape


def _flip_grid(rng: np.random.Generator) -> pd.DataFrame:
    models = [f"model_{i}" for i in range(N_MODELS)]
    datasets = [f"data_{i}" for i in range(N_DATASETS)]
    pairs = [
        (a, b, d1, d2)
        for d1, d2 in itertools.combinations(datasets, 2)
        for a, b in itertools.combinations(models, 2)
    ]
    n = len(pairs)
    means = rng.normal(0, 0.05, size=(n, 2))
    return pd.DataFrame(
        {
            "model_a": [p[0] for p in pairs],
            "model_b": [p[1] for p in pairs],
            "dataset_1": [p[2] for p in pairs],
            "dataset_2": [p[3] for p in pairs],
            "metric": "f1",
            "mean_1": means[:, 0],
            "mean_2": means[:, 1],
            "lower_1": means[:, 0] - 0.02,
            "upper_1": means[:, 0] + 0.02,
            "lower_2": means[:, 1] - 0.02,
            "upper_2": means[:, 1] + 0.02,
            "wins_1": rng.integers(0, 6, size=n),
            "wins_2": rng.integers(0, 6, size=n),
            "n_1": 5,
            "n_2": 5,
            "n_seeds": 5,
            "averaging_1": "macro",
            "averaging_2": "macro",
            "comparable_magnitudes": rng.random(n) > 0.1,
            "verdict": rng.choice(["supported", "unresolved", "not-reproduced"], size=n),
            "p_flip": rng.random(n),
            "reason": "",
            "p_adjusted": rng.random(n),
            "fdr_family": "testable",
            "fdr_family_size": n,
            "p_reversal": rng.random(n),
            "q_reversal": rng.random(n),
            "fdr_method": "by",
            "survives_fdr": rng.random(n) < 0.05,
            "correction_applied_1": rng.choice(["nadeau-bengio", "unavailable"], size=n),
            "correction_applied_2": "nadeau-bengio",
            "correction_note_1": "",
            "correction_note_2": "",
        }
    )


def _best(function: Callable[[], object]) -> float:
    return min(timeit.repeat(function, number=1, repeat=REPEATS))


def _landed_interval(mean: Any, lower: Any, upper: Any, marker: str) -> str:
    spec = f"+.{latex.DEFAULT_PRECISION}f"
    return latex._point_and_bounds(mean, lower, upper, spec=spec, marker=marker, small=True)


def _landed_wins(wins: Any, n: Any) -> str:
    total, won = latex._finite_float(n), latex._finite_float(wins)
    if total is None or total == 0 or won is None:
        return latex.MISSING_CELL
    return f"{round(won)}/{round(total)}"


def _landed_symbols(row: dict[str, Any], component: int) -> list[str]:
    symbols = []
    if latex._is_false(row.get("comparable_magnitudes")):
        symbols.append(latex._DAGGER_SYMBOL)
    if str(row.get(f"correction_applied_{component}")) == latex.CORRECTION_UNAVAILABLE:
        symbols.append(latex._DDAGGER_SYMBOL)
    return symbols


def landed_flip_body(flips: pd.DataFrame) -> list[str]:
    """The landed (session 19) flip table body: one records dict and one call per cell per row."""
    keys = ("model_a", "model_b", "dataset_1", "dataset_2")
    records = latex._records(flips, keys, "flip_survival_table")
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in records:
        groups.setdefault((str(row["dataset_1"]), str(row["dataset_2"])), []).append(row)
    body: list[str] = []
    for first, second in sorted(groups):
        body += [
            r"\midrule",
            rf"\multicolumn{{7}}{{l}}{{\textit{{{latex.display_dataset(first)} "
            rf"$\rightarrow$ {latex.display_dataset(second)}}}}} \\",
        ]
        for row in groups[(first, second)]:
            mark_1 = latex._superscript(_landed_symbols(row, 1))
            mark_2 = latex._superscript(_landed_symbols(row, 2))
            survives = latex._explicit_bool(row.get("survives_fdr")) is True
            body.append(
                latex._row(
                    [
                        f"{latex.display_model(row['model_a'])} / "
                        f"{latex.display_model(row['model_b'])}",
                        _landed_interval(row["mean_1"], row["lower_1"], row["upper_1"], mark_1),
                        _landed_wins(row["wins_1"], row["n_1"]),
                        _landed_interval(row["mean_2"], row["lower_2"], row["upper_2"], mark_2),
                        _landed_wins(row["wins_2"], row["n_2"]),
                        latex._p_cell(row.get("q_reversal")),
                        latex._display_verdict(row["verdict"])
                        + (latex._SURVIVES if survives else ""),
                    ]
                )
            )
    return body


def _once(function: Callable[[], object], repeats: int) -> float:
    return min(timeit.repeat(function, number=1, repeat=repeats))


def flip_grid_section(grid_path: Path, expected: Path | None, repeats: int) -> None:
    """The flip table of a stored grid: column-wise against the landed rows, and the asset body."""
    from deepecg_assets.assets.tables import flip_table
    from deepecg_assets.resources import AnalysisSettings, OutputFolderResource

    start = time.perf_counter()
    grid = pd.read_parquet(grid_path)
    print(f"{grid_path}: {len(grid):,} rows, read in {time.perf_counter() - start:.2f} s")
    new_body, _ = latex._flip_body(grid)
    assert new_body == landed_flip_body(grid), "the column-wise body differs from the landed one"
    landed = _once(lambda: landed_flip_body(grid), repeats)
    body = _once(lambda: latex._flip_body(grid), repeats)
    table = _once(lambda: latex.flip_survival_table(grid), repeats)
    print(
        f"  body rows: landed {landed:.2f} s, column-wise {body:.2f} s, "
        f"speed-up x{landed / body:.1f}"
    )
    print(f"  flip_survival_table (caption, notes, longtable): {table:.2f} s")
    if expected is not None:
        same = latex.flip_survival_table(grid) == expected.read_text(encoding="utf-8")
        print(f"  byte for byte equal to {expected}: {same}")
    with tempfile.TemporaryDirectory(prefix="bench-flip-asset-") as folder:
        output = OutputFolderResource(path=folder)
        analysis = AnalysisSettings()
        asset = _once(
            lambda: flip_table(flip_grid=grid, analysis=analysis, output_folder=output), repeats
        )
    print(f"  flip_table asset body (table, write, metadata, preview): {asset:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, help="a stored flip_grid.parquet")
    parser.add_argument("--expected", type=Path, help="the flip_survival.tex the grid gave")
    parser.add_argument("--repeats", type=int, default=3, help="best of this many (the grid)")
    args = parser.parse_args()
    if args.grid is not None:
        flip_grid_section(args.grid, args.expected, args.repeats)
        return
    rng = np.random.default_rng(SEED)
    names = _names(rng)
    regex_escape = _regex_escape()
    assert [latex.escape_latex(n) for n in names[:1000]] == [regex_escape(n) for n in names[:1000]]
    translate = _best(lambda: [latex.escape_latex(n) for n in names])
    regex = _best(lambda: [regex_escape(n) for n in names])
    print(
        f"escape_latex, {N_NAMES} names: translate {translate * 1e3:.1f} ms, "
        f"regex baseline {regex * 1e3:.1f} ms, speed-up x{regex / translate:.1f}"
    )

    flips = _flip_grid(rng)
    table = _best(lambda: latex.flip_survival_table(flips))
    csv = _best(lambda: flips.to_csv(index=False))
    print(
        f"flip_survival_table, {len(flips)} rows: {table * 1e3:.0f} ms, "
        f"to_csv baseline {csv * 1e3:.0f} ms, ratio x{table / csv:.2f}"
    )


if __name__ == "__main__":
    main()
