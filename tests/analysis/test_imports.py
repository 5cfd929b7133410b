"""Importing the analysis package stays light: no torch, no dagster, no matplotlib.

``deepecg aggregate`` and ``deepecg rank`` must start fast on a machine
without a GPU stack, and the Dagster code location must be able to import the
library without the library importing Dagster back. Each check runs in a fresh
interpreter, because the test session itself has long since imported all three.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY_MODULES = ("torch", "dagster", "matplotlib")


def modules_after_import(*modules: str) -> list[str]:
    """The heavy top-level modules in ``sys.modules`` after importing ``modules`` afresh."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {list(modules)!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in {list(HEAVY_MODULES)!r} if m in sys.modules)))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "modules",
    [
        ("deepecgkit.analysis",),
        ("deepecgkit.analysis", "deepecgkit.analysis.cli", "deepecgkit.cli"),
        (
            "deepecgkit.analysis.aggregation",
            "deepecgkit.analysis.ranking",
            "deepecgkit.analysis.synthetic",
            "deepecgkit.analysis.latex",
            "deepecgkit.analysis.compare",
        ),
    ],
)
def test_analysis_imports_neither_torch_nor_dagster_nor_matplotlib(
    modules: tuple[str, ...],
) -> None:
    assert modules_after_import(*modules) == []


def test_evaluation_does_not_import_torch_at_import_time() -> None:
    assert "torch" not in modules_after_import("deepecgkit.evaluation")


def test_the_check_detects_a_heavy_import() -> None:
    """Guard against a check that cannot fail: importing matplotlib is seen."""
    assert modules_after_import("matplotlib") == ["matplotlib"]
