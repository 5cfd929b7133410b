"""A rebuild does not read or hash a run's files again while their stat signatures hold."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from deepecgkit.rundir.format import METADATA_FILENAME, METRICS_FILENAME, SPLIT_INFO_FILENAME
from deepecgkit.rundir.read import discover_runs
from deepecgkit.statistical_report import identity, report, statistical_report
from tests.deepecg_assets.output_trees import tree_bytes
from tests.statistical_report.prediction_runs import write_prediction_run
from tests.statistical_report.test_reuse import (
    REFERENCE,
    SETTINGS,
    _assert_equals_clean,
    _build,
)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Two paired runs with predictions and one run that kept none."""
    root = tmp_path / "runs"
    write_prediction_run(root, REFERENCE, "afib", 0)
    write_prediction_run(root, "cnn", "afib", 0)
    bare = write_prediction_run(root, "cnn", "afib", 1)
    (bare / "predictions.csv").unlink()
    return root


class Reads:
    """The run files the identity contract opens and the metrics files it parses, by run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.files: list[tuple[str, str]] = []
        self.parsed: list[str] = []
        read_file, read_run = identity.read_run_file, identity.read_run

        def counting_read_file(run_dir: Path, name: str):
            self.files.append((Path(run_dir).name, name))
            return read_file(run_dir, name)

        def counting_read_run(run_dir: Path):
            self.parsed.append(Path(run_dir).name)
            return read_run(run_dir)

        monkeypatch.setattr(identity, "read_run_file", counting_read_file)
        monkeypatch.setattr(identity, "read_run", counting_read_run)

    def runs_read(self) -> set[str]:
        return {run for run, _ in self.files} | set(self.parsed)

    def clear(self) -> None:
        self.files.clear()
        self.parsed.clear()


def _equals_clean(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **overrides: object
) -> None:
    """Stop counting; the report in ``tmp_path/out`` must equal a clean build's."""
    monkeypatch.undo()
    _assert_equals_clean(runs, tmp_path / "out", tmp_path / "clean", **overrides)


def rewrite_in_place(path: Path, data: bytes) -> None:
    """Overwrite ``path`` through the same inode (a writer that does not rename): the
    directory's signature stays, only the file's own ``stat`` shows the edit."""
    with open(path, "r+b") as handle:
        handle.write(data)
        handle.truncate()


def test_unchanged_runs_are_neither_read_nor_hashed(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    reads = Reads(monkeypatch)
    first = _build(runs, out)
    assert reads.runs_read() == {"resnet_afib_seed0", "cnn_afib_seed0", "cnn_afib_seed1"}
    hashed = [len(entry["files"]) for entry in first.manifest["inputs"]]
    reads.clear()
    hashed_now: list[str] = []
    real_sha256 = identity.hashlib.sha256

    class CountingHashlib:
        @staticmethod
        def sha256(data: bytes):
            hashed_now.append("x")
            return real_sha256(data)

    monkeypatch.setattr(identity, "hashlib", CountingHashlib)
    again = _build(runs, out)
    assert reads.files == [] and reads.parsed == [] and hashed_now == []
    # The recalled hashes are the manifest's, and the bare run is still no_predictions.
    assert again.manifest == first.manifest and sorted(hashed) == [3, 4, 4]
    assert list(again.exclusions.query("scope == 'run'")["reason"]) == ["no_predictions"]
    assert (again.reused_runs, again.computed_runs) == (2, 0)
    _equals_clean(runs, tmp_path, monkeypatch)


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["new mtime", "mtime restored"])
def test_a_same_size_rewrite_is_read_again(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_mtime: bool
) -> None:
    out = tmp_path / "out"
    first = _build(runs, out)
    metadata = runs / "cnn_afib_seed1" / METADATA_FILENAME
    before = metadata.stat()
    text = metadata.read_bytes()
    changed = text.replace(b'"seed": 1', b'"seed": 7')
    assert changed != text and len(changed) == len(text)
    rewrite_in_place(metadata, changed)
    if keep_mtime:  # only the ctime (and the bytes) tell
        os.utime(metadata, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert metadata.stat().st_mtime_ns == before.st_mtime_ns
    reads = Reads(monkeypatch)
    again = _build(runs, out)
    assert reads.runs_read() == {"cnn_afib_seed1"}
    assert set(reads.files) == {
        ("cnn_afib_seed1", name)
        for name in (METRICS_FILENAME, METADATA_FILENAME, SPLIT_INFO_FILENAME)
    }
    entries = {entry["run_id"]: entry for entry in again.manifest["inputs"]}
    old = {entry["run_id"]: entry for entry in first.manifest["inputs"]}
    assert (
        entries["cnn_afib_seed1"]["files"][METADATA_FILENAME]
        != (old["cnn_afib_seed1"]["files"][METADATA_FILENAME])
    )
    assert (again.exclusions["seed"] == 7).any()
    _equals_clean(runs, tmp_path, monkeypatch)


def test_changed_predictions_and_removed_files_are_read_again(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    _build(runs, out)
    write_prediction_run(runs, "cnn", "afib", 0, variant=1)
    (runs / "resnet_afib_seed0" / SPLIT_INFO_FILENAME).unlink()
    bare = runs / "cnn_afib_seed1"
    shutil.copy(runs / "cnn_afib_seed0" / "predictions.csv", bare / "predictions.csv")
    reads = Reads(monkeypatch)
    again = _build(runs, out)
    assert reads.runs_read() == {"resnet_afib_seed0", "cnn_afib_seed0", "cnn_afib_seed1"}
    reasons = dict(zip(again.exclusions["run_id"], again.exclusions["reason"], strict=True))
    assert reasons["resnet_afib_seed0"] == "missing_split_info"
    assert "cnn_afib_seed1" not in reasons or reasons["cnn_afib_seed1"] != "no_predictions"
    _equals_clean(runs, tmp_path, monkeypatch)


def test_recalled_predictions_are_read_when_their_rows_are_computed(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    _build(runs, out)
    reads = Reads(monkeypatch)
    again = _build(runs, out, n_resamples=30)  # other rows: every included run is scored
    assert (again.reused_runs, again.computed_runs) == (0, 2)
    assert sorted(reads.files) == [
        ("cnn_afib_seed0", "predictions.csv"),
        ("resnet_afib_seed0", "predictions.csv"),
    ]
    _equals_clean(runs, tmp_path, monkeypatch, n_resamples=30)


def test_records_spare_parsing_the_metrics_file(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records, _ = discover_runs([runs], recursive=True)
    from_dirs = statistical_report(
        None, tmp_path / "dirs", run_dirs=[r.run_dir for r in records], **SETTINGS
    )
    reads = Reads(monkeypatch)
    stale = records[0]._replace(mtime=records[0].mtime - 1.0)  # read again: not what is there
    from_records = statistical_report(
        None, tmp_path / "records", records=[stale, *records[1:]], **SETTINGS
    )
    assert reads.parsed == [records[0].run_dir.name]
    assert from_records.manifest == from_dirs.manifest
    assert tree_bytes(tmp_path / "records") == tree_bytes(tmp_path / "dirs")


def test_run_dirs_and_records_together_are_refused(runs: Path, tmp_path: Path) -> None:
    records, _ = discover_runs([runs], recursive=True)
    with pytest.raises(report.ComparisonError, match="not both"):
        statistical_report(None, tmp_path / "out", run_dirs=[runs], records=records, **SETTINGS)


def test_resolved_paths_equal_realpath(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "run").mkdir(parents=True)
    (real / "elsewhere").mkdir()
    (tmp_path / "linked").symlink_to(real)
    (real / "link").symlink_to(real / "elsewhere")
    paths = [
        real / "run",
        tmp_path / "linked" / "run",
        real / "link",
        real / "missing",
        Path(f"{real}/../real/run"),
        Path("relative/run"),
    ]
    assert report._resolved_paths(paths) == [os.path.realpath(p) for p in paths]


class Listings:
    """The run directories the identity contract lists, by name."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.listed: list[str] = []
        entry_names = identity._entry_names

        def counting_entry_names(directory: str):
            self.listed.append(Path(directory).name)
            return entry_names(directory)

        monkeypatch.setattr(identity, "_entry_names", counting_entry_names)


def test_a_directory_that_kept_its_signature_is_not_listed(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    first = _build(runs, out)
    listings = Listings(monkeypatch)
    again = _build(runs, out)
    assert listings.listed == [] and again.manifest == first.manifest
    # A new entry (of any name) changes the directory's signature: listed, the memo
    # (whose files are unchanged) still recalled, and the new signature kept.
    (runs / "cnn_afib_seed1" / "notes.txt").write_text("a note\n")
    reads = Reads(monkeypatch)
    third = _build(runs, out)
    assert listings.listed == ["cnn_afib_seed1"] and reads.files == []
    assert third.manifest == first.manifest
    listings.listed.clear()
    _build(runs, out)
    assert listings.listed == []
    _equals_clean(runs, tmp_path, monkeypatch)


def test_predictions_added_beside_an_unchanged_memo_are_found(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    _build(runs, out)
    bare = runs / "cnn_afib_seed1"
    # Written in place under its final name (no rename), then the directory's times
    # put back: only its ctime still tells, and the directory is listed again.
    before = bare.stat()
    (bare / "predictions.csv").write_bytes(
        (runs / "cnn_afib_seed0" / "predictions.csv").read_bytes()
    )
    os.utime(bare, ns=(before.st_atime_ns, before.st_mtime_ns))
    listings = Listings(monkeypatch)
    again = _build(runs, out)
    assert listings.listed == ["cnn_afib_seed1"]
    run_rows = again.exclusions.query("scope == 'run'")
    assert "no_predictions" not in set(run_rows["reason"])
    _equals_clean(runs, tmp_path, monkeypatch)


def test_common_path_equals_commonpath(tmp_path: Path) -> None:
    cases = [
        ["/a/b/run1", "/a/b/run2", "/a/c/run3"],
        ["/a/b/run1"],
        ["/a/b", "/a/b/nested"],  # a run directory inside another
        ["/a/b/x", "/a/b/x", "/a/b/x"],
        ["/x", "/y"],
        ["/", "/a"],
        ["/a//b/run", "/a/b/./run2"],
        ["/a/b", "/a/b-x", "/a/b/z"],  # a character below "/" between them
        ["/a/bc", "/a/bd"],
        ["/a/b", "/a/bc"],
        ["/a/b/c", "/a/b/c/d", "/a/b/c/e"],
    ]
    for paths in cases:
        assert report._common_path(paths) == os.path.commonpath(paths), paths


def test_plain_absolute_is_a_path_normpath_keeps() -> None:
    """Only paths normpath keeps (with a name) pass; "//a" (normpath keeps it) goes the long way."""
    texts = [
        "/a/b",
        "/a",
        "/",
        "//a",
        "/a/",
        "/a/./b",
        "/a/../b",
        "/a/.",
        "/a/..",
        "a/b",
        "/.a/b..",
    ]
    passed = [text for text in texts if report._plain_absolute(text)]
    assert passed == ["/a/b", "/a", "/.a/b.."]
    for text in passed:
        assert os.path.normpath(text) == text and os.path.basename(text) not in ("", ".", "..")


def test_the_returned_manifest_is_the_file_and_its_figures_are_found_without_a_full_parse(
    runs: Path, tmp_path: Path
) -> None:
    import json

    from deepecgkit.statistical_report.manifest import listed_figures

    result = _build(runs, tmp_path / "out", plots=True)
    data = (tmp_path / "out" / "manifest.json").read_bytes()
    written = json.loads(data)
    assert result.manifest == written and list(result.manifest) == list(written)
    assert written["figures"] and listed_figures(data) == written["figures"]
    # Another layout (no line starting '  "figures": ') is parsed whole.
    assert listed_figures(json.dumps(written).encode()) == written["figures"]
    assert listed_figures(b'{"figures": 3}') == []
    with pytest.raises(ValueError):
        listed_figures(b'{"figures": [')
