"""Give memory a finished computation freed back to the system, so the next one starts low.

A process that runs many large computations one after the other (the build
runs every step of the asset graph in one process) keeps the peak of each
one resident long after it ended: freed Python, numpy and pandas blocks stay
in the C allocator's heap, and Arrow's allocator keeps the pages of freed
buffers for reuse. The next step then adds its own peak on top of them, so
the process's peak is a sum of leftovers, not the largest step. Calling
:func:`release_free_memory` between computations hands both back: Arrow's
unused pages (``MemoryPool.release_unused``) and the C heap's free pages
(glibc's ``malloc_trim``, where the C library is glibc; elsewhere that part
is skipped). Nothing in use is touched, so results cannot change; the cost is
a few milliseconds.

The second tool here, :func:`collector_paused`, is about time rather than
memory: Python's cyclic garbage collector starts a collection after every
few hundred container allocations, and a full one traverses every container
alive. A scan of 100,000 runs builds hundreds of thousands of tuples, lists
and dicts that hold no reference cycle, so each collection it triggers finds
nothing and costs more the more the scan has built (at 100,000 runs about
0.4 s of the discovery step of a one-run refresh, 0.5 s of the sensor's
change tick). Such a phase pauses the collector; reference counting still
frees everything it drops at once, and any cycle made meanwhile is
collected by the first collection after it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import logging
import threading
from collections.abc import Callable, Iterator

__all__ = ["collector_paused", "release_free_memory"]

logger = logging.getLogger(__name__)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> None:
    """Return the free pages of Arrow's memory pool and of the C heap to the system."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class _Pauses:
    """How many phases are inside :func:`collector_paused`, and whether the collector was on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # phases may run on several threads (a sensor's ticks)
        self.active = 0
        self.was_enabled = False


_PAUSES = _Pauses()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the phase inside (see the module docstring).

    Phases nest and may overlap across threads: the collector is switched
    off by the first phase to enter and back on by the last to leave, and
    only if it was on before the first (a caller that disabled it keeps it
    disabled). Use it around a phase that ends (no wait on another process
    or a person) and builds many containers but few reference cycles: a
    cycle made inside (a bounded database query of the platform's, say)
    lives until the first collection after the phase.
    """
    with _PAUSES.lock:
        if _PAUSES.active == 0:
            _PAUSES.was_enabled = gc.isenabled()
            gc.disable()
        _PAUSES.active += 1
    try:
        yield
    finally:
        with _PAUSES.lock:
            _PAUSES.active -= 1
            if _PAUSES.active == 0 and _PAUSES.was_enabled:
                gc.enable()
