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

The statistical report that builds all of it into a report folder (the
``deepecg report`` command and the Dagster asset) is
:mod:`deepecgkit.statistical_report`; its names here still resolve for one
release, with a ``DeprecationWarning``. Nothing here imports torch, Dagster,
or matplotlib.
"""

from deepecgkit._compat import moved_modules, moved_names
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

#: Names that moved to the statistical-report package (old import paths, one release).
__moved__ = {
    "ReportResult": "deepecgkit.statistical_report",
    "statistical_report": "deepecgkit.statistical_report",
}
__getattr__ = moved_names(__name__, __moved__)

#: Modules that moved to the statistical-report package (old import paths, one release).
__moved_modules__ = {
    "identity": "deepecgkit.statistical_report.identity",
    "manifest": "deepecgkit.statistical_report.manifest",
    "reliability_plot": "deepecgkit.statistical_report.reliability_plot",
    "report": "deepecgkit.statistical_report.report",
    "report_tables": "deepecgkit.statistical_report.tables",
}
moved_modules(__name__, __moved_modules__)
