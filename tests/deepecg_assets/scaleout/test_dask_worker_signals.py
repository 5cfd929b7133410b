"""A Dask worker that inherited an ignored SIGTERM can stop its steps' log tails again.

Dagster stops the two ``tail -F`` processes that capture a step's output with
SIGTERM; where the worker ignores SIGTERM, so do they, and every step waits a
minute (:func:`deepecg_assets.distributed.dask_setup`). The test starts a
process that ignores SIGTERM, as a Dagster process started in a shell's
background does, shows that a ``tail`` it starts ignores SIGTERM too, and
then that a ``tail`` started on a worker of a local cluster preloaded with
the code location stops at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("distributed")

#: Seconds a terminated ``tail`` gets to exit (it takes milliseconds).
EXIT_WAIT_S = 3.0

_SCRIPT = textwrap.dedent(
    f"""
    import json, signal, subprocess, sys

    def tail_stops_on_sigterm():
        import subprocess
        tail = subprocess.Popen(["tail", "-F", "-c", "+0", "/dev/null"])
        tail.terminate()
        try:
            tail.wait(timeout={EXIT_WAIT_S})
            return True
        except subprocess.TimeoutExpired:
            tail.kill()
            tail.wait()
            return False

    if __name__ == "__main__":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        here = tail_stops_on_sigterm()
        from distributed import Client, LocalCluster

        with LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            worker_dashboard_address="127.0.0.1:0",
            preload=["deepecg_assets.distributed"],
        ) as cluster, Client(cluster) as client:
            on_worker = client.submit(tail_stops_on_sigterm).result()
        print(json.dumps({{"here": here, "on_worker": on_worker}}))
    """
)


def test_a_preloaded_worker_stops_its_tails_although_its_parent_ignores_sigterm(tmp_path) -> None:
    script = tmp_path / "ignore_sigterm.py"
    script.write_text(_SCRIPT, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    outcome = json.loads(completed.stdout.strip().splitlines()[-1])
    assert outcome == {"here": False, "on_worker": True}
