"""``read_checkpoint`` goes through the one safe open: a bad file is a clear error, never a hang."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from deepecgkit.models.checkpoint import read_checkpoint

#: Seconds a read may take before it counts as blocked on a FIFO.
BLOCK_TIMEOUT = 10.0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_checkpoint_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "checkpoint.pt"
    os.mkfifo(fifo)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            read_checkpoint(fifo)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(BLOCK_TIMEOUT)
    assert not worker.is_alive(), "reading a FIFO checkpoint blocked"
    (error,) = errors
    assert isinstance(error, ValueError)
    assert str(error) == f"cannot read checkpoint {fifo}: not a regular file (FIFO)"


def test_missing_and_corrupt_checkpoints_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        read_checkpoint(tmp_path / "missing.pt")
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=f"cannot read checkpoint {corrupt}"):
        read_checkpoint(corrupt)
