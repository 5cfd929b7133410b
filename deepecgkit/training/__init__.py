"""Training: the ``ECGTrainer``, the seed grid behind ``deepecg train-grid``, cross-validation.

Imports torch; the analysis package must never import it. Run directories
are written through :mod:`deepecgkit.rundir.write`.
"""

from deepecgkit.training.cross_validation import cross_validate
from deepecgkit.training.grid import GridUsageError, RunStatus, run_grid
from deepecgkit.training.trainer import ECGTrainer, SplitOutput

__all__ = ["ECGTrainer", "GridUsageError", "RunStatus", "SplitOutput", "cross_validate", "run_grid"]
