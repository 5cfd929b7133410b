"""The metric registry: every quantity the project computes, defined once.

One row per metric: its canonical name (the column of
``classification_metrics.csv`` where the run directory holds it), which
direction is better, its display name in a LaTeX table, the closed range a
measurement can take, and the aliases accepted on input. Everything that
names a metric reads it from here: the run-directory schemas
(:mod:`deepecgkit.rundir.format`), the analysis constants, the evaluation
constants, the statistical report's metric directions, the LaTeX display
names and the linear-probe metrics.

One name per quantity. Other spellings are accepted on input only (``auc``
and ``roc_auc`` for ``auroc``). Three spelling rules qualify a name without
making it a different quantity, and each survives where it is a column or a
value of a file this project writes:

* a macro average: ``macro_<name>`` in the statistical report
  (``macro_f1``, ``macro_auprc``: the ``metric`` values of its CSV files and
  ``REPORT_PAIRED_METRICS``) and ``<name>_macro`` in the linear probes
  (``auroc_macro``, ``f1_macro``: columns of the ``transfer_matrix`` frame
  and keys of a saved transfer matrix);
* one class: ``<name>_<k>`` (``recall_0`` in the report);
* after temperature scaling: ``<name>_temp`` (``ece_temp`` in the run directory).

So :func:`canonical_name` of ``macro_f1``, ``f1_macro`` and ``f1`` is ``f1``.
A macro-averaged F1 and the run directory's ``f1`` (binary on two classes,
see ``average``) can differ in value: the qualifier says which was computed.

The module imports nothing but the standard library.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "HIGHER",
    "LOWER",
    "MACRO",
    "METRICS",
    "NEITHER",
    "PRIMARY_METRIC",
    "PRIMARY_PROBE_METRIC",
    "TEMPERATURE_SUFFIX",
    "MetricSpec",
    "canonical_name",
    "direction",
    "display_name",
    "is_known",
    "is_lower_better",
    "metric_spec",
    "per_class_name",
    "probe_name",
    "report_name",
    "resolve_spelling",
    "temperature_scaled",
    "unaliased",
    "value_range",
]

#: Directions: a larger value is better, a smaller one, or neither (a diagnostic).
HIGHER = "higher"
LOWER = "lower"
NEITHER = "none"
#: The averaging a qualified spelling names.
MACRO = "macro"
#: Prefix of a macro average in the statistical report (``macro_f1``).
REPORT_MACRO_PREFIX = f"{MACRO}_"
#: Suffix of a macro average in the linear probes (``auroc_macro``).
PROBE_MACRO_SUFFIX = f"_{MACRO}"
#: Suffix of a calibration metric measured after temperature scaling (``ece_temp``).
TEMPERATURE_SUFFIX = "_temp"
#: The headline metric: ranked and compared when a caller names none, and the one
#: ``deepecg train-grid`` prints per run.
PRIMARY_METRIC = "f1"
#: How a table says "after temperature scaling" and "macro-averaged".
_TEMPERATURE_DISPLAY = " (TS)"
_MACRO_DISPLAY = "Macro "
_PER_CLASS = re.compile(r"(?P<name>.+)_(?P<k>\d+)")

_UNIT = (0.0, 1.0)
_NON_NEGATIVE = (0.0, math.inf)


@dataclass(frozen=True)
class MetricSpec:
    """One metric of the registry.

    Attributes:
        name: the canonical spelling.
        direction: :data:`HIGHER`, :data:`LOWER` or :data:`NEITHER`.
        display: its name in a LaTeX table (LaTeX already; never escaped).
        value_range: the closed range of a measurement (infinity where unbounded).
        aliases: other spellings accepted on input.
        temperature_scaled: whether a ``<name>_temp`` form exists.
    """

    name: str
    direction: str
    display: str
    value_range: tuple[float, float] = _UNIT
    aliases: tuple[str, ...] = ()
    temperature_scaled: bool = False


#: Every metric, in the order of the run-directory schemas, then the report's and
#: the evaluator's own. The Brier score is the sum-over-classes form, in [0, 2]
#: (docs of ``deepecgkit.evaluation.calibration``); NLL and the temperature are
#: unbounded above; the bias-corrected ECEs can fall slightly below zero
#: (docs/statistics.md, "Intervals and calibration").
METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("accuracy", HIGHER, "Accuracy"),
    MetricSpec("balanced_accuracy", HIGHER, "Balanced acc."),
    MetricSpec("precision", HIGHER, "Precision"),
    MetricSpec("recall", HIGHER, "Recall"),
    MetricSpec("f1", HIGHER, "F1"),
    MetricSpec("auroc", HIGHER, "AUROC", aliases=("auc", "roc_auc")),
    MetricSpec("mcc", HIGHER, "MCC", (-1.0, 1.0)),
    MetricSpec("label_accuracy", HIGHER, "Label acc."),
    MetricSpec("exact_match_accuracy", HIGHER, "Exact match"),
    MetricSpec("ece", LOWER, "ECE", temperature_scaled=True),
    MetricSpec("adaptive_ece", LOWER, "Adaptive ECE", temperature_scaled=True),
    MetricSpec("mce", LOWER, "MCE", temperature_scaled=True),
    MetricSpec("brier", LOWER, "Brier", (0.0, 2.0), temperature_scaled=True),
    MetricSpec("nll", LOWER, "NLL", _NON_NEGATIVE, temperature_scaled=True),
    MetricSpec("classwise_ece", LOWER, "Class-wise ECE", temperature_scaled=True),
    MetricSpec("ece_debiased", LOWER, "ECE (debiased)", (-1.0, 1.0), temperature_scaled=True),
    MetricSpec(
        "classwise_ece_debiased",
        LOWER,
        "Class-wise ECE (debiased)",
        (-1.0, 1.0),
        temperature_scaled=True,
    ),
    MetricSpec("temperature", NEITHER, "Temperature", _NON_NEGATIVE),
    MetricSpec("auprc", HIGHER, "AUPRC", aliases=("average_precision",)),
    MetricSpec("mean_normalized_entropy", NEITHER, "Mean normalised entropy"),
    MetricSpec("class_coverage", NEITHER, "Class coverage"),
    MetricSpec("max_predicted_class_fraction", NEITHER, "Largest predicted-class fraction"),
    MetricSpec("exact_class_collapse", NEITHER, "Exact class collapse"),
    MetricSpec("near_class_collapse", NEITHER, "Near class collapse"),
    MetricSpec("mse", LOWER, "MSE", _NON_NEGATIVE),
    MetricSpec("mae", LOWER, "MAE", _NON_NEGATIVE),
    MetricSpec("rmse", LOWER, "RMSE", _NON_NEGATIVE),
    MetricSpec("r2", HIGHER, "$R^2$", (-math.inf, 1.0)),
)

_BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in METRICS}
_BY_ALIAS: dict[str, MetricSpec] = {
    alias: spec for spec in METRICS for alias in (spec.name, *spec.aliases)
}


@dataclass(frozen=True)
class _Spelling:
    """What a spelling names: the metric and the qualifiers of its spelling rules."""

    spec: MetricSpec
    macro: bool = False
    temperature: bool = False
    class_index: int | None = None


def _parse(name: str) -> _Spelling | None:
    spec = _BY_ALIAS.get(name)
    if spec is not None:
        return _Spelling(spec)
    if name.endswith(TEMPERATURE_SUFFIX):
        inner = _parse(name[: -len(TEMPERATURE_SUFFIX)])
        if inner is not None and inner.spec.temperature_scaled and not inner.temperature:
            return _Spelling(inner.spec, inner.macro, True, inner.class_index)
    for stripped in (
        name[len(REPORT_MACRO_PREFIX) :] if name.startswith(REPORT_MACRO_PREFIX) else None,
        name[: -len(PROBE_MACRO_SUFFIX)] if name.endswith(PROBE_MACRO_SUFFIX) else None,
    ):
        if stripped and stripped in _BY_ALIAS:
            return _Spelling(_BY_ALIAS[stripped], macro=True)
    match = _PER_CLASS.fullmatch(name)
    if match and match["name"] in _BY_ALIAS:
        return _Spelling(_BY_ALIAS[match["name"]], class_index=int(match["k"]))
    return None


def _spelling(name: str) -> _Spelling:
    parsed = _parse(name) if isinstance(name, str) else None
    if parsed is None:
        raise ValueError(
            f"unknown metric {name!r}; known metrics: {', '.join(_BY_NAME)} (with their "
            f"aliases, the {REPORT_MACRO_PREFIX}<name>, <name>{PROBE_MACRO_SUFFIX}, "
            f"<name>_<class> and <name>{TEMPERATURE_SUFFIX} forms)"
        )
    return parsed


def metric_spec(name: str) -> MetricSpec:
    """The registry row of any spelling of a metric (alias, qualified form).

    Raises:
        ValueError: no metric is spelled ``name``.
    """
    return _spelling(name).spec


def canonical_name(name: str) -> str:
    """The canonical name of the quantity ``name`` spells, qualifiers dropped except ``_temp``.

    ``auc`` and ``auroc_macro`` give ``auroc``; ``macro_f1`` gives ``f1``;
    ``ece_temp`` stays ``ece_temp`` (after scaling it is another quantity).
    """
    parsed = _spelling(name)
    return parsed.spec.name + (TEMPERATURE_SUFFIX if parsed.temperature else "")


def unaliased(name: str) -> str:
    """The canonical name when ``name`` is an alias (``auc`` -> ``auroc``); else ``name`` as given.

    Only plain aliases are resolved: a qualified spelling (``macro_f1``) names a
    possibly different value and is left alone, as is an unknown name.
    """
    spec = _BY_ALIAS.get(name) if isinstance(name, str) else None
    return name if spec is None else spec.name


def is_known(name: str) -> bool:
    """Whether ``name`` is a spelling of a metric of the registry."""
    return isinstance(name, str) and _parse(name) is not None


def direction(name: str) -> str:
    """:data:`HIGHER`, :data:`LOWER` or :data:`NEITHER` for any spelling of a metric."""
    return _spelling(name).spec.direction


def is_lower_better(name: str) -> bool:
    """Whether a smaller value of ``name`` wins; False for an unknown name."""
    return is_known(name) and direction(name) == LOWER


def value_range(name: str) -> tuple[float, float]:
    """The closed range of a measurement of ``name`` (any spelling)."""
    return _spelling(name).spec.value_range


def display_name(name: str) -> str:
    """The LaTeX display name of any spelling: ``Macro AUROC``, ``ECE (TS)`` ..."""
    parsed = _spelling(name)
    text = parsed.spec.display
    if parsed.macro:
        text = _MACRO_DISPLAY + text
    if parsed.class_index is not None:
        text = f"{text} (class {parsed.class_index})"
    if parsed.temperature:
        text += _TEMPERATURE_DISPLAY
    return text


def temperature_scaled(name: str) -> str:
    """The spelling of ``name`` measured after temperature scaling (``ece`` -> ``ece_temp``)."""
    spec = _BY_NAME[name]
    if not spec.temperature_scaled:
        raise ValueError(f"{name!r} has no temperature-scaled form")
    return name + TEMPERATURE_SUFFIX


def report_name(name: str) -> str:
    """How the statistical report spells the macro average of ``name`` (``macro_f1``)."""
    return REPORT_MACRO_PREFIX + _BY_NAME[name].name


def probe_name(name: str) -> str:
    """How the linear probes spell the macro average of ``name`` (``f1_macro``)."""
    return _BY_NAME[name].name + PROBE_MACRO_SUFFIX


def per_class_name(name: str, class_index: int) -> str:
    """The spelling of ``name`` for one class (``recall``, 2 -> ``recall_2``)."""
    return f"{_BY_NAME[name].name}_{int(class_index)}"


def resolve_spelling(name: str, allowed: Iterable[str]) -> str:
    """The spelling among ``allowed`` that names the same quantity as ``name``.

    ``name`` itself when it is allowed; else the allowed spelling with the
    same canonical name (``auc`` among ``("auroc", ...)`` gives ``auroc``,
    ``auroc`` among the probe metrics gives ``auroc_macro``): aliases are
    accepted on input and the caller continues with its own spelling.

    Raises:
        ValueError: ``name`` is unknown, or names a quantity none of ``allowed`` is.
    """
    choices = list(allowed)
    if name in choices:
        return name
    if is_known(name):
        wanted = canonical_name(name)
        for choice in choices:
            if is_known(choice) and canonical_name(choice) == wanted:
                return choice
    raise ValueError(f"unknown metric {name!r}; choose one of {', '.join(map(str, choices))}")


#: The headline metric of the linear probes and the transfer matrix (macro AUROC).
PRIMARY_PROBE_METRIC = probe_name("auroc")
