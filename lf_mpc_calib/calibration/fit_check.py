"""
Does the calibrated model explain the detections? The calibration stage's own check.

The corner detector measures the noise of its corners itself: each board corner moves along a
straight line across the views (its residual RMS about those lines, ``line_residual_rms_px``
of every detection). A model that explains the data reprojects with an RMS of the same order
(measured 1.4-1.8 x on rendered Lytro and Illum data: the lines have more freedom than the
model). Far above it, the model does not explain the detections (a wrong lenslet grid,
mislabelled corners, a camera unlike the model) and the calibration is refused with the
figures rather than written.
"""

import numpy as np

from lf_mpc_calib.errors import DetectionError

FIT_LIMIT = 3.0
"""Largest accepted RMS reprojection / corner noise."""
NOISE_FLOOR_PX = 0.05
"""Corner noise below this is taken as this (noise-free renders)."""


def corner_noise_px(line_residuals_px, weights=None):
    """RMS over poses (weighted, e.g. by observations) of the per-pose line residuals (P,)."""
    r = np.asarray(line_residuals_px, dtype=float)
    w = np.ones_like(r) if weights is None else np.asarray(weights, dtype=float)
    return float(np.sqrt(np.sum(w * r * r) / np.sum(w)))


def check_model_fit(rms_px, noise_px, *, limit=FIT_LIMIT):
    """
    Return rms_px / noise_px; raise DetectionError when it exceeds ``limit``.

    rms_px: RMS reprojection error of the calibration; noise_px: corner noise measured by the
    detector (:func:`corner_noise_px`).
    """
    ratio = float(rms_px) / max(float(noise_px), NOISE_FLOOR_PX)
    if not np.isfinite(ratio) or ratio > limit:
        raise DetectionError(
            f'calibration: RMS reprojection {rms_px:.3f} px is {ratio:.1f} x the corner noise '
            f'{noise_px:.3f} px that the detector measured across views (limit {limit:g} x): '
            'the model does not explain the detections. Check the lenslet grid (pass --grid '
            'FILE or another white image) and the corner labels in the report\'s detection '
            'overlays')
    return ratio
