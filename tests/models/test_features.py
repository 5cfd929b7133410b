"""FeatureExtractor and FeatureSet: frozen, deterministic, split-aligned embeddings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from deepecgkit.datasets import ECGDataModule
from deepecgkit.models import FeatureExtractor, FeatureSet, ResNet1D, SimpleCNN


def _write_checkpoint(path: Path, model: torch.nn.Module, name: str) -> None:
    torch.save(
        {
            "format_version": 1,
            "model_name": name,
            "model_kwargs": {
                "input_channels": model.input_channels,
                "output_size": model.output_size,
            },
            "state_dict": model.state_dict(),
            "train_config": {},
            "epoch": 1,
            "best_val_loss": 0.5,
        },
        path,
    )


def test_extract_is_frozen_deterministic_and_aligned(af_module: ECGDataModule) -> None:
    torch.manual_seed(0)
    model = SimpleCNN(input_channels=1, output_size=1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    extractor = FeatureExtractor(model, batch_size=7, device="cpu")
    assert not model.training
    assert not any(p.requires_grad for p in model.parameters())
    first = extractor.extract(af_module, split="test")
    second = extractor.extract(af_module, split="test")
    assert isinstance(first, FeatureSet) and first.model_name == "simple-cnn"
    assert first.features.dtype == np.float32 and first.features.shape == (len(first), 64)
    np.testing.assert_array_equal(first.features, second.features)
    indices = af_module.split_indices("test")
    np.testing.assert_array_equal(first.labels, af_module.dataset.labels[indices])
    np.testing.assert_array_equal(first.groups, af_module.dataset.groups[indices])
    assert (first.split, first.dataset) == ("test", "synthetic-af")
    # embedding in one batch gives the same numbers as the split loader
    direct = extractor.extract_array(af_module.dataset.signals[indices])
    np.testing.assert_allclose(direct, first.features, rtol=1e-5, atol=1e-6)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_feature_set_acts_as_an_array() -> None:
    features = FeatureSet(np.arange(6, dtype=np.float32).reshape(3, 2))
    assert len(features) == 3 and features.feature_dim == 2
    np.testing.assert_array_equal(np.asarray(features), features.features)
    assert np.asarray(features, dtype=np.float64).dtype == np.float64


def test_from_checkpoint_round_trip(tmp_path: Path, af_module: ECGDataModule) -> None:
    torch.manual_seed(1)
    model = ResNet1D(input_channels=1, output_size=2)
    path = tmp_path / "checkpoint.pt"
    _write_checkpoint(path, model, "resnet1d")
    extractor = FeatureExtractor.from_checkpoint(path, input_channels=1, device="cpu")
    assert extractor.model_name == "resnet1d"
    x = af_module.dataset.signals[:4]
    np.testing.assert_allclose(
        extractor.extract_array(x),
        FeatureExtractor(model, device="cpu").extract_array(x),
        rtol=1e-6,
    )


def test_from_checkpoint_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.pt"
    with pytest.raises(FileNotFoundError, match=r"nowhere\.pt"):
        FeatureExtractor.from_checkpoint(missing)
    path = tmp_path / "twelve.pt"
    _write_checkpoint(path, SimpleCNN(input_channels=12, output_size=5), "simple-cnn")
    with pytest.raises(ValueError, match=r"12 input channel\(s\).*input_channels=1"):
        FeatureExtractor.from_checkpoint(path, input_channels=1)
    with pytest.raises(ValueError, match=r"twelve.pt does not fit model 'resnet1d'"):
        FeatureExtractor.from_checkpoint(path, model_name="resnet1d")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        FeatureExtractor.from_checkpoint(garbage)


def test_models_without_an_embedding_are_refused() -> None:
    from deepecgkit.models import FeatureBaseline

    with pytest.raises(ValueError, match="no extract_features"):
        FeatureExtractor(FeatureBaseline())  # type: ignore[arg-type]


def test_embedding_threads_are_set_for_the_loop_and_restored(af_module: ECGDataModule) -> None:
    """One intra-op thread by default while embedding; torch's own setting afterwards.

    The embeddings do not depend on the thread count, so the default can be
    the cheap one.
    """
    torch.manual_seed(0)
    model = SimpleCNN(input_channels=1, output_size=1)
    seen: list[int] = []
    hook = model.encoder.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        single = FeatureExtractor(model, device="cpu").extract(af_module, split="test")
        assert set(seen) == {1} and torch.get_num_threads() == 2
        seen.clear()
        kept = FeatureExtractor(model, device="cpu", num_threads=None)
        two = kept.extract(af_module, split="test")
        assert set(seen) == {2} and torch.get_num_threads() == 2
    finally:
        hook.remove()
        torch.set_num_threads(previous)
    np.testing.assert_array_equal(single.features, two.features)


@pytest.mark.parametrize("threads", [0, -1])
def test_a_thread_count_below_one_is_refused(threads: int) -> None:
    with pytest.raises(ValueError, match="num_threads must be at least 1"):
        FeatureExtractor(SimpleCNN(input_channels=1, output_size=1), num_threads=threads)
