"""The Dagster UI in a real browser: the asset graph renders every asset.

Materialises the bundled example corpus into a throw-away instance, serves
``workspace.yaml`` with ``dagster-webserver`` on a free loopback port, and
opens the global asset graph in Debian's Chromium through Playwright. The
launching and browsing code lives in ``scripts/asset_graph_browser.py``,
shared with ``scripts/screenshot_asset_graph.py`` (which makes the README's
``docs/asset-graph.png``), so the README shows what this test checked.

Needs ``/usr/bin/chromium`` (Debian package ``chromium``); marked slow
(about 20 s on an idle machine: one materialisation, two server starts and
one page).
"""

from __future__ import annotations

import importlib.util
import socket
import struct
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from matplotlib import image as mpimg

from deepecg_assets.definitions import defs
from deepecgkit.io import atomic_write_bytes

pytestmark = pytest.mark.slow

_HELPER_PATH = Path(__file__).resolve().parents[2] / "scripts" / "asset_graph_browser.py"
#: The eight bytes every PNG file starts with.
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Status line a node shows once the UI has read its materialisation.
_MATERIALIZED = "Materialized"


def _load_helper() -> ModuleType:
    """Import ``scripts/asset_graph_browser.py``, which is not in a package."""
    name = "asset_graph_browser"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _HELPER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before running it: dataclasses look their module up by name.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


browser = _load_helper()


def _expected_names() -> list[str]:
    """The contract's asset keys plus every key the loaded Definitions hold."""
    defined = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    return sorted(set(browser.ASSET_KEYS) | defined)


@dataclass(frozen=True)
class ServedGraph:
    """One materialise-serve-browse cycle, shared by the tests of this module."""

    capture: browser.GraphCapture
    server: browser.RunningWebserver
    log_path: Path


@pytest.fixture(scope="module")
def served_graph(tmp_path_factory: pytest.TempPathFactory) -> ServedGraph:
    root = tmp_path_factory.mktemp("webserver")
    home = root / "dagster_home"
    browser.write_instance_config(home)
    environment = browser.platform_environment(home, root / "output")
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
        )
    return ServedGraph(capture=capture, server=server, log_path=log_path)


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
    for exactly the assets built before the server started.

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
    assert materialized == set(browser.ASSET_KEYS)


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
