"""
The optics of a simulated plenoptic camera, its presets, and its MPC ground truth.

Public API::

    camera = preset(name, *, scale=1.0, **overrides)   # 'lytro', 'illum',
                                                       # 'focused-keplerian', 'focused-galilean',
                                                       # 'focused-multifocus'
    camera.camera_type                 # 'conventional' | 'focused'
    camera.ground_truth_model(grid=None) -> MPCModel
    camera.lenslet_grid() -> LensletGrid          # ground-truth micro-IMAGE lattice
    camera.trace(points, *, lens_points=None) -> (origins (N, 2), slopes (N, 2), weight (N,))
    camera.pose_to_physical(rvec, tvec) / camera.pose_from_physical(rvec, tvec)
    camera.project_chief(points (N, 3) physical) -> raw pixels (N, 2)
    default_board(camera) -> Checkerboard;  Checkerboard(cols, rows, square, ...)

Geometry (all lengths in metres). Physical camera frame: x right, y down, z forward; thin main
lens of focal length F at z = 0; micro-lens array (MLA) at z = -D with D = F Z_f / (Z_f - F)
(Z_f = ``focus_distance``, the scene plane conjugate to the MLA); sensor at z = -(D + b),
b = ``Camera.gap``. Raw pixel (x, y) (x right, y down, origin at the centre of pixel (0, 0))
lies at sensor position sigma p_x ((x, y) - c) with c = ((W - 1)/2, (H - 1)/2) on the optical
axis, p_x the pixel pitch and sigma = +1 (``Sensor.upright`` False: the raw image is the
physical, inverted image) or -1 (upright: read out turned by 180 degrees, as consumer cameras
do). A micro-lens centred at L (MLA plane) has its micro-image centre, where the ray through the
main-lens centre meets the sensor, at L (D + b) / D: off axis it is not under its lens.

Tracing (used by the renderer and checked against the model in the tests): a ray from sensor
point S through the micro-lens point L + e (e = 0 for the lens centre; a thin micro-lens of focal
length f_m bends it by -e / f_m) meets the main lens at A; with P the point where it crossed the
MLA plane, its slope after the main lens is

    x = rho(|x_0|) x_0 - A / Z_f,   x_0 = -P / D,   rho(r) = 1 + d_1 r^2 + d_2 r^4

which for rho = 1 is exactly the thin-lens refraction d - A / F. ``MainLens.distortion`` =
(d_1, d_2) is a radial distortion of the chief-ray (field) slope x_0 of each micro-lens.

Ground truth, conventional camera (NOTES §3, views counted from the micro-image centres, the
decoding of ``lenslet`` with the grid of :meth:`Camera.lenslet_grid`): the MPC camera frame is
the physical frame turned about z by the grid rotation theta (X_phys = Rz(theta) X_mpc), so that
view index i runs along the lens rows; its view plane is the main-lens plane. Raw point
m + i e_row + j e_col (m the centre of micro-image (u, v) on the unshifted lattice
m = O + u row_vector + v column_vector) traces to A = -sigma p_x (D / b) Rz(theta) (i, j) and
slope x_0 - A / Z_f with x_0 = -sigma p_x (m - c) / (D + b), hence exactly

    k_i = k_j = -sigma p_x D / b,  k_u = -sigma p / D,  k_v = -sigma p_row / D,
    (u_0, v_0) = -sigma p_x Rz(-theta) (O - c) / (D + b),
    k_3 = k_4 = -1 / Z_f,  (k_1, k_2) = (d_1, d_2)

(p, p_row the lens pitch and lens row spacing; the radial term is exactly Eq. 18 because
x_0 is the measured x = k_u u + u_0). With sigma = +1 (default) k_i, k_u < 0 as in the issue.

Ground truth, focused camera ((i, j) = micro-image centre m in raw pixels, absolute; (u, v) =
raw pixel minus m): A = -sigma p_x (D / b) (u, v) and x_0 = -sigma p_x (m - c) / (D + b), so the
ray position depends on (i, j) alone only on the plane z = Z_f (conjugate to the MLA: every ray
through one micro-lens centre crosses it at the image of that centre). The MPC frame is the
physical frame translated by (s_off, t_off, Z_f), s_off = sigma p_x c_x Z_f / (D + b) (so that
(s, t) = 0 at (i, j) = 0), and exactly

    k_i = k_j = -sigma p_x Z_f / (D + b),  k_u = k_v = sigma p_x D / (b Z_f),
    (u_0, v_0) = sigma p_x c / (D + b),  k_3 = k_4 = +1 / Z_f,  k_1 = k_2 = 0.

Board translations in that frame are t_z = Z - Z_f: positive for the Keplerian preset
(Z_f < Z), negative for the Galilean preset (its MLA sits before the intermediate image, Z_f is
beyond the board). A main-lens distortion is not representable by Eq. 18 for focused cameras
(the radial term would act on x_0, which there is part of k_3 s, not of the measured x), so
:meth:`Camera.ground_truth_model` refuses it. Per-lens centre jitter is not in the model either
(the ground truth uses the ideal lattice).
"""

from dataclasses import dataclass, replace
import math
from functools import lru_cache

import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.camera.board import Checkerboard as BoardGeometry
from lf_mpc_calib.camera.board import CharucoBoard as CharucoGeometry, board_type_of
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.grid import numbered_grid
from lf_mpc_calib.camera.model import MPCModel
from lf_mpc_calib.simulation.names import BAYER_PATTERNS, PRESETS  # noqa: F401 (re-exported)

CAMERA_TYPES = ('conventional', 'focused')


def _positive(name, value):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f'{name} must be a positive number, got {value!r}') from None
    if not (np.isfinite(v) and v > 0):
        raise InvalidInputError(f'{name} must be a positive finite number, got {value!r}')
    return v


def rot_z(angle):
    """(3, 3) rotation about z by ``angle`` radians (x towards y)."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


@dataclass(frozen=True, eq=False)
class MainLens:
    """
    A thin main lens at z = 0.

    focal_length F (m); f_number N (aperture radius F / (2 N)); focus_distance Z_f (m), the
    scene plane conjugate to the MLA (may be negative = virtual, or inf; not in [0, F]);
    distortion (d_1, d_2) on the chief-ray slope (see the module docstring); barrel_distance
    z_b (m, in front of the lens) and barrel_radius R_b (m) of a second circular stop (the lens
    barrel) that cuts off-axis micro-images (mechanical vignetting); inf = none.
    """

    focal_length: float
    f_number: float
    focus_distance: float
    distortion: tuple = (0.0, 0.0)
    barrel_distance: float = 0.0
    barrel_radius: float = math.inf

    def __post_init__(self):
        f = _positive('focal_length', self.focal_length)
        object.__setattr__(self, 'focal_length', f)
        object.__setattr__(self, 'f_number', _positive('f_number', self.f_number))
        z = float(self.focus_distance)
        if not (0.0 > z or z > f) or math.isnan(z):
            raise InvalidInputError(
                f'focus_distance must lie outside [0, focal_length={f}], got {z}')
        object.__setattr__(self, 'focus_distance', z)
        d = tuple(float(x) for x in self.distortion)
        if len(d) != 2 or not all(np.isfinite(d)):
            raise InvalidInputError(
                f'distortion must be 2 finite numbers, got {self.distortion!r}')
        object.__setattr__(self, 'distortion', d)
        object.__setattr__(self, 'barrel_distance', float(self.barrel_distance))
        object.__setattr__(self, 'barrel_radius', _positive('barrel_radius', self.barrel_radius)
                           if math.isfinite(float(self.barrel_radius)) else math.inf)

    @property
    def aperture_radius(self):
        """Radius F / (2 N) of the aperture disk (m)."""
        return self.focal_length / (2.0 * self.f_number)

    @property
    def image_distance(self):
        """D = F Z_f / (Z_f - F): where the MLA sits behind the lens (m)."""
        if math.isinf(self.focus_distance):
            return self.focal_length
        return self.focal_length * self.focus_distance / (self.focus_distance - self.focal_length)

    @property
    def inverse_focus(self):
        """1 / Z_f (1/m), 0 for focus at infinity."""
        return 1.0 / self.focal_length - 1.0 / self.image_distance


@dataclass(frozen=True, eq=False)
class MicroLensArray:
    """
    The micro-lens array (MLA) plane, a distance D behind the main lens.

    lattice 'hex' | 'rect'; pitch p (m) between lenses of one row; row_spacing (m; None: p
    sqrt(3)/2 for hex, p for rect); rotation (rad) of the rows about z (in raw-pixel axes);
    offset (2,) m: centre of lens (0, 0) relative to the optical axis; hex_parity as in
    LensletGrid; focal_length f_m (m) of the thin micro-lenses, or None for pinholes (the
    renderer then samples no lens aperture); centre_jitter (m): standard deviation of a fixed
    pseudo-random displacement of each pinhole centre (0: ideal lattice), seeded by jitter_seed;
    focal_jitter: relative standard deviation of each lens's focal length about its nominal
    (or its type's) value (0: all equal), seeded by jitter_seed too.
    Multi-focus arrays (Raytrix-like): type_focal_lengths (T,) the focal length of each of T
    interleaved lens types (type of lens (k, l): ((l mod 2) + k) mod T, :meth:`lens_type`) and
    type_gap_offsets (T,) m: the shift of each type's rear principal plane, so that type T
    images at the gap b + delta_T (its micro-images scale by b / (b + delta_T)); None: one type.
    """

    pitch: float
    lattice: str = 'hex'
    rotation: float = 0.0
    offset: tuple = (0.0, 0.0)
    row_spacing: float = None
    hex_parity: int = 0
    focal_length: float = None
    centre_jitter: float = 0.0
    jitter_seed: int = 0
    type_focal_lengths: tuple = None
    type_gap_offsets: tuple = None
    focal_jitter: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, 'pitch', _positive('pitch', self.pitch))
        if self.lattice not in ('hex', 'rect'):
            raise InvalidInputError(f"lattice must be 'hex' or 'rect', got {self.lattice!r}")
        offset = np.asarray(self.offset, dtype=float)
        if offset.shape != (2,) or not np.all(np.isfinite(offset)):
            raise InvalidInputError(f'offset must be 2 finite numbers (m), got {self.offset!r}')
        object.__setattr__(self, 'offset', tuple(offset.tolist()))
        if self.row_spacing is None:
            rs = self.pitch * (math.sqrt(3.0) / 2.0 if self.lattice == 'hex' else 1.0)
        else:
            rs = _positive('row_spacing', self.row_spacing)
        object.__setattr__(self, 'row_spacing', rs)
        object.__setattr__(self, 'rotation', float(self.rotation))
        object.__setattr__(self, 'hex_parity', int(self.hex_parity) % 2)
        if self.focal_length is not None:
            object.__setattr__(self, 'focal_length', _positive('focal_length',
                                                               self.focal_length))
        jitter = float(self.centre_jitter)
        if not (np.isfinite(jitter) and jitter >= 0):
            raise InvalidInputError(f'centre_jitter must be >= 0, got {self.centre_jitter!r}')
        object.__setattr__(self, 'centre_jitter', jitter)
        spread = float(self.focal_jitter)
        if not (np.isfinite(spread) and 0 <= spread < 0.2):
            raise InvalidInputError(
                f'focal_jitter must be in [0, 0.2) (a relative spread), got {self.focal_jitter!r}')
        object.__setattr__(self, 'focal_jitter', spread)
        if (self.type_focal_lengths is None) != (self.type_gap_offsets is None):
            raise InvalidInputError('type_focal_lengths and type_gap_offsets go together '
                                    '(both None for a single lens type)')
        if self.type_focal_lengths is not None:
            fl = tuple(_positive('type_focal_lengths', f) for f in self.type_focal_lengths)
            go = tuple(float(g) for g in self.type_gap_offsets)
            if len(fl) < 2 or len(go) != len(fl) or not all(math.isfinite(g) for g in go):
                raise InvalidInputError(
                    f'type_focal_lengths and type_gap_offsets need one finite value per type '
                    f'(>= 2 types), got {self.type_focal_lengths!r}, {self.type_gap_offsets!r}')
            object.__setattr__(self, 'type_focal_lengths', fl)
            object.__setattr__(self, 'type_gap_offsets', go)

    @property
    def n_types(self):
        """Number of micro-lens types (1 for an array of one kind)."""
        return 1 if self.type_focal_lengths is None else len(self.type_focal_lengths)

    def lens_type(self, kl):
        """Lens type (N,) int of lattice indices kl (N, 2): ((l mod 2) + k) mod T (0 if T = 1)."""
        kl = np.asarray(kl, dtype=np.int64).reshape(-1, 2)
        if self.n_types == 1:
            return np.zeros(len(kl), dtype=np.int64)
        return ((kl[:, 1] % 2) + kl[:, 0]) % self.n_types


@dataclass(frozen=True, eq=False)
class Sensor:
    """
    The image sensor, a gap b behind the MLA.

    width, height in pixels; pixel_pitch (m); bayer None or one of BAYER_PATTERNS (the mosaic
    multiplies the scene by channel_gains (r, g, b)); noise: Gaussian sigma as a fraction of
    full scale added to raw frames; bit_depth 8 | 16 of the written frames; upright: raw read
    out turned by 180 degrees (see the module docstring); natural_vignetting: cos^4 falloff of
    the chief ray's angle of incidence on the sensor (through the micro-lens centre);
    response: a :class:`~lf_mpc_calib.simulation.sensor_response.SensorResponse` (shot and
    read noise, PRNU, black level, hot pixels, dust: the presets' default) or None (an ideal
    sensor: the irradiance itself).
    """

    width: int
    height: int
    pixel_pitch: float
    bayer: str = None
    noise: float = 0.0
    bit_depth: int = 8
    upright: bool = False
    natural_vignetting: bool = True
    channel_gains: tuple = (0.8, 1.0, 0.7)
    response: object = None

    def __post_init__(self):
        for name in ('width', 'height'):
            v = getattr(self, name)
            if int(v) != v or int(v) < 8:
                raise InvalidInputError(f'{name} must be an integer >= 8 pixels, got {v!r}')
            object.__setattr__(self, name, int(v))
        object.__setattr__(self, 'pixel_pitch', _positive('pixel_pitch', self.pixel_pitch))
        if self.bayer is not None and self.bayer not in BAYER_PATTERNS:
            raise InvalidInputError(
                f'bayer must be None or one of {BAYER_PATTERNS}, got {self.bayer!r}')
        noise = float(self.noise)
        if not (np.isfinite(noise) and noise >= 0):
            raise InvalidInputError(f'noise must be a sigma >= 0 (fraction of full scale), '
                                    f'got {self.noise!r}')
        object.__setattr__(self, 'noise', noise)
        if self.bit_depth not in (8, 16):
            raise InvalidInputError(f'bit_depth must be 8 or 16, got {self.bit_depth!r}')
        gains = tuple(float(g) for g in self.channel_gains)
        if len(gains) != 3 or not all(g > 0 for g in gains):
            raise InvalidInputError(
                f'channel_gains must be 3 positive numbers (r, g, b), got {self.channel_gains!r}')
        object.__setattr__(self, 'channel_gains', gains)
        from lf_mpc_calib.simulation.sensor_response import SensorResponse
        if isinstance(self.response, dict):
            object.__setattr__(self, 'response', SensorResponse.from_dict(self.response))
        if self.response is not None and not isinstance(self.response, SensorResponse):
            raise InvalidInputError(f'response must be a SensorResponse or None, got '
                                    f'{type(self.response).__name__}')

    @property
    def size(self):
        """(width, height) in pixels."""
        return (self.width, self.height)

    @property
    def centre(self):
        """(2,) raw pixel on the optical axis, ((W - 1)/2, (H - 1)/2)."""
        return np.array([(self.width - 1) / 2.0, (self.height - 1) / 2.0])


@dataclass(frozen=True, eq=False)
class Checkerboard(BoardGeometry):
    """
    A checkerboard target on a uniform background (the scene of the renderer).

    :class:`lf_mpc_calib.camera.board.Checkerboard` (cols x rows inner corners ``square`` metres
    apart, its board frame and colours: origin at the first inner corner, x along columns, y
    along rows, z into the board; square (a, b), a = 0..cols, b = 0..rows, covers X in
    [(a-1) sq, a sq] and has colour ``first_square`` when a + b is even) with what rendering
    adds: a light border of width ``margin`` (m; None: one square) around the squares, outside
    it the scene has level ``background``; dark, light: reflectances of the black and white
    squares.
    """

    margin: float = None
    dark: float = 0.08
    light: float = 0.85
    background: float = 0.35

    def __post_init__(self):
        super().__post_init__()
        margin = self.square if self.margin is None else float(self.margin)
        if not (np.isfinite(margin) and margin >= 0):
            raise InvalidInputError(f'margin must be >= 0 metres, got {self.margin!r}')
        object.__setattr__(self, 'margin', margin)
        for name in ('dark', 'light', 'background'):
            v = float(getattr(self, name))
            if not 0.0 <= v <= 1.0:
                raise InvalidInputError(f'{name} must be a level in [0, 1], got {v}')
            object.__setattr__(self, name, v)

    def extent(self):
        """Board-frame rectangle (x_min, y_min, x_max, y_max) of the board with its margin."""
        m = self.square + self.margin
        return (-m, -m, (self.cols - 1) * self.square + m, (self.rows - 1) * self.square + m)

    def outline(self):
        """The four outer corners (4, 3) of the board with its margin (board frame)."""
        x0, y0, x1, y1 = self.extent()
        return np.array([[x0, y0, 0.0], [x1, y0, 0.0], [x1, y1, 0.0], [x0, y1, 0.0]])

    def shade(self, x, y):
        """Board-frame coordinates (N,) (N,) metres -> (N,) reflectance."""
        x, y = np.asarray(x), np.asarray(y)
        level = np.result_type(x, y, np.float32).type    # float32 coordinates: float32 out
        inv = 1.0 / self.square
        a = np.floor(x * inv)             # square index - 1 (floats: no integer casts)
        b = np.floor(y * inv)
        first = self.dark if self.first_square == 'black' else self.light
        other = self.light if self.first_square == 'black' else self.dark
        s = a + b                         # whole numbers: even when half of it is whole
        out = np.where(np.floor(s * 0.5) * 2.0 == s, level(first), level(other))
        in_squares = (a >= -1.0) & (a < self.cols) & (b >= -1.0) & (b < self.rows)
        x0, y0, x1, y1 = self.extent()
        on_board = (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
        return np.where(in_squares, out,
                        np.where(on_board, level(self.light), level(self.background)))

    def to_dict(self):
        """Plain mapping for the dataset manifest."""
        return {'cols': self.cols, 'rows': self.rows, 'square_m': self.square,
                'first_square': self.first_square, 'margin_m': self.margin,
                'dark': self.dark, 'light': self.light, 'background': self.background}

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict` (``square`` accepted for ``square_m``); a mapping with
        ``board_type: charuco`` gives a :class:`CharucoBoard`."""
        if cls is Checkerboard and board_type_of(d) == 'charuco':
            return CharucoBoard.from_dict(d)
        for key in ('cols', 'rows'):
            if key not in d:
                raise InvalidInputError(f'board lacks key {key!r}; expected cols, rows, square_m')
        square = d.get('square_m', d.get('square'))
        if square is None:
            raise InvalidInputError("board lacks key 'square_m' (metres)")
        return cls(d['cols'], d['rows'], square, d.get('first_square', 'black'),
                   d.get('margin_m'), d.get('dark', 0.08), d.get('light', 0.85),
                   d.get('background', 0.35))


TEXTURE_SQUARE_PX = 96
"""Texture pixels per square of a rendered ChArUco board (squares exactly whole pixels)."""
TEXTURE_MAX_PX = 8192
"""Longest side of a ChArUco texture (boards with many squares get fewer pixels per square)."""


@dataclass(frozen=True, eq=False)
class CharucoBoard(Checkerboard, CharucoGeometry):
    """
    A ChArUco target for the renderer: :class:`lf_mpc_calib.camera.board.CharucoBoard` (ids,
    dictionary, marker, layout) with :class:`Checkerboard`'s margin and levels.

    Its squares and markers are OpenCV's ``CharucoBoard.generateImage`` texture (a whole number
    of texture pixels per square, so every square edge and inner corner is exact), sampled
    nearest-pixel at each ray's board point; the margin and background as the checkerboard's.
    """

    def __post_init__(self):
        super().__post_init__()
        spx = int(max(8, min(TEXTURE_SQUARE_PX,
                             TEXTURE_MAX_PX // (max(self.cols, self.rows) + 1))))
        size = ((self.cols + 1) * spx, (self.rows + 1) * spx)
        texture = self.cv_board().generateImage(size, marginSize=0, borderBits=1)
        if texture.shape != (size[1], size[0]):
            raise InvalidInputError(f'OpenCV drew a ChArUco texture of {texture.shape[::-1]} '
                                    f'px, expected {size}')
        object.__setattr__(self, '_texture', texture > 127)
        object.__setattr__(self, '_texture_px', spx)

    def shade(self, x, y):
        """Board-frame coordinates (N,) (N,) metres -> (N,) reflectance."""
        x, y = np.asarray(x), np.asarray(y)
        level = np.result_type(x, y, np.float32).type
        scale = self._texture_px / self.square
        h, w = self._texture.shape
        tx = np.floor((x + self.square) * scale)
        ty = np.floor((y + self.square) * scale)
        in_squares = (tx >= 0) & (tx < w) & (ty >= 0) & (ty < h)
        light = self._texture[np.where(in_squares, ty, 0).astype(np.intp),
                              np.where(in_squares, tx, 0).astype(np.intp)]
        out = np.where(light, level(self.light), level(self.dark))
        x0, y0, x1, y1 = self.extent()
        on_board = (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
        return np.where(in_squares, out,
                        np.where(on_board, level(self.light), level(self.background)))

    def to_dict(self):
        """Plain mapping for the dataset manifest: the checkerboard's and the ChArUco keys."""
        return {**Checkerboard.to_dict(self), **self._charuco_keys()}

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`."""
        from lf_mpc_calib.camera.board import charuco_keys
        base = Checkerboard.from_dict({**d, 'board_type': 'checkerboard'})
        keys = {k: getattr(base, k) for k in ('margin', 'dark', 'light', 'background')}
        return cls(base.cols, base.rows, base.square, base.first_square, **keys,
                   **charuco_keys(d))


@dataclass(frozen=True, eq=False)
class Camera:
    """
    A plenoptic camera: main lens, MLA at D behind it, sensor ``gap`` (b, m) behind the MLA.

    camera_type 'conventional' (plenoptic 1.0: views decoded by the lenslet grid) or 'focused'
    (plenoptic 2.0: (i, j) = micro-image centre); name: the preset name or 'custom'.
    ``scene_distance`` (m): typical board distance for default poses and boards.
    """

    main_lens: MainLens
    mla: MicroLensArray
    sensor: Sensor
    gap: float
    camera_type: str = 'conventional'
    name: str = 'custom'
    scene_distance: float = None
    scale: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, 'gap', _positive('gap', self.gap))
        if self.camera_type not in CAMERA_TYPES:
            raise InvalidInputError(
                f'camera_type must be one of {CAMERA_TYPES}, got {self.camera_type!r}')
        for name, cls in (('main_lens', MainLens), ('mla', MicroLensArray), ('sensor', Sensor)):
            if not isinstance(getattr(self, name), cls):
                raise InvalidInputError(
                    f'{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}')
        if self.scene_distance is None:
            z = self.main_lens.focus_distance
            object.__setattr__(self, 'scene_distance', z if z > 0 and math.isfinite(z) else 0.5)

    # ---- derived quantities -----------------------------------------------------------------
    @property
    def D(self):
        """Main lens to MLA distance (m)."""
        return self.main_lens.image_distance

    @property
    def sigma(self):
        """+1 for the physical (inverted) raw image, -1 for an upright read-out."""
        return -1.0 if self.sensor.upright else 1.0

    @property
    def micro_image_pitch(self):
        """Pitch of the micro-images on the sensor in pixels, p (D + b) / (D p_x)."""
        return self.mla.pitch * self._magnification()

    @property
    def micro_image_radius(self):
        """Radius (pixels) of the image of the aperture disk in each micro-image."""
        return self.main_lens.aperture_radius * self.gap / (self.D * self.sensor.pixel_pitch)

    def _magnification(self):
        """Pixels per metre of MLA plane for micro-image centres: (D + b) / (D p_x)."""
        return (self.D + self.gap) / (self.D * self.sensor.pixel_pitch)

    def image_lattice(self):
        """
        The infinite micro-image lattice in raw pixels.

        Returns (q0 (2,), row_vector (2,), column_vector (2,), hex_parity): micro-image (k, l)
        is centred at q0 + (k + shift(l)) row_vector + l column_vector (LensletGrid's rule).
        """
        s = self._magnification()
        th = self.mla.rotation
        r = self.mla.pitch * s * np.array([math.cos(th), math.sin(th)])
        c = self.mla.row_spacing * s * np.array([-math.sin(th), math.cos(th)])
        q0 = self.sigma * s * np.asarray(self.mla.offset) + self.sensor.centre
        return q0, r, c, self.mla.hex_parity

    def pixel_to_sensor(self, q):
        """Raw pixels (N, 2) -> sensor positions (N, 2) metres (physical frame)."""
        return self.sigma * self.sensor.pixel_pitch * (np.asarray(q, float) - self.sensor.centre)

    def sensor_to_pixel(self, xy):
        """Sensor positions (N, 2) metres -> raw pixels (N, 2)."""
        return np.asarray(xy, float) / (self.sigma * self.sensor.pixel_pitch) \
            + self.sensor.centre

    def micro_image_of(self, q):
        """
        Assign raw points to micro-images: the nearest micro-image centre.

        q (N, 2) raw pixels -> (kl (N, 2) int64 lattice indices of image_lattice, centres (N, 2)).
        """
        q = np.asarray(q, dtype=float).reshape(-1, 2)
        q0, r, c, parity = self.image_lattice()
        inv = np.linalg.inv(np.column_stack([r, c]))
        w = (q - q0) @ inv.T
        if self.mla.lattice == 'rect':
            k = np.rint(w[:, 0])
            l_ = np.rint(w[:, 1])
            shift = 0.0
        else:
            best = None
            rr, rc, cc = float(r @ r), float(r @ c), float(c @ c)
            w0, w1 = w[:, 0], w[:, 1]
            for dl in (0.0, 1.0):
                lc = np.floor(w1) + dl
                sh = 0.5 * ((lc.astype(np.int64) + parity) % 2)
                kc = np.rint(w0 - sh)
                a, b = w0 - kc - sh, w1 - lc          # lattice coordinates from that centre
                d2 = (a * a) * rr + (2.0 * rc) * (a * b) + (b * b) * cc
                if best is None:
                    best, k, l_, shift = d2, kc, lc, sh
                else:
                    take = d2 < best
                    k = np.where(take, kc, k)
                    l_ = np.where(take, lc, l_)
                    shift = np.where(take, sh, shift)
        kl = np.column_stack([k, l_]).astype(np.int64)
        # the centres from the candidates' own shifted k, not from kl again (lattice_centres)
        return kl, _lattice_points(q0, r, c, k + shift, l_)

    def lattice_centres(self, kl):
        """Micro-image centres (N, 2) raw pixels of lattice indices kl (N, 2)."""
        kl = np.asarray(kl).reshape(-1, 2)
        q0, r, c, parity = self.image_lattice()
        k = kl[:, 0].astype(float)
        if self.mla.lattice == 'hex':
            k = k + 0.5 * ((kl[:, 1].astype(np.int64) + parity) % 2)
        return _lattice_points(q0, r, c, k, kl[:, 1].astype(float))

    def lens_centres(self, kl, *, centres=None, normals=None):
        """Pinhole centres (N, 2) in the MLA plane (m) of lattice indices kl (N, 2), jittered;
        ``centres`` (N, 2) their lattice_centres and ``normals`` (N, 3) their lens_normals
        where the caller has them (the renderer, for every pixel)."""
        kl = np.asarray(kl).reshape(-1, 2)
        if centres is None:
            centres = self.lattice_centres(kl)
        ideal = self.pixel_to_sensor(centres) * (self.D / (self.D + self.gap))
        if self.mla.centre_jitter == 0.0:
            return ideal
        if normals is None:
            normals = self.lens_normals(kl)
        return ideal + self.mla.centre_jitter * normals[:, :2]

    def lens_normals(self, kl):
        """Each lens's fixed standard normals (N, 3) of lattice indices kl (N, 2): its
        centre's (2, seeded by jitter_seed) and its focal length's (seed + 1); a table over
        the sensor's lenses, looked up (the renderer asks for every pixel's lens)."""
        kl = np.asarray(kl, dtype=np.int64).reshape(-1, 2)
        corners = [(0, 0), (self.sensor.width, 0), (0, self.sensor.height),
                   (self.sensor.width, self.sensor.height)]
        corner_kl = self.micro_image_of(np.asarray(corners, dtype=float))[0]
        lo, hi = corner_kl.min(axis=0) - 3, corner_kl.max(axis=0) + 3
        table = _normals_table(self.mla.jitter_seed, int(lo[0]), int(lo[1]),
                               int(hi[0] - lo[0]) + 1, int(hi[1] - lo[1]) + 1)
        rel = kl - lo
        nk, nl = table.shape[:2]
        inside = np.all((rel >= 0) & (rel < np.array([nk, nl])), axis=1)
        if inside.all():
            return table.reshape(-1, 3)[rel[:, 0] * nl + rel[:, 1]]
        seed = self.mla.jitter_seed
        return np.column_stack([_hash_normal(kl, seed), _hash_normal(kl, seed + 1)[:, 0]])

    def lens_gaps(self, kl):
        """Image-side gap (N,) m of the lenses kl (N, 2): gap + the type's offset."""
        kl = np.asarray(kl).reshape(-1, 2)
        if self.mla.n_types == 1:
            return np.full(len(kl), self.gap)
        return self.gap + np.asarray(self.mla.type_gap_offsets)[self.mla.lens_type(kl)]

    def lens_focal_lengths(self, kl, *, normals=None):
        """Micro-lens focal length (N,) m (None for pinhole arrays) of the lenses kl (N, 2):
        the array's (or the lens type's), each off it by its fixed ``focal_jitter`` share
        (``normals`` (N, 3): their lens_normals where the caller has them)."""
        kl = np.asarray(kl).reshape(-1, 2)
        mla = self.mla
        if mla.n_types == 1:
            if mla.focal_length is None:
                return None
            f = np.full(len(kl), mla.focal_length)
        else:
            f = np.asarray(mla.type_focal_lengths)[mla.lens_type(kl)]
        if mla.focal_jitter == 0.0:
            return f
        if normals is None:
            normals = self.lens_normals(kl)
        return f * (1.0 + mla.focal_jitter * normals[:, 2])

    def micro_image_centres(self, kl):
        """
        True micro-image centres (N, 2) raw pixels of lenses kl (N, 2): where the ray through
        the main-lens centre and the lens meets the sensor, L (D + b_T) / D. Equal to
        :meth:`lattice_centres` for one lens type; a multi-focus type's differ by
        L (b_T - b) / D (what a white image shows).
        """
        kl = np.asarray(kl).reshape(-1, 2)
        lens = self.lens_centres(kl)
        return self.sensor_to_pixel(lens * ((self.D + self.lens_gaps(kl)) / self.D)[:, None])

    # ---- tracing -------------------------------------------------------------------------------
    def trace(self, points, *, lens_points=None, kl=None):
        """
        Trace rays from raw points through their micro-lens and the main lens.

        points (N, 2) raw pixels (sub-pixel positions); lens_points (N, 2) metres: offsets e
        from the micro-lens centre within its aperture (None: the chief ray through the centre);
        kl (N, 2) lattice indices of the micro-lens (None: the micro-image containing each
        point). Returns (origins (N, 2): where the ray crosses the main-lens plane z = 0,
        slopes (N, 2): (dx/dz, dy/dz) after the main lens, weight (N,): 1 inside both stops
        times the cos^4 falloff of the chief ray through the micro-lens centre, 0 when
        blocked), all in the physical frame.
        """
        points = np.asarray(points, dtype=float).reshape(-1, 2)
        if kl is None:
            kl, _ = self.micro_image_of(points)
        lens = self.lens_centres(kl)
        sensor_xy = self.pixel_to_sensor(points)
        return self._trace(sensor_xy, lens, lens_points, kl)

    def _trace(self, sensor_xy, lens, lens_points=None, kl=None):
        D = self.D
        b = self.gap if kl is None else self.lens_gaps(kl)[:, None]
        f_m = None if kl is None else self.lens_focal_lengths(kl)
        p_mla = lens if lens_points is None else lens + lens_points
        incident = (p_mla - sensor_xy) / b
        slope = incident
        if lens_points is not None and f_m is not None:
            slope = incident - lens_points / f_m[:, None]
        origin = p_mla + slope * D
        x0 = p_mla / (-D)
        d1, d2 = self.main_lens.distortion
        if d1 != 0.0 or d2 != 0.0:
            rr = np.einsum('ij,ij->i', x0, x0)
            x0 = x0 * (1.0 + d1 * rr + d2 * rr * rr)[:, None]
        out = x0 - origin * self.main_lens.inverse_focus
        ra = self.main_lens.aperture_radius
        weight = (np.einsum('ij,ij->i', origin, origin) <= ra * ra).astype(float)
        if math.isfinite(self.main_lens.barrel_radius):
            at = origin + self.main_lens.barrel_distance * out
            rb = self.main_lens.barrel_radius
            weight = weight * (np.einsum('ij,ij->i', at, at) <= rb * rb)
        if self.sensor.natural_vignetting:   # cos^4 of the chief ray, the same for the bundle
            chief = (lens - sensor_xy) / b
            weight = weight / (1.0 + np.einsum('ij,ij->i', chief, chief)) ** 2
        return origin, out, weight

    # ---- ground truth --------------------------------------------------------------------------
    def lenslet_grid(self):
        """
        The ground-truth LensletGrid of this camera's micro-image lattice, numbered by the
        rule an estimated grid follows (:func:`numbered_grid`, docs/file-formats.md): the
        same lens has the same (k, l) in the truth and in a grid estimated from a white.
        """
        q0, r, c, parity = self.image_lattice()
        lens = q0 + (0.5 * (parity % 2) * r if self.mla.lattice == 'hex' else 0.0)
        return numbered_grid(self.mla.lattice, float(np.linalg.norm(r)),
                             float(np.linalg.norm(c)), self.mla.rotation, lens,
                             self.sensor.size)

    def ground_truth_model(self, grid=None, weights=None, view=False, centres='true'):
        """
        The exact MPC model of this camera's decoded rays (module docstring).

        grid: the LensletGrid the conventional decoding uses (default :meth:`lenslet_grid`);
        only its origin enters (u_0, v_0); its lattice must be this camera's. weights (T,):
        ray fractions per lens type of a multi-focus camera (the gauge of its per-type terms,
        :meth:`ground_truth_lens_types`; None: equal). view: the truth of the '-view' type
        terms (k_i = -sigma p_x Z_f sum_T w_T / (D + b_T), the ray-weighted gauge of the
        types' view-plane scales; its frame is :meth:`mpc_frame`'s moved by
        :meth:`view_frame_shift`). centres='lattice': the truth of 'affine-slope' for rows
        whose (i, j) are the regular lattice's centres (:meth:`lattice_centres`, the raw
        pipeline's grid) instead of each micro-image's own (its frame: :meth:`view_frame_shift`
        with the same centres).
        """
        lens, sensor = self.main_lens, self.sensor
        sg, px, D, b = self.sigma, sensor.pixel_pitch, self.D, self.gap
        inv_z = lens.inverse_focus
        c = sensor.centre
        if self.camera_type == 'conventional':
            if grid is None:
                grid = self.lenslet_grid()
            th = self.mla.rotation
            if abs(math.remainder(float(grid.rotation) - th, 2 * math.pi)) > 0.05:
                raise InvalidInputError(
                    f'the grid numbers this lattice along rows at '
                    f'{math.degrees(grid.rotation):.2f} deg, the array along '
                    f'{math.degrees(th):.2f} deg: its truth would be in another frame (turn '
                    f'the camera with simulation.lattice_turn.turn_lattice, which keeps the '
                    f'rotation within the range estimated grids use)')
            o = rot_z(-th)[:2, :2] @ (np.asarray(grid.origin, float) - c)
            u0, v0 = -sg * px * o / (D + b)
            k1, k2 = lens.distortion
            return MPCModel(k_i=-sg * px * D / b, k_j=-sg * px * D / b,
                            k_u=-sg * self.mla.pitch / D, k_v=-sg * self.mla.row_spacing / D,
                            u_0=u0, v_0=v0, k_1=k1, k_2=k2, k_3=-inv_z, k_4=-inv_z)
        if lens.distortion != (0.0, 0.0):
            raise InvalidInputError(
                'a main-lens distortion of a focused camera is not representable by the MPC '
                f'model (Eq. 18); got distortion {lens.distortion}')
        if inv_z == 0.0:
            raise InvalidInputError('a focused camera needs a finite focus_distance (the plane '
                                    'conjugate to the MLA is its view plane), got inf')
        z_f = 1.0 / inv_z
        k = px * self._mean_inverse_depth()
        if centres == 'lattice' and self.mla.n_types > 1:
            k_ut, _ = self._type_scales_offsets()
            w = self._type_weights(weights)
            k_u = w @ k_ut
            k_i = -sg * px * z_f / (D + b)
            kappa, off = self._lattice_slopes(w)
            k_34 = inv_z + k_u * (w @ kappa) / k_i
            u_0 = sg * px * c / (D + b) + k_u * (w @ off)
            return MPCModel(k_i=k_i, k_j=k_i, k_u=k_u, k_v=k_u, u_0=u_0[0], v_0=u_0[1],
                            k_3=k_34, k_4=k_34)
        if self.mla.n_types == 1:
            k_u, u_0 = sg * px * D / (b * z_f), sg * k * c
        else:
            k_ut, u_0t = self._type_scales_offsets()
            w = self._type_weights(weights)
            k_u, u_0 = w @ k_ut, w @ u_0t
            if view:
                k = px * (w @ self._type_inverse_depths())
                u_0 = sg * k * c
        return MPCModel(k_i=-sg * k * z_f, k_j=-sg * k * z_f, k_u=k_u, k_v=k_u,
                        u_0=u_0[0], v_0=u_0[1], k_3=inv_z, k_4=inv_z)

    def ground_truth_lens_types(self, weights=None, view=False, centres='true'):
        """
        The per-lens-type terms of a multi-focus focused camera (None for one lens type).

        Type T decodes with k_u^T = sigma p_x D / (b_T Z_f) and u_0^T = sigma p_x c / (D + b_T)
        (the single-type truth with b -> b_T); in the zero-mean gauge of
        :mod:`lf_mpc_calib.calibration.type_terms` with ray fractions ``weights`` (T,) (None:
        equal) that is 1 + a_T = k_u^T / k_u and d_T = (u_0^T - u_0) / k_u with k_u, u_0 the
        weighted means (those of :meth:`ground_truth_model` with the same weights). Not in the
        model: each type's view plane position k_i^T ~ 1 / (D + b_T) differs from the common
        k_i by |b_T - b| / (D + b) (about 1e-4 relative; the tests bound its effect).

        view=True: the exact truth of 'affine-view' (with :meth:`ground_truth_model` (view=True)).
        A ray through micro-image centre m of type T crosses the plane z = Z_f at
        -sigma p_x Z_f (m - c) / (D + b_T) with slope -sigma p_x (m - c) / (D + b_T) +
        k_u^T (u, v): type T's k_i^T = -sigma p_x Z_f / (D + b_T) scales (i, j) about the optical
        axis c, so 1 + g_T = k_i^T / k_i (k_i their weighted mean), the centre is c, the same
        1 + a_T, and the offsets d_T = e_T = 0 exactly (u_0 = sigma p_x c / (D + b_T) of the
        approximate truth is that scale folded into the offsets).

        centres='lattice': rows at the lattice's centres m = L (D + b) / D (b the array's
        gap) see type T's true centre (b_T - b) / (D + b) (m - c) away, so u = u_true +
        beta_T (m - c), beta_T = (b_T - b) / (D + b), and exactly ('affine-slope'):
        kappa_T = -(1 + a_T) beta_T, d_T = (1 + a_T) beta_T c, in the zero-mean gauge (the
        means go into k_3, k_4 and u_0, v_0 of :meth:`ground_truth_model`).
        """
        from lf_mpc_calib.calibration.type_terms import LensTypeTerms
        if self.camera_type != 'focused' or self.mla.n_types == 1:
            return None
        k_ut, u_0t = self._type_scales_offsets()
        w = self._type_weights(weights)
        k_u, u_0 = w @ k_ut, w @ u_0t
        if centres == 'lattice':
            kappa, off = self._lattice_slopes(w)
            return LensTypeTerms('affine-slope', k_ut / k_u - 1.0, off - w @ off, w,
                                 slope=kappa - w @ kappa)
        if not view:
            return LensTypeTerms('affine', k_ut / k_u - 1.0, (u_0t - u_0) / k_u, w)
        inv = self._type_inverse_depths()
        return LensTypeTerms('affine-view', k_ut / k_u - 1.0, np.zeros((len(w), 2)), w,
                             view_scale=inv / (w @ inv) - 1.0, view_centre_px=self.sensor.centre)

    def _lattice_slopes(self, w):
        """(kappa^0 (T,), (d^0, e^0) (T, 2)) of lattice-centre rows before the gauge."""
        k_ut, _ = self._type_scales_offsets()
        beta = np.asarray(self.mla.type_gap_offsets) / (self.D + self.gap)
        one_a = k_ut / (w @ k_ut)
        return -one_a * beta, (one_a * beta)[:, None] * self.sensor.centre[None, :]

    def view_frame_shift(self, weights=None, centres='true'):
        """
        (3,) m: a point's MPC-frame coordinates (:meth:`pose_from_physical`) plus this are its
        coordinates in the frame of the view=True truth (its k_i has the rays' type weights),
        or with centres='lattice' in that of the lattice-centre truth.
        """
        if self.mla.n_types == 1:
            return np.zeros(3)
        w = self._type_weights(weights)
        z_f = 1.0 / self.main_lens.inverse_focus
        inv = (1.0 / (self.D + self.gap) if centres == 'lattice'
               else w @ self._type_inverse_depths())
        d = self.sigma * self.sensor.pixel_pitch * z_f * (self._mean_inverse_depth() - inv)
        return np.array([d * self.sensor.centre[0], d * self.sensor.centre[1], 0.0])

    def _type_inverse_depths(self):
        """1 / (D + b_T) (T,) of the lens types."""
        return 1.0 / (self.D + self.gap + np.asarray(self.mla.type_gap_offsets))

    def _type_weights(self, weights):
        t = self.mla.n_types
        w = np.full(t, 1.0 / t) if weights is None else np.asarray(weights, float).reshape(-1)
        if w.shape != (t,) or not np.all(w >= 0) or not w.sum() > 0:
            raise InvalidInputError(f'weights must be {t} numbers >= 0, got {weights!r}')
        return w / w.sum()

    def _type_scales_offsets(self):
        """(k_u^T (T,), u_0^T (T, 2)) of each lens type (ground_truth_lens_types)."""
        sg, px, D = self.sigma, self.sensor.pixel_pitch, self.D
        b_t = self.gap + np.asarray(self.mla.type_gap_offsets)
        k_ut = sg * px * D * self.main_lens.inverse_focus / b_t
        return k_ut, sg * px * self.sensor.centre[None, :] / (D + b_t)[:, None]

    def _mean_inverse_depth(self):
        """1 / (D + b), averaged over the lens types (equal weights): the common k_i / Z_f."""
        if self.mla.n_types == 1:
            return 1.0 / (self.D + self.gap)
        return float(np.mean(1.0 / (self.D + self.gap + np.asarray(self.mla.type_gap_offsets))))

    def mpc_frame(self):
        """
        The MPC (optical) frame in the physical frame: (R (3, 3), t (3,)), X_phys = R X_mpc + t.

        Conventional: a rotation about z by the lattice rotation; focused: a translation to the
        view plane z = Z_f (module docstring).
        """
        if self.camera_type == 'conventional':
            return rot_z(self.mla.rotation), np.zeros(3)
        z_f = 1.0 / self.main_lens.inverse_focus
        k = self.sigma * self.sensor.pixel_pitch * z_f * self._mean_inverse_depth()
        c = self.sensor.centre
        return np.eye(3), np.array([k * c[0], k * c[1], z_f])

    def pose_to_physical(self, rvec, tvec):
        """A board pose in the MPC frame -> (R (3, 3), t (3,)) board -> physical frame."""
        rm, tm = self.mpc_frame()
        rb = Rotation.from_rotvec(np.asarray(rvec, float).reshape(3)).as_matrix()
        return rm @ rb, rm @ np.asarray(tvec, float).reshape(3) + tm

    def pose_from_physical(self, rmat, tvec):
        """A board -> physical pose (R (3, 3), t (3,)) -> MPC-frame (rvec (3,), tvec (3,))."""
        rm, tm = self.mpc_frame()
        r = rm.T @ np.asarray(rmat, float)
        t = rm.T @ (np.asarray(tvec, float).reshape(3) - tm)
        return Rotation.from_matrix(r).as_rotvec(), t

    def project_chief(self, points):
        """
        Physical-frame points (N, 3) -> raw pixels (N, 2) of the micro-lens that sees them.

        The chief ray through the main-lens centre meets the MLA at -D X / Z; the returned pixel
        is the micro-image centre of a lens there (used to keep boards in view).
        """
        p = np.asarray(points, float).reshape(-1, 3)
        mla = -self.D * p[:, :2] / p[:, 2:3]
        return self.sensor_to_pixel(mla * (self.D + self.gap) / self.D)

    def field_of_view(self, distance):
        """(width, height) in metres of the scene plane at ``distance`` seen by the sensor."""
        w, h = self.sensor.size
        k = self.sensor.pixel_pitch * distance / (self.D + self.gap)
        return w * k, h * k

    def to_dict(self):
        """Plain mapping of every optical parameter (dataset manifests)."""
        ml, mla, s = self.main_lens, self.mla, self.sensor
        return {
            'name': self.name, 'camera_type': self.camera_type, 'scale': self.scale,
            'gap_m': self.gap, 'scene_distance_m': self.scene_distance,
            'main_lens': {'focal_length_m': ml.focal_length, 'f_number': ml.f_number,
                          'focus_distance_m': ml.focus_distance,
                          'distortion': list(ml.distortion),
                          'barrel_distance_m': ml.barrel_distance,
                          'barrel_radius_m': None if math.isinf(ml.barrel_radius)
                          else ml.barrel_radius},
            'mla': {'pitch_m': mla.pitch, 'lattice': mla.lattice, 'rotation': mla.rotation,
                    'offset_m': list(mla.offset), 'row_spacing_m': mla.row_spacing,
                    'hex_parity': mla.hex_parity, 'focal_length_m': mla.focal_length,
                    'centre_jitter_m': mla.centre_jitter, 'jitter_seed': mla.jitter_seed,
                    'focal_jitter': mla.focal_jitter,
                    'type_focal_lengths_m': None if mla.type_focal_lengths is None
                    else list(mla.type_focal_lengths),
                    'type_gap_offsets_m': None if mla.type_gap_offsets is None
                    else list(mla.type_gap_offsets)},
            'sensor': {'width': s.width, 'height': s.height, 'pixel_pitch_m': s.pixel_pitch,
                       'bayer': s.bayer, 'noise': s.noise, 'bit_depth': s.bit_depth,
                       'upright': s.upright, 'natural_vignetting': s.natural_vignetting,
                       'channel_gains': list(s.channel_gains),
                       'response': None if s.response is None else s.response.to_dict()},
        }

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`."""
        try:
            ml, mla, s = d['main_lens'], d['mla'], d['sensor']
            br = ml.get('barrel_radius_m')
            return cls(
                MainLens(ml['focal_length_m'], ml['f_number'], ml['focus_distance_m'],
                         tuple(ml.get('distortion', (0.0, 0.0))),
                         ml.get('barrel_distance_m', 0.0), math.inf if br is None else br),
                MicroLensArray(mla['pitch_m'], mla['lattice'], mla.get('rotation', 0.0),
                               tuple(mla.get('offset_m', (0.0, 0.0))), mla.get('row_spacing_m'),
                               mla.get('hex_parity', 0), mla.get('focal_length_m'),
                               mla.get('centre_jitter_m', 0.0), mla.get('jitter_seed', 0),
                               _tuple_or_none(mla.get('type_focal_lengths_m')),
                               _tuple_or_none(mla.get('type_gap_offsets_m')),
                               mla.get('focal_jitter', 0.0)),
                Sensor(s['width'], s['height'], s['pixel_pitch_m'], s.get('bayer'),
                       s.get('noise', 0.0), s.get('bit_depth', 8), s.get('upright', False),
                       s.get('natural_vignetting', True),
                       tuple(s.get('channel_gains', (0.8, 1.0, 0.7))), s.get('response')),
                d['gap_m'], d.get('camera_type', 'conventional'), d.get('name', 'custom'),
                d.get('scene_distance_m'), d.get('scale', 1.0))
        except KeyError as exc:
            raise InvalidInputError(f'camera description lacks key {exc}') from None


def _tuple_or_none(values):
    return None if values is None else tuple(values)


@lru_cache(maxsize=8)
def _normals_table(seed, k0, l0, nk, nl):
    """Camera.lens_normals of the lenses k0..k0+nk-1, l0..l0+nl-1: (nk, nl, 3), read-only."""
    k, l_ = np.meshgrid(np.arange(k0, k0 + nk), np.arange(l0, l0 + nl), indexing='ij')
    kl = np.column_stack([k.ravel(), l_.ravel()])
    table = np.column_stack([_hash_normal(kl, seed), _hash_normal(kl, seed + 1)[:, 0]])
    table = table.reshape(nk, nl, 3)
    table.setflags(write=False)
    return table


def _hash_normal(kl, seed):
    """Deterministic standard-normal pairs (N, 2) from integer lattice indices (N, 2)."""
    kl = np.asarray(kl, dtype=np.int64).reshape(-1, 2)
    h = (kl[:, 0] * 73856093) ^ (kl[:, 1] * 19349663) ^ (int(seed) * 83492791)
    h = h.astype(np.uint64)
    out = []
    for salt in (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)):
        x = (h ^ salt) * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(29)
        out.append((x >> np.uint64(11)).astype(np.float64) / float(1 << 53))
    u1 = np.clip(out[0], 1e-12, 1.0)
    rad = np.sqrt(-2.0 * np.log(u1))
    return np.column_stack([rad * np.cos(2 * np.pi * out[1]), rad * np.sin(2 * np.pi * out[1])])


# ---- presets ----------------------------------------------------------------------------------
def _realistic_sensor():
    from lf_mpc_calib.simulation.sensor_response import SensorResponse
    return SensorResponse()


REALISTIC_SENSOR = _realistic_sensor()
"""The realistic sensor response (documented defaults): every preset's (and
:func:`conventional_camera`'s) sensor reads out with it; ``sensor__response=None`` (``--ideal``
of simulate, plan and demo) renders the irradiance itself."""

REALISTIC_MLA = {'centre_jitter': 0.1e-6, 'focal_jitter': 0.005}
"""Every preset's micro-lens array is made as a real one is (docs/simulation.md): each lens
0.1 um rms off its lattice point (the real guv white's micro-image centres lie on a smooth
lattice within 0.014 px of 6.5 um) and its focal length 0.5 % rms off the nominal one."""

LATTICE_LENSES = {'mla__centre_jitter': 0.0, 'mla__focal_jitter': 0.0}
"""Overrides of :func:`preset`: every lens on its lattice point with its nominal focal length
(where the ground-truth model is exact: the calibration models the array as a lattice)."""

IDEAL = {'sensor__response': None, **LATTICE_LENSES}
"""Overrides of :func:`preset` for the ideal camera (``--ideal``, ``ideal_sensor``): the
irradiance itself read out by LATTICE_LENSES."""


def _conventional(name, *, scale, width, height, pixel, lens_pitch_px, focal, focus, f_number,
                  rotation, offset_px, fill, barrel, bit_depth, lattice='hex', gap=None):
    """A plenoptic-1.0 camera whose micro-images have ``fill`` x the micro-image pitch across
    (or, given the MLA-sensor ``gap`` (m), whatever that gap makes them)."""
    w, h = max(8, int(round(width * scale))), max(8, int(round(height * scale)))
    main = MainLens(focal, f_number, focus)
    D = main.image_distance
    pitch = lens_pitch_px * pixel            # lens pitch (m) for about lens_pitch_px px
    # micro-image diameter 2 R_a b / D = fill * pitch (D + b) / D  ->  b
    ra = main.aperture_radius
    b = fill * pitch * D / (2.0 * ra - fill * pitch) if gap is None else float(gap)
    if barrel:
        zb = 0.5 * focal
        main = replace(main, barrel_distance=zb, barrel_radius=ra + 0.22 * zb)
    mla = MicroLensArray(pitch, lattice, rotation, (offset_px[0] * pixel, offset_px[1] * pixel),
                         focal_length=b, **REALISTIC_MLA)
    sensor = Sensor(w, h, pixel, bit_depth=bit_depth, response=REALISTIC_SENSOR)
    return Camera(main, mla, sensor, b, 'conventional', name, focus, scale)


CONVENTIONAL_DESIGNS = {
    'lytro': dict(width=3280, height=3280, pixel=1.4e-6, lens_pitch_px=9.9, focal=6.45e-3,
                  focus=0.4, f_number=2.0, rotation=0.0021, offset_px=(1.7, -2.3), fill=0.96,
                  barrel=True, bit_depth=8),
    'illum': dict(width=7728, height=5368, pixel=1.4e-6, lens_pitch_px=14.2, focal=12e-3,
                  focus=0.5, f_number=2.0, rotation=-0.0013, offset_px=(-3.1, 2.4), fill=0.96,
                  barrel=True, bit_depth=16),
    # a lab plenoptic 1.0 camera: 1388 x 1038 px of 6.45 um, a 300 um square micro-lens array
    # of focal length 18.6 mm (the sensor in its focal plane), main lens f = 200 mm at f/30,
    # focused at 0.33 m: micro-images 48.2 px apart (the lab camera's measured pitch), 38 px
    # across; 12 bit
    'lab-square': dict(width=1388, height=1038, pixel=6.45e-6, lens_pitch_px=300 / 6.45,
                       focal=0.2, focus=0.33, f_number=30.0, rotation=0.0017,
                       offset_px=(5.3, -11.6), fill=None, barrel=False, bit_depth=16,
                       lattice='rect', gap=18.6e-3),
}
"""The optical design of the conventional presets (arguments of :func:`conventional_camera`)."""


def conventional_camera(base='lytro', *, scale=1.0, name=None, **design):
    """
    A conventional (plenoptic 1.0) camera: a preset's design with some of it changed.

    base: 'lytro' or 'illum'; design: any key of ``CONVENTIONAL_DESIGNS[base]``, e.g.
    ``fill=1.0`` (micro-images touching), ``lens_pitch_px=8``, ``rotation=0.026`` (radians),
    ``offset_px``, ``f_number``, ``focus``. For cameras unlike the presets in tests and
    benchmarks; the ground truth still comes from the optics.
    """
    if base not in CONVENTIONAL_DESIGNS:
        raise InvalidInputError(f'unknown conventional design {base!r}; expected one of '
                                f'{sorted(CONVENTIONAL_DESIGNS)}')
    unknown = sorted(set(design) - set(CONVENTIONAL_DESIGNS[base]))
    if unknown:
        raise InvalidInputError(f'unknown design keys {unknown}; expected some of '
                                f'{sorted(CONVENTIONAL_DESIGNS[base])}')
    scale = _positive('scale', scale)
    if scale > 1.0:
        raise InvalidInputError(f'scale must be in (0, 1], got {scale}')
    return _conventional(name or f'{base}-variant', scale=scale,
                         **{**CONVENTIONAL_DESIGNS[base], **design})


def _focused(name, *, scale, galilean):
    """A plenoptic-2.0 camera: 2048 x 1536 px of 5.5 um, 125 um lenses, F = 35 mm, f/2.6-ish."""
    pixel, pitch, focal, scene = 5.5e-6, 125e-6, 35e-3, 0.45
    b = 0.36e-3
    a = 3.0 * b                             # virtual depth a / b = 3
    d_img = focal * scene / (scene - focal)  # intermediate image of the scene plane
    if galilean:
        D = d_img - a                      # MLA before the intermediate image (virtual object)
        f_m = a * b / (a - b)
    else:
        D = d_img + a                      # MLA behind the real intermediate image
        f_m = a * b / (a + b)
    z_f = focal * D / (D - focal)
    fill = 0.94
    # aperture diameter so that micro-images are fill x their pitch: 2 R_a b / D = fill p (D+b)/D
    f_number = focal / (fill * pitch * (D + b) / b)
    main = MainLens(focal, f_number, z_f)
    w, h = max(8, int(round(2048 * scale))), max(8, int(round(1536 * scale)))
    mla = MicroLensArray(pitch, 'hex', 0.003, (0.31 * pitch, -0.17 * pitch), focal_length=f_m,
                         **REALISTIC_MLA)
    sensor = Sensor(w, h, pixel, bit_depth=8, response=REALISTIC_SENSOR)
    return Camera(main, mla, sensor, b, 'focused', name, scene, scale)


def _multi_focus(name, *, scale):
    """
    A Raytrix-like multi-focus camera: the Keplerian focused preset with three interleaved lens
    types focused at virtual depths 2.2, 3 and 4.5 whose rear principal planes differ by
    +-4 um (type scales about -+1.1 %, as in real multi-focus arrays; Raytrix R12: a few %).
    """
    cam = _focused(name, scale=scale, galilean=False)
    b = cam.gap
    f_m = tuple(a * b / (a + b) for a in (2.2 * b, 3.0 * b, 4.5 * b))
    mla = replace(cam.mla, focal_length=f_m[1], type_focal_lengths=f_m,
                  type_gap_offsets=(-4e-6, 0.0, 4e-6))
    return replace(cam, mla=mla)


def preset(name, *, scale=1.0, **overrides):
    """
    A preset camera; ``scale`` < 1 crops the sensor (fewer lenses, same optics and px per lens).

    Presets: 'lytro' (3280 x 3280, 1.4 um pixels, hex, ~10 px per micro-image, F 6.45 mm f/2,
    focus 0.4 m), 'illum' (7728 x 5368, 1.4 um, hex, ~14 px per micro-image, F 12 mm f/2,
    focus 0.5 m, 16 bit), 'lab-square' (1388 x 1038, 6.45 um, square 300 um lenses of
    f 18.6 mm, F 200 mm f/30, 48.2 px per micro-image, 16 bit), 'focused-keplerian',
    'focused-galilean' (2048 x 1536, 5.5 um, 125 um
    lenses, F 35 mm, scene at 0.45 m, virtual depth 3), 'focused-multifocus' (the Keplerian one
    with three interleaved lens types, Raytrix-like: :func:`_multi_focus`). overrides: any
    field of Camera (``gap``, ``name`` ...) or ``main_lens__FIELD``, ``mla__FIELD``,
    ``sensor__FIELD`` (e.g. ``sensor__bayer='rggb'``, ``sensor__noise=0.01``,
    ``main_lens__distortion=(0.1, 0)``). The sensor reads out with :data:`REALISTIC_SENSOR`
    and the lenses are made as :data:`REALISTIC_MLA` says; ``**IDEAL`` gives the ideal camera
    (``sensor__response=None`` alone: an ideal sensor behind the real lenses).
    """
    scale = _positive('scale', scale)
    if scale > 1.0:
        raise InvalidInputError(f'scale must be in (0, 1], got {scale}')
    if name in CONVENTIONAL_DESIGNS:
        cam = _conventional(name, scale=scale, **CONVENTIONAL_DESIGNS[name])
    elif name == 'focused-keplerian':
        cam = _focused('focused-keplerian', scale=scale, galilean=False)
    elif name == 'focused-galilean':
        cam = _focused('focused-galilean', scale=scale, galilean=True)
    elif name == 'focused-multifocus':
        cam = _multi_focus('focused-multifocus', scale=scale)
    else:
        raise InvalidInputError(f'unknown preset {name!r}; expected one of {PRESETS}')
    return apply_overrides(cam, **overrides)


def apply_overrides(camera, **overrides):
    """Return ``camera`` with fields replaced; ``part__field`` keys reach into a part."""
    parts = {}
    top = {}
    for key, value in overrides.items():
        if '__' in key:
            part, field_name = key.split('__', 1)
            if part not in ('main_lens', 'mla', 'sensor'):
                raise InvalidInputError(
                    f'override {key!r}: part must be main_lens, mla or sensor, got {part!r}')
            parts.setdefault(part, {})[field_name] = value
        else:
            top[key] = value
    try:
        for part, changes in parts.items():
            top[part] = replace(getattr(camera, part), **changes)
        return replace(camera, **top) if top else camera
    except TypeError as exc:
        raise InvalidInputError(f'bad camera override: {exc}') from None


def default_board(camera):
    """
    A checkerboard (with margin) about 0.55 of the field of view across at scene_distance.

    Squares span at least about 7 micro-images (so sub-aperture views keep a few pixels per
    square; focused cameras: about 60 raw pixels, 20 pixels of the image rendered from the
    micro-images); between 3 x 3 and 9 x 6 inner corners (OpenCV's detectors refuse fewer than
    3 a side: a short view gets smaller squares instead).
    """
    w, h = camera.field_of_view(camera.scene_distance)
    lenses = camera.sensor.width / camera.micro_image_pitch
    squares = int(np.clip(np.floor(0.5 * lenses / 7.0), 4, 10))
    if camera.camera_type == 'focused':   # the rendered image has ~1/3 of the raw pixels
        squares = int(np.clip(np.floor(0.5 * camera.sensor.width / 60.0), 4, 10))
    square = 0.55 * w / (squares + 2)            # + a one-square margin on each side
    rows = int(np.clip(np.floor(0.55 * h / square) - 2, 4, 7))
    square = min(square, 0.55 * h / (rows + 2))
    return Checkerboard(squares - 1, rows - 1, float(square))


def _lattice_points(q0, r, c, k, l_):
    """Points (N, 2) q0 + k r + l c of the image lattice (Camera.image_lattice) at row
    positions k (N,) (hex rows' half shift included) and rows l (N,)."""
    return np.column_stack([q0[0] + k * r[0] + l_ * c[0], q0[1] + k * r[1] + l_ * c[1]])
