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

The executor is dagster-dask's, with its submission loop written again here
for two defects of dagster-dask 0.29 on the pinned Dask release (see
:class:`SharedClusterDaskExecutor`); each step still runs through
``dagster_dask``'s own worker function.
"""

import logging
import signal
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import dask.distributed
from dagster._core.errors import raise_execution_interrupts
from dagster._core.execution.context.system import PlanOrchestrationContext
from dagster._core.execution.plan.plan import ExecutionPlan
from dagster._core.execution.plan.state import KnownExecutionState
from dagster._core.execution.plan.step import ExecutionStep
from dagster._core.instance.ref import InstanceRef
from dagster._utils import iterate_with_context
from dagster_dask.executor import (
    DaskExecutor,
    get_dask_resource_requirements,
    query_on_dask_worker,
)

from deepecg_assets import definitions

#: Environment variable holding the Dask scheduler's address.
DASK_SCHEDULER_ENV = "DEEPECG_DASK_SCHEDULER"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepCall:
    """Everything one step needs on its worker, as one argument that Dask passes on untouched.

    Dask looks inside every tuple, list and dict argument of a task for
    futures. A ``DagsterRun`` is a named tuple, and the partition subset of a
    run over a partition range (a ``KeyRangesPartitionsSubset``, what a
    single-run backfill over the datasets carries) refuses iteration, so
    passing the run bare fails every such run before its first step with
    "Iteration is not allowed on `@record` KeyRangesPartitionsSubset". A
    dataclass is not looked into.
    """

    recon_job: Any
    dagster_run: dg.DagsterRun
    run_config: Mapping[str, object]
    step_keys: Sequence[str]
    instance_ref: InstanceRef
    known_state: KnownExecutionState | None


@dataclass(frozen=True)
class StepEvents:
    """The events of one task's steps, as one object: Dask estimates the size of every task
    result, and looking into a list of Dagster events fails (a warning per task)."""

    events: tuple[dg.DagsterEvent, ...]

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + len(self.events) * EVENT_SIZE_ESTIMATE


#: Bytes Dask is told an event takes (its size matters only for data placement).
EVENT_SIZE_ESTIMATE = 1024


def execute_step_call(dependencies: Sequence[object], call: StepCall) -> StepEvents:
    """Run ``call``'s steps on this worker, in order, in one execution of the plan (after
    ``dependencies``, the upstream tasks' results)."""
    return StepEvents(
        tuple(
            query_on_dask_worker(
                dependencies,
                call.recon_job,
                call.dagster_run,
                call.run_config,
                call.step_keys,
                call.instance_ref,
                call.known_state,
            )
        )
    )


def step_chains(levels: Sequence[Sequence[ExecutionStep]]) -> list[list[ExecutionStep]]:
    """The plan's steps as chains, each to run as one Dask task; in an order that puts every
    chain after the chains it depends on.

    A step joins the chain of the step it reads when that is the only step
    it reads and it is the chain's last step, and nothing else that other
    steps read also reads that step: a run of assets that each read only the
    previous one (a table and the frame behind it), and a check of the last
    of them, cost one task instead of one each. Where several steps read one
    step they stay apart, so the workers still run them side by side.

    Why: every task rebuilds the execution plan, reopens the instance and
    initialises the resources on its worker, and waits for a scheduler round
    trip, which the in-process executor pays once per run (see
    ``benchmarks/bench_distributed.py`` and ``docs/benchmarks.md``).
    """
    steps = [step for level in levels for step in level]
    read = {key for step in steps for key in _upstream(step)}
    readers: dict[str, list[str]] = {}
    for step in steps:
        for key in _upstream(step):
            readers.setdefault(key, []).append(step.key)
    chain_of: dict[str, int] = {}
    chains: list[list[ExecutionStep]] = []
    for step in steps:  # level by level: every step after the steps it reads
        (tail, *more) = sorted(_upstream(step)) or [None]
        index = chain_of.get(tail) if tail is not None and not more else None
        if index is not None and chains[index][-1].key == tail:
            others = [key for key in readers[tail] if key != step.key]
            sole = not any(key in read for key in others)
            if sole and (step.key in read or not others or min(others) > step.key):
                chains[index].append(step)
                chain_of[step.key] = index
                continue
        chain_of[step.key] = len(chains)
        chains.append([step])
    return chains


def _upstream(step: ExecutionStep) -> set[str]:
    """The keys of the steps whose outputs ``step`` reads."""
    return {key for item in step.step_inputs for key in item.dependency_keys}


class SharedClusterDaskExecutor(DaskExecutor):
    """Every step of a run as a task on the existing Dask cluster at ``address``.

    Differs from dagster-dask's loop in three ways:

    - the step's arguments travel as one :class:`StepCall` (partition-range
      runs fail otherwise, see there);
    - a task's key holds the run id, not only the job's name: Dask treats two
      tasks with one key as one, so two runs of the asset job at once (the
      queued coordinator runs several) would otherwise share, say, the
      result of the first one's discovery step, and the second run's step
      would never run;
    - a chain of steps that each read the previous one is one task
      (:func:`step_chains`), not a task per step.
    """

    def __init__(self, address: str) -> None:
        super().__init__("existing", {"address": address})

    def execute(
        self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan
    ) -> Iterator[dg.DagsterEvent]:
        if not plan_context.instance.is_persistent:
            raise dg.DagsterInvariantViolationError(
                "Dask execution needs a persistent Dagster instance (set DAGSTER_HOME): "
                "the workers write their step events to it"
            )
        run = plan_context.dagster_run
        instance_ref = plan_context.instance.get_ref()
        futures: dict[str, dask.distributed.Future] = {}
        with dask.distributed.Client(self.cluster_configuration["address"]) as client:
            for chain in step_chains(execution_plan.get_steps_to_execute_by_level()):
                keys = [step.key for step in chain]
                inside = set(keys)
                upstream = {futures[key] for step in chain for key in _upstream(step) - inside}
                call = StepCall(
                    recon_job=plan_context.reconstructable_job,
                    dagster_run=run,
                    run_config=plan_context.run_config,
                    step_keys=keys,
                    instance_ref=instance_ref,
                    known_state=execution_plan.known_state,
                )
                # Every step of a chain asks for its own Dask resources; the task, all of them.
                resources: dict[str, float] = {}
                for step in chain:
                    for name, amount in get_dask_resource_requirements(step.tags).items():
                        resources[name] = max(resources.get(name, 0), amount)
                future = client.submit(
                    execute_step_call,
                    list(upstream),
                    call,
                    key=f"{run.run_id}.{keys[0]}",
                    resources=resources,
                )
                futures.update(dict.fromkeys(keys, future))
            finished = dask.distributed.as_completed(set(futures.values()), with_results=True)
            for _future, result in iterate_with_context(raise_execution_interrupts, finished):
                yield from result.events


@dg.executor(
    name="deepecg_dask",
    config_schema={"address": dg.Field(dg.StringSource, description="the scheduler's address")},
    requirements=dg.multiple_process_executor_requirements(),
)
def shared_cluster_dask_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
    """Every step on a worker of the existing Dask cluster at ``address``."""
    return SharedClusterDaskExecutor(init_context.executor_config["address"])


#: Every step on a worker of the cluster whose scheduler is ``$DEEPECG_DASK_SCHEDULER``.
deepecg_dask_executor = shared_cluster_dask_executor.configured(
    {"address": {"env": DASK_SCHEDULER_ENV}}, name="deepecg_dask_executor"
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


def dask_setup(worker: object) -> None:
    """Dask's hook for a preloaded module (``--preload deepecg_assets.distributed``): make
    SIGTERM end this worker's child processes again where it was inherited as ignored.

    Dagster captures each step's stdout and stderr through two ``tail -F``
    processes that it stops with SIGTERM, waiting up to 30 s for each. An
    ignored signal stays ignored across ``exec``, so a worker started by a
    process that ignores SIGTERM hands that on to its tails: every step then
    waits a minute after it finished and leaves two ``tail`` processes
    running. A Dagster process ignores SIGTERM whenever it started with
    SIGINT ignored (a shell's background job): Dagster maps SIGTERM to
    SIGINT's handler (``dagster._utils.interrupts.setup_interrupt_handlers``),
    and a build run in such a process hands that on to a local cluster's
    workers. Measured on 100,000 runs (``docs/benchmarks.md``, distributed):
    16 steps of the full build waited 60 s each. Only an ignored SIGTERM is
    reset, to the default; a handler someone installed is left alone.
    """
    del worker  # the hook's signature; nothing about the worker is needed
    if threading.current_thread() is not threading.main_thread():
        return  # signal dispositions can only be changed from the main thread
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        logger.info("SIGTERM was ignored in this Dask worker; restored so step log tails stop")
