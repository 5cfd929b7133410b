"""The forms of a long table's body lines: lines that TeX accepts or rejects alike.

The flip table of a 100,000-run sweep has 232,750 body lines and 4,969 pages;
compiling all of them to check that the table compiles cost 70 CPU seconds
of pdfTeX (docs/benchmarks.md, session 20). Its lines differ almost only in
their numbers and in the digits of the names (``model07 / model12``), and a
digit that TeX *typesets* is a character token like any other: another digit
in its place changes a width, never whether the line is accepted (an
overfull box is a warning, not an error). So the compile check
(:mod:`deepecgkit.analysis.compile_cache`) compiles one line of each form.

A line's form (:func:`line_form`) is the line with every run of typeset
digits replaced by one ``0``. A digit run that TeX may read as a *number*
keeps its digits: one directly after a control word or ``\\\\`` (spaces, an
``=`` and signs between them allowed: ``\\kern2pt``, ``\\\\[2pt]``,
``\\count0=5``, ``\\char65``), and every digit inside an argument, i.e. a
``{...}`` group, ``[...]`` or ``(...)`` option that follows a control word, ``\\\\``, or
an argument that has just closed (``\\multicolumn{7}{l}{...}``,
``\\cmidrule(lr){2-3}``, ``\\textbf{0.5}``). That is conservative: an
argument's digits that are typeset anyway (``\\textbf{0.5}``) only make more
forms. A line whose braces do not balance is its own form, verbatim.

Lines of one form therefore compile alike, provided a body line is
self-contained (the emitters escape names, so no row defines a macro, changes
a catcode or opens a group a later row closes: see
:mod:`deepecgkit.analysis.compile_cache`). What a line does can also depend
on the line before it (a line starting with ``[`` after one ending in
``\\\\``), so :func:`representative_body` keeps, for every pair of adjacent
forms that occurs, the first such pair of lines.

The module is pure text processing: no TeX runs here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["line_form", "line_forms", "representative_body", "representative_forms"]

#: Characters between a control word and a number it reads (``\\kern -2pt``, ``\\count0=5``).
_NUMBER_PREFIX = frozenset(" =+-")
#: The control symbol that takes an optional ``[length]`` (LaTeX's line break).
_LINE_BREAK = "\\\\"
#: Openers of an option argument after a control word (``\\\\[2pt]``, ``\\cmidrule(lr)``).
_OPTION_CLOSERS = {"[": "]", "(": ")"}
#: A run of decimal digits (ASCII: what the emitters write; TeX's digits are 0-9 only).
_DIGIT_RUN = re.compile(r"[0-9]+")
#: Every decimal digit byte to ``0`` (the grouping of :func:`line_forms`).
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
#: The characters of a control word's name (TeX's letters; ``@`` inside packages).
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz@")


def _control_sequence(line: str, start: int) -> str:
    """The control sequence at ``line[start]``, a backslash: ``\\word``, or it and one character."""
    end = start + 1
    while end < len(line) and line[end] in _LETTERS:
        end += 1
    if end == start + 1:
        end = min(start + 2, len(line))
    return line[start:end]


def _kept_digit_runs(skeleton: str) -> tuple[bool, ...] | None:
    """For each digit run of ``skeleton``, whether it is kept verbatim; None: the whole line is.

    ``skeleton`` is a line with each digit run already one ``0``: which runs
    TeX may read as numbers depends only on the characters around them, not
    on the digits, so one scan decides for every line of that skeleton. The
    runs are listed up to a comment (``%`` not escaped); a run that names a
    control symbol (``\\5``) is kept.
    """
    kept: list[bool] = []
    arguments: list[bool] = []  # open groups: True for an argument, False for a plain group
    options: list[str] = []  # closers of the open [option] or (option) arguments
    reads_number = False  # a control word or \\ came last (spaces, "=" and signs skipped)
    argument_closed = False  # an argument closed last: a "{" or "[" now is another argument
    index = 0
    while index < len(skeleton):
        char = skeleton[index]
        index += 1
        if char == "\\":
            sequence = _control_sequence(skeleton, index - 1)
            index += len(sequence) - 1
            if sequence == "\\0":  # a control symbol named by a digit: its run is its name
                kept.append(True)
            reads_number = sequence == _LINE_BREAK or sequence[1:2] in _LETTERS
            argument_closed = False
        elif char == "%":  # a comment: the runs after it are not listed, so all kept
            break
        elif char == "0":  # a whole digit run of the line
            kept.append(reads_number or bool(options) or any(arguments))
            argument_closed = False
        elif char == "}":
            if not arguments:
                return None
            argument_closed = arguments.pop()
            reads_number = False
        elif options and char == options[-1]:
            options.pop()
            argument_closed = True
            reads_number = False
        else:
            opens_argument = reads_number or argument_closed
            if char == "{":
                arguments.append(opens_argument)
            elif char in _OPTION_CLOSERS and opens_argument:
                options.append(_OPTION_CLOSERS[char])
            if not (reads_number and char in _NUMBER_PREFIX):
                reads_number = False
            if char != " ":  # TeX skips spaces before an argument too
                argument_closed = False
    if arguments or options:
        return None
    return tuple(kept)


def line_forms(lines: Sequence[str]) -> list[str]:
    """The form of each line (see the module docstring), in the order of ``lines``."""
    codes, forms = _form_codes(lines)
    return [forms[code] for code in codes.tolist()]


def _form_codes(lines: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Each line's form as a code: ``forms[codes[i]]`` is the form of ``lines[i]``.

    Returns the ``(n,)`` int64 codes and the distinct forms, in the order
    they first occur. Lines are first grouped by their digits made ``0`` one
    for one (a byte translation of all the lines at once: digit bytes never
    occur inside a multi-byte UTF-8 character, and one hashing pass), and
    each group's skeleton is scanned once; only the lines of a group that
    keeps some of its digits (an argument's, a ``%`` comment's) get a form of
    their own. A body of a quarter of a million rows in a few thousand such
    groups thus costs a few Python calls per group, not per line.
    """
    if not lines:
        return np.zeros(0, dtype=np.int64), []
    text = "\n".join(lines).encode("utf-8", "surrogatepass")
    zeroed = text.translate(_DIGITS_TO_ZERO).decode("utf-8", "surrogatepass").split("\n")
    if len(zeroed) != len(lines):
        raise ValueError("a line holds a line break")
    groups = np.empty(len(zeroed), dtype=object)
    groups[:] = zeroed
    del zeroed
    group_codes, distinct = pd.factorize(groups)
    del groups
    forms: dict[str, int] = {}
    # Per group: the code of the form all its lines share, or -1 (each line has its own).
    shared = np.full(len(distinct), -1, dtype=np.int64)
    kept: dict[int, tuple[bool, ...] | None] = {}
    for index, group in enumerate(distinct.tolist()):
        form = _group_form(group)
        if isinstance(form, str):
            shared[index] = forms.setdefault(form, len(forms))
        else:
            kept[index] = form
    codes = shared[group_codes]
    for index in np.flatnonzero(codes < 0).tolist():
        line, runs = lines[index], kept[int(group_codes[index])]
        form = line if runs is None else _form_keeping(line, runs)
        codes[index] = forms.setdefault(form, len(forms))
    return codes, list(forms)


def _group_form(group: str) -> str | tuple[bool, ...] | None:
    """The form every line of ``group`` has, else which digit runs they keep (None: all)."""
    skeleton = _DIGIT_RUN.sub("0", group)
    kept = _kept_digit_runs(skeleton)
    # Every run listed (none after a comment) and none kept: the skeleton is the form.
    if kept is not None and len(kept) == skeleton.count("0") and not any(kept):
        return skeleton
    return kept


def _form_keeping(line: str, kept: tuple[bool, ...]) -> str:
    """``line`` with its digit runs made ``0`` except those ``kept`` and those not listed.

    ``kept`` lists the runs before a comment, in order; the runs after it keep
    their digits.
    """
    runs = iter(kept)

    def replace(match: re.Match[str]) -> str:
        return match.group() if next(runs, True) else "0"

    return _DIGIT_RUN.sub(replace, line)


def line_form(line: str) -> str:
    """The form of one line: :func:`line_forms` of ``[line]``.

    Examples: ``model07 / model12 & $-0.070$ & 0/100 \\\\`` has the form
    ``model0 / model0 & $-0.0$ & 0/0 \\\\``; ``\\multicolumn{7}{l}{x} \\\\``
    and ``\\kern2pt`` are their own forms.
    """
    return line_forms([line])[0]


def representative_body(body: Sequence[str]) -> list[int]:
    """Indices (ascending) of the body lines to compile: each form, after each form before it.

    For every pair (form of the line before, form of the line) that occurs in
    ``body``, the first line with that pair and the line before it are kept;
    the first line counts as following the table's header. The kept lines,
    in their order, hold every form and every adjacent pair of forms of the
    body. Empty body: no indices. The pairs are told apart as integers (one
    ``np.unique`` of the pairs' codes), so a long body costs no Python per line.
    """
    return representative_forms(body)[0]


def representative_forms(body: Sequence[str]) -> tuple[list[int], list[str]]:
    """:func:`representative_body`'s indices, and the form of each kept line, in order.

    The forms are those :func:`line_forms` gives the kept lines, taken from
    the one pass over ``body`` that chose them.
    """
    codes, forms = _form_codes(body)
    if not len(codes):
        return [], []
    header = len(forms)  # the form "before" the first line, distinct from every line's
    before = np.concatenate(([header], codes[:-1]))
    _, first = np.unique(before * (header + 1) + codes, return_index=True)
    kept = np.union1d(first, first[first > 0] - 1)
    return kept.tolist(), [forms[code] for code in codes[kept].tolist()]
