"""
Raw frames of a focused camera for the micro-image corner detector, with what checks them.

Public API::

    lens_types_of(camera, centres (M, 2)) -> (M,) int    # lens type of each micro-image
    type_agreement(camera, centres, labels (M,)) -> (true type of each label (T,), fraction)
    board_pose(camera, board, distance, angles_deg) -> (rvec (3,), tvec (3,)) MPC frame
    match_truth(found, truth, board, *, radius=1.0) -> (errors (K, 2) px, unmatched int)
    board_depth_truth(pinhole, board, rvec, tvec) -> (rows, cols) depth of the rendered image
    scene_depth_truth(pinhole, scene) -> (rows, cols) depth of a Scene in the rendered image
"""

import numpy as np
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation


def lens_types_of(camera, centres):
    """(M,) lens type (0 for one-type arrays) of the micro-images centred at centres (M, 2)."""
    kl, _ = camera.micro_image_of(np.asarray(centres, float))
    return np.asarray(camera.mla.lens_type(kl), dtype=np.int64).reshape(-1) \
        if camera.mla.n_types > 1 else np.zeros(len(kl), np.int64)


def type_agreement(camera, centres, labels):
    """
    How well lens-type ``labels`` (M,) of the micro-images centred at centres (M, 2) (told from
    the frames, arbitrary label order) agree with the camera's true types: (true type (T,) of
    each label, the permutation agreeing most; fraction (0..1) of micro-images whose label
    names their true type under it).
    """
    from itertools import permutations
    true = lens_types_of(camera, centres)
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    t = max(camera.mla.n_types, int(labels.max()) + 1 if labels.size else 1)
    best = max(permutations(range(t)), key=lambda p: np.mean(np.asarray(p)[labels] == true))
    best = np.asarray(best, dtype=np.int64)
    return best, float(np.mean(best[labels] == true)) if labels.size else 0.0


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


def board_depth_truth(pinhole, board, rvec, tvec):
    """
    True depth (rows, cols) float32 of ``board`` (margin included: its ``extent``) at MPC-frame
    pose (rvec, tvec) in the pixels of a rendered image whose pinhole is ``pinhole`` (a
    :class:`lf_mpc_calib.measurement.focused.RenderedPinhole`): metres along the pinhole's
    axis, NaN off the board.
    """
    width, height = pinhole.size
    b, a = np.mgrid[0:height, 0:width].astype(float)
    d = np.linalg.solve(pinhole.K, np.stack([a.ravel(), b.ravel(), np.ones(a.size)]))
    d = (Rotation.from_rotvec(pinhole.rotation_vector).as_matrix() @ d).T   # z = 1 there
    rot = Rotation.from_rotvec(np.asarray(rvec, float)).as_matrix()
    tvec = np.asarray(tvec, float)
    normal = rot[:, 2]
    with np.errstate(divide='ignore', invalid='ignore'):
        lam = ((tvec - pinhole.centre) @ normal) / (d @ normal)
    local = (pinhole.centre + lam[:, None] * d - tvec) @ rot
    x0, y0, x1, y1 = board.extent()
    on = (lam > 0) & (local[:, 0] > x0) & (local[:, 0] < x1) & (local[:, 1] > y0) \
        & (local[:, 1] < y1)
    return np.where(on, lam, np.nan).reshape(height, width).astype(np.float32)


def scene_depth_truth(pinhole, scene):
    """
    True depth (rows, cols) float32 of a :class:`lf_mpc_calib.simulation.scene.Scene` (surfaces
    in the MPC frame) in the pixels of a rendered image whose pinhole is ``pinhole``: metres
    along the pinhole's axis to the nearest surface, NaN where none.
    """
    from lf_mpc_calib.simulation.scene import surface_hits, surface_poses
    width, height = pinhole.size
    b, a = np.mgrid[0:height, 0:width].astype(float)
    d = np.linalg.solve(pinhole.K, np.stack([a.ravel(), b.ravel(), np.ones(a.size)]))
    d = (Rotation.from_rotvec(pinhole.rotation_vector).as_matrix() @ d)   # z = 1 there
    o = [np.full(a.size, float(c)) for c in pinhole.centre]
    index, lam, _, _ = surface_hits(scene.surfaces, surface_poses(scene), o, tuple(d))
    return np.where(index >= 0, lam, np.nan).reshape(height, width).astype(np.float32)
