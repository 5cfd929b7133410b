"""``nightly_refresh``: rebuild every asset once a day, whatever the sensor saw."""

import dagster as dg

from deepecgkit._compat import moved_names

#: 03:00 every day, when no one is waiting for a table.
NIGHTLY_CRON = "0 3 * * *"

nightly_refresh = dg.ScheduleDefinition(
    name="nightly_refresh",
    cron_schedule=NIGHTLY_CRON,
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description=(
        "Rebuilds every asset at 03:00 each day, whatever new_runs_sensor saw: a safety net "
        "for changes the sensor cannot see (a new library version, an edited setting)."
    ),
)


#: Names that moved (old import paths, one release).
__moved__ = {"automation_sensor": "deepecg_assets.sensors"}
__getattr__ = moved_names(__name__, __moved__)
