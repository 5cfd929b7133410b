"""Fixtures of the comparison and report tests: synthetic predictions and run folders.

Run directories are written directly with pandas/json in the layout of
docs/run-directory.md (not with the evaluation package's writer), so these tests
pin the file format the report reads. Helpers are exposed as fixtures
because pytest runs with ``--import-mode=importlib``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

# --- synthetic predictions -----------------------------------------------------------------


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def make_predictions(
    seed: int,
    *,
    n_groups: int = 12,
    per_group: int = 3,
    n_classes: int = 3,
    skill: float = 1.0,
) -> dict[str, np.ndarray]:
    """Grouped single-label predictions: labels cycle over classes, one label per group."""
    rng = np.random.default_rng(seed)
    group_labels = np.arange(n_groups) % n_classes
    y = np.repeat(group_labels, per_group)
    n = y.size
    logits = rng.normal(size=(n, n_classes))
    logits[np.arange(n), y] += skill
    return {
        "sample_id": np.array([f"s{i:04d}" for i in range(n)]),
        "group_id": np.repeat([f"p{g:03d}" for g in range(n_groups)], per_group),
        "y_true": y,
        "prob": _softmax(logits),
    }


def predictions_frame(pred: dict[str, np.ndarray]) -> pd.DataFrame:
    """The ``predictions.csv`` layout of ``pred``."""
    frame = pd.DataFrame(
        {"sample_id": pred["sample_id"], "group_id": pred["group_id"], "y_true": pred["y_true"]}
    )
    for k in range(pred["prob"].shape[1]):
        frame[f"prob_{k}"] = pred["prob"][:, k]
    return frame


# --- run directories ----------------------------------------------------------------------------


def write_run(
    run_dir: Path,
    *,
    model: str,
    dataset: str,
    seed: int | None,
    pred: dict[str, np.ndarray] | None,
    fingerprint: str | None = "fp",
    returncode: int = 0,
    metadata: bool = True,
    split: dict[str, Any] | bool = True,
    frame: pd.DataFrame | None = None,
    predictions_format: str = "csv",
    mtime: float | None = None,
) -> Path:
    """Write one run directory; ``frame`` replaces the predictions table when given."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if pred is not None or frame is not None:
        table = frame if frame is not None else predictions_frame(pred)  # type: ignore[arg-type]
        if predictions_format == "csv":
            table.to_csv(run_dir / "predictions.csv", index=False)
        else:
            upstream_txt(table).to_csv(run_dir / "predictions.txt", sep="\t", index=False)
        if mtime is not None:
            name = "predictions.csv" if predictions_format == "csv" else "predictions.txt"
            os.utime(run_dir / name, (mtime, mtime))
    if metadata:
        meta: dict[str, Any] = {"returncode": returncode, "model": model, "dataset": dataset}
        if seed is not None:
            meta["seed"] = seed
        if fingerprint is not None:
            meta["params_fingerprint"] = fingerprint
        (run_dir / "run_metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    if split is not False:
        if isinstance(split, dict):
            info = split
        elif pred is None and frame is None:
            info = {"n_train": 100, "n_val": 20, "n_test": 36, "n_test_groups": 12}
        else:
            source = frame if frame is not None else predictions_frame(pred)  # type: ignore[arg-type]
            info = {
                "n_train": 100,
                "n_val": 20,
                "n_test": len(source),
                "n_test_groups": int(pd.Series(source["group_id"]).nunique()),
            }
        (run_dir / "split_info.json").write_text(json.dumps(info), encoding="utf-8")
    pd.DataFrame(
        [{"model": model, "dataset": dataset, "accuracy": 0.5, "f1": 0.5, "average": "macro"}]
    ).to_csv(run_dir / "classification_metrics.csv", index=False)
    return run_dir


def upstream_txt(frame: pd.DataFrame, class_names: tuple[str, ...] = ()) -> pd.DataFrame:
    """The upstream trainer's ``predictions.txt`` layout of a canonical frame."""
    prob_columns = [c for c in frame.columns if c.startswith("prob_")]
    names = class_names or tuple(f"c{k}" for k in range(len(prob_columns)))
    prob = frame[prob_columns].to_numpy()
    out = pd.DataFrame(
        {
            "index": frame["sample_id"],
            "true_label": frame["y_true"],
            "predicted_label": prob.argmax(axis=1),
        }
    )
    for name, column in zip(names, prob_columns, strict=True):
        out[f"prob_{name}"] = frame[column].round(6)
    out["record"] = frame["group_id"]
    return out


@pytest.fixture
def predictions() -> Callable[..., dict[str, np.ndarray]]:
    """Factory of synthetic grouped predictions (see ``make_predictions``)."""
    return make_predictions


@pytest.fixture
def run_writer() -> Callable[..., Path]:
    """Factory writing one run directory (see ``write_run``)."""
    return write_run


@pytest.fixture
def to_frame() -> Callable[[dict[str, np.ndarray]], pd.DataFrame]:
    """Turn synthetic predictions into the ``predictions.csv`` layout."""
    return predictions_frame


@pytest.fixture
def to_upstream() -> Callable[..., pd.DataFrame]:
    """Turn a canonical predictions frame into the upstream ``predictions.txt`` layout."""
    return upstream_txt


# --- the report corpus ----------------------------------------------------------------------------

#: run_id -> reason of every run the identity contract must exclude (without --allow-partial).
EXPECTED_RUN_EXCLUSIONS = {
    "bad/unreadable_metrics_seed3": "unreadable",
    "bad/unreadable_metadata_seed3": "unreadable",
    "bad/unreadable_predictions_seed3": "unreadable",
    "bad/unreadable_split_seed3": "unreadable",
    "bad/blank_model_seed3": "unreadable",
    "bad/failed_seed3": "failed_run",
    "bad/no_predictions_seed3": "no_predictions",
    "bad/multilabel_seed3": "multilabel_unsupported",
    "bad/malformed_seed3": "malformed_predictions",
    "bad/out_of_range_seed3": "malformed_predictions",
    "bad/non_normalised_seed3": "non_normalised_probabilities",
    "bad/duplicate_sample_seed3": "duplicate_sample",
    "bad/conflicting_label_seed3": "conflicting_group_label",
    "fingerprints/stale_seed1": "no_predictions",
    "fingerprints/stale_seed2": "no_predictions",
    "fingerprints/stale_seed3": "stale_fingerprint",
    "fingerprints/ambiguous_seed1": "ambiguous_fingerprint",
    "fingerprints/ambiguous_seed2": "ambiguous_fingerprint",
    "partial/missing_metadata_seed1": "missing_metadata",
    "partial/missing_fingerprint_seed1": "missing_fingerprint",
    "partial/missing_split_seed1": "missing_split_info",
    "partial/incomplete_seed1": "incomplete_predictions",
    "duplicates/older_seed1": "duplicate_run",
}
#: candidate run_id -> reason of every comparison the report must reject (reference "resnet").
EXPECTED_COMPARISON_EXCLUSIONS = {
    "duplicates/newer_seed1": "no_reference_run",
    "pairs/class_mismatch_seed1": "class_mismatch",
    "pairs/label_mismatch_seed1": "label_mismatch",
    "pairs/legacy": "unknown_seed",
    "pairs/no_reference_seed7": "no_reference_run",
    "pairs/unmatched_seed1": "unmatched_samples",
    "tiny/few_groups_seed1": "no_reference_run",
}
PARTIAL_RUNS = (
    "partial/incomplete_seed1",
    "partial/missing_fingerprint_seed1",
    "partial/missing_metadata_seed1",
    "partial/missing_split_seed1",
)


#: Groups of the corpus's good runs: three classes of 20, above both bootstrap minima.
GOOD_GROUPS = 60


def build_corpus(root: Path) -> Path:
    """One folder of run directories with one run per identity-contract violation."""
    good = {seed: make_predictions(seed, n_groups=GOOD_GROUPS) for seed in (1, 2)}
    for seed in (1, 2):
        write_run(
            root / f"good/resnet_af_seed{seed}",
            model="resnet",
            dataset="af",
            seed=seed,
            pred=make_predictions(100 + seed, n_groups=GOOD_GROUPS, skill=2.5),
            fingerprint="fp-resnet",
        )
        write_run(
            root / f"good/inception_af_seed{seed}",
            model="inception",
            dataset="af",
            seed=seed,
            pred=good[seed],
            fingerprint="fp-inception",
        )
    # The upstream trainer's layout: tab-separated predictions.txt, timestamped name.
    write_run(
        root / "good/20260301-101500-lstm-af-seed1",
        model="lstm",
        dataset="af",
        seed=None,
        pred=make_predictions(1, n_groups=GOOD_GROUPS, skill=1.0),
        fingerprint="fp-lstm",
        predictions_format="txt",
    )

    base = make_predictions(3)
    frame = predictions_frame(base)
    bad = root / "bad"
    write_run(bad / "unreadable_metrics_seed3", model="m", dataset="af", seed=3, pred=base)
    pd.DataFrame([{"accuracy": 0.5}]).to_csv(
        bad / "unreadable_metrics_seed3/classification_metrics.csv", index=False
    )
    write_run(bad / "unreadable_metadata_seed3", model="m1", dataset="af", seed=3, pred=base)
    (bad / "unreadable_metadata_seed3/run_metadata.json").write_text("{not json", encoding="utf-8")
    write_run(bad / "unreadable_predictions_seed3", model="m2", dataset="af", seed=3, pred=base)
    (bad / "unreadable_predictions_seed3/predictions.csv").write_bytes(b"sample_id\n\xff\xfe\n")
    write_run(bad / "unreadable_split_seed3", model="m11", dataset="af", seed=3, pred=base)
    (bad / "unreadable_split_seed3/split_info.json").write_text("[36, 12]", encoding="utf-8")
    write_run(bad / "blank_model_seed3", model=" ", dataset="af", seed=3, pred=base)
    write_run(bad / "failed_seed3", model="m3", dataset="af", seed=3, pred=base, returncode=1)
    write_run(
        bad / "no_predictions_seed3", model="m4", dataset="af", seed=3, pred=None, split=False
    )
    multilabel = frame.drop(columns="y_true").assign(y_true_0=1, y_true_1=0, y_true_2=0)
    write_run(
        bad / "multilabel_seed3", model="m5", dataset="af", seed=3, pred=None, frame=multilabel
    )
    gap = frame.rename(columns={"prob_2": "prob_3"})
    write_run(bad / "malformed_seed3", model="m6", dataset="af", seed=3, pred=None, frame=gap)
    out_of_range = frame.assign(y_true=frame["y_true"].where(frame.index != 0, 7))
    write_run(
        bad / "out_of_range_seed3", model="m7", dataset="af", seed=3, pred=None, frame=out_of_range
    )
    # Two rows scaled to sum 0.9: every value stays in [0, 1], only the sum is wrong.
    scale = np.where(frame.index < 2, 0.9, 1.0)
    skewed = frame.assign(**{f"prob_{k}": frame[f"prob_{k}"] * scale for k in range(3)})
    write_run(
        bad / "non_normalised_seed3", model="m8", dataset="af", seed=3, pred=None, frame=skewed
    )
    repeated = frame.assign(sample_id=frame["sample_id"].where(frame.index != 1, "s0000"))
    write_run(
        bad / "duplicate_sample_seed3", model="m9", dataset="af", seed=3, pred=None, frame=repeated
    )
    conflicting = frame.assign(y_true=frame["y_true"].where(frame.index != 1, 2))
    write_run(
        bad / "conflicting_label_seed3",
        model="m10",
        dataset="af",
        seed=3,
        pred=None,
        frame=conflicting,
    )

    fp = root / "fingerprints"
    # Runs without predictions still describe the configuration: S1 is the reference.
    write_run(fp / "stale_seed1", model="st", dataset="af", seed=1, pred=None, fingerprint="S1")
    write_run(fp / "stale_seed2", model="st", dataset="af", seed=2, pred=None, fingerprint="S1")
    write_run(fp / "stale_seed3", model="st", dataset="af", seed=3, pred=base, fingerprint="S0")
    write_run(fp / "ambiguous_seed1", model="amb", dataset="af", seed=1, pred=base, fingerprint="X")
    write_run(fp / "ambiguous_seed2", model="amb", dataset="af", seed=2, pred=base, fingerprint="Y")

    partial = root / "partial"
    pt = make_predictions(4)
    write_run(
        partial / "missing_metadata_seed1",
        model="p1",
        dataset="pt",
        seed=1,
        pred=pt,
        metadata=False,
    )
    write_run(
        partial / "missing_fingerprint_seed1",
        model="p2",
        dataset="pt",
        seed=1,
        pred=pt,
        fingerprint=None,
    )
    write_run(
        partial / "missing_split_seed1", model="p3", dataset="pt", seed=1, pred=pt, split=False
    )
    write_run(
        partial / "incomplete_seed1",
        model="p4",
        dataset="pt",
        seed=1,
        pred=pt,
        split={"n_train": 1, "n_val": 1, "n_test": 40, "n_test_groups": 12},
    )

    dup = root / "duplicates"
    # Same (model, dataset, seed): the run with the newer predictions wins, whatever its name.
    write_run(dup / "older_seed1", model="dup", dataset="dx", seed=1, pred=base, mtime=1_000_000)
    write_run(dup / "newer_seed1", model="dup", dataset="dx", seed=1, pred=base, mtime=2_000_000)

    pairs = root / "pairs"
    write_run(
        pairs / "class_mismatch_seed1",
        model="k4",
        dataset="af",
        seed=1,
        pred=make_predictions(1, n_classes=4),
    )
    shifted = predictions_frame(good[1])
    shifted.loc[0, "sample_id"] = "s9999"
    write_run(
        pairs / "unmatched_seed1", model="unm", dataset="af", seed=1, pred=None, frame=shifted
    )
    relabelled = predictions_frame(good[1])
    relabelled.loc[relabelled["group_id"] == "p000", "y_true"] = 1
    write_run(
        pairs / "label_mismatch_seed1",
        model="lab",
        dataset="af",
        seed=1,
        pred=None,
        frame=relabelled,
    )
    write_run(pairs / "legacy", model="leg", dataset="af", seed=None, pred=good[1])
    write_run(pairs / "no_reference_seed7", model="nor", dataset="af", seed=7, pred=good[1])

    write_run(
        root / "tiny/few_groups_seed1",
        model="few",
        dataset="tiny",
        seed=1,
        pred=make_predictions(5, n_groups=4, per_group=2, n_classes=2),
    )
    return root


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report corpus (read-only: tests must not modify it)."""
    return build_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def expected_run_exclusions() -> dict[str, str]:
    """run_id -> reason of each run the contract excludes without ``allow_partial``."""
    return dict(EXPECTED_RUN_EXCLUSIONS)


@pytest.fixture(scope="session")
def expected_comparison_exclusions() -> dict[str, str]:
    """candidate run_id -> reason of each rejected comparison (reference ``resnet``)."""
    return dict(EXPECTED_COMPARISON_EXCLUSIONS)


@pytest.fixture(scope="session")
def partial_runs() -> tuple[str, ...]:
    """run_ids admitted only with ``allow_partial``."""
    return PARTIAL_RUNS
