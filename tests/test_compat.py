"""Old import paths (``deepecgkit._compat``): they still work, and they say they are old."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from deepecgkit import _compat

#: Every old module path and the module it is now (the tables of the three packages).
MOVED_MODULES = {
    f"{package.__name__}.{old}": new
    for package in (
        importlib.import_module("deepecgkit.analysis"),
        importlib.import_module("deepecgkit.analysis.compare"),
    )
    for old, new in package.__moved_modules__.items()
}


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_MODULES.items()))
def test_an_old_module_path_is_the_new_module(old: str, new: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert importlib.import_module(old) is importlib.import_module(new)


def test_a_split_module_serves_each_name_from_its_new_home() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        representation = importlib.import_module("deepecgkit.evaluation.representation")
        report = importlib.import_module("deepecgkit.evaluation.report")
        from deepecgkit.evaluation.embedding import embed_2d
        from deepecgkit.evaluation.run_scoring import write_run_report
        from deepecgkit.rundir.write import params_fingerprint

        assert representation.embed_2d is embed_2d
        assert report.write_run_report is write_run_report
        assert report.params_fingerprint is params_fingerprint
    with pytest.raises(AttributeError):
        _ = representation.no_such_name


def test_old_paths_warn_and_new_paths_do_not() -> None:
    """In a fresh interpreter, so that no earlier import has cached the old modules."""
    code = (
        "import warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        "import deepecgkit.analysis, deepecgkit.statistical_report.report, deepecgkit.rundir.read\n"
        "for old in ('deepecgkit.analysis.compare.report', 'deepecgkit.analysis.predictions'):\n"
        "    try:\n"
        "        __import__(old)\n"
        "    except DeprecationWarning as w:\n"
        "        print('warned', old, 'deepecgkit 0.2.0' in str(w))\n"
        "try:\n"
        "    deepecgkit.analysis.read_run_metrics\n"
        "except DeprecationWarning as w:\n"
        "    print('warned name', 'deepecgkit.rundir.read' in str(w))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "warned deepecgkit.analysis.compare.report True",
        "warned deepecgkit.analysis.predictions True",
        "warned name True",
    ]


def test_an_unknown_old_name_is_an_attribute_error() -> None:
    getattr_ = _compat.moved_names("pkg", {"a": "deepecgkit.io"}, modules=("deepecgkit.io",))
    with pytest.raises(AttributeError, match="no attribute 'zzz'"):
        getattr_("zzz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from deepecgkit.io import json_ready

        assert getattr_("json_ready") is json_ready  # served from modules' __all__
