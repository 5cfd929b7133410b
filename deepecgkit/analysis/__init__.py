"""Multi-seed aggregation, ranking, flip tests, comparisons and LaTeX tables.

Imports neither torch nor Dagster (nor matplotlib: the report's figures
import it only when drawn). Every public name of the submodules is
re-exported here; the command-line modules (``cli``, ``report_cli``) are not.
"""

from deepecgkit.analysis.aggregation import *  # noqa: F403
from deepecgkit.analysis.checkpoints import *  # noqa: F403
from deepecgkit.analysis.compare import *  # noqa: F403
from deepecgkit.analysis.constants import *  # noqa: F403
from deepecgkit.analysis.latex import *  # noqa: F403
from deepecgkit.analysis.predictions import *  # noqa: F403
from deepecgkit.analysis.ranking import *  # noqa: F403
from deepecgkit.analysis.run_cache import *  # noqa: F403
from deepecgkit.analysis.statistics import *  # noqa: F403
from deepecgkit.analysis.synthetic import *  # noqa: F403
