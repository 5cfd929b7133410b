"""Synthetic model x dataset x seed corpora of run directories, with plantable effects.

Tests, benchmarks and demos need run directories in the exact on-disk format
of docs/run-directory.md whose ground truth is known. This module writes them
from a small generative model of multi-seed experiments:

``score[m, d, s] = base[m, d] + split[d, s] + noise[m, d, s]``

where ``base`` is the model's true quality on the dataset, ``split`` is the
effect of seed ``s``'s train/test partition (shared by every model on that
dataset, so it cancels in paired differences, exactly as in real seed grids)
and ``noise`` is the seed-to-seed training noise of one model.

Effects are planted on top of that model:

* :class:`Reversal`: model A beats B on one dataset and trails it on another.
* :class:`NullPair`: two models with identical true quality everywhere.
* :class:`Collapse`: a model that fails to train on some seeds.
* :class:`TinyTestPartition`: a dataset whose test split holds too few groups.
* :class:`MultiLabel`: a dataset written with the multi-label schema.
* :class:`MixedAveraging`: some runs of a cell averaged ``binary`` instead of ``macro``.

The generator is deterministic for a given ``random_state``. Every run is
written by :func:`deepecgkit.rundir.write.write_run_directory`: each file
under a temporary name and renamed into place, the metrics file last, so a
concurrent reader never sees a half-written run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from deepecgkit.rundir.format import (
    AVERAGING_MACRO_LABEL,
    MULTI_LABEL_METRICS,
    SINGLE_LABEL_METRICS,
    run_directory_name,
)
from deepecgkit.rundir.write import DEFAULT_AVERAGING, write_run_directory

__all__ = [
    "Collapse",
    "CorpusSpec",
    "MixedAveraging",
    "MultiLabel",
    "NullPair",
    "Reversal",
    "SplitSizes",
    "TinyTestPartition",
    "example_spec",
    "generate_corpus",
    "run_directory_name",
    "write_run_directory",
]

#: Averaging planted by :class:`MixedAveraging`.
MINORITY_AVERAGING = "binary"
#: Per-seed training noise (SD of the noise term), in F1 units.
DEFAULT_NOISE_SD = 0.01
#: SD of the split effect shared by all models of one dataset and seed.
DEFAULT_SPLIT_SD = 0.02
#: Range of true model quality and of dataset difficulty offsets.
MODEL_SKILL_RANGE = (0.62, 0.86)
DATASET_OFFSET_RANGE = (-0.08, 0.04)
#: SD of the model x dataset interaction.
INTERACTION_SD = 0.02


@dataclass(frozen=True)
class SplitSizes:
    """Split sizes recorded in ``split_info.json`` (counts of samples and test groups)."""

    n_train: int = 800
    n_val: int = 100
    n_test: int = 200
    n_test_groups: int = 180

    def to_dict(self) -> dict[str, int]:
        """The fields by name, in ``split_info.json``'s order."""
        return asdict(self)


@dataclass(frozen=True)
class Reversal:
    """``model_a`` leads ``model_b`` by ``margin`` on ``dataset_1`` and trails on ``dataset_2``."""

    model_a: str
    model_b: str
    dataset_1: str
    dataset_2: str
    margin: float = 0.05


@dataclass(frozen=True)
class NullPair:
    """``model_b`` gets exactly ``model_a``'s true quality on every dataset."""

    model_a: str
    model_b: str


@dataclass(frozen=True)
class Collapse:
    """``model`` fails to train on the first ``n_seeds`` seeds of ``dataset``, scoring ``score``."""

    model: str
    dataset: str
    n_seeds: int = 2
    score: float = 0.35


@dataclass(frozen=True)
class TinyTestPartition:
    """Every run of ``dataset`` records a test split with only ``n_test_groups`` groups."""

    dataset: str
    n_test: int = 12
    n_test_groups: int = 6


@dataclass(frozen=True)
class MultiLabel:
    """Runs of ``dataset`` are written with the multi-label schema (``macro-label``)."""

    dataset: str


@dataclass(frozen=True)
class MixedAveraging:
    """Runs of (``model``, ``dataset``) at ``seeds`` record ``binary`` averaging."""

    model: str
    dataset: str
    seeds: tuple[int, ...] = (0,)


Effect = Reversal | NullPair | Collapse | TinyTestPartition | MultiLabel | MixedAveraging


@dataclass(frozen=True)
class CorpusSpec:
    """What :func:`generate_corpus` writes.

    Attributes:
        models, datasets, seeds: the grid; one run per combination.
        effects: planted effects, applied in order.
        noise_sd: per-run training noise (F1 units).
        split_sd: split effect shared by every model of a (dataset, seed).
        split_sizes: sizes recorded for every dataset without a
            :class:`TinyTestPartition` effect.
        upstream_names: name directories like the upstream trainer,
            ``{timestamp}-{model}-{dataset}-seed{seed}``, instead of
            ``{model}_{dataset}_seed{seed}``.
        fingerprint: ``params_fingerprint`` recorded in every run's metadata
            (None leaves it out).
        random_state: seed of the generator.
    """

    models: tuple[str, ...]
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]
    effects: tuple[Effect, ...] = ()
    noise_sd: float = DEFAULT_NOISE_SD
    split_sd: float = DEFAULT_SPLIT_SD
    split_sizes: SplitSizes = field(default_factory=SplitSizes)
    upstream_names: bool = False
    fingerprint: str | None = "synthetic-v1"
    random_state: int = 0


# --- the generative model -----------------------------------------------------------------


def _true_quality(spec: CorpusSpec, rng: np.random.Generator) -> np.ndarray:
    """``base[m, d]``: model skill + dataset offset + interaction, then planted effects."""
    n_models, n_datasets = len(spec.models), len(spec.datasets)
    skill = rng.uniform(*MODEL_SKILL_RANGE, size=n_models)
    offset = rng.uniform(*DATASET_OFFSET_RANGE, size=n_datasets)
    interaction = rng.normal(0.0, INTERACTION_SD, size=(n_models, n_datasets))
    base = skill[:, None] + offset[None, :] + interaction
    model_index = {name: i for i, name in enumerate(spec.models)}
    dataset_index = {name: j for j, name in enumerate(spec.datasets)}
    for effect in spec.effects:
        if isinstance(effect, NullPair):
            base[model_index[effect.model_b]] = base[model_index[effect.model_a]]
        elif isinstance(effect, Reversal):
            a, b = model_index[effect.model_a], model_index[effect.model_b]
            d1, d2 = dataset_index[effect.dataset_1], dataset_index[effect.dataset_2]
            base[a, d1] = base[b, d1] + effect.margin
            base[a, d2] = base[b, d2] - effect.margin
    return base


def _derived_metrics(f1: np.ndarray, rng: np.random.Generator, multi_label: bool) -> dict:
    """Plausible companion metrics for an array of F1 scores (all in [0, 1])."""

    def jitter(center: np.ndarray, sd: float = 0.005) -> np.ndarray:
        return np.clip(center + rng.normal(0.0, sd, size=f1.shape), 0.0, 1.0)

    ece = jitter(0.02 + 0.12 * (1.0 - f1), 0.004)
    brier = jitter(0.05 + 0.35 * (1.0 - f1), 0.004)
    values = {
        "precision": jitter(f1 + 0.01),
        "recall": jitter(f1 - 0.01),
        "f1": f1,
        "auroc": jitter(0.55 + 0.45 * f1),
        "ece": ece,
        "adaptive_ece": jitter(ece + 0.005, 0.002),
        "mce": jitter(3.0 * ece, 0.01),
        "brier": brier,
        "nll": 0.1 + 1.2 * (1.0 - f1) + rng.normal(0.0, 0.01, size=f1.shape),
        "temperature": np.clip(1.3 + rng.normal(0.0, 0.1, size=f1.shape), 0.5, 3.0),
    }
    for name in ("ece", "adaptive_ece", "mce", "brier"):
        values[f"{name}_temp"] = jitter(0.6 * values[name], 0.002)
    values["nll_temp"] = 0.9 * values["nll"]
    # Derived without new draws, so every value drawn before these columns existed
    # stays the same for the same seed.
    for name in ("ece", "ece_temp"):
        scaled = name.replace("ece", "classwise_ece")
        values[scaled] = np.clip(1.2 * values[name], 0.0, 1.0)
        values[name.replace("ece", "ece_debiased")] = 0.8 * values[name]
        values[scaled.replace("classwise_ece", "classwise_ece_debiased")] = 0.8 * values[scaled]
    if multi_label:
        values["label_accuracy"] = jitter(0.5 + 0.5 * f1)
        values["exact_match_accuracy"] = jitter(f1 - 0.2)
    else:
        values["accuracy"] = jitter(f1 + 0.03)
        values["balanced_accuracy"] = jitter(f1 + 0.005)
        values["mcc"] = np.clip(2.0 * f1 - 1.0 + rng.normal(0.0, 0.01, size=f1.shape), -1.0, 1.0)
    schema = MULTI_LABEL_METRICS if multi_label else SINGLE_LABEL_METRICS
    return {name: values[name] for name in schema}


def generate_corpus(root: Path | str, spec: CorpusSpec) -> pd.DataFrame:
    """Write ``spec``'s grid of run directories under ``root``.

    Args:
        root: parent folder of the run directories (created if needed).
        spec: the grid, its planted effects and noise levels.

    Returns:
        The ground truth, one row per run: ``run_dir``, ``model``,
        ``dataset``, ``seed``, ``true_f1`` (the ``base`` term), ``f1`` (the
        value written), ``averaging`` and ``multi_label``.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.random_state)
    base = _true_quality(spec, rng)
    n_models, n_datasets, n_seeds = len(spec.models), len(spec.datasets), len(spec.seeds)
    split = rng.normal(0.0, spec.split_sd, size=(1, n_datasets, n_seeds))
    noise = rng.normal(0.0, spec.noise_sd, size=(n_models, n_datasets, n_seeds))
    f1 = base[:, :, None] + split + noise

    multi_label = {e.dataset for e in spec.effects if isinstance(e, MultiLabel)}
    tiny = {e.dataset: e for e in spec.effects if isinstance(e, TinyTestPartition)}
    binary_runs = {
        (e.model, e.dataset, seed)
        for e in spec.effects
        if isinstance(e, MixedAveraging)
        for seed in e.seeds
    }
    for effect in spec.effects:
        if isinstance(effect, Collapse):
            m, d = spec.models.index(effect.model), spec.datasets.index(effect.dataset)
            collapsed = slice(0, effect.n_seeds)
            f1[m, d, collapsed] = effect.score + noise[m, d, collapsed]
    f1 = np.clip(f1, 0.0, 1.0)

    truth: list[dict[str, Any]] = []
    for j, dataset in enumerate(spec.datasets):
        is_multi = dataset in multi_label
        metrics = _derived_metrics(f1[:, j, :], rng, is_multi)
        sizes = spec.split_sizes
        if dataset in tiny:
            sizes = SplitSizes(
                n_train=sizes.n_train,
                n_val=sizes.n_val,
                n_test=tiny[dataset].n_test,
                n_test_groups=tiny[dataset].n_test_groups,
            )
        for i, model in enumerate(spec.models):
            for k, seed in enumerate(spec.seeds):
                averaging = (
                    AVERAGING_MACRO_LABEL
                    if is_multi
                    else MINORITY_AVERAGING
                    if (model, dataset, seed) in binary_runs
                    else DEFAULT_AVERAGING
                )
                name = run_directory_name(model, dataset, seed, upstream=spec.upstream_names)
                run_dir = write_run_directory(
                    root / name,
                    model=model,
                    dataset=dataset,
                    seed=seed,
                    metrics={metric: float(v[i, k]) for metric, v in metrics.items()},
                    average=None if is_multi else averaging,
                    multi_label=is_multi,
                    split_sizes=sizes,
                    fingerprint=spec.fingerprint,
                )
                truth.append(
                    {
                        "run_dir": str(run_dir),
                        "model": model,
                        "dataset": dataset,
                        "seed": seed,
                        "true_f1": float(base[i, j]),
                        "f1": float(f1[i, j, k]),
                        "averaging": averaging,
                        "multi_label": is_multi,
                    }
                )
    return pd.DataFrame(truth)


def example_spec(**overrides: Any) -> CorpusSpec:
    """A small demo grid (4 models x 3 datasets x 5 seeds) with every effect planted."""
    spec = CorpusSpec(
        models=("cnn", "lstm", "resnet", "transformer"),
        datasets=("afib", "ptbxl", "sleep"),
        seeds=(0, 1, 2, 3, 4),
        effects=(
            Reversal("cnn", "resnet", "afib", "ptbxl", margin=0.05),
            NullPair("lstm", "transformer"),
            Collapse("lstm", "sleep", n_seeds=2),
            MixedAveraging("transformer", "afib", seeds=(0,)),
            MultiLabel("ptbxl"),
        ),
    )
    fields = {name: getattr(spec, name) for name in spec.__dataclass_fields__}
    fields.update(overrides)
    return CorpusSpec(**fields)
