"""Importing the analysis package stays light: no torch, no dagster, no matplotlib, no scipy.stats.

``deepecg aggregate`` and ``deepecg rank`` must start fast on a machine
without a GPU stack, and the Dagster code location must be able to import the
library without the library importing Dagster back. ``scipy.stats`` costs
about a second and a half to import (docs/benchmarks.md, session 33), paid by
every CLI call and by every run the daemon launches before its first step
(see :mod:`deepecgkit.analysis.distributions`). Each check runs in a fresh
interpreter, because the test session itself has long since imported all three.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY_MODULES = ("torch", "dagster", "matplotlib", "scipy.stats")


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
def test_analysis_imports_no_heavy_module(
    modules: tuple[str, ...],
) -> None:
    assert modules_after_import(*modules) == []


def test_evaluation_does_not_import_torch_at_import_time() -> None:
    assert "torch" not in modules_after_import("deepecgkit.evaluation")


def test_the_definitions_a_run_worker_loads_do_not_import_scipy_stats() -> None:
    """The run worker imports the definitions before a launched run can start."""
    heavy = modules_after_import("deepecg_assets.definitions", "deepecgkit.cli")
    assert heavy == ["dagster"]


@pytest.mark.parametrize("module", ["matplotlib", "scipy.stats"])
def test_the_check_detects_a_heavy_import(module: str) -> None:
    """Guard against a check that cannot fail: importing the module is seen."""
    assert modules_after_import(module) == [module]
