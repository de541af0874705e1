"""
3-D accuracy of measured board corners against their floor.

A calibration is judged by the 3-D points it measures, but detection noise alone sets a floor
under any calibration: the same detections triangulated with the *true* model are not exact
either. :func:`corner_accuracy` reports both on the same detections, so the part of the error
that the calibration adds is their difference (the ratio is 1 for a perfect calibration).
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.errors import InvalidInputError


@dataclass(frozen=True, eq=False)
class CornerAccuracy:
    """
    Errors of measured corners.

    ids (C,) board point ids; measured (C, 3) metres, triangulated with the calibrated model;
    error_mm (C,) their distance to the true corners; floor_mm (C,) the same with the true
    model on the same detections; distance_m: distance of the true corners' centroid from the
    optical frame's origin (a focused camera's main lens, :mod:`lf_mpc_calib.camera.optical_frame`).
    """

    ids: np.ndarray
    measured: np.ndarray
    error_mm: np.ndarray
    floor_mm: np.ndarray
    distance_m: float

    @property
    def ratio(self):
        """Mean error with the calibrated model / mean error with the true model."""
        return float(np.mean(self.error_mm) / max(np.mean(self.floor_mm), 1e-12))

    def summary(self):
        """One line: calibrated error, floor and their ratio."""
        return (f'{len(self.ids)} corners at {self.distance_m * 1e3:.0f} mm: 3-D error mean '
                f'{np.mean(self.error_mm):.3f} mm (max {np.max(self.error_mm):.3f}) with the '
                f'calibrated model, {np.mean(self.floor_mm):.3f} mm (max '
                f'{np.max(self.floor_mm):.3f}) with the true model on the same detections: '
                f'{self.ratio:.2f} x the floor')


def corner_accuracy(obs, model, truth, true_points, *, origin=(0.0, 0.0, 0.0)):
    """
    Triangulate the corners of ``obs`` with ``model`` and with ``truth``; compare both.

    obs: Observations of one pose; model, truth: MPCModels in the same camera frame (the
    truth aligned to the calibration's sign convention, see
    :func:`lf_mpc_calib.calibration.closed_form.aligned_truth`); true_points (M, 3): every
    board point in that frame, metres; origin (3,): the optical frame's origin in that frame
    (:func:`~lf_mpc_calib.camera.optical_frame.optical_origin`), whence ``distance_m``.
    Returns a :class:`CornerAccuracy`.
    """
    pts = np.asarray(true_points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise InvalidInputError(f'true_points must have shape (M, 3), got {pts.shape}')
    if len(obs) == 0:
        raise InvalidInputError('no observations to measure')
    if int(obs.point.max()) >= len(pts):
        raise InvalidInputError(f'observations name point {int(obs.point.max())} but only '
                                f'{len(pts)} true points were given')
    ids = np.unique(obs.point)
    measured = model.triangulate(model.rays(obs.ijuv), obs.point)
    floor = truth.triangulate(truth.rays(obs.ijuv), obs.point)
    expected = pts[ids]
    return CornerAccuracy(ids, measured,
                          np.linalg.norm(measured - expected, axis=1) * 1e3,
                          np.linalg.norm(floor - expected, axis=1) * 1e3,
                          float(np.linalg.norm(expected.mean(axis=0) - np.asarray(origin))))
