"""Serve the Dagster UI of the code location and photograph its asset graph.

One module drives both the real-browser test
(``tests/deepecg_assets/test_webserver.py``) and
``scripts/screenshot_asset_graph.py``, which regenerates ``docs/asset-graph.png``
for the README, so the picture in the README is the page the test checked.

Choices a reader could not reconstruct from the code:

- ``dagster-webserver`` alone, not ``dagster dev``: drawing the graph needs
  no daemon, and one process tree fewer starts faster and leaves less to stop.
- The assets are materialised first, through the same ``dagster asset
  materialize`` command the README gives, so the nodes show their status.
- The browser is Debian's ``chromium`` driven by Playwright; Playwright never
  downloads one. Without the background-networking flags Chromium keeps
  retrying connections to Google services, and on a closed network that
  stalls page loads.
- The instance disables telemetry and the UI's first-visit newsletter
  dialog, which would otherwise cover the graph in the screenshot.
- The graph opens with its groups collapsed; the UI's own "expand all
  groups" shortcut (Alt+E) opens them without this module knowing the group
  names. The navigation bar and the asset sidebar are hidden first, so the
  UI fits the graph to the full width, at a scale where each node shows its
  whole name (below a scale of 0.6 the UI abbreviates names to 18
  characters). Nodes show only their description and status, so the fitted
  graph also fits the window's height.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

#: The repository root: where ``workspace.yaml`` lives and every command runs.
REPO_ROOT = Path(__file__).resolve().parents[1]
#: Workspace file that loads ``deepecg_assets.definitions``.
WORKSPACE_FILE = REPO_ROOT / "workspace.yaml"
#: Assets left out of the browser check: they only have work to do where runs kept
#: checkpoints or predictions, and on the bundled corpus they take about a minute.
SLOW_ASSETS = frozenset({"transfer_matrix", "transfer_table", "statistical_report"})


def asset_keys() -> tuple[str, ...]:
    """Every asset of ``defs`` but :data:`SLOW_ASSETS`, in graph order (dependencies first)."""
    from deepecg_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    ordered = graph.toposorted_asset_keys
    return tuple(
        name for name in (key.to_user_string() for key in ordered) if name not in SLOW_ASSETS
    )


#: The analysis and table assets the browser must draw and build.
ASSET_KEYS: tuple[str, ...] = asset_keys()
#: Debian's Chromium (package ``chromium``).
CHROMIUM_EXECUTABLE = Path("/usr/bin/chromium")
#: Flags that keep a headless Chromium quiet on a machine without internet.
CHROMIUM_ARGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: Browser window in CSS pixels: wide and tall enough for the expanded graph (five
#: groups, the per-dataset assets among them) at the UI's largest zoom-to-fit scale.
VIEWPORT_WIDTH = 2600
VIEWPORT_HEIGHT = 3400
#: Host the webserver binds: loopback only, nothing is exposed.
LOCALHOST = "127.0.0.1"
#: Path of the global asset lineage page in Dagster 1.13's UI.
ASSET_GRAPH_PATH = "/asset-groups"
#: Instance settings for a throw-away ``DAGSTER_HOME``.
INSTANCE_YAML = "telemetry:\n  enabled: false\nnux:\n  enabled: false\n"
#: Seconds allowed for ``dagster asset materialize``: about 5 s for the
#: contract's assets, over a minute with the transfer matrix of the corpus.
MATERIALIZE_TIMEOUT_S = 300.0
#: Seconds allowed for the webserver to answer ``/server_info``.
SERVER_START_TIMEOUT_S = 60.0
#: Seconds allowed for the page to draw every asset node.
GRAPH_RENDER_TIMEOUT_S = 45.0
#: Seconds the server gets to exit after SIGTERM before it is killed.
SERVER_STOP_TIMEOUT_S = 10.0
#: Pause between readiness probes, and the time one probe may take.
POLL_INTERVAL_S = 0.25
PROBE_TIMEOUT_S = 2.0
#: Characters of a failing command's log quoted in an error message.
LOG_TAIL_CHARS = 4000
#: Environment variables of the platform that would point it at other runs.
_PLATFORM_VARIABLES = ("DEEPECG_RUNS", "DEEPECG_RECURSIVE")


class WebserverError(RuntimeError):
    """The webserver, the materialisation or the page did not come up as expected."""


@dataclass(frozen=True)
class GraphCapture:
    """What the browser saw on the asset graph page.

    Attributes:
        url: The page's final address (it carries the expanded groups).
        graph_text: Visible text of the graph canvas, one node label per line.
        png: Screenshot of the whole window, ``VIEWPORT_WIDTH`` by
            ``VIEWPORT_HEIGHT`` pixels.
    """

    url: str
    graph_text: str
    png: bytes


def _tail(text: str) -> str:
    """The last ``LOG_TAIL_CHARS`` characters of a log, for an error message."""
    return text[-LOG_TAIL_CHARS:]


def write_instance_config(dagster_home: Path) -> Path:
    """Create ``dagster_home`` with a ``dagster.yaml`` for a local, offline instance.

    Returns:
        Path of the written ``dagster.yaml``.
    """
    dagster_home.mkdir(parents=True, exist_ok=True)
    config = dagster_home / "dagster.yaml"
    config.write_text(INSTANCE_YAML, encoding="utf-8")
    return config


def platform_environment(dagster_home: Path, output: Path) -> dict[str, str]:
    """Environment for the platform's commands: this instance, this output folder.

    ``DEEPECG_RUNS`` and ``DEEPECG_RECURSIVE`` are removed, so the location
    analyses its bundled example corpus whatever the caller's shell holds.
    """
    environment = {
        name: value for name, value in os.environ.items() if name not in _PLATFORM_VARIABLES
    }
    environment["DAGSTER_HOME"] = str(dagster_home)
    environment["DEEPECG_OUTPUT"] = str(output)
    return environment


def materialize_all(
    environment: Mapping[str, str], *, asset_names: Sequence[str] | None = None
) -> None:
    """Build assets once with ``dagster asset materialize``, checks included.

    The per-dataset assets are partitioned by dataset and a CLI selection
    cannot mix partitions definitions, so this runs what the build command
    (``python -m deepecg_assets.build``) runs, as commands: ``discovered_runs``;
    then, with the instance's dataset partitions made to match the datasets it
    found, the per-dataset assets over the whole partition range in one run;
    then the other assets.

    Args:
        environment: Environment of the command (see :func:`platform_environment`).
        asset_names: Asset keys to build; ``None`` builds every asset.

    Raises:
        WebserverError: A command failed or ran past ``MATERIALIZE_TIMEOUT_S``;
            the message quotes the end of its output.
    """
    from deepecg_assets.definitions import defs
    from deepecg_assets.partitions import PER_DATASET_ASSETS
    from deepecg_assets.sensors import DISCOVERY_ASSET

    every = [key.to_user_string() for key in defs.resolve_asset_graph().toposorted_asset_keys]
    names = every if asset_names is None else list(asset_names)
    per_dataset = [name for name in names if name in PER_DATASET_ASSETS]
    rest = [name for name in names if name not in PER_DATASET_ASSETS and name != DISCOVERY_ASSET]
    if DISCOVERY_ASSET in names:
        _materialize_command(environment, [DISCOVERY_ASSET])
    if per_dataset:
        keys = _sync_dataset_partitions(environment)
        if keys:
            _materialize_command(environment, per_dataset, partition_range=(keys[0], keys[-1]))
    if rest:
        _materialize_command(environment, rest)


def _sync_dataset_partitions(environment: Mapping[str, str]) -> list[str]:
    """The instance's dataset partitions made those of the last discovery (as the build does)."""
    import dagster as dg

    from deepecg_assets.build import sync_dataset_partitions
    from deepecg_assets.partitions import PARTITIONS_METADATA, latest_discovery_metadata
    from deepecg_assets.resources import OutputFolderResource

    with dg.DagsterInstance.from_config(environment["DAGSTER_HOME"]) as instance:
        metadata = latest_discovery_metadata(instance)
        if not metadata:
            raise WebserverError("discovered_runs was never materialised: no dataset partitions")
        keys = list(metadata[PARTITIONS_METADATA])
        output = OutputFolderResource(path=environment["DEEPECG_OUTPUT"])
        return sync_dataset_partitions(instance, keys, frames_dir=output.frames_dir())


def _materialize_command(
    environment: Mapping[str, str],
    asset_names: Sequence[str],
    *,
    partition_range: tuple[str, str] | None = None,
) -> None:
    """One ``dagster asset materialize`` of ``asset_names`` (over ``partition_range``)."""
    command = [
        sys.executable,
        "-m",
        "dagster",
        "asset",
        "materialize",
        "-m",
        "deepecg_assets.definitions",
        "--select",
        ",".join(asset_names),
    ]
    if partition_range is not None:
        command += ["--partition-range", "...".join(partition_range)]
    try:
        result = subprocess.run(
            command,
            cwd=REPO_ROOT,
            env=dict(environment),
            capture_output=True,
            text=True,
            timeout=MATERIALIZE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or "") + (exc.stderr or "")
        if isinstance(output, bytes):
            output = output.decode(errors="replace")
        raise WebserverError(
            f"dagster asset materialize ran past {MATERIALIZE_TIMEOUT_S:.0f} s:\n{_tail(output)}"
        ) from None
    if result.returncode != 0:
        raise WebserverError(
            f"dagster asset materialize exited with {result.returncode}:\n"
            f"{_tail(result.stdout + result.stderr)}"
        )


def find_free_port(host: str = LOCALHOST) -> int:
    """A TCP port on ``host`` that nothing listens on at the moment of asking.

    The port is released before the server binds it, so another process
    could take it in between; the server would then exit at once and
    :func:`serve_webserver` would report the clash with the server's log.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _server_answers(url: str) -> bool:
    """Whether a GET of ``url`` succeeds with status 200."""
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _stop_process_group(process: subprocess.Popen[bytes]) -> None:
    """Stop a server started in its own session, with every child it spawned.

    SIGTERM first (the webserver then stops its code server cleanly), SIGKILL
    for whatever is left after ``SERVER_STOP_TIMEOUT_S``. The group is signalled
    even when the leader has already exited, since its children may not have.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=SERVER_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@dataclass(frozen=True)
class RunningWebserver:
    """A webserver started by :func:`serve_webserver`.

    Attributes:
        base_url: Address of the UI, for example ``http://127.0.0.1:41234``.
        pid: Process id of the server, which is also its process group id.
    """

    base_url: str
    pid: int


@contextlib.contextmanager
def serve_webserver(
    environment: Mapping[str, str], log_path: Path, *, port: int | None = None
) -> Iterator[RunningWebserver]:
    """Run ``dagster-webserver`` on a loopback port for the ``with`` block.

    The server runs in a session of its own; leaving the block, normally or
    by an exception, stops that whole process group (the webserver and the
    code server it spawns).

    Args:
        environment: Environment of the server (see :func:`platform_environment`).
        log_path: File that receives the server's stdout and stderr; kept so a
            failure can be read in full.
        port: Port to bind; ``None`` picks a free one.

    Yields:
        The running server, once it answers ``/server_info``.

    Raises:
        WebserverError: The server exited or did not answer within
            ``SERVER_START_TIMEOUT_S``; the message quotes the end of its log.
    """
    port = find_free_port() if port is None else port
    base_url = f"http://{LOCALHOST}:{port}"
    command = [
        sys.executable,
        "-m",
        "dagster_webserver",
        "-w",
        str(WORKSPACE_FILE),
        "-h",
        LOCALHOST,
        "-p",
        str(port),
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=dict(environment),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_until_answering(f"{base_url}/server_info", process, log_path)
        yield RunningWebserver(base_url=base_url, pid=process.pid)
    finally:
        _stop_process_group(process)


def _wait_until_answering(
    url: str,
    process: subprocess.Popen[bytes],
    log_path: Path,
    *,
    timeout_s: float = SERVER_START_TIMEOUT_S,
    server: str = "dagster-webserver",
) -> None:
    """Poll ``url`` until it answers, ``server`` exits, or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        if _server_answers(url):
            return
        returncode = process.poll()
        if returncode is not None:
            log = log_path.read_text(encoding="utf-8", errors="replace")
            raise WebserverError(f"{server} exited with {returncode}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            log = log_path.read_text(encoding="utf-8", errors="replace")
            raise WebserverError(
                f"{server} did not answer {url} within {timeout_s:.0f} s:\n{_tail(log)}"
            )
        time.sleep(POLL_INTERVAL_S)


#: JavaScript predicate over the graph canvas. The canvas text lists each
#: node as a block that starts with the asset's name; the predicate holds when
#: every name in ``drawn`` is a line of its own (so drawn in full, not
#: abbreviated) and the block of every name in ``materialized`` reads
#: "Materialized" or, for an asset partitioned by dataset (whose node shows a
#: partition count instead of a status word), "<partitions> partitions".
_GRAPH_DRAWN_SCRIPT = """([drawn, materialized, partitions]) => {
    const canvas = document.querySelector('[data-svg-viewport]');
    if (!canvas) { return false; }
    const names = new Set(drawn);
    const present = new Set();
    const done = new Set();
    let current = null;
    for (const raw of canvas.innerText.split('\\n')) {
        const line = raw.trim();
        if (names.has(line)) {
            current = line;
            present.add(line);
        } else if ((line === 'Materialized' || line === partitions) && current !== null) {
            done.add(current);
        }
    }
    return drawn.every((name) => present.has(name))
        && materialized.every((name) => done.has(name));
}"""
#: Facets each node shows (the UI keeps the choice in local storage): the
#: docstring and the materialisation status. The default rows (checks, kinds,
#: partitions, automation, latest event) make the nodes so tall that the
#: fitted graph no longer fits the window's height.
_NODE_FACETS_SCRIPT = (
    "window.localStorage.setItem('asset-node-facets', JSON.stringify(['description', 'status']));"
)
#: Wheel distance (CSS pixels) that moves the fitted graph down from under the
#: search toolbar, which overlays the top of the canvas the UI centres it in.
_TOOLBAR_CLEARANCE_WHEEL_PX = 60


@contextlib.contextmanager
def chromium_page() -> Iterator[Page]:
    """A page of Debian's Chromium at the window size and waiting limit every UI check uses.

    The browser is closed when the block ends, also when it raises.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM_EXECUTABLE), args=list(CHROMIUM_ARGS)
        )
        try:
            page = browser.new_page(viewport={"width": VIEWPORT_WIDTH, "height": VIEWPORT_HEIGHT})
            page.set_default_timeout(GRAPH_RENDER_TIMEOUT_S * 1000)
            yield page
        finally:
            browser.close()


def capture_asset_graph(
    base_url: str,
    *,
    asset_names: Sequence[str] = ASSET_KEYS,
    materialized_names: Sequence[str] = ASSET_KEYS,
    partitions: int = 0,
) -> GraphCapture:
    """Open the global asset graph in Chromium, expand it, and photograph it.

    Waits until every name in ``asset_names`` is drawn in full on the graph
    canvas and the nodes of ``materialized_names`` show the status
    "Materialized". The UI abbreviates names when it draws nodes small, so a
    pass also means the fitted graph is readable.

    Args:
        base_url: Address of a running webserver.
        asset_names: Asset key names the graph must show; names the graph
            does not define are never drawn, so they fail the wait.
        materialized_names: Assets the caller materialised into the
            webserver's instance; they must be among ``asset_names``.
        partitions: How many dataset partitions the instance holds (the
            count a partitioned node shows).

    Returns:
        The final page address, the canvas text and a screenshot.

    Raises:
        ValueError: ``materialized_names`` holds a name ``asset_names`` lacks.
        WebserverError: Chromium is missing, or the page did not draw every
            asset within ``GRAPH_RENDER_TIMEOUT_S``; the message quotes what
            the canvas did show.
    """
    from playwright.sync_api import Error as PlaywrightError

    unknown = sorted(set(materialized_names) - set(asset_names))
    if unknown:
        raise ValueError(
            f"materialized_names {unknown} are not in asset_names; "
            "every materialised asset must also be expected on the graph"
        )
    if not CHROMIUM_EXECUTABLE.exists():
        raise WebserverError(
            f"no browser at {CHROMIUM_EXECUTABLE}: install Debian's chromium "
            "(apt-get install chromium), or deselect this check with -m 'not slow'"
        )
    with chromium_page() as page:
        page.add_init_script(_NODE_FACETS_SCRIPT)
        page.goto(base_url + ASSET_GRAPH_PATH)
        canvas = page.locator("[data-svg-viewport]")
        canvas.locator("svg").first.wait_for()
        page.get_by_text("Hide navigation").click()
        page.locator('button:has([aria-label="panel_show_right"])').click()
        page.keyboard.press("Alt+KeyE")
        page.wait_for_url(re.compile(r"[?&]expanded="))
        try:
            page.wait_for_function(
                _GRAPH_DRAWN_SCRIPT,
                arg=[list(asset_names), list(materialized_names), f"{partitions} partitions"],
            )
        except PlaywrightError:
            lines = {line.strip() for line in canvas.inner_text().splitlines()}
            absent = [name for name in asset_names if name not in lines]
            raise WebserverError(
                f"the asset graph did not draw every asset as materialised within "
                f"{GRAPH_RENDER_TIMEOUT_S:.0f} s; not drawn in full: {absent}; "
                f"the canvas showed:\n{_tail(canvas.inner_text())}"
            ) from None
        box = canvas.bounding_box()
        if box is not None:
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.mouse.wheel(0, -_TOOLBAR_CLEARANCE_WHEEL_PX)
        return GraphCapture(url=page.url, graph_text=canvas.inner_text(), png=page.screenshot())


#: GraphQL query of each asset's partition statistics (None for an unpartitioned asset).
_PARTITION_STATS_QUERY = (
    "{ assetNodes { assetKey { path } partitionStats { numMaterialized numPartitions } } }"
)


def partition_stats(base_url: str) -> dict[str, tuple[int, int]]:
    """``{asset: (materialised partitions, partitions)}`` of each partitioned asset (UI API).

    The graph canvas shows a partitioned node's partition count, not whether
    its partitions are built; the webserver's GraphQL endpoint says that.
    """
    request = urllib.request.Request(
        base_url + "/graphql",
        data=json.dumps({"query": _PARTITION_STATS_QUERY}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=SERVER_START_TIMEOUT_S) as response:
        nodes = json.loads(response.read())["data"]["assetNodes"]
    return {
        "/".join(node["assetKey"]["path"]): (
            node["partitionStats"]["numMaterialized"],
            node["partitionStats"]["numPartitions"],
        )
        for node in nodes
        if node["partitionStats"] is not None
    }
