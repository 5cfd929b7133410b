"""Training: the ``ECGTrainer`` and the seed grid behind ``deepecg train-grid``.

Imports torch; the analysis package must never import it.
"""

from deepecgkit.training.grid import GridUsageError, RunStatus, run_grid
from deepecgkit.training.trainer import ECGTrainer, SplitOutput

__all__ = ["ECGTrainer", "GridUsageError", "RunStatus", "SplitOutput", "run_grid"]
