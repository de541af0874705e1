"""
The result of a calibration: model, poses, errors and parameter uncertainties.
"""

from dataclasses import dataclass, field

import numpy as np

from lf_mpc_calib.camera.rotations import rotation_matrix
from lf_mpc_calib.camera.model import PARAMETER_NAMES, point_ray_distance


@dataclass(frozen=True, eq=False)
class CalibrationResult:
    """
    A refined MPC calibration.

    model: the refined MPCModel; initial: the closed-form MPCModel it started from.
    rotation_vectors (P, 3), translations (P, 3): board -> camera, X_c = R(w) X_b + t (metres);
    pose_ids (P,): pose index of the observation table for each row.
    residuals_px (N, 2): measured - predicted (u, v) per observation row (input order), in the
    measured pixels (the board point projected, Eq. 18 inverted).
    rms_reprojection_px: sqrt(mean over rays of du^2 + dv^2).
    rms_ray_reprojection_mm: RMS 3-D distance between each board point and the decoded ray of
    its observation (Dansereau et al.), millimetres.
    per_pose_rms_px (P,), view_ids (V, 2) distinct (i, j), per_view_rms_px (V,): the same RMS
    per pose and per view.
    stddev: {parameter name: standard deviation} from the final Jacobian: the cluster-robust
    (sandwich) covariance clustered by (pose, board point), never below (J^T J)^-1 times the
    residual variance (intrinsic block by Schur complement); NaN for fixed parameters.
    covariance (F, F): the covariance those come from, over the F free model parameters in
    PARAMETER_NAMES order (the names whose stddev is finite), or None.
    iterations, converged, message: solver report (converged False means the solver stopped
    on its iteration limit or could not reduce the cost; the result is then the last iterate).
    fixed: names held fixed; held: {name: reason} of the distortion terms held at 0 because
    the data did not determine them (``calibrate(distortion='auto')``); method: the
    closed-form method used; loss: the loss minimised; cost: final 0.5 * sum of squared
    (robustified) residuals.
    lens_types: the per-micro-lens-type terms estimated with the model
    (:class:`lf_mpc_calib.calibration.type_terms.LensTypeTerms`) or None; with them,
    residuals_px are in raw pixels and the model decodes the type-corrected (u, v).
    """

    model: object
    initial: object
    rotation_vectors: np.ndarray
    translations: np.ndarray
    pose_ids: np.ndarray
    residuals_px: np.ndarray
    rms_reprojection_px: float
    rms_ray_reprojection_mm: float
    per_pose_rms_px: np.ndarray
    view_ids: np.ndarray
    per_view_rms_px: np.ndarray
    stddev: dict
    iterations: int
    converged: bool
    message: str
    fixed: tuple = ()
    method: str = 'exact'
    loss: str = 'linear'
    cost: float = float('nan')
    lens_types: object = None
    held: dict = field(default_factory=dict)
    covariance: np.ndarray = None
    extras: dict = field(default_factory=dict)

    def free_names(self):
        """Names of the free model parameters (PARAMETER_NAMES order): the covariance's axes."""
        return tuple(n for n in PARAMETER_NAMES if np.isfinite(self.stddev.get(n, np.nan)))

    def principal_point_stddev(self):
        """
        (u, v) standard deviation (2,) of the principal point (-u_0/k_u, -v_0/k_v) in pixels.

        By the delta method from ``covariance`` (the correlation of u_0 with k_u counts);
        from the stddev alone when there is no covariance; NaN where not estimated;
        extras['principal_point_stddev_px'] when set (calibration.pose_jackknife's
        covering_result).
        """
        if 'principal_point_stddev_px' in self.extras:   # a covering one (pose_jackknife)
            return np.array(self.extras['principal_point_stddev_px'], dtype=float)
        m = self.model
        names = self.free_names()
        out = []
        for off, scale in (('u_0', 'k_u'), ('v_0', 'k_v')):
            k, o = float(getattr(m, scale)), float(getattr(m, off))
            grad = {off: -1.0 / k, scale: o / (k * k)}
            if self.covariance is not None and len(names) == len(self.covariance):
                g = np.array([grad.get(n, 0.0) for n in names])
                out.append(float(np.sqrt(max(g @ self.covariance @ g, 0.0))))
            else:
                out.append(float(np.hypot(*(grad[n] * self.stddev.get(n, np.nan)
                                            for n in (off, scale)))))
        return np.array(out)

    def pose_matrices(self):
        """Return R (P, 3, 3) of the board poses."""
        return rotation_matrix(self.rotation_vectors)


def _group_rms(keys_inverse, sq, n_groups):
    tot = np.bincount(keys_inverse, weights=sq, minlength=n_groups)
    cnt = np.bincount(keys_inverse, minlength=n_groups)
    return np.sqrt(tot / np.maximum(cnt, 1))


def error_summary(model, obs, rotation_vectors, translations, pose_ids, residuals):
    """
    Return the error fields of a CalibrationResult as a dict.

    residuals (N, 2) measured - predicted pixels in the row order of ``obs``.
    """
    sq = np.einsum('nk,nk->n', residuals, residuals)
    rms = float(np.sqrt(np.mean(sq)))
    pose_index = np.searchsorted(pose_ids, obs.pose)
    per_pose = _group_rms(pose_index, sq, len(pose_ids))
    ij = obs.ijuv[:, :2]
    order = np.lexsort((ij[:, 1], ij[:, 0]))
    sij = ij[order]
    new = np.ones(len(sij), dtype=bool)
    new[1:] = np.any(sij[1:] != sij[:-1], axis=1)
    view_ids = sij[new]
    inv = np.empty(len(sij), dtype=np.int64)
    inv[order] = np.cumsum(new) - 1
    per_view = _group_rms(inv, sq, len(view_ids))
    rot = rotation_matrix(rotation_vectors)
    cam = np.einsum('nij,nj->ni', rot[pose_index], obs.board) + translations[pose_index]
    dist = point_ray_distance(cam, model.rays(obs.ijuv))
    return dict(residuals_px=residuals, rms_reprojection_px=rms,
                rms_ray_reprojection_mm=float(1e3 * np.sqrt(np.mean(dist * dist))),
                per_pose_rms_px=per_pose, view_ids=view_ids, per_view_rms_px=per_view)
