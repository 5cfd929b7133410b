"""The registered convolutional classifiers: shapes, sizes, seeding, input checks."""

from __future__ import annotations

import pytest
import torch

from deepecgkit.models import MIN_INPUT_SAMPLES, ResNet1D, SEResNet1D, SimpleCNN

NETWORKS = [SimpleCNN, ResNet1D, SEResNet1D]
#: Parameter counts of the specification's table (1 lead, 2 outputs).
EXPECTED_PARAMETERS = {SimpleCNN: 13_000, ResNet1D: 32_000, SEResNet1D: 34_000}
FEATURE_DIM = {SimpleCNN: 64, ResNet1D: 48, SEResNet1D: 48}


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize(("leads", "outputs", "length"), [(1, 1, 1000), (12, 5, 64), (2, 4, 333)])
def test_forward_and_features_shapes(network: type, leads: int, outputs: int, length: int) -> None:
    model = network(input_channels=leads, output_size=outputs).eval()
    x = torch.randn(3, leads, length)
    assert model(x).shape == (3, outputs)
    features = model.extract_features(x)
    assert features.shape == (3, FEATURE_DIM[network]) == (3, model.feature_dim)
    # the head consumes exactly the embedding (dropout is off in eval mode)
    torch.testing.assert_close(model.head(features), model(x))


@pytest.mark.parametrize("network", NETWORKS)
def test_parameter_counts_match_the_specification(network: type) -> None:
    count = sum(p.numel() for p in network(input_channels=1, output_size=2).parameters())
    assert count == pytest.approx(EXPECTED_PARAMETERS[network], rel=0.05)


@pytest.mark.parametrize("network", NETWORKS)
def test_the_seed_alone_fixes_the_initialisation(network: type) -> None:
    def build(seed: int) -> dict[str, torch.Tensor]:
        torch.manual_seed(seed)
        return network(input_channels=1, output_size=2).state_dict()

    first, again, other = build(0), build(0), build(1)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert any(not torch.equal(first[k], other[k]) for k in first)


@pytest.mark.parametrize("network", NETWORKS)
def test_bad_inputs_are_named(network: type) -> None:
    model = network(input_channels=2, output_size=2)
    with pytest.raises(ValueError, match=r"shape \(batch, 2, samples\)"):
        model(torch.randn(4, 1, 200))
    with pytest.raises(ValueError, match=f"at least {MIN_INPUT_SAMPLES} samples"):
        model(torch.randn(4, 2, MIN_INPUT_SAMPLES - 1))
    with pytest.raises(ValueError, match="output_size"):
        network(output_size=0)
    with pytest.raises(ValueError, match="dropout"):
        network(dropout=1.0)


def test_registry_names_are_attached() -> None:
    assert SimpleCNN._registry_name == "simple-cnn"
    assert ResNet1D._registry_name == "resnet1d"
    assert SEResNet1D._registry_name == "se-resnet"
