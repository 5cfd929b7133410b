"""``deepecg report``: the statistical report from stored predictions.

A thin shell over :func:`deepecgkit.statistical_report.statistical_report`:
it parses the options, calls the library and turns every user error into
one line on stderr (``deepecg report: error: ...``) and a non-zero exit
code, never a traceback. Run again with ``--overwrite`` into the same
``--out``, it reuses the rows and figures of every unchanged run and pair
(``report_cache.json.gz`` there) and writes what a clean build would.

Exit codes: 0 when the report was written; 1 when a ROOT does not exist, no
run directory is found, the output folder is refused, ``--reference`` names
no discovered model, a setting is invalid, writing fails, or no run passed
the identity contract (the report is still written in that case); 2 for a
malformed command line (unknown option, missing ``--out``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from deepecgkit.analysis.cli import one_line
from deepecgkit.analysis.constants import (
    CONFIDENCE_LEVEL,
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_N_RESAMPLES,
    REPORT_BINS,
)

__all__ = ["main"]

PROG = "deepecg report"
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class _UsageError(Exception):
    """A malformed command line (argparse's own error)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, raised instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description=(
            "Group-bootstrap statistical report of every run directory under ROOT: per-run "
            "intervals, reliability diagrams, paired comparisons against --reference, and "
            "the exclusions of the identity contract."
        ),
    )
    parser.add_argument("roots", nargs="+", metavar="ROOT", help="folders holding run directories")
    parser.add_argument("--out", required=True, metavar="DIR", help="report folder")
    # Numeric settings are parsed by the library, so a bad value is an invalid
    # setting (exit 1, named by the library's message), not a usage error.
    parser.add_argument("--bins", default=str(REPORT_BINS), help="equal-width bins (default 10)")
    parser.add_argument(
        "--n-resamples",
        default=str(DEFAULT_N_RESAMPLES),
        help="bootstrap resamples (default 1000)",
    )
    parser.add_argument(
        "--confidence-level",
        default=str(CONFIDENCE_LEVEL),
        help="two-sided coverage (default 0.95)",
    )
    parser.add_argument("--reference", default=None, metavar="MODEL", help="model compared against")
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="admit runs missing metadata, fingerprint, split info or predictions (exploratory)",
    )
    parser.add_argument("--no-plots", action="store_true", help="write no figures")
    parser.add_argument(
        "--pdf", action="store_true", help="write each figure as a vector PDF too (PNG always)"
    )
    parser.add_argument("--overwrite", action="store_true", help="write into a non-empty DIR")
    parser.add_argument(
        "--seed", default=str(DEFAULT_BOOTSTRAP_SEED), help="bootstrap seed (default 0)"
    )
    return parser


def _setting(name: str, text: str, kind: type) -> int | float:
    """Convert one numeric option; a non-number raises ValueError naming the option."""
    try:
        return kind(text)
    except ValueError:
        wanted = "an integer" if kind is int else "a number"
        raise ValueError(f"--{name} must be {wanted}, got {text!r}") from None


def _fail(message: str, code: int = EXIT_ERROR) -> int:
    print(f"{PROG}: error: {one_line(message)}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``deepecg report``; ``argv`` includes the subcommand name as ``argv[0]``.

    Returns:
        The exit code (see the module docstring).
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "report":
        args_list = args_list[1:]
    parser = _parser()
    try:
        args = parser.parse_args(args_list)
    except _UsageError as exc:
        return _fail(f"{exc} (see '{PROG} --help')", EXIT_USAGE)
    except SystemExit as exc:  # --help prints and exits through argparse
        return int(exc.code or 0)

    from deepecgkit.analysis.compare.errors import ComparisonError
    from deepecgkit.statistical_report.report import statistical_report

    out_dir = Path(args.out)
    try:
        result = statistical_report(
            args.roots,
            out_dir,
            bins=_setting("bins", args.bins, int),
            n_resamples=_setting("n-resamples", args.n_resamples, int),
            confidence_level=_setting("confidence-level", args.confidence_level, float),
            reference=args.reference,
            allow_partial=args.allow_partial,
            plots=not args.no_plots,
            pdf=args.pdf,
            overwrite=args.overwrite,
            seed=_setting("seed", args.seed, int),
        )
    except FileExistsError as exc:
        if out_dir.is_dir():
            return _fail(f"refusing to overwrite existing report at {args.out} (use --overwrite)")
        return _fail(str(exc))
    except (FileNotFoundError, ComparisonError, ValueError) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write the report to {args.out}: {exc}")
    except MemoryError:
        return _fail("not enough memory for these settings; lower --n-resamples or --bins")
    except Exception as exc:  # the contract: one line, never a traceback
        return _fail(f"{exc or type(exc).__name__} ({type(exc).__name__})")

    statuses = [entry["status"] for entry in result.manifest["inputs"]]
    n_included = sum(status != "excluded" for status in statuses)
    if n_included == 0:
        return _fail(f"no run passed the identity contract; see {out_dir / 'exclusions.csv'}")
    print(
        f"report written to {args.out}: {n_included} runs "
        f"({statuses.count('partial')} partial), {statuses.count('excluded')} excluded, "
        f"{len(result.paired_comparisons)} comparison rows"
    )
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover - exercised through the console script
    sys.exit(main())
