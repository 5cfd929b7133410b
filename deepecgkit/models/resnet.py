"""``resnet1d`` and ``se-resnet``: small 1-D residual networks.

Three basic residual blocks (He et al. 2016) of widths 16/32/48 behind a
strided stem; ``se-resnet`` adds a squeeze-and-excitation gate (Hu et al.
2018, "Squeeze-and-Excitation Networks", CVPR) to each block, which
re-weights channels by their global average before the residual sum. Both
stay near 32-34 k parameters so that a five-seed grid runs on two CPU cores.
"""

from __future__ import annotations

import torch
from torch import nn

from deepecgkit.models.base import ECGClassifier
from deepecgkit.registry import register_model

__all__ = ["ResNet1D", "SEResNet1D", "SqueezeExcitation1D"]

_STEM_WIDTH = 16
_STEM_KERNEL = 7
_STEM_STRIDE = 2
_POOL = 2
#: (width, stride) of the three residual blocks.
_BLOCKS = ((16, 1), (32, 2), (48, 2))
_BLOCK_KERNEL = 5
#: Channel reduction inside the squeeze-and-excitation gate (Hu et al. 2018 use 16
#: for wide networks; 4 keeps the 16-channel block's bottleneck at 4 units).
SE_REDUCTION = 4


class SqueezeExcitation1D(nn.Module):
    """Channel gate ``x · σ(W₂ ReLU(W₁ mean_t(x)))`` (Hu et al. 2018)."""

    def __init__(self, channels: int, reduction: int = SE_REDUCTION) -> None:
        super().__init__()
        hidden = max(1, channels // reduction)
        self.gate = nn.Sequential(
            nn.AdaptiveAvgPool1d(1),
            nn.Conv1d(channels, hidden, 1),
            nn.ReLU(inplace=True),
            nn.Conv1d(hidden, channels, 1),
            nn.Sigmoid(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Scale each channel of ``(B, C, T)`` by its gate value."""
        return x * self.gate(x)


class BasicBlock1D(nn.Module):
    """Two k5 convolutions with BatchNorm, optional SE gate, and a residual sum.

    The shortcut is a 1×1 convolution + BatchNorm when the width or the
    stride changes, the identity otherwise.
    """

    def __init__(self, in_ch: int, out_ch: int, stride: int, squeeze: bool) -> None:
        super().__init__()
        pad = _BLOCK_KERNEL // 2
        self.body = nn.Sequential(
            nn.Conv1d(in_ch, out_ch, _BLOCK_KERNEL, stride=stride, padding=pad, bias=False),
            nn.BatchNorm1d(out_ch),
            nn.ReLU(inplace=True),
            nn.Conv1d(out_ch, out_ch, _BLOCK_KERNEL, padding=pad, bias=False),
            nn.BatchNorm1d(out_ch),
        )
        self.se = SqueezeExcitation1D(out_ch) if squeeze else nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut: nn.Module = nn.Sequential(
                nn.Conv1d(in_ch, out_ch, 1, stride=stride, bias=False),
                nn.BatchNorm1d(out_ch),
            )
        else:
            self.shortcut = nn.Identity()
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual block output ``(B, out_ch, ⌈T / stride⌉)``."""
        return self.relu(self.se(self.body(x)) + self.shortcut(x))


def _residual_encoder(input_channels: int, squeeze: bool) -> tuple[nn.Sequential, int]:
    """Stem and the three residual blocks; returns the encoder and its output width."""
    layers: list[nn.Module] = [
        nn.Conv1d(
            input_channels,
            _STEM_WIDTH,
            _STEM_KERNEL,
            stride=_STEM_STRIDE,
            padding=_STEM_KERNEL // 2,
            bias=False,
        ),
        nn.BatchNorm1d(_STEM_WIDTH),
        nn.ReLU(inplace=True),
        nn.MaxPool1d(_POOL),
    ]
    width = _STEM_WIDTH
    for out_width, stride in _BLOCKS:
        layers.append(BasicBlock1D(width, out_width, stride, squeeze))
        width = out_width
    return nn.Sequential(*layers), width


@register_model(
    "resnet1d",
    description="stem + three residual blocks (16/32/48), about 32 k parameters",
)
class ResNet1D(ECGClassifier):
    """Small 1-D ResNet: strided stem, max-pool, residual blocks, GAP, dropout, linear.

    The arguments (``input_channels``, ``output_size``, ``dropout``) are
    :class:`~deepecgkit.models.base.ECGClassifier`'s.
    """

    #: Whether each block carries a squeeze-and-excitation gate.
    squeeze_excitation = False

    def __init__(self, input_channels: int = 1, output_size: int = 2, dropout: float = 0.2) -> None:
        super().__init__(input_channels, output_size, dropout)
        self.encoder, width = _residual_encoder(self.input_channels, self.squeeze_excitation)
        self._build_head(width)


@register_model(
    "se-resnet",
    description="resnet1d with a squeeze-and-excitation gate per block, about 34 k parameters",
)
class SEResNet1D(ResNet1D):
    """:class:`ResNet1D` with a squeeze-and-excitation gate (reduction 4) in each block."""

    squeeze_excitation = True
