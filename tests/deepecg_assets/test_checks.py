"""The asset checks called directly on small frames (the platform tests run them in builds)."""

import dagster as dg
import pandas as pd

from deepecg_assets.assets.analysis import (
    FLIP_GRID_CHECKS,
    flips_nadeau_bengio_applied,
    no_untestable_flips,
    supported_flips_survive_fdr,
)
from deepecg_assets.assets.datasets import DATASET_CHECKS, bimodal_cells, bimodal_cells_check
from deepecg_assets.definitions import defs
from deepecg_assets.resources import AnalysisSettings

#: Eight seeds in two regimes 0.78 apart: a bimodal cell.
TWO_REGIMES = [0.9, 0.91, 0.9, 0.1, 0.12, 0.11, 0.9, 0.1]


def _runs(dataset: str, model: str, values: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_dir": [f"{dataset}/{model}/{seed}" for seed in range(len(values))],
            "model": model,
            "dataset": dataset,
            "seed": range(len(values)),
            "averaging": "macro",
            "metric": "f1",
            "value": values,
        }
    )


def test_bimodal_cells_of_each_partition_equal_those_of_the_joined_frame() -> None:
    # Partition keys sort the other way round from the datasets they hold.
    first = pd.concat([_runs("b_set", "m1", TWO_REGIMES), _runs("b_set", "m2", [0.5] * 8)])
    second = pd.concat([_runs("a_set", "m3", TWO_REGIMES), _runs("a_set", "m1", TWO_REGIMES)])
    partitions = {"k1": first.reset_index(drop=True), "k2": second.reset_index(drop=True)}

    result = bimodal_cells_check(partitions, AnalysisSettings().metric)

    expected = bimodal_cells(pd.concat(partitions.values(), ignore_index=True), "f1")
    assert [(c["dataset"], c["model"]) for c in expected] == [
        ("a_set", "m1"),
        ("a_set", "m3"),
        ("b_set", "m1"),
    ]
    assert not result.passed
    assert result.metadata["cells"].value == expected


def _grid() -> pd.DataFrame:
    """Two flip rows: one supported that survives the FDR, one untestable without correction."""
    return pd.DataFrame(
        {
            "model_a": ["a", "a"],
            "model_b": ["b", "c"],
            "dataset_1": ["d1", "d1"],
            "dataset_2": ["d2", "d2"],
            "verdict": ["supported", "untestable"],
            "reason": ["", "too few seeds"],
            "survives_fdr": [True, False],
            "fdr_method": ["by", "by"],
            "correction_applied_1": ["nadeau-bengio", "unavailable"],
            "correction_applied_2": ["nadeau-bengio", "nadeau-bengio"],
            "correction_note_1": ["", "split sizes unknown"],
            "correction_note_2": ["", ""],
        }
    )


def test_the_flip_grid_checks_on_a_small_grid() -> None:
    grid = _grid()
    assert not no_untestable_flips(grid).passed
    assert supported_flips_survive_fdr(grid).passed
    uncorrected = flips_nadeau_bengio_applied(grid)
    assert not uncorrected.passed
    assert uncorrected.metadata["unavailable"].value == 1
    assert uncorrected.metadata["rows"].value == ["a vs c on d1 -> d2"]


def _evaluations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_flip_grid_evaluates_its_checks_with_it(built_platform, platform_copy) -> None:
    """The grid's checks come with the grid: no step of their own reads it back."""
    platform = platform_copy(built_platform)
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=platform.instance, asset_selection=[dg.AssetKey("flip_grid")]
    )
    assert result.success
    assert sorted(_evaluations(result)) == sorted(name for name, _, _ in FLIP_GRID_CHECKS)
    assert {event.step_key for event in result.all_events if event.is_step_start} == {"flip_grid"}


def test_the_dataset_step_evaluates_its_checks_with_its_frames(
    built_platform, platform_copy
) -> None:
    """The per-dataset checks come with the step that computes the frames, per partition."""
    platform = platform_copy(built_platform)
    (key, *_) = platform.partitions()
    result = platform.materialize(["aggregates"], partitions=[key])
    assert result.success
    evaluations = _evaluations(result)
    assert sorted(evaluations) == sorted(spec.name for spec in DATASET_CHECKS)
    assert {event.step_key for event in result.all_events if event.is_step_start} == {
        "dataset_analysis"
    }
