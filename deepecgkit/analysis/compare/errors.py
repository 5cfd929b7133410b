"""The one error type of :mod:`deepecgkit.analysis.compare`.

Every function of the comparisons package raises :class:`ComparisonError`
when its inputs cannot be interpreted. It subclasses :class:`ValueError`, so
callers that already catch ``ValueError`` keep working, while callers that
want to tell "these predictions are unusable" apart from other value errors
can catch it by name.
"""

from __future__ import annotations

__all__ = ["ComparisonError"]


class ComparisonError(ValueError):
    """Inputs of a comparison cannot be interpreted.

    Raised for misaligned arrays, invalid probabilities, an incomplete fold
    design or bad settings. The message names the offending argument and,
    where there is one, the offending value, model or fold.
    """
