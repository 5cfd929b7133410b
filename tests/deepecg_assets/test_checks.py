"""The asset checks called directly on small frames (the platform tests run them in builds)."""

import pandas as pd

from deepecg_assets.checks import bimodal_cells, no_bimodal_cells
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

    result = no_bimodal_cells(
        aggregates={}, reconciled_runs=partitions, analysis=AnalysisSettings()
    )

    expected = bimodal_cells(pd.concat(partitions.values(), ignore_index=True), "f1")
    assert [(c["dataset"], c["model"]) for c in expected] == [
        ("a_set", "m1"),
        ("a_set", "m3"),
        ("b_set", "m1"),
    ]
    assert not result.passed
    assert result.metadata["cells"].value == expected
