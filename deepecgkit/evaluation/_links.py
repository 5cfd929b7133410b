"""Link functions between logits and probabilities, without input checks.

The calibration module needs the negative log-likelihood and the recalibration
module needs the same formulas plus temperature scaling; keeping the
unchecked arithmetic here lets both use one definition without importing
each other. Public, validated entry points live in
:mod:`deepecgkit.evaluation.recalibration`.

Layouts follow section 2.1 of the evaluation specification: a single logit
``(n,)`` or ``(n, 1)`` maps to the two columns ``[1 - σ(z), σ(z)]``, a
softmax row to ``(n, C)``, a multi-label row to ``(n, K)`` element-wise
sigmoids.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logsumexp, softmax

from deepecgkit.evaluation.constants import LOGIT_CLIP_EPS, MULTICLASS_THRESHOLD, TASK_MULTILABEL


def is_single_logit(logits: np.ndarray) -> bool:
    """True for ``(n,)`` and ``(n, 1)`` outputs, which carry one logit per sample."""
    return logits.ndim == 1 or logits.shape[1] == 1


def logits_to_probabilities(z: np.ndarray, multilabel: bool) -> np.ndarray:
    """Probabilities in the trainer's layout from (already scaled) float64 logits."""
    if multilabel:
        return expit(z)
    if is_single_logit(z):
        positive = expit(z.reshape(-1))
        return np.column_stack([1.0 - positive, positive])
    return softmax(z, axis=1)


def nll_from_logits(z: np.ndarray, y: np.ndarray, *, multilabel: bool) -> float:
    """Mean negative log-likelihood in nats of integer targets ``y`` under logits ``z``.

    Stays in log space (``logaddexp`` / ``logsumexp``), so a saturated logit
    loses precision but never produces an infinity.
    """
    if multilabel or is_single_logit(z):
        signs = 2.0 * y.reshape(-1) - 1.0
        return float(np.mean(np.logaddexp(0.0, -signs * z.reshape(-1))))
    picked = np.take_along_axis(z, y.reshape(-1, 1), axis=1)[:, 0]
    return float(np.mean(logsumexp(z, axis=1) - picked))


def probabilities_to_logits_unchecked(prob: np.ndarray, task: str | None) -> np.ndarray:
    """Invert :func:`logits_to_probabilities` on clipped float64 probabilities.

    Multi-label and 1-D inputs get the element-wise logit; one or two columns
    give the logit of the last column ``(n,)``; three or more give ``log p``
    (a valid logit vector, since softmax ignores a per-row shift).
    """
    p = np.clip(prob.astype(np.float64), LOGIT_CLIP_EPS, 1.0 - LOGIT_CLIP_EPS)
    if task == TASK_MULTILABEL or p.ndim == 1:
        return np.log(p) - np.log1p(-p)
    if p.shape[1] <= MULTICLASS_THRESHOLD:
        last = p[:, -1]
        return np.log(last) - np.log1p(-last)
    return np.log(p)
