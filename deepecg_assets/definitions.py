"""The code location: ``deepecg_assets.definitions:defs``."""

import dagster as dg

from deepecg_assets.assets import ALL_ASSETS
from deepecg_assets.checks import ALL_CHECKS
from deepecg_assets.resources import default_resources
from deepecg_assets.schedules import automation_sensor, nightly_refresh
from deepecg_assets.sensors import new_runs_sensor

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    sensors=[new_runs_sensor, automation_sensor],
    schedules=[nightly_refresh],
    resources=default_resources(),
    # One process: the frames are small and a subprocess per step would spend
    # seconds re-importing pandas and scipy. deploy/dagster.yaml shows how to
    # scale out.
    executor=dg.in_process_executor,
)
