"""
Scenes of textured planes (and the board) with the ground-truth depth of the central view.

Public API::

    plane = TexturedPlane(rvec, tvec, width, height, feature, seed=0)
    scene = Scene(surfaces=(plane, ..., BoardSurface(board, rvec, tvec)), background=0.35)
    planes_scene(camera, rng, *, board=None) -> Scene     # the ``simulate --scene planes`` scene
    focused_planes_scene(camera, rng) -> (Scene, w_c)  # the focused presets' planes scene
    inverse_virtual_depth(model, z) -> w_P             # a focused camera's w of MPC depth z
    strips_scene(camera, depths, *, seed=0) -> Scene      # fronto-parallel strips, one per depth
    depth_truth(camera, scene) -> (rows, cols) float32    # metres along the optical axis

A surface is a finite planar rectangle posed like a board: (rvec, tvec) map its plane frame
(x, y in the plane, z along its normal) to the MPC (optical) camera frame, the frame of the
ground truth (:mod:`lf_mpc_calib.simulation.optics`). Its reflectance is ``shade(x, y)`` on its
``extent()`` rectangle. The renderer (:func:`lf_mpc_calib.simulation.render.render_scene`)
takes the nearest surface along each ray and the scene's ``background`` where none is hit.

Texture: band-limited noise (white noise blurred by a Gaussian of ``feature`` metres, one
texel = feature / 4), rescaled to reflectances 0.15-0.85, sampled bilinearly; the seed fixes
it. With ``feature`` about two view pixels at the plane's distance the sub-aperture views
resolve it (:func:`planes_scene` does that).

Ground truth (:func:`depth_truth`): the ray of rectified central-view pixel (u, v) of the
camera's exact MPC model (NOTES §1: s = t = 0, direction (k_u u + u_0, k_v v + v_0, 1)) meets
the nearest surface at Z (metres along the optical axis); NaN where it meets none. The
rectified central view equals the decoded one when the model has no radial distortion
(k_1 = k_2 = 0), the case of every preset without ``main_lens__distortion``.
"""

from dataclasses import dataclass
import math

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.simulation.optics import Camera, Checkerboard

_TEXELS_PER_FEATURE = 4.0
_MAX_TEXELS = 4096


def _pose(rvec, tvec):
    r = np.asarray(rvec, dtype=float)
    t = np.asarray(tvec, dtype=float)
    if r.shape != (3,) or t.shape != (3,) or not (np.all(np.isfinite(r))
                                                  and np.all(np.isfinite(t))):
        raise InvalidInputError(f'rvec and tvec must be 3 finite numbers each, got shapes '
                                f'{r.shape}, {t.shape}')
    return r, t


@dataclass(frozen=True, eq=False)
class TexturedPlane:
    """
    A textured rectangle width x height metres, x in [0, width], y in [0, height].

    rvec (3,), tvec (3,): plane frame -> MPC camera frame (like a board pose); feature
    (metres): the scale of the texture (Gaussian blur of the noise); seed: of the noise.
    """

    rvec: np.ndarray
    tvec: np.ndarray
    width: float
    height: float
    feature: float
    seed: int = 0

    def __post_init__(self):
        r, t = _pose(self.rvec, self.tvec)
        object.__setattr__(self, 'rvec', r)
        object.__setattr__(self, 'tvec', t)
        for name in ('width', 'height', 'feature'):
            v = float(getattr(self, name))
            if not (np.isfinite(v) and v > 0):
                raise InvalidInputError(f'{name} must be a positive length (m), got {v!r}')
            object.__setattr__(self, name, v)
        texel = self.feature / _TEXELS_PER_FEATURE
        nx = int(math.ceil(self.width / texel)) + 2
        ny = int(math.ceil(self.height / texel)) + 2
        if max(nx, ny) > _MAX_TEXELS:
            raise InvalidInputError(
                f'texture of {nx} x {ny} texels exceeds {_MAX_TEXELS}: feature {self.feature} m '
                f'is too fine for a {self.width} x {self.height} m plane')
        rng = np.random.default_rng(self.seed)
        noise = rng.standard_normal((ny, nx)).astype(np.float32)
        tex = cv2.GaussianBlur(noise, (0, 0), _TEXELS_PER_FEATURE / 2.0,
                               borderType=cv2.BORDER_REFLECT)
        lo, hi = np.percentile(tex, [1, 99])
        tex = np.clip(0.15 + 0.7 * (tex - lo) / max(hi - lo, 1e-12), 0.05, 0.95)
        object.__setattr__(self, '_texture', tex.astype(np.float32))
        object.__setattr__(self, '_texel', texel)

    def extent(self):
        """Plane-frame rectangle (x_min, y_min, x_max, y_max) in metres."""
        return 0.0, 0.0, self.width, self.height

    def shade(self, x, y):
        """Plane-frame coordinates (N,) (N,) metres -> (N,) reflectance (bilinear texels)."""
        inv = 1.0 / self._texel
        mx = np.ascontiguousarray((np.asarray(x, float) * inv + 0.5).astype(np.float32))
        my = np.ascontiguousarray((np.asarray(y, float) * inv + 0.5).astype(np.float32))
        out = cv2.remap(self._texture, mx.reshape(-1, 1), my.reshape(-1, 1), cv2.INTER_LINEAR,
                        borderMode=cv2.BORDER_REFLECT)
        return out.ravel().astype(float)

    def to_dict(self):
        """Plain mapping for a dataset manifest."""
        return {'type': 'textured_plane', 'rotation_vector': self.rvec.tolist(),
                'translation_m': self.tvec.tolist(), 'width_m': self.width,
                'height_m': self.height, 'feature_m': self.feature, 'seed': int(self.seed)}


@dataclass(frozen=True, eq=False)
class BoardSurface:
    """A checkerboard (with its margin) at pose (rvec, tvec), board -> MPC camera frame."""

    board: Checkerboard
    rvec: np.ndarray
    tvec: np.ndarray

    def __post_init__(self):
        if not isinstance(self.board, Checkerboard):
            raise InvalidInputError(f'board must be a simulation.optics.Checkerboard, got '
                                    f'{type(self.board).__name__}')
        r, t = _pose(self.rvec, self.tvec)
        object.__setattr__(self, 'rvec', r)
        object.__setattr__(self, 'tvec', t)

    def extent(self):
        """Board-frame rectangle of the board with its margin."""
        return self.board.extent()

    def shade(self, x, y):
        """Board-frame coordinates (N,) (N,) -> (N,) reflectance."""
        return self.board.shade(x, y)

    def to_dict(self):
        """Plain mapping for a dataset manifest."""
        return {'type': 'board', 'rotation_vector': self.rvec.tolist(),
                'translation_m': self.tvec.tolist(), **self.board.to_dict()}


@dataclass(frozen=True, eq=False)
class Scene:
    """Surfaces (TexturedPlane | BoardSurface, ...) and the background level where none is hit."""

    surfaces: tuple
    background: float = 0.35

    def __post_init__(self):
        s = tuple(self.surfaces)
        if not s:
            raise InvalidInputError('a scene needs at least one surface')
        for n, x in enumerate(s):
            if not isinstance(x, (TexturedPlane, BoardSurface)):
                raise InvalidInputError(f'surfaces[{n}] must be a TexturedPlane or '
                                        f'BoardSurface, got {type(x).__name__}')
        object.__setattr__(self, 'surfaces', s)
        b = float(self.background)
        if not 0.0 <= b <= 1.0:
            raise InvalidInputError(f'background must be a level in [0, 1], got {b}')
        object.__setattr__(self, 'background', b)

    @property
    def board(self):
        """The first BoardSurface, or None."""
        return next((s for s in self.surfaces if isinstance(s, BoardSurface)), None)

    def to_dict(self):
        """Plain mapping for a dataset manifest."""
        return {'background': self.background, 'surfaces': [s.to_dict() for s in self.surfaces]}


def surface_hits(surfaces, poses, origins, directions):
    """
    Nearest surface along rays: (index (N,) int, -1 for none; lam (N,); x (N,); y (N,)).

    surfaces: sequence of surfaces; poses: their (R (3, 3), t (3,)) plane -> ray frame;
    origins (N, 3) and directions (N, 3) as component tuples (ox, oy, oz), (dx, dy, dz) of
    (N,) arrays; a ray is origin + lam direction with lam > 0; x, y: plane coordinates of the
    hit on the chosen surface.
    """
    ox, oy, oz = origins
    dx, dy, dz = directions
    n = np.shape(ox)[0]
    best = np.full(n, np.inf)
    index = np.full(n, -1, dtype=np.int64)
    bx = np.zeros(n)
    by = np.zeros(n)
    for k, (surf, (rmat, t)) in enumerate(zip(surfaces, poses)):
        nx, ny, nz = rmat[:, 2]
        n_t = float(rmat[:, 2] @ t)
        denom = nx * dx + ny * dy + nz * dz
        with np.errstate(divide='ignore', invalid='ignore'):
            lam = (n_t - nx * ox - ny * oy - nz * oz) / denom
        px, py, pz = ox + lam * dx - t[0], oy + lam * dy - t[1], oz + lam * dz - t[2]
        r0, r1 = rmat[:, 0], rmat[:, 1]
        x = r0[0] * px + r0[1] * py + r0[2] * pz
        y = r1[0] * px + r1[1] * py + r1[2] * pz
        x0, y0, x1, y1 = surf.extent()
        hit = np.isfinite(lam) & (lam > 0) & (lam < best) & (x >= x0) & (x <= x1) \
            & (y >= y0) & (y <= y1)
        best = np.where(hit, lam, best)
        index[hit] = k
        bx = np.where(hit, x, bx)
        by = np.where(hit, y, by)
    return index, best, bx, by


def surface_poses(scene, rm=None, tm=None):
    """(R (3, 3), t (3,)) plane -> frame of each surface; (rm, tm) maps MPC to that frame."""
    out = []
    for s in scene.surfaces:
        r = Rotation.from_rotvec(s.rvec).as_matrix()
        t = s.tvec
        if rm is not None:
            r, t = rm @ r, rm @ t + tm
        out.append((r, t))
    return out


def depth_truth(camera, scene):
    """
    Ground-truth depth (rows, cols) float32 of the rectified central view, metres along z.

    rows, cols = the view size of ``camera.lenslet_grid()``; NaN where the central-view ray of
    the exact model meets no surface (module docstring).
    """
    if not isinstance(camera, Camera) or camera.camera_type != 'conventional':
        raise InvalidInputError('depth_truth needs a conventional simulation.optics.Camera')
    if not isinstance(scene, Scene):
        raise InvalidInputError(f'scene must be a Scene, got {type(scene).__name__}')
    grid = camera.lenslet_grid()
    model = camera.ground_truth_model(grid)
    cols, rows = grid.shape
    v, u = np.mgrid[0:rows, 0:cols].astype(float)
    xu = (model.k_u * u + model.u_0).ravel()
    yu = (model.k_v * v + model.v_0).ravel()
    zeros = np.zeros(xu.size)
    index, lam, _, _ = surface_hits(scene.surfaces, surface_poses(scene),
                                    (zeros, zeros, zeros), (xu, yu, np.ones(xu.size)))
    depth = np.where(index >= 0, lam, np.nan)       # direction has z = 1: lam is Z
    return depth.reshape(rows, cols).astype(np.float32)


def _fronto(camera, centre_xy, depth, width, height, feature, seed, tilt=(0.0, 0.0)):
    """A plane of width x height centred at (x, y, depth) (metres), tilted about x then y."""
    r = Rotation.from_euler('yx', [tilt[1], tilt[0]])
    rmat = r.as_matrix()
    centre = np.array([centre_xy[0], centre_xy[1], depth])
    t = centre - rmat @ np.array([width / 2.0, height / 2.0, 0.0])
    return TexturedPlane(r.as_rotvec(), t, width, height, feature, seed)


def view_pixel_size(camera, distance):
    """Size (m) of one view pixel (one micro-lens) on a fronto-parallel plane at ``distance``."""
    return camera.mla.pitch * distance / camera.D


def planes_scene(camera, rng, *, board=None, features_px=2.0):
    """
    The ``simulate --scene planes`` scene of one frame, drawn with ``rng``.

    Depths relative to the focus distance Z_f (``camera.main_lens.focus_distance``): a
    textured back wall at 1.6-1.9 Z_f filling the view, a plane slanted by 25-40 degrees about
    the vertical axis spanning about 0.8-1.3 Z_f, a small near plane at 0.55-0.7 Z_f, and the
    board (if given; roughly fronto-parallel at 0.9-1.1 Z_f, a quarter of the view). Texture
    features are ``features_px`` view pixels at each plane's distance.
    """
    z_f = camera.main_lens.focus_distance
    if not (math.isfinite(z_f) and z_f > 0):
        raise InvalidInputError(f'planes_scene needs a camera focused at a finite distance, '
                                f'got {z_f}')

    def feat(z):
        return features_px * view_pixel_size(camera, z)

    seeds = rng.integers(0, 2**31 - 1, 4)
    surfaces = []
    z_near = z_f * rng.uniform(0.55, 0.7)
    w, h = camera.field_of_view(z_near)
    surfaces.append(_fronto(camera, (-0.22 * w, 0.2 * h), z_near, 0.3 * w, 0.3 * h,
                            feat(z_near), int(seeds[0])))
    if board is not None:
        z_b = z_f * rng.uniform(0.9, 1.1)
        w, h = camera.field_of_view(z_b)
        tilt = np.radians(rng.uniform(-10, 10, 3))
        rmat = Rotation.from_euler('zyx', tilt).as_matrix()
        centre = np.array([(board.cols - 1) * board.square / 2,
                           (board.rows - 1) * board.square / 2, 0.0])
        t = np.array([0.22 * w, -0.22 * h, z_b]) - rmat @ centre
        surfaces.append(BoardSurface(board, Rotation.from_matrix(rmat).as_rotvec(), t))
    z_mid = z_f * rng.uniform(0.95, 1.1)
    angle = math.radians(rng.uniform(25, 40)) * rng.choice([-1.0, 1.0])
    w, h = camera.field_of_view(z_mid)
    surfaces.append(_fronto(camera, (0.0, 0.0), z_mid, 0.7 * w, 0.8 * h, feat(z_mid),
                            int(seeds[1]), tilt=(0.0, angle)))
    z_back = z_f * rng.uniform(1.6, 1.9)
    w, h = camera.field_of_view(z_back)
    surfaces.append(_fronto(camera, (0.0, 0.0), z_back, 1.3 * w, 1.3 * h, feat(z_back),
                            int(seeds[2])))
    return Scene(tuple(surfaces))


def inverse_virtual_depth(model, z):
    """Inverse virtual depth w_P = -k_i (1 / Z + k_3) / k_u of MPC-frame depth ``z`` (m) in a
    focused camera's ``model`` (Eq. 11, 18)."""
    return -model.k_i * (1.0 / np.asarray(z, float) + model.k_3) / model.k_u


def _check_focused_side(camera, z_f, mpc_depths, w_c):
    """Refuse planes (MPC-frame depths, m) within 25 % of the plane conjugate to the
    micro-lenses (camera-frame Z_f) or on its side where they do not focus."""
    z = np.asarray(mpc_depths, float) + z_f
    keplerian = camera.main_lens.inverse_focus * camera.scene_distance > 1.0
    ok = np.all(z >= 1.25 * z_f) if keplerian else np.all((z > 0) & (z <= 0.75 * z_f))
    if not ok:
        side = 'beyond 1.25' if keplerian else 'before 0.75'
        raise InvalidInputError(
            f'focused planes scene: planes at {z.min():.3f}-{z.max():.3f} m from the main lens '
            f'(inverse virtual depth {w_c:+.3f} +-0.05 around the scene distance '
            f'{camera.scene_distance:.3f} m) are not {side} x {z_f:.3f} m (the plane conjugate '
            'to the micro-lenses), where they focus; choose another scene distance')


def focused_planes_scene(camera, rng, *, features_px=7.0):
    """
    The ``simulate --preset focused-* --scene planes`` scene of one frame, drawn with ``rng``,
    and the inverse virtual depth w_c its planes are placed around (the scene distance's,
    rounded to 0.005: the w the rendered image and its depth truth use).

    MPC-frame depths (the frame the surfaces are in: Z counts from the plane conjugate to the
    micro-lenses, Z_f = 1 / k_3 in front of the main lens) chosen by their inverse virtual depth
    w (the micro-images' disparity), w_c that of the scene distance (camera frame, from the main
    lens); w grows towards the camera on either side of Z_f. A textured back wall at
    w_c - 0.01..0.02 filling the view (farther, the depth resolution of a Keplerian camera falls
    fast), a plane slanted by 20-30 degrees about the vertical axis around w_c + 0.02, and a
    near plane at w_c + 0.04..0.05 (a quarter of the view); all within 0.06 of w_c, the window
    the depth searches around the rendered w. Texture features are ``features_px`` raw pixels in
    the micro-images at w_c. Refuses a camera whose planes would come within 25 % of Z_f or on
    the side of it where the micro-lenses do not focus (Keplerian: beyond it, Galilean: before).
    """
    model = camera.ground_truth_model()
    z_f = 1.0 / model.k_3       # MPC-frame Z = camera-frame Z - Z_f (k_3 = k_4 = 1 / Z_f)
    w_c = round(float(inverse_virtual_depth(model, camera.scene_distance - z_f)) / 0.005) * 0.005

    def depth(w):
        return 1.0 / (-w * model.k_u / model.k_i - model.k_3)

    def feat(z):        # a view pixel spans |w| micro-image pitches; z: MPC frame
        pitches = camera.micro_image_pitch * abs(w_c)
        return features_px / pitches * view_pixel_size(camera, z + z_f)

    seeds = rng.integers(0, 2**31 - 1, 3)
    z_back = depth(w_c - rng.uniform(0.01, 0.02))
    z_mid = depth(w_c + 0.02)
    z_near = depth(w_c + rng.uniform(0.04, 0.05))
    _check_focused_side(camera, z_f, [depth(w_c - 0.02), depth(w_c + 0.05)], w_c)
    surfaces = []
    w, h = camera.field_of_view(z_near + z_f)   # from the main lens
    surfaces.append(_fronto(camera, (0.25 * w, -0.22 * h), z_near, 0.35 * w, 0.35 * h,
                            feat(z_near), int(seeds[0])))
    angle = math.radians(rng.uniform(20, 30)) * rng.choice([-1.0, 1.0])
    w, h = camera.field_of_view(z_mid + z_f)   # from the main lens
    surfaces.append(_fronto(camera, (-0.2 * w, 0.0), z_mid, 0.4 * w, 0.8 * h, feat(z_mid),
                            int(seeds[1]), tilt=(0.0, angle)))
    w, h = camera.field_of_view(z_back + z_f)   # from the main lens
    surfaces.append(_fronto(camera, (0.0, 0.0), z_back, 1.4 * w, 1.4 * h, feat(z_back),
                            int(seeds[2])))
    return Scene(tuple(surfaces)), w_c


def strips_scene(camera, depths, *, seed=0, features_px=2.0):
    """
    Fronto-parallel textured strips side by side, one per depth in ``depths`` (metres).

    Strip k covers the k-th of len(depths) equal column bands of the view, each as tall as the
    view; used to measure depth error against depth in one frame.
    """
    d = np.asarray(depths, dtype=float).ravel()
    if d.size == 0 or not np.all(np.isfinite(d) & (d > 0)):
        raise InvalidInputError(f'depths must be positive finite metres, got {depths!r}')
    n = d.size
    surfaces = []
    for k, z in enumerate(d):
        w, h = camera.field_of_view(z)
        band = w / n
        x_c = -0.5 * w + (k + 0.5) * band
        surfaces.append(_fronto(camera, (x_c, 0.0), z, band * 1.001, 1.2 * h,
                                features_px * view_pixel_size(camera, z), seed + k))
    return Scene(tuple(surfaces))


__all__ = ['BoardSurface', 'Scene', 'TexturedPlane', 'depth_truth', 'focused_planes_scene',
           'inverse_virtual_depth', 'planes_scene',
           'strips_scene', 'surface_hits', 'surface_poses', 'view_pixel_size']
