"""ECGTrainer: configuration, early stopping, logits out, checkpoints."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.special import expit, softmax

from deepecgkit.datasets import ECGDataModule
from deepecgkit.models import ResNet1D, SimpleCNN
from deepecgkit.training import ECGTrainer

MULTI_LABEL = {"multi_label": True}


def _trainer(output_size: int, config: dict | None = None, seed: int = 0) -> ECGTrainer:
    torch.manual_seed(seed)
    return ECGTrainer(SimpleCNN(input_channels=1, output_size=output_size), config, device="cpu")


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match=r"unknown train_config key\(s\) \['learning_rte'\]"):
        _trainer(1, {"learning_rte": 0.1})
    with pytest.raises(ValueError, match=r"unknown scheduler key\(s\) \['gamma'\]"):
        _trainer(1, {"scheduler": {"gamma": 0.1}})
    with pytest.raises(ValueError, match="task_type"):
        _trainer(1, {"task_type": "ranking"})


def test_binary_is_inferred_from_the_output_size() -> None:
    assert _trainer(1).task == "binary"
    assert _trainer(4).task == "multiclass"
    assert _trainer(5, MULTI_LABEL).task == "multilabel"
    assert isinstance(_trainer(1).loss_fn, torch.nn.BCEWithLogitsLoss)
    assert isinstance(_trainer(4).loss_fn, torch.nn.CrossEntropyLoss)

    class Bare(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(dim=(1, 2))

    with pytest.raises(ValueError, match="binary_classification"):
        ECGTrainer(Bare(), device="cpu")
    assert ECGTrainer(Bare(), {"binary_classification": True}, device="cpu").binary


def test_fit_logs_checkpoints_and_restores_the_best_state(
    tmp_path: Path, binary_module: ECGDataModule
) -> None:
    trainer = _trainer(1)
    result = trainer.fit(
        binary_module,
        epochs=4,
        early_stopping_patience=4,
        checkpoint_dir=tmp_path,
        log_dir=tmp_path,
        progress_bar=False,
    )
    assert set(result) == {"epochs_run", "best_epoch", "best_val_loss", "stopped_early"}
    assert result["epochs_run"] == len(trainer.history) == 4
    log = pd.read_csv(tmp_path / "training_log.csv")
    assert list(log.columns) == ["epoch", "train_loss", "val_loss", "train_acc", "val_acc", "lr"]
    assert log["epoch"].tolist() == [1, 2, 3, 4]
    assert result["best_val_loss"] == pytest.approx(log["val_loss"].min())
    assert result["best_epoch"] == int(log.loc[log["val_loss"].idxmin(), "epoch"])
    # what is evaluated is the early-stopped state: its validation loss is the best one
    out = trainer.predict_split(binary_module, "val")
    bce = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.as_tensor(out.logits), torch.as_tensor(out.targets, dtype=torch.float32)
    )
    assert float(bce) == pytest.approx(result["best_val_loss"], rel=1e-5)
    checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert checkpoint["model_name"] == "simple-cnn" and checkpoint["format_version"] == 1
    assert checkpoint["model_kwargs"] == {"input_channels": 1, "output_size": 1}
    assert checkpoint["epoch"] == result["best_epoch"]
    assert trainer.best_checkpoint_path == tmp_path / "checkpoint.pt"
    reloaded = ECGTrainer.load_checkpoint(tmp_path / "checkpoint.pt", device="cpu")
    np.testing.assert_allclose(reloaded.predict_split(binary_module, "val").logits, out.logits)


class _Linear(torch.nn.Module):
    """A model without BatchNorm or dropout: with a zero learning rate it never changes."""

    output_size = 1

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(1, 2)) * self.weight + 0.1


def test_early_stopping_counts_epochs_without_improvement(binary_module: ECGDataModule) -> None:
    trainer = ECGTrainer(_Linear(), {"learning_rate": 0.0}, device="cpu")
    result = trainer.fit(binary_module, epochs=20, early_stopping_patience=3, progress_bar=False)
    assert result == {**result, "epochs_run": 4, "best_epoch": 1, "stopped_early": True}


@pytest.mark.parametrize(
    ("task", "outputs", "config"),
    [("binary", 1, None), ("multiclass", 4, None), ("multilabel", 5, MULTI_LABEL)],
)
def test_the_three_output_layouts(task: str, outputs: int, config: dict | None, request) -> None:
    module: ECGDataModule = request.getfixturevalue(f"{task}_module")
    trainer = _trainer(outputs, config)
    trainer.fit(module, epochs=1, progress_bar=False)
    out = trainer.predict_split(module, "test")
    n = module.split_info()["n_test"]
    np.testing.assert_array_equal(out.indices, module.split_indices("test"))
    np.testing.assert_array_equal(out.groups, module.split_groups_of("test"))
    if task == "binary":
        assert out.logits.shape == (n,) and out.probabilities.shape == (n, 2)
        np.testing.assert_allclose(out.probabilities[:, 1], expit(out.logits), rtol=1e-6)
        np.testing.assert_array_equal(out.predictions, (out.logits > 0).astype(int))
    elif task == "multiclass":
        assert out.logits.shape == out.probabilities.shape == (n, 4)
        np.testing.assert_allclose(out.probabilities, softmax(out.logits, axis=1), rtol=1e-5)
        np.testing.assert_array_equal(out.predictions, out.logits.argmax(axis=1))
    else:
        assert out.logits.shape == out.probabilities.shape == out.predictions.shape == (n, 5)
        np.testing.assert_allclose(out.probabilities, expit(out.logits), rtol=1e-6)
    metrics = trainer.test(module)
    assert set(metrics) == {"test_loss", "test_acc"} and math.isfinite(metrics["test_loss"])
    predictions, targets, probabilities = trainer.get_test_results()
    np.testing.assert_array_equal(predictions, out.predictions)
    np.testing.assert_array_equal(targets, out.targets)
    np.testing.assert_array_equal(probabilities, out.probabilities)
    np.testing.assert_array_equal(trainer.get_test_logits(), out.logits)


def test_results_are_empty_before_any_test() -> None:
    assert _trainer(1).get_test_results() == (None, None, None)
    assert _trainer(1).get_test_logits() is None


def test_targets_outside_the_output_range_fail_on_the_first_batch(
    multiclass_module: ECGDataModule,
) -> None:
    trainer = _trainer(2)  # four classes in the data, two outputs in the model
    with pytest.raises(ValueError, match=r"class indices in \[0, 2\)"):
        trainer.fit(multiclass_module, epochs=1, progress_bar=False)


def test_empty_validation_split_is_an_error(binary_module: ECGDataModule) -> None:
    module = ECGDataModule(dataset=binary_module.dataset, val_split=0.0, test_split=0.2)
    with pytest.raises(ValueError, match="validation loader is empty"):
        _trainer(1).fit(module, epochs=1, progress_bar=False)


def test_load_checkpoint_rejects_mismatched_weights(tmp_path: Path) -> None:
    trainer = _trainer(1)
    path = trainer.save_checkpoint(tmp_path / "c.pt", epoch=3, extra={"task": "binary"})
    assert torch.load(path, weights_only=True)["task"] == "binary"
    with pytest.raises(ValueError, match="does not fit model"):
        ECGTrainer.load_checkpoint(path, model=ResNet1D(1, 1), device="cpu")


# One epoch on tiny splits: temperatures at the search bounds are expected and warned about.
@pytest.mark.filterwarnings("ignore:fitted temperature:RuntimeWarning")
@pytest.mark.parametrize(
    ("task", "outputs", "config"), [("binary", 1, None), ("multilabel", 5, MULTI_LABEL)]
)
def test_test_report_resamples_the_modules_patients(
    task: str, outputs: int, config: dict | None, request, tmp_path: Path
) -> None:
    from deepecgkit.evaluation import ECGEvaluator

    module: ECGDataModule = request.getfixturevalue(f"{task}_module")
    trainer = _trainer(outputs, config)
    trainer.fit(module, epochs=1, progress_bar=False)
    np.random.seed(4)  # noqa: NPY002
    report = trainer.test_report(module, save_path=tmp_path / "report.csv")
    n_groups = module.split_info()["n_test_groups"]
    rows = report[report["Resampling"].notna()]
    assert len(rows) == 5 and set(rows["Resampling"]) == {"groups"}
    assert set(rows["Resampled units"]) == {float(n_groups)}
    assert "temperature" in set(report["Metric"])  # fitted on the validation split
    assert (tmp_path / "report.csv").is_file()
    # The same numbers as the evaluator called by hand with the module's group ids.
    out, val = trainer.predict_split(module, "test"), trainer.predict_split(module, "val")
    np.random.seed(4)  # noqa: NPY002
    expected = ECGEvaluator(device="cpu").generate_report(
        out.predictions,
        out.targets.astype(np.int64),
        y_scores=out.probabilities,
        calibration_fit=(val.targets.astype(np.int64), val.logits),
        groups=module.split_groups_of("test"),
    )
    pd.testing.assert_frame_equal(report, expected)


@pytest.mark.filterwarnings("ignore:fitted temperature:RuntimeWarning")
def test_test_report_without_group_ids_says_samples_were_independent(
    binary_module: ECGDataModule,
) -> None:
    class Loaders:
        """A module with loaders only: no split order, no group ids."""

        def val_dataloader(self):
            return binary_module.val_dataloader()

        def test_dataloader(self):
            return binary_module.test_dataloader()

    trainer = _trainer(1)
    report = trainer.test_report(Loaders())
    assert set(report["Resampling"].dropna()) == {"samples (assumed independent)"}
    assert set(report["Resampled units"].dropna()) == {float(binary_module.split_info()["n_test"])}
