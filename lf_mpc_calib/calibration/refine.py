"""
Refinement of the MPC model and the board poses by sparse nonlinear least squares.

Residuals are reprojection errors in the *measured* pixels (NOTES §4): each board point is
mapped to the camera frame by its pose (Rodrigues rotation vector w, translation t), projected
into the view (i, j) of the observation with Eq. 1, Eq. 18 is inverted for the measured (x, y)
and u = (x - u_0)/k_u, v = (y - v_0)/k_v is compared with the observed pixel.

The Jacobian is analytic. Through the inverse of Eq. 18 it follows from the implicit function
theorem: with F(x, y) = g (x, y) - (x^u - k_3 s, y^u - k_4 t) = 0, g = 1 + k_1 r^2 + k_2 r^4,
d(x, y) = M^-1 (d(x^u - k_3 s, y^u - k_4 t) - (x, y)(r^2 dk_1 + r^4 dk_2)),
M = g I + 2 (k_1 + 2 k_2 r^2) (x, y)(x, y)^T. Each residual depends on the ten model parameters
and the six parameters of its pose only, so the Jacobian is stored as dense (2N, 16) rows
(exactly its non-zeros) and, for scipy, as a CSR matrix of the same size.

Two solvers:

- ``'lm'`` (default): Levenberg-Marquardt on the normal equations. J^T J is accumulated per pose
  from the (2 n_p, 16) blocks and solved with the Schur complement of the block-diagonal pose
  part, so the work per iteration is linear in the number of rays and poses and nothing larger
  than the sparse Jacobian's non-zeros is ever stored.
- ``'trf'``: ``scipy.optimize.least_squares(method='trf', x_scale='jac')`` with the analytic
  Jacobian as a scipy.sparse CSR matrix (LSMR trust-region steps). Same cost function; slower
  on large problems; kept as an independent check.

Robust losses ('huber', 'soft_l1', 'cauchy', 'arctan', with ``f_scale`` in pixels) are applied per
residual component as in scipy (residual and Jacobian rescaling, Triggs et al.).

Micro-lens types (focused multi-focus cameras, ``Observations.lens_type``): the per-type terms of
:mod:`lf_mpc_calib.calibration.type_terms` join the parameter vector after the ten model
parameters (theta has 10 + K entries); their Jacobian rows follow the six pose rows, so the
per-ray Jacobian is (16 + K, 2, N) and the model block of the normal equations has 10 + K
columns. Residuals then stay in raw pixels.
"""

from dataclasses import replace

import numpy as np

from lf_mpc_calib.calibration.closed_form import (
    closed_form, group_by_pose, validate_observations)
from lf_mpc_calib.calibration.result import CalibrationResult, error_summary
from lf_mpc_calib.calibration.type_terms import LENS_TYPE_TERMS, TypeParametrisation
from lf_mpc_calib.errors import ConvergenceError, DegenerateConfigurationError, InvalidInputError
from lf_mpc_calib.camera.rotations import rotation_matrix_jacobian
from lf_mpc_calib.camera.model import DISTORTION_NAMES, MPCModel, PARAMETER_NAMES
from lf_mpc_calib.camera.observations import CAMERA_TYPES, guess_camera_type

LOSSES = ('linear', 'huber', 'soft_l1', 'cauchy', 'arctan')
SOLVERS = ('lm', 'trf')
N_MODEL = len(PARAMETER_NAMES)          # 10 model parameters
N_POSE = 6                              # rotation vector (3) + translation (3)
BLOCK = 16384
"""Rays evaluated at once (a pose's rays in blocks: their temporaries stay in the cache)."""
FTOL = 1e-12
"""The 'lm' solver stops when the cost's (predicted) decrease is below this fraction of it."""
MAX_ITERATIONS = 500
"""LM steps a refinement may try. A converging one stops long before (6-30 steps); a poor
start needs more: a Galilean frame set with a 17-row pose started 44 % off stopped at 100 steps
35 % off (principal point 238 px), and converged within 200 to 1 % (bench_focused_raw, seed 3)."""


def _projection_gradient(model, x, y, r2, g, a_u, a_v):
    """
    (radial: k_1 or k_2 nonzero, M = d (u, v) / d q as its rows' entries (mu_x, mu_y, mv_x,
    mv_y), each (n,) or a scalar) at the distorted points x, y (n,) of radius^2 r2 and
    radial factor g (n,); a_u, a_v = 1 / k_u, 1 / k_v. M = diag(a_u, a_v) (d q / d (x, y))^-1,
    d q / d (x, y) = g I + 2 (k_1 + 2 k_2 r^2) (x, y)(x, y)^T.
    """
    if model.k_1 == 0.0 and model.k_2 == 0.0:                  # M = diag(a_u, a_v)
        return False, (a_u, 0.0, 0.0, a_v)
    gp2 = 2.0 * model.k_1 + (4.0 * model.k_2) * r2
    w = 1.0 / (g * (g + gp2 * r2))
    wu, wv = w * a_u, w * a_v
    gx, gy = gp2 * x, gp2 * y
    mu_x = (g + gy * y) * wu
    mv_y = (g + gx * x) * wv
    m_xy = -(gx * y)
    return True, (mu_x, m_xy * wu, m_xy * wv, mv_y)


def _view_and_distortion_rows(jac, radial, m, a, dq_dk, nst, x, y, r2):
    """
    Write the Jacobian rows (2, n) of k_i, k_j (0, 1), k_1, k_2 (6, 7) and k_3, k_4 (8, 9)
    into ``jac``: through q (dq_dk = (dq_x / dk_i, dq_y / dk_j), nst = (-s, -t) = dq / d
    (k_3, k_4)) and M (m, :func:`_projection_gradient`; a = (a_u, a_v)); the radial terms
    d (x, y) = -M^-1 (x, y) r^2 dk_1 (r^4 for k_2).
    """
    mu_x, mu_y, mv_x, mv_y = m
    (a_u, a_v), (dqx_dki, dqy_dkj), (ns, nt) = a, dq_dk, nst
    xr, yr = x * r2, y * r2
    if radial:
        np.multiply(mu_x, dqx_dki, out=jac[0, 0])
        np.multiply(mv_x, dqx_dki, out=jac[0, 1])
        np.multiply(mu_y, dqy_dkj, out=jac[1, 0])
        np.multiply(mv_y, dqy_dkj, out=jac[1, 1])
        np.multiply(mu_x, ns, out=jac[8, 0])
        np.multiply(mv_x, ns, out=jac[8, 1])
        np.multiply(mu_y, nt, out=jac[9, 0])
        np.multiply(mv_y, nt, out=jac[9, 1])
        np.negative(mu_x * xr + mu_y * yr, out=jac[6, 0])
        np.negative(mv_x * xr + mv_y * yr, out=jac[6, 1])
    else:
        np.multiply(dqx_dki, a_u, out=jac[0, 0])
        np.multiply(dqy_dkj, a_v, out=jac[1, 1])
        np.multiply(ns, a_u, out=jac[8, 0])
        np.multiply(nt, a_v, out=jac[9, 1])
        jac[0, 1] = jac[1, 0] = jac[8, 1] = jac[9, 0] = 0.0
        np.multiply(xr, -a_u, out=jac[6, 0])
        np.multiply(yr, -a_v, out=jac[6, 1])
    np.multiply(jac[6], r2, out=jac[7])


def _pose_rows(jac, radial, m, inv_z, xu, yu, rb, v):
    """
    Write the pose's Jacobian rows (2, n), rotation 10-12 and translation 13-15, into
    ``jac``: dq/dPc = [[1/Z, 0, -x^u/Z], [0, 1/Z, -y^u/Z]] gives d = d res / dPc = d res / dt;
    with dR/dw_k = [v_k]x R, d res / dw_k = v_k . (R b x d). m: M's entries
    (:func:`_projection_gradient`); rb (3, n): R b; v (3, 3).
    """
    q = np.empty((3, len(xu)))
    nxu, nyu = -xu, -yu
    mu_x, mu_y, mv_x, mv_y = m
    for row, (cx, cy) in enumerate(((mu_x, mu_y), (mv_x, mv_y))):
        d0, d1, d2 = jac[13, row], jac[14, row], jac[15, row]
        np.multiply(inv_z, cx, out=d0)
        np.multiply(inv_z, cy, out=d1)
        if not radial:      # one of cx, cy is 0: d = (d0, 0, -x^u d0) or (0, d1, -y^u d1)
            if row == 0:
                np.multiply(d0, nxu, out=d2)
                np.multiply(rb[1], d2, out=q[0])
                np.subtract(rb[2] * d0, rb[0] * d2, out=q[1])
                np.multiply(rb[1], d0, out=q[2])
                np.negative(q[2], out=q[2])
            else:
                np.multiply(d1, nyu, out=d2)
                np.subtract(rb[1] * d2, rb[2] * d1, out=q[0])
                np.multiply(rb[0], d2, out=q[1])
                np.negative(q[1], out=q[1])
                np.multiply(rb[0], d1, out=q[2])
        else:
            np.add(d0 * nxu, d1 * nyu, out=d2)
            np.subtract(rb[1] * d2, rb[2] * d1, out=q[0])
            np.subtract(rb[2] * d0, rb[0] * d2, out=q[1])
            np.subtract(rb[0] * d1, rb[1] * d0, out=q[2])
        np.matmul(v, q, out=jac[10:13, row])


class RefinementProblem:
    """
    Residuals and analytic Jacobian of the reprojection error for one observation table.

    Rows are sorted by pose, and within a pose by board point, once (``order``): the rays of
    one corner of one pose (a cluster of :meth:`clusters`) are contiguous. Parameters:
    ``theta`` (10,) in PARAMETER_NAMES
    order, ``poses`` (P, 6) = (w, t) per pose. Residuals are (2, N) predicted - observed
    pixels (u row, v row) in the sorted order; the Jacobian is (16, 2, N): d residual / d
    (the ten model parameters, then w_0, w_1, w_2, t_0, t_1, t_2 of the ray's own pose), i.e.
    exactly the non-zeros of the sparse (2N, 10 + 6P) Jacobian, stored contiguously per
    parameter for the per-pose products of the normal equations.
    """

    def __init__(self, obs, grouped, lens_type_terms='none'):
        # grouped.order sorts by pose; the stable lexsort keeps its pose blocks and bounds
        self.order = np.lexsort((obs.point, obs.pose))
        self.bounds = grouped.bounds
        self.pose_ids = grouped.pose_ids
        self.n_poses = len(grouped.pose_ids)
        self.board_t = obs.board.T.take(self.order, axis=1)                # (3, N)
        self.i, self.j, self.u, self.v = obs.ijuv.T.take(self.order, axis=1)   # (N,) each
        self.point = np.asarray(obs.point)[self.order].astype(np.int64)
        self.n = len(self.order)
        self.pose_index = np.repeat(np.arange(self.n_poses), np.diff(self.bounds))
        self._clusters = None
        self._spare = []        # Jacobians nothing reads any more (recycle)
        self.blocks = [(p, slice(a, min(a + BLOCK, self.bounds[p + 1])))
                       for p in range(self.n_poses)
                       for a in range(self.bounds[p], self.bounds[p + 1], BLOCK)]
        # per-micro-lens-type terms: theta[10:] (module docstring)
        self.types = (None if lens_type_terms == 'none'
                      else TypeParametrisation(obs.lens_type[self.order], lens_type_terms))

    def clusters(self):
        """
        (first ray (G,), cluster of each ray (N,)) of the G clusters of rays whose errors may
        be correlated: one board corner of one pose, seen in every view; each cluster's rays
        are contiguous (``order``). Computed once.
        """
        if self._clusters is None:
            new = np.ones(self.n, dtype=bool)
            new[1:] = (self.point[1:] != self.point[:-1]) | (
                self.pose_index[1:] != self.pose_index[:-1])
            self._clusters = np.flatnonzero(new), np.cumsum(new) - 1
        return self._clusters

    def spare_jacobian(self):
        """A (16, 2, N) Jacobian that nothing reads any more (:meth:`recycle`), or None."""
        return self._spare.pop() if self._spare else None

    def recycle(self, jac):
        """
        Keep ``jac``, which its owner will no longer read, as the memory of a later
        evaluate(out=...): the refits of one table then take no fresh 38 MB per Jacobian.
        """
        if (isinstance(jac, np.ndarray) and jac.shape == (16, 2, self.n) and len(self._spare) < 2
                and not any(jac is kept for kept in self._spare)):
            self._spare.append(jac)

    def evaluate(self, theta, poses, *, jacobian=True, out=None):
        """
        Return residuals (2, N) and, if asked, the Jacobian (16 + K, 2, N) (else None).

        theta (10 + K,): the model, then the K free lens-type terms (K = 0 without types).
        out: a Jacobian no longer needed, whose memory the new one may take (or None).
        """
        if self.types is None:
            return self.evaluate_mpc(theta, poses, jacobian=jacobian, out=out)
        x = theta[N_MODEL:]
        if not self.types.view:
            res, jac = self.evaluate_mpc(theta, poses, jacobian=jacobian)
            extra = self.types.apply(x, res, jac, self.u, self.v, self.i, self.j)
            return res, (None if jac is None else np.concatenate([jac, extra]))
        st = self.types.view_positions(x, theta, self.i, self.j)
        res, jac = self.evaluate_mpc(theta, poses, jacobian=jacobian, st=st)
        if jac is not None:
            jac = np.concatenate([jac, self.types.view_rows(x, theta, self.i, self.j,
                                                            self._d_st, jac)])
        extra = self.types.apply(x, res, jac, self.u, self.v)
        if jac is None:
            return res, None
        return res, np.concatenate([jac[:N_MODEL + N_POSE], extra, jac[N_MODEL + N_POSE:]])

    def evaluate_mpc(self, theta, poses, *, jacobian=True, st=None, out=None):
        """
        Return residuals (2, N) and, if asked, the Jacobian (16, 2, N) (else None; written
        into ``out`` when that is a (16, 2, N) float array: a 38 MB Jacobian of an Illum-size
        table costs more in fresh pages than in arithmetic).

        Rays where Eq. 18 has no inverse give NaN residuals. st: (s (N,), t (N,)) view-plane
        positions to use instead of (k_i i, k_j j) (the lens-type view scales); with the
        Jacobian, ``self._d_st`` then holds (d res / d s, d res / d t), each (2, N).
        Computed in blocks of at most BLOCK rays of one pose (their temporaries stay in cache).
        """
        rot, drot = rotation_matrix_jacobian(poses[:, :3])
        model = _unchecked_model(theta)
        res = np.empty((2, self.n))
        jac = v = d_st = None
        if jacobian:
            shape = (16, 2, self.n)
            jac = out if (out is not None and out.shape == shape
                          and out.dtype == np.float64) else np.empty(shape)
            # dR/dw_k = [v_k]x R (rotation_matrix_jacobian): v (P, 3 k, 3)
            v = np.stack([_vee(drot[:, k] @ np.swapaxes(rot, 1, 2)) for k in range(3)], axis=1)
            if st is not None:
                d_st = (np.empty((2, self.n)), np.empty((2, self.n)))
        for p, sl in self.blocks:
            self._evaluate_block(model, rot[p], poses[p, 3:], sl, st, res,
                                 None if jac is None else jac[:, :, sl],
                                 None if v is None else v[p], d_st)
        if d_st is not None:
            self._d_st = d_st
        return res, jac

    def _evaluate_block(self, model, rot, trans, sl, st, res, jac, v, d_st):
        """evaluate_mpc on the rays ``sl`` of one pose (rot (3, 3), trans (3,), v (3, 3)):
        writes res[:, sl] and, when jac (16, 2, n) is given, the block's Jacobian."""
        k_3, k_4 = model.k_3, model.k_4
        ii, jj = self.i[sl], self.j[sl]
        rb = rot @ self.board_t[:, sl]                          # R b: the board point turned
        pc = rb + trans[:, None]
        # -s, -t: the view's position on the view plane, negated (the sign every use takes)
        ns, nt = ((ii * -model.k_i, jj * -model.k_j) if st is None
                  else (-st[0][sl], -st[1][sl]))
        inv_z = 1.0 / pc[2]
        xu = (pc[0] + ns) * inv_z
        yu = (pc[1] + nt) * inv_z
        # q = (x^u - k_3 s, y^u - k_4 t) = g(r) (x, y): Eq. 18 inverted
        if jac is None:
            x, y, _ = model._distort_q(xu + k_3 * ns, yu + k_4 * nt)
        else:
            x, y, _, r2, g = model._distort_q(xu + k_3 * ns, yu + k_4 * nt, radial=True)
        a_u = 1.0 / model.k_u
        a_v = 1.0 / model.k_v
        u_pred = (x - model.u_0) * a_u
        v_pred = (y - model.v_0) * a_v
        np.subtract(u_pred, self.u[sl], out=res[0, sl])
        np.subtract(v_pred, self.v[sl], out=res[1, sl])
        if jac is None:
            return
        # pixel scale and offset: k_u, u_0 act on u alone, k_v, v_0 on v
        jac[2, 1] = jac[3, 0] = jac[4, 1] = jac[5, 0] = 0.0
        np.multiply(u_pred, -a_u, out=jac[2, 0])
        np.multiply(v_pred, -a_v, out=jac[3, 1])
        jac[4, 0] = -a_u
        jac[5, 1] = -a_v
        radial, m = _projection_gradient(model, x, y, r2, g, a_u, a_v)
        mu_x, mu_y, mv_x, mv_y = m
        # k_i, k_j, k_3, k_4 act through q: dq_x / dk_i = -i (1/Z + k_3), dq_x / dk_3 = -s
        dqx_ds = -(inv_z + k_3)
        dqy_dt = -(inv_z + k_4)
        if d_st is not None:
            d_st[0][:, sl] = (mu_x * dqx_ds, mv_x * dqx_ds)
            d_st[1][:, sl] = (mu_y * dqy_dt, mv_y * dqy_dt)
        _view_and_distortion_rows(jac, radial, m, (a_u, a_v), (ii * dqx_ds, jj * dqy_dt),
                                  (ns, nt), x, y, r2)
        _pose_rows(jac, radial, m, inv_z, xu, yu, rb, v)

    def sparse_jacobian(self, jac, free):
        """
        Return the Jacobian (2N, n_free + 6P) as CSR from (16 + K, 2, N); rows are ray-major.

        ``free`` (10 + K,) bool selects the model (and lens-type) columns that are estimated.
        """
        nf = int(free.sum())
        sel = _jacobian_rows(free)
        block = np.transpose(jac[sel], (2, 1, 0))                    # (N, 2, nf + 6)
        pose_cols = nf + N_POSE * self.pose_index[:, None] + np.arange(N_POSE)[None, :]
        cols = np.concatenate([np.broadcast_to(np.arange(nf), (self.n, nf)), pose_cols], axis=1)
        cols = np.repeat(cols[:, None, :], 2, axis=1)
        width = nf + N_POSE
        indptr = np.arange(0, 2 * self.n * width + 1, width)
        import scipy.sparse  # only the 'trf' path needs scipy (keeps the CLI start fast)
        return scipy.sparse.csr_matrix((block.reshape(-1), cols.reshape(-1), indptr),
                                       shape=(2 * self.n, nf + N_POSE * self.n_poses))


def _vee(m):
    """The vector v (..., 3) of skew-symmetric matrices m (..., 3, 3) = [v]x."""
    return 0.5 * np.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                           m[..., 1, 0] - m[..., 0, 1]], axis=-1)


def _jacobian_rows(free):
    """Rows of the (16 + K, 2, N) Jacobian for free (10 + K,) global parameters, then poses."""
    idx = np.flatnonzero(free)
    return np.concatenate([np.where(idx < N_MODEL, idx, idx + N_POSE),
                           np.arange(N_MODEL, N_MODEL + N_POSE)])


def _unchecked_model(theta):
    """An MPCModel from a trial vector without the constructor's checks (hot path)."""
    m = object.__new__(MPCModel)
    for name, value in zip(PARAMETER_NAMES, theta):
        object.__setattr__(m, name, float(value))
    return m


# ---- robust losses (rho(z), rho'(z), rho''(z) of z = (r / f_scale)^2, as in scipy) -----------
def _loss(name, z):
    if name == 'huber':
        big = z > 1.0
        sz = np.sqrt(np.where(big, z, 1.0))
        return (np.where(big, 2.0 * sz - 1.0, z), np.where(big, 1.0 / sz, 1.0),
                np.where(big, -0.5 / (sz * sz * sz), 0.0))
    if name == 'soft_l1':
        t = 1.0 + z
        return 2.0 * (np.sqrt(t) - 1.0), t ** -0.5, -0.5 * t ** -1.5
    if name == 'cauchy':
        return np.log1p(z), 1.0 / (1.0 + z), -1.0 / (1.0 + z) ** 2
    if name == 'arctan':
        return np.arctan(z), 1.0 / (1.0 + z * z), -2.0 * z / (1.0 + z * z) ** 2
    return z, np.ones_like(z), np.zeros_like(z)


def _robust(loss, f_scale, res, jac):
    """Cost and the rescaled residuals / Jacobian rows of scipy's robust least squares."""
    if loss == 'linear':
        return 0.5 * float(np.sum(res * res)), res, jac
    z = (res / f_scale) ** 2
    rho, d1, d2 = _loss(loss, z)
    cost = 0.5 * f_scale ** 2 * float(np.sum(rho))
    if jac is None:
        return cost, None, None
    js = d1 + 2.0 * d2 * z
    js = np.sqrt(np.maximum(js, np.finfo(float).eps))
    return cost, res * (d1 / js), jac * js[None]


class _LM:
    """Levenberg-Marquardt with a Schur-complement solve of the block-sparse normal equations."""

    def __init__(self, problem, free, loss, f_scale):
        self.pb = problem
        self.free = free
        self.free_idx = np.flatnonzero(free)
        self.rows = _jacobian_rows(free)
        self.loss = loss
        self.f_scale = f_scale

    def normal_equations(self, res, jac):
        """Return H_mm (nf, nf), H_mp (P, nf, 6), H_pp (P, 6, 6), g_m (nf,), g_p (P, 6)."""
        pb = self.pb
        nf = len(self.free_idx)
        rows = self.rows
        h_mm = np.zeros((nf, nf))
        h_mp = np.empty((pb.n_poses, nf, N_POSE))
        h_pp = np.empty((pb.n_poses, N_POSE, N_POSE))
        g_m = np.zeros(nf)
        g_p = np.empty((pb.n_poses, N_POSE))
        for p in range(pb.n_poses):
            sl = slice(pb.bounds[p], pb.bounds[p + 1])
            h = g = 0.0
            for row in range(2):
                a = jac[:, row, sl]     # every row (a view): the held ones are dropped below
                h = h + a @ a.T
                g = g + a @ res[row, sl]
            h, g = h[np.ix_(rows, rows)], g[rows]
            h_mm += h[:nf, :nf]
            h_mp[p] = h[:nf, nf:]
            h_pp[p] = h[nf:, nf:]
            g_m += g[:nf]
            g_p[p] = g[nf:]
        return h_mm, h_mp, h_pp, g_m, g_p

    @staticmethod
    def solve(neq, mu):
        """Damped step (Marquardt: mu * diag) by Schur complement; None if singular."""
        h_mm, h_mp, h_pp, g_m, g_p = neq
        d_mm = np.sqrt(np.maximum(np.diag(h_mm), 1e-300))
        d_pp = np.sqrt(np.maximum(np.diagonal(h_pp, axis1=1, axis2=2), 1e-300))
        # Jacobi scaling: unit diagonal
        a = h_mm / np.outer(d_mm, d_mm)
        b = h_mp / (d_mm[None, :, None] * d_pp[:, None, :])
        c = h_pp / (d_pp[:, :, None] * d_pp[:, None, :])
        gm = g_m / d_mm
        gp = g_p / d_pp
        eye_m = np.eye(len(d_mm))
        eye_p = np.eye(N_POSE)[None]
        try:
            c_inv = np.linalg.inv(c + mu * eye_p)
            cb = c_inv @ np.swapaxes(b, 1, 2)                 # (P, 6, nf)
            s = a + mu * eye_m - np.einsum('pmk,pkn->mn', b, cb)
            rhs = -gm + np.einsum('pmk,pk->m', b, np.einsum('pkl,pl->pk', c_inv, gp))
            dm = np.linalg.solve(s, rhs) if len(d_mm) else np.zeros(0)
            dp = -np.einsum('pkl,pl->pk', c_inv, gp + np.einsum('pmk,m->pk', b, dm))
        except np.linalg.LinAlgError:
            return None
        if not (np.all(np.isfinite(dm)) and np.all(np.isfinite(dp))):
            return None
        return dm / d_mm, dp / d_pp

    @staticmethod
    def covariance(neq):
        """(J^T J)^-1 of the model block, by Schur complement; None if singular."""
        h_mm, h_mp, h_pp, _, _ = neq
        try:
            c_inv = np.linalg.inv(h_pp)
            s = h_mm - np.einsum('pmk,pkl,pnl->mn', h_mp, c_inv, h_mp)
            d = np.sqrt(np.maximum(np.diag(s), 1e-300))
            return np.linalg.inv(s / np.outer(d, d)) / np.outer(d, d)
        except np.linalg.LinAlgError:
            return None

    def cluster_scores(self, neq, res, jac, clusters):
        """
        The clusters' scores e (nf, G), whose e e^T is the meat of the cluster-robust
        covariance; None when the pose blocks are singular.

        res (2, N), jac (16 + K, 2, N): the (robustified) residuals and Jacobian at the
        solution; clusters: (first ray of each cluster (G,), each ray's cluster (N,)) of rays
        whose errors may be correlated (RefinementProblem.clusters). e_c is the cluster's
        score J_c^T r_c with its pose part eliminated as in the Schur complement
        (g_m - H_mp H_pp^-1 g_p), so that S^-1 (sum e_c e_c^T) S^-1 is the model block of the
        full sandwich covariance. A row of e stays what it is when other parameters are held
        (the pose part is eliminated per parameter): :func:`_hold_prediction` uses that.
        """
        _, h_mp, h_pp, _, _ = neq
        first, _ = clusters
        # every row's score J^T r summed per cluster, then the free rows: (nf + 6, G)
        g = np.add.reduceat(np.einsum('krn,rn->kn', jac, res), first, axis=1)[self.rows]
        nf = len(self.free_idx)
        try:
            gain = np.einsum('pmk,pkl->pml', h_mp, np.linalg.inv(h_pp))   # (P, nf, 6)
        except np.linalg.LinAlgError:
            return None
        pose = self.pb.pose_index[first]
        return g[:nf] - np.einsum('cmk,kc->mc', gain[pose], g[nf:])

    def run(self, theta, poses, max_iterations, progress, first=None):
        """LM from (theta, poses); first: their (residuals, Jacobian) when already evaluated."""
        pb = self.pb
        res, jac = pb.evaluate(theta, poses) if first is None else first
        if not np.all(np.isfinite(res)):
            bad = int(np.count_nonzero(~np.isfinite(res).all(axis=1)))
            raise InvalidInputError(
                f'the initial model cannot project {bad} ray(s) (Eq. 18 has no inverse there); '
                'start from a closer initial solution')
        cost, rs, js = _robust(self.loss, self.f_scale, res, jac)
        neq = self.normal_equations(rs, js)
        last = rs, js
        spare = pb.spare_jacobian()     # the Jacobian no longer needed, whose memory a trial
        # reuses
        mu, nu = 1e-5, 2.0
        it = 0
        converged = False
        message = 'maximum number of iterations reached'
        while it < max_iterations:
            step = self.solve(neq, mu)
            if step is None:
                mu *= nu
                nu *= 2.0
                if mu > 1e20:
                    message = 'the damped normal equations are singular'
                    break
                continue
            dm, dp = step
            pred = -_quadratic_change(neq, dm, dp)     # predicted decrease
            if pred <= FTOL * cost:
                converged = True
                message = 'the predicted cost decrease is below ftol * cost'
                break
            theta_new = theta.copy()
            theta_new[self.free_idx] += dm
            poses_new = poses + dp
            it += 1
            # most LM trials are accepted: evaluate the Jacobian with the trial residuals
            res_new, jac_new = pb.evaluate(theta_new, poses_new, out=spare)
            finite = np.all(np.isfinite(res_new))
            cost_new, rs, js = (_robust(self.loss, self.f_scale, res_new, jac_new)
                                if finite else (np.inf, None, None))
            gain = (cost - cost_new) / pred
            if gain > 0:
                decrease = cost - cost_new
                theta, poses, cost, res = theta_new, poses_new, cost_new, res_new
                spare, jac = jac, jac_new
                neq = self.normal_equations(rs, js)
                last = rs, js
                mu *= max(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3)
                nu = 2.0
                if progress is not None:
                    progress(it, cost)
                if decrease <= FTOL * cost:
                    converged = True
                    message = 'the cost decrease is below ftol * cost'
                    break
            else:
                spare = jac_new
                mu *= nu
                nu *= 2.0
                if progress is not None:
                    progress(it, cost)
                if mu > 1e20:
                    message = 'no step reduces the cost (damping exhausted)'
                    break
        pb.recycle(spare)
        if last[1] is not jac:
            pb.recycle(jac)         # a robust loss: ``last`` holds the rescaled copy
        return theta, poses, res, neq, last, cost, it, converged, message


def _quadratic_change(neq, dm, dp):
    """Change of the cost's quadratic model g^T d + d^T H d / 2 for the step (dm, dp)."""
    h_mm, h_mp, h_pp, g_m, g_p = neq
    jd = (dm @ h_mm @ dm + 2.0 * np.einsum('m,pmk,pk->', dm, h_mp, dp)
          + np.einsum('pk,pkl,pl->', dp, h_pp, dp))
    return float(dm @ g_m + np.sum(dp * g_p) + 0.5 * jd)


def _run_trf(pb, free, theta, poses, loss, f_scale, max_iterations, progress):
    """scipy.optimize.least_squares with the analytic CSR Jacobian."""
    import scipy.optimize  # imported here: the default 'lm' path runs without scipy
    free_idx = np.flatnonzero(free)
    nf = len(free_idx)
    state = {'n': 0}

    def unpack(x):
        th = theta.copy()
        th[free_idx] = x[:nf]
        return th, x[nf:].reshape(-1, N_POSE)

    def fun(x):
        th, ps = unpack(x)
        r, _ = pb.evaluate(th, ps, jacobian=False)
        r = r.T.reshape(-1)
        r[~np.isfinite(r)] = 1e6
        return r

    def jac(x):
        th, ps = unpack(x)
        _, j = pb.evaluate(th, ps)
        state['n'] += 1
        if progress is not None:
            r = fun(x)
            progress(state['n'], 0.5 * float(r @ r))
        return pb.sparse_jacobian(np.nan_to_num(j), free)

    x0 = np.concatenate([theta[free_idx], poses.reshape(-1)])
    sol = scipy.optimize.least_squares(fun, x0, jac=jac, method='trf', x_scale='jac',
                                       loss=loss, f_scale=f_scale, max_nfev=max_iterations,
                                       ftol=1e-12, xtol=1e-12, gtol=1e-12)
    th, ps = unpack(sol.x)
    res, _ = pb.evaluate(th, ps, jacobian=False)
    return th, ps, res, int(sol.nfev), bool(sol.success), str(sol.message)


def _free_mask(fix):
    names = (fix,) if isinstance(fix, str) else tuple(fix)
    unknown = [n for n in names if n not in PARAMETER_NAMES]
    if unknown:
        raise InvalidInputError(
            f'fix names must be in {PARAMETER_NAMES}, got {unknown}')
    return np.array([n not in names for n in PARAMETER_NAMES]), tuple(
        n for n in PARAMETER_NAMES if n in names)


def _check_options(loss, f_scale, max_iterations, solver):
    if loss not in LOSSES:
        raise InvalidInputError(f'loss must be one of {LOSSES}, got {loss!r}')
    if not (np.isfinite(f_scale) and f_scale > 0):
        raise InvalidInputError(f'f_scale must be a positive number of pixels, got {f_scale}')
    if int(max_iterations) < 1:
        raise InvalidInputError(f'max_iterations must be >= 1, got {max_iterations}')
    if solver not in SOLVERS:
        raise InvalidInputError(f'solver must be one of {SOLVERS}, got {solver!r}')


def refine(obs, initial, *, fix=(), loss='linear', f_scale=1.0, max_iterations=MAX_ITERATIONS,
           progress=None, solver='lm', method=None, lens_type_terms='auto', problem=None):
    """
    Refine a model and board poses by minimising the reprojection error in measured pixels.

    obs: Observations; initial: an InitialSolution (or a CalibrationResult) with ``model``,
    ``rotation_vectors`` (P, 3), ``translations`` (P, 3) and ``pose_ids`` (P,) matching the
    poses of ``obs``. fix: parameter names (PARAMETER_NAMES) held at their initial values.
    loss, f_scale: 'linear' or a robust loss with its scale in pixels. max_iterations: solver
    iterations (LM steps tried; function evaluations for 'trf'). progress(iteration, cost):
    optional callback. solver: 'lm' (default, Schur-complement Levenberg-Marquardt) or 'trf'
    (scipy least_squares with the sparse analytic Jacobian). Returns a CalibrationResult;
    with a robust loss, :func:`calibrate` first reaches the least-squares minimum, then
    refines with the loss from there. When the solver stops without meeting its tolerance,
    ``converged`` is False and ``message`` says why (no exception: see the
    ``raise_on_failure`` option of :func:`calibrate`).
    lens_type_terms: 'auto' (default: 'affine' when ``obs.lens_type`` holds >= 2 types, else
    'none'), 'none', 'offset', 'affine', 'affine-radial', 'affine-view' or
    'affine-radial-view' (the '-view' modes add a per-type view-plane scale, focused models
    only), 'affine-slope' or 'affine-radial-slope' (a per-type k_3, k_4: rows at lattice
    centres): per-micro-lens-type terms estimated jointly (module docstring); they start from
    ``initial.lens_types`` when it has them, else from zero, and come back in
    ``result.lens_types`` with their standard deviations. problem: the (grouped, lens-type
    terms, RefinementProblem) of :func:`_problem` for this ``obs`` (refits of one table share
    it); built here when None.
    """
    return _refine(obs, initial, fix=fix, loss=loss, f_scale=f_scale,
                   max_iterations=max_iterations, progress=progress, solver=solver,
                   method=method, lens_type_terms=lens_type_terms, problem=problem)[0]


class _Solution:
    """
    Where a refinement stopped, for the refits of :func:`calibrate`: theta (10 + K,), poses
    (P, 6) in sorted pose order, free (10 + K,) bool, neq (the normal equations there),
    cost, ``summary`` (the arguments of error_summary, for a result made without it),
    scores (nf, G) (the clusters' scores there, or None) and sizes (residuals, unknowns).
    """

    def __init__(self, theta, poses, free, neq, cost, summary, scores, sizes):
        self.theta, self.poses, self.free = theta, poses, free
        self.neq, self.cost, self.summary = neq, cost, summary
        self.scores, self.sizes = scores, sizes


def _refine(obs, initial, *, fix=(), loss='linear', f_scale=1.0,
            max_iterations=MAX_ITERATIONS, progress=None, solver='lm', method=None,
            lens_type_terms='auto', problem=None, start=None, summary=True):
    """
    :func:`refine`, returning (CalibrationResult, _Solution).

    start: (theta (10 + K,), poses (P, 6) in sorted pose order, (residuals, Jacobian) there)
    to start from instead of ``initial``'s model and poses (``initial`` still
    names the closed-form model). summary False: the result's ray and per-pose / per-view
    errors are left out (NaN, empty) until :func:`_with_summary` adds them; its residuals and
    RMS reprojection error are there.
    """
    if problem is None:
        problem = _problem(obs, lens_type_terms)
    grouped, lens_type_terms, pb = problem
    _check_options(loss, f_scale, max_iterations, solver)
    free, fixed = _free_mask(fix)
    poses = _start_poses(initial, grouped)
    theta = initial.model.to_vector()
    if pb.types is not None:
        theta = np.concatenate([theta, pb.types.initial(getattr(initial, 'lens_types', None))])
        free = np.concatenate([free, np.ones(pb.types.size, dtype=bool)])
    lm = _LM(pb, free, loss, f_scale)
    first = None
    if start is not None:
        theta, poses, first = start
    if solver == 'lm':
        theta, poses, res, neq, robust, cost_f, it, converged, message = lm.run(
            theta, poses, int(max_iterations), progress, first=first)
    else:
        theta, poses, res, it, converged, message = _run_trf(
            pb, free, theta, poses, loss, f_scale, int(max_iterations), progress)
        # the covariance from the final (undamped) Jacobian ('lm' has it from its last
        # accepted step)
        res_f, jac_f = pb.evaluate(theta, poses)
        cost_f, rs, js = _robust(loss, f_scale, res_f, jac_f)
        neq, robust = lm.normal_equations(rs, js), (rs, js)
    cov, scores = _honest_covariance(lm, pb, neq, robust, cost_f)
    pb.recycle(robust[1])
    stddev, model_cov = _model_stddev(cov, free)
    lens_types = None
    if pb.types is not None:
        n_model = int(free[:N_MODEL].sum())
        lens_types = pb.types.terms_with_std(
            theta[N_MODEL:], None if cov is None else cov[n_model:, n_model:], theta[:N_MODEL])
        # decoded rays (ray reprojection error) see the type-corrected (u, v)
        obs = replace(obs, ijuv=lens_types.corrected_ijuv(obs.ijuv, obs.lens_type))
    model = MPCModel.from_vector(theta[:N_MODEL])
    residuals = np.empty((pb.n, 2))
    residuals[pb.order] = -res.T                      # measured - predicted, input order
    rv_f, tr_f = poses[:, :3].copy(), poses[:, 3:].copy()
    args = (model, obs, rv_f, tr_f, grouped.pose_ids, residuals)
    errors = error_summary(*args) if summary else _residual_summary(residuals)
    init_model = getattr(initial, 'initial', None)
    init_model = initial.model if not isinstance(init_model, MPCModel) else init_model
    return CalibrationResult(
        model=model, initial=init_model, rotation_vectors=rv_f, translations=tr_f,
        pose_ids=grouped.pose_ids.copy(), stddev=stddev, iterations=int(it),
        converged=bool(converged), message=message, fixed=fixed,
        method=method if method is not None else getattr(initial, 'method', 'exact'),
        loss=loss, cost=float(cost_f), lens_types=lens_types, covariance=model_cov,
        **errors), _Solution(theta, poses, free, neq, float(cost_f), args, scores,
                             (2 * pb.n, int(free.sum()) + N_POSE * pb.n_poses))


def _start_poses(initial, grouped):
    """``initial``'s poses as (P, 6) [rotation vector, translation] in sorted pose-id order;
    InvalidInputError unless they are finite (P, 3) arrays for the observed pose ids."""
    rv = np.asarray(initial.rotation_vectors, dtype=float)
    tr = np.asarray(initial.translations, dtype=float)
    ids = np.asarray(initial.pose_ids)
    if rv.shape != (len(ids), 3) or tr.shape != (len(ids), 3):
        raise InvalidInputError(
            f'initial poses must be (P, 3) with P = {len(ids)} pose ids, got rotation_vectors '
            f'{rv.shape} and translations {tr.shape}')
    if not np.array_equal(np.sort(ids), grouped.pose_ids):
        raise InvalidInputError(
            f'initial pose ids {np.sort(ids).tolist()} differ from the observed pose ids '
            f'{grouped.pose_ids.tolist()}')
    if not (np.all(np.isfinite(rv)) and np.all(np.isfinite(tr))):
        raise InvalidInputError('initial poses contain NaN or inf')
    perm = np.argsort(ids)
    return np.hstack([rv[perm], tr[perm]])


def _model_stddev(cov, free):
    """({name: sigma} of PARAMETER_NAMES, NaN where held or no covariance; the free model
    parameters' covariance block (F, F) or None) from the covariance ``cov`` of the free
    parameters (``free`` (10 + K,) bool, the model's first)."""
    stddev = {n: float('nan') for n in PARAMETER_NAMES}
    if cov is None:
        return stddev, None
    n_model = int(free[:N_MODEL].sum())
    for k, idx in enumerate(np.flatnonzero(free[:N_MODEL])):
        stddev[PARAMETER_NAMES[idx]] = float(np.sqrt(max(cov[k, k], 0.0)))
    return stddev, cov[:n_model, :n_model].copy()


def _residual_summary(residuals):
    """The error fields of a result made without its summary: the residuals (N, 2) px and
    their RMS; the ray and per-pose / per-view errors NaN or empty (:func:`_with_summary`)."""
    return dict(residuals_px=residuals, rms_ray_reprojection_mm=float('nan'),
                rms_reprojection_px=float(np.sqrt(np.mean(
                    np.einsum('nk,nk->n', residuals, residuals)))),
                per_pose_rms_px=np.empty(0), view_ids=np.empty((0, 2)),
                per_view_rms_px=np.empty(0))


def _with_summary(result, solution):
    """``result`` (made with summary=False) with its error summary from ``solution``."""
    return replace(result, **error_summary(*solution.summary))


def _problem(obs, lens_type_terms, grouped=None):
    """(grouped, lens-type terms resolved, RefinementProblem) of a validated ``obs``
    (grouped: validate_observations(obs) when the caller has it)."""
    if grouped is None:
        grouped = validate_observations(obs)
    lens_type_terms = _lens_type_terms(obs, lens_type_terms)
    return grouped, lens_type_terms, RefinementProblem(obs, grouped, lens_type_terms)


def _honest_covariance(lm, pb, neq, robust, cost):
    """
    (covariance (nf, nf) of the free parameters or None when singular, the clusters' scores
    (nf, G) or None): :func:`_covariance_from` at the solution.

    neq: the normal equations at the solution; robust: its robustified (residuals (2, N),
    Jacobian (16 + K, 2, N)), which built them.
    """
    rs, js = robust
    scores = lm.cluster_scores(neq, rs, js, pb.clusters())
    return _covariance_from(neq, scores, cost, 2 * pb.n, len(lm.free_idx) + N_POSE * pb.n_poses
                            ), scores


def _covariance_from(neq, scores, cost, n_res, n_unknown):
    """
    Covariance (nf, nf) of the free parameters, or None when singular.

    neq: the normal equations; scores (nf, G): the clusters' scores (:meth:`_LM.cluster_scores`)
    or None; cost at the solution; n_res residuals, n_unknown unknowns (poses included).

    The larger (per parameter, by the larger diagonal) of two estimates:

    - the classic (J^T J)^-1 s^2, right for independent errors of every ray;
    - the cluster-robust sandwich S^-1 (sum_c e_c e_c^T) S^-1 clustered by (pose, board
      point), with the small-sample factor G/(G-1) (N-1)/(N-K) for G clusters, N residuals,
      K unknowns.

    A corner detector's error is largely common to the views of one corner (the views see
    the same image patch): on such data the classic estimate is several times too small
    (measured |error|/sigma up to 13 with a per-corner offset of 0.13 px) while the sandwich
    stays honest; on independent errors both agree.
    """
    s_inv = _LM.covariance(neq)
    if s_inv is None:
        return None
    sigma2 = 2.0 * cost / max(n_res - n_unknown, 1)
    classic = s_inv * sigma2
    if scores is None:
        return classic
    n_clusters = scores.shape[1]
    factor = (n_clusters / max(n_clusters - 1, 1)) * (n_res - 1) / max(n_res - n_unknown, 1)
    sandwich = factor * (s_inv @ (scores @ scores.T) @ s_inv)
    # scale the sandwich up where the classic diagonal is larger (keeps it a covariance)
    d = np.sqrt(np.maximum(np.diag(classic), 0.0) / np.maximum(np.diag(sandwich), 1e-300))
    d = np.maximum(d, 1.0)
    return sandwich * np.outer(d, d)


def _lens_type_terms(obs, terms):
    """Resolve the ``lens_type_terms`` option against the table's lens types."""
    if terms == 'auto':     # one type only (or none): nothing to estimate
        single = obs.lens_type is None or np.unique(obs.lens_type).size < 2
        return 'none' if single else 'affine'
    if terms not in LENS_TYPE_TERMS:
        raise InvalidInputError(
            f"lens_type_terms must be 'auto' or one of {LENS_TYPE_TERMS}, got {terms!r}")
    if terms != 'none' and obs.lens_type is None:
        raise InvalidInputError(
            f'lens_type_terms={terms!r} needs observations with a lens_type column')
    return terms


def _initial_solution(obs, method, grouped=None):
    """
    The closed form by ``method``; 'exact' falls back to 'paper' when its B is not determined.

    The exact variant solves for more unknowns (the shear) and its B can lose positive
    definiteness under heavy noise where the paper's B, with fewer unknowns, is still fine (seen
    with boards at several depths from 0.8 px of noise on). A pose set that neither method can
    use still raises the exact method's DegenerateConfigurationError.
    """
    try:
        return closed_form(obs, method=method, grouped=grouped)
    except DegenerateConfigurationError as exc:
        if method != 'exact':
            raise
        try:
            return closed_form(obs, method='paper', grouped=grouped)
        except DegenerateConfigurationError:
            raise exc from None


def _retry_from_paper(obs, grouped, solve, fixed, loss, result, init):
    """(result, initial solution, method): a refinement from the exact closed form that did not
    converge retried from the paper's, kept when that one converges to a lower RMS. The exact
    form's shear estimate can start the refinement where it crawls (a focused set of 8 planned
    poses: k_4 17 x the truth, RMS 4.6 px after the iterations; from the paper's: 0.14 px)."""
    try:
        paper = closed_form(obs, method='paper', grouped=grouped)
    except DegenerateConfigurationError:
        return result, init, 'exact'
    other = solve(paper, fixed, loss)
    if other.converged and other.rms_reprojection_px < result.rms_reprojection_px:
        return other, paper, 'paper'
    return result, init, 'exact'


MAX_RMS_PX = 1e3   # no camera this model describes leaves a reprojection error this large


SIGNIFICANCE = 3.0
"""A distortion term is kept free only when |value| exceeds this many standard deviations."""
HOLD_ORDER = ('k_2', 'k_1', 'k_3', 'k_4')
"""Distortion terms tested for significance; k_1 only once k_2 is held (nested radial terms)."""
HOLD_RMS_GROWTH = 0.05
"""Largest relative growth of the RMS reprojection error a held term may cause."""
RADIAL_NAMES = ('k_1', 'k_2')
SCALE_NAMES = ('k_u', 'k_v', 'u_0', 'v_0')


def _radial_inflation(result, names=SCALE_NAMES):
    """
    How much freeing k_1, k_2 multiplies the standard deviation of each of ``names``: the
    square root of the ratio of its marginal variance to its variance with k_1, k_2 held (the
    Schur complement of the covariance). {name: factor >= 1}; {} without a covariance.
    """
    free = list(result.free_names())
    cov = result.covariance
    held = [free.index(n) for n in RADIAL_NAMES if n in free]
    if cov is None or len(cov) != len(free) or not held:
        return {}
    rest = [k for k in range(len(free)) if k not in held]
    cond = cov[np.ix_(rest, rest)] - cov[np.ix_(rest, held)] @ np.linalg.solve(
        cov[np.ix_(held, held)], cov[np.ix_(held, rest)])
    return {n: float(np.sqrt(cov[free.index(n), free.index(n)]
                             / cond[rest.index(free.index(n)), rest.index(free.index(n))]))
            for n in names if n in free}


def _hold_radial_of_focused(obs, result, fixed, refit):
    """
    Focused cameras: hold k_1, k_2 at 0. Eq. 18's radial terms act on x = k_u u + u_0,
    y = k_v v + v_0 and, with (u, v) the offset in a micro-image, (x, y) spans only one
    micro-image's cone of directions about the principal ray's offset (u_0, v_0): there
    1 + k_1 r^2 + k_2 r^4 is nearly a rescaling of k_u, k_v, u_0, v_0 and not a main-lens
    distortion (which would vary over the field, with s, t). Free, they chase any small
    curvature the rows carry: on a simulated Galilean camera 0.01 px of error at the
    micro-images' rims made k_1 read 3.7 sigma and moved k_u by -1.36 % (3.7 sigma; 0.02 %
    held); on the real R12 rows freeing them doubles sigma(k_u) for 0.0007-0.0016 px of RMS.
    A hold that makes the RMS grow by more than HOLD_RMS_GROWTH is undone (the data needed
    them).
    Returns (result, fixed, {name: reason}).
    """
    names = [n for n in RADIAL_NAMES if n not in fixed]
    if not names:
        return result, fixed, {}
    m = result.model
    r = np.hypot(m.k_u * obs.ijuv[:, 2] + m.u_0, m.k_v * obs.ijuv[:, 3] + m.v_0)
    factor = max(_radial_inflation(result).values(), default=np.nan)
    trial_fixed = tuple(n for n in PARAMETER_NAMES if n in set(fixed) | set(names))
    # start from the rescaling the terms stand for (set to 0 alone, a refit can settle on a
    # poorer minimum: 1.17 px against 0.949 px on the R12 rows)
    g = float(np.mean(1.0 + m.k_1 * r ** 2 + m.k_2 * r ** 4))
    start = m.replace(k_u=g * m.k_u, k_v=g * m.k_v, u_0=g * m.u_0, v_0=g * m.v_0,
                      **{n: 0.0 for n in names})
    trial = refit(replace(result, model=start), trial_fixed)
    if trial.rms_reprojection_px > (1.0 + HOLD_RMS_GROWTH) * result.rms_reprojection_px:
        return result, fixed, {}
    held = {}
    for n in names:
        held[n] = (f'focused camera: the radial terms act on one micro-image\'s directions '
                   f'(r = {r.min():.3g}..{r.max():.3g}), where they mostly rescale k_u, k_v, '
                   f'u_0, v_0 (free: {n} = {float(getattr(m, n)):.3g} +- '
                   f'{float(result.stddev.get(n, np.nan)):.2g}, sigma of the scales x '
                   f'{factor:.2f}, RMS {result.rms_reprojection_px:.4g} px against '
                   f'{trial.rms_reprojection_px:.4g} held): held at 0 (--all-distortion '
                   f'frees them)')
    return trial, trial_fixed, held


HELD_START_TRUST = 2.0
"""A held term's warm start is used when its cost rises by at most this many times the rise
the quadratic model predicts (else the refit starts from the solution with the term at 0)."""


def _held_step(solution, names):
    """
    The minimum of the cost's quadratic model at ``solution`` (its Gauss-Newton normal
    equations, over the model and every pose together) with ``names`` at 0: (theta (10 + K,),
    poses (P, 6), the cost's predicted rise, the free positions kept (list)), or None when a
    name is not free or the step is singular.
    """
    free_idx = list(np.flatnonzero(solution.free))
    idx = [PARAMETER_NAMES.index(n) for n in names]
    if not all(i in free_idx for i in idx):
        return None
    ks = [free_idx.index(i) for i in idx]
    keep = [m for m in range(len(free_idx)) if m not in ks]
    d_held = -solution.theta[idx]
    h_mm, h_mp, h_pp, g_m, g_p = solution.neq
    # the step with d theta_K = -theta_K fixed: the rest solves H_rr d_r = -(g_r + H_rK d_K)
    step = _LM.solve((h_mm[np.ix_(keep, keep)], h_mp[:, keep, :], h_pp,
                      g_m[keep] + h_mm[np.ix_(keep, ks)] @ d_held,
                      g_p + np.einsum('pkl,k->pl', h_mp[:, ks, :], d_held)), 0.0)
    if step is None:
        return None
    dm = np.empty(len(free_idx))
    dm[keep], dm[ks] = step[0], d_held
    theta = solution.theta.copy()
    theta[free_idx] += dm
    theta[idx] = 0.0
    return theta, solution.poses + step[1], _quadratic_change(solution.neq, dm, step[1]), keep


def _held_start(pb, solution, names, loss, f_scale):
    """
    Warm start of the refit with ``names`` (one name or a tuple) held at 0, or None.

    :func:`_held_step`: the refit's first step taken with the Jacobian already there. Returns
    (theta (10 + K,), poses (P, 6), (residuals, Jacobian) there) when the cost there is
    finite and within HELD_START_TRUST times the predicted rise; None when the step is
    singular, leaves the model's domain or the quadratic model does not hold there.
    """
    step = _held_step(solution, (names,) if isinstance(names, str) else tuple(names))
    if step is None:
        return None
    theta, poses, rise, _ = step
    try:
        MPCModel.from_vector(theta[:N_MODEL])
    except InvalidInputError:
        return None
    with np.errstate(all='ignore'):             # a step out of the domain: refused below
        res, jac = pb.evaluate(theta, poses, out=pb.spare_jacobian())
    cost = _robust(loss, f_scale, res, None)[0] if np.all(np.isfinite(res)) else np.inf
    if not cost - solution.cost <= HELD_START_TRUST * max(rise, 0.0) + 1e-12 * solution.cost:
        pb.recycle(jac)
        return None
    return theta, poses, (res, jac)


HOLD_MARGIN = 0.2
HOLD_LINEARITY = 0.02
"""A hold decided without its refit (:func:`_hold_prediction`) needs predicted ratios
HOLD_MARGIN (relatively) from SIGNIFICANCE, a predicted RMS growth of HOLD_MARGIN times
HOLD_RMS_GROWTH at most, and the step's cost rise within HOLD_LINEARITY of the predicted."""


def _hold_prediction(pb, solution, names, candidates, loss, f_scale):
    """
    What the refit holding ``names`` at 0 will report, from ``solution``'s linearisation:
    {candidate: (value, sigma)} of the distortion terms ``candidates`` still free, and the
    relative RMS growth; None when singular or when the cost's quadratic model does not hold
    along the step (its actual rise differs from the predicted by more than HOLD_LINEARITY).

    The values: :func:`_held_step`. The sigmas: :func:`_covariance_from` with the held
    parameters' rows and columns dropped from the normal equations and the clusters' scores,
    and the cost raised by the predicted rise. Linearised at ``solution`` rather than at the
    refit's minimum, one held term's sigma away: where the quadratic model holds, the values
    and sigmas differ from the refit's by a few in 1e3 (the Jacobian's change over that
    step), far inside HOLD_MARGIN.
    """
    step = _held_step(solution, names)
    if step is None:
        return None
    theta, poses, rise, keep = step
    with np.errstate(all='ignore'):             # a step out of the domain: refused below
        res, _ = pb.evaluate(theta, poses, jacobian=False)
    cost = _robust(loss, f_scale, res, None)[0] if np.all(np.isfinite(res)) else np.inf
    if not abs(cost - solution.cost - rise) <= HOLD_LINEARITY * abs(rise):
        return None
    h_mm, h_mp, h_pp, g_m, g_p = solution.neq
    neq = (h_mm[np.ix_(keep, keep)], h_mp[:, keep, :], h_pp, g_m[keep], g_p)
    scores = None if solution.scores is None else solution.scores[keep]
    n_res, n_unknown = solution.sizes
    cov = _covariance_from(neq, scores, solution.cost + max(rise, 0.0), n_res,
                           n_unknown - len(names))
    if cov is None:
        return None
    free_kept = np.flatnonzero(solution.free)[keep]
    out = {}
    for n in candidates:
        k = int(np.flatnonzero(free_kept == PARAMETER_NAMES.index(n))[0])
        out[n] = float(theta[PARAMETER_NAMES.index(n)]), float(np.sqrt(max(cov[k, k], 0.0)))
    growth = np.sqrt((solution.cost + max(rise, 0.0)) / solution.cost) - 1.0
    return out, float(growth)


def _hold_undetermined(obs, result, fixed, refit, predict=None):
    """
    Hold at 0, one at a time, the distortion terms the data do not determine.

    Like OpenCV's fixed-K3 default, but decided by the data: of the free terms that may be
    tested (k_2 before k_1; k_3, k_4 on their own), the least significant with
    |value| < SIGNIFICANCE * sigma is set to 0 and held, and the model refined again, until
    every free term is significant. A hold that makes the RMS reprojection error grow by more
    than HOLD_RMS_GROWTH is undone and the term kept free: the data did determine it, its
    sigma (linearised at a poor minimum) said otherwise (measured: a 4-pose focused
    calibration whose k_3 = 1 / Z_f read 2 sigma went from 0.27 px to 1.8 px held at 0).
    refit(initial, fixed, hold) refines from a result (hold: the name(s) just held, whose
    refit may start from ``initial``'s solution moved by :func:`_held_start`).
    predict(result, names, candidates): :func:`_hold_prediction` at ``result``'s solution, or
    None. When it shows the next decision beyond doubt (:func:`_next_hold`), the two holds
    share one refit; that refit's RMS growth then vouches for both (each hold's growth is at
    most the pair's). Returns (result, {name: reason}).
    """
    held, kept = {}, set()
    while True:
        free = _hold_candidates(fixed, kept)
        values = {n: (float(getattr(result.model, n)), float(result.stddev.get(n, np.nan)))
                  for n in free}
        ratios = {n: _ratio(*values[n]) for n in free}
        weak = [n for n in free if ratios[n] < SIGNIFICANCE]
        if not weak:
            return result, held
        name = min(weak, key=lambda n: ratios[n])
        reason = _hold_reason(name, *values[name])
        trial_fixed = tuple(n for n in PARAMETER_NAMES if n in set(fixed) | {name})
        ahead = None
        if predict is not None:
            ahead = _next_hold(predict, result, name, trial_fixed, kept)
        if ahead is not None:
            pair_fixed = tuple(n for n in PARAMETER_NAMES if n in set(trial_fixed) | {ahead[0]})
            trial = refit(result, pair_fixed, (name, ahead[0]))
            limit = 1.0 + HOLD_MARGIN * HOLD_RMS_GROWTH
            if trial.rms_reprojection_px <= limit * result.rms_reprojection_px:
                held[name], held[ahead[0]] = reason, ahead[1]
                fixed, result = pair_fixed, trial
                continue
        trial = refit(result, trial_fixed, name)
        if trial.rms_reprojection_px > (1.0 + HOLD_RMS_GROWTH) * result.rms_reprojection_px:
            kept.add(name)
            continue
        held[name] = reason
        fixed, result = trial_fixed, trial


def _hold_candidates(fixed, kept):
    """The distortion terms :func:`_hold_undetermined` tests next (HOLD_ORDER)."""
    return [n for n in HOLD_ORDER if n not in fixed and n not in kept
            and not (n == 'k_1' and 'k_2' not in fixed)]


def _ratio(value, sigma):
    """|value| / sigma; 0 without a finite positive sigma (the term is then held)."""
    return abs(value) / sigma if np.isfinite(sigma) and sigma > 0 else 0.0


def _hold_reason(name, value, sigma):
    """The reason ``result.held`` gives for a term held at 0."""
    return (f'not determined by the data ({name} = {value:.3g} +- {sigma:.2g}, '
            f'{_ratio(value, sigma):.1f} sigma < {SIGNIFICANCE:g}): held at 0')


def _next_hold(predict, result, name, trial_fixed, kept):
    """
    (next name, its reason) that :func:`_hold_undetermined` would hold after the refit with
    ``name`` held, when :func:`_hold_prediction` puts it beyond doubt; else None. Beyond
    doubt: a predicted RMS growth within HOLD_MARGIN of HOLD_RMS_GROWTH, the least significant
    candidate at most (1 - HOLD_MARGIN) SIGNIFICANCE sigma and every other one at least
    (1 + HOLD_MARGIN) SIGNIFICANCE sigma.
    """
    candidates = _hold_candidates(trial_fixed, kept)
    if not candidates:
        return None
    predicted = predict(result, (name,), candidates)
    if predicted is None or not predicted[1] <= HOLD_MARGIN * HOLD_RMS_GROWTH:
        return None
    if not all(np.isfinite(v) and np.isfinite(sd) and sd > 0 for v, sd in predicted[0].values()):
        return None                 # a sigma the refit would have to settle
    ratios = {n: _ratio(*v) for n, v in predicted[0].items()}
    nxt = min(candidates, key=lambda n: ratios[n])
    if not (ratios[nxt] <= (1.0 - HOLD_MARGIN) * SIGNIFICANCE
            and all(ratios[n] >= (1.0 + HOLD_MARGIN) * SIGNIFICANCE
                    for n in candidates if n != nxt)):
        return None
    return nxt, _hold_reason(nxt, *predicted[0][nxt])


def calibrate(obs, *, method='exact', distortion='auto', fix=(), loss='linear', f_scale=1.0,
              max_iterations=MAX_ITERATIONS, progress=None, solver='lm', raise_on_failure=False,
              lens_type_terms='auto', camera_type=None):
    """
    Closed form then refinement: the full calibration of an observation table.

    obs: Observations of a planar board (Z = 0), >= 2 poses. method: closed form 'exact'
    (default; falls back to 'paper' when its B is not positive definite, and
    ``result.method`` says which started the refinement) or 'paper'. distortion: 'auto'
    (default) refines k_1..k_4 and then holds at 0, one by one, those the data do not
    determine (|value| < 3 sigma; k_2 before k_1), each named with its reason in
    ``result.held`` (two holds share one refit when the first one's linearisation puts the
    second beyond doubt; that reason then quotes the predicted value and sigma:
    :func:`_hold_undetermined`), and for a focused camera holds k_1, k_2 at 0 (they cannot model a
    main-lens distortion there and rescale k_u, u_0: :func:`_hold_radial_of_focused`);
    True refines all four; False holds k_1..k_4 at 0 (the six intrinsics
    only, as in the paper's simulation). k_3, k_4 start from the closed form's shear
    estimate. fix: further names
    from PARAMETER_NAMES held at their closed-form values. loss, f_scale, max_iterations,
    progress, solver: see :func:`refine`.
    Returns a CalibrationResult. A refinement that stops without converging returns with
    ``converged`` False and the reason in ``message``; with ``raise_on_failure=True`` it raises
    ConvergenceError instead; an RMS reprojection error over MAX_RMS_PX (absurd: wrong units
    or columns) always raises ConvergenceError. lens_type_terms: see :func:`refine` (the
    closed form ignores the types; the refinement estimates their terms jointly). camera_type:
    'conventional', 'focused' or None (guessed from the table:
    :func:`lf_mpc_calib.camera.observations.guess_camera_type`).
    """
    _lens_type_terms(obs, lens_type_terms)
    if camera_type is None:
        camera_type = guess_camera_type(obs)
    if camera_type not in CAMERA_TYPES:
        raise InvalidInputError(f'camera_type must be one of {CAMERA_TYPES} or None, '
                                f'got {camera_type!r}')
    if distortion not in ('auto', True, False):
        raise InvalidInputError(f"distortion must be 'auto', True or False, got {distortion!r}")
    free, fixed = _free_mask(fix)
    _check_options(loss, f_scale, max_iterations, solver)
    grouped = validate_observations(obs, planar=True)     # once for every solve below
    init = _initial_solution(obs, method, grouped)
    if not distortion:
        init, fixed = _without_distortion(init, fixed)
    refits = _Refits(obs, _problem(obs, lens_type_terms, grouped), init.method, loss,
                     dict(f_scale=f_scale, max_iterations=max_iterations, progress=progress,
                          solver=solver, lens_type_terms=lens_type_terms))
    if loss != 'linear':
        # a robust loss from a poor start can settle on the wrong minimum (outliers also
        # spoil the closed form): reach the least-squares minimum first, then robustify
        first = refits.solve(init, fixed, 'linear')
        robust = refits.solve(first, fixed, loss)
        result = refits.relabel(robust, initial=init.model,
                                iterations=first.iterations + robust.iterations)
    else:
        result = refits.solve(init, fixed, loss)
    if not result.converged and refits.method == 'exact':
        result, init, refits.method = _retry_from_paper(obs, grouped, refits.solve, fixed, loss,
                                                        result, init)
        result = refits.relabel(result, method=refits.method)
    held = {}
    if distortion == 'auto':
        radial = {}
        if camera_type == 'focused':
            result, fixed, radial = _hold_radial_of_focused(obs, result, fixed, refits.refit)
        result, held = _hold_undetermined(obs, result, fixed, refits.refit, refits.predict)
        held = {**radial, **held}
    result = _with_summary(result, refits.solution(result))
    if held:
        result = replace(result, initial=init.model, held=held)
    _check_refined(result, raise_on_failure)
    return result


def _without_distortion(init, fixed):
    """(the closed-form solution ``init`` with k_1..k_4 at 0, ``fixed`` with them held)."""
    zero = {n: 0.0 for n in DISTORTION_NAMES}
    init = type(init)(model=init.model.replace(**zero), rotation_vectors=init.rotation_vectors,
                      translations=init.translations, pose_ids=init.pose_ids,
                      method=init.method, conditioning=init.conditioning)
    return init, tuple(n for n in PARAMETER_NAMES if n in set(fixed) | set(DISTORTION_NAMES))


class _Refits:
    """
    The refinements of one :func:`calibrate` call on one problem (shared by all of them),
    each result's _Solution kept by the result's id: for warm starts of the refits that hold
    a term (:func:`_held_start`), their predictions (:func:`_hold_prediction`) and the summary.
    ``method``: the closed form the refinements started from (changed by a retry).
    """

    def __init__(self, obs, problem, method, loss, options):
        self.obs, self.problem, self.method, self.loss = obs, problem, method, loss
        self.options = options      # f_scale, max_iterations, progress, solver, lens_type_terms
        self._solutions = {}        # id(result): (result, its _Solution)

    def solve(self, start, held_fixed, solve_loss, begin=None):
        """The refinement from ``start`` (a result or closed-form solution) with
        ``held_fixed`` held, under ``solve_loss``; ``begin``: a warm start or None."""
        r, sol = _refine(self.obs, start, fix=held_fixed, loss=solve_loss, method=self.method,
                         problem=self.problem, start=begin, summary=False, **self.options)
        self._solutions[id(r)] = (r, sol)
        return r

    def relabel(self, result, **changes):
        """``result`` with ``changes`` (dataclasses.replace), its solution kept with it."""
        changed = replace(result, **changes)
        self._solutions[id(changed)] = (changed, self.solution(result))
        return changed

    def solution(self, result):
        """The _Solution of a result this object refined."""
        return self._solutions[id(result)][1]

    def refit(self, start, held_fixed, hold=None):
        """Refine ``start`` again with ``held_fixed`` held; ``hold``: the term(s) newly held
        at 0, started warm from the linearised solution where it can."""
        begin = None
        if hold is not None:
            begin = _held_start(self.problem[2], self.solution(start), hold, self.loss,
                                self.options['f_scale'])
            if begin is None:
                names = (hold,) if isinstance(hold, str) else hold
                start = replace(start, model=start.model.replace(**{n: 0.0 for n in names}))
        return self.solve(start, held_fixed, self.loss, begin)

    def predict(self, start, names, candidates):
        """:func:`_hold_prediction` of holding ``names`` from ``start``'s solution."""
        return _hold_prediction(self.problem[2], self.solution(start), names, candidates,
                                self.loss, self.options['f_scale'])


def _check_refined(result, raise_on_failure):
    """ConvergenceError when the refinement did not converge (with ``raise_on_failure``) or
    left an RMS reprojection error above MAX_RMS_PX (always: wrong units or columns)."""
    if raise_on_failure and not result.converged:
        raise ConvergenceError(
            f'the refinement did not converge after {result.iterations} iterations: '
            f'{result.message} (RMS {result.rms_reprojection_px:.3g} px)')
    if not result.rms_reprojection_px <= MAX_RMS_PX:
        raise ConvergenceError(
            f'RMS reprojection error {result.rms_reprojection_px:.3g} px after the refinement '
            f'(limit {MAX_RMS_PX:g} px): the model does not describe these observations; '
            f'expected (i, j, u, v) in pixels and the board in metres (check the units and '
            f'the columns of the table)')


def pose_information(obs, model, rotation_vectors, translations, *, fix=(), clustered=False):
    """
    Fisher information of the free model parameters that each pose of ``obs`` carries.

    obs: Observations (pose ids sorted ascending match the rows of rotation_vectors,
    translations (P, 3)); model: the MPCModel the Jacobian is evaluated at; fix: names held.
    The pose's own six parameters are eliminated (Schur complement, as in the covariance of
    :func:`refine`), so the informations of independent poses add up and
    inv(sum) * sigma^2 is the covariance of the free parameters for corner noise sigma px.
    Returns (names of the free parameters, (P, nf, nf) information per pose, unit noise).
    clustered: also return (P, nf, nf) sum_c (A_c^T A_c) over the pose's clusters (one board
    corner in every view, as :meth:`RefinementProblem.clusters`), A_c (2, nf) the sum of the
    cluster's pose-eliminated Jacobian rows per coordinate: the meat an error common to the
    views of a corner (unit size per coordinate) adds to the cluster-robust covariance.
    """
    grouped = group_by_pose(obs)        # one pose is fine here: its information alone
    free, _ = _free_mask(fix)
    pb = RefinementProblem(obs, grouped)
    poses = np.hstack([np.asarray(rotation_vectors, float), np.asarray(translations, float)])
    if poses.shape != (pb.n_poses, N_POSE):
        raise InvalidInputError(f'need {pb.n_poses} poses (P, 3) for the observed pose ids, '
                                f'got {poses.shape[0]}')
    _, jac = pb.evaluate(model.to_vector(), poses)
    sel = jac[_jacobian_rows(free)]                                  # (nf + 6, 2, N)
    nf = int(free.sum())
    info = np.empty((pb.n_poses, nf, nf))
    common = np.empty_like(info) if clustered else None
    first = pb.clusters()[0] if clustered else None
    for p in range(pb.n_poses):
        a = sel[:, :, pb.bounds[p]:pb.bounds[p + 1]].reshape(nf + N_POSE, -1).T
        # the model columns with their part in the pose's span projected out (QR): the
        # Schur complement H_mm - H_mp H_pp^-1 H_pm without its cancellation, which left
        # round-off of 1e-10 of the diagonal, as large as a one-pose set's undetermined
        # eigenvalues (the planner's first choice then followed the round-off)
        q, _ = np.linalg.qr(a[:, nf:])
        b = a[:, :nf] - q @ (q.T @ a[:, :nf])
        info[p] = b.T @ b
        if clustered:        # rows (u of every ray, then v): sum each corner's rays
            lo, hi = pb.bounds[p], pb.bounds[p + 1]
            starts = first[(first >= lo) & (first < hi)] - lo
            a_u = np.add.reduceat(b[:hi - lo], starts, axis=0)
            a_v = np.add.reduceat(b[hi - lo:], starts, axis=0)
            common[p] = a_u.T @ a_u + a_v.T @ a_v
    names = tuple(n for n, f in zip(PARAMETER_NAMES, free) if f)
    return (names, info, common) if clustered else (names, info)
