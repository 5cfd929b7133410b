"""Every named value of the evaluation package, defined once.

The run-directory format the evaluation writes (file names, metric columns,
the calibration bin count, the probability-sum tolerance, the multi-label
averaging label) is :mod:`deepecgkit.rundir.format`, and the metric names
come from the registry :mod:`deepecgkit.rundir.metrics`, so the producer and
the consumers of a run directory can never disagree about them; the names
this module used to re-export still resolve for one release, with a
``DeprecationWarning``. The probe, transfer and embedding modules import
their constants (``PROBE_*``, ``KEEP_*``, ``RANDOM_INIT`` ...) from here.

This module imports nothing heavy (no numpy, no torch).
"""

from __future__ import annotations

from deepecgkit._compat import moved_names
from deepecgkit.defaults import DEFAULT_RANDOM_STATE
from deepecgkit.rundir.format import AVERAGING_MODES, CALIBRATION_COLUMNS, CALIBRATION_ERRORS
from deepecgkit.rundir.metrics import PRIMARY_PROBE_METRIC, canonical_name, probe_name

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
#: The evaluator's spelling of AUROC: its default metric list and result keys are
#: public, so it stays ``"auc"``; the registry's name (``"auroc"``) and its other
#: aliases are accepted on input.
AUC_METRIC = "auc"
AUC_ALIAS = canonical_name(AUC_METRIC)
#: Names :class:`~deepecgkit.evaluation.ECGEvaluator` accepts.
SUPPORTED_METRICS = CLASSIFICATION_METRICS | REGRESSION_METRICS | {AUC_METRIC}
DEFAULT_EVALUATOR_METRICS = ("accuracy", "precision", "recall", "f1", AUC_METRIC)
#: Resolve the averaging from the data; the other modes are the ``average`` values of
#: the run directory.
AVERAGE_AUTO = "auto"
AVERAGE_BINARY, AVERAGE_MACRO, AVERAGE_MICRO, AVERAGE_WEIGHTED = AVERAGING_MODES
AVERAGE_MODES = (AVERAGE_AUTO, *AVERAGING_MODES)

# --- Calibration and temperature scaling --------------------------------------------------

#: The calibration metrics, in report order (the run directory's calibration columns).
CALIBRATION_METRIC_NAMES = CALIBRATION_ERRORS
CALIBRATION_ROW_ORDER = CALIBRATION_COLUMNS
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

#: The probes' metrics: macro averages are spelled ``<name>_macro`` (columns of the
#: ``transfer_matrix`` frame and keys of a saved transfer matrix).
PROBE_METRICS = (PRIMARY_PROBE_METRIC, probe_name("f1"), "accuracy", "balanced_accuracy")
DEFAULT_PROBE_METRIC = PROBE_METRICS[0]
#: Seed of the probe protocol's splits, the untrained encoder and the probe's solver.
DEFAULT_PROBE_RANDOM_STATE = DEFAULT_RANDOM_STATE
#: Single-lead protocol.
PROBE_INPUT_CHANNELS = 1
#: Hz.
PROBE_SAMPLING_RATE = 100
#: BLAS threads while the linear probes are fitted. One: each probe is a
#: logistic regression on a few hundred embeddings, too small for a second
#: thread to do more than wait (on a busy two-core machine two threads took
#: twice the CPU time; ``benchmarks/bench_demo_build.py``). The fitted
#: probes are the same either way.
PROBE_BLAS_THREADS = 1
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
    "BINARY_THRESHOLD",
    "BINNING_QUANTILE",
    "BINNING_STRATEGIES",
    "BINNING_UNIFORM",
    "BOUND_TOLERANCE",
    "CALIBRATION_METRIC_NAMES",
    "CALIBRATION_ROW_ORDER",
    "CLASSIFICATION_METRICS",
    "DEBIAS_DRAWS",
    "DEBIAS_SEED",
    "DEFAULT_BOOTSTRAP_RESAMPLES",
    "DEFAULT_EVALUATOR_METRICS",
    "DEFAULT_PCA_COMPONENTS",
    "DEFAULT_PERPLEXITY",
    "DEFAULT_PROBE_METRIC",
    "DEFAULT_PROBE_RANDOM_STATE",
    "DEFAULT_TEMPERATURE_BOUNDS",
    "EMBEDDING_METHODS",
    "FIGURE_DPI",
    "INNER_VALIDATION_FOLDS",
    "KEEP_ALL",
    "KEEP_DIAGONAL",
    "KEEP_EMBEDDINGS_MODES",
    "KEEP_NONE",
    "LOGIT_CLIP_EPS",
    "MAX_CLASSIFICATION_CLASSES",
    "MIN_EMBEDDING_SAMPLES",
    "MIN_MCE_BIN_COUNT",
    "MULTICLASS_THRESHOLD",
    "NEUTRAL_TEMPERATURE",
    "PERPLEXITY_SAMPLE_DIVISOR",
    "PREDICTION_BATCH_SIZE",
    "PROBABILITY_RANGE_TOLERANCE",
    "PROBE_DATASETS",
    "PROBE_INPUT_CHANNELS",
    "PROBE_METRICS",
    "PROBE_SAMPLING_RATE",
    "PROTOCOL_DATASET_KWARGS",
    "RANDOM_INIT",
    "REGRESSION_METRICS",
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
]

#: Names that moved to the run-directory format (old import paths, one release).
__moved__ = dict.fromkeys(
    (
        "AVERAGING_MACRO_LABEL",
        "CALIBRATION_COLUMNS",
        "DEFAULT_CALIBRATION_BINS",
        "LEGACY_SEED",
        "METADATA_FILENAME",
        "METRICS_FILENAME",
        "MULTI_LABEL_COLUMNS",
        "PREDICTIONS_FILENAME",
        "PROBABILITY_SUM_TOLERANCE",
        "SINGLE_LABEL_COLUMNS",
        "SPLIT_INFO_FILENAME",
        "VAL_PREDICTIONS_FILENAME",
    ),
    "deepecgkit.rundir.format",
)
__getattr__ = moved_names(__name__, __moved__)
