"""
Board corners of a focused camera tracked from frame to frame inside the micro-images.

A full detection (:meth:`MicroImageCornerDetector.detect`: disparity search, render, OpenCV's
board search, per-corner refinement, aperture correction) costs seconds per frame. Between two
processed frames of a camera rate stream the board moves little, so from the (x, w) of every
corner of the last frame (equation (1) of :mod:`~lf_mpc_calib.features.micro_image_corners`,
q = c + w (c - x)) every row (a corner in a micro-image whose usable disk holds it) is

1. predicted by (1), in every micro-image that sees the corner now (rows enter and leave as
   the board moves; :meth:`MicroImageLattice.within_many`), from the last frame's (x, w), or
   extrapolated from the last two where that predicted the last frame better than standing
   still did (frames dropped in between make a constant velocity wrong);
2. refined in one vectorised call (:func:`~lf_mpc_calib.features.micro_image_refine.
   refine_in_disks`, the detector's window and disk), on a crop around the board;
3. checked as the detector checks it: within ``max_step`` of the prediction, inside the
   usable disk, a saddle (2nd angular harmonic) of the detector's strength; then (x, w) of
   every corner is fitted to its rows robustly (all corners at once,
   :func:`~lf_mpc_calib.features.micro_image_corners.fit_xw`), corners seen in fewer than
   ``min_views`` micro-images are dropped, and the fitted x must lie on the board's
   homography. Corners not found keep the place the board's homography gives them, so they
   are looked for again when they come back into the micro-images.

When the frame's rendered image is given, the board is re-acquired at about the tracker's
cost, seeded by its last place and size, when the prediction fails (a board gone and back) or
when seed A's move disagrees with the prediction by more than ``JUMP_PX`` (a jump: then the
prediction is not tried):

A. ``shift``: the rendered image around the board in the last tracked frame (its outer
   squares, margin and edge) is matched (normalised cross-correlation, first blurred to the
   board's outline: a checkerboard matches itself two squares off) in a window three times its
   size around it; the corners' last (x, w) moved by that shift predict the rows;
B. ``board search``: OpenCV's board search (:func:`~lf_mpc_calib.features.corners.
   quick_find_board`: its fast check, then one search) in a crop of the rendered image around
   the board's last place (its size again on every side; the whole rendered image when that
   fails).

Each seed is refined, and a second time from the first pass's fit (corners it missed placed
by its homography) when the first found fewer than ``SECOND_PASS`` of the corners. With the
rendered image, a board (tracked or re-acquired) is reported only when the square colours and
the light margin of the rendered image label it as the full search would
(:func:`~lf_mpc_calib.features.corners.resolve_orientation` returns the grid unchanged: a
prediction off by about a square refines every row onto the neighbouring corner, consistently,
which no check in the micro-images sees) and its rows fit (x, w) as well as the full
detection's did (RMS within ``max_residual`` times). A ChArUco board (partly out of view, its
squares of both colours under markers) is labelled by its markers instead, as the full search
names it: the corners the markers of the rendered image name must lie within
``MARKER_LABEL_ERROR`` squares of the tracked ones of the same ids (markers of another board:
refused with the reason), and seed B is the board those markers name in the whole rendered
image (read once per frame for both).

The aperture's move of each row (what the full detection subtracts, 0.03 px RMS) is held from
the last full detection while the row stays within ``move_drift`` px of where it was measured
in its micro-image; a row that drifts further gets the radial move that the full detection's
rows show at its distance from the micro-image centre (medians in radial bins, linearly
interpolated: about half of the moves' variance on the simulated Keplerian preset). The
prediction may be up to twice the detector's ``max_step`` off (the detector's first pass).
:meth:`MicroImageCornerTracker.track` returns None with the reason when fewer than
``min_fraction`` of the corners of the last full detection remain; the state is kept (the
next frame is tracked or re-acquired from the last good one, ``lost_frames`` counts the frames
lost since) until :meth:`start` takes a new full detection.

    tracker = MicroImageCornerTracker(detector, board)
    tracker.start(detection)                       # a Detection of detector.detect
    obs, reason = tracker.track(norm, rendered, w) # norm: detector.normalise(raw); rendered:
                                                   # the image rendered from it at w (or None)
    tracker.last_mode                              # 'tracked', 'tracked (shifted)': seeded
                                                   # by the rendered image's move (A),
                                                   # 're-acquired (shift)' or '(board search)':
                                                   # after the first try failed
"""

import cv2
import numpy as np

from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import DetectionError
from lf_mpc_calib.features.corners import quick_find_board, resolve_orientation
from lf_mpc_calib.features.micro_image_corners import RIM_WINDOW, fit_xw, saddle_strength
from lf_mpc_calib.features.micro_image_refine import image_gradients, refine_in_disks

REFINE_ITERATIONS = 8
"""Iterations of the refinement from the prediction (20 in a full detection: rows then differ
from a full detection of the same frame by 0.019 px median with 8 or 20, 0.022-0.033 with 4)."""

CROP_MARGIN = 12
"""Pixels kept around the rows' bounding box for the gradients and the saddle test."""

MIN_MATCH = 0.5
"""Least normalised cross-correlation of the board's last rendered image with this frame's."""

JUMP_PX = 1.0
"""Rendered px (about the px a corner moves in a micro-image) that the board's rendered image
may move from the prediction before the frame is seeded by that move instead (seed A)."""

SECOND_PASS = 0.9
"""A re-acquisition seed is refined a second time (from its first fit) only when the first
found fewer than this share of the full detection's corners (a turn: the seed's outer corners
off)."""

TEMPLATE_PAD = 2.5
"""Squares of the rendered image kept around the outer corners in the template of seed A: the
outer squares, the board's margin and its edge against the background (what a shifted
checkerboard does not match)."""

MARKER_LABEL_ERROR = 0.3
"""Largest median distance (squares) of a tracked ChArUco board's corners from those its
markers in the rendered image name (a board one square off is a square away)."""

MIN_MARKER_CORNERS = 2
"""Fewest tracked ChArUco corners the markers in the rendered image must name."""


class MicroImageCornerTracker:
    """
    Track the corners of a full focused detection through the following frames (module
    docstring). detector: the MicroImageCornerDetector that made the detection; board: its
    Checkerboard; min_fraction: least share of the full detection's corners to go on with;
    move_drift: px a row may move in its micro-image before its held aperture move is stale;
    max_residual: largest RMS (x, w) fit residual of a re-acquired board's rows, in units of
    the full detection's.
    """

    def __init__(self, detector, board, *, min_fraction=0.7, move_drift=1.0, max_residual=2.0):
        self.det, self.board = detector, board
        self.min_fraction, self.move_drift = float(min_fraction), float(move_drift)
        self.max_residual = float(max_residual)
        self.started = False
        self.tracked_frames = self.lost_frames = 0
        self.last_mode = ''
        self._markers = None    # (rendered image, its ChArUco (ids, uv) or None, error)
        self._rc = np.mgrid[0:board.rows, 0:board.cols].reshape(2, -1).T[:, ::-1].astype(float)

    def start(self, detection):
        """Take the corners of a full :class:`Detection` (its diagnostics' per-row arrays)."""
        d = detection.diagnostics
        obs = detection.observations
        corner = np.asarray(obs.point, np.int64)
        micro = np.asarray(d['row_micro_image'], np.int64)
        move = np.asarray(d['row_move'], float)
        refined = obs.ijuv[:, :2] + obs.ijuv[:, 2:] + move                # before the move
        n_micro = len(self.det.centres)
        order = np.argsort(corner * n_micro + micro)
        self.held_key = (corner * n_micro + micro)[order]
        self.held_move, self.held_at = move[order], refined[order]
        self.radial_move = _radial_profile(refined - obs.ijuv[:, :2], move)
        self.spacing = float(d['corner_spacing_px'])
        self.half, r_valid = self.det.windows(self.spacing, float(d['inverse_virtual_depth']))
        self.r_valid = r_valid
        self.r_use = r_valid - RIM_WINDOW * self.half
        self.contrast = float(d['board_contrast'])
        self.fit_rms = float(d['fit_residual_rms_px'])
        x, w, _, _ = fit_xw(corner, self.det.centres[micro], refined, np.ones(len(corner), bool),
                            self.board.n_points, self.det.options.fit_threshold,
                            self.det.options.min_views)
        self.n_start = int(np.sum(np.isfinite(w)))
        self.x, self.w = self._completed(x, w, np.isfinite(w))
        self.seen = np.isfinite(w)
        self.x_prev, self.w_prev = self.x.copy(), self.w.copy()
        self.use_velocity = False
        self.template = None
        if detection.reference_image is not None:
            self.template = self._template(np.asarray(detection.reference_image, np.float32),
                                           float(d['inverse_virtual_depth']), self.x[self.seen])
        self.started = True
        self.tracked_frames = self.lost_frames = 0
        self.last_mode = 'full search'

    def track(self, norm, rendered=None, w_render=None):
        """
        (Observations of this frame (pose 0), None) or (None, reason) when the board was lost;
        norm: the frame normalised by :meth:`MicroImageCornerDetector.normalise` (or the live
        renderer's equivalent); rendered, w_render: the image rendered from norm at inverse
        virtual depth w_render (normalised units), for re-acquisition (None: none).
        """
        if not self.started:
            return None, 'no full detection to track from yet'
        x_p, w_p = self._prediction()
        shifted = None if rendered is None else self._shift_seed(rendered, float(w_render))
        if shifted is not None and _median_distance(shifted[0], x_p) * abs(w_render) > JUMP_PX:
            found, mode, why = self._reacquire(norm, rendered, float(w_render), shifted, (
                f'the board\'s rendered image moved {_median_distance(shifted[0], x_p):.1f} raw '
                f'px from the prediction'))
            mode = 'tracked (shifted)' if mode == 're-acquired (shift)' else mode
        else:
            found, why = self._follow(norm, x_p, w_p, passes=1)
            if found is not None and rendered is not None:
                why = self._refusal(found, rendered, float(w_render))
                found = None if why else found
            mode = 'tracked'
            if found is None and rendered is not None:
                found, mode, why = self._reacquire(norm, rendered, float(w_render), shifted, why)
        if found is None:
            self.lost_frames += 1
            return None, why
        self._accept(found, mode, rendered, w_render)
        return self._observations(found), None

    # ---- prediction and refinement -------------------------------------------------------
    def _prediction(self):
        """(x (C, 2), w (C,)) expected now: the last frame's, or extrapolated (module doc)."""
        if not self.use_velocity:
            return self.x, self.w
        return 2 * self.x - self.x_prev, 2 * self.w - self.w_prev

    def _follow(self, norm, x_p, w_p, passes):
        """
        Rows refined from the prediction (x_p (C, 2), w_p (C,)), ``passes`` times (each next
        pass from the last one's fit). Returns (found dict, None) or (None, reason).
        """
        opt = self.det.options
        for n_pass in range(passes):
            rows = self._refine_rows(norm, x_p, w_p)
            if rows is None:
                return None, 'every tracked corner left the micro-images'
            c, m, cen, ref, good = rows
            x, w, keep, res = fit_xw(c, cen, ref, good, self.board.n_points,
                                     opt.fit_threshold, opt.min_views)
            kept = self.det.homography_check(x, self.board, self.spacing)
            keep &= kept[c]
            views = np.bincount(c[keep], minlength=self.board.n_points)
            keep &= views[c] >= opt.min_views
            used = views >= opt.min_views
            n_used = int(np.sum(used))
            if n_pass + 1 == passes or n_used < 4 or n_used >= SECOND_PASS * self.n_start:
                break           # (a second pass from a seed that found most corners: no gain)
            x_p, w_p = self._completed(x, w, used)
        if n_used < max(opt.min_corners, self.min_fraction * self.n_start):
            return None, (f'tracking kept {n_used} of the {self.n_start} corners of the last '
                          f'full detection (need {self.min_fraction:.0%})')
        return dict(c=c, m=m, cen=cen, ref=ref, keep=keep, x=x, w=w, used=used,
                    rms=float(np.sqrt(np.mean(res[keep] ** 2)))), None

    def _refine_rows(self, norm, x_p, w_p):
        """(corner (R,), micro-image (R,), centre (R, 2), refined (R, 2), good (R,)) or None."""
        opt = self.det.options
        ok = np.all(np.isfinite(x_p), axis=1) & np.isfinite(w_p)
        reach = np.max(self.r_use) / np.maximum(np.abs(w_p), 1e-6)
        c, m = self.det.lattice.within_many(np.where(ok[:, None], x_p, 0.0),
                                            np.where(ok, reach, np.nan))
        cen = self.det.centres[m]
        pred = cen + w_p[c, None] * (cen - x_p[c])
        inside = np.hypot(*(pred - cen).T) <= self.r_use[m]
        c, m, cen, pred = c[inside], m[inside], cen[inside], pred[inside]
        if len(c) < opt.min_views:
            return None
        # gradients and smoothing on a crop around the rows only
        h, wd = norm.shape
        lo = np.maximum(np.floor(pred.min(0)) - CROP_MARGIN, 0).astype(int)
        hi = np.minimum(np.ceil(pred.max(0)) + CROP_MARGIN, [wd - 1, h - 1]).astype(int)
        crop = np.ascontiguousarray(norm[lo[1]:hi[1] + 1, lo[0]:hi[0] + 1])
        off = lo.astype(float)
        ref = refine_in_disks(crop, pred - off, cen - off, self.r_valid[m], self.half[m],
                              gradients=image_gradients(crop), max_iter=REFINE_ITERATIONS) + off
        good = np.all(np.isfinite(ref), axis=1)
        good &= np.hypot(*(ref - pred).T) <= 2.0 * opt.max_step
        good &= np.hypot(*(ref - cen).T) <= self.r_use[m]
        idx = np.nonzero(good)[0]
        smooth = cv2.GaussianBlur(crop, (0, 0), 0.7)
        good[idx] &= saddle_strength(smooth, ref[idx] - off, self.contrast) >= opt.min_saddle
        return c, m, cen, ref, good

    def _completed(self, x, w, ok):
        """
        (x (C, 2), w (C,)) of every corner: the fitted ones ``ok`` (C,) as they are, the others
        from the board's homography through them (w from a plane through theirs).
        """
        ok = ok & np.all(np.isfinite(x), axis=1) & np.isfinite(w)
        if ok.sum() < 4:
            return x.copy(), w.copy()
        H, _ = cv2.findHomography(self._rc[ok], x[ok], 0)
        if H is None:
            return x.copy(), w.copy()
        x_all = cv2.perspectiveTransform(self._rc.reshape(-1, 1, 2), H).reshape(-1, 2)
        a = np.column_stack([self._rc, np.ones(len(self._rc))])
        coef = np.linalg.lstsq(a[ok], w[ok], rcond=None)[0]
        return (np.where(ok[:, None], x, x_all), np.where(ok, w, a @ coef))

    # ---- re-acquisition ------------------------------------------------------------------
    def _reacquire(self, norm, rendered, w_render, shifted, why):
        """(found, mode, reason) of the first seed (module docstring: A, then B) that holds;
        shifted: seed A, made already (or None)."""
        reasons = [why]
        for mode, seed in (('shift', lambda: shifted),
                           ('board search', lambda: self._board_seed(rendered, w_render))):
            pred = seed()
            if pred is None:
                reasons.append(f'{mode}: no seed')
                continue
            found, why = self._follow(norm, *pred, passes=2)
            if found is not None:
                why = self._refusal(found, rendered, w_render)
            if why is None:
                return found, f're-acquired ({mode})', None
            reasons.append(f'{mode}: {why}')
        return None, '', '; '.join(reasons)

    def _refusal(self, found, rendered, w_render):
        """Why a re-acquired board cannot be reported (labels, fit), or None when it can."""
        limit = self.max_residual * max(self.fit_rms, 0.02)
        if not found['rms'] <= limit:
            return (f'its rows fit (x, w) to {found["rms"]:.3f} px RMS, the full detection\'s '
                    f'{self.fit_rms:.3f} (limit {limit:.3f})')
        ok = found['used']
        if _is_charuco(self.board):
            return self._marker_refusal(found['x'], ok, rendered, w_render)
        H, _ = cv2.findHomography(self._rc[ok], found['x'][ok] * abs(w_render), 0)
        if H is None:
            return 'no homography through its corners'
        grid = cv2.perspectiveTransform(self._rc.reshape(-1, 1, 2), H).reshape(
            self.board.rows, self.board.cols, 2)
        try:
            best = resolve_orientation(rendered, grid, self.board)
        except DetectionError as exc:
            return f'the rendered image labels it otherwise: {exc}'
        return None if best is grid else 'the rendered image labels it turned'

    def _marker_refusal(self, x, ok, rendered, w_render):
        """
        A ChArUco board's labels checked by its markers, as the full search named them: the
        corners the markers of the rendered image name (a board of another dictionary or
        layout refused with the reason) must lie within MARKER_LABEL_ERROR squares of the
        tracked ones of the same ids (one square off: a square). None when they do.
        """
        try:
            ids, uv = self._markers_of(rendered)
        except DetectionError as exc:
            return f'the markers of the rendered image do not name it: {exc}'
        ids, uv = ids[ok[ids]], uv[ok[ids]]
        if len(ids) < MIN_MARKER_CORNERS:
            return (f'its markers in the rendered image name {len(ids)} of its tracked corners '
                    f'(need {MIN_MARKER_CORNERS})')
        off = np.median(np.hypot(*(x[ids] * abs(w_render) - uv).T)) \
            / (self.spacing * abs(w_render))
        if not off <= MARKER_LABEL_ERROR:
            return (f'its markers in the rendered image name its corners {off:.2f} squares '
                    f'from where they are tracked (limit {MARKER_LABEL_ERROR})')
        return None

    def _markers_of(self, rendered):
        """(ids, uv px) of the ChArUco corners the markers of ``rendered`` name (read once per
        rendered image: the label check and seed B share them); DetectionError as
        :func:`~lf_mpc_calib.features.charuco.read_charuco`."""
        if self._markers is None or self._markers[0] is not rendered:
            from lf_mpc_calib.features.charuco import read_charuco
            try:
                self._markers = (rendered, read_charuco(rendered, self.board)[:2], None)
            except DetectionError as exc:
                self._markers = (rendered, None, exc)
        _, found, exc = self._markers
        if exc is not None:
            raise exc
        return found

    def _charuco_seed(self, rendered, w_render):
        """Seed B of a ChArUco board: the corners its markers in the whole rendered image name,
        the others placed by the board's homography through them."""
        try:
            ids, uv = self._markers_of(rendered)
        except DetectionError:
            return None
        if len(ids) < max(4, self.det.options.min_corners):
            return None
        h_mat, _ = cv2.findHomography(self.board.points()[ids, :2], uv, 0)
        if h_mat is None:
            return None
        grid = cv2.perspectiveTransform(self.board.points()[:, None, :2], h_mat).reshape(-1, 2)
        grid[ids] = uv
        return grid / abs(w_render), np.full(self.board.n_points, w_render)

    def _shift_seed(self, rendered, w_render):
        """Seed A: (x, w) moved by the shift that matches the board's last rendered image."""
        if self.template is None:
            return None
        tmpl, origin, w_t = self.template
        scale = abs(w_render / w_t)
        if abs(scale - 1.0) > 1e-3:
            tmpl = cv2.resize(tmpl, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
            origin = origin * scale
        square = self.spacing * abs(w_render)
        shift = _match_shift(rendered, tmpl, origin, square)
        if shift is None:
            return None
        return self.x + shift / abs(w_render), self.w * (w_render / w_t)

    def _board_seed(self, rendered, w_render):
        """Seed B: the board found in a crop of the rendered image around its last place (a
        ChArUco board: named by its markers in the whole image, :meth:`_charuco_seed`)."""
        if _is_charuco(self.board):
            return self._charuco_seed(rendered, w_render)
        r = self.x * abs(w_render)                                    # rendered px
        lo, hi = np.nanmin(r, axis=0), np.nanmax(r, axis=0)
        size = hi - lo
        square = self.spacing * abs(w_render)
        h, wd = rendered.shape
        a = np.maximum(np.floor(lo - size), 0).astype(int)
        b = np.minimum(np.ceil(hi + size), [wd, h]).astype(int)
        for lo_c, hi_c in ((a, b), (np.array([0, 0]), np.array([wd, h]))):
            crop = np.ascontiguousarray(rendered[lo_c[1]:hi_c[1], lo_c[0]:hi_c[0]])
            if min(crop.shape) < 8:
                continue
            grid = quick_find_board(crop, self.board, square_px=square)
            if grid is None:
                continue
            try:
                grid = resolve_orientation(crop, grid, self.board)
            except DetectionError:
                continue
            x0 = (grid.reshape(-1, 2) + lo_c) / abs(w_render)
            return x0, np.full(self.board.n_points, w_render)
        return None

    # ---- the frame's outcome -------------------------------------------------------------
    def _accept(self, found, mode, rendered, w_render):
        """Take the frame's corners as the state the next frame is predicted from."""
        used = found['used']
        x, w = self._completed(found['x'], found['w'], used)
        if mode.startswith('tracked'):
            both = used & self.seen
            if both.sum() >= 3:
                still = np.median(np.hypot(*(x[both] - self.x[both]).T))
                moving = np.median(np.hypot(*(x[both] - 2 * self.x[both]
                                              + self.x_prev[both]).T))
                self.use_velocity = bool(moving < still)
            self.x_prev, self.w_prev = self.x, self.w
        else:                   # a jump is not a velocity
            self.x_prev, self.w_prev, self.use_velocity = x, w, False
        self.x, self.w, self.seen = x, w, used
        self.tracked_frames += 1
        self.lost_frames = 0
        self.last_mode = mode
        if rendered is not None:
            self.template = self._template(rendered, float(w_render), x[used])

    def _template(self, rendered, w_render, x):
        """(crop of the rendered image around the board, its origin (2,) px, w_render)."""
        r = x * abs(w_render)
        pad = TEMPLATE_PAD * self.spacing * abs(w_render)
        h, wd = rendered.shape
        lo = np.maximum(np.floor(r.min(0) - pad), 0).astype(int)
        hi = np.minimum(np.ceil(r.max(0) + pad), [wd, h]).astype(int)
        if np.any(hi - lo < 8):
            return None
        return rendered[lo[1]:hi[1], lo[0]:hi[0]].copy(), lo.astype(float), w_render

    def _observations(self, found):
        """The kept rows as Observations, the aperture's move subtracted (module docstring)."""
        sel = np.nonzero(found['keep'])[0]
        c, m, ref, cen = found['c'][sel], found['m'][sel], found['ref'][sel], found['cen'][sel]
        key = c * len(self.det.centres) + m
        pos = np.minimum(np.searchsorted(self.held_key, key), len(self.held_key) - 1)
        held = (self.held_key[pos] == key) & \
            (np.hypot(*(ref - self.held_at[pos]).T) <= self.move_drift)
        move = np.where(held[:, None], self.held_move[pos], self.radial_move(ref - cen))
        q = ref - move
        types = None if self.det.lens_types is None else self.det.lens_types[m]
        return Observations(np.zeros(len(c), np.int64), c, self.board.points()[c],
                            np.column_stack([cen, q - cen]), types)


def _is_charuco(board):
    return getattr(board, 'board_type', 'checkerboard') == 'charuco'


def _median_distance(a, b):
    """Median distance (px) of the rows of a and b (N, 2) where both are finite."""
    d = np.hypot(*(a - b).T)
    d = d[np.isfinite(d)]
    return float(np.median(d)) if d.size else np.inf


def _match_shift(image, tmpl, origin, square):
    """
    (2,) px that moves ``tmpl`` (cut from the last frame at ``origin`` (2,)) onto ``image``,
    searched within a template size on every side, or None. A checkerboard matches itself two
    squares off almost as well: the match is made first on both blurred to the board's outline
    (downsampled to about 2 px a square, ``square`` px), then sharp within that resolution.
    """
    th, tw = tmpl.shape
    h, wd = image.shape
    o = np.floor(origin).astype(int)
    lo = np.maximum(o - [tw, th], 0)
    hi = np.minimum(o + [2 * tw, 2 * th], [wd, h])
    win = image[lo[1]:hi[1], lo[0]:hi[0]]
    if win.shape[0] <= th or win.shape[1] <= tw:
        return None
    f = max(1, int(square // 2))
    small = [cv2.GaussianBlur(cv2.resize(a, (max(a.shape[1] // f, 1), max(a.shape[0] // f, 1)),
                                         interpolation=cv2.INTER_AREA), (0, 0), 1.0)
             for a in (win, tmpl)]
    if small[0].shape[0] < small[1].shape[0] or small[0].shape[1] < small[1].shape[1]:
        return None
    score = cv2.matchTemplate(small[0], small[1], cv2.TM_CCOEFF_NORMED)
    _, peak, _, at = cv2.minMaxLoc(score)
    if not peak >= MIN_MATCH:
        return None
    # sharp, within the coarse match's resolution
    guess = lo + np.array(at) * f
    a = np.maximum(guess - 2 * f, 0)
    b = np.minimum(guess + 2 * f + np.array([tw, th]), [wd, h])
    fine = image[a[1]:b[1], a[0]:b[0]]
    if fine.shape[0] <= th or fine.shape[1] <= tw:
        return None
    score = cv2.matchTemplate(fine, tmpl, cv2.TM_CCOEFF_NORMED)
    _, peak, _, at = cv2.minMaxLoc(score)
    if not peak >= MIN_MATCH:
        return None
    return a + _subpixel_peak(score, at) - origin


def _subpixel_peak(score, at):
    """(x, y) of the maximum of a matchTemplate score near the integer peak ``at``."""
    out = np.array(at, float)
    for k, (dx, dy) in enumerate(((1, 0), (0, 1))):
        x, y = at
        if 0 < (x if k == 0 else y) < score.shape[1 - k] - 1:
            a, b, c = score[y - dy, x - dx], score[y, x], score[y + dy, x + dx]
            den = a - 2 * b + c
            if den < 0:
                out[k] += 0.5 * (a - c) / den
    return out


def _radial_profile(offsets, moves, bins=8):
    """
    The radial aperture move as a function of the offset from the micro-image centre: fitted
    to rows' offsets (N, 2) and moves (N, 2); returns f(offsets (K, 2)) -> moves (K, 2).
    """
    r = np.hypot(*offsets.T)
    radial = np.sum(moves * offsets, axis=1) / np.maximum(r, 1e-9)
    edges = np.linspace(0.0, r.max() + 1e-9, bins + 1) if r.size else np.array([0.0, 1.0])
    which = np.digitize(r, edges) - 1
    mids, meds = [], []
    for k in range(bins):
        if np.any(which == k):
            mids.append(0.5 * (edges[k] + edges[k + 1]))
            meds.append(float(np.median(radial[which == k])))

    def move(off):
        rr = np.hypot(*off.T)
        m = np.interp(rr, mids, meds) if mids else np.zeros(len(rr))
        return off * (m / np.maximum(rr, 1e-9))[:, None]
    return move
