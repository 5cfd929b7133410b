"""``json.dumps(value, indent=2)``, byte for byte, with most of the work in the C encoder.

The report's ``manifest.json`` is indented JSON (two spaces; the spec's
layout). CPython 3.11 encodes with its C encoder only without ``indent``;
with it, :func:`json.dumps` runs the pure-Python encoder, a generator per
container and a call per value: for a 20,000-run manifest it is the largest
single cost of writing the report, in a full build and in a one-run refresh
alike.

:func:`indented_json` writes the same text as that encoder. Consecutive
scalar items of a container are written by one call of the C encoder, whose
item separator is a comma, a newline and the indentation of the items'
depth, so that only the brackets need their newlines added; containers are
walked here. The manifest's 20,000 input entries (four scalars, then a
``files`` object of scalars) cost two C calls apiece.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from json.encoder import c_make_encoder, encode_basestring, encode_basestring_ascii
from typing import Any

__all__ = ["INDENT", "indented_json"]

#: The indentation of one level: two spaces, as ``json.dumps(..., indent=2)``.
INDENT = "  "
#: Types written as one token (exact types: a subclass goes through the encoder on its own).
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
_KEY_SEPARATOR = ": "


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


@cache
def _flat_encoder(depth: int, *, ensure_ascii: bool) -> Callable[[Any], str]:
    """Strict JSON of a container of scalars whose item separator starts a line at ``depth + 1``.

    The C encoder itself where CPython has it (built once per depth, not per
    call as :meth:`json.JSONEncoder.encode` builds it), else the
    pure-Python one with the same separators.
    """
    separator = ",\n" + INDENT * (depth + 1)
    strings = encode_basestring_ascii if ensure_ascii else encode_basestring
    if c_make_encoder is None:  # pragma: no cover - interpreters without the _json module
        encoder = json.JSONEncoder(
            ensure_ascii=ensure_ascii, allow_nan=False, separators=(separator, _KEY_SEPARATOR)
        )
        return encoder.encode
    chunks = c_make_encoder(
        None, _refuse, strings, None, _KEY_SEPARATOR, separator, False, False, False
    )
    return lambda value: "".join(chunks(value, 0))


def _key(key: Any, *, ensure_ascii: bool) -> str:
    """An object key as the encoder writes it (a number, boolean or None becomes its text)."""
    if type(key) is str:
        return encode_basestring_ascii(key) if ensure_ascii else encode_basestring(key)
    return _flat_encoder(0, ensure_ascii=ensure_ascii)({key: None})[1 : -len(": null}")]


def _write(value: Any, depth: int, parts: list[str], *, ensure_ascii: bool) -> None:
    """Append the text of ``value``, whose first line is already indented ``depth`` levels."""
    if type(value) in _SCALAR_TYPES:
        parts.append(_flat_encoder(depth, ensure_ascii=ensure_ascii)([value])[1:-1])
        return
    if isinstance(value, dict):
        opening, closing, items = "{", "}", value.values()
    elif isinstance(value, (list, tuple)):
        opening, closing, items = "[", "]", value
    else:  # a subclass of a scalar type, or what the encoder refuses (TypeError)
        parts.append(json.dumps(value, ensure_ascii=ensure_ascii, allow_nan=False))
        return
    if not value:
        parts.append(opening + closing)
        return
    flat = _flat_encoder(depth, ensure_ascii=ensure_ascii)
    inner = "\n" + INDENT * (depth + 1)
    if type(value) in (dict, list) and _SCALAR_TYPES.issuperset(map(type, items)):
        parts.append(opening + inner + flat(value)[1:-1] + "\n" + INDENT * depth + closing)
        return
    separator = opening + inner
    if opening == "{":
        scalars: dict[Any, Any] = {}
        for key, item in value.items():
            if type(item) in _SCALAR_TYPES:
                scalars[key] = item
                continue
            if scalars:
                parts.append(separator + flat(scalars)[1:-1])
                separator, scalars = "," + inner, {}
            parts.append(separator + _key(key, ensure_ascii=ensure_ascii) + _KEY_SEPARATOR)
            _write(item, depth + 1, parts, ensure_ascii=ensure_ascii)
            separator = "," + inner
        if scalars:
            parts.append(separator + flat(scalars)[1:-1])
    else:
        run: list[Any] = []
        for item in value:
            if type(item) in _SCALAR_TYPES:
                run.append(item)
                continue
            if run:
                parts.append(separator + flat(run)[1:-1])
                separator, run = "," + inner, []
            parts.append(separator)
            _write(item, depth + 1, parts, ensure_ascii=ensure_ascii)
            separator = "," + inner
        if run:
            parts.append(separator + flat(run)[1:-1])
    parts.append("\n" + INDENT * depth + closing)


def indented_json(value: Any, *, ensure_ascii: bool = True) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=ensure_ascii, allow_nan=False)``.

    Keys keep their order; NaN and infinities raise ``ValueError`` and values
    JSON cannot represent ``TypeError``, as :func:`json.dumps` does (a
    container that holds itself recurses until ``RecursionError`` instead of
    json's "Circular reference" ``ValueError``).
    """
    parts: list[str] = []
    _write(value, 0, parts, ensure_ascii=ensure_ascii)
    return "".join(parts)
