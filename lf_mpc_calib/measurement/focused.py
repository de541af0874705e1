"""
Rays and 3-D points of a focused (plenoptic 2.0) camera from raw pixels.

A focused camera's calibration decodes a raw pixel q through the micro-image it lies in:
(i, j) = that micro-image's centre c (the lenslet grid of the calibration), (u, v) = q - c,
corrected by the lens type's terms when the camera has several
(:class:`lf_mpc_calib.calibration.type_terms.LensTypeTerms`: u' = (1 + a_T) u + d_T, and with
the '-view' terms i' = i + g_T (i - i_c)), then the MPC model gives the ray (Eq. 11, 18). A
board corner seen in several micro-images is the least-squares intersection of their rays
(:func:`lf_mpc_calib.camera.model.triangulate`).

    rays = raw_pixel_rays(model, grid, q (N, 2), types=None, terms=None) -> (N, 4)
    points, ids = triangulate_rows(model, obs, terms=None) -> ((G, 3), (G, 2) pose, point)
    pinhole = rendered_pinhole(model, w, (width, height)) -> RenderedPinhole of the image
                                                    rendered at inverse virtual depth w
    points, uv = rendered_depth_points(pinhole, depth (rows, cols), step=1) -> (P, 3), (P, 2)
    rule = type_class_map(grid, types (M,), T) -> mapping for the calibration file, or None
    types = micro_image_types(grid, calibration_file.lens_types) -> (M,)
    FocusedMeasurer.from_calibration(cal, board=...).measure(raw) -> live.Measurement
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.camera.model import point_ray_distance, triangulate
from lf_mpc_calib.camera.optical_frame import optical_origin
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.nearest import MicroImageLattice, raw_pixel_ijuv


def raw_pixel_rays(model, grid, points, *, types=None, terms=None):
    """
    Undistorted rays (N, 4) of raw pixels ``points`` (N, 2) through their micro-images.

    grid: the LensletGrid of the calibration; types (M,) int: the lens type of every
    micro-image of ``grid.centres()`` (needed with ``terms``, a LensTypeTerms); pixels outside
    every micro-image of the grid give NaN rays.
    """
    q = np.asarray(points, dtype=float).reshape(-1, 2)
    lattice = MicroImageLattice(grid)
    idx = lattice.nearest(q)
    ok = idx >= 0
    rays = model.rays(raw_pixel_ijuv(lattice.centres, q, np.maximum(idx, 0), types=types,
                                     terms=terms))
    rays[~ok] = np.nan
    return rays


@dataclass(frozen=True)
class RenderedPinhole:
    """
    The pinhole camera of an image rendered from a focused camera's micro-images.

    K (3, 3): focal lengths and principal point in rendered pixels (positive focal lengths);
    centre (3,) m and rotation_vector (3,): the pinhole's frame in the calibration's optical
    (MPC) frame (the rotation is 0 or 180 deg about z); size (width, height) px.
    """

    K: np.ndarray
    centre: np.ndarray
    rotation_vector: np.ndarray
    size: tuple


def rendered_pinhole(model, w, size):
    """
    The pinhole camera (:class:`RenderedPinhole`) of the image rendered from the micro-images
    at inverse virtual depth ``w`` (:meth:`MicroImageCornerDetector.render`: rendered pixel a
    samples raw pixel c + w (c - a / |w|) of the micro-image whose centre c is nearest to
    a / |w|) of a focused camera's ``model`` (no radial distortion); size (width, height).

    With Eq. 11 and 18 a point (X, Y, Z) of the MPC frame seen from micro-image i gives
    u = w_P i + (X / Z - u_0) / k_u with its inverse virtual depth w_P = -k_i (1 / Z + k_3) /
    k_u; taking i at the rendered position, the point is rendered at a = f_x (X - C_x) /
    (Z - C_z) + c_x with f_x = |w| / (k_i k_3), c_x = -f_x u_0 and the centre
    C = (-u_0 / k_3, -v_0 / k_4, -1 / k_3) (the main lens; y with k_j, k_4, v_0; C_z from the
    mean of 1 / k_3 and 1 / k_4), exactly for
    points at the rendered depth (w_P = w) and up to the tiling of the patches elsewhere (the
    simulated Keplerian and Galilean presets: median 0.06-0.2 px, max 0.4 px between the true
    corners so projected and those OpenCV finds in the rendered image; one lens type: a
    multi-focus camera's type terms are left out). Negative focal lengths (the usual case:
    k_i < 0 < k_3) are the same pinhole turned by 180 deg about z: K is given with positive
    ones and that rotation. Raises InvalidInputError for w = 0, k_3 or k_4 = 0, or axes
    mirrored against each other (f_x, f_y of opposite signs).
    """
    k3, k4 = model.k_3, model.k_4
    if w == 0.0 or not np.isfinite(w) or k3 == 0.0 or k4 == 0.0:
        raise InvalidInputError(f'rendered pinhole needs w != 0 and k_3, k_4 != 0 (a focused '
                                f'camera), got w = {w}, k_3 = {k3}, k_4 = {k4}')
    fx, fy = abs(w) / (model.k_i * k3), abs(w) / (model.k_j * k4)
    if fx * fy < 0:
        raise InvalidInputError(f'the rendered image is mirrored (focal lengths {fx:.4g}, '
                                f'{fy:.4g} px of opposite signs): no pinhole without a flip')
    cx, cy = -fx * model.u_0, -fy * model.v_0
    turn = np.array([0.0, 0.0, np.pi]) if fx < 0 else np.zeros(3)
    K = np.array([[abs(fx), 0.0, cx], [0.0, abs(fy), cy], [0.0, 0.0, 1.0]])
    centre = optical_origin(model, 'focused')        # the main lens: the optical frame's origin
    return RenderedPinhole(K, centre, turn, (int(size[0]), int(size[1])))


def rendered_depth_points(pinhole, depth, *, step=1):
    """
    3-D points (P, 3) in the calibration's optical (MPC) frame and their pixels (P, 2) int
    (column, row) of a depth image (rows, cols) in the pixels of ``pinhole`` (metres along its
    axis: :class:`lf_mpc_calib.measurement.focused_depth.MicroImageDepth`), every ``step``-th
    pixel each way, the pixels with a depth only.
    """
    from scipy.spatial.transform import Rotation
    rows, cols = np.mgrid[0:depth.shape[0]:step, 0:depth.shape[1]:step]
    z = depth[rows, cols]
    have = np.isfinite(z) & (z > 0)
    uv = np.column_stack([cols[have], rows[have]])
    ray = np.linalg.solve(pinhole.K, np.vstack([uv.T.astype(float), np.ones(len(uv))]))
    rot = Rotation.from_rotvec(pinhole.rotation_vector).as_matrix()
    return (rot @ (ray * z[have])).T + pinhole.centre, uv


def triangulate_rows(model, obs, *, terms=None):
    """
    3-D points of the board corners in an observation table of a focused camera.

    Rows of one (pose, point) are the micro-images that saw that corner; with ``terms`` each
    row's (u, v) is corrected by its lens type (obs.lens_type). Returns (points (G, 3) metres
    in the MPC frame, keys (G, 2) = (pose, point)); corners seen in fewer than 2 micro-images
    are left out.
    """
    ijuv = obs.ijuv
    if terms is not None:
        if obs.lens_type is None:
            raise InvalidInputError('lens-type terms need the lens_type column of the '
                                    'observations, got none')
        ijuv = terms.corrected_ijuv(ijuv, obs.lens_type)
    keys = np.column_stack([obs.pose, obs.point])
    uniq, inv, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inv = inv.ravel()
    keep = counts[inv] >= 2
    if not np.any(keep):
        return np.zeros((0, 3)), np.zeros((0, 2), dtype=np.int64)
    pts = triangulate(model.rays(ijuv[keep]), inv[keep])
    return pts, uniq[np.unique(inv[keep])]


def type_class_map(grid, types, n_types):
    """
    The lens types of ``grid``'s micro-images as a rule for the calibration file: a mapping
    {'classes': text, 'type_of_class': [2 T ints]} with the type of each class
    (k mod T) + T (l mod 2) of the grid's lattice indices, or None when the types (M,) do not
    follow such a rule.
    """
    types = np.asarray(types, dtype=np.int64).reshape(-1)
    cols = grid.shape[0]
    idx = np.arange(len(types))
    cls = (idx % cols) % n_types + n_types * ((idx // cols) % 2)
    out = []
    for k in range(2 * n_types):
        values = np.unique(types[cls == k])
        if len(values) != 1:
            return None
        out.append(int(values[0]))
    return {'classes': f'(k mod {n_types}) + {n_types} (l mod 2) of lenslet_grid indices',
            'type_of_class': out}


def micro_image_types(grid, lens_types):
    """
    (M,) lens type of every micro-image of ``grid`` from a calibration file's ``lens_types``
    mapping (its ``type_of_class`` rule); InvalidInputError when the file has no such rule.
    """
    rule = (lens_types or {}).get('type_of_class')
    if not rule or len(rule) % 2:
        raise InvalidInputError('the calibration file\'s lens_types has no type_of_class rule: '
                                'the lens type of each micro-image is unknown')
    n = len(rule) // 2
    cols = grid.shape[0]
    idx = np.arange(grid.shape[0] * grid.shape[1])
    return np.asarray(rule, dtype=np.int64)[(idx % cols) % n + n * ((idx // cols) % 2)]


class FocusedMeasurer:
    """
    Frame-by-frame measurement with a focused camera's calibration (what the decode node needs
    instead of :class:`lf_mpc_calib.measurement.live.LiveMeasurer`). The rendered image comes
    from :class:`lf_mpc_calib.measurement.focused_live.LiveCenterRenderer` (cached index maps,
    virtual depth estimated again every 30 frames or when the frame changed).

    model, grid: the calibration's MPCModel and LensletGrid; lens_types: the file's
    ``lens_types`` mapping (terms and type_of_class) or None; board: a Checkerboard to measure
    (None: the rendered image only); white: the white image, needed to measure (set later with
    :meth:`set_white`); track_corners: follow the corners from frame to frame in the
    micro-images (:class:`lf_mpc_calib.features.micro_image_tracking.MicroImageCornerTracker`;
    re-acquired seeded by the board's last place when the prediction fails, a full detection
    on the first frame and when re-acquisition failed on 2 frames in a row, the reason in
    ``corner_search``: :mod:`lf_mpc_calib.measurement.focused_search`); background_search: run
    that full detection in a thread of its own (frames go on being rendered meanwhile, without
    corners; ``search.last_full_search_s`` its duration); ray_step, ray_lens_step: the
    decimation of the rays (:class:`lf_mpc_calib.measurement.focused_rays.FocusedRays`: every
    ray_step-th pixel of the micro-images whose lattice indices are multiples of
    ray_lens_step; built on the first frame that asks for rays). :meth:`measure` returns a
    :class:`lf_mpc_calib.measurement.live.Measurement` whose ``center`` is the image rendered
    from the micro-images at the frame's inverse virtual depth, ``pinhole`` its
    :func:`rendered_pinhole` (None when the model has none) and ``lightfield`` None.
    """

    def __init__(self, model, grid, *, lens_types=None, board=None, white=None,
                 track_corners=True, background_search=False, ray_step=8, ray_lens_step=4):
        from lf_mpc_calib.calibration.type_terms import LensTypeTerms
        if int(ray_step) < 1 or int(ray_lens_step) < 1:
            raise InvalidInputError(f'ray_step and ray_lens_step must be >= 1, got '
                                    f'{ray_step}, {ray_lens_step}')
        self.model, self.grid, self.board = model, grid, board
        self.ray_step, self.ray_lens_step = int(ray_step), int(ray_lens_step)
        self.rays = None        # FocusedRays, once per white
        self.track_corners = bool(track_corners)
        self.background_search = bool(background_search)
        self.lens_types = lens_types
        self.terms = None if lens_types is None else LensTypeTerms.from_dict(lens_types)
        self.types = None if lens_types is None or 'type_of_class' not in lens_types \
            else micro_image_types(grid, lens_types)
        if self.terms is not None and self.types is None:
            raise InvalidInputError('the calibration has lens-type terms but no type_of_class '
                                    'rule: the lens type of each micro-image is unknown')
        self.detector = self.live = self.tracker = self.depth = self.search = None
        self.white = None
        if white is not None:
            self.set_white(white)

    @classmethod
    def from_calibration(cls, cal, **options):
        """A measurer for a focused camera's CalibrationFile."""
        if cal.camera_type != 'focused':
            raise InvalidInputError(f"FocusedMeasurer needs a 'focused' camera, the "
                                    f'calibration file has {cal.camera_type!r}')
        if cal.lenslet_grid is None:
            raise InvalidInputError('the calibration file has no lenslet_grid: calibrate from '
                                    'raw frames (calibration node or calibrate-raw)')
        return cls(cal.model, cal.lenslet_grid, lens_types=cal.lens_types, **options)

    def set_white(self, white):
        """Use ``white`` ((H, W), the grid's size) from now on."""
        from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
        from lf_mpc_calib.io.images import as_float_image
        from lf_mpc_calib.measurement.focused_live import LiveCenterRenderer
        w = as_float_image(white, 'white')
        w = w.mean(axis=2) if w.ndim == 3 else w
        self.detector = MicroImageCornerDetector(w, self.grid, lens_types=self.types)
        self.live = LiveCenterRenderer(self.detector)
        self.close(timeout=0.0)             # a full search of the old white is of no use
        self.tracker = self.search = None
        if self.board is not None:
            from lf_mpc_calib.features.micro_image_tracking import MicroImageCornerTracker
            from lf_mpc_calib.measurement.focused_search import CornerSearch
            if self.track_corners:
                self.tracker = MicroImageCornerTracker(self.detector, self.board)
            self.search = CornerSearch(self.detector, self.board, self.tracker,
                                       background=self.background_search)
        self.white = w
        self.rays = None

    def close(self, timeout=2.0):
        """Stop a background full search (:meth:`CornerSearch.close`); nothing else to free."""
        if getattr(self, 'search', None) is not None:
            self.search.close(timeout)

    def measure(self, raw, *, points=True, rays=False, all_views=False, depth=False):
        """
        Render and measure one raw frame (H, W); see the class docstring. ``center`` is in the
        raw frame's units (uint8/uint16 full scale, floats as they are); points=False: the
        rendered image only; depth=True: also its depth from the micro-images' disparities
        (:class:`lf_mpc_calib.measurement.focused_depth.MicroImageDepth`, searched near the
        rendered image's w; NaN where unknown or without a pinhole); rays: also the RaySet of
        the decimated raw pixels (``rays``, intensity devignetted in [0, 1]); all_views:
        accepted for LiveMeasurer's signature (no views here). The same as :meth:`render`
        then :meth:`find_points`.
        """
        del all_views
        meas, frame = self.render(raw, rays=rays, depth=depth)
        if frame is None or self.board is None or not points:
            return meas
        return self.find_points(meas, frame)

    def render(self, raw, *, rays=False, depth=False):
        """
        :meth:`measure` without the corners: (Measurement without points, frame), frame the
        :class:`RenderedFrame` that :meth:`find_points` takes (None when nothing was rendered:
        no white yet, or the reason in the Measurement). The corners of one frame may be
        found in another thread while the next frame is rendered (the decode node does).
        """
        import time
        from lf_mpc_calib.errors import DetectionError
        from lf_mpc_calib.io.images import as_float_image
        from lf_mpc_calib.measurement.live import Measurement
        none = (np.zeros(0, int), np.zeros((0, 3)), np.zeros(0, int), np.zeros(0))
        if self.detector is None:
            return Measurement(None, None, *none, reason='no white image yet'), None
        kind = np.asarray(raw).dtype
        top = float(np.iinfo(kind).max) if kind in (np.uint8, np.uint16) else 1.0
        if np.ndim(raw) == 2 and top > 1.0:     # the normalising is scale-free: no float
            img, scale = np.asarray(raw), top    # copy of the frame (10 ms at 4080 x 3068)
        else:
            img = as_float_image(raw, 'raw')
            img, scale = (img.mean(axis=2) if img.ndim == 3 else img), 1.0
        det = self.detector
        timings, ray_set = {}, None
        if rays:    # the raw pixels' own rays: no rendering needed
            t0 = time.perf_counter()
            if self.rays is None:
                from lf_mpc_calib.measurement.focused_rays import FocusedRays
                self.rays = FocusedRays(det, self.model, ray_step=self.ray_step,
                                        lens_step=self.ray_lens_step, types=self.types,
                                        terms=self.terms)
            ray_set = self.rays.ray_set(img, scale)
            timings['rays'] = time.perf_counter() - t0
        t0 = time.perf_counter()
        try:
            norm = self.live.normalise(img)
            center_norm, w = self.live.render_normalised(norm)
            center = center_norm * np.float32(top)
        except DetectionError as exc:
            return Measurement(None, None, *none, reason=str(exc), rays=ray_set,
                               timings=timings), None
        try:
            pinhole = rendered_pinhole(self.model, w, center.shape[::-1])
        except InvalidInputError:
            pinhole = None
        timings['render'] = time.perf_counter() - t0
        depth_map = None
        if depth:
            from lf_mpc_calib.measurement.focused_depth import MicroImageDepth
            t0 = time.perf_counter()
            if self.depth is None or self.depth.det is not det:
                self.depth = MicroImageDepth(det, terms=self.terms)   # maps, once per white
            depth_map = np.full(center.shape, np.nan, np.float32) if pinhole is None else \
                self.depth.depth_image(norm, self.model, w, pinhole.size)
            timings['depth'] = time.perf_counter() - t0
        meas = Measurement(None, center, *none, reason='no board to measure', rays=ray_set,
                           timings=timings, pinhole=pinhole, depth=depth_map)
        return meas, RenderedFrame(img, norm, center_norm, w, self.search)

    def find_points(self, meas, frame):
        """
        The board's corners in a frame :meth:`render` gave (``meas``, ``frame``), triangulated:
        ``meas`` with the points, ``corner_search`` and the 'detect' and 'triangulate' timings.
        Calls for one measurer come one at a time, in the order of the frames.
        """
        import dataclasses
        import time
        timings = dict(meas.timings)
        if self.board is None or frame.search is None:
            return meas
        t0 = time.perf_counter()
        obs, search, why = frame.search.find(frame.img, frame.norm, frame.center_norm, frame.w)
        timings['detect'] = time.perf_counter() - t0
        if obs is None:
            return dataclasses.replace(meas, reason=why, timings=timings, corner_search=search)
        t0 = time.perf_counter()
        pts, keys = triangulate_rows(self.model, obs, terms=self.terms)
        ijuv = obs.ijuv if self.terms is None else \
            self.terms.corrected_ijuv(obs.ijuv, obs.lens_type)
        rays = self.model.rays(ijuv)
        ids = keys[:, 1]
        pos = np.searchsorted(ids, obs.point)
        ok = (pos < len(ids)) & (ids[np.minimum(pos, len(ids) - 1)] == obs.point)
        d = point_ray_distance(pts[pos[ok]], rays[ok])
        n = np.bincount(pos[ok], minlength=len(ids))
        resid = np.sqrt(np.bincount(pos[ok], weights=d * d, minlength=len(ids))
                        / np.maximum(n, 1))
        timings['triangulate'] = time.perf_counter() - t0
        return dataclasses.replace(meas, point_ids=ids, points=pts, rays_per_point=n,
                                   residual_m=resid, reason='', timings=timings,
                                   corner_search=search, observations=obs)


@dataclass(frozen=True, eq=False)
class RenderedFrame:
    """
    What :meth:`FocusedMeasurer.find_points` needs of a rendered frame: img (H, W) the raw
    frame (uint8 / uint16 as it came, else float32 in [0, 1]); norm (H, W) float32 it
    normalised by the white; center_norm (h, w) float32 the rendered image in normalised
    units; w its inverse virtual depth; search the measurer's CornerSearch at the time (None:
    no board), so a frame rendered before a new white is not searched with the new white's
    tracker.
    """

    img: np.ndarray
    norm: np.ndarray
    center_norm: np.ndarray
    w: float
    search: object
