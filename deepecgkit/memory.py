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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Callable

__all__ = ["release_free_memory"]

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
