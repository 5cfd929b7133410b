"""``discovered_runs`` saves the tree index, and lists nothing the index proves unchanged.

The asset reads the index the last scan saved (the sensor's or its own):
when it proves the whole tree unchanged, the candidates are the index's and
nothing is listed (:meth:`deepecgkit.rundir.tree_index.TreeIndex.unchanged_candidates`);
otherwise it spares the listing of each run directory whose change time is
the one recorded there (:meth:`~deepecgkit.rundir.tree_index.TreeIndex.known_listings`).
These tests materialise the real asset and count the listings it makes.
The library's own tests (``tests/rundir/test_tree_index.py``) check that the
frame is the one a full listing gives under every kind of change.
"""

from __future__ import annotations

import time

import dagster as dg

from deepecg_assets.assets.discovery import SCAN_PROVEN, SCAN_WALKED
from deepecg_assets.resources import OutputFolderResource
from deepecgkit.rundir import read as read_module
from deepecgkit.rundir.tree_index import SAFETY_WINDOW_NS, TreeIndex
from deepecgkit.rundir.write import write_run_directory

DISCOVERY = ["discovered_runs"]


def discover(platform, monkeypatch) -> list[str]:
    """Materialise discovery; the directories it listed."""
    listed: list[str] = []
    entries = read_module.directory_entries

    def counted(directory: str):
        listed.append(directory)
        return entries(directory)

    with monkeypatch.context() as patched:
        patched.setattr(read_module, "directory_entries", counted)
        assert platform.materialize(DISCOVERY).success
    return listed


def scan_of(platform) -> str:
    """The ``scan`` metadata of the latest discovery."""
    event = platform.instance.get_latest_materialization_event(dg.AssetKey("discovered_runs"))
    assert event is not None and event.asset_materialization is not None
    return event.asset_materialization.metadata["scan"].value


def test_a_rediscovery_lists_only_what_changed(platform, monkeypatch) -> None:
    index_file = OutputFolderResource(path=str(platform.output)).tree_index_file()
    time.sleep(SAFETY_WINDOW_NS / 1e9 + 0.1)  # the generated runs are now old enough to trust
    first = discover(platform, monkeypatch)
    runs = len(platform.frame("discovered_runs"))
    assert len(first) > runs, "no index yet: every run directory is listed"
    assert scan_of(platform) == SCAN_WALKED
    index = TreeIndex.load(index_file)
    assert index is not None and index.summary().readable == runs
    assert index.unchanged(platform.runs, recursive=True) is not None

    before = platform.frame("discovered_runs")
    second = discover(platform, monkeypatch)
    assert second == [], "a tree the index proves unchanged is not listed at all"
    assert scan_of(platform) == SCAN_PROVEN
    assert platform.frame("discovered_runs").equals(before)

    added = write_run_directory(
        platform.runs / "cnn_afib_seed99", model="cnn", dataset="afib", metrics={"f1": 0.5}, seed=99
    )
    third = discover(platform, monkeypatch)
    assert scan_of(platform) == SCAN_WALKED, "the root's listing changed: the proof fails"
    assert sorted(third) == sorted([str(platform.runs), str(added)])
    frame = platform.frame("discovered_runs")
    assert len(frame) == runs + 1 and str(added) in set(frame["run_dir"])
