"""The code location for several machines: ``deepecg_assets.distributed:defs``.

It holds every definition of :mod:`deepecg_assets.definitions` and changes only
the executor: each step of a run is sent to a worker of an existing Dask
cluster (``dagster-dask``, the ``dask`` extra) instead of running in the run's
own process. The scheduler's address comes from ``DEEPECG_DASK_SCHEDULER``
(for example ``tcp://scheduler.internal:8786``), read when a run starts, so
the same code location serves every site.

Steps hand their frames to each other through the output folder, so
``DEEPECG_OUTPUT`` (and ``DEEPECG_RUNS``) must name shared storage that every
worker sees at the same path, and the Dagster instance must be persistent
(``DAGSTER_HOME``, PostgreSQL for several machines): each worker writes its
step events there. ``deploy/README.md`` says how to start the scheduler and
the workers, and why Dask rather than Celery.
"""

import dagster as dg
from dagster_dask import dask_executor

from deepecg_assets import definitions

#: Environment variable holding the Dask scheduler's address.
DASK_SCHEDULER_ENV = "DEEPECG_DASK_SCHEDULER"

#: Every step on a worker of the cluster whose scheduler is ``$DEEPECG_DASK_SCHEDULER``.
deepecg_dask_executor = dask_executor.configured(
    {"cluster": {"existing": {"address": {"env": DASK_SCHEDULER_ENV}}}},
    name="deepecg_dask_executor",
)


def with_executor(base: dg.Definitions, executor: dg.ExecutorDefinition) -> dg.Definitions:
    """``base`` with every definition kept and ``executor`` in place of its own."""
    return dg.Definitions(
        assets=base.assets,
        asset_checks=base.asset_checks,
        schedules=base.schedules,
        sensors=base.sensors,
        jobs=base.jobs,
        resources=base.resources,
        loggers=base.loggers,
        metadata=base.metadata,
        executor=executor,
    )


defs = with_executor(definitions.defs, deepecg_dask_executor)
