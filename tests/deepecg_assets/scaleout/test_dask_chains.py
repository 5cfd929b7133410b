"""How the Dask executor groups a run's steps into tasks (:func:`step_chains`), without servers.

Each task costs a plan, an instance and the resources on its worker, so a
run of steps that each read only the previous one is one task; steps that
several others read end their chain, so those readers still run side by side.
"""

from __future__ import annotations

import itertools

from dagster._core.execution.api import create_execution_plan

from deepecg_assets.definitions import defs
from deepecg_assets.distributed import step_chains


def _upstream(step) -> set[str]:
    return {key for item in step.step_inputs for key in item.dependency_keys}


def test_chains_cover_every_step_once_in_an_order_the_workers_can_run() -> None:
    plan = create_execution_plan(defs.resolve_implicit_global_asset_job_def())
    levels = plan.get_steps_to_execute_by_level()
    steps = {step.key: step for level in levels for step in level}
    chains = step_chains(levels)
    keys = [step.key for chain in chains for step in chain]
    assert sorted(keys) == sorted(steps), "every step in exactly one chain"
    assert len(chains) < len(steps), "some steps share a task"
    done: set[str] = set()
    for chain in chains:
        assert _upstream(chain[0]) <= done, f"{chain[0].key} before what it reads"
        for earlier, later in itertools.pairwise(chain):
            assert _upstream(later) == {earlier.key}, f"{later.key} reads more than {earlier.key}"
        done |= {step.key for step in chain}
    readers: dict[str, set[str]] = {}
    for step in steps.values():
        for key in _upstream(step):
            readers.setdefault(key, set()).add(step.key)
    read = set(readers)
    for chain in chains:
        for earlier, later in itertools.pairwise(chain):
            fanned_out = {key for key in readers[earlier.key] if key in read} - {later.key}
            assert not fanned_out, f"{later.key} joined {earlier.key}, which {fanned_out} also read"
    hubs = [key for key, who in readers.items() if len(who & read) > 1]
    assert hubs, "the graph fans out (the test would prove nothing otherwise)"
    for hub in hubs:
        (chain,) = [chain for chain in chains if hub in {step.key for step in chain}]
        assert chain[-1].key == hub, f"{hub} is read by several steps and must end its chain"
