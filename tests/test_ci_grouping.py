"""How ``.ci/run`` starts the suite: its xdist grouping works, and a background job is no trap.

``.ci/run`` runs ``pytest -n 2 --dist loadgroup``, and ``tests/conftest.py``
adds an ``xdist_group`` mark to every test of a slow shared fixture so that
the fixture is built once, on one worker. If the installed pair stops
honouring marks added that way (pytest 9.2 with pytest-xdist 3.8 does:
pytest-xdist issue #1386), nothing fails: each worker builds the fixture
again and CI takes minutes longer. This test runs a small suite in a
subprocess exactly as CI does and checks that one group lands on one worker.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

#: How .ci/run starts the suite (the --durations listing left out).
PYTEST_AS_IN_CI = (sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup")
#: Tests in the one group, and as many again in none.
GROUPED_TESTS = 6

_CONFTEST = """
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.name.startswith("test_grouped"):
            item.add_marker(pytest.mark.xdist_group("shared-build"))
"""

_TESTS = "\n".join(
    [f"def test_grouped_{i}():\n    pass\n" for i in range(GROUPED_TESTS)]
    + [f"def test_free_{i}():\n    pass\n" for i in range(GROUPED_TESTS)]
)

_PASSED_LINE = re.compile(r"^\[(gw\d+)\] .*PASSED \S*::(test_\w+)", re.MULTILINE)


def test_tests_of_one_group_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(_CONFTEST, encoding="utf-8")
    (tmp_path / "test_suite.py").write_text(_TESTS, encoding="utf-8")
    completed = subprocess.run(
        [*PYTEST_AS_IN_CI, "-v", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    workers = {name: worker for worker, name in _PASSED_LINE.findall(completed.stdout)}
    assert len(workers) == 2 * GROUPED_TESTS, completed.stdout
    grouped = {workers[f"test_grouped_{i}"] for i in range(GROUPED_TESTS)}
    assert len(grouped) == 1, f"one group ran on {sorted(grouped)}:\n{completed.stdout}"


#: The suite's own conftest, whose ``pytest_configure`` a small suite borrows.
SUITE_CONFTEST = Path(__file__).with_name("conftest.py")

_BORROWING_CONFTEST = f"""
import importlib.util
import sys

_spec = importlib.util.spec_from_file_location("suite_conftest", {str(SUITE_CONFTEST)!r})
_suite = sys.modules["suite_conftest"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_suite)
pytest_configure = _suite.pytest_configure
"""

_CHILD_SIGNALS_TEST = """
import signal
import subprocess


def test_a_child_does_not_ignore_sigint():
    status = subprocess.run(
        ["cat", "/proc/self/status"], capture_output=True, text=True, check=True
    ).stdout
    line = next(line for line in status.splitlines() if line.startswith("SigIgn"))
    ignored = int(line.split()[1], 16)
    assert not ignored & (1 << (signal.SIGINT - 1))
"""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_suite_started_with_sigint_ignored_starts_children_that_do_not_ignore_it(
    tmp_path: Path,
) -> None:
    """As from ``.ci/run &``: without the suite's hook, every Dagster process a test
    started would also ignore SIGTERM (see ``tests/conftest.py``)."""
    if not Path("/proc/self/status").exists():
        return
    (tmp_path / "conftest.py").write_text(_BORROWING_CONFTEST, encoding="utf-8")
    (tmp_path / "test_child.py").write_text(_CHILD_SIGNALS_TEST, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=_ignore_sigint,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
