"""Regenerate the example corpus bundled in ``deepecg_assets/example_corpus``.

Run from the repository root: ``python scripts/make_example_corpus.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from deepecgkit.analysis.synthetic import example_spec, generate_corpus

TARGET = Path(__file__).resolve().parent.parent / "deepecg_assets" / "example_corpus"


def main() -> None:
    if TARGET.exists():
        shutil.rmtree(TARGET)
    truth = generate_corpus(TARGET, example_spec())
    print(f"wrote {len(truth)} run directories to {TARGET}")


if __name__ == "__main__":
    main()
