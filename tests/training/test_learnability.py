"""On the synthetic data the models learn: AF-like rhythm is found by every CNN in seconds."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from sklearn.metrics import f1_score

from deepecgkit.datasets import ECGDataModule
from deepecgkit.registry import get_model
from deepecgkit.training import ECGTrainer

#: Spec target (substrate.md 4.5) for test macro-F1 on synthetic-af; chance is about 0.5.
MIN_MACRO_F1 = 0.8


@pytest.mark.parametrize("name", ["simple-cnn", "resnet1d", "se-resnet"])
def test_every_cnn_beats_chance_clearly_on_synthetic_af(
    name: str, make_module: Callable[..., ECGDataModule]
) -> None:
    module = make_module("binary", n_patients=90, seed=1)
    torch.manual_seed(1)
    model = get_model(name)(input_channels=1, output_size=1)
    trainer = ECGTrainer(model, {"learning_rate": 3e-3}, device="cpu")
    trainer.fit(module, epochs=10, early_stopping_patience=3, progress_bar=False)
    out = trainer.predict_split(module, "test")
    assert set(out.targets.tolist()) == {0, 1}
    assert f1_score(out.targets, out.predictions, average="macro") >= MIN_MACRO_F1
