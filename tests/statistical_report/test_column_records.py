"""A list of objects held as columns (ColumnRecords) is written as the list it stands for."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from deepecgkit.statistical_report.indented_json import ColumnRecords, indented_json

_TEXT = st.text(max_size=6)
_SCALAR = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | _TEXT


@st.composite
def column_records(draw: st.DrawFn) -> ColumnRecords:
    """Records of 0-5 entries: a few scalar columns and one flat object column of text."""
    length = draw(st.integers(0, 5))
    keys = draw(st.lists(st.sampled_from(["run_id", "path", "n", "é"]), unique=True, max_size=3))
    columns: dict = {}
    for key in keys:
        kind = draw(st.sampled_from(["text", "mixed"]))
        values = _TEXT if kind == "text" else _SCALAR
        columns[key] = draw(st.lists(values, min_size=length, max_size=length))
    objects = {}
    if draw(st.booleans()):
        names = draw(st.lists(_TEXT, unique=True, max_size=3))
        present = draw(st.sampled_from(["all", "none", "some"]))
        items = {}
        for name in names:
            value = (
                _TEXT if present == "all" else st.none() if present == "none" else st.none() | _TEXT
            )
            items[name] = draw(st.lists(value, min_size=length, max_size=length))
        columns["files"] = None
        objects["files"] = items
    return ColumnRecords(columns, objects=objects, length=length)


@settings(max_examples=200, deadline=None)
@given(records=column_records(), ensure_ascii=st.booleans(), depth=st.integers(0, 2))
def test_column_records_are_written_as_their_entries(
    records: ColumnRecords, ensure_ascii: bool, depth: int
) -> None:
    entries = list(records)
    value: object = {"inputs": records, "rest": [1]}
    expected: object = {"inputs": entries, "rest": [1]}
    for _ in range(depth):
        value, expected = [value], [expected]
    text = indented_json(value, ensure_ascii=ensure_ascii)
    assert text == json.dumps(expected, indent=2, ensure_ascii=ensure_ascii)
    assert records == entries and entries == records and len(records) == len(entries)


def test_entries_are_built_from_the_columns() -> None:
    records = ColumnRecords(
        {"run_id": ["a", "b"], "files": None},
        objects={"files": {"m.csv": ["h1", None], "p.csv": [None, "h2"]}},
        length=2,
    )
    assert records[0] == {"run_id": "a", "files": {"m.csv": "h1"}}
    assert records[-1] == {"run_id": "b", "files": {"p.csv": "h2"}}
    assert records[:1] == [records[0]]
