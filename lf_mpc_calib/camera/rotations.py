"""
Rotation helpers: Rodrigues vectors to matrices, their derivatives, and back.

A rotation vector w (3,) is the axis times the angle in radians; R(w) rotates by that angle
about that axis (right hand). All functions are vectorised over a leading axis of P rotations.
"""

import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.errors import InvalidInputError


def _as_rotvecs(rotation_vectors):
    w = np.asarray(rotation_vectors, dtype=float)
    single = w.ndim == 1
    w = np.atleast_2d(w)
    if w.ndim != 2 or w.shape[1] != 3:
        raise InvalidInputError(
            f'rotation_vectors must have shape (P, 3), got {np.shape(rotation_vectors)}')
    if not np.all(np.isfinite(w)):
        raise InvalidInputError('rotation_vectors contain NaN or inf')
    return w, single


def skew(v):
    """
    Return the cross-product matrices [v]_x (P, 3, 3) of vectors v (P, 3).

    [v]_x a = v x a.
    """
    v = np.asarray(v, dtype=float)
    out = np.zeros(v.shape[:-1] + (3, 3))
    out[..., 0, 1] = -v[..., 2]
    out[..., 0, 2] = v[..., 1]
    out[..., 1, 0] = v[..., 2]
    out[..., 1, 2] = -v[..., 0]
    out[..., 2, 0] = -v[..., 1]
    out[..., 2, 1] = v[..., 0]
    return out


def rotation_matrix(rotation_vectors):
    """
    Return R (P, 3, 3) for rotation vectors (P, 3); a single (3,) vector gives (3, 3).
    """
    w, single = _as_rotvecs(rotation_vectors)
    r = Rotation.from_rotvec(w).as_matrix()
    return r[0] if single else r


def rotation_vector(matrices):
    """
    Return rotation vectors (P, 3) of rotation matrices (P, 3, 3) (a (3, 3) gives (3,)).

    The matrices are projected onto SO(3) first (nearest rotation by SVD), so an estimate with
    slightly non-orthonormal columns is accepted.
    """
    m = np.asarray(matrices, dtype=float)
    single = m.ndim == 2
    m = m.reshape((-1, 3, 3)) if m.shape[-2:] == (3, 3) else None
    if m is None or not np.all(np.isfinite(m)):
        raise InvalidInputError(
            f'matrices must be finite with shape (P, 3, 3), got {np.shape(matrices)}')
    u, _, vt = np.linalg.svd(m)
    d = np.sign(np.linalg.det(u @ vt))
    u[:, :, 2] *= d[:, None]
    w = Rotation.from_matrix(u @ vt).as_rotvec()
    return w[0] if single else w


def rotation_matrix_jacobian(rotation_vectors):
    """
    Return R (P, 3, 3) and dR/dw (P, 3, 3, 3), where dR[p, k] = dR_p / dw_k.

    Closed form of Gallego and Yezzi (J. Math. Imaging Vis. 2015):
    dR/dw_k = (w_k [w]_x + [w x (I - R) e_k]_x) R / |w|^2, and [e_k]_x at w = 0.
    """
    w, _ = _as_rotvecs(rotation_vectors)
    r = Rotation.from_rotvec(w).as_matrix()
    theta2 = np.einsum('pi,pi->p', w, w)
    eye = np.eye(3)
    small = theta2 < 1e-20
    safe = np.where(small, 1.0, theta2)
    wx = skew(w)
    i_minus_r = eye[None] - r                                   # (P, 3, 3)
    d = np.empty((w.shape[0], 3, 3, 3))
    for k in range(3):
        col = np.cross(w, i_minus_r[:, :, k])                   # w x (I - R) e_k, (P, 3)
        m = w[:, k, None, None] * wx + skew(col)
        d[:, k] = (m @ r) / safe[:, None, None]
        if np.any(small):
            d[small, k] = skew(eye[k])[None]
    return r, d
