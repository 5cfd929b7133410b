"""Benchmark the LaTeX emitters against baselines measured in the same run.

1. ``escape_latex`` (one ``str.translate`` pass) against the other single-pass
   method the specification allows, a one-character regex alternation with a
   dict lookup per match, over 200,000 hostile names.
2. ``flip_survival_table`` over a large flip grid (30 models x 8 datasets:
   435 model pairs x 28 dataset pairs = 12,180 rows) against
   ``DataFrame.to_csv`` of the same frame, the cost of merely serialising it.

Run: ``.venv/bin/python benchmarks/bench_latex.py``. Prints best-of-five
times and ratios; nothing is asserted.
"""

from __future__ import annotations

import itertools
import re
import string
import timeit
from collections.abc import Callable

import numpy as np
import pandas as pd

from deepecgkit.analysis import latex

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


def main() -> None:
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
