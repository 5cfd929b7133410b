"""Write ``docs/run-directory.md`` from the format module and the metric registry.

The page is generated so that it cannot drift from the code: every file,
column, writer and reader comes from :data:`deepecgkit.rundir.format.RUN_FILES`
and every metric from :data:`deepecgkit.rundir.metrics.METRICS`.
``tests/rundir/test_format.py`` fails when the committed page differs from
what this script writes. Run from the repository root:
``python scripts/make_run_directory_doc.py``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from deepecgkit.io import atomic_write_text
from deepecgkit.rundir import format as fmt, metrics

DOC_PATH = Path(__file__).resolve().parents[1] / "docs" / "run-directory.md"

_INTRO = f"""# The run directory

A run directory is the hand-over between producing numbers (`deepecgkit.training`,
`deepecgkit.evaluation`, the synthetic generators) and analysing them
(`deepecgkit.analysis`, `deepecgkit.statistical_report`, `deepecg_assets`). One
package owns it: `deepecgkit.rundir` (`format.py` names every file, column and
metric, `write.py` writes, `read.py` reads and discovers, `cache.py` remembers
parsed runs, `synthetic.py` plants corpora whose ground truth is known). This
page is generated from `deepecgkit/rundir/format.py` and
`deepecgkit/rundir/metrics.py` by `scripts/make_run_directory_doc.py`; edit those,
not this page.

## Name and discovery

A run directory is named `<model>_<dataset>_seed<seed>` (the upstream trainer
writes `<timestamp>-<model>-<dataset>-seed<seed>`); readers take the seed from the
`seed<N>` suffix when `{fmt.METADATA_FILENAME}` has none. A directory is a run
directory when it holds `{fmt.METRICS_FILENAME}`, which writers therefore write last;
every other file is written first, each to a temporary name and renamed into place
(`deepecgkit.io`). Discovery (`deepecgkit.rundir.read.discover_runs`) looks at the
immediate children of each root, or at any depth with `recursive=True`. A file larger
than {fmt.MAX_RUN_FILE_BYTES // (1024 * 1024)} MiB is not read. A run that cannot be
read is reported with its reason, never dropped.
"""

_METRIC_INTRO = """## Metrics

One row per quantity (`deepecgkit/rundir/metrics.py`). The name is the column of
`classification_metrics.csv`; aliases are accepted on input only. Qualified
spellings name the same quantity: `macro_<name>` (statistical report),
`<name>_macro` (linear probes), `<name>_<k>` (one class), `<name>_temp` (after
temperature scaling).
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _bound(value: float) -> str:
    return ("-inf" if value < 0 else "inf") if math.isinf(value) else f"{value:g}"


def _file_section(run_file: fmt.RunFile) -> list[str]:
    lines = [
        f"### `{run_file.name}`" + (" (required)" if run_file.required else ""),
        "",
        run_file.meaning,
        "",
    ]
    if run_file.fields:
        lines += ["| column or key | type | meaning |", "| --- | --- | --- |"]
        lines += [
            f"| `{_cell(field.name)}` | {_cell(field.kind)} | {_cell(field.meaning)} |"
            for field in run_file.fields
        ]
        lines.append("")
    writers = ", ".join(f"`{name}`" for name in run_file.writers) or "another program"
    readers = ", ".join(f"`{name}`" for name in run_file.readers) or "a person"
    lines += [f"Written by {writers}; read by {readers}.", ""]
    return lines


def render() -> str:
    """The whole page, as Markdown."""
    lines = [_INTRO, "## Files", ""]
    for run_file in fmt.RUN_FILES:
        lines += _file_section(run_file)
    lines += [
        _METRIC_INTRO,
        "| name | better | display | range | aliases | `_temp` form |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for spec in metrics.METRICS:
        low, high = spec.value_range
        aliases = ", ".join(f"`{alias}`" for alias in spec.aliases)
        lines.append(
            f"| `{spec.name}` | {spec.direction} | {_cell(spec.display)} | "
            f"[{_bound(low)}, {_bound(high)}] | {aliases} | "
            f"{'yes' if spec.temperature_scaled else ''} |"
        )
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    atomic_write_text(DOC_PATH, render())
    sys.stdout.write(f"wrote {DOC_PATH}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
