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
walked here.

A list of objects that share their keys, in the same order, and hold only
text, None, booleans, integers and flat lists or objects of text (the
manifest's ``inputs`` and ``included_runs``: 100,000 entries each at
100,000 runs) is written a column at a time instead (:func:`_records_text`):
each key's values are encoded by one ``map`` of the C string encoder and the
entries joined from those texts, without a Python call per value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from itertools import chain, repeat
from json.encoder import c_make_encoder, encode_basestring, encode_basestring_ascii
from typing import Any

__all__ = ["INDENT", "ColumnRecords", "indented_json"]

#: The indentation of one level: two spaces, as ``json.dumps(..., indent=2)``.
INDENT = "  "
#: Types written as one token (exact types: a subclass goes through the encoder on its own).
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
_KEY_SEPARATOR = ": "


class ColumnRecords(Sequence[dict[str, Any]]):
    """A list of objects with the same keys, held as one list per key.

    :func:`indented_json` writes it as the list of the objects it stands
    for, byte for byte, from the columns (no object per entry). ``columns``
    gives the keys in order and each key's list of values (text, None, bool,
    int); a key in ``objects`` has None there and its values are flat
    objects of text, given as a dict of columns: each name's list of text
    values (None: that entry's object has no such key), the names in the
    objects' key order. The entries are built only when one is asked for (indexing,
    iteration, comparison with a list).
    """

    def __init__(
        self,
        columns: dict[str, list[Any] | None],
        *,
        objects: dict[str, dict[str, list[str | None]]] | None = None,
        length: int,
    ) -> None:
        self.columns = columns
        self.objects = {} if objects is None else objects
        self.length = length

    def keys(self) -> tuple[str, ...]:
        """The keys of every entry, in order."""
        return tuple(self.columns)

    def entry(self, index: int) -> dict[str, Any]:
        """The object at ``index``."""
        return {
            key: (
                {name: v[index] for name, v in self.objects[key].items() if v[index] is not None}
                if key in self.objects
                else values[index]
            )
            for key, values in self.columns.items()
        }

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self.entry(i) for i in range(*index.indices(self.length))]
        if index < 0:
            index += self.length
        if not 0 <= index < self.length:
            raise IndexError("ColumnRecords index out of range")
        return self.entry(index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (ColumnRecords, list)):
            return len(other) == self.length and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  (a list stand-in: unhashable)


def _object_texts(
    items: dict[str, list[str | None]],
    depth: int,
    strings: Callable[[str], str],
    *,
    length: int,
) -> list[str]:
    """The JSON of each flat text object of a :class:`ColumnRecords` object column at ``depth``.

    What :func:`_column_texts` writes for the dicts these columns stand for.
    When each name is in every object or in none (the common case: every run
    has the same files), each text is joined from the pieces by one C call;
    otherwise object by object.
    """
    inner = "\n" + INDENT * (depth + 1)
    end = "\n" + INDENT * depth + "}"
    separator = "," + inner
    shared = {name: values for name, values in items.items() if None not in values}
    if all(values.count(None) == length for name, values in items.items() if name not in shared):
        if not shared:
            return ["{}"] * length
        pieces: list[Any] = []
        for index, (name, values) in enumerate(shared.items()):
            label = ("{" + inner if index == 0 else separator) + strings(name) + _KEY_SEPARATOR
            pieces += [repeat(label, length), map(strings, values)]
        pieces.append(repeat(end, length))
        return list(map("".join, zip(*pieces, strict=True)))
    texts: list[str] = []
    rows = [
        [None if v is None else f"{strings(name)}{_KEY_SEPARATOR}{strings(v)}" for v in values]
        for name, values in items.items()
    ]
    for row in zip(*rows, strict=True):
        present = [piece for piece in row if piece is not None]
        texts.append("{" + inner + separator.join(present) + end if present else "{}")
    return texts


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


def _column_texts(values: list[Any], depth: int, strings: Callable[[str], str]) -> list[str] | None:
    """The JSON of each value of one key of :func:`_records_text`; None for another kind of value.

    A value is text, None, a bool, an int (not a bool), or a list or object
    (text keys) of text, at ``depth`` (a container's items go one level deeper).
    """
    kinds = set(map(type, values))
    if kinds <= {str}:
        return list(map(strings, values))  # (one C call per value)
    if kinds <= {str, type(None)}:
        return ["null" if value is None else strings(value) for value in values]
    if kinds <= {bool, int, type(None)}:
        return [
            "null"
            if v is None
            else ("true" if v else "false")
            if v is True or v is False
            else int.__repr__(v)
            for v in values
        ]
    if kinds == {list} or kinds == {dict}:
        # Every item (and key) is text, checked over all values at once.
        items = chain.from_iterable(values if kinds == {list} else map(dict.values, values))
        keys = set() if kinds == {list} else set(map(type, chain.from_iterable(values)))
        if not set(map(type, items)) <= {str} or not keys <= {str}:
            return None
        flat = _flat_encoder(depth, ensure_ascii=strings is encode_basestring_ascii)
        opening, closing = ("[", "]") if kinds == {list} else ("{", "}")
        inner = "\n" + INDENT * (depth + 1)
        end = "\n" + INDENT * depth + closing
        empty = opening + closing
        # One C call per container: its items, separated as at depth + 1.
        return [opening + inner + flat(value)[1:-1] + end if value else empty for value in values]
    return None


def _records_text(value: list[Any], depth: int, *, ensure_ascii: bool) -> str | None:
    """The text of a non-empty list of objects with the same keys, column by column.

    None (the list is written item by item) when an item is not an exact
    ``dict``, the items' keys differ (or are not text) or a value is of a
    kind :func:`_column_texts` does not write.
    """
    first = value[0]
    if type(first) is not dict or not first:
        return None
    keys = tuple(first)
    if any(type(key) is not str for key in keys):
        return None
    if any(type(item) is not dict or tuple(item) != keys for item in value):
        return None
    strings = encode_basestring_ascii if ensure_ascii else encode_basestring
    return _entries_text(
        keys,
        lambda key: _column_texts([item[key] for item in value], depth + 2, strings),
        depth,
        strings,
    )


def _columns_text(value: ColumnRecords, depth: int, *, ensure_ascii: bool) -> str | None:
    """The text of a non-empty :class:`ColumnRecords` (None: a value of another kind)."""
    strings = encode_basestring_ascii if ensure_ascii else encode_basestring

    def texts(key: str) -> list[str] | None:
        if key in value.objects:
            return _object_texts(value.objects[key], depth + 2, strings, length=len(value))
        return _column_texts(value.columns[key], depth + 2, strings)

    return _entries_text(value.keys(), texts, depth, strings)


def _entries_text(
    keys: Sequence[str],
    texts_of: Callable[[str], list[str] | None],
    depth: int,
    strings: Callable[[str], str],
) -> str | None:
    """The list of objects whose ``keys``' value texts ``texts_of`` gives (None: not written).

    The whole text is one join of the pieces, taken in turn from each
    column (the entry's opening, each key's label and value text, its
    closing): the values are copied once, by the join, and no Python call
    is made per entry.
    """
    key_prefix = "\n" + INDENT * (depth + 2)
    closing = "\n" + INDENT * (depth + 1) + "}"
    item_prefix = "\n" + INDENT * (depth + 1)
    columns = []
    for key in keys:
        texts = texts_of(key)
        if texts is None:
            return None
        columns.append(texts)
    length = len(columns[0])
    openings = chain(("[" + item_prefix,), repeat("," + item_prefix, length - 1))
    pieces: list[Any] = [openings]
    for index, (key, texts) in enumerate(zip(keys, columns, strict=True)):
        label = ("{" if index == 0 else ",") + key_prefix + strings(key) + _KEY_SEPARATOR
        pieces += [repeat(label, length), texts]
    pieces.append(repeat(closing, length))
    del columns
    end = "\n" + INDENT * depth + "]"
    return "".join(chain(chain.from_iterable(zip(*pieces, strict=True)), (end,)))


def _write(value: Any, depth: int, parts: list[str], *, ensure_ascii: bool) -> None:
    """Append the text of ``value``, whose first line is already indented ``depth`` levels."""
    if type(value) in _SCALAR_TYPES:
        parts.append(_flat_encoder(depth, ensure_ascii=ensure_ascii)([value])[1:-1])
        return
    if type(value) is ColumnRecords:
        if not len(value):
            parts.append("[]")
            return
        text = _columns_text(value, depth, ensure_ascii=ensure_ascii) if value.keys() else None
        if text is not None:
            parts.append(text)
            return
        value = list(value)  # a value of another kind: the objects, written as a list
    if type(value) is list and value and type(value[0]) is dict:
        text = _records_text(value, depth, ensure_ascii=ensure_ascii)
        if text is not None:
            parts.append(text)
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


def indented_json(value: Any, *, ensure_ascii: bool = True, end: str = "") -> str:
    """``json.dumps(value, indent=2, ensure_ascii=ensure_ascii, allow_nan=False) + end``.

    ``end`` is joined with the rest (a text of 50 MB is not copied to add a newline).

    Keys keep their order; NaN and infinities raise ``ValueError`` and values
    JSON cannot represent ``TypeError``, as :func:`json.dumps` does (a
    container that holds itself recurses until ``RecursionError`` instead of
    json's "Circular reference" ``ValueError``).
    """
    parts: list[str] = []
    _write(value, 0, parts, ensure_ascii=ensure_ascii)
    parts.append(end)
    return "".join(parts)
