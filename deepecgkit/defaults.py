"""Defaults shared by producers and consumers of numbers that are no part of a file format.

The evaluation package (which must not import the analysis) and the analysis
and statistical report all report intervals; they share the coverage
default here, and every function that draws a random split, fold, probe or
embedding without being given a seed uses :data:`DEFAULT_RANDOM_STATE`. The
module imports nothing.
"""

from __future__ import annotations

__all__ = ["CONFIDENCE_LEVEL", "DEFAULT_RANDOM_STATE"]

#: Default two-sided coverage of every interval.
CONFIDENCE_LEVEL = 0.95
#: Seed of a data split, cross-validation folds, a linear probe's solver or a 2-D
#: embedding when the caller names none.
DEFAULT_RANDOM_STATE = 42
