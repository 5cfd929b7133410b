"""ECGEvaluator: input resolution, torch models, bootstrap, reports and cross-validation."""

from __future__ import annotations

import logging
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, softmax
from sklearn import metrics as skm
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GroupKFold, KFold

from deepecgkit.evaluation import (
    CALIBRATION_ROW_ORDER,
    ECGEvaluator,
    calculate_classification_metrics,
    calibration_report,
)
from deepecgkit.evaluation._bootstrap import (
    bootstrap_metric_values,
    draw_group_weight_chunks,
    group_positions,
)

SINGLE = ["accuracy", "balanced_accuracy", "precision", "recall", "f1", "mcc", "auc"]
MULTI = ["accuracy", "label_accuracy", "exact_match_accuracy", "precision", "recall", "f1", "auc"]
REGRESSION = ["mse", "mae", "r2", "rmse"]
N_RESAMPLES = 40

# --- construction -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"metrics": ["accuracy", "kappa", "brier"]},
            "unknown metric\\(s\\) \\['kappa', 'brier'\\]",
        ),
        ({"task_type": "ranking"}, "task_type must be one of"),
        ({"average": "samples"}, "average must be one of"),
        ({"calibration_bins": 0}, "n_bins"),
    ],
)
def test_constructor_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ECGEvaluator(**kwargs)


def test_constructing_does_not_need_torch_device():
    evaluator = ECGEvaluator(device="cuda:7")  # resolved lazily, only when a torch model runs
    assert evaluator.device == "cuda:7" and evaluator.y_true is None


def test_importing_the_package_loads_neither_torch_nor_matplotlib():
    code = (
        "import sys, deepecgkit.evaluation as e; e.ECGEvaluator(); "
        "print('torch' in sys.modules, 'matplotlib' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.split() == ["False", "False"]


# --- input resolution --------------------------------------------------------------------


def test_input_table(multiclass, binary):
    evaluator = ECGEvaluator(metrics=["accuracy", "auc"])
    y, prob = multiclass.y, multiclass.prob
    expected = calculate_classification_metrics(y, prob, metrics=["accuracy", "auc"])
    assert evaluator.evaluate(prob, y) == expected
    assert evaluator.evaluate(prob, (None, y)) == expected
    assert evaluator.evaluate(prob, (None, y, prob)) == expected
    assert evaluator.evaluate(None, (prob, y)) == expected
    assert evaluator.evaluate(None, (y, prob, prob)) == expected
    np.testing.assert_array_equal(evaluator.y_true, y)

    p = binary.prob[:, 1]
    labels = (p > 0.5).astype(int)
    got = evaluator.evaluate(None, (binary.y, labels, p))
    assert got["auc"] == pytest.approx(skm.roc_auc_score(binary.y, p))
    assert got["accuracy"] == pytest.approx(skm.accuracy_score(binary.y, labels))
    np.testing.assert_array_equal(evaluator.y_scores, p)
    with pytest.raises(ValueError, match="y_scores required for AUC"):
        evaluator.evaluate(labels, binary.y)


def test_input_errors(multiclass):
    evaluator = ECGEvaluator(metrics=["accuracy"])
    with pytest.raises(ValueError, match="2 or 3 entries"):
        evaluator.evaluate(None, (multiclass.y,))
    with pytest.raises(ValueError, match="tuple"):
        evaluator.evaluate(None, multiclass.y)
    with pytest.raises(ValueError, match="targets are needed"):
        evaluator.evaluate(multiclass.prob, None)
    with pytest.raises(ValueError, match="targets are needed"):
        evaluator.evaluate(lambda x: x, multiclass.prob)
    with pytest.raises(TypeError, match="callable"):
        evaluator.evaluate([0, 1], multiclass.y)
    with pytest.raises(ValueError, match="has 299 samples"):
        evaluator.evaluate(multiclass.prob[:-1], multiclass.y)


def test_plain_callable_gets_raw_input(multiclass):
    evaluator = ECGEvaluator(metrics=["accuracy", "f1"])
    got = evaluator.evaluate(lambda x: x * 1.0, (multiclass.prob, multiclass.y))
    assert got == calculate_classification_metrics(
        multiclass.y, multiclass.prob, metrics=["accuracy", "f1"]
    )


# --- torch models ------------------------------------------------------------------------


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_torch_module_logits_become_probabilities(torch, rng):
    x = rng.normal(size=(600, 5)).astype(np.float32)  # > PREDICTION_BATCH_SIZE: chunked
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Dropout(0.5))
    model.train()
    with torch.no_grad():
        logits = model[0](torch.from_numpy(x)).numpy().astype(np.float64)
    y = logits.argmax(axis=1)
    evaluator = ECGEvaluator(metrics=["accuracy", "auc"])
    got, predictions = evaluator.evaluate(model, (x, y), return_predictions=True)
    assert model.training  # mode restored
    np.testing.assert_allclose(predictions, softmax(logits, axis=1), atol=1e-6)
    assert got["accuracy"] == 1.0  # eval mode: dropout off


def test_torch_module_returns_to_its_device_and_mode(torch, rng):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device to check the move there and back")
    model = torch.nn.Linear(3, 2).eval()
    x = rng.normal(size=(10, 3)).astype(np.float32)
    ECGEvaluator(metrics=["accuracy"], device="cuda").evaluate(model, (x, rng.integers(0, 2, 10)))
    assert next(model.parameters()).device.type == "cpu" and not model.training


def test_torch_single_logit_and_dataloader(torch, rng):
    from torch.utils.data import DataLoader, TensorDataset

    x = torch.from_numpy(rng.normal(size=(90, 4)).astype(np.float32))
    model = torch.nn.Linear(4, 1)
    with torch.no_grad():
        z = model(x).numpy()[:, 0].astype(np.float64)
    y = torch.from_numpy((z > 0.1).astype(np.int64))
    loader = DataLoader(TensorDataset(x, y), batch_size=32)
    evaluator = ECGEvaluator(metrics=["accuracy", "auc"])
    got, predictions = evaluator.evaluate(model, loader, return_predictions=True)
    np.testing.assert_allclose(predictions[:, 1], expit(z), atol=1e-6)
    assert got["auc"] == pytest.approx(skm.roc_auc_score(y.numpy(), z), abs=1e-6)
    with pytest.raises(ValueError, match="\\(x, y\\) pairs"):
        evaluator.evaluate(model, DataLoader(x, batch_size=32))


def test_torch_outputs_already_probabilities_are_kept(torch, rng):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Softmax(dim=1))
    x = rng.normal(size=(20, 4)).astype(np.float32)
    y = rng.integers(0, 3, 20)
    _, predictions = ECGEvaluator(metrics=["accuracy"]).evaluate(
        model, (x, y), return_predictions=True
    )
    with torch.no_grad():
        np.testing.assert_allclose(predictions, model(torch.from_numpy(x)).numpy(), atol=1e-7)


def test_torch_regression_outputs_are_not_converted(torch, rng):
    model = torch.nn.Linear(3, 1)
    x = rng.normal(size=(50, 3)).astype(np.float32)
    with torch.no_grad():
        raw = model(torch.from_numpy(x)).numpy()[:, 0]
    y = raw + rng.normal(scale=0.1, size=50)
    got = ECGEvaluator(metrics=["mse", "r2"]).evaluate(model, (x, y))
    assert got["mse"] == pytest.approx(skm.mean_squared_error(y, raw), rel=1e-5)


def test_multilabel_torch_outputs_get_sigmoid(torch, rng):
    model = torch.nn.Linear(4, 3)
    x = rng.normal(size=(40, 4)).astype(np.float32)
    y = rng.integers(0, 2, (40, 3))
    _, predictions = ECGEvaluator(metrics=["accuracy"]).evaluate(
        model, (x, y), return_predictions=True
    )
    with torch.no_grad():
        expected = expit(model(torch.from_numpy(x)).numpy().astype(np.float64))
    np.testing.assert_allclose(predictions, expected, atol=1e-6)


# --- bootstrap ---------------------------------------------------------------------------


def _index_matrix(seed: int, n: int, resamples: int = N_RESAMPLES) -> np.ndarray:
    np.random.seed(seed)  # noqa: NPY002 - the specification fixes the legacy generator
    return np.random.choice(n, size=(resamples, n), replace=True)  # noqa: NPY002


def _reference(names, mode, predictions, targets, scores, index):
    """The slow per-resample path: the evaluator's per-name metrics on each resample."""
    evaluator = ECGEvaluator(metrics=names, average=mode)
    rows = []
    for row in index:
        data = (targets[row], predictions[row], scores[row]) if scores is not None else None
        if data is None:
            rows.append(evaluator.evaluate(predictions[row], targets[row]))
        else:
            rows.append(evaluator.evaluate(None, data))
    return {name: np.array([r[name] for r in rows]) for name in names}


def _bootstrap_cases(draw, rng):
    multiclass = draw.multiclass(rng, 30, 3)
    binary = draw.binary(rng, 25)
    multilabel = draw.multilabel(rng, 30, 3)
    tied = np.round(draw.multiclass(rng, 30, 3).prob, 1)
    tied = tied / tied.sum(axis=1, keepdims=True)
    y_tied = rng.integers(0, 3, 30)
    labels = rng.integers(0, 2, 20)
    labels[0] = 2  # one stray class: resamples without it are binary, the others undefined
    y_labels = rng.integers(0, 2, 20)
    y_reg = rng.normal(size=25)
    skewed_scores = rng.random(30)
    skewed = (skewed_scores + rng.normal(scale=0.3, size=30) > 0.2).astype(int)  # mostly positive
    return {
        "binary-majority-positive": (["auc"], "auto", skewed_scores, skewed, skewed_scores),
        "multiclass-macro": (SINGLE, "auto", multiclass.prob, multiclass.y, None),
        "multiclass-micro": (SINGLE, "micro", multiclass.prob, multiclass.y, None),
        "multiclass-weighted": (SINGLE, "weighted", multiclass.prob, multiclass.y, None),
        "binary-matrix": (SINGLE, "auto", binary.prob, binary.y, None),
        "binary-vector-scores": (SINGLE, "auto", binary.prob[:, 1], binary.y, binary.prob[:, 1]),
        "tied-scores": (SINGLE, "auto", tied, y_tied, None),
        "labels-binary-average": (SINGLE[:-1], "binary", labels, y_labels, None),
        "multilabel": (MULTI, "auto", multilabel.prob, multilabel.y, None),
        "multilabel-weighted": (MULTI, "weighted", multilabel.prob, multilabel.y, None),
        "regression": (REGRESSION, "auto", y_reg + rng.normal(size=25), y_reg, None),
    }


CASES = [
    "binary-majority-positive",
    "multiclass-macro",
    "multiclass-micro",
    "multiclass-weighted",
    "binary-matrix",
    "binary-vector-scores",
    "tied-scores",
    "labels-binary-average",
    "multilabel",
    "multilabel-weighted",
    "regression",
]


@pytest.mark.parametrize("case", CASES)
def test_bootstrap_values_equal_per_resample_reference(draw, rng, case, caplog):
    names, average, predictions, targets, scores = _bootstrap_cases(draw, rng)[case]
    evaluator = ECGEvaluator(metrics=names, average=average)
    evaluator.evaluate(predictions, (None, targets, scores) if scores is not None else targets)
    mode = evaluator._mode
    index = _index_matrix(7, targets.shape[0])
    auc_scores = scores if scores is not None else predictions
    fast = bootstrap_metric_values(
        targets,
        predictions,
        auc_scores,
        names=names,
        mode=mode,
        index_chunks=[index[:13], index[13:]],
    )
    with caplog.at_level(logging.ERROR):
        slow = _reference(names, mode, predictions, targets, scores, index)
    for name in names:
        assert np.isfinite(fast[name]).any(), name  # the comparison is not vacuous
        np.testing.assert_allclose(fast[name], slow[name], atol=1e-12, rtol=0, err_msg=name)


def test_bootstrap_evaluate_summarises_the_reference(draw, rng, caplog):
    split = draw.multiclass(rng, 25, 3)
    evaluator = ECGEvaluator(metrics=SINGLE)
    np.random.seed(11)  # noqa: NPY002
    summary = evaluator.bootstrap_evaluate(split.prob, split.y, n_bootstrap=N_RESAMPLES)
    index = _index_matrix(11, 25)
    with caplog.at_level(logging.ERROR):
        slow = _reference(SINGLE, evaluator._mode, split.prob, split.y, None, index)
    for name in SINGLE:
        values = slow[name][~np.isnan(slow[name])]
        assert summary[name]["mean"] == pytest.approx(np.mean(values), abs=1e-12)
        assert summary[name]["std"] == pytest.approx(np.std(values), abs=1e-12)
        assert summary[name]["lower_ci"] == pytest.approx(np.percentile(values, 2.5), abs=1e-12)
        assert summary[name]["upper_ci"] == pytest.approx(np.percentile(values, 97.5), abs=1e-12)
        stats = summary[name]
        assert all(type(stats[k]) is float for k in ("mean", "std", "lower_ci", "upper_ci"))
        assert stats["resampling"] == "samples (assumed independent)"
        assert stats["n_units"] == 25.0


def _group_index(seed: int, positions: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """The resamples of the group bootstrap as explicit sample indices (the slow reference)."""
    np.random.seed(seed)  # noqa: NPY002 - the specification fixes the legacy generator
    drawn = np.random.choice(n_groups, size=(N_RESAMPLES, n_groups), replace=True)  # noqa: NPY002
    members = [np.flatnonzero(positions == g) for g in range(n_groups)]
    return [np.concatenate([members[g] for g in row]) for row in drawn]


@pytest.mark.parametrize("case", CASES)
def test_group_bootstrap_values_equal_per_resample_reference(draw, rng, case, caplog):
    names, average, predictions, targets, scores = _bootstrap_cases(draw, rng)[case]
    n = targets.shape[0]
    # Groups of unequal size given as shuffled strings: "g10" sorts before "g2".
    sizes = rng.integers(1, 5, size=n)
    groups = np.array([f"g{g}" for g in np.repeat(np.arange(n), sizes)[:n]])
    groups = groups[rng.permutation(n)]
    positions, n_groups = group_positions(groups)
    assert (np.unique(groups)[positions] == groups).all()
    evaluator = ECGEvaluator(metrics=names, average=average)
    evaluator.evaluate(predictions, (None, targets, scores) if scores is not None else targets)
    mode = evaluator._mode
    auc_scores = scores if scores is not None else predictions
    np.random.seed(5)  # noqa: NPY002
    chunks = draw_group_weight_chunks(
        positions, n_groups=n_groups, n_bootstrap=N_RESAMPLES, rows=13
    )
    fast = bootstrap_metric_values(
        targets, predictions, auc_scores, names=names, mode=mode, weight_chunks=chunks
    )
    index = _group_index(5, positions, n_groups)
    with caplog.at_level(logging.ERROR):
        slow = _reference(names, mode, predictions, targets, scores, index)
    for name in names:
        assert np.isfinite(fast[name]).any(), name
        np.testing.assert_allclose(fast[name], slow[name], atol=1e-12, rtol=0, err_msg=name)


def test_bootstrap_evaluate_with_groups_says_so(draw, rng):
    split = draw.multiclass(rng, 60, 3)
    groups = np.repeat(np.arange(20), 3)
    evaluator = ECGEvaluator(metrics=["accuracy", "auc"])
    np.random.seed(1)  # noqa: NPY002
    summary = evaluator.bootstrap_evaluate(split.prob, split.y, n_bootstrap=50, groups=groups)
    assert summary["accuracy"]["resampling"] == "groups"
    assert summary["auc"]["n_units"] == 20.0
    # One group per sample (ids sorting in sample order) is the sample bootstrap with the
    # same stream of draws.
    singletons = np.array([f"{i:02d}" for i in range(60)])
    np.random.seed(2)  # noqa: NPY002
    by_group = evaluator.bootstrap_evaluate(split.prob, split.y, n_bootstrap=50, groups=singletons)
    np.random.seed(2)  # noqa: NPY002
    by_sample = evaluator.bootstrap_evaluate(split.prob, split.y, n_bootstrap=50)
    for name in ("accuracy", "auc"):
        for key in ("mean", "std", "lower_ci", "upper_ci"):
            assert by_group[name][key] == pytest.approx(by_sample[name][key], abs=1e-12)
    for bad in (np.arange(59), np.r_[np.arange(59), np.nan], np.array([None] * 60, dtype=object)):
        with pytest.raises(ValueError, match="group"):
            evaluator.bootstrap_evaluate(split.prob, split.y, n_bootstrap=10, groups=bad)


def test_patient_resampling_covers_where_segment_resampling_does_not():
    # 150 simulated test sets of 40 patients x 10 segments. A strong patient effect makes
    # a patient's segments alike, so the segment bootstrap's interval is far too narrow.
    # Monte Carlo SE of a coverage near 0.93 over 150 sets: about 0.02.
    rng = np.random.default_rng(2027)
    n_patients, segments, sets = 40, 10, 150
    evaluator = ECGEvaluator(metrics=["accuracy"])

    def draw_set(n: int) -> tuple[np.ndarray, np.ndarray]:
        y_patient = rng.integers(0, 2, n)
        effect = rng.normal(0.0, 1.5, (n, 1))
        logit = (2 * y_patient[:, None] - 1) * 1.0 + effect + rng.normal(0.0, 0.5, (n, segments))
        return np.repeat(y_patient, segments), (logit > 0).astype(int).ravel()

    y_big, pred_big = draw_set(200_000)
    truth = np.mean(y_big == pred_big)
    groups = np.repeat(np.arange(n_patients), segments)
    covered = {"samples": 0, "groups": 0}
    for s in range(sets):
        y, pred = draw_set(n_patients)
        for key, given in (("samples", None), ("groups", groups)):
            np.random.seed(s)  # noqa: NPY002
            row = evaluator.bootstrap_evaluate(pred, y, n_bootstrap=200, groups=given)["accuracy"]
            covered[key] += row["lower_ci"] <= truth <= row["upper_ci"]
    assert covered["groups"] / sets >= 0.87
    assert covered["samples"] / sets <= 0.75


def test_bootstrap_repeats_under_seed_and_drops_undefined(multiclass):
    evaluator = ECGEvaluator(metrics=SINGLE)
    np.random.seed(3)  # noqa: NPY002
    first = evaluator.bootstrap_evaluate(multiclass.prob, multiclass.y, n_bootstrap=50)
    np.random.seed(3)  # noqa: NPY002
    second = evaluator.bootstrap_evaluate(multiclass.prob, multiclass.y, n_bootstrap=50)
    assert first == second
    third = evaluator.bootstrap_evaluate(multiclass.prob, multiclass.y, n_bootstrap=50)
    assert third != first
    one_class = np.zeros(20, dtype=int)
    prob = np.tile([0.8, 0.2], (20, 1))
    summary = ECGEvaluator(metrics=["accuracy", "auc"]).bootstrap_evaluate(
        prob, one_class, n_bootstrap=10
    )
    assert list(summary) == ["accuracy"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_bootstrap": 0}, "n_bootstrap"),
        ({"n_bootstrap": True}, "n_bootstrap"),
        ({"n_bootstrap": 2.5}, "n_bootstrap"),
        ({"confidence_level": 1.0}, "confidence_level"),
        ({"confidence_level": 0}, "confidence_level"),
    ],
)
def test_bootstrap_rejects_bad_settings(multiclass, kwargs, message):
    with pytest.raises(ValueError, match=message):
        ECGEvaluator().bootstrap_evaluate(multiclass.prob, multiclass.y, **kwargs)


# --- generate_report ---------------------------------------------------------------------


def test_generate_report_with_calibration(tmp_path, draw, rng):
    val = draw.multiclass(rng, 300, 4, scale=2.0)
    test = draw.multiclass(rng, 300, 4, scale=2.0)
    evaluator = ECGEvaluator(calibration_bins=10)
    path = tmp_path / "reports" / "report.csv"
    np.random.seed(0)  # noqa: NPY002
    frame = evaluator.generate_report(
        test.prob, test.y, save_path=str(path), calibration_fit=(val.y, val.logits)
    )
    assert list(frame.columns) == [
        "Metric", "Value", "Std", "95% CI Lower", "95% CI Upper", "Resampling",
        "Resampled units",
    ]  # fmt: skip
    assert set(frame["Resampling"].dropna()) == {"samples (assumed independent)"}
    assert frame["Metric"].tolist() == [
        "accuracy",
        "precision",
        "recall",
        "f1",
        "auc",
        *CALIBRATION_ROW_ORDER,
    ]
    calibration = calibration_report(
        test.y, test.prob, n_bins=10, fit_targets=val.y, fit_logits=val.logits
    )
    values = dict(zip(frame["Metric"], frame["Value"], strict=True))
    for name in CALIBRATION_ROW_ORDER:
        assert values[name] == pytest.approx(calibration[name])
    metric_rows = frame.iloc[:5]
    assert (metric_rows["95% CI Lower"] <= metric_rows["Value"]).all()
    assert frame.iloc[5:]["Std"].isna().all()
    saved = pd.read_csv(path)
    pd.testing.assert_frame_equal(saved, frame, check_dtype=False)
    assert [p.name for p in path.parent.iterdir()] == ["report.csv"]


def test_generate_report_without_fit_or_scores(binary):
    evaluator = ECGEvaluator(metrics=["accuracy", "f1"])
    frame = evaluator.generate_report(binary.prob, binary.y)
    assert "temperature" not in frame["Metric"].tolist()
    assert frame["Metric"].tolist()[-1] == "calibration_bins"
    labels = (binary.prob[:, 1] > 0.5).astype(int)
    hard = evaluator.generate_report(labels, binary.y)
    assert hard["Metric"].tolist() == ["accuracy", "f1"]  # hard labels carry no confidence
    regression = ECGEvaluator(metrics=["mse"]).generate_report(binary.prob[:, 1], binary.prob[:, 0])
    assert regression["Metric"].tolist() == ["mse"]
    with pytest.raises(ValueError, match="calibration_fit"):
        evaluator.generate_report(binary.prob, binary.y, calibration_fit=(binary.y,))


# --- cross-validation --------------------------------------------------------------------


def test_cross_validate_with_groups_matches_manual_loop(rng):
    x = rng.normal(size=(120, 4))
    y = (x[:, 0] + rng.normal(scale=0.5, size=120) > 0).astype(int)
    groups = np.repeat(np.arange(30), 4)
    evaluator = ECGEvaluator(metrics=["accuracy", "auc"])
    got = evaluator.cross_validate(LogisticRegression, (x, y), k_folds=3, groups=groups)
    expected: dict[str, list[float]] = {"accuracy": [], "auc": []}
    for train, test in GroupKFold(n_splits=3).split(x, y, groups):
        assert not set(groups[train]) & set(groups[test])
        proba = LogisticRegression().fit(x[train], y[train]).predict_proba(x[test])
        expected["accuracy"].append(skm.accuracy_score(y[test], proba.argmax(1)))
        expected["auc"].append(skm.roc_auc_score(y[test], proba[:, 1]))
    assert got["accuracy"] == pytest.approx(expected["accuracy"])
    assert got["auc"] == pytest.approx(expected["auc"])


def test_cross_validate_without_groups_uses_seeded_kfold(rng):
    x = rng.normal(size=(60, 2))
    y = x @ np.array([1.0, -2.0]) + rng.normal(scale=0.1, size=60)
    evaluator = ECGEvaluator(metrics=["mse", "r2"])
    got = evaluator.cross_validate(LinearRegression, (x, y), k_folds=4, seed=5)
    expected = []
    for train, test in KFold(4, shuffle=True, random_state=5).split(x):
        pred = LinearRegression().fit(x[train], y[train]).predict(x[test])
        expected.append(skm.mean_squared_error(y[test], pred))
    assert got["mse"] == pytest.approx(expected)
    assert len(got["r2"]) == 4


def test_cross_validate_errors(rng):
    x, y = rng.normal(size=(20, 2)), rng.integers(0, 2, 20)
    evaluator = ECGEvaluator(metrics=["accuracy"])
    with pytest.raises(ValueError, match="\\(X, y\\) tuple"):
        evaluator.cross_validate(LogisticRegression, [x, y])
    with pytest.raises(ValueError, match="groups has 5 samples"):
        evaluator.cross_validate(LogisticRegression, (x, y), groups=np.arange(5))
    with pytest.raises(ValueError):
        evaluator.cross_validate(LogisticRegression, (x, y), k_folds=3, groups=np.zeros(20))

    class Opaque:
        def fit(self, x, y):
            return self

    with pytest.raises(TypeError, match="predict"):
        evaluator.cross_validate(Opaque, (x, y), k_folds=2)


class _TinyNet:
    """Factory for a small torch classifier (defined lazily so torch stays optional)."""

    @staticmethod
    def build(torch):
        class TinyNet(torch.nn.Module):
            def __init__(self, input_size: int = 4, output_size: int = 3) -> None:
                super().__init__()
                self.output_size = output_size
                self.layer = torch.nn.Linear(input_size, output_size)

            def forward(self, x):
                return self.layer(x)

        return TinyNet


def test_cross_validate_trains_a_torch_model(torch, rng):
    pytest.importorskip("deepecgkit.training")
    tiny = _TinyNet.build(torch)
    x = rng.normal(size=(90, 4)).astype(np.float32)
    y = x[:, :3].argmax(axis=1)
    groups = np.repeat(np.arange(30), 3)
    evaluator = ECGEvaluator(metrics=["accuracy", "f1", "auc"], device="cpu")
    got = evaluator.cross_validate(
        tiny,
        (torch.from_numpy(x), torch.from_numpy(y)),
        k_folds=3,
        groups=groups,
        epochs=3,
        batch_size=16,
        train_config={"learning_rate": 0.05},
        input_size=4,
        output_size=3,
    )
    assert set(got) == {"accuracy", "f1", "auc"}
    assert all(len(values) == 3 for values in got.values())
    assert np.mean(got["accuracy"]) > 0.5  # learnable with three epochs at this rate
    assert all(math.isfinite(v) for values in got.values() for v in values)


def test_cross_validate_torch_fold_too_small_for_inner_split(torch, rng):
    tiny = _TinyNet.build(torch)
    x = rng.normal(size=(8, 4)).astype(np.float32)
    y = rng.integers(0, 3, 8)
    groups = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    with pytest.raises(ValueError, match="too small to set a validation part aside"):
        ECGEvaluator(metrics=["accuracy"]).cross_validate(tiny, (x, y), k_folds=2, groups=groups)
