"""Tests for the atomic writers in ``deepecgkit.analysis._io``."""

from __future__ import annotations

import os
import re
import stat

import pytest

from deepecgkit.analysis import _io


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
