"""
Checkerboard corners inside the micro-images of a raw frame of a focused (plenoptic 2.0) camera.

Geometry (raw pixels, model-free): a scene point whose main-lens image projects, through the
main-lens centre, to the sensor point x appears in the micro-image centred at c at

    q = c + w (c - x)                                                    (1)

with w the inverse virtual depth (w > 0 Keplerian: inverted micro-images; w < 0 Galilean).
Neighbouring micro-images (centres e apart) see it w e apart, and (1) is linear in (w, w x):
every corner's (x, w) follows from its positions in two or more micro-images.

1. The raw frame is divided by the white image (micro-image vignetting removed); the
   micro-image centres come from the white image's lattice (:mod:`lf_mpc_calib.lenslet`).
2. A global w is estimated from the disparity between neighbouring textured micro-images.
3. Patch-based rendering: the image of the board R(x) = N(c(x) + w (c(x) - x)), c(x) the
   micro-image centre nearest x, on an x grid of step 1 / |w| (one raw pixel per output pixel).
4. OpenCV finds the board there (:func:`lf_mpc_calib.features.corners.find_board`) and
   :func:`~lf_mpc_calib.features.corners.resolve_orientation` labels it (square colours,
   light margin: a grid one square off or part of a larger board is refused).
5. Each corner is predicted by (1) in every micro-image whose usable disk contains it, refined
   (:func:`lf_mpc_calib.features.micro_image_refine.refine_in_disks`: a window symmetric about
   the corner, as wide as the micro-image's blur needs; :meth:`MicroImageCornerDetector.
   windows`), and validated: it must stay within ``max_step`` of the prediction and show
   a saddle (the 2nd angular harmonic of a small ring around it dominates, with enough
   contrast); then (x, w) of each corner is fitted to its micro-images robustly (outliers beyond
   ``fit_threshold`` dropped), and predicted again from the fit for a second pass.
6. A corner is kept when at least ``min_views`` micro-images agree and its fitted x lies on the
   board's homography through all corners (a mislabelled corner cannot), within
   ``max_label_error`` squares of where the rendered image put it.

The usable disk: a pixel's ray bundle (through its whole micro-lens) is cut by the main-lens
aperture within rho of the rim of the aperture's image (radius R); in a defocused micro-image
such a pixel no longer sees the scene around its chief ray (the ray the MPC model gives it), so
corners read there move (measured against the optics on rendered frames: inward 0.02-0.06 px
at 0.4-0.65 R, outward 0.1 px beyond 0.75 R, a 0.7 % scale error of (u, v); the white's rims
give R and rho, :func:`_aperture_profile`, with the spread that sampling adds to them taken
out, ``SAMPLING_SD``). By default (``aperture_correction``) each refined
corner is corrected by the move that cut gives it, modelled from R, rho and the corner's blur
(:mod:`lf_mpc_calib.features.aperture_bias`), and rows it would move by more than 0.1 px are
dropped. With ``clip_tolerance`` set, the disk ends where
that move would pass it at the frame's blur (fewer rows: on 4-pose half-size data with 8-sample
renders the calibration lost more to the missing rows than it gained; default None, the lit
disk); a corner seen in fewer than ``min_views`` micro-images
that way is read out to ``radius_fraction`` of the lit disk instead (``rim_corners``).

Rows: (i, j) = micro-image centre (raw px), (u, v) = refined corner - centre (the focused-camera
convention of :mod:`lf_mpc_calib.calibration`), lens_type from ``lens_types`` when given.
"""

from dataclasses import dataclass

import cv2
import numpy as np
from scipy.optimize import least_squares

from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import DetectionError, InvalidInputError
from lf_mpc_calib.features.aperture_bias import corner_bias
from lf_mpc_calib.features.micro_image_centres import recentred_grid
from lf_mpc_calib.features.corners import find_board, resolve_orientation
from lf_mpc_calib.features.interface import Detection
from lf_mpc_calib.features.micro_image_refine import image_gradients, refine_in_disks
from lf_mpc_calib.features.sampling import bilinear_samples, disk_offsets
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.lenslet.nearest import MicroImageLattice

W_FINE_STEP = 0.005
"""Resolution of the inverse virtual depth search (:meth:`MicroImageCornerDetector.estimate_w`)."""

RIM_WINDOW = 0.5
"""Corners are refined up to RIM_WINDOW half windows inside the usable disk (the window shrinks,
symmetric about the corner, towards the rim)."""


@dataclass(frozen=True, eq=False)
class MicroImageOptions:
    """
    Options of :class:`MicroImageCornerDetector`.

    radius_fraction: usable part of a micro-image (fraction of its radius measured on the white);
    window, max_window, window_fraction: bounds of the half window (px) of the corner
    refinement (:meth:`MicroImageCornerDetector.windows`,
    :mod:`lf_mpc_calib.features.micro_image_refine`); max_step: largest move (px) of a refined
    corner from its prediction; clip_tolerance: largest move (px) of the image accepted from
    the main-lens aperture's cut of the pixels' ray bundles near a micro-image's rim (None:
    no limit); aperture_correction: subtract from each refined corner the move that cut gives
    it, modelled from the white's aperture profile (:mod:`lf_mpc_calib.features.aperture_bias`;
    rows it would move by more than 0.1 px are dropped; needs a white whose rims are the
    optics', e.g. 64 or more rays per pixel when rendered);
    min_saddle: least 2nd-harmonic amplitude of the ring around a corner (fraction of the
    board's light-dark contrast); fit_threshold: residual (px) of a micro-image
    from its corner's (x, w) fit beyond which it is dropped; min_views: fewest micro-images per
    corner; max_label_error: largest distance (squares) of a corner's fitted x from its
    rendered position and from the board homography; w_range: searched |w| (inverse virtual
    depth) interval.
    """

    radius_fraction: float = 0.95
    window: int = 2
    max_window: int = 6
    window_fraction: float = 0.4
    clip_tolerance: float = None
    aperture_correction: bool = True
    max_step: float = 1.0
    min_saddle: float = 0.15
    fit_threshold: float = 0.35
    min_views: int = 3
    max_label_error: float = 0.1
    w_range: tuple = (0.12, 0.7)
    min_corners: int = 3


class MicroImageCornerDetector:
    """
    FeatureDetector of a focused camera: ``detect(raw, board, *, pose=0) -> Detection``.

    white: (H, W) white image of the camera; grid: its LensletGrid (estimated from ``white``
    when None); lens_types: (M,) int lens type of each micro-image in ``grid.centres()`` order
    (multi-focus cameras), or None. recentre: move the grid onto the white's lit disks
    (:mod:`lf_mpc_calib.features.micro_image_centres`: the vignetting tilts every micro-image
    of a white and the spots' lattice with it); None: only a grid estimated here (a given
    grid, e.g. a calibration's, is used as it is: its centres are the calibration's (i, j)).
    ``self.grid`` is the grid used, the one to save with the calibration. Public for the
    live decode (:mod:`lf_mpc_calib.measurement`): ``white_normalised`` (H, W) float32 white /
    its 99.5th percentile ``white_level``; ``lit`` (H, W) bool, inside a micro-image;
    ``white_gain`` (H, W) float32, 1 / white where lit, else 0.
    """

    def __init__(self, white, grid=None, *, lens_types=None, options=None, recentre=None):
        white = np.asarray(white, dtype=np.float64)
        if white.ndim != 2:
            raise InvalidInputError(f'white must be a 2-D image, got shape {white.shape}')
        if recentre is None:
            recentre = grid is None
        if grid is None:
            from lf_mpc_calib.lenslet.estimate import estimate_grid
            grid = estimate_grid(white)
        if not isinstance(grid, LensletGrid):
            raise InvalidInputError(f'grid must be a LensletGrid, got {type(grid).__name__}')
        if tuple(grid.image_size) != (white.shape[1], white.shape[0]):
            raise InvalidInputError(f'grid is for {grid.image_size} images, the white is '
                                    f'{white.shape[1]} x {white.shape[0]}')
        self.grid = grid
        self.options = options or MicroImageOptions()
        self.centres = grid.centres()
        if lens_types is not None:
            lens_types = np.asarray(lens_types, dtype=np.int64).reshape(-1)
            if lens_types.shape != (len(self.centres),):
                raise InvalidInputError(f'lens_types must have one entry per micro-image '
                                        f'({len(self.centres)}), got {lens_types.shape}')
        self.lens_types = lens_types
        top = float(np.percentile(white, 99.5))
        if not top > 0:
            raise DetectionError('the white image is black: no micro-images to normalise by')
        self.white_level = top
        w32 = (white / top).astype(np.float32)
        self.lit = w32 > 0.35
        self.white_normalised = w32
        self.white_gain = np.where(self.lit, 1.0 / np.maximum(w32, 1e-3), 0.0).astype(
            np.float32)
        self.radius = _micro_image_radius(self.lit, grid)
        if recentre:    # the lattice of the lit disks, not of the vignetting-tilted spots
            grid = recentred_grid(w32, grid, self.radius)
            self.grid, self.centres = grid, grid.centres()
        self.lattice = MicroImageLattice(grid)

    # ---- public ------------------------------------------------------------------------------
    def detect(self, raw, board, *, pose=0, previous=None, stop=None):
        """
        Return a :class:`Detection` for one raw frame; raises DetectionError with the reason.

        ``stop``: a threading.Event (or None); once it is set the detection ends at its next
        stage or corner with DetectionError (a detection in a thread of its own that its owner
        no longer needs: :mod:`lf_mpc_calib.measurement.focused_search`).

        ``previous``: a Detection of the same frame and board by this detector (before its
        lens types were told, say): its inverse virtual depth, rendered image and board grid
        are taken over rather than searched for again (none of them depends on the lens types;
        the corners are measured anew).
        """
        raw = np.asarray(raw)
        if raw.ndim != 2 or raw.shape != self.lit.shape:
            raise InvalidInputError(f'raw frame must be {self.lit.shape[1]} x '
                                    f'{self.lit.shape[0]} (2-D) like the white image, got '
                                    f'shape {raw.shape}')
        norm = self.normalise(raw)
        w, step, grid, rendered = self._board_in_rendered(norm, board, previous, stop)
        x0 = grid.reshape(-1, 2) * step                            # (C, 2) raw px
        spacing = _min_spacing(grid) * step
        contrast = _board_contrast(rendered, grid)
        smooth = cv2.GaussianBlur(norm, (0, 0), 0.7)
        half, r_valid = self.windows(spacing, w)
        rows, x_fit, w_fit, counts, rim_corners = self._measure_corners(
            norm, smooth, x0, w, contrast, spacing, half, r_valid, stop)
        kept = self.homography_check(x_fit, board, spacing)
        rows = [r for r in rows if kept[r[0]]]
        rows, moves = self._aperture_corrected(rows, x_fit, w_fit, kept, board, half)
        self._check_pose_corners(rows, board, w, half, r_valid)
        obs = self._observations(rows, board, pose)
        central = np.where(kept[:, None] & (counts[:, None] > 0), x_fit / step, np.nan)
        diag = {'inverse_virtual_depth': float(w), 'render_step_px': float(step),
                'board_grid': grid,     # the board's corners in the rendered image (found)
                'window': float(np.median(half)), 'rim_corners': int(rim_corners),
                'corners_found': int(len(rows)), 'corners_total': int(board.n_points),
                'rays': int(len(obs)),
                'fit_residual_rms_px': float(np.sqrt(np.mean(np.concatenate(
                    [r[3] for r in rows]) ** 2))),
                'median_views': float(np.median(counts[counts > 0])),
                'w_per_corner': w_fit,
                'row_saddle': np.concatenate([saddle_strength(smooth, q, contrast)
                                              for _, _, q, *_ in rows]),
                # per row, for a tracker (features.micro_image_tracking): the micro-image,
                # the aperture move subtracted, the refinement's disk; and the board contrast
                'row_micro_image': np.concatenate([r[1] for r in rows]),
                'row_move': np.concatenate(moves),
                'row_disk': np.concatenate([r[4] for r in rows]),
                'board_contrast': float(contrast), 'corner_spacing_px': float(spacing)}
        return Detection(obs, central, rendered, diag)

    # ---- the steps of detect -----------------------------------------------------------------
    def _board_in_rendered(self, norm, board, previous, stop):
        """
        (inverse virtual depth w, render step px, board grid (rows, cols, 2) in the image
        rendered at w, that image): ``previous``'s when it has them, else w estimated, the
        image rendered and the board found in it (DetectionError naming w when it is not).
        """
        if previous is not None and 'board_grid' in previous.diagnostics:
            d = previous.diagnostics
            return (d['inverse_virtual_depth'], d['render_step_px'], d['board_grid'],
                    previous.reference_image)
        w = self.estimate_w(norm)
        _check_stop(stop)
        rendered, step = self.render(norm, w)
        try:
            if getattr(board, 'board_type', 'checkerboard') == 'charuco':
                from lf_mpc_calib.features.charuco import charuco_grid
                grid = charuco_grid(rendered, board)   # named by the markers, any part
            else:
                grid = find_board(rendered, board)
                grid = resolve_orientation(rendered, grid, board)
        except (DetectionError, cv2.error) as exc:
            raise DetectionError(
                f'board not found in the image rendered from the micro-images at inverse '
                f'virtual depth {w:+.3f} ({rendered.shape[1]}x{rendered.shape[0]} px): '
                f'{exc}') from None
        return w, step, grid, rendered

    def _measure_corners(self, norm, smooth, x0, w, contrast, spacing, half, r_valid, stop):
        """
        Measure each board corner x0 (C, 2) raw px in the micro-images: rows, one per corner
        seen in at least min_views of them, of (corner id, micro-images (V,), points (V, 2),
        fit residuals, refinement disk radii (V,)); x_fit (C, 2) and w_fit (C,) the fitted
        corner and inverse virtual depth (NaN where unseen); counts (C,) micro-images per
        corner; and how many corners needed the micro-images' rims.
        """
        opt = self.options
        rows = []
        x_fit = np.full_like(x0, np.nan)
        w_fit = np.full(len(x0), np.nan)
        counts = np.zeros(len(x0), int)
        grads = image_gradients(norm)
        r_lit = np.full(len(r_valid), opt.radius_fraction * self.radius - 1.0)
        rim_corners = 0
        for c_idx in range(len(x0)):
            _check_stop(stop)
            res = self._corner(norm, grads, smooth, x0[c_idx], w, contrast, half, r_valid)
            disk = r_valid
            if (res is None or len(res[0]) < opt.min_views) and np.any(r_valid < r_lit):
                # too few micro-images whose bundles the aperture leaves whole: read the rims
                res = self._corner(norm, grads, smooth, x0[c_idx], w, contrast, half, r_lit)
                rim_corners += res is not None and len(res[0]) >= opt.min_views
                disk = r_lit
            if res is None:
                continue
            m_idx, q, xc, wc, fit_res = res
            if len(m_idx) < opt.min_views:
                continue
            if np.hypot(*(xc - x0[c_idx])) > opt.max_label_error * spacing + 2.0 / abs(w):
                continue
            rows.append((c_idx, m_idx, q, fit_res, disk[m_idx]))
            x_fit[c_idx], w_fit[c_idx], counts[c_idx] = xc, wc, len(m_idx)
        return rows, x_fit, w_fit, counts, rim_corners

    def _aperture_corrected(self, rows, x_fit, w_fit, kept, board, half):
        """(rows with their points less the main-lens aperture's cut, the moves subtracted
        per row (V, 2)); rows left with fewer than min_views correctable micro-images are
        dropped. Without the correction: the rows and zero moves."""
        opt = self.options
        moves = [np.zeros((len(r[1]), 2)) for r in rows]
        if not (opt.aperture_correction and rows):
            return rows, moves
        measured = self._aperture_moves(rows, x_fit, w_fit, kept, board, half)
        if measured is None:
            return rows, moves
        fixed, moves = [], []   # rows the cut moves too far to correct are dropped
        for r, mv in zip(rows, measured):
            ok = np.all(np.isfinite(mv), axis=1)
            if ok.sum() >= opt.min_views:
                fixed.append((r[0], r[1][ok], r[2][ok] - mv[ok], r[3], r[4][ok]))
                moves.append(mv[ok])
        return fixed, moves

    def _check_pose_corners(self, rows, board, w, half, r_valid):
        """DetectionError, with the likely cause, unless the rows hold min_corners corners
        not all on one line of the board (what a pose needs)."""
        opt = self.options
        if len(rows) < opt.min_corners:
            reach = np.median(r_valid - RIM_WINDOW * half) / abs(w)
            per_point = np.pi * reach ** 2 / abs(np.linalg.det(self.lattice.basis))
            raise DetectionError(
                f'only {len(rows)} board corners were found in at least {opt.min_views} '
                f'micro-images each (need {opt.min_corners}); at inverse virtual depth '
                f'{w:+.3f} a point falls in about {per_point:.1f} usable micro-images: '
                + ('the board is too near the plane conjugate to the micro-lenses, move it '
                   'nearer or farther' if per_point < opt.min_views + 1 else
                   'the board is too blurred, too small in the micro-images or partly hidden'))
        found = board.points()[[r[0] for r in rows], :2]
        spread = np.linalg.svd(found - found.mean(0), compute_uv=False)
        if spread[1] < 1e-6 * board.square:
            raise DetectionError(
                f'the {len(rows)} board corners found in at least {opt.min_views} micro-images '
                f'each lie on one line of the board (a pose needs 3 not on a line); at inverse '
                f'virtual depth {w:+.3f} the board is too blurred or partly hidden')

    def _observations(self, rows, board, pose):
        """The rows as Observations: one ray (centre (2,), point - centre (2,)) per
        micro-image of each corner, with the micro-image's lens type when known."""
        pts = board.points()
        parts = []
        for c_idx, m_idx, q, *_ in rows:
            cen = self.centres[m_idx]
            parts.append(Observations(
                np.full(len(m_idx), pose), np.full(len(m_idx), c_idx),
                np.repeat(pts[c_idx][None], len(m_idx), axis=0),
                np.column_stack([cen, q - cen]),
                None if self.lens_types is None else self.lens_types[m_idx]))
        return Observations.concatenate(parts)

    # ---- stages ------------------------------------------------------------------------------
    def normalise(self, raw):
        """The raw frame (H, W) divided by the white, scaled to its 99th percentile (f32)."""
        norm = raw.astype(np.float32) * self.white_gain
        top = float(np.percentile(norm[self.lit], 99.0)) if np.any(self.lit) else 0.0
        if not top > 0:
            raise DetectionError('the raw frame is black inside the micro-images')
        return norm * np.float32(1.0 / top)

    def inner_disks_inside(self, shape):
        """(usable radius r_in px, (M,) bool: micro-images whose disk of r_in, with a margin for
        bilinear sampling, lies inside a frame of ``shape`` (H, W))."""
        r_in = self.options.radius_fraction * self.radius
        cen = self.centres
        h, w = shape[:2]
        return r_in, ((cen[:, 0] > r_in + 2) & (cen[:, 1] > r_in + 2)
                      & (cen[:, 0] < w - r_in - 3) & (cen[:, 1] < h - r_in - 3))

    def estimate_w(self, norm):
        """Global inverse virtual depth w of a normalised raw frame (disparity search)."""
        pairs, offs, r_in = self.w_pairs(norm)
        lo, hi = self.options.w_range
        mags = np.arange(lo, hi + 1e-9, 0.025)
        coarse = np.concatenate([-mags[::-1], mags])
        cost = [self._pair_cost(norm, pairs, offs, r_in, wc) for wc in coarse]
        best = float(coarse[int(np.argmin(cost))])
        fine = best + np.arange(-0.025, 0.0251, W_FINE_STEP)
        cost = [self._pair_cost(norm, pairs, offs, r_in, wc) for wc in fine]
        return float(fine[int(np.argmin(cost))])

    def refine_w(self, norm, w0, *, max_steps=8):
        """
        The local minimum of the disparity cost nearest ``w0``, walking downhill in steps of
        W_FINE_STEP (the resolution of :meth:`estimate_w`), or None when the walk does not end
        within ``max_steps`` steps or leaves ``options.w_range`` (then search the whole range).
        """
        pairs, offs, r_in = self.w_pairs(norm)
        lo, hi = self.options.w_range
        cache = {}

        def cost(k):
            if k not in cache:
                cache[k] = self._pair_cost(norm, pairs, offs, r_in, w0 + k * W_FINE_STEP)
            return cache[k]

        k = 0
        for _ in range(max_steps + 1):
            here, left, right = cost(k), cost(k - 1), cost(k + 1)
            if here <= left and here <= right:
                w = w0 + k * W_FINE_STEP
                return float(w) if np.isfinite(here) and lo <= abs(w) <= hi else None
            k += -1 if left < right else 1
        return None

    def w_pairs(self, norm):
        """
        The pairs of neighbouring textured micro-images that the disparity cost compares:
        ([(a (P, 2), b (P, 2)) centres per lattice step], disk offsets (K, 2), r_in px).
        Raises DetectionError when the frame shows too little texture.
        """
        cen = self.centres
        r_in, inside = self.inner_disks_inside(norm.shape)
        idx = np.nonzero(inside)[0]
        if idx.size == 0:
            raise DetectionError('no micro-image lies inside the raw frame')
        # texture of each micro-image: spread of its samples on a small disk
        d = disk_offsets(0.7 * r_in, 1.5)
        vals = bilinear_samples(norm, cen[idx, None, :] + d[None])
        spread = vals.std(axis=1)
        order = idx[np.argsort(spread)[::-1][:200]]
        order = order[spread[np.searchsorted(idx, order)] > 0.1]
        if order.size < 5:
            raise DetectionError('the raw frame shows no texture in its micro-images (no board,'
                                 ' a uniform scene, or a board so close to the plane conjugate'
                                 ' to the micro-lenses that each micro-image sees one square)')
        grid = self.grid
        steps = [grid.row_vector, 0.5 * grid.row_vector + grid.column_vector,
                 -0.5 * grid.row_vector + grid.column_vector] if grid.lattice == 'hex' else \
            [grid.row_vector, grid.column_vector]
        base = cen[order]
        pairs = []
        for e in steps:
            nb = self.lattice.nearest(base + e)
            pairs.append((base[nb >= 0], self.centres[nb[nb >= 0]]))
        return pairs, disk_offsets(r_in, 1.5), r_in

    @staticmethod
    def _pair_cost(norm, pairs, offs, r_in, wc):
        """Mean squared difference of neighbouring micro-images shifted by w (their step)."""
        total = 0.0
        for a, b in pairs:
            shift = wc * (b - a)
            sel = np.hypot(*(offs + shift.mean(0)).T) <= r_in
            if sel.sum() < 8:
                return np.inf
            o = offs[sel]
            va = bilinear_samples(norm, a[:, None, :] + o[None])
            vb = bilinear_samples(norm, b[:, None, :] + o[None] + shift[:, None, :])
            total += float(np.mean((va - vb) ** 2))
        return total

    def render(self, norm, w):
        """Patch-based rendering at inverse virtual depth w -> (image (h, w) f32, step (px))."""
        step = 1.0 / abs(w)
        h, wd = norm.shape
        gx = np.arange(0, wd / step, dtype=np.float32) * step
        gy = np.arange(0, h / step, dtype=np.float32) * step
        xx, yy = np.meshgrid(gx, gy)
        xy = np.column_stack([xx.ravel(), yy.ravel()]).astype(np.float64)
        nb = self.lattice.nearest(xy)
        c = self.centres[np.maximum(nb, 0)]
        q = c + w * (c - xy)
        mx = q[:, 0].reshape(xx.shape).astype(np.float32)
        my = q[:, 1].reshape(xx.shape).astype(np.float32)
        out = cv2.remap(norm, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                        borderValue=0)
        out[(nb < 0).reshape(xx.shape)] = 0
        return out, step

    def aperture_profile(self):
        """
        (R (M,), rho (M,)) px of each micro-image, from the white (per lens type when known,
        :func:`_aperture_profile`): the radius of the main-lens aperture's image and the
        radius of a pixel's ray bundle (through its whole micro-lens) on it.
        """
        key = None if self.lens_types is None else self.lens_types.tobytes()
        if getattr(self, '_profile_key', 0) != key:
            types = np.zeros(len(self.centres), np.int64) if self.lens_types is None \
                else self.lens_types
            r_ap, rho = _aperture_profile(self.white_normalised, self.centres, types, self.radius,
                                          self.grid.pitch)
            self._profile = (r_ap[types], rho[types])
            self._profile_key = key
        return self._profile

    def windows(self, spacing, w):
        """
        (half window (M,) px, valid radius (M,) px) of each micro-image for corners ``spacing``
        raw px apart at inverse virtual depth w.

        The blur radius of a micro-image is |pitch |w| / 2 - rho| px (its micro-lens focuses
        where pitch |w| / 2 = rho); the half window is blur + 1.5 px (at least ``window`` + 1),
        at most ``window_fraction`` of a board square in the micro-image and ``max_window``.
        The valid radius (within ``radius_fraction`` of the lit radius, less 1 px for the
        gradients) ends where the aperture's cut of the pixels' bundles would move the image
        by more than ``clip_tolerance`` px (:func:`_clip_shift`).
        """
        opt = self.options
        r_ap, rho = self.aperture_profile()
        blur = np.abs(0.5 * self.grid.pitch * abs(w) - rho)
        cap = max(opt.window, min(opt.max_window, round(opt.window_fraction * abs(w) * spacing)))
        half = np.clip(np.ceil(blur + 1.5), opt.window + 1, cap).astype(np.float64)
        valid = np.full(len(self.centres), opt.radius_fraction * self.radius)
        if opt.clip_tolerance is None:
            return half, valid - 1.0
        for key in set(zip(r_ap.tolist(), rho.tolist(), blur.tolist())):
            sel = (r_ap == key[0]) & (rho == key[1]) & (blur == key[2])
            valid[sel] = np.minimum(valid[sel], _clip_radius(*key, opt.clip_tolerance))
        return half, valid - 1.0

    def _corner(self, norm, grads, smooth, x, w, contrast, half_all, r_valid_all):
        """One corner: (micro-image indices (K,), refined q (K, 2), fitted x (2,), w) or None."""
        opt = self.options
        r_use_all = r_valid_all - RIM_WINDOW * half_all
        if not np.any(r_use_all > 1.0):
            return None
        m_idx, q = None, None
        for n_pass in range(3):
            # micro-images whose usable disk contains the predicted corner
            reach = r_use_all.max() / abs(w)
            near = self.lattice.within(x, reach)
            if near.size == 0:
                return None
            cen = self.centres[near]
            pred = cen + w * (cen - x)
            ok = np.hypot(*(pred - cen).T) <= r_use_all[near]
            near, cen, pred = near[ok], cen[ok], pred[ok]
            if len(near) < 2:
                return None
            r_valid, r_use = r_valid_all[near], r_use_all[near]
            ref = refine_in_disks(norm, pred, cen, r_valid, half_all[near], gradients=grads)
            good = np.all(np.isfinite(ref), axis=1)
            good &= np.hypot(*(ref - pred).T) <= opt.max_step * (2.0 if n_pass == 0 else 1.0)
            good &= np.hypot(*(ref - cen).T) <= r_use
            good &= saddle_strength(smooth, ref, contrast) >= opt.min_saddle
            if good.sum() < 2:
                return None
            fit = _fit_xw(cen[good], ref[good], opt.fit_threshold)
            if fit is None:
                return None
            keep, x_new, w_new, res = fit
            m_idx, q = near[good][keep], ref[good][keep]
            x, w = x_new, w_new
        return m_idx, q, x, w, res

    def _aperture_moves(self, rows, x_fit, w_fit, kept, board, half):
        """
        Per row of ``rows`` the (K, 2) px the main-lens aperture's cut moved its refined
        corners (:func:`lf_mpc_calib.features.aperture_bias.corner_bias`), from the board's
        homography through the fitted corners (the local board in each micro-image) and each
        corner's fitted w.
        """
        rc = _board_grid(board)
        use = kept & np.all(np.isfinite(x_fit), axis=1)
        if use.sum() >= 4:
            H, _ = cv2.findHomography(rc[use], x_fit[use], 0)
        elif use.sum() == 3:                # an affine map through three corners
            a = np.column_stack([rc[use], np.ones(3)])
            H = np.vstack([np.linalg.lstsq(a, x_fit[use], rcond=None)[0].T, [0.0, 0.0, 1.0]])
        else:
            H = None
        if H is None or not np.all(np.isfinite(H)):
            return None
        hp = np.column_stack([rc, np.ones(len(rc))]) @ H.T             # (C, 3)
        xy = hp[:, :2] / hp[:, 2:]
        # d x / d (col, row) of the homography at every corner: (C, 2, 2)
        jac = (H[None, :2, :2] - xy[:, :, None] * H[None, 2:3, :2]) / hp[:, 2, None, None]
        c_idx = np.concatenate([np.full(len(r[1]), r[0]) for r in rows])
        area = np.abs(np.linalg.det(jac[c_idx]))
        if not np.all(np.isfinite(area) & (area > 1e-9)):
            return None     # corners on one line: no local board (the caller refuses the pose)
        r_ap, rho = self.aperture_profile()
        m_idx = np.concatenate([r[1] for r in rows])
        q = np.concatenate([r[2] for r in rows])
        disk = np.concatenate([r[4] for r in rows])
        wc = w_fit[c_idx]
        to_board = np.linalg.inv(-wc[:, None, None] * jac[c_idx])   # micro-image px -> squares
        moves = corner_bias(q, self.centres[m_idx], to_board,
                            0.5 * self.grid.pitch * np.abs(wc) - rho[m_idx], rho[m_idx],
                            r_ap[m_idx], half[m_idx], disk)
        return np.split(moves, np.cumsum([len(r[1]) for r in rows])[:-1])

    def homography_check(self, x_fit, board, spacing):
        """(C,) bool: corners whose fitted x lies on the board's homography (robust)."""
        found = np.all(np.isfinite(x_fit), axis=1)
        kept = found.copy()
        if found.sum() < 4:
            return kept
        rc = _board_grid(board)
        tol = self.options.max_label_error * spacing
        H, _ = cv2.findHomography(rc[found], x_fit[found], cv2.RANSAC, tol)
        if H is None:
            return np.zeros_like(found)
        proj = cv2.perspectiveTransform(rc.reshape(-1, 1, 2), H).reshape(-1, 2)
        err = np.hypot(*(proj - np.where(found[:, None], x_fit, 0.0)).T)
        return found & (err <= tol)


def _check_stop(stop):
    """DetectionError when the Event ``stop`` (or None) is set."""
    if stop is not None and stop.is_set():
        raise DetectionError('the detection was stopped by its owner')


def _board_grid(board):
    """(cols*rows, 2) float (col, row) of every inner corner, in the board's point order."""
    return np.mgrid[0:board.rows, 0:board.cols].reshape(2, -1).T[:, ::-1].astype(np.float64)


def _micro_image_radius(lit, grid):
    """Radius (px) of the lit disk of a micro-image, from the lit share of the central half."""
    h, w = lit.shape
    share = lit[h // 4:3 * h // 4, w // 4:3 * w // 4].mean()
    return float(np.sqrt(share * grid.pitch * grid.row_spacing / np.pi))


def _aperture_profile(white, centres, types, radius, pitch, max_images=400):
    """
    (R (T,), rho (T,)) px per lens type, from the white image's micro-images: R the radius of
    the main-lens aperture's image, rho the radius of a pixel's ray bundle (through its whole
    micro-lens) on it, in micro-image pixels. A pixel within R - rho of the centre passes its
    bundle whole (the cos^4 falloff of the chief ray, a + b r^2); beyond, the aperture cuts it
    and the white falls, to half at R. Up to ``max_images`` micro-images of each type near the
    middle, each divided by its centre value, are pooled by radius, out to half the
    micro-image ``pitch`` less 0.5 px (farther pixels may belong to a neighbour), and fitted as
    the falloff times the share of the bundle's disk inside the aperture's
    (:func:`_fit_overlap`).
    """
    h, w = white.shape
    d = disk_offsets(radius + 2.0, 0.5)
    r = np.hypot(*d.T)
    inner = r <= 0.3 * radius
    edges = np.arange(0.0, radius + 2.25, 0.25)
    rc = 0.5 * (edges[:-1] + edges[1:])
    bins = np.digitize(r, edges) - 1
    n_t = int(types.max()) + 1
    r_ap, rho = np.full(n_t, float(radius)), np.zeros(n_t)
    mid = np.array([w / 2.0, h / 2.0])
    inside = np.all((centres > radius + 4) & (centres < np.array([w, h]) - radius - 5), axis=1)
    for t in range(n_t):
        idx = np.nonzero(inside & (types == t))[0]
        if idx.size == 0:
            continue
        idx = idx[np.argsort(np.hypot(*(centres[idx] - mid).T))[:max_images]]
        vals = bilinear_samples(white, centres[idx, None, :] + d[None]).astype(np.float64)
        rel = vals / np.maximum(vals[:, inner].mean(axis=1, keepdims=True), 1e-6)
        prof = np.array([np.median(rel[:, bins == k]) if np.any(bins == k) else np.nan
                         for k in range(len(rc))])
        use = np.isfinite(prof) & (edges[1:] <= 0.5 * pitch - 0.5)
        r_ap[t], rho[t] = _fit_overlap(rc[use], prof[use], radius)
    return r_ap, rho


def _overlap(r, r_ap, rho):
    """Share of a disk (radius rho) centred r from the centre of one of r_ap in it; r, r_ap and
    rho broadcast together (a grid of (r_ap, rho) against the radii r)."""
    r = np.maximum(np.asarray(r, float), 1e-9)
    r_ap = np.asarray(r_ap, float)
    rho_in = np.asarray(rho, float)
    rho = np.maximum(rho_in, 1e-9)
    a = np.clip((r ** 2 + rho ** 2 - r_ap ** 2) / (2.0 * r * rho), -1.0, 1.0)
    b = np.clip((r ** 2 + r_ap ** 2 - rho ** 2) / (2.0 * r * r_ap), -1.0, 1.0)
    k = np.sqrt(np.maximum((-r + rho + r_ap) * (r + rho - r_ap) * (r - rho + r_ap)
                           * (r + rho + r_ap), 0.0))
    area = rho ** 2 * np.arccos(a) + r_ap ** 2 * np.arccos(b) - 0.5 * k
    area = np.where(r + rho <= r_ap, np.pi * rho ** 2, np.where(r - rho >= r_ap, 0.0, area))
    return np.where(rho_in <= 1e-6, (r <= r_ap).astype(float), area / (np.pi * rho ** 2))


SAMPLING_SD = 0.5
"""Spread (px, 1 sigma) that sampling adds to the white's radial profile across its rim: each
pixel integrates its area (1/12 px^2) and the profile's samples fall between pixels (bilinear:
t (1 - t), 1/6 px^2 on average). Left out of the model it widened rho (full-size presets,
1024-ray whites): Keplerian 3.845 px against the optics' 3.683 (+4.4 %; +1.9 % with it),
Galilean 3.977 against 3.899 (+2.0 %; -0.4 % with it)."""

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(9)


def _sampled_overlap(r, r_ap, rho, sd=SAMPLING_SD):
    """:func:`_overlap` as the white's profile samples it: averaged over a radial spread of
    ``sd`` px (Gauss-Hermite, 9 nodes)."""
    r = np.asarray(r, float)
    return sum(w * _overlap(r + sd * x, r_ap, rho)
               for x, w in zip(_NODES, _WEIGHTS)) / _WEIGHTS.sum()


def _fit_overlap(r, profile, radius):
    """
    (R, rho) whose sampled overlap S (:func:`_sampled_overlap`) times a falloff a + b r^2 fits
    the white's ``profile`` at radii r, plateau and rim together: a grid of 0.01 x radius, a
    and b solved at each node, then least squares on all four from the best node. (The plateau
    fitted first, inside half the lit radius, took part of the rim when the aperture's image
    is small against the bundles, R - rho < radius / 2: stopped down to f/5.6, the Keplerian
    preset read rho 0.06 px for the optics' 3.68.)
    """
    if len(r) < 6:
        return float(radius), 0.0
    r, profile = np.asarray(r, float), np.asarray(profile, float)
    r_grid = np.arange(0.5, 1.5, 0.01) * radius
    rho_grid = np.arange(0.0, 0.8, 0.01) * radius
    s = _sampled_overlap(r, r_grid[:, None, None], rho_grid[None, :, None])   # (A, B, N)
    r2 = r ** 2
    # normal equations of profile ~ a s + b s r^2 at every node
    m00, m01, m11 = (s * s).sum(-1), (s * s * r2).sum(-1), (s * s * r2 * r2).sum(-1)
    y0, y1 = (s * profile).sum(-1), (s * r2 * profile).sum(-1)
    det = m00 * m11 - m01 ** 2
    ok = det > 1e-12 * np.maximum(m00 * m11, 1e-300)
    det = np.where(ok, det, 1.0)
    a, b = (m11 * y0 - m01 * y1) / det, (m00 * y1 - m01 * y0) / det
    cost = np.where(ok, profile @ profile - a * y0 - b * y1, np.inf)         # (A, B)
    ia, ib = np.unravel_index(np.argmin(cost), cost.shape)
    start = [r_grid[ia], rho_grid[ib], a[ia, ib], b[ia, ib]]
    fit = least_squares(lambda q: (q[2] + q[3] * r2) * _sampled_overlap(r, q[0], q[1])
                        - profile, start,
                        bounds=([0.5 * radius, 0.0, -np.inf, -np.inf],
                                [1.5 * radius, 0.8 * radius, np.inf, np.inf]),
                        diff_step=1e-4)
    if not (fit.success and 2.0 * fit.cost <= cost[ia, ib]):
        return float(start[0]), float(start[1])
    return float(fit.x[0]), float(fit.x[1])


def _clip_shift(r, r_ap, rho, n=41):
    """
    (len(r),) centroid offset, as a fraction of rho, of the part of a disk of radius rho
    centred r px from the micro-image centre that lies inside the aperture's image (radius
    r_ap): how far (in units of the blur radius) a pixel there sees off its chief ray.
    """
    g = (np.arange(n) + 0.5) / n * 2.0 - 1.0
    ex, ey = np.meshgrid(g, g)
    keep = ex ** 2 + ey ** 2 <= 1.0
    ex, ey = ex[keep], ey[keep]
    out = np.zeros(len(r))
    for k, rk in enumerate(np.asarray(r, float)):
        inside = (rk + rho * ex) ** 2 + (rho * ey) ** 2 <= r_ap ** 2
        if inside.any() and not inside.all():
            out[k] = abs(ex[inside].mean())
    return out


def _clip_radius(r_ap, rho, blur, tolerance):
    """Radius (px) out to which the bundles' cut moves the image by <= ``tolerance`` px."""
    if rho <= 0.0:
        return float(r_ap)
    r = np.arange(max(r_ap - rho, 0.0), r_ap + rho, 0.05)
    bad = np.nonzero(_clip_shift(r, r_ap, rho) * blur > tolerance)[0]
    return float(r[bad[0]] if bad.size else r_ap + rho)


_RING = np.linspace(0.0, 2.0 * np.pi, 16, endpoint=False)


def saddle_strength(img, q, contrast, radius=2.0):
    """
    (N,) saddle strength at q (N, 2): the 2nd angular harmonic amplitude of a ring of
    ``radius`` px around each point, minus its 1st (an edge), over the board contrast.
    """
    ring = np.column_stack([np.cos(_RING), np.sin(_RING)]) * radius
    v = bilinear_samples(img, q[:, None, :] + ring[None]).astype(np.float64)
    a1 = np.abs(v @ np.exp(1j * _RING)) * (2.0 / len(_RING))
    a2 = np.abs(v @ np.exp(2j * _RING)) * (2.0 / len(_RING))
    return (a2 - a1) / max(contrast, 1e-6)


def fit_xw(corner, cen, q, use, n, threshold, min_views=2):
    """
    Robust fit of (1), q - c = w c - y with y = w x, of n corners at once from their rows.

    corner (R,) int: the corner of each row; cen, q (R, 2): its micro-image centre and refined
    position; use (R,) bool: the rows to fit; threshold: residual (px) beyond which a row is
    dropped (up to 4 rounds, all corners together through the normal equations). Returns
    (x (n, 2), w (n,), kept (R,) bool, residual (R,) px); x and w are NaN for a corner with
    fewer than ``min_views`` agreeing rows (kept False for its rows).
    """
    keep = use & np.all(np.isfinite(q), axis=1)
    w_all, y_all = np.full(n, np.nan), np.full((n, 2), np.nan)
    res = np.full(len(corner), np.inf)

    def total(v):
        return np.bincount(corner, weights=v, minlength=n)

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
            res = np.hypot(*((q - cen) - (w_all[corner, None] * cen - y_all[corner])).T)
            new = use & (res <= threshold)
        if np.array_equal(new, keep):
            break
        keep = new
    cnt = total(keep.astype(float))
    fine = (cnt >= max(min_views, 2)) & np.isfinite(w_all) & (np.abs(w_all) > 1e-6)
    w = np.where(fine, w_all, np.nan)
    x = np.where(fine[:, None], y_all / np.where(fine, w_all, 1.0)[:, None], np.nan)
    return x, w, keep & fine[corner], res


def _fit_xw(c, q, threshold):
    """
    Robust fit of (1) to K micro-images of one corner (:func:`fit_xw`).

    Returns (kept (K,) bool, x (2,), w, residuals (kept,) px) or None when fewer than 2
    micro-images agree.
    """
    x, w, keep, res = fit_xw(np.zeros(len(c), np.int64), c, q, np.ones(len(c), bool), 1,
                             threshold)
    if not np.isfinite(w[0]):
        return None
    return keep, x[0], float(w[0]), res[keep]


def _min_spacing(grid):
    """Smallest corner spacing (px) of a (rows, cols, 2) grid."""
    d = np.concatenate([np.linalg.norm(grid[:, 1:] - grid[:, :-1], axis=-1).ravel(),
                        np.linalg.norm(grid[1:] - grid[:-1], axis=-1).ravel()])
    return float(np.min(d))


def _board_contrast(img, grid):
    """Light - dark level of the board's squares in the rendered image."""
    centres = 0.25 * (grid[:-1, :-1] + grid[:-1, 1:] + grid[1:, :-1] + grid[1:, 1:])
    centres = centres.reshape(-1, 2).astype(np.float64)
    inside = np.all((centres >= 0) & (centres <= np.array(img.shape[::-1]) - 1), axis=1)
    if inside.sum() >= 4:           # a board partly out of view (ChArUco): the squares seen
        centres = centres[inside]
    v = bilinear_samples(np.asarray(img, np.float32), centres)
    lo, hi = np.percentile(v, (25, 75))
    return float(max(hi - lo, 1e-6))
