"""
Sub-aperture view stacks of a checkerboard rendered straight from an MPC model.

For tests and benchmarks of corner detection without the raw-image renderer and decoder:
every view pixel's ray (``MPCModel.rays``) is intersected with the board plane and the checker
pattern is sampled there (supersampled for anti-aliasing), then blurred and noised. The exact
corner pixels of every view come from :func:`project_to_views`.
"""

from dataclasses import dataclass

import cv2
import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.camera.model import as_points


@dataclass(frozen=True, eq=False)
class ViewStack:
    """
    A decoded light field in the layout of the decoder's LightField.

    views (n_j, n_i, rows, cols) float32 indexed [j_index, i_index, v, u];
    i_values (n_i,), j_values (n_j,) view indices relative to the central view;
    valid (n_j, n_i) bool.
    """

    views: np.ndarray
    i_values: np.ndarray
    j_values: np.ndarray
    valid: np.ndarray

    def ijuv_of(self, j_index, i_index, uv):
        """Pixels uv (N, 2) of view [j_index, i_index] -> indexed pixels (N, 4)."""
        uv = np.asarray(uv, dtype=float).reshape(-1, 2)
        n = uv.shape[0]
        return np.column_stack([np.full(n, float(self.i_values[i_index])),
                                np.full(n, float(self.j_values[j_index])), uv])


def rotation_matrix(rvec):
    """Rotation vector (3,) -> (3, 3) matrix."""
    return cv2.Rodrigues(np.asarray(rvec, dtype=float).reshape(3, 1))[0]


def project_to_views(model, points_cam, ij, *, iterations=20):
    """
    Camera-frame points (N, 3) seen from views ij (V, 2) -> pixels (V, N, 2).

    Inverts Eq. 18 by fixed-point iteration (exact when k_1 = k_2 = 0).
    """
    p = as_points(points_cam, 'points_cam', 3)
    ij = as_points(ij, 'ij', 2)
    s = model.k_i * ij[:, 0][:, None]
    t = model.k_j * ij[:, 1][:, None]
    xu = (p[:, 0][None, :] - s) / p[:, 2][None, :] - model.k_3 * s
    yu = (p[:, 1][None, :] - t) / p[:, 2][None, :] - model.k_4 * t
    x, y = xu.copy(), yu.copy()
    for _ in range(iterations if (model.k_1 or model.k_2) else 0):
        rr = x * x + y * y
        radial = 1.0 + model.k_1 * rr + model.k_2 * rr * rr
        x, y = xu / radial, yu / radial
    return np.stack([(x - model.u_0) / model.k_u, (y - model.v_0) / model.k_v], axis=-1)


def render_views(model, board, rvec, tvec, *, views=(9, 9), size=(160, 160), supersample=3,
                 blur_sigma=0.6, noise_sigma=0.0, black=0.1, white=0.9, background=0.5,
                 margin=1.0, shift_squares=(0, 0), rng=None, exposure=1.0):
    """
    Render the board at pose (rvec, tvec) (board -> camera) into every view.

    views (n_i, n_j) centred on view (0, 0); size (width, height) of a view in pixels;
    margin: white border around the squares, in squares. ``shift_squares`` (a, b) moves the
    printed pattern by whole squares against the board frame (to test mis-labelled boards);
    ``exposure`` scales intensities before clipping to [0, 1] (> 1 overexposes).
    Returns (ViewStack, truth_uv (n_j, n_i, cols*rows, 2)).
    """
    n_i, n_j = (int(v) for v in views)
    width, height = (int(v) for v in size)
    if n_i < 1 or n_j < 1 or width < 8 or height < 8:
        raise InvalidInputError(f'views and size must be positive, got {views}, {size}')
    rng = np.random.default_rng(rng)
    R = rotation_matrix(rvec)
    T = np.asarray(tvec, dtype=float).reshape(3)
    normal = R[:, 2]
    i_values = np.arange(n_i) - (n_i - 1) // 2
    j_values = np.arange(n_j) - (n_j - 1) // 2
    ss = int(supersample)
    offs = (np.arange(ss) + 0.5) / ss - 0.5
    uu = (np.arange(width)[:, None] + offs[None, :]).ravel()
    vv = (np.arange(height)[:, None] + offs[None, :]).ravel()
    U, V = np.meshgrid(uu, vv)
    sq = board.square
    lo = np.array([-sq * (1 + margin), -sq * (1 + margin)])
    hi = np.array([sq * (board.cols + margin), sq * (board.rows + margin)])
    out = np.empty((n_j, n_i, height, width), np.float32)
    # The radial part of Eq. 18 does not depend on the view: compute it once.
    x = model.k_u * U.ravel() + model.u_0
    y = model.k_v * V.ravel() + model.v_0
    rr = x * x + y * y
    radial = 1.0 + model.k_1 * rr + model.k_2 * rr * rr
    x, y = radial * x, radial * y
    shift = np.array(shift_squares, dtype=float) * sq
    for jj, j in enumerate(j_values):
        for ii, i in enumerate(i_values):
            s, t = model.k_i * i, model.k_j * j
            xu, yu = x + model.k_3 * s, y + model.k_4 * t
            z = (normal @ T - normal[0] * s - normal[1] * t) / (
                normal[0] * xu + normal[1] * yu + normal[2])
            px, py, pz = s + xu * z - T[0], t + yu * z - T[1], z - T[2]
            bx = R[0, 0] * px + R[1, 0] * py + R[2, 0] * pz
            by = R[0, 1] * px + R[1, 1] * py + R[2, 1] * pz
            bxy = np.column_stack([bx, by])
            val = np.where(board.is_black(bxy + shift), black, white)
            inside = np.all((bxy > lo) & (bxy < hi), axis=1) & (z > 0)
            inner = np.all((bxy > -sq) & (bxy < hi - sq * margin), axis=1)
            val = np.where(inside, np.where(inner, val, white), background)
            out[jj, ii] = val.reshape(height, ss, width, ss).mean(axis=(1, 3))
    if blur_sigma > 0:
        for jj in range(n_j):
            for ii in range(n_i):
                out[jj, ii] = cv2.GaussianBlur(out[jj, ii], (0, 0), blur_sigma)
    out *= exposure
    if noise_sigma > 0:
        out += rng.normal(0.0, noise_sigma, out.shape).astype(np.float32)
    np.clip(out, 0.0, 1.0, out=out)
    ij = np.array([(i, j) for j in j_values for i in i_values], dtype=float)
    pts = board.points() @ R.T + T
    truth = project_to_views(model, pts, ij).reshape(n_j, n_i, board.n_points, 2)
    stack = ViewStack(out, i_values, j_values, np.ones((n_j, n_i), bool))
    return stack, truth
