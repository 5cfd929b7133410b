"""Reading the checkpoints ``ECGTrainer.save_checkpoint`` writes.

One reader serves the trainer (``ECGTrainer.load_checkpoint``) and the frozen
encoders (``FeatureExtractor.from_checkpoint``), so both apply the same
checks. Checkpoints hold only tensors and plain values and are read with
``torch.load(weights_only=True)``: loading never executes pickled code.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch
from torch import nn

from deepecgkit.io import REASON_MISSING, UnreadableFileError, read_regular_file
from deepecgkit.registry import get_model
from deepecgkit.rundir.format import CHECKPOINT_FILENAME

__all__ = [
    "CHECKPOINT_FILENAME",
    "CHECKPOINT_FORMAT_VERSION",
    "build_model_from_checkpoint",
    "read_checkpoint",
]

#: Version written into every checkpoint.
CHECKPOINT_FORMAT_VERSION = 1
#: Name of the checkpoint inside a run directory.
_REQUIRED_KEYS = ("model_name", "model_kwargs", "state_dict")


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint dictionary onto the CPU.

    The file is read through the one safe open of run-directory files, so a
    FIFO under the checkpoint's name is rejected instead of blocking.

    Raises:
        FileNotFoundError: no file at ``path`` (the message names it).
        ValueError: the file is not a checkpoint of this package (not a
            readable regular file, not loadable, or missing
            ``model_name``/``model_kwargs``/``state_dict``).
    """
    path = Path(path)
    try:
        data, _ = read_regular_file(path)
    except UnreadableFileError as exc:
        if exc.reason == REASON_MISSING:
            raise FileNotFoundError(f"checkpoint not found: {path}") from None
        raise ValueError(f"cannot read checkpoint {path}: {exc.reason}") from None
    try:
        checkpoint = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several unrelated types for a bad file
        raise ValueError(f"cannot read checkpoint {path}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(checkpoint, dict):
        raise ValueError(f"checkpoint {path} holds a {type(checkpoint).__name__}, expected a dict")
    missing = [key for key in _REQUIRED_KEYS if key not in checkpoint]
    if missing:
        raise ValueError(
            f"checkpoint {path} lacks the keys {missing}; was it written by ECGTrainer?"
        )
    return checkpoint


def build_model_from_checkpoint(
    checkpoint: dict[str, Any],
    *,
    source: str | Path,
    model: nn.Module | None = None,
    model_name: str | None = None,
    input_channels: int | None = None,
) -> nn.Module:
    """Build (or fill) a model with a checkpoint's weights, strictly.

    Args:
        checkpoint: a dictionary from :func:`read_checkpoint`.
        source: where it came from, for error messages.
        model: an existing module to load into; built from the registry when None.
        model_name: registry name; defaults to the checkpoint's.
        input_channels: when given, must equal the checkpoint's lead count.

    Raises:
        ValueError: a lead-count mismatch (an encoder trained on 12 leads
            cannot read one), an unknown model name, or a state dict that does
            not fit the model.
    """
    kwargs = dict(checkpoint["model_kwargs"])
    stored_channels = kwargs.get("input_channels")
    mismatch = (
        input_channels is not None
        and stored_channels is not None
        and int(input_channels) != int(stored_channels)
    )
    if mismatch:
        raise ValueError(
            f"checkpoint {source} was trained on {stored_channels} input channel(s) but "
            f"input_channels={input_channels} was requested"
        )
    name = model_name or checkpoint["model_name"]
    if model is None:
        model = get_model(name)(**kwargs)
    try:
        model.load_state_dict(checkpoint["state_dict"], strict=True)
    except RuntimeError as exc:
        raise ValueError(
            f"checkpoint {source} does not fit model {name!r} ({type(model).__name__}): {exc}"
        ) from exc
    return model
