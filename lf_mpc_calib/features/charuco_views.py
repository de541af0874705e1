"""
ChArUco corners across the sub-aperture views of a conventional light-field camera.

1. In every usable view ``cv2.aruco.CharucoDetector`` reads the markers and names the corners
   between them (:func:`lf_mpc_calib.features.charuco.find_charuco`); corners are matched
   across views by their id, which is the board's point index, so a board partly out of view
   is numbered the same way in every view and every pose.
2. The markers are painted over in the local light level
   (:func:`~lf_mpc_calib.features.charuco.mask_markers`: their edges, 0.125 square from the
   corners, pulled cornerSubPix by up to 0.3 px in small blurred views), then every corner
   found is refined with ``cornerSubPix`` as the checkerboard path does (views smoothed and
   upsampled), and kept where it moved less than ``max_step``; so are the corners next to
   them that the detector could not name because the view's edge cuts their markers
   (:func:`with_neighbours`: placed by the board's homography), so corners reach the edges.
3. A robust line fit per corner across views drops the views off its line (NOTES §1), corners
   in fewer than ``min_views`` views are dropped, and the pose counts when at least
   ``min_corners`` corners not on one board line remain.

The central view must show the board, and markers of another board there (another size,
layout or dictionary, two boards) refuse the whole frame with the reason; once it passed, a
side view whose markers are misread (or too few of them read) only contributes nothing
(counted in the diagnostics' views_refused, views_without_board).
"""

import cv2
import numpy as np

from lf_mpc_calib.camera.observations import Observations  # noqa: F401 (documented type)
from lf_mpc_calib.errors import DetectionError
from lf_mpc_calib.features.charuco import BoardMismatchError, find_charuco, mask_markers
from lf_mpc_calib.features.corners import (
    refine_corners, checked_views, observation_rows, robust_lines, smooth)
from lf_mpc_calib.features.interface import Detection


def detect_charuco_views(lightfield, board, *, pose=0, options):
    """
    Corners of a ChArUco ``board`` in every usable view of one decoded light field.

    Returns a :class:`Detection` like :func:`lf_mpc_calib.features.corners.detect_corners`
    (central_uv (cols*rows, 2), NaN for corners not seen). Raises BoardMismatchError for
    markers of another board in any view, DetectionError when the central view shows no board
    or fewer than ``options.min_corners`` corners are kept.
    """
    views, i_values, j_values, valid = checked_views(lightfield)
    n_j, n_i = views.shape[:2]
    jj, ii = np.meshgrid(j_values, i_values, indexing='ij')
    dist = np.where(valid, np.hypot(ii, jj), np.inf)
    jc, ic = np.unravel_index(np.argmin(dist), dist.shape)
    m = board.n_points
    uv = np.full((n_j * n_i, m, 2), np.nan)
    stats = {'views_without_board': 0, 'views_refused': 0, 'moved_too_far': 0}
    half = None
    for a, b in [(jc, ic)] + [(a, b) for a in range(n_j) for b in range(n_i)
                              if valid[a, b] and (a, b) != (jc, ic)]:
        img = views[a, b].astype(np.float32)
        try:
            ids, found = find_charuco(img, board, min_size=2 * options.min_view_size,
                                      min_corners=1)
        except DetectionError as exc:
            if (a, b) == (jc, ic):
                raise type(exc)(f'central view: {exc}') from None
            # the central view showed this board alone: a side view's misreads drop it
            key = 'views_refused' if isinstance(exc, BoardMismatchError) else \
                'views_without_board'
            stats[key] = stats.get(key, 0) + 1
            continue
        half = _window(board, ids, found, options.window) if half is None else half
        flat_img = mask_markers(img, board, ids, found)
        ids, found = with_neighbours(board, ids, found, img.shape, half)
        ref = refine_corners(smooth(flat_img, options.smooth_sigma), found, half,
                             options.subpix_upsample)
        ok = np.all(np.isfinite(ref), axis=1) & (
            np.linalg.norm(ref - found, axis=1) < options.max_step)
        stats['moved_too_far'] += int(np.count_nonzero(~ok))
        uv[a * n_i + b, ids[ok]] = ref[ok]
    found = np.all(np.isfinite(uv), axis=-1)
    ij_all = np.column_stack([ii.ravel(), jj.ravel()]).astype(float)
    found, residual_rms, dropped = robust_lines(ij_all, uv, found, options.line_threshold)
    stats['off_line'] = int(dropped)
    per_corner = found.sum(axis=0)
    found &= (per_corner >= options.min_views)[None, :]
    check_enough_corners(board, np.flatnonzero(found.any(axis=0)), options.min_corners)
    obs = observation_rows(lightfield, board, pose, uv, found, n_i)
    flat_c = jc * n_i + ic
    central_uv = np.where(found[flat_c][:, None], uv[flat_c], np.nan)
    diagnostics = dict(stats)
    diagnostics.update({
        'views_used': int(np.count_nonzero(found.any(axis=1))),
        'views_available': int(np.count_nonzero(valid)),
        'corners_found': int(np.count_nonzero(found.any(axis=0))),
        'corners_total': m, 'views_per_corner': per_corner.astype(int),
        'line_residual_rms_px': float(residual_rms), 'window': half,
        'central_view': (int(i_values[ic]), int(j_values[jc])), 'board_type': 'charuco',
    })
    return Detection(obs, central_uv, views[jc, ic].astype(np.float32), diagnostics)


def with_neighbours(board, ids, uv, shape, half):
    """
    ids (K,), uv (K, 2) and the board's other corners next to them (one square along a row or
    a column) that lie in the view (``half`` + 2 px inside its edges of ``shape`` (H, W)),
    placed by the board's homography through the found corners.

    CharucoDetector names only corners with a marker read beside them, so the row of corners
    next to the view's edge, whose markers the edge cuts, is missing; their labels follow from
    their neighbours, and cornerSubPix and the line fit across views check their places.
    """
    if len(ids) < 4:
        return ids, uv
    h_mat, _ = cv2.findHomography(board.points()[ids, :2], np.asarray(uv, np.float64), 0)
    if h_mat is None:
        return ids, uv
    have = np.zeros(board.n_points, bool)
    have[ids] = True
    grid = have.reshape(board.rows, board.cols)
    near = np.zeros_like(grid)
    near[1:] |= grid[:-1]
    near[:-1] |= grid[1:]
    near[:, 1:] |= grid[:, :-1]
    near[:, :-1] |= grid[:, 1:]
    extra = np.flatnonzero(near.ravel() & ~have)
    if not extra.size:
        return ids, uv
    pred = cv2.perspectiveTransform(board.points()[extra, None, :2], h_mat).reshape(-1, 2)
    m = half + 2
    inside = (pred[:, 0] >= m) & (pred[:, 1] >= m) & (pred[:, 0] <= shape[1] - 1 - m) & \
        (pred[:, 1] <= shape[0] - 1 - m)
    ids = np.concatenate([ids, extra[inside]])
    uv = np.concatenate([uv, pred[inside]])
    order = np.argsort(ids)
    return ids[order], uv[order]


def check_enough_corners(board, ids, min_corners):
    """Raise DetectionError unless ``ids`` (K,) name ``min_corners`` or more corners, not all
    on one row or one column of the board (a pose needs them to be fixed)."""
    rc = board.point_rc(ids)
    if len(ids) < min_corners:
        raise DetectionError(f'{len(ids)} ChArUco corners kept across views (need '
                             f'{min_corners}: a pose counts with the corners it shows)')
    if len(np.unique(rc[:, 0])) < 2 or len(np.unique(rc[:, 1])) < 2:
        raise DetectionError(f'the {len(ids)} ChArUco corners kept lie on one board line '
                             '(a pose needs corners on two rows and two columns)')


def _window(board, ids, uv, window):
    """cornerSubPix half window (px): ``window``, or 0.4 of the smallest corner spacing, 2..9."""
    if window is not None:
        return int(window)
    rc = board.point_rc(ids)
    d = []
    for k in range(len(ids)):
        near = np.abs(rc - rc[k]).sum(axis=1) == 1
        if near.any():
            d.append(np.min(np.linalg.norm(uv[near] - uv[k], axis=1)))
    spacing = np.min(d) if d else 10.0
    return int(np.clip(np.round(0.4 * spacing), 2, 9))
