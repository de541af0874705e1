"""
Raw frames of a focused camera for the micro-image corner detector, with what checks them.

Public API::

    lens_types_of(camera, centres (M, 2)) -> (M,) int    # lens type of each micro-image
    board_pose(camera, board, distance, angles_deg) -> (rvec (3,), tvec (3,)) MPC frame
    match_truth(found, truth, board, *, radius=1.0) -> (errors (K, 2) px, unmatched int)
"""

import numpy as np
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation


def lens_types_of(camera, centres):
    """(M,) lens type (0 for one-type arrays) of the micro-images centred at centres (M, 2)."""
    kl, _ = camera.micro_image_of(np.asarray(centres, float))
    return np.asarray(camera.mla.lens_type(kl), dtype=np.int64).reshape(-1) \
        if camera.mla.n_types > 1 else np.zeros(len(kl), np.int64)


def board_pose(camera, board, distance, angles_deg=(0.0, 0.0, 0.0), offset=(0.0, 0.0)):
    """
    MPC-frame pose (rvec, tvec) of ``board`` with its centre ``offset`` (m, lateral) off the
    optical axis at ``distance`` (m) from the main lens, turned by xyz Euler ``angles_deg``.
    """
    rot = Rotation.from_euler('xyz', np.deg2rad(angles_deg)).as_matrix()
    centre = np.array([offset[0], offset[1], distance])
    return camera.pose_from_physical(rot, centre - rot @ board.points().mean(0))


def match_truth(found, truth, *, radius=1.0):
    """
    Compare detected rows with the optics' rows of the same board points.

    found, truth: Observations (focused convention). A detected row matches the truth row of
    the same point whose micro-image centre is within ``radius`` px. Returns (errors (K, 2):
    detected minus true raw position of the matched rows, unmatched: rows with no truth row of
    that point in that micro-image, which include wrong labels).
    """
    errors, unmatched = [], 0
    for pt in np.unique(found.point):
        a = found.ijuv[found.point == pt]
        b = truth.ijuv[truth.point == pt]
        if len(b) == 0:
            unmatched += len(a)
            continue
        d, i = cKDTree(b[:, :2]).query(a[:, :2])
        ok = d <= radius
        unmatched += int((~ok).sum())
        errors.append((a[ok, :2] + a[ok, 2:]) - (b[i[ok], :2] + b[i[ok], 2:]))
    return (np.concatenate(errors) if errors else np.zeros((0, 2))), unmatched
