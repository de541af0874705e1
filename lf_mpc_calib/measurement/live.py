"""
Live measurement with a calibrated camera: decode a raw frame, find the board, triangulate.

What the decode node runs on every frame (and what ``benchmarks/bench_decode_node.py`` times):

1. decode the raw frame with the precomputed map of the lenslet grid
   (:class:`lf_mpc_calib.lenslet.decode.Decoder`, built once per raw dtype): only the usable
   views (what corners, depth and refocus read; 37 of 81 at Lytro size, half the time) unless
   rays or all views are asked for;
2. the rectified central view: view (0, 0) resampled so that its pixels follow the pinhole
   K of :func:`central_view_intrinsics` with no distortion (the distortion of Eq. 18 at
   s = t = 0 is radial only; an identity when k_1 = k_2 = 0);
3. the board corners across the usable views, tracked from the previous frame
   (:class:`lf_mpc_calib.features.corner_tracking.CornerTracker`; the calibration's full
   search :func:`lf_mpc_calib.features.corners.detect_corners` on the first frame and
   whenever tracking fails; a ChArUco board's corners are named by its markers in every
   frame, :func:`lf_mpc_calib.features.board_detection.detect_board_corners`, so a board
   partly out of view gives the corners it shows, by id), each triangulated from all the
   views that see it with the calibrated MPC model (Eq. 2-5), in the camera (optical) frame;
4. the rays of a decimated pixel set (views whose indices are multiples of ``ray_view_step``,
   pixels every ``ray_step``): origin (s, t, 0), unit direction and intensity. The geometry is
   computed once; a frame only gathers the intensities.

Per-stage wall times (seconds) come back with every :class:`Measurement`.
"""

import dataclasses
from dataclasses import dataclass, field
import time

import cv2
import numpy as np

from lf_mpc_calib.errors import DegenerateConfigurationError, DetectionError, \
    InvalidInputError
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.camera.model import MPCModel

STAGES = ('decode', 'rectify', 'detect', 'triangulate', 'rays')
_FULL_SCALE = {np.dtype(np.uint8): 255.0, np.dtype(np.uint16): 65535.0}


def central_view_intrinsics(model):
    """
    Pinhole matrix K (3, 3) of the rectified central view of an MPCModel.

    The central view (i = j = 0) has s = t = 0, so an undistorted ray x^u = X / Z is seen at
    u = (x^u - u_0) / k_u: focal lengths 1 / k_u, 1 / k_v and principal point (-u_0 / k_u,
    -v_0 / k_v) in view pixels.
    """
    if model.k_u == 0.0 or model.k_v == 0.0:
        raise InvalidInputError(f'model has k_u = {model.k_u}, k_v = {model.k_v}; expected '
                                'both non-zero')
    cx, cy = model.principal_point
    return np.array([[1.0 / model.k_u, 0.0, cx], [0.0, 1.0 / model.k_v, cy], [0.0, 0.0, 1.0]])


def rectify_maps(model, view_shape):
    """
    cv2.remap maps (rows, cols) float32 x2 from the rectified to the decoded central view.

    Rectified pixel (u, v) is the undistorted ray x^u = k_u u + u_0, y^u = k_v v + v_0 of the
    central view; its measured ray (inverse of Eq. 18, :meth:`MPCModel.distort`) gives the
    decoded pixel to sample. None when the model has no radial distortion (identity).
    """
    if model.k_1 == 0.0 and model.k_2 == 0.0:
        return None
    rows, cols = (int(x) for x in view_shape)
    v, u = np.mgrid[0:rows, 0:cols].astype(float)
    stxy = np.column_stack([np.zeros(u.size), np.zeros(u.size),
                            model.k_u * u.ravel() + model.u_0, model.k_v * v.ravel() + model.v_0])
    measured = model.distort(stxy)
    mu = ((measured[:, 2] - model.u_0) / model.k_u).reshape(rows, cols)
    mv = ((measured[:, 3] - model.v_0) / model.k_v).reshape(rows, cols)
    bad = ~(np.isfinite(mu) & np.isfinite(mv))
    mu[bad], mv[bad] = -1.0, -1.0
    return mu.astype(np.float32), mv.astype(np.float32)


@dataclass(frozen=True, eq=False)
class RaySet:
    """
    Rays of decimated pixels, in the camera (optical) frame.

    origins (R, 3): (s, t, 0) on the view plane, metres; directions (R, 3): unit vectors
    along (x^u, y^u, 1); intensity (R,) float32 in [0, 1] of the raw frame's full scale
    (float frames as they are); ijuv (R, 4) the indexed pixels they come from.
    """

    origins: np.ndarray
    directions: np.ndarray
    intensity: np.ndarray
    ijuv: np.ndarray


@dataclass(frozen=True, eq=False)
class Measurement:
    """
    What :meth:`LiveMeasurer.measure` found in one raw frame.

    lightfield: the decoded LightField (valid = the views corners are taken from; the other
    views are 0 unless :meth:`LiveMeasurer.measure` was asked for rays or all views);
    center (rows, cols) float32: the rectified central view, in the raw frame's units;
    point_ids (C,) int: board corner indices measured; points (C, 3): their positions in the
    camera frame (metres); rays_per_point (C,) int: views each was triangulated from;
    residual_m (C,): RMS distance of a point from its rays; reason: why no point was measured
    ('' when some were); rays: a RaySet or None; timings {stage: seconds} for STAGES run;
    corner_search: 'tracked', 'full search: <why>' or '' (no corners asked for); pinhole: the
    :class:`lf_mpc_calib.measurement.focused.RenderedPinhole` of ``center`` when it is an image
    rendered from a focused camera's micro-images (None: the rectified central view, K of
    :func:`central_view_intrinsics`); depth (rows, cols) float32: a focused camera's depth in
    the pixels of ``center`` when asked for (:mod:`lf_mpc_calib.measurement.focused_depth`);
    observations: the Observations of the corners found (pose 0), or None (what
    :func:`lf_mpc_calib.measurement.drift.frame_residuals` takes).
    """

    lightfield: object
    center: np.ndarray
    point_ids: np.ndarray
    points: np.ndarray
    rays_per_point: np.ndarray
    residual_m: np.ndarray
    reason: str = ''
    rays: RaySet = None
    timings: dict = field(default_factory=dict)
    corner_search: str = ''
    pinhole: object = None
    depth: np.ndarray = None
    observations: object = None


def _no_points():
    return np.zeros(0, int), np.zeros((0, 3)), np.zeros(0, int), np.zeros(0)


class LiveMeasurer:
    """
    Decodes raw frames and measures board corners in 3-D with a calibrated MPC model.

    model: the calibrated MPCModel; grid: the LensletGrid the calibration decoded with;
    board: a Checkerboard or CharucoBoard for :meth:`measure` to find (None: no points);
    white: the white image (uint8/uint16/float, the raw frames' size) for devignetting and
    usable views, or None (gain 1, views within the micro-image); views (n_i, n_j) odd
    counts decoded;
    ray_step: pixel decimation of the rays (>= 1); ray_view_step: the rays come from views
    whose i and j are multiples of it; strict_views: corners only from clean views
    (``Decoder.valid``, else every bright view); corner_options: a CornerOptions;
    demosaic: Bayer pattern of the raw frames or None; track_corners: follow the corners from
    the previous frame (full search when that fails) instead of a full search every frame.

    Decoders are built lazily for each raw dtype (8/16-bit frames are remapped in their own
    dtype, the fast path), with the white image converted to that dtype's scale.
    Not thread-safe: one caller at a time.
    """

    def __init__(self, model, grid, *, board=None, white=None, views=(9, 9), ray_step=8,
                 ray_view_step=4, strict_views=True, corner_options=None, demosaic=None,
                 track_corners=True):
        if not isinstance(model, MPCModel):
            raise InvalidInputError(f'model must be an MPCModel, got {type(model).__name__}')
        if not isinstance(grid, LensletGrid):
            raise InvalidInputError(f'grid must be a LensletGrid, got {type(grid).__name__}')
        if int(ray_step) < 1 or int(ray_view_step) < 1:
            raise InvalidInputError(f'ray_step and ray_view_step must be >= 1, got '
                                    f'{ray_step}, {ray_view_step}')
        self.model = model
        self.grid = grid
        self.board = board
        self.views = tuple(int(v) for v in views)
        self.ray_step = int(ray_step)
        self.ray_view_step = int(ray_view_step)
        self.strict_views = bool(strict_views)
        self.corner_options = corner_options
        self.demosaic = demosaic
        self.track_corners = bool(track_corners)
        self._tracker = None
        if board is not None and self.track_corners and not _is_charuco(board):
            from lf_mpc_calib.features.corner_tracking import CornerTracker
            self._tracker = CornerTracker(board, corner_options)
        self.white = None               # float32 in [0, 1]
        self._decoders = {}             # raw dtype -> Decoder
        self._rays = None               # precomputed geometry (indices, origins, directions)
        self._rectify = None
        self._rectify_done = False
        if white is not None:
            self.set_white(white)

    @classmethod
    def from_calibration(cls, cal, **options):
        """A measurer for a :class:`~lf_mpc_calib.io.calibration_file.CalibrationFile`."""
        if cal.camera_type != 'conventional':
            raise InvalidInputError(f"live decoding needs a 'conventional' camera, the "
                                    f'calibration file has {cal.camera_type!r}')
        if cal.lenslet_grid is None:
            raise InvalidInputError('the calibration file has no lenslet_grid: calibrate from '
                                    'raw frames (calibration node or calibrate-raw)')
        return cls(cal.model, cal.lenslet_grid, **options)

    # ---- set-up -------------------------------------------------------------------------
    def set_white(self, white):
        """Use ``white`` (uint8/uint16/float, (H, W)) from now on; decoders are rebuilt."""
        from lf_mpc_calib.io.images import as_float_image
        w = as_float_image(white, 'white')
        if w.ndim != 2 and self.demosaic is None:
            w = w.mean(axis=2)
        size = tuple(self.grid.image_size)
        if (w.shape[1], w.shape[0]) != size:
            raise InvalidInputError(f'white image is {w.shape[1]}x{w.shape[0]} px but the '
                                    f'lenslet grid is {size[0]}x{size[1]} px')
        self.white = w
        self._decoders, self._rays = {}, None
        if self._tracker is not None:
            self._tracker.reset()

    def decoder(self, dtype):
        """The Decoder for raw frames of ``dtype`` (built on first use)."""
        from lf_mpc_calib.lenslet.decode import Decoder
        dtype = np.dtype(dtype)
        if dtype not in self._decoders:
            white = None
            if self.white is not None:
                scale = _FULL_SCALE.get(dtype)
                white = self.white if scale is None else \
                    np.round(self.white * scale).astype(dtype)
            self._decoders[dtype] = Decoder(self.grid, white=white, views=self.views,
                                            demosaic=self.demosaic)
        return self._decoders[dtype]

    def _usable(self, decoder):
        return decoder.valid if self.strict_views else decoder.bright

    def _ray_geometry(self, decoder):
        if self._rays is None:
            i_vals, j_vals = decoder.i_values, decoder.j_values
            rows, cols = decoder.view_shape
            step_v = self.ray_view_step
            jj, ii = np.nonzero(decoder.bright & (j_vals[:, None] % step_v == 0)
                                & (i_vals[None, :] % step_v == 0))
            v, u = np.mgrid[0:rows:self.ray_step, 0:cols:self.ray_step]
            u, v = u.ravel(), v.ravel()
            n_pix = u.size
            jj_r, ii_r = np.repeat(jj, n_pix), np.repeat(ii, n_pix)
            u_r, v_r = np.tile(u, len(jj)), np.tile(v, len(jj))
            ijuv = np.column_stack([i_vals[ii_r], j_vals[jj_r], u_r, v_r]).astype(float)
            rays = self.model.rays(ijuv) if len(ijuv) else np.zeros((0, 4))
            origins = np.column_stack([rays[:, 0], rays[:, 1], np.zeros(len(rays))])
            d = np.column_stack([rays[:, 2], rays[:, 3], np.ones(len(rays))])
            d /= np.linalg.norm(d, axis=1, keepdims=True)
            self._rays = (jj_r, ii_r, v_r, u_r, origins, d, ijuv)
        return self._rays

    def _rectify_maps(self, view_shape):
        if not self._rectify_done:
            self._rectify = rectify_maps(self.model, view_shape)
            self._rectify_done = True
        return self._rectify

    @property
    def view_size(self):
        """(width, height) of a decoded view (the CameraInfo size)."""
        cols, rows = self.grid.shape
        return int(cols), int(rows)

    # ---- per frame ----------------------------------------------------------------------
    def measure(self, raw, *, points=True, rays=True, all_views=False):
        """
        Decode ``raw`` (the grid's image size; uint8, uint16 or float) and measure it.

        points: find and triangulate the board corners (needs a board); rays: gather the
        decimated rays; all_views: decode every view (e.g. for a mosaic), not only the usable
        ones and the central one (rays decode every view too). Returns a
        :class:`Measurement`; a frame without the board gives no points and the reason.
        Raises InvalidInputError for a frame that does not fit.
        """
        from lf_mpc_calib.features.board_detection import detect_board_corners
        raw = np.asarray(raw)
        timings = {}
        t0 = time.perf_counter()
        decoder = self.decoder(raw.dtype)
        usable = self._usable(decoder)
        only = None
        if not (rays or all_views):
            only = usable.copy()
            only[np.flatnonzero(decoder.j_values == 0)[0],
                 np.flatnonzero(decoder.i_values == 0)[0]] = True
        lf = decoder.decode(raw, only=only)
        lf = dataclasses.replace(lf, valid=usable.copy())
        t1 = time.perf_counter()
        timings['decode'] = t1 - t0

        jc, ic = lf.central_index
        center = lf.views[jc, ic]
        maps = self._rectify_maps(center.shape[:2])
        if maps is not None:
            center = cv2.remap(center, maps[0], maps[1], cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        t2 = time.perf_counter()
        timings['rectify'] = t2 - t1

        ids, pts, counts, resid = _no_points()
        reason = 'points not asked for' if not points else ''
        obs = None
        search = ''
        if points and self.board is None:
            reason = 'no board given'
        elif points:
            try:
                if self._tracker is None:   # a ChArUco board: corners named by markers
                    search = 'full search: ' + ('ChArUco markers' if _is_charuco(self.board)
                                                else 'tracking off')
                    obs = detect_board_corners(lf, self.board, pose=0,
                                               options=self.corner_options).observations
                else:
                    obs = self._tracker.detect(lf).observations
            except DetectionError as exc:
                obs, reason = None, str(exc)
            if self._tracker is not None:
                t = self._tracker
                search = t.last_mode + (f': {t.last_reason}' if t.last_reason else '')
            t3 = time.perf_counter()
            timings['detect'] = t3 - t2
            if obs is not None:
                ids, pts, counts, resid, reason = self.triangulate(obs)
            timings['triangulate'] = time.perf_counter() - t3

        ray_set = None
        if rays:
            t4 = time.perf_counter()
            jj, ii, v, u, origins, directions, ijuv = self._ray_geometry(decoder)
            values = lf.views[jj, ii, v, u]
            if values.ndim == 2:
                values = values.mean(axis=1)
            scale = _FULL_SCALE.get(raw.dtype, 1.0)
            ray_set = RaySet(origins, directions,
                             (values / np.float32(scale)).astype(np.float32), ijuv)
            timings['rays'] = time.perf_counter() - t4
        return Measurement(lf, center, ids, pts, counts, resid, reason, ray_set, timings,
                           search, observations=obs)

    def triangulate(self, obs):
        """
        Board points of an Observations table in the camera frame.

        Returns (ids (C,), points (C, 3), rays per point (C,), RMS ray distance (C,), reason):
        corners seen in fewer than two views are left out.
        """
        point = np.asarray(obs.point)
        ids, counts = np.unique(point, return_counts=True)
        keep = np.isin(point, ids[counts >= 2])
        if not keep.any():
            return (*_no_points(), 'no corner seen in two views')
        rays = self.model.rays(np.asarray(obs.ijuv)[keep])
        groups = point[keep]
        try:
            pts = self.model.triangulate(rays, groups)
        except DegenerateConfigurationError as exc:
            return (*_no_points(), f'triangulation failed: {exc}')
        ids, inv, counts = np.unique(groups, return_inverse=True, return_counts=True)
        d = self.model.point_ray_distance(pts[inv.ravel()], rays)
        resid = np.sqrt(np.bincount(inv.ravel(), weights=d * d) / counts)
        return ids.astype(int), pts, counts.astype(int), resid, ''


def _is_charuco(board):
    """Whether ``board`` is a ChArUco board (its corners named by markers in every frame,
    any part of it: not followed by the checkerboard's CornerTracker)."""
    return getattr(board, 'board_type', 'checkerboard') == 'charuco'


__all__ = ['LiveMeasurer', 'Measurement', 'RaySet', 'STAGES', 'central_view_intrinsics',
           'rectify_maps']
