"""
Board poses partly out of view: the ``simulate --partial`` pose set.

The careful user's set (:func:`lf_mpc_calib.simulation.dataset.capture_poses`: depths, tilts,
rolls) with every board then slid sideways, towards an image corner (the four in turn; every
fifth pose towards a side), until a share drawn in ``out_range`` (30-60 %) of its squares'
area lies out of view. A ChArUco board still names the corners it shows, and these poses put
corners into the image corners, where the principal point and the distortion are determined.
"""

import numpy as np

from lf_mpc_calib.errors import InvalidInputError

OUT_RANGE = (0.3, 0.6)
"""Share of the board's squares area pushed out of view, drawn uniformly in this range."""
_DIRECTIONS = ((1, 1), (-1, -1), (1, -1), (-1, 1), (1, 0), (-1, 1), (1, 1), (0, -1))
"""Image directions (x right, y down) the boards are slid towards, cycled."""
_SAMPLES = 24
"""Board points per side sampled for the share in view."""


def partial_poses(camera, board, n, *, rng, out_range=OUT_RANGE, base_board=None):
    """
    n board poses (MPC frame) with 30-60 % of the board out of view into the image corners.

    base_board: the board whose default poses are taken (None: ``board``), its centre then
    put in place of ``board``'s (a board larger than the view cannot be placed in view).
    Returns rvecs (n, 3), tvecs (n, 3); raises InvalidInputError when a pose cannot reach its
    share (a board too small to leave the view that far within two fields of view).
    """
    from lf_mpc_calib.simulation.dataset import capture_poses
    lo, hi = out_range
    if not 0 < lo <= hi < 1:
        raise InvalidInputError(f'out_range must be shares 0 < low <= high < 1, got '
                                f'{out_range!r}')
    base = board if base_board is None else base_board
    rvecs, tvecs = capture_poses(camera, base, n, rng=rng)
    shift = _centre(base) - _centre(board)
    out_r, out_t = [], []
    for k, (rvec, tvec) in enumerate(zip(rvecs, tvecs)):
        target = rng.uniform(lo, hi)
        direction = np.asarray(_DIRECTIONS[k % len(_DIRECTIONS)], float)
        rmat, t = camera.pose_to_physical(rvec, tvec)
        t = _slide(camera, board, rmat, t + rmat @ shift, direction, target)
        r2, t2 = camera.pose_from_physical(rmat, t)
        out_r.append(r2)
        out_t.append(t2)
    return np.array(out_r), np.array(out_t)


def _centre(board):
    """(3,) board-frame centre of the inner corners."""
    return np.array([(board.cols - 1) * board.square / 2, (board.rows - 1) * board.square / 2,
                     0.0])


def out_of_view_share(camera, board, rmat, t):
    """Share (float) of the board's squares area (sampled) outside the raw image, physical pose."""
    s = board.square
    x = np.linspace(-s, board.cols * s, _SAMPLES)
    y = np.linspace(-s, board.rows * s, _SAMPLES)
    xx, yy = np.meshgrid(x, y)
    pts = np.column_stack([xx.ravel(), yy.ravel(), np.zeros(xx.size)]) @ rmat.T + t
    q = camera.project_chief(pts)
    w, h = camera.sensor.size
    inside = (q[:, 0] >= 0) & (q[:, 0] <= w - 1) & (q[:, 1] >= 0) & (q[:, 1] <= h - 1)
    return 1.0 - float(np.mean(inside & (pts[:, 2] > 0)))


def _slide(camera, board, rmat, t, direction, target):
    """t (3,) moved along ``direction`` (image x, y) until ``target`` of the board is out."""
    w, h = camera.field_of_view(t[2])
    step = direction / np.linalg.norm(direction) * np.array([w, h])

    def share(a):
        return out_of_view_share(camera, board, rmat, t + np.array([*(a * step), 0.0]))
    low, high = 0.0, 2.0
    if share(high) < target:
        raise InvalidInputError(
            f'a {board.cols}x{board.rows} board at {t[2]:.3f} m does not leave the view by '
            f'{target:.0%} within two fields of view')
    for _ in range(40):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if share(mid) < target else (low, mid)
    return t + np.array([*(high * step), 0.0])
