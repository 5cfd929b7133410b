"""Multi-seed aggregation, ranking, flip tests, comparison statistics and LaTeX tables.

Imports neither torch nor Dagster (nor matplotlib). Every public name of the
submodules is re-exported here; the command-line module (``cli``) is not.
Runs are read through :mod:`deepecgkit.rundir`; the statistical report is
:mod:`deepecgkit.statistical_report`. Their names that this package used to
re-export still resolve for one release, with a ``DeprecationWarning``.
"""

from deepecgkit._compat import moved_modules, moved_names
from deepecgkit.analysis import (
    aggregation as _aggregation,
    compare as _compare,
    constants as _constants,
)
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

#: Names this package re-exported that moved: those its remaining submodules list as
#: moved, and (through ``modules`` below) every public name of the submodules that
#: moved whole (old import paths, one release).
__moved__ = {
    **_aggregation.__moved__,
    **_constants.__moved__,
    **_compare.__moved__,
    "PREDICTIONS_TXT_FILENAME": "deepecgkit.rundir.format",
}
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
__getattr__ = moved_names(
    __name__,
    __moved__,
    modules=tuple(
        __moved_modules__[old] for old in ("checkpoints", "predictions", "run_cache", "synthetic")
    ),
)
