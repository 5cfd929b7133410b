"""The tree index's quick tick says "unchanged" only where a full scan sees no change.

Every test runs ticks the way ``new_runs_sensor`` does (:func:`tick`: the
saved index's proof, else the full scan through the run cache, which saves
a new index) and compares each tick's digest with the truth, a full scan on
a fresh cache. Each also checks which path the tick took, so a proof that
refused everything (or accepted everything) would fail.

Directories are trusted once their change time is older than the safety
window; real ticks use 2 s, these tests :data:`WINDOW_NS` and sleep past it
(:func:`settle`) where a test needs the listing-free path.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from deepecgkit.rundir import read as read_module
from deepecgkit.rundir.cache import RunCache, scan_tree_state
from deepecgkit.rundir.format import METRICS_FILENAME
from deepecgkit.rundir.listing import ListingRecord
from deepecgkit.rundir.read import discover_run_frame
from deepecgkit.rundir.tree_index import SAFETY_WINDOW_NS, TreeIndex, indexed_tree_state
from deepecgkit.rundir.write import write_run_directory

#: The tests' safety window (ns): long against ext4's clock tick, short for a test.
WINDOW_NS = 30_000_000


def settle() -> None:
    """Wait until every directory changed so far is older than the window."""
    time.sleep(WINDOW_NS / 1e9 * 1.5)


def make(root: Path, name: str, dataset: str = "afib", seed: int = 0) -> Path:
    return write_run_directory(
        root / name, model="cnn", dataset=dataset, metrics={"f1": 0.5}, seed=seed
    )


def truth(root: Path, *, recursive: bool = True) -> str:
    return scan_tree_state(root, recursive=recursive, cache=RunCache()).digest


class Ticker:
    """The sensor's two paths over one output folder; records which path each tick took."""

    def __init__(self, root: Path, out: Path, *, recursive: bool = True) -> None:
        self.root, self.recursive = root, recursive
        self.index_file, self.cache_file = out / "tree_index.json", out / "runs.jsonl"
        self.paths: list[str] = []

    def tick(self) -> str:
        index = TreeIndex.load(self.index_file, safety_window_ns=WINDOW_NS)
        quick = None if index is None else index.unchanged(self.root, recursive=self.recursive)
        if quick is not None:
            if index is not None and index.refreshed:
                index.save(self.index_file)
            self.paths.append("quick")
            return quick.digest
        cache = RunCache.load(self.cache_file)
        state, index = indexed_tree_state(
            self.root,
            recursive=self.recursive,
            cache=cache,
            safety_window_ns=WINDOW_NS,
            previous=index,
        )
        index.save(self.index_file)
        # A refresh's discovery takes the digests from the saved index (TreeIndex.dataset_digests).
        saved = TreeIndex.load(self.index_file, safety_window_ns=WINDOW_NS)
        assert saved is not None and saved.dataset_digests() == cache.dataset_digests()
        cache.prune_unvisited()
        cache.save(self.cache_file)
        self.paths.append("full")
        return state.digest

    def checked(self) -> str:
        """A tick, asserted to give the full scan's digest."""
        digest = self.tick()
        assert digest == truth(self.root, recursive=self.recursive), self.paths
        return digest


@pytest.fixture
def corpus(tmp_path: Path) -> Ticker:
    root = tmp_path / "runs"
    for seed in range(3):
        make(root, f"cnn_afib_seed{seed}", seed=seed)
        make(root / "nested" / "ptbxl", f"cnn_ptbxl_seed{seed}", "ptbxl", seed)
    ticker = Ticker(root, tmp_path / "out")
    settle()
    ticker.checked()
    ticker.checked()
    assert ticker.paths == ["full", "quick"], "an unchanged, settled tree needs no listing"
    return ticker


def replace_metrics(run: Path, text: str, *, mtime_ns: int | None = None) -> None:
    """Put a new metrics file in place by rename, as the project's writers do."""
    temporary = run / ".metrics.tmp"
    temporary.write_text(text)
    if mtime_ns is not None:
        os.utime(temporary, ns=(mtime_ns, mtime_ns))
    os.replace(temporary, run / METRICS_FILENAME)


def test_a_run_added_at_the_top_is_seen(corpus: Ticker) -> None:
    before = corpus.checked()
    make(corpus.root, "cnn_afib_seed9", seed=9)
    assert corpus.checked() != before
    assert corpus.paths[-1] == "full"
    corpus.checked()
    assert corpus.paths[-1] == "quick", "the new index covers the new run"


def test_a_nested_run_added_is_seen(corpus: Ticker) -> None:
    before = corpus.checked()
    make(corpus.root / "nested" / "ptbxl", "cnn_ptbxl_seed7", "ptbxl", 7)
    assert corpus.checked() != before


def test_a_removed_run_is_seen(corpus: Ticker) -> None:
    before = corpus.checked()
    shutil.rmtree(corpus.root / "nested" / "ptbxl" / "cnn_ptbxl_seed1")
    assert corpus.checked() != before


def test_a_run_rewritten_by_rename_is_seen(corpus: Ticker) -> None:
    before = corpus.checked()
    run = corpus.root / "cnn_afib_seed0"
    old = (run / METRICS_FILENAME).stat()
    text = (run / METRICS_FILENAME).read_text().replace("afib", "sleep")  # same size
    replace_metrics(run, text, mtime_ns=old.st_mtime_ns + 1_000_000)
    assert corpus.checked() != before
    assert corpus.paths[-1] == "full"


def test_metrics_edited_in_place_with_the_same_size_are_seen(corpus: Ticker) -> None:
    before = corpus.checked()
    metrics = corpus.root / "cnn_afib_seed1" / METRICS_FILENAME
    old = metrics.stat()
    text = metrics.read_text()
    assert "0.5" in text
    with open(metrics, "r+") as handle:  # in place: the directory does not change
        handle.write(text.replace("0.5", "0.7"))
    os.utime(metrics, ns=(old.st_mtime_ns + 1_000_000, old.st_mtime_ns + 1_000_000))
    assert metrics.stat().st_size == old.st_size
    assert corpus.checked() != before
    assert corpus.paths[-1] == "full"


def test_a_directory_added_inside_a_run_is_listed(corpus: Ticker) -> None:
    before = corpus.checked()
    run = corpus.root / "cnn_afib_seed2"
    (run / "checkpoints").mkdir()
    assert corpus.checked() == before, "no new run: the same digest, after a full scan"
    assert corpus.paths[-1] == "full"
    make(run / "checkpoints", "inner_seed5", seed=5)
    assert corpus.checked() != before, "a run nested inside a run is a run"


def test_a_half_written_run_is_seen_when_it_becomes_readable(corpus: Ticker) -> None:
    run = corpus.root / "cnn_afib_seed5"
    run.mkdir()
    metrics = run / METRICS_FILENAME
    metrics.write_text("model,dataset,f1\ncnn,afib,0.5")  # no final line break: pending
    before = corpus.checked()
    settle()
    corpus.checked()
    assert corpus.paths[-1] == "quick", "a pending run that did not change needs no listing"
    with open(metrics, "a") as handle:  # finished in place
        handle.write("\n")
    assert corpus.checked() != before


def test_a_file_written_into_a_run_costs_a_listing_not_a_full_scan(corpus: Ticker) -> None:
    before = corpus.checked()
    (corpus.root / "cnn_afib_seed0" / "train.log").write_text("epoch 1\n")
    assert corpus.checked() == before
    assert corpus.paths[-1] == "quick", "the listing matters to discovery as it was"


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: data.replace(b'"wm"', b'"w-"', 1),
        lambda data: b'{"format": 99}\n{}\n',
        lambda data: b"",
        lambda data: b"\xff\xfe not json",
    ],
    ids=["truncated", "one-byte-changed", "other-format", "empty", "garbage"],
)
def test_a_damaged_index_is_ignored_and_rebuilt(corpus: Ticker, damage) -> None:
    before = corpus.checked()
    corpus.index_file.write_bytes(damage(corpus.index_file.read_bytes()))
    assert TreeIndex.load(corpus.index_file, safety_window_ns=WINDOW_NS) is None
    assert corpus.checked() == before
    assert corpus.paths[-1] == "full"
    assert corpus.checked() == before
    assert corpus.paths[-1] == "quick", "rebuilt"


def test_an_index_of_other_roots_or_mode_proves_nothing(corpus: Ticker, tmp_path: Path) -> None:
    index = TreeIndex.load(corpus.index_file, safety_window_ns=WINDOW_NS)
    assert index is not None
    assert index.unchanged(corpus.root, recursive=False) is None
    assert index.unchanged([corpus.root, tmp_path], recursive=True) is None
    assert index.unchanged(corpus.root, recursive=True) is not None


def test_an_index_with_a_shorter_window_than_asked_is_ignored(corpus: Ticker) -> None:
    assert TreeIndex.load(corpus.index_file, safety_window_ns=SAFETY_WINDOW_NS) is None


def rewrite_index(path: Path, edit) -> None:
    """Edit a saved index's body and seal it again (a writer's file, not damage)."""
    head, body = path.read_text().split("\n")[:2]
    fields = json.loads(body)
    edit(fields)
    new_body = json.dumps(fields, separators=(",", ":"))
    header = json.loads(head)
    header["sha256"] = hashlib.sha256(new_body.encode()).hexdigest()
    path.write_text(f"{json.dumps(header)}\n{new_body}\n")


def test_a_stamp_too_recent_to_trust_is_listed_again(corpus: Ticker) -> None:
    """A change that left the root's stamp as it was (same clock tick) is still found.

    The collision is made by hand: after a run is added, the saved index is
    given the root's new stamp, as if the change had not moved it. Marked
    untrusted (recorded within the window) the root is listed again and the
    run found; marked trusted, the proof would accept the stale listing,
    which is why the window exists.
    """
    before = corpus.checked()
    make(corpus.root, "cnn_afib_seed8", seed=8)
    root = str(corpus.root)
    stamp = os.stat(root).st_ctime_ns

    def collide(trusted: bool):
        def edit(fields):
            number = fields["directories"].index(root)
            fields["stamps"][number] = stamp
            untrusted = set(fields["untrusted"]) - {number}
            fields["untrusted"] = sorted(untrusted if trusted else untrusted | {number})

        return edit

    saved = corpus.index_file.read_bytes()
    rewrite_index(corpus.index_file, collide(trusted=True))
    stale = TreeIndex.load(corpus.index_file, safety_window_ns=WINDOW_NS)
    assert stale is not None and stale.unchanged(corpus.root, recursive=True) is not None
    corpus.index_file.write_bytes(saved)
    rewrite_index(corpus.index_file, collide(trusted=False))
    assert corpus.checked() != before
    assert corpus.paths[-1] == "full"


def test_a_fresh_index_lists_recent_directories_and_then_trusts_them(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make(root, "cnn_afib_seed0")
    ticker = Ticker(root, tmp_path / "out")
    ticker.checked()  # the directories are younger than the window: untrusted
    index = TreeIndex.load(ticker.index_file, safety_window_ns=WINDOW_NS)
    assert index is not None and index.summary().readable == 1
    settle()
    assert index.unchanged(root, recursive=True) is not None
    assert index.refreshed, "listed again with the same signature, now old enough"
    index.save(ticker.index_file)
    again = TreeIndex.load(ticker.index_file, safety_window_ns=WINDOW_NS)
    assert again is not None and again.unchanged(root, recursive=True) is not None
    assert not again.refreshed, "nothing left to list"


def test_a_dangling_link_that_gains_a_target_is_seen(tmp_path: Path) -> None:
    root, outside = tmp_path / "runs", tmp_path / "elsewhere"
    make(root, "cnn_afib_seed0")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    ticker = Ticker(root, tmp_path / "out")
    settle()
    before = ticker.checked()
    make(outside, "cnn_afib_seed3", seed=3)  # the root itself does not change
    assert ticker.checked() != before
    assert ticker.paths[-1] == "full"


def test_flat_roots_see_a_child_that_becomes_a_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make(root, "cnn_afib_seed0")
    (root / "in_progress").mkdir()
    ticker = Ticker(root, tmp_path / "out", recursive=False)
    settle()
    before = ticker.checked()
    assert ticker.checked() == before and ticker.paths == ["full", "quick"]
    replace_metrics(root / "in_progress", "model,dataset,f1\ncnn,afib,0.6\n")
    assert ticker.checked() != before
    make(root, "cnn_afib_seed1", seed=1)
    assert ticker.checked() != before
    shutil.rmtree(root / "cnn_afib_seed0")
    ticker.checked()
    assert ticker.paths[-3:] == ["full", "full", "full"]


#: Operations of the property test, applied to runs named by a small number.
OPERATIONS = ("add", "add_nested", "remove", "rename", "edit", "subdir", "log", "half", "none")
#: And those that change what a run directory's own listing holds.
LEAF_OPERATIONS = ("nest", "unmetric")
#: The property tests' steps: (operation, run number, settle first), and their settings.
STEPS = st.lists(
    st.tuples(st.sampled_from(OPERATIONS + LEAF_OPERATIONS), st.integers(0, 3), st.booleans()),
    min_size=1,
    max_size=6,
)
PROPERTY_SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def apply(root: Path, operation: str, number: int) -> None:
    run = root / f"cnn_afib_seed{number}"
    nested = root / "deep" / f"d{number % 2}" / f"cnn_sleep_seed{number}"
    if operation == "add" and not run.exists():
        make(root, run.name, seed=number)
    elif operation == "add_nested" and not nested.exists():
        make(nested.parent, nested.name, "sleep", number)
    elif operation == "remove":
        shutil.rmtree(run, ignore_errors=True)
    elif operation == "rename" and run.exists():
        replace_metrics(run, f"model,dataset,f1\ncnn,afib,0.{number}\n")
    elif operation == "edit" and (run / METRICS_FILENAME).is_file():
        metrics = run / METRICS_FILENAME
        mtime = metrics.stat().st_mtime_ns + 1_000_000
        metrics.write_text(metrics.read_text().replace("afib", "ecgs"))
        os.utime(metrics, ns=(mtime, mtime))
    elif operation == "subdir" and run.exists():
        (run / f"sub{number}").mkdir(exist_ok=True)
    elif operation == "log" and run.exists():
        (run / "train.log").write_text(f"{number}\n")
    elif operation == "nest" and run.exists():  # a run inside a run directory
        make(run, f"cnn_afib_inner{number}_seed{number + 10}", seed=number + 10)
    elif operation == "unmetric":  # the directory stays, its metrics file goes
        (run / METRICS_FILENAME).unlink(missing_ok=True)
    elif operation == "half" and not run.exists():
        run.mkdir()
        (run / METRICS_FILENAME).write_text("model,dataset,f1\ncnn,afib,0.5")


@PROPERTY_SETTINGS
@given(
    steps=STEPS,
    recursive=st.booleans(),
)
def test_property_every_tick_gives_the_full_scans_digest(
    tmp_path_factory: pytest.TempPathFactory, steps, recursive: bool
) -> None:
    base = tmp_path_factory.mktemp("tree")
    root = base / "runs"
    make(root, "cnn_afib_seed0")
    ticker = Ticker(root, base / "out", recursive=recursive)
    ticker.checked()
    for operation, number, wait in steps:
        if wait:
            settle()
        apply(root, operation, number)
        ticker.checked()
        ticker.checked()


# --- discovery through the index ---------------------------------------------------------


#: The changed share of the run cache at which the discovery asset saves it again.
RESAVE_SHARE = 0.01


class Discoverer:
    """The discovery asset's scan: the last index's proof, else its known listings and a new index.

    Records whether the last discovery took the index's candidates (``proven``)
    and which directories it listed.
    """

    def __init__(self, root: Path, out: Path) -> None:
        self.root, self.index_file, self.cache_file = root, out / "tree_index.json", out / "c.jsonl"
        self.listed: list[str] = []
        self.proven = False

    def discover(self, monkeypatch: pytest.MonkeyPatch) -> tuple[pd.DataFrame, dict]:
        index = TreeIndex.load(self.index_file, safety_window_ns=WINDOW_NS)
        proven = None if index is None else index.unchanged_candidates(self.root, recursive=True)
        known = None
        if index is not None and proven is None:
            known = index.known_listings(self.root, recursive=True)
        self.proven = proven is not None
        listing, cache = ListingRecord(), RunCache.load(self.cache_file)
        entries = read_module.directory_entries
        self.listed = []

        def counted(directory: str):
            self.listed.append(directory)
            return entries(directory)

        with monkeypatch.context() as patched:
            patched.setattr(read_module, "directory_entries", counted)
            result = discover_run_frame(
                self.root, cache=cache, recursive=True, listing=listing, known=known, proven=proven
            )
        cache.prune_unvisited()
        if cache.worth_saving(share=RESAVE_SHARE):
            cache.save(self.cache_file)
        if proven is None:
            TreeIndex.from_discovery(
                listing, cache, recursive=True, safety_window_ns=WINDOW_NS
            ).save(self.index_file)
        elif index is not None and index.refreshed:
            index.save(self.index_file)
        return result

    def checked(self, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
        """A discovery, asserted equal to one that lists everything through a fresh cache.

        Returns its diagnostics.
        """
        frame, diagnostics = self.discover(monkeypatch)
        expected, expected_diagnostics = discover_run_frame(
            self.root, cache=RunCache(), recursive=True
        )
        pd.testing.assert_frame_equal(frame, expected, check_exact=True)
        assert diagnostics == expected_diagnostics
        saved = TreeIndex.load(self.index_file, safety_window_ns=WINDOW_NS)
        assert saved is not None and saved.digest == truth(self.root)
        return diagnostics


def test_discovery_saves_the_index_a_sensor_scan_saves(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    for seed in range(3):
        make(root, f"cnn_afib_seed{seed}", seed=seed)
        make(root / "nested" / "ptbxl", f"cnn_ptbxl_seed{seed}", "ptbxl", seed)
    (root / "half_seed9").mkdir()
    (root / "half_seed9" / METRICS_FILENAME).write_text("model,dataset,f1\ncnn,afib,0.5")
    settle()
    listing, cache = ListingRecord(), RunCache()
    discover_run_frame(root, cache=cache, recursive=True, listing=listing)
    ours = TreeIndex.from_discovery(listing, cache, recursive=True, safety_window_ns=WINDOW_NS)
    _, sensors = indexed_tree_state(root, recursive=True, safety_window_ns=WINDOW_NS)
    ours.save(tmp_path / "ours.json")
    sensors.save(tmp_path / "sensors.json")
    assert (tmp_path / "ours.json").read_bytes() == (tmp_path / "sensors.json").read_bytes()
    assert ours.summary().pending == (str(root / "half_seed9"),)


def test_an_unchanged_settled_tree_lists_no_run_directory(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "runs"
    for seed in range(4):
        make(root, f"cnn_afib_seed{seed}", seed=seed)
    (root / "cnn_afib_seed0" / "checkpoints").mkdir()  # not a leaf: listed every time
    discoverer = Discoverer(root, tmp_path / "out")
    settle()
    discoverer.checked(monkeypatch)
    assert len(discoverer.listed) == 6, "no index yet: every directory is listed"
    discoverer.checked(monkeypatch)
    assert discoverer.proven and discoverer.listed == [], "proven unchanged: nothing listed"
    make(root, "cnn_afib_seed7", seed=7)
    discoverer.checked(monkeypatch)
    assert not discoverer.proven
    assert sorted(discoverer.listed) == [
        str(root),
        str(root / "cnn_afib_seed0"),
        str(root / "cnn_afib_seed7"),
    ]
    settle()
    discoverer.checked(monkeypatch)
    for operation in LEAF_OPERATIONS:  # each moves the run directory's change time
        apply(root, operation, 1)
        discoverer.checked(monkeypatch)
        assert str(root / "cnn_afib_seed1") in discoverer.listed


def test_known_listings_are_empty_for_other_roots_or_a_flat_scan(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make(root, "cnn_afib_seed0")
    settle()
    listing, cache = ListingRecord(), RunCache()
    discover_run_frame(root, cache=cache, recursive=True, listing=listing)
    index = TreeIndex.from_discovery(listing, cache, recursive=True, safety_window_ns=WINDOW_NS)
    assert index.known_listings(root, recursive=True) == {
        str(root / "cnn_afib_seed0"): (listing.stamps[-1], True, False)
    }
    assert index.known_listings(root, recursive=False) == {}
    assert index.known_listings([root, tmp_path], recursive=True) == {}


def test_a_failed_proof_spares_the_scan_the_stamps_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a proof that failed elsewhere, the run directories it read are not stat-ed again,
    and the scan's index is the one a scan reading every stamp itself writes."""
    root = tmp_path / "runs"
    for seed in range(4):
        make(root, f"cnn_afib_seed{seed}", seed=seed)
    settle()
    _, index = indexed_tree_state(root, cache=RunCache(), safety_window_ns=WINDOW_NS)
    assert not any(current for _, _, current in index.known_listings(root, recursive=True).values())
    make(root, "cnn_afib_seed8", seed=8)  # the root's listing changes: the proof fails
    assert index.unchanged(root, recursive=True) is None
    known = index.known_listings(root, recursive=True)
    assert len(known) == 4 and all(current for _, _, current in known.values())
    stamped: list[str] = []
    stamp = read_module.directory_stamp

    def counted(path: str) -> int:
        stamped.append(path)
        return stamp(path)

    monkeypatch.setattr(read_module, "directory_stamp", counted)
    state, spared = indexed_tree_state(
        root, cache=RunCache(), safety_window_ns=WINDOW_NS, previous=index
    )
    assert sorted(stamped) == [str(root), str(root / "cnn_afib_seed8")]
    monkeypatch.setattr(read_module, "directory_stamp", stamp)
    _, own = indexed_tree_state(root, cache=RunCache(), safety_window_ns=WINDOW_NS)
    assert spared.same_as(own) and state.digest == truth(root)


@PROPERTY_SETTINGS
@given(
    steps=STEPS,
)
def test_property_discovery_through_the_index_equals_a_full_listing(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, steps
) -> None:
    """Additions, deletions, renames, in-place edits, new subdirectories, half-written runs."""
    base = tmp_path_factory.mktemp("tree")
    root = base / "runs"
    make(root, "cnn_afib_seed0")
    make(root, "cnn_afib_seed1", seed=1)
    discoverer = Discoverer(root, base / "out")
    settle()
    discoverer.checked(monkeypatch)
    for operation, number, wait in steps:
        if wait:
            settle()
        apply(root, operation, number)
        discoverer.checked(monkeypatch)
        discoverer.checked(monkeypatch)
        assert discoverer.proven, "nothing changed since the last discovery's index"


def test_an_index_with_a_problem_or_an_irregular_entry_proves_no_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their reasons are the scan's to give: the tree is walked, and reports them."""
    root = tmp_path / "runs"
    make(root, "cnn_afib_seed0")
    (root / "odd_seed1").mkdir()
    (root / "odd_seed1" / METRICS_FILENAME).mkdir()  # a metrics entry that is no file
    discoverer = Discoverer(root, tmp_path / "out")
    settle()
    for _ in range(2):
        diagnostics = discoverer.checked(monkeypatch)
        assert not discoverer.proven
        assert [entry.split(" (")[0] for entry in diagnostics["unreadable"]] == [
            str(root / "odd_seed1")
        ]
    shutil.rmtree(root / "odd_seed1")
    discoverer.checked(monkeypatch)
    discoverer.checked(monkeypatch)
    assert discoverer.proven
    locked = root / "locked"
    locked.mkdir()
    entries = read_module.directory_entries

    def refused(directory: str):  # what a directory of another user gives (not as root)
        if directory == str(locked):
            raise PermissionError(13, "Permission denied", directory)
        return entries(directory)

    monkeypatch.setattr(read_module, "directory_entries", refused)
    for _ in range(2):
        diagnostics = discoverer.checked(monkeypatch)
        assert not discoverer.proven
        assert [entry.split(" (")[0] for entry in diagnostics["unreadable"]] == [str(locked)]


def test_a_saved_index_is_named_by_its_checksum_and_keeps_its_scan(corpus: Ticker) -> None:
    """The checksum names the saved body (saved and loaded alike); the recorded candidates
    are the scan's states even after a change, which only the proof sees."""
    index = TreeIndex.load(corpus.index_file, safety_window_ns=WINDOW_NS)
    assert index is not None and index.checksum is not None
    header = json.loads(corpus.index_file.read_bytes().partition(b"\n")[0])
    assert index.checksum == header["sha256"]
    body = corpus.index_file.read_bytes().partition(b"\n")[2].rstrip(b"\n")
    assert index.checksum == hashlib.sha256(body).hexdigest()
    recorded = index.recorded_candidates()
    assert recorded is not None
    proven = index.unchanged_candidates(corpus.root, recursive=True)
    assert proven is not None and list(proven.paths) == list(recorded.paths)
    assert list(proven.mtimes) == list(recorded.mtimes)

    run = corpus.root / "cnn_afib_seed0"
    replace_metrics(run, "f1\n0.25\n")
    reloaded = TreeIndex.load(corpus.index_file, safety_window_ns=WINDOW_NS)
    assert reloaded is not None and reloaded.checksum == index.checksum
    assert reloaded.unchanged_candidates(corpus.root, recursive=True) is None
    kept = reloaded.recorded_candidates()
    assert kept is not None and list(kept.mtimes) == list(recorded.mtimes), "as of the scan"

    corpus.checked()  # the next tick scans, and saves another index: another checksum
    rescanned = TreeIndex.load(corpus.index_file, safety_window_ns=WINDOW_NS)
    assert rescanned is not None and rescanned.checksum != index.checksum
    (position,) = [
        n for n, path in enumerate(rescanned.recorded_candidates().paths) if path == str(run)
    ]
    assert (
        rescanned.recorded_candidates().mtimes[position]
        == (run / METRICS_FILENAME).stat().st_mtime_ns
    )


def test_the_index_gives_the_caches_dataset_digests_for_names_that_are_not_utf8(
    tmp_path: Path,
) -> None:
    """A name Arrow cannot hold takes the digests' Python road, from the index as from the cache."""
    root = tmp_path / "runs"
    make(root, "cnn_afib_seed0")
    make(root, "cnn_ptbxl_seed0", "ptbxl")
    make(root, os.fsdecode(b"cnn_afib_\xff_seed1"), seed=1)
    (root / "broken").mkdir()
    (root / "broken" / METRICS_FILENAME).write_text("model,dataset,f1\ncnn,afib,0.5")  # half
    cache = RunCache()
    _, index = indexed_tree_state(root, recursive=True, cache=cache)
    digests = cache.dataset_digests()
    assert set(digests) == {"afib", "ptbxl"}
    assert index.dataset_digests() == digests
    index.save(tmp_path / "index.json")
    loaded = TreeIndex.load(tmp_path / "index.json")
    assert loaded is not None and loaded.dataset_digests() == digests
