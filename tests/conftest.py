"""Fixtures shared across the test suite: small run corpora with known answers.

It also orders the suite for ``pytest -n 2 --dist loadgroup`` (``.ci/run``):
see :func:`pytest_collection_modifyitems`.
"""

from __future__ import annotations

import os
import pickle
import pwd
import shutil
import signal
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from deepecgkit.analysis.aggregation import reconcile_averaging
from deepecgkit.rundir.read import discover_runs
from deepecgkit.rundir.records import runs_to_frame
from deepecgkit.rundir.synthetic import SplitSizes
from deepecgkit.rundir.write import write_run_directory

#: F1 by seed of the worked example (analysis.md section 8).
WORKED_EXAMPLE_F1 = {
    ("afib", "cnn"): (0.80, 0.82, 0.79, 0.81, 0.83),
    ("afib", "lstm"): (0.70, 0.74, 0.72, 0.71, 0.73),
    ("afib", "resnet"): (0.76, 0.78, 0.76, 0.77, 0.78),
    ("ptbxl", "cnn"): (0.60, 0.62, 0.61, 0.59, 0.63),
    ("ptbxl", "lstm"): (0.64, 0.63, 0.66, 0.62, 0.65),
    ("ptbxl", "resnet"): (0.66, 0.67, 0.65, 0.66, 0.68),
}
WORKED_EXAMPLE_SIZES = SplitSizes(n_train=800, n_val=100, n_test=200, n_test_groups=180)


def write_worked_example(root: Path) -> Path:
    """Write the 30 run directories of the worked example under ``root/runs``."""
    runs = root / "runs"
    for (dataset, model), scores in WORKED_EXAMPLE_F1.items():
        for seed, score in enumerate(scores):
            write_run_directory(
                runs / f"{model}_{dataset}_seed{seed}",
                model=model,
                dataset=dataset,
                metrics={"f1": score},
                seed=seed,
                split_sizes=WORKED_EXAMPLE_SIZES,
            )
    return runs


@pytest.fixture(scope="session")
def worked_example_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder holding the worked example's run directories (read-only for tests)."""
    return write_worked_example(tmp_path_factory.mktemp("worked"))


@pytest.fixture(scope="session")
def worked_example_frame(worked_example_root: Path) -> pd.DataFrame:
    """The worked example as a reconciled long runs frame."""
    records, _ = discover_runs([worked_example_root])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame, _ = reconcile_averaging(runs_to_frame(records))
    return frame


#: The account an unprivileged check runs as when the tests run as root.
UNPRIVILEGED_USER = "nobody"


def _call_in_dropped_child(function: Callable[..., Any], *args: Any) -> Any:
    """Call ``function(*args)`` in a forked child that has given up root first.

    The child drops its supplementary groups, then its group, then its user
    (in that order: after ``setuid`` it could no longer change the others)
    and calls the function in the interpreter it already has, so nothing is
    executed from a path the unprivileged user might not reach (a Python
    under a private ``/root`` is the common case). The return value, or the
    exception, comes back pickled through a pipe.
    """
    account = pwd.getpwnam(UNPRIVILEGED_USER)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(read_end)
        try:
            try:
                os.setgroups([])
                os.setgid(account.pw_gid)
                os.setuid(account.pw_uid)
            except OSError as exc:
                outcome = ("cannot-drop", str(exc))
            else:
                try:
                    outcome = ("returned", function(*args))
                except BaseException as exc:
                    outcome = ("raised", exc)
            with os.fdopen(write_end, "wb") as pipe:
                pickle.dump(outcome, pipe)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(child, 0)
    kind, value = pickle.loads(data)
    if kind == "cannot-drop":
        pytest.skip(f"cannot drop root privileges here ({value}); permission checks need it")
    if kind == "raised":
        raise value
    return value


@pytest.fixture
def as_unprivileged() -> Callable[..., Any]:
    """A caller that runs ``function(*args)`` without root's right to read everything.

    Root reads any file whatever its mode, so a permission test run as root
    calls the function in a forked child running as ``nobody``; run as any
    other user it simply calls the function.
    """

    def call(function: Callable[..., Any], *args: Any) -> Any:
        if os.geteuid() != 0:
            return function(*args)
        return _call_in_dropped_child(function, *args)

    return call


#: The run directories shipped with the platform (real train-grid output).
EXAMPLE_CORPUS = Path(__file__).resolve().parents[1] / "deepecg_assets" / "example_corpus"


def copy_example_runs(
    destination: Path, *prefixes: str, seeds: tuple[int, ...] = (0, 1, 2)
) -> Path:
    """Copy bundled example runs (``<prefix>_seed<N>``) under ``destination``; return it.

    Hostile corpora are built from these real run directories inside each
    test, never from files committed for a test.
    """
    destination.mkdir(parents=True, exist_ok=True)
    for prefix in prefixes:
        for seed in seeds:
            name = f"{prefix}_seed{seed}"
            shutil.copytree(EXAMPLE_CORPUS / name, destination / name, dirs_exist_ok=True)
    return destination


@pytest.fixture
def example_runs() -> Callable[..., Path]:
    """:func:`copy_example_runs`, for tests that build a corpus from the bundled runs."""
    return copy_example_runs


@dataclass(frozen=True)
class TransferBuild:
    """The transfer assets materialised once on the bundled corpus: output folder and events."""

    output: Path
    result: Any


#: The assets the transfer build materialises (the encoders are probed once per session).
TRANSFER_BUILD = ("discovered_runs", "transfer_matrix", "transfer_table")


@pytest.fixture(scope="session")
def bundled_transfer_build(tmp_path_factory: pytest.TempPathFactory) -> TransferBuild:
    """The transfer assets built on the bundled corpus, shared by the tests that read them.

    Probing every encoder is the slowest step of the platform, so the asset
    tests and the README-pictures script test read one build. The platform's
    environment is set only while the job runs.
    """
    import dagster as dg

    from deepecg_assets.definitions import defs

    folder = tmp_path_factory.mktemp("bundled-transfer")
    output, home = folder / "output", folder / "dagster_home"
    home.mkdir()
    job = defs.resolve_implicit_global_asset_job_def()
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("DEEPECG_RUNS", raising=False)  # unset: the bundled example corpus
        patch.setenv("DEEPECG_OUTPUT", str(output))
        patch.setenv("DEEPECG_RECURSIVE", "1")
        with dg.instance_for_test(temp_dir=str(home)) as instance:
            result = job.execute_in_process(
                instance=instance, asset_selection=[dg.AssetKey(k) for k in TRANSFER_BUILD]
            )
    assert result.success
    return TransferBuild(output=output, result=result)


#: Fixtures, built once per module or session, that take tens of seconds (a whole
#: build, a served UI, a trained or probed encoder). Every test that uses one runs on
#: the xdist worker that built it: under plain ``--dist load`` the tests of one such
#: fixture are spread over both workers, and each worker builds it again. Add a
#: fixture here when it is that slow and more than one test reads it.
SHARED_ONCE_FIXTURES = frozenset(
    {
        "bundled_transfer_build",
        "served_graph",
        "corpus_and_clean_build",
        "built",
        "built_platform",
        "grid_out",
        "af_checkpoint",
        "report",
        "partial_report",
        "materialized_from_the_ui",
    }
)
#: Marker of the tests that train models or start servers (``pyproject.toml``).
SLOW_MARKER = "slow"


def _shared_fixture_keys(item: pytest.Item) -> list[str]:
    """The :data:`SHARED_ONCE_FIXTURES` that ``item`` uses, named by where they are defined."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return sorted(
        f"{definitions[-1].baseid or '<root>'}::{name}"
        for name, definitions in info.name2fixturedefs.items()
        if name in SHARED_ONCE_FIXTURES and definitions[-1].scope in ("module", "session")
    )


def _group_shared_fixtures(items: list[pytest.Item]) -> dict[str, str]:
    """Each item's xdist group: the tests of one shared fixture (transitively) are one group."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    item_keys = {item.nodeid: _shared_fixture_keys(item) for item in items}
    for keys in item_keys.values():
        for key in keys[1:]:
            parent[root(key)] = root(keys[0])
    return {nodeid: root(keys[0]) for nodeid, keys in item_keys.items() if keys}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep each shared build on one worker, and start the long modules first.

    The tests of a :data:`SHARED_ONCE_FIXTURES` fixture get one ``xdist_group``
    (honoured by ``--dist loadgroup``; every other test is balanced one by
    one). Modules holding such a test or a ``slow`` one move to the front of
    the run, in their collected order, so that the two workers do not end
    with one of them alone on a minute-long test; a module's tests stay
    together, so its module-scoped fixtures are set up once. Tests tried first
    (``tryfirst``) so that xdist's own hook sees the group marks.
    """
    groups = _group_shared_fixtures(items)
    early_modules: set[str] = set()
    for item in items:
        if item.nodeid in groups:
            item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
        if item.nodeid in groups or item.get_closest_marker(SLOW_MARKER) is not None:
            early_modules.add(item.nodeid.split("::", 1)[0])
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in early_modules)


def pytest_configure(config: pytest.Config) -> None:
    """Let the servers and daemons the tests start be stopped by SIGTERM, wherever pytest runs.

    A shell's background job starts with SIGINT ignored, and an ignored signal
    is inherited. Every Dagster process maps SIGTERM to SIGINT's handler
    (``dagster._utils.interrupts.setup_interrupt_handlers``), so under such a
    pytest the daemons, code servers and run processes the tests start would
    ignore SIGTERM, and so would the ``tail`` processes that capture their
    steps' output: each run then waits a minute to stop them and leaves them
    running (see ``deepecg_assets.distributed.dask_setup``). Python's own
    SIGINT handler, which is not inherited, puts things back as in a terminal.
    """
    del config
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
