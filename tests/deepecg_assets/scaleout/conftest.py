"""Servers for the scale-out tests, started by the tests on loopback and always stopped.

A throw-away PostgreSQL cluster (``initdb`` and ``pg_ctl`` in a temporary
folder, run as an unprivileged user because ``initdb`` refuses root) and a
Dask scheduler with two worker processes. Every server listens on 127.0.0.1
and a port that was free a moment before; each fixture stops its servers in
a ``finally`` block, so a failing test leaves nothing running.

The corpus is a subset of the bundled example corpus: twelve real runs (two
models on two datasets, three seeds) without their checkpoints and prediction
files. The deployment machinery does not care what a step computes, and a
full build of the bundled corpus trains linear probes on every checkpoint
and draws a reliability diagram per run: minutes of CPU, where this subset
builds every asset in seconds (the report records the runs without
predictions, the transfer matrix the recorded checkpoints it cannot load).
Those two assets' numbers are tested in their own modules.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from deepecg_assets.assets.tables import COMPILE_CACHE_FOLDER
from tests.deepecg_assets.clean_builds import build_from_scratch
from tests.deepecg_assets.output_trees import tree_bytes

#: The repository root: the code location the servers load, and where ``workspace.yaml`` lies.
REPO_ROOT = Path(__file__).resolve().parents[3]
#: Loopback only: no server a test starts is reachable from another machine.
LOOPBACK = "127.0.0.1"
#: Seconds a server may take to start or to stop before the test gives up on it (a bound on
#: failing, not a wait: on a loaded 2-core machine the workers took over a minute to import
#: the code location).
SERVER_TIMEOUT_SECONDS = 180
#: Bundled runs of the small corpus: two models on two datasets, three seeds each.
SMALL_CORPUS_MODELS = ("logreg-features", "simple-cnn")
SMALL_CORPUS_DATASETS = ("synthetic-irregular-rr", "synthetic-long-pr")
SMALL_CORPUS_SEEDS = (0, 1, 2)
#: Files left out of the small corpus (encoder checkpoints and stored predictions).
DROPPED_FILES = ("checkpoint.pt", "predictions.csv", "val_predictions.csv")
#: Where Debian installs the server binaries (not on PATH).
DEBIAN_POSTGRES_ROOT = Path("/usr/lib/postgresql")


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def venv_command(name: str) -> str:
    """The console script ``name`` of the interpreter running the tests (its venv's bin)."""
    return str(Path(sys.executable).parent / name)


def server_env(**extra: str) -> dict[str, str]:
    """The test process's environment with this tree's code first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def stop_process_group(process: subprocess.Popen) -> None:
    """SIGTERM the server, then SIGKILL whatever is left of its process group.

    The server was started in a session of its own, so its group holds every
    child it spawned (the daemon's code server and run workers, the Dask
    nanny's workers). Only the server gets SIGTERM, so that it shuts its
    children down in order; the SIGKILL of the group catches what outlived it.
    """
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=SERVER_TIMEOUT_SECONDS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # children that outlived their parent
    process.wait()


def assert_loopback_only(pid: int) -> None:
    """Every TCP socket that process ``pid`` or its descendants listen on is on 127.0.0.1."""
    import psutil

    root = psutil.Process(pid)
    listening = [
        (process.pid, connection.laddr)
        for process in (root, *root.children(recursive=True))
        for connection in process.net_connections(kind="inet")
        if connection.status == psutil.CONN_LISTEN
    ]
    assert listening, f"process {pid} listens on nothing"
    elsewhere = [(owner, address) for owner, address in listening if address.ip != LOOPBACK]
    assert not elsewhere, f"servers listening beyond {LOOPBACK}: {elsewhere}"


def log_tail(path: Path, characters: int = 4000) -> str:
    """The end of a server's log, for a failure message."""
    try:
        return path.read_text(errors="replace")[-characters:]
    except OSError:
        return "(no log)"


#: What only a sensor-watched output folder holds: the tree index of the no-change tick.
SENSOR_ONLY = "cache/tree_index.json"
#: The tables' compile cache: one entry per table text ever compiled, so a folder that
#: was refreshed holds the verdicts of its earlier texts too (a cache, not a result).
COMPILE_CACHE_PREFIX = f"cache/{COMPILE_CACHE_FOLDER}/"


def _results(folder: Path) -> dict[str, bytes]:
    """The folder's files, less the sensor's tree index and the compile cache."""
    return {
        name: data
        for name, data in tree_bytes(folder).items()
        if name != SENSOR_ONLY and not name.startswith(COMPILE_CACHE_PREFIX)
    }


def assert_same_outputs(built: Path, reference: Path, *, frames: Path | None = None) -> None:
    """The two output folders hold the same files with the same bytes.

    ``frames``: where the build stored its frames when not under ``built``
    (the frame store's own base path); they stand in for ``built/frames``.
    The sensor's tree index (:data:`SENSOR_ONLY`) is left out, since only a
    build watched by the sensor has one, and so is the compile cache
    (:data:`COMPILE_CACHE_PREFIX`), which keeps the verdicts of earlier texts.
    """
    got, want = _results(built), _results(reference)
    if frames is not None:
        assert not any(name.startswith("frames/") for name in got), "frames outside base_path"
        got |= {f"frames/{name}": data for name, data in tree_bytes(frames).items()}
    assert sorted(got) == sorted(want), "the builds wrote different files"
    differing = [name for name in want if got[name] != want[name]]
    assert not differing, f"files that differ from the reference build: {differing}"
    assert any(name.startswith("frames/") for name in want), "no frames were compared"


def copy_bundled_runs(
    runs: Path, *prefixes: str, seeds: tuple[int, ...], copy_runs: Callable[..., Path]
) -> Path:
    """Copy bundled runs ``<prefix>_seed<N>`` under ``runs`` with ``copy_runs``, less
    :data:`DROPPED_FILES`."""
    copy_runs(runs, *prefixes, seeds=seeds)
    for prefix in prefixes:
        for seed in seeds:
            for name in DROPPED_FILES:
                (runs / f"{prefix}_seed{seed}" / name).unlink(missing_ok=True)
    return runs


@pytest.fixture
def small_corpus(tmp_path: Path, example_runs: Callable[..., Path]) -> Path:
    """A folder of 12 bundled runs (see the module docstring) that a test may extend."""
    prefixes = [f"{m}_{d}" for m in SMALL_CORPUS_MODELS for d in SMALL_CORPUS_DATASETS]
    return copy_bundled_runs(
        tmp_path / "runs", *prefixes, seeds=SMALL_CORPUS_SEEDS, copy_runs=example_runs
    )


# --- PostgreSQL -------------------------------------------------------------------------


@dataclass(frozen=True)
class PostgresServer:
    """A running throw-away cluster and the database Dagster stores its instance in."""

    port: int
    user: str
    password: str
    database: str
    host: str = LOOPBACK

    def dagster_env(self) -> dict[str, str]:
        """The variables ``deploy/dagster.yaml`` reads its connection from."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USERNAME": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": self.database,
        }

    def connect(self, database: str | None = None) -> Any:
        """A psycopg2 connection (autocommit) to ``database`` (default: Dagster's)."""
        import psycopg2

        connection = psycopg2.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            dbname=database or self.database,
            connect_timeout=10,
        )
        connection.autocommit = True
        return connection


def postgres_bindir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: on PATH, else Debian's newest release."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    releases = sorted(
        (p.parent for p in DEBIAN_POSTGRES_ROOT.glob("*/bin/initdb")),
        key=lambda bindir: int(bindir.parent.name) if bindir.parent.name.isdigit() else 0,
    )
    return releases[-1] if releases else None


def _start_cluster(bindir: str, port: int, user: str, password: str) -> str:
    """Create and start a cluster in a new temporary folder; return the folder.

    Runs as the unprivileged user: the folder is theirs, and so is the server.
    The server listens on ``127.0.0.1:port`` only (no Unix socket), trusts no
    one (SCRAM passwords), and skips fsync: the data is thrown away.
    """
    folder = Path(tempfile.mkdtemp(prefix="deepecg-pg-"))
    data, password_file = folder / "data", folder / "password"
    password_file.write_text(password)
    subprocess.run(
        [
            f"{bindir}/initdb",
            f"--pgdata={data}",
            f"--username={user}",
            f"--pwfile={password_file}",
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    settings = {
        "listen_addresses": f"'{LOOPBACK}'",
        "port": str(port),
        "unix_socket_directories": "''",
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
    }
    with (data / "postgresql.conf").open("a") as conf:
        conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
    subprocess.run(
        [
            f"{bindir}/pg_ctl",
            f"--pgdata={data}",
            f"--log={folder / 'server.log'}",
            f"--timeout={SERVER_TIMEOUT_SECONDS}",
            "--wait",
            "start",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return str(folder)


def _stop_cluster(bindir: str, folder: str) -> None:
    subprocess.run(
        [
            f"{bindir}/pg_ctl",
            f"--pgdata={folder}/data",
            f"--timeout={SERVER_TIMEOUT_SECONDS}",
            "--mode=immediate",
            "--wait",
            "stop",
        ],
        check=False,
        capture_output=True,
    )


def _kill_leftover_server(folder: Path) -> None:
    """SIGKILL the postmaster if ``pg_ctl stop`` did not end it (its pid is in postmaster.pid)."""
    pid_file = folder / "data" / "postmaster.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split()[0])
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + SERVER_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


@pytest.fixture
def postgres_server(as_unprivileged: Callable[..., Any]) -> Iterator[PostgresServer]:
    """A PostgreSQL cluster on 127.0.0.1 with an empty ``dagster`` database, stopped afterwards."""
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip(
            "PostgreSQL's server binaries (initdb, pg_ctl) are not installed; "
            ".ci/run installs Debian's postgresql"
        )
    server = PostgresServer(
        port=free_port(), user="deepecg", password="throwaway-test-password", database="dagster"
    )
    try:
        folder = Path(
            as_unprivileged(_start_cluster, str(bindir), server.port, server.user, server.password)
        )
    except subprocess.CalledProcessError as exc:
        raise AssertionError(f"{exc.cmd[0]} failed: {exc.stderr}") from None
    try:
        postmaster = int((folder / "data" / "postmaster.pid").read_text().split()[0])
        assert_loopback_only(postmaster)
        connection = server.connect("postgres")
        try:
            with connection.cursor() as cursor:  # autocommit: CREATE DATABASE takes no transaction
                cursor.execute(f"CREATE DATABASE {server.database}")
        finally:
            connection.close()
        yield server
    finally:
        as_unprivileged(_stop_cluster, str(bindir), str(folder))
        _kill_leftover_server(folder)
        shutil.rmtree(folder, ignore_errors=True)


# --- Dask --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DaskCluster:
    """A running scheduler and the pids of its worker processes."""

    address: str
    worker_pids: frozenset[int]


#: Worker processes the test cluster starts (one thread each).
DASK_WORKERS = 2


@pytest.fixture
def dask_cluster_env() -> dict[str, str]:
    """Extra environment of the Dask workers; a test sets what its steps read (DEEPECG_*)."""
    return {}


@pytest.fixture
def dask_cluster(tmp_path: Path, dask_cluster_env: dict[str, str]) -> Iterator[DaskCluster]:
    """``dask scheduler`` and ``dask worker --nworkers 2`` on loopback, stopped afterwards."""
    from distributed import Client

    from deepecg_assets.distributed import DASK_SCHEDULER_ENV

    address = f"tcp://{LOOPBACK}:{free_port()}"
    # The workers resolve the run's executor config too, scheduler address included.
    env = server_env(**{DASK_SCHEDULER_ENV: address}, **dask_cluster_env)
    logs = tmp_path / "dask"
    logs.mkdir()
    scheduler_cmd = [venv_command("dask"), "scheduler", "--host", LOOPBACK]
    # --no-dashboard leaves each process's HTTP server (health, metrics) on every interface
    # unless --dashboard-address says otherwise.
    http = ["--no-dashboard", "--dashboard-address", f"{LOOPBACK}:0"]
    scheduler_cmd += ["--port", address.rsplit(":", 1)[1], *http]
    worker_cmd = [venv_command("dask"), "worker", address, "--nworkers", str(DASK_WORKERS)]
    worker_cmd += ["--nthreads", "1", "--host", LOOPBACK, *http]
    worker_cmd += ["--local-directory", str(logs / "workspace")]
    worker_cmd += ["--preload", "deepecg_assets.distributed"]
    processes: list[subprocess.Popen] = []
    try:
        for name, command in (("scheduler", scheduler_cmd), ("workers", worker_cmd)):
            with (logs / f"{name}.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        command,
                        env=env,
                        cwd=tmp_path,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        with Client(address, timeout=SERVER_TIMEOUT_SECONDS) as client:
            try:
                client.wait_for_workers(DASK_WORKERS, timeout=SERVER_TIMEOUT_SECONDS)
            except TimeoutError:
                raise AssertionError(
                    "the Dask workers did not register:\n" + log_tail(logs / "workers.log")
                ) from None
            pids = frozenset(client.run(os.getpid).values())
        for process in processes:
            assert_loopback_only(process.pid)
        yield DaskCluster(address=address, worker_pids=pids)
    finally:
        for process in reversed(processes):
            stop_process_group(process)


# --- The reference ---------------------------------------------------------------------


@pytest.fixture
def reference_build(tmp_path: Path) -> Callable[..., Path]:
    """A builder: every asset of ``runs`` built in this process; its output folder.

    This is the single-machine build that the scale-out builds must equal byte for byte:
    the build command's two runs (discovery, then every dataset partition in one run).
    ``on_sqlite``: on a new SQLite instance, the one issue 13 compares the PostgreSQL
    instance with; else on Dagster's in-memory instance, which is half the CPU
    (:mod:`tests.deepecg_assets.clean_builds`).
    """

    def build(runs: Path, *, on_sqlite: bool = False) -> Path:
        home = tmp_path / "reference_home" if on_sqlite else None
        return build_from_scratch(runs, tmp_path / "reference_output", home=home)

    return build


@pytest.fixture
def scaleout(example_runs: Callable[..., Path]) -> SimpleNamespace:
    """This module's helpers for the tests (a conftest is not importable under importlib mode)."""
    return SimpleNamespace(
        copy_bundled_runs=functools.partial(copy_bundled_runs, copy_runs=example_runs),
        REPO_ROOT=REPO_ROOT,
        SERVER_TIMEOUT_SECONDS=SERVER_TIMEOUT_SECONDS,
        server_env=server_env,
        venv_command=venv_command,
        stop_process_group=stop_process_group,
        log_tail=log_tail,
        assert_same_outputs=assert_same_outputs,
    )
