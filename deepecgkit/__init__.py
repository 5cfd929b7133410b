"""deepecgkit: honest statistics for multi-seed ECG classifier experiments.

Subpackages are imported on demand; importing ``deepecgkit`` itself loads
nothing heavy (no torch, no Dagster).
"""

__version__ = "0.1.0"
