"""The code location: ``deepecg_assets.definitions:defs``.

The default resources are built here, where the whole location is put
together: the frame store (Parquet, :mod:`deepecg_assets.parquet_frames`)
shares the one output-folder resource, so a path set for ``output_folder``
in the launchpad applies to stored frames too.
"""

import dagster as dg

from deepecg_assets.assets import ALL_ASSETS
from deepecg_assets.checks import ALL_CHECKS
from deepecg_assets.parquet_frames import ParquetFrames
from deepecg_assets.resources import AnalysisSettings, OutputFolderResource, RunRootsResource
from deepecg_assets.schedules import nightly_refresh
from deepecg_assets.sensors import automation_sensor, new_runs_sensor


def default_resources() -> dict[str, object]:
    """The resources of the code location, configured from the environment."""
    output = OutputFolderResource()
    return {
        "run_roots": RunRootsResource(),
        "output_folder": output,
        "analysis": AnalysisSettings(),
        "io_manager": ParquetFrames(output=output),
    }


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
