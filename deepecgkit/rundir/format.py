"""The run-directory format: file names, column names, keys and the schema of each file.

A run directory is the hand-over between producing numbers (training,
evaluation) and analysing them (the analysis, the statistical report, the
Dagster platform). Every name of the format is defined here once, and
:data:`RUN_FILES` describes each file (its columns or keys, and the writer
and reader that own it); ``docs/run-directory.md`` is generated from it
(``scripts/make_run_directory_doc.py``, checked by a test). The metrics
themselves (names, directions, ranges) come from the registry in
:mod:`deepecgkit.rundir.metrics`.

The module imports nothing but the standard library.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from deepecgkit.rundir.metrics import LOWER, METRICS, metric_spec, temperature_scaled

__all__ = [
    "AVERAGING_MACRO_LABEL",
    "AVERAGING_MODES",
    "AVERAGING_UNKNOWN",
    "CALIBRATION_COLUMNS",
    "CALIBRATION_ERRORS",
    "CALIBRATION_METRICS",
    "CHECKPOINT_FILENAME",
    "CHECKPOINT_KEY",
    "DEFAULT_CALIBRATION_BINS",
    "ERROR_LOG_FILENAME",
    "LEGACY_SEED",
    "LOWER_IS_BETTER",
    "MAX_RUN_FILE_BYTES",
    "METADATA_FILENAME",
    "METADATA_HEAD",
    "METRICS_FILENAME",
    "METRIC_RANGES",
    "METRIC_RANGE_TOLERANCE",
    "MULTI_LABEL_COLUMNS",
    "MULTI_LABEL_MARKER",
    "MULTI_LABEL_METRICS",
    "PREDICTIONS_FILENAME",
    "PREDICTIONS_TXT_FILENAME",
    "PROBABILITY_SUM_TOLERANCE",
    "RETURNCODE_FAILED",
    "RETURNCODE_INTERRUPTED",
    "RETURNCODE_OK",
    "RUN_FILES",
    "SEED_SUFFIX",
    "SINGLE_LABEL_COLUMNS",
    "SINGLE_LABEL_METRICS",
    "SPLIT_INFO_FILENAME",
    "SPLIT_SIZE_KEYS",
    "TRAINING_LOG_FILENAME",
    "UPSTREAM_TIMESTAMP",
    "VAL_PREDICTIONS_FILENAME",
    "Field",
    "RunFile",
    "checkpoint_path",
    "run_directory_name",
]

# --- file names ----------------------------------------------------------------------------------

#: Marks a run directory; written last, so its presence means every other file is complete.
METRICS_FILENAME = "classification_metrics.csv"
#: seed, returncode, params_fingerprint and whatever else the runner records.
METADATA_FILENAME = "run_metadata.json"
#: n_train, n_val, n_test, n_test_groups.
SPLIT_INFO_FILENAME = "split_info.json"
#: Optional per-sample test predictions.
PREDICTIONS_FILENAME = "predictions.csv"
#: Optional per-sample validation predictions (used to fit a temperature).
VAL_PREDICTIONS_FILENAME = "val_predictions.csv"
#: The upstream trainer's tab-separated predictions file.
PREDICTIONS_TXT_FILENAME = "predictions.txt"
#: The encoder weights a torch run kept (``--checkpoints``).
CHECKPOINT_FILENAME = "checkpoint.pt"
#: Per-epoch training log of a torch run.
TRAINING_LOG_FILENAME = "training_log.csv"
#: Traceback of a failed run, next to its metadata.
ERROR_LOG_FILENAME = "error.log"
#: Largest metrics, metadata or split file read (bytes); a larger one is unreadable.
#: 64 MiB holds a split file listing millions of test groups; nothing real is larger.
MAX_RUN_FILE_BYTES = 64 * 1024 * 1024

# --- directory names -----------------------------------------------------------------------------

#: A directory name ending in ``seed<N>`` gives the seed when the metadata has none.
SEED_SUFFIX = re.compile(r"seed(\d+)$")
#: Timestamp of upstream-style names written by the synthetic generators.
UPSTREAM_TIMESTAMP = "20260301-101500"
#: Kept for compatibility; no longer an in-band marker. A run whose seed
#: cannot be determined has no seed (None in a record, a missing value in a
#: frame, ``null`` in ``run_metadata.json``); -1 is an ordinary seed like any
#: other, so a real seed -1 never pairs with a run of unknown seed.
LEGACY_SEED = -1


def run_directory_name(model: str, dataset: str, seed: int, *, upstream: bool = False) -> str:
    """``<model>_<dataset>_seed<seed>``, or the upstream trainer's form.

    The upstream form is ``<timestamp>-<model>-<dataset>-seed<seed>``; both
    end in ``seed<N>``, the suffix readers take the seed from.
    """
    if upstream:
        return f"{UPSTREAM_TIMESTAMP}-{model}-{dataset}-seed{seed}"
    return f"{model}_{dataset}_seed{seed}"


def checkpoint_path(directory: str | os.PathLike[str]) -> Path:
    """Where a run (or a training call given ``directory``) keeps its encoder checkpoint."""
    return Path(directory) / CHECKPOINT_FILENAME


# --- metric columns ------------------------------------------------------------------------------

#: Calibration errors: smaller is better, and each has a temperature-scaled ``_temp`` form.
#: ``classwise_ece`` is Kull et al.'s (2019) class-wise ECE (not folded at 0.5), the
#: ``_debiased`` forms carry the Kumar et al. (2019) small-sample bias correction
#: (docs/statistics.md, "Intervals and calibration"). Written in this order.
CALIBRATION_ERRORS = tuple(
    spec.name for spec in METRICS if spec.temperature_scaled and spec.direction == LOWER
)
_SCALED_CALIBRATION_ERRORS = tuple(temperature_scaled(name) for name in CALIBRATION_ERRORS)
CALIBRATION_METRICS = (*CALIBRATION_ERRORS, *_SCALED_CALIBRATION_ERRORS, "temperature")
SINGLE_LABEL_METRICS = (
    "accuracy",
    "balanced_accuracy",
    "precision",
    "recall",
    "f1",
    "auroc",
    "mcc",
    *CALIBRATION_METRICS,
)
MULTI_LABEL_METRICS = (
    "label_accuracy",
    "exact_match_accuracy",
    "precision",
    "recall",
    "f1",
    "auroc",
    *CALIBRATION_METRICS,
)
#: The column that marks the multi-label schema.
MULTI_LABEL_MARKER = "exact_match_accuracy"
#: Bins of the run directory's ECE, MCE and adaptive ECE (Guo et al. 2017 use 15);
#: recorded in the ``calibration_bins`` column, which is not a metric.
DEFAULT_CALIBRATION_BINS = 15
#: Calibration columns of a written metrics CSV, in the order of the evaluator's rows.
CALIBRATION_COLUMNS = (
    *CALIBRATION_ERRORS,
    "temperature",
    *_SCALED_CALIBRATION_ERRORS,
    "calibration_bins",
)
#: Columns of the metrics CSV the project writes, in order.
SINGLE_LABEL_COLUMNS = (
    "model",
    "dataset",
    *SINGLE_LABEL_METRICS[: SINGLE_LABEL_METRICS.index(CALIBRATION_ERRORS[0])],
    *CALIBRATION_COLUMNS,
    "average",
)
MULTI_LABEL_COLUMNS = (
    "model",
    "dataset",
    *MULTI_LABEL_METRICS[: MULTI_LABEL_METRICS.index(CALIBRATION_ERRORS[0])],
    *CALIBRATION_COLUMNS,
)

#: Metrics where a smaller value wins.
LOWER_IS_BETTER = frozenset(
    name
    for name in (*SINGLE_LABEL_METRICS, *MULTI_LABEL_METRICS)
    if metric_spec(name).direction == LOWER
)
#: Closed range of every metric column (infinity where a metric is unbounded). A
#: value outside it cannot be a measurement of that metric (an F1 of 7.5, a
#: negative Brier score), so discovery drops it and lists the run; tables clip
#: displayed interval bounds to it.
METRIC_RANGES: dict[str, tuple[float, float]] = {
    name: metric_spec(name).value_range
    for name in dict.fromkeys((*SINGLE_LABEL_METRICS, *MULTI_LABEL_METRICS))
}
#: Slack beyond a range's ends for floating-point rounding (an F1 of 1 + 1e-16).
METRIC_RANGE_TOLERANCE = 1e-9

# --- averaging -------------------------------------------------------------------------------

#: Values of the ``average`` column: how precision, recall and F1 were averaged.
AVERAGING_MODES = ("binary", "macro", "micro", "weighted")
#: Averaging recorded for every multi-label run.
AVERAGING_MACRO_LABEL = "macro-label"
#: Averaging when the metrics CSV does not say.
AVERAGING_UNKNOWN = "unknown"

# --- metadata, split sizes and predictions ---------------------------------------------------

#: Keys written first in ``run_metadata.json``, in this order.
METADATA_HEAD = ("seed", "returncode", "params_fingerprint")
#: Metadata key naming the checkpoint file, relative to the run directory.
CHECKPOINT_KEY = "checkpoint"
#: Keys of ``split_info.json``, written first and in this order.
SPLIT_SIZE_KEYS = ("n_train", "n_val", "n_test", "n_test_groups")
#: Largest allowed |sum of a prediction row's probabilities - 1|.
PROBABILITY_SUM_TOLERANCE = 1e-3
#: ``returncode`` of ``run_metadata.json``: a finished run, a failed one, one interrupted
#: (128 + SIGINT, as a shell reports it).
RETURNCODE_OK = 0
RETURNCODE_FAILED = 1
RETURNCODE_INTERRUPTED = 130


# --- the schema of each file -----------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One column (CSV) or key (JSON) of a run-directory file."""

    name: str
    kind: str
    meaning: str


@dataclass(frozen=True)
class RunFile:
    """One file a run directory may hold.

    Attributes:
        name: the file name.
        required: whether every run directory has it.
        meaning: what it holds, in one sentence.
        fields: its columns or keys (patterns such as ``prob_<k>`` stand for several).
        writers: the functions that write it (``module.function``).
        readers: the functions that read it.
    """

    name: str
    required: bool
    meaning: str
    fields: tuple[Field, ...]
    writers: tuple[str, ...]
    readers: tuple[str, ...]


def _metric_field(name: str) -> Field:
    spec = metric_spec(name)
    low, high = METRIC_RANGES.get(name, spec.value_range)
    bounds = f"[{low:g}, {'inf' if math.isinf(high) else f'{high:g}'}]"
    return Field(name, "float", f"{spec.direction} is better; range {bounds}")


_PREDICTION_FIELDS = (
    Field("sample_id", "str", "identifier of the sample (kept as written)"),
    Field("group_id", "str", "patient or recording of the sample; each sample its own when absent"),
    Field("y_true", "int", "class index (single-label)"),
    Field("y_true_<k>", "int", "0/1 target of label k (multi-label, instead of y_true)"),
    Field("prob_<k>", "float", "probability of class or label k"),
    Field("logit_<k>", "float", "raw output k, where the producer kept logits"),
)
_WRITE = "deepecgkit.rundir.write"
_READ = "deepecgkit.rundir.read"

#: Every file of a run directory.
RUN_FILES: tuple[RunFile, ...] = (
    RunFile(
        METRICS_FILENAME,
        True,
        "One row of test metrics; its presence marks a run directory, so it is written last.",
        (
            Field("model", "str", "model name (kept as written: 007 stays 007)"),
            Field("dataset", "str", "dataset name"),
            *(
                _metric_field(name)
                for name in dict.fromkeys((*SINGLE_LABEL_METRICS, *MULTI_LABEL_METRICS))
            ),
            Field("calibration_bins", "int", "bins of ece, mce and adaptive_ece; not a metric"),
            Field(
                "average",
                "str",
                f"single-label only: averaging of precision, recall and F1 "
                f"({', '.join(AVERAGING_MODES)}); multi-label runs are {AVERAGING_MACRO_LABEL}",
            ),
        ),
        (
            f"{_WRITE}.write_run_files",
            f"{_WRITE}.write_failed_run_report",
            f"{_WRITE}.write_run_directory",
        ),
        (f"{_READ}.read_run", f"{_READ}.discover_runs"),
    ),
    RunFile(
        METADATA_FILENAME,
        False,
        "What the runner recorded about the run.",
        (
            Field("seed", "int or null", "the seed (any size, exact); null when unknown"),
            Field(
                "returncode",
                "int",
                f"{RETURNCODE_OK} for a finished run, {RETURNCODE_FAILED} failed, "
                f"{RETURNCODE_INTERRUPTED} interrupted",
            ),
            Field("params_fingerprint", "str", "SHA-256 of the hyperparameters, seed excluded"),
            Field("params", "object", "the hyperparameters themselves (train-grid)"),
            Field(CHECKPOINT_KEY, "str or null", f"{CHECKPOINT_FILENAME}, relative; null if none"),
            Field("model, dataset, task, n_classes, average", "str/int", "what was scored"),
            Field("calibration_bins", "int", "bins of the calibration columns"),
            Field("label_temperatures", "list", "multi-label: one fitted temperature per label"),
            Field("error", "str", "failed runs: the exception type and message"),
            Field("written_at, deepecgkit_version", "str", "provenance"),
        ),
        (
            f"{_WRITE}.write_run_files",
            f"{_WRITE}.write_failed_run_report",
            f"{_WRITE}.write_interrupted_run",
        ),
        (f"{_READ}.read_run", f"{_READ}.read_metadata", f"{_READ}.find_encoder_checkpoints"),
    ),
    RunFile(
        SPLIT_INFO_FILENAME,
        False,
        "Sizes of the split the metrics were measured on (Nadeau-Bengio needs them).",
        (
            Field("n_train", "int", "training samples (>= 1)"),
            Field("n_val", "int", "validation samples (>= 0)"),
            Field("n_test", "int", "test samples (>= 1)"),
            Field("n_test_groups", "int", "independent test units: patients or recordings (>= 1)"),
        ),
        (f"{_WRITE}.write_run_files", f"{_WRITE}.write_failed_run_report"),
        (f"{_READ}.read_run",),
    ),
    RunFile(
        PREDICTIONS_FILENAME,
        False,
        "One row per test sample, at full float precision.",
        _PREDICTION_FIELDS,
        (f"{_WRITE}.write_run_files",),
        (f"{_READ}.read_predictions", f"{_READ}.parse_predictions"),
    ),
    RunFile(
        VAL_PREDICTIONS_FILENAME,
        False,
        "The same for the validation split, which a temperature is fitted on.",
        _PREDICTION_FIELDS,
        (f"{_WRITE}.write_run_files",),
        (f"{_READ}.read_predictions_file",),
    ),
    RunFile(
        PREDICTIONS_TXT_FILENAME,
        False,
        "The upstream trainer's test predictions, tab-separated; predictions.csv wins.",
        (
            Field("index", "str", "sample identifier"),
            Field("true_label, predicted_label", "str", "single-label: class index or name"),
            Field(
                "true_<name>, pred_<name>", "int", "multi-label: per-label target and prediction"
            ),
            Field("prob_<name>", "float", "probability of class or label <name>"),
            Field("record", "str", "group identifier, when records are named"),
        ),
        (),
        (f"{_READ}.read_predictions", f"{_READ}.parse_predictions"),
    ),
    RunFile(
        CHECKPOINT_FILENAME,
        False,
        "Weights of a torch encoder and what is needed to rebuild it (torch.load weights_only).",
        (),
        ("deepecgkit.training.trainer.ECGTrainer.save_checkpoint",),
        (f"{_READ}.find_encoder_checkpoints", "deepecgkit.models.checkpoint.read_checkpoint"),
    ),
    RunFile(
        TRAINING_LOG_FILENAME,
        False,
        "Per-epoch log of a torch run.",
        (
            Field("epoch", "int", "1-based epoch"),
            Field("train_loss, val_loss", "float", "mean losses"),
            Field("train_acc, val_acc", "float", "classification only"),
            Field("lr", "float", "learning rate of the epoch"),
        ),
        ("deepecgkit.training.trainer.ECGTrainer.fit",),
        ("deepecgkit.evaluation.visualization.plot_training_curves",),
    ),
    RunFile(
        ERROR_LOG_FILENAME,
        False,
        "Traceback of a failed run.",
        (),
        ("deepecgkit.training.grid.run_grid",),
        (),
    ),
)
