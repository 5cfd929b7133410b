"""``deepecg aggregate`` and ``deepecg rank``: the analysis from a terminal.

Both commands run discovery -> long frame -> averaging reconciliation, write
CSV files (and, with ``--latex``, booktabs tables) to ``--out``, and print a
short human summary. The contract a script can rely on:

* exit 0 on success (and for ``--help``), 2 for usage errors, 1 when nothing
  usable was found or on any data or I/O failure;
* errors are exactly one line on stderr, ``deepecg <cmd>: error: <text>``,
  and never a traceback; library warnings (averaging conflicts) are
  reprinted as ``deepecg <cmd>: warning: <text>``.

This module is the only place in :mod:`deepecgkit.analysis` that prints.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd

from deepecgkit.analysis.aggregation import aggregate_runs, reconcile_averaging
from deepecgkit.analysis.constants import (
    CONFIDENCE_LEVEL,
    CORRECTION_UNAVAILABLE,
    CORRECTIONS,
    DEFAULT_FDR_METHOD,
    DEFAULT_RANK_METRIC,
    FDR_FAMILIES,
    FDR_FAMILY_TESTABLE,
    FDR_METHODS,
    NADEAU_BENGIO,
    VERDICTS,
)
from deepecgkit.analysis.latex import (
    FLIP_TABLE_STEM,
    RANK_TABLE_STEM,
    RESULTS_INDEX,
    TAU_TABLE_STEM,
    UNICODE_ENGINES,
    compile_table,
    flip_survival_table,
    latex_engine,
    needs_unicode_engine,
    rank_distribution_table,
    results_table,
    results_table_stems,
    table_index_text,
    tau_table,
    write_tables,
)
from deepecgkit.analysis.ranking import (
    all_flip_tests,
    evaluate_rank_claim,
    rank_distribution,
    rank_within_seed,
    tau_summary,
)
from deepecgkit.io import (
    UnreadableFileError,
    atomic_write_text,
    frame_csv_text,
    json_text,
    read_regular_file,
    remove_file,
)
from deepecgkit.rundir.metrics import PRIMARY_METRIC, unaliased
from deepecgkit.rundir.read import ON_DUPLICATE_NEWEST, ON_DUPLICATE_POLICIES, discover_runs
from deepecgkit.rundir.records import DIAGNOSTIC_KEYS, RunRecord, runs_to_frame

__all__ = ["main", "one_line"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

#: Metric summarised per dataset in the ``aggregate`` printout.
SUMMARY_METRIC = PRIMARY_METRIC
#: Files of ``deepecg aggregate`` and ``deepecg rank`` (the ``.tex`` tables are named
#: by the stems of :mod:`deepecgkit.analysis.latex`, shared with the table assets).
RUNS_FILE = "runs.csv"
AGGREGATE_FILE = "aggregate.csv"
AVERAGING_CONFLICTS_FILE = "averaging_conflicts.csv"
DIAGNOSTICS_FILE = "diagnostics.csv"
RANKS_FILE = "ranks.csv"
RANK_DISTRIBUTION_FILE = f"{RANK_TABLE_STEM}.csv"
TAU_FILE = f"{TAU_TABLE_STEM}.csv"
FLIP_TESTS_FILE = "flip_tests.csv"
CLAIM_FILE = "claim.json"
TEX_SUFFIX = ".tex"
#: Diagnostics key of usable runs from which something was set aside.
SUSPECT = "suspect"


class UsageError(Exception):
    """A command-line usage error (exit 2)."""


class DataError(Exception):
    """Nothing usable, or a data/I-O failure the user can act on (exit 1)."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become one line instead of usage text."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def one_line(text: str) -> str:
    """``text`` with its line breaks written as ``\\n``, so a message stays one stderr line.

    Paths and model names come from the file system and from CSV cells, and
    either may hold a line break; printed raw, it would split one error into
    two lines and break the one-line contract a calling script parses.
    """
    return "\\n".join(text.splitlines())


def _confidence_level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise argparse.ArgumentTypeError(f"must lie strictly between 0 and 1, got {text}")
    return value


def _add_discovery_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("roots", nargs="+", metavar="ROOT", help="folders of run directories")
    parser.add_argument("--recursive", action="store_true", help="search roots at any depth")
    parser.add_argument(
        "--include-legacy",
        action="store_true",
        help="keep runs whose seed cannot be determined (no seed; never ranked or paired)",
    )
    parser.add_argument(
        "--include-failed", action="store_true", help="keep runs with a non-zero returncode"
    )
    parser.add_argument(
        "--on-duplicate",
        choices=ON_DUPLICATE_POLICIES,
        default=ON_DUPLICATE_NEWEST,
        help="what to do with two runs of one model, dataset, seed and fingerprint",
    )
    parser.add_argument(
        "--confidence-level",
        type=_confidence_level,
        default=CONFIDENCE_LEVEL,
        metavar="L",
        help="two-sided coverage of every interval (default 0.95)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(), metavar="DIR", help="output folder (default: .)"
    )
    parser.add_argument("--latex", action="store_true", help="also write booktabs .tex tables")


def _build_parser(command: str) -> _Parser:
    parser = _Parser(prog=f"deepecg {command}")
    _add_discovery_options(parser)
    if command == "aggregate":
        parser.description = "Per-seed means and Student-t intervals of every metric."
        return parser
    parser.description = "Rank distributions, Kendall tau and cross-dataset flip tests."
    parser.add_argument("--metric", default=DEFAULT_RANK_METRIC, help="metric to rank (f1)")
    parser.add_argument("--correction", choices=CORRECTIONS, default=NADEAU_BENGIO)
    parser.add_argument("--fdr-family", choices=FDR_FAMILIES, default=FDR_FAMILY_TESTABLE)
    parser.add_argument(
        "--fdr-method",
        choices=FDR_METHODS,
        default=DEFAULT_FDR_METHOD,
        help="adjustment of q_reversal: by (Benjamini-Yekutieli, default) or bh",
    )
    parser.add_argument(
        "--strict-correction",
        action="store_true",
        help="make comparisons whose split sizes are unknown untestable instead of "
        "falling back to the uncorrected standard error",
    )
    parser.add_argument("--models", nargs="+", metavar="M", help="restrict to these models")
    parser.add_argument("--datasets", nargs="+", metavar="D", help="restrict to these datasets")
    parser.add_argument(
        "--claim",
        nargs=3,
        metavar=("MODEL", "BEST", "WORST"),
        help='test "MODEL is best on BEST and worst on WORST"',
    )
    return parser


# --- shared steps -----------------------------------------------------------------------------


class _Output:
    """Collects written paths; writes every file atomically."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.written: list[Path] = []
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataError(f"cannot create output folder {directory}: {exc.strerror}") from exc

    def csv(self, name: str, frame: pd.DataFrame) -> None:
        self.text(name, frame_csv_text(frame))

    def text(self, name: str, content: str) -> None:
        path = self.directory / name
        try:
            atomic_write_text(path, content)
        except OSError as exc:
            raise DataError(f"cannot write {path}: {exc.strerror or exc}") from exc
        self.written.append(path)

    def tables(self, tables: dict[str, str], warn: Callable[[str], None]) -> None:
        """Write the tables, then compile each one that needs a Unicode engine.

        Tables of plain names compile with pdflatex (the emitters guarantee
        it). One holding characters pdflatex cannot typeset is announced with
        a warning and compiled with lualatex or xelatex when one is installed;
        if it does not compile, the command fails (exit 1): a table that was
        checked and failed is never reported as written successfully.
        """
        try:
            self.written += [Path(p) for p in write_tables(tables, self.directory)]
        except OSError as exc:
            raise DataError(f"cannot write tables to {self.directory}: {exc}") from exc
        for stem in sorted(tables):
            if not needs_unicode_engine(tables[stem]):
                continue
            engine = latex_engine(tables[stem])
            name = f"{stem}{TEX_SUFFIX}"
            if engine is None:
                warn(
                    f"{name} holds characters pdflatex cannot typeset; compile it with "
                    f"{' or '.join(UNICODE_ENGINES)} (none is installed here to check it)"
                )
                continue
            ok, reason = compile_table(tables[stem], engine=engine)
            if not ok:
                first = next((line for line in reason.splitlines()[1:] if line.strip()), reason)
                raise DataError(f"{name} does not compile with {Path(engine).name}: {first}")
            warn(
                f"{name} holds characters pdflatex cannot typeset; it compiles with "
                f"{Path(engine).name} (use {' or '.join(UNICODE_ENGINES)})"
            )

    def remove_stale(self, index_name: str, current: dict[str, str]) -> list[str]:
        """Record ``current`` (file -> name) in ``index_name``; remove files the old index
        listed that are not current. Only files this command wrote before are touched."""
        index_path = self.directory / index_name
        try:
            previous = json.loads(read_regular_file(index_path)[0].decode("utf-8"))
        except (UnreadableFileError, UnicodeDecodeError, ValueError):
            previous = {}
        self.text(index_name, table_index_text(current))
        stale = [
            name
            for name in sorted(previous if isinstance(previous, dict) else {})
            if name not in current and Path(name).name == name and name.endswith(TEX_SUFFIX)
        ]
        return [name for name in stale if remove_file(self.directory / name)]


def _discover(args: argparse.Namespace) -> tuple[list[RunRecord], dict[str, list[str]]]:
    for root in args.roots:
        if not Path(root).is_dir():
            raise UsageError(f"ROOT is not an existing directory: {root}")
    try:
        records, diagnostics = discover_runs(
            [Path(root) for root in args.roots],
            recursive=args.recursive,
            include_legacy=args.include_legacy,
            on_duplicate=args.on_duplicate,
            include_failed=args.include_failed,
        )
    except ValueError as exc:
        raise DataError(str(exc)) from exc
    if not records:
        raise DataError(
            f"no usable runs found under {', '.join(map(str, args.roots))} "
            f"({_diagnostic_counts(diagnostics)})"
        )
    return records, diagnostics


def _diagnostic_counts(diagnostics: dict[str, list[str]]) -> str:
    """``unreadable a, no_seed b, duplicate c, failed d`` and ``, suspect e`` when e > 0.

    The four counts keep the format scripts already parse; suspect runs (used,
    with something set aside) are announced only when there are any.
    """
    keys = [key for key in DIAGNOSTIC_KEYS if key != SUSPECT or diagnostics.get(key)]
    return ", ".join(f"{key} {len(diagnostics[key])}" for key in keys)


def _summary_lines(records: list[RunRecord], diagnostics: dict[str, list[str]]) -> list[str]:
    models = {r.model for r in records}
    datasets = {r.dataset for r in records}
    seeds = {r.seed for r in records if r.seed is not None}
    return [
        f"runs: {len(records)} usable ({len(models)} models, {len(datasets)} datasets, "
        f"{len(seeds)} distinct seeds)",
        f"diagnostics: {_diagnostic_counts(diagnostics)}",
    ]


def _diagnostics_frame(diagnostics: dict[str, list[str]]) -> pd.DataFrame:
    rows = [(key, entry) for key in DIAGNOSTIC_KEYS for entry in diagnostics[key]]
    return pd.DataFrame(rows, columns=["reason", "entry"])


# --- aggregate -------------------------------------------------------------------------------


def _aggregate(
    args: argparse.Namespace, out: Callable[[str], None], warn: Callable[[str], None]
) -> int:
    records, diagnostics = _discover(args)
    output = _Output(args.out)
    runs = runs_to_frame(records)
    reconciled, conflicts = reconcile_averaging(runs)
    aggregated = aggregate_runs(reconciled, args.confidence_level)
    output.csv(RUNS_FILE, runs)
    output.csv(AGGREGATE_FILE, aggregated)
    output.csv(AVERAGING_CONFLICTS_FILE, conflicts)
    output.csv(DIAGNOSTICS_FILE, _diagnostics_frame(diagnostics))
    stale: list[str] = []
    if args.latex:
        stems = results_table_stems(aggregated["dataset"].astype(str).unique())
        tables = {
            stem: results_table(aggregated, dataset, confidence_level=args.confidence_level)
            for dataset, stem in stems.items()
        }
        output.tables(tables, warn)
        index = {f"{stem}{TEX_SUFFIX}": dataset for dataset, stem in stems.items()}
        stale = output.remove_stale(RESULTS_INDEX, index)

    lines = _summary_lines(records, diagnostics)
    dropped = int(conflicts["dropped_runs"].sum()) if len(conflicts) else 0
    lines.append(f"averaging conflicts: {len(conflicts)} group(s), {dropped} run(s) dropped")
    if stale:
        lines.append(f"removed {len(stale)} stale table(s): {', '.join(stale)}")
    summary = aggregated.loc[aggregated["metric"] == SUMMARY_METRIC]
    for dataset, block in summary.groupby("dataset", sort=True):
        block = block.sort_values(["mean", "model"], ascending=[False, True], na_position="last")
        cells = ", ".join(
            f"{row.model} {row.mean:.3f} (n={row.n})" for row in block.itertuples(index=False)
        )
        lines.append(f"{dataset} {SUMMARY_METRIC}: {cells}")
    lines.append(f"wrote {len(output.written)} file(s) to {args.out}")
    out("\n".join(lines))
    return EXIT_OK


# --- rank ---------------------------------------------------------------------------------------


def _filter(frame: pd.DataFrame, column: str, names: Sequence[str] | None, warn: Callable) -> Any:
    if not names:
        return frame
    present = set(frame[column].astype(str))
    for name in names:
        if name not in present:
            warn(f"{column} {name!r} matches no run")
    return frame.loc[frame[column].isin(names)]


def _tau_line(taus: pd.DataFrame, level: float) -> str:
    parts = []
    for row in taus.itertuples(index=False):
        size = f"({row.n_models} models, {row.n_seeds} seeds)"
        if not math.isfinite(row.tau_mean):
            parts.append(f"{row.dataset} n/a {size}")
            continue
        text = f"{row.dataset} {row.tau_mean:.2f}"
        if math.isfinite(row.tau_lower):
            # Shown clipped to tau's range, as in the tables; kendall_tau.csv keeps the raw bounds.
            text += f" [{max(row.tau_lower, -1.0):.2f}, {min(row.tau_upper, 1.0):.2f}]"
        if math.isfinite(row.kendall_w):
            text += f", W {row.kendall_w:.2f} (p {row.p_kendall_w:.4g})"
        parts.append(f"{text} {size}")
    heading = f"kendall tau (mean [{level * 100:g}% jackknife CI], W (permutation p))"
    return f"{heading}: " + ("; ".join(parts) if parts else "n/a")


def _flip_line(flips: pd.DataFrame, fdr_family: str, fdr_method: str, level: float) -> str:
    counts = flips["verdict"].value_counts() if len(flips) else pd.Series(dtype=int)
    family_size = int(flips["fdr_family_size"].iloc[0]) if len(flips) else 0
    surviving = int(flips["survives_fdr"].sum()) if len(flips) else 0
    verdicts = ", ".join(f"{v} {int(counts.get(v, 0))}" for v in VERDICTS)
    return (
        f"flip tests: {len(flips)} comparison(s), {fdr_method.upper()} family '{fdr_family}' "
        f"of size {family_size}; {verdicts}; supported and surviving FDR "
        f"(q_reversal <= {round(1 - level, 6):g}) {surviving}"
    )


def _unknown_split_runs(frame: pd.DataFrame) -> int:
    """Runs of the ranked metric whose train or test size is unknown."""
    sizes = frame.reindex(columns=["run_dir", "n_train", "n_test"])
    unknown = sizes["n_train"].isna() | sizes["n_test"].isna()
    return int(sizes.loc[unknown, "run_dir"].nunique())


def _uncorrected_rows(flips: pd.DataFrame) -> int:
    """Flip rows with a component whose requested Nadeau-Bengio correction was unavailable."""
    if not len(flips):
        return 0
    applied = flips[["correction_applied_1", "correction_applied_2"]]
    return int((applied == CORRECTION_UNAVAILABLE).any(axis=1).sum())


def _correction_note(metric_rows: pd.DataFrame, flips: pd.DataFrame, strict: bool) -> str | None:
    unknown = _unknown_split_runs(metric_rows)
    if not unknown:
        return None
    rows = _uncorrected_rows(flips)
    if not rows:
        return (
            f"note: split sizes unknown for {unknown} run(s); each comparison took the "
            "Nadeau-Bengio sizes from its other runs"
        )
    if strict:
        return (
            f"note: split sizes unknown for {unknown} run(s); --strict-correction made "
            f"{rows} flip test(s) untestable"
        )
    return (
        f"note: split sizes unknown for {unknown} run(s); their comparisons use the uncorrected "
        f"standard error ({rows} flip test(s) with correction 'unavailable'; "
        "--strict-correction makes them untestable)"
    )


def _rank(args: argparse.Namespace, out: Callable[[str], None], warn: Callable) -> int:
    if args.claim and args.claim[1] == args.claim[2]:
        raise UsageError(f"--claim needs two different datasets, got {args.claim[1]!r} twice")
    records, diagnostics = _discover(args)
    output = _Output(args.out)
    frame, _ = reconcile_averaging(runs_to_frame(records))
    frame = _filter(frame, "model", args.models, warn)
    frame = _filter(frame, "dataset", args.datasets, warn)
    if frame.empty:
        raise DataError("no runs left after the --models/--datasets filters")
    metric = unaliased(args.metric)  # aliases (auc for auroc) are accepted on input
    metric_rows = frame.loc[frame["metric"] == metric]
    if metric_rows.empty:
        raise DataError(f"no run reports metric '{args.metric}'")

    level = args.confidence_level
    ranks = rank_within_seed(frame, metric)
    distribution = rank_distribution(frame, metric)
    taus = tau_summary(frame, metric, confidence_level=level)
    flips = all_flip_tests(
        frame,
        metric=metric,
        confidence_level=level,
        correction=args.correction,
        models=args.models,
        datasets=args.datasets,
        fdr_family=args.fdr_family,
        fdr_method=args.fdr_method,
        strict_correction=args.strict_correction,
    )
    claim = None
    if args.claim:
        model, best, worst = args.claim
        for dataset in (best, worst):
            if metric_rows.loc[
                (metric_rows["model"] == model) & (metric_rows["dataset"] == dataset)
            ].empty:
                raise DataError(f"claim model {model!r} has no runs on {dataset!r}")
        opponents = [m for m in args.models if m != model] if args.models else None
        claim = evaluate_rank_claim(
            frame,
            model,
            best,
            worst,
            metric=metric,
            opponents=opponents,
            confidence_level=level,
            correction=args.correction,
            strict_correction=args.strict_correction,
        )

    output.csv(RANKS_FILE, ranks)
    output.csv(DIAGNOSTICS_FILE, _diagnostics_frame(diagnostics))
    output.csv(RANK_DISTRIBUTION_FILE, distribution)
    output.csv(TAU_FILE, taus)
    output.csv(FLIP_TESTS_FILE, flips)
    if claim is not None:
        output.text(CLAIM_FILE, json_text(claim))
    if args.latex:
        exclusions = []
        if args.models:
            exclusions.append("models: " + ", ".join(args.models))
        if args.datasets:
            exclusions.append("datasets: " + ", ".join(args.datasets))
        output.tables(
            {
                RANK_TABLE_STEM: rank_distribution_table(
                    distribution, taus, metric=metric, confidence_level=level
                ),
                TAU_TABLE_STEM: tau_table(taus, confidence_level=level),
                FLIP_TABLE_STEM: flip_survival_table(
                    flips,
                    metric=metric,
                    exclusions=exclusions or None,
                    confidence_level=level,
                    correction=args.correction,
                ),
            },
            warn,
        )

    lines = _summary_lines(records, diagnostics)
    lines.append(f"metric: {metric} (correction {args.correction}, {level * 100:g}% intervals)")
    lines.append(_tau_line(taus, level))
    lines.append(_flip_line(flips, args.fdr_family, args.fdr_method, level))
    if claim is not None:
        lines.append(
            f"claim: {claim['model']} best on {claim['dataset_best']}, worst on "
            f"{claim['dataset_worst']}: {claim['verdict']} "
            f"(p_claim_directional {claim['p_claim_directional']:.4g}, "
            f"{claim['n_components']} component(s), {claim['n_untestable']} untestable)"
        )
    note = _correction_note(metric_rows, flips, args.strict_correction)
    if note is not None and args.correction == NADEAU_BENGIO:
        lines.append(note)
    lines.append(f"wrote {len(output.written)} file(s) to {args.out}")
    out("\n".join(lines))
    return EXIT_OK


# --- entry point ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``aggregate`` or ``rank``; ``argv`` starts with the command name.

    Returns:
        The exit code: 0 success, 1 nothing usable or a data/I-O failure,
        2 usage error. Never raises and never prints a traceback.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = args_list[0] if args_list else "aggregate"
    prefix = f"deepecg {command}"

    def out(text: str) -> None:
        print(text)

    def warn(text: str) -> None:
        print(f"{prefix}: warning: {one_line(text)}", file=sys.stderr)

    def fail(text: str, code: int) -> int:
        print(f"{prefix}: error: {one_line(text)}", file=sys.stderr)
        return code

    if command not in ("aggregate", "rank"):
        return fail(f"unknown command {command!r} (choose aggregate or rank)", EXIT_USAGE)
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                args = _build_parser(command).parse_args(args_list[1:])
            except SystemExit as exc:  # --help
                return int(exc.code or 0)
            if command == "aggregate":
                return _aggregate(args, out, warn)
            return _rank(args, out, warn)
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    except DataError as exc:
        return fail(str(exc), EXIT_FAILURE)
    except Exception as exc:  # the contract: one line, never a traceback
        detail = str(exc) or type(exc).__name__
        return fail(f"{detail} ({type(exc).__name__})", EXIT_FAILURE)
    finally:
        for warning in caught:
            if issubclass(warning.category, (RuntimeWarning, UserWarning)):
                warn(str(warning.message))
