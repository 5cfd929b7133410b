"""The ``deepecg`` console script: a thin dispatcher over the subcommands.

Each subcommand lives with the code it drives and is imported only when it
is called, so ``deepecg aggregate`` never pays for importing torch and
``deepecg train-grid`` never pays for pandas-heavy report code it does not
use. Every subcommand module exposes ``main(argv) -> int`` and receives the
argument list *including* the subcommand name.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

#: subcommand -> (module holding ``main``, one-line description)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "aggregate": (
        "deepecgkit.analysis.cli",
        "per-seed means and Student-t intervals of every metric",
    ),
    "rank": (
        "deepecgkit.analysis.cli",
        "rank distributions, Kendall tau and cross-dataset flip tests",
    ),
    "report": (
        "deepecgkit.statistical_report.cli",
        "group-bootstrap statistical report from stored predictions",
    ),
    "train-grid": (
        "deepecgkit.training.cli",
        "train every (model, dataset, seed) and write run directories",
    ),
    "synth": (
        "deepecgkit.training.cli",
        "write a synthetic ECG dataset in the local on-disk layout",
    ),
}

_USAGE = "usage: deepecg {" + ",".join(SUBCOMMANDS) + "} ..."


def _help_text() -> str:
    lines = [_USAGE, "", "commands:"]
    width = max(map(len, SUBCOMMANDS))
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in SUBCOMMANDS.items()]
    lines += ["", "Run 'deepecg <command> --help' for the options of one command."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``argv`` (default ``sys.argv[1:]``) to a subcommand; return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(_help_text())
        return 0 if args else 2
    command = args[0]
    if command not in SUBCOMMANDS:
        print(
            f"deepecg: error: unknown command {command!r} (choose from {', '.join(SUBCOMMANDS)})",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(SUBCOMMANDS[command][0])
    return int(module.main(args))


if __name__ == "__main__":  # pragma: no cover - exercised through the console script
    sys.exit(main())
