"""
Calibration of the Raytrix R12 data (:mod:`lf_mpc_calib.io.raytrix_r12`) with the per-micro-lens-
type terms estimated jointly with the MPC model.

The terms themselves (u' = (1 + a_T) u + d_T, zero ray-weighted mean) are defined in
:mod:`lf_mpc_calib.calibration.type_terms`; :func:`lf_mpc_calib.calibration.calibrate` estimates
them in the same sparse refinement as the model and the poses whenever the observation table has
a ``lens_type`` column. This module only puts an R12Dataset's lens types into that table and
reports the error in raw pixels (which, with the terms in the refinement, is the refinement's
own residual).
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.calibration.focused import orient_focused
from lf_mpc_calib.calibration.refine import calibrate
from lf_mpc_calib.calibration.type_terms import LENS_TYPE_TERMS
from lf_mpc_calib.errors import InvalidInputError


@dataclass(frozen=True, eq=False)
class R12Calibration:
    """
    An MPC calibration of R12 data with optional per-lens-type terms.

    result: the CalibrationResult (``result.lens_types`` holds the terms with their standard
    deviations, None for 'none'); lens_type_terms: one of
    :data:`~lf_mpc_calib.calibration.type_terms.LENS_TYPE_TERMS`; scale (T,) the a_T;
    offset_px (T, 2) the (d_T, e_T); residuals_raw_px (N, 2) measured - predicted corner in
    raw pixels; rms_raw_px: sqrt(mean over rays of du^2 + dv^2) in raw pixels; observations:
    the table calibrated (the R12 rows with their lens types).
    """

    result: object
    lens_type_terms: str
    scale: np.ndarray
    offset_px: np.ndarray
    residuals_raw_px: np.ndarray
    rms_raw_px: float
    observations: object = None

    def lens_types_dict(self):
        """Plain mapping of the per-type terms (the calibration file's ``lens_types``)."""
        d = self.result.lens_types.to_dict()
        d['type_rule'] = 'type = ((l mod (I-1)) + k) mod I of micro-image (k, l)'
        return d


def calibrate_r12(data, *, lens_type_terms='affine-radial', **options):
    """
    Calibrate an R12Dataset, with per-lens-type terms estimated jointly (module docstring).

    options go to :func:`lf_mpc_calib.calibration.calibrate` (distortion, fix, loss, progress,
    ...). Returns an R12Calibration, oriented with k_3 + k_4 > 0
    (:mod:`lf_mpc_calib.calibration.focused`).
    """
    if lens_type_terms not in LENS_TYPE_TERMS:
        raise InvalidInputError(
            f'lens_type_terms must be one of {LENS_TYPE_TERMS}, got {lens_type_terms!r}')
    types = np.asarray(data.lens_type, dtype=np.int64)
    obs = dataclasses.replace(data.observations, lens_type=types)
    options.setdefault('camera_type', 'focused')
    result = orient_focused(calibrate(obs, lens_type_terms=lens_type_terms, **options))
    n_types = int(types.max()) + 1 if types.size else 1
    lt = result.lens_types
    scale = np.zeros(n_types) if lt is None else lt.scale
    offset = np.zeros((n_types, 2)) if lt is None else lt.offset_px
    return R12Calibration(result, lens_type_terms, scale, offset, result.residuals_px,
                          float(result.rms_reprojection_px), obs)
