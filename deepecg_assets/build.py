"""``deepecg-build`` (``python -m deepecg_assets.build``): build everything, say what was found.

The README's first command (``scripts/run-demo``) ends here. It materialises
the whole asset graph in this process, against the instance under
``$DAGSTER_HOME`` (``./.dagster_home`` when unset), so ``dagster dev`` shows
the run afterwards; then prints the summary of
:mod:`deepecgkit.analysis.summary`, the asset checks that did not pass, and
how to open the UI.

What reaches the terminal, and why:

- Dagster's step logs only with ``--verbose``: a build of the bundled corpus
  writes about three hundred of them, and the summary is what a researcher
  came for. The UI keeps every one of them either way (the event log is
  written to the instance, not through the console logger).
- Progress lines: the library's progress records
  (:mod:`deepecgkit.progress`: runs read, runs bootstrapped,
  figures drawn; at most one line per loop every few seconds) and each
  step that took longer than :data:`LONG_STEP_SECONDS`, so a long build
  visibly moves. The corpus is not trained here (its runs are finished
  training runs), so there is no training progress to show.
- A user error (a run root that does not exist, an ``analysis`` setting that
  names no run, an unusable ``DAGSTER_HOME``) is one line on stderr and exit
  status 2; a failed build is one line per failed step and exit status 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import dagster as dg
import pandas as pd
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.execution.execute_in_process import core_execute_in_process, merge_run_tags
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)

from deepecg_assets.assets.report import REPORT_FOLDER
from deepecg_assets.definitions import defs
from deepecg_assets.parquet_frames import read_stored_frame
from deepecg_assets.partitions import (
    DATASET_PARTITIONS,
    DISCOVERY_ASSET,
    PARTITIONS_METADATA,
    PER_DATASET_ASSETS,
    materialization_metadata,
    remove_stored_partitions,
)
from deepecg_assets.resources import AnalysisSettings, OutputFolderResource
from deepecg_assets.sensors import COMBINES_TAG
from deepecgkit.analysis.summary import SUMMARY_FLIP_COLUMNS, build_summary, format_summary
from deepecgkit.io import atomic_write_text
from deepecgkit.progress import PROGRESS_ATTRIBUTE
from deepecgkit.statistical_report.report import FIGURES_FOLDER

#: Instance folder when ``$DAGSTER_HOME`` is unset (the one ``scripts/run-demo`` always used).
DEFAULT_DAGSTER_HOME = ".dagster_home"
#: Written into a new instance folder that has no ``dagster.yaml``:
#:
#: - telemetry off: Dagster prints a notice on an instance's first use and
#:   would try to send usage statistics; the demo runs on machines without
#:   internet and should not ask a newcomer a question before showing a result;
#: - the run queue of ``deploy/dagster.yaml`` (the same block, tested): two runs
#:   at once, one with the cross-dataset combines at a time, and a look at the
#:   queue every second. Dagster's default queue looks every 5 s, which was the
#:   larger part of the 8.7 s between ``new_runs_sensor``'s request and the
#:   start of its run at 100,000 runs (docs/benchmarks.md, session 23).
#:
#: A ``dagster.yaml`` the user wrote is never touched; one that this command
#: wrote in an earlier version (:data:`EARLIER_INSTANCE_YAMLS`) is replaced.
NEW_INSTANCE_YAML = f"""\
telemetry:
  enabled: false
run_coordinator:
  module: dagster
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 2
    dequeue_use_threads: true
    dequeue_num_workers: 2
    dequeue_interval_seconds: 1
    tag_concurrency_limits:
      - key: {COMBINES_TAG}
        limit: 1
"""
#: What earlier versions wrote as :data:`NEW_INSTANCE_YAML`, byte for byte.
EARLIER_INSTANCE_YAMLS = ("telemetry:\n  enabled: false\n",)
#: Most discovered runs whose dataset partitions one run of the build materialises (see
#: :func:`materialize_everything`): at 100,000 runs two ranges of 50,000, at 20,000 one.
DATASET_RUNS_PER_RANGE = 50_000
#: Steps that took at least this long get a progress line when they finish.
LONG_STEP_SECONDS = 5.0
#: Loggers whose progress records are shown.
PROGRESS_LOGGERS = ("deepecgkit",)
#: Seconds between two progress lines of one loop (its last line is always shown).
PROGRESS_INTERVAL_SECONDS = 5.0
#: Exit statuses: a user error, a build with failed steps.
EXIT_USER_ERROR = 2
EXIT_BUILD_FAILED = 1
#: Name the command gives itself in error lines (its console script, see pyproject.toml).
PROG = "deepecg-build"
#: The frames the summary reads, by asset name: the columns it reads (None: all) and whether
#: of each file only the distinct rows. At 100,000 runs the two runs frames are 98 MB and 1.8
#: million rows, of which the summary counts names; of the flip grid's 33 columns of 232,750
#: rows it reads ten (0.73 s -> 0.09 s).
SUMMARY_FRAMES: dict[str, tuple[list[str] | None, bool]] = {
    "discovered_runs": (["run_dir"], True),
    "reconciled_runs": (["run_dir", "model", "dataset"], True),
    "averaging_conflicts": (None, False),
    "flip_grid": ([*SUMMARY_FLIP_COLUMNS, "fdr_method"], False),
}
_SUCCESS_EVENTS = {"STEP_SUCCESS"}


class BuildError(ValueError):
    """Something the user can fix before a build can start (one sentence)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Materialise every asset of deepecg_assets.definitions once, in this process, "
            "and print what the build found. Runs come from $DEEPECG_RUNS (the bundled "
            "example corpus when unset), results go to $DEEPECG_OUTPUT (./deepecg_output), "
            f"run history to $DAGSTER_HOME (./{DEFAULT_DAGSTER_HOME})."
        ),
    )
    parser.add_argument(
        "--verbose", action="store_true", help="also print Dagster's step logs (DEBUG and up)"
    )
    return parser


# --- the instance ----------------------------------------------------------------------------


def _written_earlier(config: Path) -> bool:
    """Whether ``config`` is a file an earlier version of this command wrote, unchanged."""
    try:
        return config.read_text(encoding="utf-8") in EARLIER_INSTANCE_YAMLS
    except (OSError, UnicodeDecodeError):
        return False


def prepare_dagster_home(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """The instance folder: ``$DAGSTER_HOME`` or ``./.dagster_home``, created if missing.

    Sets ``DAGSTER_HOME`` in ``environ`` (Dagster reads it from there) and
    writes :data:`NEW_INSTANCE_YAML` into a folder without ``dagster.yaml``
    (or with one an earlier version wrote).

    Raises:
        BuildError: the path exists but is not a folder, or cannot be created.
    """
    home = Path(environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME).expanduser().resolve()
    if home.exists() and not home.is_dir():
        raise BuildError(f"DAGSTER_HOME {home} is a file; point it at a folder (or unset it)")
    try:
        home.mkdir(parents=True, exist_ok=True)
        config = home / "dagster.yaml"
        if not config.exists() or _written_earlier(config):
            atomic_write_text(config, NEW_INSTANCE_YAML)
    except OSError as exc:
        raise BuildError(f"DAGSTER_HOME {home} cannot be created: {exc.strerror}") from None
    environ["DAGSTER_HOME"] = str(home)
    return home


# --- what reaches the terminal ---------------------------------------------------------------


def _step_event(record: logging.LogRecord) -> tuple[str, float] | None:
    """(step key, seconds) of a step-success record, else None."""
    event = getattr(record, "dagster_event", None)
    if event is None or event.event_type_value not in _SUCCESS_EVENTS:
        return None
    seconds = float(getattr(event.event_specific_data, "duration_ms", 0.0) or 0.0) / 1000.0
    return str(event.step_key), seconds


class ProgressHandler(logging.Handler):
    """Prints library progress and slow steps as indented lines on ``stream``.

    A loop's progress (records carrying :data:`PROGRESS_ATTRIBUTE`) is printed
    at most once per :data:`PROGRESS_INTERVAL_SECONDS`, and always when the
    loop is done, so a quick loop costs one line and a slow one shows it moves.
    """

    def __init__(self, stream: TextIO, *, clock: Callable[[], float] = time.monotonic) -> None:
        # Dagster logs step events at DEBUG; emit() picks what it shows.
        super().__init__(level=logging.NOTSET)
        self.stream = stream
        self.clock = clock
        self._last_shown: dict[str, float] = {}

    def _progress_line(self, what: str, done: int, total: int) -> str | None:
        now = self.clock()
        last = self._last_shown.get(what)
        if done < total and last is not None and now - last < PROGRESS_INTERVAL_SECONDS:
            return None
        self._last_shown[what] = now
        return f"  {what}: {done} of {total}"

    def emit(self, record: logging.LogRecord) -> None:
        step = _step_event(record)
        progress = getattr(record, PROGRESS_ATTRIBUTE, None)
        if step is not None:
            key, seconds = step
            line = f"  {key}: done in {seconds:.1f} s" if seconds >= LONG_STEP_SECONDS else None
        elif progress is not None:
            line = self._progress_line(*progress)
        else:
            line = None
        if line is not None:
            self.stream.write(line + "\n")
            self.stream.flush()


def _step_logger_def(handler: logging.Handler) -> dg.LoggerDefinition:
    """A Dagster logger that passes step events to ``handler`` (and prints nothing itself)."""

    def _create(_context: dg.InitLoggerContext) -> logging.Logger:
        step_logger = logging.Logger("deepecg_assets.build.steps", level=logging.DEBUG)
        step_logger.addHandler(handler)
        return step_logger

    return dg.LoggerDefinition(_create, description="progress lines for slow steps")


@dataclass
class _ProgressOutput:
    """The handler on the library loggers, removed again after the build."""

    handler: ProgressHandler
    loggers: list[logging.Logger]
    levels: list[int]

    @classmethod
    def attach(cls, stream: TextIO) -> _ProgressOutput:
        handler = ProgressHandler(stream)
        loggers = [logging.getLogger(name) for name in PROGRESS_LOGGERS]
        levels = [lg.level for lg in loggers]
        for lg in loggers:
            lg.addHandler(handler)
            if lg.getEffectiveLevel() > logging.INFO:
                lg.setLevel(logging.INFO)
        return cls(handler, loggers, levels)

    def detach(self) -> None:
        for lg, level in zip(self.loggers, self.levels, strict=True):
            lg.removeHandler(self.handler)
            lg.setLevel(level)


# --- the build -------------------------------------------------------------------------------


@dataclass
class BuildResult:
    """The in-process runs of one build: discovery, then everything else."""

    runs: list[dg.ExecuteInProcessResult]

    @property
    def success(self) -> bool:
        return all(run.success for run in self.runs)

    @property
    def run_ids(self) -> list[str]:
        return [run.run_id for run in self.runs]

    @property
    def all_events(self) -> list[dg.DagsterEvent]:
        return [event for run in self.runs for event in run.all_events]

    def asset_check_evaluations(self) -> list[dg.AssetCheckEvaluation]:
        return [e for run in self.runs for e in run.get_asset_check_evaluations()]

    def discovery_metadata(self) -> dict[str, Any]:
        """The metadata of the build's ``discovered_runs`` materialisation, as plain values."""
        (materialization,) = self.runs[0].asset_materializations_for_node(DISCOVERY_ASSET)
        return materialization_metadata(materialization)


def sync_dataset_partitions(
    instance: dg.DagsterInstance, keys: Sequence[str], *, frames_dir: Path
) -> list[str]:
    """Make the instance's dataset partitions exactly ``keys``; the order the instance keeps.

    New datasets are added; partitions of datasets that are gone are deleted
    with their stored frames (a clean build never holds them).
    """
    registered = list(instance.get_dynamic_partitions(DATASET_PARTITIONS))
    gone = sorted(set(registered) - set(keys))
    for key in gone:
        instance.delete_dynamic_partition(DATASET_PARTITIONS, key)
    remove_stored_partitions(frames_dir, gone)
    added = [key for key in keys if key not in set(registered)]
    if added:
        instance.add_dynamic_partitions(DATASET_PARTITIONS, added)
    return list(instance.get_dynamic_partitions(DATASET_PARTITIONS))


def _execute(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    run_config: dict,
    *,
    selection: dg.AssetSelection,
    tags: dict[str, str] | None = None,
) -> dg.ExecuteInProcessResult:
    """One run of ``selection``, in this process: ``job.execute_in_process`` without its memory.

    ``JobDefinition.execute_in_process`` keeps every output of every step in
    its result (so that ``output_for_node`` can return it): at 100,000 runs
    that is every dataset's frames, held until the build ends. The build
    reads its outputs from storage, not from the result, so it runs the same
    in-process execution with output capture off (Dagster's
    ``core_execute_in_process``, what ``execute_in_process`` calls; dagster is
    pinned to one version in pyproject.toml). Events, materialisations and
    check evaluations are in the result as before.
    """
    keys = sorted(selection.resolve(defs.resolve_asset_graph()))
    ephemeral = job.as_ephemeral_job(resource_defs={}, input_values={}, asset_selection=keys)
    return core_execute_in_process(
        job=InMemoryJob(job_def=ephemeral),
        run_config=run_config,
        instance=instance,
        output_capturing_enabled=False,
        raise_on_error=False,
        run_tags=merge_run_tags(
            job_def=job,
            partition_key=None,
            tags=tags,
            asset_selection=keys,
            instance=instance,
            run_config=run_config,
        ),
        asset_selection=frozenset(keys),
    )


def dataset_ranges(
    order: Sequence[str], runs_per_key: Mapping[str, int], *, runs_per_range: int
) -> list[list[str]]:
    """``order`` cut into consecutive ranges of at most ``runs_per_range`` runs each.

    A range is a run of the build; a dataset with more runs than that is a
    range of its own (a dataset is never split). Keys missing from
    ``runs_per_key`` count as empty. No keys give no ranges.
    """
    ranges: list[list[str]] = []
    total = 0
    for key in order:
        runs = runs_per_key.get(key, 0)
        if ranges and total + runs <= runs_per_range:
            ranges[-1].append(key)
            total += runs
        else:
            ranges.append([key])
            total = runs
    return ranges


def _runs_per_key(output: OutputFolderResource, partitions: Mapping[str, str]) -> dict[str, int]:
    """Discovered runs per partition key, from the stored ``discovered_runs`` frame."""
    datasets = read_stored_frame(output.frames_dir(), DISCOVERY_ASSET, columns=["dataset"])
    counts = datasets["dataset"].astype(str).value_counts()
    return {key: int(counts.get(dataset, 0)) for key, dataset in partitions.items()}


def _range_tags(keys: Sequence[str]) -> dict[str, str]:
    return {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]}


def materialize_everything(
    instance: dg.DagsterInstance,
    *,
    verbose: bool,
    stream: TextIO,
    runs_per_range: int = DATASET_RUNS_PER_RANGE,
) -> BuildResult:
    """Every asset and check, in this process on ``instance``, in two runs or a few more.

    The first run discovers the runs; the dataset partitions are then made to
    match the datasets found. The dataset partitions are built as single-run
    ranges (each step runs once for all the partitions of its range, however
    many datasets there are) of at most ``runs_per_range`` discovered runs
    (:func:`dataset_ranges`); the last range's run also builds everything
    downstream. A corpus within ``runs_per_range`` is built in two runs.
    ``dagster asset materialize --select '*'`` cannot do this on a fresh
    instance, which holds no partitions yet.

    Why ranges: a step over many partitions stores its outputs when it ends,
    so it holds every partition's frames at once, and the build's memory grew
    with the corpus (the long frames of 100,000 runs are 1.8 million rows).

    Dagster's console logger is attached only when ``verbose``; the progress
    logger always is. Never raises for a failing step: the result says which;
    no later run starts after a failed one.
    """
    progress = ProgressHandler(stream)
    logger_defs: dict[str, dg.LoggerDefinition] = {"progress": _step_logger_def(progress)}
    loggers: dict[str, dict] = {"progress": {}}
    if verbose:
        logger_defs["console"] = dg.colored_console_logger
        loggers["console"] = {"config": {"log_level": "DEBUG"}}
    job = defs.resolve_implicit_global_asset_job_def().with_logger_defs(logger_defs)
    run_config = {"loggers": loggers}
    discovery = dg.AssetSelection.assets(DISCOVERY_ASSET)
    first = _execute(job, instance, run_config, selection=discovery)
    result = BuildResult([first])
    if not first.success:
        return result
    output: OutputFolderResource = defs.resources["output_folder"]
    partitions = dict(result.discovery_metadata()[PARTITIONS_METADATA])
    order = sync_dataset_partitions(instance, list(partitions), frames_dir=output.frames_dir())
    per_dataset = dg.AssetSelection.assets(*PER_DATASET_ASSETS)
    rest = dg.AssetSelection.all() - discovery
    if not order:
        result.runs.append(_execute(job, instance, run_config, selection=rest - per_dataset))
        return result
    ranges = dataset_ranges(order, _runs_per_key(output, partitions), runs_per_range=runs_per_range)
    for keys in ranges[:-1]:
        run = _execute(job, instance, run_config, selection=per_dataset, tags=_range_tags(keys))
        result.runs.append(run)
        if not run.success:
            return result
    last = _execute(job, instance, run_config, selection=rest, tags=_range_tags(ranges[-1]))
    result.runs.append(last)
    return result


def failure_lines(result: BuildResult) -> tuple[list[str], bool]:
    """One line per failed step (its key and the failure's description), and whether all are
    user errors.

    A step fails with ``dagster.Failure`` where the platform found something the
    user can fix (a run root that does not exist, an ``analysis`` setting that
    names no run); any other exception is a defect of the platform.
    """
    lines, all_user = [], True
    for event in result.all_events:
        if not event.is_step_failure:
            continue
        data = event.step_failure_data
        user = data.user_failure_data
        if user is not None and user.description:
            message = user.description
        else:
            all_user = False
            message = data.error.message.strip().splitlines()[-1] if data.error else "failed"
        lines.append(f"{event.step_key}: {message}")
    return lines, all_user


def check_lines(result: BuildResult) -> list[str]:
    """The asset checks that did not pass, one line each (their severity and description)."""
    evaluations = result.asset_check_evaluations()
    failed = [e for e in evaluations if not e.passed]
    lines = [f"Asset checks: {len(evaluations) - len(failed)} of {len(evaluations)} passed"]
    for evaluation in sorted(failed, key=lambda e: (e.asset_key.to_user_string(), e.check_name)):
        severity = evaluation.severity.value if evaluation.severity else "WARN"
        detail = f": {evaluation.description}" if evaluation.description else ""
        lines.append(
            f"  {severity} {evaluation.asset_key.to_user_string()}.{evaluation.check_name}{detail}"
        )
    return lines


def _diagnostics(result: BuildResult) -> dict[str, list[str]]:
    """Discovery's diagnostics, as the build recorded them in ``discovered_runs``' metadata."""
    return dict(result.discovery_metadata()["diagnostics"])


def _report_frame(report_dir: Path, name: str) -> pd.DataFrame | None:
    path = report_dir / f"{name}.csv"
    return pd.read_csv(path, keep_default_na=False, na_values=[""]) if path.is_file() else None


def summary_text(result: BuildResult) -> str:
    """The summary of :mod:`deepecgkit.analysis.summary` for a successful build."""
    output: OutputFolderResource = defs.resources["output_folder"]
    analysis: AnalysisSettings = defs.resources["analysis"]
    frames = {
        name: read_stored_frame(output.frames_dir(), name, columns=columns, distinct=distinct)
        for name, (columns, distinct) in SUMMARY_FRAMES.items()
    }
    flip_grid = frames["flip_grid"]
    report_dir = output.root() / REPORT_FOLDER
    locations = {
        "tables": output.tables_dir(),
        "frames": output.frames_dir(),
        "report": report_dir,
        "figures": report_dir / FIGURES_FOLDER,
    }
    summary = build_summary(
        discovered_runs=frames["discovered_runs"],
        diagnostics=_diagnostics(result),
        reconciled_runs=frames["reconciled_runs"],
        averaging_conflicts=frames["averaging_conflicts"],
        flip_grid=flip_grid,
        metric=analysis.metric,
        fdr_method=str(flip_grid["fdr_method"].iloc[0]) if len(flip_grid) else analysis.fdr_method,
        include_legacy=analysis.include_legacy,
        include_failed=analysis.include_failed,
        report_run_summary=_report_frame(report_dir, "run_summary"),
        report_exclusions=_report_frame(report_dir, "exclusions"),
        locations={label: _shown_path(path) for label, path in locations.items()},
    )
    return format_summary(summary)


def _shown_path(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it (shorter to read)."""
    # abspath, not resolve(): a virtual environment's bin/ may be a symlink, and the
    # command shown should be the one the user typed.
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd())
    except ValueError:
        return absolute


def ui_lines(home: Path) -> list[str]:
    """How to open the UI on this build's instance."""
    dagster = Path(sys.executable).parent / "dagster"
    command = _shown_path(dagster) if dagster.exists() else Path("dagster")
    return [
        "Browse the assets, their checks and this run in the Dagster UI:",
        f"  DAGSTER_HOME={_shown_path(home)} {command} dev -m deepecg_assets.definitions",
        "  then open http://127.0.0.1:3000",
    ]


def _user_error(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return EXIT_USER_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        home = prepare_dagster_home()
    except BuildError as exc:
        return _user_error(str(exc))
    started = time.monotonic()
    print(f"Building every asset (run history in {_shown_path(home)}) ...", flush=True)
    progress = _ProgressOutput.attach(sys.stdout)
    try:
        with dg.DagsterInstance.get() as instance:
            result = materialize_everything(instance, verbose=args.verbose, stream=sys.stdout)
    finally:
        progress.detach()
    failures, user_errors = failure_lines(result)
    if failures:
        for line in failures:
            print(f"{PROG}: error: {line}", file=sys.stderr)
        if user_errors:
            return EXIT_USER_ERROR
        print(
            f"{PROG}: the build failed (runs {', '.join(result.run_ids)}); "
            "rerun with --verbose, or open the run in the UI:",
            file=sys.stderr,
        )
        print("\n".join(ui_lines(home)), file=sys.stderr)
        return EXIT_BUILD_FAILED
    elapsed = time.monotonic() - started
    print(f"Built in {elapsed:.0f} s (runs {', '.join(result.run_ids)}).\n")
    print(summary_text(result), end="")
    print("\n".join(check_lines(result)))
    print("\n".join(ui_lines(home)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
