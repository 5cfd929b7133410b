"""The public surface of ``deepecgkit.analysis.compare`` and its import hygiene."""

from __future__ import annotations

import subprocess
import sys

import deepecgkit.analysis.compare as compare

PUBLIC = [
    "ComparisonError",
    "MCNEMAR_CAVEAT",
    "mcnemar",
    "mcnemar_mid_p",
    "batch_metric",
    "BootstrapInterval",
    "BootstrapDifference",
    "cluster_bootstrap_metric",
    "cluster_bootstrap_difference",
    "PairedFoldDifferences",
    "paired_fold_differences",
    "ReportResult",
    "statistical_report",
]


def test_all_lists_exactly_the_specified_names() -> None:
    assert sorted(compare.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(compare, name) is not None
    assert issubclass(compare.ComparisonError, ValueError)


def test_import_pulls_in_neither_torch_dagster_nor_matplotlib() -> None:
    code = (
        "import sys\n"
        "import deepecgkit.analysis.compare, deepecgkit.analysis.report_cli\n"
        "import deepecgkit.analysis.predictions\n"
        "heavy = [m for m in ('torch', 'dagster', 'matplotlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
