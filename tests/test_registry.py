"""Model and dataset registry."""

from __future__ import annotations

import subprocess
import sys

import pytest

from deepecgkit import registry
from deepecgkit.registry import (
    get_dataset,
    get_dataset_info,
    get_dataset_names,
    get_model,
    get_model_info,
    get_model_names,
    register_dataset,
    register_model,
)

MODELS = ["logreg-features", "resnet1d", "se-resnet", "simple-cnn"]
DATASETS = [
    "af-classification",
    "ltafdb",
    "mitbih-afdb",
    "ptb-xl",
    "synthetic-af",
    "synthetic-bradycardia",
    "synthetic-irregular-rr",
    "synthetic-long-pr",
    "synthetic-ptbxl",
    "synthetic-rhythm",
]


def test_names_are_sorted_and_complete() -> None:
    assert get_model_names() == MODELS
    assert get_dataset_names() == DATASETS


def test_lookups_return_classes_carrying_their_name() -> None:
    for name in MODELS:
        assert get_model(name)._registry_name == name
    for name in DATASETS:
        assert get_dataset(name)._registry_name == name


def test_ptbxl_alias() -> None:
    assert get_dataset("ptbxl") is get_dataset("ptb-xl")
    assert get_dataset_info("ptbxl")["input_channels"] == 12


def test_unknown_names_list_the_available_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'vgg'.*resnet1d, se-resnet, simple-cnn"):
        get_model("vgg")
    with pytest.raises(ValueError, match=r"unknown dataset 'mnist'.*synthetic-af"):
        get_dataset("mnist")


def test_info_dictionaries() -> None:
    info = get_model_info("logreg-features")
    assert set(info) == {"class", "description", "kind", "default_kwargs"}
    assert info["kind"] == "sklearn" and get_model_info("resnet1d")["kind"] == "torch"
    data = get_dataset_info("synthetic-ptbxl")
    assert data == {
        "class": get_dataset("synthetic-ptbxl"),
        "input_channels": 12,
        "task": "multilabel",
        "num_classes": 5,
        "description": data["description"],
    }
    assert get_dataset_info("synthetic-af")["task"] == "binary"


def test_duplicates_and_bad_kinds_are_rejected() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_model("resnet1d")(type("Other", (), {}))
    with pytest.raises(ValueError, match="already registered"):
        register_dataset("synthetic-af", input_channels=1, task="binary")(type("Other", (), {}))
    with pytest.raises(ValueError, match="kind"):
        register_model("new-model", kind="keras")
    with pytest.raises(ValueError, match="task"):
        register_dataset("new-data", input_channels=1, task="regression")
    assert "new-model" not in registry._MODELS


def test_importing_the_registry_alone_finds_every_entry() -> None:
    code = (
        "import deepecgkit.registry as r; "
        "print(len(r.get_model_names()), len(r.get_dataset_names()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(len(MODELS)), str(len(DATASETS))]
