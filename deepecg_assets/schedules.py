"""``nightly_refresh``: rebuild every asset once a day, whatever the sensor saw."""

import dagster as dg

#: 03:00 every day, when no one is waiting for a table.
NIGHTLY_CRON = "0 3 * * *"

nightly_refresh = dg.ScheduleDefinition(
    name="nightly_refresh",
    cron_schedule=NIGHTLY_CRON,
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Rebuilds every asset once a day.",
)

#: Evaluates the eager automation conditions of the downstream assets.
automation_sensor = dg.AutomationConditionSensorDefinition(
    "deepecg_automation_sensor",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Materialises downstream assets as soon as their inputs change (eager).",
)
