"""
Board corners of a focused camera tracked from frame to frame inside the micro-images.

A full detection (:meth:`MicroImageCornerDetector.detect`: disparity search, render, OpenCV's
board search, per-corner refinement, aperture correction) costs seconds per frame. Between two
frames of a camera rate stream the board barely moves, so from the (x, w) of every corner of
the last frame (equation (1) of :mod:`~lf_mpc_calib.features.micro_image_corners`,
q = c + w (c - x)), extrapolated from the last two frames, every row (a corner in a
micro-image whose usable disk holds it) is

1. predicted by (1), in every micro-image that sees the corner now (rows enter and leave as
   the board moves; :meth:`MicroImageLattice.within_many`);
2. refined in one vectorised call (:func:`~lf_mpc_calib.features.micro_image_refine.
   refine_in_disks`, the detector's window and disk), on a crop around the board;
3. checked as the detector checks it: within ``max_step`` of the prediction, inside the
   usable disk, a saddle (2nd angular harmonic) of the detector's strength; then (x, w) of
   every corner is fitted to its rows robustly (all corners at once), corners seen in fewer
   than ``min_views`` micro-images are dropped, and the fitted x must lie on the board's
   homography.

The aperture's move of each row (what the full detection subtracts, 0.03 px RMS) is held from
the last full detection while the row stays within ``move_drift`` px of where it was measured
in its micro-image; a row that drifts further gets the radial move that the full detection's
rows show at its distance from the micro-image centre (medians in radial bins, linearly
interpolated: about half of the moves' variance on the simulated Keplerian preset). The
prediction may be up to twice the detector's ``max_step`` off (the detector's first pass).
:meth:`MicroImageCornerTracker.track` returns None with the reason when fewer than
``min_fraction`` of the corners of the last full detection remain (the caller detects again).

    tracker = MicroImageCornerTracker(detector, board)
    tracker.start(detection)                       # a Detection of detector.detect
    obs, reason = tracker.track(norm)              # norm: detector.normalise(raw)
                                                   # (None, reason): detect in full again
"""

import cv2
import numpy as np

from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.features.micro_image_corners import RIM_WINDOW, saddle_strength
from lf_mpc_calib.features.micro_image_refine import image_gradients, refine_in_disks

REFINE_ITERATIONS = 8
"""Iterations of the refinement from the prediction (20 in a full detection: rows then differ
from a full detection of the same frame by 0.019 px median with 8 or 20, 0.022-0.033 with 4)."""

CROP_MARGIN = 12
"""Pixels kept around the rows' bounding box for the gradients and the saddle test."""


class MicroImageCornerTracker:
    """
    Track the corners of a full focused detection through the following frames (module
    docstring). detector: the MicroImageCornerDetector that made the detection; board: its
    Checkerboard; min_fraction: least share of the full detection's corners to go on with;
    move_drift: px a row may move in its micro-image before its held aperture move is stale.
    """

    def __init__(self, detector, board, *, min_fraction=0.7, move_drift=1.0):
        self.det, self.board = detector, board
        self.min_fraction, self.move_drift = float(min_fraction), float(move_drift)
        self.started = False
        self.tracked_frames = 0

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
        x, w, _ = self._fit(corner, micro, refined, np.ones(len(corner), bool))
        self.x, self.w = x, w
        self.x_prev, self.w_prev = x.copy(), w.copy()
        self.n_start = int(np.sum(np.isfinite(w)))
        self.started = True
        self.tracked_frames = 0

    def track(self, norm):
        """
        (Observations of this frame (pose 0), None) or (None, reason) when the board was lost
        (then :meth:`start` again from a full detection); norm: the frame normalised by
        :meth:`MicroImageCornerDetector.normalise` (or the live renderer's equivalent).
        """
        if not self.started:
            return None, 'no full detection to track from yet'
        opt = self.det.options
        both = np.isfinite(self.w) & np.isfinite(self.w_prev)
        x_p = np.where(both[:, None], 2 * self.x - self.x_prev, self.x)
        w_p = np.where(both, 2 * self.w - self.w_prev, self.w)
        reach = np.max(self.r_use) / np.maximum(np.abs(w_p), 1e-6)
        c, m = self.det.lattice.within_many(x_p, np.where(np.isfinite(w_p), reach, np.nan))
        cen = self.det.centres[m]
        pred = cen + w_p[c, None] * (cen - x_p[c])
        inside = np.hypot(*(pred - cen).T) <= self.r_use[m]
        c, m, cen, pred = c[inside], m[inside], cen[inside], pred[inside]
        if len(c) < opt.min_views:
            self.started = False
            return None, 'every tracked corner left the micro-images'
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
        x, w, keep = self._fit(c, m, ref, good)
        kept = self.det.homography_check(x, self.board, self.spacing)
        keep &= kept[c]
        views = np.bincount(c[keep], minlength=self.board.n_points)
        keep &= views[c] >= opt.min_views
        n_used = int(np.sum(views >= opt.min_views))
        if n_used < max(opt.min_corners, self.min_fraction * self.n_start):
            self.started = False
            return None, (f'tracking kept {n_used} of the {self.n_start} corners of the last '
                          f'full detection (need {self.min_fraction:.0%})')
        self.x_prev, self.w_prev = self.x, self.w
        self.x = np.where(kept[:, None], x, np.nan)
        self.w = np.where(kept, w, np.nan)
        self.tracked_frames += 1
        sel = np.nonzero(keep)[0]
        c, m, ref, cen = c[sel], m[sel], ref[sel], cen[sel]
        # the aperture's move: held where the full detection measured it nearby, else radial
        key = c * len(self.det.centres) + m
        pos = np.minimum(np.searchsorted(self.held_key, key), len(self.held_key) - 1)
        held = (self.held_key[pos] == key) & \
            (np.hypot(*(ref - self.held_at[pos]).T) <= self.move_drift)
        move = np.where(held[:, None], self.held_move[pos], self.radial_move(ref - cen))
        q = ref - move
        types = None if self.det.lens_types is None else self.det.lens_types[m]
        return Observations(np.zeros(len(c), np.int64), c, self.board.points()[c],
                            np.column_stack([cen, q - cen]), types), None

    def _fit(self, c_idx, micro, q, use):
        """
        Robust (x, w) of every corner from its rows ``use`` (all corners at once: the normal
        equations of q - c = w c - y, y = w x). c_idx, micro (R,): corner and micro-image of
        each row; q (R, 2) refined. Returns (x (C, 2), w (C,), rows kept (R,)), NaN for
        corners with fewer than ``min_views`` agreeing rows.
        """
        opt = self.det.options
        n = self.board.n_points
        cen = self.det.centres[micro]
        keep = use & np.all(np.isfinite(q), axis=1)
        x, w = np.full((n, 2), np.nan), np.full(n, np.nan)
        w_all = np.full(n, np.nan)

        def total(v):
            return np.bincount(c_idx, weights=v, minlength=n)

        for _ in range(4):
            d = np.where(keep[:, None], q - cen, 0.0)
            cc = np.where(keep[:, None], cen, 0.0)
            cnt = total(keep.astype(float))
            a = np.zeros((n, 3, 3))
            a[:, 0, 0] = total((cc ** 2).sum(1))
            a[:, 0, 1] = a[:, 1, 0] = -total(cc[:, 0])
            a[:, 0, 2] = a[:, 2, 0] = -total(cc[:, 1])
            a[:, 1, 1] = a[:, 2, 2] = cnt
            b = np.column_stack([total((cc * d).sum(1)), -total(d[:, 0]), -total(d[:, 1])])
            solvable = (cnt >= 2) & (np.abs(np.linalg.det(a)) > 1e-9)
            sol = np.full((n, 3), np.nan)
            sol[solvable] = np.linalg.solve(a[solvable], b[solvable, :, None])[..., 0]
            w_all, y_all = sol[:, 0], sol[:, 1:]
            with np.errstate(invalid='ignore'):
                res = np.hypot(*((q - cen) - (w_all[c_idx, None] * cen - y_all[c_idx])).T)
                new = use & (res <= opt.fit_threshold)
            if np.array_equal(new, keep):
                break
            keep = new
        cnt = total(keep.astype(float))
        fine = (cnt >= opt.min_views) & np.isfinite(w_all) & (np.abs(w_all) > 1e-6)
        w[fine] = w_all[fine]
        x[fine] = y_all[fine] / w_all[fine, None]
        return x, w, keep & fine[c_idx]


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
