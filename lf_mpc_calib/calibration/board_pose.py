"""
The board pose of one capture under a fixed camera model.

What the planner needs for captures the calibration has not seen yet (or before any
calibration, with the nominal model): each board corner is triangulated from its rays
(:func:`~lf_mpc_calib.camera.model.triangulate`), the board is fitted to those points
(Kabsch), then the six pose parameters are refined on the reprojection error in pixels with
the model held (scipy least_squares). Poses map board to the MPC (optical) frame,
X_cam = R X_board + t.
"""

import numpy as np
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation

from lf_mpc_calib.camera.model import triangulate
from lf_mpc_calib.errors import DegenerateConfigurationError

MIN_CORNERS = 4
"""Corners triangulated from >= 2 rays needed for a pose."""
MAX_RMS_PX = 2.0
"""Reprojection RMS above which the model does not describe the capture (refused)."""


def _kabsch(board, cam):
    """(rotation vector (3,), translation (3,)) that best maps board (N, 3) onto cam (N, 3)."""
    b0, c0 = board.mean(axis=0), cam.mean(axis=0)
    u, _, vt = np.linalg.svd((cam - c0).T @ (board - b0))
    d = np.sign(np.linalg.det(u @ vt))
    rot = u @ np.diag([1.0, 1.0, d]) @ vt
    return Rotation.from_matrix(rot).as_rotvec(), c0 - rot @ b0


def fit_board_pose(obs, model):
    """
    (rotation vector (3,), translation (3,), RMS reprojection px) of the board in ``obs``
    (Observations of one pose) under ``model`` (MPCModel, held). Raises
    DegenerateConfigurationError when fewer than MIN_CORNERS corners are seen in two rays or
    the model leaves an RMS over MAX_RMS_PX px (it does not describe the capture).
    """
    rv, tv, res = fit_pose_residuals(obs, model)
    rms = float(np.sqrt(np.mean(np.sum(res ** 2, axis=1))))
    if not np.isfinite(rms) or rms > MAX_RMS_PX:
        raise DegenerateConfigurationError(
            f'board pose: RMS reprojection {rms:.3g} px under the model (limit {MAX_RMS_PX:g} '
            'px): the model does not describe this capture')
    return rv, tv, rms


def fit_pose_residuals(obs, model):
    """
    (rotation vector (3,), translation (3,), residuals (N, 2) px, measured - predicted) of
    the board pose fitted to ``obs`` (Observations of one pose) with ``model`` held, whatever
    the residuals' size. Raises DegenerateConfigurationError when fewer than MIN_CORNERS
    corners are seen in two rays.
    """
    rays = model.rays(obs.ijuv)
    counts = np.bincount(obs.point)
    keep = counts[obs.point] >= 2
    ids = np.unique(obs.point[keep])
    if len(ids) < MIN_CORNERS:
        raise DegenerateConfigurationError(
            f'board pose: {len(ids)} corners seen in >= 2 rays, expected >= {MIN_CORNERS}')
    cam = triangulate(rays[keep], obs.point[keep])
    board = np.array([obs.board[obs.point == i][0] for i in ids])
    rv, tv = _kabsch(board, cam)

    def residual(x):
        pts = Rotation.from_rotvec(x[:3]).apply(obs.board) + x[3:]
        return (obs.ijuv[:, 2:] - model.project(pts, obs.ijuv[:, :2])).ravel()

    fit = least_squares(residual, np.concatenate([rv, tv]), method='lm')
    return fit.x[:3], fit.x[3:], fit.fun.reshape(-1, 2)
