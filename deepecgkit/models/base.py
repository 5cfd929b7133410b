"""The contract every torch ECG classifier of the registry follows.

A model maps a float32 batch ``(B, input_channels, T)`` to logits
``(B, output_size)`` through two stages: :meth:`ECGClassifier.extract_features`
(convolutions and global average pooling, giving ``(B, feature_dim)``) and a
dropout + linear head. Keeping the embedding a separate method is what lets
a trained network serve as a frozen encoder for linear probes. Global
average pooling makes any length ``T >= MIN_INPUT_SAMPLES`` valid, so one
checkpoint reads windows of any duration.

Weights use PyTorch's default initialisation, drawn in the constructor: a
caller that seeds right before building the model fixes them with the seed.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["MIN_INPUT_SAMPLES", "ECGClassifier"]

#: Shortest input the downsampling stacks accept (they halve the length ≤ 4 times).
MIN_INPUT_SAMPLES = 64


class ECGClassifier(nn.Module):
    """Base of the registered 1-D convolutional classifiers.

    Subclasses build ``self.encoder`` (anything mapping ``(B, L, T)`` to
    ``(B, feature_dim, T')``) and set ``feature_dim`` before calling
    :meth:`_build_head`.

    Args:
        input_channels: number of leads ``L``.
        output_size: 1 for a binary single-logit model, ``C`` for multiclass,
            ``K`` for multi-label.
        dropout: dropout probability applied to the embedding before the head.

    Raises:
        ValueError: a non-positive channel or output count, or a dropout
            outside ``[0, 1)``.
    """

    def __init__(self, input_channels: int = 1, output_size: int = 2, dropout: float = 0.2) -> None:
        super().__init__()
        if int(input_channels) < 1:
            raise ValueError(f"input_channels must be at least 1, got {input_channels}")
        if int(output_size) < 1:
            raise ValueError(f"output_size must be at least 1, got {output_size}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.input_channels = int(input_channels)
        self.output_size = int(output_size)
        self.dropout_rate = float(dropout)
        self.feature_dim = 0

    def _build_head(self, feature_dim: int) -> None:
        """Create the pooling, dropout and linear head on ``feature_dim`` inputs."""
        self.feature_dim = int(feature_dim)
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.dropout = nn.Dropout(self.dropout_rate)
        self.head = nn.Linear(self.feature_dim, self.output_size)

    def _check_input(self, x: torch.Tensor) -> None:
        if x.ndim != 3 or x.shape[1] != self.input_channels:
            raise ValueError(
                f"{type(self).__name__} expects input of shape (batch, {self.input_channels}, "
                f"samples), got {tuple(x.shape)}"
            )
        if x.shape[2] < MIN_INPUT_SAMPLES:
            raise ValueError(
                f"{type(self).__name__} needs at least {MIN_INPUT_SAMPLES} samples per window, "
                f"got {x.shape[2]}"
            )

    def extract_features(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled embedding ``(B, feature_dim)`` that the head consumes (before dropout)."""
        self._check_input(x)
        return self.pool(self.encoder(x)).squeeze(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, output_size)`` for a float32 batch ``(B, input_channels, T)``."""
        return self.head(self.dropout(self.extract_features(x)))
