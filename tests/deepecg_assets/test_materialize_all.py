""" "Materialize all" in the Dagster UI under ``dagster dev``, clicked in a real browser.

The user's path of issue 12: the README's build has run, ``dagster dev``
(webserver and daemon) is started on that instance, and the user presses
"Materialize all" on the global asset graph, picks all partitions and
launches the backfill. The test does exactly that in Debian's Chromium through
Playwright, waits for the daemon to finish the backfill, and asserts that the
backfill succeeded, that every asset (every partition of the per-dataset ones)
was materialised again by it, and that the frames and tables it wrote equal
the build's byte for byte.

The corpus is a small slice of the bundled one (two models x two datasets x
two seeds, without the encoder checkpoints and stored predictions, as the
scale-out tests' corpus) so the build's and the backfill's work stays a few
seconds; the point is the launch path (asset backfill over mixed partitions
definitions, single-run backfill policy, the daemon), not the statistics,
which the transfer and report tests check on the files left out here.
Marked slow: it starts ``dagster dev`` and Chromium.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from playwright.sync_api import Locator, TimeoutError as PlaywrightTimeoutError

from deepecg_assets.build import materialize_everything
from deepecg_assets.definitions import defs
from deepecg_assets.partitions import DATASETS, PER_DATASET_ASSETS
from deepecg_assets.resources import BUNDLED_CORPUS
from deepecg_assets.sensors import IN_FLIGHT_STATUSES
from tests.deepecg_assets.graph_browser import browser
from tests.deepecg_assets.output_trees import tree_bytes
from tests.deepecg_assets.scaleout.conftest import DROPPED_FILES

pytestmark = pytest.mark.slow

#: The slice of the bundled corpus the test builds.
_MODELS = ("logreg-features", "simple-cnn")
_DATASETS = ("synthetic-irregular-rr", "synthetic-long-pr")
_SEEDS = (0, 1)
#: Longest wait for the daemon to finish the backfill (a loaded 2-core machine is slow).
_BACKFILL_TIMEOUT_S = 600
_POLL_S = 2.0
#: Longest wait for ``dagster dev`` to answer (it starts three processes).
_START_TIMEOUT_S = 300
#: The code server's gRPC answers may take long on a loaded machine; Dagster's default is 60 s.
_GRPC_TIMEOUT_S = "600"
#: Longest wait for the "Materialize all" dialog to choose every partition.
_DIALOG_TIMEOUT_S = 120
#: Wait after each press of the dialog's "All" before it is pressed again.
_DIALOG_RETRY_S = 10
_BACKFILLS_QUERY = (
    "{ partitionBackfillsOrError { ... on PartitionBackfills { results { id status } } } }"
)


#: Files of the bundled runs the slice leaves out: probing the encoder checkpoints and
#: drawing a reliability diagram per run took about 17 of the fixture's 42 CPU seconds
#: (docs/benchmarks.md, "Session 19").
_LEFT_OUT = shutil.ignore_patterns(*DROPPED_FILES)
#: The output folders the comparison covers (caches and the report's log are not results).
_COMPARED = ("frames", "tables")


def _outputs(output: Path) -> dict[str, dict[str, bytes]]:
    return {name: tree_bytes(output / name) for name in _COMPARED}


def _graphql(base_url: str, query: str) -> dict:
    request = urllib.request.Request(
        f"{base_url}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["data"]


def _dagster_dev(environment: dict[str, str], log_path: Path) -> Iterator[str]:
    """``dagster dev`` (webserver, daemon, code server) on a loopback port; yields its URL."""
    port = browser.find_free_port()
    command = [sys.executable, "-m", "dagster", "dev", "-m", "deepecg_assets.definitions"]
    command += ["-h", browser.LOCALHOST, "-p", str(port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=browser.REPO_ROOT,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base_url = f"http://{browser.LOCALHOST}:{port}"
    try:
        browser._wait_until_answering(
            f"{base_url}/server_info",
            process,
            log_path,
            timeout_s=_START_TIMEOUT_S,
            server="dagster dev",
        )
        yield base_url
    finally:
        browser._stop_process_group(process)


def _choose_all_partitions(dialog: Locator) -> None:
    """Press the dialog's "All" until it has chosen every dataset partition.

    One CI run on a loaded machine pressed "All" once and waited 45 s for a
    count that never came. The cause was not reproduced here (a late answer to
    the dialog's partition-health query alone does not do it), so "All" is
    pressed again until the dialog counts every partition, within one overall
    deadline, and a failure quotes what the dialog then read.
    """
    chosen = dialog.get_by_text(f"{len(_DATASETS)} partitions")
    deadline = time.monotonic() + _DIALOG_TIMEOUT_S
    while True:
        dialog.get_by_role("button", name="All", exact=True).click()
        try:
            chosen.wait_for(timeout=_DIALOG_RETRY_S * 1000)
            return
        except PlaywrightTimeoutError:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the dialog never chose {len(_DATASETS)} partitions; it reads: "
                    + " | ".join(dialog.inner_text().split("\n"))
                ) from None


def _click_materialize_all(base_url: str) -> None:
    """Press "Materialize all", choose all partitions, and launch the backfill."""
    with browser.chromium_page() as page:
        page.goto(base_url + browser.ASSET_GRAPH_PATH)
        page.locator("[data-svg-viewport] svg").first.wait_for()
        # A first visit may open Dagster's community dialog over the page.
        skip = page.get_by_role("button", name="Skip")
        if skip.count():
            skip.click()
        page.get_by_role("button", name="Materialize all").click()
        dialog = page.locator("[role=dialog]")
        _choose_all_partitions(dialog)
        dialog.get_by_role("button", name="Launch backfill").click()
        dialog.wait_for(state="detached")


def _wait_for_backfill(base_url: str, instance: dg.DagsterInstance) -> str:
    """The status of the one backfill once it and every run it started are done."""
    deadline = time.monotonic() + _BACKFILL_TIMEOUT_S
    status = "none"
    while time.monotonic() < deadline:
        backfills = _graphql(base_url, _BACKFILLS_QUERY)["partitionBackfillsOrError"]["results"]
        status = backfills[0]["status"] if backfills else "none"
        idle = not instance.get_run_records(
            filters=dg.RunsFilter(statuses=list(IN_FLIGHT_STATUSES))
        )
        if status not in ("none", "REQUESTED") and idle:
            return status
        time.sleep(_POLL_S)
    raise AssertionError(f"the backfill did not finish within {_BACKFILL_TIMEOUT_S} s: {status}")


@pytest.fixture(scope="module")
def materialized_from_the_ui(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not browser.CHROMIUM_EXECUTABLE.exists():
        pytest.fail(f"no browser at {browser.CHROMIUM_EXECUTABLE}: apt-get install chromium")
    root = tmp_path_factory.mktemp("materialize_all")
    runs = root / "runs"
    for model in _MODELS:
        for dataset in _DATASETS:
            for seed in _SEEDS:
                name = f"{model}_{dataset}_seed{seed}"
                shutil.copytree(BUNDLED_CORPUS / name, runs / name, ignore=_LEFT_OUT)
    home, output = root / "dagster_home", root / "output"
    browser.write_instance_config(home)
    environment = browser.platform_environment(home, output)
    environment["DEEPECG_RUNS"] = str(runs)
    environment["DAGSTER_GRPC_TIMEOUT_SECONDS"] = _GRPC_TIMEOUT_S
    saved = dict(os.environ)
    os.environ.update(environment)
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            materialize_everything(instance, verbose=False, stream=io.StringIO())
        built = _outputs(output)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            before = {r.dagster_run.run_id for r in instance.get_run_records()}
            for base_url in _dagster_dev(environment, root / "dagster-dev.log"):
                clicked_at = time.time()
                _click_materialize_all(base_url)
                status = _wait_for_backfill(base_url, instance)
            launched = [r for r in instance.get_run_records() if r.dagster_run.run_id not in before]
            latest = {
                key: instance.get_latest_materialization_event(key)
                for key in defs.resolve_asset_graph().get_all_asset_keys()
            }
            partitions = {
                name: instance.get_materialized_partitions(dg.AssetKey(name))
                for name in PER_DATASET_ASSETS
            }
            keys = set(instance.get_dynamic_partitions(DATASETS.name))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {
        "status": status,
        "launched": launched,
        "latest": latest,
        "clicked_at": clicked_at,
        "partitions": partitions,
        "keys": keys,
        "built": built,
        "rebuilt": _outputs(output),
    }


def test_the_backfill_succeeds(materialized_from_the_ui: dict) -> None:
    assert materialized_from_the_ui["status"] == "COMPLETED_SUCCESS"
    assert materialized_from_the_ui["launched"], "the click launched no run"
    assert all(r.dagster_run.is_success for r in materialized_from_the_ui["launched"])


def test_every_asset_is_materialised_again(materialized_from_the_ui: dict) -> None:
    stale = [
        key.to_user_string()
        for key, event in materialized_from_the_ui["latest"].items()
        if event is None or event.timestamp < materialized_from_the_ui["clicked_at"]
    ]
    assert not stale, f"not materialised by the backfill: {stale}"
    assert materialized_from_the_ui["keys"] == set(_DATASETS)
    for name, materialised in materialized_from_the_ui["partitions"].items():
        assert materialised == materialized_from_the_ui["keys"], name


def test_outputs_equal_the_build(materialized_from_the_ui: dict) -> None:
    assert materialized_from_the_ui["rebuilt"] == materialized_from_the_ui["built"]
