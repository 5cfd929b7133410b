"""The transfer cell cache: what a cell's key holds, reuse equals computing, unusable files."""

from __future__ import annotations

import json
import logging
import math
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from deepecgkit.datasets import ECGDataModule
from deepecgkit.datasets.synthetic_datasets import (
    SyntheticIrregularRRDataset,
    SyntheticLongPRDataset,
)
from deepecgkit.evaluation import RANDOM_INIT, ProbeResult, cross_dataset_transfer
from deepecgkit.evaluation.transfer_cache import (
    CELL_CACHE_FORMAT_VERSION,
    CELL_CACHE_KIND,
    TransferCellCache,
    cell_key,
    checkpoint_digest,
    target_data_identity,
)

#: The example corpus bundled with the platform (its checkpoints are real encoders).
BUNDLED_CORPUS = Path(__file__).resolve().parents[2] / "deepecg_assets" / "example_corpus"
IRREGULAR, LONG_PR = "synthetic-irregular-rr", "synthetic-long-pr"
#: Small probe data: the cells of these tests take a fraction of a second each.
SMALL = {"n_patients": 40}


def _module(dataset_class: type, *, seed: int = 3, **options) -> ECGDataModule:
    return ECGDataModule(dataset_class=dataset_class, seed=seed, dataset_kwargs=SMALL | options)


@pytest.fixture(scope="module")
def modules() -> dict[str, ECGDataModule]:
    return {
        IRREGULAR: _module(SyntheticIrregularRRDataset),
        LONG_PR: _module(SyntheticLongPRDataset),
    }


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Copies of two bundled simple-cnn encoders (real checkpoints, trained on the targets)."""
    folder = tmp_path_factory.mktemp("encoders")
    copies = {}
    for dataset in (IRREGULAR, LONG_PR):
        copies[dataset] = folder / f"{dataset}.pt"
        shutil.copyfile(
            BUNDLED_CORPUS / f"simple-cnn_{dataset}_seed0" / "checkpoint.pt", copies[dataset]
        )
    return copies


def _transfer(checkpoints, modules, cache=None, **options):
    return cross_dataset_transfer(
        {name: str(path) for name, path in checkpoints.items()},
        "simple-cnn",
        data_modules=modules,
        device="cpu",
        skip_unreadable_checkpoints=True,
        cell_cache=cache,
        **options,
    )


def _same(left, right) -> None:
    """Equal transfer matrices, NaN-aware (their JSON forms agree character for character)."""
    assert json.dumps(left.to_dict()) == json.dumps(right.to_dict())
    assert left.class_names == right.class_names


def test_a_reused_matrix_equals_a_computed_one(checkpoints, modules, tmp_path: Path) -> None:
    first = TransferCellCache()
    computed = _transfer(checkpoints, modules, first)
    assert (first.reused, first.computed) == (0, 6)
    first.save(tmp_path / "cells.json")

    again = TransferCellCache.load(tmp_path / "cells.json")
    assert len(again) == 6
    reused = _transfer(checkpoints, modules, again)
    assert (again.reused, again.computed) == (6, 0)
    _same(reused, computed)
    _same(reused, _transfer(checkpoints, modules))  # and what no cache at all gives
    again.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "cells.json").read_bytes()


def test_a_cell_does_not_depend_on_its_position(checkpoints, modules) -> None:
    """One cell alone (after other draws from the global RNGs) equals it inside the full matrix."""
    full = _transfer(checkpoints, modules)
    torch.manual_seed(123)
    np.random.seed(123)  # noqa: NPY002 - the legacy global state is what is disturbed
    torch.rand(10)
    alone = cross_dataset_transfer(
        {LONG_PR: str(checkpoints[LONG_PR])},
        "simple-cnn",
        targets=[IRREGULAR],
        data_modules={IRREGULAR: modules[IRREGULAR]},
        include_random_init=False,
        device="cpu",
    )
    assert (
        alone.result_for(LONG_PR, IRREGULAR).to_dict()
        == full.result_for(LONG_PR, IRREGULAR).to_dict()
    )


def test_only_changed_cells_are_computed(checkpoints, modules, tmp_path: Path) -> None:
    cache = TransferCellCache()
    _transfer(checkpoints, modules, cache)
    # A moved checkpoint with the same bytes is the same encoder.
    moved = tmp_path / "elsewhere.pt"
    shutil.copyfile(checkpoints[LONG_PR], moved)
    cache = TransferCellCache.load(cache.save(tmp_path / "cells.json"))
    _transfer({IRREGULAR: checkpoints[IRREGULAR], LONG_PR: moved}, modules, cache)
    assert (cache.reused, cache.computed) == (6, 0)
    # Other bytes under the same name: only that row is computed.
    shutil.copyfile(checkpoints[IRREGULAR], moved)
    cache = TransferCellCache.load(cache.save(tmp_path / "cells.json"))
    changed = _transfer({IRREGULAR: checkpoints[IRREGULAR], LONG_PR: moved}, modules, cache)
    assert (cache.reused, cache.computed) == (4, 2)
    _same(changed, _transfer({IRREGULAR: checkpoints[IRREGULAR], LONG_PR: moved}, modules))
    # A new target: its column only.
    with_target = modules | {"third": _module(SyntheticLongPRDataset, data_seed=1)}
    cache = TransferCellCache.load(cache.save(tmp_path / "cells.json"))
    _transfer({IRREGULAR: checkpoints[IRREGULAR], LONG_PR: moved}, with_target, cache)
    assert (cache.reused, cache.computed) == (6, 3)


def test_a_corrupt_checkpoint_empties_its_own_cells_and_is_never_stored(
    checkpoints, modules, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"not a checkpoint")
    cache = TransferCellCache()
    matrix = _transfer({IRREGULAR: checkpoints[IRREGULAR], LONG_PR: broken}, modules, cache)
    assert np.isnan(matrix.values[2]).all() and np.isfinite(matrix.values[:2]).all()
    assert "encoder checkpoint unusable" in matrix.result_for(LONG_PR, IRREGULAR).note
    assert (cache.reused, cache.computed) == (0, 6)
    again = TransferCellCache.load(cache.save(tmp_path / "cells.json"))
    assert len(again) == 4  # the two NaN cells of the broken file are not stored
    matrix = _transfer({IRREGULAR: checkpoints[IRREGULAR], LONG_PR: broken}, modules, again)
    assert (again.reused, again.computed) == (4, 2) and np.isnan(matrix.values[2]).all()


def test_cached_embeddings_are_not_invented(checkpoints, modules) -> None:
    """Cells whose held-out embeddings are requested are computed, the rest reused."""
    cache = TransferCellCache()
    _transfer(checkpoints, modules, cache)
    matrix = _transfer(checkpoints, modules, cache, keep_embeddings="diagonal")
    assert (cache.reused, cache.computed) == (2, 6 + 4)  # counts add up over both calls
    assert set(matrix.embeddings) == {
        f"{RANDOM_INIT}->{IRREGULAR}",
        f"{RANDOM_INIT}->{LONG_PR}",
        f"{IRREGULAR}->{IRREGULAR}",
        f"{LONG_PR}->{LONG_PR}",
    }


def _key(**changes) -> str:
    fields = {
        "model_name": "simple-cnn",
        "input_channels": 1,
        "source": "a",
        "target": "b",
        "encoder": {"checkpoint_sha256": "0" * 64},
        "data": {"name": "x"},
        "metric": "auroc_macro",
        "probe": {},
        "embedding": {"batch_size": 32, "device": "cpu"},
    }
    return cell_key(**(fields | changes))


def test_every_setting_of_a_cell_is_in_its_key() -> None:
    base = _key()
    assert _key() == base
    # A default given explicitly is the same probe.
    assert _key(probe={"c": 1.0, "max_iter": 1000}) == base
    changed = [
        _key(model_name="resnet1d"),
        _key(input_channels=12),
        _key(source="c"),
        _key(target="c"),
        _key(encoder={"checkpoint_sha256": "1" * 64}),
        _key(encoder={"untrained_seed": 0}),
        _key(data={"name": "y"}),
        _key(metric="accuracy"),
        _key(probe={"c": 0.5}),
        _key(probe={"random_state": 7}),
        _key(embedding={"batch_size": 16, "device": "cpu"}),
        _key(embedding={"batch_size": 32, "device": "cuda"}),
    ]
    assert len({base, *changed}) == len(changed) + 1


def test_the_target_identity_follows_the_data_not_the_logging(modules) -> None:
    identity = target_data_identity(modules[IRREGULAR])
    assert identity == target_data_identity(_module(SyntheticIrregularRRDataset, verbose=True))
    for other in (
        _module(SyntheticIrregularRRDataset, seed=4),  # the split seed
        _module(SyntheticIrregularRRDataset, data_seed=1),
        _module(SyntheticIrregularRRDataset, n_patients=41),
        _module(SyntheticIrregularRRDataset, leads=["I"]),
        ECGDataModule(
            dataset_class=SyntheticIrregularRRDataset, seed=3, test_split=0.2, dataset_kwargs=SMALL
        ),
        modules[LONG_PR],
    ):
        assert target_data_identity(other) != identity


def test_a_ready_made_dataset_is_identified_by_its_content() -> None:
    dataset = SyntheticIrregularRRDataset(n_patients=30)
    first = target_data_identity(ECGDataModule(dataset=dataset, seed=3))
    assert "content_sha256" in first
    assert target_data_identity(ECGDataModule(dataset=dataset, seed=3)) == first
    assert target_data_identity(ECGDataModule(dataset=dataset, seed=4)) != first
    dataset.signals = dataset.signals.copy()
    dataset.signals[0, 0, 0] += 1.0
    assert target_data_identity(ECGDataModule(dataset=dataset, seed=3)) != first


def test_data_whose_effect_cannot_be_hashed_is_never_reused() -> None:
    assert target_data_identity(_module(SyntheticIrregularRRDataset, transform=abs)) is None
    dataset = SyntheticIrregularRRDataset(n_patients=30, transform=abs)
    assert target_data_identity(ECGDataModule(dataset=dataset, seed=3)) is None
    assert target_data_identity(object()) is None


def test_the_checkpoint_digest_is_of_the_bytes(checkpoints, tmp_path: Path) -> None:
    copy = tmp_path / "copy.pt"
    shutil.copyfile(checkpoints[IRREGULAR], copy)
    assert checkpoint_digest(copy) == checkpoint_digest(checkpoints[IRREGULAR])
    assert checkpoint_digest(copy) != checkpoint_digest(checkpoints[LONG_PR])
    assert checkpoint_digest(tmp_path / "missing.pt") is None
    assert checkpoint_digest(tmp_path) is None  # a folder


def _saved_cell(tmp_path: Path) -> Path:
    cache = TransferCellCache()
    result = ProbeResult(
        metrics={"auroc_macro": math.nan, "accuracy": 0.1 + 0.2, "f1_macro": -0.0},
        task="binary",
        n_train=3,
        source="a",
        target="b",
        note="held-out split holds 1 of 2 classes",
    )
    cache.record("k", result, class_names=["no", "yes"])
    return cache.save(tmp_path / "cells.json")


def test_a_stored_cell_round_trips_exactly(tmp_path: Path) -> None:
    loaded = TransferCellCache.load(_saved_cell(tmp_path))
    cell = loaded.get("k")
    assert cell is not None and loaded.reused == 1 and loaded.get("other") is None
    assert math.isnan(cell.result.metrics["auroc_macro"]) and math.isnan(cell.result.score)
    assert cell.result.metrics["accuracy"] == 0.1 + 0.2
    assert math.copysign(1.0, cell.result.metrics["f1_macro"]) == -1.0
    assert cell.result.note == "held-out split holds 1 of 2 classes"
    assert cell.class_names == ["no", "yes"]


@settings(max_examples=50, deadline=None)
@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=4, max_size=4))
def test_every_metric_value_round_trips(values: list[float]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        cache = TransferCellCache()
        metrics = dict(zip(("auroc_macro", "f1_macro", "accuracy", "b"), values, strict=True))
        cache.record("k", ProbeResult(metrics=metrics), class_names=None)
        stored = TransferCellCache.load(cache.save(Path(folder) / "c.json")).get("k")
    assert stored is not None
    for name, value in metrics.items():
        assert struct.pack("<d", stored.result.metrics[name]) == struct.pack("<d", value) or (
            math.isnan(value) and math.isnan(stored.result.metrics[name])
        )


def test_save_keeps_only_the_cells_this_build_used(tmp_path: Path) -> None:
    loaded = TransferCellCache.load(_saved_cell(tmp_path))
    assert len(loaded) == 1
    loaded.save(tmp_path / "cells.json")  # nothing looked up: nothing kept
    assert len(TransferCellCache.load(tmp_path / "cells.json")) == 0


@pytest.mark.parametrize(
    "content",
    [
        b"{ truncated",
        b"\xff\xfe not text",
        b"[1, 2]",
        json.dumps({"kind": "something else", "version": 1, "cells": {}}).encode(),
        json.dumps({"kind": CELL_CACHE_KIND, "version": CELL_CACHE_FORMAT_VERSION + 1}).encode(),
        json.dumps(
            {"kind": CELL_CACHE_KIND, "version": CELL_CACHE_FORMAT_VERSION, "cells": {"k": 1}}
        ).encode(),
        json.dumps(
            {
                "kind": CELL_CACHE_KIND,
                "version": CELL_CACHE_FORMAT_VERSION,
                "cells": {"k": {"result": {"metrics": {"a": "x"}}, "class_names": None}},
            }
        ).encode(),
    ],
)
def test_a_damaged_or_foreign_cache_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    path = tmp_path / "cells.json"
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="deepecgkit.evaluation.transfer_cache"):
        cache = TransferCellCache.load(path)
    assert len(cache) == 0
    assert any("ignored and rebuilt" in r.getMessage() for r in caplog.records)


def test_an_unreadable_cache_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="deepecgkit.evaluation.transfer_cache"):
        assert len(TransferCellCache.load(tmp_path / "missing.json")) == 0
        assert len(TransferCellCache.load(tmp_path)) == 0  # a folder under the cache's name
    assert [r.levelno for r in caplog.records] == [logging.INFO, logging.WARNING]
