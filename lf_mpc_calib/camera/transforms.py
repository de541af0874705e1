"""
Rigid transforms as (rotation vector, translation) pairs: composition, inverse, 4x4 matrices.

Convention (the one of TF and of the calibration file's poses): a transform ``T_a_b`` from
frame a (parent) to frame b (child) maps coordinates in b to coordinates in a,
X_a = R X_b + t. So ``compose(T_a_b, T_b_c) = T_a_c`` and ``invert(T_a_b) = T_b_a``. A board
pose of the calibration file (board -> camera) is T_optical_board; a robot pose base -> tool is
T_base_tool. Every function takes and returns rotation vectors (P, 3) and translations (P, 3)
(a single (3,) pair gives a single pair back).
"""

import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.errors import InvalidInputError


def _pair(rotation_vectors, translations, name):
    w = np.asarray(rotation_vectors, dtype=float)
    t = np.asarray(translations, dtype=float)
    single = w.ndim == 1
    w2 = np.atleast_2d(w)
    t2 = np.atleast_2d(t)
    if w2.ndim != 2 or w2.shape[1] != 3 or t2.shape != w2.shape:
        raise InvalidInputError(
            f'{name} must be rotation vectors and translations of shape (P, 3) each, got '
            f'{np.shape(rotation_vectors)} and {np.shape(translations)}')
    if not (np.all(np.isfinite(w2)) and np.all(np.isfinite(t2))):
        raise InvalidInputError(f'{name} contains NaN or inf')
    return w2, t2, single


def _out(w, t, single):
    return (w[0], t[0]) if single else (w, t)


def to_matrix(rotation_vectors, translations):
    """Homogeneous matrices (P, 4, 4) (or (4, 4) for one pair)."""
    w, t, single = _pair(rotation_vectors, translations, 'transform')
    m = np.zeros((len(w), 4, 4))
    m[:, :3, :3] = Rotation.from_rotvec(w).as_matrix()
    m[:, :3, 3] = t
    m[:, 3, 3] = 1.0
    return m[0] if single else m


def from_matrix(matrices):
    """(rotation vectors (P, 3), translations (P, 3)) of matrices (P, 4, 4) or (P, 3, 4)."""
    m = np.asarray(matrices, dtype=float)
    single = m.ndim == 2
    m = m.reshape((-1,) + m.shape[-2:])
    if m.shape[1:] not in ((4, 4), (3, 4)) or not np.all(np.isfinite(m)):
        raise InvalidInputError(
            f'matrices must be finite (P, 4, 4) or (P, 3, 4), got {np.shape(matrices)}')
    u, _, vt = np.linalg.svd(m[:, :3, :3])
    d = np.sign(np.linalg.det(u @ vt))
    u[:, :, 2] *= d[:, None]
    w = Rotation.from_matrix(u @ vt).as_rotvec()
    return _out(w, m[:, :3, 3].copy(), single)


def compose(first, second):
    """T_a_c from T_a_b = ``first`` and T_b_c = ``second`` (each (w, t); broadcast over P)."""
    w1, t1, s1 = _pair(*first, 'first')
    w2, t2, s2 = _pair(*second, 'second')
    r1 = Rotation.from_rotvec(w1)
    r2 = Rotation.from_rotvec(w2)
    w = (r1 * r2).as_rotvec()
    t = r1.apply(t2) + t1
    return _out(np.atleast_2d(w), np.atleast_2d(t), s1 and s2)


def invert(transform):
    """T_b_a from T_a_b = ``transform`` (w, t)."""
    w, t, single = _pair(*transform, 'transform')
    r = Rotation.from_rotvec(w).inv()
    return _out(r.as_rotvec(), -r.apply(t), single)


def apply(transform, points):
    """Points (N, 3) in the child frame -> parent frame, X_a = R X_b + t (one transform)."""
    w, t, _ = _pair(*transform, 'transform')
    if len(w) != 1:
        raise InvalidInputError(f'apply takes one transform, got {len(w)}')
    p = np.asarray(points, dtype=float)
    return Rotation.from_rotvec(w[0]).apply(p.reshape(-1, 3)) + t[0]


def rotation_angle_deg(rotation_vectors):
    """Rotation angles in degrees (P,) of rotation vectors (P, 3)."""
    return np.degrees(np.linalg.norm(np.atleast_2d(rotation_vectors), axis=1))


def difference(estimate, truth):
    """
    (rotation error in degrees (P,), translation error in metres (P, 3)) of estimate - truth.

    The rotation error is the angle of R_est R_true^T.
    """
    we, te, _ = _pair(*estimate, 'estimate')
    wt, tt, _ = _pair(*truth, 'truth')
    d = Rotation.from_rotvec(we) * Rotation.from_rotvec(wt).inv()
    return np.degrees(np.linalg.norm(d.as_rotvec(), axis=1)), te - tt
