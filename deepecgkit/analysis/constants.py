"""Named thresholds, defaults and exact strings of the analysis and the statistical report.

Every value here is part of the public contract: tests, the CLI, the Dagster
platform and the report read them from this one module, so a threshold is
defined exactly once. Callers override a value through the parameter that
carries it, never by editing a copy.

The run-directory format (file names, metric schemas and ranges, averaging
labels, duplicate policies) moved to :mod:`deepecgkit.rundir`; its old
names here still work for one release, with a ``DeprecationWarning``
(docs/architecture.md). This module imports nothing but the standard
library and the registry modules.
"""

from __future__ import annotations

from deepecgkit._compat import moved_names
from deepecgkit.defaults import CONFIDENCE_LEVEL
from deepecgkit.rundir.metrics import PRIMARY_METRIC, probe_name, report_name, temperature_scaled

# --- Coverage and defaults -------------------------------------------------

#: Metric ranked and compared when the caller names none.
DEFAULT_RANK_METRIC = PRIMARY_METRIC

# --- Standard-error corrections ----------------------------------------------

#: Nadeau & Bengio (2003) corrected standard error for overlapping training sets.
NADEAU_BENGIO = "nadeau-bengio"
#: Plain standard error of the mean.
NO_CORRECTION = "none"
CORRECTIONS = (NADEAU_BENGIO, NO_CORRECTION)
#: The correction a row records when Nadeau-Bengio was requested but the split sizes
#: are unknown, so the plain standard error had to be used.
CORRECTION_UNAVAILABLE = "unavailable"
#: Every value of the ``correction_applied`` columns.
APPLIED_CORRECTIONS = (NADEAU_BENGIO, NO_CORRECTION, CORRECTION_UNAVAILABLE)

# --- Thresholds ----------------------------------------------------------------

#: Fewest independent test units (patients, records) for a run to enter a seed-level
#: test (flip tests, paired differences over seeds): below it a run's metric is too noisy
#: to stand for the configuration. Group-bootstrap intervals need more
#: (:data:`MIN_BOOTSTRAP_GROUPS`).
MIN_TEST_GROUPS = 10
#: Fewest test groups for a group-bootstrap interval. Chosen by the coverage simulation
#: of ``benchmarks/bench_interval_coverage.py`` (docs/benchmarks.md): with the expanded
#: percentile interval, the AUROC and accuracy intervals (single runs and differences)
#: of the prevalence-0.3 scenarios cover at least 0.94 at nominal 0.95 from here on
#: (the accuracy difference of two equally good models is the last to get there), while
#: at 10 groups (``MIN_TEST_GROUPS``) coverage is 0.55-0.87. The exceptions measured
#: (single-run AUROC with a rare class, AUROC near 1) are listed there.
MIN_BOOTSTRAP_GROUPS = 60
#: Fewest groups of every class present in the test set for a group-bootstrap
#: interval (same simulation: the smallest class sets how well a resample can mimic
#: a fresh draw of patients; 15 positives pass the prevalence-0.3 scenario with a margin).
MIN_BOOTSTRAP_GROUPS_PER_CLASS = 15
#: Fewest informative groups (misclassified or correctly classified groups, whichever
#: fewer; discordant groups of a paired accuracy difference; groups in a misordered
#: positive-negative pair for AUROC; see :mod:`deepecgkit.analysis.compare.information`)
#: for an accuracy or AUROC interval. Chosen by the same simulation: near the ceiling
#: (accuracy 0.98, AUROC 0.99-0.999) the intervals cover 0.95-1.00 from here on, among
#: the test sets that get one, while without it they cover 0.35-0.92.
MIN_INFORMATIVE_GROUPS = 3
#: Fewest shared seeds for which a flip test is computed at all.
MIN_SEEDS_FOR_INTERVAL = 3
#: Fewest shared seeds that may yield the verdict "supported".
MIN_SEEDS_FOR_CLAIM = 5
#: Default floor of the bimodality rule: the smallest gap between sorted per-seed
#: values, in metric units, that can flag a sample however tight its clusters are.
#: Used for metrics without a floor of their own in ``COLLAPSE_GAP_FLOORS``.
MIN_COLLAPSE_GAP = 0.10
#: Share of the span from the chance level to the best value that a gap must reach
#: (the floor of a metric with a known chance level).
COLLAPSE_FLOOR_FRACTION = 0.2
#: Floors of metrics whose values sit far below 1 (calibration errors): a fixed
#: 0.10 could never be reached by an ECE that lives between 0.01 and 0.10.
_CALIBRATION_FLOORS = {"ece": 0.02, "adaptive_ece": 0.02, "brier": 0.02, "mce": 0.05, "nll": 0.10}
COLLAPSE_GAP_FLOORS = {
    **_CALIBRATION_FLOORS,
    **{temperature_scaled(name): floor for name, floor in _CALIBRATION_FLOORS.items()},
}
#: Chance level of metrics whose chance level does not depend on the class count.
CHANCE_LEVELS = {"auroc": 0.5, probe_name("auroc"): 0.5, "mcc": 0.0}
#: Metrics whose chance level is ``1/K`` for K balanced classes (needs K).
CHANCE_ONE_OVER_K = frozenset({"accuracy", "balanced_accuracy"})
#: Fewest common models for Kendall's tau.
MIN_MODELS_FOR_TAU = 3
#: A paired sample whose SD is at or below this counts as having zero variance.
ZERO_VARIANCE_TOL = 1e-12

# --- Bootstrap interval methods ----------------------------------------------------

#: Quantiles of the bootstrap distribution at alpha/2 and 1 - alpha/2 (Efron 1979).
INTERVAL_PERCENTILE = "percentile"
#: Hesterberg's (2015) expanded percentile interval: the quantiles at alpha'/2 and
#: 1 - alpha'/2, alpha' from a t quantile and the sqrt(n / (n - 1)) narrowness factor.
INTERVAL_EXPANDED_PERCENTILE = "expanded-percentile"
#: The BCa interval (Efron 1987) read at the expanded percentile interval's alpha': the
#: single-run AUROC's interval under ``INTERVAL_AUTO``, whose skewed distribution near a
#: rare class or the ceiling the percentile interval follows too little.
INTERVAL_EXPANDED_BCA = "expanded-bca"
#: The method chosen per metric: ``INTERVAL_EXPANDED_BCA`` for one run's AUROC,
#: ``INTERVAL_EXPANDED_PERCENTILE`` for everything else (docs/statistics.md).
INTERVAL_AUTO = "auto"
#: Interval methods a caller may ask for (``INTERVAL_EXPANDED_BCA`` only through ``auto``).
INTERVAL_METHODS = (INTERVAL_AUTO, INTERVAL_EXPANDED_PERCENTILE, INTERVAL_PERCENTILE)

# --- FDR families and methods ----------------------------------------

FDR_FAMILY_TESTABLE = "testable"
FDR_FAMILY_SIGNIFICANT = "significant"
FDR_FAMILIES = (FDR_FAMILY_TESTABLE, FDR_FAMILY_SIGNIFICANT)

#: Benjamini-Yekutieli (2001): false-discovery-rate control under any dependence.
FDR_METHOD_BY = "by"
#: Benjamini-Hochberg (1995): needs independence or positive regression dependence.
FDR_METHOD_BH = "bh"
FDR_METHODS = (FDR_METHOD_BY, FDR_METHOD_BH)
#: Adjustment of ``q_reversal`` when the caller names none.
DEFAULT_FDR_METHOD = FDR_METHOD_BY

# --- Kendall agreement --------------------------------------------------------------

#: Permutations behind the p-value of Kendall's W.
DEFAULT_N_PERMUTATIONS = 9999
#: Seed of the permutation draws (combined with the dataset name, so a dataset's
#: p-value does not depend on which other datasets are analysed).
DEFAULT_PERMUTATION_SEED = 0

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

# --- Comparisons and the statistical report (docs/statistics.md) --------------------------

#: Bootstrap replicates.
DEFAULT_N_RESAMPLES = 1000
#: Seed of every bootstrap call.
DEFAULT_BOOTSTRAP_SEED = 0
#: Equal-width bins of the report's ECE and reliability diagrams.
REPORT_BINS = 10
#: Probabilities are clipped up to this inside NLL.
PROBABILITY_FLOOR = 1e-12
#: Predicted-class fraction that raises the near-collapse flag.
NEAR_COLLAPSE_THRESHOLD = 0.95
#: |improvement| at or below this is a tie.
DEFAULT_TIE_TOLERANCE = 1e-12
#: Metrics compared against ``--reference`` in the report. The report spells macro
#: averages ``macro_<name>`` (the registry's report spelling): these are the values
#: of its ``metric`` columns.
REPORT_PAIRED_METRICS = (
    "balanced_accuracy",
    "accuracy",
    report_name("f1"),
    "auroc",
    report_name("auprc"),
    "brier",
    "nll",
    "ece",
    "classwise_ece",
)

__all__ = [
    "APPLIED_CORRECTIONS",
    "CHANCE_LEVELS",
    "CHANCE_ONE_OVER_K",
    "COLLAPSE_FLOOR_FRACTION",
    "COLLAPSE_GAP_FLOORS",
    "CONFIDENCE_LEVEL",
    "CORRECTIONS",
    "CORRECTION_UNAVAILABLE",
    "DEFAULT_BOOTSTRAP_SEED",
    "DEFAULT_FDR_METHOD",
    "DEFAULT_N_PERMUTATIONS",
    "DEFAULT_N_RESAMPLES",
    "DEFAULT_PERMUTATION_SEED",
    "DEFAULT_RANK_METRIC",
    "DEFAULT_TIE_TOLERANCE",
    "FDR_FAMILIES",
    "FDR_FAMILY_SIGNIFICANT",
    "FDR_FAMILY_TESTABLE",
    "FDR_METHODS",
    "FDR_METHOD_BH",
    "FDR_METHOD_BY",
    "INTERVAL_AUTO",
    "INTERVAL_EXPANDED_BCA",
    "INTERVAL_EXPANDED_PERCENTILE",
    "INTERVAL_METHODS",
    "INTERVAL_PERCENTILE",
    "MIN_BOOTSTRAP_GROUPS",
    "MIN_BOOTSTRAP_GROUPS_PER_CLASS",
    "MIN_COLLAPSE_GAP",
    "MIN_INFORMATIVE_GROUPS",
    "MIN_MODELS_FOR_TAU",
    "MIN_SEEDS_FOR_CLAIM",
    "MIN_SEEDS_FOR_INTERVAL",
    "MIN_TEST_GROUPS",
    "NADEAU_BENGIO",
    "NEAR_COLLAPSE_THRESHOLD",
    "NO_CORRECTION",
    "PROBABILITY_FLOOR",
    "REPORT_BINS",
    "REPORT_PAIRED_METRICS",
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

#: Names that moved to the run-directory package (old import paths, one release).
__moved__ = {
    **dict.fromkeys(
        (
            "AVERAGING_MACRO_LABEL",
            "AVERAGING_UNKNOWN",
            "CALIBRATION_ERRORS",
            "CALIBRATION_METRICS",
            "DEFAULT_CALIBRATION_BINS",
            "LEGACY_SEED",
            "LOWER_IS_BETTER",
            "MAX_RUN_FILE_BYTES",
            "METADATA_FILENAME",
            "METRICS_FILENAME",
            "METRIC_RANGES",
            "METRIC_RANGE_TOLERANCE",
            "MULTI_LABEL_METRICS",
            "PREDICTIONS_FILENAME",
            "PROBABILITY_SUM_TOLERANCE",
            "SINGLE_LABEL_METRICS",
            "SPLIT_INFO_FILENAME",
            "VAL_PREDICTIONS_FILENAME",
        ),
        "deepecgkit.rundir.format",
    ),
    **dict.fromkeys(
        (
            "ON_DUPLICATE_ALL",
            "ON_DUPLICATE_ERROR",
            "ON_DUPLICATE_NEWEST",
            "ON_DUPLICATE_POLICIES",
        ),
        "deepecgkit.rundir.read",
    ),
}
__getattr__ = moved_names(__name__, __moved__)
