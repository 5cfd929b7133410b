"""Groups that carry a metric's variation, and the influence values of the AUROC.

Near a metric's ceiling a test set can hold many groups and still little
information. With accuracy 0.98 on 60 patients about one patient is
misclassified; with AUROC 0.99 a handful of patients take part in a
misordered positive-negative pair. Every other group contributes the same
value to every resample, so the bootstrap sees the metric's error through
those few groups only: its distribution is nearly degenerate (a test set
with no error gives the interval ``[1, 1]``), and the variance it implies is
estimated from a few units, whatever the group count. This is the same
reason a binomial proportion's Wald interval covers erratically when there
are few events or few non-events (Brown, Cai & DasGupta 2001, *Statistical
Science* 16:101-133), and why only the discordant pairs carry information
about a paired difference of proportions (McNemar 1947, *Psychometrika*
12:153-157). Withholding changes no estimand and drops no row: the point
estimate stays, and so do the other metrics' intervals.

So the group bootstrap counts, for the metrics whose coverage was simulated
(accuracy and AUROC, single runs and paired differences), the *informative
groups*:

* accuracy: the misclassified groups or the correctly classified ones,
  whichever are fewer;
* accuracy difference: the groups classified correctly by exactly one model
  (McNemar's discordant units);
* AUROC (one-vs-rest, per class with both positives and negatives): the
  positive groups and the negative groups that take part in a misordered or
  tied positive-negative pair, the smaller of the two counts (a group's
  *placement*, the share of the other side it is ranked correctly against,
  ties one half, is then below 1; Pepe 2003, *The Statistical Evaluation of
  Medical Tests*, chapter 5; DeLong, DeLong & Clarke-Pearson 1988,
  *Biometrics* 44:837-845, build the AUROC's variance from these
  placements);
* AUROC difference: the same, counting the groups whose placement differs
  between the two models.

For several classes the count is the smallest over the classes that have
any informative group (a class the test set separates perfectly adds no
variation to the macro average). Below ``MIN_INFORMATIVE_GROUPS`` the
interval is withheld; at or above it the count caps the ``n`` of the
expanded interval, so the interval widens as the information shrinks
(:mod:`~deepecgkit.analysis.compare.bootstrap`). Both choices come from the
coverage simulation of ``benchmarks/bench_interval_coverage.py``
(docs/benchmarks.md, "interval coverage").

The module also gives the stratum-centred influence values of the macro
AUROC, from the same placements, for the acceleration of the BCa interval
(Efron 1987, *JASA* 82:171-185; Efron & Tibshirani 1993, *An Introduction to the
Bootstrap*, sections 14.3 and 15.4 for several samples).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deepecgkit.analysis.compare.batch_metrics import BatchMetric, BuiltinMetric

__all__ = [
    "INFORMATION_METRICS",
    "TOO_FEW_INFORMATIVE_GROUPS",
    "Information",
    "auroc_influence",
    "expansion_cap",
    "information_of",
    "information_refusal",
]

#: Built-in metrics with an information count (the ones whose coverage was simulated).
INFORMATION_METRICS = ("accuracy", "auroc")
#: Reason code of an interval withheld for too little information.
TOO_FEW_INFORMATIVE_GROUPS = "too_few_informative_groups"
_TWO_CLASSES = 2


@dataclass(frozen=True)
class Information:
    """The informative-group count of one metric on one test set (or pair of runs).

    Attributes:
        count: the number of informative groups (see the module docstring).
        what: what was counted, for the reason text (e.g. ``"misclassified
            groups"``, ``"positive groups in a misordered or tied
            positive-negative pair"``).
    """

    count: int
    what: str


@dataclass(frozen=True)
class _Placements:
    """Placements of one class's one-vs-rest AUROC, ties one half.

    ``positive_hits[i]`` is twice the number of negatives ranked below
    positive ``i`` plus the number tied with it (an integer, so placements
    compare exactly); ``negative_hits[j]`` the same for the positives ranked
    above negative ``j``. A placement is ``hits / (2 * other side's size)``.
    """

    positives: np.ndarray
    negatives: np.ndarray
    positive_hits: np.ndarray
    negative_hits: np.ndarray


def _hits(scores: np.ndarray, against: np.ndarray, *, above: bool) -> np.ndarray:
    """Per score: twice the ``against`` values strictly below it (above it), plus its ties.

    The scores are searched in sorted order (several times faster than
    searching them as they come) and the counts put back in input order.
    """
    ordered = np.sort(against)
    order = np.argsort(scores)
    needles = scores[order]
    left = np.searchsorted(ordered, needles, side="left")
    right = np.searchsorted(ordered, needles, side="right")
    hits = np.empty(scores.size, dtype=np.int64)
    hits[order] = (2 * ordered.size - left - right) if above else (left + right)
    return hits


def _placements(labels: np.ndarray, prob: np.ndarray) -> dict[int, _Placements]:
    """Placements of every class that has both positive and negative groups."""
    out = {}
    for c in range(prob.shape[1]):
        positives = np.flatnonzero(labels == c)
        negatives = np.flatnonzero(labels != c)
        if positives.size == 0 or negatives.size == 0:
            continue
        scores = prob[:, c]
        out[c] = _Placements(
            positives,
            negatives,
            _hits(scores[positives], scores[negatives], above=False),
            _hits(scores[negatives], scores[positives], above=True),
        )
    return out


def _apart(values: np.ndarray, strata: np.ndarray, usual: int) -> tuple[int, bool]:
    """Groups whose value differs from their stratum's most common value, summed over strata.

    The stratified bootstrap redraws each stratum from its own groups, so a
    stratum varies only through the groups that differ from the rest: a
    stratum of one group, or one where every group has the same value, adds
    nothing. Also says whether ``usual`` is (one of) the most common value(s)
    in every stratum, which picks the reason text.

    Args:
        values: ``(m,)`` integer contribution of each group.
        strata: ``(m,)`` stratum (label) of each group.
        usual: the contribution expected to be the most common (correct,
            concordant, perfectly placed).
    """
    if values.size == 0:
        return 0, True
    # One sortable integer per (stratum, value) pair: a 1-d np.unique is fast.
    offset = int(values.min())
    width = int(values.max()) - offset + 1
    keys, counts = np.unique(
        strata.astype(np.int64) * width + (values - offset), return_counts=True
    )
    stratum_of, value_of = np.divmod(keys, width)
    starts = np.flatnonzero(np.r_[True, stratum_of[1:] != stratum_of[:-1]])
    largest = np.maximum.reduceat(counts, starts)
    total = np.add.reduceat(counts, starts)
    usual_count = np.zeros(starts.size, dtype=np.int64)
    is_usual = value_of + offset == usual
    block = np.searchsorted(starts, np.flatnonzero(is_usual), side="right") - 1
    np.add.at(usual_count, block, counts[is_usual])
    return int(np.sum(total - largest)), bool(np.all(usual_count == largest))


def _smallest_side(
    per_class: dict[int, tuple[tuple[int, bool], tuple[int, bool]]],
    n_classes: int,
    usual_text: str,
    other_text: str,
) -> Information:
    """The smallest side count over the classes with any informative group.

    ``per_class[c]`` holds :func:`_apart` of the positive and the negative
    groups of class ``c``'s one-vs-rest AUROC. With two classes both AUROCs
    are one (class 0's positives are class 1's negatives), and the text
    speaks of class 1.
    """
    counted = {c: sides for c, sides in per_class.items() if sides[0][0] or sides[1][0]}
    if not counted:
        return Information(0, f"groups {usual_text}")
    c = min(sorted(counted, reverse=True), key=lambda k: min(counted[k][0][0], counted[k][1][0]))
    (positive, positive_usual), (negative, negative_usual) = counted[c]
    side, usual = (
        ("positive", positive_usual) if positive <= negative else ("negative", negative_usual)
    )
    scope = "" if n_classes == _TWO_CLASSES else f" of class {c} (one-vs-rest)"
    text = usual_text if usual else other_text
    return Information(min(positive, negative), f"{side} groups{scope} {text}")


def _auroc_single(labels: np.ndarray, prob: np.ndarray) -> Information:
    per_class = {}
    for c, p in _placements(labels, prob).items():
        per_class[c] = (
            _apart(p.positive_hits, labels[p.positives], 2 * p.negatives.size),
            _apart(p.negative_hits, labels[p.negatives], 2 * p.positives.size),
        )
    return _smallest_side(
        per_class,
        prob.shape[1],
        "in a misordered or tied positive-negative pair",
        "apart from their class's most common placement",
    )


def _auroc_difference(labels: np.ndarray, prob_a: np.ndarray, prob_b: np.ndarray) -> Information:
    per_class = {}
    placements_b = _placements(labels, prob_b)
    for c, a in _placements(labels, prob_a).items():
        b = placements_b[c]
        per_class[c] = (
            _apart(a.positive_hits - b.positive_hits, labels[a.positives], 0),
            _apart(a.negative_hits - b.negative_hits, labels[a.negatives], 0),
        )
    return _smallest_side(
        per_class,
        prob_a.shape[1],
        "whose placement differs between the runs",
        "apart from their class's most common change of placement between the runs",
    )


def _correct(labels: np.ndarray, prob: np.ndarray) -> np.ndarray:
    """Whether each group's argmax (lowest index on ties) is its label, as 0 or 1."""
    return (np.argmax(prob, axis=1) == labels).astype(np.int64)


def _accuracy_single(labels: np.ndarray, prob: np.ndarray) -> Information:
    count, usual = _apart(_correct(labels, prob), labels, 1)
    if usual:
        return Information(count, "misclassified groups")
    return Information(count, "groups apart from their class's majority (right or wrong)")


def _accuracy_difference(labels: np.ndarray, prob_a: np.ndarray, prob_b: np.ndarray) -> Information:
    change = _correct(labels, prob_a) - _correct(labels, prob_b)
    count, usual = _apart(change, labels, 0)
    if usual:
        return Information(count, "groups classified correctly by exactly one model")
    return Information(
        count, "groups apart from their class's most common outcome (right under both, one, none)"
    )


def information_of(
    metric: BatchMetric, labels: np.ndarray, probs: tuple[np.ndarray, ...]
) -> Information | None:
    """The informative-group count of a built-in metric, or None for other metrics.

    Args:
        metric: the batch metric; only built-in ``accuracy`` and ``auroc``
            have a count (:data:`INFORMATION_METRICS`).
        labels: ``(G,)`` group labels.
        probs: one ``(G, K)`` group-probability matrix (a single run) or two
            (a paired difference).

    Example:
        >>> from deepecgkit.analysis.compare.batch_metrics import batch_metric
        >>> y = np.array([0, 0, 0, 1, 1, 1])
        >>> p1 = np.array([0.1, 0.2, 0.7, 0.6, 0.8, 0.9])
        >>> prob = np.column_stack([1 - p1, p1])
        >>> information_of(batch_metric("auroc"), y, (prob,)).count
        1
        >>> information_of(batch_metric("accuracy"), y, (prob,)).count
        1
    """
    if not isinstance(metric, BuiltinMetric) or metric.__name__ not in INFORMATION_METRICS:
        return None
    single = {"accuracy": _accuracy_single, "auroc": _auroc_single}
    paired = {"accuracy": _accuracy_difference, "auroc": _auroc_difference}
    if len(probs) == 1:
        return single[metric.__name__](labels, probs[0])
    return paired[metric.__name__](labels, *probs)


def expansion_cap(count: int) -> int:
    """The largest ``n`` of the expanded interval that ``count`` informative groups support.

    A variance estimated from ``c`` minority events (errors, discordant
    groups) is about as uncertain as a Poisson count: its relative variance is
    about ``1 / c``, that of a chi-square variable with ``2c`` degrees of
    freedom (Satterthwaite 1946, *Biometrics Bulletin* 2:110-114: effective
    degrees of freedom ``2 E[v]**2 / Var[v]``). The expansion's t quantile has
    ``n - 1`` degrees of freedom, so ``n`` is capped at ``2c + 1``.

    Example:
        >>> expansion_cap(3)
        7
    """
    return 2 * count + 1


def information_refusal(
    information: Information | None, *, minimum: int, metric: str
) -> str | None:
    """Why ``information`` cannot support an interval of ``metric``, or None.

    Example:
        >>> information_refusal(Information(2, "discordant groups"), minimum=3, metric="accuracy")
        'too_few_informative_groups: 2 discordant groups; an accuracy interval needs at least 3'
    """
    if information is None or information.count >= minimum:
        return None
    article = "an" if metric[:1].lower() in "aeiou" else "a"
    return (
        f"{TOO_FEW_INFORMATIVE_GROUPS}: {information.count} {information.what}; "
        f"{article} {metric} interval needs at least {minimum}"
    )


def auroc_influence(labels: np.ndarray, prob: np.ndarray) -> np.ndarray:
    """Stratum-centred linear influence of each group on the (macro) AUROC.

    For class ``c`` with ``n_P`` positive and ``n_N`` negative groups, the
    derivative of its Mann-Whitney AUROC with respect to a positive group's
    weight is ``(V_i - A_c) / n_P`` (``V_i`` its placement), and a negative
    group's ``(V_j - A_c) / n_N``; the macro AUROC averages the classes with
    both sides. The values are centred within each label stratum, because
    the stratified bootstrap keeps every stratum's total weight fixed. The
    stratified bootstrap variance is then about ``sum(l**2)`` and its
    skewness ``sum(l**3) / sum(l**2)**1.5``, which gives the BCa
    acceleration ``a = sum(l**3) / (6 sum(l**2)**1.5)`` (Efron 1987).

    Args:
        labels: ``(G,)`` group labels.
        prob: ``(G, K)`` group probabilities.

    Returns:
        Float64 ``(G,)``; zeros when no class has both sides.
    """
    placements = _placements(labels, prob)
    influence = np.zeros(labels.size)
    for p in placements.values():
        positive = p.positive_hits / (2.0 * p.negatives.size)
        negative = p.negative_hits / (2.0 * p.positives.size)
        area = positive.mean()
        influence[p.positives] += (positive - area) / p.positives.size
        influence[p.negatives] += (negative - area) / p.negatives.size
    if placements:
        influence /= len(placements)
    for label in np.unique(labels):
        members = labels == label
        influence[members] -= influence[members].mean()
    return influence
