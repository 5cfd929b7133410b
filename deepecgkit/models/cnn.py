"""``simple-cnn``: the smallest registered encoder (three plain conv stages).

About 13 k parameters for one lead and two outputs, so the demo grid trains
it in seconds on a CPU and its checkpoint is a few tens of kilobytes.
"""

from __future__ import annotations

from torch import nn

from deepecgkit.models.base import ECGClassifier
from deepecgkit.registry import register_model

__all__ = ["SimpleCNN"]

#: Output widths of the three convolution stages.
_WIDTHS = (16, 32, 64)
#: Kernel sizes of the three stages; the first one also downsamples by 2.
_KERNELS = (7, 5, 5)
_STEM_STRIDE = 2
_POOL = 2


def _conv_stage(in_ch: int, out_ch: int, kernel: int, stride: int = 1) -> list[nn.Module]:
    """Conv1d ("same"-style padding) + BatchNorm + ReLU."""
    return [
        nn.Conv1d(in_ch, out_ch, kernel, stride=stride, padding=kernel // 2),
        nn.BatchNorm1d(out_ch),
        nn.ReLU(inplace=True),
    ]


@register_model(
    "simple-cnn",
    description="three conv stages (16/32/64) with global average pooling, about 13 k parameters",
)
class SimpleCNN(ECGClassifier):
    """Conv(k7, /2, 16) → pool → Conv(k5, 32) → pool → Conv(k5, 64) → GAP → dropout → linear.

    The arguments (``input_channels``, ``output_size``, ``dropout``) are
    :class:`~deepecgkit.models.base.ECGClassifier`'s.
    """

    def __init__(self, input_channels: int = 1, output_size: int = 2, dropout: float = 0.2) -> None:
        super().__init__(input_channels, output_size, dropout)
        first, second, third = _WIDTHS
        self.encoder = nn.Sequential(
            *_conv_stage(self.input_channels, first, _KERNELS[0], stride=_STEM_STRIDE),
            nn.MaxPool1d(_POOL),
            *_conv_stage(first, second, _KERNELS[1]),
            nn.MaxPool1d(_POOL),
            *_conv_stage(second, third, _KERNELS[2]),
        )
        self._build_head(third)
