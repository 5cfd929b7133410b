"""release_free_memory hands freed heap pages back, and never touches memory in use;
collector_paused pauses the cyclic collector for a phase and restores what it found."""

import gc
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from deepecgkit.memory import _malloc_trim, collector_paused, release_free_memory

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


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_paused_inside_and_back_on_after(collector_on) -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # a nested phase does not switch it back on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_still_switches_it_back_on(collector_on) -> None:
    with pytest.raises(ZeroDivisionError), collector_paused():
        _ = 1 / 0
    assert gc.isenabled()


def test_a_collector_switched_off_before_stays_off(collector_on) -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_phases_on_two_threads_end_with_the_collector_on(collector_on) -> None:
    first_inside, second_left = threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_inside.set()
            second_left.wait(timeout=10)
            seen.append(gc.isenabled())  # the other phase left first: still paused

    thread = threading.Thread(target=first)
    thread.start()
    assert first_inside.wait(timeout=10)
    with collector_paused():
        pass
    second_left.set()
    thread.join(timeout=10)
    assert seen == [False]
    assert gc.isenabled()


def test_a_cycle_made_while_paused_is_collected_afterwards(collector_on) -> None:
    import weakref

    class Node:
        pass

    with collector_paused():
        node = Node()
        node.self = node
        alive = weakref.ref(node)
        del node
        built = [[i] for i in range(10 * gc.get_threshold()[0])]  # would start collections
        assert alive() is not None  # none ran: nothing freed the cycle
        del built
    gc.collect()
    assert alive() is None
