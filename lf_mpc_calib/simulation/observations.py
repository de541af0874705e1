"""
The observation-level simulator of the paper's experiments (Sec. 5.1, NOTES §5).

A planar checkerboard seen at several poses by a conventional light-field camera: every board
corner is projected into every sub-aperture view with the MPC model (Eq. 1 and the inverse of
Eq. 18), Gaussian pixel noise is added, and the result is an :class:`Observations` table.

The projection here is written independently of :mod:`lf_mpc_calib.camera.model` on purpose: it is
the ground truth the calibration is checked against.

Pose convention (DESIGN.md "Frames"): a pose is a Rodrigues rotation vector and a translation
(metres) mapping board to camera coordinates, X_cam = R X_board + t. Board frame: origin at the
first inner corner, x along the columns, y along the rows.
"""

import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.camera.model import as_points, MPCModel
from lf_mpc_calib.camera.observations import Observations

#: The three board rotations (degrees, about x, y, z) of the paper's noise sweep (Fig. 11).
NOISE_SWEEP_ROTATIONS_DEG = ((6.0, 28.0, -8.0), (12.0, -10.0, 15.0), (-5.0, 5.0, -27.0))

#: Board-to-camera distance (metres) used for the paper's experiments: the paper gives none;
#: at 0.08 m the 12x12 board spans about 240 px of the ~320 px central view (NOTES §5).
PAPER_DISTANCE_M = 0.08

#: Size (width, height) of one view of the paper camera: twice its principal point.
PAPER_IMAGE_SIZE = (320, 347)


def paper_camera():
    """Return the simulated camera of the paper's Table 3 (no distortion)."""
    return MPCModel(k_i=2.4e-4, k_j=2.5e-4, k_u=2.0e-3, k_v=1.9e-3, u_0=-0.32, v_0=-0.33)


def board_points(cols=12, rows=12, square=3.51e-3):
    """
    Return the inner corners (cols*rows, 3) of a checkerboard in its own frame (metres).

    Point n = row * cols + col is at (col * square, row * square, 0).
    """
    if int(cols) < 2 or int(rows) < 2 or not square > 0:
        raise InvalidInputError(
            f'board needs cols, rows >= 2 and square > 0, got {cols}, {rows}, {square}')
    r, c = np.mgrid[0:int(rows), 0:int(cols)]
    return np.column_stack([c.ravel() * square, r.ravel() * square,
                            np.zeros(r.size)]).astype(float)


def view_grid(n_i, n_j=None):
    """
    Return the view indices (n_i*n_j, 2) = (i, j) of an n_i x n_j grid around the centre.

    Indices are integers centred on 0 (for an even count the extra view is on the + side):
    3 -> -1, 0, 1; 4 -> -1, 0, 1, 2. i runs fastest.
    """
    n_j = n_i if n_j is None else n_j
    if int(n_i) < 1 or int(n_j) < 1:
        raise InvalidInputError(f'view grid needs n_i, n_j >= 1, got {n_i}, {n_j}')
    i = np.arange(int(n_i)) - (int(n_i) - 1) // 2
    j = np.arange(int(n_j)) - (int(n_j) - 1) // 2
    jj, ii = np.meshgrid(j, i, indexing='ij')
    return np.column_stack([ii.ravel(), jj.ravel()]).astype(float)


def pose_from_euler(angles_deg, board, *, distance=PAPER_DISTANCE_M, offset=(0.0, 0.0)):
    """
    Return (rotation_vector (3,), translation (3,)) of a board turned by ``angles_deg``.

    ``angles_deg`` = rotations about x, y, z (extrinsic, in that order); the board's centre is
    placed at (offset_x, offset_y, distance) in the camera frame.
    """
    rot = Rotation.from_euler('xyz', np.asarray(angles_deg, dtype=float), degrees=True)
    centre = as_points(board, 'board', 3).mean(axis=0)
    t = np.array([offset[0], offset[1], distance]) - rot.apply(centre)
    return rot.as_rotvec(), t


def noise_sweep_poses(board, *, distance=PAPER_DISTANCE_M):
    """
    Return (rotation_vectors (3,3), translations (3,3)) of the paper's noise-sweep poses.

    distance: one board distance in metres, or three (one per pose).
    """
    d = np.broadcast_to(np.asarray(distance, dtype=float), (3,))
    poses = [pose_from_euler(a, board, distance=z) for a, z in zip(NOISE_SWEEP_ROTATIONS_DEG, d)]
    return np.array([p[0] for p in poses]), np.array([p[1] for p in poses])


def random_poses(n, *, rng, board, max_angle_deg=30.0, distance=PAPER_DISTANCE_M,
                 max_offset=0.0):
    """
    Return (rotation_vectors (n,3), translations (n,3)) of random board poses.

    Rotation angles about x, y and z are uniform in +-max_angle_deg (the paper's protocol);
    the board centre is at (dx, dy, distance) with dx, dy uniform in +-max_offset metres.
    """
    if int(n) < 1:
        raise InvalidInputError(f'need n >= 1 poses, got {n}')
    angles = rng.uniform(-max_angle_deg, max_angle_deg, size=(int(n), 3))
    offsets = rng.uniform(-max_offset, max_offset, size=(int(n), 2))
    poses = [pose_from_euler(a, board, distance=distance, offset=o)
             for a, o in zip(angles, offsets)]
    return np.array([p[0] for p in poses]), np.array([p[1] for p in poses])


def _distort(model, xu, yu, s, t, iterations=50):
    """Solve Eq. 18 for the measured (x, y) given undistorted (xu, yu); (N,) arrays."""
    bx = xu - model.k_3 * s
    by = yu - model.k_4 * t
    if model.k_1 == 0.0 and model.k_2 == 0.0:
        return bx, by
    # radial: x (1 + k1 r^2 + k2 r^4) = bx; solve for the scale q = |x| / |b| by Newton on the
    # radius rho = |x|: rho (1 + k1 rho^2 + k2 rho^4) = |b|
    rb = np.hypot(bx, by)
    rho = rb.copy()
    for _ in range(iterations):
        r2 = rho * rho
        f = rho * (1.0 + model.k_1 * r2 + model.k_2 * r2 * r2) - rb
        df = 1.0 + 3.0 * model.k_1 * r2 + 5.0 * model.k_2 * r2 * r2
        step = f / df
        rho = rho - step
        if np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, rb)):
            break
    q = np.where(rb > 0, rho / np.where(rb > 0, rb, 1.0), 1.0)
    return q * bx, q * by


def project_points(model, points_cam, views):
    """
    Project camera-frame points (N, 3) into views (V, 2); return ijuv (V*N, 4).

    Rows are view-major (all points of view 0, then view 1, ...). Points must have Z != 0.
    """
    p = as_points(points_cam, 'points_cam', 3)
    v = as_points(views, 'views', 2)
    if np.any(p[:, 2] == 0):
        raise InvalidInputError('points_cam must have Z != 0 (points on the view plane)')
    s = np.repeat(model.k_i * v[:, 0], p.shape[0])
    t = np.repeat(model.k_j * v[:, 1], p.shape[0])
    X = np.tile(p[:, 0], v.shape[0])
    Y = np.tile(p[:, 1], v.shape[0])
    Z = np.tile(p[:, 2], v.shape[0])
    x, y = _distort(model, (X - s) / Z, (Y - t) / Z, s, t)
    return np.column_stack([np.repeat(v[:, 0], p.shape[0]), np.repeat(v[:, 1], p.shape[0]),
                            (x - model.u_0) / model.k_u, (y - model.v_0) / model.k_v])


def simulate_observations(model, rotation_vectors, translations, board, views, *,
                          noise_px=0.0, rng=None, image_size=None):
    """
    Return the Observations of ``board`` (M, 3) at P poses seen in ``views`` (V, 2).

    rotation_vectors, translations (P, 3) map board to camera frame; Gaussian noise of standard
    deviation ``noise_px`` is added to u and v independently (``rng`` required if > 0). With
    ``image_size`` = (width, height) of a view, projections outside [-0.5, w - 0.5] x
    [-0.5, h - 0.5] (before noise) are dropped. Pose p gets pose id p; rows are pose-major,
    then view, then point.
    """
    rv = as_points(rotation_vectors, 'rotation_vectors', 3)
    tr = as_points(translations, 'translations', 3)
    if rv.shape != tr.shape:
        raise InvalidInputError(
            f'rotation_vectors {rv.shape} and translations {tr.shape} must have the same shape')
    b = as_points(board, 'board', 3)
    v = as_points(views, 'views', 2)
    if noise_px < 0 or not np.isfinite(noise_px):
        raise InvalidInputError(f'noise_px must be >= 0, got {noise_px}')
    if noise_px > 0 and rng is None:
        raise InvalidInputError('noise_px > 0 needs an rng (np.random.default_rng(seed))')
    parts = []
    for p in range(rv.shape[0]):
        cam = Rotation.from_rotvec(rv[p]).apply(b) + tr[p]
        if np.any(cam[:, 2] <= 0):
            raise InvalidInputError(f'pose {p} puts board points behind the camera (Z <= 0)')
        ijuv = project_points(model, cam, v)
        point = np.tile(np.arange(b.shape[0]), v.shape[0])
        keep = np.ones(len(point), dtype=bool)
        if image_size is not None:
            w, h = image_size
            keep = ((ijuv[:, 2] >= -0.5) & (ijuv[:, 2] <= w - 0.5)
                    & (ijuv[:, 3] >= -0.5) & (ijuv[:, 3] <= h - 0.5))
        parts.append(Observations(np.full(int(keep.sum()), p), point[keep], b[point[keep]],
                                  ijuv[keep]))
    obs = Observations.concatenate(parts)
    if noise_px > 0:
        noisy = obs.ijuv.copy()
        noisy[:, 2:] += rng.normal(0.0, noise_px, size=(len(obs), 2))
        obs = Observations(obs.pose, obs.point, obs.board, noisy)
    return obs


def paper_scene(*, n_poses=3, n_views=7, noise_px=0.5, rng=None, model=None,
                distance=PAPER_DISTANCE_M, fixed_poses=False):
    """
    Return (model, rotation_vectors, translations, Observations) of one trial of the paper.

    ``fixed_poses`` uses the noise sweep's three poses; otherwise ``n_poses`` random poses
    with angles uniform in +-30 degrees. Views: an n_views x n_views grid.
    """
    model = paper_camera() if model is None else model
    rng = np.random.default_rng() if rng is None else rng
    board = board_points()
    if fixed_poses:
        rv, tr = noise_sweep_poses(board, distance=distance)
    else:
        rv, tr = random_poses(n_poses, rng=rng, board=board, distance=distance)
    obs = simulate_observations(model, rv, tr, board, view_grid(n_views), noise_px=noise_px,
                                rng=rng)
    return model, rv, tr, obs
