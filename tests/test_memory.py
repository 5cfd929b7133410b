"""release_free_memory hands freed heap pages back, and never touches memory in use."""

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from deepecgkit.memory import _malloc_trim, release_free_memory

#: Blocks of a size the C allocator serves from its heap (above Python's small-object
#: allocator, below the size it maps on its own), so freeing them leaves free heap pages.
BLOCK_BYTES = 2000
BLOCKS = 100_000
STATM = Path("/proc/self/statm")


def _resident_mib() -> float:
    return int(STATM.read_text().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or _malloc_trim() is None,
    reason="measures glibc's heap through /proc",
)
def test_freed_heap_pages_go_back_to_the_system() -> None:
    blocks = [bytearray(BLOCK_BYTES) for _ in range(BLOCKS)]
    kept = blocks[-1]  # the heap's top stays in use, so free() alone cannot shrink it
    allocated = BLOCK_BYTES * BLOCKS / 2**20
    del blocks
    before = _resident_mib()
    release_free_memory()
    assert before - _resident_mib() > allocated / 2
    assert len(kept) == BLOCK_BYTES


def test_memory_in_use_is_untouched() -> None:
    values = np.arange(1_000_000, dtype=np.float64)
    doubled = pc.multiply(pa.array(values), 2)  # a buffer of Arrow's pool
    release_free_memory()
    assert pa.default_memory_pool().bytes_allocated() >= values.nbytes
    np.testing.assert_array_equal(doubled.to_numpy(), values * 2)
