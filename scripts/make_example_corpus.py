"""Regenerate the example corpus bundled in ``deepecg_assets/example_corpus``.

The corpus is real ``deepecg train-grid`` output on the built-in synthetic ECG
data: four models (three small 1-D CNNs and the feature-based logistic
baseline) x three datasets (binary AF, four-class rhythm, five-label
morphology on lead II) x five seeds. Checkpoints are kept for the first seed
only, one encoder per (model, dataset), which is what the transfer matrix
needs and keeps the package under 5 MB.

Run from the repository root: ``python scripts/make_example_corpus.py``
(about two minutes on two CPU cores).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from deepecgkit.training import run_grid

TARGET = Path(__file__).resolve().parent.parent / "deepecg_assets" / "example_corpus"
MODELS = ("simple-cnn", "resnet1d", "se-resnet", "logreg-features")
DATASETS = ("synthetic-af", "synthetic-rhythm", "synthetic-ptbxl")
SEEDS = tuple(range(5))


def main() -> None:
    if TARGET.exists():
        shutil.rmtree(TARGET)
    statuses = run_grid(
        MODELS,
        DATASETS,
        SEEDS,
        TARGET,
        leads=["II"],
        checkpoints="first-seed",
        progress=False,
    )
    failed = [s for s in statuses if s.status != "done"]
    if failed:
        raise SystemExit(f"{len(failed)} run(s) did not finish: {failed}")
    size = sum(p.stat().st_size for p in TARGET.rglob("*") if p.is_file())
    print(f"wrote {len(statuses)} run directories to {TARGET} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
