"""Multi-seed aggregation, ranking, flip tests, comparison statistics and LaTeX tables.

Imports neither torch nor Dagster (nor matplotlib). Every public name of the
submodules is re-exported here; the command-line module (``cli``) is not.
Runs are read through :mod:`deepecgkit.rundir`; the statistical report is
:mod:`deepecgkit.statistical_report`. Their names that this package used to
re-export still resolve for one release, with a ``DeprecationWarning``.
"""

from deepecgkit._compat import moved_modules, moved_names
from deepecgkit.analysis.aggregation import *  # noqa: F403
from deepecgkit.analysis.compare import (  # noqa: F401 - re-exported
    MCNEMAR_CAVEAT,
    BootstrapDifference,
    BootstrapInterval,
    ComparisonError,
    PairedFoldDifferences,
    batch_metric,
    cluster_bootstrap_difference,
    cluster_bootstrap_metric,
    mcnemar,
    mcnemar_mid_p,
    paired_fold_differences,
)
from deepecgkit.analysis.constants import *  # noqa: F403
from deepecgkit.analysis.latex import *  # noqa: F403
from deepecgkit.analysis.ranking import *  # noqa: F403
from deepecgkit.analysis.statistics import *  # noqa: F403

_READ = "deepecgkit.rundir.read"
_RECORDS = "deepecgkit.rundir.records"
_CACHE = "deepecgkit.rundir.cache"
_FORMAT = "deepecgkit.rundir.format"
_SYNTHETIC = "deepecgkit.rundir.synthetic"
#: Names that moved out of the analysis package (old import paths, one release).
__moved__ = {
    **dict.fromkeys(
        (
            "discover_runs",
            "encoder_checkpoints",
            "find_encoder_checkpoints",
            "find_run_candidates",
            "find_run_directories",
            "parse_predictions",
            "predictions_path",
            "read_predictions",
            "read_predictions_file",
            "read_run",
            "read_run_metrics",
            "ON_DUPLICATE_ALL",
            "ON_DUPLICATE_ERROR",
            "ON_DUPLICATE_NEWEST",
            "ON_DUPLICATE_POLICIES",
        ),
        _READ,
    ),
    **dict.fromkeys(
        ("DIAGNOSTIC_KEYS", "RUN_FRAME_COLUMNS", "RunRecord", "UnreadableRun", "runs_to_frame"),
        _RECORDS,
    ),
    **dict.fromkeys(
        ("FileState", "RunCache", "TreeState", "metrics_file_state", "scan_tree_state"), _CACHE
    ),
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
            "PREDICTIONS_TXT_FILENAME",
            "PROBABILITY_SUM_TOLERANCE",
            "SINGLE_LABEL_METRICS",
            "SPLIT_INFO_FILENAME",
            "VAL_PREDICTIONS_FILENAME",
            "run_directory_name",
        ),
        _FORMAT,
    ),
    **dict.fromkeys(
        (
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
        ),
        _SYNTHETIC,
    ),
    "write_run_directory": "deepecgkit.rundir.write",
    "ReportResult": "deepecgkit.statistical_report",
    "statistical_report": "deepecgkit.statistical_report",
}
__getattr__ = moved_names(__name__, __moved__)

#: Modules that moved out of the analysis package (old import paths, one release).
__moved_modules__ = {
    "_int_columns": "deepecgkit.rundir.int_columns",
    "_io": "deepecgkit.io",
    "checkpoints": "deepecgkit.rundir.read",
    "predictions": "deepecgkit.rundir._predictions",
    "report_cli": "deepecgkit.statistical_report.cli",
    "run_cache": "deepecgkit.rundir.cache",
    "synthetic": "deepecgkit.rundir.synthetic",
}
moved_modules(__name__, __moved_modules__)
