"""Registered ECG classifiers and frozen encoders.

Importing this package registers every model (``simple-cnn``, ``resnet1d``,
``se-resnet``, ``logreg-features``). It imports torch; the analysis package
must never import it.
"""

from deepecgkit.models.base import MIN_INPUT_SAMPLES, ECGClassifier
from deepecgkit.models.baseline import FeatureBaseline, ecg_summary_features
from deepecgkit.models.cnn import SimpleCNN
from deepecgkit.models.features import FeatureExtractor, FeatureSet
from deepecgkit.models.resnet import ResNet1D, SEResNet1D

__all__ = [
    "MIN_INPUT_SAMPLES",
    "ECGClassifier",
    "FeatureBaseline",
    "FeatureExtractor",
    "FeatureSet",
    "ResNet1D",
    "SEResNet1D",
    "SimpleCNN",
    "ecg_summary_features",
]
