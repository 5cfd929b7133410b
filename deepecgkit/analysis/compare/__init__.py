"""Is model A better than model B, and how sure can we be?

Three kinds of tool, kept apart on purpose because they answer different
questions:

* sample-level test (:func:`mcnemar`, with :func:`mcnemar_mid_p` beside it):
  do two classifiers disagree asymmetrically on *these* test samples?
* group bootstrap (:func:`cluster_bootstrap_metric`,
  :func:`cluster_bootstrap_difference`): how much would a metric, or a
  difference between two runs, move on a fresh draw of patients/recordings?
* descriptive matched-fold differences (:func:`paired_fold_differences`): by
  how much did two models differ on the same folds or seeds? No p-values.

:func:`statistical_report` builds all of it into a report folder (the
``deepecg report`` command and the Dagster asset call it). Nothing here
imports torch, Dagster, or matplotlib at import time.
"""

from deepecgkit.analysis.compare.batch_metrics import batch_metric
from deepecgkit.analysis.compare.bootstrap import (
    BootstrapDifference,
    BootstrapInterval,
    cluster_bootstrap_difference,
    cluster_bootstrap_metric,
)
from deepecgkit.analysis.compare.errors import ComparisonError
from deepecgkit.analysis.compare.fold_differences import (
    PairedFoldDifferences,
    paired_fold_differences,
)
from deepecgkit.analysis.compare.mcnemar import MCNEMAR_CAVEAT, mcnemar, mcnemar_mid_p
from deepecgkit.analysis.compare.report import ReportResult, statistical_report

__all__ = [
    "MCNEMAR_CAVEAT",
    "BootstrapDifference",
    "BootstrapInterval",
    "ComparisonError",
    "PairedFoldDifferences",
    "ReportResult",
    "batch_metric",
    "cluster_bootstrap_difference",
    "cluster_bootstrap_metric",
    "mcnemar",
    "mcnemar_mid_p",
    "paired_fold_differences",
    "statistical_report",
]
