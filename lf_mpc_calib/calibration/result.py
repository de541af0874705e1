"""
The result of a calibration: model, poses, errors and parameter uncertainties.
"""

from dataclasses import dataclass, field

import numpy as np

from lf_mpc_calib.camera.rotations import rotation_matrix
from lf_mpc_calib.camera.model import PARAMETER_NAMES


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
    view_ids, view_index = _views(obs.ijuv[:, 0], obs.ijuv[:, 1])
    per_view = _group_rms(view_index, sq, len(view_ids))
    dist2 = _ray_distances_squared(model, obs, rotation_matrix(rotation_vectors),
                                   np.asarray(translations, dtype=float), pose_index)
    return dict(residuals_px=residuals, rms_reprojection_px=rms,
                rms_ray_reprojection_mm=float(1e3 * np.sqrt(np.mean(dist2))),
                per_pose_rms_px=per_pose, view_ids=view_ids, per_view_rms_px=per_view)


MAX_DENSE_VIEWS = 1 << 20
"""Views (i, j) of whole numbers spanning at most this many are indexed by counting, more
(or fractional: focused micro-image centres) by sorting."""


def _views(i, j):
    """Distinct views (V, 2) sorted by i then j, and the view index (N,) of each ray."""
    i0, j0 = i.min(), j.min()
    di, dj = i - i0, j - j0
    n_j = float(dj.max()) + 1.0
    if (n_j * (float(di.max()) + 1.0) <= MAX_DENSE_VIEWS and np.all(di == np.floor(di))
            and np.all(dj == np.floor(dj))):
        key = di.astype(np.int64) * int(n_j) + dj.astype(np.int64)
        present = np.bincount(key) > 0
        rank = np.cumsum(present) - 1
        found = np.flatnonzero(present)
        return np.column_stack([i0 + found // int(n_j), j0 + found % int(n_j)]).astype(
            float), rank[key]
    order = np.lexsort((j, i))
    si, sj = i[order], j[order]
    new = np.ones(len(si), dtype=bool)
    new[1:] = (si[1:] != si[:-1]) | (sj[1:] != sj[:-1])
    index = np.empty(len(si), dtype=np.int64)
    index[order] = np.cumsum(new) - 1
    return np.column_stack([si[new], sj[new]]), index


def _ray_distances_squared(model, obs, rot, trans, pose_index):
    """
    Squared distances (N,) in m^2 of each board point (in the camera frame by its pose) from
    the decoded ray of its observation, in the rows' order sorted by pose:
    :func:`lf_mpc_calib.camera.model.point_ray_distance` of ``model.rays(obs.ijuv)``, one
    coordinate at a time. rot (P, 3, 3), trans (P, 3), pose_index (N,) into them.
    """
    order = np.argsort(pose_index, kind='stable')
    bounds = np.searchsorted(pose_index[order], np.arange(len(rot) + 1))
    cam = np.ascontiguousarray(obs.board[order].T)                 # (3, N), then turned
    for p in range(len(rot)):
        sl = slice(bounds[p], bounds[p + 1])
        cam[:, sl] = rot[p] @ cam[:, sl] + trans[p][:, None]
    m = model
    i, j, u, v = np.ascontiguousarray(obs.ijuv[order].T)
    s, t = m.k_i * i, m.k_j * j
    x, y = m.k_u * u + m.u_0, m.k_v * v + m.v_0
    rr = x * x + y * y
    radial = 1.0 + m.k_1 * rr + m.k_2 * rr * rr
    xu, yu = radial * x + m.k_3 * s, radial * y + m.k_4 * t       # direction (xu, yu, 1)
    wx, wy, wz = cam[0] - s, cam[1] - t, cam[2]                     # from (s, t, 0)
    cx, cy, cz = wy - wz * yu, wz * xu - wx, wx * yu - wy * xu        # w x (xu, yu, 1)
    return (cx * cx + cy * cy + cz * cz) / (xu * xu + yu * yu + 1.0)
