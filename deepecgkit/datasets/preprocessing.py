"""The preprocessing every dataset applies, identically.

A model trained on one corpus is probed on another, so every dataset must
hand out windows of the same kind: selected leads, one sampling rate,
fixed-length non-overlapping windows, each lead of each window z-scored.
Models therefore see unitless normalised signals whatever the amplifier
gain of the source. Keeping this in one module is what makes the in-memory
synthetic windows and the same data read back from disk bit-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.signal import resample_poly

__all__ = [
    "MAX_RESAMPLE_DENOMINATOR",
    "STD_FLOOR",
    "Windows",
    "resample_ratio",
    "resample_signals",
    "select_leads",
    "window_signals",
    "zscore",
]

#: Denominator limit of the up/down resampling ratio (``Fraction.limit_denominator``).
MAX_RESAMPLE_DENOMINATOR = 1000
#: Floor on a lead's standard deviation, so a flat lead becomes zeros, not NaN.
STD_FLOOR = 1e-6


@dataclass
class Windows:
    """Windows cut from a batch of equal-length records.

    Attributes:
        signals: float32 ``(n_windows, L, W)``, z-scored per lead.
        record_index: ``(n_windows,)`` index of the source record in the batch.
        start_s: ``(n_windows,)`` window start within its record (s).
        end_s: ``(n_windows,)`` window end (s); shorter than a window for a
            zero-padded short record.
    """

    signals: np.ndarray
    record_index: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray


def select_leads(available: list[str], requested: list[str] | None, *, source: str) -> list[int]:
    """Indices of ``requested`` lead names in ``available`` (all when None).

    Raises:
        ValueError: a requested lead is absent; the message names it, the
            available ones and ``source``. (Callers re-raise it as their own
            format error type.)
    """
    if requested is None:
        return list(range(len(available)))
    missing = [lead for lead in requested if lead not in available]
    if missing:
        raise ValueError(
            f"{source}: lead(s) {', '.join(map(str, missing))} not found; "
            f"available leads: {', '.join(available)}"
        )
    return [available.index(lead) for lead in requested]


def resample_ratio(native_rate: float, target_rate: float) -> tuple[int, int]:
    """``(up, down)`` of ``target / native`` reduced by ``limit_denominator(1000)``."""
    ratio = Fraction(target_rate / native_rate).limit_denominator(MAX_RESAMPLE_DENOMINATOR)
    return ratio.numerator, ratio.denominator


def resample_signals(x: np.ndarray, *, native_rate: float, target_rate: float) -> np.ndarray:
    """Polyphase resampling along the last axis (``scipy.signal.resample_poly``)."""
    if native_rate == target_rate:
        return x
    up, down = resample_ratio(native_rate, target_rate)
    return resample_poly(x, up, down, axis=-1)


def zscore(x: np.ndarray) -> np.ndarray:
    """Z-score along the last axis in float64 (SD floored at :data:`STD_FLOOR`)."""
    x64 = np.asarray(x, dtype=np.float64)
    centred = x64 - x64.mean(axis=-1, keepdims=True)
    return centred / np.maximum(centred.std(axis=-1, keepdims=True), STD_FLOOR)


def window_signals(
    x: np.ndarray, *, native_rate: float, target_rate: float, window_s: float
) -> Windows:
    """Resample, cut into non-overlapping windows and z-score a batch of records.

    A trailing remainder shorter than a window is dropped. Records shorter
    than one window are z-scored over their own length and zero-padded at
    the end, so they still yield one window.

    Args:
        x: ``(N, L, T)`` records of equal length, native rate, any unit.
        native_rate: Hz of ``x``.
        target_rate: Hz of the output.
        window_s: window length (s).

    Returns:
        :class:`Windows`, record-major (all windows of record 0 first).
    """
    resampled = resample_signals(np.asarray(x), native_rate=native_rate, target_rate=target_rate)
    n_records, n_leads, length = resampled.shape
    width = round(window_s * target_rate)
    if width < 1:
        raise ValueError(f"window of {window_s} s at {target_rate} Hz holds no sample")
    per_record = length // width
    if per_record == 0:
        padded = np.zeros((n_records, n_leads, width))
        padded[..., :length] = zscore(resampled)
        index = np.arange(n_records)
        starts = np.zeros(n_records)
        return Windows(padded.astype(np.float32), index, starts, starts + length / target_rate)
    cut = resampled[..., : per_record * width].reshape(n_records, n_leads, per_record, width)
    windows = cut.transpose(0, 2, 1, 3).reshape(n_records * per_record, n_leads, width)
    offsets = np.tile(np.arange(per_record) * width / target_rate, n_records)
    return Windows(
        signals=zscore(windows).astype(np.float32),
        record_index=np.repeat(np.arange(n_records), per_record),
        start_s=offsets,
        end_s=offsets + width / target_rate,
    )
