"""``deepecg train-grid`` and ``deepecg synth``.

``train-grid`` trains every (model, dataset, seed) into run directories the
analysis reads; ``synth`` writes a synthetic dataset in the local on-disk
layout so the file readers are exercised on real files. The ``deepecg``
dispatcher calls :func:`main` with the subcommand name as ``argv[0]``.

Exit codes of ``train-grid``: 0 when every run finished or was skipped, 1
when any run failed or conflicted, 2 for usage errors, 130 when
interrupted. Usage errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "main", "parse_seeds"]

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
_SEED_TOKEN = re.compile(r"^(\d+)(?:-(\d+))?$")
_COMMANDS = ("train-grid", "synth")


class UsageError(ValueError):
    """A command line that cannot run; reported in one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_seeds(tokens: Sequence[str]) -> list[int]:
    """Seeds from integers and inclusive ranges (``0-4``), duplicates dropped, order kept.

    Raises:
        UsageError: a token that is neither, or a reversed range.
    """
    seeds: list[int] = []
    for token in tokens:
        for part in str(token).split(","):
            match = _SEED_TOKEN.match(part.strip())
            if not match:
                raise UsageError(
                    f"bad seed {part!r}: use non-negative integers or inclusive ranges like 0-4"
                )
            low = int(match.group(1))
            high = int(match.group(2)) if match.group(2) is not None else low
            if high < low:
                raise UsageError(f"bad seed range {part!r}: the end is below the start")
            seeds.extend(range(low, high + 1))
    return list(dict.fromkeys(seeds))


def _parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE parsed as JSON, else kept as a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"bad --dataset-option {text!r}: use KEY=VALUE, e.g. n_patients=30")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key.strip(), parsed


def _grid_parser() -> _Parser:
    from deepecgkit.rundir.format import DEFAULT_CALIBRATION_BINS
    from deepecgkit.training.grid import CHECKPOINT_POLICIES

    parser = _Parser(
        prog="deepecg train-grid",
        description="Train every (model, dataset, seed) and write one run directory each.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--models", nargs="+", required=True, metavar="M", help="registered model names")
    add("--datasets", nargs="+", required=True, metavar="D", help="registered dataset names")
    add("--seeds", nargs="+", required=True, metavar="S", help="integers or ranges, e.g. 0-4 7")
    add("--out", required=True, type=Path, metavar="DIR", help="folder of the run directories")
    add("--epochs", type=int, default=12, help="maximum epochs per run")
    add("--patience", type=int, default=3, help="early-stopping patience (epochs)")
    add("--batch-size", type=int, default=32, help="batch size")
    add("--lr", type=float, default=1e-3, help="AdamW learning rate")
    add("--weight-decay", type=float, default=1e-4, help="AdamW weight decay")
    add("--val-split", type=float, default=0.15, help="fraction of groups for validation")
    add("--test-split", type=float, default=0.25, help="fraction of groups for test")
    add("--leads", nargs="+", default=None, metavar="NAME", help="leads (None: each dataset's own)")
    add("--sampling-rate", type=float, default=None, metavar="HZ", help="resample to this rate")
    add("--data-dir", type=Path, default=None, metavar="ROOT", help="dataset d is read from ROOT/d")
    add(
        "--dataset-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to every dataset; VALUE parsed as JSON, else kept as a string (repeatable)",
    )
    add("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    add("--calibration-bins", type=int, default=DEFAULT_CALIBRATION_BINS, help="ECE/MCE bins")
    add("--average", default="auto", help="averaging of precision/recall/F1")
    add("--checkpoints", choices=CHECKPOINT_POLICIES, default="all", help="which runs keep one")
    add("--jobs", type=int, default=1, help="worker processes")
    add("--overwrite", action="store_true", help="rerun directories with other parameters")
    add("--no-progress", action="store_true", help="no progress bar")
    return parser


def _status_line(status: Any) -> str:
    value = "n/a" if status.value != status.value else f"{status.value:.4f}"
    line = (
        f"{status.status:<8} {Path(status.run_dir).name}  {status.metric}={value}  "
        f"{status.seconds:.1f}s"
    )
    if status.error:
        line += f"  ({status.error})"
    return line


def _grid_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed flags that are :class:`~deepecgkit.training.grid.GridSettings` fields.

    Each such flag's destination is the field's name and ``run_grid``'s
    keyword; ``dataset_options`` is the exception (``--dataset-option``
    gives ``KEY=VALUE`` texts that the caller parses).
    """
    from deepecgkit.training.grid import GridSettings

    return {
        item.name: getattr(args, item.name)
        for item in fields(GridSettings)
        if item.name != "dataset_options"
    }


def _train_grid(argv: Sequence[str]) -> int:
    from deepecgkit.evaluation.constants import AVERAGE_MODES
    from deepecgkit.training.grid import (
        STATUS_CONFLICT,
        STATUS_DONE,
        STATUS_FAILED,
        STATUS_SKIPPED,
        run_grid,
    )

    args = _grid_parser().parse_args(list(argv))
    seeds = parse_seeds(args.seeds)
    if args.average not in AVERAGE_MODES:
        raise UsageError(
            f"--average must be one of {', '.join(AVERAGE_MODES)}, got {args.average!r}"
        )
    options = dict(_parse_option(text) for text in args.dataset_option)
    started = time.perf_counter()
    statuses = run_grid(
        args.models,
        args.datasets,
        seeds,
        args.out,
        **_grid_settings(args),
        dataset_options=options,
        jobs=args.jobs,
        progress=not args.no_progress,
        on_result=lambda status: print(_status_line(status), flush=True),
    )
    counts = {name: 0 for name in (STATUS_DONE, STATUS_SKIPPED, STATUS_FAILED, STATUS_CONFLICT)}
    for status in statuses:
        counts[status.status] += 1
    summary = ", ".join(f"{count} {name}" for name, count in counts.items())
    print(f"train-grid: {summary} in {time.perf_counter() - started:.1f}s ({args.out})")
    return EXIT_FAILED if counts[STATUS_FAILED] or counts[STATUS_CONFLICT] else EXIT_OK


def _synth(argv: Sequence[str]) -> int:
    from deepecgkit.datasets.synthetic import (
        LOCAL_FORMATS,
        SYNTHETIC_SPECS,
        make_synthetic,
        write_local_dataset,
    )

    parser = _Parser(
        prog="deepecg synth",
        description="Write a synthetic ECG dataset in the local on-disk layout.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "dataset",
        choices=sorted(SYNTHETIC_SPECS),
        metavar="DATASET",
        help=", ".join(SYNTHETIC_SPECS),
    )
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="target folder")
    parser.add_argument("--format", choices=LOCAL_FORMATS, default="npz", help="record format")
    parser.add_argument("--seed", type=int, default=0, help="data seed")
    parser.add_argument(
        "--patients",
        type=int,
        default=None,
        metavar="N",
        help="patients (None: the dataset's default size)",
    )
    args = parser.parse_args(list(argv))
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"output {args.out} exists and is not a directory")
    data = make_synthetic(args.dataset, n_patients=args.patients, seed=args.seed)
    try:
        write_local_dataset(data, args.out, format=args.format)
    except OSError as exc:
        raise UsageError(f"cannot write to {args.out}: {exc.strerror or exc}") from exc
    print(
        f"synth: wrote {len(data.record_ids)} records ({len(set(data.groups))} patients) of "
        f"{args.dataset} to {args.out} ({args.format})"
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``train-grid`` or ``synth``; ``argv[0]`` is the subcommand name."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else ""
    if command not in _COMMANDS:
        print(
            f"deepecg: error: expected one of {', '.join(_COMMANDS)}, got {command!r}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from deepecgkit.training.grid import GridUsageError

    try:
        return _train_grid(args[1:]) if command == "train-grid" else _synth(args[1:])
    except (UsageError, GridUsageError) as exc:
        print(f"deepecg {command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:
        # invalid settings caught by the library before anything ran
        print(f"deepecg {command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except KeyboardInterrupt:
        print(f"deepecg {command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
