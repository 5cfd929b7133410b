"""Tests for ``deepecgkit.io``: the atomic writers, ``json_ready`` and the one safe open."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from deepecgkit import io as _io


def test_write_text_creates_parents_and_writes_exact_bytes(tmp_path):
    target = tmp_path / "a" / "b" / "table.tex"
    result = _io.atomic_write_text(target, "line\r\nü\n")
    assert result == target
    assert target.read_bytes() == "line\r\nü\n".encode()
    assert os.listdir(target.parent) == ["table.tex"]


def test_write_text_encoding(tmp_path):
    target = tmp_path / "latin.txt"
    _io.atomic_write_text(str(target), "é", encoding="latin-1")
    assert target.read_bytes() == b"\xe9"
    with pytest.raises(UnicodeEncodeError):
        _io.atomic_write_text(tmp_path / "ascii.txt", "é", encoding="ascii")
    assert not (tmp_path / "ascii.txt").exists()


def test_overwrite_replaces_the_whole_file(tmp_path):
    target = tmp_path / "f.bin"
    _io.atomic_write_bytes(target, b"a much longer old content")
    _io.atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"new"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_temporary_file_is_hidden_in_the_destination_folder(tmp_path, monkeypatch):
    moves = []
    real_replace = os.replace

    def recording_replace(src, dst):
        moves.append((src, dst))
        real_replace(src, dst)

    monkeypatch.setattr(_io.os, "replace", recording_replace)
    target = tmp_path / "final.txt"
    _io.atomic_write_text(target, "x")
    ((source, destination),) = moves
    assert destination == target
    assert source.parent == tmp_path
    assert re.fullmatch(r"\.final\.txt\.[0-9a-f]{16}\.tmp", source.name)


def test_failure_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "keep.txt"
    target.write_bytes(b"old")
    with pytest.raises(TypeError):
        _io.atomic_write_bytes(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["keep.txt"]


def test_parent_that_is_a_file_raises_oserror(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(OSError):
        _io.atomic_write_text(blocker / "child.txt", "x")


def test_permissions_follow_the_umask(tmp_path):
    previous = os.umask(0o027)
    try:
        target = _io.atomic_write_text(tmp_path / "perm.txt", "x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


# --- the one safe open of run-directory files ---------------------------------------------------


def _reason(path) -> str:
    with pytest.raises(_io.UnreadableFileError) as caught:
        _io.read_regular_file(path)
    return caught.value.reason


def test_read_regular_file_returns_bytes_and_stat(tmp_path):
    target = tmp_path / "f.json"
    target.write_bytes(b'{"a": 1}')
    data, info = _io.read_regular_file(target)
    assert data == b'{"a": 1}' and info.st_size == 8


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_every_kind_of_non_file_gets_one_clear_reason(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert _reason(tmp_path / "fifo") == "not a regular file (FIFO)"
    assert _reason(tmp_path / "folder") == "not a regular file (directory)"
    assert _reason(tmp_path / "dangling") == "not a regular file (dangling symbolic link)"
    assert _reason(tmp_path / "loop") == "not a regular file (symbolic link loop)"
    assert _reason(tmp_path / "missing") == _io.REASON_MISSING
    assert _reason("/dev/null") == "not a regular file (character device)"
    assert str(_io.UnreadableFileError(tmp_path / "fifo", "x")) == f"{tmp_path / 'fifo'}: x"


def test_read_is_bounded_by_max_bytes(tmp_path):
    target = tmp_path / "big"
    target.write_bytes(b"x" * 101)
    assert _io.read_regular_file(target, max_bytes=101)[0] == b"x" * 101
    assert _reason_limited(target, 100) == "larger than 100 bytes"


def _reason_limited(path, limit: int) -> str:
    with pytest.raises(_io.UnreadableFileError) as caught:
        _io.read_regular_file(path, max_bytes=limit)
    return caught.value.reason


def _reason_or_data(path: str) -> str:
    try:
        return _io.read_regular_file(path)[0].decode()
    except _io.UnreadableFileError as exc:
        return exc.reason


def test_a_file_the_user_may_not_read_is_permission_denied(as_unprivileged):
    # Not under tmp_path: that folder is private to root, and nobody must reach the file.
    base = tempfile.mkdtemp(prefix="deepecg-io-")
    os.chmod(base, 0o755)
    locked = os.path.join(base, "locked.json")
    with open(locked, "w") as handle:
        handle.write("{}")
    os.chmod(locked, 0)
    try:
        assert as_unprivileged(_reason_or_data, locked) == _io.REASON_PERMISSION
    finally:
        shutil.rmtree(base)


def test_display_path_escapes_bytes_that_are_not_utf8():
    name = os.fsdecode(b"/runs/caf\xe9_seed0")
    assert _io.display_path(name) == "/runs/caf\\xe9_seed0"
    assert _io.display_path("/runs/café") == "/runs/café"
    _io.display_path(name).encode("utf-8")


def test_remove_file_is_idempotent(tmp_path):
    target = tmp_path / "manifest.json"
    target.write_text("{}")
    assert _io.remove_file(target) is True and not target.exists()
    assert _io.remove_file(target) is False


# --- json_ready and the JSON / frame writers --------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), -float("inf"), np.float32("nan"), np.float64("inf"), np.nan],
)
def test_json_ready_turns_every_non_finite_float_into_null(value):
    """The np.float32 NaN is the case an older helper let through as NaN."""
    assert _io.json_ready({"x": value}) == {"x": None}
    assert _io.json_text([value]) == "[\n  null\n]\n"


def test_json_ready_makes_numpy_values_plain():
    converted = _io.json_ready(
        {
            "int": np.int64(3),
            "float": np.float32(0.5),
            "bool": np.bool_(True),
            "array": np.array([[1, 2], [3, 4]]),
            "tuple": (1, "a"),
            "path": Path("a") / "b",
            7: "integer key",
        }
    )
    assert converted == {
        "int": 3,
        "float": 0.5,
        "bool": True,
        "array": [[1, 2], [3, 4]],
        "tuple": [1, "a"],
        "path": str(Path("a") / "b"),
        "7": "integer key",
    }
    assert type(converted["int"]) is int
    assert type(converted["float"]) is float
    assert type(converted["bool"]) is bool
    assert json.loads(json.dumps(converted)) == converted


def test_json_ready_can_keep_non_finite_values_for_a_strict_dump():
    kept = _io.json_ready({"x": np.float32("nan")}, nan_to_null=False)
    assert math.isnan(kept["x"])
    with pytest.raises(ValueError):
        json.dumps(kept, allow_nan=False)


def test_json_ready_refuses_what_json_cannot_hold():
    with pytest.raises(TypeError, match="not JSON serialisable"):
        _io.json_ready({"x": object()})


def test_atomic_write_json_and_frame_round_trip(tmp_path):
    path = _io.atomic_write_json(tmp_path / "sub" / "a.json", {"b": np.float32("nan"), "a": 1})
    assert path.read_text(encoding="utf-8") == '{\n  "b": null,\n  "a": 1\n}\n'
    frame = pd.DataFrame({"x": [1.0, np.nan, 0.1 + 0.2], "name": ["007", "a,b", None]})
    written = _io.atomic_write_frame(tmp_path / "f.csv", frame)
    assert written.read_bytes() == frame.to_csv(index=False, lineterminator="\n").encode()
    reloaded = pd.read_csv(written, dtype={"name": str})
    assert reloaded["x"].iloc[2] == 0.1 + 0.2
    assert {p.name for p in tmp_path.iterdir()} == {"sub", "f.csv"}, "no temporary file left"
