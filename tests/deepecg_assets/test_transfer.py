"""Transfer assets on the bundled train-grid corpus (real checkpoints), without checkpoints,
and refreshed cell by cell."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from upath import UPath

from deepecg_assets.assets.transfer import (
    NO_CHECKPOINTS,
    matrix_frame,
    runs_with_checkpoints,
    stored_runs_with_checkpoints,
)
from deepecg_assets.definitions import defs
from deepecg_assets.parquet_frames import StoredFrame, frame_to_parquet, read_stored_frame
from deepecg_assets.resources import BUNDLED_CORPUS
from deepecgkit.analysis.latex import compile_table
from deepecgkit.datasets.synthetic import CONTRAST_DATASETS
from deepecgkit.evaluation.constants import RANDOM_INIT
from deepecgkit.rundir.format import CHECKPOINT_KEY, METADATA_FILENAME
from deepecgkit.rundir.read import (
    discover_runs,
    encoder_checkpoints,
    find_encoder_checkpoints,
    read_metadata,
)
from deepecgkit.rundir.records import frame_to_records, records_to_frame
from tests.deepecg_assets.output_trees import tree_bytes

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


def test_the_vectorised_selection_keeps_every_run_that_recorded_a_checkpoint(
    tmp_path: Path,
) -> None:
    records, _ = discover_runs([BUNDLED_CORPUS], recursive=True)
    frame = records_to_frame(records)
    selected = runs_with_checkpoints(frame)
    recorded = {
        str(r.run_dir) for r in records if (read_metadata(r.run_dir) or {}).get(CHECKPOINT_KEY)
    }
    assert set(selected["run_dir"]) == recorded and 0 < len(recorded) < len(records)
    assert find_encoder_checkpoints(frame_to_records(selected)) == find_encoder_checkpoints(records)
    # A frame stored before discovery recorded checkpoints: every run is looked at.
    older = frame.drop(columns="checkpoint")
    assert runs_with_checkpoints(older) is older
    assert encoder_checkpoints(frame_to_records(older)) == encoder_checkpoints(records)
    # A corpus without checkpoints: nothing is selected, so no metadata file is read.
    bare = tmp_path / "runs"
    shutil.copytree(BUNDLED_CORPUS, bare)
    for metadata in bare.rglob(METADATA_FILENAME):
        text = metadata.read_text(encoding="utf-8")
        data = json.loads(text)
        data[CHECKPOINT_KEY] = None
        metadata.write_text(json.dumps(data), encoding="utf-8")
    plain, _ = discover_runs([bare], recursive=True)
    assert runs_with_checkpoints(records_to_frame(plain)).empty


def test_stored_runs_with_checkpoints_read_the_rows_runs_with_checkpoints_selects(
    tmp_path,
) -> None:
    records, _ = discover_runs([BUNDLED_CORPUS], recursive=True)
    frame = records_to_frame(records)
    for name, stored_frame in (("now", frame), ("older", frame.drop(columns="checkpoint"))):
        path = tmp_path / f"{name}.parquet"
        path.write_bytes(frame_to_parquet(stored_frame))
        read = stored_runs_with_checkpoints(StoredFrame(UPath(str(path))))
        expected = runs_with_checkpoints(stored_frame).reset_index(drop=True)
        pd.testing.assert_frame_equal(read, expected, check_exact=True)
    assert 0 < len(read) == len(frame)
    bare = frame.assign(checkpoint=pd.Series([None] * len(frame), dtype=object))
    (tmp_path / "bare.parquet").write_bytes(frame_to_parquet(bare))
    assert stored_runs_with_checkpoints(StoredFrame(UPath(str(tmp_path / "bare.parquet")))).empty


def test_transfer_matrix_on_the_bundled_corpus(bundled_transfer_build) -> None:
    # One build of the transfer assets on the bundled corpus (tests/conftest.py).
    result, output = bundled_transfer_build.result, bundled_transfer_build.output
    frames = output / "frames"
    cells = read_stored_frame(frames, "transfer_matrix")
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
    stored = read_stored_frame(platform.output / "frames", "transfer_matrix")
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


# --- reuse of cells between builds ----------------------------------------------------------

#: The bundled simple-cnn runs that keep an encoder (one per contrast dataset).
ENCODER_RUNS = {dataset: f"simple-cnn_{dataset}_seed0" for dataset in CONTRAST_DATASETS}
#: Files of the output folder that are not the transfer assets' (the discovery cache, and
#: the tree index discovery saves, which records when each directory was listed).
NOT_TRANSFER = {"cache/run_records.cache", "cache/tree_index.json"}
#: Files of the tables' compile cache (:func:`deepecg_assets.assets.tables.compile_cache`).
COMPILE_CACHE_PREFIX = "cache/latex/"


class TransferBuilds:
    """One output folder refreshed build after build, and a clean build of the same state."""

    def __init__(self, root: Path, instance: dg.DagsterInstance, patch: pytest.MonkeyPatch):
        self.runs, self.kept, self.root = root / "runs", root / "kept", root
        self.runs.mkdir()
        self.instance, self.patch, self.builds = instance, patch, 0
        patch.setenv("DEEPECG_RUNS", str(self.runs))
        patch.setenv("DEEPECG_RECURSIVE", "1")

    def add(self, dataset: str) -> Path:
        run = self.runs / ENCODER_RUNS[dataset]
        shutil.copytree(BUNDLED_CORPUS / ENCODER_RUNS[dataset], run)
        return run

    def build(self, output: Path, run_config: dict | None = None) -> dict:
        self.patch.setenv("DEEPECG_OUTPUT", str(output))
        result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
            instance=self.instance,
            asset_selection=TRANSFER,
            run_config=run_config or {},
        )
        assert result.success
        (metadata,) = [
            e.materialization.metadata
            for e in result.get_asset_materialization_events()
            if e.asset_key == dg.AssetKey("transfer_matrix")
        ]
        return {key: value.value for key, value in metadata.items()}

    def refresh_equals_clean(self, run_config: dict | None = None) -> tuple[int, int]:
        """Refresh the kept folder, build a fresh one; same bytes. Returns (reused, computed)."""
        kept = self.build(self.kept, run_config)
        self.builds += 1
        clean_folder = self.root / f"clean{self.builds}"
        clean = self.build(clean_folder, run_config)
        assert clean["reused_cells"] == 0
        assert clean["computed_cells"] == kept["reused_cells"] + kept["computed_cells"]
        refreshed, fresh = tree_bytes(self.kept), tree_bytes(clean_folder)
        for name in NOT_TRANSFER:
            refreshed.pop(name, None), fresh.pop(name, None)
        # The LaTeX compile cache keeps the verdicts of earlier texts too (content-keyed).
        for tree in (refreshed, fresh):
            for name in [n for n in tree if n.startswith(COMPILE_CACHE_PREFIX)]:
                tree.pop(name)
        assert "cache/transfer_cells.json" in fresh
        assert sorted(refreshed) == sorted(fresh)
        for name, content in fresh.items():
            assert refreshed[name] == content, f"{name} differs from a clean build's"
        return kept["reused_cells"], kept["computed_cells"]


def test_a_refresh_reuses_unchanged_cells_and_equals_a_clean_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    irregular, long_pr, bradycardia = CONTRAST_DATASETS
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        builds = TransferBuilds(tmp_path, instance, monkeypatch)
        builds.add(irregular)
        builds.add(long_pr)
        first = builds.build(builds.kept)  # a first build is a clean build
        assert (first["reused_cells"], first["computed_cells"]) == (0, 6)  # 3 rows x 2 targets
        # A checkpoint added: a new row and a new column; the 3 x 2 old cells are kept.
        added = builds.add(bradycardia)
        assert builds.refresh_equals_clean() == (6, 6)
        # A checkpoint changed (other valid bytes): its row only.
        changed = builds.runs / ENCODER_RUNS[long_pr] / "checkpoint.pt"
        shutil.copyfile(builds.runs / ENCODER_RUNS[irregular] / "checkpoint.pt", changed)
        assert builds.refresh_equals_clean() == (9, 3)
        # A checkpoint deleted (its row and column go) and one corrupted: only the
        # corrupt file's own cells are emptied, the other four are reused.
        shutil.rmtree(added)
        changed.write_bytes(b"garbage")
        assert builds.refresh_equals_clean() == (4, 2)
        cells = read_stored_frame(builds.kept / "frames", "transfer_matrix")
        empty = pd.to_numeric(cells["score"], errors="coerce").isna()
        assert set(cells.loc[empty, "source"]) == {long_pr} and empty.sum() == 2
        # A setting changed, on a damaged cache (ignored and rebuilt): every cell is computed.
        (builds.kept / "cache" / "transfer_cells.json").write_text('{"kind": "deepecgkit tr')
        other_seed = {"ops": {"transfer_matrix": {"config": {"seed": 11}}}}
        assert builds.refresh_equals_clean(other_seed) == (0, 6)
        # No checkpoint left: no cells, and no cache of cells that are gone.
        shutil.rmtree(builds.runs / ENCODER_RUNS[irregular])
        shutil.rmtree(builds.runs / ENCODER_RUNS[long_pr])
        builds.build(builds.kept)
        assert not (builds.kept / "cache" / "transfer_cells.json").exists()
