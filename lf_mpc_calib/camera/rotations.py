"""
Rotation helpers: Rodrigues vectors to matrices, their derivatives, and back.

A rotation vector w (3,) is the axis times the angle in radians; R(w) rotates by that angle
about that axis (right hand). All functions are vectorised over a leading axis of P rotations.
Pure numpy (Rodrigues' formula and Shepperd's quaternion extraction), so that importing the
calibration does not load scipy.spatial.
"""

import numpy as np

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
    r = _rodrigues(w)
    return r[0] if single else r


def _rodrigues(w):
    """R (P, 3, 3) = I + a [w]_x + b [w]_x^2, a = sin t / t, b = (1 - cos t) / t^2, t = |w|."""
    theta2 = np.einsum('pi,pi->p', w, w)
    theta = np.sqrt(theta2)
    small = theta2 < 1e-8
    safe = np.where(small, 1.0, theta)
    a = np.where(small, 1 - theta2 / 6 + theta2 ** 2 / 120, np.sin(safe) / safe)
    b = np.where(small, 0.5 - theta2 / 24 + theta2 ** 2 / 720, 2 * (np.sin(safe / 2) / safe) ** 2)
    wx = skew(w)
    return np.eye(3)[None] + a[:, None, None] * wx + b[:, None, None] * (wx @ wx)


def _matrix_to_rotvec(r):
    """Rotation vectors (P, 3) of exact rotations r (P, 3, 3), via unit quaternions (Shepperd's
    choice of the largest of 1 + trace and the diagonal, so accurate up to the angle pi)."""
    n = r.shape[0]
    trace = np.trace(r, axis1=1, axis2=2)
    diag = np.diagonal(r, axis1=1, axis2=2)
    choice = np.argmax(np.column_stack([diag, trace]), axis=1)
    q = np.empty((n, 4))                                          # (x, y, z, w)
    t = choice == 3
    q[t, 0] = r[t, 2, 1] - r[t, 1, 2]
    q[t, 1] = r[t, 0, 2] - r[t, 2, 0]
    q[t, 2] = r[t, 1, 0] - r[t, 0, 1]
    q[t, 3] = 1 + trace[t]
    for i in range(3):
        s = choice == i
        j, k = (i + 1) % 3, (i + 2) % 3
        q[s, i] = 1 - trace[s] + 2 * r[s, i, i]
        q[s, j] = r[s, j, i] + r[s, i, j]
        q[s, k] = r[s, k, i] + r[s, i, k]
        q[s, 3] = r[s, k, j] - r[s, j, k]
    q /= np.linalg.norm(q, axis=1)[:, None]
    q[q[:, 3] < 0] *= -1
    sin_half = np.linalg.norm(q[:, :3], axis=1)
    angle = 2 * np.arctan2(sin_half, q[:, 3])
    small = angle < 1e-3
    scale = np.where(small, 2 + angle ** 2 / 12 + 7 * angle ** 4 / 2880,
                     angle / np.where(small, 1.0, sin_half))
    return scale[:, None] * q[:, :3]


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
    w = _matrix_to_rotvec(u @ vt)
    return w[0] if single else w


def rotation_matrix_jacobian(rotation_vectors):
    """
    Return R (P, 3, 3) and dR/dw (P, 3, 3, 3), where dR[p, k] = dR_p / dw_k.

    Closed form of Gallego and Yezzi (J. Math. Imaging Vis. 2015):
    dR/dw_k = (w_k [w]_x + [w x (I - R) e_k]_x) R / |w|^2, and [e_k]_x at w = 0.
    """
    w, _ = _as_rotvecs(rotation_vectors)
    r = _rodrigues(w)
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
