"""Device resolution and seeding."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from deepecgkit.utils import resolve_device, seed_everything


def test_auto_picks_an_available_device() -> None:
    device = resolve_device("auto")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available() and torch.backends.mps.is_available():
        expected = "mps"
    assert device.type == expected


@pytest.mark.parametrize("name", ["cpu", "CPU ", torch.device("cpu")])
def test_cpu_spellings(name: object) -> None:
    assert resolve_device(name) == torch.device("cpu")  # type: ignore[arg-type]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_names_the_device() -> None:
    with pytest.raises(ValueError, match=r"'cuda:0'.*CUDA is not available"):
        resolve_device("cuda:0")


@pytest.mark.parametrize("name", ["gpu-please", "", 3])
def test_unparsable_names_raise_value_error(name: object) -> None:
    with pytest.raises(ValueError, match="device"):
        resolve_device(name)  # type: ignore[arg-type]


def test_seed_everything_repeats_every_generator() -> None:
    def draw() -> tuple[float, float, torch.Tensor]:
        return random.random(), float(np.random.rand()), torch.rand(3)  # noqa: NPY002

    seed_everything(7)
    first = draw()
    seed_everything(7)
    second = draw()
    seed_everything(8)
    third = draw()
    assert first[:2] == second[:2] and torch.equal(first[2], second[2])
    assert first[0] != third[0] and not torch.equal(first[2], third[2])
