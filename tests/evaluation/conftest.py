"""Shared data for the evaluation tests: the three prediction shapes, seeded."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from scipy.special import expit, softmax


class Split(NamedTuple):
    """Targets, logits and probabilities of one synthetic split."""

    y: np.ndarray
    logits: np.ndarray
    prob: np.ndarray


def draw_multiclass(rng: np.random.Generator, n: int, n_classes: int, scale: float = 1.0) -> Split:
    """Labels drawn from softmax(z); the model reports ``scale * z`` (overconfident if > 1)."""
    z = rng.normal(0.0, 1.5, size=(n, n_classes))
    cumulative = np.cumsum(softmax(z, axis=1), axis=1)
    y = (rng.random(n)[:, None] > cumulative).sum(axis=1)
    y = np.minimum(y, n_classes - 1)
    logits = scale * z
    return Split(y, logits, softmax(logits, axis=1))


def draw_binary(rng: np.random.Generator, n: int, scale: float = 1.0) -> Split:
    """Single-logit binary split; probabilities in the trainer's ``[1 - p, p]`` layout."""
    z = rng.normal(0.0, 2.0, size=n)
    y = (rng.random(n) < expit(z)).astype(np.int64)
    logits = scale * z
    p = expit(logits)
    return Split(y, logits, np.column_stack([1.0 - p, p]))


def draw_multilabel(rng: np.random.Generator, n: int, n_labels: int, scale: float = 1.0) -> Split:
    """Multi-hot targets drawn label by label from sigmoid(z)."""
    z = rng.normal(0.0, 2.0, size=(n, n_labels))
    y = (rng.random((n, n_labels)) < expit(z)).astype(np.int64)
    logits = scale * z
    return Split(y, logits, expit(logits))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20260301)


@pytest.fixture
def multiclass(rng: np.random.Generator) -> Split:
    return draw_multiclass(rng, 300, 4)


@pytest.fixture
def binary(rng: np.random.Generator) -> Split:
    return draw_binary(rng, 300)


@pytest.fixture
def multilabel(rng: np.random.Generator) -> Split:
    return draw_multilabel(rng, 300, 3)


class Draw:
    """The split generators, handed to tests through the ``draw`` fixture."""

    multiclass = staticmethod(draw_multiclass)
    binary = staticmethod(draw_binary)
    multilabel = staticmethod(draw_multilabel)


@pytest.fixture
def draw() -> type[Draw]:
    return Draw
