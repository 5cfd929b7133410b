"""Linear probes, transfer matrices and 2-D embeddings (evaluation.md section 7)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from deepecgkit.datasets import ECGDataModule, SyntheticAFDataset, SyntheticPTBXLDataset
from deepecgkit.evaluation import (
    PROBE_METRICS,
    RANDOM_INIT,
    ProbeResult,
    TransferMatrix,
    build_probe,
    cross_dataset_transfer,
    embed_2d,
    linear_probe,
    probe_encoder,
    protocol_data_module,
)
from deepecgkit.models import FeatureExtractor, FeatureSet, SimpleCNN
from deepecgkit.training import ECGTrainer

RNG = np.random.default_rng(0)


def _blobs(
    n: int, d: int = 4, shift: float = 2.0, classes: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    y = np.arange(n) % classes
    x = RNG.normal(size=(n, d))
    x[:, 0] += shift * y
    return x, y


# --- linear_probe ------------------------------------------------------------------------------


def test_probe_never_sees_the_test_split_while_fitting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leak detector: every fit call of the scaler and the regression gets training rows only."""
    x_train, y_train = _blobs(60)
    x_test, y_test = _blobs(40)
    x_test[:, 1] = 1e6 + np.arange(40)  # a marker no training row carries
    seen: list[np.ndarray] = []

    def spy(cls: type):
        original = cls.fit

        def fit(self, X, y=None, *args, **kwargs):
            seen.append(np.asarray(X))
            return original(self, X, y, *args, **kwargs)

        monkeypatch.setattr(cls, "fit", fit)

    spy(StandardScaler)
    spy(LogisticRegression)
    result = linear_probe((x_train, y_train), (x_test, y_test), metric="accuracy")
    assert len(seen) == 2 and all(len(x) == 60 for x in seen)
    np.testing.assert_array_equal(seen[0], x_train)  # the scaler: raw training rows
    assert all(np.abs(x).max() < 1e5 for x in seen)  # the marker never reached a fit
    assert result.n_train == 60 and result.n_test == 40
    # and the score equals an independent train-only computation
    scaler = StandardScaler().fit(x_train)
    reference = LogisticRegression(C=1.0, max_iter=1000, random_state=42).fit(
        scaler.transform(x_train), y_train
    )
    expected = np.mean(reference.predict(scaler.transform(x_test)) == y_test)
    assert result.score == pytest.approx(expected)


def test_binary_metrics_match_scikit_learn() -> None:
    x_train, y_train = _blobs(80)
    x_test, y_test = _blobs(50)
    result = linear_probe((x_train, y_train), (x_test, y_test), source="a", target="b")
    pipeline = build_probe().fit(x_train, y_train)
    prob = pipeline.predict_proba(x_test)
    assert result.task == "binary" and result.feature_dim == 4
    assert result.score == pytest.approx(roc_auc_score(y_test, prob[:, 1]))
    assert set(result.metrics) == set(PROBE_METRICS) and result.note is None
    assert result.metrics["accuracy"] == pytest.approx(np.mean(prob.argmax(1) == y_test))


def test_multiclass_auroc_averages_the_defined_classes() -> None:
    x_train, y_train = _blobs(90, classes=3)
    x_test, y_test = _blobs(60, classes=3)
    full = linear_probe((x_train, y_train), (x_test, y_test))
    prob = build_probe().fit(x_train, y_train).predict_proba(x_test)
    expected = roc_auc_score(y_test, prob, multi_class="ovr", average="macro")
    assert full.task == "multiclass" and full.score == pytest.approx(expected)
    # drop class 2 from the held-out split: averaged over the two classes left
    keep = y_test < 2
    partial = linear_probe((x_train, y_train), (x_test[keep], y_test[keep]))
    per_class = [roc_auc_score(y_test[keep] == k, prob[keep, k]) for k in (0, 1)]
    assert partial.score == pytest.approx(np.mean(per_class))
    assert partial.note == "held-out split holds 2 of 3 classes"


def test_classes_unseen_in_training_get_zero_probability() -> None:
    x_train, y_train = _blobs(40)  # classes 0 and 1
    x_test = RNG.normal(size=(9, 4))
    y_test = np.array([0, 1, 2] * 3)
    result = linear_probe((x_train, y_train), (x_test, y_test), metric="f1_macro")
    assert result.task == "multiclass" and math.isfinite(result.score)


def test_multilabel_probe() -> None:
    x_train = RNG.normal(size=(80, 5))
    x_test = RNG.normal(size=(40, 5))
    y_train = (x_train[:, :3] > 0).astype(int)
    y_test = (x_test[:, :3] > 0).astype(int)
    result = linear_probe(FeatureSet(x_train, y_train, model_name="enc"), (x_test, y_test))
    assert result.task == "multilabel" and result.model_name == "enc"
    assert result.score > 0.9 and math.isnan(result.metrics["balanced_accuracy"])
    with pytest.raises(ValueError, match="multi-label train labels have 3 columns"):
        linear_probe((x_train, y_train), (x_test, y_test[:, :2]))


def test_single_class_targets_give_nan_and_a_note_not_an_exception() -> None:
    x_train, _ = _blobs(30)
    unfittable = linear_probe((x_train, np.zeros(30)), _blobs(10))
    assert all(math.isnan(v) for v in unfittable.metrics.values())
    assert unfittable.note.startswith("probe could not be fitted:")
    x_test, _ = _blobs(10)
    one_class = linear_probe(_blobs(30), (x_test, np.ones(10)))
    assert math.isnan(one_class.score)
    assert one_class.note == (
        "auroc_macro is undefined for this held-out split; held-out split holds 1 of 2 classes"
    )
    assert one_class.metrics["accuracy"] == pytest.approx(np.mean(one_class.metrics["accuracy"]))


def test_non_convergence_is_noted() -> None:
    x, y = _blobs(60, d=6, shift=0.3)
    result = linear_probe((x, y), (x, y), max_iter=1)
    assert "probe did not converge within 1 iterations" in result.note


@pytest.mark.parametrize(
    ("train", "test", "kwargs", "pattern"),
    [
        (
            (np.zeros((4, 2)), np.zeros(4)),
            (np.zeros((4, 2)), np.zeros(4)),
            {"metric": "mcc"},
            "metric",
        ),
        ((np.zeros((4, 2)), None), (np.zeros((4, 2)), np.zeros(4)), {}, "no labels"),
        ((np.zeros(4), np.zeros(4)), (np.zeros((4, 2)), np.zeros(4)), {}, "2-D"),
        (
            (np.zeros((4, 2)), np.zeros(3)),
            (np.zeros((4, 2)), np.zeros(4)),
            {},
            "4 feature rows but 3",
        ),
        ((np.full((4, 2), np.nan), np.zeros(4)), (np.zeros((4, 2)), np.zeros(4)), {}, "non-finite"),
        ((np.zeros((4, 2)), np.zeros(4)), (np.zeros((4, 3)), np.zeros(4)), {}, "one encoder"),
        ((np.zeros((0, 2)), np.zeros(0)), (np.zeros((4, 2)), np.zeros(4)), {}, "no samples"),
    ],
)
def test_bad_probe_inputs(train, test, kwargs, pattern) -> None:
    with pytest.raises(ValueError, match=pattern):
        linear_probe(train, test, **kwargs)


def test_probe_result_serialises_in_order() -> None:
    result = ProbeResult(metrics=dict.fromkeys(PROBE_METRICS, float("nan")), source="x", target="y")
    payload = result.to_dict()
    assert list(payload) == [
        "source",
        "target",
        "model_name",
        "metric",
        "score",
        "task",
        "n_train",
        "n_test",
        "feature_dim",
        "metrics",
        "note",
    ]
    assert "NaN" in json.dumps(payload) and math.isnan(result.score)


def test_build_probe_layout() -> None:
    probe = build_probe(c=0.5, max_iter=7, random_state=3)
    assert [name for name, _ in probe.steps] == ["scaler", "probe"]
    assert (probe["probe"].C, probe["probe"].max_iter, probe["probe"].random_state) == (0.5, 7, 3)
    assert type(build_probe(multilabel=True)["probe"]).__name__ == "OneVsRestClassifier"


# --- encoders and transfer matrices -----------------------------------------------------------


@pytest.fixture(scope="module")
def modules() -> dict[str, ECGDataModule]:
    af = ECGDataModule(
        dataset_class=SyntheticAFDataset,
        val_split=0.2,
        test_split=0.3,
        seed=2,
        dataset_kwargs={"n_patients": 50},
    )
    ptb = ECGDataModule(
        dataset_class=SyntheticPTBXLDataset,
        val_split=0.2,
        test_split=0.3,
        seed=2,
        dataset_kwargs={"n_patients": 50, "leads": ["II"]},
    )
    return {"synthetic-af": af, "synthetic-ptbxl": ptb}


@pytest.fixture(scope="module")
def af_checkpoint(tmp_path_factory: pytest.TempPathFactory, modules) -> Path:
    torch.manual_seed(0)
    trainer = ECGTrainer(SimpleCNN(1, 1), {"learning_rate": 3e-3}, device="cpu")
    out = tmp_path_factory.mktemp("encoder")
    trainer.fit(modules["synthetic-af"], epochs=5, checkpoint_dir=out, progress_bar=False)
    return out / "checkpoint.pt"


def test_probe_encoder_uses_the_frozen_embeddings(modules, af_checkpoint: Path) -> None:
    extractor = FeatureExtractor.from_checkpoint(af_checkpoint, device="cpu")
    module = modules["synthetic-af"]
    result = probe_encoder(extractor, module, source="synthetic-af", target="synthetic-af")
    train = extractor.extract(module, "train")
    test = extractor.extract(module, "test")
    assert result.score == linear_probe(train, test).score
    assert result.model_name == "simple-cnn" and result.feature_dim == 64


def test_cross_dataset_transfer(modules, af_checkpoint: Path, tmp_path: Path) -> None:
    def transfer(global_seed: int) -> TransferMatrix:
        torch.manual_seed(global_seed)  # the random-init row depends on `seed` only
        return cross_dataset_transfer(
            {"synthetic-af": af_checkpoint},
            "simple-cnn",
            data_modules=modules,
            device="cpu",
            keep_embeddings="diagonal",
        )

    matrix = transfer(1)
    np.testing.assert_array_equal(matrix.values, transfer(2).values)
    assert matrix.sources == [RANDOM_INIT, "synthetic-af"]
    assert matrix.targets == ["synthetic-af", "synthetic-ptbxl"]
    assert matrix.values.shape == (2, 2) and np.isfinite(matrix.values).all()
    cell = matrix.result_for("synthetic-af", "synthetic-af")
    assert cell.score == matrix.values[1, 0] and cell.source == "synthetic-af"
    # the trained encoder is no worse than the untrained floor in its own domain
    assert matrix.values[1, 0] >= matrix.values[0, 0] - 0.02
    assert set(matrix.embeddings) == {
        f"{RANDOM_INIT}->synthetic-af",
        f"{RANDOM_INIT}->synthetic-ptbxl",
        "synthetic-af->synthetic-af",
    }
    assert matrix.embedding_for("synthetic-af", "synthetic-ptbxl") is None
    assert matrix.class_names["synthetic-ptbxl"] == ["NORM", "MI", "STTC", "CD", "HYP"]
    assert matrix.protocol["dataset_kwargs"] == {"synthetic-ptbxl": {"leads": ["II"]}}

    frame = matrix.to_frame()
    assert list(frame.index) == matrix.sources and list(frame.columns) == matrix.targets
    matrix.save(tmp_path / "m.csv")
    assert (tmp_path / "m.csv").read_text().startswith(",synthetic-af,synthetic-ptbxl\n")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "m.csv", index_col=0), frame)
    matrix.save(tmp_path / "deep" / "m.json")
    loaded = TransferMatrix.load(tmp_path / "deep" / "m.json")
    np.testing.assert_array_equal(loaded.values, matrix.values)
    assert isinstance(loaded.result_for("synthetic-af", "synthetic-ptbxl"), ProbeResult)
    assert json.dumps(loaded.to_dict()) == json.dumps(matrix.to_dict())  # NaN-aware equality
    with pytest.raises(ValueError, match=r"\.json or \.csv"):
        matrix.save(tmp_path / "m.parquet")
    with pytest.raises(ValueError, match=r"only the \.json form"):
        TransferMatrix.load(tmp_path / "m.csv")


def test_probes_fit_on_one_blas_thread_and_the_setting_is_restored(
    modules, af_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cells are probed with PROBE_BLAS_THREADS BLAS threads; the caller's count returns.

    The scores are those of a probe on two BLAS threads.
    """
    from threadpoolctl import threadpool_info, threadpool_limits

    from deepecgkit.evaluation import transfer as transfer_module
    from deepecgkit.evaluation.constants import PROBE_BLAS_THREADS

    def blas_threads() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    seen: list[set[int]] = []
    real_probe = transfer_module.linear_probe

    def recording_probe(*args, **kwargs):
        seen.append(blas_threads())
        return real_probe(*args, **kwargs)

    monkeypatch.setattr(transfer_module, "linear_probe", recording_probe)
    with threadpool_limits(limits=2, user_api="blas"):
        matrix = cross_dataset_transfer(
            {"synthetic-af": af_checkpoint}, "simple-cnn", data_modules=modules, device="cpu"
        )
        assert blas_threads() == {2}
        cell = matrix.result_for("synthetic-af", "synthetic-af")
        train = FeatureExtractor.from_checkpoint(af_checkpoint, device="cpu").extract(
            modules["synthetic-af"], split="train"
        )
        test = FeatureExtractor.from_checkpoint(af_checkpoint, device="cpu").extract(
            modules["synthetic-af"], split="test"
        )
        two_threads = real_probe(train, test, source="synthetic-af", target="synthetic-af")
    assert seen and all(threads == {PROBE_BLAS_THREADS} for threads in seen)
    assert cell.to_dict() == two_threads.to_dict() | {"model_name": cell.model_name}


def test_a_cell_the_encoder_cannot_read_is_nan_with_a_note(tmp_path: Path) -> None:
    twelve = ECGDataModule(
        dataset_class=SyntheticPTBXLDataset, seed=0, dataset_kwargs={"n_patients": 20}
    )
    matrix = cross_dataset_transfer({}, "simple-cnn", data_modules={"ptb12": twelve}, device="cpu")
    cell = matrix.result_for(RANDOM_INIT, "ptb12")
    assert math.isnan(matrix.values[0, 0]) and "could not embed ptb12" in cell.note


def test_transfer_argument_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="metric"):
        cross_dataset_transfer({}, "simple-cnn", metric="mcc")
    with pytest.raises(ValueError, match="keep_embeddings"):
        cross_dataset_transfer({}, "simple-cnn", keep_embeddings="some")
    with pytest.raises(ValueError, match="no encoders"):
        cross_dataset_transfer({}, "simple-cnn", include_random_init=False)
    with pytest.raises(ValueError, match="no probe targets"):
        cross_dataset_transfer({}, "simple-cnn", targets=[])
    with pytest.raises(ValueError, match="unknown dataset 'imagenet'"):
        cross_dataset_transfer({}, "simple-cnn", targets=["imagenet"])
    with pytest.raises(FileNotFoundError, match=r"missing\.pt"):
        cross_dataset_transfer(
            {"x": tmp_path / "missing.pt"}, "simple-cnn", targets=["synthetic-af"]
        )


def test_protocol_module_pins_lead_ii_and_the_rate() -> None:
    module = protocol_data_module("synthetic-ptbxl", seed=1)
    assert module.dataset_kwargs["leads"] == ["II"] and module.sampling_rate_arg == 100
    module.dataset_kwargs["n_patients"] = 10
    assert module.input_channels == 1 and module.dataset.leads == ["II"]
    assert protocol_data_module("ptbxl").dataset_kwargs["leads"] == ["II"]
    with pytest.raises(ValueError, match="unknown dataset"):
        protocol_data_module("mnist")


# --- embed_2d ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["pca", "tsne"])
def test_embed_2d_shapes(method: str) -> None:
    x, _ = _blobs(40, d=60)
    out = embed_2d(FeatureSet(x.astype(np.float32)), method=method, pca_components=10)
    assert out.shape == (40, 2) and np.isfinite(out).all()


def test_embed_2d_pca_equals_scikit_learn_on_standardised_features() -> None:
    from sklearn.decomposition import PCA

    x, _ = _blobs(30, d=5)
    expected = PCA(n_components=2, random_state=42).fit_transform(StandardScaler().fit_transform(x))
    np.testing.assert_allclose(embed_2d(x, method="pca"), expected)


def test_embed_2d_accepts_a_tiny_sample_for_tsne() -> None:
    assert embed_2d(RNG.normal(size=(6, 3))).shape == (6, 2)


@pytest.mark.parametrize(
    ("features", "kwargs", "pattern"),
    [
        (np.zeros((10, 2)), {"method": "umap"}, "method"),
        (np.zeros(10), {}, "2-D"),
        (np.zeros((4, 2)), {}, "at least 5 samples"),
    ],
)
def test_embed_2d_errors(features, kwargs, pattern) -> None:
    with pytest.raises(ValueError, match=pattern):
        embed_2d(features, **kwargs)
