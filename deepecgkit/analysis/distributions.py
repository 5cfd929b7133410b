"""The few distribution functions the analysis prints, as ``scipy.special``'s ufuncs.

The analysis needs three distributions (Student's t, the normal, chi-squared)
through a handful of functions, and ``scipy.stats`` computes each of them by
the ufunc used here: ``t.ppf(p, dof)`` is ``stdtrit(dof, p)``, ``t.sf`` is
``stdtr`` of the negated value, ``norm.cdf`` is ``ndtr``, ``norm.ppf`` is
``ndtri`` and ``chi2.sf(x, dof)`` is ``chdtrc(dof, x)``. So on the domain
each function states, the values are bit for bit those of ``scipy.stats``
(``tests/analysis/test_distributions.py`` compares them).

Why not ``scipy.stats`` itself: importing it builds every distribution
object and pulls in ``scipy.optimize``, ``scipy.spatial`` and
``scipy.sparse``, about a second per process (docs/benchmarks.md, session
33). Every CLI call paid it, and so did every run the daemon launches before
its first step could start, since loading the platform's definitions
imports the analysis: a second of the time from a run landing to its tables
being current.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

__all__ = [
    "chi2_sf",
    "normal_cdf",
    "normal_isf",
    "normal_ppf",
    "normal_sf",
    "t_critical",
    "t_isf",
    "t_ppf",
    "t_sf",
]


def t_ppf(p: Any, dof: Any) -> Any:
    """Student-t quantile at ``p`` in (0, 1) (``scipy.stats.t.ppf``); NaN unless ``dof > 0``."""
    return special.stdtrit(dof, p)


def t_critical(confidence_level: float, dof: Any) -> Any:
    """The two-sided Student-t critical value: ``t_ppf((1 + confidence_level) / 2, dof)``.

    The half-width of a ``confidence_level`` interval is this times the
    standard error. NaN unless ``dof > 0`` (one seed: no interval).
    """
    return t_ppf((1.0 + confidence_level) / 2.0, dof)


def t_isf(q: Any, dof: Any) -> Any:
    """Student-t upper quantile at ``q`` in (0, 0.5) with ``dof > 0`` (``scipy.stats.t.isf``).

    (At ``q = 0.5`` it gives ``-0.0`` where ``scipy.stats`` gives ``0.0``.)
    """
    return -special.stdtrit(dof, q)


def t_sf(x: Any, dof: Any) -> Any:
    """Student-t upper tail ``P(T > x)`` (``scipy.stats.t.sf``); NaN unless ``dof > 0``."""
    return special.stdtr(dof, -x)


def normal_cdf(x: Any) -> Any:
    """Standard normal ``P(Z <= x)`` for any ``x`` (``scipy.stats.norm.cdf``)."""
    return special.ndtr(x)


def normal_sf(x: Any) -> Any:
    """Standard normal upper tail ``P(Z > x)`` for any ``x`` (``scipy.stats.norm.sf``)."""
    return special.ndtr(-x)


def normal_ppf(p: Any) -> Any:
    """Standard normal quantile at ``p`` in [0, 1] (``scipy.stats.norm.ppf``)."""
    return special.ndtri(p)


def normal_isf(q: Any) -> Any:
    """Standard normal upper quantile at ``q`` in [0, 0.5) or (0.5, 1] (``scipy.stats.norm.isf``).

    (At ``q = 0.5`` it gives ``-0.0`` where ``scipy.stats`` gives ``0.0``.)
    """
    return -special.ndtri(q)


def chi2_sf(x: Any, dof: Any) -> Any:
    """Chi-squared upper tail ``P(X > x)`` for ``x >= 0`` (``scipy.stats.chi2.sf``).

    NaN unless ``dof > 0``, as ``scipy.stats`` gives (``chdtrc`` itself gives
    0 at no degrees of freedom); ``dof`` is finite (the analysis passes a
    count of models less one).
    """
    return np.where(np.asarray(dof) > 0, special.chdtrc(dof, x), np.nan)[()]
