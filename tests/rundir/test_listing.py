"""One directory listing as discovery sees it, and the record a scan keeps of each."""

from __future__ import annotations

import os
from pathlib import Path

from deepecgkit.rundir.format import METRICS_FILENAME
from deepecgkit.rundir.listing import (
    CHILD_LISTING,
    PROBLEM_LIST,
    ROOT_LISTING,
    WALKED_LISTING,
    ListingRecord,
    directory_signature,
    listing_signature,
    problem_persists,
)
from deepecgkit.rundir.read import find_run_candidate_paths


def test_a_signature_ignores_order_and_other_files_but_not_names() -> None:
    base = listing_signature(WALKED_LISTING, True, ["a", "b"], ["l"])
    assert base == listing_signature(WALKED_LISTING, True, ["b", "a"], ["l"])
    assert base != listing_signature(WALKED_LISTING, False, ["a", "b"], ["l"])
    assert base != listing_signature(WALKED_LISTING, True, ["a", "b", "c"], ["l"])
    assert base != listing_signature(WALKED_LISTING, True, ["a", "b\0l"], [])
    assert listing_signature(WALKED_LISTING, True, [], []) == "wm", "a plain run stays tiny"


def test_the_record_of_a_scan_is_what_a_relisting_gives(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    (root / "run_a").mkdir(parents=True)
    (root / "run_a" / METRICS_FILENAME).write_text("x\n")
    (root / "run_a" / "notes.txt").write_text("other files do not matter\n")
    (root / "group" / "run_b").mkdir(parents=True)
    (root / "group" / "run_b" / METRICS_FILENAME).write_text("x\n")
    (root / "dangling").symlink_to(tmp_path / "nowhere", target_is_directory=True)
    for recursive in (True, False):
        record = ListingRecord()
        find_run_candidate_paths(root, recursive=recursive, listing=record)
        assert record.roots == [str(root)] and record.root_targets == [os.path.realpath(root)]
        assert record.links == {str(root / "dangling"): None}
        kinds = {signature[0] for signature in record.signatures}
        assert kinds == ({WALKED_LISTING} if recursive else {ROOT_LISTING, CHILD_LISTING})
        for path, signature in zip(record.directories, record.signatures, strict=True):
            assert directory_signature(path, signature) == signature
        assert all(stamp > 0 for stamp in record.stamps)
    recursive_record = ListingRecord()
    find_run_candidate_paths(root, recursive=True, listing=recursive_record)
    number = recursive_record.directories.index(str(root / "group"))
    before = recursive_record.signatures[number]
    (root / "group" / "run_d").mkdir()
    assert directory_signature(str(root / "group"), before) != before


def test_a_vanished_directory_is_no_persisting_problem(tmp_path: Path) -> None:
    assert not problem_persists(PROBLEM_LIST, str(tmp_path / "gone"))
    assert not problem_persists(PROBLEM_LIST, str(tmp_path))
