"""
Micro-lens types of multi-focus (focused) cameras: per-type terms on top of the MPC model.

Per-lens-type terms (:func:`calibrate_r12`, for the Raytrix R12 data of
:mod:`lf_mpc_calib.io.raytrix_r12`): the MPC model has one (k_u, k_v, u_0,
v_0) for every micro-lens, but the three lens types of a multi-focus camera image at slightly
different scales. ``lens_type_terms='affine'`` models the measured offset of type T as
u' = (1 + a_T) u + d_T, v' = (1 + a_T) v + e_T (zero ray-weighted mean over types, so that the
global part stays in k_u, k_v, u_0, v_0) and estimates (a, d, e) by alternating with the
refinement: refine the MPC model on the corrected offsets, then fit (a, d, e) per type by linear
least squares to the predicted offsets, until the RMS stops falling. Each step lowers the same
sum of squares. The error is reported in raw pixels: residual / (1 + a_T).
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.calibration.refine import calibrate, refine
from lf_mpc_calib.errors import InvalidInputError

LENS_TYPE_TERMS = ('none', 'offset', 'affine')


@dataclass(frozen=True, eq=False)
class R12Calibration:
    """
    An MPC calibration of R12 data with optional per-lens-type terms.

    result: the CalibrationResult of the last refinement (on the corrected offsets);
    lens_type_terms: 'none' | 'offset' | 'affine'; scale (T,) the a_T; offset_px (T, 2) the
    (d_T, e_T); residuals_raw_px (N, 2) measured - predicted corner in raw pixels;
    rms_raw_px: sqrt(mean over rays of du^2 + dv^2) in raw pixels; rounds: alternations run.
    """

    result: object
    lens_type_terms: str
    scale: np.ndarray
    offset_px: np.ndarray
    residuals_raw_px: np.ndarray
    rms_raw_px: float
    rounds: int

    def lens_types_dict(self):
        """Plain mapping of the per-type terms (for the calibration file's ``lens_types``)."""
        return {'terms': self.lens_type_terms,
                'formula': "type = ((l mod (I-1)) + k) mod I; u' = (1 + scale) u + offset",
                'scale': [float(x) for x in self.scale],
                'offset_px': [[float(x) for x in row] for row in self.offset_px]}


def _fit_type_terms(uv, predicted, types, n_types, terms):
    """Per-type (a, d, e) with (1 + a) uv + (d, e) ~ predicted; zero ray-weighted mean."""
    a = np.zeros(n_types)
    off = np.zeros((n_types, 2))
    counts = np.bincount(types, minlength=n_types).astype(float)
    for t in range(n_types):
        m = types == t
        if not np.any(m):
            continue
        target = (predicted[m] - uv[m]).T.ravel()          # (2n,): all du then all dv
        n = int(m.sum())
        cols = [np.r_[np.ones(n), np.zeros(n)], np.r_[np.zeros(n), np.ones(n)]]
        if terms == 'affine':
            cols.insert(0, uv[m].T.ravel())
        x = np.linalg.lstsq(np.column_stack(cols), target, rcond=None)[0]
        if terms == 'affine':
            a[t], off[t] = x[0], x[1:]
        else:
            off[t] = x
    w = counts / counts.sum()
    return a - w @ a, off - w @ off


def calibrate_r12(data, *, lens_type_terms='affine', rounds=30, tol_px=1e-6, progress=None,
                  **options):
    """
    Calibrate an R12Dataset, optionally with per-lens-type terms (see the module docstring).

    options go to :func:`lf_mpc_calib.calibration.calibrate` (distortion, fix, loss, ...).
    progress(round, rms_raw_px): optional callback after each alternation.
    Returns an R12Calibration.
    """
    if lens_type_terms not in LENS_TYPE_TERMS:
        raise InvalidInputError(
            f'lens_type_terms must be one of {LENS_TYPE_TERMS}, got {lens_type_terms!r}')
    obs = data.observations
    types = np.asarray(data.lens_type, dtype=np.int64)
    n_types = int(types.max()) + 1 if types.size else 1
    uv = obs.ijuv[:, 2:]
    result = calibrate(obs, **options)
    a = np.zeros(n_types)
    off = np.zeros((n_types, 2))
    rms = result.rms_reprojection_px
    done = 0
    refine_options = {k: v for k, v in options.items()
                      if k in ('loss', 'f_scale', 'max_iterations', 'solver')}
    fixed = tuple(result.fixed)
    while lens_type_terms != 'none' and done < rounds:
        corrected = (1.0 + a[types])[:, None] * uv + off[types]
        predicted = corrected - result.residuals_px
        a_new, off_new = _fit_type_terms(uv, predicted, types, n_types, lens_type_terms)
        corrected = (1.0 + a_new[types])[:, None] * uv + off_new[types]
        obs_c = dataclasses.replace(obs, ijuv=np.column_stack([obs.ijuv[:, :2], corrected]))
        new = refine(obs_c, result, fix=fixed, **refine_options)
        done += 1
        new_rms = _raw_rms(new.residuals_px, a_new[types])
        if progress is not None:
            progress(done, new_rms)
        if new_rms > rms + 1e-12:
            break                                    # no further gain: keep the previous
        result, a, off = new, a_new, off_new
        improvement, rms = rms - new_rms, new_rms
        if improvement < tol_px:
            break
    residuals = result.residuals_px / (1.0 + a[types])[:, None]
    return R12Calibration(result, lens_type_terms, a, off, residuals,
                          _raw_rms(result.residuals_px, a[types]), done)


def _raw_rms(residuals, a):
    r = residuals / (1.0 + a)[:, None]
    return float(np.sqrt(np.mean(np.sum(r * r, axis=1))))
