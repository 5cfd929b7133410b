"""Every named value of the evaluation package, defined once.

Values shared with :mod:`deepecgkit.analysis` (file names, the calibration bin
count, the probability-sum tolerance, the legacy seed, the multi-label
averaging label) are imported from :mod:`deepecgkit.analysis.constants` and
re-exported, so the producer and the consumer of a run directory can never
disagree about them. The evaluation-only values follow section 1 of the
evaluation specification; the representation module imports its constants
(``PROBE_*``, ``KEEP_*``, ``RANDOM_INIT`` ...) from here as well.

This module imports nothing heavy (no numpy, no torch).
"""

from __future__ import annotations

from deepecgkit.analysis.constants import (
    AVERAGING_MACRO_LABEL,
    CALIBRATION_ERRORS,
    DEFAULT_CALIBRATION_BINS,
    LEGACY_SEED,
    METADATA_FILENAME,
    METRICS_FILENAME,
    PREDICTIONS_FILENAME,
    PROBABILITY_SUM_TOLERANCE,
    SPLIT_INFO_FILENAME,
    VAL_PREDICTIONS_FILENAME,
)

# --- Prediction shapes --------------------------------------------------------------------

#: Single-logit (or two-column) binary classification.
TASK_BINARY = "binary"
#: Softmax over C > 2 classes.
TASK_MULTICLASS = "multiclass"
#: Independent sigmoid per label, multi-hot targets.
TASK_MULTILABEL = "multilabel"
TASKS = (TASK_BINARY, TASK_MULTICLASS, TASK_MULTILABEL)

# --- Calibration binning ------------------------------------------------------------------

#: Equal-width bins ``[b/M, (b+1)/M)``, the last closed at 1.
BINNING_UNIFORM = "uniform"
#: Equal-mass bins cut from the stably sorted confidences.
BINNING_QUANTILE = "quantile"
BINNING_STRATEGIES = (BINNING_UNIFORM, BINNING_QUANTILE)

# --- Classification conventions -----------------------------------------------------------

#: A probability strictly above this is a positive prediction.
BINARY_THRESHOLD = 0.5
#: A class count at or below this is a two-class problem.
MULTICLASS_THRESHOLD = 2
ACCURACY_METRICS = ("accuracy", "label_accuracy", "exact_match_accuracy")
#: Metrics computed from hard labels (``"auc"`` needs scores and is listed apart).
CLASSIFICATION_METRICS = frozenset(
    {
        "accuracy",
        "label_accuracy",
        "exact_match_accuracy",
        "balanced_accuracy",
        "precision",
        "recall",
        "f1",
        "mcc",
    }
)
REGRESSION_METRICS = frozenset({"mse", "mae", "r2", "rmse"})
#: The score-based metric; ``"auroc"`` is accepted as its alias.
AUC_METRIC = "auc"
AUC_ALIAS = "auroc"
#: Names :class:`~deepecgkit.evaluation.ECGEvaluator` accepts.
SUPPORTED_METRICS = CLASSIFICATION_METRICS | REGRESSION_METRICS | {AUC_METRIC}
DEFAULT_EVALUATOR_METRICS = ("accuracy", "precision", "recall", "f1", "auc")
AVERAGE_AUTO = "auto"
AVERAGE_BINARY = "binary"
AVERAGE_MACRO = "macro"
AVERAGE_MICRO = "micro"
AVERAGE_WEIGHTED = "weighted"
AVERAGE_MODES = (AVERAGE_AUTO, AVERAGE_BINARY, AVERAGE_MACRO, AVERAGE_MICRO, AVERAGE_WEIGHTED)

# --- Calibration and temperature scaling --------------------------------------------------

#: The calibration metrics, in report order (defined with the analysis's metric schema).
CALIBRATION_METRIC_NAMES = CALIBRATION_ERRORS
CALIBRATION_ROW_ORDER = (
    *CALIBRATION_METRIC_NAMES,
    "temperature",
    *(f"{name}_temp" for name in CALIBRATION_METRIC_NAMES),
    "calibration_bins",
)
#: Fewest samples a bin needs to enter MCE: with 25 the 95% half-width of a bin's
#: frequency, 1.96 * 0.5 / sqrt(n_b), is at most 0.2 even at frequency 0.5.
MIN_MCE_BIN_COUNT = 25
#: Normal draws of the Kumar et al. (2019) ECE bias correction, and their seed.
DEBIAS_DRAWS = 1000
DEBIAS_SEED = 0
#: Search interval of the fitted temperature.
DEFAULT_TEMPERATURE_BOUNDS = (0.05, 20.0)
#: Temperature that leaves logits unchanged.
NEUTRAL_TEMPERATURE = 1.0
#: A fitted temperature closer than this to a bound triggers a RuntimeWarning.
BOUND_TOLERANCE = 1e-3
#: Probabilities are clipped to ``[eps, 1 - eps]`` before they are turned into logits.
LOGIT_CLIP_EPS = 1e-7
#: Slack outside [0, 1] tolerated in a probability (then clipped).
PROBABILITY_RANGE_TOLERANCE = 1e-6

# --- Evaluator ----------------------------------------------------------------------------

#: Inputs longer than this are fed to a torch model in chunks.
PREDICTION_BATCH_SIZE = 256
#: Targets with more distinct integer values than this are treated as regression.
MAX_CLASSIFICATION_CLASSES = 50
#: ``cross_validate`` holds out one part in this many of a training fold for tuning.
INNER_VALIDATION_FOLDS = 10
DEFAULT_BOOTSTRAP_RESAMPLES = 1000
TASK_TYPE_AUTO = "auto"
TASK_TYPE_CLASSIFICATION = "classification"
TASK_TYPE_REGRESSION = "regression"
TASK_TYPES = (TASK_TYPE_AUTO, TASK_TYPE_CLASSIFICATION, TASK_TYPE_REGRESSION)

# --- Representation (linear probes, transfer matrices, embeddings) ------------------------

PROBE_METRICS = ("auroc_macro", "f1_macro", "accuracy", "balanced_accuracy")
DEFAULT_PROBE_METRIC = "auroc_macro"
#: Single-lead protocol.
PROBE_INPUT_CHANNELS = 1
#: Hz.
PROBE_SAMPLING_RATE = 100
PROBE_DATASETS = ("af-classification", "mitbih-afdb", "ltafdb", "ptb-xl")
PROTOCOL_DATASET_KWARGS: dict[str, dict[str, list[str]]] = {
    "ptb-xl": {"leads": ["II"]},
    "synthetic-ptbxl": {"leads": ["II"]},
}
#: Row label of the untrained-encoder floor.
RANDOM_INIT = "untrained"
KEEP_NONE = "none"
KEEP_ALL = "all"
KEEP_DIAGONAL = "diagonal"
KEEP_EMBEDDINGS_MODES = (KEEP_NONE, KEEP_ALL, KEEP_DIAGONAL)
#: Cell key ``"source->target"`` of a transfer matrix.
TRANSFER_KEY_SEPARATOR = "->"
EMBEDDING_METHODS = ("tsne", "pca")
DEFAULT_PERPLEXITY = 30.0
DEFAULT_PCA_COMPONENTS = 50
MIN_EMBEDDING_SAMPLES = 5
#: Perplexity is clamped to at most ``(n - 1) / PERPLEXITY_SAMPLE_DIVISOR``.
PERPLEXITY_SAMPLE_DIVISOR = 3.0

# --- Figures ------------------------------------------------------------------------------

#: Dots per inch of every saved figure: a PNG is exactly ``figsize * FIGURE_DPI`` pixels.
FIGURE_DPI = 150

# --- Run-directory schema -----------------------------------------------------------------

#: Calibration columns of the metrics CSV, in the order of the report rows.
CALIBRATION_COLUMNS = CALIBRATION_ROW_ORDER
SINGLE_LABEL_COLUMNS = (
    "model",
    "dataset",
    "accuracy",
    "balanced_accuracy",
    "precision",
    "recall",
    "f1",
    "auroc",
    "mcc",
    *CALIBRATION_COLUMNS,
    "average",
)
MULTI_LABEL_COLUMNS = (
    "model",
    "dataset",
    "label_accuracy",
    "exact_match_accuracy",
    "precision",
    "recall",
    "f1",
    "auroc",
    *CALIBRATION_COLUMNS,
)

__all__ = [
    "ACCURACY_METRICS",
    "AUC_ALIAS",
    "AUC_METRIC",
    "AVERAGE_AUTO",
    "AVERAGE_BINARY",
    "AVERAGE_MACRO",
    "AVERAGE_MICRO",
    "AVERAGE_MODES",
    "AVERAGE_WEIGHTED",
    "AVERAGING_MACRO_LABEL",
    "BINARY_THRESHOLD",
    "BINNING_QUANTILE",
    "BINNING_STRATEGIES",
    "BINNING_UNIFORM",
    "BOUND_TOLERANCE",
    "CALIBRATION_COLUMNS",
    "CALIBRATION_METRIC_NAMES",
    "CALIBRATION_ROW_ORDER",
    "CLASSIFICATION_METRICS",
    "DEBIAS_DRAWS",
    "DEBIAS_SEED",
    "DEFAULT_BOOTSTRAP_RESAMPLES",
    "DEFAULT_CALIBRATION_BINS",
    "DEFAULT_EVALUATOR_METRICS",
    "DEFAULT_PCA_COMPONENTS",
    "DEFAULT_PERPLEXITY",
    "DEFAULT_PROBE_METRIC",
    "DEFAULT_TEMPERATURE_BOUNDS",
    "EMBEDDING_METHODS",
    "FIGURE_DPI",
    "INNER_VALIDATION_FOLDS",
    "KEEP_ALL",
    "KEEP_DIAGONAL",
    "KEEP_EMBEDDINGS_MODES",
    "KEEP_NONE",
    "LEGACY_SEED",
    "LOGIT_CLIP_EPS",
    "MAX_CLASSIFICATION_CLASSES",
    "METADATA_FILENAME",
    "METRICS_FILENAME",
    "MIN_EMBEDDING_SAMPLES",
    "MIN_MCE_BIN_COUNT",
    "MULTICLASS_THRESHOLD",
    "MULTI_LABEL_COLUMNS",
    "NEUTRAL_TEMPERATURE",
    "PERPLEXITY_SAMPLE_DIVISOR",
    "PREDICTIONS_FILENAME",
    "PREDICTION_BATCH_SIZE",
    "PROBABILITY_RANGE_TOLERANCE",
    "PROBABILITY_SUM_TOLERANCE",
    "PROBE_DATASETS",
    "PROBE_INPUT_CHANNELS",
    "PROBE_METRICS",
    "PROBE_SAMPLING_RATE",
    "PROTOCOL_DATASET_KWARGS",
    "RANDOM_INIT",
    "REGRESSION_METRICS",
    "SINGLE_LABEL_COLUMNS",
    "SPLIT_INFO_FILENAME",
    "SUPPORTED_METRICS",
    "TASKS",
    "TASK_BINARY",
    "TASK_MULTICLASS",
    "TASK_MULTILABEL",
    "TASK_TYPES",
    "TASK_TYPE_AUTO",
    "TASK_TYPE_CLASSIFICATION",
    "TASK_TYPE_REGRESSION",
    "TRANSFER_KEY_SEPARATOR",
    "VAL_PREDICTIONS_FILENAME",
]
