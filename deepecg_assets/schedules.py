"""``nightly_refresh``: rebuild every asset once a day, whatever the sensor saw."""

import dagster as dg

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

#: Evaluates the eager automation conditions of the downstream assets.
automation_sensor = dg.AutomationConditionSensorDefinition(
    "deepecg_automation_sensor",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Watches every asset's upstream materialisations and materialises the downstream "
        "assets (frames, tables, report) as soon as an input changes (eager automation)."
    ),
)
