"""``indented_json`` writes what ``json.dumps(..., indent=2)`` writes; so does the manifest."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deepecgkit.io import json_text
from deepecgkit.statistical_report.indented_json import indented_json
from deepecgkit.statistical_report.manifest import manifest_bytes

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_KEYS = st.text(max_size=6) | st.integers(-5, 5) | st.booleans() | st.none()
_VALUES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(_KEYS, children, max_size=5)
        | st.tuples(children, children)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES, ensure_ascii=st.booleans())
def test_the_text_of_json_dumps_with_indent_2(value: object, ensure_ascii: bool) -> None:
    expected = json.dumps(value, indent=2, ensure_ascii=ensure_ascii, allow_nan=False)
    assert indented_json(value, ensure_ascii=ensure_ascii) == expected


def test_a_small_manifest_by_hand() -> None:
    value = {"a": [1, {"b": None, "c": []}, "é"], "d": {}, "e": 2.5}
    assert indented_json(value, ensure_ascii=False) == (
        '{\n  "a": [\n    1,\n    {\n      "b": null,\n      "c": []\n    },\n    "é"\n'
        '  ],\n  "d": {},\n  "e": 2.5\n}'
    )
    assert indented_json("é") == '"\\u00e9"'


class _Count(int):
    """An int subclass: json writes it with ``int.__repr__``."""


def test_subclasses_of_containers_and_scalars_are_written_as_json_writes_them() -> None:
    value = OrderedDict(x=np.float64(0.1), y=[_Count(3), True, [np.float64(2.0)]], z=(1, 2))
    assert indented_json(value) == json.dumps(value, indent=2)


@pytest.mark.parametrize(
    "value", [math.nan, [math.inf], {"a": [1, -math.inf]}, {"a": {"b": math.nan}}]
)
def test_nan_and_infinities_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        indented_json(value)


def test_a_value_json_cannot_write_is_refused() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        indented_json({"a": [1, {"b": object()}]})


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"nan": math.nan, "inf": [1.0, -math.inf]},
        {"numpy": [np.int64(3), np.float32(0.5), np.array([1, 2]), np.float64(math.nan)]},
        {"path": Path("/runs/a"), "pair": (1, "b")},
    ],
    ids=["plain", "non-finite floats", "numpy values", "paths and tuples"],
)
def test_manifest_bytes_are_those_of_json_text(extra: dict[str, object]) -> None:
    manifest = {
        "schema_version": 1,
        "inputs": [{"run_id": "é/1", "reason": None, "files": {"a.csv": "00"}}],
        "settings": {"confidence_level": 0.95, "plots": True},
        **extra,
    }
    assert manifest_bytes(manifest) == json_text(manifest, ensure_ascii=False).encode("utf-8")


#: The kinds of value a column of records holds (a column holds one kind; floats are a
#: kind written item by item).
_RECORD_KINDS = (
    st.none(),
    st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.none(),
    st.text(max_size=6) | st.none(),
    st.lists(st.text(max_size=4), max_size=3),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(0, 3), max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.text(max_size=4), min_size=1, max_size=4, unique=True),
    data=st.data(),
    ensure_ascii=st.booleans(),
)
def test_lists_of_records_are_written_as_json_dumps_writes_them(
    keys: list[str], data: st.DataObject, ensure_ascii: bool
) -> None:
    """Records that share their keys go column by column; the text is json's all the same."""
    kinds = {key: data.draw(st.sampled_from(_RECORD_KINDS)) for key in keys}
    records = data.draw(
        st.lists(
            st.fixed_dictionaries(kinds),
            min_size=1,
            max_size=6,
        )
    )
    value = {"runs": records, "other": [*records, {"different": 1}]}
    expected = json.dumps(value, indent=2, ensure_ascii=ensure_ascii, allow_nan=False)
    assert indented_json(value, ensure_ascii=ensure_ascii) == expected
