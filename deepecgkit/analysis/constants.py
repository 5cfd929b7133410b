"""Fixed names, thresholds and file names shared by the whole project.

Every value here is part of the public contract (see the specification's
``00-decisions.md``): tests, the CLI, the Dagster platform and the
evaluation package all read them from this one module, so a threshold is
defined exactly once. Callers override a value through the parameter that
carries it, never by editing a copy.

This module imports nothing but the standard library, so the evaluation
package (which may import torch) and the analysis package (which must not)
can both depend on it.
"""

from __future__ import annotations

import math

# --- Coverage and defaults -------------------------------------------------

#: Default two-sided coverage of every interval.
CONFIDENCE_LEVEL = 0.95
#: Metric ranked and compared when the caller names none.
DEFAULT_RANK_METRIC = "f1"

# --- Standard-error corrections ----------------------------------------------

#: Nadeau & Bengio (2003) corrected standard error for overlapping training sets.
NADEAU_BENGIO = "nadeau-bengio"
#: Plain standard error of the mean.
NO_CORRECTION = "none"
CORRECTIONS = (NADEAU_BENGIO, NO_CORRECTION)

# --- Thresholds ----------------------------------------------------------------

#: Fewest independent test units (patients, records) that can support an interval.
MIN_TEST_GROUPS = 10
#: Fewest shared seeds for which a flip test is computed at all.
MIN_SEEDS_FOR_INTERVAL = 3
#: Fewest shared seeds that may yield the verdict "supported".
MIN_SEEDS_FOR_CLAIM = 5
#: Smallest gap between sorted per-seed values that flags a bimodal sample.
MIN_COLLAPSE_GAP = 0.15
#: Fewest common models for Kendall's tau.
MIN_MODELS_FOR_TAU = 3
#: A paired sample whose SD is at or below this counts as having zero variance.
ZERO_VARIANCE_TOL = 1e-12

#: Kept for compatibility; no longer an in-band marker. A run whose seed
#: cannot be determined has no seed (None in a record, a missing value in a
#: frame, ``null`` in ``run_metadata.json``); -1 is an ordinary seed like any
#: other, so a real seed -1 never pairs with a run of unknown seed.
LEGACY_SEED = -1

# --- Duplicate policies and FDR families ----------------------------------------

ON_DUPLICATE_NEWEST = "newest"
ON_DUPLICATE_ERROR = "error"
ON_DUPLICATE_ALL = "all"
ON_DUPLICATE_POLICIES = (ON_DUPLICATE_NEWEST, ON_DUPLICATE_ERROR, ON_DUPLICATE_ALL)

FDR_FAMILY_TESTABLE = "testable"
FDR_FAMILY_SIGNIFICANT = "significant"
FDR_FAMILIES = (FDR_FAMILY_TESTABLE, FDR_FAMILY_SIGNIFICANT)

# --- Averaging -------------------------------------------------------------------

#: Averaging recorded for every multi-label run.
AVERAGING_MACRO_LABEL = "macro-label"
#: Averaging when the metrics CSV does not say.
AVERAGING_UNKNOWN = "unknown"

# --- Calibration -------------------------------------------------------------------

#: Bins for ECE / MCE / adaptive ECE (Guo et al. 2017 use 15).
DEFAULT_CALIBRATION_BINS = 15

# --- Run-directory files --------------------------------------------------------------

#: Marks a run directory.
METRICS_FILENAME = "classification_metrics.csv"
#: seed, returncode, params_fingerprint and whatever else the runner records.
METADATA_FILENAME = "run_metadata.json"
#: n_train, n_val, n_test, n_test_groups.
SPLIT_INFO_FILENAME = "split_info.json"
#: Optional per-sample test predictions.
PREDICTIONS_FILENAME = "predictions.csv"
#: Optional per-sample validation predictions (used to fit a temperature).
VAL_PREDICTIONS_FILENAME = "val_predictions.csv"
#: Largest metrics, metadata or split file read (bytes); a larger one is unreadable.
#: 64 MiB holds a split file listing millions of test groups; nothing real is larger.
MAX_RUN_FILE_BYTES = 64 * 1024 * 1024

# --- Metric schemas ---------------------------------------------------------------------

#: Calibration errors: smaller is better, and each has a temperature-scaled ``_temp`` form.
_CALIBRATION_ERRORS = ("ece", "adaptive_ece", "mce", "brier", "nll")
_SCALED_CALIBRATION_ERRORS = tuple(f"{name}_temp" for name in _CALIBRATION_ERRORS)
CALIBRATION_METRICS = (*_CALIBRATION_ERRORS, *_SCALED_CALIBRATION_ERRORS, "temperature")
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

#: Metrics where a smaller value wins.
LOWER_IS_BETTER = frozenset(_CALIBRATION_ERRORS + _SCALED_CALIBRATION_ERRORS)

#: Closed range of every metric above (infinity where a metric is unbounded). A
#: value outside it cannot be a measurement of that metric (an F1 of 7.5, a
#: negative Brier score), so discovery drops it and lists the run. The Brier
#: score is the sum-over-classes form, in [0, 2] (docs of
#: ``deepecgkit.evaluation.calibration``); NLL and the temperature are unbounded above.
_CALIBRATION_RANGES = {
    "ece": (0.0, 1.0),
    "adaptive_ece": (0.0, 1.0),
    "mce": (0.0, 1.0),
    "brier": (0.0, 2.0),
    "nll": (0.0, math.inf),
}
METRIC_RANGES: dict[str, tuple[float, float]] = {
    # Accuracies, precision, recall, F1 and AUROC are fractions.
    **{
        name: (0.0, 1.0)
        for name in (*SINGLE_LABEL_METRICS, *MULTI_LABEL_METRICS)
        if name not in CALIBRATION_METRICS
    },
    "mcc": (-1.0, 1.0),
    **_CALIBRATION_RANGES,
    **{f"{name}_temp": bounds for name, bounds in _CALIBRATION_RANGES.items()},
    "temperature": (0.0, math.inf),
}
#: Slack beyond a range's ends for floating-point rounding (an F1 of 1 + 1e-16).
METRIC_RANGE_TOLERANCE = 1e-9

# --- Flip verdicts (exact strings) --------------------------------------------------------

VERDICT_SUPPORTED = "supported"
VERDICT_SUGGESTIVE = "suggestive"
VERDICT_UNRESOLVED = "unresolved"
VERDICT_NOT_REPRODUCED = "not-reproduced"
VERDICT_CONTRADICTED = "contradicted"
VERDICT_UNTESTABLE = "untestable"
VERDICT_BIMODAL = "bimodal"
#: Every verdict, in the order the flip table explains them.
VERDICTS = (
    VERDICT_SUPPORTED,
    VERDICT_SUGGESTIVE,
    VERDICT_UNRESOLVED,
    VERDICT_NOT_REPRODUCED,
    VERDICT_CONTRADICTED,
    VERDICT_UNTESTABLE,
    VERDICT_BIMODAL,
)

# --- Comparisons and the statistical report (comparisons.md) ------------------------------

#: Bootstrap replicates.
DEFAULT_N_RESAMPLES = 1000
#: Seed of every bootstrap call.
DEFAULT_BOOTSTRAP_SEED = 0
#: Equal-width bins of the report's ECE and reliability diagrams.
REPORT_BINS = 10
#: Largest allowed |sum of a row's probabilities - 1|.
PROBABILITY_SUM_TOLERANCE = 1e-3
#: Probabilities are clipped up to this inside NLL.
PROBABILITY_FLOOR = 1e-12
#: Predicted-class fraction that raises the near-collapse flag.
NEAR_COLLAPSE_THRESHOLD = 0.95
#: |improvement| at or below this is a tie.
DEFAULT_TIE_TOLERANCE = 1e-12
#: Metrics compared against ``--reference`` in the report.
REPORT_PAIRED_METRICS = (
    "balanced_accuracy",
    "accuracy",
    "macro_f1",
    "auroc",
    "macro_auprc",
    "brier",
    "nll",
    "ece",
)

__all__ = [
    "AVERAGING_MACRO_LABEL",
    "AVERAGING_UNKNOWN",
    "CALIBRATION_METRICS",
    "CONFIDENCE_LEVEL",
    "CORRECTIONS",
    "DEFAULT_BOOTSTRAP_SEED",
    "DEFAULT_CALIBRATION_BINS",
    "DEFAULT_N_RESAMPLES",
    "DEFAULT_RANK_METRIC",
    "DEFAULT_TIE_TOLERANCE",
    "FDR_FAMILIES",
    "FDR_FAMILY_SIGNIFICANT",
    "FDR_FAMILY_TESTABLE",
    "LEGACY_SEED",
    "LOWER_IS_BETTER",
    "MAX_RUN_FILE_BYTES",
    "METADATA_FILENAME",
    "METRICS_FILENAME",
    "METRIC_RANGES",
    "METRIC_RANGE_TOLERANCE",
    "MIN_COLLAPSE_GAP",
    "MIN_MODELS_FOR_TAU",
    "MIN_SEEDS_FOR_CLAIM",
    "MIN_SEEDS_FOR_INTERVAL",
    "MIN_TEST_GROUPS",
    "MULTI_LABEL_METRICS",
    "NADEAU_BENGIO",
    "NEAR_COLLAPSE_THRESHOLD",
    "NO_CORRECTION",
    "ON_DUPLICATE_ALL",
    "ON_DUPLICATE_ERROR",
    "ON_DUPLICATE_NEWEST",
    "ON_DUPLICATE_POLICIES",
    "PREDICTIONS_FILENAME",
    "PROBABILITY_FLOOR",
    "PROBABILITY_SUM_TOLERANCE",
    "REPORT_BINS",
    "REPORT_PAIRED_METRICS",
    "SINGLE_LABEL_METRICS",
    "SPLIT_INFO_FILENAME",
    "VAL_PREDICTIONS_FILENAME",
    "VERDICTS",
    "VERDICT_BIMODAL",
    "VERDICT_CONTRADICTED",
    "VERDICT_NOT_REPRODUCED",
    "VERDICT_SUGGESTIVE",
    "VERDICT_SUPPORTED",
    "VERDICT_UNRESOLVED",
    "VERDICT_UNTESTABLE",
    "ZERO_VARIANCE_TOL",
]
