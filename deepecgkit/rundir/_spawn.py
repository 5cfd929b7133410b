"""Spawned reader processes that do not import the parent's main module.

A process that runs threads (a Dagster run, the build) starts its readers by
``spawn`` (see :func:`~deepecgkit.rundir.read._start_method`). A spawned
child first imports the parent's ``__main__`` again, so that functions
defined there can be unpickled. The readers run only functions of this
package, yet under the platform that main module is ``deepecg_assets.build``
or Dagster's command line: importing it costs each reader about six seconds
of CPU and 200 MB before it reads its first run (at 100,000 runs, most of
the difference between discovery under the platform and the library's).

:func:`reader_context` is a spawn context whose processes are started
without that step: the preparation data sent to each child leaves out the
main module (``init_main_from_name`` / ``init_main_from_path``), everything
else (``sys.path``, the working directory, the authentication key) is the
standard library's. Where that is not possible (no POSIX spawn) it is the
plain spawn context.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import threading
from typing import Any

__all__ = ["reader_context"]

#: Preparation-data keys that make a spawned child import the parent's main module.
_MAIN_KEYS = ("init_main_from_name", "init_main_from_path")

#: Held while a reader process is launched, the only time the preparation data is swapped.
_LAUNCH_LOCK = threading.Lock()

try:
    from multiprocessing import popen_spawn_posix, spawn
except ImportError:  # not POSIX: the plain spawn context
    popen_spawn_posix = None  # type: ignore[assignment]


def _without_main(original: Any) -> Any:
    """``get_preparation_data`` whose result names no main module."""

    def preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        for key in _MAIN_KEYS:
            data.pop(key, None)
        return data

    return preparation_data


if popen_spawn_posix is not None:

    class _ReaderPopen(popen_spawn_posix.Popen):
        """The standard spawn launch, with preparation data that names no main module."""

        def _launch(self, process_obj: Any) -> None:
            with _LAUNCH_LOCK:
                original = spawn.get_preparation_data
                spawn.get_preparation_data = _without_main(original)
                try:
                    super()._launch(process_obj)
                finally:
                    spawn.get_preparation_data = original

    class _ReaderProcess(multiprocessing.context.SpawnProcess):
        @staticmethod
        def _Popen(process_obj: Any) -> Any:
            return _ReaderPopen(process_obj)

    class _ReaderContext(multiprocessing.context.SpawnContext):
        Process = _ReaderProcess


def reader_context(method: str) -> Any:
    """The multiprocessing context for reader processes started by ``method``.

    ``spawn`` gives a context whose children skip the import of the main
    module (see the module docstring); any other method its standard context.
    """
    if method == "spawn" and popen_spawn_posix is not None:
        return _ReaderContext()
    return multiprocessing.get_context(method)
