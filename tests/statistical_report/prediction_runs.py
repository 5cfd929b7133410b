"""Run directories with stored predictions, for the report's reuse tests and benchmark.

Each run is written by :func:`deepecgkit.evaluation.run_scoring.write_run_report`
(predictions, split sizes, metadata, metrics row), from softmax outputs whose
true class gets ``skill`` added to its logit. The predictions are a function
of ``(seed, variant, model, dataset)``, so a test changes one run's
predictions, and nothing else, by writing it again with another ``variant``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from deepecgkit.evaluation.run_scoring import write_run_report

N_CLASSES = 3


def write_prediction_run(
    root: Path,
    model: str,
    dataset: str,
    seed: int,
    *,
    variant: int = 0,
    n_groups: int = 24,
    per_group: int = 2,
    skill: float = 1.5,
) -> Path:
    """Write ``root/<model>_<dataset>_seed<seed>`` and return it; labels cycle over classes."""
    names = hashlib.sha256(f"{model}\0{dataset}".encode()).digest()
    rng = np.random.default_rng([seed, variant, int.from_bytes(names[:4], "little")])
    y_true = np.repeat(np.arange(n_groups) % N_CLASSES, per_group)
    groups = np.repeat([f"p{g:04d}" for g in range(n_groups)], per_group)
    logits = rng.normal(size=(y_true.size, N_CLASSES))
    logits[np.arange(y_true.size), y_true] += skill
    prob = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    run_dir = root / f"{model}_{dataset}_seed{seed}"
    write_run_report(
        run_dir,
        y_true,
        prob,
        model=model,
        dataset=dataset,
        logits=logits,
        groups=groups,
        split_info={"n_train": 100, "n_val": 20},
        metadata={"seed": seed, "params": {"model": model}},
    )
    return run_dir
