"""Device selection and seeding shared by training, evaluation and probes.

Every entry point that runs a torch model (the trainer, the feature
extractor, the evaluator's cross-validation) resolves its ``device``
argument through :func:`resolve_device`, so ``"auto"`` means the same thing
everywhere, and seeds through :func:`seed_everything`, so one integer fixes
every random draw a run makes.
"""

from __future__ import annotations

import logging
import random

import numpy as np
import torch

__all__ = ["AUTO_DEVICE", "resolve_device", "seed_everything"]

logger = logging.getLogger(__name__)

#: Device name that picks the best accelerator present.
AUTO_DEVICE = "auto"


def _mps_available() -> bool:
    """Whether Apple's Metal backend is usable (absent on most builds)."""
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_device(device: str | torch.device = AUTO_DEVICE) -> torch.device:
    """Turn a device name into a :class:`torch.device` that exists on this machine.

    Args:
        device: ``"auto"`` (CUDA when available, else MPS, else CPU) or any
            name :class:`torch.device` parses (``"cpu"``, ``"cuda:1"``, ...).

    Returns:
        The resolved device.

    Raises:
        ValueError: the name does not parse, or names CUDA/MPS on a machine
            that has none. The check happens here, not at the first tensor
            move, so a grid fails before it trains anything.
    """
    if isinstance(device, torch.device):
        resolved = device
    elif not isinstance(device, str):
        raise ValueError(f"device must be a string such as 'auto', 'cpu' or 'cuda', got {device!r}")
    elif device.strip().lower() == AUTO_DEVICE:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    else:
        try:
            resolved = torch.device(device.strip().lower())
        except (RuntimeError, ValueError) as exc:
            raise ValueError(
                f"unknown device {device!r}; use 'auto', 'cpu', 'cuda', 'cuda:<index>' or 'mps'"
            ) from exc
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available here")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ValueError(
                f"device {device!r} requested but only {torch.cuda.device_count()} "
                "CUDA device(s) are present"
            )
    if resolved.type == "mps" and not _mps_available():
        raise ValueError(f"device {device!r} requested but MPS is not available here")
    return resolved


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's legacy global generator and torch.

    Deterministic algorithms are *not* switched on here: that slows some
    kernels down and is a policy of the caller (``train-grid`` enables it).

    Args:
        seed: any integer; NumPy's legacy generator only takes 32 bits, so it
            receives ``seed mod 2**32``.
    """
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - seeding the legacy global is the point
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    logger.debug("seeded random, numpy and torch with %d", seed)
