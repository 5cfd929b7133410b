"""``ECGTrainer``: fit a torch ECG model with early stopping, emit logits.

The trainer is deliberately small: AdamW, ``ReduceLROnPlateau`` and early
stopping, both on the validation loss, and nothing that hides what it
evaluates. It emits raw logits in one of the three layouts of the
evaluation package (a binary single logit ``(n,)``, multiclass ``(n, C)``,
multi-label ``(n, K)``) and turns them into probabilities with the same
link the evaluator uses, so temperature scaling and every calibration
metric downstream see exactly what the model produced.

Early stopping keeps the state of the epoch with the strictly lowest
validation loss and restores it at the end: the model that is evaluated is
the early-stopped one, not the last one. Checkpoints hold only tensors and
plain values (no optimiser state, which keeps them small) so that
``torch.load(weights_only=True)`` reads them.
"""

from __future__ import annotations

import copy
import csv
import io
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from deepecgkit.evaluation.constants import TASK_MULTILABEL
from deepecgkit.evaluation.recalibration import apply_temperature
from deepecgkit.io import atomic_write_bytes
from deepecgkit.models.checkpoint import (
    CHECKPOINT_FORMAT_VERSION,
    build_model_from_checkpoint,
    read_checkpoint,
)
from deepecgkit.rundir.format import TRAINING_LOG_FILENAME, checkpoint_path
from deepecgkit.rundir.write import write_training_log
from deepecgkit.utils import AUTO_DEVICE, resolve_device

__all__ = [
    "DEFAULT_SCHEDULER",
    "DEFAULT_TRAIN_CONFIG",
    "TRAINING_LOG_FILENAME",
    "ECGTrainer",
    "SplitOutput",
]

logger = logging.getLogger(__name__)

TASK_TYPE_CLASSIFICATION = "classification"
TASK_TYPE_REGRESSION = "regression"
TASK_TYPES = (TASK_TYPE_CLASSIFICATION, TASK_TYPE_REGRESSION)
#: ``ReduceLROnPlateau`` settings (mode "min" on the validation loss).
DEFAULT_SCHEDULER = {"factor": 0.5, "patience": 2, "min_lr": 1e-5}
#: Every accepted ``train_config`` key and its default. ``binary_classification``
#: None means "inferred from the model's ``output_size``".
DEFAULT_TRAIN_CONFIG: dict[str, Any] = {
    "learning_rate": 1e-3,
    "weight_decay": 1e-4,
    "scheduler": DEFAULT_SCHEDULER,
    "multi_label": False,
    "binary_classification": None,
    "task_type": TASK_TYPE_CLASSIFICATION,
    "pos_weight": None,
    "gradient_clip_val": None,
}
#: Probability above which a binary or multi-label output counts as positive.
DECISION_THRESHOLD = 0.5
#: Batch size used by :meth:`ECGTrainer.predict_split` when the module has none.
DEFAULT_PREDICT_BATCH_SIZE = 256


@dataclass
class SplitOutput:
    """Model outputs on one split, in split order.

    Attributes:
        logits: raw outputs, ``(n,)`` binary, ``(n, C)`` or ``(n, K)``.
        probabilities: ``(n, 2)`` ``[1 − p, p]``, softmax ``(n, C)`` or sigmoid
            ``(n, K)``; None for regression.
        predictions: class indices ``(n,)`` (argmax, or ``p > 0.5``), multi-hot
            ``(n, K)`` (``p > 0.5``), or the outputs for regression.
        targets: ``(n,)`` or ``(n, K)``.
        groups: group id of each item (None when the module has none).
        indices: dataset indices of the items (None when unknown).
    """

    logits: np.ndarray
    probabilities: np.ndarray | None
    predictions: np.ndarray
    targets: np.ndarray
    groups: np.ndarray | None = None
    indices: np.ndarray | None = None


def _merge_config(train_config: dict[str, Any] | None) -> dict[str, Any]:
    config = copy.deepcopy(DEFAULT_TRAIN_CONFIG)
    given = dict(train_config or {})
    unknown = sorted(set(given) - set(DEFAULT_TRAIN_CONFIG))
    if unknown:
        raise ValueError(
            f"unknown train_config key(s) {unknown}; accepted keys: {sorted(DEFAULT_TRAIN_CONFIG)}"
        )
    scheduler = given.pop("scheduler", None)
    config.update(given)
    if scheduler is not None:
        if not isinstance(scheduler, dict):
            raise ValueError(f"train_config['scheduler'] must be a dict, got {scheduler!r}")
        bad = sorted(set(scheduler) - set(DEFAULT_SCHEDULER))
        if bad:
            raise ValueError(
                f"unknown scheduler key(s) {bad}; accepted keys: {sorted(DEFAULT_SCHEDULER)}"
            )
        config["scheduler"] = {**DEFAULT_SCHEDULER, **scheduler}
    if config["task_type"] not in TASK_TYPES:
        raise ValueError(f"task_type must be one of {TASK_TYPES}, got {config['task_type']!r}")
    for key in ("learning_rate", "weight_decay"):
        value = config[key]
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{key} must be a non-negative number, got {value!r}")
    if config["pos_weight"] is not None:
        config["pos_weight"] = [float(w) for w in np.asarray(config["pos_weight"]).reshape(-1)]
    return config


def _atomic_save(obj: Any, path: Path) -> None:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def _empty_loader(loader: Any) -> bool:
    try:
        return len(loader) == 0
    except TypeError:
        return False


class ECGTrainer:
    """Train and apply a torch ECG model.

    Args:
        model: a torch module mapping ``(B, L, T)`` to ``(B, output_size)``.
        train_config: keys of :data:`DEFAULT_TRAIN_CONFIG` (unknown keys are
            an error, which catches typos).
        device: ``"auto"``, ``"cpu"``, ``"cuda"``...

    Raises:
        ValueError: unknown or invalid config keys, an unavailable device, or
            a classification model whose binary/multiclass layout cannot be
            inferred (no ``output_size`` and no ``binary_classification``).
    """

    def __init__(
        self,
        model: nn.Module,
        train_config: dict[str, Any] | None = None,
        device: str = AUTO_DEVICE,
    ) -> None:
        self.config = _merge_config(train_config)
        self.device = resolve_device(device)
        self.model = model.to(self.device)
        self.task_type = self.config["task_type"]
        self.multi_label = bool(self.config["multi_label"])
        self.binary = self._infer_binary()
        self.loss_fn = self._build_loss().to(self.device)
        self.history: list[dict[str, float]] = []
        self.best_val_loss = math.inf
        self.best_epoch = 0
        self.best_checkpoint_path: Path | None = None
        self._test_output: SplitOutput | None = None

    # --- configuration ---------------------------------------------------------------

    def _infer_binary(self) -> bool:
        if self.task_type != TASK_TYPE_CLASSIFICATION or self.multi_label:
            return False
        configured = self.config["binary_classification"]
        if configured is not None:
            return bool(configured)
        output_size = getattr(self.model, "output_size", None)
        if output_size is None:
            raise ValueError(
                f"{type(self.model).__name__} has no output_size attribute; set "
                "train_config['binary_classification'] to True or False"
            )
        return int(output_size) == 1

    @property
    def task(self) -> str | None:
        """``"binary"``, ``"multiclass"``, ``"multilabel"``, or None for regression."""
        if self.task_type == TASK_TYPE_REGRESSION:
            return None
        if self.multi_label:
            return TASK_MULTILABEL
        return "binary" if self.binary else "multiclass"

    def _build_loss(self) -> nn.Module:
        if self.task_type == TASK_TYPE_REGRESSION:
            return nn.MSELoss()
        if self.multi_label or self.binary:
            weights = self.config["pos_weight"]
            pos_weight = torch.tensor(weights, dtype=torch.float32) if weights is not None else None
            return nn.BCEWithLogitsLoss(pos_weight=pos_weight)
        return nn.CrossEntropyLoss()

    # --- batches -----------------------------------------------------------------------

    def _outputs(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(x.to(self.device, dtype=torch.float32))
        single = self.binary or self.task_type == TASK_TYPE_REGRESSION
        if single and out.ndim == 2 and out.shape[1] == 1:
            out = out.squeeze(1)
        return out

    def _check_targets(self, out: torch.Tensor, y: torch.Tensor) -> None:
        """Fail on the first batch when targets don't fit the output layout."""
        if self.task_type == TASK_TYPE_REGRESSION:
            return
        shape = tuple(out.shape)
        if self.multi_label:
            ok = y.ndim == 2 and tuple(y.shape) == shape and bool(((y >= 0) & (y <= 1)).all())
            expected = f"multi-hot targets of shape {shape} with values in [0, 1]"
        elif self.binary:
            ok = out.ndim == 1 and bool(((y == 0) | (y == 1)).all())
            expected = f"0/1 targets for a single-logit output of shape {shape}"
        else:
            n_classes = shape[1] if out.ndim == 2 else 0
            ok = y.ndim == 1 and bool(((y >= 0) & (y < n_classes)).all())
            expected = f"class indices in [0, {n_classes}) for outputs of shape {shape}"
        if not ok:
            low, high = (float(y.min()), float(y.max())) if y.numel() else (math.nan, math.nan)
            raise ValueError(
                f"targets of shape {tuple(y.shape)} (values {low:g} to {high:g}) do not fit the "
                f"model output: expected {expected}"
            )

    def _prepare_targets(self, y: torch.Tensor) -> torch.Tensor:
        y = y.to(self.device)
        if self.task_type == TASK_TYPE_REGRESSION or self.multi_label or self.binary:
            return y.float()
        return y.long()

    def _correct(self, out: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
        """(correct count, count) for the logged accuracy."""
        if self.multi_label:
            hits = ((out > 0).float() == y).float()
            return float(hits.sum()), hits.numel()
        if self.binary:
            return float(((out > 0).float() == y).sum()), y.shape[0]
        return float((out.argmax(dim=1) == y).sum()), y.shape[0]

    def _run_epoch(self, loader: Any, optimizer: torch.optim.Optimizer | None) -> dict[str, float]:
        training = optimizer is not None
        self.model.train(training)
        total_loss, seen, correct, counted = 0.0, 0, 0.0, 0
        clip = self.config["gradient_clip_val"]
        with torch.set_grad_enabled(training):
            for batch_index, (x, y) in enumerate(loader):
                out = self._outputs(x)
                y = self._prepare_targets(y)
                if batch_index == 0:
                    self._check_targets(out, y)
                loss = self.loss_fn(out, y)
                if training:
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    if clip is not None:
                        nn.utils.clip_grad_norm_(self.model.parameters(), float(clip))
                    optimizer.step()
                size = y.shape[0]
                total_loss += float(loss.detach()) * size
                seen += size
                if self.task_type == TASK_TYPE_CLASSIFICATION:
                    hits, count = self._correct(out.detach(), y)
                    correct += hits
                    counted += count
        result = {"loss": total_loss / seen if seen else math.nan}
        if self.task_type == TASK_TYPE_CLASSIFICATION:
            result["acc"] = correct / counted if counted else math.nan
        return result

    # --- fitting -------------------------------------------------------------------------

    def fit(
        self,
        data_module: Any,
        *,
        epochs: int = 50,
        early_stopping_patience: int = 10,
        checkpoint_dir: str | Path | None = None,
        log_dir: str | Path | None = None,
        progress_bar: bool = True,
        restore_best: bool = True,
    ) -> dict[str, Any]:
        """Train with early stopping on the validation loss.

        Args:
            data_module: anything with ``train_dataloader()`` and
                ``val_dataloader()`` (``setup()`` is called when present).
            epochs: maximum number of epochs (≥ 1).
            early_stopping_patience: epochs in a row without a strictly lower
                validation loss before stopping (≥ 1).
            checkpoint_dir: where ``checkpoint.pt`` is written at each
                improvement (atomically); None keeps the best state in memory only.
            log_dir: where ``training_log.csv`` is rewritten after each epoch.
            progress_bar: show a bar over epochs.
            restore_best: reload the best state at the end.

        Returns:
            ``{"epochs_run", "best_epoch", "best_val_loss", "stopped_early"}``.

        Raises:
            ValueError: non-positive epochs or patience, an empty training or
                validation loader, or targets that don't fit the outputs.
            FloatingPointError: the training loss became NaN or infinite.
        """
        if int(epochs) < 1 or int(early_stopping_patience) < 1:
            raise ValueError(
                f"epochs and early_stopping_patience must be at least 1, got {epochs} and "
                f"{early_stopping_patience}"
            )
        if callable(getattr(data_module, "setup", None)):
            data_module.setup()
        train_loader = data_module.train_dataloader()
        val_loader = data_module.val_dataloader()
        for name, loader in (("training", train_loader), ("validation", val_loader)):
            if _empty_loader(loader):
                raise ValueError(f"the {name} loader is empty; give the split at least one group")
        optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=float(self.config["learning_rate"]),
            weight_decay=float(self.config["weight_decay"]),
        )
        sched = self.config["scheduler"]
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer,
            mode="min",
            factor=float(sched["factor"]),
            patience=int(sched["patience"]),
            min_lr=float(sched["min_lr"]),
        )
        best_path = checkpoint_path(checkpoint_dir) if checkpoint_dir else None
        self.history = []
        self.best_val_loss = math.inf
        self.best_epoch = 0
        best_state: dict[str, torch.Tensor] | None = None
        stale = 0
        stopped_early = False
        bar = tqdm(range(1, int(epochs) + 1), desc="epochs", disable=not progress_bar, leave=False)
        for epoch in bar:
            train = self._run_epoch(train_loader, optimizer)
            if not math.isfinite(train["loss"]):
                raise FloatingPointError(f"training loss became {train['loss']} at epoch {epoch}")
            val = self._run_epoch(val_loader, None)
            lr = float(optimizer.param_groups[0]["lr"])
            scheduler.step(val["loss"])
            self._log_epoch(epoch, train, val, lr, log_dir)
            bar.set_postfix(train_loss=f"{train['loss']:.4f}", val_loss=f"{val['loss']:.4f}")
            if val["loss"] < self.best_val_loss:
                self.best_val_loss = float(val["loss"])
                self.best_epoch = epoch
                best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
                stale = 0
                if best_path is not None:
                    self.save_checkpoint(best_path, epoch=epoch)
                    self.best_checkpoint_path = best_path
            else:
                stale += 1
                if stale >= int(early_stopping_patience):
                    stopped_early = epoch < int(epochs)
                    break
        if restore_best and best_state is not None:
            self.model.load_state_dict(best_state)
        return {
            "epochs_run": len(self.history),
            "best_epoch": self.best_epoch,
            "best_val_loss": self.best_val_loss,
            "stopped_early": stopped_early,
        }

    def _log_epoch(
        self,
        epoch: int,
        train: dict[str, float],
        val: dict[str, float],
        lr: float,
        log_dir: str | Path | None,
    ) -> None:
        row: dict[str, float] = {
            "epoch": epoch,
            "train_loss": train["loss"],
            "val_loss": val["loss"],
        }
        if self.task_type == TASK_TYPE_CLASSIFICATION:
            row["train_acc"] = train["acc"]
            row["val_acc"] = val["acc"]
        row["lr"] = lr
        self.history.append(row)
        logger.debug("epoch %d: %s", epoch, row)
        if log_dir is None:
            return
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(row), lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.history)
        write_training_log(log_dir, buffer.getvalue())

    # --- prediction ------------------------------------------------------------------------

    def predict(self, dataloader: Any) -> tuple[np.ndarray, np.ndarray]:
        """Raw outputs and targets of every batch, model in eval mode.

        Returns:
            ``(logits, targets)`` as numpy; a binary single logit is ``(n,)``.
        """
        self.model.eval()
        logits: list[np.ndarray] = []
        targets: list[np.ndarray] = []
        with torch.no_grad():
            for x, y in dataloader:
                logits.append(self._outputs(x).cpu().numpy())
                targets.append(y.cpu().numpy())
        if not logits:
            width = (
                ()
                if self.binary or self.task_type == TASK_TYPE_REGRESSION
                else (int(getattr(self.model, "output_size", 0)),)
            )
            return np.zeros((0, *width), dtype=np.float32), np.zeros((0,))
        return np.concatenate(logits), np.concatenate(targets)

    def _probabilities(self, logits: np.ndarray) -> np.ndarray | None:
        if self.task_type == TASK_TYPE_REGRESSION:
            return None
        if logits.shape[0] == 0:
            columns = 2 if self.binary else (logits.shape[1] if logits.ndim == 2 else 0)
            return np.zeros((0, columns))
        return apply_temperature(logits, 1.0, task=self.task)

    def _predictions(self, logits: np.ndarray, probabilities: np.ndarray | None) -> np.ndarray:
        if probabilities is None:
            return logits
        if self.multi_label:
            return (probabilities > DECISION_THRESHOLD).astype(np.int64)
        if self.binary:
            return (probabilities[:, 1] > DECISION_THRESHOLD).astype(np.int64)
        return probabilities.argmax(axis=1).astype(np.int64)

    def predict_split(self, data_module: Any, split: str) -> SplitOutput:
        """Outputs on ``split`` (``"train"``, ``"val"`` or ``"test"``) in split order."""
        if callable(getattr(data_module, "setup", None)):
            data_module.setup()
        if callable(getattr(data_module, "split_dataloader", None)):
            loader = data_module.split_dataloader(split, shuffle=False)
        elif split in ("val", "test"):
            loader = getattr(data_module, f"{split}_dataloader")()
        else:
            raise ValueError(
                f"cannot read split {split!r} in order from {type(data_module).__name__}"
            )
        logits, targets = self.predict(loader)
        probabilities = self._probabilities(logits)
        groups = (
            np.asarray(data_module.split_groups_of(split))
            if callable(getattr(data_module, "split_groups_of", None))
            else None
        )
        indices = (
            np.asarray(data_module.split_indices(split))
            if callable(getattr(data_module, "split_indices", None))
            else None
        )
        return SplitOutput(
            logits=logits,
            probabilities=probabilities,
            predictions=self._predictions(logits, probabilities),
            targets=targets,
            groups=groups,
            indices=indices,
        )

    def test(self, data_module: Any) -> dict[str, float]:
        """Loss (and accuracy) on the test split; stores the outputs for later access."""
        output = self.predict_split(data_module, "test")
        self._test_output = output
        if output.logits.shape[0] == 0:
            raise ValueError("the test split is empty")
        out = torch.as_tensor(output.logits, dtype=torch.float32, device=self.device)
        y = self._prepare_targets(torch.as_tensor(output.targets))
        with torch.no_grad():
            result = {"test_loss": float(self.loss_fn(out, y))}
            if self.task_type == TASK_TYPE_CLASSIFICATION:
                hits, count = self._correct(out, y)
                result["test_acc"] = hits / count
        return result

    def test_report(
        self,
        data_module: Any,
        *,
        metrics: list[str] | None = None,
        save_path: str | Path | None = None,
        calibration_bins: int | None = None,
    ) -> pd.DataFrame:
        """The evaluator's report on the test split, with intervals that resample patients.

        Runs the model on the test split (stored as by :meth:`test`) and
        calls :meth:`ECGEvaluator.generate_report
        <deepecgkit.evaluation.ECGEvaluator.generate_report>` with the data
        module's test group ids (``split_groups_of("test")``: the patient or
        recording of each segment), so the bootstrap resamples groups; a
        module without group ids gives a report whose ``Resampling`` column
        says the samples were assumed independent. Temperature scaling is
        fitted on the validation split when the module has one.

        Args:
            data_module: the module :meth:`fit` used.
            metrics: evaluator metric names (default: the evaluator's).
            save_path: also write the report there as CSV.
            calibration_bins: bins of the calibration rows (default: the evaluator's).

        Returns:
            The report frame of ``generate_report``.

        Raises:
            ValueError: a regression trainer, or an empty test split.
        """
        from deepecgkit.evaluation.evaluator import ECGEvaluator

        if self.task_type != TASK_TYPE_CLASSIFICATION:
            raise ValueError("test_report scores classifiers; this trainer does regression")
        test = self.predict_split(data_module, "test")
        self._test_output = test
        if test.logits.shape[0] == 0:
            raise ValueError("the test split is empty")
        options: dict[str, Any] = {"metrics": metrics, "device": str(self.device)}
        if calibration_bins is not None:
            options["calibration_bins"] = calibration_bins
        evaluator = ECGEvaluator(**options)
        calibration_fit = None
        try:
            val = self.predict_split(data_module, "val")
        except (AttributeError, ValueError):
            val = None
        if val is not None and val.logits.shape[0]:
            calibration_fit = (self._report_targets(val.targets), val.logits)
        return evaluator.generate_report(
            test.predictions,
            self._report_targets(test.targets),
            save_path=None if save_path is None else str(save_path),
            y_scores=test.probabilities,
            calibration_fit=calibration_fit,
            groups=test.groups,
        )

    def _report_targets(self, targets: np.ndarray) -> np.ndarray:
        """Targets as the evaluator reads them: integer classes, 0/1 multi-hot integers."""
        return np.asarray(targets).astype(np.int64)

    def get_test_results(self) -> tuple[Any, Any, Any]:
        """``(predictions, targets, probabilities)`` of the last :meth:`test`, or Nones."""
        if self._test_output is None:
            return None, None, None
        output = self._test_output
        return output.predictions, output.targets, output.probabilities

    def get_test_logits(self) -> np.ndarray | None:
        """Raw test logits of the last :meth:`test` (None before)."""
        return None if self._test_output is None else self._test_output.logits

    # --- checkpoints ----------------------------------------------------------------------------

    def save_checkpoint(
        self, path: str | Path, *, epoch: int | None = None, extra: dict[str, Any] | None = None
    ) -> Path:
        """Write the model weights and what is needed to rebuild it, atomically.

        Args:
            path: target file.
            epoch: epoch the weights come from.
            extra: plain values to store as well (``class_names``, ``task``,
                ``sampling_rate``, ``leads``, ``dataset``).

        Returns:
            The path written.
        """
        path = Path(path)
        state = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        checkpoint = {
            "format_version": CHECKPOINT_FORMAT_VERSION,
            "model_name": getattr(self.model, "_registry_name", type(self.model).__name__),
            "model_kwargs": {
                "input_channels": int(getattr(self.model, "input_channels", 0)),
                "output_size": int(getattr(self.model, "output_size", 0)),
            },
            "state_dict": state,
            "train_config": copy.deepcopy(self.config),
            "epoch": epoch,
            "best_val_loss": None if not math.isfinite(self.best_val_loss) else self.best_val_loss,
            **(extra or {}),
        }
        _atomic_save(checkpoint, path)
        return path

    @classmethod
    def load_checkpoint(
        cls, path: str | Path, *, model: nn.Module | None = None, device: str = AUTO_DEVICE
    ) -> ECGTrainer:
        """Rebuild a trainer (model from the registry unless given) from a checkpoint.

        Raises:
            FileNotFoundError: no file at ``path``.
            ValueError: not a checkpoint, or weights that don't fit the model.
        """
        checkpoint = read_checkpoint(path)
        model = build_model_from_checkpoint(checkpoint, source=path, model=model)
        trainer = cls(model, train_config=checkpoint.get("train_config"), device=device)
        if checkpoint.get("best_val_loss") is not None:
            trainer.best_val_loss = float(checkpoint["best_val_loss"])
        trainer.best_checkpoint_path = Path(path)
        return trainer
