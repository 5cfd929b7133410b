"""Incremental equals clean: refreshes through the run sensor give a from-scratch build's bytes.

The corpus goes through the changes a lab makes (runs added, one changed, one
deleted, a new dataset, a dataset removed, two datasets changed at once).
After each, the real ``new_runs_sensor`` is evaluated against a real
instance, its partition requests applied and its run requests executed as
the daemon would, then eager automation is evaluated until it requests
nothing; every stored frame and table must then equal, byte for byte, a
build of the same corpus into a fresh output folder on a fresh instance
(an in-memory one, :mod:`tests.deepecg_assets.clean_builds`: the refreshes
are what run on the persistent SQLite instance).
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import dagster as dg
import pytest

from deepecg_assets.build import materialize_everything
from deepecg_assets.definitions import defs
from deepecg_assets.partitions import DATASET_PARTITIONS, dataset_key
from deepecg_assets.resources import OutputFolderResource, RunRootsResource
from deepecg_assets.sensors import new_runs_sensor
from deepecgkit.rundir.write import write_run_directory
from tests.deepecg_assets.clean_builds import build_from_scratch
from tests.deepecg_assets.output_trees import tree_bytes

MODELS = ("cnn", "gru")
COMBINE = dg.AssetKey("flip_grid")
SEEDS = range(4)
#: A dataset whose name is not a plain partition key (it is mapped to ``_<prefix>-<hash>``).
ODD_DATASET = "new set/β"


def write_run(runs: Path, model: str, dataset: str, seed: int, *, shift: float = 0.0) -> None:
    score = 0.6 + 0.05 * MODELS.index(model) + 0.01 * seed + shift
    if dataset == "beats":
        score = 0.9 - score / 2  # the order of the models flips on this dataset
    write_run_directory(
        runs / dataset.replace("/", "_") / f"{model}_seed{seed}",
        model=model,
        dataset=dataset,
        metrics={"f1": score, "auroc": min(score + 0.1, 0.99)},
        seed=seed,
    )


def write_dataset(runs: Path, dataset: str) -> None:
    for model in MODELS:
        for seed in SEEDS:
            write_run(runs, model, dataset, seed)


class Lab:
    """A corpus, its platform output and instance, and a clean-build oracle."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path, self.monkeypatch = tmp_path, monkeypatch
        self.runs, self.output = tmp_path / "runs", tmp_path / "output"
        monkeypatch.setenv("DEEPECG_RUNS", str(self.runs))
        monkeypatch.setenv("DEEPECG_RECURSIVE", "1")
        self.cursor: str | None = None
        self.automation_cursor = None
        self.builds = 0

    def build(self, instance: dg.DagsterInstance, output: Path) -> None:
        self.monkeypatch.setenv("DEEPECG_OUTPUT", str(output))
        result = materialize_everything(instance, verbose=False, stream=io.StringIO())
        assert result.success

    def clean_tree(self) -> dict[str, bytes]:
        """frames/ and tables/ of a from-scratch build of the corpus as it is now."""
        self.builds += 1
        return trees(build_from_scratch(self.runs, self.tmp_path / f"clean{self.builds}"))

    def refresh(self, instance: dg.DagsterInstance) -> dg.SensorResult:
        """One sensor tick, applied as the daemon would, then eager automation until quiet."""
        context = dg.build_sensor_context(
            instance=instance,
            cursor=self.cursor,
            definitions=defs,
            resources={"run_roots": RunRootsResource(), "output_folder": OutputFolderResource()},
        )
        result = new_runs_sensor(context)
        self.cursor = result.cursor or self.cursor
        for request in result.dynamic_partitions_requests or []:
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                instance.add_dynamic_partitions(DATASET_PARTITIONS, request.partition_keys)
            else:
                for key in request.partition_keys:
                    instance.delete_dynamic_partition(DATASET_PARTITIONS, key)
        job = defs.resolve_implicit_global_asset_job_def()
        for request in result.run_requests:
            run = job.execute_in_process(
                instance=instance,
                asset_selection=list(request.asset_selection or []),
                partition_key=request.partition_key,
                tags=request.tags,
            )
            assert run.success
        self.settle(instance)
        return result

    def settle(self, instance: dg.DagsterInstance) -> set[str]:
        job = defs.resolve_implicit_global_asset_job_def()
        refreshed: set[str] = set()
        for _ in range(10):
            evaluation = dg.evaluate_automation_conditions(
                defs=defs, instance=instance, cursor=self.automation_cursor
            )
            self.automation_cursor = evaluation.cursor
            requested = [
                key
                for key in defs.resolve_asset_graph().get_all_asset_keys()
                if evaluation.get_num_requested(key)
            ]
            if not requested:
                return refreshed
            refreshed |= {key.to_user_string() for key in requested}
            run = job.execute_in_process(instance=instance, asset_selection=requested)
            assert run.success
        raise AssertionError("automation did not settle")


def fresh_instance(home: Path):
    home.mkdir()
    return dg.instance_for_test(temp_dir=str(home))


def trees(output: Path) -> dict[str, bytes]:
    return {
        f"{folder}/{name}": data
        for folder in ("frames", "tables")
        for name, data in tree_bytes(output / folder).items()
    }


def test_sensor_refreshes_equal_clean_builds(tmp_path: Path, monkeypatch) -> None:
    lab = Lab(tmp_path, monkeypatch)
    for dataset in ("afib", "beats"):
        write_dataset(lab.runs, dataset)
    with fresh_instance(tmp_path / "home") as instance:
        lab.build(instance, lab.output)  # the README's command, outside the daemon
        lab.settle(instance)
        first = lab.refresh(instance)
        assert not first.run_requests, "a tick after a build outside the daemon launches nothing"
        assert trees(lab.output) == lab.clean_tree()

        def step(change, *, datasets: set[str], partitions: set[str] | None = None) -> None:
            change()
            result = lab.refresh(instance)
            keys = {request.partition_key for request in result.run_requests}
            assert keys == ({dataset_key(d) for d in datasets} if datasets else {None})
            combined = [COMBINE in (r.asset_selection or []) for r in result.run_requests]
            # One changed dataset: one run with the combines (Dagster's cost per run is the
            # larger one); several: one run each, and eager automation combines once.
            assert combined == [len(datasets) < 2] * len(result.run_requests)
            if partitions is not None:
                assert set(instance.get_dynamic_partitions(DATASET_PARTITIONS)) == partitions
            assert trees(lab.output) == lab.clean_tree()
            assert not lab.refresh(instance).run_requests, "an unchanged tree launches nothing"

        step(lambda: [write_run(lab.runs, m, "afib", 4) for m in MODELS], datasets={"afib"})
        step(lambda: write_run(lab.runs, "cnn", "beats", 0, shift=0.2), datasets={"beats"})
        step(lambda: shutil.rmtree(lab.runs / "afib" / "gru_seed1"), datasets={"afib"})
        odd = dataset_key(ODD_DATASET)
        step(
            lambda: write_dataset(lab.runs, ODD_DATASET),
            datasets={ODD_DATASET},
            partitions={"afib", "beats", odd},
        )
        step(lambda: shutil.rmtree(lab.runs / "beats"), datasets=set(), partitions={"afib", odd})
        assert not list((lab.output / "frames" / "aggregates").glob("beats*"))
        step(
            lambda: [write_run(lab.runs, "cnn", d, 5) for d in ("afib", ODD_DATASET)],
            datasets={"afib", ODD_DATASET},
        )
