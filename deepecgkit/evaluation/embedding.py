"""Two-dimensional embeddings of ECG representations for scatter plots (t-SNE, PCA)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE
from sklearn.preprocessing import StandardScaler

from deepecgkit.defaults import DEFAULT_RANDOM_STATE
from deepecgkit.evaluation.constants import (
    DEFAULT_PCA_COMPONENTS,
    DEFAULT_PERPLEXITY,
    EMBEDDING_METHODS,
    MIN_EMBEDDING_SAMPLES,
    PERPLEXITY_SAMPLE_DIVISOR,
)

__all__ = ["embed_2d"]


def embed_2d(
    features: Any,
    *,
    method: str = "tsne",
    perplexity: float = DEFAULT_PERPLEXITY,
    pca_components: int | None = DEFAULT_PCA_COMPONENTS,
    random_state: int = DEFAULT_RANDOM_STATE,
) -> np.ndarray:
    """Reduce embeddings to two dimensions for a scatter plot.

    Features are standardised first, so that no dimension with a large range
    dominates the distances. ``"pca"`` projects on the first two principal
    components; ``"tsne"`` first reduces to ``pca_components`` dimensions
    with PCA when that helps (standard practice, and faster), then runs
    t-SNE (van der Maaten & Hinton 2008) with PCA initialisation and the
    perplexity clamped to ``(n - 1) / 3`` so small samples are accepted.

    Args:
        features: ``(n, d)`` array or a FeatureSet.
        method: ``"tsne"`` or ``"pca"``.
        perplexity: t-SNE perplexity before clamping.
        pca_components: PCA width before t-SNE (None or 0: none).
        random_state: seed of PCA and t-SNE.

    Returns:
        float ``(n, 2)``.

    Raises:
        ValueError: unknown method, input that is not 2-D, or fewer than
            ``MIN_EMBEDDING_SAMPLES`` rows.
    """
    if method not in EMBEDDING_METHODS:
        raise ValueError(f"method must be one of {', '.join(EMBEDDING_METHODS)}, got {method!r}")
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D (n, d), got shape {x.shape}")
    n, d = x.shape
    if n < MIN_EMBEDDING_SAMPLES:
        raise ValueError(f"embed_2d needs at least {MIN_EMBEDDING_SAMPLES} samples, got {n}")
    if not np.isfinite(x).all():
        raise ValueError(f"features hold {int((~np.isfinite(x)).sum())} non-finite values")
    scaled = StandardScaler().fit_transform(x)
    if method == "pca":
        return PCA(n_components=2, random_state=random_state).fit_transform(scaled)
    width = min(pca_components or 0, n, d)
    if pca_components and d > width > 2:
        scaled = PCA(n_components=width, random_state=random_state).fit_transform(scaled)
    clamped = min(perplexity, max(1.0, (n - 1) / PERPLEXITY_SAMPLE_DIVISOR))
    tsne = TSNE(n_components=2, perplexity=clamped, random_state=random_state, init="pca")
    return tsne.fit_transform(scaled)
