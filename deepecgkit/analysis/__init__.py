"""Multi-seed aggregation, ranking, flip tests, comparisons and LaTeX tables.

Imports neither torch nor Dagster. Every public name of the submodules is
re-exported here.
"""

from deepecgkit.analysis.constants import *  # noqa: F403
from deepecgkit.analysis.statistics import *  # noqa: F403
