"""``run_grid``: train every (model, dataset, seed) and write its run directory.

A multi-seed analysis needs many runs that differ only in their seed, each
recorded in the run-directory format (docs/run-directory.md). The grid
produces exactly that: every seed redraws the split and the initialisation
(and nothing else), every run directory is written through
:mod:`deepecgkit.rundir.write` (scored by ``write_run_report``), a run that
fails is recorded as failed (never lost), and re-running the same command
skips what is already finished, so an interrupted grid resumes where it stopped.

Runs are identified by a fingerprint of their hyperparameters (seed, paths
and package versions excluded): a directory holding the same fingerprint
and a successful result is skipped; one holding a different fingerprint is
a conflict and is left untouched unless the caller asks to overwrite it.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from deepecgkit.registry import get_dataset_info, get_model_info
from deepecgkit.rundir.format import (
    CHECKPOINT_FILENAME,
    DEFAULT_CALIBRATION_BINS,
    ERROR_LOG_FILENAME,
    RETURNCODE_FAILED,
    RETURNCODE_INTERRUPTED,
    RETURNCODE_OK,
    checkpoint_path,
    run_directory_name,
)
from deepecgkit.rundir.metrics import PRIMARY_METRIC
from deepecgkit.rundir.read import is_run_directory, read_metadata, read_run_metrics
from deepecgkit.rundir.write import (
    clear_run_files,
    params_fingerprint,
    write_error_log,
    write_failed_run_report,
    write_interrupted_run,
)
from deepecgkit.training.trainer import DEFAULT_SCHEDULER

__all__ = [
    "CHECKPOINT_POLICIES",
    "ERROR_LOG_FILENAME",
    "STATUS_CONFLICT",
    "STATUS_DONE",
    "STATUS_FAILED",
    "STATUS_SKIPPED",
    "GridSettings",
    "GridUsageError",
    "RunStatus",
    "grid_parameters",
    "run_directory_name",
    "run_grid",
]

logger = logging.getLogger(__name__)

STATUS_DONE = "done"
STATUS_SKIPPED = "skipped"
STATUS_FAILED = "failed"
STATUS_CONFLICT = "conflict"
#: Checkpoint policies: every torch run, only the smallest seed, or none.
CHECKPOINTS_ALL = "all"
CHECKPOINTS_FIRST_SEED = "first-seed"
CHECKPOINTS_NONE = "none"
CHECKPOINT_POLICIES = (CHECKPOINTS_ALL, CHECKPOINTS_FIRST_SEED, CHECKPOINTS_NONE)


class GridUsageError(ValueError):
    """A grid request that cannot run at all (unknown name, bad seeds, unwritable output)."""


@dataclass(frozen=True)
class GridSettings:
    """Everything a run needs besides (model, dataset, seed); the CLI's options.

    Defaults match ``deepecg train-grid``.
    """

    epochs: int = 12
    patience: int = 3
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 1e-4
    val_split: float = 0.15
    test_split: float = 0.25
    leads: tuple[str, ...] | None = None
    sampling_rate: float | None = None
    data_dir: str | None = None
    dataset_options: dict[str, Any] = field(default_factory=dict)
    device: str = "auto"
    calibration_bins: int = DEFAULT_CALIBRATION_BINS
    average: str = "auto"
    checkpoints: str = CHECKPOINTS_ALL
    overwrite: bool = False


@dataclass
class RunStatus:
    """Outcome of one grid cell.

    Attributes:
        model, dataset, seed: the cell.
        run_dir: its directory.
        status: ``"done"``, ``"skipped"``, ``"failed"`` or ``"conflict"``.
        returncode: 0 for done/skipped, 1 for failed and conflict.
        metric: name of the headline metric (``f1``).
        value: its value, NaN when unavailable.
        seconds: wall time spent on the cell.
        error: ``"<Type>: <message>"`` for a failure, the reason for a conflict.
    """

    model: str
    dataset: str
    seed: int
    run_dir: str
    status: str
    returncode: int
    metric: str = PRIMARY_METRIC
    value: float = math.nan
    seconds: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class _RunTask:
    model: str
    dataset: str
    seed: int
    run_dir: str
    params: dict[str, Any]
    fingerprint: str
    keep_checkpoint: bool
    settings: GridSettings


def _output_size(dataset: str) -> int:
    info = get_dataset_info(dataset)
    if info["task"] == "binary":
        return 1
    if info["num_classes"] is None:
        raise GridUsageError(f"dataset {dataset!r} does not declare its class count")
    return int(info["num_classes"])


def _dataset_kwargs(settings: GridSettings) -> dict[str, Any]:
    leads = list(settings.leads) if settings.leads is not None else None
    return {"leads": leads, "sampling_rate": settings.sampling_rate, **settings.dataset_options}


def grid_parameters(model: str, dataset: str, *, settings: GridSettings) -> dict[str, Any]:
    """The hyperparameters that identify a run (no seed, paths or versions).

    Runs that differ only in seed share these, hence their fingerprint.
    """
    kwargs = _dataset_kwargs(settings)
    leads = kwargs.get("leads")
    input_channels = len(leads) if leads else int(get_dataset_info(dataset)["input_channels"])
    return {
        "model": model,
        "model_kwargs": {"input_channels": input_channels, "output_size": _output_size(dataset)},
        "dataset": dataset,
        "dataset_kwargs": kwargs,
        "split": {
            "val_split": settings.val_split,
            "test_split": settings.test_split,
            "stratify": True,
        },
        "train": {
            "epochs": settings.epochs,
            "patience": settings.patience,
            "batch_size": settings.batch_size,
            "learning_rate": settings.lr,
            "weight_decay": settings.weight_decay,
            "scheduler": dict(DEFAULT_SCHEDULER),
        },
        "evaluation": {"calibration_bins": settings.calibration_bins, "average": settings.average},
    }


# --- resume ---------------------------------------------------------------------------------


def _read_headline(run_dir: Path) -> float:
    """The headline metric of a finished run directory (NaN when unreadable)."""
    record = read_run_metrics(run_dir)
    return math.nan if record is None else record.metrics.get(PRIMARY_METRIC, math.nan)


def _resume_decision(task: _RunTask) -> str | None:
    """``"skipped"``, ``"conflict"`` or None (run it)."""
    run_dir = Path(task.run_dir)
    metadata = read_metadata(run_dir)
    if metadata is None:
        return None
    recorded = metadata.get("params_fingerprint")
    if recorded != task.fingerprint:
        return None if task.settings.overwrite else STATUS_CONFLICT
    finished = metadata.get("returncode") == RETURNCODE_OK and is_run_directory(run_dir)
    return STATUS_SKIPPED if finished else None


# --- one run -----------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    import sklearn
    import torch

    return {
        "python_version": platform.python_version(),
        "numpy_version": np.__version__,
        "sklearn_version": sklearn.__version__,
        "torch_version": torch.__version__,
    }


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class _Outputs:
    logits: np.ndarray
    probabilities: np.ndarray
    targets: np.ndarray
    groups: np.ndarray


def _build_data_module(task: _RunTask) -> Any:
    from deepecgkit.datasets import ECGDataModule
    from deepecgkit.registry import get_dataset

    settings = task.settings
    kwargs = {k: v for k, v in _dataset_kwargs(settings).items() if v is not None}
    kwargs.pop("leads", None)
    kwargs.pop("sampling_rate", None)
    return ECGDataModule(
        dataset_class=get_dataset(task.dataset),
        data_dir=str(Path(settings.data_dir) / task.dataset) if settings.data_dir else None,
        sampling_rate=settings.sampling_rate,
        leads=list(settings.leads) if settings.leads is not None else None,
        batch_size=settings.batch_size,
        val_split=settings.val_split,
        test_split=settings.test_split,
        seed=task.seed,
        stratify=True,
        dataset_kwargs=kwargs,
    )


def _check_layout(task: _RunTask, module: Any) -> None:
    """The dataset must provide the leads and outputs the fingerprinted params promise."""
    expected = task.params["model_kwargs"]
    actual = {
        "input_channels": module.input_channels,
        "output_size": 1 if module.task == "binary" else module.num_classes,
    }
    if actual != expected:
        raise ValueError(
            f"dataset {task.dataset!r} provides {actual} but the grid expected {expected} "
            "(check --leads and the dataset's files)"
        )


def _train_torch(task: _RunTask, module: Any, run_dir: Path, meta: dict[str, Any]) -> Any:
    from deepecgkit.registry import get_model
    from deepecgkit.training.trainer import ECGTrainer
    from deepecgkit.utils import seed_everything

    settings = task.settings
    kwargs = task.params["model_kwargs"]
    seed_everything(task.seed)  # right before building: the seed alone fixes the weights
    model = get_model(task.model)(**kwargs)
    multi_label = module.task == "multilabel"
    trainer = ECGTrainer(
        model,
        {
            "learning_rate": settings.lr,
            "weight_decay": settings.weight_decay,
            "scheduler": dict(DEFAULT_SCHEDULER),
            "multi_label": multi_label,
            "binary_classification": module.task == "binary",
        },
        device=settings.device,
    )
    fitted = trainer.fit(
        module,
        epochs=settings.epochs,
        early_stopping_patience=settings.patience,
        checkpoint_dir=run_dir if task.keep_checkpoint else None,
        log_dir=run_dir,
        progress_bar=False,
    )
    if task.keep_checkpoint:
        # fit wrote the best weights; rewrite them with what a reader of the
        # checkpoint alone needs to use it
        trainer.save_checkpoint(
            checkpoint_path(run_dir),
            epoch=fitted["best_epoch"],
            extra={
                "class_names": module.class_names,
                "task": module.task,
                "sampling_rate": module.sampling_rate,
                "leads": list(module.dataset.leads),
                "dataset": task.dataset,
            },
        )
    meta.update(
        {
            "epochs_run": fitted["epochs_run"],
            "best_epoch": fitted["best_epoch"],
            "best_val_loss": fitted["best_val_loss"],
            "device": str(trainer.device),
        }
    )

    def outputs(split: str) -> _Outputs:
        out = trainer.predict_split(module, split)
        return _Outputs(out.logits, out.probabilities, out.targets, out.groups)

    return outputs


def _train_sklearn(task: _RunTask, module: Any, meta: dict[str, Any]) -> Any:
    from deepecgkit.evaluation.recalibration import apply_temperature
    from deepecgkit.registry import get_model

    multilabel = module.task == "multilabel"
    estimator = get_model(task.model)(
        output_size=task.params["model_kwargs"]["output_size"],
        multilabel=multilabel,
        sampling_rate=module.sampling_rate,
    )
    dataset = module.dataset
    train = module.split_indices("train")
    estimator.fit(dataset.signals[train], dataset.labels[train])
    meta.update({"epochs_run": None, "best_epoch": None, "best_val_loss": None, "device": "cpu"})

    def outputs(split: str) -> _Outputs:
        indices = module.split_indices(split)
        logits = estimator.decision_function(dataset.signals[indices])
        probabilities = apply_temperature(logits, 1.0, task="multilabel" if multilabel else None)
        return _Outputs(logits, probabilities, dataset.labels[indices], dataset.groups[indices])

    return outputs


def _metadata_base(task: _RunTask) -> dict[str, Any]:
    return {
        "seed": task.seed,
        "params_fingerprint": task.fingerprint,
        "params": task.params,
        "model": task.model,
        "dataset": task.dataset,
    }


@dataclass
class _RunState:
    """What a run has produced so far (read when it fails or is interrupted)."""

    run_dir: Path
    meta: dict[str, Any]
    started: float
    timings: dict[str, float] = field(default_factory=dict)
    module: Any = None


def _report_targets(targets: np.ndarray, multilabel: bool) -> np.ndarray:
    """Multi-hot float targets from the loader become 0/1 integers for the report."""
    return targets.astype(np.int64) if multilabel else targets


def _train_and_report(task: _RunTask, state: _RunState) -> float:
    """Steps 3-6 of a run: data, training, predictions, run directory; returns the headline."""
    from deepecgkit.evaluation.run_scoring import write_run_report
    from deepecgkit.utils import seed_everything

    meta, timings = state.meta, state.timings
    seed_everything(task.seed)
    tick = time.perf_counter()
    module = state.module = _build_data_module(task)
    module.setup()
    _check_layout(task, module)
    timings["data_s"] = time.perf_counter() - tick
    kind = get_model_info(task.model)["kind"]
    meta.update(
        {
            "checkpoint": CHECKPOINT_FILENAME if kind == "torch" and task.keep_checkpoint else None,
            "model_kind": kind,
            "input_channels": module.input_channels,
            "leads": list(module.dataset.leads),
            "sampling_rate": module.sampling_rate,
            "class_names": module.class_names,
        }
    )
    tick = time.perf_counter()
    if kind == "torch":
        outputs = _train_torch(task, module, state.run_dir, meta)
    else:
        outputs = _train_sklearn(task, module, meta)
    timings["train_s"] = time.perf_counter() - tick
    tick = time.perf_counter()
    val, test = outputs("val"), outputs("test")
    meta.update(_versions())
    timings["eval_s"] = time.perf_counter() - tick
    timings["total_s"] = time.perf_counter() - state.started
    meta.update({"timings": timings, "finished_at": _now(), "returncode": RETURNCODE_OK})
    multilabel = module.task == "multilabel"
    validation = (_report_targets(val.targets, multilabel), val.logits, val.groups)
    row = write_run_report(
        state.run_dir,
        _report_targets(test.targets, multilabel),
        test.probabilities,
        model=task.model,
        dataset=task.dataset,
        logits=test.logits,
        val=validation if len(val.targets) else None,
        groups=test.groups,
        split_info=module.split_info(),
        metadata=meta,
        calibration_bins=task.settings.calibration_bins,
        average=task.settings.average,
    )
    return float(row.get(PRIMARY_METRIC, math.nan))


def _execute_run(task: _RunTask) -> RunStatus:
    """One grid cell: skip, report a conflict, or run it; a failure is recorded, not raised."""
    import torch

    started = time.perf_counter()
    status = RunStatus(task.model, task.dataset, task.seed, task.run_dir, STATUS_DONE, 0)
    decision = _resume_decision(task)
    if decision == STATUS_SKIPPED:
        status.status = STATUS_SKIPPED
        status.value = _read_headline(Path(task.run_dir))
    elif decision == STATUS_CONFLICT:
        status.status, status.returncode = STATUS_CONFLICT, RETURNCODE_FAILED
        status.error = (
            "an existing run with different parameters is kept; pass --overwrite to replace it"
        )
    else:
        state = _RunState(Path(task.run_dir), _metadata_base(task), started)
        state.run_dir.mkdir(parents=True, exist_ok=True)
        clear_run_files(state.run_dir)
        state.meta["started_at"] = _now()
        deterministic = torch.are_deterministic_algorithms_enabled()
        warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
        try:
            torch.use_deterministic_algorithms(True, warn_only=True)
            status.value = _train_and_report(task, state)
        except KeyboardInterrupt:
            _record_interrupt(state)
            raise
        except Exception as exc:
            status.status, status.returncode = STATUS_FAILED, RETURNCODE_FAILED
            status.error = f"{type(exc).__name__}: {exc}"
            _record_failure(task, state, status.error)
        finally:
            torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
    status.seconds = time.perf_counter() - started
    return status


def _record_failure(task: _RunTask, state: _RunState, error: str) -> None:
    """Write the failed run's metadata, split sizes, empty metrics row and traceback."""
    logger.error("%s failed: %s", state.run_dir.name, error)
    state.timings["total_s"] = time.perf_counter() - state.started
    state.meta.update({"timings": state.timings, "finished_at": _now()})
    split_info = None
    if state.module is not None:
        try:
            split_info = state.module.split_info()
        except Exception:  # the split itself may be what failed
            split_info = None
    try:
        write_error_log(state.run_dir, traceback.format_exc())
        write_failed_run_report(
            state.run_dir,
            task.model,
            task.dataset,
            multilabel=get_dataset_info(task.dataset)["task"] == "multilabel",
            returncode=RETURNCODE_FAILED,
            error=error,
            split_info=split_info,
            metadata=state.meta,
        )
    except Exception as record_exc:  # disk full or similar: say so, keep the grid going
        logger.error("could not record the failure of %s: %s", state.run_dir.name, record_exc)


def _record_interrupt(state: _RunState) -> None:
    """Leave no metrics file and no temporaries; note the interruption in the metadata."""
    state.timings["total_s"] = time.perf_counter() - state.started
    state.meta.update(
        {"returncode": RETURNCODE_INTERRUPTED, "timings": state.timings, "error": "interrupted"}
    )
    try:
        write_interrupted_run(state.run_dir, state.meta)
    except Exception as exc:  # best effort while the user is stopping the grid
        logger.warning("could not record the interruption of %s: %s", state.run_dir.name, exc)


# --- the grid ---------------------------------------------------------------------------------


def _check_request(
    models: Sequence[str], datasets: Sequence[str], seeds: Sequence[int], settings: GridSettings
) -> None:
    from deepecgkit.registry import get_dataset, get_model
    from deepecgkit.utils import resolve_device

    if not models or not datasets or not seeds:
        raise GridUsageError("give at least one model, one dataset and one seed")
    for name in models:
        try:
            get_model(name)
        except ValueError as exc:
            raise GridUsageError(str(exc)) from exc
    for name in datasets:
        try:
            get_dataset(name)
        except ValueError as exc:
            raise GridUsageError(str(exc)) from exc
    bad_seeds = [s for s in seeds if isinstance(s, bool) or not isinstance(s, (int, np.integer))]
    if bad_seeds or any(int(s) < 0 for s in seeds):
        raise GridUsageError(f"seeds must be non-negative integers, got {list(seeds)}")
    if settings.checkpoints not in CHECKPOINT_POLICIES:
        raise GridUsageError(
            f"checkpoints must be one of {', '.join(CHECKPOINT_POLICIES)}, "
            f"got {settings.checkpoints!r}"
        )
    for name, value in (("epochs", settings.epochs), ("patience", settings.patience)):
        if int(value) < 1:
            raise GridUsageError(f"{name} must be at least 1, got {value}")
    if int(settings.batch_size) < 1:
        raise GridUsageError(f"batch size must be at least 1, got {settings.batch_size}")
    if not (settings.val_split >= 0 and settings.test_split >= 0) or (
        settings.val_split + settings.test_split >= 1
    ):
        raise GridUsageError(
            f"val and test fractions must be >= 0 and sum below 1, got {settings.val_split} "
            f"and {settings.test_split}"
        )
    try:
        resolve_device(settings.device)
    except ValueError as exc:
        raise GridUsageError(str(exc)) from exc


def _prepare_output(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise GridUsageError(f"output {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GridUsageError(f"cannot create output directory {out}: {exc.strerror}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise GridUsageError(f"output directory {out} is not writable")


def _tasks(
    models: Sequence[str],
    datasets: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    settings: GridSettings,
) -> list[_RunTask]:
    first_seed = min(int(s) for s in seeds)
    tasks = []
    for dataset in datasets:
        for model in models:
            params = grid_parameters(model, dataset, settings=settings)
            fingerprint = params_fingerprint(params)
            torch_model = get_model_info(model)["kind"] == "torch"
            for seed in seeds:
                keep = torch_model and (
                    settings.checkpoints == CHECKPOINTS_ALL
                    or (settings.checkpoints == CHECKPOINTS_FIRST_SEED and int(seed) == first_seed)
                )
                tasks.append(
                    _RunTask(
                        model=model,
                        dataset=dataset,
                        seed=int(seed),
                        run_dir=str(out / run_directory_name(model, dataset, int(seed))),
                        params=params,
                        fingerprint=fingerprint,
                        keep_checkpoint=keep,
                        settings=settings,
                    )
                )
    return tasks


def _worker_init(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _run_parallel(tasks: list[_RunTask], jobs: int) -> Iterator[RunStatus]:
    threads = max(1, (os.cpu_count() or 1) // jobs)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=_worker_init, initargs=(threads,)
    ) as pool:
        futures = {pool.submit(_execute_run, task): task for task in tasks}
        try:
            for future in as_completed(futures):
                yield future.result()
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def run_grid(
    models: Sequence[str],
    datasets: Sequence[str],
    seeds: Sequence[int],
    out: str | Path,
    *,
    epochs: int = 12,
    patience: int = 3,
    batch_size: int = 32,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    val_split: float = 0.15,
    test_split: float = 0.25,
    leads: Sequence[str] | None = None,
    sampling_rate: float | None = None,
    data_dir: str | Path | None = None,
    dataset_options: dict[str, Any] | None = None,
    device: str = "auto",
    calibration_bins: int = DEFAULT_CALIBRATION_BINS,
    average: str = "auto",
    checkpoints: str = CHECKPOINTS_ALL,
    jobs: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    on_result: Callable[[RunStatus], None] | None = None,
) -> list[RunStatus]:
    """Train every (model, dataset, seed) and write ``<out>/<model>_<dataset>_seed<seed>``.

    The parameters are the options of ``deepecg train-grid`` (same names and
    defaults). Runs go in the order dataset, model, seed; with ``jobs > 1``
    they are spread over that many spawned worker processes, each limited to
    ``cpu_count // jobs`` torch threads, and finish in any order.

    Args:
        models, datasets: registered names.
        seeds: non-negative integers; each redraws the split and the weights.
        out: output folder (created).
        on_result: called with each run's status as it finishes (the CLI
            prints a line per run from it).
        progress: a tqdm bar over the runs on stderr (only when stderr is a
            terminal).

    Returns:
        One :class:`RunStatus` per run, in grid order.

    Raises:
        GridUsageError: unknown model or dataset, bad seeds or settings,
            unavailable device, unwritable output; nothing runs then.
        KeyboardInterrupt: re-raised after the interrupted run's partial
            files are cleaned up (it gets no metrics file).
    """
    settings = GridSettings(
        epochs=int(epochs),
        patience=int(patience),
        batch_size=int(batch_size),
        lr=float(lr),
        weight_decay=float(weight_decay),
        val_split=float(val_split),
        test_split=float(test_split),
        leads=tuple(leads) if leads is not None else None,
        sampling_rate=sampling_rate,
        data_dir=str(data_dir) if data_dir is not None else None,
        dataset_options=dict(dataset_options or {}),
        device=device,
        calibration_bins=int(calibration_bins),
        average=average,
        checkpoints=checkpoints,
        overwrite=bool(overwrite),
    )
    _check_request(models, datasets, seeds, settings)
    unique_seeds = list(dict.fromkeys(int(s) for s in seeds))
    if int(jobs) < 1:
        raise GridUsageError(f"jobs must be at least 1, got {jobs}")
    root = Path(out)
    _prepare_output(root)
    tasks = _tasks(models, datasets, unique_seeds, root, settings)
    from tqdm.auto import tqdm

    bar = tqdm(
        total=len(tasks),
        desc="train-grid",
        unit="run",
        disable=not (progress and sys.stderr.isatty()),
        file=sys.stderr,
    )
    results: dict[str, RunStatus] = {}
    stream = (
        (_execute_run(task) for task in tasks)
        if int(jobs) == 1
        else _run_parallel(tasks, int(jobs))
    )
    try:
        for status in stream:
            results[status.run_dir] = status
            bar.update(1)
            logger.info(
                "%s %s %s=%.4f %.1fs",
                status.status,
                Path(status.run_dir).name,
                status.metric,
                status.value,
                status.seconds,
            )
            if on_result is not None:
                on_result(status)
    finally:
        bar.close()
    return [results[task.run_dir] for task in tasks]
