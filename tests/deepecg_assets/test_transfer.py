"""Transfer assets on the bundled train-grid corpus (real checkpoints) and without checkpoints."""

from __future__ import annotations

import dagster as dg
import pandas as pd

from deepecg_assets.assets.transfer import NO_CHECKPOINTS, matrix_frame
from deepecg_assets.definitions import defs
from deepecg_assets.io_managers import frame_from_csv
from deepecg_assets.resources import BUNDLED_CORPUS
from deepecgkit.analysis.latex import compile_table
from deepecgkit.datasets.synthetic import CONTRAST_DATASETS
from deepecgkit.evaluation.constants import RANDOM_INIT
from deepecgkit.rundir.read import discover_runs, encoder_checkpoints

TRANSFER = [
    dg.AssetKey("discovered_runs"),
    dg.AssetKey("transfer_matrix"),
    dg.AssetKey("transfer_table"),
]


def run(platform, keys):
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=platform.instance, asset_selection=keys)
    assert result.success
    return result


def test_bundled_corpus_keeps_one_encoder_per_model_and_dataset() -> None:
    records, diagnostics = discover_runs([BUNDLED_CORPUS], recursive=True)
    # 4 models x 3 contrast datasets x 7 seeds
    assert len(records) == 84 and not any(diagnostics.values())
    checkpoints = encoder_checkpoints(records)
    assert set(checkpoints) == {"simple-cnn", "resnet1d", "se-resnet"}
    for by_dataset in checkpoints.values():
        assert set(by_dataset) == set(CONTRAST_DATASETS)
        assert all(path.parent.name.endswith("seed0") for path in by_dataset.values())


def test_transfer_matrix_on_the_bundled_corpus(bundled_transfer_build) -> None:
    # One build of the transfer assets on the bundled corpus (tests/conftest.py).
    result, output = bundled_transfer_build.result, bundled_transfer_build.output
    frames = output / "frames"
    cells = frame_from_csv((frames / "transfer_matrix.csv").read_text())
    assert set(cells["model_name"]) == {"simple-cnn", "resnet1d", "se-resnet"}
    for architecture, block in cells.groupby("model_name"):
        matrix = matrix_frame(block)
        assert matrix.shape == (4, 3)
        assert matrix.index[0] == RANDOM_INIT, "the untrained floor is the first row"
        assert matrix.notna().all().all()
        for target in matrix.columns:
            # The in-domain encoder never falls below the untrained floor.
            assert matrix.loc[target, target] >= matrix.loc[RANDOM_INIT, target], (
                architecture,
                target,
            )
    table = (output / "tables" / "transfer_matrix.tex").read_text()
    assert table.count(r"\begin{table}") == 3 and "Untrained encoder" in table
    ok, reason = compile_table(table)
    assert ok, reason
    for architecture in ("simple-cnn", "resnet1d", "se-resnet"):
        figure = output / "tables" / f"transfer_matrix_{architecture}.png"
        assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    checks = {
        e.event_specific_data.check_name: e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    (shown,) = [
        e.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey("transfer_table")
    ]
    heat_map = "![transfer heat map of resnet1d](data:image/png;base64,"
    assert shown["figure"].value.startswith(heat_map)
    for architecture in ("simple-cnn", "resnet1d", "se-resnet"):
        stem = f"transfer_matrix.{architecture}"
        picture = f"![transfer table of {architecture} ({stem}.tex)](data:image/png;base64,"
        assert shown[f"image_{stem}"].value.startswith(picture)
        assert (output / "tables" / f"{stem}.png").is_file()
    assert checks["transfer_matrix_tex_compiles"].passed
    assert checks["transfer_matrix_tex_compiles"].metadata["checked"].value is True


def test_transfer_is_skipped_without_checkpoints(platform) -> None:
    result = run(platform, TRANSFER)
    events = {
        e.asset_key.to_user_string(): e.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    assert events["transfer_matrix"]["skipped"].value == NO_CHECKPOINTS
    assert events["transfer_table"]["skipped"].value == NO_CHECKPOINTS
    stored = frame_from_csv((platform.output / "frames" / "transfer_matrix.csv").read_text())
    assert stored.empty and "score" in stored.columns
    assert not (platform.output / "tables" / "transfer_matrix.tex").exists()


def test_matrix_frame_puts_the_floor_first() -> None:
    cells = pd.DataFrame(
        {
            "source": ["b", RANDOM_INIT, "a", "b", RANDOM_INIT, "a"],
            "target": ["a", "a", "a", "b", "b", "b"],
            "score": [0.6, 0.5, 0.9, 0.8, 0.4, 0.7],
        }
    )
    matrix = matrix_frame(cells)
    assert list(matrix.index) == [RANDOM_INIT, "a", "b"]
    assert matrix.loc["a", "b"] == 0.7
