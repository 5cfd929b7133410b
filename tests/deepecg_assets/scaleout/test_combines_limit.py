"""Every run with the cross-dataset assets carries the tag ``deploy/dagster.yaml`` limits.

With ``max_concurrent_runs`` above one, ``new_runs_sensor`` and the automation
sensor (separate daemon threads) may each request the combines before the
other's run is queued; the queue's tag concurrency limit then keeps the
second in the queue until the first has ended. This holds only if every
request with the combines has the tag and the deployment file limits it to
one run: checked here without servers (the PostgreSQL test checks the runs
the daemon really launched).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

from deepecg_assets.sensors import (
    AUTOMATION_INTERVAL_SECONDS,
    COMBINES_TAG,
    automation_sensor,
    refresh_requests,
    sensor_interval_seconds,
)

DEPLOY_INSTANCE = Path(__file__).resolve().parents[3] / "deploy" / "dagster.yaml"
DATASET_REFRESH = [dg.AssetKey("discovered_runs"), dg.AssetKey("run_metrics")]
COMBINES = [dg.AssetKey("flip_grid"), dg.AssetKey("statistical_report")]


def _requests(current, built, registered, **options):
    requests, _, _ = refresh_requests(
        current, built, registered, dataset_refresh=DATASET_REFRESH, combines=COMBINES, **options
    )
    return requests


def _with_combines(request: dg.RunRequest) -> bool:
    return bool(set(request.asset_selection or ()) & set(COMBINES))


def test_every_request_with_the_combines_is_tagged_and_no_other() -> None:
    cases = [
        _requests({"a": "2"}, {"a": "1"}, {"a"}),  # one dataset: partition and combines
        _requests({"a": "2"}, {"a": "1"}, {"a"}, others_in_flight=True),  # partition only
        _requests({"a": "2", "b": "2"}, {"a": "1", "b": "1"}, {"a", "b"}),  # one run each
        _requests({"a": "1"}, {"a": "1", "b": "1"}, {"a", "b"}),  # b is gone: combines only
    ]
    requests = [request for case in cases for request in case]
    assert [_with_combines(r) for r in requests] == [True, False, False, False, True]
    assert all((COMBINES_TAG in r.tags) == _with_combines(r) for r in requests)


def test_the_automation_sensor_tags_its_runs_and_ticks_as_often_as_the_sensor() -> None:
    assert automation_sensor.run_tags.get(COMBINES_TAG)
    expected = min(sensor_interval_seconds(), AUTOMATION_INTERVAL_SECONDS)
    assert automation_sensor.minimum_interval_seconds == expected


def test_the_deployment_queue_runs_one_combine_at_a_time_next_to_parallel_datasets() -> None:
    queue = yaml.safe_load(DEPLOY_INSTANCE.read_text(encoding="utf-8"))["run_coordinator"]
    config = queue["config"]
    assert config["max_concurrent_runs"] > 1
    assert {"key": COMBINES_TAG, "limit": 1} in config["tag_concurrency_limits"]
