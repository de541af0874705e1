"""
Checkerboard corners of a live camera followed from frame to frame.

A full search (:func:`lf_mpc_calib.features.corners.detect_corners`) looks for the board in
the whole central view every frame (findChessboardCornersSB on an upsampled view: most of
its time). Between consecutive frames of a live camera the board moves little, so
:class:`CornerTracker` starts from the previous frame instead:

1. each corner's line across views (u = u_c + a i + b j) fitted on the previous frame
   predicts it in every usable view;
2. the central view is refined first (cornerSubPix, the detector's window): its move from
   the prediction is the board's motion; a median move beyond ``max_motion`` (the board
   moved too far for the window to hold it), too few corners refined, or a central grid that
   is no longer a perspective image of the board (:func:`grid_error`) ends the tracking;
3. every other view is refined from its prediction shifted by that motion, all corners of
   all views in one cornerSubPix call on a mosaic of small patches (smoothed and upsampled as
   the full search does, so the corners agree to a few hundredths of a pixel);
4. the detector's checks follow (step, contrast, robust line per corner across views); more
   than ``max_off_line`` of the refined rows off their lines, or fewer than ``min_kept`` of
   the previous frame's corners, ends the tracking.

When tracking ends (or there is no previous frame, or the views changed) the full search runs,
and the labels come from it again. Tracked corners equal the full search's to about 1e-4 px, except
where the cornerSubPix window (0.4 x the corner spacing, rounded) differs: the full search
takes the spacing from its unrefined grid, the tracker from the refined corners, and near a
rounding boundary a window 1 px apart moves some views' corners by up to 0.07 px.
"""

import numpy as np
import cv2

from lf_mpc_calib.errors import DetectionError, InvalidInputError
from lf_mpc_calib.features.corners import CornerOptions, checked_views, fit_lines, \
    observation_rows, robust_lines, smooth, detect_corners, grid_error, \
    resolve_orientation, window_for
from lf_mpc_calib.features.interface import Detection

_BLUR_REACH = 4      # px a sigma-1 Gaussian (9-tap) reads beyond a pixel
_CUBIC_REACH = 2     # px a cubic resize reads beyond a pixel


class TrackingLost(DetectionError):
    """The previous frame's corners cannot be followed into this one (the reason)."""


class CornerTracker:
    """
    Board corners in consecutive decoded light fields, tracked when possible.

    board: the Checkerboard; options: the CornerOptions of the full search and of the
    refinement; max_motion: largest median move (px, central view) of the board between two
    frames that is tracked (None: the cornerSubPix half window); min_kept: least fraction of
    the previous frame's corners found again; max_off_line: largest fraction of refined rows
    dropped off their cross-view lines.

    After :meth:`detect`, ``last_mode`` is 'tracked' or 'full search' and ``last_reason``
    says why the full search ran ('' when tracked). Not thread-safe.
    """

    def __init__(self, board, options=None, *, max_motion=None, min_kept=0.9,
                 max_off_line=0.2):
        if not 0.0 < float(min_kept) <= 1.0 or not 0.0 <= float(max_off_line) < 1.0:
            raise InvalidInputError(f'min_kept must be in (0, 1] and max_off_line in [0, 1), '
                                    f'got {min_kept}, {max_off_line}')
        self.board = board
        self.options = options or CornerOptions()
        self.max_motion = max_motion
        self.min_kept = float(min_kept)
        self.max_off_line = float(max_off_line)
        self.last_mode = ''
        self.last_reason = ''
        self._state = None

    def reset(self):
        """Forget the previous frame: the next one is a full search."""
        self._state = None

    def detect(self, lightfield, *, pose=0):
        """A Detection of the board in ``lightfield`` (tracked or full); DetectionError."""
        reason = 'no previous frame' if self._state is None else ''
        if self._state is not None:
            try:
                det, state = self._track(lightfield, pose)
            except TrackingLost as exc:
                reason = str(exc)
            else:
                self._state, self.last_mode, self.last_reason = state, 'tracked', ''
                return det
        self._state = None
        self.last_mode, self.last_reason = 'full search', reason
        det = detect_corners(lightfield, self.board, pose=pose, options=self.options)
        self._state = _state_from(lightfield, det, self.board)
        return det

    # ---- tracking -----------------------------------------------------------------------
    def _track(self, lightfield, pose):
        """(Detection, the next state) of ``lightfield`` found from the previous frame's
        lines across views; TrackingLost when the board moved too far or changed."""
        board, prev = self.board, self._state
        views, i_values, j_values, valid = checked_views(lightfield)
        if views.shape != prev['shape'] or not np.array_equal(valid, prev['valid']):
            raise TrackingLost('the usable views changed')
        n_j, n_i = views.shape[:2]
        m = board.n_points
        jj, ii = np.meshgrid(j_values, i_values, indexing='ij')
        ij_all = np.column_stack([ii.ravel(), jj.ravel()]).astype(float)
        design = np.column_stack([np.ones(len(ij_all)), ij_all])
        pred = np.einsum('vk,mkc->vmc', design, prev['coef'])           # (V, M, 2)
        jc, ic = prev['centre']
        flat_c = jc * n_i + ic
        central = views[jc, ic].astype(np.float32)
        ref_c, half, motion, dist, ok_c = self._track_central(views, (jc, ic), central,
                                                              pred[flat_c], prev['half'])
        shift = np.where(ok_c[:, None], motion, np.median(motion[ok_c], axis=0))
        uv = np.full((n_j * n_i, m, 2), np.nan)
        found = np.zeros((n_j * n_i, m), bool)
        uv[flat_c, ok_c] = ref_c[ok_c]
        found[flat_c] = ok_c
        others = [(a, b) for a in range(n_j) for b in range(n_i)
                  if valid[a, b] and (a, b) != (jc, ic)]
        flats = np.array([a * n_i + b for a, b in others], int)
        uv[flats], found[flats] = self._track_others(views, others, pred[flats] + shift[None],
                                                     half, central, ref_c[ok_c])
        found, residual_rms, dropped, n_found = self._kept_on_lines(ij_all, uv, found)
        obs = observation_rows(lightfield, board, pose, uv, found, n_i)
        central_uv = np.where(found[flat_c][:, None], uv[flat_c], np.nan)
        diagnostics = {
            'tracked': True, 'motion_px': float(np.median(dist[ok_c])), 'off_line': dropped,
            'views_used': int(np.count_nonzero(found.any(axis=1))),
            'views_available': int(np.count_nonzero(valid)),
            'corners_found': n_found, 'corners_total': m,
            'views_per_corner': found.sum(axis=0).astype(int),
            'line_residual_rms_px': float(residual_rms), 'window': half,
            'central_view': (int(i_values[ic]), int(j_values[jc])),
        }
        state = dict(prev, coef=fit_lines(ij_all, uv, found)[0], corners=n_found, half=half)
        return Detection(obs, central_uv, central, diagnostics), state

    def _track_central(self, views, centre, central, pred_c, half):
        """
        Refine the corners predicted at pred_c (M, 2) in the central view ``centre`` (j, i),
        whose pixels are ``central`` (float32):
        (refined (M, 2), the window half-size used, motion (M, 2), its length (M,), ok (M,)
        bool: refined within the motion limit). TrackingLost when too few are, the board
        moved too far, is no longer a grid or its corners' labels do not hold.
        """
        opt, board = self.options, self.board
        ref_c = _refine_patches(views, [centre], pred_c[None], half, opt)[0]
        # the full search's window follows the corner spacing of this frame: refine again
        # when it changed (cornerSubPix's answer depends on its window)
        spacing_grid = ref_c.reshape(board.rows, board.cols, 2)
        if np.isfinite(spacing_grid).all() and window_for(spacing_grid, opt.window) != half:
            half = window_for(spacing_grid, opt.window)
            ref_c = _refine_patches(views, [centre], pred_c[None], half, opt)[0]
        motion = ref_c - pred_c
        dist = np.linalg.norm(motion, axis=1)
        limit = float(half if self.max_motion is None else self.max_motion)
        have = np.isfinite(pred_c[:, 0])
        ok_c = np.isfinite(dist) & (dist < limit)
        if np.count_nonzero(ok_c) < self.min_kept * np.count_nonzero(have):
            moved = np.nanmedian(dist) if np.isfinite(dist).any() else np.inf
            raise TrackingLost(f'{np.count_nonzero(ok_c)} of {np.count_nonzero(have)} corners '
                               f'refined in the central view (median move {moved:.1f} px, limit '
                               f'{limit:.1f} px): the board moved too far')
        if np.median(dist[ok_c]) > limit:
            raise TrackingLost(f'the board moved {np.median(dist[ok_c]):.1f} px in the '
                               f'central view (limit {limit:.1f} px)')
        err = _partial_grid_error(ref_c, ok_c, board)
        if err > opt.max_grid_error:
            raise TrackingLost(f'the central corners are no longer a view of the board (grid '
                               f'error {err:.2f} of a square, limit {opt.max_grid_error})')
        _check_labels(central, ref_c, ok_c, board, opt)
        return ref_c, half, motion, dist, ok_c

    def _track_others(self, views, others, start, half, central, central_found):
        """(uv (O, M, 2), found (O, M) bool) of the corners refined from ``start`` (O, M, 2)
        in the views ``others`` [(j, i)]: found where the step stays under max_step and the
        contrast is min_contrast of the central corners' (central_found (K, 2)); NaN where
        not found."""
        opt = self.options
        ref, contrast = _refine_patches(views, others, start, half, opt, contrast=True)
        step = np.linalg.norm(ref - start, axis=2)
        ok = np.isfinite(step) & (step < opt.max_step)
        if opt.min_contrast > 0:
            central_contrast = np.median(_window_contrast(central, central_found, half))
            ok &= contrast >= opt.min_contrast * central_contrast
        return np.where(ok[..., None], ref, np.nan), ok

    def _kept_on_lines(self, ij_all, uv, found):
        """(found (V, M) less the corner views off their lines across views and the corners
        in fewer than min_views, the lines' RMS residual px, the views dropped, the corners
        kept); TrackingLost when too many were dropped or too few corners are left."""
        opt = self.options
        refined = int(found.sum())
        found, residual_rms, dropped = robust_lines(ij_all, uv, found, opt.line_threshold)
        if dropped > self.max_off_line * max(refined, 1):
            raise TrackingLost(f'{dropped} of {refined} tracked corner views are off their '
                               f'lines across views (limit {self.max_off_line:.0%})')
        per_corner = found.sum(axis=0)
        found &= (per_corner >= opt.min_views)[None, :]
        n_found = int(np.count_nonzero(found.any(axis=0)))
        if n_found < self.min_kept * self._state['corners']:
            raise TrackingLost(f'{n_found} corners tracked of the {self._state["corners"]} of '
                               f'the previous frame (limit {self.min_kept:.0%})')
        return found, residual_rms, dropped, n_found


def _state_from(lightfield, det, board):
    """What tracking needs of a full-search Detection: per-corner lines across views."""
    views, i_values, j_values, valid = checked_views(lightfield)
    n_j, n_i = views.shape[:2]
    obs = det.observations
    ijuv = np.asarray(obs.ijuv, float)
    flat = np.searchsorted(j_values, ijuv[:, 1]) * n_i + np.searchsorted(i_values, ijuv[:, 0])
    uv = np.full((n_j * n_i, board.n_points, 2), np.nan)
    found = np.zeros((n_j * n_i, board.n_points), bool)
    point = np.asarray(obs.point, int)
    uv[flat, point] = ijuv[:, 2:]
    found[flat, point] = True
    jj, ii = np.meshgrid(j_values, i_values, indexing='ij')
    ij_all = np.column_stack([ii.ravel(), jj.ravel()]).astype(float)
    i_c, j_c = det.diagnostics['central_view']
    centre = (int(np.flatnonzero(j_values == j_c)[0]), int(np.flatnonzero(i_values == i_c)[0]))
    return {'shape': views.shape, 'valid': valid.copy(), 'centre': centre,
            'half': int(det.diagnostics['window']),
            'coef': fit_lines(ij_all, uv, found)[0],
            'corners': int(np.count_nonzero(found.any(axis=0)))}


def _check_labels(central, uv, ok, board, opt):
    """
    TrackingLost unless the full search would label the tracked corners the same way.

    The grid is completed by the homography of the corners ``ok`` and put through the full
    search's square-colour and margin checks (a board that jumped by a whole square refines
    onto its neighbours' corners with a small move: the colours or the margin give it away).
    """
    rc = np.mgrid[0:board.rows, 0:board.cols].reshape(2, -1).T[:, ::-1].astype(np.float64)
    H, _ = cv2.findHomography(rc[ok], uv[ok].astype(np.float64), 0)
    if H is None:
        raise TrackingLost('no homography through the tracked central corners')
    grid = cv2.perspectiveTransform(rc.reshape(-1, 1, 2), H).reshape(board.rows, board.cols, 2)
    try:
        best = resolve_orientation(central, grid, board, colour_check=opt.colour_check,
                                   margin_check=opt.margin_check)
    except DetectionError as exc:
        raise TrackingLost(f'the tracked corners fail the board checks: {exc}') from None
    if not np.array_equal(best, grid):
        raise TrackingLost('the board is labelled otherwise than in the previous frame')


def _partial_grid_error(uv, ok, board):
    """:func:`grid_error` of the corners ``ok`` (M,) of uv (M, 2); inf below 4 corners."""
    if np.count_nonzero(ok) < 4:
        return np.inf
    grid = np.where(ok[:, None], uv, np.nan).reshape(board.rows, board.cols, 2)
    rc = np.mgrid[0:board.rows, 0:board.cols].reshape(2, -1).T[:, ::-1].astype(np.float64)
    H, _ = cv2.findHomography(rc[ok], uv[ok].astype(np.float64), 0)
    if H is None:
        return np.inf
    proj = cv2.perspectiveTransform(rc[ok].reshape(-1, 1, 2), H).reshape(-1, 2)
    spacing = np.concatenate([np.linalg.norm(grid[:, 1:] - grid[:, :-1], axis=-1).ravel(),
                              np.linalg.norm(grid[1:] - grid[:-1], axis=-1).ravel()])
    if not np.isfinite(spacing).any():
        return grid_error(grid, board)
    return float(np.max(np.linalg.norm(proj - uv[ok], axis=1)) / max(np.nanmin(spacing), 1e-9))


def _refine_patches(views, view_ab, start, half, opt, contrast=False):
    """
    cornerSubPix of the corners start (K, M, 2) in views view_ab [(a, b)] * K, in one call.

    Each corner is cut out of its view with a margin (reflected at the view border as the
    full search's filters do), the patches tiled on one mosaic, smoothed and upsampled
    together; a refined corner equals the full search's (cornerSubPix on the whole view) to
    1e-4 px.
    Returns refined (K, M, 2), NaN where the window leaves the view; with ``contrast`` also
    the 10-90 % range (K, M) of the smoothed view in the half window at each refined corner.
    """
    k, m = start.shape[:2]
    rows, cols = views.shape[2:4]
    f = max(int(opt.subpix_upsample), 1)
    reach = half + int(np.ceil(opt.max_step)) + 1
    pad = reach + _CUBIC_REACH + _BLUR_REACH + 1
    size = 2 * pad + 1
    flat_uv = start.reshape(-1, 2)
    ok = np.all(np.isfinite(flat_uv), axis=1)
    ok &= (flat_uv[:, 0] >= half + 1) & (flat_uv[:, 1] >= half + 1)
    ok &= (flat_uv[:, 0] <= cols - half - 2) & (flat_uv[:, 1] <= rows - half - 2)
    out = np.full((k * m, 2), np.nan)
    con = np.zeros(k * m)
    if not ok.any():
        return (out.reshape(k, m, 2), con.reshape(k, m)) if contrast else out.reshape(k, m, 2)
    idx = np.flatnonzero(ok)
    n = len(idx)
    which = np.array([a * views.shape[1] + b for a, b in view_ab], int)[idx // m]
    centre = np.rint(flat_uv[idx]).astype(int)
    flat_views = views.reshape(-1, rows, cols)
    # patches on a near-square mosaic (cv2.resize is slow on a tall thin image), sliced out
    # of their views (index-reflected at the view borders), unused tiles black
    g_cols = int(np.ceil(np.sqrt(n)))
    g_rows = -(-n // g_cols)
    mosaic = np.zeros((g_rows * size, g_cols * size), flat_views.dtype)
    tiles = mosaic.reshape(g_rows, size, g_cols, size)
    lo, hi = centre - pad, centre + pad + 1
    sliced = np.all((lo >= 0) & (hi <= [cols, rows]), axis=1)
    off = np.arange(-pad, pad + 1)
    for t in range(n):
        row, col = divmod(t, g_cols)
        if sliced[t]:
            tiles[row, :, col, :] = flat_views[which[t], lo[t, 1]:hi[t, 1], lo[t, 0]:hi[t, 0]]
        else:
            tiles[row, :, col, :] = flat_views[which[t]][
                _reflect(centre[t, 1] + off, rows)[:, None], _reflect(centre[t, 0] + off, cols)]
    mosaic = smooth(mosaic.astype(np.float32, copy=False), opt.smooth_sigma)
    # the smoothing's margin is no longer needed: cut it before upsampling
    size, pad = size - 2 * _BLUR_REACH, pad - _BLUR_REACH
    mosaic = np.ascontiguousarray(
        mosaic.reshape(g_rows, size + 2 * _BLUR_REACH, g_cols, size + 2 * _BLUR_REACH)
        [:, _BLUR_REACH:-_BLUR_REACH, :, _BLUR_REACH:-_BLUR_REACH]).reshape(
            g_rows * size, g_cols * size)
    big = mosaic if f == 1 else cv2.resize(mosaic, None, fx=f, fy=f,
                                           interpolation=cv2.INTER_CUBIC)
    origin = np.column_stack([(np.arange(n) % g_cols) * size, (np.arange(n) // g_cols) * size])
    local = flat_uv[idx] - centre + pad                                  # within the patch
    pts = ((local + origin + 0.5) * f - 0.5).astype(np.float32).reshape(-1, 1, 2)
    crit = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 40, 1e-3)
    cv2.cornerSubPix(big, pts, (half * f, half * f), (-1, -1), crit)
    refined_local = (pts.reshape(-1, 2) + 0.5) / f - 0.5 - origin
    inside = np.all(np.abs(refined_local - local) <= reach - half, axis=1)
    out[idx[inside]] = refined_local[inside] - pad + centre[inside]
    if contrast:   # each window stays inside its patch (``inside``)
        con[idx[inside]] = _window_contrast(mosaic, refined_local[inside] + origin[inside],
                                            half)
    out = out.reshape(k, m, 2)
    return (out, con.reshape(k, m)) if contrast else out


def _reflect(index, length):
    """Indices reflected at both ends as OpenCV's BORDER_REFLECT_101 (gfedcb|abcdefgh|gfedcba)."""
    period = 2 * length - 2
    index = np.abs(index) % period
    return np.where(index >= length, period - index, index)


def _window_contrast(image, uv, half):
    """
    10-90 % range (N,) of image (H, W) in the (2 half + 1)^2 window at each round(uv) (N, 2).

    The window is clipped to the image (as the full search's contrast check does).
    """
    if len(uv) == 0:
        return np.zeros(0)
    h, w = image.shape
    off = np.arange(-half, half + 1)
    c = np.rint(uv).astype(int)
    rr = c[:, 1, None, None] + off[None, :, None]
    cc = c[:, 0, None, None] + off[None, None, :]
    inside = (rr >= 0) & (rr < h) & (cc >= 0) & (cc < w)
    vals = image[np.clip(rr, 0, h - 1), np.clip(cc, 0, w - 1)]
    vals = vals.reshape(len(uv), -1)
    inside = inside.reshape(len(uv), -1)
    full = inside.all(axis=1)
    out = np.empty(len(uv))
    if full.any():
        lo, hi = np.percentile(vals[full], (10, 90), axis=1)
        out[full] = hi - lo
    for row in np.flatnonzero(~full):
        lo, hi = np.percentile(vals[row, inside[row]], (10, 90))
        out[row] = hi - lo
    return out


__all__ = ['CornerTracker', 'TrackingLost']
