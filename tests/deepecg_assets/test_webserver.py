"""The Dagster UI in a real browser: the asset graph, a check's diagnostics, a table's image.

Materialises a copy of the bundled example corpus, with one unreadable run
added, into a throw-away instance, serves ``workspace.yaml`` with
``dagster-webserver`` on a free loopback port, and opens the global asset
graph in Debian's Chromium through Playwright; then the page of
``discovered_runs``' check, whose diagnostics must name the unreadable run,
and the metadata panel of ``flip_table``. The launching and graph-browsing
code lives in ``scripts/asset_graph_browser.py``, shared with
``scripts/screenshot_asset_graph.py`` (which makes the README's
``docs/asset-graph.png``), so the README shows what this test checked.

Needs ``/usr/bin/chromium`` (Debian package ``chromium``); marked slow
(about 20 s on an idle machine: one materialisation, two server starts and
one page).
"""

from __future__ import annotations

import shutil
import socket
import struct
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from matplotlib import image as mpimg

from deepecg_assets.assets.discovery import RUNS_HEALTH_CHECK
from deepecg_assets.definitions import defs
from deepecg_assets.partitions import PER_DATASET_ASSETS
from deepecg_assets.resources import BUNDLED_CORPUS
from deepecgkit.datasets.synthetic import CONTRAST_DATASETS
from deepecgkit.io import atomic_write_bytes
from tests.deepecg_assets.graph_browser import browser

pytestmark = pytest.mark.slow

#: The eight bytes every PNG file starts with.
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Status line a node shows once the UI has read its materialisation.
_MATERIALIZED = "Materialized"
#: The run directory added to the corpus copy, with a metrics file discovery cannot read.
_UNREADABLE_RUN = "unreadable-run_seed0"
#: Link the UI shows for a JSON or Markdown metadata value; it opens a dialog.
_SHOW_JSON, _SHOW_MARKDOWN = "[Show JSON]", "[Show Markdown]"
#: JavaScript predicate: every <img> of an element finished loading (or failed to).
_IMAGES_LOADED_SCRIPT = (
    "(element) => Array.from(element.querySelectorAll('img')).every((img) => img.complete)"
)
#: JavaScript: every <img> of an element that the browser decoded, with its size.
_DECODED_IMAGES_SCRIPT = """(element) => Array.from(element.querySelectorAll('img'))
    .filter((img) => img.complete && img.naturalWidth > 0)
    .map((img) => [img.naturalWidth, img.naturalHeight])"""


def _expected_names() -> list[str]:
    """The contract's asset keys plus every key the loaded Definitions hold."""
    defined = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    return sorted(set(browser.ASSET_KEYS) | defined)


@dataclass(frozen=True)
class AssetPages:
    """What the browser read on the pages of one check and one asset.

    Attributes:
        check_text: the text of ``discovered_runs``' Checks tab, the check opened.
        unreadable_json: the dialog of the check's ``unreadable`` metadata.
        flip_table_images: (width, height) of each decoded <img> in the
            Markdown dialogs of ``flip_table``'s metadata panel.
    """

    check_text: str
    unreadable_json: str
    flip_table_images: list[tuple[int, int]]


@dataclass(frozen=True)
class ServedGraph:
    """One materialise-serve-browse cycle, shared by the tests of this module."""

    capture: browser.GraphCapture
    pages: AssetPages
    server: browser.RunningWebserver
    log_path: Path
    #: ``{asset: (materialised partitions, partitions)}`` per the webserver's GraphQL API.
    partition_stats: dict[str, tuple[int, int]]


def _dialog_of(page, row_label: str, link: str):
    """Open the dialog behind ``link`` in the metadata row labelled ``row_label``."""
    row = page.locator("tr").filter(has=page.get_by_text(row_label, exact=True))
    row.get_by_text(link).first.click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    return dialog


def _close(page, dialog) -> None:
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")


def browse_asset_pages(base_url: str) -> AssetPages:
    """Open ``discovered_runs``' check and ``flip_table``'s metadata in Chromium."""
    with browser.chromium_page() as page:
        page.goto(f"{base_url}/assets/discovered_runs?view=checks")
        page.get_by_text(RUNS_HEALTH_CHECK).first.click()
        page.get_by_text("Latest execution").wait_for()
        check_text = page.locator("body").inner_text()
        dialog = _dialog_of(page, "unreadable", _SHOW_JSON)
        unreadable_json = dialog.inner_text()
        _close(page, dialog)

        page.goto(f"{base_url}/assets/flip_table?view=overview")
        page.get_by_text("Latest materialization").wait_for()
        rows = page.locator("tr").filter(has=page.get_by_text(_SHOW_MARKDOWN))
        rows.first.wait_for()
        labels = [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())]
        images: list[tuple[int, int]] = []
        for label in labels:
            dialog = _dialog_of(page, label.strip(), _SHOW_MARKDOWN)
            if dialog.locator("img").count():
                page.wait_for_function(_IMAGES_LOADED_SCRIPT, arg=dialog.element_handle())
            images += [tuple(size) for size in dialog.evaluate(_DECODED_IMAGES_SCRIPT)]
            _close(page, dialog)
        return AssetPages(check_text, unreadable_json, images)


@pytest.fixture(scope="module")
def served_graph(tmp_path_factory: pytest.TempPathFactory) -> ServedGraph:
    root = tmp_path_factory.mktemp("webserver")
    runs = root / "runs"
    shutil.copytree(BUNDLED_CORPUS, runs)
    unreadable = runs / _UNREADABLE_RUN
    unreadable.mkdir()
    (unreadable / "classification_metrics.csv").write_text("model,dataset\n", encoding="utf-8")
    home = root / "dagster_home"
    browser.write_instance_config(home)
    environment = browser.platform_environment(home, root / "output")
    environment["DEEPECG_RUNS"] = str(runs)
    # Only the contract's assets: the optional transfer and report assets add a
    # minute on the bundled corpus, and leaving them unbuilt lets the test see
    # that the UI tells built from unbuilt nodes.
    browser.materialize_all(environment, asset_names=browser.ASSET_KEYS)
    log_path = root / "webserver.log"
    with browser.serve_webserver(environment, log_path) as server:
        capture = browser.capture_asset_graph(
            server.base_url,
            asset_names=_expected_names(),
            materialized_names=browser.ASSET_KEYS,
            partitions=len(CONTRAST_DATASETS),
        )
        pages = browse_asset_pages(server.base_url)
        stats = browser.partition_stats(server.base_url)
    return ServedGraph(
        capture=capture, pages=pages, server=server, log_path=log_path, partition_stats=stats
    )


def _graph_lines(capture: browser.GraphCapture) -> list[str]:
    return [line.strip() for line in capture.graph_text.splitlines() if line.strip()]


def test_contract_asset_keys_are_defined() -> None:
    defined = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert set(browser.ASSET_KEYS) <= defined


def test_graph_draws_every_asset_name_in_full(served_graph: ServedGraph) -> None:
    lines = set(_graph_lines(served_graph.capture))
    missing = [name for name in _expected_names() if name not in lines]
    assert not missing, f"asset names not drawn on the graph: {missing}"


def test_exactly_the_built_assets_show_as_materialised(served_graph: ServedGraph) -> None:
    """A node's text block (from its name to the next name) reads "Materialized"
    for exactly the unpartitioned assets built before the server started, and
    every partition of each per-dataset asset is built, as the UI's API says.

    This proves the webserver read the instance the assets were built into,
    and that the status on the graph tells built from unbuilt assets.
    """
    expected = set(_expected_names())
    current: str | None = None
    materialized: set[str] = set()
    for line in _graph_lines(served_graph.capture):
        if line in expected:
            current = line
        elif line == _MATERIALIZED and current is not None:
            materialized.add(current)
    assert materialized == set(browser.ASSET_KEYS) - set(PER_DATASET_ASSETS)
    datasets = len(CONTRAST_DATASETS)
    assert served_graph.partition_stats == dict.fromkeys(PER_DATASET_ASSETS, (datasets, datasets))


def test_graph_page_expands_every_group(served_graph: ServedGraph) -> None:
    assert served_graph.capture.url.startswith(served_graph.server.base_url + "/asset-groups")
    assert "expanded=" in served_graph.capture.url


def test_screenshot_is_a_png_of_the_window(served_graph: ServedGraph, tmp_path: Path) -> None:
    path = atomic_write_bytes(tmp_path / "asset-graph.png", served_graph.capture.png)
    data = path.read_bytes()
    assert data.startswith(_PNG_SIGNATURE)
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (browser.VIEWPORT_WIDTH, browser.VIEWPORT_HEIGHT)
    pixels = mpimg.imread(path)
    assert pixels.shape[:2] == (browser.VIEWPORT_HEIGHT, browser.VIEWPORT_WIDTH)
    assert pixels.std() > 0, "the screenshot is a single flat colour"


def test_discovered_runs_check_shows_its_diagnostics(served_graph: ServedGraph) -> None:
    """The check's page says what failed and why, and its JSON names the unreadable run."""
    pages = served_graph.pages
    assert "1 unreadable and 0 failed run director(y/ies)" in pages.check_text
    assert "A failure means the paper's tables are computed without" in pages.check_text
    assert f"{_UNREADABLE_RUN} (classification_metrics.csv has no data row)" in (
        pages.unreadable_json
    )


def test_flip_table_metadata_shows_its_rendered_image(served_graph: ServedGraph) -> None:
    """A Markdown metadata value of flip_table holds an <img> the browser decoded."""
    images = served_graph.pages.flip_table_images
    assert images, "no decoded <img> in any Markdown dialog of flip_table's metadata"
    assert all(width > 1 and height > 1 for width, height in images)


def _live_group_members(group: int) -> list[str]:
    """Processes of a process group that are still running (zombies excluded).

    Reads ``/proc`` because ``os.killpg(group, 0)`` also succeeds for zombies,
    which an init without reaping leaves behind in containers.
    """
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state, ppid, pgrp, ...
        state, _ppid, pgrp = text.rpartition(")")[2].split()[:3]
        if int(pgrp) == group and state != "Z":
            members.append(stat.parent.name)
    return members


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_server_is_stopped_after_the_block(served_graph: ServedGraph) -> None:
    assert _live_group_members(served_graph.server.pid) == []
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(served_graph.server.base_url + "/server_info", timeout=2)


def test_server_that_cannot_bind_reports_its_log(tmp_path: Path) -> None:
    home = tmp_path / "dagster_home"
    browser.write_instance_config(home)
    environment = browser.platform_environment(home, tmp_path / "output")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as occupant:
        occupant.bind((browser.LOCALHOST, 0))
        occupant.listen()
        port = occupant.getsockname()[1]
        with (
            pytest.raises(browser.WebserverError, match=r"exited with") as raised,
            browser.serve_webserver(environment, tmp_path / "webserver.log", port=port),
        ):
            pytest.fail("the server started on a port that was taken")
    assert "address already in use" in str(raised.value)
